//! The responder: executes request packets (rxe's `rxe_resp.c`).
//!
//! Every request goes through the same chain of named checks, in rxe's order: PSN →
//! opcode sequence → opcode valid for the QP → resources → length → rkey → execute. A
//! failed check is an error class of IBTA 9.9.3 (table 58): for RC a NAK (PSN sequence
//! error once per gap, invalid request, remote access error, remote operational error) or an
//! RNR NAK; for UC a silently dropped message; for UD a dropped packet. Every drop lands in
//! exactly one counter.
//!
//! Responses leave in PSN order through one queue: ACKs (coalesced: a new ACK replaces an
//! ACK still waiting at the tail), NAKs, READ responses (streamed one packet per transmit
//! opportunity) and atomic acknowledgements. Duplicate requests are handled per IBTA
//! 9.7.5.1.4: SEND/WRITE re-ACKed, READ replayed from the responder resource over the
//! original range, atomics answered with the saved original value and never executed twice.

use std::collections::VecDeque;

use xroce_wire::{AethRepr, NakCode, Position, Psn, RnrTimer, Syndrome};

use crate::attributes::{Access, QpState, QpType};
use crate::completion::{Completion, CompletionQueue, WcFlags, WcOpcode, WcStatus};
use crate::context::{AsyncEvent, Cx, Emit};
use crate::counters::Counter;
use crate::memory::{
    AtomicOp, GatherFrom, KeyKind, KeyRef, MemoryError, MemoryTable, ScatterInto, gather, scatter,
};
use crate::packet::{Headers, Kind, Packet};
use crate::qp::QueuePair;
use crate::wqe::RecvWqe;

/// A response waiting to be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Response {
    /// An ACK, NAK or RNR NAK.
    Ack {
        psn: Psn,
        syndrome: Syndrome,
        msn: u32,
    },
    /// READ response packets still to send.
    Read {
        rkey: u32,
        va: u64,
        resid: u64,
        psn: Psn,
        first: bool,
        msn: u32,
    },
    /// An atomic acknowledgement.
    AtomicAck { psn: Psn, orig: u64, msn: u32 },
}

/// What a READ or atomic request left behind, to answer its duplicates (IBTA 9.7.5.1.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resource {
    Read {
        first_psn: Psn,
        last_psn: Psn,
        va: u64,
        len: u64,
        rkey: u32,
    },
    Atomic {
        psn: Psn,
        orig: u64,
    },
}

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

/// The responder's state.
#[derive(Clone, Debug, Default)]
pub(crate) struct ResponderState {
    /// The next PSN expected.
    pub(crate) psn: Psn,
    /// The message sequence number (24 bits): messages completed.
    pub(crate) msn: u32,
    pub(crate) in_message: InMessage,
    /// A PSN sequence error NAK was sent for the current gap.
    pub(crate) sent_psn_nak: bool,
    /// UC: the current message is broken; drop until the next FIRST/ONLY.
    pub(crate) uc_drop: bool,
    pub(crate) recv: Option<CurrentRecv>,
    /// WRITE in progress: next address, rkey, bytes left, total length.
    pub(crate) write: Option<(u64, u32, u64, u64)>,
    pub(crate) resources: VecDeque<Resource>,
    pub(crate) max_resources: usize,
    pub(crate) responses: VecDeque<Response>,
    /// The first packet on this QP was seen (COMM_EST raised).
    pub(crate) established: bool,
}

impl ResponderState {
    pub(crate) fn on_rq_psn(&mut self, psn: Psn) {
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

/// Why a request failed a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Failure {
    /// Class C / D: invalid request (bad opcode sequence, length, unsupported operation).
    InvalidRequest,
    /// Class C / E: remote access error (rkey, bounds, rights).
    RemoteAccess,
    /// Class A: remote operational error (our receive work request was bad).
    RemoteOp(WcStatus),
    /// The receive buffer was too small for the SEND.
    Length,
    /// No receive work request: RNR.
    Rnr,
}

impl QueuePair {
    /// Handles a request packet.
    pub(crate) fn handle_request<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        cx: &mut Cx<'_, M>,
    ) {
        match self.state {
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe => {}
            QpState::Err => return cx.count(Counter::rcvd_qp_error),
            _ => return cx.count(Counter::rcvd_qp_not_ready),
        }
        if !self.resp.established {
            self.resp.established = true;
            if self.state == QpState::Rtr {
                cx.events
                    .push_back(AsyncEvent::CommEstablished(self.config.qpn));
            }
        }
        match self.config.qp_type {
            QpType::Ud => self.handle_ud_request(pkt, cx),
            QpType::Rc | QpType::Uc => self.handle_connected_request(pkt, cx),
        }
    }

    fn handle_ud_request<M: MemoryTable + ?Sized>(&mut self, pkt: &Packet<'_>, cx: &mut Cx<'_, M>) {
        let Some(deth) = pkt.h.deth else {
            return cx.count(Counter::rcvd_malformed);
        };
        // IBTA 10.2.5: the Q_Key must match.
        if deth.qkey.0 != self.attr.qkey {
            return cx.count(Counter::rcvd_bad_qkey);
        }
        if pkt.h.kind != Kind::Send || pkt.h.pos != Position::Only {
            return cx.count(Counter::rcvd_wrong_transport);
        }
        let Some(recv) = self.take_recv(cx) else {
            return cx.count(Counter::rcvd_no_recv_wqe);
        };
        let grh = pkt.grh();
        let total = grh.len() as u64 + pkt.payload.len() as u64;
        if total > recv.wqe.sges.total_len() {
            // rxe drops a UD message too long for the buffer and keeps the buffer.
            self.give_back_recv(recv, cx);
            return cx.count(Counter::rcvd_length_err);
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
        self.push_recv_completion(
            Completion {
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
            },
            cx,
        );
        if status != WcStatus::Success {
            // A bad receive buffer is the application's error: the QP goes to ERR.
            self.enter_error(cx, None, AsyncEvent::QpFatal(self.config.qpn));
        }
    }

    fn handle_connected_request<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        cx: &mut Cx<'_, M>,
    ) {
        let rc = self.config.qp_type == QpType::Rc;
        let h = &pkt.h;

        // 1. PSN.
        let diff = h.psn.distance(self.resp.psn);
        if rc {
            if diff > 0 {
                // IBTA 9.7.5.1.2: one PSN sequence error NAK per gap, carrying the PSN
                // expected; the rest of the gap is dropped silently.
                if self.resp.sent_psn_nak {
                    return cx.count(Counter::out_of_seq_dropped);
                }
                let nak = Response::Ack {
                    psn: self.resp.psn,
                    syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
                    msn: self.resp.msn,
                };
                // A NAK that finds the queue full is not sent: the gap stays un-NAKed and
                // the next packet of it tries again.
                if self.queue_response(nak, cx) {
                    self.resp.sent_psn_nak = true;
                    cx.count(Counter::out_of_seq_request);
                }
                return;
            }
            if diff < 0 {
                return self.handle_duplicate(pkt, cx);
            }
            self.resp.sent_psn_nak = false;
        } else if diff < 0 {
            // UC: a packet behind the expected PSN is a duplicate (the network repeated it);
            // executing it again would deliver its message twice.
            return cx.count(Counter::duplicate_request);
        } else if self.resp.uc_drop || diff != 0 {
            // UC: a lost packet breaks its message; a new message may start at any later PSN.
            if !h.pos.starts_message() {
                self.resp.uc_drop = true;
                return cx.count(Counter::uc_dropped);
            }
            self.abandon_message(cx);
            self.resp.uc_drop = false;
        }

        // 2. Opcode sequence.
        let continues = matches!(h.pos, Position::Middle | Position::Last);
        let sequence_ok = match self.resp.in_message {
            InMessage::None => !continues,
            InMessage::Send => continues && h.kind == Kind::Send,
            InMessage::Write => continues && h.kind == Kind::Write,
        };
        if !sequence_ok {
            if rc {
                return self.fail_request(pkt, Failure::InvalidRequest, cx);
            }
            if h.pos.starts_message() {
                // UC: the previous message is broken; this one starts afresh.
                self.abandon_message(cx);
            } else {
                self.resp.uc_drop = true;
                return cx.count(Counter::uc_dropped);
            }
        }

        // 3. Opcode valid for this QP and its access rights.
        let access = self.attr.access;
        let allowed = match h.kind {
            Kind::Send => true,
            Kind::Write => access.contains(Access::REMOTE_WRITE),
            Kind::ReadRequest => rc && access.contains(Access::REMOTE_READ),
            Kind::CompareSwap | Kind::FetchAdd => rc && access.contains(Access::REMOTE_ATOMIC),
            _ => false,
        };
        if !allowed {
            if rc {
                return self.fail_request(pkt, Failure::InvalidRequest, cx);
            }
            self.resp.uc_drop = true;
            return cx.count(Counter::rcvd_rkey_violation);
        }

        // 4. Resources.
        let needs_recv = h.kind == Kind::Send || (h.kind == Kind::Write && h.imm.is_some());
        if matches!(
            h.kind,
            Kind::ReadRequest | Kind::CompareSwap | Kind::FetchAdd
        ) && self.resp.max_resources == 0
        {
            return self.fail_request(pkt, Failure::InvalidRequest, cx);
        }
        if matches!(
            h.kind,
            Kind::ReadRequest | Kind::CompareSwap | Kind::FetchAdd
        ) && !self.resp.has_room()
        {
            // No room to queue its response: drop the request unexecuted (the requester
            // retries it) rather than execute it and lose the answer.
            return cx.count(Counter::response_queue_full);
        }
        if needs_recv && self.resp.recv.is_none() {
            match self.take_recv(cx) {
                Some(recv) => self.resp.recv = Some(recv),
                None if rc => return self.fail_request(pkt, Failure::Rnr, cx),
                None => {
                    self.resp.uc_drop = true;
                    return cx.count(Counter::rcvd_no_recv_wqe);
                }
            }
        }

        // 5. Length (IBTA 9.7.5.1.3, C9-36..C9-38): FIRST/MIDDLE carry exactly one MTU and
        // no pad, LAST one to MTU bytes, ONLY up to MTU bytes.
        let mtu = self.mtu() as usize;
        let n = pkt.payload.len();
        let length_ok = match h.pos {
            Position::First | Position::Middle => n == mtu && h.pad == 0,
            Position::Last => n >= 1 && n <= mtu,
            Position::Only => n <= mtu,
        } && h
            .reth
            .is_none_or(|r| u64::from(r.dma_len) <= crate::wqe::MAX_MESSAGE);
        if !length_ok {
            if rc {
                return self.fail_request(pkt, Failure::InvalidRequest, cx);
            }
            self.abandon_message(cx);
            self.resp.uc_drop = true;
            return cx.count(Counter::rcvd_length_err);
        }

        // 6. Rkey.
        if let Err(failure) = self.check_rkey(pkt, cx) {
            if rc {
                return self.fail_request(pkt, failure, cx);
            }
            self.abandon_message(cx);
            self.resp.uc_drop = true;
            return cx.count(Counter::rcvd_rkey_violation);
        }

        // 7. Execute.
        if let Err(failure) = self.execute(pkt, cx) {
            if rc {
                return self.fail_request(pkt, failure, cx);
            }
            self.abandon_message(cx);
            self.resp.uc_drop = true;
            let counter = match failure {
                Failure::Length => Counter::rcvd_length_err,
                _ => Counter::rcvd_rkey_violation,
            };
            cx.count(counter);
        }
    }

    /// Check 6: the rkey of a WRITE (first packet), READ or atomic, its rights and bounds.
    fn check_rkey<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        cx: &mut Cx<'_, M>,
    ) -> Result<(), Failure> {
        let h = &pkt.h;
        let key = |rkey| KeyRef {
            key: rkey,
            kind: KeyKind::Remote,
            pd: self.config.pd,
        };
        match h.kind {
            Kind::Write if h.pos.starts_message() => {
                let Some(reth) = h.reth else {
                    return Err(Failure::InvalidRequest);
                };
                let len = u64::from(reth.dma_len);
                // C9-88: a zero-length RDMA operation does not check the rkey.
                if len > 0 {
                    cx.mem
                        .check(key(reth.rkey.0), reth.va, len, Access::REMOTE_WRITE)
                        .map_err(|_| Failure::RemoteAccess)?;
                }
                self.resp.write = Some((reth.va, reth.rkey.0, len, len));
                self.check_write_length(pkt)
            }
            Kind::Write => self.check_write_length(pkt),
            Kind::ReadRequest => {
                let Some(reth) = h.reth else {
                    return Err(Failure::InvalidRequest);
                };
                if reth.dma_len > 0 {
                    cx.mem
                        .check(
                            key(reth.rkey.0),
                            reth.va,
                            u64::from(reth.dma_len),
                            Access::REMOTE_READ,
                        )
                        .map_err(|_| Failure::RemoteAccess)?;
                }
                Ok(())
            }
            Kind::CompareSwap | Kind::FetchAdd => {
                let Some(atomic) = h.atomic else {
                    return Err(Failure::InvalidRequest);
                };
                // IBTA 9.4.5: the atomic address must be 8-byte aligned (an invalid request).
                if !atomic.va.is_multiple_of(8) {
                    return Err(Failure::InvalidRequest);
                }
                cx.mem
                    .check(key(atomic.rkey.0), atomic.va, 8, Access::REMOTE_ATOMIC)
                    .map_err(|_| Failure::RemoteAccess)
            }
            _ => Ok(()),
        }
    }

    /// The WRITE's packets must add up to exactly the RETH length.
    fn check_write_length(&self, pkt: &Packet<'_>) -> Result<(), Failure> {
        let Some((_, _, resid, _)) = self.resp.write else {
            return Err(Failure::InvalidRequest);
        };
        let n = pkt.payload.len() as u64;
        let ok = if pkt.h.pos.ends_message() {
            n == resid
        } else {
            n < resid
        };
        if ok {
            Ok(())
        } else {
            Err(Failure::InvalidRequest)
        }
    }

    /// Step 7: place the data, perform the operation, complete, acknowledge.
    fn execute<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        cx: &mut Cx<'_, M>,
    ) -> Result<(), Failure> {
        let h = pkt.h;
        let pd = self.config.pd;
        match h.kind {
            Kind::Send => {
                let recv = self.resp.recv.as_mut().ok_or(Failure::InvalidRequest)?;
                let offset = recv.offset;
                if offset + pkt.payload.len() as u64 > recv.wqe.sges.total_len() {
                    return Err(Failure::Length);
                }
                scatter(
                    cx.mem,
                    pd,
                    ScatterInto::Local(&recv.wqe.sges),
                    offset,
                    pkt.payload,
                )
                .map_err(|_| Failure::RemoteOp(WcStatus::LocProtErr))?;
                recv.offset += pkt.payload.len() as u64;
                self.resp.in_message = if h.pos.ends_message() {
                    InMessage::None
                } else {
                    InMessage::Send
                };
            }
            Kind::Write => {
                let Some((va, rkey, resid, total)) = self.resp.write else {
                    return Err(Failure::InvalidRequest);
                };
                let n = pkt.payload.len() as u64;
                if n > 0 {
                    scatter(cx.mem, pd, ScatterInto::Remote { rkey, va }, 0, pkt.payload)
                        .map_err(|_| Failure::RemoteAccess)?;
                }
                self.resp.write = Some((va.wrapping_add(n), rkey, resid - n, total));
                self.resp.in_message = if h.pos.ends_message() {
                    InMessage::None
                } else {
                    InMessage::Write
                };
                if h.pos.ends_message() {
                    self.resp.write = None;
                    if let Some(recv) = self.resp.recv.as_mut() {
                        // WRITE with immediate: the completion reports the RETH length.
                        recv.offset = total;
                    }
                }
            }
            Kind::ReadRequest => {
                let Some(reth) = h.reth else {
                    return Err(Failure::InvalidRequest);
                };
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
                return Ok(());
            }
            Kind::CompareSwap | Kind::FetchAdd => {
                let Some(atomic) = h.atomic else {
                    return Err(Failure::InvalidRequest);
                };
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
                    pd,
                };
                let orig = cx.mem.atomic(key, atomic.va, op).map_err(|e| match e {
                    MemoryError::Misaligned(_) => Failure::InvalidRequest,
                    _ => Failure::RemoteAccess,
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
                return Ok(());
            }
            _ => return Err(Failure::InvalidRequest),
        }

        if let Some(rkey) = h.ieth.filter(|_| h.pos.ends_message()).map(|i| i.rkey.0) {
            // IBTA 9.4.1.2: SEND with invalidate invalidates the rkey named in the IETH.
            let key = KeyRef {
                key: rkey,
                kind: KeyKind::Remote,
                pd,
            };
            if cx.mem.invalidate(key).is_err() {
                return Err(Failure::InvalidRequest);
            }
        }
        self.resp.psn = h.psn.next();
        if h.pos.ends_message() {
            self.resp.msn = (self.resp.msn + 1) & 0x00ff_ffff;
            if let Some(recv) = self.resp.recv.take() {
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
                self.push_recv_completion(
                    Completion {
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
                    },
                    cx,
                );
            }
        }
        if self.config.qp_type == QpType::Rc && h.ack_req {
            let ack = Response::Ack {
                psn: h.psn,
                syndrome: Syndrome::ACK_UNLIMITED,
                msn: self.resp.msn,
            };
            self.queue_response(ack, cx);
        }
        Ok(())
    }

    /// A request with a PSN already executed (IBTA 9.7.5.1.4).
    fn handle_duplicate<M: MemoryTable + ?Sized>(&mut self, pkt: &Packet<'_>, cx: &mut Cx<'_, M>) {
        let h = &pkt.h;
        match h.kind {
            Kind::Send | Kind::Write => {
                // C9-105: acknowledge again, with the last PSN executed; never re-execute.
                let ack = Response::Ack {
                    psn: self.resp.psn.wrapping_sub(1),
                    syndrome: Syndrome::ACK_UNLIMITED,
                    msn: self.resp.msn,
                };
                if self.queue_response(ack, cx) {
                    cx.count(Counter::duplicate_request);
                }
            }
            Kind::ReadRequest => {
                let Some(reth) = h.reth else {
                    return cx.count(Counter::duplicate_request_no_resource);
                };
                let found = self.resp.resources.iter().rev().find_map(|r| match *r {
                    Resource::Read {
                        first_psn,
                        last_psn,
                        va,
                        len,
                        rkey,
                    } if h.psn.distance(first_psn) >= 0 && h.psn.distance(last_psn) <= 0 => {
                        Some((first_psn, va, len, rkey))
                    }
                    _ => None,
                });
                // The retried request may only ask for (the rest of) the original range.
                let valid = found.filter(|&(_, va, len, rkey)| {
                    let end = va.checked_add(len);
                    let req_end = reth.va.checked_add(u64::from(reth.dma_len));
                    rkey == reth.rkey.0 && reth.va >= va && req_end.is_some() && req_end <= end
                });
                let Some((first_psn, ..)) = valid else {
                    return cx.count(Counter::duplicate_request_no_resource);
                };
                let read = Response::Read {
                    rkey: reth.rkey.0,
                    va: reth.va,
                    resid: u64::from(reth.dma_len),
                    psn: h.psn,
                    first: h.psn == first_psn,
                    msn: self.resp.msn,
                };
                if self.queue_response(read, cx) {
                    cx.count(Counter::duplicate_request);
                }
            }
            Kind::CompareSwap | Kind::FetchAdd => {
                let orig = self.resp.resources.iter().find_map(|r| match *r {
                    Resource::Atomic { psn, orig } if psn == h.psn => Some(orig),
                    _ => None,
                });
                let Some(orig) = orig else {
                    return cx.count(Counter::duplicate_request_no_resource);
                };
                let ack = Response::AtomicAck {
                    psn: h.psn,
                    orig,
                    msn: self.resp.msn,
                };
                if self.queue_response(ack, cx) {
                    cx.count(Counter::duplicate_request);
                }
            }
            _ => cx.count(Counter::rcvd_wrong_transport),
        }
    }

    /// An RC request failed a check: NAK it, and for the fatal classes complete the
    /// receive in progress in error and move to ERR.
    fn fail_request<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        failure: Failure,
        cx: &mut Cx<'_, M>,
    ) {
        let psn = pkt.h.psn;
        let msn = self.resp.msn;
        if failure == Failure::Rnr {
            // IBTA 9.7.5.2.8: RNR NAK with our timer; the requester resends later.
            let nak = Response::Ack {
                psn,
                syndrome: Syndrome::RnrNak {
                    timer: RnrTimer::new(self.attr.min_rnr_timer),
                },
                msn,
            };
            if self.queue_response(nak, cx) {
                cx.count(Counter::send_rnr_err);
            }
            return;
        }
        let (code, counter, status) = match failure {
            Failure::RemoteAccess => (
                NakCode::RemoteAccessError,
                Counter::sent_nak_remote_access,
                WcStatus::RemAccessErr,
            ),
            Failure::RemoteOp(status) => (
                NakCode::RemoteOperationalError,
                Counter::sent_nak_remote_op,
                status,
            ),
            Failure::Length => (
                NakCode::InvalidRequest,
                Counter::sent_nak_invalid_request,
                WcStatus::LocLenErr,
            ),
            _ => (
                NakCode::InvalidRequest,
                Counter::sent_nak_invalid_request,
                WcStatus::RemInvReqErr,
            ),
        };
        cx.count(counter);
        let nak = Response::Ack {
            psn,
            syndrome: Syndrome::Nak(code),
            msn,
        };
        // A NAK never waits behind a full queue.
        self.resp.responses.push_back(nak);
        let qpn = self.config.qpn;
        let event = match failure {
            Failure::RemoteAccess => AsyncEvent::QpAccessError(qpn),
            _ => AsyncEvent::QpRequestError(qpn),
        };
        self.enter_error(cx, Some(status), event);
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

    fn push_recv_completion<M: MemoryTable + ?Sized>(
        &mut self,
        c: Completion,
        _cx: &mut Cx<'_, M>,
    ) {
        self.completions.push_back(c);
    }

    fn add_resource(&mut self, res: Resource) {
        // The requester must not exceed max_dest_rd_atomic; if it does, the oldest resource
        // is recycled, as rxe does.
        if self.resp.resources.len() >= self.resp.max_resources.max(1) {
            self.resp.resources.pop_front();
        }
        self.resp.resources.push_back(res);
    }

    /// Queues a response and says whether it was. A positive ACK replaces a positive ACK
    /// still waiting at the tail (coalescing); a full queue drops it, counted in
    /// `response_queue_full` (the requester's timer recovers). The caller counts what the
    /// request was only when the response was queued, so that a request lands in exactly
    /// one counter.
    fn queue_response<M: MemoryTable + ?Sized>(&mut self, r: Response, cx: &mut Cx<'_, M>) -> bool {
        let q = &mut self.resp.responses;
        if let (
            Response::Ack {
                syndrome: Syndrome::Ack { .. },
                ..
            },
            Some(
                back @ Response::Ack {
                    syndrome: Syndrome::Ack { .. },
                    ..
                },
            ),
        ) = (r, q.back_mut())
        {
            *back = r;
            return true;
        }
        if !self.resp.has_room() {
            cx.count(Counter::response_queue_full);
            return false;
        }
        self.resp.responses.push_back(r);
        true
    }

    /// Emits the next response packet, if one waits. Returns whether one was emitted.
    pub(crate) fn poll_response<M: MemoryTable + ?Sized, E: Emit>(
        &mut self,
        cx: &mut Cx<'_, M>,
        out: &mut E,
    ) -> bool {
        let Some(front) = self.resp.responses.front().copied() else {
            return false;
        };
        let dest = self.attr.dest_qpn;
        let path = self.attr.path;
        match front {
            Response::Ack { psn, syndrome, msn } => {
                let mut h = Headers::new(QpType::Rc, Kind::Ack, Position::Only, dest, psn);
                h.aeth = Some(AethRepr { syndrome, msn });
                if out.begin(&h, &path, 0).is_none() {
                    return false;
                }
                out.commit();
                self.resp.responses.pop_front();
            }
            Response::AtomicAck { psn, orig, msn } => {
                let mut h = Headers::new(QpType::Rc, Kind::AtomicAck, Position::Only, dest, psn);
                h.aeth = Some(AethRepr {
                    syndrome: Syndrome::ACK_UNLIMITED,
                    msn,
                });
                h.atomic_ack = Some(xroce_wire::AtomicAckEthRepr { orig_data: orig });
                if out.begin(&h, &path, 0).is_none() {
                    return false;
                }
                out.commit();
                self.resp.responses.pop_front();
            }
            Response::Read {
                rkey,
                va,
                resid,
                psn,
                first,
                msn,
            } => {
                let mtu = u64::from(self.mtu());
                let n = resid.min(mtu);
                let pos = match (first, resid <= mtu) {
                    (true, true) => Position::Only,
                    (true, false) => Position::First,
                    (false, false) => Position::Middle,
                    (false, true) => Position::Last,
                };
                let mut h = Headers::new(QpType::Rc, Kind::ReadResponse, pos, dest, psn);
                if pos != Position::Middle {
                    h.aeth = Some(AethRepr {
                        syndrome: Syndrome::ACK_UNLIMITED,
                        msn,
                    });
                }
                let from = GatherFrom::Remote { rkey, va };
                let Some(dst) = out.begin(&h, &path, n as usize) else {
                    return false;
                };
                if n > 0 && gather(&*cx.mem, self.config.pd, from, 0, dst).is_err() {
                    // The region went away under the READ: a remote access error.
                    self.resp.responses.pop_front();
                    cx.count(Counter::sent_nak_remote_access);
                    let nak = Response::Ack {
                        psn,
                        syndrome: Syndrome::Nak(NakCode::RemoteAccessError),
                        msn,
                    };
                    self.resp.responses.push_front(nak);
                    self.enter_error(cx, None, AsyncEvent::QpAccessError(self.config.qpn));
                    // Send the NAK in this turn: a QP that sends nothing now leaves the
                    // endpoint's active list, and nothing else would bring it back.
                    return self.poll_response(cx, out);
                }
                out.commit();
                let resid = resid - n;
                if resid == 0 {
                    self.resp.responses.pop_front();
                } else if let Some(Response::Read {
                    va: v,
                    resid: r,
                    psn: p,
                    first: f,
                    ..
                }) = self.resp.responses.front_mut()
                {
                    *v = va.wrapping_add(n);
                    *r = resid;
                    *p = psn.next();
                    *f = false;
                }
            }
        }
        true
    }
}
