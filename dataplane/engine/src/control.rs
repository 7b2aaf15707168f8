//! The control plane: the daemon's control socket, one connection per application
//! context, and the objects each application owns.
//!
//! Every request is validated here (handles must belong to the asking application, sizes
//! are bounded, per-application limits apply) before a [`Command`] goes to the poller that
//! owns the application's dataplane objects. When an application hangs up or dies, every
//! object it owned is destroyed: its QPs vanish (so their peers' retries run out and they
//! see the connection fail), its regions are unmapped.
//!
//! One thread serves every application, so nothing here waits on the network: a request
//! whose path needs a next hop the kernel has not resolved yet (`ibv_modify_qp` to RTR,
//! `ibv_create_ah`) is parked, its connection left unread so that its requests stay
//! answered in order, while a thread of its own waits for the resolution; the request is
//! then handled again with the outcome. Other applications are served meanwhile.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use crossbeam_channel::{Sender, bounded};
use rand::Rng;
use tracing::{debug, info, warn};
use verbs_shm::contract::{self, Cqe, RecvWqe, SendWqe, ring_bytes};
use verbs_shm::protocol::{
    self, AhAttr, DeviceAttr, Piece, PortAttr, QpAttr as WireQpAttr, QpCaps, QpStat, Reply, Request,
};
use verbs_shm::ring::{Producer, Ring};
use verbs_shm::sys::{self, Mapping};
use xroce_transport::{
    Access, AttrMask, Limits, Path, PdId, QpAttr, QpConfig, QpState, QpType, SrqAttr, SrqId,
};
use xroce_wire::{Gid, IbMtu, Psn, Qpn};

use crate::bells::PostBit;
use crate::memory::Region;
use crate::poller::{Command, CqSetup, EventSink, PollerStats, QpSetup, SrqSetup};

/// The hop limit (IPv4 TTL, IPv6 hop limit) of every path: what the kernel's routes give
/// RoCE traffic by default (`net.ipv4.ip_default_ttl`).
pub const ROCE_HOP_LIMIT: u8 = 64;

/// Outstanding READ/atomic requests per QP, either role (`max_qp_rd_atom`,
/// `max_qp_init_rd_atom`). rxe allows 128, so we do too: perftest moves its QP to RTS with
/// the *peer's* limit as `max_rd_atomic`, so a smaller one here fails `ib_read_bw` and
/// `ib_atomic_bw` against rxe at RTS.
pub const MAX_RD_ATOMIC: u8 = 128;

/// What the control plane needs to know about the port right now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortView {
    /// The interface name.
    pub netdev: String,
    /// Its MAC address.
    pub mac: [u8; 6],
    /// Its MTU.
    pub mtu: u32,
    /// The active path MTU.
    pub active_mtu: IbMtu,
    /// Whether the link is up.
    pub up: bool,
    /// The GID table.
    pub gids: Vec<Gid>,
}

/// What the host knows about a destination right now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Neighbour {
    /// Frames go to this Ethernet address (the port's own for a GID of this host).
    Mac([u8; 6]),
    /// The kernel is finding it out (it was asked to): [`Host::resolver`] waits for it.
    Pending,
    /// It cannot be reached, and why.
    Unreachable(String),
}

/// Waits for the kernel to resolve a destination GID, within a bound of its own: the
/// next-hop MAC address, `None` for a GID of this host, or why it cannot be reached. Runs
/// on a thread of its own, so the control plane serves other applications meanwhile.
pub type Resolver = Arc<dyn Fn(Gid) -> Result<Option<[u8; 6]>, String> + Send + Sync>;

/// What the control plane needs from the host.
pub trait Host {
    /// The port as it is now.
    fn port(&mut self) -> PortView;
    /// The next-hop MAC address for a destination GID as known now, without waiting; the
    /// port's own MAC for a GID of this host (loopback). [`Neighbour::Pending`] when the
    /// kernel was asked to find it out.
    fn lookup(&mut self, dgid: Gid) -> Neighbour;
    /// What waits for a pending destination.
    fn resolver(&self) -> Resolver;
}

/// The poll-set id of the resolutions' doorbell.
const RESOLVED: u64 = u64::MAX;

/// A resolution that finished: the connection that waits for it, the GID, the outcome.
type Resolved = (u64, Gid, Result<Option<[u8; 6]>, String>);

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

/// The refusal of an object past a per-application limit: `ENOMEM` (what uverbs answers
/// past a device's limits), naming the limit and how to raise it.
fn over_limit(limit: usize, (one, many): (&str, &str), option: &str) -> Answer {
    let objects = if limit == 1 { one } else { many };
    error(
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
fn map_budget() -> usize {
    let max = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(65530);
    max.saturating_sub((max / 8).max(4096))
}

/// A limit as `ibv_device_attr` reports it (an `int` there).
fn reported(limit: usize) -> u32 {
    u32::try_from(limit)
        .unwrap_or(u32::MAX)
        .min(i32::MAX as u32)
}

/// The most QPs a page of [`Reply::QpStatsPage`] describes (fewer when their counters
/// fill [`protocol::PAGE_BYTES`] first, as they do after about 80).
const PAGE_MOST: usize = 256;

/// The largest queue a QP, SRQ or CQ may have.
pub const MAX_QUEUE: u32 = 32768;

/// The GID table length reported to applications (at least; more when the interface has
/// more addresses).
pub const GID_TABLE_LEN: usize = 16;

/// How the control plane reaches one poller.
#[derive(Debug, Clone)]
pub struct PollerLink {
    /// Its command queue.
    pub commands: Sender<Command>,
    /// Its doorbell (written after every command so a sleeping poller wakes).
    pub doorbell: Arc<OwnedFd>,
}

impl PollerLink {
    fn call<T>(&self, make: impl FnOnce(Sender<T>) -> Command) -> Option<T> {
        let (tx, rx) = bounded(1);
        self.commands.send(make(tx)).ok()?;
        sys::eventfd_signal(self.doorbell.as_fd());
        rx.recv().ok()
    }
}

#[derive(Clone, Copy, Debug)]
struct MrInfo {
    lkey: u32,
    rkey: u32,
    len: u64,
    /// The memory areas its mapping holds (one per memory file).
    areas: usize,
    /// Its protection domain.
    pd: u32,
}

/// Where the memory of a region to register is.
#[derive(Debug)]
enum Memory {
    /// At `offset` of one memory file.
    File { offset: u64 },
    /// `start` bytes into `pieces` of several memory files, mapped side by side.
    Pieces { start: u64, pieces: Vec<Piece> },
}

#[derive(Debug)]
struct QpInfo {
    qpn: Qpn,
    /// What the QP was granted at creation (`ibv_query_qp` reports it).
    caps: QpCaps,
    /// Its protection domain.
    pd: u32,
}

#[derive(Debug)]
struct Conn {
    sock: OwnedFd,
    pid: i32,
    poller: usize,
    hello: bool,
    events: Option<Arc<EventSink>>,
    pds: HashSet<u32>,
    mrs: HashMap<u32, MrInfo>,
    mr_bytes: u64,
    cqs: HashSet<u32>,
    qps: HashMap<u32, QpInfo>,
    srqs: HashMap<u32, PdId>,
    ahs: HashMap<u32, PdId>,
    /// The application's post-bits page (after hello).
    post_bits: Option<Arc<Mapping>>,
    /// Post bits in use, by QP or SRQ handle (indices in the poller's region).
    bits: HashMap<u32, u32>,
    /// Post bits given back.
    free_bits: Vec<u32>,
    /// The next post bit never given.
    next_bit: u32,
    /// A refusal for want of memory or past a limit was logged.
    warned: bool,
    /// The request waiting for a destination to resolve (the connection is not read
    /// meanwhile, so requests stay answered in order).
    parked: Option<Request>,
    /// The outcome of the resolution the parked request waited for.
    resolved: Option<(Gid, Result<[u8; 6], String>)>,
}

impl Conn {
    /// The memory areas the daemon maps for this application: its post-bits page, a ring
    /// per QP, CQ and SRQ, a mapping per region (one area per memory file).
    fn areas(&self) -> usize {
        1 + self.qps.len()
            + self.cqs.len()
            + self.srqs.len()
            + self.mrs.values().map(|m| m.areas).sum::<usize>()
    }

    /// A post bit for the QP or SRQ `handle` (none when the page or the region is full:
    /// that one's rings are then read on every pass).
    fn take_bit(&mut self, handle: u32) -> Option<PostBit> {
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
    fn release_bit(&mut self, handle: u32) {
        if let Some(local) = self.bits.remove(&handle) {
            self.free_bits.push(local);
        }
    }
}

/// The control plane.
pub struct Control {
    device: String,
    listener: OwnedFd,
    pollers: Vec<PollerLink>,
    wake_page: OwnedFd,
    host: Box<dyn Host>,
    limits: AppLimits,
    conns: HashMap<u64, Conn>,
    next_conn: u64,
    next_handle: u32,
    keys: HashSet<u32>,
    qpns: HashSet<u32>,
    gids: Vec<Gid>,
    resolver: Resolver,
    /// Finished resolutions, and the eventfd that says one came.
    resolved: (Sender<Resolved>, crossbeam_channel::Receiver<Resolved>),
    resolved_bell: Arc<OwnedFd>,
    /// Set by a request that must wait for this GID to resolve.
    parking: Option<Gid>,
    /// Memory areas the daemon's mappings may hold in all (see `map_refusal`).
    map_budget: usize,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

/// A reply plus the descriptors that go with it.
type Answer = (Reply, Vec<OwnedFd>);

fn error(errno: i32, message: impl Into<String>) -> Answer {
    (
        Reply::Error {
            errno,
            message: message.into(),
        },
        Vec::new(),
    )
}

fn ok(reply: Reply) -> Answer {
    (reply, Vec::new())
}

impl Control {
    /// A control plane listening as `device`, with these pollers.
    pub fn new(
        device: &str,
        listener: OwnedFd,
        pollers: Vec<PollerLink>,
        wake_page: OwnedFd,
        mut host: Box<dyn Host>,
        limits: AppLimits,
    ) -> io::Result<Control> {
        let resolved_bell = Arc::new(sys::eventfd()?);
        let gids = host.port().gids;
        let resolver = host.resolver();
        Ok(Control {
            device: device.to_owned(),
            listener,
            pollers,
            wake_page,
            host,
            limits,
            conns: HashMap::new(),
            next_conn: 1,
            next_handle: rand::rng().random_range(1..0x1000),
            keys: HashSet::new(),
            qpns: HashSet::new(),
            gids,
            resolver,
            resolved: crossbeam_channel::unbounded(),
            resolved_bell,
            parking: None,
            map_budget: map_budget(),
        })
    }

    /// Replaces the budget of memory areas the daemon maps (by default `vm.max_map_count`
    /// less room for the daemon's own; see [`Control::new`]).
    pub fn with_map_budget(mut self, areas: usize) -> Control {
        self.map_budget = areas;
        self
    }

    /// The refusal, if `areas` more memory areas for the application of connection `id`
    /// would pass the daemon's budget or that application's share of it: every region,
    /// ring and page the daemon maps for an application is one (a region on several files,
    /// one per file), and a process has at most `vm.max_map_count` of them. Past it, `mmap`
    /// fails for the daemon's own allocations too, so the budget keeps room for those and
    /// the request is refused with `ENOMEM` instead. No application may hold more than a
    /// quarter of the budget, so that one alone cannot leave the others nothing.
    fn map_refusal(&self, id: u64, areas: usize) -> Option<(i32, String)> {
        let mine = self.conns.get(&id).map_or(0, Conn::areas);
        let share = (self.map_budget / 4).max(1);
        if mine.saturating_add(areas) > share {
            return Some((
                libc::ENOMEM,
                format!(
                    "this application has {mine} memory mappings in the daemon and {areas} more would pass its share of {share} (a quarter of the daemon's budget, vm.max_map_count less room for its own): free regions or queues, or raise vm.max_map_count"
                ),
            ));
        }
        let live = sys::live_mapping_areas();
        if live.saturating_add(areas) <= self.map_budget {
            return None;
        }
        Some((
            libc::ENOMEM,
            format!(
                "the daemon has {live} memory mappings and {areas} more would pass its budget of {} (vm.max_map_count less room for its own): free regions or queues, or raise vm.max_map_count",
                self.map_budget
            ),
        ))
    }

    /// The listening socket (for the daemon's poll set).
    pub fn listener(&self) -> BorrowedFd<'_> {
        self.listener.as_fd()
    }

    /// The descriptors to poll: the listener, every connection not waiting for a
    /// resolution, and the resolutions' doorbell, with their ids.
    pub fn poll_set(&self) -> Vec<(u64, BorrowedFd<'_>)> {
        let mut v = vec![
            (0, self.listener.as_fd()),
            (RESOLVED, self.resolved_bell.as_fd()),
        ];
        v.extend(
            self.conns
                .iter()
                .filter(|(_, c)| c.parked.is_none())
                .map(|(&id, c)| (id, c.sock.as_fd())),
        );
        v
    }

    /// Handles readiness of poll-set entry `id` (0 is the listener).
    pub fn on_ready(&mut self, id: u64) {
        match id {
            0 => self.accept(),
            RESOLVED => self.on_resolved(),
            _ => self.serve(id),
        }
    }

    /// Answers the requests whose destinations resolved.
    fn on_resolved(&mut self) {
        sys::eventfd_drain(self.resolved_bell.as_fd());
        while let Ok((id, dgid, outcome)) = self.resolved.1.try_recv() {
            let mac = self.host.port().mac;
            let Some(conn) = self.conns.get_mut(&id) else {
                continue;
            };
            let Some(request) = conn.parked.take() else {
                continue;
            };
            conn.resolved = Some((dgid, outcome.map(|m| m.unwrap_or(mac))));
            let answer = self.handle(id, request.clone(), Vec::new());
            self.answer(id, request, answer);
        }
    }

    /// Starts waiting for `dgid` on a thread of its own; the answer comes through
    /// [`Control::on_resolved`].
    fn start_resolution(&self, id: u64, dgid: Gid) -> io::Result<()> {
        let resolve = self.resolver.clone();
        let done = self.resolved.0.clone();
        let bell = self.resolved_bell.clone();
        std::thread::Builder::new()
            .name("xroce-resolve".into())
            .spawn(move || {
                let outcome = resolve(dgid);
                let _ = done.send((id, dgid, outcome));
                sys::eventfd_signal(bell.as_fd());
            })
            .map(drop)
    }

    /// Re-reads the port and tells every poller when the GID table changed (addresses
    /// added or removed on the interface).
    pub fn refresh_host(&mut self) {
        let gids = self.host.port().gids;
        if gids == self.gids || gids.is_empty() {
            return;
        }
        info!(
            "GID table changed: {:?}",
            gids.iter().map(|g| g.to_ip()).collect::<Vec<_>>()
        );
        for p in &self.pollers {
            let _ = p.commands.send(Command::SetGids(gids.clone()));
            sys::eventfd_signal(p.doorbell.as_fd());
        }
        self.gids = gids;
    }

    fn accept(&mut self) {
        loop {
            let sock = match sys::accept(self.listener.as_fd()) {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    warn!("accept on the control socket failed: {e}");
                    return;
                }
            };
            let (pid, uid, _) = sys::peer_credentials(&sock).unwrap_or((0, u32::MAX, 0));
            // Only the daemon's own user (or root) may attach: applications share memory
            // with the daemon.
            let me = nix::unistd::geteuid().as_raw();
            if uid != me && uid != 0 {
                warn!("refused a connection from pid {pid} uid {uid}");
                continue;
            }
            let id = self.next_conn;
            self.next_conn += 1;
            let poller = (id as usize) % self.pollers.len().max(1);
            debug!("application pid {pid} connected (context {id}, poller {poller})");
            self.conns.insert(
                id,
                Conn {
                    sock,
                    pid,
                    poller,
                    hello: false,
                    events: None,
                    pds: HashSet::new(),
                    mrs: HashMap::new(),
                    mr_bytes: 0,
                    cqs: HashSet::new(),
                    qps: HashMap::new(),
                    srqs: HashMap::new(),
                    ahs: HashMap::new(),
                    post_bits: None,
                    bits: HashMap::new(),
                    free_bits: Vec::new(),
                    next_bit: 0,
                    warned: false,
                    parked: None,
                    resolved: None,
                },
            );
        }
    }

    fn serve(&mut self, id: u64) {
        let mut buf = vec![0u8; protocol::MAX_MESSAGE];
        let Some(conn) = self.conns.get(&id) else {
            return;
        };
        let received = sys::recv_message(conn.sock.as_fd(), &mut buf);
        let (n, fds) = match received {
            Ok((0, _)) => return self.hang_up(id),
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) => {
                debug!("context {id}: {e}; closing");
                return self.hang_up(id);
            }
        };
        match protocol::decode::<Request>(&buf[..n]) {
            Ok(request) => {
                let answer = self.handle(id, request.clone(), fds);
                self.answer(id, request, answer);
            }
            Err(e) => {
                let answer = error(libc::EINVAL, format!("undecodable request: {e}"));
                self.reply(id, answer);
            }
        }
    }

    /// Sends the answer to `request`, or parks the request when it waits for a
    /// destination to resolve.
    fn answer(&mut self, id: u64, request: Request, answer: Answer) {
        let Some(dgid) = self.parking.take() else {
            return self.reply(id, answer);
        };
        match self.start_resolution(id, dgid) {
            Ok(()) => {
                debug!("context {id}: waiting for {} to resolve", dgid.to_ip());
                if let Some(c) = self.conns.get_mut(&id) {
                    c.parked = Some(request);
                }
            }
            Err(e) => self.reply(
                id,
                error(libc::EAGAIN, format!("cannot start resolving a path: {e}")),
            ),
        }
    }

    /// Sends a reply and its descriptors.
    fn reply(&mut self, id: u64, (reply, out_fds): Answer) {
        let mut bytes = protocol::encode(&reply);
        if bytes.len() > protocol::MAX_MESSAGE {
            // The application could not receive it: say so instead.
            warn!("context {id}: a reply of {} bytes is too long", bytes.len());
            bytes = protocol::encode(&Reply::Error {
                errno: libc::E2BIG,
                message: "the reply would exceed a control message".into(),
            });
        }
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        if let Reply::Error { errno, message } = &reply
            && *errno == libc::ENOMEM
            && !conn.warned
        {
            // Once per application: one that loops on a refusal must not flood the log.
            conn.warned = true;
            warn!("application pid {} refused: {message}", conn.pid);
        }
        let borrowed: Vec<BorrowedFd<'_>> = out_fds.iter().map(|f| f.as_fd()).collect();
        if let Err(e) = sys::send_message(conn.sock.as_fd(), &bytes, &borrowed) {
            debug!("context {id}: reply failed: {e}; closing");
            self.hang_up(id);
        }
    }

    fn alloc_handle(&mut self) -> u32 {
        self.next_handle = self.next_handle.wrapping_add(1).max(1);
        self.next_handle
    }

    fn alloc_key(&mut self) -> u32 {
        let mut rng = rand::rng();
        loop {
            let k: u32 = rng.random();
            if k != 0 && self.keys.insert(k) {
                return k;
            }
        }
    }

    fn alloc_qpn(&mut self, poller: usize) -> Qpn {
        let n = self.pollers.len().max(1) as u32;
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

    fn handle(&mut self, id: u64, request: Request, fds: Vec<OwnedFd>) -> Answer {
        let hello = self.conns.get(&id).is_some_and(|c| c.hello);
        if !hello && !matches!(request, Request::Hello { .. }) {
            return error(libc::EPROTO, "the first request must be Hello");
        }
        match request {
            Request::Hello { version } => self.hello(id, version),
            Request::QueryDevice => ok(Reply::Device(self.device_attr())),
            Request::QueryPort => ok(Reply::Port(self.port_attr())),
            Request::AllocPd => {
                let max = self.limits.max_pds;
                if self.conn(id).pds.len() >= max {
                    return over_limit(max, ("protection domain", "protection domains"), "max-pds");
                }
                let pd = self.alloc_handle();
                self.conn(id).pds.insert(pd);
                ok(Reply::Pd { pd })
            }
            Request::DeallocPd { pd } => self.dealloc_pd(id, pd),
            Request::RegMr {
                pd,
                iova,
                length,
                access,
                offset,
            } => {
                let memory = Memory::File { offset };
                self.put_mr(id, None, pd, iova, length, access, memory, fds)
            }
            Request::RegMrPieces {
                pd,
                iova,
                length,
                access,
                start,
                pieces,
            } => {
                let memory = Memory::Pieces { start, pieces };
                self.put_mr(id, None, pd, iova, length, access, memory, fds)
            }
            Request::ReregMr {
                mr,
                pd,
                iova,
                length,
                access,
                start,
                pieces,
            } => {
                let memory = Memory::Pieces { start, pieces };
                self.put_mr(id, Some(mr), pd, iova, length, access, memory, fds)
            }
            Request::DeregMr { mr } => {
                let Some(info) = self.conn(id).mrs.remove(&mr) else {
                    return error(libc::EINVAL, "no such memory region");
                };
                let c = self.conn(id);
                c.mr_bytes -= info.len;
                let poller = c.poller;
                self.pollers[poller].call(|tx| Command::DeregMr(info.lkey, tx));
                // Keys are drawn at random, so one freed here is as unlikely as any other
                // to come back; keeping them all would grow without bound.
                self.keys.remove(&info.lkey);
                self.keys.remove(&info.rkey);
                ok(Reply::Done)
            }
            Request::CreateCq { entries, channel } => self.create_cq(id, entries, channel, fds),
            Request::DestroyCq { cq } => {
                if !self.conn(id).cqs.contains(&cq) {
                    return error(libc::EINVAL, "no such completion queue");
                }
                let poller = self.conn(id).poller;
                match self.pollers[poller].call(|tx| Command::DestroyCq(cq, tx)) {
                    Some(Ok(())) => {
                        self.conn(id).cqs.remove(&cq);
                        ok(Reply::Done)
                    }
                    Some(Err(e)) => error(e, "the completion queue is still used by a QP"),
                    None => error(libc::EIO, "the poller stopped"),
                }
            }
            Request::CreateSrq {
                pd,
                max_wr,
                max_sge,
                limit,
            } => self.create_srq(id, pd, max_wr, max_sge, limit),
            Request::ModifySrq { srq, limit } => {
                if !self.conn(id).srqs.contains_key(&srq) {
                    return error(libc::EINVAL, "no such shared receive queue");
                }
                let poller = self.conn(id).poller;
                match self.pollers[poller].call(|tx| Command::ModifySrq(srq, limit, tx)) {
                    Some(Ok(a)) => ok(Reply::SrqAttr {
                        max_wr: a.max_wr,
                        max_sge: a.max_sge,
                        limit: a.srq_limit,
                    }),
                    Some(Err(e)) => error(e, "srq_limit is larger than max_wr"),
                    None => error(libc::EIO, "the poller stopped"),
                }
            }
            Request::QuerySrq { srq } => {
                if !self.conn(id).srqs.contains_key(&srq) {
                    return error(libc::EINVAL, "no such shared receive queue");
                }
                let poller = self.conn(id).poller;
                match self.pollers[poller].call(|tx| Command::QuerySrq(srq, tx)) {
                    Some(Ok(a)) => ok(Reply::SrqAttr {
                        max_wr: a.max_wr,
                        max_sge: a.max_sge,
                        limit: a.srq_limit,
                    }),
                    _ => error(libc::EINVAL, "no such shared receive queue"),
                }
            }
            Request::DestroySrq { srq } => {
                if !self.conn(id).srqs.contains_key(&srq) {
                    return error(libc::EINVAL, "no such shared receive queue");
                }
                let poller = self.conn(id).poller;
                match self.pollers[poller].call(|tx| Command::DestroySrq(srq, tx)) {
                    Some(Ok(())) => {
                        let c = self.conn(id);
                        c.srqs.remove(&srq);
                        c.release_bit(srq);
                        ok(Reply::Done)
                    }
                    Some(Err(e)) => error(e, "the shared receive queue is still attached to a QP"),
                    None => error(libc::EIO, "the poller stopped"),
                }
            }
            Request::CreateQp {
                pd,
                qp_type,
                send_cq,
                recv_cq,
                srq,
                caps,
                sq_sig_all,
            } => self.create_qp(id, pd, qp_type, send_cq, recv_cq, srq, caps, sq_sig_all),
            Request::ModifyQp { qp, attr, mask } => self.modify_qp(id, qp, &attr, mask),
            Request::QueryQp { qp } => {
                let Some(info) = self.conn(id).qps.get(&qp) else {
                    return error(libc::EINVAL, "no such queue pair");
                };
                let (qpn, caps) = (info.qpn, info.caps);
                let poller = self.conn(id).poller;
                match self.pollers[poller]
                    .call(|tx| Command::QueryQp(qpn, tx))
                    .flatten()
                {
                    Some(a) => ok(Reply::QpAttr {
                        attr: to_wire_attr(&a),
                        caps,
                    }),
                    None => error(libc::EINVAL, "no such queue pair"),
                }
            }
            Request::DestroyQp { qp } => {
                let Some(info) = self.conn(id).qps.remove(&qp) else {
                    return error(libc::EINVAL, "no such queue pair");
                };
                let poller = self.conn(id).poller;
                self.pollers[poller].call(|tx| Command::DestroyQp(info.qpn, tx));
                self.conn(id).release_bit(qp);
                self.qpns.remove(&info.qpn.value());
                ok(Reply::Done)
            }
            Request::CreateAh { pd, attr } => self.create_ah(id, pd, &attr),
            Request::DestroyAh { ah } => {
                if self.conn(id).ahs.remove(&ah).is_none() {
                    return error(libc::EINVAL, "no such address handle");
                }
                let poller = self.conn(id).poller;
                self.pollers[poller].call(|tx| Command::DestroyAh(ah, tx));
                ok(Reply::Done)
            }
            Request::Stats => ok(Reply::Stats {
                counters: self.stats(),
            }),
            Request::QpStats => {
                let qps = self.qp_stats(0, usize::MAX);
                let n = qps.len();
                let reply = Reply::QpStats { qps };
                if protocol::encode(&reply).len() > protocol::MAX_MESSAGE {
                    return error(
                        libc::E2BIG,
                        format!(
                            "the {n} queue pairs do not fit one reply: this client is older than the daemon (it does not ask page by page); update it"
                        ),
                    );
                }
                ok(reply)
            }
            Request::QpStatsPage { from_qpn } => {
                let rest = self.qp_stats(from_qpn, PAGE_MOST);
                let n = protocol::page_len(&rest, protocol::PAGE_BYTES);
                // More may follow when this page stopped short of what the pollers gave,
                // or they gave as many as asked.
                let more = n < rest.len() || rest.len() == PAGE_MOST;
                let next = more.then(|| rest[n - 1].qpn + 1);
                let reply = Reply::QpStatsPage {
                    qps: rest[..n].to_vec(),
                    next,
                };
                if protocol::encode(&reply).len() > protocol::MAX_MESSAGE {
                    return error(libc::E2BIG, "one queue pair's counters exceed a message");
                }
                ok(reply)
            }
            Request::Cm(_) => error(libc::EOPNOTSUPP, "rdma_cm is not served by this daemon"),
        }
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

    /// `ibv_dealloc_pd`: refused with `EBUSY` while any QP, MR, SRQ or AH of the
    /// application uses the PD (the kernel's uverbs refuses so too, `ib_destroy_usecnt`);
    /// nothing changes then.
    fn dealloc_pd(&mut self, id: u64, pd: u32) -> Answer {
        let c = self.conn(id);
        if !c.pds.contains(&pd) {
            return error(libc::EINVAL, "no such protection domain");
        }
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
            return error(
                libc::EBUSY,
                format!(
                    "the protection domain is still used by {}: destroy them first",
                    busy.join(", ")
                ),
            );
        }
        c.pds.remove(&pd);
        ok(Reply::Done)
    }

    fn conn(&mut self, id: u64) -> &mut Conn {
        // NOTE(unwrap): handle() is only called for connections that exist.
        self.conns.get_mut(&id).expect("connection exists")
    }

    fn hello(&mut self, id: u64, version: u32) -> Answer {
        if self.conn(id).hello {
            // The objects made so far keep the first hello's event socket and post bits.
            return error(libc::EPROTO, "this connection has said hello already");
        }
        if version != contract::VERSION {
            return error(
                libc::EPROTO,
                format!(
                    "contract version {version} is not the daemon's {}",
                    contract::VERSION
                ),
            );
        }
        let (mine, theirs) = match nix::sys::socket::socketpair(
            nix::sys::socket::AddressFamily::Unix,
            nix::sys::socket::SockType::SeqPacket,
            None,
            nix::sys::socket::SockFlag::SOCK_CLOEXEC | nix::sys::socket::SockFlag::SOCK_NONBLOCK,
        ) {
            Ok(p) => p,
            Err(e) => return error(e as i32, "cannot create the event socket"),
        };
        let bits_len = contract::post_bits_bytes(self.pollers.len());
        let (bits_fd, bits_map) = match self.ring_memory(id, "xroce-post-bits", bits_len) {
            Ok(x) => x,
            Err((errno, message)) => return error(errno, message),
        };
        let mut fds = Vec::new();
        match self.wake_page.try_clone() {
            Ok(fd) => fds.push(fd),
            Err(e) => return error(libc::EMFILE, format!("cannot share the wake page: {e}")),
        }
        fds.push(theirs);
        for p in &self.pollers {
            match p.doorbell.try_clone() {
                Ok(fd) => fds.push(fd),
                Err(e) => return error(libc::EMFILE, format!("cannot share a doorbell: {e}")),
            }
        }
        fds.push(bits_fd);
        let c = self.conn(id);
        c.hello = true;
        c.events = Some(Arc::new(EventSink::new(mine)));
        c.post_bits = Some(bits_map);
        let reply = Reply::Hello {
            version: contract::VERSION,
            device: self.device.clone(),
            pollers: self.pollers.len() as u32,
        };
        (reply, fds)
    }

    fn device_attr(&mut self) -> DeviceAttr {
        let port = self.host.port();
        let guid = node_guid(port.mac);
        DeviceAttr {
            fw_ver: env!("CARGO_PKG_VERSION").to_owned(),
            node_guid: guid,
            sys_image_guid: guid,
            max_mr_size: self.limits.max_mr_bytes,
            page_size_cap: 0xffff_f000,
            // rxe reports 0xffffff (no IEEE OUI of its own), so do we: non-zero as verbs
            // consumers expect, and unknown to perftest, which then keeps its generic path.
            vendor_id: 0xff_ffff,
            vendor_part_id: 0,
            hw_ver: 0,
            max_qp: reported(self.limits.max_qps),
            max_qp_wr: MAX_QUEUE,
            // IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_N_NOTIFY_CQ (bit 15 is no ibv flag).
            device_cap_flags: (1 << 12) | (1 << 14),
            max_sge: contract::MAX_SGE as u32,
            max_cq: reported(self.limits.max_cqs),
            max_cqe: MAX_QUEUE,
            max_mr: reported(self.limits.max_mrs),
            max_pd: reported(self.limits.max_pds),
            max_qp_rd_atom: u32::from(MAX_RD_ATOMIC),
            max_res_rd_atom: reported(
                usize::from(MAX_RD_ATOMIC).saturating_mul(self.limits.max_qps),
            ),
            max_qp_init_rd_atom: u32::from(MAX_RD_ATOMIC),
            // IBV_ATOMIC_HCA: atomic with respect to this device.
            atomic_cap: 1,
            max_srq: reported(self.limits.max_srqs),
            max_srq_wr: MAX_QUEUE,
            max_srq_sge: contract::MAX_SGE as u32,
            max_ah: reported(self.limits.max_ahs),
            max_pkeys: 1,
            max_inline_data: contract::MAX_INLINE as u32,
        }
    }

    fn port_attr(&mut self) -> PortAttr {
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

    /// `ibv_reg_mr` (a new region, handle and keys) and, with `existing`, `ibv_rereg_mr`:
    /// the region behind that handle is replaced in one step on its poller, keeping the
    /// handle and keys (as verbs does).
    #[allow(clippy::too_many_arguments)]
    fn put_mr(
        &mut self,
        id: u64,
        existing: Option<u32>,
        pd: u32,
        iova: u64,
        length: u64,
        access: u32,
        memory: Memory,
        fds: Vec<OwnedFd>,
    ) -> Answer {
        let max_bytes = self.limits.max_mr_bytes;
        let max_mrs = self.limits.max_mrs;
        let c = self.conn(id);
        let old = match existing {
            Some(mr) => match c.mrs.get(&mr) {
                Some(&info) => Some((mr, info)),
                None => return error(libc::EINVAL, "no such memory region"),
            },
            None if c.mrs.len() >= max_mrs => {
                return over_limit(max_mrs, ("memory region", "memory regions"), "max-mrs");
            }
            None => None,
        };
        if !c.pds.contains(&pd) {
            return error(libc::EINVAL, "no such protection domain");
        }
        if length == 0 {
            return error(libc::EINVAL, "a memory region needs at least one byte");
        }
        let replaced = old.map_or(0, |(_, info)| info.len);
        let bytes = (c.mr_bytes - replaced).saturating_add(length);
        if bytes > max_bytes {
            return error(
                libc::ENOMEM,
                format!(
                    "{bytes} bytes of registered memory would exceed this application's limit of {max_bytes} ({} MiB; raise it with xroced --max-mr-mib, or `max_mr_mib = ...` in xroced's configuration file)",
                    max_bytes >> 20
                ),
            );
        }
        let areas = match &memory {
            Memory::File { .. } => 1,
            Memory::Pieces { pieces, .. } => pieces.len(),
        };
        if let Some((errno, message)) = self.map_refusal(id, areas) {
            return error(errno, message);
        }
        let (map, start) = match Self::map_region(fds, memory, length) {
            Ok(m) => m,
            Err(answer) => return answer,
        };
        let (handle, lkey, rkey) = match old {
            Some((mr, info)) => (mr, info.lkey, info.rkey),
            None => (self.alloc_handle(), self.alloc_key(), self.alloc_key()),
        };
        let region = Region {
            map,
            start,
            iova,
            len: length,
            access: Access::from_bits(access),
            pd: PdId(pd),
            lkey,
            rkey: Some(rkey),
        };
        let poller = self.conn(id).poller;
        let answer = if old.is_some() {
            self.pollers[poller].call(|tx| Command::ReregMr(region, tx))
        } else {
            self.pollers[poller].call(|tx| Command::RegMr(region, tx))
        };
        let refused = match answer {
            Some(Ok(())) => None,
            Some(Err(e)) => Some(error(libc::EINVAL, e)),
            None => Some(error(libc::EIO, "the poller stopped")),
        };
        if let Some(answer) = refused {
            if old.is_none() {
                self.keys.remove(&lkey);
                self.keys.remove(&rkey);
            }
            return answer;
        }
        let c = self.conn(id);
        c.mrs.insert(
            handle,
            MrInfo {
                lkey,
                rkey,
                len: length,
                areas,
                pd,
            },
        );
        c.mr_bytes = bytes;
        ok(Reply::Mr {
            mr: handle,
            lkey,
            rkey,
        })
    }

    /// Maps the memory behind a region of `length` bytes: the mapping and where the
    /// region starts in it.
    #[allow(clippy::result_large_err)]
    fn map_region(
        fds: Vec<OwnedFd>,
        memory: Memory,
        length: u64,
    ) -> Result<(Arc<Mapping>, usize), Answer> {
        match memory {
            Memory::File { offset } => Self::map_file(fds, offset, length),
            Memory::Pieces { start, pieces } => Self::map_pieces(fds, start, &pieces, length),
        }
    }

    /// `length` bytes at `offset` of the one memory file in `fds`.
    #[allow(clippy::result_large_err)]
    fn map_file(
        mut fds: Vec<OwnedFd>,
        offset: u64,
        length: u64,
    ) -> Result<(Arc<Mapping>, usize), Answer> {
        if fds.len() != 1 {
            return Err(error(
                libc::EINVAL,
                "registering memory needs exactly one memory file",
            ));
        }
        let fd = fds.remove(0);
        let size = match sys::sealed_size(&fd) {
            Ok(s) => s,
            Err(e) => return Err(error(libc::EINVAL, format!("memory file refused: {e}"))),
        };
        if offset.checked_add(length).is_none_or(|end| end > size) {
            return Err(error(
                libc::EINVAL,
                "the region lies outside its memory file",
            ));
        }
        let page = sys::PAGE_SIZE as u64;
        let map_offset = offset - offset % page;
        let delta = offset - map_offset;
        let map_len = (delta + length).div_ceil(page) * page;
        let map_len = map_len.min(size - map_offset);
        match Mapping::map(fd.as_fd(), map_len as usize, map_offset, true) {
            Ok(m) => Ok((Arc::new(m), delta as usize)),
            Err(e) => Err(error(libc::ENOMEM, format!("cannot map the region: {e}"))),
        }
    }

    /// `length` bytes from `start` bytes into `pieces` (whole pages of the memory files in
    /// `fds`, one each), mapped side by side.
    #[allow(clippy::result_large_err)]
    fn map_pieces(
        fds: Vec<OwnedFd>,
        start: u64,
        pieces: &[Piece],
        length: u64,
    ) -> Result<(Arc<Mapping>, usize), Answer> {
        if pieces.is_empty() || pieces.len() > sys::MAX_FDS || fds.len() != pieces.len() {
            return Err(error(
                libc::EINVAL,
                format!(
                    "a region needs 1 to {} pieces, each with its memory file",
                    sys::MAX_FDS
                ),
            ));
        }
        let page = sys::PAGE_SIZE as u64;
        let mut total = 0u64;
        let mut parts = Vec::with_capacity(pieces.len());
        for (fd, p) in fds.iter().zip(pieces) {
            if p.len == 0 || !p.offset.is_multiple_of(page) || !p.len.is_multiple_of(page) {
                return Err(error(libc::EINVAL, "pieces are whole pages"));
            }
            let size = match sys::sealed_size(fd) {
                Ok(s) => s,
                Err(e) => return Err(error(libc::EINVAL, format!("memory file refused: {e}"))),
            };
            if p.offset.checked_add(p.len).is_none_or(|end| end > size) {
                return Err(error(libc::EINVAL, "a piece lies outside its memory file"));
            }
            let (Ok(len), Some(sum)) = (usize::try_from(p.len), total.checked_add(p.len)) else {
                return Err(error(libc::EINVAL, "the pieces are too long"));
            };
            total = sum;
            parts.push((fd.as_fd(), p.offset, len));
        }
        if start.checked_add(length).is_none_or(|end| end > total) {
            return Err(error(libc::EINVAL, "the region lies outside its pieces"));
        }
        match Mapping::map_pieces(&parts, true) {
            Ok(m) => Ok((Arc::new(m), start as usize)),
            Err(e) => Err(error(libc::ENOMEM, format!("cannot map the region: {e}"))),
        }
    }

    fn ring_memory(
        &self,
        id: u64,
        name: &str,
        len: usize,
    ) -> Result<(OwnedFd, Arc<Mapping>), (i32, String)> {
        if let Some(refusal) = self.map_refusal(id, 1) {
            return Err(refusal);
        }
        let fd = sys::memfd(name, len, false)
            .map_err(|e| (libc::ENOMEM, format!("cannot create ring memory: {e}")))?;
        let map = Mapping::map(fd.as_fd(), len, 0, true)
            .map_err(|e| (libc::ENOMEM, format!("cannot map ring memory: {e}")))?;
        Ok((fd, Arc::new(map)))
    }

    fn create_cq(&mut self, id: u64, entries: u32, channel: bool, mut fds: Vec<OwnedFd>) -> Answer {
        let max = self.limits.max_cqs;
        if self.conn(id).cqs.len() >= max {
            return over_limit(max, ("completion queue", "completion queues"), "max-cqs");
        }
        if entries == 0 || entries > MAX_QUEUE {
            return error(
                libc::EINVAL,
                format!("a completion queue holds 1 to {MAX_QUEUE} entries"),
            );
        }
        let channel = if channel {
            if fds.len() != 1 {
                return error(
                    libc::EINVAL,
                    "a completion channel socket must come with CreateCq",
                );
            }
            let fd = fds.remove(0);
            let is_socket = nix::sys::stat::fstat(&fd)
                .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFSOCK);
            if !is_socket {
                return error(libc::EINVAL, "a completion channel must be a socket");
            }
            Some(Arc::new(fd))
        } else {
            None
        };
        let entries = entries.next_power_of_two();
        let len = ring_bytes(entries, size_of::<Cqe>());
        let (fd, map) = match self.ring_memory(id, "xroce-cq", len) {
            Ok(x) => x,
            Err((errno, message)) => return error(errno, message),
        };
        let Ok(ring) = Ring::<Cqe>::new(map, 0, entries) else {
            return error(libc::EINVAL, "bad completion queue geometry");
        };
        let handle = self.alloc_handle();
        let c = self.conn(id);
        let Some(events) = c.events.clone() else {
            return error(libc::EPROTO, "no event socket");
        };
        let poller = c.poller;
        let setup = CqSetup {
            handle,
            ring: Producer::new(ring),
            channel,
            events,
        };
        if self.pollers[poller]
            .call(|tx| Command::CreateCq(Box::new(setup), tx))
            .is_none()
        {
            return error(libc::EIO, "the poller stopped");
        }
        self.conn(id).cqs.insert(handle);
        (
            Reply::Cq {
                cq: handle,
                entries,
                ring_len: len as u64,
            },
            vec![fd],
        )
    }

    fn create_srq(&mut self, id: u64, pd: u32, max_wr: u32, max_sge: u32, limit: u32) -> Answer {
        let max = self.limits.max_srqs;
        if self.conn(id).srqs.len() >= max {
            return over_limit(
                max,
                ("shared receive queue", "shared receive queues"),
                "max-srqs",
            );
        }
        if !self.conn(id).pds.contains(&pd) {
            return error(libc::EINVAL, "no such protection domain");
        }
        if max_wr == 0 || max_wr > MAX_QUEUE || max_sge as usize > contract::MAX_SGE {
            return error(
                libc::EINVAL,
                format!(
                    "an SRQ holds 1 to {MAX_QUEUE} work requests of up to {} SGEs",
                    contract::MAX_SGE
                ),
            );
        }
        let entries = max_wr.next_power_of_two();
        let len = ring_bytes(entries, size_of::<RecvWqe>());
        let (fd, map) = match self.ring_memory(id, "xroce-srq", len) {
            Ok(x) => x,
            Err((errno, message)) => return error(errno, message),
        };
        let Ok(ring) = Ring::<RecvWqe>::new(map, 0, entries) else {
            return error(libc::EINVAL, "bad SRQ geometry");
        };
        let handle = self.alloc_handle();
        let c = self.conn(id);
        let Some(events) = c.events.clone() else {
            return error(libc::EPROTO, "no event socket");
        };
        let poller = c.poller;
        let attr = SrqAttr {
            max_wr: entries,
            max_sge: max_sge.max(1),
            srq_limit: limit.min(entries),
        };
        let post_bit = self.conn(id).take_bit(handle);
        let bit = post_bit.as_ref().map(|b| b.bit);
        let setup = SrqSetup {
            handle,
            pd: PdId(pd),
            attr,
            ring,
            events,
            post_bit,
        };
        match self.pollers[poller].call(|tx| Command::CreateSrq(Box::new(setup), tx)) {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                self.conn(id).release_bit(handle);
                return error(libc::EINVAL, e);
            }
            None => return error(libc::EIO, "the poller stopped"),
        }
        self.conn(id).srqs.insert(handle, PdId(pd));
        let reply = Reply::Srq {
            srq: handle,
            max_wr: entries,
            max_sge: attr.max_sge,
            entries,
            ring_len: len as u64,
            poller: poller as u32,
            post_bit: bit,
        };
        (reply, vec![fd])
    }

    #[allow(clippy::too_many_arguments)]
    fn create_qp(
        &mut self,
        id: u64,
        pd: u32,
        qp_type: u32,
        send_cq: u32,
        recv_cq: u32,
        srq: Option<u32>,
        caps: QpCaps,
        sq_sig_all: bool,
    ) -> Answer {
        let max_qps = self.limits.max_qps;
        let c = self.conn(id);
        if c.qps.len() >= max_qps {
            return over_limit(max_qps, ("queue pair", "queue pairs"), "max-qps");
        }
        if !c.pds.contains(&pd) {
            return error(libc::EINVAL, "no such protection domain");
        }
        if !c.cqs.contains(&send_cq) || !c.cqs.contains(&recv_cq) {
            return error(libc::EINVAL, "no such completion queue");
        }
        if let Some(s) = srq {
            match c.srqs.get(&s) {
                Some(p) if p.0 == pd => {}
                Some(_) => {
                    return error(libc::EINVAL, "the SRQ belongs to another protection domain");
                }
                None => return error(libc::EINVAL, "no such shared receive queue"),
            }
        }
        let qp_type = match qp_type {
            2 => QpType::Rc,
            3 => QpType::Uc,
            4 => QpType::Ud,
            t => {
                return error(
                    libc::EOPNOTSUPP,
                    format!("QP type {t} is not supported (RC, UC, UD are)"),
                );
            }
        };
        if caps.max_send_wr > MAX_QUEUE || caps.max_recv_wr > MAX_QUEUE {
            return error(
                libc::EINVAL,
                format!("queues hold at most {MAX_QUEUE} work requests"),
            );
        }
        if caps.max_send_sge as usize > contract::MAX_SGE
            || caps.max_recv_sge as usize > contract::MAX_SGE
        {
            return error(
                libc::EINVAL,
                format!("at most {} scatter/gather elements", contract::MAX_SGE),
            );
        }
        if caps.max_inline_data as usize > contract::MAX_INLINE {
            return error(
                libc::EINVAL,
                format!("at most {} bytes of inline data", contract::MAX_INLINE),
            );
        }
        let sq_entries = caps.max_send_wr.max(1).next_power_of_two();
        let rq_entries = if srq.is_some() {
            0
        } else {
            caps.max_recv_wr.max(1).next_power_of_two()
        };
        let sq_len = ring_bytes(sq_entries, size_of::<SendWqe>());
        let rq_offset = sq_len.div_ceil(4096) * 4096;
        let len = rq_offset
            + if rq_entries > 0 {
                ring_bytes(rq_entries, size_of::<RecvWqe>())
            } else {
                0
            };
        let (fd, map) = match self.ring_memory(id, "xroce-qp", len) {
            Ok(x) => x,
            Err((errno, message)) => return error(errno, message),
        };
        let Ok(sq) = Ring::<SendWqe>::new(map.clone(), 0, sq_entries) else {
            return error(libc::EINVAL, "bad send queue geometry");
        };
        let rq = if rq_entries > 0 {
            let Ok(rq) = Ring::<RecvWqe>::new(map, rq_offset, rq_entries) else {
                return error(libc::EINVAL, "bad receive queue geometry");
            };
            Some(rq)
        } else {
            None
        };
        let granted = QpCaps {
            max_send_wr: sq_entries,
            max_recv_wr: rq_entries,
            max_send_sge: caps.max_send_sge.max(1),
            max_recv_sge: if srq.is_some() {
                0
            } else {
                caps.max_recv_sge.max(1)
            },
            max_inline_data: caps.max_inline_data,
        };
        let Some(events) = self.conn(id).events.clone() else {
            return error(libc::EPROTO, "no event socket");
        };
        let poller = self.conn(id).poller;
        let qpn = self.alloc_qpn(poller);
        let handle = self.alloc_handle();
        let active = self.host.port().active_mtu;
        let config = QpConfig {
            qpn,
            qp_type,
            pd: PdId(pd),
            caps: xroce_transport::QpCaps {
                max_send_wr: granted.max_send_wr,
                max_recv_wr: granted.max_recv_wr,
                max_send_sge: granted.max_send_sge,
                max_recv_sge: granted.max_recv_sge,
                max_inline_data: granted.max_inline_data,
            },
            srq: srq.map(SrqId),
            sq_sig_all,
            limits: Limits {
                max_mtu: active,
                max_rd_atomic: MAX_RD_ATOMIC,
                ..Limits::default()
            },
        };
        let post_bit = self.conn(id).take_bit(handle);
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
        match self.pollers[poller].call(|tx| Command::CreateQp(Box::new(setup), tx)) {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                self.conn(id).release_bit(handle);
                self.qpns.remove(&qpn.value());
                return error(libc::EINVAL, e);
            }
            None => return error(libc::EIO, "the poller stopped"),
        }
        self.conn(id).qps.insert(
            handle,
            QpInfo {
                qpn,
                caps: granted,
                pd,
            },
        );
        let reply = Reply::Qp {
            qp: handle,
            qpn: qpn.value(),
            caps: granted,
            sq_entries,
            rq_entries,
            rq_offset: rq_offset as u64,
            ring_len: len as u64,
            poller: poller as u32,
            post_bit: bit,
        };
        (reply, vec![fd])
    }

    /// The path to `ah`'s destination. When its next hop is not known yet, the request
    /// waits for it without holding up other applications: `parking` is set and the
    /// request is handled again once the resolution ended (its outcome then waits in the
    /// connection's `resolved`).
    fn path(&mut self, id: u64, ah: &AhAttr) -> Result<Path, (i32, String)> {
        let dgid = Gid(ah.dgid);
        let port = self.host.port();
        if usize::from(ah.sgid_index) >= port.gids.len() {
            return Err((libc::EINVAL, format!("no GID at index {}", ah.sgid_index)));
        }
        let known = match self.conn(id).resolved.take() {
            Some((gid, outcome)) if gid == dgid => outcome,
            _ => match self.host.lookup(dgid) {
                Neighbour::Mac(mac) => Ok(mac),
                Neighbour::Unreachable(e) => Err(e),
                Neighbour::Pending => {
                    self.parking = Some(dgid);
                    return Err((libc::EINPROGRESS, "resolving".into()));
                }
            },
        };
        let dmac = known.map_err(|e| {
            (
                libc::EHOSTUNREACH,
                format!("cannot reach {}: {e}", dgid.to_ip()),
            )
        })?;
        Ok(Path {
            dgid,
            sgid_index: ah.sgid_index,
            dmac,
            traffic_class: ah.traffic_class,
            flow_label: ah.flow_label,
            // The kernel's RDMA core replaces the hop limit of every RoCE unicast address
            // vector with the route's (`ib_resolve_unicast_gid_dmac`), so rxe sends TTL 64
            // even when `ibv_rc_pingpong` asks for 1; we do too.
            hop_limit: ROCE_HOP_LIMIT,
            udp_sport: 0,
            vlan: None,
        })
    }

    fn modify_qp(&mut self, id: u64, qp: u32, attr: &WireQpAttr, mask: u32) -> Answer {
        let Some(info) = self.conn(id).qps.get(&qp) else {
            return error(libc::EINVAL, "no such queue pair");
        };
        let qpn = info.qpn;
        let mask = AttrMask(mask);
        let mut t = match from_wire_attr(attr, mask) {
            Ok(t) => t,
            Err(e) => return error(libc::EINVAL, e),
        };
        if mask.contains(AttrMask::AV) {
            match self.path(id, &attr.ah_attr) {
                Ok(p) => t.path = p,
                Err((errno, message)) => return error(errno, message),
            }
        }
        let poller = self.conn(id).poller;
        match self.pollers[poller].call(|tx| Command::ModifyQp(qpn, Box::new(t), mask, tx)) {
            Some(Ok(())) => ok(Reply::Done),
            Some(Err(e)) => error(libc::EINVAL, e),
            None => error(libc::EIO, "the poller stopped"),
        }
    }

    fn create_ah(&mut self, id: u64, pd: u32, attr: &AhAttr) -> Answer {
        let max = self.limits.max_ahs;
        if self.conn(id).ahs.len() >= max {
            return over_limit(max, ("address handle", "address handles"), "max-ahs");
        }
        if !self.conn(id).pds.contains(&pd) {
            return error(libc::EINVAL, "no such protection domain");
        }
        let path = match self.path(id, attr) {
            Ok(p) => p,
            Err((errno, message)) => return error(errno, message),
        };
        let handle = self.alloc_handle();
        let poller = self.conn(id).poller;
        if self.pollers[poller]
            .call(|tx| Command::CreateAh(handle, PdId(pd), path, tx))
            .is_none()
        {
            return error(libc::EIO, "the poller stopped");
        }
        self.conn(id).ahs.insert(handle, PdId(pd));
        ok(Reply::Ah { ah: handle })
    }

    fn stats(&self) -> Vec<(String, u64)> {
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
        // mapped memory areas (see `map_refusal`) is in use.
        daemon.push(("applications".to_owned(), self.conns.len() as u64));
        daemon.push(("mapped_areas".to_owned(), sys::live_mapping_areas() as u64));
        daemon.push(("mapped_area_budget".to_owned(), self.map_budget as u64));
        daemon
    }

    /// An application went away: destroy everything it owned.
    fn hang_up(&mut self, id: u64) {
        let Some(c) = self.conns.remove(&id) else {
            return;
        };
        let link = &self.pollers[c.poller];
        let (qps, srqs, cqs, mrs, ahs) = (
            c.qps.len(),
            c.srqs.len(),
            c.cqs.len(),
            c.mrs.len(),
            c.ahs.len(),
        );
        for (_, qp) in c.qps {
            link.call(|tx| Command::DestroyQp(qp.qpn, tx));
            self.qpns.remove(&qp.qpn.value());
        }
        for srq in c.srqs.keys() {
            link.call(|tx| Command::DestroySrq(*srq, tx));
        }
        for cq in c.cqs {
            link.call(|tx| Command::DestroyCq(cq, tx));
        }
        for (_, mr) in c.mrs {
            link.call(|tx| Command::DeregMr(mr.lkey, tx));
            self.keys.remove(&mr.lkey);
            self.keys.remove(&mr.rkey);
        }
        for ah in c.ahs.keys() {
            link.call(|tx| Command::DestroyAh(*ah, tx));
        }
        info!(
            "application pid {} (context {id}) went away: released {qps} QPs, {srqs} SRQs, {cqs} CQs, {mrs} MRs, {ahs} AHs",
            c.pid
        );
    }
}

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

/// Converts protocol QP attributes into the transport's, checking every value a mask bit
/// names.
fn from_wire_attr(a: &WireQpAttr, mask: AttrMask) -> Result<QpAttr, String> {
    let state = |v: u32| QpState::from_raw(v).ok_or_else(|| format!("invalid QP state {v}"));
    let mut t = QpAttr::default();
    if mask.contains(AttrMask::STATE) {
        t.qp_state = state(a.qp_state)?;
    }
    if mask.contains(AttrMask::CUR_STATE) {
        t.cur_qp_state = state(a.cur_qp_state)?;
    }
    if mask.contains(AttrMask::PATH_MTU) {
        t.path_mtu = u8::try_from(a.path_mtu)
            .ok()
            .and_then(IbMtu::from_code)
            .ok_or_else(|| format!("invalid path MTU code {}", a.path_mtu))?;
    }
    if mask.contains(AttrMask::DEST_QPN) {
        t.dest_qpn = Qpn::checked(a.dest_qp_num).ok_or_else(|| {
            format!(
                "destination QP number {:#x} is larger than 24 bits",
                a.dest_qp_num
            )
        })?;
    }
    for (bit, value, name) in [
        (AttrMask::RQ_PSN, a.rq_psn, "rq_psn"),
        (AttrMask::SQ_PSN, a.sq_psn, "sq_psn"),
    ] {
        if mask.contains(bit) && value > Psn::MASK {
            return Err(format!("{name} {value:#x} is larger than 24 bits"));
        }
    }
    t.rq_psn = Psn::new(a.rq_psn);
    t.sq_psn = Psn::new(a.sq_psn);
    t.qkey = a.qkey;
    t.access = Access::from_bits(a.qp_access_flags);
    t.pkey_index = a.pkey_index;
    t.en_sqd_async_notify = a.en_sqd_async_notify;
    t.max_rd_atomic = a.max_rd_atomic;
    t.max_dest_rd_atomic = a.max_dest_rd_atomic;
    t.min_rnr_timer = a.min_rnr_timer;
    t.port_num = a.port_num;
    t.timeout = a.timeout;
    t.retry_cnt = a.retry_cnt;
    t.rnr_retry = a.rnr_retry;
    Ok(t)
}

/// Converts transport QP attributes into the protocol's (`ibv_query_qp`).
fn to_wire_attr(t: &QpAttr) -> WireQpAttr {
    WireQpAttr {
        qp_state: t.qp_state as u32,
        cur_qp_state: t.cur_qp_state as u32,
        path_mtu: u32::from(t.path_mtu.code()),
        qkey: t.qkey,
        rq_psn: t.rq_psn.value(),
        sq_psn: t.sq_psn.value(),
        dest_qp_num: t.dest_qpn.value(),
        qp_access_flags: t.access.bits(),
        ah_attr: AhAttr {
            dgid: t.path.dgid.0,
            flow_label: t.path.flow_label,
            sgid_index: t.path.sgid_index,
            hop_limit: t.path.hop_limit,
            traffic_class: t.path.traffic_class,
            sl: 0,
            is_global: true,
            port_num: 1,
        },
        pkey_index: t.pkey_index,
        en_sqd_async_notify: t.en_sqd_async_notify,
        sq_draining: false,
        max_rd_atomic: t.max_rd_atomic,
        max_dest_rd_atomic: t.max_dest_rd_atomic,
        min_rnr_timer: t.min_rnr_timer,
        port_num: t.port_num,
        timeout: t.timeout,
        retry_cnt: t.retry_cnt,
        rnr_retry: t.rnr_retry,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_guid_is_eui64() {
        assert_eq!(
            node_guid([0x52, 0x54, 0x00, 0x77, 0x00, 0x02]),
            0x5054_00ff_fe77_0002
        );
    }

    #[test]
    fn attributes_are_checked() {
        let a = WireQpAttr {
            qp_state: 9,
            ..Default::default()
        };
        assert!(from_wire_attr(&a, AttrMask::STATE).is_err());
        let a = WireQpAttr {
            dest_qp_num: 1 << 24,
            ..Default::default()
        };
        assert!(from_wire_attr(&a, AttrMask::DEST_QPN).is_err());
        let a = WireQpAttr {
            path_mtu: 6,
            ..Default::default()
        };
        assert!(from_wire_attr(&a, AttrMask::PATH_MTU).is_err());
        let a = WireQpAttr {
            path_mtu: 3,
            sq_psn: 0x123456,
            ..Default::default()
        };
        let t = from_wire_attr(&a, AttrMask::PATH_MTU | AttrMask::SQ_PSN).unwrap();
        assert_eq!((t.path_mtu, t.sq_psn), (IbMtu::Mtu1024, Psn::new(0x123456)));
    }
}
