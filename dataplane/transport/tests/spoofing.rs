//! A connected queue pair answers only its peer.
//!
//! Transfers of every RC operation (SEND, WRITE, READ, atomics) and UC WRITEs, over IPv4
//! and IPv6, with a forger in the middle: before every request of the real peer reaches
//! the responder, copies of it arrive from other addresses — another address of the
//! peer's host, another host, the peer's address of the other family — at exactly the PSN
//! the responder expects, with other data; before every response reaches the requester,
//! forged copies of it arrive the same way. Asserted: every forged frame lands in
//! `rcvd_wrong_addr` and in no other drop counter, is not answered, moves no PSN and
//! completes nothing; every real work request completes with the real data.

use xroce_transport::frame::MAX_FRAME;
use xroce_transport::testing::{Connection, Host, connect};
use xroce_transport::{
    Access, Completion, Counter, Counters, Gather, Instant, QpType, RecvWqe, SendFlags, SendOp,
    SendWqe, SgeList, WcOpcode, WcStatus,
};
use xroce_wire::{
    EtherType, Frame, FrameRepr, Gid, IbRepr, IpRepr, Ipv4Repr, Ipv6Repr, Qpn, RethRepr,
};

const NOW: Instant = Instant::ZERO;
const QA: Qpn = Qpn::new(0x11);
const QB: Qpn = Qpn::new(0x22);
const BASE: u64 = 0x10_0000;
const KEY: u32 = 0x1234;
const RKEY: u32 = KEY | 0x8000_0000;
/// Work requests per transfer.
const N: u64 = 8;
/// Bytes per SEND, WRITE and READ: three packets at a 1024-byte path MTU.
const LEN: u32 = 3000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
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

fn v4(n: u8) -> Gid {
    Gid::from_ipv4([10, 0, 0, n].into())
}

fn v6(n: u8) -> Gid {
    Gid::from_ipv6(std::net::Ipv6Addr::new(
        0xfd00,
        0,
        0,
        0,
        0,
        0,
        0,
        u16::from(n),
    ))
}

/// Host `n` with an address of each family; the connection uses `family`'s (index 0).
fn host(n: u8, family: Family) -> Host {
    let mut h = match family {
        Family::V4 => Host::new(n),
        Family::V6 => Host::ipv6(n),
    };
    let other = match family {
        Family::V4 => v6(n),
        Family::V6 => v4(n),
    };
    h.endpoint.set_gids(vec![h.gid, other]);
    h.add_region(KEY, BASE, 1 << 16, Access::ALL);
    h
}

fn take(host: &mut Host) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; MAX_FRAME];
    let mut out = Vec::new();
    while let Some(t) = host.endpoint.poll_transmit(NOW, &mut buf, &mut host.mem) {
        out.push(buf[..t.len].to_vec());
    }
    out
}

fn give(host: &mut Host, frame: &[u8]) {
    host.endpoint.handle_frame(NOW, frame, &mut host.mem);
}

fn completions(host: &mut Host) -> Vec<Completion> {
    std::iter::from_fn(|| host.endpoint.poll_completion()).collect()
}

/// `frame` carried between `src` and `dst` (IPv4 when both are IPv4-mapped, IPv6
/// otherwise), its IB headers edited by `edit` and its payload replaced by 0xee bytes.
fn forge(frame: &[u8], src: Gid, dst: Gid, edit: impl FnOnce(&mut IbRepr)) -> Vec<u8> {
    let f = Frame::parse(frame).unwrap();
    let mut headers: FrameRepr = f.headers;
    let mut ib = f.ib;
    edit(&mut ib);
    let payload = vec![0xeeu8; f.payload.len()];
    match (src.to_ipv4(), dst.to_ipv4()) {
        (Some(s), Some(d)) => {
            headers.ip = IpRepr::Ipv4(Ipv4Repr {
                src_addr: s,
                dst_addr: d,
                protocol: 17,
                payload_len: 0,
                dscp: 0,
                ecn: 0,
                ttl: 64,
                identification: 7,
                dont_fragment: true,
            });
            headers.ethernet.ethertype = EtherType::IPV4;
        }
        _ => {
            headers.ip = IpRepr::Ipv6(Ipv6Repr {
                src_addr: src.to_ipv6(),
                dst_addr: dst.to_ipv6(),
                next_header: 17,
                payload_len: 0,
                dscp: 0,
                ecn: 0,
                flow_label: 0,
                hop_limit: 64,
            });
            headers.ethernet.ethertype = EtherType::IPV6;
        }
    }
    let mut buf = vec![0u8; 8192];
    let at = headers.header_len();
    let n = ib.emit(&mut buf[at..], payload.len()).unwrap();
    buf[at + n..at + n + payload.len()].copy_from_slice(&payload);
    let len = headers.emit(&mut buf, n + payload.len()).unwrap();
    buf.truncate(len);
    buf
}

/// Forged copies of a frame from `from` to `to`: from another address of the sender's
/// host, from another host, and between the two hosts' addresses of the other family,
/// each with other data and, for requests, other targets.
fn forgeries(frame: &[u8], from: &Host, to: &Host, family: Family) -> Vec<Vec<u8>> {
    let (n_from, n_to) = (from.mac[5], to.mac[5]);
    let address = |n: u8, same_family: bool| match (family == Family::V4) == same_family {
        true => v4(n),
        false => v6(n),
    };
    let edit = |ib: &mut IbRepr| {
        if let Some(reth) = ib.reth.as_mut() {
            *reth = RethRepr {
                va: BASE,
                dma_len: reth.dma_len,
                rkey: reth.rkey,
            };
        }
        if let Some(atomic) = ib.atomic_eth.as_mut() {
            atomic.swap_add = 1000;
            atomic.compare = 0;
        }
        if let Some(ack) = ib.atomic_ack_eth.as_mut() {
            ack.orig_data = 0xdead;
        }
    };
    vec![
        forge(
            frame,
            address(n_from + 100, true),
            address(n_to, true),
            edit,
        ),
        forge(frame, address(200, true), address(n_to, true), edit),
        forge(frame, address(n_from, false), address(n_to, false), edit),
    ]
}

fn wqe(wr_id: u64, op: SendOp, offset: u64, len: u32) -> SendWqe {
    SendWqe {
        wr_id,
        op,
        flags: SendFlags::SIGNALED,
        data: Gather::Sges(SgeList::single(BASE + offset, len, KEY)),
        ud: None,
    }
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// The drop and NAK counters that moved since `before`.
fn moved(host: &Host, before: &Counters) -> Vec<(&'static str, u64)> {
    let after = host.endpoint.counters();
    Counter::ALL
        .iter()
        .filter(|c| c.is_drop_or_nak())
        .filter(|c| after.value(**c) != before.value(**c))
        .map(|c| (c.name(), after.value(*c) - before.value(*c)))
        .collect()
}

/// Runs `op` from A to B with forgeries in front of every frame; checks the result.
fn transfer_under_attack(qp_type: QpType, op: Op, family: Family) {
    let what = format!("{qp_type:?} {op:?} over {family:?}");
    let mut a = host(1, family);
    let mut b = host(2, family);
    let c = Connection::default();
    connect(&mut a, QA, &mut b, QB, qp_type, &c, NOW);
    let source = pattern(7, (N as usize) * 4096);
    a.mem.region_mut(0).bytes[..source.len()].copy_from_slice(&source);
    b.mem.region_mut(0).bytes[0x8000..0x8000 + source.len()].copy_from_slice(&source);
    for i in 0..N {
        let at = i * 4096;
        let op = match op {
            Op::Send => {
                let recv = RecvWqe {
                    wr_id: 100 + i,
                    sges: SgeList::single(BASE + 0x8000 + at, 4096, KEY),
                };
                b.endpoint.post_recv(NOW, QB, recv).unwrap();
                SendOp::Send
            }
            Op::Write => SendOp::Write {
                remote_addr: BASE + 0x8000 + at,
                rkey: RKEY,
            },
            Op::Read => SendOp::Read {
                remote_addr: BASE + 0x8000 + at,
                rkey: RKEY,
            },
            Op::FetchAdd => SendOp::FetchAdd {
                remote_addr: BASE + 0xf000,
                rkey: RKEY,
                add: 1,
            },
            Op::CompareSwap => SendOp::CompareSwap {
                remote_addr: BASE + 0xf000,
                rkey: RKEY,
                compare: i,
                swap: i + 1,
            },
        };
        let (offset, len) = match op {
            SendOp::FetchAdd { .. } | SendOp::CompareSwap { .. } => (0x8000 + 8 * i, 8),
            SendOp::Read { .. } => (0x8000 + at, LEN),
            _ => (at, LEN),
        };
        a.endpoint
            .post_send(NOW, QA, wqe(i, op, offset, len))
            .unwrap();
    }
    if matches!(op, Op::FetchAdd | Op::CompareSwap) {
        b.mem.region_mut(0).bytes[0xf000..0xf008].fill(0);
    }
    let (before_a, before_b) = (a.endpoint.counters().clone(), b.endpoint.counters().clone());
    let (mut forged_requests, mut forged_responses) = (0u64, 0u64);
    let (mut done, mut recvs) = (Vec::new(), Vec::new());
    for _ in 0..1000 {
        let requests = take(&mut a);
        if requests.is_empty() {
            break;
        }
        for f in requests {
            let expected = b.endpoint.qp(QB).unwrap().diagnostics().expected_psn;
            for forged in forgeries(&f, &a, &b, family) {
                give(&mut b, &forged);
                forged_requests += 1;
                assert!(
                    take(&mut b).is_empty(),
                    "{what}: a forged request was answered"
                );
                let now = b.endpoint.qp(QB).unwrap().diagnostics().expected_psn;
                assert_eq!(now, expected, "{what}: a forged request moved the PSN");
                assert!(
                    completions(&mut b).is_empty(),
                    "{what}: it completed a receive"
                );
            }
            give(&mut b, &f);
            recvs.extend(completions(&mut b));
            for r in take(&mut b) {
                for forged in forgeries(&r, &b, &a, family) {
                    give(&mut a, &forged);
                    forged_responses += 1;
                    assert!(
                        completions(&mut a).is_empty(),
                        "{what}: a forged response completed a work request"
                    );
                }
                give(&mut a, &r);
                done.extend(completions(&mut a));
            }
        }
    }
    assert_eq!(
        moved(&b, &before_b),
        [("rcvd_wrong_addr", forged_requests)],
        "{what}: the responder's counters"
    );
    let expected_a: Vec<(&str, u64)> = if forged_responses > 0 {
        vec![("rcvd_wrong_addr", forged_responses)]
    } else {
        Vec::new()
    };
    assert_eq!(
        moved(&a, &before_a),
        expected_a,
        "{what}: the requester's counters"
    );
    assert_eq!(qp_type == QpType::Rc, forged_responses > 0, "{what}");
    // Every work request completed, in order, with the real data (UC's as they were sent).
    done.extend(completions(&mut a));
    let ids: Vec<u64> = done.iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, (0..N).collect::<Vec<_>>(), "{what}");
    assert!(done.iter().all(|c| c.status == WcStatus::Success), "{what}");
    let region_a = &a.mem.region(0).bytes;
    let region_b = &b.mem.region(0).bytes;
    match op {
        Op::Write | Op::Send => {
            for i in 0..N as usize {
                let at = i * 4096;
                assert!(
                    region_b[0x8000 + at..0x8000 + at + LEN as usize]
                        == source[at..at + LEN as usize],
                    "{what}: message {i} landed wrong"
                );
            }
            if op == Op::Send {
                assert_eq!(recvs.len() as u64, N, "{what}");
                assert!(recvs.iter().all(|c| c.status == WcStatus::Success
                    && c.opcode == WcOpcode::Recv
                    && c.byte_len == LEN));
            }
        }
        Op::Read => {
            for i in 0..N as usize {
                let at = 0x8000 + i * 4096;
                assert!(
                    region_a[at..at + LEN as usize] == region_b[at..at + LEN as usize],
                    "{what}: READ {i} brought other bytes"
                );
            }
        }
        Op::FetchAdd | Op::CompareSwap => {
            let word = u64::from_le_bytes(region_b[0xf000..0xf008].try_into().unwrap());
            assert_eq!(word, N, "{what}: the target word");
            for i in 0..N as usize {
                let at = 0x8000 + 8 * i;
                let orig = u64::from_le_bytes(region_a[at..at + 8].try_into().unwrap());
                assert_eq!(orig, i as u64, "{what}: the original value of atomic {i}");
            }
        }
    }
    // Nothing outside the targets changed on B: the forged WRITEs and SENDs aimed at the
    // region's start.
    assert!(region_b[..0x8000] == vec![0u8; 0x8000][..], "{what}");
}

#[test]
fn rc_send_write_read_and_atomics_answer_only_the_peer_over_ipv4() {
    for op in [Op::Send, Op::Write, Op::Read, Op::FetchAdd, Op::CompareSwap] {
        transfer_under_attack(QpType::Rc, op, Family::V4);
    }
}

#[test]
fn rc_send_write_read_and_atomics_answer_only_the_peer_over_ipv6() {
    for op in [Op::Send, Op::Write, Op::Read, Op::FetchAdd, Op::CompareSwap] {
        transfer_under_attack(QpType::Rc, op, Family::V6);
    }
}

#[test]
fn uc_send_and_write_answer_only_the_peer_over_both_families() {
    for family in [Family::V4, Family::V6] {
        for op in [Op::Send, Op::Write] {
            transfer_under_attack(QpType::Uc, op, family);
        }
    }
}
