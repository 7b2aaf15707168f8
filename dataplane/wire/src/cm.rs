//! Communication management messages (IBTA chapter 12): the REQ/REP/RTU handshake, its
//! MRA and REJ, the DREQ/DREP disconnect, and service ID resolution (SIDR) for UD, each
//! carried as the 232 bytes of data of a MAD of class 0x07 version 2, method Send
//! ([`crate::mad`]). The attribute ID of the MAD says which message the data holds.
//!
//! One module per message, each a view over the 232 bytes plus a `Repr` with
//! `parse`/`emit` ([`ReqPacket`]/[`ReqRepr`] and so on), and [`CmMad`] over the whole MAD.
//! Every field the specification defines is there, bit fields included; reserved bits are
//! ignored on receive and sent as zero. Private data is a slice: parsed, it is the whole
//! field (the specification has no length for it); emitted, the given bytes followed by
//! zeros up to the field's size.
//!
//! rdma_cm adds two things on top, both here: the service ID of an IP port
//! ([`ServiceId::rdma_cm`]) and the IP CM header at the start of REQ and SIDR_REQ private
//! data ([`ip_cm`]).
//!
//! Field layouts are those of IBTA 12.6 as the Linux kernel declares them
//! (`include/rdma/ibta_vol1_c12.h`); the fixtures are the 15 CM MADs of the rxe captures.

use core::fmt;

use crate::error::{EmitError, Layer, ParseError};
use crate::mad::{self, MadPacket, MadRepr, Method, MgmtClass};

mod drep;
mod dreq;
mod fields;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod ip_cm;
mod mra;
mod path;
mod rej;
mod rep;
mod req;
mod rtu;
mod sidr_rep;
mod sidr_req;

pub use drep::{DrepPacket, DrepRepr, PRIVATE_DATA_LEN as DREP_PRIVATE_DATA_LEN};
pub use dreq::{DreqPacket, DreqRepr, PRIVATE_DATA_LEN as DREQ_PRIVATE_DATA_LEN};
pub use ip_cm::{IpCmPacket, IpCmRepr};
pub use mra::{MraPacket, MraRepr, PRIVATE_DATA_LEN as MRA_PRIVATE_DATA_LEN};
pub use path::{CmPath, CmPathPacket, PATH_LEN};
pub use rej::{ARI_LEN, PRIVATE_DATA_LEN as REJ_PRIVATE_DATA_LEN, RejPacket, RejRepr};
pub use rep::{PRIVATE_DATA_LEN as REP_PRIVATE_DATA_LEN, RepPacket, RepRepr};
pub use req::{PRIVATE_DATA_LEN as REQ_PRIVATE_DATA_LEN, ReqPacket, ReqRepr};
pub use rtu::{PRIVATE_DATA_LEN as RTU_PRIVATE_DATA_LEN, RtuPacket, RtuRepr};
pub use sidr_rep::{
    INFO_LEN as SIDR_REP_INFO_LEN, PRIVATE_DATA_LEN as SIDR_REP_PRIVATE_DATA_LEN, SidrRepPacket,
    SidrRepRepr,
};
pub use sidr_req::{PRIVATE_DATA_LEN as SIDR_REQ_PRIVATE_DATA_LEN, SidrReqPacket, SidrReqRepr};

/// Length of the CM message data behind the MAD header.
pub const DATA_LEN: usize = mad::DATA_LEN;

/// Checks that a CM message view has its 232 bytes.
fn check_len(available: usize) -> Result<(), ParseError> {
    if available < DATA_LEN {
        Err(ParseError::Truncated {
            layer: Layer::Cm,
            needed: DATA_LEN,
            available,
        })
    } else {
        Ok(())
    }
}

/// The attribute IDs of the CM class (IBTA 12.6.1, table 104).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AttributeId(pub u16);

impl AttributeId {
    /// ClassPortInfo (Get/Set; not a connection message).
    pub const CLASS_PORT_INFO: AttributeId = AttributeId(0x0001);
    /// ConnectRequest.
    pub const REQ: AttributeId = AttributeId(0x0010);
    /// MessageReceiptAcknowledgement.
    pub const MRA: AttributeId = AttributeId(0x0011);
    /// ConnectReject.
    pub const REJ: AttributeId = AttributeId(0x0012);
    /// ConnectReply.
    pub const REP: AttributeId = AttributeId(0x0013);
    /// ReadyToUse.
    pub const RTU: AttributeId = AttributeId(0x0014);
    /// DisconnectRequest.
    pub const DREQ: AttributeId = AttributeId(0x0015);
    /// DisconnectReply.
    pub const DREP: AttributeId = AttributeId(0x0016);
    /// ServiceIDResolutionRequest.
    pub const SIDR_REQ: AttributeId = AttributeId(0x0017);
    /// ServiceIDResolutionResponse.
    pub const SIDR_REP: AttributeId = AttributeId(0x0018);
    /// LoadAlternatePath (refused on RoCE by Linux, and here).
    pub const LAP: AttributeId = AttributeId(0x0019);
    /// AlternatePathResponse (refused on RoCE by Linux, and here).
    pub const APR: AttributeId = AttributeId(0x001a);
}

/// A communication ID (IBTA 12.6.2): each end names its side of a connection with one;
/// 0 means "not known yet".
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct CommId(pub u32);

impl fmt::Debug for CommId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CommId({:#010x})", self.0)
    }
}

impl fmt::Display for CommId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#010x}", self.0)
    }
}

/// A channel adapter's (node) GUID, the EUI-64 a CM names its end of a connection by.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Guid(pub u64);

impl fmt::Debug for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Guid({self})")
    }
}

impl fmt::Display for Guid {
    /// Formats as `ibv_devinfo` does: `5054:00ff:fe77:0003`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        write!(
            f,
            "{:04x}:{:04x}:{:04x}:{:04x}",
            v >> 48,
            (v >> 32) & 0xffff,
            (v >> 16) & 0xffff,
            v & 0xffff
        )
    }
}

/// An rdma_cm port space (`enum rdma_ucm_port_space`): which "protocol" an IP port number
/// belongs to. Each has its own ports, like TCP and UDP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u16)]
pub enum PortSpace {
    /// IPoIB (`RDMA_PS_IPOIB`).
    Ipoib = 0x0002,
    /// Reliable connected (`RDMA_PS_TCP`).
    Tcp = 0x0106,
    /// Unreliable datagram (`RDMA_PS_UDP`).
    Udp = 0x0111,
    /// Any QP type (`RDMA_PS_IB`).
    Ib = 0x013f,
}

impl PortSpace {
    /// The port space of a `RDMA_PS_*` value.
    pub const fn from_raw(raw: u16) -> Option<PortSpace> {
        match raw {
            0x0002 => Some(PortSpace::Ipoib),
            0x0106 => Some(PortSpace::Tcp),
            0x0111 => Some(PortSpace::Udp),
            0x013f => Some(PortSpace::Ib),
            _ => None,
        }
    }
}

/// A service ID (IBTA 12.6.5 and Annex A3): what a REQ or SIDR_REQ asks to connect to.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ServiceId(pub u64);

impl ServiceId {
    /// The prefix of the service IDs rdma_cm gives IP ports of its TCP, UDP and IB port
    /// spaces (IBTA Annex A3.2, "IP-based connection management"): `0x0000_0000_01`, then
    /// the protocol byte, then the port.
    pub const RDMA_CM_PREFIX: u64 = 0x0000_0000_0100_0000;

    /// The service ID of an IP port in an rdma_cm port space: `ps << 16 | port`, as Linux's
    /// `rdma_get_service_id` forms it. For TCP, UDP and IB this is
    /// `0x0000000001000000 | protocol << 16 | port` (the captures show 0x0000000001061c06
    /// for rping's TCP port 7174); IPoIB's has no `01` byte.
    pub const fn rdma_cm(ps: PortSpace, port: u16) -> ServiceId {
        ServiceId(((ps as u64) << 16) | port as u64)
    }

    /// The port space and port of an rdma_cm service ID, `None` if the ID is not of that
    /// form (nothing above bit 31, a known port space in bits 31..16).
    pub const fn to_rdma_cm(self) -> Option<(PortSpace, u16)> {
        if self.0 >> 32 != 0 {
            return None;
        }
        match PortSpace::from_raw((self.0 >> 16) as u16) {
            Some(ps) => Some((ps, self.0 as u16)),
            None => None,
        }
    }
}

impl fmt::Debug for ServiceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ServiceId({:#018x})", self.0)
    }
}

impl fmt::Display for ServiceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#018x}", self.0)
    }
}

/// Which message an MRA acknowledges or a REJ rejects (IBTA 12.6.6/12.6.7: "Message
/// MRAed", "Message REJected").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MsgResponse(pub u8);

impl MsgResponse {
    /// The REQ.
    pub const REQ: MsgResponse = MsgResponse(0);
    /// The REP.
    pub const REP: MsgResponse = MsgResponse(1);
    /// Something else (a LAP, or a REJ sent outside the handshake).
    pub const OTHER: MsgResponse = MsgResponse(2);
}

/// The transport service type of a REQ (IBTA 12.6.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TransportServiceType(pub u8);

impl TransportServiceType {
    /// Reliable connection.
    pub const RC: TransportServiceType = TransportServiceType(0);
    /// Unreliable connection.
    pub const UC: TransportServiceType = TransportServiceType(1);
    /// Reliable datagram.
    pub const RD: TransportServiceType = TransportServiceType(2);
    /// The value that defers to the extended transport type (XRC).
    pub const EXTENDED: TransportServiceType = TransportServiceType(3);
}

/// A REJ's reason (IBTA 12.6.7.2, table 107).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RejectReason(pub u16);

macro_rules! reasons {
    ($($name:ident = $value:expr, $text:literal;)*) => {
        impl RejectReason {
            $(
                #[doc = concat!("Reason ", stringify!($value), ": ", $text, ".")]
                pub const $name: RejectReason = RejectReason($value);
            )*

            /// The reason's name as the Linux CM prints it (`ibcm_reject_msg`), `None` for
            /// a value the specification does not define.
            pub const fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($value => Some($text),)*
                    _ => None,
                }
            }
        }
    };
}

reasons! {
    NO_QP = 1, "no QP";
    NO_EEC = 2, "no EEC";
    NO_RESOURCES = 3, "no resources";
    TIMEOUT = 4, "timeout";
    UNSUPPORTED = 5, "unsupported";
    INVALID_COMM_ID = 6, "invalid comm ID";
    INVALID_COMM_INSTANCE = 7, "invalid comm instance";
    INVALID_SERVICE_ID = 8, "invalid service ID";
    INVALID_TRANSPORT_TYPE = 9, "invalid transport type";
    STALE_CONN = 10, "stale conn";
    RDC_NOT_EXIST = 11, "RDC not exist";
    INVALID_GID = 12, "invalid GID";
    INVALID_LID = 13, "invalid LID";
    INVALID_SL = 14, "invalid SL";
    INVALID_TRAFFIC_CLASS = 15, "invalid traffic class";
    INVALID_HOP_LIMIT = 16, "invalid hop limit";
    INVALID_PACKET_RATE = 17, "invalid packet rate";
    INVALID_ALT_GID = 18, "invalid alt GID";
    INVALID_ALT_LID = 19, "invalid alt LID";
    INVALID_ALT_SL = 20, "invalid alt SL";
    INVALID_ALT_TRAFFIC_CLASS = 21, "invalid alt traffic class";
    INVALID_ALT_HOP_LIMIT = 22, "invalid alt hop limit";
    INVALID_ALT_PACKET_RATE = 23, "invalid alt packet rate";
    PORT_CM_REDIRECT = 24, "port CM redirect";
    PORT_REDIRECT = 25, "port redirect";
    INVALID_MTU = 26, "invalid MTU";
    INSUFFICIENT_RESP_RESOURCES = 27, "insufficient resp resources";
    CONSUMER_DEFINED = 28, "consumer defined";
    INVALID_RNR_RETRY = 29, "invalid RNR retry";
    DUPLICATE_LOCAL_COMM_ID = 30, "duplicate local comm ID";
    INVALID_CLASS_VERSION = 31, "invalid class version";
    INVALID_FLOW_LABEL = 32, "invalid flow label";
    INVALID_ALT_FLOW_LABEL = 33, "invalid alt flow label";
    VENDOR_OPTION_NOT_SUPPORTED = 35, "vendor option not supported";
}

/// A SIDR_REP's status (IBTA 12.11.2, table 119).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SidrStatus(pub u8);

impl SidrStatus {
    /// The QP and Q_Key are valid.
    pub const SUCCESS: SidrStatus = SidrStatus(0);
    /// No service behind the service ID.
    pub const UNSUPPORTED: SidrStatus = SidrStatus(1);
    /// The service rejected the request.
    pub const REJECT: SidrStatus = SidrStatus(2);
    /// No QP available.
    pub const NO_QP: SidrStatus = SidrStatus(3);
    /// Ask another port (the additional information says which).
    pub const REDIRECT: SidrStatus = SidrStatus(4);
    /// The class version is not supported.
    pub const UNSUPPORTED_VERSION: SidrStatus = SidrStatus(5);
}

/// A CM message: the data of a CM MAD, parsed by its attribute ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmMessage<'a> {
    /// ConnectRequest.
    Req(ReqRepr<'a>),
    /// MessageReceiptAcknowledgement.
    Mra(MraRepr<'a>),
    /// ConnectReject.
    Rej(RejRepr<'a>),
    /// ConnectReply.
    Rep(RepRepr<'a>),
    /// ReadyToUse.
    Rtu(RtuRepr<'a>),
    /// DisconnectRequest.
    Dreq(DreqRepr<'a>),
    /// DisconnectReply.
    Drep(DrepRepr<'a>),
    /// ServiceIDResolutionRequest.
    SidrReq(SidrReqRepr<'a>),
    /// ServiceIDResolutionResponse.
    SidrRep(SidrRepRepr<'a>),
}

impl<'a> CmMessage<'a> {
    /// The attribute ID the message travels under.
    pub const fn attribute_id(&self) -> AttributeId {
        match self {
            CmMessage::Req(_) => AttributeId::REQ,
            CmMessage::Mra(_) => AttributeId::MRA,
            CmMessage::Rej(_) => AttributeId::REJ,
            CmMessage::Rep(_) => AttributeId::REP,
            CmMessage::Rtu(_) => AttributeId::RTU,
            CmMessage::Dreq(_) => AttributeId::DREQ,
            CmMessage::Drep(_) => AttributeId::DREP,
            CmMessage::SidrReq(_) => AttributeId::SIDR_REQ,
            CmMessage::SidrRep(_) => AttributeId::SIDR_REP,
        }
    }

    /// Parses the 232 bytes of CM data of a MAD with this attribute ID.
    pub fn parse(attribute_id: AttributeId, data: &'a [u8]) -> Result<CmMessage<'a>, ParseError> {
        Ok(match attribute_id {
            AttributeId::REQ => CmMessage::Req(ReqRepr::parse(&ReqPacket::new_checked(data)?)),
            AttributeId::MRA => CmMessage::Mra(MraRepr::parse(&MraPacket::new_checked(data)?)),
            AttributeId::REJ => CmMessage::Rej(RejRepr::parse(&RejPacket::new_checked(data)?)),
            AttributeId::REP => CmMessage::Rep(RepRepr::parse(&RepPacket::new_checked(data)?)),
            AttributeId::RTU => CmMessage::Rtu(RtuRepr::parse(&RtuPacket::new_checked(data)?)),
            AttributeId::DREQ => CmMessage::Dreq(DreqRepr::parse(&DreqPacket::new_checked(data)?)),
            AttributeId::DREP => CmMessage::Drep(DrepRepr::parse(&DrepPacket::new_checked(data)?)),
            AttributeId::SIDR_REQ => {
                CmMessage::SidrReq(SidrReqRepr::parse(&SidrReqPacket::new_checked(data)?))
            }
            AttributeId::SIDR_REP => {
                CmMessage::SidrRep(SidrRepRepr::parse(&SidrRepPacket::new_checked(data)?))
            }
            AttributeId(other) => return Err(ParseError::CmAttribute(other)),
        })
    }

    /// Writes the message into the 232 bytes of CM data (every byte of them).
    pub fn emit(&self, data: &mut [u8]) -> Result<(), EmitError> {
        if data.len() < DATA_LEN {
            return Err(EmitError::BufferTooSmall {
                needed: DATA_LEN,
                available: data.len(),
            });
        }
        match self {
            CmMessage::Req(r) => r.emit(&mut ReqPacket::new_unchecked(data)),
            CmMessage::Mra(r) => r.emit(&mut MraPacket::new_unchecked(data)),
            CmMessage::Rej(r) => r.emit(&mut RejPacket::new_unchecked(data)),
            CmMessage::Rep(r) => r.emit(&mut RepPacket::new_unchecked(data)),
            CmMessage::Rtu(r) => r.emit(&mut RtuPacket::new_unchecked(data)),
            CmMessage::Dreq(r) => r.emit(&mut DreqPacket::new_unchecked(data)),
            CmMessage::Drep(r) => r.emit(&mut DrepPacket::new_unchecked(data)),
            CmMessage::SidrReq(r) => r.emit(&mut SidrReqPacket::new_unchecked(data)),
            CmMessage::SidrRep(r) => r.emit(&mut SidrRepPacket::new_unchecked(data)),
        }
    }
}

/// A whole CM MAD: the transaction ID and attribute modifier of its header, and the
/// message. The rest of the header is fixed for the CM class (class 0x07 version 2,
/// method Send, status 0, class-specific 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmMad<'a> {
    /// The transaction ID: the initiator's, echoed by every answer.
    pub transaction_id: u64,
    /// The attribute modifier (the ECE options of Linux; 0 from rxe).
    pub attribute_modifier: u32,
    /// The message.
    pub message: CmMessage<'a>,
}

impl<'a> CmMad<'a> {
    /// Parses a 256-byte MAD as a CM message.
    ///
    /// Errors: fewer than 256 bytes; base version not 1; not the CM class version 2; a
    /// method other than Send; an attribute that is not one of the nine messages. Status
    /// and class-specific fields are not checked (the Linux CM does not either).
    pub fn parse(bytes: &'a [u8]) -> Result<CmMad<'a>, ParseError> {
        let packet = MadPacket::new_checked(bytes)?;
        let header = MadRepr::parse(&packet)?;
        if header.mgmt_class != MgmtClass::CM || header.class_version != mad::CM_CLASS_VERSION {
            return Err(ParseError::NotCm {
                class: header.mgmt_class.0,
                version: header.class_version,
            });
        }
        if header.method != Method::SEND {
            return Err(ParseError::CmMethod(header.method.0));
        }
        let data = &bytes[mad::HEADER_LEN..mad::MAD_LEN];
        let message = CmMessage::parse(AttributeId(header.attribute_id), data)?;
        Ok(CmMad {
            transaction_id: header.transaction_id,
            attribute_modifier: header.attribute_modifier,
            message,
        })
    }

    /// The MAD header this message travels with.
    pub fn header(&self) -> MadRepr {
        let mut h = MadRepr::cm(self.message.attribute_id().0, self.transaction_id);
        h.attribute_modifier = self.attribute_modifier;
        h
    }

    /// Writes the 256 bytes of the MAD (every one of them) and returns 256.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EmitError> {
        if buf.len() < mad::MAD_LEN {
            return Err(EmitError::BufferTooSmall {
                needed: mad::MAD_LEN,
                available: buf.len(),
            });
        }
        let buf = &mut buf[..mad::MAD_LEN];
        self.message.emit(&mut buf[mad::HEADER_LEN..])?;
        self.header().emit(&mut MadPacket::new_unchecked(buf));
        Ok(mad::MAD_LEN)
    }

    /// The 256 bytes of the MAD.
    pub fn to_bytes(&self) -> Result<[u8; mad::MAD_LEN], EmitError> {
        let mut b = [0u8; mad::MAD_LEN];
        self.emit(&mut b)?;
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{ALL, XorShift};
    use super::*;

    #[test]
    fn every_captured_mad_parses_and_emits_byte_for_byte() {
        for (name, bytes) in ALL {
            let mad = CmMad::parse(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut out = [0xa5u8; 256];
            assert_eq!(mad.emit(&mut out), Ok(256), "{name}");
            assert_eq!(&out, bytes, "{name}");
        }
    }

    #[test]
    fn service_ids_of_rdma_cm_ports() {
        // rping's port 7174 and perftest's 18515 in the captured REQs.
        assert_eq!(
            ServiceId::rdma_cm(PortSpace::Tcp, 7174),
            ServiceId(0x0000_0000_0106_1c06)
        );
        assert_eq!(
            ServiceId::rdma_cm(PortSpace::Tcp, 18515),
            ServiceId(0x0000_0000_0106_4853)
        );
        assert_eq!(
            ServiceId::rdma_cm(PortSpace::Udp, 1),
            ServiceId(0x0000_0000_0111_0001)
        );
        assert_eq!(
            ServiceId::rdma_cm(PortSpace::Ib, 0xffff),
            ServiceId(0x0000_0000_013f_ffff)
        );
        for ps in [PortSpace::Tcp, PortSpace::Udp, PortSpace::Ib] {
            let sid = ServiceId::rdma_cm(ps, 4791);
            assert_eq!(sid.0 & 0xffff_ffff_ff00_0000, ServiceId::RDMA_CM_PREFIX);
            assert_eq!(sid.to_rdma_cm(), Some((ps, 4791)));
        }
        assert_eq!(
            ServiceId::rdma_cm(PortSpace::Ipoib, 1),
            ServiceId(0x0000_0000_0002_0001)
        );
        assert_eq!(
            ServiceId(0x0000_0000_0002_0001).to_rdma_cm(),
            Some((PortSpace::Ipoib, 1))
        );
        assert_eq!(ServiceId(0x0000_0001_0106_1c06).to_rdma_cm(), None);
        assert_eq!(ServiceId(0x0000_0000_0107_1c06).to_rdma_cm(), None);
    }

    #[test]
    fn names_and_formats() {
        assert_eq!(
            RejectReason::CONSUMER_DEFINED.name(),
            Some("consumer defined")
        );
        assert_eq!(RejectReason(34).name(), None);
        assert_eq!(
            std::format!("{}", Guid(0x5054_00ff_fe77_0003)),
            "5054:00ff:fe77:0003"
        );
        assert_eq!(std::format!("{}", CommId(0xaad7_e16b)), "0xaad7e16b");
    }

    #[test]
    fn header_errors_name_what_is_wrong() {
        let (_, req) = ALL[0];
        let mut b = *req;
        b[1] = 0x03;
        assert_eq!(
            CmMad::parse(&b),
            Err(ParseError::NotCm {
                class: 3,
                version: 2
            })
        );
        let mut b = *req;
        b[2] = 1;
        assert_eq!(
            CmMad::parse(&b),
            Err(ParseError::NotCm {
                class: 7,
                version: 1
            })
        );
        let mut b = *req;
        b[3] = 0x81;
        assert_eq!(CmMad::parse(&b), Err(ParseError::CmMethod(0x81)));
        for attr in [0x0001u16, 0x0019, 0x001a, 0x0020, 0xffff] {
            let mut b = *req;
            b[16..18].copy_from_slice(&attr.to_be_bytes());
            assert_eq!(CmMad::parse(&b), Err(ParseError::CmAttribute(attr)));
        }
        assert!(matches!(
            CmMad::parse(&req[..100]),
            Err(ParseError::Truncated {
                layer: Layer::Mad,
                ..
            })
        ));
        assert_eq!(
            CmMessage::parse(AttributeId::REQ, &req[24..255]),
            Err(ParseError::Truncated {
                layer: Layer::Cm,
                needed: 232,
                available: 231
            })
        );
    }

    #[test]
    fn random_bytes_never_panic_and_what_parses_round_trips() {
        let mut rng = XorShift(0x1234_5678_9abc_def1);
        let mut parsed = 0;
        for i in 0..20_000u32 {
            let mut b = [0u8; 256];
            rng.fill(&mut b);
            // Make most inputs reach the message parsers.
            if i % 4 != 0 {
                b[..4].copy_from_slice(&[1, 7, 2, 3]);
                b[16] = 0;
                b[17] = 0x10 + (i % 10) as u8;
            }
            let len = if i % 7 == 0 {
                (i as usize * 13) % 257
            } else {
                256
            };
            let Ok(mad) = CmMad::parse(&b[..len]) else {
                continue;
            };
            parsed += 1;
            let mut out = [0xa5u8; 256];
            mad.emit(&mut out).unwrap();
            // Reserved bits are zero after emit; parsing again gives the same message.
            assert_eq!(CmMad::parse(&out), Ok(mad));
        }
        assert!(parsed > 10_000, "only {parsed} inputs parsed");
    }

    #[test]
    fn emit_refuses_small_buffers() {
        let mad = CmMad::parse(ALL[0].1).unwrap();
        let mut small = [0u8; 255];
        assert_eq!(
            mad.emit(&mut small),
            Err(EmitError::BufferTooSmall {
                needed: 256,
                available: 255
            })
        );
        assert_eq!(
            mad.message.emit(&mut small[..231]),
            Err(EmitError::BufferTooSmall {
                needed: 232,
                available: 231
            })
        );
    }
}
