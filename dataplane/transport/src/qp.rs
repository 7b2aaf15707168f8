//! Queue pairs: the verbs objects that hold a send queue, a receive queue and the state of
//! the three roles, and the entry points the endpoint calls.
//!
//! A [`QueuePair`] holds what the three roles of rxe's decomposition work on: the
//! [`send_queue`](crate::send_queue) with the packets in flight, the receive queue, the
//! completer's retry counters and the responder's state. The roles are `impl QueuePair`
//! blocks in their own modules: the [`requester`](crate::requester) (send queue → request
//! packets), the [`responder`](crate::responder) (request packets → memory, receive
//! completions, ACKs) and the [`completer`](crate::completer) (responses → send
//! completions, retransmission). A `modify` is validated by
//! [`validate_modify`](crate::attributes::validate_modify); the queue pair applies it and
//! tells each role what changed.

use std::collections::VecDeque;

use xroce_wire::{Gid, Psn, Qpn};

use crate::attributes::{AttrMask, Limits, ModifyError, QpAttr, QpCaps, QpState, QpType};
use crate::completer::CompleterState;
use crate::completion::{Completion, CompletionQueue, WcOpcode};
use crate::context::{Cx, Emit};
use crate::memory::{MemoryTable, PdId};
use crate::packet::{Kind, Packet};
use crate::responder::ResponderState;
use crate::send_queue::SendQueue;
use crate::srq::SrqId;
use crate::time::Instant;
use crate::wqe::{PostError, RecvWqe, SendOp, SendWqe};

/// What a queue pair was created with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpConfig {
    /// The QP number the engine allocated.
    pub qpn: Qpn,
    /// The transport service.
    pub qp_type: QpType,
    /// The protection domain.
    pub pd: PdId,
    /// Capacities.
    pub caps: QpCaps,
    /// The shared receive queue, if any.
    pub srq: Option<SrqId>,
    /// Every send work request generates a completion (`sq_sig_all`).
    pub sq_sig_all: bool,
    /// Device limits.
    pub limits: Limits,
}

/// A queue pair.
#[derive(Debug)]
pub struct QueuePair {
    pub(crate) config: QpConfig,
    pub(crate) state: QpState,
    pub(crate) attr: QpAttr,
    /// Send work requests not yet completed, oldest first, and the packets in flight.
    pub(crate) sq: SendQueue,
    /// Receive work requests not yet consumed (no SRQ), oldest first.
    pub(crate) rq: VecDeque<RecvWqe>,
    pub(crate) comp: CompleterState,
    pub(crate) resp: ResponderState,
    /// Completions waiting for the engine, in the order they were generated.
    pub(crate) completions: VecDeque<Completion>,
    /// The QP has something to transmit and sits on the endpoint's active list.
    pub(crate) scheduled: bool,
    /// Selective repeat with an xroce peer ([`crate::selective`]); off until the engine
    /// turns it on, and off again after RESET.
    pub(crate) selective: bool,
}

/// The least time a destroyed RC QP lingers to answer its peer's retries (see
/// [`QueuePair::linger`]).
pub const LINGER_MIN: std::time::Duration = std::time::Duration::from_millis(500);

/// The most time a destroyed RC QP lingers.
pub const LINGER_MAX: std::time::Duration = std::time::Duration::from_secs(10);

impl QueuePair {
    /// A new queue pair in RESET.
    pub fn new(config: QpConfig) -> QueuePair {
        QueuePair {
            config,
            state: QpState::Reset,
            attr: QpAttr::default(),
            sq: SendQueue::with_capacity(config.caps.max_send_wr as usize),
            rq: VecDeque::with_capacity(config.caps.max_recv_wr as usize),
            comp: CompleterState::default(),
            resp: ResponderState::default(),
            completions: VecDeque::new(),
            scheduled: false,
            selective: false,
        }
    }

    /// Turns selective repeat ([`crate::selective`]) on or off. Only for an RC QP whose
    /// peer QP is served by an xroce daemon that turned it on too; a standard peer must
    /// never see it on (see the module for what happens when only one end has it). It
    /// may change at any time: turned off, the packets held are dropped and the scoreboard
    /// forgotten (the requester's timer resends what is missing). RESET turns it off.
    pub fn set_selective_repeat(&mut self, on: bool) {
        let on = on && self.config.qp_type == QpType::Rc;
        if !on {
            self.resp.held.clear();
            self.sq.scoreboard.clear();
        }
        self.selective = on;
        self.sq.recovery.set_selective(on);
    }

    /// Whether selective repeat is on.
    pub fn selective_repeat(&self) -> bool {
        self.selective
    }

    /// The QP number.
    pub fn qpn(&self) -> Qpn {
        self.config.qpn
    }

    /// The transport service.
    pub fn qp_type(&self) -> QpType {
        self.config.qp_type
    }

    /// The current state.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// The creation parameters.
    pub fn config(&self) -> &QpConfig {
        &self.config
    }

    /// The current attributes (`ibv_query_qp`).
    pub fn attr(&self) -> QpAttr {
        QpAttr {
            qp_state: self.state,
            cur_qp_state: self.state,
            ..self.attr
        }
    }

    /// The path MTU in bytes. UD has no path MTU attribute: its messages may be as large
    /// as the port's active MTU (IBTA 10.2.4; rxe does the same).
    pub(crate) fn mtu(&self) -> u32 {
        let mtu = match self.config.qp_type {
            QpType::Ud => self.config.limits.max_mtu,
            _ => self.attr.path_mtu,
        };
        mtu.bytes() as u32
    }

    /// Modifies attributes and possibly the state, validating like `ibv_modify_qp`
    /// ([`validate_modify`](crate::attributes::validate_modify)) against a port whose GID
    /// table has `gids` entries. On error nothing changes.
    pub fn modify(
        &mut self,
        attr: &QpAttr,
        mask: AttrMask,
        gids: usize,
    ) -> Result<(), ModifyError> {
        let transition = crate::attributes::validate_modify(
            self.config.qp_type,
            self.state,
            attr,
            mask,
            &self.config.limits,
            gids,
        )?;
        let given = transition.given;
        self.attr.apply(attr, given);
        if given.contains(AttrMask::RQ_PSN) {
            self.resp.on_rq_psn(attr.rq_psn);
        }
        if given.contains(AttrMask::SQ_PSN) {
            self.sq.on_sq_psn(attr.sq_psn);
        }
        if given.contains(AttrMask::MAX_DEST_RD_ATOMIC) {
            self.resp.on_max_dest_rd_atomic(attr.max_dest_rd_atomic);
        }
        if given.contains(AttrMask::RETRY_CNT) || given.contains(AttrMask::RNR_RETRY) {
            self.comp.reset_retry_counters(&self.attr);
        }
        if transition.to != transition.from {
            self.enter_state(transition.to);
        }
        Ok(())
    }

    /// Moves to `to`, with the side effects of entering it.
    pub(crate) fn enter_state(&mut self, to: QpState) {
        let from = self.state;
        self.state = to;
        match to {
            QpState::Reset => {
                // IBTA 10.3.1: RESET discards every work request without completions.
                // The QP keeps its place on the endpoint's active list (if it has one): a
                // second entry there would be a second turn per round.
                let (config, scheduled) = (self.config, self.scheduled);
                let budget = self.resp.held.budget();
                *self = QueuePair::new(config);
                self.scheduled = scheduled;
                if let Some(budget) = budget {
                    self.resp.held.share(budget);
                }
            }
            QpState::Err => self.flush_all(),
            QpState::Sqe => self.flush_send_queue(),
            QpState::Rts if from == QpState::Rtr => {
                self.comp.reset_retry_counters(&self.attr);
            }
            _ => {}
        }
    }

    /// Flushes every send work request not yet completed, in order.
    pub(crate) fn flush_send_queue(&mut self) {
        let qpn = self.config.qpn.value();
        let completions = &mut self.completions;
        self.sq.flush(|wr_id, op| {
            completions.push_back(Completion::flushed(
                wr_id,
                send_opcode(op),
                CompletionQueue::Send,
                qpn,
            ));
        });
        self.comp.on_flush();
    }

    /// Flushes both queues (entering ERR).
    pub(crate) fn flush_all(&mut self) {
        self.flush_send_queue();
        let qpn = self.config.qpn.value();
        if let Some(wqe) = self.resp.take_current_wqe() {
            self.completions.push_back(Completion::flushed(
                wqe.wr_id,
                WcOpcode::Recv,
                CompletionQueue::Recv,
                qpn,
            ));
        }
        while let Some(wqe) = self.rq.pop_front() {
            self.completions.push_back(Completion::flushed(
                wqe.wr_id,
                WcOpcode::Recv,
                CompletionQueue::Recv,
                qpn,
            ));
        }
        self.resp.on_flush();
    }

    /// Posts a receive work request (`ibv_post_recv`).
    pub fn post_recv(&mut self, wqe: RecvWqe) -> Result<(), PostError> {
        if self.config.srq.is_some() {
            return Err(PostError::Invalid("the QP uses a shared receive queue"));
        }
        if self.state == QpState::Reset {
            return Err(PostError::WrongState(self.state));
        }
        if wqe.sges.as_slice().len() > self.config.caps.max_recv_sge as usize {
            return Err(PostError::Invalid(
                "more scatter/gather elements than max_recv_sge",
            ));
        }
        if self.state == QpState::Err {
            // Verbs: work requests posted in ERR complete at once with a flush error.
            self.completions.push_back(Completion::flushed(
                wqe.wr_id,
                WcOpcode::Recv,
                CompletionQueue::Recv,
                self.config.qpn.value(),
            ));
            return Ok(());
        }
        if self.rq.len() >= self.config.caps.max_recv_wr as usize {
            return Err(PostError::QueueFull);
        }
        self.rq.push_back(wqe);
        Ok(())
    }

    /// Posts a send work request (`ibv_post_send`). The QP then wants to transmit: the
    /// endpoint schedules it.
    #[inline]
    pub fn post_send(&mut self, wqe: SendWqe) -> Result<(), PostError> {
        match self.state {
            QpState::Rts | QpState::Sqd | QpState::Sqe | QpState::Err => {}
            s => return Err(PostError::WrongState(s)),
        }
        self.validate_send(&wqe)?;
        if matches!(self.state, QpState::Err | QpState::Sqe) {
            self.completions.push_back(Completion::flushed(
                wqe.wr_id,
                send_opcode(wqe.op),
                CompletionQueue::Send,
                self.config.qpn.value(),
            ));
            return Ok(());
        }
        if self.sq.len() >= self.config.caps.max_send_wr as usize {
            return Err(PostError::QueueFull);
        }
        self.sq.push(wqe);
        Ok(())
    }

    fn validate_send(&self, wqe: &SendWqe) -> Result<(), PostError> {
        use crate::wqe::Gather;
        let caps = &self.config.caps;
        match &wqe.data {
            Gather::Sges(list) if list.as_slice().len() > caps.max_send_sge as usize => {
                return Err(PostError::Invalid(
                    "more scatter/gather elements than max_send_sge",
                ));
            }
            Gather::Inline { len, .. } if u32::from(*len) > caps.max_inline_data => {
                return Err(PostError::Invalid("more inline data than max_inline_data"));
            }
            _ => {}
        }
        let qp_type = self.config.qp_type;
        let ok = match wqe.op {
            SendOp::Send | SendOp::SendWithImm { .. } => true,
            SendOp::SendWithInv { .. } => qp_type == QpType::Rc,
            SendOp::Write { .. } | SendOp::WriteWithImm { .. } => qp_type != QpType::Ud,
            SendOp::Read { .. } | SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. } => {
                qp_type == QpType::Rc
            }
        };
        if !ok {
            return Err(PostError::Invalid(
                "this operation is not available on this QP type",
            ));
        }
        if qp_type == QpType::Ud && wqe.ud.is_none() {
            return Err(PostError::Invalid("a UD send needs an address handle"));
        }
        if wqe.op.is_atomic() {
            let len = wqe.data.total_len();
            if len != 8 && !(len == 0 && matches!(wqe.data, crate::wqe::Gather::Sges(_))) {
                return Err(PostError::Invalid(
                    "an atomic needs exactly 8 bytes of local buffer",
                ));
            }
        }
        if wqe.op.is_read_or_atomic() && matches!(wqe.data, crate::wqe::Gather::Inline { .. }) {
            return Err(PostError::Invalid(
                "READ and atomics cannot use inline data",
            ));
        }
        if wqe.op.is_read_or_atomic() && self.attr.max_rd_atomic == 0 {
            return Err(PostError::Invalid(
                "max_rd_atomic is 0: READ and atomics cannot be sent",
            ));
        }
        Ok(())
    }

    /// The next completion, if any.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    /// The oldest PSN the requester has sent and not seen acknowledged (for diagnostics and
    /// tests: after a retry exhaustion it is the PSN that never got through).
    pub fn oldest_unacked_psn(&self) -> xroce_wire::Psn {
        self.sq.unacked_psn()
    }

    /// RC request packets sent and not acknowledged yet (PSNs: a READ counts its
    /// responses), while the QP can still be acknowledged; 0 for UC and UD.
    #[inline]
    pub fn unacked_packets(&self) -> u32 {
        if self.config.qp_type != QpType::Rc || !matches!(self.state, QpState::Rts | QpState::Sqd) {
            return 0;
        }
        self.sq.unacked_packets()
    }

    /// What the requester has measured of its path: round trips, delivery rate, and the
    /// window and retransmission timeout it derived (RC).
    pub fn path_estimate(&self) -> crate::recovery::PathEstimate {
        self.sq.recovery.estimate()
    }

    /// Work requests posted to the send queue and not completed yet.
    pub fn send_queue_len(&self) -> usize {
        self.sq.len()
    }

    /// Receive work requests posted and not consumed yet.
    pub fn recv_queue_len(&self) -> usize {
        self.rq.len()
    }

    /// The application destroyed this QP: how long it should linger to answer its peer's
    /// retries of what it already received (`None`: it goes at once). Only an RC QP that is
    /// connected and has received requests lingers: the acknowledgement of the peer's last
    /// message may have been lost on the way, or not sent yet, and without an answer the
    /// peer's send would end in retry exceeded although it arrived. It lingers for the
    /// time its own timeout and retry count give a retrying peer (peers are set up alike),
    /// between [`LINGER_MIN`] and [`LINGER_MAX`]; with no timeout (wait forever), the most.
    pub(crate) fn linger(&self) -> Option<std::time::Duration> {
        let connected = matches!(
            self.state,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        );
        if self.config.qp_type != QpType::Rc || !connected || !self.resp.established {
            return None;
        }
        let retries = u32::from(self.attr.retry_cnt) + 1;
        let linger = crate::time::ack_timeout(self.attr.timeout)
            .map_or(LINGER_MAX, |t| t.saturating_mul(retries));
        Some(linger.clamp(LINGER_MIN, LINGER_MAX))
    }

    /// Keeps of a destroyed QP only what answers duplicates of the SENDs and WRITEs it
    /// executed: its responder's PSN, MSN and the responses not sent yet. Its work
    /// requests go without completions (as `ibv_destroy_qp` drops them), and the packets
    /// held ahead of a gap and the READ and atomic resources with them: a duplicate READ
    /// or atomic finds no resource and is dropped, so no memory is ever touched again.
    pub(crate) fn close(&mut self) {
        self.sq = SendQueue::with_capacity(0);
        self.rq = VecDeque::new();
        self.completions = VecDeque::new();
        self.resp.held.clear();
        self.resp.resources = Default::default();
    }

    /// Whether a destroyed QP, lingering, answers `pkt`: a duplicate of an RC SEND or WRITE
    /// it executed (its PSN before the one expected). Anything else is for a QP that is no
    /// more.
    pub(crate) fn answers_when_closed(&self, pkt: &Packet<'_>) -> bool {
        matches!(pkt.h.kind, Kind::Send | Kind::Write)
            && pkt.h.transport == QpType::Rc
            && pkt.h.psn.distance(self.resp.psn) < 0
    }

    /// The sizes of the queue pair's queues and its sequence numbers, for tests and fuzz
    /// targets that check nothing grows without bound and craft packets near the
    /// expected PSNs. Not a stable interface.
    #[doc(hidden)]
    pub fn diagnostics(&self) -> QpDiagnostics {
        QpDiagnostics {
            send_queue: self.sq.len(),
            recv_queue: self.rq.len(),
            responses: self.resp.responses.len(),
            response_capacity: self.resp.response_capacity(),
            resources: self.resp.resources.len(),
            held: self.resp.held.len(),
            completions: self.completions.len(),
            expected_psn: self.resp.psn,
            next_psn: self.sq.next_psn(),
            oldest_unacked_psn: self.sq.unacked_psn(),
        }
    }
}

/// What [`QueuePair::diagnostics`] reports. Not a stable interface.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpDiagnostics {
    /// Send work requests not completed.
    pub send_queue: usize,
    /// Receive work requests not consumed.
    pub recv_queue: usize,
    /// Responses (ACKs, NAKs, READ responses, atomic acknowledgements) waiting to be sent.
    pub responses: usize,
    /// How many responses may wait before new ones are dropped (NAKs that move the QP to
    /// the error state may go one beyond).
    pub response_capacity: usize,
    /// READ and atomic responder resources kept for duplicates.
    pub resources: usize,
    /// Request packets held ahead of a gap (selective repeat).
    pub held: usize,
    /// Completions not yet collected by the endpoint.
    pub completions: usize,
    /// The PSN the responder expects next.
    pub expected_psn: Psn,
    /// The PSN the requester sends next.
    pub next_psn: Psn,
    /// The oldest PSN the requester has sent and not seen acknowledged.
    pub oldest_unacked_psn: Psn,
}

/// The completion opcode of a send work request.
pub(crate) fn send_opcode(op: SendOp) -> WcOpcode {
    match op {
        SendOp::Send | SendOp::SendWithImm { .. } | SendOp::SendWithInv { .. } => WcOpcode::Send,
        SendOp::Write { .. } | SendOp::WriteWithImm { .. } => WcOpcode::RdmaWrite,
        SendOp::Read { .. } => WcOpcode::RdmaRead,
        SendOp::CompareSwap { .. } => WcOpcode::CompSwap,
        SendOp::FetchAdd { .. } => WcOpcode::FetchAdd,
    }
}

impl QueuePair {
    /// Handles one received packet addressed to this QP. `gids` is the port's GID table,
    /// which the QP's path names its local GID in: a packet must pass the checks of the
    /// [`receive`](crate::receive) module (service, state, addresses, keys) before a role
    /// sees it.
    pub fn handle_packet<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        gids: &[Gid],
        cx: &mut Cx<'_, M>,
    ) {
        if let Err(counter) = self.check_header(pkt, gids) {
            cx.count(counter);
            return;
        }
        if pkt.h.kind.is_response() {
            self.handle_response(pkt, cx);
        } else {
            self.handle_request(pkt, cx);
        }
    }

    /// Emits the next packet, responses before requests. Returns whether one was emitted.
    pub fn poll_transmit<M: MemoryTable + ?Sized, E: Emit>(
        &mut self,
        cx: &mut Cx<'_, M>,
        out: &mut E,
    ) -> bool {
        self.poll_response(cx, out) || self.poll_request(cx, out)
    }

    /// Whether the QP has something to transmit (it may still be held back by its window).
    pub fn wants_transmit(&self) -> bool {
        !self.resp.responses.is_empty() || self.wants_to_send()
    }

    /// When [`QueuePair::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.sq.poll_timeout()
    }

    /// Runs the timers that have expired at `cx.now`.
    pub fn handle_timeout<M: MemoryTable + ?Sized>(&mut self, cx: &mut Cx<'_, M>) {
        if self.sq.retransmit_deadline().is_some_and(|t| t <= cx.now) {
            self.on_retransmit_timeout(cx);
        }
        if self.sq.scoreboard.next_due().is_some_and(|t| t <= cx.now) {
            self.on_holes_due(cx);
        }
        self.sq.end_rnr_wait(cx.now);
        self.sq.recovery.end_pace(cx.now);
    }
}
