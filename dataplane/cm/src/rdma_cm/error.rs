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
            Error::Cm(CmError::AlreadyEstablished) => EISCONN,
            Error::InvalidState { .. }
            | Error::PrivateDataTooLong { .. }
            | Error::QpType { .. }
            | Error::Option(_)
            | Error::Cm(_) => EINVAL,
        }
    }
}
