//! The two error types of the crate: what was wrong with bytes that came in, and why an
//! emit could not write what was asked.

use core::fmt;

use crate::opcode::{ExtHeader, Opcode};

/// The header (or part of a packet) a [`ParseError::Truncated`] ran out of bytes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    /// The 14-byte Ethernet II header.
    Ethernet,
    /// The 4-byte IEEE 802.1Q tag.
    Vlan,
    /// The IPv4 header, or the datagram its total length announces.
    Ipv4,
    /// The IPv6 header, or the payload its payload length announces.
    Ipv6,
    /// The UDP header, or the datagram its length announces.
    Udp,
    /// The 12-byte Base Transport Header.
    Bth,
    /// The extension headers the opcode names, plus the ICRC behind them.
    ExtHeaders,
    /// A 256-byte management datagram (IBTA 13.4).
    Mad,
    /// The 232 bytes of CM message data behind the MAD header (IBTA 12.6).
    Cm,
    /// The 36-byte IP CM header at the start of rdma_cm private data.
    IpCm,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::Ethernet => "Ethernet header",
            Layer::Vlan => "802.1Q tag",
            Layer::Ipv4 => "IPv4 packet",
            Layer::Ipv6 => "IPv6 packet",
            Layer::Udp => "UDP datagram",
            Layer::Bth => "BTH",
            Layer::ExtHeaders => "extension headers and ICRC",
            Layer::Mad => "MAD",
            Layer::Cm => "CM message",
            Layer::IpCm => "IP CM header",
        })
    }
}

/// Why bytes from the wire are not a RoCEv2 packet this crate accepts.
///
/// Every variant names the field that was wrong; none of them is ever a panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// The bytes end before the header or the length a header announced.
    #[error("{layer} truncated: {needed} bytes needed, {available} present")]
    Truncated {
        /// Where the bytes ran out.
        layer: Layer,
        /// How many bytes that layer needs.
        needed: usize,
        /// How many were there.
        available: usize,
    },
    /// The Ethertype (after an optional 802.1Q tag) is neither IPv4 nor IPv6.
    #[error("ethertype {0:#06x} is neither IPv4 (0x0800) nor IPv6 (0x86dd)")]
    UnsupportedEthertype(u16),
    /// The IP version nibble disagrees with the Ethertype.
    #[error("IP version field is {found}, but the ethertype announced IPv{expected}")]
    IpVersion {
        /// The version the Ethertype announced (4 or 6).
        expected: u8,
        /// The version nibble in the header.
        found: u8,
    },
    /// The IPv4 IHL field is below the minimum of 5 words (RFC 791).
    #[error("IPv4 header length (IHL) is {0} words; the minimum is 5")]
    Ipv4HeaderLength(u8),
    /// The IPv4 header carries options; RoCEv2 senders never add them and this crate does
    /// not support them.
    #[error(
        "IPv4 header carries options (IHL {0} words); RoCEv2 frames with options are not supported"
    )]
    Ipv4Options(u8),
    /// The IPv4 total length is shorter than the header or longer than the frame.
    #[error(
        "IPv4 total length {total} is impossible: the header is 20 bytes and the frame holds {available}"
    )]
    Ipv4TotalLength {
        /// The total length field.
        total: u16,
        /// Bytes from the start of the IPv4 header to the end of the frame.
        available: usize,
    },
    /// The IPv4 packet is a fragment (MF set or a nonzero fragment offset).
    #[error(
        "IPv4 packet is a fragment (MF set or offset nonzero); RoCEv2 packets are never fragmented"
    )]
    Ipv4Fragment,
    /// The IPv4 header checksum does not match the header (RFC 791).
    #[error("IPv4 header checksum is wrong")]
    Ipv4Checksum,
    /// The IPv6 payload length is longer than the frame.
    #[error("IPv6 payload length {payload_len} exceeds the {available} bytes behind the header")]
    Ipv6PayloadLength {
        /// The payload length field.
        payload_len: u16,
        /// Bytes behind the IPv6 header.
        available: usize,
    },
    /// The IPv4 protocol or IPv6 next header is not UDP (extension headers are not followed).
    #[error("IP protocol (next header) {0} is not UDP (17)")]
    NotUdp(u8),
    /// The UDP length field disagrees with the IP payload length.
    #[error("UDP length {udp_len} does not match the {ip_payload} bytes of IP payload")]
    UdpLength {
        /// The UDP length field.
        udp_len: u16,
        /// The IP payload length.
        ip_payload: usize,
    },
    /// The UDP destination port is not the RoCEv2 port.
    #[error("UDP destination port {0} is not the RoCEv2 port 4791")]
    NotRoceV2Port(u16),
    /// The BTH transport header version is not 0 (IBTA 9.2).
    #[error("BTH transport header version is {0}; only version 0 is defined")]
    TransportVersion(u8),
    /// The opcode is reserved, manufacturer-specific or of a transport this crate does not
    /// implement (XRC).
    #[error("opcode {0:#04x} is reserved or not supported")]
    UnsupportedOpcode(u8),
    /// The IB transport part (BTH to ICRC) is not a whole number of 4-byte words (IBTA 9.2).
    #[error("IB transport part is {0} bytes, not a multiple of 4")]
    Misaligned(usize),
    /// The BTH pad count is larger than the bytes between the headers and the ICRC.
    #[error("pad count {pad} exceeds the {available} bytes between the headers and the ICRC")]
    PadCount {
        /// The BTH PadCnt field.
        pad: u8,
        /// Payload bytes including pad.
        available: usize,
    },
    /// The opcode carries no payload, but bytes follow its headers.
    #[error("opcode {opcode} carries no payload, but {len} bytes follow its headers")]
    UnexpectedPayload {
        /// The packet's opcode.
        opcode: Opcode,
        /// Bytes between the headers and the ICRC.
        len: usize,
    },
    /// The ICRC carried by the packet is not the one computed over it (IBTA 7.8, Annex A17).
    #[error("ICRC mismatch: packet carries {found:#010x}, computed {computed:#010x}")]
    IcrcMismatch {
        /// The ICRC on the wire (read little-endian, as rxe stores it).
        found: u32,
        /// The ICRC computed over the packet.
        computed: u32,
    },
    /// The MAD base version is not 1 (IBTA 13.4.3; OPA's version 0x80 is not supported).
    #[error("MAD base version is {0}; only version 1 is supported")]
    MadBaseVersion(u8),
    /// The MAD is not of the communication management class, version 2 (IBTA 12.6).
    #[error(
        "MAD of management class {class:#04x} version {version} is not a CM MAD (class 0x07 version 2)"
    )]
    NotCm {
        /// The management class.
        class: u8,
        /// The class version.
        version: u8,
    },
    /// The CM MAD's method is not Send (0x03), the only method CM messages travel with
    /// (IBTA 12.6.1); Get/Set of ClassPortInfo are not served.
    #[error("CM MAD method {0:#04x} is not Send (0x03)")]
    CmMethod(u8),
    /// The CM attribute is not one of the messages this crate knows (REQ … SIDR_REP). LAP
    /// and APR are among these: the Linux CM refuses them on RoCE, and so do we.
    #[error("CM attribute {0:#06x} is not a supported CM message")]
    CmAttribute(u16),
    /// The IP CM header's version is not 0 (`CMA_VERSION`).
    #[error("IP CM header version is {0:#04x}; only version 0 is defined")]
    IpCmVersion(u8),
    /// The IP CM header's IP version nibble is neither 4 nor 6.
    #[error("IP CM header IP version is {0}; only 4 and 6 are defined")]
    IpCmIpVersion(u8),
    /// xroce's selective acknowledgement after a NAK's AETH is not one this crate emits
    /// (the text names the field: its length, version, range count, a reserved byte or
    /// the order of its ranges).
    #[error("selective acknowledgement malformed: {0}")]
    Sack(&'static str),
}

/// Why an emit could not write what was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EmitError {
    /// The output buffer is too small.
    #[error("buffer too small: {needed} bytes needed, {available} available")]
    BufferTooSmall {
        /// Bytes the emit needs.
        needed: usize,
        /// Bytes the buffer has.
        available: usize,
    },
    /// The opcode is reserved or not supported, so there is no header layout to write.
    #[error("opcode {0:#04x} is reserved or not supported")]
    UnsupportedOpcode(u8),
    /// The opcode carries an extension header the representation does not have.
    #[error("opcode {opcode} carries a {header}, but none was given")]
    MissingHeader {
        /// The opcode being emitted.
        opcode: Opcode,
        /// The missing header.
        header: ExtHeader,
    },
    /// The representation has an extension header the opcode does not carry.
    #[error("opcode {opcode} carries no {header}, but one was given")]
    UnexpectedHeader {
        /// The opcode being emitted.
        opcode: Opcode,
        /// The header that does not belong.
        header: ExtHeader,
    },
    /// A payload was given for an opcode that carries none.
    #[error("opcode {opcode} carries no payload, but {len} payload bytes were given")]
    UnexpectedPayload {
        /// The opcode being emitted.
        opcode: Opcode,
        /// The payload length asked for.
        len: usize,
    },
    /// The IB part written in place is shorter than a BTH.
    #[error("IB part of {0} bytes is shorter than a BTH (12 bytes)")]
    IbTooShort(usize),
    /// The BTH written in place has a pad count that does not pad the IB part to 4 bytes.
    #[error(
        "BTH pad count is {found}, but {expected} bytes are needed to pad the payload to 4 bytes"
    )]
    PadMismatch {
        /// The pad count in the BTH.
        found: u8,
        /// The pad the IB part's length needs.
        expected: u8,
    },
    /// The packet is too long for the IP or UDP length fields.
    #[error("packet of {0} bytes is too long for the IP/UDP length fields")]
    TooLong(usize),
    /// A variable-length field (CM private data, REJ additional rejection information,
    /// SIDR_REP additional information) is longer than the message has room for.
    #[error("{field} of {len} bytes does not fit: the message has room for {max}")]
    FieldTooLong {
        /// The field.
        field: &'static str,
        /// The length given.
        len: usize,
        /// The room in the message.
        max: usize,
    },
    /// An IP CM header was asked for with source and destination of different IP versions.
    #[error("IP CM header source and destination addresses are of different IP versions")]
    IpCmMixedVersions,
}
