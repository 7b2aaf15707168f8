//! Multicast groups (`ibv_attach_mcast`, `ibv_detach_mcast`): which UD queue pairs are
//! attached to which group, within the device's limits, and the host's membership of the
//! IP group while any queue pair of the device is attached to it.
//!
//! The checks are the kernel's (`ib_uverbs_attach_mcast`, `ib_attach_mcast`): `EINVAL` for
//! a QP that is not UD or a GID that is not multicast, success for a group the QP is
//! attached to already, `EINVAL` for a detach of a group it is not attached to; `ENOMEM`
//! past `max_mcast_grp`, `max_mcast_qp_attach` or `max_total_mcast_qp_attach` (rxe's
//! limits, which the library reports). The poller that owns the QP then delivers each
//! packet for the multicast QP to that group's GID to it (the transport's
//! `Endpoint::attach_mcast`). A QP that is destroyed, or whose application goes away,
//! leaves its groups.

use verbs_shm::contract::{MAX_MCAST_GRP, MAX_MCAST_QP_ATTACH, MAX_TOTAL_MCAST_QP_ATTACH};
use verbs_shm::protocol::Reply;
use xroce_transport::QpType;
use xroce_wire::Gid;

use super::{Control, Refusal};
use crate::poller::Command;

impl Control {
    /// `ibv_attach_mcast`.
    pub(super) fn attach_mcast(&mut self, id: u64, qp: u32, gid: Gid) -> Result<Reply, Refusal> {
        let c = self.registry.conn(id);
        let poller = c.poller;
        let info = c
            .qps
            .get(&qp)
            .ok_or_else(|| Refusal::invalid("no such queue pair"))?;
        if info.qp_type != QpType::Ud {
            return Err(Refusal::invalid(
                "only a UD queue pair joins a multicast group",
            ));
        }
        if !gid.is_multicast() {
            return Err(Refusal::invalid(format!("{gid} is not a multicast GID")));
        }
        if info.groups.contains(&gid) {
            return Ok(Reply::Done);
        }
        let qpn = info.qpn;
        let members = self.registry.groups.get(&gid).copied().unwrap_or(0);
        let total: u32 = self.registry.groups.values().sum();
        if members == 0 && self.registry.groups.len() >= MAX_MCAST_GRP as usize {
            return Err(Refusal::new(
                libc::ENOMEM,
                format!("the device has {MAX_MCAST_GRP} multicast groups (max_mcast_grp)"),
            ));
        }
        if members >= MAX_MCAST_QP_ATTACH {
            return Err(Refusal::new(
                libc::ENOMEM,
                format!(
                    "{gid} has {MAX_MCAST_QP_ATTACH} queue pairs attached (max_mcast_qp_attach)"
                ),
            ));
        }
        if total >= MAX_TOTAL_MCAST_QP_ATTACH {
            return Err(Refusal::new(
                libc::ENOMEM,
                format!(
                    "the device has {MAX_TOTAL_MCAST_QP_ATTACH} multicast attachments \
                     (max_total_mcast_qp_attach)"
                ),
            ));
        }
        if members == 0 {
            self.host.join_group(gid).map_err(|e| {
                Refusal::new(
                    e.raw_os_error().unwrap_or(libc::EIO),
                    format!("the interface cannot join the group of {gid}: {e}"),
                )
            })?;
        }
        let attached = self
            .ask(poller, |tx| Command::Mcast(qpn, gid, true, tx))
            .and_then(|r| r.map_err(Refusal::invalid));
        if let Err(e) = attached {
            if members == 0 {
                self.host.leave_group(gid);
            }
            return Err(e);
        }
        *self.registry.groups.entry(gid).or_default() += 1;
        if let Some(info) = self.registry.conn_mut(id).qps.get_mut(&qp) {
            info.groups.push(gid);
        }
        Ok(Reply::Done)
    }

    /// `ibv_detach_mcast`.
    pub(super) fn detach_mcast(&mut self, id: u64, qp: u32, gid: Gid) -> Result<Reply, Refusal> {
        let c = self.registry.conn_mut(id);
        let poller = c.poller;
        let info = c
            .qps
            .get_mut(&qp)
            .ok_or_else(|| Refusal::invalid("no such queue pair"))?;
        if info.qp_type != QpType::Ud || !gid.is_multicast() {
            return Err(Refusal::invalid(format!(
                "{gid} is not a multicast group of a UD queue pair"
            )));
        }
        let Some(at) = info.groups.iter().position(|g| *g == gid) else {
            return Err(Refusal::invalid(format!(
                "the queue pair is not attached to {gid}"
            )));
        };
        info.groups.swap_remove(at);
        let qpn = info.qpn;
        // The poller's answer can only be that it was attached, or that it stopped: the
        // group is left here either way.
        let _ = self.ask(poller, |tx| Command::Mcast(qpn, gid, false, tx));
        self.leave_groups(&[gid]);
        Ok(Reply::Done)
    }

    /// One queue pair fewer in each of `groups`; the interface leaves a group that has
    /// none left.
    pub(super) fn leave_groups(&mut self, groups: &[Gid]) {
        for gid in groups {
            let Some(members) = self.registry.groups.get_mut(gid) else {
                continue;
            };
            *members -= 1;
            if *members == 0 {
                self.registry.groups.remove(gid);
                self.host.leave_group(*gid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::sync::{Arc, Mutex};

    use verbs_shm::protocol::Request;

    use super::*;
    use crate::control::AppLimits;
    use crate::control::fake::{FakeHost, Fixture, refused};

    fn group(last: u8) -> Gid {
        Gid::from_ipv4(Ipv4Addr::new(230, 77, 0, last))
    }

    fn attach(qp: u32, gid: Gid) -> Request {
        Request::AttachMcast { qp, gid: gid.0 }
    }

    fn detach(qp: u32, gid: Gid) -> Request {
        Request::DetachMcast { qp, gid: gid.0 }
    }

    /// The host's joins (`true`) and leaves, in order.
    type Joins = Arc<Mutex<Vec<(bool, Gid)>>>;

    /// A fixture whose host's joins and leaves can be read.
    fn fixture() -> (Fixture, Joins) {
        let host = FakeHost::default();
        let groups = host.groups.clone();
        (Fixture::with(AppLimits::default(), host), groups)
    }

    /// The multicast commands the poller received since `from`: (QPN, GID, attach).
    fn mcast_commands(fx: &Fixture, from: usize) -> Vec<(u32, Gid, bool)> {
        fx.poller.state().commands[from..]
            .iter()
            .filter_map(|c| match c {
                Command::Mcast(qpn, gid, attach, _) => Some((qpn.value(), *gid, *attach)),
                _ => None,
            })
            .collect()
    }

    /// The gauges `xroced stat` shows: (`mcast_groups`, `mcast_attachments`).
    fn gauges(fx: &mut Fixture) -> (u64, u64) {
        let Ok(Reply::Stats { counters }) = fx.ask(Request::Stats) else {
            panic!("no statistics");
        };
        let value = |name: &str| {
            let found = counters.iter().find(|(n, _)| n == name);
            found.map(|c| c.1).expect(name)
        };
        (value("mcast_groups"), value("mcast_attachments"))
    }

    #[test]
    fn the_interface_is_a_member_while_a_queue_pair_is_attached() {
        let (mut fx, joins) = fixture();
        let (pd, cq) = (fx.pd(), fx.cq());
        let (q1, n1) = fx.ud_qp(pd, cq);
        let (q2, n2) = fx.ud_qp(pd, cq);
        let from = fx.commands();
        assert_eq!(fx.ask(attach(q1, group(1))), Ok(Reply::Done));
        assert_eq!(fx.ask(attach(q2, group(1))), Ok(Reply::Done));
        // Attached already: no error, and nothing more for the poller.
        assert_eq!(fx.ask(attach(q1, group(1))), Ok(Reply::Done));
        assert_eq!(
            mcast_commands(&fx, from),
            [(n1, group(1), true), (n2, group(1), true)]
        );
        assert_eq!(*joins.lock().unwrap(), [(true, group(1))], "one join");
        assert_eq!(gauges(&mut fx), (1, 2));
        assert_eq!(fx.ask(detach(q1, group(1))), Ok(Reply::Done));
        assert_eq!(joins.lock().unwrap().len(), 1, "q2 is still attached");
        assert_eq!(gauges(&mut fx), (1, 1));
        assert_eq!(fx.ask(detach(q2, group(1))), Ok(Reply::Done));
        assert_eq!(
            *joins.lock().unwrap(),
            [(true, group(1)), (false, group(1))]
        );
        assert_eq!(
            mcast_commands(&fx, from)[2..],
            [(n1, group(1), false), (n2, group(1), false)]
        );
        assert!(fx.control.registry.groups.is_empty());
        assert_eq!(gauges(&mut fx), (0, 0));
    }

    #[test]
    fn attach_and_detach_are_checked_as_the_kernel_checks_them() {
        let (mut fx, joins) = fixture();
        let (pd, cq) = (fx.pd(), fx.cq());
        let rc = fx.qp(pd, cq);
        let (ud, _) = fx.ud_qp(pd, cq);
        let from = fx.commands();
        refused(
            fx.ask(attach(rc, group(1))),
            libc::EINVAL,
            "only a UD queue pair",
        );
        let unicast = Gid::from_ipv4(Ipv4Addr::new(10, 77, 0, 1));
        refused(
            fx.ask(attach(ud, unicast)),
            libc::EINVAL,
            "not a multicast GID",
        );
        refused(
            fx.ask(attach(0xdead, group(1))),
            libc::EINVAL,
            "no such queue pair",
        );
        refused(
            fx.ask(detach(ud, group(1))),
            libc::EINVAL,
            "not attached to ::ffff:230.77.0.1",
        );
        refused(fx.ask(detach(rc, group(1))), libc::EINVAL, "UD queue pair");
        assert_eq!(mcast_commands(&fx, from), []);
        assert!(joins.lock().unwrap().is_empty());
        // An IPv6 group is a group too.
        let v6 = Gid::from_ipv6("ff0e::77".parse().unwrap());
        assert_eq!(fx.ask(attach(ud, v6)), Ok(Reply::Done));
        assert_eq!(*joins.lock().unwrap(), [(true, v6)]);
    }

    #[test]
    fn a_group_the_interface_cannot_join_is_refused_with_its_error() {
        let host = FakeHost {
            refuse_groups: vec![group(9)],
            ..FakeHost::default()
        };
        let mut fx = Fixture::with(AppLimits::default(), host);
        let (pd, cq) = (fx.pd(), fx.cq());
        let (ud, _) = fx.ud_qp(pd, cq);
        let from = fx.commands();
        refused(fx.ask(attach(ud, group(9))), libc::ENOBUFS, "cannot join");
        assert_eq!(mcast_commands(&fx, from), []);
        assert!(fx.control.registry.groups.is_empty());
    }

    #[test]
    fn a_destroyed_queue_pair_and_a_departed_application_leave_their_groups() {
        let (mut fx, joins) = fixture();
        let (pd, cq) = (fx.pd(), fx.cq());
        let (q1, _) = fx.ud_qp(pd, cq);
        let (q2, _) = fx.ud_qp(pd, cq);
        fx.ask(attach(q1, group(1))).unwrap();
        fx.ask(attach(q1, group(2))).unwrap();
        fx.ask(attach(q2, group(2))).unwrap();
        fx.ask(Request::DestroyQp { qp: q1 }).unwrap();
        assert_eq!(
            *joins.lock().unwrap(),
            [(true, group(1)), (true, group(2)), (false, group(1))]
        );
        assert_eq!(fx.control.registry.groups.get(&group(2)), Some(&1));
        // The application goes away: q2's group goes with it.
        let (_, app) = Fixture::connect(&mut fx.control);
        drop(std::mem::replace(&mut fx.app, app));
        fx.control.on_ready(fx.id);
        assert_eq!(joins.lock().unwrap().last(), Some(&(false, group(2))));
        assert!(fx.control.registry.groups.is_empty());
    }

    #[test]
    fn a_group_holds_at_most_max_mcast_qp_attach_queue_pairs() {
        let limits = AppLimits {
            max_qps: 100,
            ..AppLimits::default()
        };
        let mut fx = Fixture::with(limits, FakeHost::default());
        let (pd, cq) = (fx.pd(), fx.cq());
        for _ in 0..MAX_MCAST_QP_ATTACH {
            let (qp, _) = fx.ud_qp(pd, cq);
            assert_eq!(fx.ask(attach(qp, group(1))), Ok(Reply::Done));
        }
        let (qp, _) = fx.ud_qp(pd, cq);
        refused(
            fx.ask(attach(qp, group(1))),
            libc::ENOMEM,
            "max_mcast_qp_attach",
        );
        assert_eq!(fx.ask(attach(qp, group(2))), Ok(Reply::Done));
    }
}
