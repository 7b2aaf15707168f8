//! What the consumer of the CM hands in (the Linux CM's `ib_cm_*_param`), what it gets
//! back as events (`ib_cm_event`), and how calls fail.

use std::time::Duration;

use xroce_wire::cm::CmPath;
use xroce_wire::{
    CommId, Gid, Guid, IbMtu, Pkey, Psn, Qkey, Qpn, RejectReason, ServiceId, SidrStatus,
    TransportServiceType,
};

use super::connection::CmState;
use crate::address::MadAddress;

/// The path record a REQ is built from (the part of `sa_path_rec` the CM reads). rdma_cm
/// synthesizes it for RoCE from the route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathRecord {
    /// This end's GID.
    pub sgid: Gid,
    /// The peer's GID.
    pub dgid: Gid,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Hop limit; above 1 the LIDs are sent permissive (0xFFFF), as Linux does.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Service level.
    pub sl: u8,
    /// Partition key.
    pub pkey: Pkey,
    /// Path MTU.
    pub mtu: IbMtu,
    /// Static rate code (0: the port's rate).
    pub rate: u8,
    /// Packet life time (IBA code): rdma_cm uses 18 on RoCE (Linux 6.2+: 16).
    pub packet_life_time: u8,
}

/// A connection request (`ib_cm_req_param`).
#[derive(Clone, Copy, Debug)]
pub struct ReqParams<'a> {
    /// The peer's QP1.
    pub to: MadAddress,
    /// The service asked for.
    pub service_id: ServiceId,
    /// Our QP.
    pub qp_num: Qpn,
    /// RC or UC.
    pub transport: TransportServiceType,
    /// The PSN the peer sends with (our QP's receive PSN).
    pub starting_psn: Psn,
    /// READ/atomic requests our QP accepts as responder.
    pub responder_resources: u8,
    /// READ/atomic requests our QP issues as requester.
    pub initiator_depth: u8,
    /// How long the peer may take to answer (IBA code).
    pub remote_cm_response_timeout: u8,
    /// How long we may take to answer (IBA code).
    pub local_cm_response_timeout: u8,
    /// How often CM messages are retried (4 bits).
    pub max_cm_retries: u8,
    /// Transport retry count (3 bits).
    pub retry_count: u8,
    /// RNR retry count (3 bits).
    pub rnr_retry_count: u8,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// Our QP has an SRQ.
    pub srq: bool,
    /// The primary path.
    pub path: PathRecord,
    /// Private data (at most 92 bytes).
    pub private_data: &'a [u8],
}

/// A connection reply (`ib_cm_rep_param`).
#[derive(Clone, Copy, Debug)]
pub struct RepParams<'a> {
    /// Our QP.
    pub qp_num: Qpn,
    /// The PSN the peer sends with (our QP's receive PSN).
    pub starting_psn: Psn,
    /// READ/atomic requests our QP accepts as responder.
    pub responder_resources: u8,
    /// READ/atomic requests our QP issues as requester.
    pub initiator_depth: u8,
    /// Failover accepted (2 bits; 0 on RoCE).
    pub failover_accepted: u8,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// RNR retry count (3 bits).
    pub rnr_retry_count: u8,
    /// Our QP has an SRQ.
    pub srq: bool,
    /// Private data (at most 196 bytes).
    pub private_data: &'a [u8],
}

/// A service ID resolution request (`ib_cm_sidr_req_param`).
#[derive(Clone, Copy, Debug)]
pub struct SidrReqParams<'a> {
    /// The peer's QP1.
    pub to: MadAddress,
    /// The service asked about.
    pub service_id: ServiceId,
    /// Our partition.
    pub pkey: Pkey,
    /// How long to wait for the answer (rdma_cm: 4096 ms).
    pub timeout: Duration,
    /// How often to ask again (rdma_cm: 15).
    pub max_cm_retries: u8,
    /// Private data (at most 216 bytes).
    pub private_data: &'a [u8],
}

/// A service ID resolution reply (`ib_cm_sidr_rep_param`).
#[derive(Clone, Copy, Debug)]
pub struct SidrRepParams<'a> {
    /// The status.
    pub status: SidrStatus,
    /// Our UD QP.
    pub qp_num: Qpn,
    /// Its Q_Key.
    pub qkey: Qkey,
    /// Additional information (at most 72 bytes).
    pub info: &'a [u8],
    /// Private data (at most 136 bytes).
    pub private_data: &'a [u8],
}

/// A REQ received for a listened service ID (`ib_cm_req_event_param`), from the passive
/// side's point of view: responder resources and initiator depth are swapped relative to
/// the REQ (ours are the peer's the other way round), as the Linux CM hands them over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReqReceived {
    /// Where the REQ came from.
    pub from: MadAddress,
    /// The service asked for.
    pub service_id: ServiceId,
    /// The peer's CA GUID.
    pub remote_ca_guid: Guid,
    /// The peer's Q_Key (RD only).
    pub remote_qkey: Qkey,
    /// The peer's QP.
    pub remote_qpn: Qpn,
    /// RC or UC.
    pub transport: TransportServiceType,
    /// The PSN we send with.
    pub starting_psn: Psn,
    /// Ours: the REQ's initiator depth.
    pub responder_resources: u8,
    /// Ours: the REQ's responder resources.
    pub initiator_depth: u8,
    /// How long we may take to answer.
    pub local_cm_response_timeout: u8,
    /// How long the peer may take to answer.
    pub remote_cm_response_timeout: u8,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// Retry count.
    pub retry_count: u8,
    /// RNR retry count.
    pub rnr_retry_count: u8,
    /// The peer's QP has an SRQ.
    pub srq: bool,
    /// Path MTU code.
    pub path_mtu: u8,
    /// The primary path as the REQ describes it (the peer is "local" there).
    pub primary_path: CmPath,
    /// The 92 bytes of private data.
    pub private_data: Vec<u8>,
}

/// A REP received for our REQ (`ib_cm_rep_event_param`), responder resources and
/// initiator depth swapped to our point of view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepReceived {
    /// The peer's CA GUID.
    pub remote_ca_guid: Guid,
    /// The peer's Q_Key (RD only).
    pub remote_qkey: Qkey,
    /// The peer's QP.
    pub remote_qpn: Qpn,
    /// The PSN we send with.
    pub starting_psn: Psn,
    /// Ours: the REP's initiator depth.
    pub responder_resources: u8,
    /// Ours: the REP's responder resources.
    pub initiator_depth: u8,
    /// The peer's CA ACK delay.
    pub target_ack_delay: u8,
    /// Failover accepted.
    pub failover_accepted: u8,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// RNR retry count.
    pub rnr_retry_count: u8,
    /// The peer's QP has an SRQ.
    pub srq: bool,
    /// The 196 bytes of private data.
    pub private_data: Vec<u8>,
}

/// A SIDR_REQ received for a listened service ID (`ib_cm_sidr_req_event_param`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SidrReqReceived {
    /// Where it came from.
    pub from: MadAddress,
    /// The service asked about.
    pub service_id: ServiceId,
    /// The requester's partition.
    pub pkey: Pkey,
    /// The 216 bytes of private data.
    pub private_data: Vec<u8>,
}

/// A SIDR_REP received for our SIDR_REQ (`ib_cm_sidr_rep_event_param`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SidrRepReceived {
    /// The status.
    pub status: SidrStatus,
    /// The QP that serves the service.
    pub qpn: Qpn,
    /// Its Q_Key.
    pub qkey: Qkey,
    /// Additional information.
    pub info: Vec<u8>,
    /// The 136 bytes of private data.
    pub private_data: Vec<u8>,
}

/// What happened to a connection (`ib_cm_event_type`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmEventKind {
    /// A REQ arrived for a listened service ID; the connection is new, in `ReqRcvd`.
    ReqReceived(Box<ReqReceived>),
    /// Our REQ was not answered after every retry.
    ReqError,
    /// Our REQ was acknowledged with an MRA.
    MraReceived {
        /// The service timeout the peer asked for (IBA code).
        service_timeout: u8,
    },
    /// The peer rejected.
    RejReceived {
        /// The reason.
        reason: RejectReason,
        /// Additional rejection information.
        ari: Vec<u8>,
        /// The 148 bytes of private data.
        private_data: Vec<u8>,
    },
    /// Our REQ was accepted.
    RepReceived(Box<RepReceived>),
    /// Our REP was not answered after every retry.
    RepError,
    /// The RTU arrived: established.
    RtuReceived {
        /// The 224 bytes of private data.
        private_data: Vec<u8>,
    },
    /// The transport saw the first packet before the RTU ("communication established"):
    /// established.
    UserEstablished,
    /// The peer asks to disconnect.
    DreqReceived {
        /// The 220 bytes of private data.
        private_data: Vec<u8>,
    },
    /// Our DREQ was not answered after every retry; the connection is in TimeWait.
    DreqError,
    /// The peer answered our DREQ (or our DREP crossed its): TimeWait.
    DrepReceived {
        /// The 224 bytes of private data.
        private_data: Vec<u8>,
    },
    /// TimeWait is over: the QP may be reused.
    TimewaitExit,
    /// A SIDR_REQ arrived for a listened service ID; the resolution is new, in
    /// `SidrReqRcvd`.
    SidrReqReceived(Box<SidrReqReceived>),
    /// Our SIDR_REQ was not answered after every retry.
    SidrReqError,
    /// Our SIDR_REQ was answered.
    SidrRepReceived(Box<SidrRepReceived>),
}

/// An event of one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CmEvent {
    /// The connection, by our comm ID.
    pub id: CommId,
    /// What happened.
    pub kind: CmEventKind,
}

/// Why a call on the CM failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CmError {
    /// No connection has this comm ID (it was destroyed, or never existed).
    #[error("no CM connection has comm ID {0}")]
    UnknownId(CommId),
    /// The call does not fit the connection's state (e.g. a REP for a connection that
    /// has not received a REQ).
    #[error("{op} is not possible in CM state {state:?}")]
    InvalidState {
        /// The call.
        op: &'static str,
        /// The connection's state.
        state: CmState,
    },
    /// The connection is established already (a second "communication established").
    #[error("the connection is established already")]
    AlreadyEstablished,
    /// A field is longer than the message has room for.
    #[error("{what} of {len} bytes does not fit: at most {max}")]
    TooLong {
        /// The field.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The room for it.
        max: usize,
    },
    /// A REQ can only set up RC and UC connections.
    #[error("transport service type {0:?} cannot be connected with a REQ (RC or UC only)")]
    Transport(TransportServiceType),
    /// The connection's path MTU code is not one of the five MTUs.
    #[error("path MTU code {0} is not an InfiniBand MTU (1..=5)")]
    PathMtu(u8),
    /// QP attributes asked for a state the CM does not compute (INIT, RTR, RTS only).
    #[error("the CM computes QP attributes for INIT, RTR and RTS, not {0:?}")]
    QpState(xroce_transport::QpState),
}

pub(crate) fn check_len(what: &'static str, data: &[u8], max: usize) -> Result<(), CmError> {
    if data.len() > max {
        return Err(CmError::TooLong {
            what,
            len: data.len(),
            max,
        });
    }
    Ok(())
}
