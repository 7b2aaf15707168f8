//! Frames the captures do not have (IPv6, 802.1Q tags, immediate data, invalidate, CNP,
//! NAKs, UC, UD with immediate, RD), built by this crate and kept in
//! `tests/fixtures/synthetic_ipv6_vlan.pcap`.
//!
//! The committed pcap was checked with an independent ICRC implementation
//! (`icrc_check.py` of the rxe peer tools: "12 RoCEv2 packets, 12 ICRC ok, 0 bad"), so this
//! test pins the IPv6 and VLAN paths of the ICRC to bytes verified outside this crate.
//! Run with `XROCE_WRITE_FIXTURES=1` to rewrite the file after a deliberate change.

mod common;

use std::fs::File;
use std::time::Duration;

use common::{fixtures, read_pcap};
use pcap_file::pcap::{PcapPacket, PcapWriter};
use xroce_wire::source_port::udp_source_port;
use xroce_wire::{
    AethRepr, BthRepr, CnpRepr, DethRepr, EthernetAddress, Frame, FrameRepr, IbRepr, IethRepr,
    ImmDtRepr, IpRepr, NakCode, Opcode, Pkey, Psn, Qkey, Qpn, RdethRepr, RethRepr, Rkey, RnrTimer,
    Syndrome, VlanTag,
};

const A: EthernetAddress = EthernetAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x0a]);
const B: EthernetAddress = EthernetAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x0b]);
const TAG: VlanTag = VlanTag {
    pcp: 3,
    dei: false,
    vid: 77,
};

fn v4() -> FrameRepr {
    let port = udp_source_port(0, Qpn::new(0x11), Qpn::new(0x22));
    FrameRepr::ipv4(A, B, [10, 77, 0, 1].into(), [10, 77, 0, 2].into(), port)
}

fn v6() -> FrameRepr {
    let port = udp_source_port(0, Qpn::new(0x11), Qpn::new(0x22));
    FrameRepr::ipv6(
        A,
        B,
        "fd00:77::1".parse().unwrap(),
        "fd00:77::2".parse().unwrap(),
        port,
    )
}

fn bth(opcode: Opcode, psn: u32) -> BthRepr {
    let mut b = BthRepr::new(opcode, Qpn::new(0x22), Psn::new(psn));
    b.ack_request = opcode.info().needs_ack();
    b
}

fn frames() -> Vec<Vec<u8>> {
    let reth = RethRepr {
        va: 0x7f00_dead_0000,
        rkey: Rkey(0x1234),
        dma_len: 2048,
    };
    let payload: Vec<u8> = (0..1024u32).map(|i| (i * 13 + 5) as u8).collect();
    let mut list: Vec<(FrameRepr, IbRepr, &[u8])> = Vec::new();

    let mut ib = IbRepr::new(bth(Opcode::RC_SEND_ONLY_WITH_IMMEDIATE, 0xff_ffff));
    ib.immdt = Some(ImmDtRepr { data: 0x0102_0304 });
    list.push((v6(), ib, &payload[..5]));

    let mut ib = IbRepr::new(bth(Opcode::RC_RDMA_WRITE_FIRST, 0));
    ib.reth = Some(reth);
    list.push((v6().with_vlan(Some(TAG)), ib, &payload[..]));

    let mut ib = IbRepr::new(bth(Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE, 1));
    ib.immdt = Some(ImmDtRepr { data: 0xdead_beef });
    let mut hdr = v6().with_vlan(Some(TAG));
    if let IpRepr::Ipv6(r) = &mut hdr.ip {
        r.dscp = 26;
        r.ecn = 3;
        r.flow_label = 0x0_bc97;
        r.hop_limit = 17;
    }
    list.push((hdr, ib, &payload[..1023]));

    let mut ib = IbRepr::new(bth(Opcode::RC_SEND_ONLY_WITH_INVALIDATE, 2));
    ib.ieth = Some(IethRepr { rkey: Rkey(0x1234) });
    list.push((v4().with_vlan(Some(TAG)), ib, &payload[..3]));

    let cnp = CnpRepr {
        dest_qp: Qpn::new(0x11),
        pkey: Pkey::DEFAULT,
    };
    list.push((v4().with_vlan(Some(TAG)), cnp.to_ib_repr(), &[]));
    list.push((v6(), cnp.to_ib_repr(), &[]));

    let mut ib = IbRepr::new(bth(Opcode::RC_ACKNOWLEDGE, 3));
    ib.aeth = Some(AethRepr {
        syndrome: Syndrome::RnrNak {
            timer: RnrTimer::new(14),
        },
        msn: 7,
    });
    list.push((v4(), ib, &[]));

    let mut ib = IbRepr::new(bth(Opcode::RC_ACKNOWLEDGE, 4));
    ib.aeth = Some(AethRepr {
        syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
        msn: 7,
    });
    list.push((v6(), ib, &[]));

    let mut ib = IbRepr::new(bth(Opcode::UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, 5));
    ib.reth = Some(reth);
    ib.immdt = Some(ImmDtRepr { data: 7 });
    list.push((v4(), ib, &payload[..64]));

    let mut ib = IbRepr::new(bth(Opcode::UD_SEND_ONLY_WITH_IMMEDIATE, 6));
    ib.deth = Some(DethRepr {
        qkey: Qkey(0x1111_1111),
        src_qp: Qpn::new(0x11),
    });
    ib.immdt = Some(ImmDtRepr { data: 0xffff_0000 });
    list.push((v6().with_vlan(Some(TAG)), ib, &payload[..1]));

    let mut ib = IbRepr::new(bth(Opcode::RD_SEND_ONLY, 7));
    ib.rdeth = Some(RdethRepr { ee_context: 0x42 });
    ib.deth = Some(DethRepr {
        qkey: Qkey(0x1111_1111),
        src_qp: Qpn::new(0x11),
    });
    list.push((v4(), ib, &payload[..2]));

    let mut ib = IbRepr::new(bth(Opcode::RC_ACKNOWLEDGE, 8));
    ib.aeth = Some(AethRepr {
        syndrome: Syndrome::Nak(NakCode::RemoteAccessError),
        msn: 0xff_ffff,
    });
    list.push((v4().with_vlan(Some(TAG)), ib, &[]));

    list.into_iter()
        .map(|(hdr, ib, payload)| {
            let mut buf = vec![0u8; 2048];
            let n = hdr.emit_packet(&mut buf, &ib, payload).unwrap();
            buf.truncate(n);
            buf
        })
        .collect()
}

#[test]
fn synthetic_frames_match_the_independently_checked_fixture() {
    let path = fixtures().join("synthetic_ipv6_vlan.pcap");
    let built = frames();
    if std::env::var_os("XROCE_WRITE_FIXTURES").is_some() {
        let mut w = PcapWriter::new(File::create(&path).unwrap()).unwrap();
        for (i, f) in built.iter().enumerate() {
            let ts = Duration::from_secs(i as u64);
            w.write_packet(&PcapPacket::new(ts, f.len() as u32, f))
                .unwrap();
        }
    }
    let stored = read_pcap(&path);
    assert_eq!(stored.len(), 12);
    assert_eq!(
        stored, built,
        "emit output changed; re-check with icrc_check.py"
    );
    for (i, bytes) in stored.iter().enumerate() {
        let f = Frame::parse(bytes).unwrap_or_else(|e| panic!("frame {}: {e}", i + 1));
        let mut again = vec![0u8; bytes.len()];
        assert_eq!(f.emit(&mut again), Ok(bytes.len()));
        assert_eq!(&again, bytes);
    }
}
