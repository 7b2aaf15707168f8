//! The few fields of a RoCEv2 frame that congestion control reads on every packet, found
//! without taking the frame apart: where the IP header lies and its DSCP and ECN bits, and
//! the BTH's opcode, destination QP, AckReq bit and PSN, with the AETH's syndrome when the
//! opcode carries one. And the two fields it writes: the ECN bits, and the UDP checksum
//! ([`fill_udp_checksum`], which RoCEv2 senders leave 0 and receivers ignore, the ICRC
//! masking it; any UDP receiver, Linux's under rxe included, checks one that is not 0).
//!
//! A peek checks lengths and the Ethertype, IP version and UDP protocol it walks through,
//! and nothing else: no checksum, no ICRC, no UDP port, no length consistency. It is for
//! frames the caller built itself, or frames it is about to hand to a parser that checks
//! everything ([`crate::Frame::parse`]); a frame peeked at and acted upon without that must
//! be trusted no further than its first bytes.
//!
//! The ICRC covers neither the IPv4 TOS byte nor the IPv6 traffic class (IBTA A17.4.1:
//! they are masked with ones), so [`set_ecn`] leaves it valid; an IPv4 header checksum is
//! updated in place (RFC 1624), and the UDP checksum of IPv6 does not cover the traffic
//! class.

use crate::aeth::Syndrome;
use crate::bth;
use crate::ethernet::EtherType;
use crate::identifiers::Qpn;
use crate::ipv4;
use crate::mtu::IpVersion;
use crate::opcode::{ExtHeader, Opcode};
use crate::psn::Psn;
use crate::udp;
use core::net::IpAddr;

/// ECN codepoint: not ECN-capable transport (RFC 3168).
pub const ECN_NOT_ECT: u8 = 0b00;
/// ECN codepoint: ECN-capable transport, ECT(1).
pub const ECN_ECT1: u8 = 0b01;
/// ECN codepoint: ECN-capable transport, ECT(0), what RoCEv2 senders set.
pub const ECN_ECT0: u8 = 0b10;
/// ECN codepoint: congestion experienced, set by a switch on an ECN-capable packet.
pub const ECN_CE: u8 = 0b11;

/// What [`peek`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peek {
    /// Where the IP header starts (after Ethernet and an 802.1Q tag).
    pub ip_start: usize,
    /// Where the UDP header starts.
    pub udp_start: usize,
    /// The IP version.
    pub ip_version: IpVersion,
    /// DSCP (6 bits).
    pub dscp: u8,
    /// ECN (2 bits).
    pub ecn: u8,
    /// The BTH's opcode.
    pub opcode: Opcode,
    /// The BTH's destination QP.
    pub dest_qp: Qpn,
    /// The BTH's AckReq bit.
    pub ack_request: bool,
    /// The BTH's PSN.
    pub psn: Psn,
    /// The AETH's syndrome, when the opcode carries an AETH and the frame holds it.
    pub syndrome: Option<Syndrome>,
}

/// Reads the fields of [`Peek`] from an Ethernet frame carrying IPv4 or IPv6 and UDP;
/// `None` when the frame is too short for them or is something else.
pub fn peek(frame: &[u8]) -> Option<Peek> {
    let mut at = 12;
    let mut ethertype = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
    at += 2;
    if ethertype == EtherType::VLAN.0 {
        ethertype = u16::from_be_bytes([*frame.get(at + 2)?, *frame.get(at + 3)?]);
        at += 4;
    }
    let ip_start = at;
    let ip = frame.get(ip_start..)?;
    let (ip_version, tos, ip_len) = match EtherType(ethertype) {
        EtherType::IPV4 => {
            let ver_ihl = *ip.first()?;
            if ver_ihl >> 4 != 4 || *ip.get(9)? != ipv4::PROTOCOL_UDP {
                return None;
            }
            (IpVersion::V4, *ip.get(1)?, usize::from(ver_ihl & 0x0f) * 4)
        }
        EtherType::IPV6 => {
            let (b0, b1) = (*ip.first()?, *ip.get(1)?);
            if b0 >> 4 != 6 || *ip.get(6)? != ipv4::PROTOCOL_UDP {
                return None;
            }
            (IpVersion::V6, (b0 << 4) | (b1 >> 4), 40)
        }
        _ => return None,
    };
    let udp_start = ip_start + ip_len;
    let bth_start = udp_start + udp::HEADER_LEN;
    let bth = frame.get(bth_start..bth_start + bth::HEADER_LEN)?;
    let opcode = Opcode(bth[0]);
    let info = opcode.info();
    let syndrome = info
        .offset(ExtHeader::Aeth)
        .and_then(|off| frame.get(bth_start + off))
        .map(|&b| Syndrome::from_byte(b));
    Some(Peek {
        ip_start,
        udp_start,
        ip_version,
        dscp: tos >> 2,
        ecn: tos & 0x03,
        opcode,
        dest_qp: Qpn::new(u32::from_be_bytes([0, bth[5], bth[6], bth[7]])),
        ack_request: bth[8] & 0x80 != 0,
        psn: Psn::new(u32::from_be_bytes([0, bth[9], bth[10], bth[11]])),
        syndrome,
    })
}

/// Sets the ECN bits of the IP header `peeked` found in `frame` to `ecn` (IPv4: and
/// updates the header checksum). Does nothing if the frame is shorter than that header.
pub fn set_ecn(frame: &mut [u8], peeked: &Peek, ecn: u8) {
    let ecn = ecn & 0x03;
    match peeked.ip_version {
        IpVersion::V4 => {
            let Some(ip) = frame.get_mut(peeked.ip_start..peeked.ip_start + ipv4::HEADER_LEN)
            else {
                return;
            };
            let old = u16::from_be_bytes([ip[0], ip[1]]);
            ip[1] = (ip[1] & !0x03) | ecn;
            let new = u16::from_be_bytes([ip[0], ip[1]]);
            // RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m').
            let hc = u16::from_be_bytes([ip[10], ip[11]]);
            let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        }
        IpVersion::V6 => {
            // Traffic class: the low nibble of byte 0 and the high nibble of byte 1; the ECN
            // bits are the traffic class's low two, bits 5..4 of byte 1.
            if let Some(b1) = frame.get_mut(peeked.ip_start + 1) {
                *b1 = (*b1 & !0x30) | (ecn << 4);
            }
        }
    }
}

/// The UDP checksum field of the frame `peeked` found (0: none); 0 if the frame is too
/// short for it.
pub fn udp_checksum(frame: &[u8], peeked: &Peek) -> u16 {
    match frame.get(peeked.udp_start + 6..peeked.udp_start + 8) {
        Some(b) => u16::from_be_bytes([b[0], b[1]]),
        None => 0,
    }
}

/// The IP header's source and destination addresses.
fn addresses(frame: &[u8], peeked: &Peek) -> Option<(IpAddr, IpAddr)> {
    let ip = frame.get(peeked.ip_start..)?;
    Some(match peeked.ip_version {
        IpVersion::V4 => {
            let a: [u8; 4] = ip.get(12..16)?.try_into().ok()?;
            let b: [u8; 4] = ip.get(16..20)?.try_into().ok()?;
            (IpAddr::from(a), IpAddr::from(b))
        }
        IpVersion::V6 => {
            let a: [u8; 16] = ip.get(8..24)?.try_into().ok()?;
            let b: [u8; 16] = ip.get(24..40)?.try_into().ok()?;
            (IpAddr::from(a), IpAddr::from(b))
        }
    })
}

/// Computes the UDP checksum of the frame `peeked` found (the pseudo-header and the
/// datagram up to its length field) and writes it. Neither the ECN bits nor the ICRC are
/// covered by it or cover it, so either may change after. Does nothing if the frame is
/// shorter than its UDP length field says.
pub fn fill_udp_checksum(frame: &mut [u8], peeked: &Peek) {
    let Some((src, dst)) = addresses(frame, peeked) else {
        return;
    };
    let Some(datagram) = frame.get_mut(peeked.udp_start..) else {
        return;
    };
    if let Ok(mut udp) = udp::UdpPacket::new_checked(datagram) {
        udp.fill_checksum(src, dst);
    }
}

/// Whether the frame `peeked` found carries a UDP checksum that is not 0 and matches it.
pub fn has_udp_checksum(frame: &[u8], peeked: &Peek) -> bool {
    if udp_checksum(frame, peeked) == 0 {
        return false;
    }
    let Some((src, dst)) = addresses(frame, peeked) else {
        return false;
    };
    frame
        .get(peeked.udp_start..)
        .and_then(|d| udp::UdpPacket::new_checked(d).ok())
        .is_some_and(|udp| udp.verify_checksum(src, dst))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aeth::{AethRepr, NakCode};
    use crate::bth::BthRepr;
    use crate::ethernet::{EthernetAddress, VlanTag};
    use crate::frame::{Frame, FrameRepr, IpRepr};
    use crate::ib::IbRepr;
    use crate::icrc::tests::ACK_FRAME;
    use crate::ipv4::Ipv4Packet;
    use core::net::Ipv4Addr;
    use std::vec;

    #[test]
    fn peeks_rxes_ack() {
        let p = peek(&ACK_FRAME).unwrap();
        assert_eq!(p.ip_start, 14);
        assert_eq!(p.ip_version, IpVersion::V4);
        assert_eq!((p.dscp, p.ecn), (0, ECN_NOT_ECT));
        assert_eq!(p.opcode, Opcode::RC_ACKNOWLEDGE);
        assert_eq!(p.dest_qp, Qpn::new(0x11));
        assert!(!p.ack_request);
        assert_eq!(p.psn, Psn::new(0x58f05d));
        assert_eq!(p.syndrome, Some(Syndrome::ACK_UNLIMITED));
    }

    fn frame(v6: bool, vlan: bool, ib: &IbRepr, tc: u8) -> vec::Vec<u8> {
        let mac = EthernetAddress([2, 0, 0, 0, 0, 1]);
        let mut repr = if v6 {
            FrameRepr::ipv6(
                mac,
                mac,
                "fd00::1".parse().unwrap(),
                "fd00::2".parse().unwrap(),
                0xc000,
            )
        } else {
            FrameRepr::ipv4(
                mac,
                mac,
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(10, 0, 0, 2),
                0xc000,
            )
        };
        if vlan {
            repr = repr.with_vlan(Some(VlanTag {
                pcp: 3,
                dei: false,
                vid: 7,
            }));
        }
        match &mut repr.ip {
            IpRepr::Ipv4(r) => (r.dscp, r.ecn) = (tc >> 2, tc & 3),
            IpRepr::Ipv6(r) => (r.dscp, r.ecn) = (tc >> 2, tc & 3),
        }
        let payload: &[u8] = if ib.info().has_payload() {
            &[7; 100]
        } else {
            &[]
        };
        let mut buf = vec![0u8; 2048];
        let n = repr.emit_packet(&mut buf, ib, payload).unwrap();
        buf.truncate(n);
        buf
    }

    #[test]
    fn peeks_through_vlan_tags_and_ipv6_and_sets_ecn_keeping_the_frame_valid() {
        let mut bth = BthRepr::new(
            Opcode::RC_RDMA_WRITE_MIDDLE,
            Qpn::new(0xabcdef),
            Psn::new(77),
        );
        bth.ack_request = true;
        let write = IbRepr::new(bth);
        let nak = IbRepr {
            aeth: Some(AethRepr {
                syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
                msn: 3,
            }),
            ..IbRepr::new(BthRepr::new(
                Opcode::RC_ACKNOWLEDGE,
                Qpn::new(5),
                Psn::new(9),
            ))
        };
        for v6 in [false, true] {
            for vlan in [false, true] {
                let mut f = frame(v6, vlan, &write, 26 << 2);
                let p = peek(&f).unwrap();
                assert_eq!(p.ip_start, if vlan { 18 } else { 14 });
                assert_eq!((p.dscp, p.ecn), (26, ECN_NOT_ECT));
                assert_eq!(p.dest_qp, Qpn::new(0xabcdef));
                assert!(p.ack_request);
                assert_eq!(p.psn, Psn::new(77));
                assert_eq!(p.syndrome, None);
                for ecn in [ECN_ECT0, ECN_CE, ECN_ECT1, ECN_NOT_ECT, ECN_ECT0] {
                    set_ecn(&mut f, &p, ecn);
                    let parsed = Frame::parse(&f).expect("ICRC and IPv4 checksum still good");
                    assert_eq!(parsed.headers.ip.ecn(), ecn);
                    assert_eq!(parsed.headers.ip.dscp(), 26, "DSCP untouched");
                    assert_eq!(peek(&f).unwrap().ecn, ecn);
                }
                let n = frame(v6, vlan, &nak, 0);
                assert_eq!(
                    peek(&n).unwrap().syndrome,
                    Some(Syndrome::Nak(NakCode::PsnSequenceError))
                );
            }
        }
    }

    #[test]
    fn the_ipv4_checksum_update_matches_a_full_computation() {
        let ib = IbRepr::new(BthRepr::new(Opcode::RC_SEND_ONLY, Qpn::new(1), Psn::ZERO));
        for tc in 0..=255u8 {
            let mut f = frame(false, false, &ib, tc);
            let p = peek(&f).unwrap();
            set_ecn(&mut f, &p, ECN_CE);
            let packet = Ipv4Packet::new_checked(&f[14..]).unwrap();
            assert!(packet.verify_checksum(), "tos {tc:#x}");
        }
    }

    #[test]
    fn a_filled_udp_checksum_is_the_one_the_frame_would_carry_and_survives_ecn_marks() {
        use crate::udp::UdpChecksum;
        let ib = IbRepr::new(BthRepr::new(
            Opcode::RC_SEND_ONLY,
            Qpn::new(0x12),
            Psn::new(3),
        ));
        // rxe sends none.
        let p = peek(&ACK_FRAME).unwrap();
        assert_eq!((p.udp_start, udp_checksum(&ACK_FRAME, &p)), (34, 0));
        assert!(!has_udp_checksum(&ACK_FRAME, &p));
        for v6 in [false, true] {
            for vlan in [false, true] {
                let mut f = frame(v6, vlan, &ib, 0);
                let p = peek(&f).unwrap();
                assert_eq!(p.udp_start, p.ip_start + if v6 { 40 } else { 20 });
                assert!(!has_udp_checksum(&f, &p));
                fill_udp_checksum(&mut f, &p);
                assert!(has_udp_checksum(&f, &p));
                // The same bytes as the frame's own computed checksum.
                let mut parsed = Frame::parse(&f).expect("still a good frame");
                parsed.headers.udp.checksum = UdpChecksum::Computed;
                let mut again = vec![0u8; 2048];
                let n = parsed
                    .headers
                    .emit_packet(&mut again, &ib, parsed.payload)
                    .unwrap();
                assert_eq!(&again[..n], &f[..], "v6 {v6} vlan {vlan}");
                // A switch's CE mark leaves it valid; a flipped bit does not.
                set_ecn(&mut f, &p, ECN_CE);
                assert!(has_udp_checksum(&f, &p) && Frame::parse(&f).is_ok());
                let last = f.len() - 5;
                f[last] ^= 1;
                assert!(!has_udp_checksum(&f, &p));
            }
        }
        // A frame shorter than its UDP length is left alone.
        let mut f = frame(false, false, &ib, 0);
        let p = peek(&f).unwrap();
        f.truncate(f.len() - 1);
        let before = f.clone();
        fill_udp_checksum(&mut f, &p);
        assert_eq!(f, before);
    }

    #[test]
    fn short_and_foreign_frames_are_none() {
        for n in 0..54 {
            assert_eq!(peek(&ACK_FRAME[..n]), None, "{n}");
        }
        assert!(peek(&ACK_FRAME[..54]).is_some());
        let mut arp = ACK_FRAME;
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(peek(&arp), None);
        let mut tcp = ACK_FRAME;
        tcp[23] = 6;
        assert_eq!(peek(&tcp), None);
        let mut v5 = ACK_FRAME;
        v5[14] = 0x55;
        assert_eq!(peek(&v5), None);
        // An ACK cut short of its AETH still peeks, without a syndrome.
        assert_eq!(peek(&ACK_FRAME[..54]).unwrap().syndrome, None);
        // Setting ECN on a frame shorter than its IP header changes nothing.
        let p = peek(&ACK_FRAME).unwrap();
        let mut short = [0u8; 20];
        set_ecn(&mut short, &p, ECN_CE);
        assert_eq!(short, [0u8; 20]);
    }
}
