//! Two pollers per daemon on two-queue interfaces: frames that arrive on one poller's queue
//! for a QP of the other poller are handed over, on the wire path and in loopback, and
//! every byte still arrives.

use verbs_shm::client::{
    Access, Context, Cq, Mr, Pd, Qp, QpInit, QpType, RecvWr, SendOp, SendWr, Sge,
};
use xroce_lab::daemons::{TwoHosts, connect, counter, wait_completions};
use xroce_lab::{LabConfig, Side, require_root};

/// One application's objects on one daemon.
struct App {
    _ctx: Context,
    pd: Pd,
    mr: Mr,
    cq: Cq,
}

fn app(hosts: &TwoHosts, side: Side) -> App {
    let ctx = hosts.open(side).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.alloc_mr(1 << 20, Access::ALL).unwrap();
    let cq = ctx.create_cq(256, None).unwrap();
    App {
        _ctx: ctx,
        pd,
        mr,
        cq,
    }
}

fn qp(a: &App) -> Qp {
    a.pd.create_qp(&QpInit::new(QpType::Rc, &a.cq, &a.cq))
        .unwrap()
}

/// WRITE, SEND and READ from `x` to `y` over connected QPs, each checked. `tag` makes the
/// data of every pair different; `at` is the offset both use in their regions.
fn exchange(x: &App, qx: &Qp, y: &App, qy: &Qp, tag: u32, at: usize) {
    let len = 40_000usize;
    let data: Vec<u8> = (0..len as u32).map(|i| (i * 7 + tag * 31) as u8).collect();
    assert!(x.mr.write(at, &data));
    let sge = |mr: &Mr, off: usize| {
        [Sge {
            addr: mr.addr() + off as u64,
            length: len as u32,
            lkey: mr.lkey(),
        }]
    };
    // WRITE into y at `at`.
    let w = SendOp::Write {
        remote_addr: y.mr.addr() + at as u64,
        rkey: y.mr.rkey(),
    };
    qx.post_send(&[SendWr::new(1, w, &sge(&x.mr, at))]).unwrap();
    let c = wait_completions(&x.cq, 1);
    assert_eq!(c[0].status, 0, "WRITE {tag}: {c:?}");
    let mut got = vec![0u8; len];
    assert!(y.mr.read(at, &mut got));
    assert!(got == data, "WRITE {tag}: data differs");
    // SEND into y at `at + 100_000`.
    qy.post_recv(&[RecvWr {
        wr_id: 2,
        sges: &sge(&y.mr, at + 100_000),
    }])
    .unwrap();
    qx.post_send(&[SendWr::new(3, SendOp::Send, &sge(&x.mr, at))])
        .unwrap();
    let c = wait_completions(&x.cq, 1);
    assert_eq!(c[0].status, 0, "SEND {tag}: {c:?}");
    let c = wait_completions(&y.cq, 1);
    assert_eq!((c[0].wr_id, c[0].status), (2, 0), "RECV {tag}: {c:?}");
    assert!(y.mr.read(at + 100_000, &mut got));
    assert!(got == data, "SEND {tag}: data differs");
    // READ it back from y into x at `at + 200_000`.
    let r = SendOp::Read {
        remote_addr: y.mr.addr() + at as u64,
        rkey: y.mr.rkey(),
    };
    qx.post_send(&[SendWr::new(4, r, &sge(&x.mr, at + 200_000))])
        .unwrap();
    let c = wait_completions(&x.cq, 1);
    assert_eq!(c[0].status, 0, "READ {tag}: {c:?}");
    assert!(x.mr.read(at + 200_000, &mut got));
    assert!(got == data, "READ {tag}: data differs");
}

/// Two daemons with two queues (two pollers) each, and two applications on each host.
/// Applications are spread over the pollers by connection: two on each side land on both
/// pollers.
fn two_queue_hosts() -> (TwoHosts, Vec<App>, Vec<App>) {
    let config = LabConfig {
        queues: 2,
        ..LabConfig::default()
    };
    let hosts = TwoHosts::start(&config, &["--queues", "2"]).expect("two daemons, two queues");
    let a: Vec<App> = (0..2).map(|_| app(&hosts, Side::A)).collect();
    let b: Vec<App> = (0..2).map(|_| app(&hosts, Side::B)).collect();
    (hosts, a, b)
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn two_pollers_hand_frames_to_the_owner_of_the_qp() {
    require_root();
    let (hosts, a, b) = two_queue_hosts();
    let mut tag = 0;
    for (i, x) in a.iter().enumerate() {
        for (j, y) in b.iter().enumerate() {
            let (qx, qy) = (qp(x), qp(y));
            connect(&qx, hosts.av(Side::A), qy.qpn(), 100, 200).unwrap();
            connect(&qy, hosts.av(Side::B), qx.qpn(), 200, 100).unwrap();
            exchange(x, &qx, y, &qy, tag, (i * 2 + j) * 4096);
            tag += 1;
        }
    }
    // Loopback between the two pollers of A: the frame never reaches the wire and still
    // goes to the poller that owns the destination QP.
    let (q0, q1) = (qp(&a[0]), qp(&a[1]));
    assert_ne!(
        q0.qpn() % 2,
        q1.qpn() % 2,
        "the two applications share a poller"
    );
    let own = hosts.av(Side::B);
    connect(&q0, own, q1.qpn(), 1, 2).unwrap();
    connect(&q1, own, q0.qpn(), 2, 1).unwrap();
    exchange(&a[0], &q0, &a[1], &q1, 99, 500_000);

    let sa = a[0]._ctx.stats().unwrap();
    let sb = b[0]._ctx.stats().unwrap();
    for (side, s) in [("A", &sa), ("B", &sb)] {
        assert!(
            counter(s, "handed_over_frames") > 0 && counter(s, "taken_over_frames") > 0,
            "{side}: no frame changed poller: {s:?}"
        );
        assert_eq!(
            counter(s, "handed_over_frames"),
            counter(s, "taken_over_frames") + counter(s, "handoff_full_drops"),
            "{side}: frames lost between pollers: {s:?}"
        );
    }
}

/// A UD QP attached to a multicast group on `a`'s poller, ready, with `n` receives.
fn member(a: &App, gid: [u8; 16], n: u64) -> Qp {
    let q =
        a.pd.create_qp(&QpInit::new(QpType::Ud, &a.cq, &a.cq))
            .unwrap();
    xroce_lab::daemons::ud_ready(&q, 0x0123_4567, 5).unwrap();
    q.attach_mcast(gid).unwrap();
    for i in 0..n {
        let sge = [Sge {
            addr: a.mr.addr() + i * 2048,
            length: 2048,
            lkey: a.mr.lkey(),
        }];
        q.post_recv(&[RecvWr {
            wr_id: i,
            sges: &sge,
        }])
        .unwrap();
    }
    q
}

/// `n` SENDs of 1000 bytes from `app`'s UD queue pair `sender` to the group of `ah`, one
/// at a time.
fn send_to_group(app: &App, sender: &Qp, ah: &verbs_shm::client::Ah, n: u64) {
    for i in 0..n {
        let sge = [Sge {
            addr: app.mr.addr(),
            length: 1000,
            lkey: app.mr.lkey(),
        }];
        let mut wr = SendWr::new(i, SendOp::Send, &sge);
        wr.ud = Some(verbs_shm::client::UdTarget {
            ah,
            qpn: 0xff_ffff,
            qkey: 0x0123_4567,
        });
        sender.post_send(&[wr]).unwrap();
        assert_eq!(wait_completions(&app.cq, 1)[0].status, 0);
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_multicast_frame_reaches_the_members_of_every_poller() {
    require_root();
    let (hosts, a, b) = two_queue_hosts();
    let gid = xroce_wire::Gid::from_ipv4(std::net::Ipv4Addr::new(239, 77, 0, 3)).0;
    const N: u64 = 20;
    // Members on both pollers of B, and on the sender's host, on the poller that does not
    // own the sender.
    let members: Vec<(&App, Qp)> = vec![
        (&b[0], member(&b[0], gid, N)),
        (&b[1], member(&b[1], gid, N)),
        (&a[1], member(&a[1], gid, N)),
    ];
    assert_ne!(
        members[0].1.qpn() % 2,
        members[1].1.qpn() % 2,
        "B's two on one poller"
    );
    let sender = a[0]
        .pd
        .create_qp(&QpInit::new(QpType::Ud, &a[0].cq, &a[0].cq))
        .unwrap();
    xroce_lab::daemons::ud_ready(&sender, 0x0123_4567, 1).unwrap();
    assert_ne!(
        sender.qpn() % 2,
        members[2].1.qpn() % 2,
        "A's two on one poller"
    );
    let mut av = hosts.av(Side::A);
    av.dgid = gid;
    let ah = a[0].pd.create_ah(&av).unwrap();
    send_to_group(&a[0], &sender, &ah, N);
    for (k, (app, q)) in members.iter().enumerate() {
        let got = wait_completions(&app.cq, N as usize);
        for c in &got {
            assert_eq!(
                (c.status, c.byte_len, c.qp_num, c.src_qp),
                (0, 1040, q.qpn(), sender.qpn()),
                "member {k}"
            );
        }
    }
    // A group nobody joined: B's poller that receives each frame counts it, and hands it
    // to no other (the pollers share which groups each has members of).
    let unjoined = |side| {
        let stats = hosts.open(side).unwrap().stats().unwrap();
        let c = |name| xroce_lab::daemons::counter(&stats, name);
        (c("rcvd_mcast_unjoined"), c("handed_over_frames"))
    };
    let (unjoined_before, handed_before) = unjoined(Side::B);
    av.dgid = xroce_wire::Gid::from_ipv4(std::net::Ipv4Addr::new(239, 77, 0, 4)).0;
    let nobodys = a[0].pd.create_ah(&av).unwrap();
    send_to_group(&a[0], &sender, &nobodys, N);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (unjoined_now, handed_now) = unjoined(Side::B);
        if unjoined_now - unjoined_before == N {
            assert_eq!(
                handed_now, handed_before,
                "frames of a group nobody joined handed over"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "B counted {} of {N} frames for a group nobody joined",
            unjoined_now - unjoined_before
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
