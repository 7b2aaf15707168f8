//! Whole RoCEv2 frames: Ethernet → (802.1Q) → IPv4/IPv6 → UDP 4791 → IB part.
//!
//! [`Frame::parse`] takes a received frame apart and verifies its ICRC. [`FrameRepr`] is the
//! L2–L4 envelope a sender keeps per destination; [`FrameRepr::emit`] wraps an IB part that
//! was written in place (see [`crate::IbRepr::emit`]) with every L2–L4 header, the pad and
//! the ICRC, without copying it.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::ICRC_LEN;
use crate::bth;
use crate::checksum;
use crate::error::{EmitError, Layer, ParseError};
use crate::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, VlanTag};
use crate::ib::IbRepr;
use crate::icrc;
use crate::ipv4::{self, Ipv4Packet, Ipv4Repr};
use crate::ipv6::{self, Ipv6Packet, Ipv6Repr};
use crate::mtu::IpVersion;
use crate::udp::{self, ROCE_V2_UDP_PORT, UdpChecksum, UdpPacket, UdpRepr};

/// The IP header of a RoCEv2 frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpRepr {
    /// IPv4.
    Ipv4(Ipv4Repr),
    /// IPv6.
    Ipv6(Ipv6Repr),
}

impl IpRepr {
    /// The IP version.
    pub const fn version(&self) -> IpVersion {
        match self {
            IpRepr::Ipv4(_) => IpVersion::V4,
            IpRepr::Ipv6(_) => IpVersion::V6,
        }
    }

    /// Source address.
    pub const fn src_addr(&self) -> IpAddr {
        match self {
            IpRepr::Ipv4(r) => IpAddr::V4(r.src_addr),
            IpRepr::Ipv6(r) => IpAddr::V6(r.src_addr),
        }
    }

    /// Destination address.
    pub const fn dst_addr(&self) -> IpAddr {
        match self {
            IpRepr::Ipv4(r) => IpAddr::V4(r.dst_addr),
            IpRepr::Ipv6(r) => IpAddr::V6(r.dst_addr),
        }
    }

    /// DSCP (6 bits).
    pub const fn dscp(&self) -> u8 {
        match self {
            IpRepr::Ipv4(r) => r.dscp,
            IpRepr::Ipv6(r) => r.dscp,
        }
    }

    /// ECN (2 bits; 3 = congestion experienced).
    pub const fn ecn(&self) -> u8 {
        match self {
            IpRepr::Ipv4(r) => r.ecn,
            IpRepr::Ipv6(r) => r.ecn,
        }
    }

    /// IPv4 TTL or IPv6 hop limit.
    pub const fn hop_limit(&self) -> u8 {
        match self {
            IpRepr::Ipv4(r) => r.ttl,
            IpRepr::Ipv6(r) => r.hop_limit,
        }
    }

    /// Length of the IP payload (the UDP datagram).
    pub const fn payload_len(&self) -> usize {
        match self {
            IpRepr::Ipv4(r) => r.payload_len,
            IpRepr::Ipv6(r) => r.payload_len,
        }
    }

    /// Length of the IP header.
    pub const fn header_len(&self) -> usize {
        self.version().header_len()
    }

    const fn ethertype(&self) -> EtherType {
        match self {
            IpRepr::Ipv4(_) => EtherType::IPV4,
            IpRepr::Ipv6(_) => EtherType::IPV6,
        }
    }
}

/// The Ethernet, IP and UDP headers of a RoCEv2 frame.
///
/// On emit, the lengths (`payload_len` of the IP repr, the UDP length), the Ethertype, the
/// IPv4 header checksum and the UDP checksum are computed; the values in the repr are
/// ignored. Everything else is written as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameRepr {
    /// MAC addresses and optional 802.1Q tag.
    pub ethernet: EthernetRepr,
    /// Addresses, DSCP/ECN, TTL/hop limit, identification, flow label.
    pub ip: IpRepr,
    /// Ports and whether a UDP checksum is sent.
    pub udp: UdpRepr,
}

/// Where the parts of a frame lie, as found by [`parse_envelope`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    ip_start: usize,
    udp_start: usize,
    /// End of the IP packet (and of the UDP datagram); Ethernet padding may follow.
    end: usize,
}

impl Layout {
    pub(crate) fn ib_part<'a>(&self, frame: &'a [u8]) -> &'a [u8] {
        &frame[self.udp_start + udp::HEADER_LEN..self.end]
    }

    /// The IP header and the datagram up to the ICRC: what the ICRC covers after the
    /// pseudo-LRH.
    pub(crate) fn ip_packet_without_icrc<'a>(&self, frame: &'a [u8]) -> &'a [u8] {
        &frame[self.ip_start..self.end - ICRC_LEN]
    }

    pub(crate) fn ip_header_len(&self) -> usize {
        self.udp_start - self.ip_start
    }

    pub(crate) fn icrc(&self, frame: &[u8]) -> u32 {
        let b = &frame[self.end - ICRC_LEN..self.end];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
}

/// Parses and checks the L2–L4 headers of a RoCEv2 frame. The UDP payload is guaranteed
/// to hold at least a BTH and an ICRC.
pub(crate) fn parse_envelope(bytes: &[u8]) -> Result<(FrameRepr, Layout), ParseError> {
    let eth = EthernetFrame::new_checked(bytes)?;
    let ethernet = EthernetRepr::parse(&eth)?;
    let ip_start = eth.header_len();
    let l3 = &bytes[ip_start..];
    let (ip, ip_header_len, ip_payload_len) = match ethernet.ethertype {
        EtherType::IPV4 => {
            let packet = Ipv4Packet::new_checked(l3)?;
            let repr = Ipv4Repr::parse(&packet)?;
            if repr.protocol != ipv4::PROTOCOL_UDP {
                return Err(ParseError::NotUdp(repr.protocol));
            }
            (IpRepr::Ipv4(repr), ipv4::HEADER_LEN, repr.payload_len)
        }
        EtherType::IPV6 => {
            let packet = Ipv6Packet::new_checked(l3)?;
            let repr = Ipv6Repr::parse(&packet)?;
            if repr.next_header != ipv4::PROTOCOL_UDP {
                return Err(ParseError::NotUdp(repr.next_header));
            }
            (IpRepr::Ipv6(repr), ipv6::HEADER_LEN, repr.payload_len)
        }
        other => return Err(ParseError::UnsupportedEthertype(other.0)),
    };
    let udp_start = ip_start + ip_header_len;
    let end = udp_start + ip_payload_len;
    let datagram = &bytes[udp_start..end];
    let packet = UdpPacket::new_checked(datagram)?;
    if usize::from(packet.len()) != datagram.len() {
        return Err(ParseError::UdpLength {
            udp_len: packet.len(),
            ip_payload: datagram.len(),
        });
    }
    let udp = UdpRepr::parse(&packet)?;
    if udp.dst_port != ROCE_V2_UDP_PORT {
        return Err(ParseError::NotRoceV2Port(udp.dst_port));
    }
    let ib_len = datagram.len() - udp::HEADER_LEN;
    if ib_len < bth::HEADER_LEN {
        return Err(ParseError::Truncated {
            layer: Layer::Bth,
            needed: bth::HEADER_LEN,
            available: ib_len,
        });
    }
    if ib_len < bth::HEADER_LEN + ICRC_LEN {
        return Err(ParseError::Truncated {
            layer: Layer::ExtHeaders,
            needed: bth::HEADER_LEN + ICRC_LEN,
            available: ib_len,
        });
    }
    Ok((
        FrameRepr { ethernet, ip, udp },
        Layout {
            ip_start,
            udp_start,
            end,
        },
    ))
}

impl FrameRepr {
    /// An IPv4 envelope with rxe's choices: TTL 64, DF set, DSCP/ECN 0, identification 0
    /// (set it per packet if you want rxe's incrementing IDs), UDP checksum 0, no VLAN.
    pub const fn ipv4(
        src_mac: EthernetAddress,
        dst_mac: EthernetAddress,
        src_addr: Ipv4Addr,
        dst_addr: Ipv4Addr,
        src_port: u16,
    ) -> FrameRepr {
        FrameRepr {
            ethernet: EthernetRepr {
                src_addr: src_mac,
                dst_addr: dst_mac,
                vlan: None,
                ethertype: EtherType::IPV4,
            },
            ip: IpRepr::Ipv4(Ipv4Repr {
                src_addr,
                dst_addr,
                protocol: ipv4::PROTOCOL_UDP,
                payload_len: 0,
                dscp: 0,
                ecn: 0,
                ttl: 64,
                identification: 0,
                dont_fragment: true,
            }),
            udp: UdpRepr {
                src_port,
                dst_port: ROCE_V2_UDP_PORT,
                checksum: UdpChecksum::None,
            },
        }
    }

    /// An IPv6 envelope with rxe's choices: hop limit 64, traffic class 0, flow label 0, UDP
    /// checksum 0, no VLAN.
    pub const fn ipv6(
        src_mac: EthernetAddress,
        dst_mac: EthernetAddress,
        src_addr: Ipv6Addr,
        dst_addr: Ipv6Addr,
        src_port: u16,
    ) -> FrameRepr {
        FrameRepr {
            ethernet: EthernetRepr {
                src_addr: src_mac,
                dst_addr: dst_mac,
                vlan: None,
                ethertype: EtherType::IPV6,
            },
            ip: IpRepr::Ipv6(Ipv6Repr {
                src_addr,
                dst_addr,
                next_header: ipv4::PROTOCOL_UDP,
                payload_len: 0,
                dscp: 0,
                ecn: 0,
                flow_label: 0,
                hop_limit: 64,
            }),
            udp: UdpRepr {
                src_port,
                dst_port: ROCE_V2_UDP_PORT,
                checksum: UdpChecksum::None,
            },
        }
    }

    /// The same envelope with an 802.1Q tag.
    pub const fn with_vlan(mut self, vlan: Option<VlanTag>) -> FrameRepr {
        self.ethernet.vlan = vlan;
        self
    }

    /// Parses and checks the L2–L4 headers of a frame (without looking into the IB part).
    pub fn parse(bytes: &[u8]) -> Result<FrameRepr, ParseError> {
        parse_envelope(bytes).map(|(repr, _)| repr)
    }

    /// Length of the Ethernet, IP and UDP headers: where the BTH starts in the frame.
    pub const fn header_len(&self) -> usize {
        self.ethernet.header_len() + self.ip.header_len() + udp::HEADER_LEN
    }

    /// Length of the whole frame around an IB part of `ib_len` bytes (headers and payload,
    /// without pad and ICRC).
    pub const fn frame_len(&self, ib_len: usize) -> usize {
        self.header_len() + ib_len + IbRepr::pad_for(ib_len) as usize + ICRC_LEN
    }

    /// Completes a frame whose IB part (BTH, extension headers and payload; `ib_len`
    /// bytes) is already in place at [`FrameRepr::header_len`]: writes the pad (zeros), the
    /// Ethernet, IP and UDP headers with their lengths and checksums, and the ICRC. Returns
    /// the frame length.
    ///
    /// The BTH pad count in place must match `ib_len` (as [`IbRepr::emit`] writes it).
    pub fn emit(&self, frame: &mut [u8], ib_len: usize) -> Result<usize, EmitError> {
        let sizes = self.sizes(frame, ib_len)?;
        let frame = &mut frame[..sizes.total];
        self.write_headers(frame, sizes.udp_len);
        self.finish(frame, &sizes);
        Ok(sizes.total)
    }

    /// Checks that a frame of an IB part of `ib_len` bytes can be completed in `frame`, and
    /// writes its pad.
    fn sizes(&self, frame: &mut [u8], ib_len: usize) -> Result<Sizes, EmitError> {
        if ib_len < bth::HEADER_LEN {
            return Err(EmitError::IbTooShort(ib_len));
        }
        let header_len = self.header_len();
        let pad = usize::from(IbRepr::pad_for(ib_len));
        let udp_len = udp::HEADER_LEN + ib_len + pad + ICRC_LEN;
        let ip_total = self.ip.header_len() + udp_len;
        let max = match self.ip {
            IpRepr::Ipv4(_) => usize::from(u16::MAX),
            IpRepr::Ipv6(_) => usize::from(u16::MAX) + ipv6::HEADER_LEN,
        };
        if ip_total > max {
            return Err(EmitError::TooLong(ip_total));
        }
        let total = header_len + ib_len + pad + ICRC_LEN;
        if frame.len() < total {
            return Err(EmitError::BufferTooSmall {
                needed: total,
                available: frame.len(),
            });
        }
        let found = (frame[header_len + 1] >> 4) & 0x03;
        if usize::from(found) != pad {
            return Err(EmitError::PadMismatch {
                found,
                expected: pad as u8,
            });
        }
        frame[header_len + ib_len..header_len + ib_len + pad].fill(0);
        Ok(Sizes {
            ip_start: self.ethernet.header_len(),
            udp_start: self.ethernet.header_len() + self.ip.header_len(),
            udp_len,
            total,
        })
    }

    /// Writes the Ethernet, IP and UDP headers for a datagram of `udp_len` bytes.
    fn write_headers(&self, frame: &mut [u8], udp_len: usize) {
        let mut ethernet = self.ethernet;
        ethernet.ethertype = self.ip.ethertype();
        ethernet.emit(&mut EthernetFrame::new_unchecked(&mut *frame));
        let ip_start = ethernet.header_len();
        let udp_start = ip_start + self.ip.header_len();
        match self.ip {
            IpRepr::Ipv4(mut r) => {
                r.payload_len = udp_len;
                r.protocol = ipv4::PROTOCOL_UDP;
                r.emit(&mut Ipv4Packet::new_unchecked(
                    &mut frame[ip_start..udp_start],
                ));
            }
            IpRepr::Ipv6(mut r) => {
                r.payload_len = udp_len;
                r.next_header = ipv4::PROTOCOL_UDP;
                r.emit(&mut Ipv6Packet::new_unchecked(
                    &mut frame[ip_start..udp_start],
                ));
            }
        }
        self.udp.emit(
            &mut UdpPacket::new_unchecked(&mut frame[udp_start..]),
            udp_len - udp::HEADER_LEN,
        );
    }

    /// Writes the ICRC (and a computed UDP checksum) of a frame whose headers are written.
    fn finish(&self, frame: &mut [u8], sizes: &Sizes) {
        let total = sizes.total;
        let crc = icrc::compute_packet(
            &frame[sizes.ip_start..total - ICRC_LEN],
            sizes.udp_start - sizes.ip_start,
        );
        frame[total - ICRC_LEN..total].copy_from_slice(&crc.to_le_bytes());
        if self.udp.checksum == UdpChecksum::Computed {
            UdpPacket::new_unchecked(&mut frame[sizes.udp_start..total])
                .fill_checksum(self.ip.src_addr(), self.ip.dst_addr());
        }
    }

    /// Builds a whole frame in `frame`: the IB headers of `ib`, the `payload`, then
    /// everything [`FrameRepr::emit`] adds. Returns the frame length.
    pub fn emit_packet(
        &self,
        frame: &mut [u8],
        ib: &IbRepr,
        payload: &[u8],
    ) -> Result<usize, EmitError> {
        let start = self.header_len();
        let needed = self.frame_len(ib.header_len() + payload.len());
        if frame.len() < needed {
            return Err(EmitError::BufferTooSmall {
                needed,
                available: frame.len(),
            });
        }
        let header_len = ib.emit(&mut frame[start..], payload.len())?;
        frame[start + header_len..start + header_len + payload.len()].copy_from_slice(payload);
        self.emit(frame, header_len + payload.len())
    }
}

/// The sizes [`FrameRepr::emit`] works out for one frame.
struct Sizes {
    ip_start: usize,
    udp_start: usize,
    udp_len: usize,
    total: usize,
}

/// The longest L2–L4 header: Ethernet with an 802.1Q tag, IPv6, UDP.
pub const MAX_HEADER_LEN: usize =
    crate::ethernet::TAGGED_HEADER_LEN + ipv6::HEADER_LEN + udp::HEADER_LEN;

/// The headers of a [`FrameRepr`] written once, for a sender that sends many frames along
/// one path: [`FrameTemplate::emit`] copies them and fills in the lengths, the IPv4
/// identification and header checksum, the pad and the ICRC. What it writes is byte for
/// byte what [`FrameRepr::emit`] writes for the same repr with that identification; it
/// only skips building every header field by field for every frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameTemplate {
    repr: FrameRepr,
    bytes: [u8; MAX_HEADER_LEN],
    /// IPv4: the one's complement sum of the header with total length, identification and
    /// checksum zero.
    ip_sum: u64,
}

impl FrameTemplate {
    /// The template of `repr` (its IPv4 identification is ignored: each frame gives its
    /// own).
    pub fn new(repr: FrameRepr) -> FrameTemplate {
        let mut bytes = [0u8; MAX_HEADER_LEN];
        let mut repr0 = repr;
        if let IpRepr::Ipv4(r) = &mut repr0.ip {
            r.identification = 0;
        }
        let header_len = repr.header_len();
        repr0.write_headers(&mut bytes[..header_len], udp::HEADER_LEN);
        let ip_start = repr.ethernet.header_len();
        let mut ip_sum = 0;
        if let IpRepr::Ipv4(_) = repr.ip {
            let ip = &mut bytes[ip_start..ip_start + ipv4::HEADER_LEN];
            // Total length (2..4), identification (4..6), checksum (10..12): per frame.
            ip[2..6].fill(0);
            ip[10..12].fill(0);
            ip_sum = checksum::sum(0, ip);
        }
        FrameTemplate {
            repr,
            bytes,
            ip_sum,
        }
    }

    /// The envelope it was made from.
    pub const fn repr(&self) -> &FrameRepr {
        &self.repr
    }

    /// Completes a frame as [`FrameRepr::emit`] does, with `identification` as the IPv4
    /// identification (unused for IPv6).
    pub fn emit(
        &self,
        frame: &mut [u8],
        ib_len: usize,
        identification: u16,
    ) -> Result<usize, EmitError> {
        let sizes = self.repr.sizes(frame, ib_len)?;
        let frame = &mut frame[..sizes.total];
        frame[..sizes.udp_start + udp::HEADER_LEN]
            .copy_from_slice(&self.bytes[..sizes.udp_start + udp::HEADER_LEN]);
        let ip = sizes.ip_start;
        match self.repr.ip {
            IpRepr::Ipv4(_) => {
                let total = (ipv4::HEADER_LEN + sizes.udp_len) as u16;
                frame[ip + 2..ip + 4].copy_from_slice(&total.to_be_bytes());
                frame[ip + 4..ip + 6].copy_from_slice(&identification.to_be_bytes());
                let sum = self.ip_sum + u64::from(total) + u64::from(identification);
                frame[ip + 10..ip + 12].copy_from_slice(&checksum::finish(sum).to_be_bytes());
            }
            IpRepr::Ipv6(_) => {
                frame[ip + 4..ip + 6].copy_from_slice(&(sizes.udp_len as u16).to_be_bytes());
            }
        }
        let udp = sizes.udp_start;
        frame[udp + 4..udp + 6].copy_from_slice(&(sizes.udp_len as u16).to_be_bytes());
        self.repr.finish(frame, &sizes);
        Ok(sizes.total)
    }
}

/// A parsed RoCEv2 frame: envelope, IB headers, payload and ICRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Ethernet, IP and UDP headers.
    pub headers: FrameRepr,
    /// BTH and extension headers.
    pub ib: IbRepr,
    /// The payload, pad and ICRC stripped.
    pub payload: &'a [u8],
    /// The ICRC the frame carries (read little-endian).
    pub icrc: u32,
    /// IP header and datagram up to the ICRC.
    ip_packet: &'a [u8],
    ip_header_len: usize,
    len: usize,
}

impl<'a> Frame<'a> {
    /// Parses a whole Ethernet frame and verifies its ICRC. This is the receive path:
    /// every error names what was wrong, and a bad ICRC is
    /// [`ParseError::IcrcMismatch`].
    #[inline]
    pub fn parse(bytes: &'a [u8]) -> Result<Frame<'a>, ParseError> {
        let frame = Frame::parse_unverified(bytes)?;
        let computed = frame.computed_icrc();
        if computed != frame.icrc {
            return Err(ParseError::IcrcMismatch {
                found: frame.icrc,
                computed,
            });
        }
        Ok(frame)
    }

    /// Parses a whole Ethernet frame without checking the ICRC (for tools that show a
    /// packet's fields before judging it; check with [`Frame::icrc_ok`]).
    #[inline]
    pub fn parse_unverified(bytes: &'a [u8]) -> Result<Frame<'a>, ParseError> {
        let (headers, layout) = parse_envelope(bytes)?;
        let (ib, payload) = IbRepr::parse(layout.ib_part(bytes))?;
        Ok(Frame {
            headers,
            ib,
            payload,
            icrc: layout.icrc(bytes),
            ip_packet: layout.ip_packet_without_icrc(bytes),
            ip_header_len: layout.ip_header_len(),
            len: layout.end,
        })
    }

    /// The ICRC computed over the frame.
    pub fn computed_icrc(&self) -> u32 {
        icrc::compute_packet(self.ip_packet, self.ip_header_len)
    }

    /// `true` if the carried ICRC is the computed one.
    pub fn icrc_ok(&self) -> bool {
        self.computed_icrc() == self.icrc
    }

    /// Length of the frame up to the end of the IP packet (Ethernet padding excluded).
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Never true: a parsed frame holds at least the headers.
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Builds this frame again from its parts into `buf` (for tests and tools: the bytes
    /// equal the original's up to [`Frame::len`] when the original was well formed).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EmitError> {
        self.headers.emit_packet(buf, &self.ib, self.payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aeth::{AethRepr, Syndrome};
    use crate::bth::BthRepr;
    use crate::icrc::tests::ACK_FRAME;
    use crate::identifiers::Qpn;
    use crate::opcode::Opcode;
    use crate::psn::Psn;
    use std::vec;

    const MAC2: EthernetAddress = EthernetAddress([0x52, 0x54, 0x00, 0x77, 0x00, 0x02]);
    const MAC3: EthernetAddress = EthernetAddress([0x52, 0x54, 0x00, 0x77, 0x00, 0x03]);

    const MAX_FRAME_FOR_TESTS: usize = 18 + 40 + 8 + 40 + 4096 + 3 + 4;

    fn ack_headers() -> FrameRepr {
        let mut h = FrameRepr::ipv4(
            MAC2,
            MAC3,
            Ipv4Addr::new(10, 77, 0, 2),
            Ipv4Addr::new(10, 77, 0, 3),
            49441,
        );
        if let IpRepr::Ipv4(r) = &mut h.ip {
            r.identification = 0x9cf4;
            r.payload_len = 28;
        }
        h
    }

    fn ack_ib() -> IbRepr {
        IbRepr {
            aeth: Some(AethRepr {
                syndrome: Syndrome::ACK_UNLIMITED,
                msn: 1,
            }),
            ..IbRepr::new(BthRepr::new(
                Opcode::RC_ACKNOWLEDGE,
                Qpn::new(0x11),
                Psn::new(0x58f05d),
            ))
        }
    }

    #[test]
    fn parse_rxe_ack() {
        let f = Frame::parse(&ACK_FRAME).unwrap();
        assert_eq!(f.headers, ack_headers());
        assert_eq!(f.ib, ack_ib());
        assert!(f.payload.is_empty());
        assert_eq!(f.icrc, 0x668f_2535);
        assert!(f.icrc_ok());
        assert_eq!(f.len(), 62);
        assert_eq!(f.headers.ip.hop_limit(), 64);
        assert_eq!(
            f.headers.ip.src_addr(),
            IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2))
        );
        assert_eq!(FrameRepr::parse(&ACK_FRAME), Ok(ack_headers()));
    }

    #[test]
    fn template_rebuilds_rxe_ack_byte_for_byte() {
        let h = ack_headers();
        let t = FrameTemplate::new(h);
        let mut buf = [0xa5u8; 62];
        let n = ack_ib().emit(&mut buf[h.header_len()..], 0).unwrap();
        assert_eq!(t.emit(&mut buf, n, 0x9cf4), Ok(62));
        assert_eq!(buf, ACK_FRAME);
        assert_eq!(t.repr(), &h);
    }

    /// A template writes what the repr writes: IPv4 and IPv6, with and without a VLAN tag,
    /// every UDP checksum choice, identifications across the range, payloads of every pad;
    /// and fails where the repr fails.
    #[test]
    fn template_emits_what_the_repr_emits() {
        let v4 = FrameRepr::ipv4(
            MAC2,
            MAC3,
            Ipv4Addr::new(192, 168, 7, 1),
            Ipv4Addr::new(10, 0, 0, 254),
            0xc123,
        );
        let mut v4b = v4;
        if let IpRepr::Ipv4(r) = &mut v4b.ip {
            r.dscp = 46;
            r.ecn = 2;
            r.ttl = 3;
            r.dont_fragment = false;
        }
        let mut v6 = FrameRepr::ipv6(
            MAC3,
            MAC2,
            "fd00::1".parse().unwrap(),
            "fd00:1:2::ff".parse().unwrap(),
            0xd00d,
        );
        if let IpRepr::Ipv6(r) = &mut v6.ip {
            r.flow_label = 0xabcde;
            r.dscp = 10;
            r.hop_limit = 1;
        }
        let vlan = Some(VlanTag {
            pcp: 5,
            dei: true,
            vid: 0x123,
        });
        for base in [v4, v4b, v6, v4.with_vlan(vlan), v6.with_vlan(vlan)] {
            for checksum in [
                UdpChecksum::None,
                UdpChecksum::Computed,
                UdpChecksum::Carried(0x1234),
            ] {
                let mut repr = base;
                repr.udp.checksum = checksum;
                let template = FrameTemplate::new(repr);
                for (i, payload_len) in [0usize, 1, 2, 3, 4, 61, 1024, 4096].into_iter().enumerate()
                {
                    let id = [0u16, 1, 0x7fff, 0xfffe, 0xffff, 0x9cf4, 77, 4242][i];
                    let ib = IbRepr::new(BthRepr::new(
                        Opcode::RC_SEND_ONLY,
                        Qpn::new(0x1234),
                        Psn::new(0xff_fffe),
                    ));
                    let mut with_id = repr;
                    if let IpRepr::Ipv4(r) = &mut with_id.ip {
                        r.identification = id;
                    }
                    let payload: std::vec::Vec<u8> = (0..payload_len).map(|b| b as u8).collect();
                    let mut a = vec![0xa5u8; MAX_FRAME_FOR_TESTS];
                    let n = with_id.emit_packet(&mut a, &ib, &payload).unwrap();
                    let mut b = vec![0x5au8; MAX_FRAME_FOR_TESTS];
                    let start = repr.header_len();
                    let ib_len = ib.emit(&mut b[start..], payload_len).unwrap();
                    b[start + ib_len..start + ib_len + payload_len].copy_from_slice(&payload);
                    let m = template.emit(&mut b, ib_len + payload_len, id).unwrap();
                    assert_eq!(m, n);
                    assert_eq!(a[..n], b[..n], "{repr:?} payload {payload_len} id {id}");
                    assert!(Frame::parse(&b[..m]).is_ok());
                    // Too small a buffer and a pad that does not match fail the same way.
                    let mut short = vec![0u8; n - 1];
                    short[start..start + ib_len].copy_from_slice(&b[start..start + ib_len]);
                    assert_eq!(
                        template.emit(&mut short, ib_len + payload_len, id),
                        repr.emit(&mut short, ib_len + payload_len)
                    );
                    assert_eq!(
                        template.emit(&mut b, ib_len + payload_len + 1, id),
                        repr.emit(&mut b, ib_len + payload_len + 1)
                    );
                }
            }
        }
    }

    #[test]
    fn emit_rebuilds_rxe_ack_byte_for_byte() {
        let mut buf = [0xa5u8; 62];
        assert_eq!(ack_headers().emit_packet(&mut buf, &ack_ib(), &[]), Ok(62));
        assert_eq!(buf, ACK_FRAME);
        // In place: IB headers first, then the envelope around them.
        let mut buf = [0xa5u8; 62];
        let h = ack_headers();
        let n = ack_ib().emit(&mut buf[h.header_len()..], 0).unwrap();
        assert_eq!(h.frame_len(n), 62);
        assert_eq!(h.emit(&mut buf, n), Ok(62));
        assert_eq!(buf, ACK_FRAME);
    }

    #[test]
    fn ipv6_with_vlan_round_trips() {
        let mut headers = FrameRepr::ipv6(
            MAC2,
            MAC3,
            "fd00:77::2".parse().unwrap(),
            "fd00:77::3".parse().unwrap(),
            0xd000,
        )
        .with_vlan(Some(VlanTag {
            pcp: 3,
            dei: false,
            vid: 77,
        }));
        if let IpRepr::Ipv6(r) = &mut headers.ip {
            r.dscp = 26;
            r.ecn = 2;
            r.flow_label = 0xabcde;
        }
        headers.udp.checksum = UdpChecksum::Computed;
        let mut ib = IbRepr::new(BthRepr::new(Opcode::RC_SEND_ONLY, Qpn::new(5), Psn::new(1)));
        ib.bth.ack_request = true;
        let payload = [1u8, 2, 3, 4, 5, 6, 7];
        let mut buf = vec![0xa5u8; 200];
        let n = headers.emit_packet(&mut buf, &ib, &payload).unwrap();
        assert_eq!(n, 18 + 40 + 8 + 12 + 7 + 1 + 4);
        let f = Frame::parse(&buf[..n]).unwrap();
        assert_eq!(f.payload, &payload);
        assert_eq!(f.ib.bth.pad_count, 1);
        assert_eq!(f.headers.ethernet.vlan.map(|v| v.vid), Some(77));
        let mut expected = headers;
        expected.ethernet.ethertype = EtherType::IPV6;
        if let IpRepr::Ipv6(r) = &mut expected.ip {
            r.payload_len = n - 18 - 40;
        }
        // The UDP checksum is real; it is carried, unverified, on parse.
        let udp = UdpPacket::new_checked(&buf[18 + 40..n]).unwrap();
        assert_ne!(udp.checksum(), 0);
        assert!(udp.verify_checksum(f.headers.ip.src_addr(), f.headers.ip.dst_addr()));
        expected.udp.checksum = UdpChecksum::Carried(udp.checksum());
        assert_eq!(f.headers, expected);
        // Emitting the parsed frame reproduces it, carried checksum included.
        let mut again = vec![0u8; n];
        assert_eq!(f.emit(&mut again), Ok(n));
        assert_eq!(again, buf[..n]);
    }

    #[test]
    fn every_truncation_is_an_error() {
        for n in 0..ACK_FRAME.len() {
            assert!(Frame::parse(&ACK_FRAME[..n]).is_err(), "{n}");
            assert!(Frame::parse_unverified(&ACK_FRAME[..n]).is_err(), "{n}");
        }
    }

    /// Fixes the IPv4 header checksum after an edit, so the test reaches the next check.
    fn fix_ipv4(f: &mut [u8]) {
        f[24] = 0;
        f[25] = 0;
        let sum = crate::checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
    }

    #[test]
    fn malformed_frames_name_what_is_wrong() {
        let parse = |f: &[u8]| Frame::parse(f).map(|_| ());

        let mut f = ACK_FRAME;
        f[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(parse(&f), Err(ParseError::UnsupportedEthertype(0x0806)));

        let mut f = ACK_FRAME;
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        assert!(matches!(
            parse(&f),
            Err(ParseError::IpVersion {
                expected: 6,
                found: 4
            })
        ));

        let mut f = ACK_FRAME;
        f[14] = 0x65;
        assert_eq!(
            parse(&f),
            Err(ParseError::IpVersion {
                expected: 4,
                found: 6
            })
        );

        let mut f = ACK_FRAME;
        f[14] = 0x43;
        assert_eq!(parse(&f), Err(ParseError::Ipv4HeaderLength(3)));

        let mut f = ACK_FRAME;
        f[17] = 0x31; // total length one byte longer than the frame
        fix_ipv4(&mut f);
        assert_eq!(
            parse(&f),
            Err(ParseError::Ipv4TotalLength {
                total: 0x31,
                available: 48
            })
        );

        let mut f = ACK_FRAME;
        f[17] = 0x2c; // total length 4 bytes short: UDP length now lies
        fix_ipv4(&mut f);
        assert_eq!(
            parse(&f),
            Err(ParseError::UdpLength {
                udp_len: 28,
                ip_payload: 24
            })
        );

        let mut f = ACK_FRAME;
        f[39] = 0x20; // UDP length longer than the IP payload
        assert_eq!(
            parse(&f),
            Err(ParseError::UdpLength {
                udp_len: 32,
                ip_payload: 28
            })
        );

        let mut f = ACK_FRAME;
        f[39] = 0x18; // UDP length shorter than the IP payload
        assert_eq!(
            parse(&f),
            Err(ParseError::UdpLength {
                udp_len: 24,
                ip_payload: 28
            })
        );

        let mut f = ACK_FRAME;
        f[23] = 6; // TCP
        fix_ipv4(&mut f);
        assert_eq!(parse(&f), Err(ParseError::NotUdp(6)));

        let mut f = ACK_FRAME;
        f[25] ^= 1;
        assert_eq!(parse(&f), Err(ParseError::Ipv4Checksum));

        let mut f = ACK_FRAME;
        f[36..38].copy_from_slice(&4792u16.to_be_bytes());
        assert_eq!(parse(&f), Err(ParseError::NotRoceV2Port(4792)));

        // A wrong nonzero UDP checksum is not an error (see UdpChecksum); it is carried.
        let mut f = ACK_FRAME;
        f[40..42].copy_from_slice(&[0x12, 0x34]);
        assert_eq!(
            Frame::parse(&f).map(|f| f.headers.udp.checksum),
            Ok(UdpChecksum::Carried(0x1234))
        );

        let mut f = ACK_FRAME;
        f[43] = 0x01; // TVer 1
        assert_eq!(parse(&f), Err(ParseError::TransportVersion(1)));

        let mut f = ACK_FRAME;
        f[42] = 0xc0;
        assert_eq!(parse(&f), Err(ParseError::UnsupportedOpcode(0xc0)));

        let mut f = ACK_FRAME;
        f[43] = 0x30; // pad 3 on an ACK
        assert_eq!(
            parse(&f),
            Err(ParseError::PadCount {
                pad: 3,
                available: 0
            })
        );

        let mut f = ACK_FRAME;
        f[57] = 2; // MSN changed: ICRC no longer matches
        assert!(matches!(
            parse(&f),
            Err(ParseError::IcrcMismatch {
                found: 0x668f_2535,
                ..
            })
        ));
        assert!(Frame::parse_unverified(&f).is_ok());
        assert!(!Frame::parse_unverified(&f).unwrap().icrc_ok());
    }

    #[test]
    fn ethernet_padding_is_tolerated() {
        let mut padded = [0u8; 64];
        padded[..62].copy_from_slice(&ACK_FRAME);
        let f = Frame::parse(&padded).unwrap();
        assert_eq!(f.len(), 62);
        let mut buf = [0u8; 64];
        assert_eq!(f.emit(&mut buf), Ok(62));
        assert_eq!(buf[..62], ACK_FRAME);
    }

    #[test]
    fn emit_errors() {
        let h = ack_headers();
        let mut buf = [0u8; 61];
        assert_eq!(
            h.emit_packet(&mut buf, &ack_ib(), &[]),
            Err(EmitError::BufferTooSmall {
                needed: 62,
                available: 61
            })
        );
        let mut buf = [0u8; 100];
        assert_eq!(h.emit(&mut buf, 11), Err(EmitError::IbTooShort(11)));
        let n = ack_ib().emit(&mut buf[42..], 0).unwrap();
        buf[43] = 0x10; // pad 1 in the BTH, but 16 bytes need none
        assert_eq!(
            h.emit(&mut buf, n),
            Err(EmitError::PadMismatch {
                found: 1,
                expected: 0
            })
        );
        let mut huge = vec![0u8; 70_000];
        let ib = IbRepr::new(BthRepr::new(Opcode::RC_SEND_ONLY, Qpn::new(1), Psn::ZERO));
        assert!(matches!(
            h.emit_packet(&mut huge, &ib, &[0u8; 65_520]),
            Err(EmitError::TooLong(_))
        ));
    }
}
