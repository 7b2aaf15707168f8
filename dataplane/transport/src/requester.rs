//! The requester: turns send work requests into request packets (rxe's `rxe_req.c`).
//!
//! It walks the send queue in order, segments each message into FIRST/MIDDLE/LAST/ONLY
//! packets by the path MTU, assigns PSNs, sets AckReq on the last packet of a message and at
//! least every `ack_req_every` packets, and holds back when the window of unacknowledged
//! PSNs is full, when `max_rd_atomic` READs/atomics are outstanding, or when a fenced work
//! request waits for earlier READs/atomics. Go-back-N retransmission rewinds it to the oldest
//! unacknowledged PSN (the completer decides when).

use xroce_wire::{
    AtomicEthRepr, DethRepr, IethRepr, ImmDtRepr, Position, Psn, Qkey, RethRepr, Rkey,
};

use crate::attributes::{QpState, QpType};
use crate::completion::WcStatus;
use crate::context::{Cx, Emit};
use crate::memory::{GatherFrom, MemoryTable, gather};
use crate::packet::{Headers, Kind};
use crate::qp::QueuePair;
use crate::time::{Instant, ack_wait};
use crate::wqe::{MAX_MESSAGE, SendFlags, SendOp, SendWqe};

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

/// A send work request in the send queue, with its progress.
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
    pub(crate) fn new(wqe: SendWqe) -> SendEntry {
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

/// The requester's progress through the send queue.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RequesterState {
    /// The next PSN to send.
    pub(crate) psn: Psn,
    /// Index in the send queue of the work request being sent.
    pub(crate) next: usize,
    /// Bytes of that work request already sent (READ: already requested and answered).
    pub(crate) offset: u64,
    /// READ/atomic work requests sent and not completed.
    pub(crate) rd_atomic: u8,
    /// Packets sent since the last one with AckReq.
    pub(crate) noack_pkts: u32,
    /// The PSN after the chunk the endpoint's budget admitted (reserved until acknowledged,
    /// sent or not yet).
    pub(crate) chunk_end: Option<Psn>,
    /// Go back to the oldest unacknowledged PSN before sending anything.
    pub(crate) retry: bool,
    /// After an RNR NAK: do not send before this time.
    pub(crate) rnr_until: Option<Instant>,
    /// The SQ_DRAINED event for the current SQD period was raised.
    pub(crate) drained_notified: bool,
}

impl RequesterState {
    pub(crate) fn on_sq_psn(&mut self, psn: Psn) {
        self.psn = psn;
        self.chunk_end = None;
    }

    pub(crate) fn on_flush(&mut self) {
        *self = RequesterState {
            psn: self.psn,
            ..RequesterState::default()
        };
    }
}

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
        if !matches!(self.state, QpState::Rts | QpState::Sqd) || self.comp.stalled {
            return false;
        }
        if let Some(until) = self.req.rnr_until {
            if cx.now < until {
                return false;
            }
            self.req.rnr_until = None;
        }
        if self.req.retry {
            self.rewind();
        }
        // Work requests are a few hundred bytes (inline data, scatter/gather list): this
        // path reads the fields it needs and never copies one.
        let Some(state) = self.sq.get(self.req.next).map(|e| e.state) else {
            return false;
        };
        let qp_type = self.config.qp_type;
        let mtu = self.mtu();
        if qp_type == QpType::Rc
            && self.req.psn.distance(self.comp.psn) >= self.config.limits.max_unacked_psns as i32
        {
            // The window of unacknowledged PSNs is full.
            return false;
        }
        if state == EntryState::Posted && !self.start_entry(cx) {
            return false;
        }
        // start_entry may have changed the entry.
        let idx = self.req.next;
        let entry = &self.sq[idx];
        let (op, flags, ud) = (entry.wqe.op, entry.wqe.flags, entry.wqe.ud);
        let (entry_len, last_psn) = (entry.len, entry.last_psn);
        if qp_type == QpType::Rc && self.req.noack_pkts == 0 && !self.admit_chunk(last_psn, cx) {
            return false;
        }
        let remote_qpn = match ud {
            Some(ud) => xroce_wire::Qpn::new(ud.remote_qpn),
            None => self.attr.dest_qpn,
        };
        let path = match ud {
            Some(ud) => ud.path,
            None => self.attr.path,
        };
        if !out.reaches(&path) {
            self.fail_send(WcStatus::LocQpOpErr, cx);
            return false;
        }
        let psn = self.req.psn;
        let offset = self.req.offset;
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
        // Fits: payload_len <= mtu <= 4096. (The pad follows from it when the frame is
        // written.)
        let n = payload_len as usize;
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
        if qp_type == QpType::Rc {
            let every = self.config.limits.ack_req_every.max(1);
            h.ack_req = pos.ends_message() || self.req.noack_pkts + 1 >= every;
        }

        let pd = self.config.pd;
        let Some(dst) = out.begin(&h, &path, n) else {
            return false;
        };
        let data = GatherFrom::Local(&self.sq[idx].wqe.data);
        if n > 0 && gather(&*cx.mem, pd, data, offset, dst).is_err() {
            // IBTA 10.7.3.1: a bad lkey completes the work request in error.
            self.fail_send(WcStatus::LocProtErr, cx);
            return false;
        }
        out.commit();

        if h.ack_req {
            self.req.noack_pkts = 0;
        } else {
            self.req.noack_pkts += 1;
        }
        if qp_type == QpType::Rc && self.comp.retrans_deadline.is_none() {
            self.comp.retrans_deadline = Some(cx.now + ack_wait(self.attr.timeout));
        }
        if matches!(kind, Kind::ReadRequest | Kind::CompareSwap | Kind::FetchAdd) {
            self.req.psn = last_psn.next();
            self.finish_entry_send(idx, cx);
        } else {
            self.req.psn = psn.next();
            self.req.offset += payload_len;
            if pos.ends_message() {
                self.finish_entry_send(idx, cx);
            }
        }
        true
    }

    /// Starts the work request at `req.next`: checks it may start now, assigns its PSNs.
    /// Returns false when it must wait (or failed).
    fn start_entry<M: MemoryTable + ?Sized>(&mut self, cx: &mut Cx<'_, M>) -> bool {
        let idx = self.req.next;
        let entry = &self.sq[idx];
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
            // IBTA 10.8.3.3: a fenced work request waits for every earlier READ and atomic.
            if flags.contains(SendFlags::FENCE) && !holds_rd_atomic && self.req.rd_atomic > 0 {
                return false;
            }
            if op.is_read_or_atomic()
                && !holds_rd_atomic
                && self.req.rd_atomic >= self.attr.max_rd_atomic
            {
                return false;
            }
        }
        if len > MAX_MESSAGE || (self.config.qp_type == QpType::Ud && len > u64::from(self.mtu())) {
            self.fail_send(WcStatus::LocLenErr, cx);
            return false;
        }
        let mtu = self.mtu();
        let e = &mut self.sq[idx];
        let npkts = e.npkts(mtu);
        e.first_psn = self.req.psn;
        e.last_psn = self.req.psn.wrapping_add(npkts - 1);
        e.state = EntryState::Sending;
        if op.is_read_or_atomic() && !e.holds_rd_atomic {
            e.holds_rd_atomic = true;
            self.req.rd_atomic += 1;
        }
        self.req.offset = 0;
        true
    }

    /// Every packet of the entry at `idx` has been sent.
    fn finish_entry_send<M: MemoryTable + ?Sized>(&mut self, idx: usize, cx: &mut Cx<'_, M>) {
        self.req.next = idx + 1;
        self.req.offset = 0;
        if self.config.qp_type == QpType::Rc {
            self.sq[idx].state = EntryState::Sent;
        } else {
            // UC and UD complete when the last packet leaves; everything before has
            // completed already, so this entry is at the front.
            debug_assert_eq!(idx, 0);
            self.complete_front(WcStatus::Success, cx);
        }
    }

    /// Go-back-N: resend from the oldest unacknowledged PSN (IBTA 9.7.5.1.2 for timeouts,
    /// 9.7.5.2.2 for sequence errors).
    pub(crate) fn rewind(&mut self) {
        self.req.retry = false;
        self.req.noack_pkts = 0;
        // The resent packets are admitted again, chunk by chunk.
        self.req.chunk_end = None;
        let psn = self.comp.psn;
        let mtu = u64::from(self.mtu());
        let mut resume = None;
        for (i, e) in self.sq.iter_mut().enumerate() {
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
                self.req.next = i;
                self.req.offset = offset;
                self.req.psn = if self.sq[i].wqe.op.is_atomic() {
                    self.sq[i].first_psn
                } else {
                    psn
                };
            }
            None => {
                self.req.next = self
                    .sq
                    .iter()
                    .position(|e| e.state == EntryState::Posted)
                    .unwrap_or(self.sq.len());
                self.req.offset = 0;
                self.req.psn = psn;
            }
        }
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
        let left = last_psn.distance(self.req.psn).max(0) as u32 + 1;
        // A READ or atomic takes the PSNs of all its responses at once.
        let read_or_atomic = self
            .sq
            .get(self.req.next)
            .is_some_and(|e| e.wqe.op.is_read_or_atomic());
        let chunk = if read_or_atomic {
            left
        } else {
            left.min(self.config.limits.ack_req_every.max(1))
        };
        if held == 0 || held.saturating_add(chunk) <= cx.budget.limit {
            // Reserved now: other QPs taking turns before this chunk is sent see it taken.
            self.req.chunk_end = Some(self.req.psn.wrapping_add(chunk));
            return true;
        }
        cx.budget.held = Some(chunk);
        cx.count(crate::counters::Counter::req_held_by_budget);
        false
    }

    /// Whether the requester would emit a packet now if asked (ignoring timers).
    pub(crate) fn wants_to_send(&self) -> bool {
        matches!(self.state, QpState::Rts | QpState::Sqd)
            && (self.req.retry || self.req.next < self.sq.len())
            && self.req.rnr_until.is_none()
            && !self.comp.stalled
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
