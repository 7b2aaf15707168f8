//! Congestion control between two daemons, on a path that marks nothing: ECN-capable
//! packets between xroce ends once they found each other (xroce's hello, a UDP checksum on
//! a connection's first packets), none toward a peer whose packets are neither (as Linux
//! rxe's are not), and none at all with `--cc off`; the counters under mlx5's names in the
//! daemon's stats.

use std::time::{Duration, Instant};

use verbs_shm::client::{
    Access, Context, Cq, Mr, Pd, Qp, QpInit, QpType, SendOp, SendWr, Sge, WorkCompletion,
};
use xroce_lab::daemons::{TwoHosts, connect, counter, xroced};
use xroce_lab::{LabConfig, Side, require_root};

fn wait(cq: &Cq, n: usize) -> Vec<WorkCompletion> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = [WorkCompletion::default(); 16];
    while got.len() < n {
        let k = cq.poll(&mut buf).expect("poll");
        got.extend_from_slice(&buf[..k]);
        assert!(
            Instant::now() < deadline,
            "only {} of {n} completions",
            got.len()
        );
        if k == 0 {
            std::thread::yield_now();
        }
    }
    got
}

/// A connection and what it needs, kept alive while its counters are read.
struct Connected {
    _qps: (Qp, Qp),
    _rest: (Mr, Mr, Cq, Cq, Pd, Pd),
}

/// Writes 1 MiB from `a` to `b` over a fresh RC connection, 16 times 64 KiB, one at a
/// time.
fn write_a_mebibyte(hosts: &TwoHosts, ca: &Context, cb: &Context) -> Connected {
    let (pa, pb) = (ca.alloc_pd().unwrap(), cb.alloc_pd().unwrap());
    let (ma, mb) = (
        pa.alloc_mr(1 << 20, Access::ALL).unwrap(),
        pb.alloc_mr(1 << 20, Access::ALL).unwrap(),
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
    connect(&qa, hosts.av(Side::A), qb.qpn(), 0x1000, 0x2000).unwrap();
    connect(&qb, hosts.av(Side::B), qa.qpn(), 0x2000, 0x1000).unwrap();
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i % 253) as u8).collect();
    assert!(ma.write(0, &data));
    for k in 0..16u64 {
        let off = k * (64 << 10);
        let sge = [Sge {
            addr: ma.addr() + off,
            length: 64 << 10,
            lkey: ma.lkey(),
        }];
        let write = SendOp::Write {
            remote_addr: mb.addr() + off,
            rkey: mb.rkey(),
        };
        qa.post_send(&[SendWr::new(k, write, &sge)]).unwrap();
        let c = wait(&qa_cq, 1);
        assert_eq!(c[0].status, 0, "{c:?}");
    }
    let mut got = vec![0u8; data.len()];
    assert!(mb.read(0, &mut got));
    assert!(got == data, "the data differs");
    Connected {
        _qps: (qa, qb),
        _rest: (ma, mb, qa_cq, qb_cq, pa, pb),
    }
}

fn stats(ctx: &Context) -> Vec<(String, u64)> {
    ctx.stats().expect("stats")
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn two_daemons_send_ecn_capable_packets_both_ways_and_count_them() {
    require_root();
    let hosts = TwoHosts::start(&LabConfig::default(), &[]).expect("lab with two daemons");
    let (ca, cb) = (hosts.open(Side::A).unwrap(), hosts.open(Side::B).unwrap());
    let _connected = write_a_mebibyte(&hosts, &ca, &cb);
    let (sa, sb) = (stats(&ca), stats(&cb));
    // 1 MiB at a path MTU of 1024: 1024 requests, all ECN-capable but those of the first
    // message sent before b's first acknowledgement came back (one message at a time), the
    // first of them with the hello; b's acknowledgements all (it knew a from a's first
    // packet), the first of them with b's own hello.
    let sent = counter(&sa, "sent_pkts");
    let ect = counter(&sa, "cc_ect_packets");
    assert!(sent >= 1024 && ect >= sent - 64 && ect <= sent, "a: {sa:?}");
    let hellos = counter(&sa, "cc_hello_packets");
    assert!((1..=8).contains(&hellos), "a: {sa:?}");
    assert!(counter(&sb, "cc_ect_packets") > 0, "b: {sb:?}");
    let hellos = counter(&sb, "cc_hello_packets");
    assert!((1..=8).contains(&hellos), "b: {sb:?}");
    // Each knows the other for an xroce daemon.
    assert_eq!(counter(&sa, "cc_xroce_peers"), 1, "a: {sa:?}");
    assert_eq!(counter(&sb, "cc_xroce_peers"), 1, "b: {sb:?}");
    // Nothing marks on a veth: no CE, no CNP. The names are mlx5's, listed with --all.
    for name in [
        "np_ecn_marked_roce_packets",
        "np_cnp_sent",
        "rp_cnp_handled",
    ] {
        assert_eq!(
            counter(&sa, name) + counter(&sb, name),
            0,
            "{name}: {sa:?} {sb:?}"
        );
        assert!(sa.iter().any(|(n, _)| n == name), "{name} missing: {sa:?}");
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn toward_a_peer_that_sends_nothing_ecn_capable_no_packet_is() {
    require_root();
    // b sends no ECN-capable packet and no hello, as Linux rxe does not.
    let bin = xroced().expect("xroced");
    let hosts = TwoHosts::start_sides(
        &bin,
        &LabConfig::default(),
        &[],
        &["--ecn", "off", "--selective-repeat", "off"],
    )
    .expect("lab with two daemons");
    let (ca, cb) = (hosts.open(Side::A).unwrap(), hosts.open(Side::B).unwrap());
    let _connected = write_a_mebibyte(&hosts, &ca, &cb);
    let (sa, sb) = (stats(&ca), stats(&cb));
    assert_eq!(counter(&sa, "cc_ect_packets"), 0, "{sa:?}");
    assert_eq!(
        counter(&sa, "cc_hello_packets"),
        8,
        "the hello, on a connection's first 8 packets only: {sa:?}"
    );
    assert_eq!(counter(&sb, "cc_ect_packets"), 0, "{sb:?}");
    assert_eq!(counter(&sb, "cc_hello_packets"), 0, "{sb:?}");
    assert_eq!(
        counter(&sa, "cc_xroce_peers"),
        0,
        "a never took b for xroce: {sa:?}"
    );
    assert!(counter(&sa, "sent_pkts") > 1000, "{sa:?}");
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn with_congestion_control_off_nothing_is_ecn_capable_or_paced() {
    require_root();
    // With selective repeat on the hello still says who each end is; with it off (the
    // default) too, nothing at all differs from the transport's own packets.
    for selective_repeat in ["on", "off"] {
        let hosts = TwoHosts::start(
            &LabConfig::default(),
            &["--cc", "off", "--selective-repeat", selective_repeat],
        )
        .expect("lab with two daemons");
        let (ca, cb) = (hosts.open(Side::A).unwrap(), hosts.open(Side::B).unwrap());
        let connected = write_a_mebibyte(&hosts, &ca, &cb);
        let (sa, sb) = (stats(&ca), stats(&cb));
        for name in ["cc_ect_packets", "cc_paced", "cc_rtt_samples"] {
            assert_eq!(
                counter(&sa, name) + counter(&sb, name),
                0,
                "{name}: {sa:?} {sb:?}"
            );
        }
        let hellos = counter(&sa, "cc_hello_packets") + counter(&sb, "cc_hello_packets");
        let peers = counter(&sa, "cc_xroce_peers") + counter(&sb, "cc_xroce_peers");
        if selective_repeat == "on" {
            assert!((2..=16).contains(&hellos), "{sa:?} {sb:?}");
            assert_eq!(peers, 2, "{sa:?} {sb:?}");
        } else {
            assert_eq!((hellos, peers), (0, 0), "{sa:?} {sb:?}");
        }
        assert!(counter(&sa, "sent_pkts") > 1000, "{sa:?}");
        drop(connected);
    }
}
