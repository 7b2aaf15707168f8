//! IPv4 header (RFC 791), as RoCEv2 uses it: no options, never fragmented.
//!
//! ```text
//!  0       1       2       3
//! |ver|ihl| dscp|e| total length  |
//! | identification|fl| frag offset|
//! |  ttl  | proto | header checksum|
//! |        source address          |
//! |      destination address       |
//! ```

use core::net::Ipv4Addr;

use crate::checksum;
use crate::error::{Layer, ParseError};

mod field {
    use core::ops::Range;

    pub(super) const VER_IHL: usize = 0;
    pub(super) const DSCP_ECN: usize = 1;
    pub(super) const LENGTH: Range<usize> = 2..4;
    pub(super) const IDENT: Range<usize> = 4..6;
    pub(super) const FLG_OFF: Range<usize> = 6..8;
    pub(super) const TTL: usize = 8;
    pub(super) const PROTOCOL: usize = 9;
    pub(super) const CHECKSUM: Range<usize> = 10..12;
    pub(super) const SRC_ADDR: Range<usize> = 12..16;
    pub(super) const DST_ADDR: Range<usize> = 16..20;
}

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = 20;

/// IP protocol number of UDP.
pub const PROTOCOL_UDP: u8 = 17;

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// A view of an IPv4 packet over a byte buffer.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps `buffer` without checking it; accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> Ipv4Packet<T> {
        Ipv4Packet { buffer }
    }

    /// Wraps `buffer` after [`Ipv4Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Ipv4Packet<T>, ParseError> {
        let packet = Ipv4Packet::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the buffer holds a version-4 header with a sane IHL, and the whole packet
    /// its total length announces. Bytes beyond the total length (Ethernet padding) are
    /// allowed.
    pub fn check_len(&self) -> Result<(), ParseError> {
        let available = self.buffer.as_ref().len();
        if available < HEADER_LEN {
            return Err(ParseError::Truncated {
                layer: Layer::Ipv4,
                needed: HEADER_LEN,
                available,
            });
        }
        if self.version() != 4 {
            return Err(ParseError::IpVersion {
                expected: 4,
                found: self.version(),
            });
        }
        if self.ihl() < 5 {
            return Err(ParseError::Ipv4HeaderLength(self.ihl()));
        }
        let header_len = usize::from(self.ihl()) * 4;
        if available < header_len {
            return Err(ParseError::Truncated {
                layer: Layer::Ipv4,
                needed: header_len,
                available,
            });
        }
        let total = usize::from(self.total_len());
        if total < header_len || total > available {
            return Err(ParseError::Ipv4TotalLength {
                total: self.total_len(),
                available,
            });
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn be16(&self, r: core::ops::Range<usize>) -> u16 {
        let b = &self.buffer.as_ref()[r];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// The version nibble (4 for IPv4).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// The header length in 32-bit words.
    pub fn ihl(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] & 0x0f
    }

    /// The header length in bytes.
    pub fn header_len(&self) -> usize {
        usize::from(self.ihl()) * 4
    }

    /// Differentiated services code point (6 bits).
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// Explicit congestion notification (2 bits, RFC 3168); CE = 3 is what RoCE congestion
    /// control reacts to.
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// Total length of header and payload.
    pub fn total_len(&self) -> u16 {
        self.be16(field::LENGTH)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        self.be16(field::IDENT)
    }

    /// The don't-fragment flag.
    pub fn dont_frag(&self) -> bool {
        self.be16(field::FLG_OFF) & FLAG_DF != 0
    }

    /// The more-fragments flag.
    pub fn more_frags(&self) -> bool {
        self.be16(field::FLG_OFF) & FLAG_MF != 0
    }

    /// The fragment offset in 8-byte units.
    pub fn frag_offset(&self) -> u16 {
        self.be16(field::FLG_OFF) & FRAG_OFFSET_MASK
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload (17 = UDP).
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    /// The header checksum field.
    pub fn checksum(&self) -> u16 {
        self.be16(field::CHECKSUM)
    }

    /// `true` if the header checksum is right.
    pub fn verify_checksum(&self) -> bool {
        checksum::checksum(&self.buffer.as_ref()[..self.header_len()]) == 0
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::SRC_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::DST_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// The payload: the bytes from the end of the header to the total length.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    fn set_be16(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets version and IHL.
    pub fn set_version_and_ihl(&mut self, version: u8, ihl: u8) {
        self.buffer.as_mut()[field::VER_IHL] = (version << 4) | (ihl & 0x0f);
    }

    /// Sets DSCP (6 bits) and ECN (2 bits).
    pub fn set_dscp_ecn(&mut self, dscp: u8, ecn: u8) {
        self.buffer.as_mut()[field::DSCP_ECN] = (dscp << 2) | (ecn & 0x03);
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, len: u16) {
        self.set_be16(field::LENGTH, len);
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, ident: u16) {
        self.set_be16(field::IDENT, ident);
    }

    /// Sets the flags (DF only; MF clear) and a zero fragment offset.
    pub fn set_dont_frag_unfragmented(&mut self, dont_frag: bool) {
        self.set_be16(field::FLG_OFF, if dont_frag { FLAG_DF } else { 0 });
    }

    /// Sets the time to live.
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    /// Sets the protocol.
    pub fn set_protocol(&mut self, protocol: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = protocol;
    }

    /// Sets the checksum field to `value`.
    pub fn set_checksum(&mut self, value: u16) {
        self.set_be16(field::CHECKSUM, value);
    }

    /// Computes the header checksum and writes it.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let len = self.header_len();
        let sum = checksum::checksum(&self.buffer.as_ref()[..len]);
        self.set_checksum(sum);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.octets());
    }
}

/// The fields of an IPv4 header a RoCEv2 packet uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Protocol of the payload (17 = UDP).
    pub protocol: u8,
    /// Length of the payload (total length minus 20).
    pub payload_len: usize,
    /// DSCP, 6 bits.
    pub dscp: u8,
    /// ECN, 2 bits.
    pub ecn: u8,
    /// Time to live. rxe sends 64 (the netdev default), and so do we.
    pub ttl: u8,
    /// Identification. rxe lets the kernel pick one per packet; it is covered by the ICRC.
    pub identification: u16,
    /// The don't-fragment flag. rxe always sets it, and so do we.
    pub dont_fragment: bool,
}

impl Ipv4Repr {
    /// Reads a checked header: rejects options, fragments and a wrong header checksum.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) -> Result<Ipv4Repr, ParseError> {
        packet.check_len()?;
        if packet.ihl() > 5 {
            return Err(ParseError::Ipv4Options(packet.ihl()));
        }
        if packet.more_frags() || packet.frag_offset() != 0 {
            return Err(ParseError::Ipv4Fragment);
        }
        if !packet.verify_checksum() {
            return Err(ParseError::Ipv4Checksum);
        }
        Ok(Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: usize::from(packet.total_len()) - HEADER_LEN,
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            ttl: packet.ttl(),
            identification: packet.ident(),
            dont_fragment: packet.dont_frag(),
        })
    }

    /// Length of the header this repr emits.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the 20-byte header, checksum included. The packet's buffer must hold 20
    /// bytes; a `payload_len` above 65515 is truncated to 16 bits (the frame layer refuses
    /// such lengths before calling this).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv4Packet<T>) {
        packet.set_version_and_ihl(4, 5);
        packet.set_dscp_ecn(self.dscp, self.ecn);
        packet.set_total_len((HEADER_LEN + self.payload_len) as u16);
        packet.set_ident(self.identification);
        packet.set_dont_frag_unfragmented(self.dont_fragment);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The IPv4 header of rc_pingpong.pcap frame 19 (an ACK), and its 28-byte payload.
    static PACKET: [u8; 48] = [
        0x45, 0x00, 0x00, 0x30, 0x9c, 0xf4, 0x40, 0x00, 0x40, 0x11, 0x89, 0x2a, 0x0a, 0x4d, 0x00,
        0x02, 0x0a, 0x4d, 0x00, 0x03, // header
        0xc1, 0x21, 0x12, 0xb7, 0x00, 0x1c, 0x00, 0x00, 0x11, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00,
        0x11, 0x00, 0x58, 0xf0, 0x5d, 0x1f, 0x00, 0x00, 0x01, 0x35, 0x25, 0x8f, 0x66,
    ];

    fn repr() -> Ipv4Repr {
        Ipv4Repr {
            src_addr: Ipv4Addr::new(10, 77, 0, 2),
            dst_addr: Ipv4Addr::new(10, 77, 0, 3),
            protocol: PROTOCOL_UDP,
            payload_len: 28,
            dscp: 0,
            ecn: 0,
            ttl: 64,
            identification: 0x9cf4,
            dont_fragment: true,
        }
    }

    #[test]
    fn deconstruct() {
        let p = Ipv4Packet::new_checked(&PACKET[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!((p.dscp(), p.ecn()), (0, 0));
        assert_eq!(p.total_len(), 48);
        assert_eq!(p.ident(), 0x9cf4);
        assert!(p.dont_frag());
        assert!(!p.more_frags());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), 17);
        assert_eq!(p.checksum(), 0x892a);
        assert!(p.verify_checksum());
        assert_eq!(p.src_addr(), Ipv4Addr::new(10, 77, 0, 2));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(10, 77, 0, 3));
        assert_eq!(p.payload(), &PACKET[20..]);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 48];
        let mut p = Ipv4Packet::new_unchecked(&mut bytes[..]);
        p.set_version_and_ihl(4, 5);
        p.set_dscp_ecn(0, 0);
        p.set_total_len(48);
        p.set_ident(0x9cf4);
        p.set_dont_frag_unfragmented(true);
        p.set_ttl(64);
        p.set_protocol(17);
        p.set_src_addr(Ipv4Addr::new(10, 77, 0, 2));
        p.set_dst_addr(Ipv4Addr::new(10, 77, 0, 3));
        p.fill_checksum();
        bytes[20..].copy_from_slice(&PACKET[20..]);
        assert_eq!(bytes, PACKET);
    }

    #[test]
    fn parse() {
        let p = Ipv4Packet::new_checked(&PACKET[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&p), Ok(repr()));
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5u8; 20];
        repr().emit(&mut Ipv4Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, PACKET[..20]);
    }

    #[test]
    fn ecn_and_dscp_share_a_byte() {
        let mut r = repr();
        r.dscp = 26;
        r.ecn = 3;
        let mut bytes = [0xa5u8; 48];
        r.emit(&mut Ipv4Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes[1], (26 << 2) | 3);
        let parsed = Ipv4Repr::parse(&Ipv4Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!((parsed.dscp, parsed.ecn), (26, 3));
    }

    #[test]
    fn malformed() {
        let mut b = PACKET;
        b[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).unwrap_err(),
            ParseError::IpVersion {
                expected: 4,
                found: 6
            }
        );
        let mut b = PACKET;
        b[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).unwrap_err(),
            ParseError::Ipv4HeaderLength(4)
        );
        let mut b = PACKET;
        b[0] = 0x46;
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&p), Err(ParseError::Ipv4Options(6)));
        let mut b = PACKET;
        b[3] = 49; // total length one more than there is
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).unwrap_err(),
            ParseError::Ipv4TotalLength {
                total: 49,
                available: 48
            }
        );
        let mut b = PACKET;
        b[3] = 19;
        assert!(matches!(
            Ipv4Packet::new_checked(&b[..]),
            Err(ParseError::Ipv4TotalLength { total: 19, .. })
        ));
        let mut b = PACKET;
        b[6] = 0x20; // MF
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&p), Err(ParseError::Ipv4Fragment));
        let mut b = PACKET;
        b[8] = 63; // TTL changed, checksum not
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&p), Err(ParseError::Ipv4Checksum));
        assert!(matches!(
            Ipv4Packet::new_checked(&PACKET[..19]),
            Err(ParseError::Truncated { .. })
        ));
    }

    #[test]
    fn trailing_ethernet_padding_is_allowed() {
        let mut b = [0u8; 60];
        b[..48].copy_from_slice(&PACKET);
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload().len(), 28);
    }
}
