//! rdma_cm between an application and the daemon: the connection manager runs in the
//! daemon (it owns QP1, its timers run while applications sleep, and it answers for an
//! application that dies), and the application's library asks it through
//! [`CmRequest`]s on the control connection and hears it through [`CmEventRecord`]s.
//!
//! Events are fixed-size records the daemon writes to an event channel: a `SOCK_SEQPACKET`
//! socket whose other end the application polls (`rdma_event_channel.fd`), handed to the
//! daemon once with [`CmRequest::Channel`]. Each id reports to one channel and can move to
//! another ([`CmRequest::MigrateId`]); one record is one event.
//!
//! Addresses travel as [`CmSockAddr`]: an IPv4 or IPv6 socket address in one fixed layout
//! (IPv4 as `::ffff:a.b.c.d`), with the port in host order.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use serde::{Deserialize, Serialize};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::protocol::QpAttr;

/// The most private data any CM message carries (a REP's 196 bytes).
pub const MAX_PRIVATE_DATA: usize = 196;

/// `rdma_cm_event_type` values, as librdmacm numbers them.
pub mod event {
    /// `RDMA_CM_EVENT_ADDR_RESOLVED`.
    pub const ADDR_RESOLVED: u32 = 0;
    /// `RDMA_CM_EVENT_ADDR_ERROR`.
    pub const ADDR_ERROR: u32 = 1;
    /// `RDMA_CM_EVENT_ROUTE_RESOLVED`.
    pub const ROUTE_RESOLVED: u32 = 2;
    /// `RDMA_CM_EVENT_ROUTE_ERROR`.
    pub const ROUTE_ERROR: u32 = 3;
    /// `RDMA_CM_EVENT_CONNECT_REQUEST`.
    pub const CONNECT_REQUEST: u32 = 4;
    /// `RDMA_CM_EVENT_CONNECT_RESPONSE`.
    pub const CONNECT_RESPONSE: u32 = 5;
    /// `RDMA_CM_EVENT_CONNECT_ERROR`.
    pub const CONNECT_ERROR: u32 = 6;
    /// `RDMA_CM_EVENT_UNREACHABLE`.
    pub const UNREACHABLE: u32 = 7;
    /// `RDMA_CM_EVENT_REJECTED`.
    pub const REJECTED: u32 = 8;
    /// `RDMA_CM_EVENT_ESTABLISHED`.
    pub const ESTABLISHED: u32 = 9;
    /// `RDMA_CM_EVENT_DISCONNECTED`.
    pub const DISCONNECTED: u32 = 10;
    /// `RDMA_CM_EVENT_DEVICE_REMOVAL`.
    pub const DEVICE_REMOVAL: u32 = 11;
    /// `RDMA_CM_EVENT_MULTICAST_JOIN`.
    pub const MULTICAST_JOIN: u32 = 12;
    /// `RDMA_CM_EVENT_MULTICAST_ERROR`.
    pub const MULTICAST_ERROR: u32 = 13;
    /// `RDMA_CM_EVENT_ADDR_CHANGE`.
    pub const ADDR_CHANGE: u32 = 14;
    /// `RDMA_CM_EVENT_TIMEWAIT_EXIT`.
    pub const TIMEWAIT_EXIT: u32 = 15;
}

/// rdma_cm port spaces (`enum rdma_port_space`).
pub mod port_space {
    /// `RDMA_PS_IPOIB`.
    pub const IPOIB: u16 = 0x0002;
    /// `RDMA_PS_TCP`: reliable connections.
    pub const TCP: u16 = 0x0106;
    /// `RDMA_PS_UDP`: unreliable datagrams, resolved with SIDR.
    pub const UDP: u16 = 0x0111;
    /// `RDMA_PS_IB`: any QP type.
    pub const IB: u16 = 0x013F;
}

/// `RDMA_UDP_QKEY`: the Q_Key of every `RDMA_PS_UDP` QP.
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;

/// An IPv4 or IPv6 socket address in a fixed layout: what [`CmEventRecord`] carries and
/// the protocol's requests name.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Serialize,
    Deserialize,
)]
#[repr(C)]
pub struct CmSockAddr {
    /// `AF_INET` (2), `AF_INET6` (10), or 0: no address.
    pub family: u16,
    /// The port, in host order.
    pub port: u16,
    /// IPv6 flow information.
    pub flowinfo: u32,
    /// The address; IPv4 as `::ffff:a.b.c.d`.
    pub addr: [u8; 16],
    /// IPv6 scope (interface index of a link-local address).
    pub scope_id: u32,
    /// Zero.
    pub reserved: u32,
}

impl CmSockAddr {
    /// No address.
    pub const NONE: CmSockAddr = CmSockAddr {
        family: 0,
        port: 0,
        flowinfo: 0,
        addr: [0; 16],
        scope_id: 0,
        reserved: 0,
    };

    /// The address as the standard library sees it; `None` for no address or an unknown
    /// family.
    pub fn to_socket_addr(&self) -> Option<SocketAddr> {
        let ip6 = Ipv6Addr::from(self.addr);
        match i32::from(self.family) {
            libc::AF_INET => Some(SocketAddr::V4(SocketAddrV4::new(
                ip6.to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED),
                self.port,
            ))),
            libc::AF_INET6 => Some(SocketAddr::V6(SocketAddrV6::new(
                ip6,
                self.port,
                self.flowinfo,
                self.scope_id,
            ))),
            _ => None,
        }
    }

    /// The IP address alone.
    pub fn ip(&self) -> Option<IpAddr> {
        self.to_socket_addr().map(|a| a.ip())
    }
}

impl From<SocketAddr> for CmSockAddr {
    fn from(a: SocketAddr) -> CmSockAddr {
        match a {
            SocketAddr::V4(v4) => CmSockAddr {
                family: libc::AF_INET as u16,
                port: v4.port(),
                addr: v4.ip().to_ipv6_mapped().octets(),
                ..CmSockAddr::NONE
            },
            SocketAddr::V6(v6) => CmSockAddr {
                family: libc::AF_INET6 as u16,
                port: v6.port(),
                flowinfo: v6.flowinfo(),
                addr: v6.ip().octets(),
                scope_id: v6.scope_id(),
                reserved: 0,
            },
        }
    }
}

/// Connection parameters (`struct rdma_conn_param`, and the UD Q_Key of an accept).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CmConnParam {
    /// Private data (at most 56 bytes in a connect, 196 in an accept; 180 and 136 for UD).
    pub private_data: Vec<u8>,
    /// READ/atomic requests the QP accepts as responder.
    pub responder_resources: u8,
    /// READ/atomic requests the QP issues as requester.
    pub initiator_depth: u8,
    /// End-to-end flow control.
    pub flow_control: u8,
    /// Transport retry count.
    pub retry_count: u8,
    /// RNR retry count (7: for ever).
    pub rnr_retry_count: u8,
    /// The QP has an SRQ.
    pub srq: u8,
    /// The QP number (the caller's own QP; checked).
    pub qp_num: u32,
    /// UD: the QP's Q_Key (0: `RDMA_UDP_QKEY`).
    pub qkey: u32,
}

/// An option of an id (`rdma_set_option` at level `RDMA_OPTION_ID`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CmOption {
    /// `RDMA_OPTION_ID_TOS`.
    Tos(u8),
    /// `RDMA_OPTION_ID_REUSEADDR`.
    ReuseAddr(bool),
    /// `RDMA_OPTION_ID_AFONLY`.
    AfOnly(bool),
    /// `RDMA_OPTION_ID_ACK_TIMEOUT`.
    AckTimeout(u8),
}

/// What an id looks like (`rdma_cm_id.route` and friends).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CmIdInfo {
    /// The local address and port (bound, resolved or of the connection).
    pub local: CmSockAddr,
    /// The peer's address and port.
    pub remote: CmSockAddr,
    /// Our GID (`route.addr.addr.ibaddr.sgid`).
    pub sgid: [u8; 16],
    /// The peer's GID.
    pub dgid: [u8; 16],
    /// The index of `sgid` in the port's GID table.
    pub sgid_index: u8,
    /// `ibv_mtu` of the path (0 before a route is known).
    pub path_mtu: u32,
    /// Hop limit of the path.
    pub hop_limit: u8,
    /// Traffic class of the path.
    pub traffic_class: u8,
    /// A route is resolved (`route.num_paths` is 1).
    pub route_resolved: bool,
}

/// rdma_cm requests (`Request::Cm`), each answered with one [`CmReply`] or an error. An
/// id is a handle of the daemon's, valid on the connection that made it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CmRequest {
    /// An event channel: its socket comes alongside; [`CmReply::Channel`] names it.
    Channel,
    /// Closes an event channel (its ids must have moved or gone).
    DestroyChannel {
        /// The channel.
        channel: u32,
    },
    /// `rdma_create_id`: a new id reporting to `channel`. [`CmReply::Id`].
    CreateId {
        /// The channel its events go to.
        channel: u32,
        /// The port space ([`port_space`]).
        port_space: u16,
        /// `ibv_qp_type` (RC 2, UD 4).
        qp_type: u32,
    },
    /// `rdma_destroy_id`: the id goes; a connection is disconnected, a pending request
    /// rejected. No event of it follows.
    DestroyId {
        /// The id.
        id: u64,
    },
    /// `rdma_migrate_id`: the id's events go to `channel` from now on.
    MigrateId {
        /// The id.
        id: u64,
        /// The new channel.
        channel: u32,
    },
    /// `rdma_set_option` (level `RDMA_OPTION_ID`).
    SetOption {
        /// The id.
        id: u64,
        /// The option.
        option: CmOption,
    },
    /// `rdma_bind_addr`. [`CmReply::Info`] with the bound address.
    Bind {
        /// The id.
        id: u64,
        /// The address (port 0: any).
        addr: CmSockAddr,
    },
    /// `rdma_resolve_addr`: `ADDR_RESOLVED` or `ADDR_ERROR` follows. [`CmReply::Done`].
    ResolveAddr {
        /// The id.
        id: u64,
        /// The source address, or none.
        src: CmSockAddr,
        /// The destination.
        dst: CmSockAddr,
        /// Give up after this long.
        timeout_ms: u32,
    },
    /// `rdma_resolve_route`: `ROUTE_RESOLVED` or `ROUTE_ERROR` follows.
    ResolveRoute {
        /// The id.
        id: u64,
        /// Give up after this long.
        timeout_ms: u32,
    },
    /// `rdma_listen`.
    Listen {
        /// The id.
        id: u64,
        /// The backlog.
        backlog: i32,
    },
    /// `rdma_connect`: sends a REQ (or a SIDR_REQ for UD).
    Connect {
        /// The id.
        id: u64,
        /// The parameters.
        param: CmConnParam,
    },
    /// `rdma_accept`: sends a REP (or a SIDR_REP).
    Accept {
        /// The id.
        id: u64,
        /// The parameters.
        param: CmConnParam,
    },
    /// `rdma_reject`: sends a REJ (reason 28) with private data.
    Reject {
        /// The id.
        id: u64,
        /// The private data.
        private_data: Vec<u8>,
    },
    /// The active side's QP is ready: sends the RTU (librdmacm's accept after
    /// `CONNECT_RESPONSE`), and the id is established.
    Establish {
        /// The id.
        id: u64,
    },
    /// `rdma_notify`: the QP saw its first packet (`IBV_EVENT_COMM_EST`).
    Notify {
        /// The id.
        id: u64,
    },
    /// `rdma_disconnect`: sends a DREQ (or a DREP to the peer's).
    Disconnect {
        /// The id.
        id: u64,
    },
    /// `rdma_init_qp_attr`. [`CmReply::QpAttr`].
    InitQpAttr {
        /// The id.
        id: u64,
        /// `ibv_qp_state` wanted.
        state: u32,
    },
    /// The id's addresses and route. [`CmReply::Info`].
    Query {
        /// The id.
        id: u64,
    },
    /// `rdma_join_multicast`: the id joins `group` under the key `join` (the library's,
    /// unique among the id's joins, never 0); `MULTICAST_JOIN` follows at once, naming
    /// `join` ([`CmEventRecord::join`]). [`CmReply::Done`]. Refused as Linux refuses: an id
    /// without a device, not bound or address-resolved, or not UD, the unspecified group,
    /// flags other than [`join_flags`] (`EINVAL`); an IPv6 group on RoCE v2 (`ENOTSUPP`,
    /// 524).
    JoinMulticast {
        /// The id.
        id: u64,
        /// The join's key.
        join: u32,
        /// The group.
        group: CmSockAddr,
        /// `rdma_cm_mc_join_flags` ([`join_flags`]).
        flags: u32,
    },
    /// `rdma_leave_multicast`: the id leaves the join `join` (`ENOENT` if it holds none of
    /// that key). No event of it follows. [`CmReply::Done`].
    LeaveMulticast {
        /// The id.
        id: u64,
        /// The join's key.
        join: u32,
    },
}

/// `enum rdma_cm_mc_join_flags`: how an id joins a multicast group.
pub mod join_flags {
    /// `RDMA_MC_JOIN_FLAG_FULLMEMBER`: sends to the group and receives from it.
    pub const FULLMEMBER: u32 = 0;
    /// `RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER`: sends only (the QP is not attached).
    pub const SENDONLY_FULLMEMBER: u32 = 1;
}

/// The daemon's answer to a [`CmRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CmReply {
    /// Done.
    Done,
    /// A new channel.
    Channel {
        /// Its handle.
        channel: u32,
    },
    /// A new id.
    Id {
        /// Its handle.
        id: u64,
    },
    /// An id's addresses and route.
    Info(CmIdInfo),
    /// Attributes for `ibv_modify_qp` and their mask (`ibv_qp_attr_mask`).
    QpAttr {
        /// The attributes.
        attr: QpAttr,
        /// Which are set.
        mask: u32,
    },
}

/// One event, as the daemon writes it to an event channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct CmEventRecord {
    /// The id the event is about (for `CONNECT_REQUEST`: a new id).
    pub id: u64,
    /// For `CONNECT_REQUEST`: the listening id it came through; otherwise 0.
    pub listen_id: u64,
    /// The event ([`event`]).
    pub event: u32,
    /// `rdma_cm_event.status`: 0, a negative errno, a REJ reason, a SIDR status.
    pub status: i32,
    /// The peer's QP number.
    pub qp_num: u32,
    /// The peer's Q_Key (UD).
    pub qkey: u32,
    /// The path's flow label (UD address vector).
    pub flow_label: u32,
    /// Length of `private_data` that is meaningful.
    pub private_data_len: u16,
    /// Connection parameters: responder resources.
    pub responder_resources: u8,
    /// Initiator depth.
    pub initiator_depth: u8,
    /// Flow control.
    pub flow_control: u8,
    /// Retry count.
    pub retry_count: u8,
    /// RNR retry count.
    pub rnr_retry_count: u8,
    /// SRQ.
    pub srq: u8,
    /// UD address vector: hop limit.
    pub hop_limit: u8,
    /// UD address vector: traffic class.
    pub traffic_class: u8,
    /// UD address vector: index of our GID.
    pub sgid_index: u8,
    /// The record carries UD parameters (`param.ud`) rather than `param.conn`.
    pub ud: u8,
    /// UD address vector: the peer's GID.
    pub dgid: [u8; 16],
    /// The id's local address (a `CONNECT_REQUEST`'s new id: where the request came to).
    pub local: CmSockAddr,
    /// The peer's address.
    pub remote: CmSockAddr,
    /// Private data.
    pub private_data: [u8; MAX_PRIVATE_DATA],
    /// For `MULTICAST_JOIN` and `MULTICAST_ERROR`: the key of the join the event answers
    /// ([`CmRequest::JoinMulticast`]); otherwise 0. (Zero bytes before multicast existed:
    /// the records of one contract version keep one size and layout.)
    pub join: u32,
}

impl Default for CmEventRecord {
    fn default() -> CmEventRecord {
        zerocopy::FromZeros::new_zeroed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_addresses_round_trip() {
        for a in [
            "10.77.0.1:7174",
            "0.0.0.0:0",
            "[fd00:77::1]:20079",
            "[fe80::1%3]:1",
        ] {
            let a: SocketAddr = a.parse().unwrap();
            assert_eq!(CmSockAddr::from(a).to_socket_addr(), Some(a), "{a}");
        }
        assert_eq!(CmSockAddr::NONE.to_socket_addr(), None);
    }

    #[test]
    fn an_event_record_is_one_fixed_size() {
        assert_eq!(size_of::<CmEventRecord>(), 328);
        assert_eq!(size_of::<CmSockAddr>(), 32);
    }

    #[test]
    fn the_join_key_takes_the_records_last_four_bytes() {
        let r = CmEventRecord {
            join: 0x0102_0304,
            ..CmEventRecord::default()
        };
        let bytes = zerocopy::IntoBytes::as_bytes(&r);
        assert_eq!(bytes[324..], 0x0102_0304u32.to_ne_bytes());
    }

    #[test]
    fn requests_and_replies_encode_and_decode() {
        let r = crate::protocol::Request::Cm(CmRequest::Connect {
            id: 7,
            param: CmConnParam {
                private_data: vec![1, 2, 3],
                qp_num: 0x11,
                retry_count: 7,
                ..CmConnParam::default()
            },
        });
        let bytes = crate::protocol::encode(&r);
        assert_eq!(
            crate::protocol::decode::<crate::protocol::Request>(&bytes).unwrap(),
            r
        );
        let join = crate::protocol::Request::Cm(CmRequest::JoinMulticast {
            id: 7,
            join: 1,
            group: CmSockAddr::from(SocketAddr::from(([230, 1, 2, 3], 0))),
            flags: join_flags::SENDONLY_FULLMEMBER,
        });
        let bytes = crate::protocol::encode(&join);
        assert_eq!(
            crate::protocol::decode::<crate::protocol::Request>(&bytes).unwrap(),
            join
        );
    }
}
