//! Why the responder refuses a request, and what it does about it: the one place where a
//! refusal becomes a NAK with its syndrome, an RNR NAK or a silent drop, each counted, as
//! IBTA 9.9.3 (table 58) says for each service: RC answers, UC drops the message, UD drops
//! the packet.

use xroce_wire::{NakCode, RnrTimer, Syndrome};

use super::Response;
use crate::attributes::QpType;
use crate::completion::WcStatus;
use crate::context::{AsyncEvent, Cx};
use crate::counters::Counter;
use crate::memory::MemoryTable;
use crate::packet::Packet;
use crate::qp::QueuePair;

/// Why the responder refuses a request: the errors of IBTA 9.9.3 (table 58), named as rxe
/// names its responder's error states. What a refusal leads to depends on the queue pair's
/// service and is decided in one place ([`Refusal::answer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The PSN is ahead of the one expected: packets were lost (class B, rxe
    /// `ERR_PSN_OUT_OF_SEQ`).
    PsnOutOfSequence,
    /// UC: the PSN is behind the one expected: the network repeated the packet, and
    /// executing it again would deliver its message twice.
    Duplicate,
    /// UC: the packet continues a message that is broken (a packet of it was lost or
    /// refused): packets are dropped until the next FIRST or ONLY (class D1, rxe's
    /// `drop_msg`).
    MessageBroken,
    /// RC: the opcode does not start or continue a message as the one in progress needs
    /// (class C, rxe `ERR_MISSING_OPCODE_FIRST` and `ERR_MISSING_OPCODE_LAST_C`).
    OpcodeSequence,
    /// The operation is not valid on this queue pair: not of its service, or not granted
    /// by its access flags (rxe `ERR_UNSUPPORTED_OPCODE`); for UD, anything but a SEND
    /// ONLY.
    OperationNotAllowed,
    /// A READ or atomic on a queue pair that accepts none, `max_dest_rd_atomic` 0 (rxe
    /// `ERR_TOO_MANY_RDMA_ATM_REQ`).
    TooManyReadAtomic,
    /// No room to queue the response of a READ or atomic: the request is dropped
    /// unexecuted rather than executed with its answer lost (the requester retries it).
    ResponseQueueFull,
    /// No receive work request for a SEND or a WRITE with immediate (rxe `ERR_RNR`).
    ReceiverNotReady,
    /// The payload does not fit the packet's position in its message and the path MTU, or
    /// the RETH length is over 2^31 (IBTA 9.7.5.1.3, C9-36..C9-38; rxe `ERR_LENGTH`).
    Length,
    /// The packets of a WRITE do not add up to its RETH length (rxe `ERR_LENGTH`, found
    /// with the rkey).
    WriteLength,
    /// A header the operation needs is missing (a RETH, an AtomicETH, a UD packet's DETH),
    /// or a packet continues a WRITE or SEND that has no state.
    Malformed,
    /// An atomic address that is not 8-byte aligned (IBTA 9.4.5, rxe
    /// `ERR_MISALIGNED_ATOMIC`).
    MisalignedAtomic,
    /// The rkey, the protection domain, the rights or the bounds refuse the access (class
    /// C/E, rxe `ERR_RKEY_VIOLATION`).
    RkeyViolation,
    /// The message is longer than the receive buffer (rxe `ERR_LENGTH`).
    ReceiveTooSmall,
    /// The receive buffer's lkey refused the data: the local receive work request is bad
    /// (class A, rxe `ERR_MALFORMED_WQE`).
    ReceiveBufferProtection,
    /// The rkey named by a SEND with invalidate cannot be invalidated (rxe
    /// `ERR_INVALIDATE_RKEY`).
    InvalidateRkey,
}

/// What the responder does about a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// RC: a PSN sequence error NAK carrying the PSN expected, once per gap; the rest of
    /// the gap is dropped (IBTA 9.7.5.1.2).
    SequenceNak,
    /// RC: an RNR NAK with the queue pair's timer; the requester resends later (IBTA
    /// 9.7.5.2.8).
    RnrNak,
    /// RC: a NAK with this code, counted in `counter`; the receive in progress completes
    /// with `status`, the queue pair enters ERR and, without a receive in progress, the
    /// application learns it from an event (`access`: a QP access error, otherwise a QP
    /// request error).
    Nak {
        code: NakCode,
        counter: Counter,
        status: WcStatus,
        access: bool,
    },
    /// A silent drop, counted in `counter`, and what becomes of the message in progress.
    Drop(Counter, MessageFate),
}

/// What a UC drop does to the message in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MessageFate {
    /// Nothing.
    Kept,
    /// It is broken: its remaining packets are dropped until the next FIRST or ONLY.
    Broken,
    /// It is broken and abandoned now: its receive work request is reused for the next
    /// message (IBTA 9.9.3 class D1: "the receive WQE is reused").
    Abandoned,
}

impl Refusal {
    /// What a queue pair of `qp_type` does about this refusal (IBTA 9.9.3: RC answers, UC
    /// drops the message, UD drops the packet), and which counter it lands in.
    fn answer(self, qp_type: QpType) -> Answer {
        use MessageFate::{Abandoned, Broken, Kept};
        use Refusal::*;
        let nak = |code, counter, status, access| Answer::Nak {
            code,
            counter,
            status,
            access,
        };
        match (qp_type, self) {
            (_, ResponseQueueFull) => Answer::Drop(Counter::response_queue_full, Kept),
            (QpType::Rc, PsnOutOfSequence) => Answer::SequenceNak,
            (QpType::Rc, ReceiverNotReady) => Answer::RnrNak,
            (QpType::Rc, RkeyViolation) => nak(
                NakCode::RemoteAccessError,
                Counter::sent_nak_remote_access,
                WcStatus::RemAccessErr,
                true,
            ),
            (QpType::Rc, ReceiveBufferProtection) => nak(
                NakCode::RemoteOperationalError,
                Counter::sent_nak_remote_op,
                WcStatus::LocProtErr,
                false,
            ),
            (QpType::Rc, ReceiveTooSmall) => nak(
                NakCode::InvalidRequest,
                Counter::sent_nak_invalid_request,
                WcStatus::LocLenErr,
                false,
            ),
            (QpType::Rc, _) => nak(
                NakCode::InvalidRequest,
                Counter::sent_nak_invalid_request,
                WcStatus::RemInvReqErr,
                false,
            ),
            (QpType::Uc, Duplicate) => Answer::Drop(Counter::duplicate_request, Kept),
            (QpType::Uc, MessageBroken | PsnOutOfSequence) => {
                Answer::Drop(Counter::uc_dropped, Broken)
            }
            (QpType::Uc, OperationNotAllowed) => Answer::Drop(Counter::rcvd_rkey_violation, Broken),
            (QpType::Uc, ReceiverNotReady) => Answer::Drop(Counter::rcvd_no_recv_wqe, Broken),
            (QpType::Uc, Length | ReceiveTooSmall) => {
                Answer::Drop(Counter::rcvd_length_err, Abandoned)
            }
            (QpType::Uc, _) => Answer::Drop(Counter::rcvd_rkey_violation, Abandoned),
            (QpType::Ud, OperationNotAllowed) => Answer::Drop(Counter::rcvd_wrong_transport, Kept),
            (QpType::Ud, ReceiverNotReady) => Answer::Drop(Counter::rcvd_no_recv_wqe, Kept),
            (QpType::Ud, ReceiveTooSmall | Length) => Answer::Drop(Counter::rcvd_length_err, Kept),
            (QpType::Ud, _) => Answer::Drop(Counter::rcvd_malformed, Kept),
        }
    }
}

impl QueuePair {
    /// The one place a refusal becomes a NAK, an RNR NAK or a silent drop, each counted.
    pub(super) fn refuse<M: MemoryTable + ?Sized>(
        &mut self,
        pkt: &Packet<'_>,
        refusal: Refusal,
        cx: &mut Cx<'_, M>,
    ) {
        let msn = self.resp.msn;
        match refusal.answer(self.config.qp_type) {
            Answer::SequenceNak => {
                if self.selective {
                    return self.hold_request(pkt, cx);
                }
                if self.resp.sent_psn_nak {
                    return cx.count(Counter::out_of_seq_dropped);
                }
                let nak = Response::Ack {
                    psn: self.resp.psn,
                    syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
                    msn,
                };
                // A NAK that finds the queue full is not sent: the gap stays un-NAKed and
                // the next packet of it tries again.
                if self.queue_response(nak, cx) {
                    self.resp.sent_psn_nak = true;
                    cx.count(Counter::out_of_seq_request);
                }
            }
            Answer::RnrNak => {
                let nak = Response::Ack {
                    psn: pkt.h.psn,
                    syndrome: Syndrome::RnrNak {
                        timer: RnrTimer::new(self.attr.min_rnr_timer),
                    },
                    msn,
                };
                if self.queue_response(nak, cx) {
                    cx.count(Counter::send_rnr_err);
                }
            }
            Answer::Nak {
                code,
                counter,
                status,
                access,
            } => {
                cx.count(counter);
                let nak = Response::Ack {
                    psn: pkt.h.psn,
                    syndrome: Syndrome::Nak(code),
                    msn,
                };
                // A NAK never waits behind a full queue.
                self.resp.responses.push_back(nak);
                let qpn = self.config.qpn;
                let event = if access {
                    AsyncEvent::QpAccessError(qpn)
                } else {
                    AsyncEvent::QpRequestError(qpn)
                };
                self.enter_error(cx, Some(status), event);
            }
            Answer::Drop(counter, fate) => {
                match fate {
                    MessageFate::Kept => {}
                    MessageFate::Broken => self.resp.uc_drop = true,
                    MessageFate::Abandoned => {
                        self.abandon_message(cx);
                        self.resp.uc_drop = true;
                    }
                }
                cx.count(counter);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every refusal has an answer for every service, and the answers are the ones IBTA
    /// 9.9.3 gives: RC NAKs (or drops a full queue's request), UC and UD drop.
    #[test]
    fn rc_answers_uc_and_ud_drop() {
        use Refusal::*;
        let all = [
            PsnOutOfSequence,
            Duplicate,
            MessageBroken,
            OpcodeSequence,
            OperationNotAllowed,
            TooManyReadAtomic,
            ResponseQueueFull,
            ReceiverNotReady,
            Length,
            WriteLength,
            Malformed,
            MisalignedAtomic,
            RkeyViolation,
            ReceiveTooSmall,
            ReceiveBufferProtection,
            InvalidateRkey,
        ];
        for refusal in all {
            let rc = refusal.answer(QpType::Rc);
            assert_eq!(
                matches!(rc, Answer::Drop(..)),
                refusal == ResponseQueueFull,
                "{refusal:?}"
            );
            for qp_type in [QpType::Uc, QpType::Ud] {
                assert!(
                    matches!(refusal.answer(qp_type), Answer::Drop(..)),
                    "{qp_type:?} {refusal:?}"
                );
            }
            if let Answer::Drop(_, fate) = refusal.answer(QpType::Ud) {
                assert_eq!(fate, MessageFate::Kept, "UD has no messages to break");
            }
        }
        let nak = |r: Refusal| match r.answer(QpType::Rc) {
            Answer::Nak { code, status, .. } => Some((code, status)),
            _ => None,
        };
        assert_eq!(
            nak(RkeyViolation),
            Some((NakCode::RemoteAccessError, WcStatus::RemAccessErr))
        );
        assert_eq!(
            nak(ReceiveBufferProtection),
            Some((NakCode::RemoteOperationalError, WcStatus::LocProtErr))
        );
        assert_eq!(
            nak(ReceiveTooSmall),
            Some((NakCode::InvalidRequest, WcStatus::LocLenErr))
        );
        assert_eq!(
            nak(OpcodeSequence),
            Some((NakCode::InvalidRequest, WcStatus::RemInvReqErr))
        );
        assert_eq!(PsnOutOfSequence.answer(QpType::Rc), Answer::SequenceNak);
        assert_eq!(ReceiverNotReady.answer(QpType::Rc), Answer::RnrNak);
    }
}
