//! Who is connected and what each application owns.
//!
//! A handle an application names is only as good as the registry's word that the
//! application owns it: a guessed or stale handle must never reach another application's
//! object, and objects must not outgrow what the daemon can hold. The registry keeps, per
//! connection, the handles of every object with what the checks need (an MR's keys and
//! size, a QP's number and granted capacities, each object's protection domain), counts
//! them against the per-application limits and the budget of mapped memory areas, and
//! draws the numbers that name objects daemon-wide: handles, memory keys (at random, so
//! that no key can be guessed) and QP numbers (on the owning poller's residue).

use std::collections::{HashMap, HashSet};
use std::os::fd::OwnedFd;
use std::sync::Arc;

use rand::Rng;
use verbs_shm::contract;
use verbs_shm::protocol::{QpCaps, Request};
use verbs_shm::sys::{self, Mapping};
use xroce_transport::PdId;
use xroce_wire::{Gid, Qpn};

use super::Refusal;
use super::access::Peer;
use super::memlock::{self, LockingReader};
use crate::bells::PostBit;
use crate::poller::EventSink;

/// Per-application limits: what one application context may hold at once. Each object
/// costs the daemon memory, and QPs, CQs, SRQs and MRs a mapping each (an MR up to
/// [`sys::MAX_FDS`]), of the daemon's `vm.max_map_count` (65530 by default). Past a limit
/// the request is refused with `ENOMEM`, as the kernel's uverbs refuses past a device's
/// limits; `ibv_query_device` reports these same numbers (`max_qp`, `max_cq`, `max_mr`,
/// `max_srq`, `max_ah`, `max_pd`, `max_mr_size`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppLimits {
    /// Queue pairs (`--max-qps`).
    pub max_qps: usize,
    /// Completion queues (`--max-cqs`).
    pub max_cqs: usize,
    /// Bytes of registered memory (`--max-mr-mib`).
    pub max_mr_bytes: u64,
    /// Memory regions (`--max-mrs`).
    pub max_mrs: usize,
    /// Shared receive queues (`--max-srqs`).
    pub max_srqs: usize,
    /// Address handles (`--max-ahs`).
    pub max_ahs: usize,
    /// Protection domains (`--max-pds`).
    pub max_pds: usize,
}

impl AppLimits {
    /// Default queue pairs per application.
    pub const QPS: usize = 4096;
    /// Default completion queues per application.
    pub const CQS: usize = 4096;
    /// Default MiB of registered memory per application.
    pub const MR_MIB: u64 = 16384;
    /// Default memory regions per application.
    pub const MRS: usize = 8192;
    /// Default shared receive queues per application.
    pub const SRQS: usize = 4096;
    /// Default address handles per application.
    pub const AHS: usize = 16384;
    /// Default protection domains per application.
    pub const PDS: usize = 4096;
}

impl Default for AppLimits {
    fn default() -> AppLimits {
        AppLimits {
            max_qps: AppLimits::QPS,
            max_cqs: AppLimits::CQS,
            max_mr_bytes: AppLimits::MR_MIB << 20,
            max_mrs: AppLimits::MRS,
            max_srqs: AppLimits::SRQS,
            max_ahs: AppLimits::AHS,
            max_pds: AppLimits::PDS,
        }
    }
}

/// The kinds of object with a per-application limit on their number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Object {
    Pd,
    Mr,
    Cq,
    Qp,
    Srq,
    Ah,
}

impl Object {
    /// Its name, one and many, and the option that raises its limit.
    fn names(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Object::Pd => ("protection domain", "protection domains", "max-pds"),
            Object::Mr => ("memory region", "memory regions", "max-mrs"),
            Object::Cq => ("completion queue", "completion queues", "max-cqs"),
            Object::Qp => ("queue pair", "queue pairs", "max-qps"),
            Object::Srq => ("shared receive queue", "shared receive queues", "max-srqs"),
            Object::Ah => ("address handle", "address handles", "max-ahs"),
        }
    }
}

/// The refusal of an object past a per-application limit: `ENOMEM` (what uverbs answers
/// past a device's limits), naming the limit and how to raise it.
fn over_limit(limit: usize, object: Object) -> Refusal {
    let (one, many, option) = object.names();
    let objects = if limit == 1 { one } else { many };
    Refusal::new(
        libc::ENOMEM,
        format!(
            "this application already has {limit} {objects}, its limit (raise it with xroced --{option}, or `{} = ...` in xroced's configuration file)",
            option.replace('-', "_")
        ),
    )
}

/// The memory areas the daemon maps for applications may hold in all: the kernel's
/// `vm.max_map_count` (65530 unless raised) less an eighth of it, at least 4096, for the
/// daemon's own (libraries, thread stacks, allocator arenas, AF_XDP rings).
fn default_map_budget() -> usize {
    let max = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(65530);
    max.saturating_sub((max / 8).max(4096))
}

/// A memory region an application registered.
#[derive(Clone, Copy, Debug)]
pub(super) struct MrInfo {
    pub(super) lkey: u32,
    pub(super) rkey: u32,
    pub(super) len: u64,
    /// The pages it spans (what it counts against the process's `RLIMIT_MEMLOCK`).
    pub(super) pages: u64,
    /// The memory areas its mapping holds (one per memory file).
    pub(super) areas: usize,
    /// Its protection domain.
    pub(super) pd: u32,
}

/// A queue pair an application created.
#[derive(Debug)]
pub(super) struct QpInfo {
    pub(super) qpn: Qpn,
    /// What the QP was granted at creation (`ibv_query_qp` reports it).
    pub(super) caps: QpCaps,
    /// Its protection domain.
    pub(super) pd: u32,
    /// Its type.
    pub(super) qp_type: xroce_transport::QpType,
    /// The multicast groups it is attached to.
    pub(super) groups: Vec<xroce_wire::Gid>,
}

/// One application context: its socket and everything it owns.
#[derive(Debug)]
pub(super) struct Conn {
    pub(super) sock: OwnedFd,
    /// Who connected.
    pub(super) peer: Peer,
    /// The poller that owns its dataplane objects.
    pub(super) poller: usize,
    pub(super) hello: bool,
    pub(super) events: Option<Arc<EventSink>>,
    pub(super) pds: HashSet<u32>,
    pub(super) mrs: HashMap<u32, MrInfo>,
    pub(super) mr_bytes: u64,
    /// The pages its regions span.
    pub(super) mr_pages: u64,
    pub(super) cqs: HashSet<u32>,
    pub(super) qps: HashMap<u32, QpInfo>,
    pub(super) srqs: HashMap<u32, PdId>,
    pub(super) ahs: HashMap<u32, PdId>,
    /// The application's post-bits page (after hello).
    pub(super) post_bits: Option<Arc<Mapping>>,
    /// Post bits in use, by QP or SRQ handle (indices in the poller's region).
    bits: HashMap<u32, u32>,
    /// Post bits given back.
    free_bits: Vec<u32>,
    /// The next post bit never given.
    next_bit: u32,
    /// How many of its refusals were logged at warning level.
    pub(super) refusals_logged: u32,
    /// The request waiting for a destination to resolve (the connection is not read
    /// meanwhile, so requests stay answered in order).
    pub(super) parked: Option<Request>,
    /// The outcome of the resolution the parked request waited for.
    pub(super) resolved: Option<(Gid, Result<[u8; 6], String>)>,
}

impl Conn {
    fn new(sock: OwnedFd, peer: Peer, poller: usize) -> Conn {
        Conn {
            sock,
            peer,
            poller,
            hello: false,
            events: None,
            pds: HashSet::new(),
            mrs: HashMap::new(),
            mr_bytes: 0,
            mr_pages: 0,
            cqs: HashSet::new(),
            qps: HashMap::new(),
            srqs: HashMap::new(),
            ahs: HashMap::new(),
            post_bits: None,
            bits: HashMap::new(),
            free_bits: Vec::new(),
            next_bit: 0,
            refusals_logged: 0,
            parked: None,
            resolved: None,
        }
    }

    /// The memory areas the daemon maps for this application: its post-bits page, a ring
    /// per QP, CQ and SRQ, a mapping per region (one area per memory file).
    fn areas(&self) -> usize {
        1 + self.qps.len()
            + self.cqs.len()
            + self.srqs.len()
            + self.mrs.values().map(|m| m.areas).sum::<usize>()
    }

    /// How many objects of a limited kind it holds.
    fn holds(&self, object: Object) -> usize {
        match object {
            Object::Pd => self.pds.len(),
            Object::Mr => self.mrs.len(),
            Object::Cq => self.cqs.len(),
            Object::Qp => self.qps.len(),
            Object::Srq => self.srqs.len(),
            Object::Ah => self.ahs.len(),
        }
    }

    /// The protection domain `pd`, if the application owns it.
    pub(super) fn pd(&self, pd: u32) -> Result<(), Refusal> {
        if self.pds.contains(&pd) {
            Ok(())
        } else {
            Err(Refusal::invalid("no such protection domain"))
        }
    }

    /// Its event sink (every connection has one after hello).
    pub(super) fn events(&self) -> Result<Arc<EventSink>, Refusal> {
        self.events
            .clone()
            .ok_or_else(|| Refusal::new(libc::EPROTO, "no event socket"))
    }

    /// A post bit for the QP or SRQ `handle` (none when the page or the region is full:
    /// that one's rings are then read on every pass).
    pub(super) fn take_bit(&mut self, handle: u32) -> Option<PostBit> {
        let page = self.post_bits.clone()?;
        let local = match self.free_bits.pop() {
            Some(b) => b,
            None if self.next_bit < contract::POST_BITS_PER_POLLER => {
                self.next_bit += 1;
                self.next_bit - 1
            }
            None => return None,
        };
        self.bits.insert(handle, local);
        Some(PostBit {
            page,
            bit: self.poller as u32 * contract::POST_BITS_PER_POLLER + local,
        })
    }

    /// Gives back the post bit of `handle`.
    pub(super) fn release_bit(&mut self, handle: u32) {
        if let Some(local) = self.bits.remove(&handle) {
            self.free_bits.push(local);
        }
    }
}

/// Every connection, and the numbers drawn for objects daemon-wide.
pub(super) struct Registry {
    /// The per-application limits.
    pub(super) limits: AppLimits,
    conns: HashMap<u64, Conn>,
    next_conn: u64,
    next_handle: u32,
    keys: HashSet<u32>,
    qpns: HashSet<u32>,
    /// How many pollers share the applications.
    pollers: usize,
    /// Memory areas the daemon's mappings may hold in all (see [`Registry::map_room`]).
    pub(super) map_budget: usize,
    /// The memory areas the daemon's mappings hold now.
    pub(super) live_areas: fn() -> usize,
    /// What bounds an application's process's registered memory now.
    pub(super) locking: LockingReader,
    /// The multicast groups of the device: how many queue pairs are attached to each.
    pub(super) groups: std::collections::BTreeMap<xroce_wire::Gid, u32>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("conns", &self.conns.len())
            .field("map_budget", &self.map_budget)
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// An empty registry for applications spread over `pollers` pollers.
    pub(super) fn new(limits: AppLimits, pollers: usize) -> Registry {
        Registry {
            limits,
            conns: HashMap::new(),
            next_conn: 1,
            next_handle: rand::rng().random_range(1..0x1000),
            keys: HashSet::new(),
            qpns: HashSet::new(),
            pollers: pollers.max(1),
            map_budget: default_map_budget(),
            live_areas: sys::live_mapping_areas,
            locking: memlock::from_proc(),
            groups: std::collections::BTreeMap::new(),
        }
    }

    /// Registers a new connection of `peer`: its id (never 0 and never `u64::MAX`, the
    /// poll set's own), on the poller it is assigned.
    pub(super) fn connect(&mut self, sock: OwnedFd, peer: Peer) -> u64 {
        let id = self.next_conn;
        self.next_conn += 1;
        let poller = (id as usize) % self.pollers;
        self.conns.insert(id, Conn::new(sock, peer, poller));
        id
    }

    /// The pages registered by the process of `peer`, on all its connections.
    pub(super) fn pages_of_process(&self, peer: &Peer) -> u64 {
        self.conns
            .values()
            .filter(|c| c.peer.pid == peer.pid && c.peer.start_time == peer.start_time)
            .map(|c| c.mr_pages)
            .sum()
    }

    /// Removes a connection, with everything it owned (for the caller to destroy).
    pub(super) fn disconnect(&mut self, id: u64) -> Option<Conn> {
        self.conns.remove(&id)
    }

    /// The connection `id`, if it is still there.
    pub(super) fn find(&self, id: u64) -> Option<&Conn> {
        self.conns.get(&id)
    }

    /// The connection `id`, if it is still there, to change.
    pub(super) fn find_mut(&mut self, id: u64) -> Option<&mut Conn> {
        self.conns.get_mut(&id)
    }

    /// The connection a request came on.
    pub(super) fn conn(&self, id: u64) -> &Conn {
        // NOTE(unwrap): requests are only handled for connections that exist.
        self.conns.get(&id).expect("connection exists")
    }

    /// The connection a request came on, to change.
    pub(super) fn conn_mut(&mut self, id: u64) -> &mut Conn {
        // NOTE(unwrap): requests are only handled for connections that exist.
        self.conns.get_mut(&id).expect("connection exists")
    }

    /// Every connection, with its id.
    /// The process whose application owns QP number `qpn`, if any.
    pub(super) fn pid_of_qpn(&self, qpn: u32) -> Option<i32> {
        self.conns
            .values()
            .find(|c| c.qps.values().any(|q| q.qpn.value() == qpn))
            .map(|c| c.peer.pid)
    }

    pub(super) fn conns(&self) -> impl Iterator<Item = (u64, &Conn)> {
        self.conns.iter().map(|(&id, c)| (id, c))
    }

    /// How many applications are connected.
    pub(super) fn len(&self) -> usize {
        self.conns.len()
    }

    /// Room for one more `object` for the application of connection `id`, within its
    /// limit.
    pub(super) fn room_for(&self, id: u64, object: Object) -> Result<(), Refusal> {
        let limit = match object {
            Object::Pd => self.limits.max_pds,
            Object::Mr => self.limits.max_mrs,
            Object::Cq => self.limits.max_cqs,
            Object::Qp => self.limits.max_qps,
            Object::Srq => self.limits.max_srqs,
            Object::Ah => self.limits.max_ahs,
        };
        if self.conn(id).holds(object) >= limit {
            return Err(over_limit(limit, object));
        }
        Ok(())
    }

    /// Room for `areas` more memory areas for the application of connection `id`, within
    /// the daemon's budget and that application's share of it: every region, ring and
    /// page the daemon maps for an application is one (a region on several files, one per
    /// file), and a process has at most `vm.max_map_count` of them. Past it, `mmap` fails
    /// for the daemon's own allocations too, so the budget keeps room for those and the
    /// request is refused with `ENOMEM` instead. No application may hold more than a
    /// quarter of the budget, so that one alone cannot leave the others nothing.
    pub(super) fn map_room(&self, id: u64, areas: usize) -> Result<(), Refusal> {
        let mine = self.conns.get(&id).map_or(0, Conn::areas);
        let share = (self.map_budget / 4).max(1);
        if mine.saturating_add(areas) > share {
            return Err(Refusal::new(
                libc::ENOMEM,
                format!(
                    "this application has {mine} memory mappings in the daemon and {areas} more would pass its share of {share} (a quarter of the daemon's budget, vm.max_map_count less room for its own): free regions or queues, or raise vm.max_map_count"
                ),
            ));
        }
        let live = (self.live_areas)();
        if live.saturating_add(areas) <= self.map_budget {
            return Ok(());
        }
        Err(Refusal::new(
            libc::ENOMEM,
            format!(
                "the daemon has {live} memory mappings and {areas} more would pass its budget of {} (vm.max_map_count less room for its own): free regions or queues, or raise vm.max_map_count",
                self.map_budget
            ),
        ))
    }

    /// A new object handle.
    pub(super) fn handle(&mut self) -> u32 {
        self.next_handle = self.next_handle.wrapping_add(1).max(1);
        self.next_handle
    }

    /// A new memory key, drawn at random and unlike any in use.
    pub(super) fn key(&mut self) -> u32 {
        let mut rng = rand::rng();
        loop {
            let k: u32 = rng.random();
            if k != 0 && self.keys.insert(k) {
                return k;
            }
        }
    }

    /// Gives back the keys of a region. Keys are drawn at random, so one freed here is as
    /// unlikely as any other to come back; keeping them all would grow without bound.
    pub(super) fn release_keys(&mut self, lkey: u32, rkey: u32) {
        self.keys.remove(&lkey);
        self.keys.remove(&rkey);
    }

    /// A new QP number for a QP of `poller`.
    pub(super) fn qpn(&mut self, poller: usize) -> Qpn {
        let n = self.pollers as u32;
        let mut rng = rand::rng();
        loop {
            // QPN 0 and 1 are the special QPs; keep the poller's residue so packets land
            // on the right poller.
            let base: u32 = rng.random_range(0x20..0x00ff_ff00);
            let qpn = base - base % n + poller as u32;
            if self.qpns.insert(qpn) {
                return Qpn::new(qpn);
            }
        }
    }

    /// Gives back a QP number.
    pub(super) fn release_qpn(&mut self, qpn: Qpn) {
        self.qpns.remove(&qpn.value());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(pollers: usize) -> (Registry, u64) {
        let mut r = Registry::new(AppLimits::default(), pollers);
        // NOTE(unwrap): tests.
        let id = r.connect(sys::eventfd().unwrap(), Peer::default());
        (r, id)
    }

    #[test]
    fn qp_numbers_keep_their_pollers_residue() {
        let (mut r, _) = registry(3);
        for poller in 0..3 {
            for _ in 0..100 {
                let qpn = r.qpn(poller).value();
                assert_eq!(qpn as usize % 3, poller);
                assert!((0x20..0x00ff_ff00).contains(&qpn), "{qpn:#x}");
            }
        }
        let mut r1 = Registry::new(AppLimits::default(), 1);
        let a = r1.qpn(0);
        r1.release_qpn(a);
        assert!(!r1.qpns.contains(&a.value()));
    }

    #[test]
    fn keys_are_unique_and_never_zero() {
        let (mut r, _) = registry(1);
        let keys: HashSet<u32> = (0..1000).map(|_| r.key()).collect();
        assert_eq!(keys.len(), 1000);
        assert!(!keys.contains(&0));
    }

    #[test]
    fn connections_spread_over_the_pollers() {
        let mut r = Registry::new(AppLimits::default(), 2);
        let ids: Vec<u64> = (0..4)
            .map(|_| r.connect(sys::eventfd().unwrap(), Peer::default()))
            .collect();
        let pollers: Vec<usize> = ids.iter().map(|&id| r.conn(id).poller).collect();
        assert_eq!(pollers, [1, 0, 1, 0]);
        assert!(r.disconnect(ids[0]).is_some());
        assert!(r.find(ids[0]).is_none());
        assert_eq!(r.len(), 3);
    }

    #[test]
    fn a_limit_names_its_option_and_its_singular() {
        let (mut r, id) = registry(1);
        r.limits.max_pds = 1;
        assert!(r.room_for(id, Object::Pd).is_ok());
        r.conn_mut(id).pds.insert(7);
        let e = r.room_for(id, Object::Pd).unwrap_err();
        assert_eq!(e.errno, libc::ENOMEM);
        assert!(
            e.message.contains("already has 1 protection domain,"),
            "{e}"
        );
        assert!(
            e.message.contains("--max-pds") && e.message.contains("max_pds ="),
            "{e}"
        );
        // Other kinds are counted on their own.
        assert!(r.room_for(id, Object::Ah).is_ok());
    }

    #[test]
    fn post_bits_are_given_back_and_reused() {
        let (mut r, id) = registry(2);
        let page = sys::memfd("test-bits", 4096, false).unwrap();
        let map = Arc::new(Mapping::map(std::os::fd::AsFd::as_fd(&page), 4096, 0, true).unwrap());
        let c = r.conn_mut(id);
        assert!(c.take_bit(10).is_none(), "no page before hello");
        c.post_bits = Some(map);
        let base = c.poller as u32 * contract::POST_BITS_PER_POLLER;
        assert_eq!(c.take_bit(10).map(|b| b.bit), Some(base));
        assert_eq!(c.take_bit(11).map(|b| b.bit), Some(base + 1));
        c.release_bit(10);
        assert_eq!(c.take_bit(12).map(|b| b.bit), Some(base));
    }
}
