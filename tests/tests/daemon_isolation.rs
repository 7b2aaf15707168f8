//! The daemon against applications that crash, lie or scribble: each gets errors on its own
//! objects and nothing else; the peer of a crashed application sees its QP fail, not hang.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use verbs_shm::client::{Access, Context, QpInit, QpType, SendOp, SendWr, Sge};
use verbs_shm::contract::{SendWqe, wr_opcode};
use xroce_lab::{LabConfig, Side, require_root};
use xroce_tests::daemon::{DEVICE, TwoHosts, connect, counter, wait_completions};
use zerocopy::FromZeros;

const CHILD: &str = "XROCE_CRASH_CHILD";

/// Run as a child process inside host A's namespace by `a_crashed_application_fails_its_peer`:
/// sets up an RC QP connected to the parent's, prints `qpn addr rkey`, then waits to be
/// killed. As an ordinary test it does nothing.
#[test]
fn crash_child() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let v: Vec<u64> = spec.split(',').map(|x| x.parse().unwrap()).collect();
    let (peer_qpn, peer_ip) = (v[0] as u32, std::net::Ipv4Addr::from(v[1] as u32));
    let ctx = Context::open(DEVICE).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.alloc_mr(65536, Access::ALL).unwrap();
    let cq = ctx.create_cq(16, None).unwrap();
    let qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq, &cq)).unwrap();
    let av = verbs_shm::client::AhAttr {
        dgid: xroce_wire::Gid::from_ipv4(peer_ip).0,
        hop_limit: 64,
        is_global: true,
        port_num: 1,
        ..Default::default()
    };
    connect(&qp, av, peer_qpn, 7, 8).unwrap();
    println!("\nXROCE-CHILD {} {} {}", qp.qpn(), mr.addr(), mr.rkey());
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn a_crashed_application_fails_its_peer_and_frees_its_resources() {
    if !require_root("a_crashed_application_fails_its_peer_and_frees_its_resources") {
        return;
    }
    let h = TwoHosts::start(&LabConfig::default(), &[]).expect("lab");
    let cb = h.open(Side::B).unwrap();
    let pb = cb.alloc_pd().unwrap();
    let mb = pb.alloc_mr(65536, Access::ALL).unwrap();
    let cqb = cb.create_cq(16, None).unwrap();
    let qb = pb.create_qp(&QpInit::new(QpType::Rc, &cqb, &cqb)).unwrap();
    let spec = format!("{},{}", qb.qpn(), u32::from(h.lab.host(Side::B).ipv4));
    let exe = std::env::current_exe().unwrap();
    let exe = exe.to_string_lossy().into_owned();
    let mut child = h
        .lab
        .command(
            Side::A,
            &[
                &exe,
                "--exact",
                "crash_child",
                "--nocapture",
                "--test-threads",
                "1",
            ],
        )
        .env(CHILD, spec)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the child died before connecting"
        );
        if line.starts_with("XROCE-CHILD ") {
            break;
        }
    }
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|w| w.parse().unwrap())
        .collect();
    let (child_qpn, addr, rkey) = (v[0] as u32, v[1], v[2] as u32);
    connect(&qb, h.av(Side::B), child_qpn, 8, 7).unwrap();
    // While the child lives, B writes into its memory.
    let sge = [Sge {
        addr: mb.addr(),
        length: 64,
        lkey: mb.lkey(),
    }];
    let write = SendOp::Write {
        remote_addr: addr,
        rkey,
    };
    qb.post_send(&[SendWr::new(1, write, &sge)]).unwrap();
    assert_eq!(wait_completions(&cqb, 1)[0].status, 0);
    // The child crashes.
    child.kill().unwrap();
    child.wait().unwrap();
    // Its daemon notices the hang-up and destroys its QP: B's next write finds nobody and
    // fails once its retries run out (timeout 14 ≈ 67 ms, 7 retries), instead of hanging.
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    qb.post_send(&[SendWr::new(2, write, &sge)]).unwrap();
    let c = wait_completions(&cqb, 1)[0];
    assert_eq!((c.wr_id, c.status), (2, 12), "IBV_WC_RETRY_EXC_ERR: {c:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // And A's daemon still serves new applications.
    let ca = h.open(Side::A).unwrap();
    assert!(ca.alloc_pd().is_ok());
    let stats = ca.stats().unwrap();
    assert!(
        counter(&stats, "rcvd_unknown_qpn") >= 1,
        "the writes to the dead QP were dropped: {stats:?}"
    );
}

#[test]
fn garbage_and_foreign_keys_only_hurt_the_guilty_application() {
    if !require_root("garbage_and_foreign_keys_only_hurt_the_guilty_application") {
        return;
    }
    let h = TwoHosts::start(&LabConfig::default(), &[]).expect("lab");
    // An honest application on A with a QP to B, and a second, misbehaving one on A.
    let (honest, bad, cb) = (
        h.open(Side::A).unwrap(),
        h.open(Side::A).unwrap(),
        h.open(Side::B).unwrap(),
    );
    let (ph, px, pb) = (
        honest.alloc_pd().unwrap(),
        bad.alloc_pd().unwrap(),
        cb.alloc_pd().unwrap(),
    );
    let (mh, mx, mb) = (
        ph.alloc_mr(65536, Access::ALL).unwrap(),
        px.alloc_mr(65536, Access::ALL).unwrap(),
        pb.alloc_mr(65536, Access::ALL).unwrap(),
    );
    let (cqh, cqx, cqb) = (
        honest.create_cq(64, None).unwrap(),
        bad.create_cq(64, None).unwrap(),
        cb.create_cq(64, None).unwrap(),
    );
    let qh = ph.create_qp(&QpInit::new(QpType::Rc, &cqh, &cqh)).unwrap();
    let qx1 = px.create_qp(&QpInit::new(QpType::Rc, &cqx, &cqx)).unwrap();
    let qx2 = px.create_qp(&QpInit::new(QpType::Rc, &cqx, &cqx)).unwrap();
    let qx3 = px.create_qp(&QpInit::new(QpType::Rc, &cqx, &cqx)).unwrap();
    let qb: Vec<_> = (0..4)
        .map(|_| pb.create_qp(&QpInit::new(QpType::Rc, &cqb, &cqb)).unwrap())
        .collect();
    for (a, b) in [
        (&qh, &qb[0]),
        (&qx1, &qb[1]),
        (&qx2, &qb[2]),
        (&qx3, &qb[3]),
    ] {
        connect(a, h.av(Side::A), b.qpn(), 1, 2).unwrap();
        connect(b, h.av(Side::B), a.qpn(), 2, 1).unwrap();
    }
    let write = SendOp::Write {
        remote_addr: mb.addr(),
        rkey: mb.rkey(),
    };

    // 1. The bad application names the honest one's lkey: a local protection error on its
    //    own QP; nothing of the honest region is read.
    assert!(mh.write(0, b"secret"));
    let foreign = [Sge {
        addr: mh.addr(),
        length: 6,
        lkey: mh.lkey(),
    }];
    qx1.post_send(&[SendWr::new(10, write, &foreign)]).unwrap();
    let c = wait_completions(&cqx, 1)[0];
    assert_eq!((c.wr_id, c.status), (10, 4), "IBV_WC_LOC_PROT_ERR: {c:?}");
    let mut at_b = [0u8; 6];
    assert!(mb.read(0, &mut at_b));
    assert_ne!(&at_b, b"secret");

    // 2. A work request full of garbage: a local QP operation error, the QP goes to ERR.
    let mut junk = SendWqe::new_zeroed();
    junk.wr_id = 20;
    junk.opcode = 99;
    junk.num_sge = 1000;
    qx2.post_send_raw(&junk).unwrap();
    let c = wait_completions(&cqx, 1)[0];
    assert_eq!((c.wr_id, c.status), (20, 2), "IBV_WC_LOC_QP_OP_ERR: {c:?}");
    assert_eq!(qx2.query().unwrap().qp_state, 6, "ERR");
    let _ = wr_opcode::SEND;

    // 3. A scribbled ring counter: that QP breaks, with a fatal event for its owner.
    qx3.scribble_send_producer(0xdead_beef);
    let deadline = Instant::now() + Duration::from_secs(5);
    let ev = loop {
        if let Some(e) = bad.poll_async_event() {
            break e;
        }
        assert!(Instant::now() < deadline, "no QP_FATAL event");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(
        (ev.event_type, ev.element),
        (1, qx3.handle()),
        "IBV_EVENT_QP_FATAL"
    );

    // 4. A doorbell flood from the bad application.
    for _ in 0..20_000 {
        qx1.scribble_send_producer(0);
    }

    // The honest application never noticed.
    let sge = [Sge {
        addr: mh.addr(),
        length: 6,
        lkey: mh.lkey(),
    }];
    qh.post_send(&[SendWr::new(1, write, &sge)]).unwrap();
    assert_eq!(wait_completions(&cqh, 1)[0].status, 0);
    assert!(mb.read(0, &mut at_b));
    assert_eq!(&at_b, b"secret");
    assert_eq!(qh.query().unwrap().qp_state, 3, "RTS");
    assert!(honest.poll_async_event().is_none());
    let stats = honest.stats().unwrap();
    assert!(
        counter(&stats, "bad_work_requests") >= 1 && counter(&stats, "broken_rings") >= 1,
        "{stats:?}"
    );
    let _ = mx;
}

#[test]
fn per_application_limits_give_clear_errors() {
    if !require_root("per_application_limits_give_clear_errors") {
        return;
    }
    let h = TwoHosts::start(
        &LabConfig::default(),
        &["--max-qps", "2", "--max-mr-mib", "1"],
    )
    .expect("lab");
    let ca = h.open(Side::A).unwrap();
    let pd = ca.alloc_pd().unwrap();
    let cq = ca.create_cq(16, None).unwrap();
    let _q1 = pd.create_qp(&QpInit::new(QpType::Rc, &cq, &cq)).unwrap();
    let _q2 = pd.create_qp(&QpInit::new(QpType::Rc, &cq, &cq)).unwrap();
    let e = pd
        .create_qp(&QpInit::new(QpType::Rc, &cq, &cq))
        .unwrap_err();
    assert_eq!(e.errno(), libc::ENOMEM);
    assert!(e.to_string().contains("2 queue pairs"), "{e}");
    let _m = pd.alloc_mr(512 << 10, Access::ALL).unwrap();
    let e = pd.alloc_mr(768 << 10, Access::ALL).unwrap_err();
    assert_eq!(e.errno(), libc::ENOMEM);
    assert!(e.to_string().contains("limit"), "{e}");
    // Another application has its own budget.
    let other = h.open(Side::A).unwrap();
    let pd2 = other.alloc_pd().unwrap();
    let cq2 = other.create_cq(16, None).unwrap();
    assert!(pd2.create_qp(&QpInit::new(QpType::Rc, &cq2, &cq2)).is_ok());
    let _ = Command::new("true").status();
}
