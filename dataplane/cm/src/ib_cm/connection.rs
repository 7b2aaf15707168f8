//! One end of a connection as the CM keeps it (the Linux CM's `cm_id_private`): its state,
//! the two comm IDs, what was agreed in REQ and REP, where its MADs go, and the message it
//! is waiting for an answer to.

use std::net::IpAddr;
use std::time::Duration;

use xroce_transport::Instant;
use xroce_wire::mad::MAD_LEN;
use xroce_wire::{CommId, Gid, Guid, Pkey, Psn, Qpn, ServiceId, TransportServiceType};

use crate::address::MadAddress;

/// The states of a connection (IBTA 12.9.6, figure 156; the Linux CM's `ib_cm_state`).
///
/// Active side: `Idle → ReqSent (→ MraReqRcvd) → RepRcvd (→ MraRepSent) → Established`.
/// Passive side: `ReqRcvd (→ MraReqSent) → RepSent (→ MraRepRcvd) → Established`.
/// Either: `Established → DreqSent | DreqRcvd → TimeWait → Idle`. UD service ID
/// resolution: `SidrReqSent → Idle`, `SidrReqRcvd → Idle`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmState {
    /// No connection (new, rejected, timed out, or out of TimeWait).
    Idle,
    /// REQ sent, waiting for REP (or MRA, REJ).
    ReqSent,
    /// REQ received, the consumer has not answered.
    ReqRcvd,
    /// REQ received and acknowledged with an MRA (sent, or held back until a duplicate
    /// REQ comes: rdma_cm's delayed MRA).
    MraReqSent,
    /// REQ sent, the peer acknowledged it with an MRA.
    MraReqRcvd,
    /// REP sent, waiting for RTU.
    RepSent,
    /// REP received, the consumer has not sent the RTU.
    RepRcvd,
    /// REP received and acknowledged with an MRA (sent, or held back).
    MraRepSent,
    /// REP sent, the peer acknowledged it with an MRA.
    MraRepRcvd,
    /// Connected.
    Established,
    /// DREQ sent, waiting for DREP.
    DreqSent,
    /// DREQ received, the consumer has not answered.
    DreqRcvd,
    /// Disconnected; waiting out the packet lifetime before the QP may be reused.
    TimeWait,
    /// SIDR_REQ sent, waiting for SIDR_REP.
    SidrReqSent,
    /// SIDR_REQ received, the consumer has not answered.
    SidrReqRcvd,
}

/// A MAD waiting for its answer: sent again after `timeout` while retries are left (the
/// Linux MAD layer's `retries`/`timeout_ms` of a send buffer), always byte for byte.
#[derive(Clone, Debug)]
pub(crate) struct Outstanding {
    pub(crate) mad: [u8; MAD_LEN],
    pub(crate) to: MadAddress,
    pub(crate) timeout: Duration,
    pub(crate) retries_left: u8,
    pub(crate) deadline: Instant,
    /// The state the MAD was sent in; a timeout in another state is stale (the Linux CM
    /// keeps it in `msg->context[1]`).
    pub(crate) sent_in: CmState,
    /// When it was first sent.
    pub(crate) first_sent: Instant,
}

/// The path of the connection, for the QP's address vector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PathInfo {
    /// This end's GID.
    pub(crate) local_gid: Gid,
    /// The peer's GID.
    pub(crate) remote_gid: Gid,
    pub(crate) flow_label: u32,
    pub(crate) traffic_class: u8,
    pub(crate) hop_limit: u8,
}

/// One connection (or one service ID resolution) of the CM.
#[derive(Clone, Debug)]
pub(crate) struct Connection {
    pub(crate) state: CmState,
    pub(crate) local_id: CommId,
    /// The peer's comm ID; 0 until known.
    pub(crate) remote_id: CommId,
    pub(crate) service_id: ServiceId,
    /// The transaction ID answers of this connection carry.
    pub(crate) tid: u64,
    /// Where this connection's MADs go.
    pub(crate) av: MadAddress,
    /// The local ACK timeout of the path (IBA code); also the TimeWait period.
    pub(crate) av_timeout: u8,
    /// How long a MAD of ours waits for its answer.
    pub(crate) timeout: Duration,
    pub(crate) max_cm_retries: u8,
    pub(crate) local_qpn: Qpn,
    pub(crate) remote_qpn: Qpn,
    pub(crate) remote_ca_guid: Guid,
    pub(crate) transport: TransportServiceType,
    /// The PSN this end sends with.
    pub(crate) sq_psn: Psn,
    /// The PSN this end expects.
    pub(crate) rq_psn: Psn,
    pub(crate) path_mtu: u8,
    pub(crate) pkey: Pkey,
    /// READ/atomic requests this end accepts as responder.
    pub(crate) responder_resources: u8,
    /// READ/atomic requests this end issues as requester.
    pub(crate) initiator_depth: u8,
    pub(crate) retry_count: u8,
    pub(crate) rnr_retry_count: u8,
    /// The service timeout of our MRA (with the delay flag, as given).
    pub(crate) service_timeout: u8,
    pub(crate) target_ack_delay: u8,
    /// The private data of our last RTU, MRA or DREP, sent again with their duplicates.
    pub(crate) private_data: Vec<u8>,
    pub(crate) path: PathInfo,
    pub(crate) outstanding: Option<Outstanding>,
    pub(crate) timewait_until: Option<Instant>,
    /// Whether `(remote CA GUID, remote comm ID)` and `(remote CA GUID, remote QPN)` are in
    /// the CM's tables of live connections.
    pub(crate) in_remote_ids: bool,
    pub(crate) in_remote_qps: bool,
    /// `(request ID, requester address)` of a received SIDR_REQ, in the table that catches
    /// its duplicates.
    pub(crate) sidr_key: Option<(CommId, IpAddr)>,
}

impl Connection {
    /// A connection in `state`, with nothing agreed yet.
    pub(crate) fn new(local_id: CommId, state: CmState, av: MadAddress, tid: u64) -> Connection {
        Connection {
            state,
            local_id,
            remote_id: CommId(0),
            service_id: ServiceId(0),
            tid,
            av,
            av_timeout: 0,
            timeout: Duration::ZERO,
            max_cm_retries: 0,
            local_qpn: Qpn::new(0),
            remote_qpn: Qpn::new(0),
            remote_ca_guid: Guid(0),
            transport: TransportServiceType::RC,
            sq_psn: Psn::ZERO,
            rq_psn: Psn::ZERO,
            path_mtu: 0,
            pkey: Pkey::DEFAULT,
            responder_resources: 0,
            initiator_depth: 0,
            retry_count: 0,
            rnr_retry_count: 0,
            service_timeout: 0,
            target_ack_delay: 0,
            private_data: Vec::new(),
            path: PathInfo::default(),
            outstanding: None,
            timewait_until: None,
            in_remote_ids: false,
            in_remote_qps: false,
            sidr_key: None,
        }
    }
}
