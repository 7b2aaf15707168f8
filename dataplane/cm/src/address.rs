//! Where MADs come from and go to. The CM sees a peer as its QP1 behind an IP address;
//! wrapping a MAD in BTH (UD SEND Only, dest QP 1) and DETH (Q_Key 0x80010000, source
//! QP 1), and resolving the next hop, is the engine's work.

use std::net::IpAddr;

use xroce_wire::Qpn;
use xroce_wire::mad::{GSI_QPN, MAD_LEN};

/// Whether a bound address stands for every address of the host, as the kernel's
/// `cma_any_addr` has it: the wildcard (`0.0.0.0`, `::`) and the loopback addresses
/// (`127.0.0.0/8`, `::1`). An id bound to `127.0.0.1` has no device, takes connection
/// requests for any of the host's addresses when it listens, and conflicts with every
/// other bind of its port, as the wildcard does (libfabric's verbs provider binds a
/// passive endpoint given no address to `localhost`).
pub fn is_any(ip: IpAddr) -> bool {
    ip.is_unspecified() || ip.is_loopback()
}

/// The QP1 endpoint of a peer: where a MAD came from, or where one goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MadAddress {
    /// This host's IP address: the destination of a received MAD, the source of a sent one.
    pub local: IpAddr,
    /// The peer's IP address.
    pub remote: IpAddr,
    /// The peer's QP for CM MADs (a received MAD's source QP: 1).
    pub remote_qpn: Qpn,
    /// The P_Key index the MAD came in with or goes out with (0: P_Key 0xFFFF).
    pub pkey_index: u16,
}

impl MadAddress {
    /// The QP1 of `remote`, seen from `local`, in the default partition.
    pub const fn new(local: IpAddr, remote: IpAddr) -> MadAddress {
        MadAddress {
            local,
            remote,
            remote_qpn: GSI_QPN,
            pkey_index: 0,
        }
    }
}

/// A MAD to send: its 256 bytes and where they go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// The destination.
    pub to: MadAddress,
    /// The MAD.
    pub mad: [u8; MAD_LEN],
}
