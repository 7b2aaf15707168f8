//! UDP header (RFC 768).
//!
//! ```text
//! | source port | destination port (4791) | length | checksum |
//! ```

use core::net::IpAddr;

use crate::checksum;
use crate::error::{Layer, ParseError};

/// The UDP destination port of RoCEv2 (IANA "roce", IBTA Annex A17).
pub const ROCE_V2_UDP_PORT: u16 = 4791;

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

mod field {
    use core::ops::Range;

    pub(super) const SRC_PORT: Range<usize> = 0..2;
    pub(super) const DST_PORT: Range<usize> = 2..4;
    pub(super) const LENGTH: Range<usize> = 4..6;
    pub(super) const CHECKSUM: Range<usize> = 6..8;
}

/// A view of a UDP datagram over a byte buffer.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps `buffer` without checking it; accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> UdpPacket<T> {
        UdpPacket { buffer }
    }

    /// Wraps `buffer` after [`UdpPacket::check_len`].
    pub fn new_checked(buffer: T) -> Result<UdpPacket<T>, ParseError> {
        let packet = UdpPacket::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the buffer holds the header and that the length field covers at least
    /// the header and no more than the buffer.
    pub fn check_len(&self) -> Result<(), ParseError> {
        let available = self.buffer.as_ref().len();
        if available < HEADER_LEN {
            return Err(ParseError::Truncated {
                layer: Layer::Udp,
                needed: HEADER_LEN,
                available,
            });
        }
        let len = usize::from(self.len());
        if len < HEADER_LEN || len > available {
            return Err(ParseError::UdpLength {
                udp_len: self.len(),
                ip_payload: available,
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

    /// Source port.
    pub fn src_port(&self) -> u16 {
        self.be16(field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        self.be16(field::DST_PORT)
    }

    /// Length of header and payload.
    pub fn len(&self) -> u16 {
        self.be16(field::LENGTH)
    }

    /// `true` if the length field says there is not even a header.
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) < HEADER_LEN
    }

    /// The checksum field (0 means "none" on IPv4, RFC 768).
    pub fn checksum(&self) -> u16 {
        self.be16(field::CHECKSUM)
    }

    /// The payload, up to the length field.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }

    /// `true` if the checksum is zero ("none") or matches the datagram and pseudo-header.
    pub fn verify_checksum(&self, src: IpAddr, dst: IpAddr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let datagram = &self.buffer.as_ref()[..usize::from(self.len())];
        checksum::finish(pseudo_header_sum(src, dst, datagram.len()) + checksum::sum(0, datagram))
            == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    fn set_be16(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the source port.
    pub fn set_src_port(&mut self, port: u16) {
        self.set_be16(field::SRC_PORT, port);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, port: u16) {
        self.set_be16(field::DST_PORT, port);
    }

    /// Sets the length field.
    pub fn set_len(&mut self, len: u16) {
        self.set_be16(field::LENGTH, len);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.set_be16(field::CHECKSUM, value);
    }

    /// Computes the checksum over the pseudo-header and the datagram (up to the length
    /// field) and writes it; a computed 0 is sent as 0xffff (RFC 768).
    pub fn fill_checksum(&mut self, src: IpAddr, dst: IpAddr) {
        self.set_checksum(0);
        let len = usize::from(self.len()).min(self.buffer.as_ref().len());
        let datagram = &self.buffer.as_ref()[..len];
        let sum = checksum::finish(pseudo_header_sum(src, dst, len) + checksum::sum(0, datagram));
        self.set_checksum(if sum == 0 { 0xffff } else { sum });
    }
}

/// The one's complement sum of the UDP pseudo-header (RFC 768 for IPv4, RFC 8200 8.1 for
/// IPv6).
fn pseudo_header_sum(src: IpAddr, dst: IpAddr, len: usize) -> u64 {
    let mut acc = 0;
    for addr in [src, dst] {
        acc = match addr {
            IpAddr::V4(a) => checksum::sum(acc, &a.octets()),
            IpAddr::V6(a) => checksum::sum(acc, &a.octets()),
        };
    }
    acc + u64::from(crate::ipv4::PROTOCOL_UDP) + (len as u64 & 0xffff_ffff)
}

/// The UDP checksum of a RoCEv2 datagram.
///
/// Receivers do not verify it: the ICRC covers every byte it covers, and on links with
/// checksum offload (veth, virtio) the bytes a capture or an XDP program sees carry only
/// the pseudo-header sum of a `CHECKSUM_PARTIAL` packet, which Linux accepts from its skb
/// metadata. A packet with such a checksum, from a userspace client to rxe, is in the
/// captures; verifying it would reject a packet rxe accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum UdpChecksum {
    /// Checksum field 0, "no checksum". rxe sends this on IPv4 and IPv6 (the ICRC covers the
    /// same bytes), so we do too.
    #[default]
    None,
    /// Send a real checksum, computed over the pseudo-header and the datagram.
    Computed,
    /// A nonzero checksum as received, not verified; emitted again unchanged.
    Carried(u16),
}

/// The fields of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port (for RoCEv2, see [`crate::source_port`]).
    pub src_port: u16,
    /// Destination port (4791 for RoCEv2).
    pub dst_port: u16,
    /// The checksum to send, or the one received. The frame layer computes it, since it
    /// needs the IP addresses.
    pub checksum: UdpChecksum,
}

impl UdpRepr {
    /// Reads a checked header. A nonzero checksum is kept as [`UdpChecksum::Carried`],
    /// unverified (see [`UdpChecksum`]); [`UdpPacket::verify_checksum`] checks one.
    pub fn parse<T: AsRef<[u8]>>(packet: &UdpPacket<T>) -> Result<UdpRepr, ParseError> {
        packet.check_len()?;
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            checksum: match packet.checksum() {
                0 => UdpChecksum::None,
                value => UdpChecksum::Carried(value),
            },
        })
    }

    /// Length of the header.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header for a payload of `payload_len` bytes, with checksum field 0 (or the
    /// carried value). The caller fills in a computed checksum once the payload is in place.
    /// The buffer must hold 8 bytes; lengths above 65535 are truncated to 16 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut UdpPacket<T>,
        payload_len: usize,
    ) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len((HEADER_LEN + payload_len) as u16);
        packet.set_checksum(match self.checksum {
            UdpChecksum::Carried(value) => value,
            UdpChecksum::None | UdpChecksum::Computed => 0,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    /// UDP header and payload of rc_pingpong.pcap frame 19 (an ACK).
    static DATAGRAM: [u8; 28] = [
        0xc1, 0x21, 0x12, 0xb7, 0x00, 0x1c, 0x00, 0x00, // header
        0x11, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x00, 0x58, 0xf0, 0x5d, 0x1f, 0x00, 0x00,
        0x01, 0x35, 0x25, 0x8f, 0x66,
    ];

    fn repr() -> UdpRepr {
        UdpRepr {
            src_port: 49441,
            dst_port: ROCE_V2_UDP_PORT,
            checksum: UdpChecksum::None,
        }
    }

    #[test]
    fn deconstruct() {
        let p = UdpPacket::new_checked(&DATAGRAM[..]).unwrap();
        assert_eq!(p.src_port(), 49441);
        assert_eq!(p.dst_port(), 4791);
        assert_eq!(p.len(), 28);
        assert_eq!(p.checksum(), 0);
        assert_eq!(p.payload(), &DATAGRAM[8..]);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 28];
        let mut p = UdpPacket::new_unchecked(&mut bytes[..]);
        p.set_src_port(49441);
        p.set_dst_port(4791);
        p.set_len(28);
        p.set_checksum(0);
        bytes[8..].copy_from_slice(&DATAGRAM[8..]);
        assert_eq!(bytes, DATAGRAM);
    }

    #[test]
    fn parse() {
        let p = UdpPacket::new_checked(&DATAGRAM[..]).unwrap();
        assert_eq!(UdpRepr::parse(&p), Ok(repr()));
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5u8; 8];
        repr().emit(&mut UdpPacket::new_unchecked(&mut bytes[..]), 20);
        assert_eq!(bytes, DATAGRAM[..8]);
    }

    #[test]
    fn checksum_fill_and_verify() {
        let src = IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2));
        let dst = IpAddr::V4(Ipv4Addr::new(10, 77, 0, 3));
        let mut bytes = DATAGRAM;
        let mut p = UdpPacket::new_unchecked(&mut bytes[..]);
        assert!(p.verify_checksum(src, dst), "zero means none");
        p.fill_checksum(src, dst);
        assert_ne!(p.checksum(), 0);
        assert!(p.verify_checksum(src, dst));
        assert!(!p.verify_checksum(dst, IpAddr::V4(Ipv4Addr::new(10, 77, 0, 4))));
        bytes[20] ^= 1;
        assert!(!UdpPacket::new_unchecked(&bytes[..]).verify_checksum(src, dst));
    }

    #[test]
    fn lengths_that_lie() {
        let mut b = DATAGRAM;
        b[5] = 29;
        assert_eq!(
            UdpPacket::new_checked(&b[..]).unwrap_err(),
            ParseError::UdpLength {
                udp_len: 29,
                ip_payload: 28
            }
        );
        b[5] = 7;
        assert!(matches!(
            UdpPacket::new_checked(&b[..]),
            Err(ParseError::UdpLength { udp_len: 7, .. })
        ));
        assert!(matches!(
            UdpPacket::new_checked(&DATAGRAM[..7]),
            Err(ParseError::Truncated {
                layer: Layer::Udp,
                ..
            })
        ));
    }
}
