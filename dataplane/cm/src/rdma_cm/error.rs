//! How rdma_cm calls fail, with the errno Linux returns for each (the drop-in librdmacm
//! hands it to the application).

use std::net::{IpAddr, SocketAddr};

use xroce_wire::PortSpace;

use super::id::{IdHandle, IdState};
use crate::ib_cm::params::CmError;

/// `EINVAL`.
pub const EINVAL: i32 = 22;
/// `ENOENT`.
pub const ENOENT: i32 = 2;
/// `EADDRINUSE`.
pub const EADDRINUSE: i32 = 98;
/// `EADDRNOTAVAIL`.
pub const EADDRNOTAVAIL: i32 = 99;
/// `EISCONN`.
pub const EISCONN: i32 = 106;
/// `ETIMEDOUT`: the status of UNREACHABLE after every retry, and of a DISCONNECTED whose
/// DREQ was never answered.
pub const ETIMEDOUT: i32 = 110;
/// `EAFNOSUPPORT`.
pub const EAFNOSUPPORT: i32 = 97;
/// `ENOTSUPP` (524), the kernel's own "operation not supported" that leaks to user space
/// from a few calls (an IPv6 multicast join on RoCE v2 among them); not `ENOTSUP`.
pub const ENOTSUPP: i32 = 524;

/// Why an rdma_cm call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The id does not exist (destroyed, or never created).
    #[error("rdma_cm id {0} does not exist")]
    UnknownId(IdHandle),
    /// The call does not fit the id's state (e.g. connect before the route is resolved,
    /// accept on a listener).
    #[error("{op} is not possible on an rdma_cm id in state {state:?}")]
    InvalidState {
        /// The call.
        op: &'static str,
        /// The id's state.
        state: IdState,
    },
    /// Another id is bound to this address and port and neither set REUSEADDR (or one
    /// listens).
    #[error("{addr} is in use in port space {ps:?}")]
    AddrInUse {
        /// The address.
        addr: SocketAddr,
        /// The port space.
        ps: PortSpace,
    },
    /// The port is bound by another id to the wildcard address, or this one is the
    /// wildcard and the port is bound to an address (Linux's `EADDRNOTAVAIL` for that).
    #[error("{addr} conflicts with a wildcard binding of its port in port space {ps:?}")]
    WildcardConflict {
        /// The address.
        addr: SocketAddr,
        /// The port space.
        ps: PortSpace,
    },
    /// Every port of the ephemeral range is bound.
    #[error("no free port in {ps:?} between {low} and {high}")]
    NoFreePort {
        /// The port space.
        ps: PortSpace,
        /// The range's lowest port.
        low: u16,
        /// Its highest.
        high: u16,
    },
    /// The address is not one of this host's (or of the family of the id's binding).
    #[error("{0} is not an address of this host")]
    NotLocal(IpAddr),
    /// Source and destination are of different IP versions.
    #[error("cannot route from {local} to {remote}: different IP versions")]
    AddressFamily {
        /// The source.
        local: IpAddr,
        /// The destination.
        remote: IpAddr,
    },
    /// Private data longer than the message carries for the application.
    #[error("private data of {len} bytes is too long: {op} carries at most {max}")]
    PrivateDataTooLong {
        /// The call.
        op: &'static str,
        /// The length given.
        len: usize,
        /// The room.
        max: usize,
    },
    /// The port space cannot carry this QP type (TCP: RC only; UDP: UD only), or IPoIB.
    #[error("port space {ps:?} does not carry {qp_type:?} QPs")]
    QpType {
        /// The port space.
        ps: PortSpace,
        /// The QP type asked for.
        qp_type: xroce_transport::QpType,
    },
    /// An option that does not apply (ACK timeout on a UD id, AFONLY after bind, REUSEADDR
    /// off on a bound id or on a listener).
    #[error("option {0} cannot be set on this id now")]
    Option(&'static str),
    /// The id has no device: it is bound to no address of this port (or to the wildcard),
    /// which a multicast join needs (the kernel refuses an id without a device).
    #[error("{op} needs an rdma_cm id bound to an address of this port (it has no device)")]
    NoDevice {
        /// The call.
        op: &'static str,
    },
    /// A multicast join of an id that is not UD (Linux joins only UD ids).
    #[error("only UD rdma_cm ids join multicast groups, not {qp_type:?} ones")]
    McQpType {
        /// The id's QP type.
        qp_type: xroce_transport::QpType,
    },
    /// A multicast join of the unspecified address.
    #[error("{0} is no multicast group")]
    McZeroGroup(IpAddr),
    /// An IPv6 multicast group on RoCE v2, which Linux does not join (`ENOTSUPP`).
    #[error("IPv6 multicast group {0}: RoCE v2 joins IPv4 groups only")]
    McIpv6(IpAddr),
    /// A join key the id already uses.
    #[error("rdma_cm id {id} already has a multicast join {join}")]
    McJoinInUse {
        /// The id.
        id: IdHandle,
        /// The key.
        join: u32,
    },
    /// No join of the id has this key (left already, or never made).
    #[error("rdma_cm id {id} has no multicast join {join}")]
    McNotJoined {
        /// The id.
        id: IdHandle,
        /// The key.
        join: u32,
    },
    /// The connection manager refused the call.
    #[error(transparent)]
    Cm(#[from] CmError),
}

impl Error {
    /// The errno Linux returns for this failure.
    pub fn errno(&self) -> i32 {
        match self {
            Error::UnknownId(_) => ENOENT,
            Error::AddrInUse { .. } => EADDRINUSE,
            Error::WildcardConflict { .. } | Error::NoFreePort { .. } | Error::NotLocal(_) => {
                EADDRNOTAVAIL
            }
            Error::AddressFamily { .. } => EAFNOSUPPORT,
            Error::McIpv6(_) => ENOTSUPP,
            Error::McNotJoined { .. } => ENOENT,
            Error::Cm(CmError::AlreadyEstablished) => EISCONN,
            Error::InvalidState { .. }
            | Error::PrivateDataTooLong { .. }
            | Error::QpType { .. }
            | Error::Option(_)
            | Error::NoDevice { .. }
            | Error::McQpType { .. }
            | Error::McZeroGroup(_)
            | Error::McJoinInUse { .. }
            | Error::Cm(_) => EINVAL,
        }
    }
}
