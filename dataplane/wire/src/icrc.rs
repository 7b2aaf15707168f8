//! The invariant CRC of a RoCEv2 packet (IBTA 7.8; Annex A17 for what RoCEv2 masks).
//!
//! The ICRC is a CRC-32 (the Ethernet/zlib polynomial) over the parts of the packet that
//! no router changes:
//!
//! ```text
//! 8 bytes 0xFF                       stand-in for the IB LRH
//! IP header                          IPv4: TOS, TTL, header checksum set to all ones
//!                                    IPv6: traffic class, flow label, hop limit all ones
//! UDP header                         checksum set to all ones
//! BTH                                byte 4 (FECN, BECN, resv6) set to all ones
//! extension headers, payload, pad    as they are
//! ```
//!
//! It travels after the pad, least significant byte first. rxe computes it with
//! `crc32_le` seeded with all ones and stores the complement, which is exactly the standard
//! CRC-32 (`xroce_crc`); its result is written little-endian, and so we do too.

use crate::bth;
use crate::error::ParseError;
use crate::udp;

/// The 8 bytes that stand for the (absent) LRH.
const PSEUDO_LRH: [u8; 8] = [0xff; 8];

/// The CRC-32 of the pseudo-LRH: every ICRC starts from it.
const PSEUDO_LRH_CRC: u32 = crc32(&PSEUDO_LRH);

/// The standard CRC-32 (reflected, polynomial 0xEDB88320), bit by bit, for constants.
const fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    let mut i = 0;
    while i < bytes.len() {
        crc ^= bytes[i] as u32;
        let mut k = 0;
        while k < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
            k += 1;
        }
        i += 1;
    }
    !crc
}

type Mask = [u8; xroce_crc::MASK_LEN];

/// The masked fields of a packet whose UDP datagram starts `ip_len` bytes in (`None`: of an
/// IP header alone), set to ones; an IPv6 header's when `ipv6`, an IPv4 header's otherwise.
/// Everything is masked in the first bytes of each part, well inside the mask.
const fn mask(ipv6: bool, ip_len: Option<usize>) -> Mask {
    let mut m = [0u8; xroce_crc::MASK_LEN];
    if ipv6 {
        // Traffic class (low nibble of byte 0, high nibble of byte 1), flow label, hop
        // limit.
        m[0] = 0x0f;
        m[1] = 0xff;
        m[2] = 0xff;
        m[3] = 0xff;
        m[7] = 0xff;
    } else {
        // TOS (DSCP and ECN), TTL, header checksum.
        m[1] = 0xff;
        m[8] = 0xff;
        m[10] = 0xff;
        m[11] = 0xff;
    }
    if let Some(at) = ip_len {
        datagram_fields(&mut m, at);
    }
    m
}

/// Sets the masked fields of a UDP datagram that starts `at` bytes into `m`: the UDP
/// checksum and BTH byte 4 (FECN, BECN, resv6).
const fn datagram_fields(m: &mut Mask, at: usize) {
    m[at + 6] = 0xff;
    m[at + 7] = 0xff;
    m[at + udp::HEADER_LEN + bth::RESV8A_OFFSET] = 0xff;
}

/// A datagram's masks alone.
const fn datagram_mask() -> Mask {
    let mut m = [0u8; xroce_crc::MASK_LEN];
    datagram_fields(&mut m, 0);
    m
}

/// The packets every sender here builds: IPv4 without options, IPv6 without extension
/// headers, in one piece.
static IPV4_PACKET: Mask = mask(false, Some(20));
static IPV6_PACKET: Mask = mask(true, Some(40));
/// The parts of any other packet.
static IPV4_HEADER: Mask = mask(false, None);
static IPV6_HEADER: Mask = mask(true, None);
static DATAGRAM: Mask = datagram_mask();

/// Computes the ICRC.
///
/// `ip_header` is the IP header (its version nibble selects the IPv4 or IPv6 masks);
/// `datagram` is the UDP datagram from the UDP header up to, not including, the ICRC. Short
/// inputs are hashed as they are (masks apply to the bytes present), so this never panics.
pub fn compute(ip_header: &[u8], datagram: &[u8]) -> u32 {
    let ip_mask = match ip_header.first() {
        Some(b) if b >> 4 == 6 => &IPV6_HEADER,
        _ => &IPV4_HEADER,
    };
    let crc = xroce_crc::update_masked(PSEUDO_LRH_CRC, ip_header, ip_mask);
    xroce_crc::update_masked(crc, datagram, &DATAGRAM)
}

/// Computes the ICRC of an IP packet held in one piece: `packet` is the IP header
/// (`ip_header_len` bytes) followed by the UDP datagram up to, not including, the ICRC. The
/// same as [`compute`] on the two parts; an IPv4 header of 20 bytes or an IPv6 header of 40
/// (every RoCEv2 packet a sender here builds) is folded in one piece, masks and all.
pub fn compute_packet(packet: &[u8], ip_header_len: usize) -> u32 {
    let mask = match (packet.first().map(|b| b >> 4), ip_header_len) {
        (Some(4), 20) => &IPV4_PACKET,
        (Some(6), 40) => &IPV6_PACKET,
        _ => {
            let (ip, datagram) = packet.split_at(ip_header_len.min(packet.len()));
            return compute(ip, datagram);
        }
    };
    // A packet too short to hold a masked field gets the masks of the bytes it has, as
    // `compute` gives them.
    xroce_crc::update_masked(PSEUDO_LRH_CRC, packet, mask)
}

/// Computes the ICRC a whole Ethernet frame should carry (the frame's L2–L4 headers must
/// parse; its IB part is not examined beyond the BTH).
pub fn compute_frame(frame: &[u8]) -> Result<u32, ParseError> {
    let layout = crate::frame::parse_envelope(frame)?.1;
    Ok(compute_packet(
        layout.ip_packet_without_icrc(frame),
        layout.ip_header_len(),
    ))
}

/// The ICRC a whole Ethernet frame carries (read little-endian, as rxe writes it).
pub fn carried_by_frame(frame: &[u8]) -> Result<u32, ParseError> {
    let layout = crate::frame::parse_envelope(frame)?.1;
    Ok(layout.icrc(frame))
}

/// Checks the ICRC of a whole Ethernet frame.
pub fn verify_frame(frame: &[u8]) -> Result<(), ParseError> {
    let layout = crate::frame::parse_envelope(frame)?.1;
    let computed = compute_packet(layout.ip_packet_without_icrc(frame), layout.ip_header_len());
    let found = layout.icrc(frame);
    if computed == found {
        Ok(())
    } else {
        Err(ParseError::IcrcMismatch { found, computed })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::bth::BthRepr;
    use crate::ethernet::EthernetAddress;
    use crate::frame::FrameRepr;
    use crate::ib::IbRepr;
    use crate::identifiers::Qpn;
    use crate::opcode::Opcode;
    use crate::psn::Psn;
    use std::vec;
    use std::vec::Vec;

    /// rc_pingpong.pcap frame 19, a 62-byte ACK from 10.77.0.2 to 10.77.0.3.
    pub(crate) static ACK_FRAME: [u8; 62] = [
        0x52, 0x54, 0x00, 0x77, 0x00, 0x03, 0x52, 0x54, 0x00, 0x77, 0x00, 0x02, 0x08,
        0x00, // eth
        0x45, 0x00, 0x00, 0x30, 0x9c, 0xf4, 0x40, 0x00, 0x40, 0x11, 0x89, 0x2a, 0x0a, 0x4d, 0x00,
        0x02, 0x0a, 0x4d, 0x00, 0x03, // IPv4
        0xc1, 0x21, 0x12, 0xb7, 0x00, 0x1c, 0x00, 0x00, // UDP
        0x11, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x00, 0x58, 0xf0, 0x5d, // BTH
        0x1f, 0x00, 0x00, 0x01, // AETH
        0x35, 0x25, 0x8f, 0x66, // ICRC
    ];

    #[test]
    fn the_pseudo_lrh_crc_constant_is_the_crc32_of_eight_ones() {
        assert_eq!(PSEUDO_LRH_CRC, xroce_crc::hash(&PSEUDO_LRH));
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn rxe_ack_verifies() {
        assert_eq!(verify_frame(&ACK_FRAME), Ok(()));
        assert_eq!(compute_frame(&ACK_FRAME), Ok(0x668f_2535));
        assert_eq!(carried_by_frame(&ACK_FRAME), Ok(0x668f_2535));
    }

    /// Flips every bit of IP header and datagram, one at a time: the ICRC changes exactly
    /// when the bit is not in a masked field, computed in one piece (as frames are built
    /// and checked) and in two parts.
    fn check_every_bit(
        ip: &[u8],
        datagram: &[u8],
        ip_masked: &[(usize, u8)],
        dg_masked: &[(usize, u8)],
    ) {
        let compute = |ip: &[u8], datagram: &[u8]| {
            let two_parts = super::compute(ip, datagram);
            let one_piece = compute_packet(&[ip, datagram].concat(), ip.len());
            assert_eq!(one_piece, two_parts);
            one_piece
        };
        let base = compute(ip, datagram);
        let masked = |list: &[(usize, u8)], i: usize, bit: u8| {
            list.iter()
                .any(|&(at, mask)| at == i && mask & (1 << bit) != 0)
        };
        let mut flips = 0;
        for i in 0..ip.len() {
            for bit in 0..8 {
                let mut ip2 = ip.to_vec();
                ip2[i] ^= 1 << bit;
                let same = compute(&ip2, datagram) == base;
                assert_eq!(same, masked(ip_masked, i, bit), "IP byte {i} bit {bit}");
                flips += 1;
            }
        }
        for i in 0..datagram.len() {
            for bit in 0..8 {
                let mut dg2 = datagram.to_vec();
                dg2[i] ^= 1 << bit;
                let same = compute(ip, &dg2) == base;
                assert_eq!(
                    same,
                    masked(dg_masked, i, bit),
                    "datagram byte {i} bit {bit}"
                );
                flips += 1;
            }
        }
        assert_eq!(flips, (ip.len() + datagram.len()) * 8);
    }

    #[test]
    fn ipv4_every_covered_bit_matters_and_masked_fields_do_not() {
        let ip = &ACK_FRAME[14..34];
        let datagram = &ACK_FRAME[34..58];
        // TOS, TTL, header checksum; UDP checksum, BTH byte 4.
        let ip_masked = [(1, 0xff), (8, 0xff), (10, 0xff), (11, 0xff)];
        let dg_masked = [(6, 0xff), (7, 0xff), (12, 0xff)];
        check_every_bit(ip, datagram, &ip_masked, &dg_masked);
    }

    /// An IPv4 header with options (IHL 6): the masks stay where the fields are, and the
    /// datagram's move with it.
    #[test]
    fn ipv4_with_options_every_covered_bit_matters_and_masked_fields_do_not() {
        let mut ip = ACK_FRAME[14..34].to_vec();
        ip[0] = 0x46;
        ip.extend_from_slice(&[1, 1, 1, 0]); // NOP, NOP, NOP, end of options
        let datagram = &ACK_FRAME[34..58];
        let ip_masked = [(1, 0xff), (8, 0xff), (10, 0xff), (11, 0xff)];
        let dg_masked = [(6, 0xff), (7, 0xff), (12, 0xff)];
        check_every_bit(&ip, datagram, &ip_masked, &dg_masked);
    }

    fn ipv6_frame() -> Vec<u8> {
        let headers = FrameRepr::ipv6(
            EthernetAddress([2, 0, 0, 0, 0, 1]),
            EthernetAddress([2, 0, 0, 0, 0, 2]),
            "fd00:77::1".parse().unwrap(),
            "fd00:77::2".parse().unwrap(),
            0xc123,
        );
        let ib = IbRepr::new(BthRepr::new(
            Opcode::RC_SEND_ONLY,
            Qpn::new(0x11),
            Psn::new(7),
        ));
        let mut buf = vec![0u8; 128];
        let n = headers.emit_packet(&mut buf, &ib, b"hello").unwrap();
        buf.truncate(n);
        buf
    }

    #[test]
    fn ipv6_every_covered_bit_matters_and_masked_fields_do_not() {
        let frame = ipv6_frame();
        assert_eq!(verify_frame(&frame), Ok(()));
        let ip = &frame[14..54];
        let datagram = &frame[54..frame.len() - 4];
        // Traffic class and flow label (all but the version nibble of bytes 0..4), hop limit.
        let ip_masked = [(0, 0x0f), (1, 0xff), (2, 0xff), (3, 0xff), (7, 0xff)];
        let dg_masked = [(6, 0xff), (7, 0xff), (12, 0xff)];
        check_every_bit(ip, datagram, &ip_masked, &dg_masked);
    }

    #[test]
    fn a_flipped_icrc_bit_fails_verification() {
        for i in 58..62 {
            for bit in 0..8 {
                let mut f = ACK_FRAME;
                f[i] ^= 1 << bit;
                assert!(matches!(
                    verify_frame(&f),
                    Err(ParseError::IcrcMismatch { .. })
                ));
            }
        }
    }

    #[test]
    fn masked_fields_can_change_in_a_whole_frame() {
        // A router may rewrite TOS/ECN and TTL (fixing the header checksum) and set FECN.
        let mut f = ACK_FRAME;
        f[15] = 0x03; // ECN CE
        f[22] = 17; // TTL
        f[24] = 0;
        f[25] = 0;
        let sum = crate::checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        f[46] = 0x80; // FECN
        assert_eq!(verify_frame(&f), Ok(()));
    }

    #[test]
    fn short_inputs_do_not_panic() {
        for n in 0..20 {
            let _ = compute(&ACK_FRAME[14..14 + n], &ACK_FRAME[34..34 + n]);
            for h in 0..24 {
                let _ = compute_packet(&ACK_FRAME[14..14 + n], h);
            }
        }
    }

    /// The in-place masked hash of a packet in one piece gives what the two-part
    /// `compute` gives, for IPv4 and IPv6 headers with and without options, every length
    /// from empty to past the masked range, and random bytes everywhere (masked fields
    /// included).
    #[test]
    fn in_one_piece_equals_in_two_parts() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        };
        for (version, header_len) in [(4u8, 20usize), (4, 24), (4, 60), (6, 40)] {
            for len in 0..300 {
                let mut packet: Vec<u8> = (0..len).map(|_| next()).collect();
                if let Some(b) = packet.first_mut() {
                    *b = (version << 4) | (*b & 0x0f);
                }
                let split = header_len.min(len);
                assert_eq!(
                    compute_packet(&packet, header_len),
                    compute(&packet[..split], &packet[split..]),
                    "IPv{version}, header {header_len}, length {len}"
                );
            }
        }
    }
}
