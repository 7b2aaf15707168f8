//! Base Transport Header (IBTA 9.2), the 12 bytes every RoCEv2 packet starts with.
//!
//! ```text
//!  byte 0    1                2..4     4              5..8     8          9..12
//! | OpCode | SE M PadCnt TVer | P_Key | F B resv6    | DestQP | A resv7  | PSN |
//! ```
//!
//! Byte 4 carries FECN/BECN (IBTA Annex A10, congestion control; in RoCEv2 it is the
//! "resv8a" byte that the ICRC masks, A17). Reserved bits are ignored on receive and sent
//! as zero.

use crate::error::{Layer, ParseError};
use crate::identifiers::{Pkey, Qpn};
use crate::opcode::Opcode;
use crate::psn::Psn;

mod field {
    use core::ops::Range;

    pub(super) const OPCODE: usize = 0;
    pub(super) const FLAGS: usize = 1;
    pub(super) const PKEY: Range<usize> = 2..4;
    pub(super) const RESV8A: usize = 4;
    pub(super) const DEST_QP: Range<usize> = 5..8;
    pub(super) const ACK_REQ: usize = 8;
    pub(super) const PSN: Range<usize> = 9..12;
}

/// Length of the BTH.
pub const HEADER_LEN: usize = 12;

/// Offset of the byte that holds FECN, BECN and resv6 (masked by the ICRC).
pub const RESV8A_OFFSET: usize = field::RESV8A;

const SE: u8 = 0x80;
const MIGREQ: u8 = 0x40;
const FECN: u8 = 0x80;
const BECN: u8 = 0x40;
const ACK_REQ: u8 = 0x80;

fn be24(b: &[u8]) -> u32 {
    u32::from_be_bytes([0, b[0], b[1], b[2]])
}

fn put_be24(b: &mut [u8], v: u32) {
    b.copy_from_slice(&v.to_be_bytes()[1..]);
}

/// A view of a BTH over a byte buffer.
#[derive(Debug, Clone)]
pub struct BthPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> BthPacket<T> {
    /// Wraps `buffer` without checking its length; accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> BthPacket<T> {
        BthPacket { buffer }
    }

    /// Wraps `buffer` after checking that it holds 12 bytes.
    pub fn new_checked(buffer: T) -> Result<BthPacket<T>, ParseError> {
        let packet = BthPacket::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the buffer holds a whole BTH.
    pub fn check_len(&self) -> Result<(), ParseError> {
        let available = self.buffer.as_ref().len();
        if available < HEADER_LEN {
            Err(ParseError::Truncated {
                layer: Layer::Bth,
                needed: HEADER_LEN,
                available,
            })
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The opcode (which also names the extension headers that follow).
    pub fn opcode(&self) -> Opcode {
        Opcode(self.buffer.as_ref()[field::OPCODE])
    }

    /// Solicited event: the responder should raise a completion event.
    pub fn solicited_event(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & SE != 0
    }

    /// MigReq: path migration state.
    pub fn migreq(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & MIGREQ != 0
    }

    /// Pad count: bytes (0..=3) added after the payload to reach a 4-byte boundary.
    pub fn pad_count(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS] >> 4) & 0x03
    }

    /// Transport header version (0 is the only one defined).
    pub fn transport_version(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] & 0x0f
    }

    /// Partition key.
    pub fn pkey(&self) -> Pkey {
        let b = &self.buffer.as_ref()[field::PKEY];
        Pkey(u16::from_be_bytes([b[0], b[1]]))
    }

    /// Forward explicit congestion notification.
    pub fn fecn(&self) -> bool {
        self.buffer.as_ref()[field::RESV8A] & FECN != 0
    }

    /// Backward explicit congestion notification (set in a CNP, IBTA A17.9.3).
    pub fn becn(&self) -> bool {
        self.buffer.as_ref()[field::RESV8A] & BECN != 0
    }

    /// Destination queue pair.
    pub fn dest_qp(&self) -> Qpn {
        Qpn::new(be24(&self.buffer.as_ref()[field::DEST_QP]))
    }

    /// Acknowledge request: the responder should acknowledge this packet.
    pub fn ack_request(&self) -> bool {
        self.buffer.as_ref()[field::ACK_REQ] & ACK_REQ != 0
    }

    /// Packet sequence number.
    pub fn psn(&self) -> Psn {
        Psn::new(be24(&self.buffer.as_ref()[field::PSN]))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> BthPacket<T> {
    /// Sets the opcode.
    pub fn set_opcode(&mut self, opcode: Opcode) {
        self.buffer.as_mut()[field::OPCODE] = opcode.0;
    }

    /// Sets SE, MigReq, PadCnt (2 bits) and TVer (4 bits) in one go.
    pub fn set_flags(&mut self, solicited_event: bool, migreq: bool, pad_count: u8, tver: u8) {
        let mut b = ((pad_count & 0x03) << 4) | (tver & 0x0f);
        if solicited_event {
            b |= SE;
        }
        if migreq {
            b |= MIGREQ;
        }
        self.buffer.as_mut()[field::FLAGS] = b;
    }

    /// Sets only the pad count, leaving SE, MigReq and TVer alone.
    pub fn set_pad_count(&mut self, pad_count: u8) {
        let b = &mut self.buffer.as_mut()[field::FLAGS];
        *b = (*b & !0x30) | ((pad_count & 0x03) << 4);
    }

    /// Sets the partition key.
    pub fn set_pkey(&mut self, pkey: Pkey) {
        self.buffer.as_mut()[field::PKEY].copy_from_slice(&pkey.0.to_be_bytes());
    }

    /// Sets FECN and BECN; resv6 is written as zero.
    pub fn set_congestion(&mut self, fecn: bool, becn: bool) {
        let mut b = 0;
        if fecn {
            b |= FECN;
        }
        if becn {
            b |= BECN;
        }
        self.buffer.as_mut()[field::RESV8A] = b;
    }

    /// Sets the destination QP.
    pub fn set_dest_qp(&mut self, qpn: Qpn) {
        put_be24(&mut self.buffer.as_mut()[field::DEST_QP], qpn.value());
    }

    /// Sets the acknowledge request bit; resv7 is written as zero.
    pub fn set_ack_request(&mut self, ack_request: bool) {
        self.buffer.as_mut()[field::ACK_REQ] = if ack_request { ACK_REQ } else { 0 };
    }

    /// Sets the PSN.
    pub fn set_psn(&mut self, psn: Psn) {
        put_be24(&mut self.buffer.as_mut()[field::PSN], psn.value());
    }
}

/// The fields of a BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BthRepr {
    /// The opcode.
    pub opcode: Opcode,
    /// Solicited event.
    pub solicited_event: bool,
    /// MigReq (path migration). rxe sends it clear, having no automatic path migration,
    /// and so do we.
    pub migreq: bool,
    /// Pad count (0..=3). [`crate::IbRepr::emit`] derives it from the payload length.
    pub pad_count: u8,
    /// Partition key.
    pub pkey: Pkey,
    /// Forward ECN.
    pub fecn: bool,
    /// Backward ECN.
    pub becn: bool,
    /// Destination queue pair.
    pub dest_qp: Qpn,
    /// Acknowledge request.
    pub ack_request: bool,
    /// Packet sequence number.
    pub psn: Psn,
}

impl BthRepr {
    /// A BTH for `opcode` to `dest_qp` at `psn` with the default P_Key and every flag clear.
    pub const fn new(opcode: Opcode, dest_qp: Qpn, psn: Psn) -> BthRepr {
        BthRepr {
            opcode,
            solicited_event: false,
            migreq: false,
            pad_count: 0,
            pkey: Pkey::DEFAULT,
            fecn: false,
            becn: false,
            dest_qp,
            ack_request: false,
            psn,
        }
    }

    /// Reads a checked BTH; a transport version other than 0 is an error (IBTA 9.2).
    /// Whether the opcode is known is for the caller ([`crate::IbRepr::parse`]) to decide.
    pub fn parse<T: AsRef<[u8]>>(packet: &BthPacket<T>) -> Result<BthRepr, ParseError> {
        packet.check_len()?;
        if packet.transport_version() != 0 {
            return Err(ParseError::TransportVersion(packet.transport_version()));
        }
        Ok(BthRepr {
            opcode: packet.opcode(),
            solicited_event: packet.solicited_event(),
            migreq: packet.migreq(),
            pad_count: packet.pad_count(),
            pkey: packet.pkey(),
            fecn: packet.fecn(),
            becn: packet.becn(),
            dest_qp: packet.dest_qp(),
            ack_request: packet.ack_request(),
            psn: packet.psn(),
        })
    }

    /// Length of the header.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the 12 bytes; reserved bits are zero and TVer is 0. The buffer must hold 12.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut BthPacket<T>) {
        packet.set_opcode(self.opcode);
        packet.set_flags(self.solicited_event, self.migreq, self.pad_count, 0);
        packet.set_pkey(self.pkey);
        packet.set_congestion(self.fecn, self.becn);
        packet.set_dest_qp(self.dest_qp);
        packet.set_ack_request(self.ack_request);
        packet.set_psn(self.psn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The BTH of write_bw_multipkt.pcap frame 24: RDMA WRITE Last, pad 2, QP 0x14, A set,
    /// PSN 0x017348.
    static BTH: [u8; 12] = [
        0x08, 0x20, 0xff, 0xff, 0x00, 0x00, 0x00, 0x14, 0x80, 0x01, 0x73, 0x48,
    ];

    /// A CNP's BTH (IBTA A17.9.3): BECN set, DestQP 0xd2.
    static CNP_BTH: [u8; 12] = [
        0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x00, 0xd2, 0x00, 0x00, 0x00, 0x00,
    ];

    fn repr() -> BthRepr {
        BthRepr {
            pad_count: 2,
            ack_request: true,
            ..BthRepr::new(
                Opcode::RC_RDMA_WRITE_LAST,
                Qpn::new(0x14),
                Psn::new(0x017348),
            )
        }
    }

    #[test]
    fn deconstruct() {
        let p = BthPacket::new_checked(&BTH[..]).unwrap();
        assert_eq!(p.opcode(), Opcode::RC_RDMA_WRITE_LAST);
        assert!(!p.solicited_event());
        assert!(!p.migreq());
        assert_eq!(p.pad_count(), 2);
        assert_eq!(p.transport_version(), 0);
        assert_eq!(p.pkey(), Pkey(0xffff));
        assert!(!p.fecn());
        assert!(!p.becn());
        assert_eq!(p.dest_qp(), Qpn::new(0x14));
        assert!(p.ack_request());
        assert_eq!(p.psn(), Psn::new(0x017348));

        let cnp = BthPacket::new_checked(&CNP_BTH[..]).unwrap();
        assert_eq!(cnp.opcode(), Opcode::CNP);
        assert!(cnp.becn());
        assert!(!cnp.fecn());
        assert_eq!(cnp.dest_qp(), Qpn::new(0xd2));
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 12];
        let mut p = BthPacket::new_unchecked(&mut bytes[..]);
        p.set_opcode(Opcode::RC_RDMA_WRITE_LAST);
        p.set_flags(false, false, 2, 0);
        p.set_pkey(Pkey(0xffff));
        p.set_congestion(false, false);
        p.set_dest_qp(Qpn::new(0x14));
        p.set_ack_request(true);
        p.set_psn(Psn::new(0x017348));
        assert_eq!(bytes, BTH);
    }

    #[test]
    fn parse() {
        let p = BthPacket::new_checked(&BTH[..]).unwrap();
        assert_eq!(BthRepr::parse(&p), Ok(repr()));
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5u8; 12];
        repr().emit(&mut BthPacket::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, BTH);
    }

    #[test]
    fn flag_bits_are_where_the_spec_puts_them() {
        let mut r = repr();
        r.solicited_event = true;
        r.migreq = true;
        r.pad_count = 3;
        r.fecn = true;
        r.becn = true;
        let mut bytes = [0xa5u8; 12];
        r.emit(&mut BthPacket::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes[1], 0xf0);
        assert_eq!(bytes[4], 0xc0);
        assert_eq!(
            BthRepr::parse(&BthPacket::new_checked(&bytes[..]).unwrap()),
            Ok(r)
        );
        let mut p = BthPacket::new_unchecked(&mut bytes[..]);
        p.set_pad_count(1);
        assert_eq!(bytes[1], 0xd0);
    }

    #[test]
    fn reserved_bits_are_ignored() {
        let mut b = BTH;
        b[4] |= 0x3f; // resv6
        b[8] |= 0x7f; // resv7
        assert_eq!(
            BthRepr::parse(&BthPacket::new_checked(&b[..]).unwrap()),
            Ok(repr())
        );
    }

    #[test]
    fn malformed() {
        let mut b = BTH;
        b[1] |= 0x01;
        assert_eq!(
            BthRepr::parse(&BthPacket::new_checked(&b[..]).unwrap()),
            Err(ParseError::TransportVersion(1))
        );
        assert_eq!(
            BthPacket::new_checked(&BTH[..11]).unwrap_err(),
            ParseError::Truncated {
                layer: Layer::Bth,
                needed: 12,
                available: 11
            }
        );
    }
}
