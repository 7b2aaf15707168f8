//! IPv6 header (RFC 8200), as RoCEv2 uses it: UDP directly behind the fixed header.
//!
//! ```text
//!  0       1       2       3
//! |ver| traffic cl| flow label    |
//! | payload length| next  | hops  |
//! |     source address (16)       |
//! |   destination address (16)    |
//! ```

use core::net::Ipv6Addr;

use crate::error::{Layer, ParseError};

mod field {
    use core::ops::Range;

    pub(super) const VER_TC_FLOW: Range<usize> = 0..4;
    pub(super) const LENGTH: Range<usize> = 4..6;
    pub(super) const NXT_HDR: usize = 6;
    pub(super) const HOP_LIMIT: usize = 7;
    pub(super) const SRC_ADDR: Range<usize> = 8..24;
    pub(super) const DST_ADDR: Range<usize> = 24..40;
}

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = 40;

/// A view of an IPv6 packet over a byte buffer.
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps `buffer` without checking it; accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> Ipv6Packet<T> {
        Ipv6Packet { buffer }
    }

    /// Wraps `buffer` after [`Ipv6Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Ipv6Packet<T>, ParseError> {
        let packet = Ipv6Packet::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the buffer holds a version-6 header and the payload its length
    /// announces. Bytes beyond it (Ethernet padding) are allowed.
    pub fn check_len(&self) -> Result<(), ParseError> {
        let available = self.buffer.as_ref().len();
        if available < HEADER_LEN {
            return Err(ParseError::Truncated {
                layer: Layer::Ipv6,
                needed: HEADER_LEN,
                available,
            });
        }
        if self.version() != 6 {
            return Err(ParseError::IpVersion {
                expected: 6,
                found: self.version(),
            });
        }
        if usize::from(self.payload_len()) > available - HEADER_LEN {
            return Err(ParseError::Ipv6PayloadLength {
                payload_len: self.payload_len(),
                available: available - HEADER_LEN,
            });
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn word0(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::VER_TC_FLOW];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The version nibble (6 for IPv6).
    pub fn version(&self) -> u8 {
        (self.word0() >> 28) as u8
    }

    /// The traffic class byte (DSCP << 2 | ECN).
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }

    /// The 20-bit flow label.
    pub fn flow_label(&self) -> u32 {
        self.word0() & 0x000f_ffff
    }

    /// Length of the payload behind the fixed header.
    pub fn payload_len(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::LENGTH];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// The next header (17 = UDP).
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }

    /// The hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut a = [0; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC_ADDR]);
        Ipv6Addr::from(a)
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut a = [0; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST_ADDR]);
        Ipv6Addr::from(a)
    }

    /// The payload: the bytes behind the fixed header, up to the payload length.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets version 6, the traffic class and the flow label (20 bits; higher bits dropped).
    pub fn set_version_tc_flow(&mut self, traffic_class: u8, flow_label: u32) {
        let word = (6u32 << 28) | (u32::from(traffic_class) << 20) | (flow_label & 0x000f_ffff);
        self.buffer.as_mut()[field::VER_TC_FLOW].copy_from_slice(&word.to_be_bytes());
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, len: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&len.to_be_bytes());
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, next_header: u8) {
        self.buffer.as_mut()[field::NXT_HDR] = next_header;
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, hop_limit: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = hop_limit;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.octets());
    }
}

/// The fields of an IPv6 header a RoCEv2 packet uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Next header (17 = UDP).
    pub next_header: u8,
    /// Length of the payload.
    pub payload_len: usize,
    /// DSCP, the high 6 bits of the traffic class.
    pub dscp: u8,
    /// ECN, the low 2 bits of the traffic class.
    pub ecn: u8,
    /// Flow label, 20 bits.
    pub flow_label: u32,
    /// Hop limit.
    pub hop_limit: u8,
}

impl Ipv6Repr {
    /// Reads a checked header.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Ipv6Repr, ParseError> {
        packet.check_len()?;
        let tc = packet.traffic_class();
        Ok(Ipv6Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            dscp: tc >> 2,
            ecn: tc & 0x03,
            flow_label: packet.flow_label(),
            hop_limit: packet.hop_limit(),
        })
    }

    /// Length of the header this repr emits.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the 40-byte header. The packet's buffer must hold 40 bytes; a `payload_len`
    /// above 65535 is truncated to 16 bits (the frame layer refuses such lengths first).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv6Packet<T>) {
        packet.set_version_tc_flow((self.dscp << 2) | (self.ecn & 0x03), self.flow_label);
        packet.set_payload_len(self.payload_len as u16);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-made header: DSCP 26, ECN 2 (traffic class 0x6a), flow label 0x12345,
    /// payload 4 bytes of UDP (truncated on purpose), hop limit 64, fd00::2 → fd00::3.
    static PACKET: [u8; 44] = [
        0x66, 0xa1, 0x23, 0x45, 0x00, 0x04, 0x11, 0x40, // version … hop limit
        0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, // source
        0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x03, // destination
        0xc1, 0x21, 0x12, 0xb7, // payload
    ];

    fn repr() -> Ipv6Repr {
        Ipv6Repr {
            src_addr: "fd00::2".parse().unwrap(),
            dst_addr: "fd00::3".parse().unwrap(),
            next_header: 17,
            payload_len: 4,
            dscp: 26,
            ecn: 2,
            flow_label: 0x12345,
            hop_limit: 64,
        }
    }

    #[test]
    fn deconstruct() {
        let p = Ipv6Packet::new_checked(&PACKET[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0x6a);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 4);
        assert_eq!(p.next_header(), 17);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr(), "fd00::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.dst_addr(), "fd00::3".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.payload(), &[0xc1, 0x21, 0x12, 0xb7]);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 44];
        let mut p = Ipv6Packet::new_unchecked(&mut bytes[..]);
        p.set_version_tc_flow(0x6a, 0x12345);
        p.set_payload_len(4);
        p.set_next_header(17);
        p.set_hop_limit(64);
        p.set_src_addr("fd00::2".parse().unwrap());
        p.set_dst_addr("fd00::3".parse().unwrap());
        bytes[40..].copy_from_slice(&PACKET[40..]);
        assert_eq!(bytes, PACKET);
    }

    #[test]
    fn parse() {
        let p = Ipv6Packet::new_checked(&PACKET[..]).unwrap();
        assert_eq!(Ipv6Repr::parse(&p), Ok(repr()));
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5u8; 40];
        repr().emit(&mut Ipv6Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, PACKET[..40]);
    }

    #[test]
    fn malformed() {
        let mut b = PACKET;
        b[0] = 0x46;
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]).unwrap_err(),
            ParseError::IpVersion {
                expected: 6,
                found: 4
            }
        );
        let mut b = PACKET;
        b[5] = 5;
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]).unwrap_err(),
            ParseError::Ipv6PayloadLength {
                payload_len: 5,
                available: 4
            }
        );
        assert!(matches!(
            Ipv6Packet::new_checked(&PACKET[..39]),
            Err(ParseError::Truncated {
                layer: Layer::Ipv6,
                ..
            })
        ));
    }
}
