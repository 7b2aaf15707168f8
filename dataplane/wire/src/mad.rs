//! Management datagrams (IBTA 13.4): the 256-byte messages of the general services QP (QP1),
//! and their 24-byte common header. The communication manager's messages ([`crate::cm`])
//! travel as the data of MADs of class 0x07.
//!
//! ```text
//!  byte 0         1           2             3          4..6     6..8            8..16
//! | BaseVersion | MgmtClass | ClassVersion | R Method | Status | ClassSpecific | TransactionID |
//!  16..18        18..20   20..24
//! | AttributeID | resv16 | AttributeModifier |  data (232 bytes)
//! ```
//!
//! On RoCEv2 a MAD is the payload of a UD SEND Only packet to QP1 ([`GSI_QPN`]) with the
//! well-known Q_Key [`GSI_QKEY`] in its DETH; the payload is exactly [`MAD_LEN`] bytes
//! (IBTA 13.4.2). Wrapping it in BTH and DETH is the sender's business; this module only
//! knows the 256 bytes. The reserved field is ignored on receive and sent as zero.

use crate::error::{Layer, ParseError};
use crate::identifiers::{Qkey, Qpn};

mod field {
    use core::ops::Range;

    pub(super) const BASE_VERSION: usize = 0;
    pub(super) const MGMT_CLASS: usize = 1;
    pub(super) const CLASS_VERSION: usize = 2;
    pub(super) const METHOD: usize = 3;
    pub(super) const STATUS: Range<usize> = 4..6;
    pub(super) const CLASS_SPECIFIC: Range<usize> = 6..8;
    pub(super) const TID: Range<usize> = 8..16;
    pub(super) const ATTR_ID: Range<usize> = 16..18;
    pub(super) const RESV: Range<usize> = 18..20;
    pub(super) const ATTR_MOD: Range<usize> = 20..24;
    pub(super) const DATA: Range<usize> = 24..256;
}

/// Length of the MAD common header.
pub const HEADER_LEN: usize = 24;
/// Length of a MAD (IBTA 13.4.2): a UD payload to or from QP1 is exactly this long.
pub const MAD_LEN: usize = 256;
/// Length of the data behind the common header.
pub const DATA_LEN: usize = MAD_LEN - HEADER_LEN;
/// The only MAD base version this crate speaks (IBTA 13.4.3).
pub const BASE_VERSION: u8 = 1;
/// The general services QP, where CM MADs are sent (IBTA 13.5.1).
pub const GSI_QPN: Qpn = Qpn::GSI;
/// The Q_Key of the general services QP (IBTA 13.5.1): every CM MAD carries it in its DETH.
pub const GSI_QKEY: Qkey = Qkey::GSI;

/// A management class (IBTA 13.4.4, table 152).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MgmtClass(pub u8);

impl MgmtClass {
    /// Subnet management, LID routed.
    pub const SUBN_LID_ROUTED: MgmtClass = MgmtClass(0x01);
    /// Subnet administration.
    pub const SUBN_ADM: MgmtClass = MgmtClass(0x03);
    /// Performance management.
    pub const PERF_MGMT: MgmtClass = MgmtClass(0x04);
    /// Communication management (IBTA chapter 12).
    pub const CM: MgmtClass = MgmtClass(0x07);
}

/// A MAD method (IBTA 13.4.5, table 153): the low 7 bits of byte 3; the top bit says that
/// the MAD is a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Method(pub u8);

impl Method {
    /// Get.
    pub const GET: Method = Method(0x01);
    /// Set.
    pub const SET: Method = Method(0x02);
    /// Send: a datagram that is not a request or a response. Every CM message uses it.
    pub const SEND: Method = Method(0x03);
    /// The response to a Get.
    pub const GET_RESP: Method = Method(0x81);
    /// The bit that marks a response.
    pub const RESPONSE: u8 = 0x80;

    /// Whether the response bit is set.
    pub const fn is_response(self) -> bool {
        self.0 & Method::RESPONSE != 0
    }
}

/// The class version of the communication management class (IBTA 12.6.1).
pub const CM_CLASS_VERSION: u8 = 2;

/// A view of a MAD over a byte buffer.
#[derive(Debug, Clone)]
pub struct MadPacket<T: AsRef<[u8]>> {
    buffer: T,
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

impl<T: AsRef<[u8]>> MadPacket<T> {
    /// Wraps `buffer` without checking its length; accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> MadPacket<T> {
        MadPacket { buffer }
    }

    /// Wraps `buffer` after checking that it holds a whole MAD (256 bytes). Bytes beyond
    /// the 256th are not part of the MAD and are never read.
    pub fn new_checked(buffer: T) -> Result<MadPacket<T>, ParseError> {
        let available = buffer.as_ref().len();
        if available < MAD_LEN {
            return Err(ParseError::Truncated {
                layer: Layer::Mad,
                needed: MAD_LEN,
                available,
            });
        }
        Ok(MadPacket { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Base version (1).
    pub fn base_version(&self) -> u8 {
        self.buffer.as_ref()[field::BASE_VERSION]
    }

    /// Management class.
    pub fn mgmt_class(&self) -> MgmtClass {
        MgmtClass(self.buffer.as_ref()[field::MGMT_CLASS])
    }

    /// Class version.
    pub fn class_version(&self) -> u8 {
        self.buffer.as_ref()[field::CLASS_VERSION]
    }

    /// Method, with the response bit.
    pub fn method(&self) -> Method {
        Method(self.buffer.as_ref()[field::METHOD])
    }

    /// Status (IBTA 13.4.7); 0 in every CM message.
    pub fn status(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::STATUS])
    }

    /// Class-specific field; 0 for the CM class.
    pub fn class_specific(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::CLASS_SPECIFIC])
    }

    /// Transaction ID: chosen by the initiator of an exchange, echoed by every answer.
    pub fn transaction_id(&self) -> u64 {
        let b = &self.buffer.as_ref()[field::TID];
        u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }

    /// Attribute ID: for the CM class, which message the data holds.
    pub fn attribute_id(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::ATTR_ID])
    }

    /// Attribute modifier. The Linux CM carries the ECE options of REQ and REP here
    /// (0 from rxe).
    pub fn attribute_modifier(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::ATTR_MOD];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The 232 bytes of data behind the header.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> MadPacket<T> {
    /// Sets the base version.
    pub fn set_base_version(&mut self, version: u8) {
        self.buffer.as_mut()[field::BASE_VERSION] = version;
    }

    /// Sets the management class.
    pub fn set_mgmt_class(&mut self, class: MgmtClass) {
        self.buffer.as_mut()[field::MGMT_CLASS] = class.0;
    }

    /// Sets the class version.
    pub fn set_class_version(&mut self, version: u8) {
        self.buffer.as_mut()[field::CLASS_VERSION] = version;
    }

    /// Sets the method (with the response bit).
    pub fn set_method(&mut self, method: Method) {
        self.buffer.as_mut()[field::METHOD] = method.0;
    }

    /// Sets the status.
    pub fn set_status(&mut self, status: u16) {
        self.buffer.as_mut()[field::STATUS].copy_from_slice(&status.to_be_bytes());
    }

    /// Sets the class-specific field.
    pub fn set_class_specific(&mut self, value: u16) {
        self.buffer.as_mut()[field::CLASS_SPECIFIC].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the transaction ID.
    pub fn set_transaction_id(&mut self, tid: u64) {
        self.buffer.as_mut()[field::TID].copy_from_slice(&tid.to_be_bytes());
    }

    /// Sets the attribute ID and zeroes the reserved field behind it.
    pub fn set_attribute_id(&mut self, id: u16) {
        self.buffer.as_mut()[field::ATTR_ID].copy_from_slice(&id.to_be_bytes());
        self.buffer.as_mut()[field::RESV].fill(0);
    }

    /// Sets the attribute modifier.
    pub fn set_attribute_modifier(&mut self, modifier: u32) {
        self.buffer.as_mut()[field::ATTR_MOD].copy_from_slice(&modifier.to_be_bytes());
    }

    /// The 232 bytes of data behind the header, to write a message into.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA]
    }
}

/// The fields of a MAD common header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MadRepr {
    /// Management class.
    pub mgmt_class: MgmtClass,
    /// Class version.
    pub class_version: u8,
    /// Method, with the response bit.
    pub method: Method,
    /// Status.
    pub status: u16,
    /// Class-specific field.
    pub class_specific: u16,
    /// Transaction ID.
    pub transaction_id: u64,
    /// Attribute ID.
    pub attribute_id: u16,
    /// Attribute modifier.
    pub attribute_modifier: u32,
}

impl MadRepr {
    /// The header of a CM message (class 0x07 version 2, method Send, status 0) with this
    /// attribute and transaction ID, as the Linux CM formats it (`cm_format_mad_hdr`).
    pub const fn cm(attribute_id: u16, transaction_id: u64) -> MadRepr {
        MadRepr {
            mgmt_class: MgmtClass::CM,
            class_version: CM_CLASS_VERSION,
            method: Method::SEND,
            status: 0,
            class_specific: 0,
            transaction_id,
            attribute_id,
            attribute_modifier: 0,
        }
    }

    /// Reads a checked MAD header; a base version other than 1 is an error. Which classes
    /// and methods a caller serves is for it to decide.
    pub fn parse<T: AsRef<[u8]>>(packet: &MadPacket<T>) -> Result<MadRepr, ParseError> {
        if packet.base_version() != BASE_VERSION {
            return Err(ParseError::MadBaseVersion(packet.base_version()));
        }
        Ok(MadRepr {
            mgmt_class: packet.mgmt_class(),
            class_version: packet.class_version(),
            method: packet.method(),
            status: packet.status(),
            class_specific: packet.class_specific(),
            transaction_id: packet.transaction_id(),
            attribute_id: packet.attribute_id(),
            attribute_modifier: packet.attribute_modifier(),
        })
    }

    /// Writes the 24 header bytes (base version 1, reserved field zero). The buffer must
    /// hold a whole MAD; the data is left alone.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut MadPacket<T>) {
        packet.set_base_version(BASE_VERSION);
        packet.set_mgmt_class(self.mgmt_class);
        packet.set_class_version(self.class_version);
        packet.set_method(self.method);
        packet.set_status(self.status);
        packet.set_class_specific(self.class_specific);
        packet.set_transaction_id(self.transaction_id);
        packet.set_attribute_id(self.attribute_id);
        packet.set_attribute_modifier(self.attribute_modifier);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::fixtures::RPING_REQ;

    /// The header of rping_rdma_cm.pcap frame 3 (the REQ): class CM version 2, Send,
    /// TID 0x000000026be1d7aa, attribute 0x0010.
    static HEADER: [u8; 24] = [
        0x01, 0x07, 0x02, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x6b, 0xe1, 0xd7,
        0xaa, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    fn repr() -> MadRepr {
        MadRepr::cm(0x0010, 0x0000_0002_6be1_d7aa)
    }

    #[test]
    fn deconstruct() {
        assert_eq!(RPING_REQ[..24], HEADER);
        let p = MadPacket::new_checked(&RPING_REQ[..]).unwrap();
        assert_eq!(p.base_version(), 1);
        assert_eq!(p.mgmt_class(), MgmtClass::CM);
        assert_eq!(p.class_version(), 2);
        assert_eq!(p.method(), Method::SEND);
        assert!(!p.method().is_response());
        assert_eq!(p.status(), 0);
        assert_eq!(p.class_specific(), 0);
        assert_eq!(p.transaction_id(), 0x0000_0002_6be1_d7aa);
        assert_eq!(p.attribute_id(), 0x0010);
        assert_eq!(p.attribute_modifier(), 0);
        assert_eq!(p.data(), &RPING_REQ[24..]);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 256];
        let mut p = MadPacket::new_unchecked(&mut bytes[..]);
        p.set_base_version(1);
        p.set_mgmt_class(MgmtClass::CM);
        p.set_class_version(2);
        p.set_method(Method::SEND);
        p.set_status(0);
        p.set_class_specific(0);
        p.set_transaction_id(0x0000_0002_6be1_d7aa);
        p.set_attribute_id(0x0010);
        p.set_attribute_modifier(0);
        p.data_mut().copy_from_slice(&RPING_REQ[24..]);
        assert_eq!(bytes, RPING_REQ);
    }

    #[test]
    fn parse() {
        let p = MadPacket::new_checked(&RPING_REQ[..]).unwrap();
        assert_eq!(MadRepr::parse(&p), Ok(repr()));
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5u8; 256];
        repr().emit(&mut MadPacket::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes[..24], HEADER);
        assert!(bytes[24..].iter().all(|&b| b == 0xa5), "data left alone");
    }

    #[test]
    fn reserved_field_is_ignored() {
        let mut b = RPING_REQ;
        b[18] = 0xff;
        b[19] = 0x01;
        let p = MadPacket::new_checked(&b[..]).unwrap();
        assert_eq!(MadRepr::parse(&p), Ok(repr()));
    }

    #[test]
    fn malformed() {
        assert_eq!(
            MadPacket::new_checked(&RPING_REQ[..255]).unwrap_err(),
            ParseError::Truncated {
                layer: Layer::Mad,
                needed: 256,
                available: 255
            }
        );
        let mut b = RPING_REQ;
        b[0] = 0x80; // OPA
        let p = MadPacket::new_checked(&b[..]).unwrap();
        assert_eq!(MadRepr::parse(&p), Err(ParseError::MadBaseVersion(0x80)));
    }
}
