//! Two namespaces, two daemons, RDMA between them through the Rust API: every RC operation
//! with its data checked byte for byte.

use std::time::{Duration, Instant};

use verbs_shm::client::{
    Access, Context, Cq, Mr, Qp, QpInit, QpType, RecvWr, SendOp, SendWr, Sge, WorkCompletion,
};
use verbs_shm::contract::RecvWqe;
use xroce_lab::daemons::{TwoHosts, connect, counter};
use xroce_lab::{LabConfig, Side, require_root};

use crate::Network;
use zerocopy::FromZeros;

/// `ibv_wc_status` values.
const LOC_QP_OP_ERR: u32 = 2;
const WR_FLUSH_ERR: u32 = 5;

fn wait(cq: &Cq, n: usize) -> Vec<WorkCompletion> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = [WorkCompletion::default(); 16];
    while got.len() < n {
        let k = cq.poll(&mut buf).expect("poll");
        got.extend_from_slice(&buf[..k]);
        assert!(
            Instant::now() < deadline,
            "only {} of {n} completions after 10 s: {got:?}",
            got.len()
        );
        if k == 0 {
            std::thread::yield_now();
        }
    }
    got
}

over_networks!(rc_write_read_send_atomics:
    rc_write_read_send_atomics_between_two_daemons => IPV4,
    rc_write_read_send_atomics_over_ipv6 => IPV6,
    rc_write_read_send_atomics_over_ipv6_link_local => IPV6_LINK_LOCAL,
    rc_write_read_send_atomics_over_routed_ipv6 => ROUTED_IPV6,
);

fn rc_write_read_send_atomics(network: Network) {
    require_root();
    let hosts = TwoHosts::start(&network.lab(), &[]).expect("lab with two daemons");
    let (ca, cb) = (hosts.open(Side::A).unwrap(), hosts.open(Side::B).unwrap());
    let (pa, pb) = (ca.alloc_pd().unwrap(), cb.alloc_pd().unwrap());
    let all = Access::ALL;
    let (ma, mb) = (
        pa.alloc_mr(1 << 20, all).unwrap(),
        pb.alloc_mr(1 << 20, all).unwrap(),
    );
    let (qa_cq, qb_cq) = (
        ca.create_cq(256, None).unwrap(),
        cb.create_cq(256, None).unwrap(),
    );
    let qa = pa
        .create_qp(&QpInit::new(QpType::Rc, &qa_cq, &qa_cq))
        .unwrap();
    let qb = pb
        .create_qp(&QpInit::new(QpType::Rc, &qb_cq, &qb_cq))
        .unwrap();
    let family = network.family;
    connect(
        &qa,
        hosts.av_over(Side::A, family),
        qb.qpn(),
        0x1000,
        0x2000,
    )
    .unwrap();
    connect(
        &qb,
        hosts.av_over(Side::B, family),
        qa.qpn(),
        0x2000,
        0x1000,
    )
    .unwrap();

    // WRITE 100 000 bytes A -> B.
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 31 % 251) as u8).collect();
    assert!(ma.write(0, &data));
    let sge = [Sge {
        addr: ma.addr(),
        length: data.len() as u32,
        lkey: ma.lkey(),
    }];
    let write = SendOp::Write {
        remote_addr: mb.addr() + 4096,
        rkey: mb.rkey(),
    };
    qa.post_send(&[SendWr::new(1, write, &sge)]).unwrap();
    let c = wait(&qa_cq, 1);
    assert_eq!((c[0].wr_id, c[0].status), (1, 0), "{c:?}");
    let mut got = vec![0u8; data.len()];
    assert!(mb.read(4096, &mut got));
    assert!(got == data, "WRITE data differs");

    // READ it back from B into A at another offset.
    let sge = [Sge {
        addr: ma.addr() + 200_000,
        length: data.len() as u32,
        lkey: ma.lkey(),
    }];
    let read = SendOp::Read {
        remote_addr: mb.addr() + 4096,
        rkey: mb.rkey(),
    };
    qa.post_send(&[SendWr::new(2, read, &sge)]).unwrap();
    let c = wait(&qa_cq, 1);
    assert_eq!(
        (c[0].wr_id, c[0].status, c[0].byte_len),
        (2, 0, 100_000),
        "{c:?}"
    );
    let mut back = vec![0u8; data.len()];
    assert!(ma.read(200_000, &mut back));
    assert!(back == data, "READ data differs");

    // SEND with immediate B -> A into a posted receive.
    let rsge = [Sge {
        addr: ma.addr() + 400_000,
        length: 8192,
        lkey: ma.lkey(),
    }];
    qa.post_recv(&[RecvWr {
        wr_id: 77,
        sges: &rsge,
    }])
    .unwrap();
    assert!(mb.write(500_000, b"hello from b"));
    let ssge = [Sge {
        addr: mb.addr() + 500_000,
        length: 12,
        lkey: mb.lkey(),
    }];
    qb.post_send(&[SendWr::new(3, SendOp::SendWithImm { imm: 0xabcd }, &ssge)])
        .unwrap();
    let c = wait(&qa_cq, 1);
    assert_eq!(
        (
            c[0].wr_id,
            c[0].status,
            c[0].byte_len,
            u32::from_be(c[0].imm_data)
        ),
        (77, 0, 12, 0xabcd)
    );
    let mut msg = [0u8; 12];
    assert!(ma.read(400_000, &mut msg));
    assert_eq!(&msg, b"hello from b");
    assert_eq!(wait(&qb_cq, 1)[0].wr_id, 3);

    // Atomics A -> B: fetch-and-add then compare-and-swap on one word.
    assert!(mb.write(600_000, &40u64.to_le_bytes()));
    let r1 = [Sge {
        addr: ma.addr() + 700_000,
        length: 8,
        lkey: ma.lkey(),
    }];
    let r2 = [Sge {
        addr: ma.addr() + 700_008,
        length: 8,
        lkey: ma.lkey(),
    }];
    let fa = SendOp::FetchAdd {
        remote_addr: mb.addr() + 600_000,
        rkey: mb.rkey(),
        add: 2,
    };
    let cs = SendOp::CompareSwap {
        remote_addr: mb.addr() + 600_000,
        rkey: mb.rkey(),
        compare: 42,
        swap: 7,
    };
    qa.post_send(&[SendWr::new(4, fa, &r1), SendWr::new(5, cs, &r2)])
        .unwrap();
    let c = wait(&qa_cq, 2);
    assert_eq!(
        c.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
        vec![(4, 0), (5, 0)]
    );
    assert_eq!(ma.load_u64(700_000), Some(40));
    assert_eq!(ma.load_u64(700_008), Some(42));
    assert_eq!(mb.load_u64(600_000), Some(7));

    let stats = ca.stats().unwrap();
    let value = |n: &str| {
        stats
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| *v)
            .unwrap_or(0)
    };
    assert!(value("sent_pkts") > 100, "{stats:?}");
    assert_eq!(value("rcvd_icrc_err"), 0);
    // Every packet came from the path's peer to the path's source GID.
    assert_eq!(value("rcvd_wrong_addr"), 0, "{stats:?}");
    assert_eq!(value("rcvd_wrong_dgid"), 0, "{stats:?}");
}

/// `post_send` and `post_recv` with a refused work request in the middle of a list: the
/// ones before it are posted (verbs' `bad_wr`: everything before it went), so they must
/// reach the daemon and complete, not wait in the ring unpublished.
/// Two daemons, a context, PD, 64 KiB region, CQ and RC QP on each side; the QPs are
/// connected (PSNs 0x100 and 0x200) unless `connected` is false.
struct Pair {
    hosts: TwoHosts,
    cb: Context,
    ma: Mr,
    mb: Mr,
    cqa: Cq,
    cqb: Cq,
    qa: Qp,
    qb: Qp,
}

impl Pair {
    fn new(connected: bool) -> Pair {
        let hosts = TwoHosts::start(&LabConfig::default(), &[]).expect("lab with two daemons");
        let (ca, cb) = (hosts.open(Side::A).unwrap(), hosts.open(Side::B).unwrap());
        let (pa, pb) = (ca.alloc_pd().unwrap(), cb.alloc_pd().unwrap());
        let (ma, mb) = (
            pa.alloc_mr(1 << 16, Access::ALL).unwrap(),
            pb.alloc_mr(1 << 16, Access::ALL).unwrap(),
        );
        let (cqa, cqb) = (
            ca.create_cq(64, None).unwrap(),
            cb.create_cq(64, None).unwrap(),
        );
        let qa = pa.create_qp(&QpInit::new(QpType::Rc, &cqa, &cqa)).unwrap();
        let qb = pb.create_qp(&QpInit::new(QpType::Rc, &cqb, &cqb)).unwrap();
        let pair = Pair {
            hosts,
            cb,
            ma,
            mb,
            cqa,
            cqb,
            qa,
            qb,
        };
        if connected {
            pair.connect();
        }
        pair
    }

    /// Waits for the SEND `send_id` to complete on A and the receive `recv_id` on B with
    /// `data` at the start of B's region.
    fn expect_send(&self, send_id: u64, recv_id: u64, data: &[u8]) {
        let c = wait(&self.cqa, 1);
        assert_eq!((c[0].wr_id, c[0].status), (send_id, 0), "{c:?}");
        let c = wait(&self.cqb, 1);
        assert_eq!(
            (c[0].wr_id, c[0].status, c[0].byte_len as usize),
            (recv_id, 0, data.len()),
            "{c:?}"
        );
        let mut got = vec![0u8; data.len()];
        assert!(self.mb.read(0, &mut got));
        assert_eq!(got, data);
    }

    fn connect(&self) {
        let (qa, qb) = (&self.qa, &self.qb);
        connect(qa, self.hosts.av(Side::A), qb.qpn(), 0x100, 0x200).unwrap();
        connect(qb, self.hosts.av(Side::B), qa.qpn(), 0x200, 0x100).unwrap();
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn work_requests_before_a_refused_one_are_posted() {
    require_root();
    let p = Pair::new(true);
    let Pair { ma, mb, qa, qb, .. } = &p;

    // More scatter/gather elements than any QP takes.
    let too_many = [Sge {
        addr: mb.addr(),
        length: 1,
        lkey: mb.lkey(),
    }; 64];
    let rsge = [Sge {
        addr: mb.addr(),
        length: 1024,
        lkey: mb.lkey(),
    }];
    let refused = qb.post_recv(&[
        RecvWr {
            wr_id: 10,
            sges: &rsge,
        },
        RecvWr {
            wr_id: 11,
            sges: &too_many,
        },
    ]);
    assert!(matches!(refused, Err((1, _))), "{refused:?}");

    assert!(ma.write(0, b"first"));
    let ssge = [Sge {
        addr: ma.addr(),
        length: 5,
        lkey: ma.lkey(),
    }];
    let bad = [Sge {
        addr: ma.addr(),
        length: 1,
        lkey: ma.lkey(),
    }; 64];
    let refused = qa.post_send(&[
        SendWr::new(20, SendOp::Send, &ssge),
        SendWr::new(21, SendOp::Send, &bad),
    ]);
    assert!(matches!(refused, Err((1, _))), "{refused:?}");

    p.expect_send(20, 10, b"first");
}

/// Work requests posted while the QPs are still in RESET wait in the ring (receives until
/// the QP leaves RESET, sends until it reaches RTS, as an RDMA NIC holds them), then run:
/// nothing is lost, nothing fails.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn work_requests_posted_in_reset_wait_for_the_qp() {
    require_root();
    let p = Pair::new(false);
    let Pair { ma, mb, qa, qb, .. } = &p;
    let rsge = [Sge {
        addr: mb.addr(),
        length: 1024,
        lkey: mb.lkey(),
    }];
    qb.post_recv(&[RecvWr {
        wr_id: 30,
        sges: &rsge,
    }])
    .expect("post a receive in RESET");
    assert!(ma.write(0, b"early"));
    let ssge = [Sge {
        addr: ma.addr(),
        length: 5,
        lkey: ma.lkey(),
    }];
    qa.post_send(&[SendWr::new(31, SendOp::Send, &ssge)])
        .expect("post a send in RESET");
    // Give the daemons passes over the rings while the QPs are in RESET.
    std::thread::sleep(Duration::from_millis(50));
    p.connect();
    p.expect_send(31, 30, b"early");
}

/// A receive work request the daemon refuses (written into the ring by hand, with more
/// scatter/gather elements than any QP takes) completes with a local QP operation error,
/// the QP enters the error state, the receive posted after it is flushed, and the daemon
/// counts it.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_malformed_receive_completes_with_an_error() {
    require_root();
    let p = Pair::new(true);
    let Pair {
        mb, cqb, qb, cb, ..
    } = &p;
    let before = counter(&cb.stats().unwrap(), "bad_work_requests");

    let mut bad = RecvWqe::new_zeroed();
    bad.wr_id = 40;
    bad.num_sge = 200;
    qb.post_recv_unchecked(&bad).unwrap();
    let rsge = [Sge {
        addr: mb.addr(),
        length: 64,
        lkey: mb.lkey(),
    }];
    qb.post_recv(&[RecvWr {
        wr_id: 41,
        sges: &rsge,
    }])
    .unwrap();
    let c = wait(cqb, 2);
    assert_eq!((c[0].wr_id, c[0].status), (40, LOC_QP_OP_ERR), "{c:?}");
    assert_eq!((c[1].wr_id, c[1].status), (41, WR_FLUSH_ERR), "{c:?}");
    assert_eq!(qb.query().unwrap().qp_state, 6, "the QP is in ERR");
    assert_eq!(
        counter(&cb.stats().unwrap(), "bad_work_requests"),
        before + 1
    );
}

/// A refused modify carries its reason to the Rust API's error, and the daemon logs it
/// with the application and the queue pair: here a path from the IPv6 GID to the peer's
/// IPv4 address, which no RoCE device can take. The queue pair stays in INIT.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_path_across_address_families_is_refused_with_its_reason() {
    require_root();
    let p = Pair::new(false);
    let mut av = p.hosts.av(Side::A);
    av.sgid_index = xroce_lab::Family::Ipv6.gid_index();
    let refused = connect(&p.qa, av, p.qb.qpn(), 0x100, 0x200).expect_err("refused");
    let (a, b) = (p.hosts.lab.host(Side::A), p.hosts.lab.host(Side::B));
    let reason = format!(
        "GID 1 ({}) is IPv6 and the destination {} is IPv4",
        a.ipv6, b.ipv4
    );
    let text = refused.to_string();
    assert!(text.contains(&reason), "{text}");
    assert_eq!(refused.errno(), libc::EINVAL);
    assert_eq!(p.qa.query().unwrap().qp_state, 1, "still in INIT");
    let log = std::fs::read_to_string(p.hosts.log(Side::A)).unwrap();
    let expected = format!(
        "ibv_modify_qp of QP {:#x} to RTR refused: {reason}",
        p.qa.qpn()
    );
    assert!(log.contains(&expected), "{expected:?} not in:\n{log}");
}

/// `xroced stat --qp` shows a connected QP's sequence numbers; a QP the application
/// destroys after it received a WRITE lingers in its daemon to answer
/// its peer's retries (the acknowledgement of the last message may be lost), and is gone
/// for the application; it goes when its time is over (timeout code 14 and 7 retries:
/// 537 ms, the least being 500 ms).
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_qps_sequence_numbers_are_shown_and_once_destroyed_it_lingers_for_its_peer() {
    require_root();
    let Pair {
        hosts,
        cb,
        ma,
        mb,
        cqa,
        cqb: _cqb,
        qa,
        qb,
    } = Pair::new(true);
    let sge = [Sge {
        addr: ma.addr(),
        length: 64,
        lkey: ma.lkey(),
    }];
    let write = SendOp::Write {
        remote_addr: mb.addr(),
        rkey: mb.rkey(),
    };
    qa.post_send(&[SendWr::new(1, write, &sge)]).unwrap();
    let c = wait(&cqa, 1);
    assert_eq!((c[0].wr_id, c[0].status), (1, 0), "{c:?}");
    let qpn = qb.qpn();
    // `xroced stat --qp` shows where B's sequence numbers stand: it sent nothing from
    // 0x200, and expects the PSN after the WRITE's one packet (PSN 0x100), 0x101.
    let listed = cb.qp_stats().unwrap();
    let b = listed.iter().find(|q| q.qpn == qpn).expect("B's QP listed");
    let path = |name: &str| b.path.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
    assert_eq!(path("sq_psn"), Some(0x200), "{b:?}");
    assert_eq!(path("unacked_psn"), Some(0x200), "{b:?}");
    assert_eq!(path("rq_psn"), Some(0x101), "{b:?}");
    assert_eq!(path("held"), Some(0), "{b:?}");
    let lingering = || counter(&cb.stats().unwrap(), "lingering_qps");
    assert_eq!(lingering(), 0);
    drop(qb);
    let destroyed = Instant::now();
    assert_eq!(lingering(), 1, "the QP B destroyed lingers");
    let listed = cb.qp_stats().unwrap();
    assert!(
        listed.iter().all(|q| q.qpn != qpn),
        "a lingering QP is not listed: {listed:?}"
    );
    // A new WRITE (not a duplicate) finds no QP, as before the lingering.
    qa.post_send(&[SendWr::new(2, write, &sge)]).unwrap();
    let c = wait(&cqa, 1);
    assert_eq!(
        (c[0].wr_id, c[0].status),
        (2, 12),
        "IBV_WC_RETRY_EXC_ERR: {c:?}"
    );
    while lingering() == 1 {
        assert!(destroyed.elapsed() < Duration::from_secs(5), "never went");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(destroyed.elapsed() >= Duration::from_millis(450));
    let stats = cb.stats().unwrap();
    assert_eq!(counter(&stats, "closed_qp_answers"), 0, "{stats:?}");
    assert!(counter(&stats, "rcvd_unknown_qpn") >= 8, "{stats:?}");
    drop(hosts);
}
