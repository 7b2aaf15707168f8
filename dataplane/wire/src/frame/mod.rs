//! Whole RoCEv2 frames: Ethernet → (802.1Q) → IPv4/IPv6 → UDP 4791 → IB part.
//!
//! [`Frame::parse`] takes a received frame apart and verifies its ICRC. [`FrameRepr`] is the
//! L2–L4 envelope a sender keeps per destination; [`FrameRepr::emit`] wraps an IB part that
//! was written in place (see [`crate::IbRepr::emit`]) with every L2–L4 header, the pad and
//! the ICRC, without copying it.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::ICRC_LEN;
use crate::bth;
use crate::error::{EmitError, Layer, ParseError};
use crate::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, VlanTag};
use crate::ib::IbRepr;
use crate::icrc;
use crate::ipv4::{self, Ipv4Packet, Ipv4Repr};
use crate::ipv6::{self, Ipv6Packet, Ipv6Repr};
use crate::mtu::IpVersion;
use crate::udp::{self, ROCE_V2_UDP_PORT, UdpChecksum, UdpPacket, UdpRepr};

mod template;
pub use template::FrameTemplate;

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
// Forced inline: on the path of every frame received (`Frame::parse`); the selective
// acknowledgement's cold parse calls it too, which must not move it out of that path.
#[inline(always)]
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
        // The pad is zeros, and so, until the ICRC is written over them, are the bytes
        // after it: one four-byte store, where a fill of the pad's length was a call.
        frame[header_len + ib_len..header_len + ib_len + ICRC_LEN].fill(0);
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
        frame.check_icrc()?;
        Ok(frame)
    }

    /// [`ParseError::IcrcMismatch`] unless the carried ICRC is the computed one.
    #[inline(always)]
    fn check_icrc(&self) -> Result<(), ParseError> {
        let computed = self.computed_icrc();
        if computed != self.icrc {
            return Err(ParseError::IcrcMismatch {
                found: self.icrc,
                computed,
            });
        }
        Ok(())
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

    /// Parses a whole Ethernet frame that is an RC ACKNOWLEDGE with bytes between its AETH
    /// and its ICRC, and verifies its ICRC: the NAK that carries xroce's selective
    /// acknowledgement ([`crate::sack`]). Those bytes are the frame's `payload`, for
    /// [`crate::SackRepr::parse`]. [`Frame::parse`] refuses such a frame
    /// ([`ParseError::UnexpectedPayload`]), as a standard ACKNOWLEDGE carries no payload;
    /// only a receiver that agreed to selective acknowledgements asks this.
    #[cold]
    #[inline(never)]
    pub fn parse_acknowledge_with_trailer(bytes: &'a [u8]) -> Result<Frame<'a>, ParseError> {
        const HEADERS: usize = bth::HEADER_LEN + crate::aeth::HEADER_LEN;
        let (headers, layout) = parse_envelope(bytes)?;
        let ib_part = layout.ib_part(bytes);
        if ib_part.len() < HEADERS + ICRC_LEN {
            return Err(ParseError::Truncated {
                layer: Layer::ExtHeaders,
                needed: HEADERS + ICRC_LEN,
                available: ib_part.len(),
            });
        }
        // The BTH and the AETH, read as `IbRepr::parse` reads them (the ICRC is checked
        // below, over the whole packet). The trailer is a multiple of 4 bytes: no pad.
        let bth = bth::BthRepr::parse(&bth::BthPacket::new_checked(ib_part)?)?;
        let trailer = ib_part.len() - HEADERS - ICRC_LEN;
        if bth.opcode != crate::Opcode::RC_ACKNOWLEDGE {
            return Err(ParseError::UnexpectedPayload {
                opcode: bth.opcode,
                len: trailer,
            });
        }
        if !ib_part.len().is_multiple_of(4) {
            return Err(ParseError::Misaligned(ib_part.len()));
        }
        if bth.pad_count != 0 {
            return Err(ParseError::PadCount {
                pad: bth.pad_count,
                available: trailer,
            });
        }
        let aeth = &ib_part[bth::HEADER_LEN..HEADERS];
        let mut ib = IbRepr::new(bth);
        ib.aeth = Some(crate::aeth::AethRepr::parse(
            &crate::aeth::AethPacket::new_checked(aeth)?,
        ));
        let frame = Frame {
            headers,
            ib,
            payload: &ib_part[HEADERS..ib_part.len() - ICRC_LEN],
            icrc: layout.icrc(bytes),
            ip_packet: layout.ip_packet_without_icrc(bytes),
            ip_header_len: layout.ip_header_len(),
            len: layout.end,
        };
        frame.check_icrc()?;
        Ok(frame)
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
mod tests;
