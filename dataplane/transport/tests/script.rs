//! Script-style tests: two hosts, one queue pair each, one operation at a time, with the
//! exact outcome asserted (memory, completions, counters).

use std::net::Ipv6Addr;

use xroce_transport::testing::{Connection, Direction, Host, connect, exchange, run};
use xroce_transport::{
    Access, Completion, Gather, Instant, NetworkHeader, QpState, QpType, RecvWqe, SendFlags,
    SendOp, SendWqe, SgeList, WcOpcode, WcStatus,
};
use xroce_wire::{Frame, Gid, IbMtu, Opcode, Qpn};

const QA: Qpn = Qpn::new(0x11);
const QB: Qpn = Qpn::new(0x22);
const BASE: u64 = 0x10_0000;
const KEY: u32 = 0x1234;
const RKEY: u32 = KEY | 0x8000_0000;

fn pair(qp_type: QpType, c: &Connection) -> (Host, Host) {
    let mut a = Host::new(1);
    let mut b = Host::new(2);
    a.add_region(KEY, BASE, 1 << 20, Access::ALL);
    b.add_region(KEY, BASE, 1 << 20, Access::ALL);
    connect(&mut a, QA, &mut b, QB, qp_type, c, Instant::ZERO);
    (a, b)
}

fn fill(host: &mut Host, offset: usize, len: usize, seed: u8) {
    let bytes = &mut host.mem.region_mut(0).bytes;
    for (i, b) in bytes[offset..offset + len].iter_mut().enumerate() {
        *b = seed.wrapping_add((i * 7 % 251) as u8);
    }
}

fn region(host: &Host, offset: usize, len: usize) -> &[u8] {
    &host.mem.region(0).bytes[offset..offset + len]
}

fn send_wqe(wr_id: u64, op: SendOp, offset: u64, len: u32) -> SendWqe {
    SendWqe {
        wr_id,
        op,
        flags: SendFlags::SIGNALED,
        data: Gather::Sges(SgeList::single(BASE + offset, len, KEY)),
        ud: None,
    }
}

fn recv_wqe(wr_id: u64, offset: u64, len: u32) -> RecvWqe {
    RecvWqe {
        wr_id,
        sges: SgeList::single(BASE + offset, len, KEY),
    }
}

fn completions(host: &mut Host) -> Vec<Completion> {
    std::iter::from_fn(|| host.endpoint.poll_completion()).collect()
}

fn lossless(_: Direction, _: &[u8]) -> bool {
    true
}

fn opcodes(frames: &[Vec<u8>]) -> Vec<u8> {
    frames
        .iter()
        .map(|f| Frame::parse(f).unwrap().ib.bth.opcode.0)
        .collect()
}

#[test]
fn rc_write_of_2050_bytes_lands_and_completes_once() {
    let (mut a, mut b) = pair(QpType::Rc, &Connection::default());
    fill(&mut a, 0, 2050, 1);
    let write = SendOp::Write {
        remote_addr: BASE + 4096,
        rkey: RKEY,
    };
    a.endpoint
        .post_send(Instant::ZERO, QA, send_wqe(7, write, 0, 2050))
        .unwrap();
    let mut frames = Vec::new();
    exchange(&mut a, &mut b, Instant::ZERO, &mut |d, f| {
        frames.push((d, f.to_vec()));
        true
    });
    assert_eq!(region(&b, 4096, 2050), region(&a, 0, 2050));
    let a_to_b: Vec<_> = frames
        .iter()
        .filter(|(d, _)| *d == Direction::AtoB)
        .map(|(_, f)| f.clone())
        .collect();
    assert_eq!(
        opcodes(&a_to_b),
        vec![
            Opcode::RC_RDMA_WRITE_FIRST.0,
            Opcode::RC_RDMA_WRITE_MIDDLE.0,
            Opcode::RC_RDMA_WRITE_LAST.0
        ]
    );
    // Like rxe: the last packet has pad count 2 and AckReq.
    let last = Frame::parse(&a_to_b[2]).unwrap();
    assert_eq!(last.ib.bth.pad_count, 2);
    assert!(last.ib.bth.ack_request);
    let c = completions(&mut a);
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].wr_id, c[0].status, c[0].opcode),
        (7, WcStatus::Success, WcOpcode::RdmaWrite)
    );
    assert!(completions(&mut b).is_empty());
    assert_eq!(b.endpoint.counters().rcvd_pkts, 3);
}

#[test]
fn rc_send_of_4096_bytes_fills_the_posted_receive() {
    let (mut a, mut b) = pair(QpType::Rc, &Connection::default());
    fill(&mut a, 0, 4096, 9);
    b.endpoint
        .post_recv(Instant::ZERO, QB, recv_wqe(99, 8192, 8192))
        .unwrap();
    a.endpoint
        .post_send(
            Instant::ZERO,
            QA,
            send_wqe(1, SendOp::SendWithImm { imm: 0xdead }, 0, 4096),
        )
        .unwrap();
    exchange(&mut a, &mut b, Instant::ZERO, &mut lossless);
    assert_eq!(region(&b, 8192, 4096), region(&a, 0, 4096));
    let rc = completions(&mut b);
    assert_eq!(rc.len(), 1);
    assert_eq!(
        (rc[0].wr_id, rc[0].status, rc[0].opcode, rc[0].byte_len),
        (99, WcStatus::Success, WcOpcode::Recv, 4096)
    );
    assert_eq!(rc[0].imm, 0xdead);
    assert_eq!(completions(&mut a).len(), 1);
}

#[test]
fn rc_read_of_2050_bytes_comes_back() {
    let (mut a, mut b) = pair(QpType::Rc, &Connection::default());
    fill(&mut b, 4096, 2050, 3);
    let read = SendOp::Read {
        remote_addr: BASE + 4096,
        rkey: RKEY,
    };
    a.endpoint
        .post_send(Instant::ZERO, QA, send_wqe(5, read, 0, 2050))
        .unwrap();
    exchange(&mut a, &mut b, Instant::ZERO, &mut lossless);
    assert_eq!(region(&a, 0, 2050), region(&b, 4096, 2050));
    let c = completions(&mut a);
    assert_eq!(
        (c.len(), c[0].status, c[0].opcode),
        (1, WcStatus::Success, WcOpcode::RdmaRead)
    );
}

#[test]
fn rc_atomics_execute_once_and_return_the_original() {
    let (mut a, mut b) = pair(QpType::Rc, &Connection::default());
    b.mem.region_mut(0).bytes[64..72].copy_from_slice(&5u64.to_le_bytes());
    let fadd = SendOp::FetchAdd {
        remote_addr: BASE + 64,
        rkey: RKEY,
        add: 10,
    };
    let cas = SendOp::CompareSwap {
        remote_addr: BASE + 64,
        rkey: RKEY,
        compare: 15,
        swap: 100,
    };
    a.endpoint
        .post_send(Instant::ZERO, QA, send_wqe(1, fadd, 0, 8))
        .unwrap();
    a.endpoint
        .post_send(Instant::ZERO, QA, send_wqe(2, cas, 8, 8))
        .unwrap();
    exchange(&mut a, &mut b, Instant::ZERO, &mut lossless);
    assert_eq!(region(&b, 64, 8), &100u64.to_le_bytes());
    assert_eq!(region(&a, 0, 8), &5u64.to_le_bytes());
    assert_eq!(region(&a, 8, 8), &15u64.to_le_bytes());
    let c = completions(&mut a);
    assert_eq!(
        c.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
}

#[test]
fn a_lost_write_packet_is_nakked_once_and_resent() {
    let (mut a, mut b) = pair(QpType::Rc, &Connection::default());
    fill(&mut a, 0, 4096, 4);
    let write = SendOp::Write {
        remote_addr: BASE + 8192,
        rkey: RKEY,
    };
    a.endpoint
        .post_send(Instant::ZERO, QA, send_wqe(1, write, 0, 4096))
        .unwrap();
    let mut n = 0;
    run(&mut a, &mut b, Instant::ZERO, 100, &mut |d, _| {
        if d == Direction::AtoB {
            n += 1;
            return n != 2; // lose the second packet once
        }
        true
    });
    assert_eq!(region(&b, 8192, 4096), region(&a, 0, 4096));
    let cb = b.endpoint.counters();
    assert_eq!(cb.out_of_seq_request, 1, "one NAK for the gap");
    assert_eq!(
        cb.out_of_seq_dropped, 1,
        "the packet after it is dropped silently"
    );
    assert_eq!(a.endpoint.counters().rcvd_seq_err, 1);
    assert_eq!(a.endpoint.counters().completer_retry_err, 1);
    let c = completions(&mut a);
    assert_eq!((c.len(), c[0].status), (1, WcStatus::Success));
}

#[test]
fn a_lost_ack_is_recovered_by_the_timer_and_the_duplicate_is_not_executed_twice() {
    let (mut a, mut b) = pair(QpType::Rc, &Connection::default());
    b.mem.region_mut(0).bytes[0..8].copy_from_slice(&1u64.to_le_bytes());
    let fadd = SendOp::FetchAdd {
        remote_addr: BASE,
        rkey: RKEY,
        add: 1,
    };
    a.endpoint
        .post_send(Instant::ZERO, QA, send_wqe(1, fadd, 64, 8))
        .unwrap();
    let mut dropped = false;
    let end = run(&mut a, &mut b, Instant::ZERO, 100, &mut |d, _| {
        if d == Direction::BtoA && !dropped {
            dropped = true;
            return false;
        }
        true
    });
    assert!(end > Instant::ZERO, "the retransmit timer fired");
    assert_eq!(
        region(&b, 0, 8),
        &2u64.to_le_bytes(),
        "executed exactly once"
    );
    assert_eq!(
        region(&a, 64, 8),
        &1u64.to_le_bytes(),
        "the saved original value came back"
    );
    assert_eq!(b.endpoint.counters().duplicate_request, 1);
    assert_eq!(a.endpoint.counters().retransmit_timeouts, 1);
    assert_eq!(completions(&mut a).len(), 1);
}

#[test]
fn rnr_then_posted_receive_completes() {
    let (mut a, mut b) = pair(QpType::Rc, &Connection::default());
    a.endpoint
        .post_send(Instant::ZERO, QA, send_wqe(1, SendOp::Send, 0, 100))
        .unwrap();
    exchange(&mut a, &mut b, Instant::ZERO, &mut lossless);
    assert_eq!(b.endpoint.counters().send_rnr_err, 1);
    assert_eq!(a.endpoint.counters().rcvd_rnr_err, 1);
    b.endpoint
        .post_recv(Instant::ZERO, QB, recv_wqe(2, 0, 100))
        .unwrap();
    run(&mut a, &mut b, Instant::ZERO, 100, &mut lossless);
    assert_eq!(completions(&mut b).len(), 1);
    assert_eq!(completions(&mut a)[0].status, WcStatus::Success);
}

#[test]
fn rnr_retry_zero_fails_with_rnr_retry_exceeded() {
    let c = Connection {
        rnr_retry: 0,
        ..Connection::default()
    };
    let (mut a, mut b) = pair(QpType::Rc, &c);
    a.endpoint
        .post_send(Instant::ZERO, QA, send_wqe(1, SendOp::Send, 0, 100))
        .unwrap();
    a.endpoint
        .post_send(Instant::ZERO, QA, send_wqe(2, SendOp::Send, 0, 100))
        .unwrap();
    run(&mut a, &mut b, Instant::ZERO, 100, &mut lossless);
    let c = completions(&mut a);
    assert_eq!(
        c.iter().map(|c| c.status).collect::<Vec<_>>(),
        vec![WcStatus::RnrRetryExcErr, WcStatus::WrFlushErr]
    );
    assert_eq!(a.endpoint.qp(QA).unwrap().state(), QpState::Err);
    assert_eq!(a.endpoint.counters().retry_rnr_exceeded_err, 1);
}

fn retries_until_failure(retry_cnt: u8, losses: usize) -> (Vec<WcStatus>, u64) {
    let c = Connection {
        retry_cnt,
        ..Connection::default()
    };
    let (mut a, mut b) = pair(QpType::Rc, &c);
    a.endpoint
        .post_send(
            Instant::ZERO,
            QA,
            send_wqe(
                1,
                SendOp::Write {
                    remote_addr: BASE,
                    rkey: RKEY,
                },
                0,
                8,
            ),
        )
        .unwrap();
    let mut lost = 0;
    run(&mut a, &mut b, Instant::ZERO, 1000, &mut |d, _| {
        if d == Direction::AtoB && lost < losses {
            lost += 1;
            return false;
        }
        true
    });
    (
        completions(&mut a).iter().map(|c| c.status).collect(),
        a.endpoint.counters().retry_exceeded_err,
    )
}

#[test]
fn retry_count_passes_at_the_limit_and_fails_one_past_it() {
    // retry_cnt = 3: the first transmission and 3 retries may be lost... the 4th retry is
    // not allowed. Losing 3 packets succeeds on the 4th transmission; losing 4 fails.
    assert_eq!(retries_until_failure(3, 3), (vec![WcStatus::Success], 0));
    assert_eq!(
        retries_until_failure(3, 4),
        (vec![WcStatus::RetryExcErr], 1)
    );
    assert_eq!(retries_until_failure(0, 0), (vec![WcStatus::Success], 0));
    assert_eq!(
        retries_until_failure(0, 1),
        (vec![WcStatus::RetryExcErr], 1)
    );
}

#[test]
fn write_with_a_bad_rkey_is_nakked_remote_access_and_both_sides_fail() {
    let (mut a, mut b) = pair(QpType::Rc, &Connection::default());
    let write = SendOp::Write {
        remote_addr: BASE,
        rkey: RKEY ^ 1,
    };
    a.endpoint
        .post_send(Instant::ZERO, QA, send_wqe(1, write, 0, 16))
        .unwrap();
    a.endpoint
        .post_send(Instant::ZERO, QA, send_wqe(2, SendOp::Send, 0, 16))
        .unwrap();
    run(&mut a, &mut b, Instant::ZERO, 100, &mut lossless);
    let c = completions(&mut a);
    assert_eq!(
        c.iter().map(|c| c.status).collect::<Vec<_>>(),
        vec![WcStatus::RemAccessErr, WcStatus::WrFlushErr]
    );
    assert_eq!(b.endpoint.counters().sent_nak_remote_access, 1);
    assert_eq!(a.endpoint.counters().rcvd_nak_remote_access, 1);
    assert_eq!(b.endpoint.qp(QB).unwrap().state(), QpState::Err);
    assert!(
        b.mem.region(0).bytes.iter().all(|&x| x == 0),
        "nothing was written"
    );
}

#[test]
fn write_past_the_end_of_the_region_is_refused() {
    let (mut a, mut b) = pair(QpType::Rc, &Connection::default());
    let write = SendOp::Write {
        remote_addr: BASE + (1 << 20) - 8,
        rkey: RKEY,
    };
    a.endpoint
        .post_send(Instant::ZERO, QA, send_wqe(1, write, 0, 16))
        .unwrap();
    run(&mut a, &mut b, Instant::ZERO, 100, &mut lossless);
    assert_eq!(completions(&mut a)[0].status, WcStatus::RemAccessErr);
    assert!(b.mem.region(0).bytes.iter().all(|&x| x == 0));
}

#[test]
fn ud_send_delivers_the_grh_and_the_payload() {
    let c = Connection::default();
    let (mut a, mut b) = pair(QpType::Ud, &c);
    fill(&mut a, 0, 512, 6);
    b.endpoint
        .post_recv(Instant::ZERO, QB, recv_wqe(3, 0, 40 + 512))
        .unwrap();
    let path = a.path_to(&b);
    let mut wqe = send_wqe(4, SendOp::Send, 0, 512);
    wqe.ud = Some(xroce_transport::UdDest {
        path,
        remote_qpn: QB.value(),
        remote_qkey: c.qkey,
    });
    a.endpoint.post_send(Instant::ZERO, QA, wqe).unwrap();
    exchange(&mut a, &mut b, Instant::ZERO, &mut lossless);
    let rc = completions(&mut b);
    assert_eq!(
        (rc.len(), rc[0].byte_len, rc[0].src_qp),
        (1, 552, QA.value())
    );
    let grh = region(&b, 0, 40);
    assert!(grh[..20].iter().all(|&x| x == 0));
    assert_eq!(grh[20] >> 4, 4, "an IPv4 header in the second half");
    assert_eq!(&grh[32..36], &[10, 0, 0, 1], "its source address");
    assert_eq!(region(&b, 40, 512), region(&a, 0, 512));
    assert_eq!(rc[0].network_header, Some(NetworkHeader::Ipv4));
    let sent = completions(&mut a);
    assert_eq!(sent[0].status, WcStatus::Success);
    assert_eq!(sent[0].network_header, None, "only receives say it");
}

#[test]
fn ud_send_over_ipv6_delivers_the_ipv6_header_and_says_so() {
    let c = Connection::default();
    let (mut a, mut b) = pair(QpType::Ud, &c);
    let v6 = |n: u16| Gid::from_ipv6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, n));
    a.endpoint.set_gids(vec![a.gid, v6(1)]);
    b.endpoint.set_gids(vec![b.gid, v6(2)]);
    fill(&mut a, 0, 64, 3);
    b.endpoint
        .post_recv(Instant::ZERO, QB, recv_wqe(3, 0, 40 + 64))
        .unwrap();
    let mut path = a.path_to(&b);
    path.dgid = v6(2);
    path.sgid_index = 1;
    let mut wqe = send_wqe(4, SendOp::Send, 0, 64);
    wqe.ud = Some(xroce_transport::UdDest {
        path,
        remote_qpn: QB.value(),
        remote_qkey: c.qkey,
    });
    a.endpoint.post_send(Instant::ZERO, QA, wqe).unwrap();
    exchange(&mut a, &mut b, Instant::ZERO, &mut lossless);
    let rc = completions(&mut b);
    assert_eq!((rc.len(), rc[0].byte_len), (1, 104));
    assert_eq!(rc[0].network_header, Some(NetworkHeader::Ipv6));
    let grh = region(&b, 0, 40);
    assert_eq!(grh[0] >> 4, 6, "an IPv6 header in all 40 bytes");
    assert_eq!(&grh[8..24], &v6(1).0, "its source address");
    assert_eq!(&grh[24..40], &v6(2).0, "its destination address");
    assert_eq!(region(&b, 40, 64), region(&a, 0, 64));
}

#[test]
fn ud_send_with_the_wrong_qkey_is_dropped_and_counted() {
    let c = Connection::default();
    let (mut a, mut b) = pair(QpType::Ud, &c);
    b.endpoint
        .post_recv(Instant::ZERO, QB, recv_wqe(3, 0, 4096))
        .unwrap();
    let mut wqe = send_wqe(4, SendOp::Send, 0, 10);
    wqe.ud = Some(xroce_transport::UdDest {
        path: a.path_to(&b),
        remote_qpn: QB.value(),
        remote_qkey: 5,
    });
    a.endpoint.post_send(Instant::ZERO, QA, wqe).unwrap();
    exchange(&mut a, &mut b, Instant::ZERO, &mut lossless);
    assert!(completions(&mut b).is_empty());
    assert_eq!(b.endpoint.counters().qkey_viol_cntr, 1);
}

#[test]
fn uc_loses_the_message_with_the_lost_packet_and_delivers_the_next() {
    let (mut a, mut b) = pair(QpType::Uc, &Connection::default());
    fill(&mut a, 0, 3000, 8);
    b.endpoint
        .post_recv(Instant::ZERO, QB, recv_wqe(1, 0, 4096))
        .unwrap();
    a.endpoint
        .post_send(Instant::ZERO, QA, send_wqe(1, SendOp::Send, 0, 3000))
        .unwrap();
    a.endpoint
        .post_send(Instant::ZERO, QA, send_wqe(2, SendOp::Send, 0, 3000))
        .unwrap();
    let mut n = 0;
    exchange(&mut a, &mut b, Instant::ZERO, &mut |_, _| {
        n += 1;
        n != 2
    });
    let rc = completions(&mut b);
    assert_eq!(rc.len(), 1, "only the second message arrives");
    assert_eq!(
        (rc[0].wr_id, rc[0].byte_len),
        (1, 3000),
        "in the same receive buffer"
    );
    assert_eq!(region(&b, 0, 3000), region(&a, 0, 3000));
    assert_eq!(b.endpoint.counters().uc_dropped, 1);
    assert_eq!(completions(&mut a).len(), 2, "UC completes on send");
}

#[test]
fn zero_length_write_and_send_work() {
    let (mut a, mut b) = pair(QpType::Rc, &Connection::default());
    b.endpoint
        .post_recv(Instant::ZERO, QB, recv_wqe(1, 0, 16))
        .unwrap();
    let mut w = send_wqe(
        1,
        SendOp::Write {
            remote_addr: 0,
            rkey: 0,
        },
        0,
        0,
    );
    w.data = Gather::Sges(SgeList::new());
    a.endpoint.post_send(Instant::ZERO, QA, w).unwrap();
    let mut s = send_wqe(2, SendOp::Send, 0, 0);
    s.data = Gather::Sges(SgeList::new());
    a.endpoint.post_send(Instant::ZERO, QA, s).unwrap();
    exchange(&mut a, &mut b, Instant::ZERO, &mut lossless);
    assert_eq!(
        completions(&mut a)
            .iter()
            .map(|c| c.status)
            .collect::<Vec<_>>(),
        vec![WcStatus::Success; 2]
    );
    let rc = completions(&mut b);
    assert_eq!((rc.len(), rc[0].byte_len), (1, 0));
}

#[test]
fn messages_of_exactly_one_mtu_and_one_byte_more() {
    let c = Connection {
        mtu: IbMtu::Mtu1024,
        ..Connection::default()
    };
    let (mut a, mut b) = pair(QpType::Rc, &c);
    fill(&mut a, 0, 2048, 2);
    let w1 = send_wqe(
        1,
        SendOp::Write {
            remote_addr: BASE + 8192,
            rkey: RKEY,
        },
        0,
        1024,
    );
    let w2 = send_wqe(
        2,
        SendOp::Write {
            remote_addr: BASE + 16384,
            rkey: RKEY,
        },
        0,
        1025,
    );
    a.endpoint.post_send(Instant::ZERO, QA, w1).unwrap();
    a.endpoint.post_send(Instant::ZERO, QA, w2).unwrap();
    let mut frames = Vec::new();
    exchange(&mut a, &mut b, Instant::ZERO, &mut |d, f| {
        if d == Direction::AtoB {
            frames.push(f.to_vec());
        }
        true
    });
    assert_eq!(
        opcodes(&frames),
        vec![
            Opcode::RC_RDMA_WRITE_ONLY.0,
            Opcode::RC_RDMA_WRITE_FIRST.0,
            Opcode::RC_RDMA_WRITE_LAST.0
        ]
    );
    assert_eq!(region(&b, 8192, 1024), region(&a, 0, 1024));
    assert_eq!(region(&b, 16384, 1025), region(&a, 0, 1025));
}

#[test]
fn psn_wraps_at_2_pow_24() {
    let c = Connection {
        psn_a: xroce_wire::Psn::new(0xff_fffe),
        psn_b: xroce_wire::Psn::new(0xff_ffff),
        ..Connection::default()
    };
    let (mut a, mut b) = pair(QpType::Rc, &c);
    fill(&mut a, 0, 8192, 5);
    a.endpoint
        .post_send(
            Instant::ZERO,
            QA,
            send_wqe(
                1,
                SendOp::Write {
                    remote_addr: BASE + 65536,
                    rkey: RKEY,
                },
                0,
                8192,
            ),
        )
        .unwrap();
    fill(&mut b, 0, 4096, 1);
    a.endpoint
        .post_send(
            Instant::ZERO,
            QA,
            send_wqe(
                2,
                SendOp::Read {
                    remote_addr: BASE,
                    rkey: RKEY,
                },
                16384,
                4096,
            ),
        )
        .unwrap();
    let mut n = 0;
    run(&mut a, &mut b, Instant::ZERO, 100, &mut |_, _| {
        n += 1;
        n != 3 // lose one packet right at the wrap
    });
    assert_eq!(region(&b, 65536, 8192), region(&a, 0, 8192));
    assert_eq!(region(&a, 16384, 4096), region(&b, 0, 4096));
    assert_eq!(
        completions(&mut a)
            .iter()
            .map(|c| c.status)
            .collect::<Vec<_>>(),
        vec![WcStatus::Success; 2]
    );
}

#[test]
fn a_replayed_atomic_ack_after_a_sequence_nak_completes_the_atomic() {
    // The atomic's acknowledgement is lost, the SEND after it is lost (so the responder
    // NAKs a sequence error), then a duplicate of the atomic request arrives and the
    // responder replays the saved acknowledgement: the atomic must complete.
    let (mut a, mut b) = pair(QpType::Rc, &Connection::default());
    b.endpoint
        .post_recv(Instant::ZERO, QB, recv_wqe(1, 0, 64))
        .unwrap();
    b.endpoint
        .post_recv(Instant::ZERO, QB, recv_wqe(2, 64, 64))
        .unwrap();
    b.endpoint
        .post_recv(Instant::ZERO, QB, recv_wqe(3, 128, 64))
        .unwrap();
    let fadd = SendOp::FetchAdd {
        remote_addr: BASE + 4096,
        rkey: RKEY,
        add: 1,
    };
    a.endpoint
        .post_send(Instant::ZERO, QA, send_wqe(1, SendOp::Send, 0, 8))
        .unwrap();
    a.endpoint
        .post_send(Instant::ZERO, QA, send_wqe(2, fadd, 8, 8))
        .unwrap();
    a.endpoint
        .post_send(Instant::ZERO, QA, send_wqe(3, SendOp::Send, 16, 8))
        .unwrap();
    a.endpoint
        .post_send(Instant::ZERO, QA, send_wqe(4, SendOp::Send, 24, 8))
        .unwrap();
    let mut buf = vec![0u8; xroce_transport::frame::MAX_FRAME];
    let now = Instant::ZERO;
    let mut requests = Vec::new();
    while let Some(t) = a.endpoint.poll_transmit(now, &mut buf, &mut a.mem) {
        requests.push(buf[..t.len].to_vec());
    }
    assert_eq!(requests.len(), 4);
    for (i, f) in requests.iter().enumerate() {
        if i != 2 {
            b.endpoint.handle_frame(now, f, &mut b.mem);
        }
    }
    let mut responses = Vec::new();
    while let Some(t) = b.endpoint.poll_transmit(now, &mut buf, &mut b.mem) {
        responses.push(buf[..t.len].to_vec());
    }
    // ACK for the first SEND, the atomic acknowledgement, the sequence NAK.
    let kinds = opcodes(&responses);
    assert_eq!(
        kinds,
        vec![
            Opcode::RC_ACKNOWLEDGE.0,
            Opcode::RC_ATOMIC_ACKNOWLEDGE.0,
            Opcode::RC_ACKNOWLEDGE.0
        ]
    );
    a.endpoint.handle_frame(now, &responses[0], &mut a.mem);
    a.endpoint.handle_frame(now, &responses[2], &mut a.mem); // the atomic ack is lost
    // The duplicate of the atomic request reaches the responder.
    b.endpoint.handle_frame(now, &requests[1], &mut b.mem);
    while let Some(t) = b.endpoint.poll_transmit(now, &mut buf, &mut b.mem) {
        a.endpoint.handle_frame(now, &buf[..t.len], &mut a.mem);
    }
    let c = completions(&mut a);
    assert_eq!(
        c.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        vec![1, 2],
        "{:?}",
        a.endpoint.counters()
    );
    run(&mut a, &mut b, now, 100, &mut lossless);
    assert_eq!(completions(&mut a).len(), 2);
    assert_eq!(region(&b, 4096, 8), &1u64.to_le_bytes());
}
