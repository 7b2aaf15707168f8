//! The control plane under pressure from one application: every kind of object has a
//! per-application limit, refused past it with `ENOMEM` and a message naming the limit and
//! how to raise it, and `ibv_query_device` reports the limits enforced; a protection domain
//! still in use is not deallocated (`EBUSY`) and everything in it keeps working; handles
//! clean up in any drop order; `xroced stat --qp` lists a thousand queue pairs.

use std::collections::BTreeSet;

use verbs_shm::client::{Access, Error, QpCaps, QpInit, QpType, SendOp, SendWr, Sge};
use verbs_shm::protocol::{Reply, Request};
use xroce_lab::daemons::{DEVICE, TwoHosts, connect, counter, wait_completions, xroced};
use xroce_lab::{LabConfig, Side, require_root};

/// `result` is a refusal with `errno` whose message contains each of `words`.
fn refused<T: std::fmt::Debug>(result: Result<T, Error>, errno: i32, words: &[&str]) -> String {
    let e = result.expect_err("refused");
    assert_eq!(e.errno(), errno, "{e}");
    assert!(matches!(e, Error::Daemon { .. }), "{e:?}");
    let text = e.to_string();
    for w in words {
        assert!(text.contains(w), "{w:?} missing from {text:?}");
    }
    text
}

/// The limit refusal of `objects` past `limit`, raised with `--option`.
fn over(result: Result<impl std::fmt::Debug, Error>, limit: usize, objects: &str, option: &str) {
    let key = option.replace('-', "_");
    let objects = if limit == 1 {
        objects.strip_suffix('s').unwrap_or(objects)
    } else {
        objects
    };
    refused(
        result,
        libc::ENOMEM,
        &[
            &format!("already has {limit} {objects}"),
            &format!("--{option}"),
            &key,
        ],
    );
}

fn small_caps() -> QpCaps {
    QpCaps {
        max_send_wr: 1,
        max_recv_wr: 1,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn every_object_has_a_limit_refused_with_enomem_and_reported_by_query_device() {
    require_root();
    let h = TwoHosts::start(
        &LabConfig::default(),
        &[
            "--max-pds",
            "2",
            "--max-mrs",
            "3",
            "--max-srqs",
            "1",
            "--max-ahs",
            "2",
            "--max-qps",
            "2",
            "--max-cqs",
            "2",
            "--max-mr-mib",
            "1",
        ],
    )
    .expect("lab");
    let ca = h.open(Side::A).unwrap();
    let dev = ca.query_device().unwrap();
    assert_eq!(
        (dev.max_pd, dev.max_mr, dev.max_srq, dev.max_ah),
        (2, 3, 1, 2),
        "{dev:?}"
    );
    assert_eq!(
        (dev.max_qp, dev.max_cq, dev.max_mr_size),
        (2, 2, 1 << 20),
        "{dev:?}"
    );

    let p1 = ca.alloc_pd().unwrap();
    let p2 = ca.alloc_pd().unwrap();
    over(ca.alloc_pd(), 2, "protection domains", "max-pds");

    let m1 = p1.alloc_mr(4096, Access::ALL).unwrap();
    let _m2 = p1.alloc_mr(4096, Access::ALL).unwrap();
    let _m3 = p2.alloc_mr(4096, Access::ALL).unwrap();
    over(
        p1.alloc_mr(4096, Access::ALL),
        3,
        "memory regions",
        "max-mrs",
    );
    drop(m1);
    // Room for a region again, but not for a MiB more of registered memory.
    refused(
        p1.alloc_mr(1 << 20, Access::ALL),
        libc::ENOMEM,
        &["limit of 1048576", "--max-mr-mib", "max_mr_mib"],
    );
    let _m4 = p1.alloc_mr(4096, Access::ALL).unwrap();

    let s1 = p1.create_srq(16, 1, 0).unwrap();
    over(
        p2.create_srq(16, 1, 0),
        1,
        "shared receive queues",
        "max-srqs",
    );

    let av = h.av(Side::A);
    let a1 = p1.create_ah(&av).unwrap();
    let _a2 = p2.create_ah(&av).unwrap();
    over(p1.create_ah(&av), 2, "address handles", "max-ahs");
    drop(a1);
    let _a3 = p1.create_ah(&av).unwrap();

    let c1 = ca.create_cq(16, None).unwrap();
    let _c2 = ca.create_cq(16, None).unwrap();
    over(ca.create_cq(16, None), 2, "completion queues", "max-cqs");

    let mut init = QpInit::new(QpType::Rc, &c1, &c1);
    init.caps = small_caps();
    let _q1 = p1.create_qp(&init).unwrap();
    init.srq = Some(&s1);
    let _q2 = p1.create_qp(&init).unwrap();
    init.srq = None;
    over(p2.create_qp(&init), 2, "queue pairs", "max-qps");

    // Another application has budgets of its own.
    let other = h.open(Side::A).unwrap();
    let o1 = other.alloc_pd().unwrap();
    let _o2 = other.alloc_pd().unwrap();
    let _om = o1.alloc_mr(4096, Access::ALL).unwrap();
    let _osrq = o1.create_srq(16, 1, 0).unwrap();
    let _oah = o1.create_ah(&av).unwrap();
    let ocq = other.create_cq(16, None).unwrap();
    let mut oinit = QpInit::new(QpType::Rc, &ocq, &ocq);
    oinit.caps = small_caps();
    let _oqp = o1.create_qp(&oinit).unwrap();

    // The daemon says once which limit an application ran into.
    let log = std::fs::read_to_string(h.log(Side::A)).unwrap();
    assert!(
        log.contains("refused: this application already has 2 protection domains"),
        "{log}"
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_protection_domain_in_use_is_busy_until_its_objects_are_gone() {
    require_root();
    // One PD per application: a PD left behind shows as a refused allocation.
    let h = TwoHosts::start(&LabConfig::default(), &["--max-pds", "1"]).expect("lab");
    let (ca, cb) = (h.open(Side::A).unwrap(), h.open(Side::B).unwrap());
    let (pa, pb) = (ca.alloc_pd().unwrap(), cb.alloc_pd().unwrap());

    // A region alone keeps its PD busy.
    let ma = pa.alloc_mr(1 << 16, Access::ALL).unwrap();
    refused(pa.clone().dealloc(), libc::EBUSY, &["1 memory region"]);

    let mb = pb.alloc_mr(1 << 16, Access::ALL).unwrap();
    let (cqa, cqb) = (
        ca.create_cq(16, None).unwrap(),
        cb.create_cq(16, None).unwrap(),
    );
    let srq = pa.create_srq(16, 1, 0).unwrap();
    let ah = pa.create_ah(&h.av(Side::A)).unwrap();
    let qa = pa.create_qp(&QpInit::new(QpType::Rc, &cqa, &cqa)).unwrap();
    let qb = pb.create_qp(&QpInit::new(QpType::Rc, &cqb, &cqb)).unwrap();
    let text = refused(
        pa.clone().dealloc(),
        libc::EBUSY,
        &[
            "1 queue pair",
            "1 memory region",
            "1 shared receive queue",
            "1 address handle",
            "destroy them first",
        ],
    );
    assert!(!text.contains("queue pairs"), "{text}");

    // Nothing changed: the QP connects and WRITEs with the PD's region.
    connect(&qa, h.av(Side::A), qb.qpn(), 11, 22).unwrap();
    connect(&qb, h.av(Side::B), qa.qpn(), 22, 11).unwrap();
    let data: Vec<u8> = (0..1u32 << 16).map(|i| (i * 13 % 241) as u8).collect();
    assert!(ma.write(0, &data));
    let sge = [Sge {
        addr: ma.addr(),
        length: data.len() as u32,
        lkey: ma.lkey(),
    }];
    let op = SendOp::Write {
        remote_addr: mb.addr(),
        rkey: mb.rkey(),
    };
    qa.post_send(&[SendWr::new(1, op, &sge)]).unwrap();
    let c = wait_completions(&cqa, 1);
    assert_eq!((c[0].wr_id, c[0].status), (1, 0), "{c:?}");
    let mut got = vec![0u8; data.len()];
    assert!(mb.read(0, &mut got));
    assert!(got == data, "WRITE data differs");
    // And the PD still takes new objects.
    let extra = pa.alloc_mr(4096, Access::LOCAL_WRITE).unwrap();

    // Each object that goes leaves the others holding the PD.
    drop(ah);
    let text = refused(pa.clone().dealloc(), libc::EBUSY, &["1 queue pair"]);
    assert!(!text.contains("address handle"), "{text}");
    drop(qa);
    let text = refused(pa.clone().dealloc(), libc::EBUSY, &["2 memory regions"]);
    assert!(!text.contains("queue pair"), "{text}");
    drop(srq);
    drop((ma, extra));
    pa.dealloc().expect("the PD is free now");
    // Gone on the daemon too: the application's one PD is available again.
    let again = ca.alloc_pd().expect("a new PD after the dealloc");
    drop(again);
    drop((qb, mb, pb));
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn handles_dropped_in_any_order_free_everything() {
    require_root();
    // One of each per application: anything left behind shows as a refused allocation.
    let h = TwoHosts::start(
        &LabConfig::default(),
        &[
            "--max-pds",
            "1",
            "--max-mrs",
            "1",
            "--max-qps",
            "1",
            "--max-cqs",
            "1",
            "--max-srqs",
            "1",
            "--max-ahs",
            "1",
        ],
    )
    .expect("lab");
    let ca = h.open(Side::A).unwrap();
    for round in 0..4 {
        let pd = ca
            .alloc_pd()
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        let mr = pd.alloc_mr(4096, Access::ALL).unwrap();
        let cq = ca.create_cq(16, None).unwrap();
        let srq = pd.create_srq(16, 1, 0).unwrap();
        let ah = pd.create_ah(&h.av(Side::A)).unwrap();
        let mut init = QpInit::new(QpType::Rc, &cq, &cq);
        init.srq = Some(&srq);
        let qp = pd.create_qp(&init).unwrap();
        assert_eq!(mr.pd().handle(), pd.handle());
        // The PD handle first (the objects keep the PD until they are gone), then the
        // rest in an order that varies: the CQ and the SRQ before or after the QP that
        // uses them, the region last or first.
        drop(pd);
        match round {
            0 => drop((mr, ah, qp, srq, cq)),
            1 => drop((cq, srq, ah, qp, mr)),
            _ => drop((ah, srq, cq, mr, qp)),
        }
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn xroced_stat_lists_a_thousand_and_twenty_four_queue_pairs() {
    require_root();
    const QPS: usize = 1024;
    let h = TwoHosts::start(&LabConfig::default(), &[]).expect("lab");
    let ca = h.open(Side::A).unwrap();
    let pd = ca.alloc_pd().unwrap();
    let cq = ca.create_cq(16, None).unwrap();
    let mut init = QpInit::new(QpType::Rc, &cq, &cq);
    init.caps = small_caps();
    let qps: Vec<_> = (0..QPS).map(|_| pd.create_qp(&init).unwrap()).collect();
    let mine: BTreeSet<u32> = qps.iter().map(|q| q.qpn()).collect();
    assert_eq!(mine.len(), QPS);

    // The library pages through them.
    let listed = ca.qp_stats().unwrap();
    let numbers: Vec<u32> = listed.iter().map(|q| q.qpn).collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "not in order");
    assert_eq!(numbers.into_iter().collect::<BTreeSet<_>>(), mine);
    assert!(
        listed
            .iter()
            .all(|q| q.qp_type == "RC" && q.state == "RESET")
    );

    // A page is a page: asking from past the middle QP gives the rest, never more.
    let middle = *mine.iter().nth(QPS / 2).unwrap();
    match ca
        .request(&Request::QpStatsPage { from_qpn: middle })
        .unwrap()
    {
        Reply::QpStatsPage { qps, next } => {
            assert!(!qps.is_empty() && qps.len() < QPS / 2 + 1);
            assert_eq!(qps[0].qpn, middle);
            if let Some(n) = next {
                assert!(n > qps[qps.len() - 1].qpn, "next {n:#x}");
            }
        }
        other => panic!("unexpected reply {other:?}"),
    }
    // The one-message request of older clients says why it cannot answer.
    refused(
        ca.request(&Request::QpStats),
        libc::E2BIG,
        &["1024 queue pairs do not fit one reply", "update"],
    );

    // `xroced stat --qp` prints one line per queue pair.
    let bin = xroced().unwrap().to_string_lossy().into_owned();
    let out = h
        .lab
        .command(Side::A, &[&bin, "stat", DEVICE, "--qp"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "xroced stat --qp failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: BTreeSet<u32> = text
        .lines()
        .filter_map(|l| l.strip_prefix("qp 0x"))
        .map(|l| {
            let hex = l.split_whitespace().next().unwrap();
            u32::from_str_radix(hex, 16).unwrap()
        })
        .collect();
    assert_eq!(text.lines().filter(|l| l.starts_with("qp ")).count(), QPS);
    assert_eq!(printed, mine);
    drop(qps);
    assert!(ca.qp_stats().unwrap().is_empty());
}

/// Runs `argv` in `side`'s namespace and returns its standard output (panics on failure).
fn run(h: &TwoHosts, side: Side, argv: &[&str]) -> String {
    let out = h.lab.command(side, argv).output().unwrap();
    assert!(
        out.status.success(),
        "{argv:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn other_applications_are_served_while_a_path_resolves() {
    require_root();
    // Paths wait up to a minute for their next hop (3 s by default): the test depends on
    // the order of events, never on how long they take.
    let h =
        TwoHosts::start(&LabConfig::default(), &["--resolve-timeout-ms", "60000"]).expect("lab");
    let (ifa, ifb) = (
        h.lab.host(Side::A).interface.clone(),
        h.lab.host(Side::B).interface.clone(),
    );
    // Nobody has this address yet: the kernel of A keeps asking for it (every 200 ms, for
    // a minute) until host B takes it.
    let absent = std::net::Ipv4Addr::new(10, 77, 0, 99);
    for (key, value) in [("retrans_time_ms", "200"), ("mcast_solicit", "300")] {
        run(
            &h,
            Side::A,
            &[
                "sysctl",
                "-qw",
                &format!("net.ipv4.neigh.{ifa}.{key}={value}"),
            ],
        );
    }
    let ca = h.open(Side::A).unwrap();
    let pd = ca.alloc_pd().unwrap();
    let cq = ca.create_cq(16, None).unwrap();
    let qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq, &cq)).unwrap();
    let mut av = h.av(Side::A);
    av.dgid = xroce_wire::Gid::from_ipv4(absent).0;
    std::thread::scope(|s| {
        let waiting = s.spawn(|| connect(&qp, av, 0x123, 1, 2));
        // The daemon asked the kernel for the address.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let absent_text = absent.to_string();
        while run(
            &h,
            Side::A,
            &["ip", "neigh", "show", &absent_text, "dev", &ifa],
        )
        .is_empty()
        {
            assert!(std::time::Instant::now() < deadline, "no resolution began");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // Meanwhile another application opens the device and makes objects.
        let started = std::time::Instant::now();
        let other = h.open(Side::A).unwrap();
        let opened = started.elapsed();
        let started = std::time::Instant::now();
        other.query_device().unwrap();
        let queried = started.elapsed();
        let opd = other.alloc_pd().unwrap();
        let ocq = other.create_cq(16, None).unwrap();
        let _oqp = opd.create_qp(&QpInit::new(QpType::Rc, &ocq, &ocq)).unwrap();
        eprintln!(
            "while a path resolves: another application opened the device in {opened:?}, queried it in {queried:?}"
        );
        assert!(
            !waiting.is_finished(),
            "the resolution ended before another application was served"
        );
        // Only now does the address appear: the first application's path resolves.
        run(
            &h,
            Side::B,
            &["ip", "addr", "add", &format!("{absent}/24"), "dev", &ifb],
        );
        waiting
            .join()
            .unwrap()
            .expect("the path resolved once the address appeared");
    });
    assert_eq!(qp.query().unwrap().qp_state, 3);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_path_nobody_answers_for_fails_with_ehostunreach_and_the_application_carries_on() {
    require_root();
    let h = TwoHosts::start(
        &LabConfig::default(),
        &["--resolve-timeout-ms", "300", "--max-ahs", "1"],
    )
    .expect("lab");
    let ca = h.open(Side::A).unwrap();
    let pd = ca.alloc_pd().unwrap();
    let mut av = h.av(Side::A);
    av.dgid = xroce_wire::Gid::from_ipv4(std::net::Ipv4Addr::new(10, 77, 0, 98)).0;
    refused(
        pd.create_ah(&av),
        libc::EHOSTUNREACH,
        &["cannot reach 10.77.0.98", "not resolved within 300ms"],
    );
    let cq = ca.create_cq(16, None).unwrap();
    let qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq, &cq)).unwrap();
    let e = connect(&qp, av, 0x123, 1, 2).unwrap_err();
    assert_eq!(e.errno(), libc::EHOSTUNREACH, "{e}");
    // The connection answers in order afterwards, and the refused AH took no room.
    assert_eq!(qp.query().unwrap().qp_state, 1, "still INIT");
    let _ah = pd.create_ah(&h.av(Side::A)).unwrap();
}

/// The daemon maps every region and ring of every application, and a process has at most
/// `vm.max_map_count` memory areas: past that even its own allocations would fail. A budget
/// under it (here a small one, `--map-budget 64`) is shared out: an application alone gets
/// at most a quarter, all of them together the whole; past either, `ENOMEM` with a message
/// that names `vm.max_map_count`. The daemon carries on, and areas one application frees
/// serve another.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn the_daemons_mappings_stay_within_a_budget() {
    require_root();
    let h = TwoHosts::start(&LabConfig::default(), &["--map-budget", "64"]).expect("lab");
    let mut apps = Vec::new();
    let mut held_to_their_share = 0;
    let budget_spent = loop {
        assert!(apps.len() < 10, "ten applications and the budget not spent");
        let ctx = match h.open(Side::A) {
            Ok(c) => c,
            Err(e) => break e.to_string(),
        };
        let pd = ctx.alloc_pd().unwrap();
        let mut mrs = Vec::new();
        let text = loop {
            match pd.alloc_mr(4096, Access::ALL) {
                Ok(mr) => mrs.push(mr),
                Err(e) => break refused(Err::<(), _>(e), libc::ENOMEM, &["vm.max_map_count"]),
            }
            assert!(mrs.len() <= 16, "more than a quarter of the budget");
        };
        apps.push((ctx, pd, mrs));
        if !text.contains("its share of 16") {
            break text;
        }
        held_to_their_share += 1;
    };
    assert!(held_to_their_share >= 2, "{held_to_their_share}");
    assert!(budget_spent.contains("budget of 64"), "{budget_spent}");
    assert!(budget_spent.contains("vm.max_map_count"), "{budget_spent}");

    // Areas the first application gives back serve a new one.
    let first = &mut apps[0].2;
    first.truncate(first.len() - 4);
    let ctx = h.open(Side::A).expect("an application once areas are free");
    let mr = ctx
        .alloc_pd()
        .unwrap()
        .alloc_mr(4096, Access::ALL)
        .expect("a region too");
    assert!(mr.write(0, b"fits"));
    // `xroced stat` shows the budget and what of it is in use.
    let stats = ctx.stats().expect("the daemon answers");
    assert_eq!(counter(&stats, "mapped_area_budget"), 64);
    let used = counter(&stats, "mapped_areas");
    assert!((60..=64).contains(&used), "{used} areas in use");
    assert_eq!(counter(&stats, "applications"), apps.len() as u64 + 1);
}
