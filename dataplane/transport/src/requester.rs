//! The requester: turns send work requests into request packets (rxe's `rxe_req.c`).
//!
//! It walks the send queue in order, segments each message into FIRST/MIDDLE/LAST/ONLY
//! packets by the path MTU, assigns PSNs, sets AckReq on the last packet of a message and at
//! least every `ack_req_every` packets, and holds back when the window of unacknowledged
//! PSNs is full, when `max_rd_atomic` READs/atomics are outstanding, or when a fenced work
//! request waits for earlier READs/atomics. It reads the send queue's entries and moves its
//! cursor through the methods of the [`send_queue`](crate::send_queue); go-back-N
//! retransmission rewinds the cursor to the oldest unacknowledged PSN (the completer
//! decides when, the send queue performs it before the next packet). Once the path is
//! measured, the [`recovery`](crate::recovery) state bounds the window by what the path
//! needs, asks for acknowledgements at least every half window, and paces a resend.

use xroce_wire::{
    AtomicEthRepr, DethRepr, IethRepr, ImmDtRepr, Position, Psn, Qkey, RethRepr, Rkey,
};

use crate::attributes::{QpState, QpType};
use crate::completion::WcStatus;
use crate::context::{Cx, Emit};
use crate::counters::Counter;
use crate::memory::{GatherFrom, MemoryTable, gather};
use crate::packet::{Headers, Kind};
use crate::qp::QueuePair;
use crate::send_queue::EntryState;
use crate::time::ack_timeout;
use crate::wqe::{MAX_MESSAGE, SendFlags, SendOp, UdDest};

/// The position of the packet carrying bytes `[offset, offset + n)` of a message of
/// `total` bytes.
fn position_of(offset: u64, n: u64, total: u64) -> Position {
    match (offset == 0, offset + n >= total) {
        (true, true) => Position::Only,
        (true, false) => Position::First,
        (false, true) => Position::Last,
        (false, false) => Position::Middle,
    }
}

impl QueuePair {
    /// Emits the next request packet, if the send queue has one that may go now.
    /// Returns whether a packet was emitted.
    pub(crate) fn poll_request<M: MemoryTable + ?Sized, E: Emit>(
        &mut self,
        cx: &mut Cx<'_, M>,
        out: &mut E,
    ) -> bool {
        let mtu = self.mtu();
        if !matches!(self.state, QpState::Rts | QpState::Sqd) || !self.sq.ready_to_send(cx.now, mtu)
        {
            return false;
        }
        if self.sq.scoreboard.has_resend()
            && let Some(sent) = self.poll_resend(cx, out)
        {
            return sent;
        }
        // Work requests are a few hundred bytes (inline data, scatter/gather list): this
        // path reads the fields it needs and never copies one.
        let Some(state) = self.sq.current().map(|e| e.state) else {
            return false;
        };
        let qp_type = self.config.qp_type;
        if qp_type == QpType::Rc && !self.window_open(cx, mtu) {
            return false;
        }
        if state == EntryState::Posted && !self.start_entry(cx) {
            return false;
        }
        // start_entry may have changed the entry.
        let Some(entry) = self.sq.current() else {
            return false;
        };
        let (op, flags, ud) = (entry.wqe.op, entry.wqe.flags, entry.wqe.ud);
        let (entry_len, last_psn) = (entry.len, entry.last_psn);
        if qp_type == QpType::Rc && self.sq.noack_pkts() == 0 && !self.admit_chunk(last_psn, cx) {
            return false;
        }
        let path = match ud {
            Some(ud) => ud.path,
            None => self.attr.path,
        };
        if !out.reaches(&path) {
            self.fail_send(WcStatus::LocQpOpErr, cx);
            return false;
        }
        let psn = self.sq.next_psn();
        let offset = self.sq.offset();
        let (mut h, kind, payload_len, pos) =
            self.request_headers(op, flags, ud, entry_len, psn, offset, mtu);
        // Fits: payload_len <= mtu <= 4096. (The pad follows from it when the frame is
        // written.)
        let n = payload_len as usize;
        if qp_type == QpType::Rc {
            let every = self.ack_req_every();
            // A measured window below the device's is clocked by acknowledgements: the
            // packet that fills it asks for one. The device's window is not (a requester
            // that keeps it full would have every packet acknowledged).
            let limit = self.window_limit();
            let measured = limit < self.config.limits.max_unacked_psns as i32;
            h.ack_req = pos.ends_message()
                || self.sq.noack_pkts() + 1 >= every
                || (measured && self.sq.in_flight() + 1 >= limit);
        }

        let pd = self.config.pd;
        let Some(dst) = out.begin(&h, &path, n) else {
            return false;
        };
        let Some(entry) = self.sq.current() else {
            return false;
        };
        let data = GatherFrom::Local(&entry.wqe.data);
        if n > 0 && gather(&*cx.mem, pd, data, offset, dst).is_err() {
            // IBTA 10.7.3.1: a bad lkey completes the work request in error.
            self.fail_send(WcStatus::LocProtErr, cx);
            return false;
        }
        out.commit();

        if qp_type == QpType::Rc {
            let floor = self.config.limits.min_retransmit_timeout;
            self.sq
                .arm_retransmit(cx.now, ack_timeout(self.attr.timeout), floor);
            let fresh = psn.distance(self.sq.sent_high()) >= 0;
            if !fresh {
                cx.count(Counter::retransmitted_pkts);
            }
            let (acked, sent_high) = (self.sq.unacked_psn(), self.sq.sent_high());
            let recovery = &mut self.sq.recovery;
            recovery.on_sent(psn, h.ack_req, fresh, cx.now, acked, sent_high);
            recovery.pace(psn, cx.now, self.config.limits.max_unacked_psns);
        }
        let read_or_atomic = matches!(kind, Kind::ReadRequest | Kind::CompareSwap | Kind::FetchAdd);
        let all_sent = self
            .sq
            .on_sent(h.ack_req, payload_len, read_or_atomic, pos.ends_message());
        if qp_type == QpType::Rc && (h.ack_req || read_or_atomic) {
            // A READ asks for every PSN it stands for: its answer is due until the last
            // response packet is in.
            let asked = if read_or_atomic {
                self.sq.next_psn().wrapping_sub(1)
            } else {
                psn
            };
            let floor = self.config.limits.min_retransmit_timeout;
            self.sq
                .on_asked(asked, cx.now, ack_timeout(self.attr.timeout), floor);
        }
        if all_sent && qp_type != QpType::Rc {
            // UC and UD complete when the last packet leaves; everything before has
            // completed already, so this entry is at the front.
            self.complete_front(WcStatus::Success, cx);
        }
        true
    }

    /// Selective repeat: resends the next hole the responder does not hold, asking for an
    /// acknowledgement, paced as a resend after going back is; the window does not hold it
    /// back (it is in flight already). `None` when no queued hole can be resent any more
    /// (acknowledged meanwhile): new packets may go. `Some(false)` when pacing or the frame
    /// buffer holds it back. Go-back-N comes here too, for the oldest packet RFC 5682's
    /// test resends alone after an expiry.
    // Cold, out of line: only recovery comes here, and the packet path stays as the
    // optimizer laid it out without it (fat LTO inlines across the crates).
    #[cold]
    #[inline(never)]
    fn poll_resend<M: MemoryTable + ?Sized, E: Emit>(
        &mut self,
        cx: &mut Cx<'_, M>,
        out: &mut E,
    ) -> Option<bool> {
        let mtu = self.mtu();
        let (psn, index, offset) = loop {
            let psn = self.sq.scoreboard.next_resend()?;
            if let Some((index, offset)) = self.sq.locate(psn, mtu) {
                break (psn, index, offset);
            }
            self.sq.scoreboard.forget(psn);
        };
        if !self.sq.recovery.may_send(cx.now) {
            self.sq.scoreboard.put_back(psn);
            cx.count(Counter::req_held_by_pacing);
            return Some(false);
        }
        let entry = self.sq.entry(index)?;
        let (op, flags, ud, len) = (entry.wqe.op, entry.wqe.flags, entry.wqe.ud, entry.len);
        let path = self.attr.path;
        let (mut h, _, payload_len, _) = self.request_headers(op, flags, ud, len, psn, offset, mtu);
        h.ack_req = true;
        let n = payload_len as usize;
        let Some(dst) = out.begin(&h, &path, n) else {
            self.sq.scoreboard.put_back(psn);
            return Some(false);
        };
        let entry = self.sq.entry(index)?;
        let data = GatherFrom::Local(&entry.wqe.data);
        if n > 0 && gather(&*cx.mem, self.config.pd, data, offset, dst).is_err() {
            // The region went away since the first send: the work request fails.
            self.fail_send(WcStatus::LocProtErr, cx);
            return Some(false);
        }
        out.commit();
        cx.count(Counter::retransmitted_pkts);
        let first = self.sq.scoreboard.on_resent(psn, cx.now);
        let floor = self.config.limits.min_retransmit_timeout;
        self.sq
            .arm_retransmit(cx.now, ack_timeout(self.attr.timeout), floor);
        self.sq
            .on_asked(psn, cx.now, ack_timeout(self.attr.timeout), floor);
        if !self.selective {
            // Go-back-N's test after an expiry (RFC 5682): the oldest, alone.
            self.sq.recovery.on_probe_sent(psn, cx.now);
            cx.count(Counter::frto_probes);
            return Some(true);
        }
        cx.count(Counter::sr_packets_resent);
        let (acked, sent_high) = (self.sq.unacked_psn(), self.sq.sent_high());
        let recovery = &mut self.sq.recovery;
        recovery.on_hole_resent(psn, first, cx.now, acked, sent_high);
        recovery.on_selective_resend(sent_high);
        recovery.pace(psn, cx.now, self.config.limits.max_unacked_psns);
        Some(true)
    }

    /// The headers of the request packet at `psn` carrying bytes from `offset` of a work
    /// request (`op`, `flags`, `ud`, `len` bytes), AckReq left clear: with the packet's
    /// kind, payload length and position. The requester's one place that builds them, for
    /// new packets and resent holes alike.
    // Forced inline: on the path of every request packet.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn request_headers(
        &self,
        op: SendOp,
        flags: SendFlags,
        ud: Option<UdDest>,
        entry_len: u64,
        psn: Psn,
        offset: u64,
        mtu: u32,
    ) -> (Headers, Kind, u64, Position) {
        let qp_type = self.config.qp_type;
        let remote_qpn = match ud {
            Some(ud) => xroce_wire::Qpn::new(ud.remote_qpn),
            None => self.attr.dest_qpn,
        };
        let (kind, payload_len, pos) = match op {
            SendOp::Read { .. } => (Kind::ReadRequest, 0u64, Position::Only),
            SendOp::CompareSwap { .. } => (Kind::CompareSwap, 0, Position::Only),
            SendOp::FetchAdd { .. } => (Kind::FetchAdd, 0, Position::Only),
            op => {
                let n = (entry_len - offset).min(u64::from(mtu));
                let kind = if op.is_send() {
                    Kind::Send
                } else {
                    Kind::Write
                };
                (kind, n, position_of(offset, n, entry_len))
            }
        };
        let mut h = Headers::new(qp_type, kind, pos, remote_qpn, psn);
        match op {
            SendOp::Write { remote_addr, rkey }
            | SendOp::WriteWithImm {
                remote_addr, rkey, ..
            } if pos.starts_message() => {
                // entry.len <= MAX_MESSAGE = 2^31 fits in u32.
                h.reth = Some(RethRepr {
                    va: remote_addr,
                    rkey: Rkey(rkey),
                    dma_len: entry_len as u32,
                });
            }
            SendOp::Read { remote_addr, rkey } => {
                h.reth = Some(RethRepr {
                    va: remote_addr.wrapping_add(offset),
                    rkey: Rkey(rkey),
                    dma_len: (entry_len - offset) as u32,
                });
            }
            SendOp::CompareSwap {
                remote_addr,
                rkey,
                compare,
                swap,
            } => {
                h.atomic = Some(AtomicEthRepr {
                    va: remote_addr,
                    rkey: Rkey(rkey),
                    swap_add: swap,
                    compare,
                });
            }
            SendOp::FetchAdd {
                remote_addr,
                rkey,
                add,
            } => {
                h.atomic = Some(AtomicEthRepr {
                    va: remote_addr,
                    rkey: Rkey(rkey),
                    swap_add: add,
                    compare: 0,
                });
            }
            _ => {}
        }
        if pos.ends_message() {
            match op {
                SendOp::SendWithImm { imm } | SendOp::WriteWithImm { imm, .. } => {
                    h.imm = Some(ImmDtRepr { data: imm });
                }
                SendOp::SendWithInv { rkey } => h.ieth = Some(IethRepr { rkey: Rkey(rkey) }),
                _ => {}
            }
            let solicitable = matches!(
                op,
                SendOp::Send
                    | SendOp::SendWithImm { .. }
                    | SendOp::SendWithInv { .. }
                    | SendOp::WriteWithImm { .. }
            );
            h.solicited = solicitable && flags.contains(SendFlags::SOLICITED);
        }
        if let Some(ud) = ud {
            // IBTA 10.2.5: a Q_Key with the high bit set means "use the QP's own Q_Key".
            let qkey = if ud.remote_qkey & 0x8000_0000 != 0 {
                self.attr.qkey
            } else {
                ud.remote_qkey
            };
            h.deth = Some(DethRepr {
                qkey: Qkey(qkey),
                src_qp: self.config.qpn,
            });
        }
        (h, kind, payload_len, pos)
    }

    /// Starts the current work request: checks it may start now, assigns its PSNs.
    /// Returns false when it must wait (or failed).
    fn start_entry<M: MemoryTable + ?Sized>(&mut self, cx: &mut Cx<'_, M>) -> bool {
        let Some(entry) = self.sq.current() else {
            return false;
        };
        let (op, flags, holds_rd_atomic, len) = (
            entry.wqe.op,
            entry.wqe.flags,
            entry.holds_rd_atomic,
            entry.len,
        );
        if self.state == QpState::Sqd {
            // SQD: work requests already started finish; no new one starts.
            return false;
        }
        if self.config.qp_type == QpType::Rc {
            let rd_atomic = self.sq.rd_atomic();
            // IBTA 10.8.3.3: a fenced work request waits for every earlier READ and atomic.
            if flags.contains(SendFlags::FENCE) && !holds_rd_atomic && rd_atomic > 0 {
                return false;
            }
            if op.is_read_or_atomic() && !holds_rd_atomic && rd_atomic >= self.attr.max_rd_atomic {
                return false;
            }
        }
        if len > MAX_MESSAGE || (self.config.qp_type == QpType::Ud && len > u64::from(self.mtu())) {
            self.fail_send(WcStatus::LocLenErr, cx);
            return false;
        }
        self.sq.start_current(self.mtu());
        true
    }

    /// Whether the endpoint's budget of unacknowledged request packets has room for the
    /// chunk that starts at the next PSN: the packets up to the next one that asks for an
    /// acknowledgement (the message's last, or `ack_req_every` on), or for a READ its
    /// responses. A chunk once admitted is sent whole, so every unacknowledged packet has
    /// an acknowledgement coming and the budget always comes back. A QP with nothing
    /// unacknowledged anywhere on the endpoint is always admitted (a READ larger than the
    /// budget still goes, alone).
    fn admit_chunk<M: MemoryTable + ?Sized>(&mut self, last_psn: Psn, cx: &mut Cx<'_, M>) -> bool {
        let own = self.unacked_packets();
        let held = cx.budget.others.saturating_add(own);
        let left = last_psn.distance(self.sq.next_psn()).max(0) as u32 + 1;
        // A READ or atomic takes the PSNs of all its responses at once.
        let read_or_atomic = self
            .sq
            .current()
            .is_some_and(|e| e.wqe.op.is_read_or_atomic());
        let chunk = if read_or_atomic {
            left
        } else {
            left.min(self.ack_req_every())
        };
        if held == 0 || held.saturating_add(chunk) <= cx.budget.limit {
            // Reserved now: other QPs taking turns before this chunk is sent see it taken.
            self.sq.reserve_chunk(chunk);
            return true;
        }
        cx.budget.held = Some(chunk);
        cx.count(crate::counters::Counter::req_held_by_budget);
        false
    }

    /// The window of packets in flight: the device's `max_unacked_psns`, or less once the
    /// path is measured.
    #[inline]
    fn window_limit(&self) -> i32 {
        self.sq.recovery.window(self.config.limits.max_unacked_psns) as i32
    }

    /// Selective repeat: the most PSNs from the oldest unacknowledged one while the peer
    /// holds packets ahead of a gap. Everything between the gap and the last PSN sent may
    /// have to wait in the peer's store, which holds `max_held_packets` and
    /// `max_held_bytes` of payload (the peer's limits are taken to be this endpoint's:
    /// every xroce daemon has the same); never below the device's window, which is what
    /// a QP without selective repeat may have unacknowledged.
    #[inline]
    fn span_limit(&self, mtu: u32) -> i32 {
        let limits = &self.config.limits;
        let store = limits
            .max_held_packets
            .min(limits.max_held_bytes / mtu.max(1));
        limits.max_unacked_psns.max(store).min(i32::MAX as u32) as i32
    }

    /// Packets asked to acknowledge at least every this many.
    #[inline]
    fn ack_req_every(&self) -> u32 {
        let limits = &self.config.limits;
        self.sq
            .recovery
            .ack_req_every(limits.ack_req_every, limits.max_unacked_psns)
    }

    /// Whether an RC request packet may go now: the window has room, and pacing lets it.
    /// A window full of packets none of which asked for an acknowledgement (it shrank
    /// under them) lets one more go, which asks.
    ///
    /// In selective repeat, while the responder holds packets, the window counts in flight
    /// only what was sent after the highest PSN it holds and the holes resent
    /// ([`Scoreboard::in_flight`](crate::selective::Scoreboard::in_flight)): the PSNs
    /// before that highest one have arrived (they wait in its store for a gap) or were
    /// lost, and neither is on the path. What they count against is the store: the PSNs
    /// from the oldest unacknowledged one stay within what a store holds
    /// ([`QueuePair::span_limit`]), beyond which the responder would drop what it cannot
    /// keep. Without this a hole held the window shut for the round trip its resend took,
    /// however much of the window had long arrived.
    #[inline]
    fn window_open<M: MemoryTable + ?Sized>(&mut self, cx: &mut Cx<'_, M>, mtu: u32) -> bool {
        if !self.sq.scoreboard.is_empty() && self.sq.window() >= self.span_limit(mtu) {
            cx.count(Counter::sr_held_by_store);
            return false;
        }
        let window = self.sq.in_flight();
        if window >= self.window_limit() {
            let device = window >= self.config.limits.max_unacked_psns as i32;
            if device || window > self.sq.noack_pkts() as i32 {
                if !device {
                    cx.count(Counter::req_held_by_window);
                }
                return false;
            }
        }
        if !self.sq.recovery.may_send(cx.now) {
            cx.count(Counter::req_held_by_pacing);
            return false;
        }
        true
    }

    /// Whether the requester would emit a packet now if asked (ignoring timers).
    pub(crate) fn wants_to_send(&self) -> bool {
        matches!(self.state, QpState::Rts | QpState::Sqd) && self.sq.has_work()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_of_message_bytes() {
        assert_eq!(position_of(0, 0, 0), Position::Only);
        assert_eq!(position_of(0, 10, 10), Position::Only);
        assert_eq!(position_of(0, 1024, 2050), Position::First);
        assert_eq!(position_of(1024, 1024, 2050), Position::Middle);
        assert_eq!(position_of(2048, 2, 2050), Position::Last);
    }
}
