//! Frames checked against rxe's captures byte for byte, built and taken apart again over
//! IPv4, IPv6 and VLANs, and every malformed or truncated frame named for what is wrong.

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
            for (i, payload_len) in [0usize, 1, 2, 3, 4, 61, 1024, 4096].into_iter().enumerate() {
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

/// An ACKNOWLEDGE with bytes after its AETH: refused by `Frame::parse`, taken apart by
/// `Frame::parse_acknowledge_with_trailer` with its ICRC verified over the whole packet.
#[test]
fn acknowledge_with_trailer() {
    let mut ib = ack_ib();
    ib.aeth = Some(AethRepr {
        syndrome: Syndrome::Nak(crate::aeth::NakCode::PsnSequenceError),
        msn: 1,
    });
    let mut sack = crate::SackRepr::new();
    assert!(sack.push(Psn::new(9), Psn::new(12)));
    let repr = ack_headers();
    let mut frame = vec![0xa5u8; 256];
    let start = repr.header_len();
    let header_len = ib.emit(&mut frame[start..], 0).unwrap();
    let n = sack.emit(&mut frame[start + header_len..]).unwrap();
    let len = repr.emit(&mut frame, header_len + n).unwrap();
    let frame = &frame[..len];
    assert!(matches!(
        Frame::parse(frame),
        Err(ParseError::UnexpectedPayload { len: 12, .. })
    ));
    let f = Frame::parse_acknowledge_with_trailer(frame).unwrap();
    assert_eq!(f.ib, ib);
    assert_eq!(crate::SackRepr::parse(f.payload), Ok(sack));
    // A bit flipped in the trailer: the ICRC covers it.
    let mut bad = frame.to_vec();
    bad[start + header_len + 5] ^= 1;
    assert!(matches!(
        Frame::parse_acknowledge_with_trailer(&bad),
        Err(ParseError::IcrcMismatch { .. })
    ));
    // Another opcode with bytes after its headers is no acknowledgement.
    let mut other = frame.to_vec();
    other[start] = Opcode::RC_SEND_ONLY.0;
    assert!(Frame::parse_acknowledge_with_trailer(&other).is_err());
    // Truncated anywhere: an error, never a panic.
    for n in 0..len {
        assert!(Frame::parse_acknowledge_with_trailer(&frame[..n]).is_err());
    }
}
