//! The endpoint: every queue pair and shared receive queue of one poller, with the
//! scheduling, timers and frame I/O around them.
//!
//! Frames come in as bytes ([`Endpoint::handle_frame`]) and go out as bytes
//! ([`Endpoint::poll_transmit`]); time comes in as an argument. Queue pairs with something
//! to send wait on an active list served round-robin, one packet per turn, so that a
//! thousand QPs share the link fairly. Timers sit in a heap with at most one live entry per
//! QP.
//!
//! A queue pair can be paced ([`Endpoint::pace`]): congestion control, which sits beside
//! the transport, says that it must not send before an instant, and its turns wait until
//! then in a heap of their own (its acknowledgements, responses and retransmissions
//! included: a rate limit is the queue pair's).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use xroce_wire::{Gid, Qpn};

use crate::attributes::{AttrMask, Limits, ModifyError, QpAttr, QpState, QpType};
use crate::completion::Completion;
use crate::context::{AsyncEvent, Budget, Cx};
use crate::counters::{Counter, Counters};
use crate::frame::{self, EnvelopeCache, FrameWriter, Origin};
use crate::memory::MemoryTable;
use crate::packet::Packet;
use crate::qp::{QpConfig, QueuePair};
use crate::srq::{Srq, SrqAttr, SrqId};
use crate::time::Instant;
use crate::wqe::{PostError, RecvWqe, SendWqe};

/// A hasher for QP and SRQ numbers: they are already well spread (the engine allocates
/// them unpredictably), so a multiply is enough.
#[derive(Clone, Copy, Debug, Default)]
pub struct NumberHasher(u64);

impl Hasher for NumberHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type NumberMap<V> = HashMap<u32, V, BuildHasherDefault<NumberHasher>>;

/// The local addresses and limits of an endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointConfig {
    /// The MAC address frames are sent from.
    pub mac: [u8; 6],
    /// The GID table: index 0 is the default source GID. Frames to any other address are
    /// dropped.
    pub gids: Vec<Gid>,
    /// Device limits for the queue pairs.
    pub limits: Limits,
    /// IP TTL / hop limit for paths that do not set one (rxe uses 64).
    pub default_hop_limit: u8,
    /// The most RC request packets (PSNs: a READ counts its responses) the endpoint's queue
    /// pairs together may have sent and not seen acknowledged; `u32::MAX` for no limit.
    /// Without it a thousand QPs each starting a message at once would send far more than
    /// any receive ring holds, and the losses cost go-back-N retransmissions from every one
    /// of them. The packet that spends the budget asks for an acknowledgement.
    pub max_inflight: u32,
}

/// Why an endpoint operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// No QP with this number.
    #[error("no queue pair {0}")]
    NoSuchQp(Qpn),
    /// A QP with this number exists already.
    #[error("queue pair {0} exists already")]
    QpExists(Qpn),
    /// No SRQ with this number.
    #[error("no shared receive queue {0:?}")]
    NoSuchSrq(SrqId),
    /// An SRQ with this number exists already.
    #[error("shared receive queue {0:?} exists already")]
    SrqExists(SrqId),
    /// The SRQ is still used by a QP.
    #[error("shared receive queue {0:?} is still attached to a queue pair")]
    SrqBusy(SrqId),
    /// A QP names an SRQ of another protection domain, or one that does not exist.
    #[error("shared receive queue {0:?} cannot be used by this queue pair")]
    BadSrq(SrqId),
    /// A modify failed.
    #[error(transparent)]
    Modify(#[from] ModifyError),
    /// A post failed.
    #[error(transparent)]
    Post(#[from] PostError),
    /// Only a UD queue pair joins a multicast group (IBTA 10.5.1.2; the kernel's
    /// `ib_attach_mcast` answers `EINVAL`).
    #[error("queue pair {0} is not a UD queue pair: only UD queue pairs join multicast groups")]
    NotUd(Qpn),
    /// The GID of an attach or detach is not a multicast GID.
    #[error("{0} is not a multicast GID")]
    NotMulticast(Gid),
    /// A detach of a group the queue pair is not attached to.
    #[error("queue pair {0} is not attached to {1}")]
    NotAttached(Qpn, Gid),
}

/// What [`Endpoint::poll_transmit`] produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// The frame's length in the buffer.
    pub len: usize,
    /// The QP that sent it.
    pub qpn: Qpn,
    /// The QP was destroyed and lingers to answer its peer's retries
    /// ([`Endpoint::close_qp`]): the engine keeps no other state for it.
    pub closed: bool,
}

/// What [`Endpoint::diagnostics`] reports. Not a stable interface.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointDiagnostics {
    /// Queue pairs on the active list.
    pub active: usize,
    /// Entries in the timer heap, live and stale.
    pub timers: usize,
    /// Completions waiting for [`Endpoint::poll_completion`].
    pub completions: usize,
    /// Events waiting for [`Endpoint::poll_event`].
    pub events: usize,
    /// Selective repeat: payload bytes every queue pair holds ahead of a gap, together.
    pub held_bytes: u64,
}

/// Every queue pair and shared receive queue of one poller.
#[derive(Debug)]
pub struct Endpoint {
    config: EndpointConfig,
    qps: NumberMap<QpSlot>,
    srqs: NumberMap<Srq>,
    active: VecDeque<u32>,
    timers: BinaryHeap<Reverse<(Instant, u32)>>,
    completions: VecDeque<Completion>,
    events: VecDeque<AsyncEvent>,
    counters: Counters,
    ip_id: u16,
    /// Unacknowledged RC request packets of all QPs (the sum of their `inflight`; a sum of
    /// `u32`s that need not fit one when there is no limit).
    inflight: u64,
    /// Selective repeat: the payload bytes every QP's store holds ahead of a gap.
    held_budget: crate::selective::HeldBudget,
    /// QPs the budget held back, until acknowledgements give some of it back.
    held: VecDeque<u32>,
    /// Paced QPs by the instant they may send again (an entry is live while its QP's
    /// `paced` is that instant).
    paced: BinaryHeap<Reverse<(Instant, u32)>>,
    /// Destroyed QPs that linger, by the instant they go (an entry is live while its QP's
    /// `closing` is that instant).
    closing: BinaryHeap<Reverse<(Instant, u32)>>,
    /// How many QPs linger.
    lingering: usize,
    /// Multicast groups by GID (as a number): the queue pairs attached to each, in the
    /// order they attached. A group is here while it has one.
    groups: HashMap<u128, Vec<u32>>,
}

/// The most destroyed QPs an endpoint keeps lingering at once; beyond it, the one due to
/// go first goes at once.
pub const MAX_LINGERING: usize = 1024;

#[derive(Debug)]
struct QpSlot {
    qp: QueuePair,
    /// What happened on this QP alone (the endpoint's counters hold the sum and more).
    counters: Counters,
    /// The deadline of this QP's live entry in the timer heap.
    timer: Option<Instant>,
    /// This QP's unacknowledged request packets, as last counted in the endpoint's total.
    inflight: u32,
    /// It waits in `held`, for this much room in the budget.
    held: Option<u32>,
    /// The headers of the frames it last sent.
    envelope: Option<EnvelopeCache>,
    /// It sends nothing before this instant (its entry in the paced heap is live).
    paced: Option<Instant>,
    /// It was destroyed, and lingers until this instant (its entry in the closing heap is
    /// live) to answer its peer's retries: see [`Endpoint::close_qp`].
    closing: Option<Instant>,
    /// The multicast groups it is attached to.
    groups: Vec<u128>,
}

impl Endpoint {
    /// A new endpoint with no queue pairs.
    pub fn new(config: EndpointConfig) -> Endpoint {
        Endpoint {
            config,
            qps: NumberMap::default(),
            srqs: NumberMap::default(),
            active: VecDeque::new(),
            timers: BinaryHeap::new(),
            completions: VecDeque::new(),
            events: VecDeque::new(),
            counters: Counters::default(),
            ip_id: 0,
            inflight: 0,
            held_budget: Default::default(),
            held: VecDeque::new(),
            paced: BinaryHeap::new(),
            closing: BinaryHeap::new(),
            lingering: 0,
            groups: HashMap::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &EndpointConfig {
        &self.config
    }

    /// Sets the budget of unacknowledged RC request packets ([`EndpointConfig::max_inflight`]).
    pub fn set_max_inflight(&mut self, max_inflight: u32) {
        self.config.max_inflight = max_inflight;
    }

    /// Replaces the GID table (the host's addresses changed).
    pub fn set_gids(&mut self, gids: Vec<Gid>) {
        self.config.gids = gids;
        // The envelopes name source addresses from the table.
        for slot in self.qps.values_mut() {
            slot.envelope = None;
        }
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Counts something the owner noticed (for example a frame it could not hand over).
    pub fn count(&mut self, counter: Counter) {
        self.counters.inc(counter);
    }

    /// Holds queue pair `qpn` until `until`: it is given no transmit turn before then (a
    /// later instant than one already set replaces it; an earlier one does not). Unknown
    /// QPs are ignored.
    pub fn pace(&mut self, qpn: Qpn, until: Instant) {
        if let Some(slot) = self.qps.get_mut(&qpn.value())
            && slot.paced.is_none_or(|t| t < until)
        {
            slot.paced = Some(until);
            self.paced.push(Reverse((until, qpn.value())));
        }
    }

    /// Gives the paced QPs whose instant has come their turns back.
    fn release_paced(&mut self, now: Instant) {
        while let Some(&Reverse((t, qpn))) = self.paced.peek() {
            if t > now {
                break;
            }
            self.paced.pop();
            let Some(slot) = self.qps.get_mut(&qpn) else {
                continue;
            };
            if slot.paced != Some(t) {
                continue;
            }
            slot.paced = None;
            // One the budget holds gets its turn from the budget.
            if !slot.qp.scheduled && slot.held.is_none() && slot.qp.wants_transmit() {
                slot.qp.scheduled = true;
                self.active.push_back(qpn);
            }
        }
    }

    /// Creates a queue pair in RESET.
    pub fn create_qp(&mut self, config: QpConfig) -> Result<(), EndpointError> {
        let qpn = config.qpn;
        match self.qps.get(&qpn.value()) {
            // The number was given again: the QP that had it goes now.
            Some(slot) if slot.closing.is_some() => self.remove(qpn.value()),
            Some(_) => return Err(EndpointError::QpExists(qpn)),
            None => {}
        }
        if let Some(id) = config.srq {
            let srq = self.srqs.get(&id.0).ok_or(EndpointError::BadSrq(id))?;
            if srq.pd() != config.pd {
                return Err(EndpointError::BadSrq(id));
            }
        }
        let mut qp = QueuePair::new(config);
        qp.resp.held.share(self.held_budget.clone());
        self.qps.insert(
            qpn.value(),
            QpSlot {
                qp,
                counters: Counters::default(),
                timer: None,
                inflight: 0,
                held: None,
                envelope: None,
                paced: None,
                closing: None,
                groups: Vec::new(),
            },
        );
        Ok(())
    }

    /// Destroys a queue pair; its outstanding work requests are dropped without completions
    /// (as `ibv_destroy_qp` does).
    pub fn destroy_qp(&mut self, qpn: Qpn) -> Result<(), EndpointError> {
        if !self.qps.contains_key(&qpn.value()) {
            return Err(EndpointError::NoSuchQp(qpn));
        }
        self.remove(qpn.value());
        Ok(())
    }

    /// Destroys a queue pair as the application asks (`ibv_destroy_qp`): its outstanding
    /// work requests are dropped without completions, and it is gone for every call of
    /// this endpoint. An RC QP that received requests lingers a while (a retrying peer's
    /// time: [`QueuePair::linger`]) with its responder's PSN and MSN alone, to answer
    /// duplicates of the SENDs and WRITEs it executed. The peer's last message may have
    /// arrived and its acknowledgement been lost, or not sent yet, when the application
    /// saw the message and destroyed the QP; without an answer the peer's send would end
    /// in retry exceeded. Nothing else reaches it (counted in `rcvd_unknown_qpn`, as for
    /// a QP that is gone), and a QP created with its number replaces it at once.
    pub fn close_qp(&mut self, now: Instant, qpn: Qpn) -> Result<(), EndpointError> {
        let n = qpn.value();
        let slot = self
            .qps
            .get_mut(&n)
            .filter(|s| s.closing.is_none())
            .ok_or(EndpointError::NoSuchQp(qpn))?;
        let Some(linger) = slot.qp.linger() else {
            self.remove(n);
            return Ok(());
        };
        slot.qp.close();
        let left = std::mem::take(&mut slot.groups);
        leave_groups(&mut self.groups, n, &left);
        let until = now + linger;
        slot.closing = Some(until);
        if slot.held.take().is_some() {
            self.held.retain(|&q| q != n);
        }
        self.closing.push(Reverse((until, n)));
        queues!(self).after(slot, now, n, true);
        self.lingering += 1;
        if self.lingering > MAX_LINGERING {
            self.end_lingering(None);
        }
        Ok(())
    }

    /// Removes the lingering QPs whose time has come at `now` (with `None`, the one due
    /// first, whatever the time).
    fn end_lingering(&mut self, now: Option<Instant>) {
        while let Some(&Reverse((t, qpn))) = self.closing.peek() {
            if now.is_some_and(|now| t > now) {
                break;
            }
            self.closing.pop();
            let live = self.qps.get(&qpn).is_some_and(|s| s.closing == Some(t));
            if live {
                self.remove(qpn);
                if now.is_none() {
                    break;
                }
            }
        }
    }

    /// Removes a queue pair, whether live or lingering, and what the endpoint keeps for it.
    fn remove(&mut self, qpn: u32) {
        let Some(slot) = self.qps.remove(&qpn) else {
            return;
        };
        leave_groups(&mut self.groups, qpn, &slot.groups);
        self.inflight -= u64::from(slot.inflight);
        if slot.held.is_some() {
            self.held.retain(|&n| n != qpn);
        }
        if slot.qp.scheduled {
            // A QP created later with the same number must not inherit this turn.
            self.active.retain(|&n| n != qpn);
        }
        if slot.closing.is_some() {
            self.lingering -= 1;
        }
    }

    /// Attaches UD queue pair `qpn` to the multicast group `gid` (`ibv_attach_mcast`): it
    /// receives every packet for the multicast QP (0xFFFFFF) addressed to that GID, with
    /// its own checks (state, P_Key, Q_Key), as each attached QP does. `Ok(false)` when it
    /// was attached already (the kernel answers success then too).
    pub fn attach_mcast(&mut self, qpn: Qpn, gid: Gid) -> Result<bool, EndpointError> {
        let slot = self
            .qps
            .get_mut(&qpn.value())
            .filter(|s| s.closing.is_none())
            .ok_or(EndpointError::NoSuchQp(qpn))?;
        if slot.qp.config().qp_type != QpType::Ud {
            return Err(EndpointError::NotUd(qpn));
        }
        if !gid.is_multicast() {
            return Err(EndpointError::NotMulticast(gid));
        }
        let key = u128::from_ne_bytes(gid.0);
        if slot.groups.contains(&key) {
            return Ok(false);
        }
        slot.groups.push(key);
        self.groups.entry(key).or_default().push(qpn.value());
        Ok(true)
    }

    /// Detaches queue pair `qpn` from the multicast group `gid` (`ibv_detach_mcast`).
    pub fn detach_mcast(&mut self, qpn: Qpn, gid: Gid) -> Result<(), EndpointError> {
        let slot = self
            .qps
            .get_mut(&qpn.value())
            .filter(|s| s.closing.is_none())
            .ok_or(EndpointError::NoSuchQp(qpn))?;
        if !gid.is_multicast() {
            return Err(EndpointError::NotMulticast(gid));
        }
        let key = u128::from_ne_bytes(gid.0);
        let Some(at) = slot.groups.iter().position(|&g| g == key) else {
            return Err(EndpointError::NotAttached(qpn, gid));
        };
        slot.groups.swap_remove(at);
        leave_groups(&mut self.groups, qpn.value(), &[key]);
        Ok(())
    }

    /// The queue pairs attached to the multicast group `gid`, in the order they attached.
    pub fn mcast_members(&self, gid: Gid) -> &[u32] {
        self.groups
            .get(&u128::from_ne_bytes(gid.0))
            .map_or(&[], Vec::as_slice)
    }

    /// How many destroyed queue pairs linger ([`Endpoint::close_qp`]).
    pub fn lingering(&self) -> usize {
        self.lingering
    }

    /// Turns selective repeat on or off for queue pair `qpn` (RC only; see
    /// [`crate::selective`] and [`QueuePair::set_selective_repeat`]). The engine calls it
    /// with `true` on both ends of a connection once each knows that the peer QP is served
    /// by an xroce daemon that advertised selective repeat, never for a standard peer.
    pub fn set_selective_repeat(&mut self, qpn: Qpn, on: bool) -> Result<(), EndpointError> {
        let slot = self
            .qps
            .get_mut(&qpn.value())
            .filter(|s| s.closing.is_none())
            .ok_or(EndpointError::NoSuchQp(qpn))?;
        slot.qp.set_selective_repeat(on);
        Ok(())
    }

    /// One queue pair's counters.
    pub fn qp_counters(&self, qpn: Qpn) -> Option<&Counters> {
        self.live(qpn).map(|slot| &slot.counters)
    }

    /// A queue pair's slot, unless it lingers.
    fn live(&self, qpn: Qpn) -> Option<&QpSlot> {
        self.qps.get(&qpn.value()).filter(|s| s.closing.is_none())
    }

    /// Every queue pair's number, state and counters.
    pub fn qp_stats(&self) -> impl Iterator<Item = (Qpn, QpState, &Counters)> + '_ {
        self.qps
            .values()
            .filter(|slot| slot.closing.is_none())
            .map(|slot| (slot.qp.qpn(), slot.qp.state(), &slot.counters))
    }

    /// A queue pair.
    pub fn qp(&self, qpn: Qpn) -> Option<&QueuePair> {
        self.live(qpn).map(|s| &s.qp)
    }

    /// The numbers of every queue pair.
    pub fn qpns(&self) -> impl Iterator<Item = Qpn> + '_ {
        self.qps
            .iter()
            .filter(|(_, s)| s.closing.is_none())
            .map(|(&n, _)| Qpn::new(n))
    }

    /// Modifies a queue pair (`ibv_modify_qp`).
    pub fn modify_qp(
        &mut self,
        now: Instant,
        qpn: Qpn,
        attr: &QpAttr,
        mask: AttrMask,
    ) -> Result<(), EndpointError> {
        let slot = self
            .qps
            .get_mut(&qpn.value())
            .filter(|s| s.closing.is_none())
            .ok_or(EndpointError::NoSuchQp(qpn))?;
        slot.qp.modify(attr, mask, self.config.gids.len())?;
        // Its path or its peer may have changed: the envelope is made again when it next
        // sends (`FrameWriter` trusts a connected queue pair's cached one).
        slot.envelope = None;
        queues!(self).after(slot, now, qpn.value(), true);
        Ok(())
    }

    /// Posts a send work request.
    pub fn post_send(&mut self, now: Instant, qpn: Qpn, wqe: SendWqe) -> Result<(), EndpointError> {
        let slot = self
            .qps
            .get_mut(&qpn.value())
            .filter(|s| s.closing.is_none())
            .ok_or(EndpointError::NoSuchQp(qpn))?;
        slot.qp.post_send(wqe)?;
        queues!(self).after(slot, now, qpn.value(), true);
        Ok(())
    }

    /// Posts a receive work request.
    pub fn post_recv(&mut self, now: Instant, qpn: Qpn, wqe: RecvWqe) -> Result<(), EndpointError> {
        let slot = self
            .qps
            .get_mut(&qpn.value())
            .filter(|s| s.closing.is_none())
            .ok_or(EndpointError::NoSuchQp(qpn))?;
        slot.qp.post_recv(wqe)?;
        queues!(self).after(slot, now, qpn.value(), true);
        Ok(())
    }

    /// Creates a shared receive queue.
    pub fn create_srq(&mut self, srq: Srq) -> Result<(), EndpointError> {
        let id = srq.id();
        if self.srqs.contains_key(&id.0) {
            return Err(EndpointError::SrqExists(id));
        }
        self.srqs.insert(id.0, srq);
        Ok(())
    }

    /// Destroys a shared receive queue that no queue pair uses.
    pub fn destroy_srq(&mut self, id: SrqId) -> Result<(), EndpointError> {
        if !self.srqs.contains_key(&id.0) {
            return Err(EndpointError::NoSuchSrq(id));
        }
        if self
            .qps
            .values()
            .any(|s| s.closing.is_none() && s.qp.config().srq == Some(id))
        {
            return Err(EndpointError::SrqBusy(id));
        }
        self.srqs.remove(&id.0);
        Ok(())
    }

    /// A shared receive queue.
    pub fn srq(&self, id: SrqId) -> Option<&Srq> {
        self.srqs.get(&id.0)
    }

    /// Posts to a shared receive queue.
    pub fn post_srq_recv(&mut self, id: SrqId, wqe: RecvWqe) -> Result<(), EndpointError> {
        let srq = self
            .srqs
            .get_mut(&id.0)
            .ok_or(EndpointError::NoSuchSrq(id))?;
        Ok(srq.post_recv(wqe)?)
    }

    /// Arms a shared receive queue's limit.
    pub fn modify_srq(&mut self, id: SrqId, attr: SrqAttr) -> Result<(), EndpointError> {
        let srq = self
            .srqs
            .get_mut(&id.0)
            .ok_or(EndpointError::NoSuchSrq(id))?;
        Ok(srq.set_limit(attr.srq_limit)?)
    }

    /// Handles one received Ethernet frame.
    pub fn handle_frame<M: MemoryTable + ?Sized>(
        &mut self,
        now: Instant,
        bytes: &[u8],
        mem: &mut M,
    ) {
        let received = match frame::parse(bytes, &self.config.gids) {
            Ok(received) => received,
            Err(counter) => return self.counters.inc(counter),
        };
        let qpn = received.dest_qpn.value();
        if received.dest_qpn == Qpn::MULTICAST {
            return self.handle_multicast(now, &received.packet, mem, true);
        }
        let Some(slot) = self.qps.get_mut(&qpn) else {
            if received.packet.has_trailer() {
                // Counted as before selective repeat existed.
                return self.counters.inc(Counter::rcvd_malformed);
            }
            return self.counters.inc(Counter::rcvd_unknown_qpn);
        };
        let closing = slot.closing.is_some();
        if closing && !slot.qp.answers_when_closed(&received.packet) {
            return self.counters.inc(Counter::rcvd_unknown_qpn);
        }
        let stripped;
        let mut packet = &received.packet;
        if packet.has_trailer() && !slot.qp.selective_repeat() {
            // An acknowledgement with bytes after its AETH: a selective acknowledgement,
            // which only a QP in selective repeat takes as one. A QP without it (its peer
            // has it on, this end off) takes it for the PSN sequence error NAK it is, the
            // ranges ignored, and goes back N at once rather than on its timer. Anything
            // else with bytes there is malformed, as it always was.
            let Some(nak) = standard_part_of_sack(packet) else {
                return self.counters.inc(Counter::rcvd_malformed);
            };
            stripped = nak;
            packet = &stripped;
            self.counters.inc(Counter::sr_naks_taken_as_standard);
            slot.counters.inc(Counter::sr_naks_taken_as_standard);
        }
        let answered = slot.counters.duplicate_request;
        deliver(
            slot,
            &mut self.srqs,
            &mut self.counters,
            &mut self.events,
            &self.config.gids,
            now,
            mem,
            packet,
        );
        if closing && slot.counters.duplicate_request > answered {
            // Answered (not dropped by the address checks, nor for want of room).
            self.counters.inc(Counter::closed_qp_answers);
            slot.counters.inc(Counter::closed_qp_answers);
        }
        queues!(self).after(slot, now, qpn, true);
    }

    /// Handles a copy of a multicast frame another poller received (or sent) for the queue
    /// pairs of this endpoint attached to its group, as [`Endpoint::handle_frame`] does,
    /// except that a frame for a group none of them joined is not counted: the poller that
    /// took the frame from the wire handed a copy to every other one.
    pub fn handle_multicast_copy<M: MemoryTable + ?Sized>(
        &mut self,
        now: Instant,
        bytes: &[u8],
        mem: &mut M,
    ) {
        let received = match frame::parse(bytes, &self.config.gids) {
            Ok(received) if received.dest_qpn == Qpn::MULTICAST => received,
            Ok(_) => return self.counters.inc(Counter::rcvd_malformed),
            Err(counter) => return self.counters.inc(counter),
        };
        self.handle_multicast(now, &received.packet, mem, false);
    }

    /// A packet for the multicast QP: a copy for each queue pair attached to the group of
    /// its destination GID (rxe's `rxe_rcv_mcast_pkt`), each with its own checks; one that
    /// fails them is counted in its counter and the others still take theirs.
    fn handle_multicast<M: MemoryTable + ?Sized>(
        &mut self,
        now: Instant,
        packet: &Packet<'_>,
        mem: &mut M,
        count_unjoined: bool,
    ) {
        let key = u128::from_ne_bytes(packet.net.dgid.0);
        // Taken out of the table while its members take their copies (a delivery needs
        // the endpoint, and nothing in it joins or leaves a group), then put back: no
        // allocation per packet.
        let members = match self.groups.remove(&key) {
            Some(members) => members,
            None => {
                if count_unjoined {
                    self.counters.inc(Counter::rcvd_mcast_unjoined);
                }
                return;
            }
        };
        for &qpn in &members {
            let Some(slot) = self.qps.get_mut(&qpn) else {
                continue;
            };
            deliver(
                slot,
                &mut self.srqs,
                &mut self.counters,
                &mut self.events,
                &self.config.gids,
                now,
                mem,
                packet,
            );
            queues!(self).after(slot, now, qpn, true);
        }
        self.groups.insert(key, members);
    }

    /// Writes the next frame to send into `buf` (which must hold a maximum-size frame:
    /// [`frame::MAX_FRAME`] bytes) and says which QP sent it.
    pub fn poll_transmit<M: MemoryTable + ?Sized>(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        mem: &mut M,
    ) -> Option<Transmit> {
        // Acknowledgements gave some of the budget back: the QPs held longest take turns
        // again, oldest first, as many as the room can admit the chunk of (waking every held
        // QP for each acknowledgement would cost a thousand failed admissions per packet).
        // With nothing unacknowledged at all, the oldest goes whatever it needs (as
        // `admit_chunk` lets it).
        self.release_paced(now);
        let mut room = self.room();
        let mut woke = false;
        while let Some(&qpn) = self.held.front() {
            let need = self.qps.get(&qpn).and_then(|s| s.held).unwrap_or(0);
            if room < u64::from(need) && (self.inflight != 0 || woke) {
                break;
            }
            woke = true;
            self.held.pop_front();
            room = room.saturating_sub(u64::from(need));
            if let Some(slot) = self.qps.get_mut(&qpn) {
                slot.held = None;
                if !slot.qp.scheduled && slot.qp.wants_transmit() {
                    slot.qp.scheduled = true;
                    self.active.push_back(qpn);
                }
            }
            if room == 0 {
                break;
            }
        }
        while let Some(qpn) = self.active.pop_front() {
            let Some(slot) = self.qps.get_mut(&qpn) else {
                continue;
            };
            slot.qp.scheduled = false;
            if slot.paced.is_some_and(|until| until > now) {
                // Its live entry in the paced heap gives the turn back.
                continue;
            }
            let srq = slot.qp.config().srq.and_then(|id| self.srqs.get_mut(&id.0));
            let mut cx = Cx {
                now,
                mem: &mut *mem,
                counters: &mut self.counters,
                qp_counters: &mut slot.counters,
                srq,
                events: &mut self.events,
                budget: Budget {
                    limit: self.config.max_inflight,
                    others: u32::try_from(self.inflight - u64::from(slot.inflight))
                        .unwrap_or(u32::MAX),
                    held: None,
                },
            };
            let origin = Origin {
                mac: self.config.mac,
                gids: &self.config.gids,
                default_hop_limit: self.config.default_hop_limit,
            };
            let mut writer = FrameWriter::new(
                buf,
                origin,
                &mut self.ip_id,
                slot.qp.qpn(),
                &mut slot.envelope,
            );
            let sent = slot.qp.poll_transmit(&mut cx, &mut writer);
            let closed = slot.closing.is_some();
            let held = cx.budget.held;
            let len = writer.committed();
            if sent {
                slot.counters.inc(Counter::sent_pkts);
            }
            // A QP that had nothing it could send (window full, waiting for a fence) leaves
            // the active list until an acknowledgement, a post or a timer wakes it.
            queues!(self).after(slot, now, qpn, sent);
            if let Some(need) = held
                && slot.held.is_none()
                && !slot.qp.scheduled
            {
                slot.held = Some(need);
                self.held.push_back(qpn);
            }
            if sent {
                self.counters.inc(Counter::sent_pkts);
                return Some(Transmit {
                    len,
                    qpn: Qpn::new(qpn),
                    closed,
                });
            }
        }
        None
    }

    /// The next completion.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    /// The next asynchronous event.
    pub fn poll_event(&mut self) -> Option<AsyncEvent> {
        self.events.pop_front()
    }

    /// When [`Endpoint::handle_timeout`] must next be called: a QP's timer, the instant a
    /// paced QP may send again, or the end of a destroyed QP's lingering.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        let mut timer = None;
        while let Some(&Reverse((t, qpn))) = self.timers.peek() {
            let live = self.qps.get(&qpn).is_some_and(|s| s.timer == Some(t));
            if live {
                timer = Some(t);
                break;
            }
            self.timers.pop();
        }
        let earliest = |timer: Option<Instant>, t: Instant| Some(timer.map_or(t, |x| x.min(t)));
        while let Some(&Reverse((t, qpn))) = self.paced.peek() {
            if self.qps.get(&qpn).is_some_and(|s| s.paced == Some(t)) {
                timer = earliest(timer, t);
                break;
            }
            self.paced.pop();
        }
        while let Some(&Reverse((t, qpn))) = self.closing.peek() {
            if self.qps.get(&qpn).is_some_and(|s| s.closing == Some(t)) {
                timer = earliest(timer, t);
                break;
            }
            self.closing.pop();
        }
        timer
    }

    /// Runs every timer that has expired at `now`, gives paced QPs whose instant has come
    /// their turns back, and removes the destroyed QPs whose lingering is over.
    pub fn handle_timeout<M: MemoryTable + ?Sized>(&mut self, now: Instant, mem: &mut M) {
        self.release_paced(now);
        self.end_lingering(Some(now));
        while let Some(&Reverse((t, qpn))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            let Some(slot) = self.qps.get_mut(&qpn) else {
                continue;
            };
            if slot.timer != Some(t) {
                continue;
            }
            slot.timer = None;
            let srq = slot.qp.config().srq.and_then(|id| self.srqs.get_mut(&id.0));
            let mut cx = Cx {
                now,
                mem: &mut *mem,
                counters: &mut self.counters,
                qp_counters: &mut slot.counters,
                srq,
                events: &mut self.events,
                budget: Budget::UNLIMITED,
            };
            slot.qp.handle_timeout(&mut cx);
            queues!(self).after(slot, now, qpn, true);
        }
    }

    /// Whether any queue pair waits to transmit.
    pub fn has_transmit(&self) -> bool {
        !self.active.is_empty()
            || self.held.front().is_some_and(|qpn| {
                let need = self.qps.get(qpn).and_then(|s| s.held).unwrap_or(0);
                self.inflight == 0 || self.room() >= u64::from(need)
            })
    }

    /// Room left in the budget of unacknowledged RC request packets.
    fn room(&self) -> u64 {
        u64::from(self.config.max_inflight).saturating_sub(self.inflight)
    }

    /// RC request packets of all queue pairs sent and not acknowledged yet.
    pub fn inflight(&self) -> u64 {
        self.inflight
    }

    /// The sizes of the endpoint's own queues, for tests and fuzz targets that check
    /// nothing grows without bound. Not a stable interface.
    #[doc(hidden)]
    pub fn diagnostics(&self) -> EndpointDiagnostics {
        EndpointDiagnostics {
            active: self.active.len(),
            timers: self.timers.len(),
            completions: self.completions.len(),
            events: self.events.len(),
            held_bytes: self.held_budget.held(),
        }
    }
}

/// Counts a received packet for the QP of `slot` and hands it to that QP (its checks,
/// then its responder or completer). The endpoint's parts come borrowed apart, so that
/// the caller keeps the slot it found.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn deliver<M: MemoryTable + ?Sized>(
    slot: &mut QpSlot,
    srqs: &mut NumberMap<Srq>,
    counters: &mut Counters,
    events: &mut VecDeque<AsyncEvent>,
    gids: &[Gid],
    now: Instant,
    mem: &mut M,
    packet: &Packet<'_>,
) {
    counters.inc(Counter::rcvd_pkts);
    slot.counters.inc(Counter::rcvd_pkts);
    let srq = slot.qp.config().srq.and_then(|id| srqs.get_mut(&id.0));
    let mut cx = Cx {
        now,
        mem,
        counters,
        qp_counters: &mut slot.counters,
        srq,
        events,
        budget: Budget::UNLIMITED,
    };
    slot.qp.handle_packet(packet, gids, &mut cx);
}

/// Takes queue pair `qpn` out of the multicast groups `left`; a group left empty goes.
fn leave_groups(groups: &mut HashMap<u128, Vec<u32>>, qpn: u32, left: &[u128]) {
    for key in left {
        if let Some(members) = groups.get_mut(key) {
            members.retain(|&q| q != qpn);
            if members.is_empty() {
                groups.remove(key);
            }
        }
    }
}

/// If `packet`, an acknowledgement with bytes after its AETH, is a selective
/// acknowledgement (a PSN sequence error NAK whose bytes parse as one): the standard NAK
/// it carries, those bytes dropped.
#[cold]
#[inline(never)]
fn standard_part_of_sack<'a>(
    packet: &crate::packet::Packet<'a>,
) -> Option<crate::packet::Packet<'a>> {
    use xroce_wire::{NakCode, SackRepr, Syndrome};
    let nak = packet
        .h
        .aeth
        .is_some_and(|a| a.syndrome == Syndrome::Nak(NakCode::PsnSequenceError));
    if !nak || SackRepr::parse(packet.payload).is_err() {
        return None;
    }
    Some(crate::packet::Packet {
        payload: &[],
        ..*packet
    })
}

/// The [`Queues`] of an endpoint, borrowed field by field.
macro_rules! queues {
    ($endpoint:expr) => {
        Queues {
            completions: &mut $endpoint.completions,
            active: &mut $endpoint.active,
            timers: &mut $endpoint.timers,
            inflight: &mut $endpoint.inflight,
        }
    };
}
use queues;

/// The endpoint's queues that [`Queues::after`] fills, borrowed apart from the QP table so
/// that a caller holding a QP's slot needs no second lookup.
struct Queues<'a> {
    completions: &'a mut VecDeque<Completion>,
    active: &'a mut VecDeque<u32>,
    timers: &'a mut BinaryHeap<Reverse<(Instant, u32)>>,
    inflight: &'a mut u64,
}

impl Queues<'_> {
    /// After any call into a QP: collect its completions, schedule it, register its timer.
    // Forced inline: it runs after every packet in and out, and out of line its arguments
    // went through memory and its prologue saved every register.
    #[inline(always)]
    fn after(self, slot: &mut QpSlot, now: Instant, qpn: u32, schedule: bool) {
        let inflight = slot.qp.unacked_packets();
        *self.inflight = *self.inflight - u64::from(slot.inflight) + u64::from(inflight);
        slot.inflight = inflight;
        if !slot.qp.completions.is_empty() {
            // Moved as slices (the QP's queue keeps its buffer), not one by one: an
            // acknowledgement that retires a batch of work requests moves all its completions.
            self.completions.append(&mut slot.qp.completions);
        }
        if schedule && !slot.qp.scheduled && slot.qp.wants_transmit() {
            slot.qp.scheduled = true;
            self.active.push_back(qpn);
        }
        if let Some(deadline) = slot.qp.poll_timeout() {
            // An RNR wait that has expired makes the QP ready at once.
            let deadline = deadline.max(now);
            if slot.timer.is_none_or(|t| deadline < t) {
                slot.timer = Some(deadline);
                self.timers.push(Reverse((deadline, qpn)));
            }
        }
    }
}
