//! Service ID resolution (IBTA 12.11): a UD client asks which QP and Q_Key serve a
//! service ID; no connection state is kept beyond the request.

use std::net::IpAddr;

use xroce_transport::Instant;
use xroce_wire::cm::{
    SIDR_REP_INFO_LEN, SIDR_REP_PRIVATE_DATA_LEN, SIDR_REQ_PRIVATE_DATA_LEN, SidrRepRepr,
    SidrReqRepr,
};
use xroce_wire::{CmMessage, CommId, Guid, Qkey, Qpn, SidrStatus};

use super::connection::{CmState, Connection};
use super::params::{
    CmError, CmEventKind, SidrRepParams, SidrRepReceived, SidrReqParams, SidrReqReceived, check_len,
};
use super::{ANSWERED_SIDR_LIFETIME, ANSWERED_SIDRS, AnsweredSidr, IbCm};
use crate::address::MadAddress;
use crate::counters::Counter;

impl IbCm {
    /// Sends a SIDR_REQ (`ib_send_cm_sidr_req`) and returns its request ID; it is sent
    /// again every `timeout`, `max_cm_retries` times, until the SIDR_REP.
    pub fn send_sidr_req(
        &mut self,
        now: Instant,
        p: &SidrReqParams<'_>,
    ) -> Result<CommId, CmError> {
        check_len(
            "SIDR_REQ private data",
            p.private_data,
            SIDR_REQ_PRIVATE_DATA_LEN,
        )?;
        let id = self.alloc_id();
        let tid = self.form_tid(id);
        let mut c = Connection::new(id, CmState::SidrReqSent, p.to, tid);
        c.service_id = p.service_id;
        c.timeout = p.timeout;
        c.max_cm_retries = p.max_cm_retries;
        c.pkey = p.pkey;
        self.conns.insert(id, c);
        let req = SidrReqRepr {
            request_id: id,
            partition_key: p.pkey,
            service_id: p.service_id,
            private_data: p.private_data,
        };
        let mad = IbCm::mad(tid, CmMessage::SidrReq(req));
        self.send_outstanding(now, id, mad, p.max_cm_retries, p.timeout);
        Ok(id)
    }

    /// A SIDR_REQ (`cm_sidr_req_handler`): a copy of one still pending is dropped, a copy
    /// of one answered lately gets the same answer again; one for a service ID nobody
    /// listens on is answered with status 1 (unsupported).
    pub(super) fn handle_sidr_req(
        &mut self,
        now: Instant,
        from: MadAddress,
        tid: u64,
        req: &SidrReqRepr<'_>,
        raw: &[u8],
    ) -> Counter {
        let key = (req.request_id, from.remote);
        if self.remote_sidr.contains_key(&key) {
            return Counter::rcvd_duplicate;
        }
        if self.answer_sidr_again(now, key, tid) {
            return Counter::rcvd_duplicate;
        }
        if !self.listeners.contains_key(&req.service_id) {
            let remote = (Guid(0), req.request_id);
            if let Some(held) = self.hold_for_listener(now, req.service_id, remote, from, raw) {
                return held;
            }
            self.sidr_unsupported(from, tid, req);
            return Counter::sidr_req_no_listener;
        }
        let id = self.alloc_id();
        let mut c = Connection::new(id, CmState::SidrReqRcvd, from, tid);
        c.remote_id = req.request_id;
        c.service_id = req.service_id;
        c.pkey = req.partition_key;
        c.sidr_key = Some(key);
        self.conns.insert(id, c);
        self.remote_sidr.insert(key, id);
        let event = SidrReqReceived {
            from,
            service_id: req.service_id,
            pkey: req.partition_key,
            private_data: req.private_data.to_vec(),
        };
        self.event(id, CmEventKind::SidrReqReceived(Box::new(event)));
        Counter::rcvd_delivered
    }

    /// Answers a SIDR_REQ for a service ID nobody listens on: status 1 (unsupported).
    pub(super) fn sidr_unsupported(&mut self, from: MadAddress, tid: u64, req: &SidrReqRepr<'_>) {
        let rep = SidrRepRepr {
            request_id: req.request_id,
            status: SidrStatus::UNSUPPORTED,
            vendor_id: 0,
            qpn: Qpn::new(0),
            service_id: req.service_id,
            qkey: Qkey(0),
            info: &[],
            private_data: &[],
        };
        self.queue(from, IbCm::mad(tid, CmMessage::SidrRep(rep)));
    }

    /// Answers a SIDR_REQ (`ib_send_cm_sidr_rep`); the resolution is over (idle), and a
    /// later copy of the request gets the same answer for [`ANSWERED_SIDR_LIFETIME`] (in
    /// Linux it counts as a new request).
    pub fn send_sidr_rep(
        &mut self,
        now: Instant,
        id: CommId,
        p: &SidrRepParams<'_>,
    ) -> Result<(), CmError> {
        check_len("SIDR_REP additional information", p.info, SIDR_REP_INFO_LEN)?;
        check_len(
            "SIDR_REP private data",
            p.private_data,
            SIDR_REP_PRIVATE_DATA_LEN,
        )?;
        let c = self.conn_mut(id)?;
        if c.state != CmState::SidrReqRcvd {
            return Err(CmError::InvalidState {
                op: "SIDR_REP",
                state: c.state,
            });
        }
        let rep = SidrRepRepr {
            request_id: c.remote_id,
            status: p.status,
            vendor_id: 0,
            qpn: p.qp_num,
            service_id: c.service_id,
            qkey: p.qkey,
            info: p.info,
            private_data: p.private_data,
        };
        c.state = CmState::Idle;
        let key = c.sidr_key.take();
        let (tid, av) = (c.tid, c.av);
        let mad = IbCm::mad(tid, CmMessage::SidrRep(rep));
        if let Some(key) = key {
            self.remote_sidr.remove(&key);
            if self.answered_sidr.len() == ANSWERED_SIDRS {
                self.answered_sidr.pop_front();
            }
            self.answered_sidr.push_back(AnsweredSidr {
                key,
                tid,
                at: now,
                to: av,
                mad,
            });
        }
        self.queue(av, mad);
        Ok(())
    }

    /// A copy of a SIDR_REQ answered lately (same request ID, requester and transaction
    /// ID: the requester did not get the answer, or the path duplicated the request): the
    /// same SIDR_REP is sent again. Linux's CM takes such a copy for a new request once it
    /// answered, so a listener hears of the same requester twice, and one that stopped
    /// listening meanwhile answers status 1 (no listener): a requester that lost the answer
    /// is told the service is gone.
    fn answer_sidr_again(&mut self, now: Instant, key: (CommId, IpAddr), tid: u64) -> bool {
        while self
            .answered_sidr
            .front()
            .is_some_and(|a| now.saturating_duration_since(a.at) > ANSWERED_SIDR_LIFETIME)
        {
            self.answered_sidr.pop_front();
        }
        let Some(a) = self
            .answered_sidr
            .iter()
            .find(|a| a.key == key && a.tid == tid)
        else {
            return false;
        };
        let (to, mad) = (a.to, a.mad);
        self.queue(to, mad);
        true
    }

    /// A SIDR_REP (`cm_sidr_rep_handler`).
    pub(super) fn handle_sidr_rep(&mut self, now: Instant, rep: &SidrRepRepr<'_>) -> Counter {
        let Some(id) = self.find(rep.request_id, CommId(0)) else {
            return Counter::rcvd_unmatched;
        };
        let Some(c) = self.conns.get_mut(&id) else {
            return Counter::rcvd_unmatched;
        };
        if c.state != CmState::SidrReqSent {
            return Counter::rcvd_wrong_state;
        }
        if rep.status == SidrStatus::UNSUPPORTED && self.retry_for_listener(now, id) {
            return Counter::sidr_rep_no_listener_yet;
        }
        let Some(c) = self.conns.get_mut(&id) else {
            return Counter::rcvd_unmatched;
        };
        c.state = CmState::Idle;
        c.outstanding = None;
        let event = SidrRepReceived {
            status: rep.status,
            qpn: rep.qpn,
            qkey: rep.qkey,
            info: rep.info.to_vec(),
            private_data: rep.private_data.to_vec(),
        };
        self.event(id, CmEventKind::SidrRepReceived(Box::new(event)));
        Counter::rcvd_delivered
    }
}
