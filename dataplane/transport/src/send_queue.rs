//! The send queue: send work requests in posting order, each with its progress, and the
//! state of the request packets in flight. The requester sends from it and the completer
//! retires from it; neither reaches into the other, both go through the methods here.
//!
//! The requester moves a cursor through the queue: the entry it sends from, the bytes of it
//! already sent and the next PSN. It starts an entry (assigns its PSNs), reports each packet
//! it sent, and reserves chunks of the endpoint's budget. The completer retires entries at
//! the front as responses acknowledge them, moves the oldest unacknowledged PSN, runs the
//! retransmit timer and, on a loss, asks for a rewind: go-back-N from the oldest
//! unacknowledged PSN, which the requester performs before it sends again (after an RNR
//! wait when the peer had no receive buffer). Between the two PSNs lies the window of
//! packets in flight, which the [`recovery`](crate::recovery) state bounds from what it
//! measures of the path, with the retransmission timer and the pacing of a resend; a
//! retransmission scheme other than go-back-N, or congestion control holding the window,
//! changes what happens here, not the roles.

use std::collections::VecDeque;
use std::time::Duration;

use xroce_wire::Psn;

use crate::recovery::{HoleTiming, Recovery};
use crate::selective::Scoreboard;
use crate::time::{Instant, STALL_AFTER};
use crate::wqe::{SendFlags, SendOp, SendWqe};

/// How far a send work request has got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EntryState {
    /// Not started: no PSNs assigned.
    Posted,
    /// PSNs assigned, some packets sent in the current pass.
    Sending,
    /// Every packet sent in the current pass; waiting for its acknowledgement (RC).
    Sent,
}

/// A send work request in the send queue, with its progress. The roles read entries; only
/// the [`SendQueue`] changes them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SendEntry {
    pub(crate) wqe: SendWqe,
    pub(crate) state: EntryState,
    /// The PSN of its first packet (READ: of its first response).
    pub(crate) first_psn: Psn,
    /// The PSN of its last packet (READ: of its last response).
    pub(crate) last_psn: Psn,
    /// The message length in bytes.
    pub(crate) len: u64,
    /// It counts against `max_rd_atomic` (a READ or atomic that has been sent).
    pub(crate) holds_rd_atomic: bool,
    /// READ: response bytes already placed.
    pub(crate) resp_bytes: u64,
}

impl SendEntry {
    fn new(wqe: SendWqe) -> SendEntry {
        SendEntry {
            wqe,
            state: EntryState::Posted,
            first_psn: Psn::ZERO,
            last_psn: Psn::ZERO,
            len: wqe.data.total_len(),
            holds_rd_atomic: false,
            resp_bytes: 0,
        }
    }

    /// The number of PSNs the message uses: one per packet, and for a READ one per response
    /// packet (IBTA 9.4.4: a READ request consumes the PSNs of its responses).
    fn npkts(&self, mtu: u32) -> u32 {
        if self.wqe.op.is_atomic() {
            return 1;
        }
        // len <= MAX_MESSAGE (2^31), so the packet count fits in u32. A path MTU is a power
        // of two: a shift, not a division, on the path of every packet.
        let packets = if mtu.is_power_of_two() {
            (self.len + u64::from(mtu) - 1) >> mtu.trailing_zeros()
        } else {
            self.len.div_ceil(u64::from(mtu))
        };
        packets.max(1) as u32
    }
}

/// What the completer needs of a work request it retired (not the whole request: a work
/// request is a few hundred bytes).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Retired {
    pub(crate) wr_id: u64,
    pub(crate) op: SendOp,
    pub(crate) flags: SendFlags,
    pub(crate) len: u64,
}

/// Send work requests not yet completed, oldest first, and the packets in flight.
#[derive(Debug)]
pub(crate) struct SendQueue {
    entries: VecDeque<SendEntry>,
    /// The next PSN to send.
    next_psn: Psn,
    /// The PSN after the last one ever sent: a packet before it is sent again.
    sent_high: Psn,
    /// The oldest PSN not yet acknowledged: the next response PSN expected.
    unacked_psn: Psn,
    /// Index of the entry being sent.
    next: usize,
    /// Bytes of that entry already sent (READ: already requested and answered).
    offset: u64,
    /// READ/atomic work requests started and not completed.
    rd_atomic: u8,
    /// Packets sent since the last one with AckReq.
    noack_pkts: u32,
    /// The highest PSN sent that asks for an answer (AckReq, or a READ or atomic
    /// request): while it is unacknowledged an answer is on its way.
    asked: Option<Psn>,
    /// The PSN after the chunk the endpoint's budget admitted (reserved until acknowledged,
    /// sent or not yet).
    chunk_end: Option<Psn>,
    /// Go back to the oldest unacknowledged PSN before sending anything.
    rewind: bool,
    /// After an RNR NAK: do not send before this time.
    rnr_until: Option<Instant>,
    /// When the retransmit timer fires (with `timeout` 0, when the QP is taken for
    /// stalled).
    retransmit: Option<Instant>,
    /// `timeout` 0 and no answer from the peer for [`crate::time::STALL_AFTER`]: the
    /// packets in flight no longer count against the endpoint's budget and nothing new is
    /// sent until the peer answers.
    stalled: bool,
    /// What the requester measures of its path and how it recovers from loss.
    pub(crate) recovery: Recovery,
    /// Selective repeat: what the responder holds, and the holes to resend.
    pub(crate) scoreboard: Scoreboard,
}

impl SendQueue {
    /// An empty queue with room for `capacity` work requests.
    pub(crate) fn with_capacity(capacity: usize) -> SendQueue {
        SendQueue {
            entries: VecDeque::with_capacity(capacity),
            next_psn: Psn::ZERO,
            sent_high: Psn::ZERO,
            unacked_psn: Psn::ZERO,
            next: 0,
            offset: 0,
            rd_atomic: 0,
            noack_pkts: 0,
            asked: None,
            chunk_end: None,
            rewind: false,
            rnr_until: None,
            retransmit: None,
            stalled: false,
            recovery: Recovery::default(),
            scoreboard: Scoreboard::default(),
        }
    }

    // The queue pair: posting, flushing, modifying, reporting.

    /// Work requests posted and not completed.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Appends a work request.
    pub(crate) fn push(&mut self, wqe: SendWqe) {
        self.entries.push_back(SendEntry::new(wqe));
    }

    /// Removes every work request, oldest first, calling `each` with its `wr_id` and
    /// operation, and forgets what was in flight. The PSNs stay.
    pub(crate) fn flush(&mut self, mut each: impl FnMut(u64, SendOp)) {
        while let Some(entry) = self.entries.pop_front() {
            each(entry.wqe.wr_id, entry.wqe.op);
        }
        self.next = 0;
        self.offset = 0;
        self.rd_atomic = 0;
        self.noack_pkts = 0;
        self.asked = None;
        self.chunk_end = None;
        self.rewind = false;
        self.rnr_until = None;
        self.retransmit = None;
        self.stalled = false;
        self.recovery.reset();
        self.scoreboard.clear();
    }

    /// The first PSN to send (`sq_psn`): nothing before it is in flight.
    pub(crate) fn on_sq_psn(&mut self, psn: Psn) {
        self.next_psn = psn;
        self.sent_high = psn;
        self.unacked_psn = psn;
        self.asked = None;
        self.chunk_end = None;
    }

    /// The next PSN to send.
    pub(crate) fn next_psn(&self) -> Psn {
        self.next_psn
    }

    /// The oldest PSN sent and not acknowledged.
    pub(crate) fn unacked_psn(&self) -> Psn {
        self.unacked_psn
    }

    /// The PSN after the last one ever sent.
    #[inline]
    pub(crate) fn sent_high(&self) -> Psn {
        self.sent_high
    }

    /// Request packets (PSNs) sent and not acknowledged, as the endpoint's budget counts
    /// them: none while stalled; after a timeout or during an RNR wait the packets sent are
    /// as good as lost (the peer dropped or refused them) and are admitted afresh when they
    /// are sent again. Counting them meanwhile would let a peer that stopped answering hold
    /// the budget of every other QP. A chunk reserved and not yet sent counts.
    #[inline]
    pub(crate) fn unacked_packets(&self) -> u32 {
        if self.stalled {
            return 0;
        }
        let sent = if self.rewind || self.rnr_until.is_some() {
            0
        } else {
            self.next_psn.distance(self.unacked_psn).max(0)
        };
        let reserved = self
            .chunk_end
            .map_or(0, |end| end.distance(self.unacked_psn).max(0));
        sent.max(reserved) as u32
    }

    /// When the retransmit timer fires, the RNR wait ends or pacing lets the next packet
    /// go, whichever is first.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let first = |a: Option<Instant>, b: Option<Instant>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        first(
            first(self.retransmit, self.rnr_until),
            first(self.recovery.pace_deadline(), self.scoreboard.next_due()),
        )
    }

    /// Ends the RNR wait if it is over at `now`: the requester then resends from the NAKed
    /// PSN (a rewind is pending).
    pub(crate) fn end_rnr_wait(&mut self, now: Instant) {
        if self.rnr_until.is_some_and(|t| t <= now) {
            self.rnr_until = None;
        }
    }

    // The requester.

    /// Whether the requester may send at `now`: not stalled, and no RNR wait running (one
    /// that is over ends here). A rewind asked for is performed first.
    #[inline]
    pub(crate) fn ready_to_send(&mut self, now: Instant, mtu: u32) -> bool {
        if self.stalled {
            return false;
        }
        if let Some(until) = self.rnr_until {
            if now < until {
                return false;
            }
            self.rnr_until = None;
        }
        if self.recovery.probe_failed(now) {
            // RFC 5682's test showed the oldest lost: go back N from the next.
            self.rewind = true;
        }
        if self.rewind {
            self.rewind(mtu);
        }
        true
    }

    /// Whether the requester would send now if asked (timers aside).
    pub(crate) fn has_work(&self) -> bool {
        (self.rewind
            || self.next < self.entries.len()
            || self.scoreboard.has_resend()
            || self.recovery.probe_answered())
            && self.rnr_until.is_none()
            && !self.stalled
    }

    /// The entry the requester sends from.
    #[inline]
    pub(crate) fn current(&self) -> Option<&SendEntry> {
        self.entries.get(self.next)
    }

    /// PSNs sent and not acknowledged.
    #[inline]
    pub(crate) fn window(&self) -> i32 {
        self.next_psn.distance(self.unacked_psn)
    }

    /// Packets in flight: PSNs sent and not acknowledged, or in selective repeat while the
    /// responder holds packets, those sent after the highest it holds and the holes
    /// resent (see [`Scoreboard::in_flight`]).
    #[inline]
    pub(crate) fn in_flight(&self) -> i32 {
        if self.scoreboard.is_empty() {
            return self.window();
        }
        self.scoreboard.in_flight(self.next_psn).min(self.window())
    }

    /// READ and atomic work requests started and not completed.
    pub(crate) fn rd_atomic(&self) -> u8 {
        self.rd_atomic
    }

    /// Bytes of the current entry sent.
    #[inline]
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Packets sent since the last one that asked for an acknowledgement.
    #[inline]
    pub(crate) fn noack_pkts(&self) -> u32 {
        self.noack_pkts
    }

    /// Starts the current entry: assigns its PSNs from the next PSN on, counts it against
    /// `max_rd_atomic` if it is a READ or atomic.
    #[inline]
    pub(crate) fn start_current(&mut self, mtu: u32) {
        let psn = self.next_psn;
        let Some(e) = self.entries.get_mut(self.next) else {
            return;
        };
        let npkts = e.npkts(mtu);
        e.first_psn = psn;
        e.last_psn = psn.wrapping_add(npkts - 1);
        e.state = EntryState::Sending;
        if e.wqe.op.is_read_or_atomic() && !e.holds_rd_atomic {
            e.holds_rd_atomic = true;
            self.rd_atomic += 1;
        }
        self.offset = 0;
    }

    /// Reserves the budget for a chunk of `len` PSNs from the next PSN on.
    pub(crate) fn reserve_chunk(&mut self, len: u32) {
        self.chunk_end = Some(self.next_psn.wrapping_add(len));
    }

    /// A packet of the current entry left with `payload_len` bytes: a READ or atomic
    /// request stands for every PSN of the entry; otherwise `ends` says it was the entry's
    /// last. Returns whether the entry is now all sent (the cursor moved to the next).
    // Forced inline (as `arm_retransmit`): called once per request packet, which the
    // optimizer otherwise does out of line.
    #[inline(always)]
    pub(crate) fn on_sent(
        &mut self,
        ack_req: bool,
        payload_len: u64,
        read_or_atomic: bool,
        ends: bool,
    ) -> bool {
        if ack_req {
            self.noack_pkts = 0;
        } else {
            self.noack_pkts += 1;
        }
        if read_or_atomic {
            if let Some(e) = self.entries.get(self.next) {
                self.next_psn = e.last_psn.next();
            }
        } else {
            self.next_psn = self.next_psn.next();
            self.offset += payload_len;
        }
        if self.next_psn.distance(self.sent_high) > 0 {
            self.sent_high = self.next_psn;
        }
        if !read_or_atomic && !ends {
            return false;
        }
        if let Some(e) = self.entries.get_mut(self.next) {
            e.state = EntryState::Sent;
        }
        self.next += 1;
        self.offset = 0;
        true
    }

    /// Go-back-N: resend from the oldest unacknowledged PSN (IBTA 9.7.5.1.2 for timeouts,
    /// 9.7.5.2.2 for sequence errors).
    fn rewind(&mut self, mtu: u32) {
        self.rewind = false;
        // Everything is resent: what the responder holds is a duplicate to it.
        self.scoreboard.clear();
        self.noack_pkts = 0;
        self.recovery.on_rewind(self.unacked_psn, self.sent_high);
        // The resent packets are admitted again, chunk by chunk.
        self.chunk_end = None;
        let psn = self.unacked_psn;
        let mtu = u64::from(mtu);
        let mut resume = None;
        for (i, e) in self.entries.iter_mut().enumerate() {
            if e.state == EntryState::Posted {
                break;
            }
            match resume {
                None if e.last_psn.distance(psn) >= 0 => {
                    let k = u64::from(psn.distance(e.first_psn).max(0) as u32);
                    resume = Some((i, if e.wqe.op.is_atomic() { 0 } else { k * mtu }));
                    e.state = EntryState::Sending;
                }
                None => {}
                Some(_) => e.state = EntryState::Posted,
            }
        }
        match resume {
            Some((i, offset)) => {
                self.next = i;
                self.offset = offset;
                self.next_psn = match self.entries.get(i) {
                    Some(e) if e.wqe.op.is_atomic() => e.first_psn,
                    _ => psn,
                };
            }
            None => {
                self.next = self
                    .entries
                    .iter()
                    .position(|e| e.state == EntryState::Posted)
                    .unwrap_or(self.entries.len());
                self.offset = 0;
                self.next_psn = psn;
            }
        }
    }

    // Selective repeat.

    /// Whether the requester is going back N (a rewind asked for or an RNR wait): a
    /// selective acknowledgement then changes nothing.
    pub(crate) fn going_back(&self) -> bool {
        self.rewind || self.rnr_until.is_some()
    }

    /// The entry that sent the request packet `psn` and the offset of that packet's bytes
    /// in its message; `None` if no packet of an entry sent so far starts at `psn` (a PSN
    /// inside a READ's responses, or one already acknowledged).
    pub(crate) fn locate(&self, psn: Psn, mtu: u32) -> Option<(usize, u64)> {
        if psn.distance(self.unacked_psn) < 0 || psn.distance(self.next_psn) >= 0 {
            return None;
        }
        for (i, e) in self.entries.iter().enumerate() {
            if e.state == EntryState::Posted || e.first_psn.distance(psn) > 0 {
                return None;
            }
            if e.last_psn.distance(psn) < 0 {
                continue;
            }
            if e.wqe.op.is_read_or_atomic() {
                return (psn == e.first_psn && e.resp_bytes == 0).then_some((i, 0));
            }
            let k = u64::from(psn.distance(e.first_psn) as u32);
            return Some((i, k * u64::from(mtu)));
        }
        None
    }

    /// An entry by its index.
    pub(crate) fn entry(&self, index: usize) -> Option<&SendEntry> {
        self.entries.get(index)
    }

    /// A selective acknowledgement arrived at `now`: its ranges join the scoreboard, and
    /// each request packet sent between the oldest unacknowledged PSN and the highest held
    /// one that is not held is a hole, queued for a resend by the scoreboard's rules
    /// (`timing`). Returns how many were queued.
    pub(crate) fn on_sack(
        &mut self,
        sack: &xroce_wire::SackRepr,
        now: Instant,
        timing: HoleTiming,
    ) -> u32 {
        let unacked = self.unacked_psn;
        self.scoreboard.prune(unacked);
        self.scoreboard.merge(sack, unacked);
        self.scan_holes(now, timing)
    }

    /// Looks at every packet between the oldest unacknowledged PSN and the highest held:
    /// one that is not held is a hole, queued for a resend at `now` by the scoreboard's
    /// rules. Returns how many were queued.
    ///
    /// Walks the gaps between the held ranges, not every PSN: a selective acknowledgement
    /// comes every few packets while a hole is open, and the window between the oldest
    /// unacknowledged PSN and the highest held one is hundreds of packets wide, so a walk
    /// of every PSN (each looked up in the ranges) cost the sending poller more than the
    /// resends did. What is looked at is the same: the packets sent, one per PSN, or one
    /// for a whole READ or atomic.
    pub(crate) fn scan_holes(&mut self, now: Instant, timing: HoleTiming) -> u32 {
        let unacked = self.unacked_psn;
        self.scoreboard.clear_due();
        let Some(highest) = self.scoreboard.highest() else {
            return 0;
        };
        // The last PSN looked at: the highest held, or the last sent when that is lower.
        let last_sent = self.next_psn.wrapping_sub(1);
        let top = if last_sent.distance(highest) < 0 {
            last_sent
        } else {
            highest
        };
        let mut queued = 0;
        // The first held range that may end at or beyond the PSN being looked at (the
        // ranges are in PSN order, and so are the entries).
        let mut range = 0;
        for e in &self.entries {
            if e.state == EntryState::Posted || e.first_psn.distance(highest) > 0 {
                break;
            }
            if e.last_psn.distance(unacked) < 0 {
                continue;
            }
            if e.wqe.op.is_read_or_atomic() {
                // One request packet for the whole READ or atomic.
                let psn = e.first_psn;
                if psn.distance(self.next_psn) >= 0 {
                    break;
                }
                let sent = psn.distance(unacked) >= 0 && e.resp_bytes == 0;
                if sent
                    && !self.scoreboard.holds(psn, e.last_psn)
                    && self.scoreboard.on_hole(psn, now, timing)
                {
                    queued += 1;
                }
                continue;
            }
            let mut psn = if e.first_psn.distance(unacked) >= 0 {
                e.first_psn
            } else {
                unacked
            };
            let end = if e.last_psn.distance(top) < 0 {
                e.last_psn
            } else {
                top
            };
            while psn.distance(end) <= 0 {
                while self
                    .scoreboard
                    .range(range)
                    .is_some_and(|(_, last)| last.distance(psn) < 0)
                {
                    range += 1;
                }
                let gap_end = match self.scoreboard.range(range) {
                    // Held: on past the range, unless it reaches the end. (A range may
                    // reach far beyond what was sent, a peer's word for it: stepping past
                    // it could wrap the PSN around to before the end.)
                    Some((first, last)) if first.distance(psn) <= 0 => {
                        if last.distance(end) >= 0 {
                            break;
                        }
                        psn = last.next();
                        continue;
                    }
                    // A gap up to the next range, or to the end of the entry.
                    Some((first, _)) if first.distance(end) <= 0 => first.wrapping_sub(1),
                    _ => end,
                };
                loop {
                    if self.scoreboard.on_hole(psn, now, timing) {
                        queued += 1;
                    }
                    if psn == gap_end {
                        break;
                    }
                    psn = psn.next();
                }
                psn = gap_end.next();
            }
            if end != e.last_psn {
                break;
            }
        }
        queued
    }

    /// The retransmission timer expired with the scoreboard holding something: the
    /// oldest unacknowledged packet is queued for a resend. Returns false (nothing queued)
    /// when the scoreboard is empty, holds fewer than [`HOLE_THRESHOLD`] packets beyond
    /// it (then no hole before them can ever be resent but by the timer, one an expiry:
    /// after a burst of losses that is a timeout per packet lost) or that packet cannot be
    /// resent alone: the requester then goes back N.
    ///
    /// [`HOLE_THRESHOLD`]: crate::selective::HOLE_THRESHOLD
    pub(crate) fn resend_oldest(&mut self, now: Instant, mtu: u32) -> bool {
        let psn = self.unacked_psn;
        if self.scoreboard.is_empty()
            || self.scoreboard.held_beyond(psn) < crate::selective::HOLE_THRESHOLD
            || self.scoreboard.holds(psn, psn)
            || self.locate(psn, mtu).is_none()
        {
            return false;
        }
        self.scoreboard.force(psn, now);
        true
    }

    /// Go-back-N, RFC 5682's test after an expiry: queues the oldest unacknowledged packet
    /// to be resent alone, without going back (the requester sends nothing else until an
    /// answer says whether it was lost). False if that packet is a READ or atomic request
    /// (the answer to its resend spans its responses, and can look like an answer to what
    /// was not resent) or cannot be resent alone: the requester goes back N at once.
    pub(crate) fn probe_oldest(&mut self, now: Instant, mtu: u32) -> bool {
        let psn = self.unacked_psn;
        let Some((index, _)) = self.locate(psn, mtu) else {
            return false;
        };
        if self.entries[index].wqe.op.is_read_or_atomic() {
            return false;
        }
        self.scoreboard.clear();
        self.scoreboard.force(psn, now);
        true
    }

    // The completer.

    /// The oldest work request.
    #[inline]
    pub(crate) fn front(&self) -> Option<&SendEntry> {
        self.entries.front()
    }

    /// No work request is in flight (only unstarted ones remain).
    pub(crate) fn drained(&self) -> bool {
        self.entries
            .front()
            .is_none_or(|e| e.state == EntryState::Posted)
    }

    /// Every PSN before `psn` is acknowledged.
    #[inline]
    pub(crate) fn acknowledge(&mut self, psn: Psn) {
        self.unacked_psn = psn;
        if !self.scoreboard.is_empty() {
            self.scoreboard.prune(psn);
        }
    }

    /// Every PSN sent is acknowledged and no rewind is pending: the retransmit timer has
    /// nothing to watch.
    #[inline]
    pub(crate) fn idle(&self) -> bool {
        self.unacked_psn == self.next_psn && !self.rewind
    }

    /// READ: `n` more response bytes of the oldest work request were placed.
    pub(crate) fn on_response_bytes(&mut self, n: u64) {
        if let Some(e) = self.entries.front_mut() {
            e.resp_bytes += n;
        }
    }

    /// Removes the oldest work request (it completed). If the requester was (re)sending it,
    /// the acknowledgement made that unnecessary: it continues with the next one, at the
    /// PSN after it, and that message starts a chunk of its own, admitted by the budget.
    #[inline]
    pub(crate) fn retire_front(&mut self) -> Option<Retired> {
        let entry = self.entries.front()?;
        let retired = Retired {
            wr_id: entry.wqe.wr_id,
            op: entry.wqe.op,
            flags: entry.wqe.flags,
            len: entry.len,
        };
        let (last_psn, state, holds_rd_atomic) =
            (entry.last_psn, entry.state, entry.holds_rd_atomic);
        self.entries.pop_front();
        if self.next == 0 {
            self.offset = 0;
            if self.next_psn.distance(last_psn) <= 0 && state != EntryState::Posted {
                self.next_psn = last_psn.next();
            }
            self.noack_pkts = 0;
        }
        self.next = self.next.saturating_sub(1);
        if holds_rd_atomic {
            self.rd_atomic = self.rd_atomic.saturating_sub(1);
        }
        Some(retired)
    }

    /// Asks the requester to go back to the oldest unacknowledged PSN before it sends again.
    pub(crate) fn request_rewind(&mut self) {
        self.rewind = true;
    }

    /// After an RNR NAK: rewind, and send nothing before `until`.
    pub(crate) fn wait_rnr(&mut self, until: Instant) {
        self.rewind = true;
        self.rnr_until = Some(until);
    }

    /// When the retransmit timer fires.
    pub(crate) fn retransmit_deadline(&self) -> Option<Instant> {
        self.retransmit
    }

    /// Sets or stops the retransmit timer.
    #[inline]
    pub(crate) fn set_retransmit(&mut self, deadline: Option<Instant>) {
        self.retransmit = deadline;
    }

    /// How long the retransmit timer runs when armed now, for a QP whose own timeout is
    /// `qp_timeout` (`None`: `timeout` 0, no retransmission: the stall period) and a
    /// device floor of `floor`.
    pub(crate) fn retransmit_wait(
        &self,
        qp_timeout: Option<Duration>,
        floor: Duration,
    ) -> Duration {
        let in_flight = self.window().max(0) as u64;
        qp_timeout.map_or(STALL_AFTER, |t| {
            self.recovery.retransmit_after_for(t, floor, in_flight)
        })
    }

    /// Starts the retransmit timer at `now` unless it runs (the wait is computed only
    /// then).
    // Forced inline: see `on_sent`.
    #[inline(always)]
    pub(crate) fn arm_retransmit(
        &mut self,
        now: Instant,
        qp_timeout: Option<Duration>,
        floor: Duration,
    ) {
        if self.retransmit.is_none() {
            self.arm_from_idle(now, qp_timeout, floor);
        }
    }

    /// A packet `psn` that asks for an answer left at `now`. If none that asks was
    /// unacknowledged, no answer was on its way: the timer, started at the last progress,
    /// counted time in which none could come (a requester whose rate limiter spaces its
    /// packets sends the next one that asks long after the last answer, and a timer from
    /// that answer expires while this one is still on the path). The timer then runs from
    /// now, never sooner than it would have fired.
    #[inline]
    pub(crate) fn on_asked(
        &mut self,
        psn: Psn,
        now: Instant,
        qp_timeout: Option<Duration>,
        floor: Duration,
    ) {
        let waiting = self.answer_due();
        if self.asked.is_none_or(|a| a.distance(psn) <= 0) {
            self.asked = Some(psn);
        }
        if waiting {
            return;
        }
        self.restart_for_answer(now, qp_timeout, floor);
    }

    #[inline(never)]
    fn restart_for_answer(&mut self, now: Instant, qp_timeout: Option<Duration>, floor: Duration) {
        let Some(deadline) = self.retransmit else {
            return;
        };
        if qp_timeout.is_none() {
            return;
        }
        let due = now + self.retransmit_wait(qp_timeout, floor);
        if due > deadline {
            self.retransmit = Some(due);
            self.recovery.on_restarted(now);
        }
    }

    #[inline(never)]
    fn arm_from_idle(&mut self, now: Instant, qp_timeout: Option<Duration>, floor: Duration) {
        self.retransmit = Some(now + self.retransmit_wait(qp_timeout, floor));
        if let Some(t) = qp_timeout {
            self.recovery.on_armed(now, t);
        }
    }

    /// Whether a packet in flight asked for an answer (AckReq, or a READ or atomic
    /// request): only then can an answer be late.
    pub(crate) fn answer_due(&self) -> bool {
        self.asked
            .is_some_and(|a| self.unacked_psn.distance(a) <= 0)
    }

    /// Whether the QP is taken for stalled.
    #[inline]
    pub(crate) fn stalled(&self) -> bool {
        self.stalled
    }

    /// Takes the QP for stalled, or not.
    pub(crate) fn set_stalled(&mut self, stalled: bool) {
        self.stalled = stalled;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wqe::{Gather, SgeList};

    impl SendQueue {
        /// What `scan_holes` did before it walked the gaps: every PSN looked up.
        fn scan_holes_every_psn(&mut self, now: Instant, timing: HoleTiming) -> u32 {
            let unacked = self.unacked_psn;
            self.scoreboard.clear_due();
            let Some(highest) = self.scoreboard.highest() else {
                return 0;
            };
            let mut queued = 0;
            for e in &self.entries {
                if e.state == EntryState::Posted || e.first_psn.distance(highest) > 0 {
                    break;
                }
                if e.last_psn.distance(unacked) < 0 {
                    continue;
                }
                let whole = e.wqe.op.is_read_or_atomic();
                let mut psn = if whole || e.first_psn.distance(unacked) >= 0 {
                    e.first_psn
                } else {
                    unacked
                };
                loop {
                    if psn.distance(highest) > 0 || psn.distance(self.next_psn) >= 0 {
                        break;
                    }
                    let last = if whole { e.last_psn } else { psn };
                    let sent = psn.distance(unacked) >= 0 && !(whole && e.resp_bytes > 0);
                    if sent
                        && !self.scoreboard.holds(psn, last)
                        && self.scoreboard.on_hole(psn, now, timing)
                    {
                        queued += 1;
                    }
                    if whole || psn == e.last_psn {
                        break;
                    }
                    psn = psn.next();
                }
            }
            queued
        }
    }

    /// A small deterministic generator (xorshift64*).
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u32) -> u32 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            ((self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) % u64::from(n)) as u32
        }
    }

    fn wqe(op: SendOp, len: u32) -> SendWqe {
        SendWqe {
            wr_id: 0,
            op,
            flags: SendFlags::SIGNALED,
            data: Gather::Sges(SgeList::single(0x1000, len, 1)),
            ud: None,
        }
    }

    /// Walking the gaps between the held ranges finds exactly the holes that looking up
    /// every PSN found, in the same order, across WRITEs of several packets, READs (one
    /// request for all their PSNs, answered in part or not), a send queue that has not
    /// sent everything, and PSNs that wrap.
    #[test]
    fn the_holes_found_between_held_ranges_are_those_of_every_psn_looked_up() {
        let mut rng = Rng(0x5eed_1234_abcd_0001);
        let mtu = 1024;
        let mut holes = 0;
        for round in 0..2000 {
            let start = if round % 3 == 0 {
                Psn::new(0xff_ffff - rng.below(40))
            } else {
                Psn::new(rng.below(1000))
            };
            let mut sq = SendQueue::with_capacity(64);
            sq.on_sq_psn(start);
            let mut psn = start;
            let entries = 1 + rng.below(12);
            for _ in 0..entries {
                let read = rng.below(5) == 0;
                let packets = 1 + rng.below(6);
                let op = if read {
                    SendOp::Read {
                        remote_addr: 0,
                        rkey: 1,
                    }
                } else {
                    SendOp::Write {
                        remote_addr: 0,
                        rkey: 1,
                    }
                };
                let mut e = SendEntry::new(wqe(op, packets * mtu));
                e.state = EntryState::Sent;
                e.first_psn = psn;
                e.last_psn = psn.wrapping_add(packets - 1);
                if read && rng.below(3) == 0 {
                    e.resp_bytes = u64::from(mtu);
                }
                psn = psn.wrapping_add(packets);
                sq.entries.push_back(e);
            }
            let sent = rng.below(psn.distance(start) as u32 + 1);
            sq.next_psn = start.wrapping_add(sent);
            for e in sq.entries.iter_mut() {
                if e.first_psn.distance(sq.next_psn) >= 0 {
                    e.state = EntryState::Posted;
                }
            }
            sq.unacked_psn = start.wrapping_add(rng.below(sent.max(1)));
            let span = psn.distance(start) as u32;
            for _ in 0..1 + rng.below(4) {
                let mut sack = xroce_wire::SackRepr::new();
                let mut at = rng.below(4);
                while at < span {
                    let len = rng.below(4);
                    if !sack.push(
                        start.wrapping_add(at),
                        start.wrapping_add((at + len).min(span - 1)),
                    ) {
                        break;
                    }
                    at += len + 2 + rng.below(5);
                }
                sq.scoreboard.merge(&sack, sq.unacked_psn);
            }
            let timing = HoleTiming {
                reorder: Duration::ZERO,
                again: Duration::ZERO,
                backoff: None,
            };
            let mut reference = SendQueue::with_capacity(64);
            reference.entries = sq.entries.clone();
            reference.next_psn = sq.next_psn;
            reference.unacked_psn = sq.unacked_psn;
            reference.scoreboard = sq.scoreboard.clone();
            let queued = sq.scan_holes(Instant::ZERO, timing);
            let expected = reference.scan_holes_every_psn(Instant::ZERO, timing);
            assert_eq!(
                sq.scoreboard.hole_psns(),
                reference.scoreboard.hole_psns(),
                "round {round}"
            );
            assert_eq!(queued, expected, "round {round}");
            holes += sq.scoreboard.hole_psns().len();
        }
        assert!(holes > 2000, "the rounds had holes to find ({holes})");
    }

    /// A selective acknowledgement whose range starts at the oldest unacknowledged PSN and
    /// reaches as far as a range can (2^23 - 1 PSNs on) holds everything in flight: no
    /// hole, and the walk ends at once instead of stepping past the range and around the
    /// PSN space.
    #[test]
    fn a_range_from_the_oldest_psn_as_long_as_a_range_can_be_holds_everything() {
        for (sent, unacked) in [(1, 0), (3, 0), (3, 2), (5, 4)] {
            let start = Psn::new(0xff_fffe);
            let mut sq = SendQueue::with_capacity(4);
            sq.on_sq_psn(start);
            let mut e = SendEntry::new(wqe(
                SendOp::Write {
                    remote_addr: 0,
                    rkey: 1,
                },
                5 * 1024,
            ));
            e.state = EntryState::Sent;
            e.first_psn = start;
            e.last_psn = start.wrapping_add(4);
            sq.entries.push_back(e);
            sq.next_psn = start.wrapping_add(sent);
            sq.unacked_psn = start.wrapping_add(unacked);
            let mut sack = xroce_wire::SackRepr::new();
            assert!(sack.push(sq.unacked_psn, sq.unacked_psn.wrapping_add((1 << 23) - 1)));
            sq.scoreboard.merge(&sack, sq.unacked_psn);
            let timing = HoleTiming {
                reorder: Duration::ZERO,
                again: Duration::ZERO,
                backoff: None,
            };
            assert_eq!(sq.scan_holes(Instant::ZERO, timing), 0);
            assert!(
                sq.scoreboard.hole_psns().is_empty(),
                "{sent} sent, {unacked} acknowledged"
            );
        }
    }
}
