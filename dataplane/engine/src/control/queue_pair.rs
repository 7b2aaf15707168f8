//! Queue pairs: creation with their rings, modification (with the path to the
//! destination), query and destruction.

use verbs_shm::contract::{self, RecvWqe, SendWqe, ring_bytes};
use verbs_shm::protocol::{self, QpCaps, Reply, Request};
use verbs_shm::ring::Ring;
use xroce_transport::{AttrMask, Limits, PdId, QpConfig, SrqId};

use super::convert::{qp_attr_from_protocol, qp_attr_to_protocol, qp_type, transport_caps};
use super::registry::{Object, QpInfo};
use super::{Answer, CONTROLLED_QKEY, Control, MAX_QUEUE, MAX_RD_ATOMIC, Refusal};
use crate::poller::{Command, QpSetup};

/// Capacities within what the daemon supports.
fn check_caps(caps: &QpCaps) -> Result<(), Refusal> {
    if caps.max_send_wr > MAX_QUEUE || caps.max_recv_wr > MAX_QUEUE {
        return Err(Refusal::invalid(format!(
            "queues hold at most {MAX_QUEUE} work requests"
        )));
    }
    if caps.max_send_sge as usize > contract::MAX_SGE
        || caps.max_recv_sge as usize > contract::MAX_SGE
    {
        return Err(Refusal::invalid(format!(
            "at most {} scatter/gather elements",
            contract::MAX_SGE
        )));
    }
    if caps.max_inline_data as usize > contract::MAX_INLINE {
        return Err(Refusal::invalid(format!(
            "at most {} bytes of inline data",
            contract::MAX_INLINE
        )));
    }
    Ok(())
}

/// Where a QP's rings lie in its shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RingLayout {
    sq_entries: u32,
    /// None with an SRQ.
    rq_entries: u32,
    /// The receive ring's offset: the page after the send ring.
    rq_offset: usize,
    /// Both rings.
    len: usize,
}

impl RingLayout {
    fn new(caps: &QpCaps, srq: bool) -> RingLayout {
        let sq_entries = caps.max_send_wr.max(1).next_power_of_two();
        let rq_entries = if srq {
            0
        } else {
            caps.max_recv_wr.max(1).next_power_of_two()
        };
        let sq_len = ring_bytes(sq_entries, size_of::<SendWqe>());
        let rq_offset = sq_len.div_ceil(4096) * 4096;
        let rq_len = if rq_entries > 0 {
            ring_bytes(rq_entries, size_of::<RecvWqe>())
        } else {
            0
        };
        RingLayout {
            sq_entries,
            rq_entries,
            rq_offset,
            len: rq_offset + rq_len,
        }
    }

    /// What the QP is granted for what it asked. A send entry has room for the larger of
    /// its scatter/gather list and its inline data, and each grows to fill it, as rxe
    /// sizes its send queue (`rxe_qp_init_req`): one element asked for brings 16 bytes of
    /// inline data, which programs written on rxe use without asking (rdma_xclient).
    fn granted(&self, caps: &QpCaps, srq: bool) -> QpCaps {
        let sge = size_of::<contract::Sge>();
        let entry = (caps.max_send_sge.max(1) as usize * sge)
            .max(caps.max_inline_data as usize)
            .min(contract::MAX_INLINE);
        QpCaps {
            max_send_wr: self.sq_entries,
            max_recv_wr: self.rq_entries,
            max_send_sge: (entry / sge) as u32,
            max_recv_sge: if srq { 0 } else { caps.max_recv_sge.max(1) },
            max_inline_data: entry as u32,
        }
    }
}

impl Control {
    /// `ibv_create_qp`: the QP starts in RESET on the application's poller.
    pub(super) fn create_qp(&mut self, id: u64, request: Request) -> Result<Answer, Refusal> {
        let Request::CreateQp {
            pd,
            qp_type: raw_type,
            send_cq,
            recv_cq,
            srq,
            caps,
            sq_sig_all,
        } = request
        else {
            return Err(Refusal::invalid("not a creation of a queue pair"));
        };
        self.registry.room_for(id, Object::Qp)?;
        let c = self.registry.conn(id);
        c.pd(pd)?;
        if !c.cqs.contains(&send_cq) || !c.cqs.contains(&recv_cq) {
            return Err(Refusal::invalid("no such completion queue"));
        }
        if let Some(s) = srq {
            match c.srqs.get(&s) {
                Some(p) if p.0 == pd => {}
                Some(_) => {
                    return Err(Refusal::invalid(
                        "the SRQ belongs to another protection domain",
                    ));
                }
                None => return Err(Refusal::invalid("no such shared receive queue")),
            }
        }
        let qp_type = qp_type(raw_type)?;
        check_caps(&caps)?;
        let with_srq = srq.is_some();
        let layout = RingLayout::new(&caps, with_srq);
        let (fd, map) = self.ring_memory(id, "xroce-qp", layout.len)?;
        let sq = Ring::<SendWqe>::new(map.clone(), 0, layout.sq_entries)
            .map_err(|_| Refusal::invalid("bad send queue geometry"))?;
        let rq = if layout.rq_entries > 0 {
            let rq = Ring::<RecvWqe>::new(map, layout.rq_offset, layout.rq_entries)
                .map_err(|_| Refusal::invalid("bad receive queue geometry"))?;
            Some(rq)
        } else {
            None
        };
        let granted = layout.granted(&caps, with_srq);
        let c = self.registry.conn(id);
        let (events, poller) = (c.events()?, c.poller);
        let qpn = self.registry.qpn(poller);
        let handle = self.registry.handle();
        let active = self.host.port().active_mtu;
        let config = QpConfig {
            qpn,
            qp_type,
            pd: PdId(pd),
            caps: transport_caps(&granted),
            srq: srq.map(SrqId),
            sq_sig_all,
            limits: Limits {
                max_mtu: active,
                max_rd_atomic: MAX_RD_ATOMIC,
                ..Limits::default()
            },
        };
        let post_bit = self.registry.conn_mut(id).take_bit(handle);
        let bit = post_bit.as_ref().map(|b| b.bit);
        let setup = QpSetup {
            handle,
            config,
            sq,
            rq,
            send_cq,
            recv_cq,
            srq,
            events,
            post_bit,
        };
        if let Err(e) = self.ask(poller, |tx| Command::CreateQp(Box::new(setup), tx))? {
            self.registry.conn_mut(id).release_bit(handle);
            self.registry.release_qpn(qpn);
            return Err(Refusal::invalid(e));
        }
        self.registry.conn_mut(id).qps.insert(
            handle,
            QpInfo {
                qpn,
                caps: granted,
                pd,
                qp_type,
                groups: Vec::new(),
            },
        );
        let reply = Reply::Qp {
            qp: handle,
            qpn: qpn.value(),
            caps: granted,
            sq_entries: layout.sq_entries,
            rq_entries: layout.rq_entries,
            rq_offset: layout.rq_offset as u64,
            ring_len: layout.len as u64,
            poller: poller as u32,
            post_bit: bit,
        };
        Ok(Answer {
            reply,
            fds: vec![fd],
        })
    }

    /// `ibv_modify_qp`. With an address vector in the mask, its path is resolved first
    /// (see [`Control::path`]).
    pub(super) fn modify_qp(
        &mut self,
        id: u64,
        qp: u32,
        attr: &protocol::QpAttr,
        mask: u32,
    ) -> Result<Reply, Refusal> {
        let qpn = self.qpn_of(id, qp)?;
        let mask = AttrMask(mask);
        let pid = self.registry.conn(id).peer.pid;
        if mask.contains(AttrMask::QKEY)
            && attr.qkey & CONTROLLED_QKEY != 0
            && !self.host.is_privileged(pid)
        {
            return Err(Refusal::new(
                libc::EPERM,
                format!(
                    "Q_Key {:#x} is a controlled Q_Key (its high bit is set): only a process \
                     with CAP_NET_RAW may give one to a queue pair",
                    attr.qkey
                ),
            ));
        }
        let mut t = qp_attr_from_protocol(attr, mask).map_err(Refusal::invalid)?;
        if mask.contains(AttrMask::AV) {
            t.path = self.path(id, &attr.ah_attr)?;
        }
        let poller = self.registry.conn(id).poller;
        self.ask(poller, |tx| Command::ModifyQp(qpn, Box::new(t), mask, tx))?
            .map_err(Refusal::invalid)?;
        Ok(Reply::Done)
    }

    /// `ibv_query_qp`: the transport's attributes and the capacities granted at creation.
    pub(super) fn query_qp(&mut self, id: u64, qp: u32) -> Result<Reply, Refusal> {
        let c = self.registry.conn(id);
        let info = c
            .qps
            .get(&qp)
            .ok_or_else(|| Refusal::invalid("no such queue pair"))?;
        let (qpn, caps) = (info.qpn, info.caps);
        let attr = self.pollers[c.poller]
            .call(|tx| Command::QueryQp(qpn, tx))
            .flatten()
            .ok_or_else(|| Refusal::invalid("no such queue pair"))?;
        Ok(Reply::QpAttr {
            attr: qp_attr_to_protocol(&attr),
            caps,
        })
    }

    /// `ibv_destroy_qp`.
    pub(super) fn destroy_qp(&mut self, id: u64, qp: u32) -> Result<Reply, Refusal> {
        let c = self.registry.conn_mut(id);
        let info = c
            .qps
            .remove(&qp)
            .ok_or_else(|| Refusal::invalid("no such queue pair"))?;
        c.release_bit(qp);
        let poller = c.poller;
        self.pollers[poller].call(|tx| Command::DestroyQp(info.qpn, tx));
        self.registry.release_qpn(info.qpn);
        // The poller took it out of its groups with it.
        self.leave_groups(&info.groups);
        Ok(Reply::Done)
    }

    /// The QP number of the application's QP `qp`.
    fn qpn_of(&self, id: u64, qp: u32) -> Result<xroce_wire::Qpn, Refusal> {
        self.registry
            .conn(id)
            .qps
            .get(&qp)
            .map(|info| info.qpn)
            .ok_or_else(|| Refusal::invalid("no such queue pair"))
    }
}

#[cfg(test)]
mod tests {
    use verbs_shm::protocol::{AhAttr, Request};
    use xroce_transport::QpState;

    use super::*;
    use crate::control::fake::{FakeHost, Fixture, GID, refused};
    use crate::control::{AppLimits, Neighbour};

    fn caps(send: u32, recv: u32) -> QpCaps {
        QpCaps {
            max_send_wr: send,
            max_recv_wr: recv,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        }
    }

    fn create(pd: u32, cq: u32, qp_type: u32, srq: Option<u32>, caps: QpCaps) -> Request {
        Request::CreateQp {
            pd,
            qp_type,
            send_cq: cq,
            recv_cq: cq,
            srq,
            caps,
            sq_sig_all: false,
        }
    }

    /// To RTR, with an address vector to `dgid` through GID `sgid_index`.
    fn to_rtr(qp: u32, sgid_index: u8) -> Request {
        let attr = protocol::QpAttr {
            qp_state: QpState::Rtr.raw(),
            path_mtu: 3,
            dest_qp_num: 0x42,
            ah_attr: AhAttr {
                dgid: GID.0,
                sgid_index,
                is_global: true,
                ..AhAttr::default()
            },
            ..protocol::QpAttr::default()
        };
        let mask = AttrMask::STATE | AttrMask::AV | AttrMask::PATH_MTU | AttrMask::DEST_QPN;
        Request::ModifyQp {
            qp,
            attr,
            mask: mask.0,
        }
    }

    #[test]
    fn rings_are_laid_out_page_aligned_and_rounded_up() {
        let l = RingLayout::new(&caps(5, 3), false);
        assert_eq!((l.sq_entries, l.rq_entries), (8, 4));
        assert_eq!(l.rq_offset % 4096, 0);
        assert!(l.rq_offset >= ring_bytes(8, size_of::<SendWqe>()));
        assert_eq!(l.len, l.rq_offset + ring_bytes(4, size_of::<RecvWqe>()));
        let with_srq = RingLayout::new(&caps(0, 9), true);
        assert_eq!((with_srq.sq_entries, with_srq.rq_entries), (1, 0));
        assert_eq!(with_srq.len, with_srq.rq_offset);
        let granted = with_srq.granted(&caps(0, 9), true);
        assert_eq!((granted.max_recv_wr, granted.max_recv_sge), (0, 0));
    }

    #[test]
    fn a_send_entry_fits_the_larger_of_its_elements_and_its_inline_data_as_on_rxe() {
        let l = RingLayout::new(&caps(4, 4), false);
        let grant = |sge: u32, inline: u32| {
            let asked = QpCaps {
                max_send_sge: sge,
                max_inline_data: inline,
                ..caps(4, 4)
            };
            let g = l.granted(&asked, false);
            (g.max_send_sge, g.max_inline_data)
        };
        assert_eq!(grant(1, 0), (1, 16), "one element brings 16 bytes inline");
        assert_eq!(grant(0, 0), (1, 16));
        assert_eq!(grant(4, 16), (4, 64));
        assert_eq!(grant(1, 100), (6, 100), "inline data brings elements");
        assert_eq!(grant(16, 0), (16, 256));
        assert_eq!(grant(2, 256), (16, 256));
    }

    #[test]
    fn a_queue_pair_is_created_with_what_it_was_granted() {
        let mut fx = Fixture::new();
        let pd = fx.pd();
        let cq = fx.cq();
        let answer = fx.ask_with(create(pd, cq, 2, None, caps(3, 0)), Vec::new());
        let answer = answer.unwrap();
        let Reply::Qp {
            qp, caps: granted, ..
        } = answer.reply
        else {
            panic!("{:?}", answer.reply);
        };
        assert_eq!(answer.fds.len(), 1);
        assert_eq!((granted.max_send_wr, granted.max_recv_wr), (4, 1));
        let query = fx.ask(Request::QueryQp { qp });
        assert!(matches!(query, Ok(Reply::QpAttr { caps, .. }) if caps == granted));
    }

    #[test]
    fn queue_pairs_are_checked_before_they_reach_the_poller() {
        let limits = AppLimits {
            max_qps: 1,
            ..AppLimits::default()
        };
        let mut fx = Fixture::with(limits, FakeHost::default());
        let pd = fx.pd();
        let other_pd = fx.pd();
        let cq = fx.cq();
        let srq = match fx.ask(Request::CreateSrq {
            pd: other_pd,
            max_wr: 4,
            max_sge: 1,
            limit: 0,
        }) {
            Ok(Reply::Srq { srq, .. }) => srq,
            other => panic!("{other:?}"),
        };
        let before = fx.commands();
        let cases = [
            (
                create(pd + 9, cq, 2, None, caps(1, 1)),
                libc::EINVAL,
                "no such protection domain",
            ),
            (
                create(pd, cq + 9, 2, None, caps(1, 1)),
                libc::EINVAL,
                "no such completion queue",
            ),
            (
                create(pd, cq, 2, Some(srq + 9), caps(1, 1)),
                libc::EINVAL,
                "no such shared receive",
            ),
            (
                create(pd, cq, 2, Some(srq), caps(1, 1)),
                libc::EINVAL,
                "another protection domain",
            ),
            (
                create(pd, cq, 1, None, caps(1, 1)),
                libc::EOPNOTSUPP,
                "QP type 1",
            ),
            (
                create(pd, cq, 2, None, caps(MAX_QUEUE + 1, 1)),
                libc::EINVAL,
                "at most 32768",
            ),
            (
                create(
                    pd,
                    cq,
                    2,
                    None,
                    QpCaps {
                        max_send_sge: 99,
                        ..caps(1, 1)
                    },
                ),
                libc::EINVAL,
                "scatter/gather",
            ),
            (
                create(
                    pd,
                    cq,
                    2,
                    None,
                    QpCaps {
                        max_inline_data: 1 << 20,
                        ..caps(1, 1)
                    },
                ),
                libc::EINVAL,
                "inline data",
            ),
        ];
        for (request, errno, words) in cases {
            refused(fx.ask(request), errno, words);
        }
        assert_eq!(fx.commands(), before);
        fx.qp(pd, cq);
        refused(
            fx.create_qp(pd, cq),
            libc::ENOMEM,
            "already has 1 queue pair,",
        );
    }

    #[test]
    fn a_queue_pair_the_poller_refuses_leaves_nothing() {
        let mut fx = Fixture::new();
        let pd = fx.pd();
        let cq = fx.cq();
        fx.poller.state().refuse = Some("no room".into());
        refused(fx.create_qp(pd, cq), libc::EINVAL, "no room");
        assert!(fx.control.registry.conn(fx.id).qps.is_empty());
        fx.poller.state().refuse = None;
        let Ok(Reply::Qp { post_bit, .. }) = fx.create_qp(pd, cq) else {
            panic!("no QP");
        };
        assert_eq!(post_bit, Some(0), "the first bit, given back");
    }

    #[test]
    fn a_modify_to_rtr_takes_the_next_hop_the_host_knows() {
        let mut fx = Fixture::new();
        let pd = fx.pd();
        let cq = fx.cq();
        let qp = fx.qp(pd, cq);
        assert_eq!(fx.ask(to_rtr(qp, 0)), Ok(Reply::Done));
        let state = fx.poller.state();
        let Some(Command::ModifyQp(_, attr, mask, _)) = state.commands.last() else {
            panic!("no ModifyQp");
        };
        assert!(mask.contains(AttrMask::AV));
        assert_eq!(attr.qp_state, QpState::Rtr);
        assert_eq!(attr.path.dmac, [2, 0, 0, 0, 0, 2]);
        assert_eq!(attr.path.hop_limit, crate::control::ROCE_HOP_LIMIT);
    }

    #[test]
    fn a_modify_to_rtr_whose_path_does_not_resolve_is_refused() {
        let host = FakeHost {
            neighbour: Neighbour::Unreachable("no route to host".into()),
            ..FakeHost::default()
        };
        let mut fx = Fixture::with(AppLimits::default(), host);
        let pd = fx.pd();
        let cq = fx.cq();
        let qp = fx.qp(pd, cq);
        let before = fx.commands();
        refused(
            fx.ask(to_rtr(qp, 0)),
            libc::EHOSTUNREACH,
            "cannot reach 192.0.2.1: no route to host",
        );
        refused(fx.ask(to_rtr(qp, 1)), libc::EINVAL, "no GID at index 1");
        assert_eq!(fx.commands(), before);
        assert!(fx.control.parking.is_none());
    }

    /// A UD QP to INIT with `qkey`.
    fn ud_to_init(qp: u32, qkey: u32) -> Request {
        let attr = protocol::QpAttr {
            qp_state: QpState::Init.raw(),
            port_num: 1,
            qkey,
            ..protocol::QpAttr::default()
        };
        let mask = AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::QKEY;
        Request::ModifyQp {
            qp,
            attr,
            mask: mask.0,
        }
    }

    #[test]
    fn only_a_privileged_process_gives_a_queue_pair_a_controlled_qkey() {
        for privileged in [false, true] {
            let host = FakeHost {
                privileged,
                ..FakeHost::default()
            };
            let mut fx = Fixture::with(AppLimits::default(), host);
            let pd = fx.pd();
            let cq = fx.cq();
            let Ok(Reply::Qp { qp, .. }) = fx.ask(create(pd, cq, 4, None, caps(1, 1))) else {
                panic!("no UD QP");
            };
            let before = fx.commands();
            let controlled = fx.ask(ud_to_init(qp, 0x8001_0000));
            if privileged {
                assert_eq!(controlled, Ok(Reply::Done));
            } else {
                refused(
                    controlled,
                    libc::EPERM,
                    "Q_Key 0x80010000 is a controlled Q_Key",
                );
                assert_eq!(fx.commands(), before, "nothing reached the poller");
                assert_eq!(fx.ask(ud_to_init(qp, 0x1111_1111)), Ok(Reply::Done));
            }
        }
    }

    #[test]
    fn modify_query_and_destroy_name_a_queue_pair_of_the_application() {
        let mut fx = Fixture::new();
        let pd = fx.pd();
        let cq = fx.cq();
        let qp = fx.qp(pd, cq);
        refused(
            fx.ask(to_rtr(qp + 1, 0)),
            libc::EINVAL,
            "no such queue pair",
        );
        refused(
            fx.ask(Request::QueryQp { qp: qp + 1 }),
            libc::EINVAL,
            "no such queue pair",
        );
        let bad_state = Request::ModifyQp {
            qp,
            attr: protocol::QpAttr {
                qp_state: 42,
                ..protocol::QpAttr::default()
            },
            mask: AttrMask::STATE.0,
        };
        refused(fx.ask(bad_state), libc::EINVAL, "invalid QP state 42");
        fx.poller.state().refuse = Some("invalid transition".into());
        refused(fx.ask(to_rtr(qp, 0)), libc::EINVAL, "invalid transition");
        assert_eq!(fx.ask(Request::DestroyQp { qp }), Ok(Reply::Done));
        refused(
            fx.ask(Request::DestroyQp { qp }),
            libc::EINVAL,
            "no such queue pair",
        );
    }
}
