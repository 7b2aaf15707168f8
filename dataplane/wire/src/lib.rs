//! RoCEv2 on the wire: Ethernet (with one optional 802.1Q tag), IPv4/IPv6, UDP and every
//! InfiniBand transport header RoCEv2 carries, as typed views over byte slices; the opcode
//! table; the ICRC; PSN arithmetic; GIDs, path MTUs and the UDP source port rule.
//!
//! This crate is the dataplane's dictionary of bytes. It never performs I/O, never allocates
//! (it is `no_std` and has no `alloc`), contains no `unsafe` code and never panics on any
//! input: malformed bytes come back as a [`ParseError`] that names what was wrong, and a
//! buffer that is too small for an emit comes back as an [`EmitError`].
//!
//! # Layers
//!
//! The crate follows smoltcp's `wire` module: one file per header, each with a `…Packet<T>`
//! view (byte ranges in a private `field` module, or a `zerocopy` struct where the header has
//! no bit fields) and a `…Repr` with `parse`/`emit`. On top of the headers sit two layers:
//!
//! - [`IbRepr`]: the InfiniBand transport part of a RoCEv2 packet, the UDP payload from the
//!   BTH to the ICRC. It knows nothing of L2–L4. [`IbRepr::parse`] returns the headers and the
//!   payload slice (pad and ICRC stripped); [`IbRepr::emit`] writes the headers and returns
//!   their length, so a sender can copy the payload straight after them.
//! - [`FrameRepr`] and [`Frame`]: the Ethernet/IP/UDP envelope. [`FrameRepr::emit`] fills in
//!   every L2–L4 header around an IB part already written in place, then the pad and the
//!   ICRC. [`Frame::parse`] takes a whole Ethernet frame apart and verifies the ICRC.
//!
//! The [`opcode`] table is the single place that knows which headers an opcode carries;
//! the rest of the code (here and in the transport) asks it instead of matching on opcodes.
//! [`peek`] reads the handful of fields congestion control needs on every packet without
//! taking the frame apart, and sets the ECN bits.
//! [`sack`] is xroce's own selective acknowledgement, carried after a NAK's AETH between
//! two xroce endpoints that agreed to selective repeat (never to a standard peer).
//!
//! Connection management travels inside that envelope as the payload of UD SENDs to QP1:
//! [`mad`] is the 256-byte management datagram and its header, [`cm`] the communication
//! manager's messages (REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR_REQ, SIDR_REP) and the IP
//! CM header rdma_cm puts in their private data ([`cm::ip_cm`]).
//!
//! # Receiving
//!
//! ```
//! use xroce_wire::{ExtHeader, Frame, ParseError};
//!
//! # let bytes: &[u8] = &[];
//! match Frame::parse(bytes) {
//!     Ok(frame) => {
//!         let info = frame.ib.info(); // ask the table, not the opcode number
//!         if info.is_request() && info.starts_message() {
//!             // Present exactly when the opcode carries a RETH.
//!             if let Some(reth) = frame.ib.reth {
//!                 let _ = (reth.va, reth.rkey, reth.dma_len, frame.payload);
//!             }
//!         }
//!         let _ = info.carries(ExtHeader::ImmDt);
//!     }
//!     Err(ParseError::IcrcMismatch { .. }) => { /* count: bad ICRC */ }
//!     Err(_other) => { /* count: malformed (the variant says what was wrong) */ }
//! }
//! ```
//!
//! # Sending, with the payload written in place
//!
//! ```
//! use xroce_wire::source_port::udp_source_port;
//! use xroce_wire::{BthRepr, EthernetAddress, Frame, FrameRepr, IbRepr, Opcode, Psn, Qpn};
//!
//! let (local_qp, remote_qp) = (Qpn::new(0x11), Qpn::new(0x12));
//! let envelope = FrameRepr::ipv4(
//!     EthernetAddress([2, 0, 0, 0, 0, 1]),
//!     EthernetAddress([2, 0, 0, 0, 0, 2]),
//!     [10, 77, 0, 1].into(),
//!     [10, 77, 0, 2].into(),
//!     udp_source_port(0, local_qp, remote_qp),
//! );
//! let mut bth = BthRepr::new(Opcode::RC_SEND_ONLY, remote_qp, Psn::new(0x58f05a));
//! bth.ack_request = true;
//! let ib = IbRepr::new(bth);
//!
//! let payload = b"hello, rxe"; // e.g. straight from a memory region
//! let mut frame = [0u8; 2048]; // e.g. a UMEM frame
//! let at = envelope.header_len();
//! let header_len = ib.emit(&mut frame[at..], payload.len())?;
//! frame[at + header_len..][..payload.len()].copy_from_slice(payload);
//! let len = envelope.emit(&mut frame, header_len + payload.len())?;
//!
//! let parsed = Frame::parse(&frame[..len]).unwrap();
//! assert_eq!(parsed.payload, payload);
//! # Ok::<(), xroce_wire::EmitError>(())
//! ```
//!
//! # Modules
//!
//! - The envelope: [`ethernet`] (with its 802.1Q tag), [`ipv4`], [`ipv6`], [`udp`] (and the
//!   private `checksum`, the one's complement sum IPv4 needs); [`frame`], the whole frame
//!   and the sender's template.
//! - The InfiniBand part: [`bth`]; the extension headers [`rdeth`], [`deth`], [`reth`],
//!   [`atomic_eth`], [`aeth`], [`atomic_ack_eth`], [`immdt`], [`ieth`]; [`cnp`], the
//!   RoCEv2 congestion notification; [`ib`], the headers an opcode carries, as one repr;
//!   [`opcode`], the table; [`icrc`].
//! - Numbers and names: [`identifiers`] (QPNs, keys, P_Keys), [`psn`], [`gid`], [`mtu`]
//!   (IB MTUs and the path MTU rule), [`source_port`] (the UDP source port rule).
//! - Connection management: [`mad`], [`cm`].
//! - The private `error`: [`ParseError`] and [`EmitError`], re-exported here.
//!
//! # Specifications
//!
//! InfiniBand Architecture Specification Volume 1 (IBTA), chapter 9 (transport layer),
//! chapter 12 (communication management), chapter 13 (management datagrams), Annex A3
//! (IP addressing for CM) and Annex A17 (RoCEv2); RFC 791 (IPv4), RFC 8200 (IPv6), RFC 768 (UDP), IEEE 802.1Q.
//! Where the specification leaves room, Linux Soft-RoCE (rxe) decides, and the code says so.
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(test)]
extern crate std;

/// Gives a zerocopy header struct `new_checked`/`new_checked_mut` constructors that report
/// a short buffer as [`ParseError::Truncated`], and checks its size at compile time.
macro_rules! zerocopy_header {
    ($ty:ident, $len:expr) => {
        const _: () = assert!(core::mem::size_of::<$ty>() == $len);

        impl $ty {
            /// A view of the header at the start of `bytes`.
            pub fn new_checked(bytes: &[u8]) -> Result<&$ty, crate::ParseError> {
                match <$ty as zerocopy::FromBytes>::ref_from_prefix(bytes) {
                    Ok((header, _)) => Ok(header),
                    Err(_) => Err(crate::ParseError::Truncated {
                        layer: crate::Layer::ExtHeaders,
                        needed: $len,
                        available: bytes.len(),
                    }),
                }
            }

            /// A mutable view of the header at the start of `bytes`.
            pub fn new_checked_mut(bytes: &mut [u8]) -> Result<&mut $ty, crate::ParseError> {
                let available = bytes.len();
                match <$ty as zerocopy::FromBytes>::mut_from_prefix(bytes) {
                    Ok((header, _)) => Ok(header),
                    Err(_) => Err(crate::ParseError::Truncated {
                        layer: crate::Layer::ExtHeaders,
                        needed: $len,
                        available,
                    }),
                }
            }
        }
    };
}
pub(crate) use zerocopy_header;

pub mod aeth;
pub mod atomic_ack_eth;
pub mod atomic_eth;
pub mod bth;
mod checksum;
pub mod cm;
pub mod cnp;
pub mod deth;
mod error;
pub mod ethernet;
pub mod frame;
pub mod gid;
pub mod ib;
pub mod icrc;
pub mod identifiers;
pub mod ieth;
pub mod immdt;
pub mod ipv4;
pub mod ipv6;
pub mod mad;
pub mod mtu;
pub mod opcode;
pub mod peek;
pub mod psn;
pub mod rdeth;
pub mod reth;
pub mod sack;
pub mod source_port;
pub mod udp;

pub use aeth::{AethPacket, AethRepr, NakCode, RnrTimer, Syndrome};
pub use atomic_ack_eth::{AtomicAckEth, AtomicAckEthRepr};
pub use atomic_eth::{AtomicEth, AtomicEthRepr};
pub use bth::{BthPacket, BthRepr};
pub use cm::{
    AttributeId, CmMad, CmMessage, CommId, Guid, MsgResponse, PortSpace, RejectReason, ServiceId,
    SidrStatus, TransportServiceType,
};
pub use cnp::CnpRepr;
pub use deth::{DethPacket, DethRepr};
pub use error::{EmitError, Layer, ParseError};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, VlanTag};
pub use frame::{Frame, FrameRepr, FrameTemplate, IpRepr, MAX_HEADER_LEN};
pub use gid::Gid;
pub use ib::IbRepr;
pub use identifiers::{Pkey, Qkey, Qpn, Rkey};
pub use ieth::{Ieth, IethRepr};
pub use immdt::{ImmDt, ImmDtRepr};
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use ipv6::{Ipv6Packet, Ipv6Repr};
pub use mad::{MadPacket, MadRepr, Method, MgmtClass};
pub use mtu::{IbMtu, IpVersion};
pub use opcode::{ExtHeader, Opcode, OpcodeFlags, OpcodeInfo, Operation, Position, Transport};
pub use psn::Psn;
pub use rdeth::{RdethPacket, RdethRepr};
pub use reth::{Reth, RethRepr};
pub use sack::{MAX_SACK_RANGES, SackRepr};
pub use udp::{ROCE_V2_UDP_PORT, UdpChecksum, UdpPacket, UdpRepr};

/// Length of the invariant CRC that ends every RoCEv2 packet (IBTA 7.8).
pub const ICRC_LEN: usize = 4;
