//! A poller: one pinned thread that owns one AF_XDP port, one transport [`Endpoint`], the
//! memory regions, and the queue pairs, completion queues and shared receive queues of the
//! applications assigned to it.
//!
//! One loop, batched, with no lock and no allocation on the packet path:
//!
//! ```text
//! commands from the control thread (create/modify/destroy; rare)
//! RX batch        -> Endpoint::handle_frame          (ICRC, QP, copy into the MR)
//! SQ/RQ/SRQ rings -> Endpoint::post_send/post_recv   (copied out, validated)
//! timers          -> Endpoint::handle_timeout
//! Endpoint::poll_transmit -> TX frames               (headers + payload from the MR)
//! completions     -> CQ rings (+ completion channel), events -> the application
//! idle            -> spin, yield, then sleep on the socket, the doorbell and the timer
//! ```
//!
//! Frames the endpoint addresses to one of its own GIDs never reach the NIC: they are
//! delivered straight back to the endpoint (loopback), through exactly the same transport
//! code as frames from the wire.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering, fence};
use std::time::{Duration, Instant as StdInstant};

use crossbeam_channel::{Receiver as CmdReceiver, Sender};
use tracing::{debug, warn};
use verbs_shm::contract::{self, ARM_NEXT, ARM_NONE, ARM_SOLICITED, Cqe, RecvWqe, SendWqe};
use verbs_shm::protocol::{CompletionEvent, EventRecord, QpStat};
use verbs_shm::ring::{Producer, Ring, RingError};
use verbs_shm::sys::Mapping;
use xroce_transport::{
    AsyncEvent, AttrMask, Completion, CompletionQueue, Counters, Endpoint, Gather, Instant, Path,
    PdId, QpAttr, QpConfig, QpState, RecvWqe as TRecvWqe, SendFlags, SendOp, SendWqe as TSendWqe,
    Sge as TSge, SgeList, Srq, SrqAttr, SrqId, UdDest, WcFlags, WcOpcode, WcStatus,
};
use xroce_wire::Qpn;
use zerocopy::IntoBytes;

use crate::bells::{BellKey, Bells, FULL_SCAN_EVERY, PostBit, Target};
use crate::handoff::{Handoff, Sent};
use crate::memory::{MrTable, Region};
use crate::xsk::{Port, RX_BATCH};

/// `ibv_event_type` values the daemon raises.
pub mod event_type {
    /// `IBV_EVENT_CQ_ERR`.
    pub const CQ_ERR: u32 = 0;
    /// `IBV_EVENT_QP_FATAL`.
    pub const QP_FATAL: u32 = 1;
    /// `IBV_EVENT_QP_REQ_ERR`.
    pub const QP_REQ_ERR: u32 = 2;
    /// `IBV_EVENT_QP_ACCESS_ERR`.
    pub const QP_ACCESS_ERR: u32 = 3;
    /// `IBV_EVENT_COMM_EST`.
    pub const COMM_EST: u32 = 4;
    /// `IBV_EVENT_SQ_DRAINED`.
    pub const SQ_DRAINED: u32 = 5;
    /// `IBV_EVENT_SRQ_ERR`.
    pub const SRQ_ERR: u32 = 14;
    /// `IBV_EVENT_SRQ_LIMIT_REACHED`.
    pub const SRQ_LIMIT_REACHED: u32 = 15;
    /// `IBV_EVENT_QP_LAST_WQE_REACHED`.
    pub const QP_LAST_WQE_REACHED: u32 = 16;
}

/// Where an application's asynchronous events go.
#[derive(Debug)]
pub struct EventSink {
    sock: OwnedFd,
}

impl EventSink {
    /// Events are written to `sock` (the daemon's end of the application's event socket).
    pub fn new(sock: OwnedFd) -> EventSink {
        EventSink { sock }
    }

    fn raise(&self, event_type: u32, element: u32) {
        let record = EventRecord {
            event_type,
            element,
        };
        // Non-blocking: an application that never reads its events loses them, not us.
        let _ = nix::sys::socket::send(
            self.sock.as_raw_fd(),
            record.as_bytes(),
            nix::sys::socket::MsgFlags::MSG_DONTWAIT | nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
        );
    }
}

/// A request from the control thread, with the channel its answer goes back on.
#[derive(Debug)]
pub enum Command {
    /// Registers a memory region.
    RegMr(Region, Sender<Result<(), String>>),
    /// Removes a memory region (by lkey).
    DeregMr(u32, Sender<()>),
    /// Replaces the memory region with the same lkey (`ibv_rereg_mr`); the old one stays
    /// if the new one cannot be added.
    ReregMr(Region, Sender<Result<(), String>>),
    /// Adds a completion queue.
    CreateCq(Box<CqSetup>, Sender<()>),
    /// Removes a completion queue.
    DestroyCq(u32, Sender<Result<(), i32>>),
    /// Adds a shared receive queue.
    CreateSrq(Box<SrqSetup>, Sender<Result<(), String>>),
    /// Arms an SRQ's limit.
    ModifySrq(u32, u32, Sender<Result<SrqAttr, i32>>),
    /// Reads an SRQ's attributes.
    QuerySrq(u32, Sender<Result<SrqAttr, i32>>),
    /// Removes a shared receive queue.
    DestroySrq(u32, Sender<Result<(), i32>>),
    /// Adds a queue pair (in RESET).
    CreateQp(Box<QpSetup>, Sender<Result<(), String>>),
    /// Modifies a queue pair.
    ModifyQp(Qpn, Box<QpAttr>, AttrMask, Sender<Result<(), String>>),
    /// Reads a queue pair's attributes.
    QueryQp(Qpn, Sender<Option<QpAttr>>),
    /// Removes a queue pair.
    DestroyQp(Qpn, Sender<()>),
    /// Adds an address handle.
    CreateAh(u32, PdId, Path, Sender<()>),
    /// Removes an address handle.
    DestroyAh(u32, Sender<()>),
    /// Reads the counters.
    Stats(Sender<PollerStats>),
    /// The state and counters of the QPs numbered `from` or more: the first `most` of
    /// them by QP number.
    QpStats {
        /// The smallest QP number wanted.
        from: u32,
        /// How many at most.
        most: usize,
        /// Where the answer goes.
        reply: Sender<Vec<QpStat>>,
    },
    /// Replaces the GID table.
    SetGids(Vec<xroce_wire::Gid>),
    /// Stops the poller.
    Stop,
}

/// A completion queue to add.
#[derive(Debug)]
pub struct CqSetup {
    /// Its handle.
    pub handle: u32,
    /// Its ring (the daemon produces).
    pub ring: Producer<Cqe>,
    /// The completion channel to notify, if any.
    pub channel: Option<Arc<OwnedFd>>,
    /// The owner's event sink.
    pub events: Arc<EventSink>,
}

/// A shared receive queue to add.
#[derive(Debug)]
pub struct SrqSetup {
    /// Its handle.
    pub handle: u32,
    /// Its protection domain.
    pub pd: PdId,
    /// Its transport attributes.
    pub attr: SrqAttr,
    /// Its ring (the application produces).
    pub ring: Ring<RecvWqe>,
    /// The owner's event sink.
    pub events: Arc<EventSink>,
    /// Its bit in the owner's post-bits page.
    pub post_bit: Option<PostBit>,
}

/// A queue pair to add.
#[derive(Debug)]
pub struct QpSetup {
    /// Its handle.
    pub handle: u32,
    /// The transport's creation parameters.
    pub config: QpConfig,
    /// Its send ring.
    pub sq: Ring<SendWqe>,
    /// Its receive ring (none with an SRQ).
    pub rq: Option<Ring<RecvWqe>>,
    /// The send CQ handle.
    pub send_cq: u32,
    /// The receive CQ handle.
    pub recv_cq: u32,
    /// The SRQ handle.
    pub srq: Option<u32>,
    /// The owner's event sink.
    pub events: Arc<EventSink>,
    /// Its bit in the owner's post-bits page.
    pub post_bit: Option<PostBit>,
}

/// What the poller reports.
#[derive(Clone, Debug, Default)]
pub struct PollerStats {
    /// Transport counters.
    pub transport: Counters,
    /// Daemon counters.
    pub daemon: Vec<(&'static str, u64)>,
}

#[derive(Debug)]
struct QpEntry {
    handle: u32,
    sq: Intake<SendWqe>,
    rq: Option<Intake<RecvWqe>>,
    send_cq: u32,
    recv_cq: u32,
    pd: PdId,
    max_send_sge: u32,
    max_recv_sge: u32,
    max_inline: u32,
    events: Arc<EventSink>,
    /// Its rings had impossible counters: they are never read again.
    broken: bool,
    /// Its post bit.
    bell: Option<BellKey>,
}

#[derive(Debug)]
struct CqEntry {
    ring: Producer<Cqe>,
    channel: Option<Arc<OwnedFd>>,
    events: Arc<EventSink>,
    broken: bool,
    /// Something was written since the notification check.
    wrote: bool,
    wrote_solicited: bool,
}

#[derive(Debug)]
struct SrqEntry {
    ring: Intake<RecvWqe>,
    events: Arc<EventSink>,
    handle: u32,
    /// Its ring had impossible counters: it is never read again.
    broken: bool,
    /// Its post bit.
    bell: Option<BellKey>,
}

/// The daemon's end of a ring an application fills. What the daemon has taken (copied into
/// the transport) and what it has retired (completed, so the slots are free again) are two
/// counters: a slot stays the application's until its work request completes, which is
/// what makes `max_send_wr` mean what verbs says.
#[derive(Debug)]
struct Intake<T> {
    ring: Ring<T>,
    taken: u32,
}

impl<T: zerocopy::FromBytes + zerocopy::IntoBytes + zerocopy::Immutable> Intake<T> {
    fn new(ring: Ring<T>) -> Intake<T> {
        let taken = ring.consumer();
        Intake { ring, taken }
    }

    /// Work requests posted and not taken yet; an impossible producer counter is an error.
    fn ready(&self) -> Result<u32, RingError> {
        let n = self.ring.producer().wrapping_sub(self.taken);
        if n > self.ring.entries() {
            return Err(RingError::Corrupt);
        }
        Ok(n)
    }

    /// The `i`-th work request not taken yet, copied out.
    fn read(&self, i: u32) -> T {
        self.ring.read(self.taken.wrapping_add(i))
    }

    fn take(&mut self, n: u32) {
        self.taken = self.taken.wrapping_add(n);
    }

    /// Frees the slots of everything taken except the `outstanding` newest.
    fn retire(&self, outstanding: u32) {
        let retired = self.taken.wrapping_sub(outstanding);
        if retired != self.ring.consumer() {
            self.ring.publish_consumer(retired);
        }
    }

    /// Drops everything posted (RESET, or a ring that cannot be trusted).
    fn skip_all(&mut self) {
        self.taken = self.ring.producer();
        self.ring.publish_consumer(self.taken);
    }
}

#[derive(Debug, Default)]
struct DaemonCounters {
    bad_wqe: u64,
    broken_rings: u64,
    cq_overflow: u64,
    loopback_frames: u64,
    tx_full: u64,
    idle_sleeps: u64,
    rx_frames: u64,
    tx_frames: u64,
    handed_over: u64,
    taken_over: u64,
    handoff_full: u64,
    full_ring_scans: u64,
}

/// How a poller is set up.
#[derive(Debug)]
pub struct PollerConfig {
    /// Its index (its word in the wake page).
    pub index: usize,
    /// The wake page, shared read-only with applications.
    pub wake_page: Arc<Mapping>,
    /// Applications write this eventfd to wake the poller.
    pub doorbell: Arc<OwnedFd>,
    /// Commands arrive here.
    pub commands: CmdReceiver<Command>,
    /// The CPU to pin to, if any.
    pub core: Option<core_affinity::CoreId>,
    /// How an idle poller waits.
    pub idle: IdlePolicy,
    /// Frames for QPs of other pollers go through here.
    pub handoff: Handoff,
}

/// How an idle poller waits for work: spin, then yield the core, then sleep in `poll(2)`.
/// On a machine with few cores shared with the applications, spinning steals the core the
/// application needs; on a dedicated core it buys the lowest latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdlePolicy {
    /// Spin this long after the last work.
    pub spin: Duration,
    /// Then yield the core until this long after the last work; then sleep.
    pub yield_until: Duration,
    /// Read every ring this often even when no post bit says so (zero: only before
    /// sleeping). A safety net for applications that do not set their bits.
    pub full_scan: Duration,
}

impl Default for IdlePolicy {
    fn default() -> IdlePolicy {
        IdlePolicy {
            spin: Duration::ZERO,
            yield_until: Duration::from_millis(1),
            full_scan: FULL_SCAN_EVERY,
        }
    }
}

/// One poller.
pub struct Poller {
    cfg: PollerConfig,
    port: Port,
    endpoint: Endpoint,
    mem: MrTable,
    qps: HashMap<u32, QpEntry>,
    cqs: HashMap<u32, CqEntry>,
    srqs: HashMap<u32, SrqEntry>,
    ahs: HashMap<u32, (PdId, Path)>,
    epoch: StdInstant,
    counters: DaemonCounters,
    mac: [u8; 6],
    /// Completions the daemon generates itself (refused work requests), after the
    /// transport's.
    pending: VecDeque<Completion>,
    /// CQs written since their notification was last checked.
    written: Vec<u32>,
    /// Which rings to read.
    bells: Bells,
    /// Scratch list of the rings to read on this pass.
    due: Vec<Target>,
    /// When every ring is read next, bits or not.
    next_full_scan: Instant,
}

impl std::fmt::Debug for Poller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Poller")
            .field("index", &self.cfg.index)
            .finish_non_exhaustive()
    }
}

/// The most frames one transmit call sends (the pass then goes round: receive, timers,
/// completions).
const TX_BUDGET: usize = 256;

/// The longest sleep (so the poller notices a stop even with no traffic).
const MAX_SLEEP: Duration = Duration::from_millis(100);

impl Poller {
    /// A poller over `port` and `endpoint`.
    pub fn new(cfg: PollerConfig, port: Port, endpoint: Endpoint, mac: [u8; 6]) -> Poller {
        Poller {
            cfg,
            port,
            endpoint,
            mem: MrTable::new(),
            qps: HashMap::new(),
            cqs: HashMap::new(),
            srqs: HashMap::new(),
            ahs: HashMap::new(),
            epoch: StdInstant::now(),
            counters: DaemonCounters::default(),
            mac,
            pending: VecDeque::new(),
            written: Vec::new(),
            bells: Bells::default(),
            due: Vec::new(),
            next_full_scan: Instant::ZERO,
        }
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    fn sleeping_word(&self) -> &AtomicU32 {
        let at = self.cfg.index * core::mem::size_of::<contract::PaddedWord>();
        // NOTE(unwrap): the wake page has MAX_POLLERS words and index < MAX_POLLERS.
        self.cfg
            .wake_page
            .u32_at(at)
            .expect("poller word inside the wake page")
    }

    /// Runs until [`Command::Stop`].
    pub fn run(mut self) {
        if let Some(core) = self.cfg.core
            && !core_affinity::set_for_current(core)
        {
            warn!(
                "poller {}: could not pin to core {}",
                self.cfg.index, core.id
            );
        }
        let mut idle_since: Option<StdInstant> = None;
        loop {
            let mut work = 0usize;
            match self.commands() {
                Some(n) => work += n,
                None => return,
            }
            let now = self.now();
            let received = self.receive(now);
            work += received;
            work += self.pull_rings(now);
            // Timers wait while the RX ring still holds frames: an acknowledgement that has
            // arrived but not been read yet must not count as lost (a starved poller would
            // otherwise retransmit, and exhaust retries, on answers sitting in its ring).
            if received < RX_BATCH && self.endpoint.poll_timeout().is_some_and(|t| t <= now) {
                self.endpoint.handle_timeout(now, &mut self.mem);
                work += 1;
            }
            work += self.transmit(now);
            work += self.deliver(now);
            // Frames still on the TX ring are work: in copy mode the kernel sends only when
            // kicked (at most 32 frames a kick), and each pass kicks it again.
            if self.port.tx().in_flight() > 0 {
                work += 1;
            }
            if work > 0 {
                idle_since = None;
                continue;
            }
            let idle = idle_since.get_or_insert_with(StdInstant::now).elapsed();
            if idle < self.cfg.idle.spin {
                std::hint::spin_loop();
            } else if idle < self.cfg.idle.yield_until {
                std::thread::yield_now();
            } else if self.sleep() > 0 {
                // The last look before sleeping found work: back to polling.
                idle_since = None;
            }
        }
    }

    /// Sleeps until a frame, a doorbell, a command or the next timer, unless the last look
    /// finds work; returns how much it found.
    fn sleep(&mut self) -> usize {
        let word = self.sleeping_word();
        word.store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        // A post that raced with the store above is visible now.
        let now = self.now();
        // Every ring, bits or not: nothing posted may wait for a doorbell that never comes.
        let pending = self.pull_every_ring(now) + self.transmit(now) + self.deliver(now);
        if pending == 0 && self.cfg.commands.is_empty() && !self.cfg.handoff.pending() {
            let timeout = match self.endpoint.poll_timeout() {
                Some(t) => (t.saturating_duration_since(self.now())).min(MAX_SLEEP),
                None => MAX_SLEEP,
            };
            let millis = timeout.as_millis().clamp(1, MAX_SLEEP.as_millis()) as u16;
            let fds = [
                nix::poll::PollFd::new(self.port.as_fd(), nix::poll::PollFlags::POLLIN),
                nix::poll::PollFd::new(self.cfg.doorbell.as_fd(), nix::poll::PollFlags::POLLIN),
            ];
            let mut fds = fds;
            let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(millis));
            self.counters.idle_sleeps += 1;
        }
        self.sleeping_word().store(0, Ordering::SeqCst);
        // Doorbells rung while the word was set (whether or not it slept): drained, so the
        // next sleep does not wake for them.
        verbs_shm::sys::eventfd_drain(self.cfg.doorbell.as_fd());
        pending
    }

    /// Handles pending commands. `None` means stop.
    fn commands(&mut self) -> Option<usize> {
        let mut n = 0;
        while let Ok(cmd) = self.cfg.commands.try_recv() {
            n += 1;
            if !self.command(cmd) {
                return None;
            }
        }
        Some(n)
    }

    fn command(&mut self, cmd: Command) -> bool {
        let now = self.now();
        match cmd {
            Command::RegMr(region, reply) => {
                let r = self.mem.insert(region).map_err(|e| e.to_string());
                let _ = reply.send(r);
            }
            Command::DeregMr(lkey, reply) => {
                self.mem.remove(lkey);
                let _ = reply.send(());
            }
            Command::ReregMr(region, reply) => {
                let old = self.mem.remove(region.lkey);
                let r = match self.mem.insert(region) {
                    Ok(()) => Ok(()),
                    Err(e) => {
                        if let Some(old) = old {
                            let _ = self.mem.insert(old);
                        }
                        Err(e.to_string())
                    }
                };
                let _ = reply.send(r);
            }
            Command::CreateCq(setup, reply) => {
                let s = *setup;
                self.cqs.insert(
                    s.handle,
                    CqEntry {
                        ring: s.ring,
                        channel: s.channel,
                        events: s.events,
                        broken: false,
                        wrote: false,
                        wrote_solicited: false,
                    },
                );
                let _ = reply.send(());
            }
            Command::DestroyCq(handle, reply) => {
                let busy = self
                    .qps
                    .values()
                    .any(|q| q.send_cq == handle || q.recv_cq == handle);
                let r = if busy {
                    Err(libc::EBUSY)
                } else if self.cqs.remove(&handle).is_some() {
                    Ok(())
                } else {
                    Err(libc::EINVAL)
                };
                let _ = reply.send(r);
            }
            Command::CreateSrq(setup, reply) => {
                let s = *setup;
                let r = self
                    .endpoint
                    .create_srq(Srq::new(SrqId(s.handle), s.pd, s.attr))
                    .map_err(|e| e.to_string());
                if r.is_ok() {
                    self.srqs.insert(
                        s.handle,
                        SrqEntry {
                            ring: Intake::new(s.ring),
                            events: s.events,
                            handle: s.handle,
                            bell: self.bells.add(
                                self.cfg.index,
                                s.post_bit.as_ref(),
                                Target::Srq(s.handle),
                            ),
                            broken: false,
                        },
                    );
                }
                let _ = reply.send(r);
            }
            Command::ModifySrq(handle, limit, reply) => {
                let r = match self.endpoint.srq(SrqId(handle)).map(|s| s.attr()) {
                    Some(mut attr) => {
                        attr.srq_limit = limit;
                        self.endpoint
                            .modify_srq(SrqId(handle), attr)
                            .map(|()| attr)
                            .map_err(|_| libc::EINVAL)
                    }
                    None => Err(libc::EINVAL),
                };
                let _ = reply.send(r);
            }
            Command::QuerySrq(handle, reply) => {
                let r = self
                    .endpoint
                    .srq(SrqId(handle))
                    .map(|s| s.attr())
                    .ok_or(libc::EINVAL);
                let _ = reply.send(r);
            }
            Command::DestroySrq(handle, reply) => {
                let r = match self.endpoint.destroy_srq(SrqId(handle)) {
                    Ok(()) => {
                        if let Some(s) = self.srqs.remove(&handle) {
                            self.bells.remove(s.bell, Target::Srq(handle));
                        }
                        Ok(())
                    }
                    Err(xroce_transport::EndpointError::SrqBusy(_)) => Err(libc::EBUSY),
                    Err(_) => Err(libc::EINVAL),
                };
                let _ = reply.send(r);
            }
            Command::CreateQp(setup, reply) => {
                let s = *setup;
                let qpn = s.config.qpn;
                let caps = s.config.caps;
                let r = self.endpoint.create_qp(s.config).map_err(|e| e.to_string());
                if r.is_ok() {
                    self.qps.insert(
                        qpn.value(),
                        QpEntry {
                            handle: s.handle,
                            sq: Intake::new(s.sq),
                            rq: s.rq.map(Intake::new),
                            send_cq: s.send_cq,
                            recv_cq: s.recv_cq,
                            pd: s.config.pd,
                            max_send_sge: caps.max_send_sge,
                            max_recv_sge: caps.max_recv_sge,
                            max_inline: caps.max_inline_data,
                            events: s.events,
                            broken: false,
                            bell: self.bells.add(
                                self.cfg.index,
                                s.post_bit.as_ref(),
                                Target::Qp(qpn.value()),
                            ),
                        },
                    );
                }
                let _ = reply.send(r);
            }
            Command::ModifyQp(qpn, attr, mask, reply) => {
                if mask.contains(AttrMask::STATE) && attr.qp_state == QpState::Reset {
                    // Every completion the QP made so far goes to its CQs now, before the
                    // reset: the application then removes the ones it has not polled (as
                    // RDMA NICs clean their CQs), and none can surface after it.
                    self.deliver(now);
                }
                let r = self
                    .endpoint
                    .modify_qp(now, qpn, &attr, mask)
                    .map_err(|e| e.to_string());
                if r.is_ok()
                    && mask.contains(AttrMask::STATE)
                    && let Some(q) = self.qps.get_mut(&qpn.value())
                {
                    if attr.qp_state == QpState::Reset {
                        // RESET discards every work request: the rings restart empty.
                        Self::reset_rings(q);
                    } else {
                        // Work requests posted before this state waited in the ring.
                        Self::pull_qp(
                            &mut self.endpoint,
                            &self.ahs,
                            &mut self.counters,
                            &mut self.pending,
                            now,
                            qpn,
                            q,
                        );
                    }
                }
                let _ = reply.send(r);
            }
            Command::QueryQp(qpn, reply) => {
                let _ = reply.send(self.endpoint.qp(qpn).map(|q| q.attr()));
            }
            Command::DestroyQp(qpn, reply) => {
                let _ = self.endpoint.destroy_qp(qpn);
                if let Some(q) = self.qps.remove(&qpn.value()) {
                    self.bells.remove(q.bell, Target::Qp(qpn.value()));
                }
                let _ = reply.send(());
            }
            Command::CreateAh(handle, pd, path, reply) => {
                self.ahs.insert(handle, (pd, path));
                let _ = reply.send(());
            }
            Command::DestroyAh(handle, reply) => {
                self.ahs.remove(&handle);
                let _ = reply.send(());
            }
            Command::QpStats { from, most, reply } => {
                // Only the QPs asked for are described (a page of a few dozen, out of
                // thousands).
                let mut wanted: Vec<_> = self
                    .endpoint
                    .qp_stats()
                    .filter(|(qpn, ..)| qpn.value() >= from)
                    .collect();
                wanted.sort_unstable_by_key(|(qpn, ..)| qpn.value());
                wanted.truncate(most);
                let qps = wanted
                    .into_iter()
                    .filter_map(|(qpn, state, counters)| {
                        let qp = self.endpoint.qp(qpn)?;
                        Some(QpStat {
                            qpn: qpn.value(),
                            qp_type: format!("{:?}", qp.qp_type()).to_uppercase(),
                            state: state_name(state).to_owned(),
                            counters: counters.iter().map(|(n, v)| (n.to_owned(), v)).collect(),
                        })
                    })
                    .collect();
                let _ = reply.send(qps);
            }
            Command::Stats(reply) => {
                let c = &self.counters;
                let port = self.port.counters();
                // The kernel's own drops on this socket: frames that never reached the rings.
                let kernel = self.port.kernel_stats().unwrap_or_default();
                let stats = PollerStats {
                    transport: self.endpoint.counters().clone(),
                    daemon: vec![
                        ("rx_frames", c.rx_frames),
                        ("tx_frames", c.tx_frames),
                        ("loopback_frames", c.loopback_frames),
                        ("handed_over_frames", c.handed_over),
                        ("taken_over_frames", c.taken_over),
                        ("handoff_full_drops", c.handoff_full),
                        ("tx_ring_full", c.tx_full),
                        ("bad_work_requests", c.bad_wqe),
                        ("broken_rings", c.broken_rings),
                        ("cq_overflows", c.cq_overflow),
                        ("idle_sleeps", c.idle_sleeps),
                        ("full_ring_scans", c.full_ring_scans),
                        ("xsk_rx_fill_ring_empty", port.rx.fill_ring_empty),
                        ("xsk_tx_kicks", port.tx.kicks),
                        ("xsk_rx_dropped", kernel.rx_dropped),
                        ("xsk_rx_ring_full", kernel.rx_ring_full),
                        (
                            "xsk_rx_fill_ring_empty_descs",
                            kernel.rx_fill_ring_empty_descs,
                        ),
                        ("xsk_rx_invalid_descs", kernel.rx_invalid_descs),
                        ("xsk_tx_invalid_descs", kernel.tx_invalid_descs),
                    ],
                };
                let _ = reply.send(stats);
            }
            Command::SetGids(gids) => self.endpoint.set_gids(gids),
            Command::Stop => return false,
        }
        true
    }

    fn reset_rings(q: &mut QpEntry) {
        // Skip whatever the application had posted: the transport dropped its copies.
        q.sq.skip_all();
        if let Some(rq) = q.rq.as_mut() {
            rq.skip_all();
        }
    }

    /// Receives a batch of frames.
    fn receive(&mut self, now: Instant) -> usize {
        let Poller {
            cfg,
            port,
            endpoint,
            mem,
            qps,
            srqs,
            ahs,
            counters,
            pending,
            bells,
            due,
            ..
        } = self;
        let handoff = &mut cfg.handoff;
        let batch = port.rx().poll();
        let n = batch.len();
        if n > 0 || handoff.pending() {
            // Receive work requests posted before these frames were sent must be there to
            // meet them (a UC or UD message finding none is dropped): take the rings first.
            // Their post bits were set before their application could tell its peer.
            bells.due(due);
            Self::pull_targets(endpoint, qps, srqs, ahs, counters, pending, bells, due, now);
        }
        for frame in batch.iter() {
            let owner = handoff.owner(frame);
            if owner == cfg.index {
                endpoint.handle_frame(now, frame, mem);
            } else {
                match handoff.send(owner, frame) {
                    Sent::Handed => counters.handed_over += 1,
                    Sent::Full => counters.handoff_full += 1,
                }
            }
        }
        drop(batch);
        let taken = handoff.receive(RX_BATCH, |frame| endpoint.handle_frame(now, frame, mem));
        counters.rx_frames += n as u64;
        counters.taken_over += taken as u64;
        n + taken
    }

    /// Moves new work requests from the applications' rings into the transport, and
    /// publishes how many the transport has retired.
    fn pull_rings(&mut self, now: Instant) -> usize {
        let every = !self.cfg.idle.full_scan.is_zero() && now >= self.next_full_scan;
        self.pull_due(now, every)
    }

    /// Reads every ring, post bits or not.
    fn pull_every_ring(&mut self, now: Instant) -> usize {
        self.pull_due(now, true)
    }

    /// Reads the rings the post bits name (and the leftovers and bitless ones), or with
    /// `every` all of them.
    fn pull_due(&mut self, now: Instant, every: bool) -> usize {
        if every {
            self.next_full_scan = now + self.cfg.idle.full_scan;
            self.counters.full_ring_scans += 1;
        }
        let Poller {
            endpoint,
            qps,
            srqs,
            ahs,
            counters,
            pending,
            bells,
            due,
            ..
        } = self;
        // The bits go in either case: every ring they name is read now.
        bells.due(due);
        if every {
            due.clear();
            due.extend(qps.keys().map(|&n| Target::Qp(n)));
            due.extend(srqs.keys().map(|&n| Target::Srq(n)));
        }
        Self::pull_targets(endpoint, qps, srqs, ahs, counters, pending, bells, due, now)
    }

    /// Reads the rings of `due`; those that still hold work requests afterwards (the
    /// transport had no room) are read again on the next pass.
    #[allow(clippy::too_many_arguments)]
    fn pull_targets(
        endpoint: &mut Endpoint,
        qps: &mut HashMap<u32, QpEntry>,
        srqs: &mut HashMap<u32, SrqEntry>,
        ahs: &HashMap<u32, (PdId, Path)>,
        counters: &mut DaemonCounters,
        pending: &mut VecDeque<Completion>,
        bells: &mut Bells,
        due: &[Target],
        now: Instant,
    ) -> usize {
        let mut moved = 0;
        for &t in due {
            match t {
                Target::Qp(qpn) => {
                    let Some(q) = qps.get_mut(&qpn) else {
                        continue;
                    };
                    moved += Self::pull_qp(endpoint, ahs, counters, pending, now, Qpn::new(qpn), q);
                    let left = |r: Result<u32, RingError>| r.is_ok_and(|n| n > 0);
                    // Work requests held until the QP reaches a state that takes them
                    // are not work for now: its modify reads them.
                    let state = endpoint.qp(Qpn::new(qpn)).map(|qp| qp.state());
                    let sends = state.is_some_and(sends_taken);
                    let receives = state.is_some_and(|s| s != QpState::Reset);
                    if !q.broken
                        && ((sends && left(q.sq.ready()))
                            || (receives && q.rq.as_ref().is_some_and(|rq| left(rq.ready()))))
                    {
                        bells.again.push(t);
                    }
                }
                Target::Srq(id) => {
                    let Some(s) = srqs.get_mut(&id) else {
                        continue;
                    };
                    moved += Self::pull_srq(endpoint, counters, id, s);
                    if !s.broken && s.ring.ready().is_ok_and(|n| n > 0) {
                        bells.again.push(t);
                    }
                }
            }
        }
        moved
    }

    /// Moves new receive work requests (receive queues and SRQs) into the transport, and
    /// no send work request.
    fn pull_receives_of(
        endpoint: &mut Endpoint,
        qps: &mut HashMap<u32, QpEntry>,
        srqs: &mut HashMap<u32, SrqEntry>,
        counters: &mut DaemonCounters,
        pending: &mut VecDeque<Completion>,
        now: Instant,
        qpn: u32,
    ) {
        let srq = endpoint.qp(Qpn::new(qpn)).and_then(|qp| qp.config().srq);
        if let Some(q) = qps.get_mut(&qpn) {
            Self::pull_rq(endpoint, counters, pending, now, Qpn::new(qpn), q);
        }
        if let Some(id) = srq
            && let Some(s) = srqs.get_mut(&id.0)
        {
            Self::pull_srq(endpoint, counters, id.0, s);
        }
    }

    fn pull_qp(
        endpoint: &mut Endpoint,
        ahs: &HashMap<u32, (PdId, Path)>,
        counters: &mut DaemonCounters,
        pending: &mut VecDeque<Completion>,
        now: Instant,
        qpn: Qpn,
        q: &mut QpEntry,
    ) -> usize {
        let mut moved = 0;
        // A broken ring stays broken: reading it again would only count (and announce) the
        // same damage on every pass, at the expense of every other application's work.
        if q.broken {
            return 0;
        }
        let Some(qp) = endpoint.qp(qpn) else {
            return 0;
        };
        if !sends_taken(qp.state()) {
            return Self::pull_rq(endpoint, counters, pending, now, qpn, q);
        }
        let room = (qp.config().caps.max_send_wr as usize).saturating_sub(qp.send_queue_len());
        let Ok(avail) = q.sq.ready() else {
            counters.broken_rings += 1;
            Self::break_qp(endpoint, now, qpn, q);
            return 1;
        };
        let mut take = (avail as usize).min(room) as u32;
        for i in 0..take {
            let raw = q.sq.read(i);
            let refused = match convert_send(&raw, q, ahs) {
                Ok(wqe) => endpoint
                    .post_send(now, qpn, wqe)
                    .err()
                    .map(|e| e.to_string()),
                Err(why) => Some(why.to_string()),
            };
            if let Some(why) = refused {
                debug!("QP {qpn}: bad send work request {:#x}: {why}", raw.wr_id);
                counters.bad_wqe += 1;
                pending.push_back(Self::fail_wqe(endpoint, now, qpn, raw.wr_id, raw.opcode));
                // Later work requests wait for the next pass, so that their flush
                // completions follow this one's error.
                take = i + 1;
                break;
            }
        }
        q.sq.take(take);
        moved += take as usize;
        // The slots of retired work requests (completed, signaled or not) are free again.
        if let Some(qp) = endpoint.qp(qpn) {
            q.sq.retire(qp.send_queue_len() as u32);
        }
        moved + Self::pull_rq(endpoint, counters, pending, now, qpn, q)
    }

    /// Moves new receive work requests of one QP from its ring into the transport.
    ///
    /// Receives posted while the QP is in RESET stay in the ring until it leaves RESET (as
    /// an RDMA NIC holds them until INIT; a return to RESET discards them with the ring).
    /// One the daemon refuses (malformed: only an application writing its ring by hand
    /// makes one) completes with a local QP operation error and the QP enters the error
    /// state, as a malformed send work request does; the ones after it are flushed.
    fn pull_rq(
        endpoint: &mut Endpoint,
        counters: &mut DaemonCounters,
        pending: &mut VecDeque<Completion>,
        now: Instant,
        qpn: Qpn,
        q: &mut QpEntry,
    ) -> usize {
        // As in `pull_qp`: a broken ring is never read again.
        if q.broken {
            return 0;
        }
        let Some(rq) = q.rq.as_mut() else {
            return 0;
        };
        let Some(qp) = endpoint.qp(qpn) else {
            return 0;
        };
        if qp.state() == QpState::Reset {
            return 0;
        }
        let room = (qp.config().caps.max_recv_wr as usize).saturating_sub(qp.recv_queue_len());
        let Ok(avail) = rq.ready() else {
            counters.broken_rings += 1;
            Self::break_qp(endpoint, now, qpn, q);
            return 1;
        };
        let mut take = (avail as usize).min(room) as u32;
        for i in 0..take {
            let raw = rq.read(i);
            let refused = match convert_recv(&raw, q.max_recv_sge) {
                Ok(wqe) => endpoint
                    .post_recv(now, qpn, wqe)
                    .err()
                    .map(|e| e.to_string()),
                Err(why) => Some(why.to_string()),
            };
            if let Some(why) = refused {
                debug!("QP {qpn}: bad receive work request {:#x}: {why}", raw.wr_id);
                counters.bad_wqe += 1;
                pending.push_back(Self::fail_recv(endpoint, now, qpn, raw.wr_id));
                // The ones after it are read on the next pass, into the error state: their
                // flush completions follow this one's error.
                take = i + 1;
                break;
            }
        }
        rq.take(take);
        rq.retire(qp_recv_len(endpoint, qpn));
        take as usize
    }

    fn pull_srq(
        endpoint: &mut Endpoint,
        counters: &mut DaemonCounters,
        id: u32,
        s: &mut SrqEntry,
    ) -> usize {
        if s.broken {
            return 0;
        }
        let Some(srq) = endpoint.srq(SrqId(id)) else {
            return 0;
        };
        let attr = srq.attr();
        let room = (attr.max_wr as usize).saturating_sub(srq.len());
        let Ok(avail) = s.ring.ready() else {
            counters.broken_rings += 1;
            Self::break_srq(s);
            return 0;
        };
        let take = (avail as usize).min(room) as u32;
        for i in 0..take {
            let raw = s.ring.read(i);
            let ok = convert_recv(&raw, attr.max_sge)
                .ok()
                .map(|w| endpoint.post_srq_recv(SrqId(id), w).is_ok())
                .unwrap_or(false);
            if !ok {
                // A malformed work request (only a hand-written ring makes one): an SRQ
                // has no CQ to complete it on, so the SRQ is in error, as with a damaged
                // ring, and its owner is told.
                debug!("SRQ {id}: bad receive work request {:#x}", raw.wr_id);
                counters.bad_wqe += 1;
                s.ring.take(i);
                Self::break_srq(s);
                return i as usize + 1;
            }
        }
        s.ring.take(take);
        s.ring
            .retire(endpoint.srq(SrqId(id)).map_or(0, |s| s.len() as u32));
        take as usize
    }

    /// An SRQ whose ring is damaged or holds a malformed work request: it is never read
    /// again, its owner gets `IBV_EVENT_SRQ_ERR`, the QPs that use it find no receives.
    fn break_srq(s: &mut SrqEntry) {
        s.broken = true;
        s.ring.ring.broken().store(1, Ordering::Release);
        s.events.raise(event_type::SRQ_ERR, s.handle);
        s.ring.skip_all();
    }

    /// A work request the daemon refuses: it completes with a local QP operation error and
    /// the QP enters the error state (what an RDMA NIC does with a malformed WQE).
    fn fail_wqe(
        endpoint: &mut Endpoint,
        now: Instant,
        qpn: Qpn,
        wr_id: u64,
        opcode: u32,
    ) -> Completion {
        let attr = QpAttr {
            qp_state: QpState::Err,
            ..QpAttr::default()
        };
        let _ = endpoint.modify_qp(now, qpn, &attr, AttrMask::STATE);
        let opcode = match opcode {
            contract::wr_opcode::RDMA_READ => WcOpcode::RdmaRead,
            contract::wr_opcode::RDMA_WRITE | contract::wr_opcode::RDMA_WRITE_WITH_IMM => {
                WcOpcode::RdmaWrite
            }
            contract::wr_opcode::ATOMIC_CMP_AND_SWP => WcOpcode::CompSwap,
            contract::wr_opcode::ATOMIC_FETCH_AND_ADD => WcOpcode::FetchAdd,
            _ => WcOpcode::Send,
        };
        let mut c = Completion::flushed(wr_id, opcode, CompletionQueue::Send, qpn.value());
        c.status = WcStatus::LocQpOpErr;
        c
    }

    /// A receive work request the daemon refuses: as [`Poller::fail_wqe`], on the receive
    /// queue.
    fn fail_recv(endpoint: &mut Endpoint, now: Instant, qpn: Qpn, wr_id: u64) -> Completion {
        let attr = QpAttr {
            qp_state: QpState::Err,
            ..QpAttr::default()
        };
        let _ = endpoint.modify_qp(now, qpn, &attr, AttrMask::STATE);
        let mut c = Completion::flushed(wr_id, WcOpcode::Recv, CompletionQueue::Recv, qpn.value());
        c.status = WcStatus::LocQpOpErr;
        c
    }

    /// A ring with impossible counters: the QP goes to the error state and its owner gets
    /// a fatal event. Nothing else is affected.
    fn break_qp(endpoint: &mut Endpoint, now: Instant, qpn: Qpn, q: &mut QpEntry) {
        let attr = QpAttr {
            qp_state: QpState::Err,
            ..QpAttr::default()
        };
        let _ = endpoint.modify_qp(now, qpn, &attr, AttrMask::STATE);
        q.broken = true;
        q.sq.ring.broken().store(1, Ordering::Release);
        q.events.raise(event_type::QP_FATAL, q.handle);
        // Stop reading its rings: they cannot be trusted.
        Self::reset_rings(q);
    }

    /// Sends what the transport has to send.
    fn transmit(&mut self, now: Instant) -> usize {
        let mut sent = 0;
        self.port.tx().poll_completions();
        // Bounded: loopback frames go back to the free list at once and their answers come
        // back within the loop, so without a bound two local QPs could keep the poller here
        // for a whole transfer (no receiving, no timers, no other application's work).
        while sent < TX_BUDGET {
            if !self.endpoint.has_transmit() && self.endpoint.poll_timeout().is_none_or(|t| t > now)
            {
                break;
            }
            let tx = self.port.tx();
            let Some(mut frame) = tx.frame() else {
                self.counters.tx_full += 1;
                break;
            };
            let Some(t) = self.endpoint.poll_transmit(now, frame.buf(), &mut self.mem) else {
                break;
            };
            let buf = frame.buf();
            if buf[..6] == self.mac {
                // Addressed to ourselves: deliver it here (or to the poller that owns the
                // destination QP), as the NIC would not.
                let buf = &buf[..t.len];
                self.counters.loopback_frames += 1;
                let owner = self.cfg.handoff.owner(buf);
                if owner != self.cfg.index {
                    match self.cfg.handoff.send(owner, buf) {
                        Sent::Handed => self.counters.handed_over += 1,
                        Sent::Full => self.counters.handoff_full += 1,
                    }
                } else {
                    // As `receive` does before handling frames from the wire: a receive
                    // posted before this frame's send was posted must be there to meet it.
                    // The receive rings may have been read before the application published
                    // that receive: read the destination's again (and no send ring, so no
                    // later send slips in).
                    if let Some(qpn) = crate::handoff::dest_qpn(buf) {
                        Self::pull_receives_of(
                            &mut self.endpoint,
                            &mut self.qps,
                            &mut self.srqs,
                            &mut self.counters,
                            &mut self.pending,
                            now,
                            qpn,
                        );
                    }
                    self.endpoint.handle_frame(now, buf, &mut self.mem);
                }
                drop(frame);
            } else {
                frame.submit(t.len);
                self.counters.tx_frames += 1;
            }
            sent += 1;
        }
        if sent > 0 {
            self.port.tx().flush();
        }
        sent
    }

    /// Writes completions into CQ rings, raises notifications and events.
    fn deliver(&mut self, now: Instant) -> usize {
        // The pass's clock reading stamps its completions (one clock read, not one each).
        let stamp = Duration::from_nanos(now.as_nanos());
        let mut n = 0;
        while let Some(c) = self
            .endpoint
            .poll_completion()
            .or_else(|| self.pending.pop_front())
        {
            n += 1;
            let Some(q) = self.qps.get(&c.qpn) else {
                debug!("completion for a QP that is gone: {c:?}");
                continue;
            };
            // The completed work requests' ring slots are free again before the application
            // sees the completion, so that it can post in their place at once (the rings
            // themselves are read only when their post bits say so).
            if let Some(qp) = self.endpoint.qp(Qpn::new(c.qpn)) {
                match c.queue {
                    CompletionQueue::Send => q.sq.retire(qp.send_queue_len() as u32),
                    CompletionQueue::Recv => match (&q.rq, qp.config().srq) {
                        (Some(rq), _) => rq.retire(qp.recv_queue_len() as u32),
                        (None, Some(id)) => {
                            if let (Some(s), Some(srq)) =
                                (self.srqs.get(&id.0), self.endpoint.srq(id))
                            {
                                s.ring.retire(srq.len() as u32);
                            }
                        }
                        (None, None) => {}
                    },
                }
            }
            let cq = match c.queue {
                CompletionQueue::Send => q.send_cq,
                CompletionQueue::Recv => q.recv_cq,
            };
            let Some(entry) = self.cqs.get_mut(&cq) else {
                debug!("completion for a CQ that is gone: {c:?}");
                continue;
            };
            if entry.broken {
                continue;
            }
            tracing::trace!("CQ {cq}: {c:?}");
            let cqe = to_cqe(&c, stamp);
            match entry.ring.push(&cqe) {
                Ok(true) => {
                    if !entry.wrote {
                        self.written.push(cq);
                    }
                    entry.wrote = true;
                    entry.wrote_solicited |= c.solicited || c.status != WcStatus::Success;
                }
                Ok(false) | Err(_) => {
                    // IBTA 10.10.2.3: CQ overrun is a CQ error; the application hears of it.
                    self.counters.cq_overflow += 1;
                    entry.broken = true;
                    entry.ring.ring().broken().store(1, Ordering::Release);
                    entry.events.raise(event_type::CQ_ERR, cq);
                }
            }
        }
        // Only the CQs written in this call (not every CQ of the poller on every pass).
        let mut written = std::mem::take(&mut self.written);
        for &handle in &written {
            let Some(entry) = self.cqs.get_mut(&handle) else {
                continue;
            };
            let arm = entry.ring.ring().arm();
            let mode = arm.load(Ordering::Acquire);
            let fire = mode == ARM_NEXT || (mode == ARM_SOLICITED && entry.wrote_solicited);
            if fire
                && arm
                    .compare_exchange(mode, ARM_NONE, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                entry.ring.ring().events().fetch_add(1, Ordering::AcqRel);
                if let Some(ch) = &entry.channel {
                    let ev = CompletionEvent {
                        cq: handle,
                        reserved: 0,
                    };
                    // Never blocks: an application that arms and never reads its channel
                    // loses events, and no other application waits for it.
                    let _ = nix::sys::socket::send(
                        ch.as_raw_fd(),
                        ev.as_bytes(),
                        nix::sys::socket::MsgFlags::MSG_DONTWAIT
                            | nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
                    );
                }
            }
            entry.wrote = false;
            entry.wrote_solicited = false;
        }
        written.clear();
        self.written = written;
        while let Some(e) = self.endpoint.poll_event() {
            n += 1;
            self.raise(e);
        }
        n
    }

    fn raise(&self, e: AsyncEvent) {
        let (qpn, kind) = match e {
            AsyncEvent::QpFatal(q) => (q, event_type::QP_FATAL),
            AsyncEvent::QpRequestError(q) => (q, event_type::QP_REQ_ERR),
            AsyncEvent::QpAccessError(q) => (q, event_type::QP_ACCESS_ERR),
            AsyncEvent::CommEstablished(q) => (q, event_type::COMM_EST),
            AsyncEvent::SqDrained(q) => (q, event_type::SQ_DRAINED),
            AsyncEvent::LastWqeReached(q) => (q, event_type::QP_LAST_WQE_REACHED),
            AsyncEvent::SrqLimitReached(id) => {
                if let Some(s) = self.srqs.get(&id.0) {
                    s.events.raise(event_type::SRQ_LIMIT_REACHED, s.handle);
                }
                return;
            }
        };
        if let Some(q) = self.qps.get(&qpn.value()) {
            q.events.raise(kind, q.handle);
        }
    }
}

fn qp_recv_len(endpoint: &Endpoint, qpn: Qpn) -> u32 {
    endpoint.qp(qpn).map_or(0, |q| q.recv_queue_len() as u32)
}

/// Converts a completion into the shared CQE format.
fn to_cqe(c: &Completion, at: Duration) -> Cqe {
    // Immediate data travels in network byte order through verbs (`__be32 imm_data`); the
    // invalidated rkey is a host-order number.
    let imm = if c.flags.contains(WcFlags::WITH_IMM) {
        c.imm.to_be()
    } else {
        c.imm
    };
    Cqe {
        wr_id: c.wr_id,
        status: c.status as u32,
        opcode: c.opcode as u32,
        vendor_err: 0,
        byte_len: c.byte_len,
        imm_data: imm,
        qp_num: c.qpn,
        src_qp: c.src_qp,
        wc_flags: c.flags.0,
        pkey_index: 0,
        slid: 0,
        sl: 0,
        dlid_path_bits: 0,
        solicited: u8::from(c.solicited),
        reserved0: 0,
        timestamp_ns: at.as_nanos() as u64,
        reserved1: 0,
    }
}

/// Validates and converts a send work request copied out of shared memory.
fn convert_send(
    w: &SendWqe,
    q: &QpEntry,
    ahs: &HashMap<u32, (PdId, Path)>,
) -> Result<TSendWqe, &'static str> {
    use contract::{send_flags as f, wr_opcode as o};
    let op = match w.opcode {
        o::RDMA_WRITE => SendOp::Write {
            remote_addr: w.remote_addr,
            rkey: w.rkey,
        },
        o::RDMA_WRITE_WITH_IMM => SendOp::WriteWithImm {
            remote_addr: w.remote_addr,
            rkey: w.rkey,
            imm: u32::from_be(w.imm_data),
        },
        o::SEND => SendOp::Send,
        o::SEND_WITH_IMM => SendOp::SendWithImm {
            imm: u32::from_be(w.imm_data),
        },
        o::SEND_WITH_INV => SendOp::SendWithInv { rkey: w.imm_data },
        o::RDMA_READ => SendOp::Read {
            remote_addr: w.remote_addr,
            rkey: w.rkey,
        },
        o::ATOMIC_CMP_AND_SWP => SendOp::CompareSwap {
            remote_addr: w.remote_addr,
            rkey: w.rkey,
            compare: w.compare_add,
            swap: w.swap,
        },
        o::ATOMIC_FETCH_AND_ADD => SendOp::FetchAdd {
            remote_addr: w.remote_addr,
            rkey: w.rkey,
            add: w.compare_add,
        },
        _ => return Err("unsupported opcode"),
    };
    let known = f::FENCE | f::SIGNALED | f::SOLICITED | f::INLINE;
    let flags = SendFlags(w.send_flags & known);
    let data = if w.send_flags & f::INLINE != 0 && !op.is_read_or_atomic() {
        let len = w.num_sge as usize;
        if len > contract::MAX_INLINE || len as u32 > q.max_inline {
            return Err("inline data longer than max_inline_data");
        }
        Gather::inline(&w.data[..len]).map_err(|_| "inline data too long")?
    } else {
        if w.num_sge > q.max_send_sge || w.num_sge as usize > contract::MAX_SGE {
            return Err("more scatter/gather elements than max_send_sge");
        }
        let mut list = SgeList::new();
        for i in 0..w.num_sge as usize {
            let s = w.sge(i);
            list.push(TSge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            })
            .map_err(|_| "too many scatter/gather elements")?;
        }
        Gather::Sges(list)
    };
    let ud = if w.ah != 0 || w.remote_qpn != 0 {
        match ahs.get(&w.ah) {
            Some(&(pd, path)) if pd == q.pd => Some(UdDest {
                path,
                remote_qpn: w.remote_qpn & 0x00ff_ffff,
                remote_qkey: w.remote_qkey,
            }),
            Some(_) => return Err("the address handle belongs to another protection domain"),
            None => return Err("unknown address handle"),
        }
    } else {
        None
    };
    Ok(TSendWqe {
        wr_id: w.wr_id,
        op,
        flags,
        data,
        ud,
    })
}

/// Validates and converts a receive work request copied out of shared memory.
fn convert_recv(w: &RecvWqe, max_sge: u32) -> Result<TRecvWqe, &'static str> {
    if w.num_sge > max_sge || w.num_sge as usize > contract::MAX_SGE {
        return Err("more scatter/gather elements than max_recv_sge");
    }
    let mut list = SgeList::new();
    for s in &w.sge[..w.num_sge as usize] {
        list.push(TSge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        })
        .map_err(|_| "too many scatter/gather elements")?;
    }
    Ok(TRecvWqe {
        wr_id: w.wr_id,
        sges: list,
    })
}

/// Whether send work requests are read from the ring in this state. Those posted in RESET,
/// INIT or RTR wait there until the QP reaches RTS (as an RDMA NIC starts on its send
/// queue then); in SQD the transport queues them, in SQE and ERR it flushes them.
fn sends_taken(state: QpState) -> bool {
    !matches!(state, QpState::Reset | QpState::Init | QpState::Rtr)
}

/// A QP state as `ibv_qp_state` names it.
fn state_name(state: QpState) -> &'static str {
    match state {
        QpState::Reset => "RESET",
        QpState::Init => "INIT",
        QpState::Rtr => "RTR",
        QpState::Rts => "RTS",
        QpState::Sqd => "SQD",
        QpState::Sqe => "SQE",
        QpState::Err => "ERR",
    }
}
