//! The device as a whole: hello, device and port attributes, protection domains, and the
//! statistics `xroced stat` reads.

use std::sync::Arc;

use tracing::warn;

use verbs_shm::contract;
use verbs_shm::protocol::{self, DeviceAttr, PortAttr, QpStat, Reply};
use xroce_wire::IbMtu;

use super::registry::Object;
use super::{Answer, Control, GID_TABLE_LEN, MAX_QUEUE, MAX_RD_ATOMIC, Refusal};
use crate::poller::{Command, EventSink, PollerStats};

/// The most QPs a page of [`Reply::QpStatsPage`] describes (fewer when their counters
/// fill [`protocol::PAGE_BYTES`] first, as they do after about 80).
const PAGE_MOST: usize = 256;

/// The EUI-64 node GUID of a MAC address (as RDMA NICs and rxe derive it).
pub fn node_guid(mac: [u8; 6]) -> u64 {
    let b = [
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ];
    u64::from_be_bytes(b)
}

/// A limit as `ibv_device_attr` reports it (an `int` there).
fn reported(limit: usize) -> u32 {
    u32::try_from(limit)
        .unwrap_or(u32::MAX)
        .min(i32::MAX as u32)
}

impl Control {
    /// The first request of a connection: the contract version is checked, and the
    /// application receives the wake page, its event socket, every poller's doorbell and
    /// its post-bits page.
    pub(super) fn hello(&mut self, id: u64, version: u32) -> Result<Answer, Refusal> {
        let peer = &self.registry.conn(id).peer;
        if let Err(refusal) = self.access.check(&self.device, peer) {
            // Once per user: one that retries in a loop must not flood the log.
            if self.refused_uids.insert(peer.uid) {
                warn!(
                    "refused pid {} uid {}: {}",
                    peer.pid, peer.uid, refusal.message
                );
            }
            return Err(refusal);
        }
        if self.registry.conn(id).hello {
            // The objects made so far keep the first hello's event socket and post bits.
            return Err(Refusal::new(
                libc::EPROTO,
                "this connection has said hello already",
            ));
        }
        if version != contract::VERSION {
            return Err(Refusal::new(
                libc::EPROTO,
                format!(
                    "contract version {version} is not the daemon's {}",
                    contract::VERSION
                ),
            ));
        }
        let (mine, theirs) = nix::sys::socket::socketpair(
            nix::sys::socket::AddressFamily::Unix,
            nix::sys::socket::SockType::SeqPacket,
            None,
            nix::sys::socket::SockFlag::SOCK_CLOEXEC | nix::sys::socket::SockFlag::SOCK_NONBLOCK,
        )
        .map_err(|e| Refusal::new(e as i32, "cannot create the event socket"))?;
        let bits_len = contract::post_bits_bytes(self.pollers.len());
        let (bits_fd, bits_map) = self.ring_memory(id, "xroce-post-bits", bits_len)?;
        let shared = |fd: std::io::Result<_>, what: &str| {
            fd.map_err(|e| Refusal::new(libc::EMFILE, format!("cannot share {what}: {e}")))
        };
        let mut fds = vec![shared(self.wake_page.try_clone(), "the wake page")?, theirs];
        for p in &self.pollers {
            fds.push(shared(p.doorbell(), "a doorbell")?);
        }
        fds.push(bits_fd);
        let c = self.registry.conn_mut(id);
        c.hello = true;
        c.events = Some(Arc::new(EventSink::new(mine)));
        c.post_bits = Some(bits_map);
        let reply = Reply::Hello {
            version: contract::VERSION,
            device: self.device.clone(),
            pollers: self.pollers.len() as u32,
        };
        Ok(Answer { reply, fds })
    }

    pub(super) fn device_attr(&mut self) -> DeviceAttr {
        let port = self.host.port();
        let guid = node_guid(port.mac);
        let limits = self.registry.limits;
        DeviceAttr {
            fw_ver: env!("CARGO_PKG_VERSION").to_owned(),
            node_guid: guid,
            sys_image_guid: guid,
            max_mr_size: limits.max_mr_bytes,
            page_size_cap: 0xffff_f000,
            // rxe reports 0xffffff (no IEEE OUI of its own), so do we: non-zero as verbs
            // consumers expect, and unknown to perftest, which then keeps its generic path.
            vendor_id: 0xff_ffff,
            vendor_part_id: 0,
            hw_ver: 0,
            max_qp: reported(limits.max_qps),
            max_qp_wr: MAX_QUEUE,
            // IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_N_NOTIFY_CQ (bit 15 is no ibv flag).
            device_cap_flags: (1 << 12) | (1 << 14),
            max_sge: contract::MAX_SGE as u32,
            max_cq: reported(limits.max_cqs),
            max_cqe: MAX_QUEUE,
            max_mr: reported(limits.max_mrs),
            max_pd: reported(limits.max_pds),
            max_qp_rd_atom: u32::from(MAX_RD_ATOMIC),
            max_res_rd_atom: reported(usize::from(MAX_RD_ATOMIC).saturating_mul(limits.max_qps)),
            max_qp_init_rd_atom: u32::from(MAX_RD_ATOMIC),
            // IBV_ATOMIC_HCA: atomic with respect to this device.
            atomic_cap: 1,
            max_srq: reported(limits.max_srqs),
            max_srq_wr: MAX_QUEUE,
            max_srq_sge: contract::MAX_SGE as u32,
            max_ah: reported(limits.max_ahs),
            max_pkeys: 1,
            max_inline_data: contract::MAX_INLINE as u32,
        }
    }

    pub(super) fn port_attr(&mut self) -> PortAttr {
        let p = self.host.port();
        PortAttr {
            state: if p.up { 4 } else { 1 },
            max_mtu: u32::from(IbMtu::Mtu4096.code()),
            active_mtu: u32::from(p.active_mtu.code()),
            // A table with room to spare, as RDMA NICs and rxe have: the entries past the
            // interface's addresses are empty (a zero GID, `ENODATA` from
            // `ibv_query_gid_ex`) until an address comes.
            gid_tbl_len: p.gids.len().max(GID_TABLE_LEN) as u32,
            max_msg_sz: 1 << 31,
            pkey_tbl_len: 1,
            phys_state: if p.up { 5 } else { 3 },
            // 4X at 25 Gb/s reads as 100 Gb/s, like an RDMA NIC; the truth is the netdev's.
            active_width: 2,
            active_speed: 32,
            netdev_mtu: p.mtu,
            netdev: p.netdev,
            mac: p.mac,
            gids: p.gids.iter().map(|g| g.0).collect(),
        }
    }

    /// `ibv_alloc_pd`.
    pub(super) fn alloc_pd(&mut self, id: u64) -> Result<Reply, Refusal> {
        self.registry.room_for(id, Object::Pd)?;
        let pd = self.registry.handle();
        self.registry.conn_mut(id).pds.insert(pd);
        Ok(Reply::Pd { pd })
    }

    /// `ibv_dealloc_pd`: refused with `EBUSY` while any QP, MR, SRQ or AH of the
    /// application uses the PD (the kernel's uverbs refuses so too, `ib_destroy_usecnt`);
    /// nothing changes then.
    pub(super) fn dealloc_pd(&mut self, id: u64, pd: u32) -> Result<Reply, Refusal> {
        let c = self.registry.conn_mut(id);
        c.pd(pd)?;
        let users = [
            (
                c.qps.values().filter(|q| q.pd == pd).count(),
                "queue pair",
                "queue pairs",
            ),
            (
                c.mrs.values().filter(|m| m.pd == pd).count(),
                "memory region",
                "memory regions",
            ),
            (
                c.srqs.values().filter(|p| p.0 == pd).count(),
                "shared receive queue",
                "shared receive queues",
            ),
            (
                c.ahs.values().filter(|p| p.0 == pd).count(),
                "address handle",
                "address handles",
            ),
        ];
        let busy: Vec<String> = users
            .iter()
            .filter(|(n, ..)| *n > 0)
            .map(|&(n, one, many)| format!("{n} {}", if n == 1 { one } else { many }))
            .collect();
        if !busy.is_empty() {
            return Err(Refusal::new(
                libc::EBUSY,
                format!(
                    "the protection domain is still used by {}: destroy them first",
                    busy.join(", ")
                ),
            ));
        }
        c.pds.remove(&pd);
        Ok(Reply::Done)
    }

    /// The daemon's counters: every poller's, summed, and the control plane's gauges.
    pub(super) fn stats(&self) -> Vec<(String, u64)> {
        let mut transport = xroce_transport::Counters::default();
        let mut daemon: Vec<(String, u64)> = Vec::new();
        for p in &self.pollers {
            let Some(s): Option<PollerStats> = p.call(Command::Stats) else {
                continue;
            };
            transport.add(&s.transport);
            for (name, v) in s.daemon {
                match daemon.iter_mut().find(|(n, _)| n == name) {
                    Some((_, total)) => *total += v,
                    None => daemon.push((name.to_owned(), v)),
                }
            }
        }
        daemon.extend(transport.iter().map(|(n, v)| (n.to_owned(), v)));
        // Gauges of the control plane: who is connected, and how much of the budget of
        // mapped memory areas (see `Registry::map_room`) is in use.
        daemon.push(("applications".to_owned(), self.registry.len() as u64));
        daemon.push((
            "mapped_areas".to_owned(),
            (self.registry.live_areas)() as u64,
        ));
        daemon.push((
            "mapped_area_budget".to_owned(),
            self.registry.map_budget as u64,
        ));
        // Multicast: the groups the port is a member of, and the queue pairs attached to
        // them (`ibv_attach_mcast`), over every application.
        daemon.push(("mcast_groups".to_owned(), self.registry.groups.len() as u64));
        daemon.push((
            "mcast_attachments".to_owned(),
            self.registry.groups.values().map(|&n| u64::from(n)).sum(),
        ));
        daemon.extend(self.cm.stats());
        daemon
    }

    /// Every QP's state and counters in one reply (clients older than the daemon ask so).
    pub(super) fn all_qp_stats(&self) -> Result<Reply, Refusal> {
        let qps = self.qp_stats(0, usize::MAX);
        let n = qps.len();
        let reply = Reply::QpStats { qps };
        if protocol::encode(&reply).len() > protocol::MAX_MESSAGE {
            return Err(Refusal::new(
                libc::E2BIG,
                format!(
                    "the {n} queue pairs do not fit one reply: this client is older than the daemon (it does not ask page by page); update it"
                ),
            ));
        }
        Ok(reply)
    }

    /// A page of QP states and counters, from QP number `from_qpn` on.
    pub(super) fn qp_stats_page(&self, from_qpn: u32) -> Result<Reply, Refusal> {
        let rest = self.qp_stats(from_qpn, PAGE_MOST);
        let n = protocol::page_len(&rest, protocol::PAGE_BYTES);
        // More may follow when this page stopped short of what the pollers gave, or they
        // gave as many as asked.
        let more = n < rest.len() || rest.len() == PAGE_MOST;
        let next = more.then(|| rest[n - 1].qpn + 1);
        let reply = Reply::QpStatsPage {
            qps: rest[..n].to_vec(),
            next,
        };
        if protocol::encode(&reply).len() > protocol::MAX_MESSAGE {
            return Err(Refusal::new(
                libc::E2BIG,
                "one queue pair's counters exceed a message",
            ));
        }
        Ok(reply)
    }

    /// The state and counters of the first `most` QPs numbered `from` or more, from
    /// every poller, by QP number.
    fn qp_stats(&self, from: u32, most: usize) -> Vec<QpStat> {
        let mut qps: Vec<QpStat> = self
            .pollers
            .iter()
            .filter_map(|p| p.call(|reply| Command::QpStats { from, most, reply }))
            .flatten()
            .collect();
        qps.sort_by_key(|q| q.qpn);
        qps.truncate(most);
        qps
    }
}

#[cfg(test)]
mod tests {
    use verbs_shm::protocol::Request;

    use super::*;
    use crate::control::AppLimits;
    use crate::control::fake::{FakeHost, Fixture, MAC, refused};

    #[test]
    fn hello_hands_out_the_wake_page_events_doorbells_and_post_bits() {
        let mut fx = Fixture::new();
        let (id, _app) = Fixture::connect(&mut fx.control);
        let version = contract::VERSION;
        let answer = fx
            .control
            .handle(id, Request::Hello { version }, Vec::new());
        // NOTE(unwrap): tests.
        let answer = answer.unwrap();
        assert!(matches!(answer.reply, Reply::Hello { pollers: 1, .. }));
        // The wake page, the event socket, one doorbell, the post bits.
        assert_eq!(answer.fds.len(), 4);
        let again = fx
            .control
            .handle(id, Request::Hello { version }, Vec::new());
        refused(again, libc::EPROTO, "said hello already");
    }

    #[test]
    fn a_user_the_policy_leaves_out_is_refused_on_hello_and_may_only_describe_the_device() {
        use crate::control::{AccessPolicy, Named, Peer};
        let mut fx = Fixture::new();
        fx.control.access = AccessPolicy {
            users: vec![],
            groups: vec![Named {
                id: 110,
                name: "rdma".into(),
            }],
        };
        let peer = |uid, groups: &[u32]| Peer {
            pid: 77,
            uid,
            gid: uid,
            groups: groups.to_vec(),
            start_time: None,
        };
        let version = contract::VERSION;
        let (id, _app) = Fixture::connect_as(&mut fx.control, peer(65534, &[]));
        // Described as sysfs describes a kernel device to every user.
        let described = fx.control.handle(id, Request::QueryDevice, Vec::new());
        assert!(matches!(
            described.map(|a| a.reply),
            Ok(Reply::Device(d)) if d.node_guid == node_guid(MAC)
        ));
        let hello = fx
            .control
            .handle(id, Request::Hello { version }, Vec::new());
        refused(
            hello,
            libc::EACCES,
            "access to test0 denied for uid 65534 (the daemon allows root and the group rdma (gid 110)",
        );
        assert!(!fx.control.registry.conn(id).hello);
        // Nothing else, hello or not.
        let pd = fx.control.handle(id, Request::AllocPd, Vec::new());
        refused(pd, libc::EPROTO, "the first request must be Hello");
        assert!(fx.control.registry.conn(id).pds.is_empty());
        let hello = fx
            .control
            .handle(id, Request::Hello { version }, Vec::new());
        refused(hello, libc::EACCES, "uid 65534");
        // A member of the group, and root, are let in.
        for member in [peer(1000, &[27, 110]), peer(0, &[])] {
            let (id, _app) = Fixture::connect_as(&mut fx.control, member);
            let hello = fx
                .control
                .handle(id, Request::Hello { version }, Vec::new());
            assert!(hello.is_ok(), "{hello:?}");
        }
    }

    #[test]
    fn hello_with_another_contract_version_is_refused() {
        let mut fx = Fixture::new();
        let (id, _app) = Fixture::connect(&mut fx.control);
        let version = contract::VERSION + 1;
        let answer = fx
            .control
            .handle(id, Request::Hello { version }, Vec::new());
        refused(answer, libc::EPROTO, "is not the daemon's");
        assert!(!fx.control.registry.conn(id).hello);
    }

    #[test]
    fn query_device_reports_the_limits_enforced() {
        let limits = AppLimits {
            max_qps: 3,
            max_pds: 5,
            max_mr_bytes: 1 << 30,
            max_ahs: usize::MAX,
            ..AppLimits::default()
        };
        let mut fx = Fixture::with(limits, FakeHost::default());
        let Ok(Reply::Device(d)) = fx.ask(Request::QueryDevice) else {
            panic!("no device attributes");
        };
        assert_eq!((d.max_qp, d.max_pd, d.max_mr_size), (3, 5, 1 << 30));
        assert_eq!(d.max_ah, i32::MAX as u32, "an int in ibv_device_attr");
        assert_eq!(d.max_res_rd_atom, 3 * u32::from(MAX_RD_ATOMIC));
        assert_eq!(d.node_guid, node_guid(MAC));
    }

    #[test]
    fn query_port_has_room_in_its_gid_table() {
        let mut host = FakeHost::default();
        host.port.up = false;
        let mut fx = Fixture::with(AppLimits::default(), host);
        let Ok(Reply::Port(p)) = fx.ask(Request::QueryPort) else {
            panic!("no port attributes");
        };
        assert_eq!(p.gid_tbl_len, GID_TABLE_LEN as u32);
        assert_eq!(p.gids.len(), 1);
        assert_eq!((p.state, p.phys_state), (1, 3), "down");
        assert_eq!(p.active_mtu, u32::from(IbMtu::Mtu1024.code()));
    }

    #[test]
    fn protection_domains_stop_at_their_limit() {
        let limits = AppLimits {
            max_pds: 2,
            ..AppLimits::default()
        };
        let mut fx = Fixture::with(limits, FakeHost::default());
        let a = fx.pd();
        fx.pd();
        refused(
            fx.ask(Request::AllocPd),
            libc::ENOMEM,
            "already has 2 protection domains",
        );
        assert_eq!(fx.ask(Request::DeallocPd { pd: a }), Ok(Reply::Done));
        fx.pd();
    }

    #[test]
    fn each_application_has_limits_of_its_own() {
        let limits = AppLimits {
            max_pds: 1,
            ..AppLimits::default()
        };
        let mut fx = Fixture::with(limits, FakeHost::default());
        fx.pd();
        refused(fx.ask(Request::AllocPd), libc::ENOMEM, "--max-pds");
        let (other, _app) = Fixture::connect(&mut fx.control);
        let version = contract::VERSION;
        assert!(
            fx.control
                .handle(other, Request::Hello { version }, Vec::new())
                .is_ok()
        );
        let theirs = fx.control.handle(other, Request::AllocPd, Vec::new());
        assert!(matches!(theirs.map(|a| a.reply), Ok(Reply::Pd { .. })));
    }

    #[test]
    fn a_protection_domain_in_use_is_busy_until_its_objects_are_gone() {
        let mut fx = Fixture::new();
        let pd = fx.pd();
        let cq = fx.cq();
        let qp = fx.qp(pd, cq);
        let mr = fx.mr(pd);
        refused(
            fx.ask(Request::DeallocPd { pd }),
            libc::EBUSY,
            "still used by 1 queue pair, 1 memory region: destroy them first",
        );
        assert_eq!(fx.ask(Request::DestroyQp { qp }), Ok(Reply::Done));
        refused(
            fx.ask(Request::DeallocPd { pd }),
            libc::EBUSY,
            "1 memory region",
        );
        assert_eq!(fx.ask(Request::DeregMr { mr }), Ok(Reply::Done));
        assert_eq!(fx.ask(Request::DeallocPd { pd }), Ok(Reply::Done));
        refused(
            fx.ask(Request::DeallocPd { pd }),
            libc::EINVAL,
            "no such protection domain",
        );
    }

    #[test]
    fn another_applications_protection_domain_is_not_there() {
        let mut fx = Fixture::new();
        let theirs = fx.pd();
        let (id, _app) = Fixture::connect(&mut fx.control);
        let version = contract::VERSION;
        assert!(
            fx.control
                .handle(id, Request::Hello { version }, Vec::new())
                .is_ok()
        );
        let dealloc = fx
            .control
            .handle(id, Request::DeallocPd { pd: theirs }, Vec::new());
        refused(dealloc, libc::EINVAL, "no such protection domain");
        assert!(fx.control.registry.conn(fx.id).pds.contains(&theirs));
    }

    #[test]
    fn statistics_carry_the_control_planes_gauges() {
        let mut fx = Fixture::new();
        fx.control.registry.map_budget = 1234;
        let Ok(Reply::Stats { counters }) = fx.ask(Request::Stats) else {
            panic!("no statistics");
        };
        let value = |name: &str| counters.iter().find(|(n, _)| n == name).map(|c| c.1);
        assert_eq!(value("applications"), Some(1));
        assert_eq!(value("mapped_area_budget"), Some(1234));
        assert!(value("mapped_areas").is_some());
        let Ok(Reply::QpStatsPage { qps, next }) = fx.ask(Request::QpStatsPage { from_qpn: 0 })
        else {
            panic!("no page");
        };
        assert!(qps.is_empty() && next.is_none());
    }

    #[test]
    fn node_guid_is_eui64() {
        assert_eq!(
            node_guid([0x52, 0x54, 0x00, 0x77, 0x00, 0x02]),
            0x5054_00ff_fe77_0002
        );
    }
}
