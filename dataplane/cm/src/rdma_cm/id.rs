//! rdma_cm ids (`struct rdma_id_private`): what an application holds for each connection,
//! listener or UD endpoint, and the parameters it passes.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use xroce_transport::QpType;
use xroce_wire::{CommId, IbMtu, PortSpace, Psn, Qpn};

use super::multicast::Membership;

/// A handle on an rdma_cm id, unique for the life of the [`crate::RdmaCm`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdHandle(pub u64);

impl fmt::Display for IdHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Who owns an id: the application connection the daemon serves it to. When the owner
/// goes away, all its ids go with it ([`crate::RdmaCm::owner_gone`]), as the kernel
/// destroys the ids of a closed `/dev/infiniband/rdma_cm` file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner(pub u64);

/// The states of an id that this layer distinguishes (`enum rdma_cm_state`; address and
/// route queries happen in the engine, so an id goes from idle or bound straight to
/// route-resolved).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IdState {
    /// Created.
    Idle,
    /// Bound to an address and port.
    AddrBound,
    /// Its route to a peer is known: it may connect.
    RouteResolved,
    /// Listening.
    Listen,
    /// Connecting or connected (Linux does not tell the two apart either).
    Connect,
    /// Disconnected (a DREQ or DREP came, or ours timed out).
    Disconnect,
}

/// An option of an id (`rdma_set_option` at level `RDMA_OPTION_ID`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdOption {
    /// `RDMA_OPTION_ID_TOS`: the IP traffic class of the connection.
    Tos(u8),
    /// `RDMA_OPTION_ID_REUSEADDR`: share a port with other ids that set it too.
    ReuseAddr(bool),
    /// `RDMA_OPTION_ID_AFONLY`: an IPv6 wildcard listener does not take IPv4 requests.
    AfOnly(bool),
    /// `RDMA_OPTION_ID_ACK_TIMEOUT`: the QP's local ACK timeout (IBA code); the REQ's path
    /// then says a packet life time of one less.
    AckTimeout(u8),
}

/// The route to a peer, as the engine resolved it (route lookup and neighbour table):
/// the rest of the path record rdma_cm synthesizes for RoCE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The source address the route leaves from (a local address).
    pub local: IpAddr,
    /// The peer's address and rdma_cm port.
    pub remote: SocketAddr,
    /// The path MTU of the link (1024 on a 1500-byte link).
    pub path_mtu: IbMtu,
    /// The route's hop limit (the IP TTL: 64).
    pub hop_limit: u8,
}

/// Connection parameters (`struct rdma_conn_param`) of `connect` and `accept`. A UD id
/// (service ID resolution) uses only the private data, the QP number and the Q_Key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnParam {
    /// Private data: at most 56 bytes in a connect (92 minus the IP CM header; 180 for
    /// UD), at most 196 in an accept (136 for UD).
    pub private_data: Vec<u8>,
    /// READ/atomic requests our QP accepts as responder.
    pub responder_resources: u8,
    /// READ/atomic requests our QP issues as requester.
    pub initiator_depth: u8,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// Transport retry count (at most 7 is sent).
    pub retry_count: u8,
    /// RNR retry count (at most 7 is sent; 7 = forever).
    pub rnr_retry_count: u8,
    /// Our QP has an SRQ.
    pub srq: bool,
    /// Our QP.
    pub qp_num: Qpn,
    /// UD accept: the QP's Q_Key; 0 for the port space's default, `RDMA_UDP_QKEY`.
    pub qkey: u32,
}

/// What an id looks like from outside (for the engine and the drop-in library, which
/// fill `rdma_cm_id.route` from it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdInfo {
    /// The owner.
    pub owner: Owner,
    /// The port space.
    pub port_space: PortSpace,
    /// The QP type.
    pub qp_type: QpType,
    /// The state.
    pub state: IdState,
    /// The local address and port (bound, or of the connection).
    pub local: Option<SocketAddr>,
    /// The peer's address and port.
    pub remote: Option<SocketAddr>,
    /// The path MTU, once a route is known.
    pub path_mtu: Option<IbMtu>,
    /// The starting PSN of our side (rdma_cm's random `seq_num`).
    pub seq_num: Psn,
    /// The connection's comm ID, once connecting.
    pub comm_id: Option<CommId>,
    /// The listener a connection request came through.
    pub listener: Option<IdHandle>,
}

/// The route facts of a connection (from [`Route`] on the active side, from the REQ on
/// the passive side).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RouteInfo {
    pub(crate) path_mtu: IbMtu,
    pub(crate) hop_limit: u8,
}

/// One id.
#[derive(Clone, Debug)]
pub(crate) struct RdmaId {
    pub(crate) owner: Owner,
    pub(crate) ps: PortSpace,
    pub(crate) qp_type: QpType,
    pub(crate) state: IdState,
    /// The address in the port table (its IP may be the wildcard).
    pub(crate) bound: Option<SocketAddr>,
    /// The source address of the connection.
    pub(crate) src: Option<SocketAddr>,
    pub(crate) dst: Option<SocketAddr>,
    pub(crate) route: Option<RouteInfo>,
    pub(crate) tos: Option<u8>,
    pub(crate) reuseaddr: bool,
    pub(crate) afonly: bool,
    pub(crate) ack_timeout: Option<u8>,
    pub(crate) seq_num: Psn,
    pub(crate) qp_num: Qpn,
    pub(crate) qkey: Option<u32>,
    pub(crate) cm: Option<CommId>,
    pub(crate) listener: Option<IdHandle>,
    /// Whether this id holds a listen on its service ID.
    pub(crate) listening: bool,
    /// A listener's bound on the connection requests it holds unanswered.
    pub(crate) backlog: u32,
    /// A connection request this id came from that the application has not accepted or
    /// rejected yet (it counts against its listener's backlog).
    pub(crate) unanswered: bool,
    /// The multicast groups it joined, oldest first.
    pub(crate) multicast: Vec<Membership>,
}

impl RdmaId {
    pub(crate) fn new(owner: Owner, ps: PortSpace, qp_type: QpType, seq_num: Psn) -> RdmaId {
        RdmaId {
            owner,
            ps,
            qp_type,
            state: IdState::Idle,
            bound: None,
            src: None,
            dst: None,
            route: None,
            tos: None,
            reuseaddr: false,
            afonly: false,
            ack_timeout: None,
            seq_num,
            qp_num: Qpn::new(0),
            qkey: None,
            cm: None,
            listener: None,
            listening: false,
            backlog: 0,
            unanswered: false,
            multicast: Vec::new(),
        }
    }

    pub(crate) fn info(&self) -> IdInfo {
        IdInfo {
            owner: self.owner,
            port_space: self.ps,
            qp_type: self.qp_type,
            state: self.state,
            local: self.src.or(self.bound),
            remote: self.dst,
            path_mtu: self.route.map(|r| r.path_mtu),
            seq_num: self.seq_num,
            comm_id: self.cm,
            listener: self.listener,
        }
    }
}
