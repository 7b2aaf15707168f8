//! Intake: new work requests from the applications' rings into the transport, and ring
//! slots given back as the transport retires them.
//!
//! Everything in a ring was written by an application, and the transport may hold only so
//! many work requests per queue: a work request is copied out of shared memory, checked
//! and converted ([`super::work_request`]) only when the transport has room for it, and
//! its slot stays the application's until it completes (taken and retired are two
//! counters, [`Intake`]). What fails a check completes with a local QP operation error and
//! puts its QP in error, as an RDMA NIC does with a malformed WQE; a ring whose counters
//! are impossible breaks its own QP (or SRQ) and is never read again, so that no
//! application's damage costs another's time. Which rings are read on a pass is the
//! post bits' business ([`crate::bells`]); [`Rings`] holds everything a read needs, and
//! one read goes through a [`Pass`] that borrows the transport for it.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tracing::debug;
use verbs_shm::contract;
use verbs_shm::ring::{Ring, RingError};
use xroce_transport::{
    AttrMask, Completion, CompletionQueue, Endpoint, Instant, QpAttr, QpState, SrqId, WcOpcode,
    WcStatus,
};
use xroce_wire::Qpn;

use super::delivery::{EventSink, event_type};
use super::work_request::{
    AddressHandles, SendBounds, convert_recv, convert_send, send_completion_opcode,
};
use crate::bells::{BellKey, Bells, Target};

/// The daemon's end of a ring an application fills. What the daemon has taken (copied into
/// the transport) and what it has retired (completed, so the slots are free again) are two
/// counters: a slot stays the application's until its work request completes, which is
/// what makes `max_send_wr` mean what verbs says.
#[derive(Debug)]
pub(super) struct Intake<T> {
    pub(super) ring: Ring<T>,
    taken: u32,
}

impl<T: zerocopy::FromBytes + zerocopy::IntoBytes + zerocopy::Immutable> Intake<T> {
    pub(super) fn new(ring: Ring<T>) -> Intake<T> {
        let taken = ring.consumer();
        Intake { ring, taken }
    }

    /// Work requests posted and not taken yet; an impossible producer counter is an error.
    pub(super) fn ready(&self) -> Result<u32, RingError> {
        let n = self.ring.producer().wrapping_sub(self.taken);
        if n > self.ring.entries() {
            return Err(RingError::Corrupt);
        }
        Ok(n)
    }

    /// Whether work requests wait (a ring that cannot be trusted has none).
    fn has_ready(&self) -> bool {
        self.ready().is_ok_and(|n| n > 0)
    }

    /// The `i`-th work request not taken yet, copied out.
    fn read(&self, i: u32) -> T {
        self.ring.read(self.taken.wrapping_add(i))
    }

    fn take(&mut self, n: u32) {
        self.taken = self.taken.wrapping_add(n);
    }

    /// Frees the slots of everything taken except the `outstanding` newest.
    pub(super) fn retire(&self, outstanding: u32) {
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

/// A queue pair's rings and what delivery needs to know of it.
#[derive(Debug)]
pub(super) struct QpEntry {
    pub(super) handle: u32,
    pub(super) sq: Intake<contract::SendWqe>,
    pub(super) rq: Option<Intake<contract::RecvWqe>>,
    pub(super) send_cq: u32,
    pub(super) recv_cq: u32,
    /// What its send work requests are checked against.
    pub(super) send_bounds: SendBounds,
    pub(super) max_recv_sge: u32,
    pub(super) events: Arc<EventSink>,
    /// Its rings had impossible counters: they are never read again.
    pub(super) broken: bool,
    /// Its post bit.
    pub(super) bell: Option<BellKey>,
}

impl QpEntry {
    /// Skips whatever the application had posted: the transport dropped its copies (RESET)
    /// or the rings cannot be trusted.
    pub(super) fn reset_rings(&mut self) {
        self.sq.skip_all();
        if let Some(rq) = self.rq.as_mut() {
            rq.skip_all();
        }
    }
}

/// A shared receive queue's ring.
#[derive(Debug)]
pub(super) struct SrqEntry {
    pub(super) ring: Intake<contract::RecvWqe>,
    pub(super) events: Arc<EventSink>,
    pub(super) handle: u32,
    /// Its ring had impossible counters: it is never read again.
    pub(super) broken: bool,
    /// Its post bit.
    pub(super) bell: Option<BellKey>,
}

impl SrqEntry {
    /// An SRQ whose ring is damaged or holds a malformed work request: it is never read
    /// again, its owner gets `IBV_EVENT_SRQ_ERR`, the QPs that use it find no receives.
    fn break_ring(&mut self) {
        self.broken = true;
        self.ring.ring.broken().store(1, Ordering::Release);
        self.events.raise(event_type::SRQ_ERR, self.handle);
        self.ring.skip_all();
    }
}

/// What the intake counts.
#[derive(Debug, Default)]
pub(super) struct IntakeCounters {
    /// Work requests refused.
    pub(super) bad_wqe: u64,
    /// Rings found with impossible counters.
    pub(super) broken_rings: u64,
    /// Reads of every ring, post bits or not.
    pub(super) full_ring_scans: u64,
}

/// The applications' rings on one poller, and what reading them needs.
#[derive(Debug)]
pub(super) struct Rings {
    pub(super) qps: HashMap<u32, QpEntry>,
    pub(super) srqs: HashMap<u32, SrqEntry>,
    pub(super) ahs: AddressHandles,
    /// Completions the daemon generates itself (refused work requests), delivered after
    /// the transport's.
    pub(super) refused: VecDeque<Completion>,
    /// Which rings to read.
    pub(super) bells: Bells,
    /// Scratch list of the rings to read on this pass.
    due: Vec<Target>,
    pub(super) counters: IntakeCounters,
    /// How often every ring is read, bits or not (zero: only before sleeping).
    full_scan: Duration,
    /// When every ring is read next.
    next_full_scan: Instant,
}

impl Rings {
    /// No rings yet; every ring is read every `full_scan`.
    pub(super) fn new(full_scan: Duration) -> Rings {
        Rings {
            qps: HashMap::new(),
            srqs: HashMap::new(),
            ahs: AddressHandles::new(),
            refused: VecDeque::new(),
            bells: Bells::default(),
            due: Vec::new(),
            counters: IntakeCounters::default(),
            full_scan,
            next_full_scan: Instant::ZERO,
        }
    }

    /// Moves new work requests from the rings the post bits name (and the leftovers and
    /// bitless ones, and every ring when a full scan is due) into the transport, and
    /// publishes how many the transport has retired.
    pub(super) fn pull(&mut self, endpoint: &mut Endpoint, now: Instant) -> usize {
        let every = !self.full_scan.is_zero() && now >= self.next_full_scan;
        self.pull_due(endpoint, now, every)
    }

    /// Reads every ring, post bits or not.
    pub(super) fn pull_every_ring(&mut self, endpoint: &mut Endpoint, now: Instant) -> usize {
        self.pull_due(endpoint, now, true)
    }

    /// Reads the rings the post bits name, and the leftovers and bitless ones.
    pub(super) fn pull_rung(&mut self, endpoint: &mut Endpoint, now: Instant) -> usize {
        self.pull_due(endpoint, now, false)
    }

    /// Reads the rings the post bits name (and the leftovers and bitless ones), or with
    /// `every` all of them.
    fn pull_due(&mut self, endpoint: &mut Endpoint, now: Instant, every: bool) -> usize {
        if every {
            self.next_full_scan = now + self.full_scan;
            self.counters.full_ring_scans += 1;
        }
        // The bits go in either case: every ring they name is read now.
        self.bells.due(&mut self.due);
        if every {
            self.due.clear();
            self.due.extend(self.qps.keys().map(|&n| Target::Qp(n)));
            self.due.extend(self.srqs.keys().map(|&n| Target::Srq(n)));
        }
        self.pull_targets(endpoint, now)
    }

    /// Reads the rings of `due`; those that still hold work requests afterwards (the
    /// transport had no room) are read again on the next pass.
    fn pull_targets(&mut self, endpoint: &mut Endpoint, now: Instant) -> usize {
        let Rings {
            qps,
            srqs,
            ahs,
            refused,
            bells,
            due,
            counters,
            ..
        } = self;
        let mut pass = Pass {
            endpoint,
            counters,
            refused,
            now,
        };
        let mut moved = 0;
        for &t in due.iter() {
            let left = match t {
                Target::Qp(qpn) => {
                    let Some(q) = qps.get_mut(&qpn) else {
                        continue;
                    };
                    moved += pass.pull_qp(Qpn::new(qpn), q, ahs);
                    // Work requests held until the QP reaches a state that takes them
                    // are not work for now: its modify reads them.
                    let state = pass.endpoint.qp(Qpn::new(qpn)).map(|qp| qp.state());
                    let sends = state.is_some_and(sends_taken);
                    let receives = state.is_some_and(|s| s != QpState::Reset);
                    !q.broken
                        && ((sends && q.sq.has_ready())
                            || (receives && q.rq.as_ref().is_some_and(Intake::has_ready)))
                }
                Target::Srq(id) => {
                    let Some(s) = srqs.get_mut(&id) else {
                        continue;
                    };
                    moved += pass.pull_srq(id, s);
                    !s.broken && s.ring.has_ready()
                }
            };
            if left {
                bells.again.push(t);
            }
        }
        moved
    }

    /// Moves the new work requests of QP `qpn` into the transport (after a modify: those
    /// posted before its new state waited in the ring).
    pub(super) fn pull_qp(&mut self, endpoint: &mut Endpoint, now: Instant, qpn: Qpn) -> usize {
        let Some(q) = self.qps.get_mut(&qpn.value()) else {
            return 0;
        };
        let mut pass = Pass {
            endpoint,
            counters: &mut self.counters,
            refused: &mut self.refused,
            now,
        };
        pass.pull_qp(qpn, q, &self.ahs)
    }

    /// Moves new receive work requests of QP `qpn` (its receive queue or its SRQ) into the
    /// transport, and no send work request.
    pub(super) fn pull_receives_of(&mut self, endpoint: &mut Endpoint, now: Instant, qpn: u32) {
        let srq = endpoint.qp(Qpn::new(qpn)).and_then(|qp| qp.config().srq);
        let mut pass = Pass {
            endpoint,
            counters: &mut self.counters,
            refused: &mut self.refused,
            now,
        };
        if let Some(q) = self.qps.get_mut(&qpn) {
            pass.pull_rq(Qpn::new(qpn), q);
        }
        if let Some(id) = srq
            && let Some(s) = self.srqs.get_mut(&id.0)
        {
            pass.pull_srq(id.0, s);
        }
    }
}

/// One read of rings: the transport that takes their work requests, the counters, and
/// where the completions of refused work requests wait.
struct Pass<'a> {
    endpoint: &'a mut Endpoint,
    counters: &'a mut IntakeCounters,
    refused: &'a mut VecDeque<Completion>,
    now: Instant,
}

impl Pass<'_> {
    /// Moves new send work requests of one QP from its ring into the transport (once the
    /// QP takes them), then its receives.
    fn pull_qp(&mut self, qpn: Qpn, q: &mut QpEntry, ahs: &AddressHandles) -> usize {
        // A broken ring stays broken: reading it again would only count (and announce) the
        // same damage on every pass, at the expense of every other application's work.
        if q.broken {
            return 0;
        }
        let Some(qp) = self.endpoint.qp(qpn) else {
            return 0;
        };
        if !sends_taken(qp.state()) {
            return self.pull_rq(qpn, q);
        }
        let room = (qp.config().caps.max_send_wr as usize).saturating_sub(qp.send_queue_len());
        let Ok(avail) = q.sq.ready() else {
            self.break_qp(qpn, q);
            return 1;
        };
        let (now, bounds) = (self.now, q.send_bounds);
        let take = self.post_batch(
            qpn,
            &q.sq,
            (avail as usize).min(room) as u32,
            |endpoint, raw| {
                let wqe = convert_send(raw, bounds, ahs)?;
                endpoint.post_send(now, qpn, wqe).map_err(|e| e.to_string())
            },
            |raw| {
                (
                    raw.wr_id,
                    send_completion_opcode(raw.opcode),
                    CompletionQueue::Send,
                )
            },
        );
        q.sq.take(take);
        // The slots of retired work requests (completed, signaled or not) are free again.
        if let Some(qp) = self.endpoint.qp(qpn) {
            q.sq.retire(qp.send_queue_len() as u32);
        }
        take as usize + self.pull_rq(qpn, q)
    }

    /// Moves new receive work requests of one QP from its ring into the transport.
    ///
    /// Receives posted while the QP is in RESET stay in the ring until it leaves RESET (as
    /// an RDMA NIC holds them until INIT; a return to RESET discards them with the ring).
    /// One the daemon refuses (malformed: only an application writing its ring by hand
    /// makes one) completes with a local QP operation error and the QP enters the error
    /// state, as a malformed send work request does; the ones after it are flushed.
    fn pull_rq(&mut self, qpn: Qpn, q: &mut QpEntry) -> usize {
        // As in `pull_qp`: a broken ring is never read again.
        if q.broken {
            return 0;
        }
        let Some(rq) = q.rq.as_ref() else {
            return 0;
        };
        let Some(qp) = self.endpoint.qp(qpn) else {
            return 0;
        };
        if qp.state() == QpState::Reset {
            return 0;
        }
        let room = (qp.config().caps.max_recv_wr as usize).saturating_sub(qp.recv_queue_len());
        let Ok(avail) = rq.ready() else {
            self.break_qp(qpn, q);
            return 1;
        };
        let (now, max_sge) = (self.now, q.max_recv_sge);
        let take = self.post_batch(
            qpn,
            rq,
            (avail as usize).min(room) as u32,
            |endpoint, raw| {
                let wqe = convert_recv(raw, max_sge)?;
                endpoint.post_recv(now, qpn, wqe).map_err(|e| e.to_string())
            },
            |raw| (raw.wr_id, WcOpcode::Recv, CompletionQueue::Recv),
        );
        let outstanding = self
            .endpoint
            .qp(qpn)
            .map_or(0, |q| q.recv_queue_len() as u32);
        if let Some(rq) = q.rq.as_mut() {
            rq.take(take);
            rq.retire(outstanding);
        }
        take as usize
    }

    /// Posts the first `take` work requests of `ring` with `post`. The first one refused
    /// completes with a local QP operation error (its work request id, opcode and queue
    /// from `refused`) and its QP enters the error state; the ones after it wait for the
    /// next pass, so that their flush completions follow its error. Returns how many were
    /// taken from the ring.
    fn post_batch<T>(
        &mut self,
        qpn: Qpn,
        ring: &Intake<T>,
        take: u32,
        mut post: impl FnMut(&mut Endpoint, &T) -> Result<(), String>,
        refused: impl FnOnce(&T) -> (u64, WcOpcode, CompletionQueue),
    ) -> u32
    where
        T: zerocopy::FromBytes + zerocopy::IntoBytes + zerocopy::Immutable,
    {
        for i in 0..take {
            let raw = ring.read(i);
            let Err(why) = post(self.endpoint, &raw) else {
                continue;
            };
            let (wr_id, opcode, queue) = refused(&raw);
            let kind = match queue {
                CompletionQueue::Send => "send",
                CompletionQueue::Recv => "receive",
            };
            debug!("QP {qpn}: bad {kind} work request {wr_id:#x}: {why}");
            self.counters.bad_wqe += 1;
            self.fail_qp(qpn);
            let mut c = Completion::flushed(wr_id, opcode, queue, qpn.value());
            c.status = WcStatus::LocQpOpErr;
            self.refused.push_back(c);
            return i + 1;
        }
        take
    }

    /// Moves new receive work requests of an SRQ from its ring into the transport.
    fn pull_srq(&mut self, id: u32, s: &mut SrqEntry) -> usize {
        if s.broken {
            return 0;
        }
        let Some(srq) = self.endpoint.srq(SrqId(id)) else {
            return 0;
        };
        let attr = srq.attr();
        let room = (attr.max_wr as usize).saturating_sub(srq.len());
        let Ok(avail) = s.ring.ready() else {
            self.counters.broken_rings += 1;
            s.break_ring();
            return 0;
        };
        let take = (avail as usize).min(room) as u32;
        for i in 0..take {
            let raw = s.ring.read(i);
            let ok = convert_recv(&raw, attr.max_sge)
                .ok()
                .map(|w| self.endpoint.post_srq_recv(SrqId(id), w).is_ok())
                .unwrap_or(false);
            if !ok {
                // A malformed work request (only a hand-written ring makes one): an SRQ
                // has no CQ to complete it on, so the SRQ is in error, as with a damaged
                // ring, and its owner is told.
                debug!("SRQ {id}: bad receive work request {:#x}", raw.wr_id);
                self.counters.bad_wqe += 1;
                s.ring.take(i);
                s.break_ring();
                return i as usize + 1;
            }
        }
        s.ring.take(take);
        let outstanding = self.endpoint.srq(SrqId(id)).map_or(0, |s| s.len() as u32);
        s.ring.retire(outstanding);
        take as usize
    }

    /// Moves QP `qpn` to the error state.
    fn fail_qp(&mut self, qpn: Qpn) {
        let attr = QpAttr {
            qp_state: QpState::Err,
            ..QpAttr::default()
        };
        let _ = self
            .endpoint
            .modify_qp(self.now, qpn, &attr, AttrMask::STATE);
    }

    /// A ring with impossible counters: the QP goes to the error state and its owner gets
    /// a fatal event. Nothing else is affected.
    fn break_qp(&mut self, qpn: Qpn, q: &mut QpEntry) {
        self.counters.broken_rings += 1;
        self.fail_qp(qpn);
        q.broken = true;
        q.sq.ring.broken().store(1, Ordering::Release);
        q.events.raise(event_type::QP_FATAL, q.handle);
        // Stop reading its rings: they cannot be trusted.
        q.reset_rings();
    }
}

/// Whether send work requests are read from the ring in this state. Those posted in RESET,
/// INIT or RTR wait there until the QP reaches RTS (as an RDMA NIC starts on its send
/// queue then); in SQD the transport queues them, in SQE and ERR it flushes them.
fn sends_taken(state: QpState) -> bool {
    !matches!(state, QpState::Reset | QpState::Init | QpState::Rtr)
}
