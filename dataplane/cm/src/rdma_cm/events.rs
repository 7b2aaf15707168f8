//! Events as librdmacm sees them (`struct rdma_cm_event`): the kind (with the values of
//! `enum rdma_cm_event_type`), the status, and the connection or UD parameters.

use std::net::IpAddr;

use xroce_wire::Gid;

use super::id::IdHandle;

/// `enum rdma_cm_event_type`, with its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum EventKind {
    /// `RDMA_CM_EVENT_ADDR_RESOLVED` (emitted by the engine, which resolves addresses).
    AddrResolved = 0,
    /// `RDMA_CM_EVENT_ADDR_ERROR`: also a UD peer answering with a Q_Key other than ours.
    AddrError = 1,
    /// `RDMA_CM_EVENT_ROUTE_RESOLVED` (emitted by the engine).
    RouteResolved = 2,
    /// `RDMA_CM_EVENT_ROUTE_ERROR` (emitted by the engine).
    RouteError = 3,
    /// `RDMA_CM_EVENT_CONNECT_REQUEST`: on the new id; `listen_id` is the listener.
    ConnectRequest = 4,
    /// `RDMA_CM_EVENT_CONNECT_RESPONSE`: the REP came; librdmacm moves the QP to RTR and
    /// RTS and calls establish (which sends the RTU), then reports ESTABLISHED itself.
    ConnectResponse = 5,
    /// `RDMA_CM_EVENT_CONNECT_ERROR`.
    ConnectError = 6,
    /// `RDMA_CM_EVENT_UNREACHABLE`: no answer after every retry (status -ETIMEDOUT), or a
    /// SIDR_REP with a status other than success (status = that status).
    Unreachable = 7,
    /// `RDMA_CM_EVENT_REJECTED`: status = the REJ's reason.
    Rejected = 8,
    /// `RDMA_CM_EVENT_ESTABLISHED`.
    Established = 9,
    /// `RDMA_CM_EVENT_DISCONNECTED`.
    Disconnected = 10,
    /// `RDMA_CM_EVENT_DEVICE_REMOVAL`.
    DeviceRemoval = 11,
    /// `RDMA_CM_EVENT_MULTICAST_JOIN`: the id joined a group ([`EventParam::Multicast`]).
    MulticastJoin = 12,
    /// `RDMA_CM_EVENT_MULTICAST_ERROR`.
    MulticastError = 13,
    /// `RDMA_CM_EVENT_ADDR_CHANGE`.
    AddrChange = 14,
    /// `RDMA_CM_EVENT_TIMEWAIT_EXIT`: the QP may be reused.
    TimewaitExit = 15,
}

impl EventKind {
    /// The name `rdma_event_str` gives it.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::AddrResolved => "RDMA_CM_EVENT_ADDR_RESOLVED",
            EventKind::AddrError => "RDMA_CM_EVENT_ADDR_ERROR",
            EventKind::RouteResolved => "RDMA_CM_EVENT_ROUTE_RESOLVED",
            EventKind::RouteError => "RDMA_CM_EVENT_ROUTE_ERROR",
            EventKind::ConnectRequest => "RDMA_CM_EVENT_CONNECT_REQUEST",
            EventKind::ConnectResponse => "RDMA_CM_EVENT_CONNECT_RESPONSE",
            EventKind::ConnectError => "RDMA_CM_EVENT_CONNECT_ERROR",
            EventKind::Unreachable => "RDMA_CM_EVENT_UNREACHABLE",
            EventKind::Rejected => "RDMA_CM_EVENT_REJECTED",
            EventKind::Established => "RDMA_CM_EVENT_ESTABLISHED",
            EventKind::Disconnected => "RDMA_CM_EVENT_DISCONNECTED",
            EventKind::DeviceRemoval => "RDMA_CM_EVENT_DEVICE_REMOVAL",
            EventKind::MulticastJoin => "RDMA_CM_EVENT_MULTICAST_JOIN",
            EventKind::MulticastError => "RDMA_CM_EVENT_MULTICAST_ERROR",
            EventKind::AddrChange => "RDMA_CM_EVENT_ADDR_CHANGE",
            EventKind::TimewaitExit => "RDMA_CM_EVENT_TIMEWAIT_EXIT",
        }
    }
}

/// `param.conn` of an event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnEventParam {
    /// Private data, as long as Linux reports it: 56 bytes for a request (the REQ's after
    /// the IP CM header), 196 for a response, 148 for a reject.
    pub private_data: Vec<u8>,
    /// Ours (a request: the REQ's initiator depth; a response: the REP's).
    pub responder_resources: u8,
    /// Ours (a request: the REQ's responder resources; a response: the REP's).
    pub initiator_depth: u8,
    /// End-to-end flow control.
    pub flow_control: u8,
    /// Retry count (requests only).
    pub retry_count: u8,
    /// RNR retry count.
    pub rnr_retry_count: u8,
    /// The peer's QP has an SRQ.
    pub srq: u8,
    /// The peer's QP.
    pub qp_num: u32,
}

/// The address vector of a UD peer (`ibv_ah_attr` in `param.ud`). The engine adds the
/// source GID index and port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AhAttr {
    /// The peer's GID.
    pub dgid: Gid,
    /// Flow label.
    pub flow_label: u32,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
}

/// `param.ud` of an event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UdEventParam {
    /// Private data: 180 bytes for a request, 136 for a response.
    pub private_data: Vec<u8>,
    /// How to reach the peer (responses).
    pub ah_attr: AhAttr,
    /// The peer's QP (responses).
    pub qp_num: u32,
    /// The peer's Q_Key (responses).
    pub qkey: u32,
}

/// `param.ud` of a multicast event, and which join of the id it answers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct McEventParam {
    /// The join's key, as [`crate::RdmaCm::join_multicast`] got it.
    pub join: u32,
    /// How to send to the group: its MGID as the address vector's destination, QPN
    /// 0xFFFFFF, the id's Q_Key.
    pub ud: UdEventParam,
}

/// The parameters an event carries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum EventParam {
    /// None.
    #[default]
    None,
    /// Connection parameters.
    Conn(ConnEventParam),
    /// UD parameters.
    Ud(UdEventParam),
    /// UD parameters of a multicast group, with the join they answer.
    Multicast(McEventParam),
}

/// An event of an id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The id.
    pub id: IdHandle,
    /// For a connect request: the listener it came through.
    pub listen_id: Option<IdHandle>,
    /// What happened.
    pub kind: EventKind,
    /// 0, a negative errno, a REJ reason or a SIDR status, as Linux reports it.
    pub status: i32,
    /// The parameters.
    pub param: EventParam,
}

impl Event {
    /// The connection parameters, if any.
    pub fn conn(&self) -> Option<&ConnEventParam> {
        match &self.param {
            EventParam::Conn(c) => Some(c),
            _ => None,
        }
    }

    /// The UD parameters, if any (a multicast event's too).
    pub fn ud(&self) -> Option<&UdEventParam> {
        match &self.param {
            EventParam::Ud(u) => Some(u),
            EventParam::Multicast(m) => Some(&m.ud),
            _ => None,
        }
    }

    /// The multicast parameters, if any.
    pub fn multicast(&self) -> Option<&McEventParam> {
        match &self.param {
            EventParam::Multicast(m) => Some(m),
            _ => None,
        }
    }
}

/// The peer address of a UD event's address vector, as an IP address.
pub(crate) fn ah_for(peer: IpAddr, flow_label: u32, hop_limit: u8, traffic_class: u8) -> AhAttr {
    AhAttr {
        dgid: Gid::from_ip(peer),
        flow_label,
        hop_limit,
        traffic_class,
    }
}
