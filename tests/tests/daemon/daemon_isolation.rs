//! The daemon against applications that crash, lie or scribble: each gets errors on its own
//! objects and nothing else; the peer of a crashed application sees its QP fail, not hang,
//! even when the crash comes in the middle of a transfer, while another application on the
//! same daemons carries on undisturbed.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use verbs_shm::client::{Access, Context, QpInit, QpType, SendOp, SendWr, Sge};
use verbs_shm::contract::{SendWqe, wr_opcode};
use xroce_lab::daemons::{DEVICE, TwoHosts, connect, counter, wait_completions};
use xroce_lab::{LabConfig, Side, require_root};
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
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_crashed_application_fails_its_peer_and_frees_its_resources() {
    require_root();
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
                "daemon_isolation::crash_child",
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
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn garbage_and_foreign_keys_only_hurt_the_guilty_application() {
    require_root();
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
    assert!(counter(&stats, "bad_work_requests") >= 1, "{stats:?}");
    // The flood's producer counter of 0 broke qx1's ring too. Each broken ring is counted
    // and announced once, however often its owner scribbles on it afterwards.
    for _ in 0..100 {
        qx3.scribble_send_producer(0xdead_0000);
        qx1.scribble_send_producer(0xbeef_0000);
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut fatal = Vec::new();
    while let Some(e) = bad.poll_async_event() {
        if e.event_type == 1 {
            fatal.push(e.element);
        }
    }
    assert_eq!(
        fatal,
        [qx1.handle()],
        "one IBV_EVENT_QP_FATAL for qx1, none more for qx3"
    );
    assert_eq!(
        counter(&bad.stats().unwrap(), "broken_rings"),
        2,
        "qx3's and qx1's rings, once each"
    );
    let _ = mx;
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn per_application_limits_give_clear_errors() {
    require_root();
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

const STREAM_CHILD: &str = "XROCE_STREAM_CHILD";

/// Run as a child process inside host A's namespace by
/// `an_application_killed_mid_transfer_fails_its_peer_while_another_keeps_working`: connects
/// an RC QP to the parent's, prints `qpn addr rkey`, waits for `go` on standard input, then
/// WRITEs its region into the parent's over and over, 16 requests in flight, until it is
/// killed. As an ordinary test it does nothing.
#[test]
fn streaming_child() {
    let Ok(spec) = std::env::var(STREAM_CHILD) else {
        return;
    };
    let v: Vec<u64> = spec.split(',').map(|x| x.parse().unwrap()).collect();
    let (peer_qpn, peer_ip, remote, rkey) = (
        v[0] as u32,
        std::net::Ipv4Addr::from(v[1] as u32),
        v[2],
        v[3] as u32,
    );
    const CHUNK: usize = 65536;
    const REGION: usize = 1 << 20;
    let ctx = Context::open(DEVICE).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.alloc_mr(REGION, Access::ALL).unwrap();
    assert!(mr.write(0, &vec![0xc5; REGION]));
    let cq = ctx.create_cq(64, None).unwrap();
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
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    let (mut posted, mut done) = (0u64, 0u64);
    let mut wc = [verbs_shm::client::WorkCompletion::default(); 16];
    loop {
        while posted - done < 16 {
            let off = (posted as usize * CHUNK) % REGION;
            let sge = [Sge {
                addr: mr.addr() + off as u64,
                length: CHUNK as u32,
                lkey: mr.lkey(),
            }];
            let mut wr = SendWr::new(
                posted,
                SendOp::Write {
                    remote_addr: remote + off as u64,
                    rkey,
                },
                &sge,
            );
            wr.signaled = true;
            qp.post_send(&[wr]).unwrap();
            posted += 1;
        }
        let n = cq.poll(&mut wc).unwrap();
        for c in &wc[..n] {
            assert_eq!(c.status, 0, "{c:?}");
            done += 1;
            if done == 8 {
                println!("XROCE-STREAMING");
            }
        }
        if n == 0 {
            std::thread::yield_now();
        }
    }
}

/// Kills and reaps the child when the test ends, however it ends.
struct ChildGuard(std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A WRITE stream of `total` bytes from `src` to `dst` in 64 KiB requests, 16 in flight,
/// driven one step at a time so that other things can happen between steps.
struct Stream<'a> {
    qp: &'a verbs_shm::client::Qp,
    cq: &'a verbs_shm::client::Cq,
    src: &'a verbs_shm::client::Mr,
    dst: (u64, u32),
    total: u64,
    posted: u64,
    done: u64,
}

impl Stream<'_> {
    const CHUNK: u64 = 65536;

    fn chunks(&self) -> u64 {
        self.total.div_ceil(Self::CHUNK)
    }

    fn finished(&self) -> bool {
        self.done == self.chunks()
    }

    /// Tops the queue up and takes completions (each must succeed); returns how many came.
    fn step(&mut self) -> usize {
        while self.posted < self.chunks() && self.posted - self.done < 16 {
            let off = self.posted * Self::CHUNK;
            let sge = [Sge {
                addr: self.src.addr() + off,
                length: (self.total - off).min(Self::CHUNK) as u32,
                lkey: self.src.lkey(),
            }];
            let mut wr = SendWr::new(
                self.posted,
                SendOp::Write {
                    remote_addr: self.dst.0 + off,
                    rkey: self.dst.1,
                },
                &sge,
            );
            wr.signaled = true;
            self.qp.post_send(&[wr]).unwrap();
            self.posted += 1;
        }
        let mut wc = [verbs_shm::client::WorkCompletion::default(); 16];
        let n = self.cq.poll(&mut wc).unwrap();
        for c in &wc[..n] {
            assert_eq!((c.wr_id, c.status), (self.done, 0), "honest WRITE: {c:?}");
            self.done += 1;
        }
        n
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn an_application_killed_mid_transfer_fails_its_peer_while_another_keeps_working() {
    require_root();
    let h = TwoHosts::start(&LabConfig::default(), &[]).expect("lab");
    // On B: one application serving both the doomed child (on A) and an honest application
    // (on A, this process).
    let cb = h.open(Side::B).unwrap();
    let pb = cb.alloc_pd().unwrap();
    let (mb_child, mb_honest) = (
        pb.alloc_mr(1 << 20, Access::ALL).unwrap(),
        pb.alloc_mr(16 << 20, Access::ALL).unwrap(),
    );
    let mb_read = pb.alloc_mr(1 << 20, Access::ALL).unwrap();
    let (cqb_child, cqb_honest) = (
        cb.create_cq(64, None).unwrap(),
        cb.create_cq(64, None).unwrap(),
    );
    let qb_child = pb
        .create_qp(&QpInit::new(QpType::Rc, &cqb_child, &cqb_child))
        .unwrap();
    let qb_honest = pb
        .create_qp(&QpInit::new(QpType::Rc, &cqb_honest, &cqb_honest))
        .unwrap();
    let ca = h.open(Side::A).unwrap();
    let pa = ca.alloc_pd().unwrap();
    let ma = pa.alloc_mr(16 << 20, Access::ALL).unwrap();
    let honest_data: Vec<u8> = (0..16u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    assert!(ma.write(0, &honest_data));
    let cqa = ca.create_cq(64, None).unwrap();
    let qa = pa.create_qp(&QpInit::new(QpType::Rc, &cqa, &cqa)).unwrap();
    connect(&qa, h.av(Side::A), qb_honest.qpn(), 0x100, 0x200).unwrap();
    connect(&qb_honest, h.av(Side::B), qa.qpn(), 0x200, 0x100).unwrap();

    // The child: a separate application on A, streaming WRITEs into B.
    let spec = format!(
        "{},{},{},{}",
        qb_child.qpn(),
        u32::from(h.lab.host(Side::B).ipv4),
        mb_child.addr(),
        mb_child.rkey()
    );
    let exe = std::env::current_exe().unwrap();
    let exe = exe.to_string_lossy().into_owned();
    let mut child = ChildGuard(
        h.lab
            .command(
                Side::A,
                &[
                    &exe,
                    "--exact",
                    "daemon_isolation::streaming_child",
                    "--nocapture",
                    "--test-threads",
                    "1",
                ],
            )
            .env(STREAM_CHILD, spec)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let child = &mut child.0;
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
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
    let (child_qpn, child_addr, child_rkey) = (v[0] as u32, v[1], v[2] as u32);
    connect(&qb_child, h.av(Side::B), child_qpn, 8, 7).unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"go\n").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "XROCE-STREAMING", "the child is streaming");

    // B READs from the child too, so that it has requests outstanding when the child dies.
    let post_read = |k: u64| {
        let sge = [Sge {
            addr: mb_read.addr() + (k % 16) * 65536,
            length: 65536,
            lkey: mb_read.lkey(),
        }];
        let mut wr = SendWr::new(
            k,
            SendOp::Read {
                remote_addr: child_addr + (k % 16) * 65536,
                rkey: child_rkey,
            },
            &sge,
        );
        wr.signaled = true;
        qb_child.post_send(&[wr]).unwrap();
    };
    let (mut reads_posted, mut reads_done) = (0u64, 0u64);
    let mut read_errors = Vec::new();

    // The honest application streams 16 MiB from A into B; a quarter of the way through,
    // the child is killed.
    let mut honest = Stream {
        qp: &qa,
        cq: &cqa,
        src: &ma,
        dst: (mb_honest.addr(), mb_honest.rkey()),
        total: 16 << 20,
        posted: 0,
        done: 0,
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut killed: Option<Instant> = None;
    let mut peer_failed_after = None;
    let mut wc = [verbs_shm::client::WorkCompletion::default(); 16];
    while !honest.finished() || peer_failed_after.is_none() {
        assert!(
            Instant::now() < deadline,
            "stuck: honest {}/{} chunks, reads {reads_done}/{reads_posted}, errors {read_errors:?}",
            honest.done,
            honest.chunks()
        );
        let mut busy = honest.step();
        // Until B's QP fails: the dead application's daemon serves READs from its region
        // until it has noticed the hang-up and destroyed its QP.
        if read_errors.is_empty() {
            while reads_posted - reads_done < 8 {
                post_read(reads_posted);
                reads_posted += 1;
            }
        }
        let n = cqb_child.poll(&mut wc).unwrap();
        for c in &wc[..n] {
            reads_done += 1;
            if c.status != 0 {
                assert!(killed.is_some(), "B's READ failed before the kill: {c:?}");
                read_errors.push(c.status);
            }
        }
        busy += n;
        if killed.is_none() && honest.done >= honest.chunks() / 4 {
            child.kill().unwrap();
            child.wait().unwrap();
            killed = Some(Instant::now());
        }
        if let Some(at) = killed
            && peer_failed_after.is_none()
            && !read_errors.is_empty()
            && reads_done == reads_posted
        {
            peer_failed_after = Some(at.elapsed());
        }
        if busy == 0 {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    // The dead application's peer: every outstanding READ came back, the first failure
    // being the retry counter running out, the rest flushed; its QP is in ERR.
    assert_eq!(
        read_errors.first(),
        Some(&12),
        "IBV_WC_RETRY_EXC_ERR first: {read_errors:?}"
    );
    assert!(
        read_errors[1..].iter().all(|&s| s == 5),
        "then IBV_WC_WR_FLUSH_ERR: {read_errors:?}"
    );
    assert_eq!(
        qb_child.query().unwrap().qp_state,
        6,
        "the peer QP is in ERR"
    );
    println!(
        "the peer of the killed application failed {:?} after the kill ({} READs failed)",
        peer_failed_after.unwrap(),
        read_errors.len()
    );
    // The child's QP is gone from A's daemon.
    assert!(
        ca.qp_stats().unwrap().iter().all(|q| q.qpn != child_qpn),
        "the killed application's QP was destroyed"
    );
    // The child had been writing; the honest application never noticed any of it.
    let mut got = vec![0u8; 1 << 20];
    assert!(mb_child.read(0, &mut got));
    assert!(got.contains(&0xc5), "the child's WRITEs had arrived");
    let mut got = vec![0u8; honest_data.len()];
    assert!(mb_honest.read(0, &mut got));
    assert!(got == honest_data, "the honest WRITE stream's data differs");
    assert_eq!(qa.query().unwrap().qp_state, 3, "RTS");
    assert_eq!(qb_honest.query().unwrap().qp_state, 3, "RTS");
    assert!(ca.poll_async_event().is_none());
}
