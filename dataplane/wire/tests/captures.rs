//! Real traffic: every RoCEv2 packet of every capture of Linux rxe (and of one userspace
//! client talking to rxe) parses, carries a valid ICRC, matches tshark's decode, uses the
//! UDP source port Linux derives, and is rebuilt byte for byte from its parsed form.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::Path;

use common::{Decode, Summary, captures, decodes, is_roce, read_pcap, summaries};
use xroce_wire::source_port::{rdma_cm_flow_label, rxe_initial_udp_source_port, udp_source_port};
use xroce_wire::{Frame, Opcode, Qpn, Transport};

/// tshark's summary names, as opcodes.
fn opcode_of_summary(s: &Summary) -> Opcode {
    if s.name.starts_with("CM: ") {
        return Opcode::UD_SEND_ONLY;
    }
    match s.name.as_str() {
        "RC Send First" => Opcode::RC_SEND_FIRST,
        "RC Send Middle" => Opcode::RC_SEND_MIDDLE,
        "RC Send Last" => Opcode::RC_SEND_LAST,
        "RC Send Only" => Opcode::RC_SEND_ONLY,
        "RC RDMA Write First" => Opcode::RC_RDMA_WRITE_FIRST,
        "RC RDMA Write Middle" => Opcode::RC_RDMA_WRITE_MIDDLE,
        "RC RDMA Write Last" => Opcode::RC_RDMA_WRITE_LAST,
        "RC RDMA Write Only" => Opcode::RC_RDMA_WRITE_ONLY,
        "RC RDMA Read Request" => Opcode::RC_RDMA_READ_REQUEST,
        "RC RDMA Read Response First" => Opcode::RC_RDMA_READ_RESPONSE_FIRST,
        "RC RDMA Read Response Middle" => Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
        "RC RDMA Read Response Last" => Opcode::RC_RDMA_READ_RESPONSE_LAST,
        "RC RDMA Read Response Only" => Opcode::RC_RDMA_READ_RESPONSE_ONLY,
        "RC Acknowledge" => Opcode::RC_ACKNOWLEDGE,
        "RC Atomic Acknowledge" => Opcode::RC_ATOMIC_ACKNOWLEDGE,
        "RC Compare Swap" => Opcode::RC_COMPARE_SWAP,
        "RC Fetch Add" => Opcode::RC_FETCH_ADD,
        "UD Send Only" => Opcode::UD_SEND_ONLY,
        other => panic!("unknown tshark name {other:?}"),
    }
}

/// Compares a parsed frame with tshark's detailed decode of it.
fn check_decode(name: &str, n: usize, f: &Frame<'_>, d: &Decode) {
    let ctx = format!("{name} frame {n}");
    let ib = &f.ib;
    assert_eq!(f.headers.ip.src_addr().to_string(), d.src_ip, "{ctx}");
    assert_eq!(f.headers.ip.dst_addr().to_string(), d.dst_ip, "{ctx}");
    assert_eq!(f.headers.udp.src_port, d.src_port, "{ctx}");
    assert_eq!(f.headers.udp.dst_port, d.dst_port, "{ctx}");
    assert_eq!(ib.bth.opcode, Opcode(d.opcode), "{ctx}");
    assert_eq!(ib.bth.solicited_event, d.solicited_event, "{ctx}");
    assert_eq!(ib.bth.migreq, d.migreq, "{ctx}");
    assert_eq!(ib.bth.pad_count, d.pad, "{ctx}");
    assert_eq!(d.tver, 0, "{ctx}");
    assert_eq!(ib.bth.pkey.0, d.pkey, "{ctx}");
    assert_eq!(ib.bth.dest_qp.value(), d.dest_qp, "{ctx}");
    assert_eq!(ib.bth.ack_request, d.ack_req, "{ctx}");
    assert_eq!(ib.bth.psn.value(), d.psn, "{ctx}");
    assert_eq!(
        ib.reth.map(|r| (r.va, r.rkey.0, r.dma_len)),
        d.reth,
        "{ctx} RETH"
    );
    assert_eq!(
        ib.aeth.map(|a| (a.syndrome.to_byte(), a.msn)),
        d.aeth,
        "{ctx} AETH"
    );
    assert_eq!(
        ib.deth.map(|x| (u64::from(x.qkey.0), x.src_qp.value())),
        d.deth,
        "{ctx} DETH"
    );
    assert_eq!(
        ib.atomic_eth
            .map(|a| (a.va, a.rkey.0, a.swap_add, a.compare)),
        d.atomic,
        "{ctx} AtomicETH"
    );
    assert_eq!(
        ib.atomic_ack_eth.map(|a| a.orig_data),
        d.atomic_ack,
        "{ctx} AtomicAckETH"
    );
    // tshark reads the four ICRC bytes big-endian; rxe writes the CRC little-endian.
    assert_eq!(f.icrc.swap_bytes(), d.icrc_be, "{ctx} ICRC");
    if let Some(len) = d.data_len {
        assert_eq!(
            f.payload.len() + usize::from(ib.bth.pad_count),
            len,
            "{ctx} data"
        );
    }
}

/// The UDP source ports rdma_cm connections in a capture use, from their CM REQs.
fn rdma_cm_ports(frames: &[(usize, Frame<'_>)]) -> BTreeSet<u16> {
    let mut ports = BTreeSet::new();
    for (_, f) in frames {
        let p = f.payload;
        let is_req = f.ib.bth.dest_qp == Qpn::GSI
            && p.len() >= 256
            && p[1] == 0x07 // management class: CM
            && p[16..18] == [0x00, 0x10]; // attribute: ConnectRequest
        if !is_req {
            continue;
        }
        // CM REQ: service ID at MAD offset 24 + 8 (TCP port space, port in the last two
        // bytes); IP CM private data at 24 + 140, source port at +2 (IBTA Annex A11).
        let dst_port = u16::from_be_bytes([p[38], p[39]]);
        let src_port = u16::from_be_bytes([p[166], p[167]]);
        let fl = rdma_cm_flow_label(src_port, dst_port);
        ports.insert(udp_source_port(fl, Qpn::new(0), Qpn::new(0)));
    }
    ports
}

/// Checks that every packet rxe sent uses the UDP source port Linux derives for it.
fn check_source_ports(name: &str, frames: &[(usize, Frame<'_>)]) {
    // The QP each host addresses on the other, per direction, for RC packets.
    let mut dest_qps: BTreeMap<(IpAddr, IpAddr), BTreeSet<Qpn>> = BTreeMap::new();
    for (_, f) in frames {
        if f.ib.info().transport == Transport::Rc {
            let key = (f.headers.ip.src_addr(), f.headers.ip.dst_addr());
            dest_qps.entry(key).or_default().insert(f.ib.bth.dest_qp);
        }
    }
    let cm_ports = rdma_cm_ports(frames);
    for (n, f) in frames {
        let ctx = format!("{name} frame {n}");
        let (src, dst) = (f.headers.ip.src_addr(), f.headers.ip.dst_addr());
        if src.to_string() == "10.77.0.1" {
            // The userspace client of netns_userspace_rc_pingpong picks its own port.
            continue;
        }
        let sport = f.headers.udp.src_port;
        if let Some(deth) = f.ib.deth {
            // UD: the port rxe gave the QP when it created it.
            assert_eq!(sport, rxe_initial_udp_source_port(deth.src_qp), "{ctx}");
        } else if !cm_ports.is_empty() {
            assert!(
                cm_ports.contains(&sport),
                "{ctx}: {sport} not in {cm_ports:?}"
            );
        } else {
            let fwd = &dest_qps[&(src, dst)];
            let rev = &dest_qps[&(dst, src)];
            assert_eq!((fwd.len(), rev.len()), (1, 1), "{ctx}: one RC connection");
            let remote = *fwd.iter().next().unwrap();
            let local = *rev.iter().next().unwrap();
            assert_eq!(sport, udp_source_port(0, local, remote), "{ctx}");
        }
    }
}

#[test]
fn every_capture_packet_parses_verifies_matches_tshark_and_rebuilds() {
    let mut total = 0;
    let mut detailed = 0;
    let mut opcodes: BTreeMap<Opcode, usize> = BTreeMap::new();
    for path in captures() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let txt = std::fs::read_to_string(path.with_extension("txt")).unwrap();
        let summary = summaries(&txt);
        let detail = decodes(&txt);
        let raw = read_pcap(&path);
        let mut frames = Vec::new();
        for (i, bytes) in raw.iter().enumerate() {
            let n = i + 1;
            if !is_roce(bytes) {
                assert!(Frame::parse(bytes).is_err(), "{name} frame {n} is not RoCE");
                continue;
            }
            let ctx = format!("{name} frame {n}");
            let f = Frame::parse(bytes).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            assert!(f.icrc_ok(), "{ctx}");
            assert_eq!(f.len(), bytes.len(), "{ctx}: no Ethernet padding expected");

            let s = summary
                .get(&n)
                .unwrap_or_else(|| panic!("{ctx}: not in tshark summary"));
            assert_eq!(f.ib.bth.opcode, opcode_of_summary(s), "{ctx}: {s:?}");
            assert_eq!(s.len, bytes.len(), "{ctx}");
            if let Some(qp) = s.qp {
                assert_eq!(f.ib.bth.dest_qp.value(), qp, "{ctx}");
            } else {
                assert_eq!(f.ib.bth.dest_qp, Qpn::GSI, "{ctx}: CM MAD");
            }
            if let Some(d) = detail.get(&n) {
                check_decode(&name, n, &f, d);
                detailed += 1;
            }

            let mut rebuilt = vec![0xa5u8; bytes.len()];
            assert_eq!(f.emit(&mut rebuilt), Ok(bytes.len()), "{ctx}");
            assert_eq!(&rebuilt, bytes, "{ctx}: rebuilt frame differs");

            *opcodes.entry(f.ib.bth.opcode).or_default() += 1;
            total += 1;
            frames.push((n, f));
        }
        assert_eq!(
            frames.len(),
            summary.len(),
            "{name}: tshark saw other RoCE frames"
        );
        check_source_ports(&name, &frames);
    }
    // The captures' README: all 295 RoCEv2 packets have a valid ICRC.
    assert_eq!(total, 295);
    assert_eq!(
        detailed, 35,
        "every tshark -O infiniband block was compared"
    );
    assert_eq!(opcodes.len(), 18, "{opcodes:?}");
    eprintln!("{total} packets, {detailed} with full decodes; opcodes: {opcodes:?}");
}

#[test]
fn a_flipped_payload_bit_is_caught_by_the_icrc() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rc_pingpong.pcap");
    let raw = read_pcap(&path);
    let mut checked = 0;
    for bytes in raw.iter().filter(|b| is_roce(b)) {
        let f = Frame::parse(bytes).unwrap();
        if f.payload.is_empty() {
            continue;
        }
        let mut bad = bytes.clone();
        let last = bad.len() - 5; // last byte before the ICRC (these payloads need no pad)
        bad[last] ^= 0x10;
        assert!(matches!(
            Frame::parse(&bad),
            Err(xroce_wire::ParseError::IcrcMismatch { .. })
        ));
        checked += 1;
    }
    assert_eq!(checked, 40);
}
