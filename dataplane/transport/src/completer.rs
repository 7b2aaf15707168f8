//! The completer: turns responses into send completions and decides on retransmission
//! (rxe's `rxe_comp.c`).
//!
//! Responses retire work requests strictly in order. An ACK for PSN n acknowledges every
//! packet up to n; a READ response or atomic acknowledgement implicitly acknowledges every
//! SEND and WRITE before its request (IBTA 9.7.5.1.1). A NAK acknowledges everything before
//! its PSN. Retransmission is go-back-N from the oldest unacknowledged PSN, on the
//! retransmit timer, at once on a PSN sequence error NAK, or after the RNR timer. The timer
//! is the local ACK timeout (4.096 µs × 2^timeout) until the path is measured, then the
//! [`recovery`](crate::recovery) state's, derived from measured round trips: an expiry
//! before the QP's own timeout resends (again, if a NAK's resend was lost too: the gap
//! persists) without spending the retry count. The completer retires work requests, moves
//! the oldest unacknowledged PSN, runs the retransmit timer and asks for rewinds through the
//! methods of the [`send_queue`](crate::send_queue), which the requester sends from.

use xroce_wire::{NakCode, SackRepr, Syndrome};

use crate::attributes::{QpAttr, QpState, QpType};
use crate::completion::{Completion, CompletionQueue, WcFlags, WcStatus};
use crate::context::{AsyncEvent, Cx};
use crate::counters::Counter;
use crate::memory::{MemoryTable, ScatterInto, scatter};
use crate::packet::{Kind, Packet};
use crate::qp::{QueuePair, send_opcode};
use crate::send_queue::{EntryState, Retired};
use crate::time::ack_timeout;
use crate::wqe::{Gather, SendFlags, SendOp};

/// The completer's own state; what it shares with the requester is in the send queue.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CompleterState {
    /// Transport retries left.
    pub(crate) retry_cnt: u8,
    /// RNR retries left (7 = forever).
    pub(crate) rnr_retry: u8,
    /// A retry for a sequence error NAK started and no progress was made since: further
    /// NAKs for the same gap do not start another (rxe's `started_retry`).
    pub(crate) retry_started: bool,
    /// The SQ_DRAINED event for the current SQD period was raised.
    pub(crate) drained_notified: bool,
}

impl CompleterState {
    pub(crate) fn on_flush(&mut self) {
        self.retry_started = false;
        self.drained_notified = false;
    }

    pub(crate) fn reset_retry_counters(&mut self, attr: &QpAttr) {
        self.retry_cnt = attr.retry_cnt;
        self.rnr_retry = attr.rnr_retry;
        self.retry_started = false;
    }
}

/// Why a response's walk over the send queue stopped before its own handling.
enum Stop {
    /// Nothing was waiting for it.
    Unexpected,
    /// A READ or atomic before it had no response: lost.
    Missing,
}

impl QueuePair {
    /// Handles a response packet (ACK/NAK, READ response, atomic acknowledgement) of an RC
    /// queue pair in RTS or SQD, from its peer (checked with the header).
    pub(crate) fn handle_response<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        cx: &mut Cx<'_, M>,
    ) {
        if pkt.has_trailer() && !self.check_sack(pkt) {
            cx.count(Counter::sr_sack_malformed);
            return;
        }
        if self.sq.stalled() {
            // The peer answers: the QP sends again (and is taken for stalled again if the
            // answers stop).
            self.sq.set_stalled(false);
            if self.sq.unacked_psn() != self.sq.next_psn() {
                let floor = self.config.limits.min_retransmit_timeout;
                self.sq
                    .arm_retransmit(cx.now, ack_timeout(self.attr.timeout), floor);
            }
        }
        let psn = pkt.h.psn;
        // A response for PSN p acknowledges every SEND/WRITE packet before p (IBTA
        // 9.7.5.1.1). A READ or atomic before p whose response has not come was lost.
        // The progress is taken once, for all the work requests it retires (a coalesced
        // ACK retires many).
        let unacked = self.sq.unacked_psn();
        let stop = loop {
            let Some(entry) = self.sq.front() else {
                break Some(Stop::Unexpected);
            };
            if entry.state == EntryState::Posted {
                break Some(Stop::Unexpected);
            }
            if psn.distance(entry.first_psn) <= 0 {
                break None;
            }
            if entry.wqe.op.is_read_or_atomic() {
                if psn.distance(entry.last_psn) <= 0 {
                    break None;
                }
                break Some(Stop::Missing);
            }
            if psn.distance(entry.last_psn) <= 0 {
                // p falls inside this SEND/WRITE: its packets before p are acknowledged.
                if psn.distance(self.sq.unacked_psn()) > 0 {
                    self.sq.acknowledge(psn);
                }
                break None;
            }
            if entry.last_psn.distance(self.sq.unacked_psn()) >= 0 {
                self.sq.acknowledge(entry.last_psn.next());
            }
            self.complete_front(WcStatus::Success, cx);
        };
        if self.sq.unacked_psn() != unacked {
            self.on_progress(cx);
        }
        match stop {
            Some(Stop::Unexpected) => {
                cx.count(Counter::unexpected_response);
                return;
            }
            Some(Stop::Missing) => {
                self.on_missing_response(cx);
                return;
            }
            None => {}
        }
        let diff = psn.distance(self.sq.unacked_psn());
        if diff < 0 {
            cx.count(Counter::duplicate_response);
            return;
        }
        match pkt.h.kind {
            Kind::ReadResponse => self.on_read_response(pkt, diff, cx),
            Kind::AtomicAck => self.on_atomic_ack(pkt, diff, cx),
            Kind::Ack => self.on_ack(pkt, cx),
            _ => cx.count(Counter::bad_response),
        }
    }

    fn on_read_response<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        diff: i32,
        cx: &mut Cx<'_, M>,
    ) {
        // The fields needed, not the whole work request (a few hundred bytes) per packet.
        let Some(entry) = self.sq.front() else {
            return;
        };
        let (op, resp_bytes, len, first_psn) =
            (entry.wqe.op, entry.resp_bytes, entry.len, entry.first_psn);
        let SendOp::Read { .. } = op else {
            self.on_bad_response(cx);
            return;
        };
        if diff > 0 {
            // An earlier response is missing: lost (responses of one READ leave in order).
            // Resend from it now, once per gap, rather than waiting for the timer.
            self.on_missing_response(cx);
            return;
        }
        if pkt.h.aeth.is_some_and(|a| !a.syndrome.is_ack()) {
            self.on_bad_response(cx);
            return;
        }
        let mtu = u64::from(self.mtu());
        let offset = resp_bytes;
        let remaining = len - offset;
        let n = pkt.payload.len() as u64;
        // A response starting a (possibly resumed) READ may be FIRST/ONLY; MIDDLE/LAST only
        // continue one. FIRST/MIDDLE carry exactly one MTU, LAST/ONLY the rest.
        let pos = pkt.h.pos;
        let sequence_ok = pos.starts_message() || pkt.h.psn != first_psn;
        let length_ok = if pos.ends_message() {
            n == remaining
        } else {
            n == mtu && n < remaining
        };
        if !sequence_ok || !length_ok {
            self.on_bad_response(cx);
            return;
        }
        if n > 0 {
            let Some(Gather::Sges(sges)) = self.sq.front().map(|e| &e.wqe.data) else {
                self.fail_send(WcStatus::LocQpOpErr, cx);
                return;
            };
            let into = ScatterInto::Local(sges);
            if scatter(cx.mem, self.config.pd, into, offset, pkt.payload).is_err() {
                self.fail_send(WcStatus::LocProtErr, cx);
                return;
            }
        }
        self.sq.on_response_bytes(n);
        self.sq.acknowledge(pkt.h.psn.next());
        self.on_progress(cx);
        if pos.ends_message() {
            self.complete_front(WcStatus::Success, cx);
        }
    }

    fn on_atomic_ack<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        diff: i32,
        cx: &mut Cx<'_, M>,
    ) {
        let is_atomic = self.sq.front().is_some_and(|e| e.wqe.op.is_atomic());
        if !is_atomic || pkt.h.atomic_ack.is_none() {
            self.on_bad_response(cx);
            return;
        }
        if diff > 0 {
            self.on_missing_response(cx);
            return;
        }
        if pkt.h.aeth.is_some_and(|a| !a.syndrome.is_ack()) {
            self.on_bad_response(cx);
            return;
        }
        let orig = pkt.h.atomic_ack.map_or(0, |a| a.orig_data);
        if let Some(Gather::Sges(sges)) = self.sq.front().map(|e| &e.wqe.data)
            && scatter(
                cx.mem,
                self.config.pd,
                ScatterInto::Local(sges),
                0,
                &orig.to_le_bytes(),
            )
            .is_err()
        {
            self.fail_send(WcStatus::LocProtErr, cx);
            return;
        }
        self.sq.acknowledge(pkt.h.psn.next());
        self.on_progress(cx);
        self.complete_front(WcStatus::Success, cx);
    }

    fn on_ack<M: MemoryTable + ?Sized>(&mut self, pkt: &Packet<'_>, cx: &mut Cx<'_, M>) {
        let Some(aeth) = pkt.h.aeth else {
            cx.count(Counter::bad_response);
            return;
        };
        let psn = pkt.h.psn;
        let Some((op, last_psn)) = self.sq.front().map(|e| (e.wqe.op, e.last_psn)) else {
            return;
        };
        match aeth.syndrome {
            Syndrome::Ack { .. } => {
                if op.is_read_or_atomic() {
                    // A plain ACK for the PSN of a READ or atomic (the responder re-ACKing a
                    // duplicate, as rxe does) proves the request arrived but cannot carry its
                    // result: the result was lost. Resend now rather than at the timeout.
                    self.on_missing_response(cx);
                    return;
                }
                if psn.distance(self.sq.unacked_psn()) >= 0 {
                    self.sq.acknowledge(psn.next());
                    self.on_progress(cx);
                }
                if psn == last_psn {
                    self.complete_front(WcStatus::Success, cx);
                }
            }
            Syndrome::RnrNak { timer } => {
                // IBTA 9.7.5.2.8: everything before the NAKed PSN is acknowledged; resend it
                // after the RNR timer.
                cx.count(Counter::rcvd_rnr_err);
                if psn.distance(self.sq.unacked_psn()) > 0 {
                    self.sq.acknowledge(psn);
                }
                self.sq.set_retransmit(None);
                self.sq.recovery.on_rnr();
                if self.comp.rnr_retry == 0 {
                    cx.count(Counter::retry_rnr_exceeded_err);
                    self.fail_send(WcStatus::RnrRetryExcErr, cx);
                    return;
                }
                if self.comp.rnr_retry != 7 {
                    self.comp.rnr_retry -= 1;
                }
                self.sq.wait_rnr(cx.now + timer.duration());
            }
            Syndrome::Nak(NakCode::PsnSequenceError) if pkt.has_trailer() => {
                self.on_selective_nak(pkt, cx);
            }
            Syndrome::Nak(NakCode::PsnSequenceError) => {
                cx.count(Counter::rcvd_seq_err);
                if psn.distance(self.sq.unacked_psn()) > 0 {
                    // IBTA 9.7.5.2.2: the NAK acknowledges every PSN before it.
                    self.sq.acknowledge(psn);
                    self.on_progress(cx);
                }
                self.retry_once(cx);
            }
            // A reserved syndrome type is a protocol violation: taken like a NAK with a
            // code the completer does not know.
            Syndrome::Nak(_) | Syndrome::Reserved(_) => {
                let (counter, status) = match aeth.syndrome {
                    Syndrome::Nak(NakCode::InvalidRequest) => {
                        (Counter::rcvd_nak_invalid_request, WcStatus::RemInvReqErr)
                    }
                    Syndrome::Nak(NakCode::RemoteAccessError) => {
                        (Counter::rcvd_nak_remote_access, WcStatus::RemAccessErr)
                    }
                    _ => (Counter::rcvd_nak_remote_op, WcStatus::RemOpErr),
                };
                cx.count(counter);
                self.fail_send(status, cx);
            }
        }
    }

    /// Whether the bytes after an acknowledgement's AETH are a selective acknowledgement
    /// this QP takes: it is in selective repeat, the acknowledgement is a PSN sequence error
    /// NAK, the bytes parse, and it says nothing held beyond the last PSN sent.
    // Cold, out of line: only selective repeat comes here, and the packet path stays as
    // the optimizer laid it out without it (fat LTO inlines across the crates).
    #[cold]
    #[inline(never)]
    fn check_sack(&self, pkt: &Packet<'_>) -> bool {
        self.selective
            && pkt
                .h
                .aeth
                .is_some_and(|a| a.syndrome == Syndrome::Nak(NakCode::PsnSequenceError))
            && SackRepr::parse(pkt.payload).is_ok_and(|sack| {
                // Nothing held beyond what was sent: a peer that says so lies, and what
                // it says would open the window (see `Scoreboard::in_flight`).
                sack.highest()
                    .is_none_or(|h| h.distance(self.sq.sent_high()) < 0)
            })
    }

    /// Selective repeat: a PSN sequence error NAK that says what the responder holds
    /// beyond the gap. It acknowledges every PSN before its own, as any such NAK; then the
    /// holes between the oldest unacknowledged PSN and the highest held one are queued for
    /// a resend (see [`crate::selective`]). It spends no retry: the peer answers. While
    /// the requester goes back N it changes nothing.
    // Cold, out of line: only selective repeat comes here, and the packet path stays as
    // the optimizer laid it out without it (fat LTO inlines across the crates).
    #[cold]
    #[inline(never)]
    fn on_selective_nak<M: MemoryTable + ?Sized>(&mut self, pkt: &Packet<'_>, cx: &mut Cx<'_, M>) {
        cx.count(Counter::sr_naks_received);
        let psn = pkt.h.psn;
        if psn.distance(self.sq.unacked_psn()) > 0 {
            self.sq.acknowledge(psn);
            self.on_progress(cx);
        }
        let Ok(sack) = SackRepr::parse(pkt.payload) else {
            return;
        };
        if self.sq.going_back() {
            return;
        }
        if self.sq.recovery.on_sacked(&sack, cx.now) {
            cx.count(Counter::rtt_samples);
        }
        self.sq.recovery.on_selective_gap();
        let floor = self.config.limits.min_retransmit_timeout;
        let qp_timeout = ack_timeout(self.attr.timeout);
        // The gap is the path's first loss known, perhaps: the timer armed before it ran
        // for the QP's timeout, and a hole with too few packets held beyond it is resent
        // only by the timer. It runs no longer than the measured timeout from now.
        if let Some(t) = qp_timeout
            && let Some(deadline) = self.sq.retransmit_deadline()
        {
            let wait = self.sq.retransmit_wait(Some(t), floor);
            if cx.now + wait < deadline {
                self.sq.set_retransmit(Some(cx.now + wait));
            }
        }
        let timing = self.hole_timing();
        self.sq.on_sack(&sack, cx.now, timing);
    }

    /// When selective repeat resends a hole, from what the path measured.
    fn hole_timing(&self) -> crate::recovery::HoleTiming {
        let floor = self.config.limits.min_retransmit_timeout;
        let cap = ack_timeout(self.attr.timeout)
            .unwrap_or(crate::time::STALL_AFTER)
            .max(floor);
        self.sq.recovery.selective_times(floor, cap)
    }

    /// Selective repeat: a hole the last selective acknowledgement showed, with enough
    /// packets held beyond it, has waited its time (its reordering allowance, or a round
    /// trip since its last resend): the holes are looked at again without waiting for
    /// another acknowledgement.
    #[cold]
    #[inline(never)]
    pub(crate) fn on_holes_due<M: MemoryTable + ?Sized>(&mut self, cx: &mut Cx<'_, M>) {
        if self.sq.going_back() || !matches!(self.state, QpState::Rts | QpState::Sqd) {
            self.sq.scoreboard.clear_due();
            return;
        }
        let timing = self.hole_timing();
        self.sq.scan_holes(cx.now, timing);
    }

    /// The oldest unacknowledged PSN advanced: the retry counts start over, the path may
    /// be measured, and the retransmit timer restarts (or stops, with nothing in flight).
    fn on_progress<M: MemoryTable + ?Sized>(&mut self, cx: &mut Cx<'_, M>) {
        self.comp.reset_retry_counters(&self.attr);
        let idle = self.sq.idle();
        let qp_timeout = ack_timeout(self.attr.timeout);
        let acked = self.sq.unacked_psn();
        if self
            .sq
            .recovery
            .on_progress(acked, cx.now, idle, qp_timeout)
        {
            cx.count(Counter::rtt_samples);
        }
        if self.sq.recovery.take_spurious() {
            cx.count(Counter::spurious_timeouts);
        }
        if self.sq.recovery.take_forward() {
            // What was in flight before the expiry arrived: nothing is resent (the test's
            // resend of the oldest is forgotten).
            self.sq.scoreboard.clear();
        }
        let deadline = if idle {
            None
        } else {
            let floor = self.config.limits.min_retransmit_timeout;
            Some(cx.now + self.sq.retransmit_wait(qp_timeout, floor))
        };
        self.sq.set_retransmit(deadline);
    }

    /// A response that does not fit the request it answers (its kind, its sequence or its
    /// length): counted, and the request fails with a bad response error.
    fn on_bad_response<M: MemoryTable + ?Sized>(&mut self, cx: &mut Cx<'_, M>) {
        cx.count(Counter::bad_response);
        self.fail_send(WcStatus::BadRespErr, cx);
    }

    /// A response that shows an earlier one missing: counted, and the requester resends
    /// from the oldest unacknowledged PSN, once per gap.
    fn on_missing_response<M: MemoryTable + ?Sized>(&mut self, cx: &mut Cx<'_, M>) {
        cx.count(Counter::response_out_of_seq);
        self.retry_once(cx);
    }

    /// Starts a retransmission unless one already started for the same gap (a sequence
    /// error NAK or a missing response): every later sign of the same loss is ignored until
    /// progress is made.
    fn retry_once<M: MemoryTable + ?Sized>(&mut self, cx: &mut Cx<'_, M>) {
        if !self.comp.retry_started {
            self.comp.retry_started = true;
            cx.count(Counter::prompt_retries);
            let acked = self.sq.unacked_psn();
            self.sq.recovery.on_gap_shown(cx.now, acked);
            self.start_retry(cx);
        }
    }

    /// Starts a go-back-N retransmission, or fails the oldest work request when the retry
    /// budget is spent.
    pub(crate) fn start_retry<M: MemoryTable + ?Sized>(&mut self, cx: &mut Cx<'_, M>) {
        if self.spend_retry(cx) {
            self.sq.request_rewind();
        }
    }

    /// Spends one transport retry and stops the retransmit timer (the resend arms it), or
    /// fails the oldest work request when none is left. Returns whether a resend follows.
    fn spend_retry<M: MemoryTable + ?Sized>(&mut self, cx: &mut Cx<'_, M>) -> bool {
        if self.comp.retry_cnt == 0 {
            cx.count(Counter::retry_exceeded_err);
            self.fail_send(WcStatus::RetryExcErr, cx);
            return false;
        }
        self.comp.retry_cnt -= 1;
        cx.count(Counter::completer_retry_err);
        self.sq.set_retransmit(None);
        true
    }

    /// The retransmit timer fired. An expiry the QP's own timeout after the last progress
    /// spends the retry count; an earlier one (the timer derived from measured round trips)
    /// resends without spending it.
    pub(crate) fn on_retransmit_timeout<M: MemoryTable + ?Sized>(&mut self, cx: &mut Cx<'_, M>) {
        self.sq.set_retransmit(None);
        if self.sq.drained() || !matches!(self.state, QpState::Rts | QpState::Sqd) {
            return;
        }
        let Some(qp_timeout) = ack_timeout(self.attr.timeout) else {
            // No retransmission with timeout 0: the QP waits for the peer, without holding
            // the budget of every other QP meanwhile.
            if !self.sq.stalled() {
                self.sq.set_stalled(true);
                cx.count(Counter::req_stalled);
            }
            return;
        };
        if !self.sq.answer_due() {
            let floor = self.config.limits.min_retransmit_timeout;
            let wait = self.sq.retransmit_wait(Some(qp_timeout), floor);
            if let Some(next) = self.sq.recovery.unasked_until(cx.now, wait) {
                cx.count(Counter::unasked_timeouts);
                self.sq.set_retransmit(Some(next));
                return;
            }
        }
        let in_flight = self.sq.window().max(0) as u64;
        if let Some(due) = self.sq.recovery.tail_outgrown(cx.now, in_flight) {
            self.sq.set_retransmit(Some(due));
            return;
        }
        // A NAK's resend that made no progress since: the gap persists.
        let gap = std::mem::take(&mut self.comp.retry_started);
        if self.sq.recovery.on_expiry(cx.now, qp_timeout) {
            cx.count(Counter::retransmit_timeouts);
            if self.spend_retry(cx) {
                self.resend_after_expiry(cx);
            }
            return;
        }
        cx.count(Counter::adaptive_timeouts);
        if gap {
            cx.count(Counter::gap_retries);
        }
        cx.count(Counter::completer_retry_err);
        self.resend_after_expiry(cx);
    }

    /// What the retransmission timer resends: in selective repeat, with the scoreboard
    /// holding something, only the oldest unacknowledged packet; in go-back-N, at the first
    /// expiry since progress, the oldest packet alone too (RFC 5682's test); otherwise (or
    /// when that packet cannot be resent alone) go-back-N.
    fn resend_after_expiry<M: MemoryTable + ?Sized>(&mut self, cx: &mut Cx<'_, M>) {
        let mtu = self.mtu();
        if self.selective {
            if !self.sq.resend_oldest(cx.now, mtu) {
                self.sq.request_rewind();
            }
        } else if !(self.sq.recovery.probe_armed() && self.sq.probe_oldest(cx.now, mtu)) {
            // Go-back-N, unless RFC 5682's test resends the oldest alone first.
            self.sq.request_rewind();
        }
    }

    /// Completes the oldest send work request with `status`.
    pub(crate) fn complete_front<M: MemoryTable + ?Sized>(
        &mut self,
        status: WcStatus,
        cx: &mut Cx<'_, M>,
    ) {
        let Some(Retired {
            wr_id,
            op,
            flags: wr_flags,
            len,
        }) = self.sq.retire_front()
        else {
            return;
        };
        if status == WcStatus::Success && op.is_send() {
            cx.count(Counter::rdma_sends);
        }
        // IBTA 10.7.3.1: an error always generates a completion.
        if self.config.sq_sig_all
            || wr_flags.contains(SendFlags::SIGNALED)
            || status != WcStatus::Success
        {
            let flags = match op {
                SendOp::SendWithImm { .. } | SendOp::WriteWithImm { .. } => WcFlags::WITH_IMM,
                _ => WcFlags::default(),
            };
            self.completions.push_back(Completion {
                wr_id,
                status,
                opcode: send_opcode(op),
                queue: CompletionQueue::Send,
                qpn: self.config.qpn.value(),
                // ibv_wc.byte_len is meaningful for READ and atomics; rxe reports the message
                // length for every opcode, so we do too.
                byte_len: len as u32,
                imm: 0,
                flags,
                src_qp: 0,
                solicited: false,
                network_header: None,
            });
        }
        if self.state == QpState::Sqd && !self.comp.drained_notified && self.sq.drained() {
            self.comp.drained_notified = true;
            if self.attr.en_sqd_async_notify {
                cx.events.push_back(AsyncEvent::SqDrained(self.config.qpn));
            }
        }
    }

    /// Completes the oldest send work request in error and moves the QP to ERR (RC) or SQE
    /// (UC, UD), flushing what follows.
    pub(crate) fn fail_send<M: MemoryTable + ?Sized>(
        &mut self,
        status: WcStatus,
        cx: &mut Cx<'_, M>,
    ) {
        cx.count(Counter::send_err);
        self.complete_front(status, cx);
        let next = if self.config.qp_type == QpType::Rc {
            QpState::Err
        } else {
            QpState::Sqe
        };
        self.enter_state(next);
        if next == QpState::Err && self.config.srq.is_some() {
            cx.events
                .push_back(AsyncEvent::LastWqeReached(self.config.qpn));
        }
    }
}
