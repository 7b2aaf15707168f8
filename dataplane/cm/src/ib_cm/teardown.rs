//! Ending connections: REJ (IBTA 12.6.7), DREQ and DREP (12.6.10, 12.6.11), TimeWait
//! (12.9.8.3) and the consumer destroying a connection in any state (the Linux CM's
//! `cm_destroy_id`).

use xroce_transport::Instant;
use xroce_wire::cm::{
    ARI_LEN, DREP_PRIVATE_DATA_LEN, DREQ_PRIVATE_DATA_LEN, DrepRepr, DreqRepr,
    REJ_PRIVATE_DATA_LEN, RejRepr,
};
use xroce_wire::{CmMessage, CommId, Guid, MsgResponse, RejectReason, SidrStatus};

use super::IbCm;
use super::connection::CmState;
use super::handshake::comm_words;
use super::params::{CmError, CmEventKind, SidrRepParams, check_len};
use crate::address::MadAddress;
use crate::counters::Counter;

impl IbCm {
    /// Refuses a received message that has no connection (`cm_issue_rej`): the answer goes
    /// back where the message came from, with its TID, and the comm IDs of its first two
    /// words swapped.
    pub(super) fn issue_rej(
        &mut self,
        from: MadAddress,
        tid: u64,
        raw: &[u8],
        reason: RejectReason,
        msg: MsgResponse,
    ) {
        let (local, remote) = comm_words(raw);
        let rej = RejRepr {
            local_comm_id: remote,
            remote_comm_id: local,
            message_rejected: msg,
            reason,
            ari: &[],
            private_data: &[],
        };
        self.counters.inc(Counter::sent_rej);
        self.queue(from, IbCm::mad(tid, CmMessage::Rej(rej)));
    }

    /// Rejects a connection (`ib_send_cm_rej`): refused REQ or REP, or a connection attempt
    /// abandoned. The REJ is not retransmitted. A connection whose REP is out waits out
    /// TimeWait; one earlier in the handshake goes back to idle.
    pub fn send_rej(
        &mut self,
        now: Instant,
        id: CommId,
        reason: RejectReason,
        ari: &[u8],
        private_data: &[u8],
    ) -> Result<(), CmError> {
        check_len("REJ additional rejection information", ari, ARI_LEN)?;
        check_len("REJ private data", private_data, REJ_PRIVATE_DATA_LEN)?;
        let c = self.conn(id)?;
        let state = c.state;
        // `cm_format_rej`: which message is refused, and whether our comm ID is known to
        // the peer yet, depend on the state.
        let (local, msg) = match state {
            CmState::ReqRcvd => (CommId(0), MsgResponse::REQ),
            CmState::MraReqSent => (c.local_id, MsgResponse::REQ),
            CmState::RepRcvd | CmState::MraRepSent => (c.local_id, MsgResponse::REP),
            _ => (c.local_id, MsgResponse::OTHER),
        };
        let rej = RejRepr {
            local_comm_id: local,
            remote_comm_id: c.remote_id,
            message_rejected: msg,
            reason,
            ari,
            private_data,
        };
        let (tid, av) = (c.tid, c.av);
        match state {
            CmState::ReqSent
            | CmState::MraReqRcvd
            | CmState::ReqRcvd
            | CmState::MraReqSent
            | CmState::RepRcvd
            | CmState::MraRepSent => self.reset_to_idle(id),
            CmState::RepSent | CmState::MraRepRcvd => self.enter_timewait(now, id),
            state => return Err(CmError::InvalidState { op: "REJ", state }),
        }
        self.counters.inc(Counter::sent_rej);
        self.queue(av, IbCm::mad(tid, CmMessage::Rej(rej)));
        Ok(())
    }

    /// A REJ (`cm_rej_handler`, `cm_acquire_rejected_id`).
    pub(super) fn handle_rej(&mut self, now: Instant, rej: &RejRepr<'_>, raw: &[u8]) -> Counter {
        let found = if rej.reason == RejectReason::TIMEOUT {
            // The peer gave up on its REQ: it names itself by CA GUID (the ARI) and its
            // comm ID, as it has not heard ours.
            let mut g = [0u8; 8];
            g.copy_from_slice(&raw[24 + 12..24 + 20]);
            self.remote_ids
                .get(&(Guid(u64::from_be_bytes(g)), rej.local_comm_id))
                .copied()
                .and_then(|id| self.find(id, rej.local_comm_id))
        } else if rej.message_rejected == MsgResponse::REQ {
            self.find(rej.remote_comm_id, CommId(0))
        } else {
            self.find(rej.remote_comm_id, rej.local_comm_id)
        };
        let Some(id) = found else {
            return Counter::rcvd_unmatched;
        };
        let Some(state) = self.state(id) else {
            return Counter::rcvd_unmatched;
        };
        if state == CmState::ReqSent
            && rej.reason == RejectReason::INVALID_SERVICE_ID
            && rej.message_rejected == MsgResponse::REQ
            && self.retry_for_listener(now, id)
        {
            return Counter::rej_no_listener_yet;
        }
        match state {
            CmState::ReqSent
            | CmState::MraReqRcvd
            | CmState::RepSent
            | CmState::MraRepRcvd
            | CmState::ReqRcvd
            | CmState::MraReqSent => {
                if rej.reason == RejectReason::STALE_CONN {
                    self.enter_timewait(now, id);
                } else {
                    self.reset_to_idle(id);
                }
            }
            CmState::DreqSent | CmState::RepRcvd | CmState::MraRepSent | CmState::Established => {
                self.enter_timewait(now, id)
            }
            _ => return Counter::rcvd_wrong_state,
        }
        self.counters.inc(Counter::rcvd_rej);
        let kind = CmEventKind::RejReceived {
            reason: rej.reason,
            ari: rej.ari.to_vec(),
            private_data: rej.private_data.to_vec(),
        };
        self.event(id, kind);
        Counter::rcvd_delivered
    }

    /// Starts disconnecting an established connection (`ib_send_cm_dreq`). The DREQ is
    /// sent again every CM response timeout, max CM retries times, until the DREP; then
    /// the connection is taken as disconnected anyway.
    pub fn send_dreq(
        &mut self,
        now: Instant,
        id: CommId,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        check_len("DREQ private data", private_data, DREQ_PRIVATE_DATA_LEN)?;
        let c = self.conn(id)?;
        if c.state != CmState::Established {
            return Err(CmError::InvalidState {
                op: "DREQ",
                state: c.state,
            });
        }
        // A DREQ starts an exchange: it carries this end's own TID.
        let tid = self.form_tid(id);
        let dreq = DreqRepr {
            local_comm_id: c.local_id,
            remote_comm_id: c.remote_id,
            remote_qpn: c.remote_qpn,
            private_data,
        };
        let (retries, timeout) = (c.max_cm_retries, c.timeout);
        let mad = IbCm::mad(tid, CmMessage::Dreq(dreq));
        self.set_state(id, CmState::DreqSent);
        self.send_outstanding(now, id, mad, retries, timeout);
        Ok(())
    }

    /// The DREQ the Linux CM sends to an old connection whose peer came back with a new
    /// REQ or REP from the same QP; nothing if it is not established.
    pub(super) fn send_dreq_if_established(&mut self, now: Instant, id: CommId) {
        if self.state(id) == Some(CmState::Established) {
            // NOTE: cannot fail: the connection exists, is established and has no private
            // data to check.
            let _ = self.send_dreq(now, id, &[]);
        }
    }

    /// A DREQ (`cm_dreq_handler`). One for no connection of ours is answered with a DREP
    /// all the same (`cm_issue_drep`): the peer must not wait for an answer that will
    /// never come.
    pub(super) fn handle_dreq(
        &mut self,
        from: MadAddress,
        tid: u64,
        dreq: &DreqRepr<'_>,
    ) -> Counter {
        let Some(id) = self.find(dreq.remote_comm_id, dreq.local_comm_id) else {
            let drep = DrepRepr {
                local_comm_id: dreq.remote_comm_id,
                remote_comm_id: dreq.local_comm_id,
                private_data: &[],
            };
            self.queue(from, IbCm::mad(tid, CmMessage::Drep(drep)));
            return Counter::rcvd_unmatched;
        };
        let Some(c) = self.conns.get_mut(&id) else {
            return Counter::rcvd_unmatched;
        };
        if c.local_qpn != dreq.remote_qpn {
            return Counter::rcvd_dreq_wrong_qpn;
        }
        match c.state {
            CmState::RepSent | CmState::DreqSent => c.outstanding = None,
            CmState::Established | CmState::MraRepRcvd => {}
            CmState::TimeWait => {
                // Our DREP was lost: send it again.
                let drep = DrepRepr {
                    local_comm_id: c.local_id,
                    remote_comm_id: c.remote_id,
                    private_data: &c.private_data,
                };
                let mad = IbCm::mad(c.tid, CmMessage::Drep(drep));
                self.queue(from, mad);
                return Counter::rcvd_duplicate;
            }
            CmState::DreqRcvd => return Counter::rcvd_duplicate,
            _ => return Counter::rcvd_wrong_state,
        }
        c.state = CmState::DreqRcvd;
        c.tid = tid;
        let private_data = dreq.private_data.to_vec();
        self.event(id, CmEventKind::DreqReceived { private_data });
        Counter::rcvd_delivered
    }

    /// Answers the peer's DREQ (`ib_send_cm_drep`): TimeWait.
    pub fn send_drep(
        &mut self,
        now: Instant,
        id: CommId,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        check_len("DREP private data", private_data, DREP_PRIVATE_DATA_LEN)?;
        let c = self.conn_mut(id)?;
        if c.state != CmState::DreqRcvd {
            return Err(CmError::InvalidState {
                op: "DREP",
                state: c.state,
            });
        }
        c.private_data = private_data.to_vec();
        let drep = DrepRepr {
            local_comm_id: c.local_id,
            remote_comm_id: c.remote_id,
            private_data,
        };
        let (tid, av) = (c.tid, c.av);
        let mad = IbCm::mad(tid, CmMessage::Drep(drep));
        self.enter_timewait(now, id);
        self.queue(av, mad);
        Ok(())
    }

    /// A DREP (`cm_drep_handler`).
    pub(super) fn handle_drep(&mut self, now: Instant, drep: &DrepRepr<'_>) -> Counter {
        let Some(id) = self.find(drep.remote_comm_id, drep.local_comm_id) else {
            return Counter::rcvd_unmatched;
        };
        if !matches!(self.state(id), Some(CmState::DreqSent | CmState::DreqRcvd)) {
            return Counter::rcvd_wrong_state;
        }
        self.enter_timewait(now, id);
        let private_data = drep.private_data.to_vec();
        self.event(id, CmEventKind::DrepReceived { private_data });
        Counter::rcvd_delivered
    }

    /// Destroys a connection in whatever state it is (`cm_destroy_id`), telling the peer
    /// what Linux tells it: a REQ still unanswered is withdrawn with REJ 4 ("timeout",
    /// our CA GUID as ARI); a request or reply not yet settled is refused with REJ 28; an
    /// established connection gets one DREQ (not retried); a DREQ received gets its DREP;
    /// an unanswered SIDR_REQ gets SIDR_REP status 2. The connection's comm ID and pending
    /// events are gone afterwards.
    pub fn destroy(&mut self, now: Instant, id: CommId) {
        self.destroy_answering(now, id);
    }

    /// Forgets a connection whose REQ was received, without answering it (the kernel's
    /// `cm_destroy_id` with `-ENOMEM` in REQ_RCVD: "do not reject to allow future
    /// retries"): a retransmission of the REQ is then a new request. A connection in
    /// another state is destroyed as [`IbCm::destroy`] does.
    pub fn forget_request(&mut self, now: Instant, id: CommId) {
        if self.state(id) == Some(CmState::ReqRcvd) {
            self.cancel(id);
            self.remove_remote(id);
            self.conns.remove(&id);
            self.events.retain(|e| e.id != id);
        } else {
            self.destroy_answering(now, id);
        }
    }

    /// [`IbCm::destroy`]'s work.
    fn destroy_answering(&mut self, now: Instant, id: CommId) {
        let Some(state) = self.state(id) else {
            return;
        };
        // NOTE: the sends below cannot fail: the connection exists, each is called in a
        // state it accepts, and none carries private data or an oversized ARI.
        match state {
            CmState::SidrReqSent => self.cancel(id),
            CmState::SidrReqRcvd => {
                let reject = SidrRepParams {
                    status: SidrStatus::REJECT,
                    qp_num: xroce_wire::Qpn::new(0),
                    qkey: xroce_wire::Qkey(0),
                    info: &[],
                    private_data: &[],
                };
                let _ = self.send_sidr_rep(now, id, &reject);
            }
            CmState::ReqSent | CmState::MraReqRcvd => {
                self.cancel(id);
                let guid = self.config.ca_guid.0.to_be_bytes();
                let _ = self.send_rej(now, id, RejectReason::TIMEOUT, &guid, &[]);
            }
            CmState::ReqRcvd
            | CmState::MraReqSent
            | CmState::RepRcvd
            | CmState::MraRepSent
            | CmState::RepSent
            | CmState::MraRepRcvd => {
                self.cancel(id);
                let _ = self.send_rej(now, id, RejectReason::CONSUMER_DEFINED, &[], &[]);
            }
            CmState::Established => {
                let _ = self.send_dreq(now, id, &[]);
                self.enter_timewait(now, id);
            }
            CmState::DreqSent => self.enter_timewait(now, id),
            CmState::DreqRcvd => {
                let _ = self.send_drep(now, id, &[]);
            }
            CmState::Idle | CmState::TimeWait => {}
        }
        self.remove_remote(id);
        if let Some(c) = self.conns.remove(&id)
            && let Some(key) = c.sidr_key
        {
            self.remote_sidr.remove(&key);
        }
        self.events.retain(|e| e.id != id);
    }
}
