//! Loopback (QPs of one daemon reaching each other through a local GID) behaves like the
//! wire: the same transport code, the same completions and errors, the same per-QP
//! counters, and the same promise that a receive posted before a send meets it.
//!
//! Each scenario runs twice, once between two QPs of host A (loopback) and once between a
//! QP of A and one of B (the wire), and the outcomes are compared.

use std::time::{Duration, Instant};

use verbs_shm::client::{
    Access, AhAttr, Context, Cq, Mr, Qp, QpInit, QpType, RecvWr, SendOp, SendWr, Sge, UdTarget,
    WorkCompletion,
};
use xroce_lab::daemons::{TwoHosts, connect, counter, ud_ready, wait_completions};
use xroce_lab::{LabConfig, Side, require_root};

fn hosts() -> TwoHosts {
    require_root();
    TwoHosts::start(&LabConfig::default(), &[]).expect("lab with two daemons")
}

/// One end: its context, memory and CQ.
struct End {
    ctx: Context,
    pd: verbs_shm::client::Pd,
    mr: Mr,
    cq: Cq,
}

fn end(h: &TwoHosts, side: Side) -> End {
    let ctx = h.open(side).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.alloc_mr(1 << 20, Access::ALL).unwrap();
    let cq = ctx.create_cq(4096, None).unwrap();
    End { ctx, pd, mr, cq }
}

/// The sender's and the receiver's ends: both on A (loopback), or on A and B (the wire),
/// and the address vector from the sender to the receiver. (`TwoHosts::av(side)` leads
/// from `side` to the other host: `av(B)` names A's own address.)
fn pair(h: &TwoHosts, loopback: bool) -> (End, End, AhAttr) {
    let sender = end(h, Side::A);
    let receiver = end(h, if loopback { Side::A } else { Side::B });
    let av = if loopback {
        h.av(Side::B)
    } else {
        h.av(Side::A)
    };
    (sender, receiver, av)
}

fn rc_qp(e: &End, send_wr: u32) -> Qp {
    let mut init = QpInit::new(QpType::Rc, &e.cq, &e.cq);
    init.caps.max_send_wr = send_wr;
    init.caps.max_recv_wr = 64;
    e.pd.create_qp(&init).unwrap()
}

/// The per-QP transport counters of `qpn`, as its daemon reports them.
fn qp_counters(ctx: &Context, qpn: u32) -> Vec<(String, u64)> {
    ctx.qp_stats()
        .unwrap()
        .into_iter()
        .find(|q| q.qpn == qpn)
        .map(|q| q.counters)
        .unwrap_or_default()
}

/// What an RC scenario produced: completion statuses and opcodes, the QPs' states, and
/// their transport counters.
#[derive(Debug, PartialEq, Eq)]
struct RcOutcome {
    sender: Vec<(u64, u32, u32)>,
    receiver: Vec<(u64, u32, u32)>,
    states: (u32, u32),
    sender_counters: Vec<(String, u64)>,
    receiver_counters: Vec<(String, u64)>,
}

fn summary(c: &[WorkCompletion]) -> Vec<(u64, u32, u32)> {
    c.iter().map(|c| (c.wr_id, c.status, c.opcode)).collect()
}

/// A WRITE, a SEND, a READ, then a WRITE with a wrong rkey: the sender's QP fails with a
/// remote access error, the receiver's goes to the error state, as IBTA 9.7.5.2.3 says.
fn rc_scenario(h: &TwoHosts, loopback: bool) -> RcOutcome {
    let (s, r, av) = pair(h, loopback);
    let qs = rc_qp(&s, 64);
    let qr = rc_qp(&r, 64);
    connect(&qs, av, qr.qpn(), 100, 200).unwrap();
    // Back to A's address, from either host.
    connect(&qr, h.av(Side::B), qs.qpn(), 200, 100).unwrap();
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7) as u8).collect();
    assert!(s.mr.write(0, &data));
    let sge = |len: u32| {
        [Sge {
            addr: s.mr.addr(),
            length: len,
            lkey: s.mr.lkey(),
        }]
    };
    let rsge = [Sge {
        addr: r.mr.addr() + 500_000,
        length: 4096,
        lkey: r.mr.lkey(),
    }];
    qr.post_recv(&[RecvWr {
        wr_id: 50,
        sges: &rsge,
    }])
    .unwrap();
    let write = SendOp::Write {
        remote_addr: r.mr.addr(),
        rkey: r.mr.rkey(),
    };
    let read = SendOp::Read {
        remote_addr: r.mr.addr(),
        rkey: r.mr.rkey(),
    };
    let bad = SendOp::Write {
        remote_addr: r.mr.addr(),
        rkey: r.mr.rkey() ^ 0x5a5a,
    };
    let (w, sd, rd) = (sge(20_000), sge(3000), sge(20_000));
    qs.post_send(&[
        SendWr::new(1, write, &w),
        SendWr::new(2, SendOp::Send, &sd),
        SendWr::new(3, read, &rd),
    ])
    .unwrap();
    let mut sender = wait_completions(&s.cq, 3);
    let receiver = wait_completions(&r.cq, 1);
    let mut got = vec![0u8; 20_000];
    assert!(r.mr.read(0, &mut got));
    assert_eq!(got, data, "the WRITE landed");
    qs.post_send(&[SendWr::new(4, bad, &w)]).unwrap();
    sender.extend(wait_completions(&s.cq, 1));
    // The receiver's QP leaves RTS when it NAKs the access.
    let deadline = Instant::now() + Duration::from_secs(10);
    let receiver_state = loop {
        let st = qr.query().unwrap().qp_state;
        if st != 3 || Instant::now() > deadline {
            break st;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    RcOutcome {
        sender: summary(&sender),
        receiver: summary(&receiver),
        states: (qs.query().unwrap().qp_state, receiver_state),
        sender_counters: semantic(qp_counters(&s.ctx, qs.qpn())),
        receiver_counters: semantic(qp_counters(&r.ctx, qr.qpn())),
    }
}

/// The counters that say what happened rather than how many packets were in flight when
/// it did: packet totals (ACK coalescing), packets that met a QP already in the error
/// state (how far the sender got before the NAK came back) and what loss recovery measured
/// of the path (round trips timed, packets its window or pacing held back) depend on
/// timing, on the wire as in loopback; congestion control's (`cc_*`, `np_*`, `rp_*`) are
/// the wire's alone (loopback frames cross no network).
fn semantic(counters: Vec<(String, u64)>) -> Vec<(String, u64)> {
    counters
        .into_iter()
        .filter(|(name, _)| {
            !matches!(
                name.as_str(),
                "sent_pkts"
                    | "rcvd_pkts"
                    | "rcvd_qp_error"
                    | "rtt_samples"
                    | "req_held_by_window"
                    | "req_held_by_pacing"
            ) && !["cc_", "np_", "rp_"].iter().any(|p| name.starts_with(p))
        })
        .collect()
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn loopback_and_wire_complete_fail_and_count_alike() {
    let h = hosts();
    let wire = rc_scenario(&h, false);
    let loopback = rc_scenario(&h, true);
    eprintln!("wire: {wire:#?}\nloopback: {loopback:#?}");
    // IBV_WC_SUCCESS for the three, IBV_WC_REM_ACCESS_ERR (10) for the bad rkey.
    assert_eq!(
        wire.sender.iter().map(|c| c.1).collect::<Vec<_>>(),
        [0, 0, 0, 10]
    );
    assert_eq!(wire.states, (6, 6), "both QPs in ERR");
    assert_eq!(loopback, wire);
    let stats = h.open(Side::A).unwrap().stats().unwrap();
    assert!(counter(&stats, "loopback_frames") > 0, "{stats:?}");
}

/// UD messages from senders on A to receivers, each sent right after its receive was
/// posted, in bursts, over several pairs of QPs (so that the daemon meets some receiver's
/// ring before its sender's): every message must find its receive, as a UD message
/// finding none is dropped. Returns how many arrived, and the receivers' counters.
fn ud_burst(h: &TwoHosts, loopback: bool, messages: u64) -> (u64, Vec<Vec<(String, u64)>>) {
    const PAIRS: usize = 6;
    let (s, r, av) = pair(h, loopback);
    let mut init = QpInit::new(QpType::Ud, &s.cq, &s.cq);
    init.caps.max_send_wr = 256;
    init.caps.max_recv_wr = 256;
    let senders: Vec<Qp> = (0..PAIRS).map(|_| s.pd.create_qp(&init).unwrap()).collect();
    let init = QpInit {
        send_cq: &r.cq,
        recv_cq: &r.cq,
        ..init
    };
    let receivers: Vec<Qp> = (0..PAIRS).map(|_| r.pd.create_qp(&init).unwrap()).collect();
    for q in senders.iter().chain(&receivers) {
        ud_ready(q, 0x2222, 1).unwrap();
    }
    let ah = s.pd.create_ah(&av).unwrap();
    let sge = [Sge {
        addr: s.mr.addr(),
        length: 64,
        lkey: s.mr.lkey(),
    }];
    let rsge = [Sge {
        addr: r.mr.addr(),
        length: 40 + 64,
        lkey: r.mr.lkey(),
    }];
    let mut buf = [WorkCompletion::default(); 64];
    let (mut sent, mut received, mut send_done) = (0u64, 0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut stuck = false;
    while sent < messages && !stuck {
        // At most 96 of each outstanding (receives per QP stay under 256).
        while sent < messages && sent - send_done < 96 && sent - received < 96 {
            let k = sent as usize % PAIRS;
            receivers[k]
                .post_recv(&[RecvWr {
                    wr_id: sent,
                    sges: &rsge,
                }])
                .unwrap();
            let mut wr = SendWr::new(sent, SendOp::Send, &sge);
            wr.ud = Some(UdTarget {
                ah: &ah,
                qpn: receivers[k].qpn(),
                qkey: 0x2222,
            });
            senders[k].post_send(&[wr]).unwrap();
            sent += 1;
        }
        let n = s.cq.poll(&mut buf).unwrap();
        send_done += n as u64;
        let n = r.cq.poll(&mut buf).unwrap();
        assert!(buf[..n].iter().all(|c| c.status == 0), "{:?}", &buf[..n]);
        received += n as u64;
        if n == 0 && sent - received >= 96 {
            // Dropped messages leave their receives posted: give the stragglers a moment,
            // then stop.
            let quiet = Instant::now() + Duration::from_millis(300);
            while Instant::now() < quiet {
                received += r.cq.poll(&mut buf).unwrap() as u64;
            }
            stuck = sent - received >= 96;
        }
        assert!(
            Instant::now() < deadline,
            "{sent} sent, {received} received"
        );
    }
    let quiet = Instant::now() + Duration::from_millis(300);
    while received < sent && Instant::now() < quiet {
        received += r.cq.poll(&mut buf).unwrap() as u64;
    }
    let counters = receivers
        .iter()
        .map(|q| {
            qp_counters(&r.ctx, q.qpn())
                .into_iter()
                .filter(|(_, v)| *v != 0)
                .collect()
        })
        .collect();
    (received, counters)
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_receive_posted_before_a_send_meets_it_in_loopback_as_on_the_wire() {
    let h = hosts();
    const MESSAGES: u64 = 6_000;
    let (wire, wire_counters) = ud_burst(&h, false, MESSAGES);
    let (loopback, loopback_counters) = ud_burst(&h, true, MESSAGES);
    assert_eq!(
        (wire, loopback),
        (MESSAGES, MESSAGES),
        "wire {wire_counters:?}\nloopback {loopback_counters:?}"
    );
}
