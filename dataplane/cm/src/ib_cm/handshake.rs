//! The handshake: REQ, MRA, REP, RTU and "communication established" (IBTA 12.6.5 to
//! 12.6.9), on both sides, with the Linux CM's answers to duplicates and stale peers.

use xroce_transport::Instant;
use xroce_wire::cm::{
    CmPath, MRA_PRIVATE_DATA_LEN, MraRepr, REP_PRIVATE_DATA_LEN, REQ_PRIVATE_DATA_LEN,
    RTU_PRIVATE_DATA_LEN, RepRepr, ReqRepr, RtuRepr,
};
use xroce_wire::mad::MAD_LEN;
use xroce_wire::{
    CmMad, CmMessage, CommId, Gid, Guid, MsgResponse, Qkey, RejectReason, ServiceId,
    TransportServiceType,
};

use super::connection::{CmState, Connection, PathInfo};
use super::params::{
    CmError, CmEventKind, RepParams, RepReceived, ReqParams, ReqReceived, check_len,
};
use super::timers::{cm_ack_timeout, cm_convert_to_ms};
use super::{HeldReq, IbCm, MRA_FLAG_DELAY};
use crate::address::MadAddress;
use crate::counters::Counter;

/// The first two words of a received CM message, as `cm_issue_rej` reads them: whatever
/// the message, bytes 0..4 and 4..8 of its data are taken as "local" and "remote" comm ID.
pub(super) fn comm_words(raw: &[u8]) -> (CommId, CommId) {
    let w = |at: usize| {
        CommId(u32::from_be_bytes([
            raw[at],
            raw[at + 1],
            raw[at + 2],
            raw[at + 3],
        ]))
    };
    (w(24), w(28))
}

impl IbCm {
    /// Sends a REQ (`ib_send_cm_req`) and returns the new connection's comm ID. The REQ is
    /// sent again every 2 × life time + remote CM response timeout (6144 ms for rdma_cm),
    /// `max_cm_retries` times, until a REP, REJ or MRA comes.
    pub fn send_req(&mut self, now: Instant, p: &ReqParams<'_>) -> Result<CommId, CmError> {
        check_len("REQ private data", p.private_data, REQ_PRIVATE_DATA_LEN)?;
        if p.transport != TransportServiceType::RC && p.transport != TransportServiceType::UC {
            return Err(CmError::Transport(p.transport));
        }
        let id = self.alloc_id();
        let tid = self.form_tid(id);
        let life = p.path.packet_life_time;
        // The Linux CM's work-around until remote LIDs are known: permissive beyond one hop.
        let (lid, subnet_local) = if p.path.hop_limit <= 1 {
            (0, true)
        } else {
            (0xffff, false)
        };
        let req = ReqRepr {
            local_comm_id: id,
            vendor_id: 0,
            service_id: p.service_id,
            local_ca_guid: self.config.ca_guid,
            local_qkey: Qkey(0),
            local_qpn: p.qp_num,
            responder_resources: p.responder_resources,
            local_eecn: 0,
            initiator_depth: p.initiator_depth,
            remote_eecn: 0,
            remote_cm_response_timeout: p.remote_cm_response_timeout,
            transport_service_type: p.transport,
            end_to_end_flow_control: p.flow_control,
            starting_psn: p.starting_psn,
            local_cm_response_timeout: p.local_cm_response_timeout,
            retry_count: p.retry_count,
            partition_key: p.path.pkey,
            path_mtu: p.path.mtu.code(),
            rdc_exists: false,
            rnr_retry_count: p.rnr_retry_count,
            max_cm_retries: p.max_cm_retries,
            srq: p.srq,
            extended_transport_type: 0,
            primary_path: CmPath {
                local_lid: lid,
                remote_lid: lid,
                local_gid: p.path.sgid,
                remote_gid: p.path.dgid,
                flow_label: p.path.flow_label,
                packet_rate: p.path.rate,
                traffic_class: p.path.traffic_class,
                hop_limit: p.path.hop_limit,
                sl: p.path.sl,
                subnet_local,
                local_ack_timeout: cm_ack_timeout(self.config.ack_delay, life),
            },
            alternate_path: CmPath::default(),
            sap_supported: false,
            private_data: p.private_data,
        };
        let mut c = Connection::new(id, CmState::ReqSent, p.to, tid);
        c.service_id = p.service_id;
        c.timeout = cm_convert_to_ms(life) * 2 + cm_convert_to_ms(p.remote_cm_response_timeout);
        c.av_timeout = life.saturating_add(1);
        c.max_cm_retries = p.max_cm_retries;
        c.local_qpn = p.qp_num;
        c.rq_psn = p.starting_psn;
        c.responder_resources = p.responder_resources;
        c.initiator_depth = p.initiator_depth;
        c.retry_count = p.retry_count;
        c.rnr_retry_count = p.rnr_retry_count;
        c.path_mtu = p.path.mtu.code();
        c.pkey = p.path.pkey;
        c.transport = p.transport;
        c.path = PathInfo {
            local_gid: p.path.sgid,
            remote_gid: p.path.dgid,
            flow_label: p.path.flow_label,
            traffic_class: p.path.traffic_class,
            hop_limit: p.path.hop_limit,
        };
        let (retries, timeout) = (c.max_cm_retries, c.timeout);
        self.conns.insert(id, c);
        let mad = IbCm::mad(tid, CmMessage::Req(req));
        self.send_outstanding(now, id, mad, retries, timeout);
        Ok(id)
    }

    /// REQs held for a listener that are due: taken again if one came (the REQ then
    /// counts as delivered or refused as any REQ), else refused with REJ 8.
    /// A REQ or SIDR_REQ (`raw`, from `remote` at `from`) for `service_id`, which nobody
    /// listens on: held for a listener within the grace (`req_held_for_listener`), or
    /// recognised as a retransmission of one already held (`rcvd_duplicate`); `None`
    /// when there is no grace and the caller refuses it.
    pub(super) fn hold_for_listener(
        &mut self,
        now: Instant,
        service_id: ServiceId,
        remote: (Guid, CommId),
        from: MadAddress,
        raw: &[u8],
    ) -> Option<Counter> {
        if self
            .held
            .iter()
            .any(|h| h.remote == remote && h.from.remote == from.remote)
        {
            return Some(Counter::rcvd_duplicate);
        }
        if self.config.listen_grace.is_zero() {
            return None;
        }
        let mad = <[u8; MAD_LEN]>::try_from(raw).ok()?;
        self.held.push(HeldReq {
            until: now + self.config.listen_grace,
            arrived: now,
            service_id,
            remote,
            from,
            mad,
        });
        Some(Counter::req_held_for_listener)
    }

    pub(super) fn release_held(&mut self, now: Instant) {
        let (due, waiting): (Vec<HeldReq>, Vec<HeldReq>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| h.until <= now);
        self.held = waiting;
        for h in due {
            let Ok(mad) = CmMad::parse(&h.mad) else {
                continue;
            };
            let listening = self.listeners.contains_key(&h.service_id);
            let tid = mad.transaction_id;
            // The MAD's disposition was counted when it was held; what became of it
            // counts here.
            let taken = match &mad.message {
                CmMessage::Req(req) => {
                    let taken = listening
                        && self.handle_req(now, h.from, tid, req, &h.mad)
                            == Counter::rcvd_delivered;
                    if !listening {
                        self.issue_rej(
                            h.from,
                            tid,
                            &h.mad,
                            RejectReason::INVALID_SERVICE_ID,
                            MsgResponse::REQ,
                        );
                    }
                    taken
                }
                CmMessage::SidrReq(req) => {
                    if listening {
                        self.handle_sidr_req(now, h.from, tid, req, &h.mad)
                            == Counter::rcvd_delivered
                    } else {
                        self.sidr_unsupported(h.from, tid, req);
                        false
                    }
                }
                _ => continue,
            };
            self.counters.inc(if taken {
                Counter::held_req_taken
            } else {
                Counter::held_req_refused
            });
        }
    }

    /// A REQ (`cm_req_handler`, `cm_match_req`).
    pub(super) fn handle_req(
        &mut self,
        now: Instant,
        from: MadAddress,
        tid: u64,
        req: &ReqRepr<'_>,
        raw: &[u8],
    ) -> Counter {
        let guid = req.local_ca_guid;
        if let Some(&existing) = self.remote_ids.get(&(guid, req.local_comm_id)) {
            self.duplicate_req(existing, from);
            return Counter::rcvd_duplicate;
        }
        if let Some(&old) = self.remote_qps.get(&(guid, req.local_qpn)) {
            // The peer reuses a QP that is still connected here: it lost the connection
            // without telling us. Linux refuses with REJ 10 and disconnects the old one.
            self.issue_rej(from, tid, raw, RejectReason::STALE_CONN, MsgResponse::REQ);
            self.send_dreq_if_established(now, old);
            return Counter::req_stale;
        }
        if !self.listeners.contains_key(&req.service_id) {
            let remote = (guid, req.local_comm_id);
            if let Some(held) = self.hold_for_listener(now, req.service_id, remote, from, raw) {
                return held;
            }
            self.issue_rej(
                from,
                tid,
                raw,
                RejectReason::INVALID_SERVICE_ID,
                MsgResponse::REQ,
            );
            return Counter::req_no_listener;
        }
        let path = &req.primary_path;
        if !self.local_gids.contains(&path.remote_gid) {
            // `cm_init_av_by_path` finds no such GID: REJ 12 with our GID as ARI, sent from
            // the new connection in REQ_RCVD (local comm ID 0).
            let ours = Gid::from_ip(from.local).octets();
            let rej = xroce_wire::cm::RejRepr {
                local_comm_id: CommId(0),
                remote_comm_id: req.local_comm_id,
                message_rejected: MsgResponse::REQ,
                reason: RejectReason::INVALID_GID,
                ari: &ours,
                private_data: &[],
            };
            self.counters.inc(Counter::sent_rej);
            self.queue(from, IbCm::mad(tid, CmMessage::Rej(rej)));
            return Counter::req_invalid_gid;
        }
        let id = self.alloc_id();
        let mut c = Connection::new(id, CmState::ReqRcvd, from, tid);
        c.remote_id = req.local_comm_id;
        c.service_id = req.service_id;
        c.timeout = cm_convert_to_ms(req.local_cm_response_timeout);
        c.max_cm_retries = req.max_cm_retries;
        c.remote_qpn = req.local_qpn;
        c.remote_ca_guid = guid;
        c.initiator_depth = req.responder_resources;
        c.responder_resources = req.initiator_depth;
        c.path_mtu = req.path_mtu;
        c.pkey = req.partition_key;
        c.sq_psn = req.starting_psn;
        c.retry_count = req.retry_count;
        c.rnr_retry_count = req.rnr_retry_count;
        c.transport = req.transport_service_type;
        // `cm_format_paths_from_req` + `cm_init_av_by_path`: the life time is the REQ's
        // local ACK timeout minus one, and the path's timeout that plus one.
        let life = path.local_ack_timeout.saturating_sub(1);
        c.av_timeout = life + 1;
        c.av = MadAddress {
            local: path.remote_gid.to_ip(),
            remote: path.local_gid.to_ip(),
            remote_qpn: from.remote_qpn,
            pkey_index: from.pkey_index,
        };
        c.path = PathInfo {
            local_gid: path.remote_gid,
            remote_gid: path.local_gid,
            flow_label: path.flow_label,
            traffic_class: path.traffic_class,
            hop_limit: path.hop_limit,
        };
        c.in_remote_ids = true;
        c.in_remote_qps = true;
        self.remote_ids.insert((guid, req.local_comm_id), id);
        self.remote_qps.insert((guid, req.local_qpn), id);
        self.conns.insert(id, c);
        let event = ReqReceived {
            from,
            service_id: req.service_id,
            remote_ca_guid: guid,
            remote_qkey: req.local_qkey,
            remote_qpn: req.local_qpn,
            transport: req.transport_service_type,
            starting_psn: req.starting_psn,
            responder_resources: req.initiator_depth,
            initiator_depth: req.responder_resources,
            local_cm_response_timeout: req.remote_cm_response_timeout,
            remote_cm_response_timeout: req.local_cm_response_timeout,
            flow_control: req.end_to_end_flow_control,
            retry_count: req.retry_count,
            rnr_retry_count: req.rnr_retry_count,
            srq: req.srq,
            path_mtu: req.path_mtu,
            primary_path: req.primary_path,
            private_data: req.private_data.to_vec(),
        };
        self.event(id, CmEventKind::ReqReceived(Box::new(event)));
        Counter::rcvd_delivered
    }

    /// A copy of a REQ whose connection exists (`cm_dup_req_handler`): while the consumer
    /// has not answered, silence; once rdma_cm has (held back) its MRA, the MRA goes out
    /// now; otherwise the REP's own retransmissions answer it. (The Linux CM also answers
    /// REJ 10 in TimeWait, but a connection leaves the table of live ones when it enters
    /// TimeWait, so no duplicate can find it there.)
    fn duplicate_req(&mut self, id: CommId, from: MadAddress) {
        let Some(c) = self.conns.get(&id) else {
            return;
        };
        if c.state == CmState::MraReqSent {
            let mad = IbCm::mad(c.tid, CmMessage::Mra(mra_of(c, MsgResponse::REQ)));
            self.queue(from, mad);
        }
    }

    /// Acknowledges a REQ or REP the consumer will answer later (`ib_send_cm_mra`). With
    /// [`MRA_FLAG_DELAY`] in `service_timeout` the MRA is only sent if a duplicate
    /// arrives.
    pub fn send_mra(
        &mut self,
        _now: Instant,
        id: CommId,
        service_timeout: u8,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        check_len("MRA private data", private_data, MRA_PRIVATE_DATA_LEN)?;
        let c = self.conn_mut(id)?;
        let (next, msg) = match c.state {
            CmState::ReqRcvd => (CmState::MraReqSent, MsgResponse::REQ),
            CmState::RepRcvd => (CmState::MraRepSent, MsgResponse::REP),
            state => return Err(CmError::InvalidState { op: "MRA", state }),
        };
        c.state = next;
        c.service_timeout = service_timeout;
        c.private_data = private_data.to_vec();
        if service_timeout & MRA_FLAG_DELAY == 0 {
            let (tid, av) = (c.tid, c.av);
            let mad = IbCm::mad(tid, CmMessage::Mra(mra_of(c, msg)));
            self.queue(av, mad);
        }
        Ok(())
    }

    /// An MRA (`cm_mra_handler`): our REQ or REP gets the peer's service timeout plus the
    /// path's timeout before it is sent again.
    pub(super) fn handle_mra(&mut self, now: Instant, mra: &MraRepr<'_>) -> Counter {
        let found = match mra.message_mraed {
            MsgResponse::REQ => self.find(mra.remote_comm_id, CommId(0)),
            MsgResponse::REP | MsgResponse::OTHER => {
                self.find(mra.remote_comm_id, mra.local_comm_id)
            }
            _ => None,
        };
        let Some(id) = found else {
            return Counter::rcvd_unmatched;
        };
        let Some(c) = self.conns.get_mut(&id) else {
            return Counter::rcvd_unmatched;
        };
        let next = match (c.state, mra.message_mraed) {
            (CmState::ReqSent, MsgResponse::REQ) => CmState::MraReqRcvd,
            (CmState::RepSent, MsgResponse::REP) => CmState::MraRepRcvd,
            (CmState::MraReqRcvd | CmState::MraRepRcvd, _) => return Counter::rcvd_duplicate,
            _ => return Counter::rcvd_wrong_state,
        };
        let timeout = cm_convert_to_ms(mra.service_timeout) + cm_convert_to_ms(c.av_timeout);
        let Some(o) = c.outstanding.as_mut() else {
            return Counter::rcvd_wrong_state;
        };
        // `ib_modify_mad`: the new timeout runs from now and holds for the retries left.
        o.timeout = timeout;
        o.deadline = now + timeout;
        o.sent_in = next;
        let deadline = o.deadline;
        c.state = next;
        self.timers.push(deadline, id);
        self.event(
            id,
            CmEventKind::MraReceived {
                service_timeout: mra.service_timeout,
            },
        );
        Counter::rcvd_delivered
    }

    /// Accepts a REQ (`ib_send_cm_rep`). The REP is sent again every CM response timeout
    /// of the REQ (4096 ms for rdma_cm), the REQ's max CM retries times, until the RTU.
    pub fn send_rep(&mut self, now: Instant, id: CommId, p: &RepParams<'_>) -> Result<(), CmError> {
        check_len("REP private data", p.private_data, REP_PRIVATE_DATA_LEN)?;
        let ack_delay = self.config.ack_delay;
        let guid = self.config.ca_guid;
        let c = self.conn_mut(id)?;
        if !matches!(c.state, CmState::ReqRcvd | CmState::MraReqSent) {
            return Err(CmError::InvalidState {
                op: "REP",
                state: c.state,
            });
        }
        let rep = RepRepr {
            local_comm_id: c.local_id,
            remote_comm_id: c.remote_id,
            local_qkey: Qkey(0),
            local_qpn: p.qp_num,
            vendor_id: 0,
            local_eecn: 0,
            starting_psn: p.starting_psn,
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            target_ack_delay: ack_delay,
            failover_accepted: p.failover_accepted,
            end_to_end_flow_control: p.flow_control,
            rnr_retry_count: p.rnr_retry_count,
            srq: p.srq,
            local_ca_guid: guid,
            private_data: p.private_data,
        };
        c.state = CmState::RepSent;
        c.initiator_depth = p.initiator_depth;
        c.responder_resources = p.responder_resources;
        c.rq_psn = p.starting_psn;
        c.local_qpn = p.qp_num;
        let (tid, retries, timeout) = (c.tid, c.max_cm_retries, c.timeout);
        let mad = IbCm::mad(tid, CmMessage::Rep(rep));
        self.send_outstanding(now, id, mad, retries, timeout);
        Ok(())
    }

    /// A REP (`cm_rep_handler`, `cm_dup_rep_handler`).
    pub(super) fn handle_rep(
        &mut self,
        now: Instant,
        from: MadAddress,
        tid: u64,
        rep: &RepRepr<'_>,
        raw: &[u8],
    ) -> Counter {
        let Some(id) = self.find(rep.remote_comm_id, CommId(0)) else {
            return self.duplicate_rep(from, rep);
        };
        let Some(c) = self.conns.get(&id) else {
            return Counter::rcvd_unmatched;
        };
        if !matches!(c.state, CmState::ReqSent | CmState::MraReqRcvd) {
            return Counter::rcvd_wrong_state;
        }
        let guid = rep.local_ca_guid;
        if self.remote_ids.contains_key(&(guid, rep.local_comm_id)) {
            return Counter::rcvd_duplicate;
        }
        if let Some(&old) = self.remote_qps.get(&(guid, rep.local_qpn)) {
            self.issue_rej(from, tid, raw, RejectReason::STALE_CONN, MsgResponse::REP);
            self.send_dreq_if_established(now, old);
            return Counter::rep_stale;
        }
        self.remote_ids.insert((guid, rep.local_comm_id), id);
        self.remote_qps.insert((guid, rep.local_qpn), id);
        let Some(c) = self.conns.get_mut(&id) else {
            return Counter::rcvd_unmatched;
        };
        c.in_remote_ids = true;
        c.in_remote_qps = true;
        c.remote_ca_guid = guid;
        c.state = CmState::RepRcvd;
        c.remote_id = rep.local_comm_id;
        c.remote_qpn = rep.local_qpn;
        c.initiator_depth = rep.responder_resources;
        c.responder_resources = rep.initiator_depth;
        c.sq_psn = rep.starting_psn;
        c.rnr_retry_count = rep.rnr_retry_count;
        c.target_ack_delay = rep.target_ack_delay;
        c.av_timeout = cm_ack_timeout(rep.target_ack_delay, c.av_timeout.saturating_sub(1));
        c.outstanding = None;
        let event = RepReceived {
            remote_ca_guid: guid,
            remote_qkey: rep.local_qkey,
            remote_qpn: rep.local_qpn,
            starting_psn: rep.starting_psn,
            responder_resources: rep.initiator_depth,
            initiator_depth: rep.responder_resources,
            target_ack_delay: rep.target_ack_delay,
            failover_accepted: rep.failover_accepted,
            flow_control: rep.end_to_end_flow_control,
            rnr_retry_count: rep.rnr_retry_count,
            srq: rep.srq,
            private_data: rep.private_data.to_vec(),
        };
        self.event(id, CmEventKind::RepReceived(Box::new(event)));
        Counter::rcvd_delivered
    }

    /// A REP whose connection is past REQ_SENT (`cm_dup_rep_handler`): once established,
    /// our RTU was lost, so it goes again; with our MRA held back, the MRA goes.
    fn duplicate_rep(&mut self, from: MadAddress, rep: &RepRepr<'_>) -> Counter {
        let Some(id) = self.find(rep.remote_comm_id, rep.local_comm_id) else {
            return Counter::rcvd_unmatched;
        };
        let Some(c) = self.conns.get(&id) else {
            return Counter::rcvd_unmatched;
        };
        let message = match c.state {
            CmState::Established => CmMessage::Rtu(RtuRepr {
                local_comm_id: c.local_id,
                remote_comm_id: c.remote_id,
                private_data: &c.private_data,
            }),
            CmState::MraRepSent => CmMessage::Mra(mra_of(c, MsgResponse::REP)),
            _ => return Counter::rcvd_duplicate,
        };
        let mad = IbCm::mad(c.tid, message);
        self.queue(from, mad);
        Counter::rcvd_duplicate
    }

    /// Completes the handshake on the active side (`ib_send_cm_rtu`): established. The RTU
    /// is not retransmitted; a duplicate REP brings it again.
    pub fn send_rtu(
        &mut self,
        _now: Instant,
        id: CommId,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        check_len("RTU private data", private_data, RTU_PRIVATE_DATA_LEN)?;
        let c = self.conn_mut(id)?;
        if !matches!(c.state, CmState::RepRcvd | CmState::MraRepSent) {
            return Err(CmError::InvalidState {
                op: "RTU",
                state: c.state,
            });
        }
        c.state = CmState::Established;
        c.private_data = private_data.to_vec();
        let rtu = RtuRepr {
            local_comm_id: c.local_id,
            remote_comm_id: c.remote_id,
            private_data,
        };
        let (tid, av) = (c.tid, c.av);
        self.queue(av, IbCm::mad(tid, CmMessage::Rtu(rtu)));
        Ok(())
    }

    /// An RTU (`cm_rtu_handler`).
    pub(super) fn handle_rtu(&mut self, rtu: &RtuRepr<'_>) -> Counter {
        let Some(id) = self.find(rtu.remote_comm_id, rtu.local_comm_id) else {
            return Counter::rcvd_unmatched;
        };
        let Some(c) = self.conns.get_mut(&id) else {
            return Counter::rcvd_unmatched;
        };
        if !matches!(c.state, CmState::RepSent | CmState::MraRepRcvd) {
            return Counter::rcvd_duplicate;
        }
        c.state = CmState::Established;
        c.outstanding = None;
        let private_data = rtu.private_data.to_vec();
        self.event(id, CmEventKind::RtuReceived { private_data });
        Counter::rcvd_delivered
    }

    /// The transport saw the peer's first packet before the RTU ("communication
    /// established", `ib_cm_notify(IB_EVENT_COMM_EST)`): established, the REP stops, and a
    /// late RTU will count as a duplicate.
    pub fn establish(&mut self, _now: Instant, id: CommId) -> Result<(), CmError> {
        let c = self.conn_mut(id)?;
        match c.state {
            CmState::RepSent | CmState::MraRepRcvd => {
                c.state = CmState::Established;
                c.outstanding = None;
                self.event(id, CmEventKind::UserEstablished);
                Ok(())
            }
            CmState::Established => Err(CmError::AlreadyEstablished),
            state => Err(CmError::InvalidState {
                op: "communication established",
                state,
            }),
        }
    }
}

/// The MRA a connection sends (`cm_format_mra`).
fn mra_of(c: &Connection, msg: MsgResponse) -> MraRepr<'_> {
    MraRepr {
        local_comm_id: c.local_id,
        remote_comm_id: c.remote_id,
        message_mraed: msg,
        service_timeout: c.service_timeout,
        private_data: &c.private_data,
    }
}
