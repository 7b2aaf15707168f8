//! A connected queue pair answers only its peer, on the wire: while the real peer runs a
//! transfer of SENDs, WRITEs, READs or atomics to a daemon's RC queue pair, a forger in the
//! peer's namespace (an AF_PACKET socket) sends requests to that queue pair at every PSN
//! of the transfer, with its real QP number, rkey and addresses, from other sources:
//! another address of the peer's host, another host, and the peer's address of the other
//! family. A UD queue pair meanwhile gets datagrams with a foreign Q_Key and P_Key.
//!
//! Asserted: every forged frame lands in its counter (`rcvd_wrong_addr`, `qkey_viol_cntr`,
//! `bad_pkey_cntr`) and no other counter of either daemon that a forged request getting in
//! would move (duplicates, sequence errors, NAKs, unexpected responses at the peer); no
//! forged byte reaches the region; the real transfer completes with every byte right and
//! both queue pairs stay in RTS.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use verbs_shm::client::{Access, AhAttr, QpInit, QpType, RecvWr, SendOp, SendWr, Sge};
use xroce_lab::daemons::{TwoHosts, connect, counter, ud_ready, wait_completions};
use xroce_lab::{Side, require_root};
use xroce_wire::{
    AtomicEthRepr, BthRepr, DethRepr, EthernetAddress, FrameRepr, Gid, IbRepr, Opcode, Pkey, Psn,
    Qkey, Qpn, RethRepr, Rkey,
};

use super::daemon_hostile_wire::RawSocket;

/// Messages per transfer.
const MESSAGES: usize = 64;
/// Bytes per SEND, WRITE and READ: four packets at the lab's 1024-byte path MTU.
const LEN: usize = 4096;
/// The PSN the peer starts at (the target expects it first).
const PSN: u32 = 0x30_0000;
/// Where forged WRITEs aim in the target's region, and the atomics' word.
const GUARD: usize = 768 << 10;
const WORD: usize = (1 << 20) - 64;
const QKEY: u32 = 0x1111_1111;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    V4,
    V6,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Send,
    Write,
    Read,
    FetchAdd,
    CompareSwap,
}

impl Op {
    /// PSNs one message takes.
    fn psns(self) -> u32 {
        match self {
            Op::Send | Op::Write | Op::Read => (LEN / 1024) as u32,
            Op::FetchAdd | Op::CompareSwap => 1,
        }
    }
}

/// The lab host's address of `family`.
fn address(hosts: &TwoHosts, side: Side, family: Family) -> IpAddr {
    let h = hosts.lab.host(side);
    match family {
        Family::V4 => IpAddr::V4(h.ipv4),
        Family::V6 => IpAddr::V6(h.ipv6),
    }
}

/// The address vector from `side` to its peer over `family` (the lab's GID tables: the
/// IPv4 address at index 0, the global IPv6 one at index 1).
pub(crate) fn av(hosts: &TwoHosts, side: Side, family: Family) -> AhAttr {
    let peer = address(hosts, side.peer(), family);
    AhAttr {
        dgid: Gid::from_ip(peer).0,
        sgid_index: match family {
            Family::V4 => 0,
            Family::V6 => 1,
        },
        ..hosts.av(side)
    }
}

/// Frames from `src` to the target host A over the lab's link, as the forger builds them.
struct Forger {
    envelope: FrameRepr,
}

impl Forger {
    fn new(src_mac: [u8; 6], dst_mac: [u8; 6], src: IpAddr, dst: IpAddr) -> Forger {
        let (s, d) = (EthernetAddress(src_mac), EthernetAddress(dst_mac));
        let envelope = match (src, dst) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => FrameRepr::ipv4(s, d, src, dst, 0xc321),
            (IpAddr::V6(src), IpAddr::V6(dst)) => FrameRepr::ipv6(s, d, src, dst, 0xc321),
            _ => panic!("one family per frame"),
        };
        Forger { envelope }
    }

    fn frame(&self, ib: &IbRepr, payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; 2048];
        let n = self.envelope.emit_packet(&mut buf, ib, payload).unwrap();
        buf.truncate(n);
        buf
    }
}

/// The forgers for a connection over `family`: another address of the peer's host,
/// another host, and the two hosts' addresses of the other family.
fn forgers(hosts: &TwoHosts, family: Family) -> Vec<(&'static str, Forger)> {
    let (a, b) = (hosts.lab.host(Side::A), hosts.lab.host(Side::B));
    let other = match family {
        Family::V4 => Family::V6,
        Family::V6 => Family::V4,
    };
    let same = |last: u8| -> IpAddr {
        match family {
            Family::V4 => {
                let o = b.ipv4.octets();
                IpAddr::from([o[0], o[1], o[2], last])
            }
            Family::V6 => {
                let mut o = b.ipv6.octets();
                o[15] = last;
                IpAddr::from(o)
            }
        }
    };
    let to_a = address(hosts, Side::A, family);
    vec![
        (
            "another address of the peer's host",
            Forger::new(b.mac, b.next_hop_mac, same(3), to_a),
        ),
        (
            "another host",
            Forger::new([2, 0x78, 0x72, 0, 0, 0xee], a.mac, same(77), to_a),
        ),
        (
            "the peer's address of the other family",
            Forger::new(
                b.mac,
                b.next_hop_mac,
                address(hosts, Side::B, other),
                address(hosts, Side::A, other),
            ),
        ),
    ]
}

/// A forged request of `op` to `qpn` at `psn`, aimed at the target's region.
fn forged_request(op: Op, qpn: u32, psn: u32, va: u64, rkey: u32) -> (IbRepr, Vec<u8>) {
    let opcode = match op {
        Op::Send => Opcode::RC_SEND_ONLY,
        Op::Write => Opcode::RC_RDMA_WRITE_ONLY,
        Op::Read => Opcode::RC_RDMA_READ_REQUEST,
        Op::FetchAdd => Opcode::RC_FETCH_ADD,
        Op::CompareSwap => Opcode::RC_COMPARE_SWAP,
    };
    let mut bth = BthRepr::new(opcode, Qpn::new(qpn), Psn::new(psn));
    bth.ack_request = true;
    let mut ib = IbRepr::new(bth);
    let mut payload = Vec::new();
    match op {
        Op::Send => payload = vec![0xee; 64],
        Op::Write | Op::Read => {
            ib.reth = Some(RethRepr {
                va: va + GUARD as u64,
                rkey: Rkey(rkey),
                dma_len: 64,
            });
            if op == Op::Write {
                payload = vec![0xee; 64];
            }
        }
        Op::FetchAdd | Op::CompareSwap => {
            ib.atomic_eth = Some(AtomicEthRepr {
                va: va + WORD as u64,
                rkey: Rkey(rkey),
                swap_add: 1000,
                compare: 0,
            });
        }
    }
    (ib, payload)
}

/// Counters that a forged request getting in would move, at the target (A) and the peer.
const TARGET_UNMOVED: &[&str] = &[
    "duplicate_request",
    "out_of_seq_request",
    "out_of_seq_dropped",
    "duplicate_request_no_resource",
    "sent_nak_invalid_request",
    "sent_nak_remote_access",
    "sent_nak_remote_op",
    "send_rnr_err",
    "rcvd_no_recv_wqe",
    "rcvd_qp_error",
    "bad_pkey_cntr",
    "qkey_viol_cntr",
    "rcvd_icrc_err",
    "rcvd_malformed",
];
const PEER_UNMOVED: &[&str] = &[
    "duplicate_response",
    "unexpected_response",
    "response_out_of_seq",
    "bad_response",
    "rcvd_seq_err",
    "rcvd_nak_invalid_request",
    "rcvd_nak_remote_access",
    "rcvd_nak_remote_op",
    "rcvd_rnr_err",
    "completer_retry_err",
];

fn qp_state(ctx: &verbs_shm::client::Context, qpn: u32) -> String {
    ctx.qp_stats()
        .unwrap()
        .into_iter()
        .find(|q| q.qpn == qpn)
        .map(|q| q.state)
        .unwrap_or_else(|| "gone".into())
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 7 + i / 251) as u8).wrapping_add(seed))
        .collect()
}

/// One transfer of `op` from B to A under attack; asserts everything the module promises.
fn transfer_under_attack(hosts: &TwoHosts, family: Family, op: Op, socket: &RawSocket) {
    let what = format!("{op:?} over {family:?}");
    let (ca, cb) = (hosts.open(Side::A).unwrap(), hosts.open(Side::B).unwrap());
    let (pa, pb) = (ca.alloc_pd().unwrap(), cb.alloc_pd().unwrap());
    let ma = pa.alloc_mr(1 << 20, Access::ALL).unwrap();
    let mb = pb.alloc_mr(1 << 20, Access::ALL).unwrap();
    let (cqa, cqb) = (
        ca.create_cq(256, None).unwrap(),
        cb.create_cq(256, None).unwrap(),
    );
    let mut init = QpInit::new(QpType::Rc, &cqa, &cqa);
    init.caps.max_recv_wr = MESSAGES as u32;
    let target = pa.create_qp(&init).unwrap();
    let mut init = QpInit::new(QpType::Rc, &cqb, &cqb);
    init.caps.max_send_wr = MESSAGES as u32;
    let peer = pb.create_qp(&init).unwrap();
    connect(&target, av(hosts, Side::A, family), peer.qpn(), 0x777, PSN).unwrap();
    connect(&peer, av(hosts, Side::B, family), target.qpn(), PSN, 0x777).unwrap();

    let source = pattern(op as u8, MESSAGES * LEN);
    assert!(mb.write(0, &source));
    assert!(ma.write(0, &source)); // READs fetch it from here
    let guard = pattern(0x5a, 64 << 10);
    assert!(ma.write(GUARD, &guard));
    assert!(ma.write(WORD, &0u64.to_le_bytes()));
    let (va, rkey) = (ma.addr(), ma.rkey());
    if op == Op::Send {
        let sges: Vec<[Sge; 1]> = (0..MESSAGES)
            .map(|i| {
                [Sge {
                    addr: va + (512 << 10) as u64 - LEN as u64 * 64 + (i * LEN) as u64,
                    length: LEN as u32,
                    lkey: ma.lkey(),
                }]
            })
            .collect();
        for (i, s) in sges.iter().enumerate() {
            target
                .post_recv(&[RecvWr {
                    wr_id: i as u64,
                    sges: s,
                }])
                .unwrap();
        }
    }

    let forgers = forgers(hosts, family);
    let psns = op.psns() * MESSAGES as u32;
    let (before_a, before_b) = (ca.stats().unwrap(), cb.stats().unwrap());
    let started = AtomicBool::new(false);
    let target_qpn = target.qpn();
    let forged = std::thread::scope(|scope| {
        let forger = scope.spawn(|| {
            let mut n = 0u64;
            // Every PSN of the transfer, a little beyond, from every forger; twice.
            for round in 0..2 {
                for p in 0..psns + 8 {
                    for (_, f) in &forgers {
                        let (ib, payload) = forged_request(op, target_qpn, PSN + p, va, rkey);
                        socket.send(&f.frame(&ib, &payload));
                        n += 1;
                    }
                    if round == 0 && p == 0 {
                        started.store(true, Ordering::Release);
                    }
                }
            }
            n
        });
        while !started.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        // The real transfer, while the forger sends.
        let wrs: Vec<(SendOp, Sge)> = (0..MESSAGES)
            .map(|i| {
                let at = (i * LEN) as u64;
                let remote = va + (512 << 10) as u64 + at;
                let (send_op, local, len) = match op {
                    Op::Send => (SendOp::Send, at, LEN),
                    Op::Write => (
                        SendOp::Write {
                            remote_addr: remote,
                            rkey,
                        },
                        at,
                        LEN,
                    ),
                    Op::Read => (
                        SendOp::Read {
                            remote_addr: va + at,
                            rkey,
                        },
                        (512 << 10) as u64 + at,
                        LEN,
                    ),
                    Op::FetchAdd => (
                        SendOp::FetchAdd {
                            remote_addr: va + WORD as u64,
                            rkey,
                            add: 1,
                        },
                        (512 << 10) as u64 + 8 * i as u64,
                        8,
                    ),
                    Op::CompareSwap => (
                        SendOp::CompareSwap {
                            remote_addr: va + WORD as u64,
                            rkey,
                            compare: i as u64,
                            swap: i as u64 + 1,
                        },
                        (512 << 10) as u64 + 8 * i as u64,
                        8,
                    ),
                };
                let sge = Sge {
                    addr: mb.addr() + local,
                    length: len as u32,
                    lkey: mb.lkey(),
                };
                (send_op, sge)
            })
            .collect();
        for (i, (send_op, sge)) in wrs.iter().enumerate() {
            let sges = [*sge];
            peer.post_send(&[SendWr::new(i as u64, *send_op, &sges)])
                .unwrap();
        }
        let done = wait_completions(&cqb, MESSAGES);
        for (i, c) in done.iter().enumerate() {
            assert_eq!((c.wr_id, c.status), (i as u64, 0), "{what}: {c:?}");
        }
        forger.join().unwrap()
    });

    // Every forged frame is counted, once, and nothing else moved.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut after_a = ca.stats().unwrap();
    let moved = |now: &[(String, u64)], before: &[(String, u64)], c: &str| {
        counter(now, c) - counter(before, c)
    };
    while moved(&after_a, &before_a, "rcvd_wrong_addr") < forged && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        after_a = ca.stats().unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    let (after_a, after_b) = (ca.stats().unwrap(), cb.stats().unwrap());
    assert_eq!(
        moved(&after_a, &before_a, "rcvd_wrong_addr"),
        forged,
        "{what}: every forged frame, once"
    );
    for c in TARGET_UNMOVED {
        assert_eq!(moved(&after_a, &before_a, c), 0, "{what}: the target's {c}");
    }
    for c in PEER_UNMOVED {
        assert_eq!(moved(&after_b, &before_b, c), 0, "{what}: the peer's {c}");
    }
    assert_eq!(qp_state(&ca, target.qpn()), "RTS", "{what}");
    assert_eq!(qp_state(&cb, peer.qpn()), "RTS", "{what}");

    // The real data, and nothing forged.
    let mut got = vec![0u8; 64 << 10];
    assert!(ma.read(GUARD, &mut got));
    assert!(got == guard, "{what}: a forged WRITE landed");
    match op {
        Op::Write => {
            let mut got = vec![0u8; MESSAGES * LEN];
            assert!(ma.read(512 << 10, &mut got));
            assert!(got == source, "{what}: the WRITEs landed wrong");
        }
        Op::Send => {
            let recvs = wait_completions(&cqa, MESSAGES);
            for (i, c) in recvs.iter().enumerate() {
                assert_eq!(
                    (c.wr_id, c.status, c.byte_len),
                    (i as u64, 0, LEN as u32),
                    "{what}"
                );
            }
            let mut got = vec![0u8; MESSAGES * LEN];
            assert!(ma.read((512 << 10) - LEN * 64, &mut got));
            assert!(got == source, "{what}: the SENDs landed wrong");
        }
        Op::Read => {
            let mut got = vec![0u8; MESSAGES * LEN];
            assert!(mb.read(512 << 10, &mut got));
            assert!(got == source, "{what}: the READs brought other bytes");
        }
        Op::FetchAdd | Op::CompareSwap => {
            assert_eq!(ma.load_u64(WORD), Some(MESSAGES as u64), "{what}");
            for i in 0..MESSAGES {
                let orig = mb.load_u64((512 << 10) + 8 * i);
                assert_eq!(orig, Some(i as u64), "{what}: atomic {i}'s original value");
            }
        }
    }
    let mut polled = [verbs_shm::client::WorkCompletion::default(); 4];
    assert_eq!(
        cqa.poll(&mut polled).unwrap(),
        0,
        "{what}: no other completion"
    );
    eprintln!("{what}: {forged} forged frames dropped, transfer intact");
}

/// Datagrams to a UD queue pair with a foreign Q_Key or P_Key land in their counters; one
/// with the right keys from anywhere is delivered (UD checks no addresses).
fn ud_keys(hosts: &TwoHosts, family: Family, socket: &RawSocket) {
    let what = format!("UD over {family:?}");
    let ca = hosts.open(Side::A).unwrap();
    let pa = ca.alloc_pd().unwrap();
    let ma = pa.alloc_mr(1 << 16, Access::ALL).unwrap();
    let cq = ca.create_cq(16, None).unwrap();
    let qp = pa.create_qp(&QpInit::new(QpType::Ud, &cq, &cq)).unwrap();
    ud_ready(&qp, QKEY, 0).unwrap();
    let sge = [Sge {
        addr: ma.addr(),
        length: 1024,
        lkey: ma.lkey(),
    }];
    for i in 0..4 {
        qp.post_recv(&[RecvWr {
            wr_id: i,
            sges: &sge,
        }])
        .unwrap();
    }
    let (b, a) = (hosts.lab.host(Side::B), hosts.lab.host(Side::A));
    let forger = Forger::new(
        b.mac,
        b.next_hop_mac,
        address(hosts, Side::B, family),
        address(hosts, Side::A, family),
    );
    let datagram = |qkey: u32, pkey: u16| {
        let mut bth = BthRepr::new(Opcode::UD_SEND_ONLY, Qpn::new(qp.qpn()), Psn::new(1));
        bth.pkey = Pkey(pkey);
        let mut ib = IbRepr::new(bth);
        ib.deth = Some(DethRepr {
            qkey: Qkey(qkey),
            src_qp: Qpn::new(0x99),
        });
        forger.frame(&ib, b"datagram")
    };
    let before = ca.stats().unwrap();
    socket.send(&datagram(QKEY ^ 1, 0xffff));
    socket.send(&datagram(0x8001_0000, 0xffff));
    socket.send(&datagram(QKEY, 0x8001));
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut now = ca.stats().unwrap();
    while (counter(&now, "qkey_viol_cntr") - counter(&before, "qkey_viol_cntr") < 2
        || counter(&now, "bad_pkey_cntr") == counter(&before, "bad_pkey_cntr"))
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
        now = ca.stats().unwrap();
    }
    assert_eq!(
        counter(&now, "qkey_viol_cntr") - counter(&before, "qkey_viol_cntr"),
        2,
        "{what}"
    );
    assert_eq!(
        counter(&now, "bad_pkey_cntr") - counter(&before, "bad_pkey_cntr"),
        1,
        "{what}"
    );
    let mut polled = [verbs_shm::client::WorkCompletion::default(); 4];
    assert_eq!(
        cq.poll(&mut polled).unwrap(),
        0,
        "{what}: nothing delivered"
    );
    // The right keys from another host of the link: delivered.
    let elsewhere = Forger::new(
        [2, 0x78, 0x72, 0, 0, 0xee],
        a.mac,
        match family {
            Family::V4 => IpAddr::from([10, 77, 0, 77]),
            Family::V6 => "fd00:77::77".parse().unwrap(),
        },
        address(hosts, Side::A, family),
    );
    let mut bth = BthRepr::new(Opcode::UD_SEND_ONLY, Qpn::new(qp.qpn()), Psn::new(2));
    bth.pkey = Pkey::DEFAULT;
    let mut ib = IbRepr::new(bth);
    ib.deth = Some(DethRepr {
        qkey: Qkey(QKEY),
        src_qp: Qpn::new(0x99),
    });
    socket.send(&elsewhere.frame(&ib, b"datagram"));
    let c = wait_completions(&cq, 1)[0];
    assert_eq!(
        (c.status, c.byte_len, c.src_qp),
        (0, 40 + 8, 0x99),
        "{what}"
    );
}

/// Every operation under attack, and the UD keys, over `family`.
pub(crate) fn wire_trust(family: Family) {
    require_root();
    let hosts = TwoHosts::start(&xroce_lab::LabConfig::default(), &[]).expect("lab");
    let ns = hosts.lab.host(Side::B).netns.clone();
    let interface = hosts.lab.host(Side::B).interface.clone();
    let socket = xroce_lab::netns::run_in(&ns, || RawSocket::open(&interface))
        .unwrap()
        .expect("AF_PACKET socket in the peer's namespace");
    for op in [Op::Send, Op::Write, Op::Read, Op::FetchAdd, Op::CompareSwap] {
        transfer_under_attack(&hosts, family, op, &socket);
    }
    ud_keys(&hosts, family, &socket);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_connected_qp_answers_only_its_peer_over_ipv4() {
    wire_trust(Family::V4);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_connected_qp_answers_only_its_peer_over_ipv6() {
    wire_trust(Family::V6);
}
