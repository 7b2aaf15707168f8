//! The responder: executes request packets (rxe's `rxe_resp.c`).
//!
//! A request of an RC or UC queue pair goes through a chain of named checks, in rxe's
//! order: `check_psn` → `check_op_seq` → `check_op_valid` → `check_resources` →
//! `check_length` → `check_rkey` → `execute` → `complete` → `acknowledge`; a UD datagram
//! through `check_datagram` and its own placement. Each check passes the request on or
//! refuses it with a `Refusal` named after the error of IBTA 9.9.3 (table 58) and rxe's
//! error state. One place, `refuse` (in the `refusal` module, with the table
//! `Refusal::answer`), turns a refusal into what the queue pair's service does about it:
//! for RC a NAK with its syndrome (a PSN sequence error once per gap, an invalid request, a
//! remote access or a remote operational error, the last three moving the QP to ERR) or an
//! RNR NAK; for UC a dropped message; for UD a dropped packet. Every refusal lands in
//! exactly one counter.
//!
//! What the responder sends back — ACKs, NAKs, READ responses, atomic acknowledgements, and
//! the answers to duplicate requests — is in the `responses` submodule.

mod refusal;
pub(crate) mod responses;

use xroce_wire::{Position, Psn, Syndrome};

use crate::attributes::{Access, QpState, QpType};
use crate::completion::{Completion, CompletionQueue, WcFlags, WcOpcode, WcStatus};
use crate::context::{AsyncEvent, Cx};
use crate::counters::Counter;
use crate::memory::{AtomicOp, KeyKind, KeyRef, MemoryError, MemoryTable, ScatterInto, scatter};
use crate::packet::{Kind, Packet};
use crate::qp::QueuePair;
use crate::selective::{Hold, ReorderStore};
use crate::wqe::{MAX_MESSAGE, RecvWqe};

pub(crate) use refusal::Refusal;
pub(crate) use responses::{Resource, Response};

/// The message being received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum InMessage {
    /// None: the next packet must start one.
    #[default]
    None,
    /// A multi-packet SEND.
    Send,
    /// A multi-packet WRITE.
    Write,
}

/// The receive work request the current message lands in.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CurrentRecv {
    pub(crate) wqe: RecvWqe,
    /// Bytes placed so far.
    pub(crate) offset: u64,
    pub(crate) from_srq: bool,
}

/// The WRITE being received: where its next packet lands and how much is left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CurrentWrite {
    /// The address of the next byte.
    pub(crate) va: u64,
    /// The rkey of the RETH.
    pub(crate) rkey: u32,
    /// Bytes still to come.
    pub(crate) resid: u64,
    /// The RETH length.
    pub(crate) total: u64,
}

/// The responder's state.
#[derive(Debug, Default)]
pub(crate) struct ResponderState {
    /// The next PSN expected.
    pub(crate) psn: xroce_wire::Psn,
    /// The message sequence number (24 bits): messages completed.
    pub(crate) msn: u32,
    pub(crate) in_message: InMessage,
    /// A PSN sequence error NAK was sent for the current gap.
    pub(crate) sent_psn_nak: bool,
    /// UC: the current message is broken; drop until the next FIRST/ONLY.
    pub(crate) uc_drop: bool,
    pub(crate) recv: Option<CurrentRecv>,
    pub(crate) write: Option<CurrentWrite>,
    pub(crate) resources: std::collections::VecDeque<Resource>,
    pub(crate) max_resources: usize,
    pub(crate) responses: std::collections::VecDeque<Response>,
    /// The first packet on this QP was seen (COMM_EST raised).
    pub(crate) established: bool,
    /// Selective repeat: request packets held ahead of the expected PSN.
    pub(crate) held: ReorderStore,
}

impl ResponderState {
    pub(crate) fn on_rq_psn(&mut self, psn: xroce_wire::Psn) {
        self.psn = psn;
    }

    pub(crate) fn on_max_dest_rd_atomic(&mut self, n: u8) {
        self.max_resources = usize::from(n);
        while self.resources.len() > self.max_resources {
            self.resources.pop_front();
        }
    }

    pub(crate) fn take_current_wqe(&mut self) -> Option<RecvWqe> {
        self.recv.take().map(|r| r.wqe)
    }

    pub(crate) fn on_flush(&mut self) {
        self.in_message = InMessage::None;
        self.write = None;
        self.resources.clear();
        self.held.clear();
        // NAKs already queued still go out (the peer must learn why); the rest is dropped.
        self.responses.retain(|r| {
            matches!(
                r,
                Response::Ack {
                    syndrome: Syndrome::Nak(_),
                    ..
                }
            )
        });
    }

    /// The most responses that may wait: every READ/atomic resource plus a few ACKs.
    pub(crate) fn response_capacity(&self) -> usize {
        self.max_resources + 8
    }

    /// Whether a response that does not coalesce may be queued.
    pub(crate) fn has_room(&self) -> bool {
        self.responses.len() < self.response_capacity()
    }
}

/// Whether `check_psn` found the request new or a duplicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sequence {
    /// The PSN expected.
    Expected,
    /// RC: a PSN already executed (IBTA 9.7.5.1.4).
    Duplicate,
}

impl QueuePair {
    /// Handles a request packet (its service, state, addresses and keys are checked).
    pub(crate) fn handle_request<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        cx: &mut Cx<'_, M>,
    ) {
        if !self.resp.established {
            self.resp.established = true;
            if self.state == QpState::Rtr {
                cx.events
                    .push_back(AsyncEvent::CommEstablished(self.config.qpn));
            }
        }
        let before = self.resp.psn;
        let answered = match self.config.qp_type {
            QpType::Ud => self.receive_datagram(pkt, cx),
            QpType::Rc | QpType::Uc => self.respond(pkt, cx),
        };
        if let Err(refusal) = answered {
            self.refuse(pkt, refusal, cx);
        }
        if !self.resp.held.is_empty() {
            self.drain_held(before, cx);
        }
    }

    /// Selective repeat: keeps a request packet ahead of the expected PSN (a PSN sequence
    /// error) until the gap before it is filled, and answers with a NAK that says what is
    /// held. Each packet lands in one counter: held, a duplicate of one held, or dropped
    /// for want of room (the requester resends it as a gap).
    // Cold, out of line: only selective repeat comes here, and the packet path stays as
    // the optimizer laid it out without it (fat LTO inlines across the crates).
    #[cold]
    #[inline(never)]
    pub(crate) fn hold_request<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        cx: &mut Cx<'_, M>,
    ) {
        let limits = self.config.limits;
        let mtu = self.mtu();
        match self.resp.held.hold(
            pkt,
            self.resp.psn,
            mtu,
            limits.max_held_packets,
            limits.max_held_bytes,
            limits.max_endpoint_held_bytes,
        ) {
            Hold::Held { report } => {
                cx.count(Counter::sr_packets_held);
                if report {
                    self.queue_response(Response::Sack, cx);
                }
            }
            Hold::Duplicate => cx.count(Counter::sr_duplicates_dropped),
            Hold::Full => cx.count(Counter::sr_held_dropped_full),
        }
    }

    /// Selective repeat: the held packets whose turn has come go through the chain in PSN
    /// order, exactly as if they had arrived in order. If the expected PSN moved since it
    /// was `before` (the packet that arrived filled a gap, whether or not held packets
    /// follow it at once), the requester learns it at once: a NAK with what is still held
    /// (the next gap: without it the requester knows of no packet held beyond that gap,
    /// and only its timer would resend it), or an acknowledgement of everything (a resent
    /// gap need not ask for one). A refusal (an RNR NAK, an error) ends the drain with its
    /// own answer.
    // Cold, out of line: only selective repeat comes here, and the packet path stays as
    // the optimizer laid it out without it (fat LTO inlines across the crates).
    #[cold]
    #[inline(never)]
    fn drain_held<M: MemoryTable + ?Sized>(&mut self, before: Psn, cx: &mut Cx<'_, M>) {
        while self.state != QpState::Err {
            let Some(held) = self.resp.held.take_due(self.resp.psn) else {
                break;
            };
            let pkt = held.packet();
            let refused = match self.respond(&pkt, cx) {
                Err(refusal) => {
                    self.refuse(&pkt, refusal, cx);
                    true
                }
                Ok(()) => false,
            };
            self.resp.held.recycle(held);
            if refused {
                return;
            }
        }
        if self.resp.psn == before || self.state == QpState::Err {
            return;
        }
        let answer = if self.resp.held.is_empty() {
            Response::Ack {
                psn: self.resp.psn.wrapping_sub(1),
                syndrome: Syndrome::ACK_UNLIMITED,
                msn: self.resp.msn,
            }
        } else {
            Response::Sack
        };
        self.queue_response(answer, cx);
    }

    /// The chain every RC and UC request goes through (rxe's `rxe_responder`).
    // Forced inline: called on every request and, out of line, from the drain of held
    // packets; a second caller must not move it out of the packet path.
    #[inline(always)]
    fn respond<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        cx: &mut Cx<'_, M>,
    ) -> Result<(), Refusal> {
        if self.check_psn(pkt, cx)? == Sequence::Duplicate {
            self.handle_duplicate(pkt, cx);
            return Ok(());
        }
        self.check_op_seq(pkt, cx)?;
        self.check_op_valid(pkt)?;
        self.check_resources(pkt, cx)?;
        self.check_length(pkt)?;
        self.check_rkey(pkt, cx)?;
        match pkt.h.kind {
            Kind::ReadRequest => self.execute_read(pkt, cx),
            Kind::CompareSwap | Kind::FetchAdd => self.execute_atomic(pkt, cx),
            _ => {
                self.execute(pkt, cx)?;
                self.complete(pkt, cx)?;
                self.acknowledge(pkt, cx);
                Ok(())
            }
        }
    }

    /// The PSN: the one expected, a duplicate (RC), or a gap. UC has no duplicates to
    /// answer and recovers from a gap at the next message: a lost packet breaks its
    /// message, and a new message may start at any later PSN.
    fn check_psn<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        cx: &mut Cx<'_, M>,
    ) -> Result<Sequence, Refusal> {
        let h = &pkt.h;
        let diff = h.psn.distance(self.resp.psn);
        if self.config.qp_type == QpType::Rc {
            if diff > 0 {
                return Err(Refusal::PsnOutOfSequence);
            }
            if diff < 0 {
                return Ok(Sequence::Duplicate);
            }
            self.resp.sent_psn_nak = false;
            return Ok(Sequence::Expected);
        }
        if diff < 0 {
            return Err(Refusal::Duplicate);
        }
        if self.resp.uc_drop || diff != 0 {
            if !h.pos.starts_message() {
                return Err(Refusal::MessageBroken);
            }
            self.abandon_message(cx);
            self.resp.uc_drop = false;
        }
        Ok(Sequence::Expected)
    }

    /// The opcode must start a message, or continue the one in progress. UC: a packet that
    /// starts a message while another is unfinished abandons that one (class D1).
    fn check_op_seq<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        cx: &mut Cx<'_, M>,
    ) -> Result<(), Refusal> {
        let h = &pkt.h;
        let continues = matches!(h.pos, Position::Middle | Position::Last);
        let in_sequence = match self.resp.in_message {
            InMessage::None => !continues,
            InMessage::Send => continues && h.kind == Kind::Send,
            InMessage::Write => continues && h.kind == Kind::Write,
        };
        if in_sequence {
            return Ok(());
        }
        if self.config.qp_type == QpType::Rc {
            return Err(Refusal::OpcodeSequence);
        }
        if !h.pos.starts_message() {
            return Err(Refusal::MessageBroken);
        }
        self.abandon_message(cx);
        Ok(())
    }

    /// The operation must be one of the queue pair's service and granted by its access
    /// flags.
    fn check_op_valid(&self, pkt: &Packet<'_>) -> Result<(), Refusal> {
        let rc = self.config.qp_type == QpType::Rc;
        let access = self.attr.access;
        let allowed = match pkt.h.kind {
            Kind::Send => true,
            Kind::Write => access.contains(Access::REMOTE_WRITE),
            Kind::ReadRequest => rc && access.contains(Access::REMOTE_READ),
            Kind::CompareSwap | Kind::FetchAdd => rc && access.contains(Access::REMOTE_ATOMIC),
            _ => false,
        };
        if allowed {
            Ok(())
        } else {
            Err(Refusal::OperationNotAllowed)
        }
    }

    /// A READ or atomic needs a responder resource and room for its response; a SEND or a
    /// WRITE with immediate needs a receive work request, which it takes here.
    fn check_resources<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        cx: &mut Cx<'_, M>,
    ) -> Result<(), Refusal> {
        let h = &pkt.h;
        if h.kind.is_read_or_atomic() {
            if self.resp.max_resources == 0 {
                return Err(Refusal::TooManyReadAtomic);
            }
            if !self.resp.has_room() {
                return Err(Refusal::ResponseQueueFull);
            }
        }
        let needs_recv = h.kind == Kind::Send || (h.kind == Kind::Write && h.imm.is_some());
        if needs_recv && self.resp.recv.is_none() {
            let recv = self.take_recv(cx).ok_or(Refusal::ReceiverNotReady)?;
            self.resp.recv = Some(recv);
        }
        Ok(())
    }

    /// IBTA 9.7.5.1.3 (C9-36..C9-38): FIRST and MIDDLE carry exactly one MTU and no pad,
    /// LAST one to MTU bytes, ONLY up to MTU bytes; a RETH asks for at most 2^31 bytes.
    // Forced inline: see `respond`.
    #[inline(always)]
    fn check_length(&self, pkt: &Packet<'_>) -> Result<(), Refusal> {
        let h = &pkt.h;
        let mtu = self.mtu() as usize;
        let n = pkt.payload.len();
        let fits = match h.pos {
            Position::First | Position::Middle => n == mtu && h.pad == 0,
            Position::Last => n >= 1 && n <= mtu,
            Position::Only => n <= mtu,
        };
        let reth_ok = h.reth.is_none_or(|r| u64::from(r.dma_len) <= MAX_MESSAGE);
        if fits && reth_ok {
            Ok(())
        } else {
            Err(Refusal::Length)
        }
    }

    /// The rkey of a WRITE (on its first packet), READ or atomic: its rights and bounds.
    /// A WRITE's packets must add up to its RETH length.
    fn check_rkey<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        cx: &mut Cx<'_, M>,
    ) -> Result<(), Refusal> {
        let h = &pkt.h;
        let key = |rkey| KeyRef {
            key: rkey,
            kind: KeyKind::Remote,
            pd: self.config.pd,
        };
        match h.kind {
            Kind::Write if h.pos.starts_message() => {
                let reth = h.reth.ok_or(Refusal::Malformed)?;
                let len = u64::from(reth.dma_len);
                // C9-88: a zero-length RDMA operation does not check the rkey.
                if len > 0 {
                    cx.mem
                        .check(key(reth.rkey.0), reth.va, len, Access::REMOTE_WRITE)
                        .map_err(|_| Refusal::RkeyViolation)?;
                }
                self.resp.write = Some(CurrentWrite {
                    va: reth.va,
                    rkey: reth.rkey.0,
                    resid: len,
                    total: len,
                });
                self.check_write_length(pkt)
            }
            Kind::Write => self.check_write_length(pkt),
            Kind::ReadRequest => {
                let reth = h.reth.ok_or(Refusal::Malformed)?;
                if reth.dma_len > 0 {
                    let len = u64::from(reth.dma_len);
                    cx.mem
                        .check(key(reth.rkey.0), reth.va, len, Access::REMOTE_READ)
                        .map_err(|_| Refusal::RkeyViolation)?;
                }
                Ok(())
            }
            Kind::CompareSwap | Kind::FetchAdd => {
                let atomic = h.atomic.ok_or(Refusal::Malformed)?;
                // IBTA 9.4.5: the atomic address must be 8-byte aligned.
                if !atomic.va.is_multiple_of(8) {
                    return Err(Refusal::MisalignedAtomic);
                }
                cx.mem
                    .check(key(atomic.rkey.0), atomic.va, 8, Access::REMOTE_ATOMIC)
                    .map_err(|_| Refusal::RkeyViolation)
            }
            _ => Ok(()),
        }
    }

    /// The WRITE's packets must add up to exactly the RETH length.
    fn check_write_length(&self, pkt: &Packet<'_>) -> Result<(), Refusal> {
        let write = self.resp.write.ok_or(Refusal::Malformed)?;
        let n = pkt.payload.len() as u64;
        let adds_up = if pkt.h.pos.ends_message() {
            n == write.resid
        } else {
            n < write.resid
        };
        if adds_up {
            Ok(())
        } else {
            Err(Refusal::WriteLength)
        }
    }

    /// Places a SEND's or a WRITE's payload (rxe `execute`).
    // Kept out of line, and `complete` inlined: the receive path (frame parsing, the chain)
    // is one large function, and this split is the one that runs fewest instructions on the
    // pipeline benchmark (callgrind).
    #[inline(never)]
    fn execute<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        cx: &mut Cx<'_, M>,
    ) -> Result<(), Refusal> {
        let h = &pkt.h;
        let pd = self.config.pd;
        let n = pkt.payload.len() as u64;
        let next = if h.pos.ends_message() {
            InMessage::None
        } else if h.kind == Kind::Send {
            InMessage::Send
        } else {
            InMessage::Write
        };
        match h.kind {
            Kind::Send => {
                let recv = self.resp.recv.as_mut().ok_or(Refusal::Malformed)?;
                let offset = recv.offset;
                if offset + n > recv.wqe.sges.total_len() {
                    return Err(Refusal::ReceiveTooSmall);
                }
                let into = ScatterInto::Local(&recv.wqe.sges);
                scatter(cx.mem, pd, into, offset, pkt.payload)
                    .map_err(|_| Refusal::ReceiveBufferProtection)?;
                recv.offset += n;
                self.resp.in_message = next;
            }
            Kind::Write => {
                let write = self.resp.write.ok_or(Refusal::Malformed)?;
                if n > 0 {
                    let into = ScatterInto::Remote {
                        rkey: write.rkey,
                        va: write.va,
                    };
                    scatter(cx.mem, pd, into, 0, pkt.payload)
                        .map_err(|_| Refusal::RkeyViolation)?;
                }
                self.resp.write = Some(CurrentWrite {
                    va: write.va.wrapping_add(n),
                    resid: write.resid - n,
                    ..write
                });
                self.resp.in_message = next;
                if h.pos.ends_message() {
                    self.resp.write = None;
                    if let Some(recv) = self.resp.recv.as_mut() {
                        // WRITE with immediate: the completion reports the RETH length.
                        recv.offset = write.total;
                    }
                }
            }
            _ => return Err(Refusal::Malformed),
        }
        Ok(())
    }

    /// A READ request: a responder resource to answer its duplicates, and the response
    /// queued (rxe `read_reply`).
    fn execute_read<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        cx: &mut Cx<'_, M>,
    ) -> Result<(), Refusal> {
        let h = &pkt.h;
        let reth = h.reth.ok_or(Refusal::Malformed)?;
        let mtu = u64::from(self.mtu());
        let len = u64::from(reth.dma_len);
        // npkts <= 2^31 / 256 fits in u32.
        let npkts = len.div_ceil(mtu).max(1) as u32;
        let last = h.psn.wrapping_add(npkts - 1);
        // C9-148: the MSN counts a READ when it is accepted.
        self.resp.msn = (self.resp.msn + 1) & 0x00ff_ffff;
        self.add_resource(Resource::Read {
            first_psn: h.psn,
            last_psn: last,
            va: reth.va,
            len,
            rkey: reth.rkey.0,
        });
        let read = Response::Read {
            rkey: reth.rkey.0,
            va: reth.va,
            resid: len,
            psn: h.psn,
            first: true,
            msn: self.resp.msn,
        };
        self.queue_response(read, cx);
        self.resp.psn = last.next();
        Ok(())
    }

    /// An atomic: performed once, its original value kept in a responder resource for
    /// duplicates, and acknowledged (rxe `atomic_reply`).
    fn execute_atomic<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        cx: &mut Cx<'_, M>,
    ) -> Result<(), Refusal> {
        let h = &pkt.h;
        let atomic = h.atomic.ok_or(Refusal::Malformed)?;
        let op = if h.kind == Kind::CompareSwap {
            AtomicOp::CompareSwap {
                compare: atomic.compare,
                swap: atomic.swap_add,
            }
        } else {
            AtomicOp::FetchAdd {
                add: atomic.swap_add,
            }
        };
        let key = KeyRef {
            key: atomic.rkey.0,
            kind: KeyKind::Remote,
            pd: self.config.pd,
        };
        let orig = cx.mem.atomic(key, atomic.va, op).map_err(|e| match e {
            MemoryError::Misaligned(_) => Refusal::MisalignedAtomic,
            _ => Refusal::RkeyViolation,
        })?;
        self.resp.msn = (self.resp.msn + 1) & 0x00ff_ffff;
        self.add_resource(Resource::Atomic { psn: h.psn, orig });
        let ack = Response::AtomicAck {
            psn: h.psn,
            orig,
            msn: self.resp.msn,
        };
        self.queue_response(ack, cx);
        self.resp.psn = h.psn.next();
        Ok(())
    }

    /// The packet was executed: invalidate the rkey a SEND with invalidate names (IBTA
    /// 9.4.1.2), move to the next PSN and, at the end of a message, count it and complete
    /// its receive work request (rxe `do_complete`).
    // Forced inline: see `execute`.
    #[inline(always)]
    fn complete<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        cx: &mut Cx<'_, M>,
    ) -> Result<(), Refusal> {
        let h = &pkt.h;
        if let Some(ieth) = h.ieth.filter(|_| h.pos.ends_message()) {
            let key = KeyRef {
                key: ieth.rkey.0,
                kind: KeyKind::Remote,
                pd: self.config.pd,
            };
            cx.mem
                .invalidate(key)
                .map_err(|_| Refusal::InvalidateRkey)?;
        }
        self.resp.psn = h.psn.next();
        if !h.pos.ends_message() {
            return Ok(());
        }
        self.resp.msn = (self.resp.msn + 1) & 0x00ff_ffff;
        let Some(recv) = self.resp.recv.take() else {
            return Ok(());
        };
        let write_imm = h.kind == Kind::Write;
        let mut flags = WcFlags::default();
        let mut imm = 0;
        if let Some(i) = h.imm {
            flags = flags | WcFlags::WITH_IMM;
            imm = i.data;
        }
        if let Some(i) = h.ieth {
            flags = flags | WcFlags::WITH_INV;
            imm = i.rkey.0;
        }
        if !write_imm {
            cx.count(Counter::rdma_recvs);
        }
        self.completions.push_back(Completion {
            wr_id: recv.wqe.wr_id,
            status: WcStatus::Success,
            opcode: if write_imm {
                WcOpcode::RecvRdmaWithImm
            } else {
                WcOpcode::Recv
            },
            queue: CompletionQueue::Recv,
            qpn: self.config.qpn.value(),
            byte_len: recv.offset as u32,
            imm,
            flags,
            src_qp: self.attr.dest_qpn.value(),
            solicited: h.solicited,
            network_header: None,
        });
        Ok(())
    }

    /// RC: the requester asked for an acknowledgement (rxe `acknowledge`).
    #[inline]
    fn acknowledge<M: MemoryTable + ?Sized>(&mut self, pkt: &Packet<'_>, cx: &mut Cx<'_, M>) {
        if self.config.qp_type == QpType::Rc && pkt.h.ack_req {
            let ack = Response::Ack {
                psn: pkt.h.psn,
                syndrome: Syndrome::ACK_UNLIMITED,
                msn: self.resp.msn,
            };
            self.queue_response(ack, cx);
        }
    }

    /// UD: the DETH must be there (its Q_Key was checked with the header), and the
    /// operation a SEND ONLY.
    fn check_datagram(&self, pkt: &Packet<'_>) -> Result<xroce_wire::DethRepr, Refusal> {
        let deth = pkt.h.deth.ok_or(Refusal::Malformed)?;
        if pkt.h.kind != Kind::Send || pkt.h.pos != Position::Only {
            return Err(Refusal::OperationNotAllowed);
        }
        Ok(deth)
    }

    /// A UD datagram: checked, then placed behind the 40 bytes of its network header in a
    /// receive work request, which completes.
    fn receive_datagram<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        cx: &mut Cx<'_, M>,
    ) -> Result<(), Refusal> {
        let deth = self.check_datagram(pkt)?;
        let recv = self.take_recv(cx).ok_or(Refusal::ReceiverNotReady)?;
        let grh = pkt.grh();
        let total = grh.len() as u64 + pkt.payload.len() as u64;
        if total > recv.wqe.sges.total_len() {
            // rxe drops a UD message too long for the buffer and keeps the buffer.
            self.give_back_recv(recv, cx);
            return Err(Refusal::ReceiveTooSmall);
        }
        let pd = self.config.pd;
        let into = ScatterInto::Local(&recv.wqe.sges);
        let placed = scatter(cx.mem, pd, into, 0, &grh)
            .and_then(|()| scatter(cx.mem, pd, into, grh.len() as u64, pkt.payload));
        let status = if placed.is_ok() {
            WcStatus::Success
        } else {
            WcStatus::LocProtErr
        };
        let mut flags = WcFlags::GRH;
        if pkt.h.imm.is_some() {
            flags = flags | WcFlags::WITH_IMM;
        }
        self.completions.push_back(Completion {
            wr_id: recv.wqe.wr_id,
            status,
            opcode: WcOpcode::Recv,
            queue: CompletionQueue::Recv,
            qpn: self.config.qpn.value(),
            byte_len: total as u32,
            imm: pkt.h.imm.map_or(0, |i| i.data),
            flags,
            src_qp: deth.src_qp.value(),
            solicited: pkt.h.solicited,
            network_header: Some(pkt.network_header()),
        });
        if status != WcStatus::Success {
            // A bad receive buffer is the application's error: the QP goes to ERR.
            self.enter_error(cx, None, AsyncEvent::QpFatal(self.config.qpn));
        }
        Ok(())
    }

    /// The responder moves the QP to ERR: the receive in progress completes with `status`
    /// when there is one; otherwise the application learns from `event`. Everything else
    /// is flushed.
    fn enter_error<M: MemoryTable + ?Sized>(
        &mut self,
        cx: &mut Cx<'_, M>,
        status: Option<WcStatus>,
        event: AsyncEvent,
    ) {
        match (status, self.resp.recv.take()) {
            (Some(status), Some(recv)) => self.completions.push_back(Completion {
                wr_id: recv.wqe.wr_id,
                status,
                opcode: WcOpcode::Recv,
                queue: CompletionQueue::Recv,
                qpn: self.config.qpn.value(),
                byte_len: 0,
                imm: 0,
                flags: WcFlags::default(),
                src_qp: 0,
                solicited: false,
                network_header: None,
            }),
            (_, recv) => {
                if let Some(recv) = recv {
                    self.resp.recv = Some(recv);
                }
                cx.events.push_back(event);
            }
        }
        self.enter_state(QpState::Err);
        if self.config.srq.is_some() {
            cx.events
                .push_back(AsyncEvent::LastWqeReached(self.config.qpn));
        }
    }

    /// UC: the message in progress is broken. Its receive work request is reused for the
    /// next message (IBTA 9.9.3 class D1: "the receive WQE is reused").
    fn abandon_message<M: MemoryTable + ?Sized>(&mut self, cx: &mut Cx<'_, M>) {
        self.resp.in_message = InMessage::None;
        self.resp.write = None;
        if let Some(recv) = self.resp.recv.take() {
            self.give_back_recv(recv, cx);
        }
    }

    fn take_recv<M: MemoryTable + ?Sized>(&mut self, cx: &mut Cx<'_, M>) -> Option<CurrentRecv> {
        if self.config.srq.is_some() {
            let srq = cx.srq.as_deref_mut()?;
            let (wqe, limit) = srq.take()?;
            if limit {
                cx.events.push_back(AsyncEvent::SrqLimitReached(srq.id()));
            }
            Some(CurrentRecv {
                wqe,
                offset: 0,
                from_srq: true,
            })
        } else {
            let wqe = self.rq.pop_front()?;
            Some(CurrentRecv {
                wqe,
                offset: 0,
                from_srq: false,
            })
        }
    }

    fn give_back_recv<M: MemoryTable + ?Sized>(&mut self, recv: CurrentRecv, cx: &mut Cx<'_, M>) {
        if recv.from_srq {
            if let Some(srq) = cx.srq.as_deref_mut() {
                srq.give_back(recv.wqe);
            }
        } else {
            self.rq.push_front(recv.wqe);
        }
    }
}
