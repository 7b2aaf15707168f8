//! The daemon's life: one daemon per device name, `xroced stat` with per-QP counters, and a
//! clean restart after `kill -9` (the XDP program, the sockets and the name come back).

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use verbs_shm::client::{Access, Context, QpInit, QpType, SendOp, SendWr, Sge, WorkCompletion};
use xroce_lab::daemons::{DEVICE, TwoHosts, connect, xroced};
use xroce_lab::{LabConfig, Side, require_root};

/// A WRITE of 64 KiB from A to B on fresh QPs; checks the data. Returns B's QP number and
/// the verbs objects, which keep the QPs alive while the caller looks at them.
fn write_once(hosts: &TwoHosts, ca: &Context, cb: &Context) -> (u32, Box<dyn std::any::Any>) {
    let (pa, pb) = (ca.alloc_pd().unwrap(), cb.alloc_pd().unwrap());
    let (ma, mb) = (
        pa.alloc_mr(1 << 16, Access::ALL).unwrap(),
        pb.alloc_mr(1 << 16, Access::ALL).unwrap(),
    );
    let (cqa, cqb) = (
        ca.create_cq(16, None).unwrap(),
        cb.create_cq(16, None).unwrap(),
    );
    let qa = pa.create_qp(&QpInit::new(QpType::Rc, &cqa, &cqa)).unwrap();
    let qb = pb.create_qp(&QpInit::new(QpType::Rc, &cqb, &cqb)).unwrap();
    connect(&qa, hosts.av(Side::A), qb.qpn(), 7, 9).unwrap();
    connect(&qb, hosts.av(Side::B), qa.qpn(), 9, 7).unwrap();
    let data: Vec<u8> = (0..1 << 16).map(|i: u32| (i * 7 % 253) as u8).collect();
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
    qa.post_send(&[SendWr::new(5, op, &sge)]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut wc = [WorkCompletion::default(); 1];
    while cqa.poll(&mut wc).unwrap() == 0 {
        assert!(Instant::now() < deadline, "no completion in 10 s");
        std::thread::yield_now();
    }
    assert_eq!((wc[0].wr_id, wc[0].status), (5, 0), "{:?}", wc[0]);
    let mut got = vec![0u8; data.len()];
    assert!(mb.read(0, &mut got));
    assert!(got == data, "WRITE data differs");
    (qb.qpn(), Box::new((qa, qb, cqa, cqb, ma, mb, pa, pb)))
}

fn xroced_output(hosts: &TwoHosts, side: Side, args: &[&str]) -> std::process::Output {
    let bin = xroced().unwrap().to_string_lossy().into_owned();
    let mut argv = vec![bin.as_str()];
    argv.extend_from_slice(args);
    hosts.lab.command(side, &argv).output().unwrap()
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn one_daemon_per_name_stat_and_restart_after_kill_9() {
    require_root();
    let mut hosts = TwoHosts::start(&LabConfig::default(), &[]).expect("lab with two daemons");
    let iface = hosts.lab.host(Side::A).interface.clone();

    // A second daemon for the same name refuses, says why, and leaves the first alone.
    let second = xroced_output(&hosts, Side::A, &["--netdev", &iface, "--name", DEVICE]);
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "a second daemon started: {err}");
    assert!(
        err.contains("another xroced already serves device xroce0"),
        "unclear error: {err}"
    );

    let (ca, cb) = (hosts.open(Side::A).unwrap(), hosts.open(Side::B).unwrap());
    let (qpn, objects) = write_once(&hosts, &ca, &cb);

    // `xroced stat --qp` shows the link counters and B's QP with what it received.
    let out = xroced_output(&hosts, Side::B, &["stat", DEVICE, "--qp"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let link = text.lines().next().unwrap_or_default();
    assert!(link.starts_with("link xroce0/1 "), "{text}");
    let rcvd = |line: &str| -> u64 {
        let words: Vec<&str> = line.split_whitespace().collect();
        words
            .windows(2)
            .find(|w| w[0] == "rcvd_pkts")
            .and_then(|w| w[1].parse().ok())
            .unwrap_or(0)
    };
    // 64 KiB at the default 1024-byte path MTU is 64 packets.
    assert!(rcvd(link) >= 64, "link counters: {link}");
    let qp_line = text
        .lines()
        .find(|l| l.starts_with(&format!("qp {qpn:#08x} ")))
        .unwrap_or_else(|| panic!("no line for QP {qpn:#x}: {text}"));
    assert!(qp_line.contains(" RC RTS "), "{qp_line}");
    assert!(qp_line.contains(" selective_repeat 0 "), "{qp_line}");
    assert_eq!(rcvd(qp_line), 64, "{qp_line}");
    // The requester's QP shows what it measured of the path, and its congestion control:
    // the peer is an xroce daemon (its hello came back on the acknowledgements), so the
    // QP's packets go out ECN-capable after its own 8 hello packets.
    let out = xroced_output(&hosts, Side::A, &["stat", DEVICE, "--qp"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().any(|l| l.starts_with("qp ")
            && l.contains(" srtt_us ")
            && l.contains(" rto_us ")
            && l.contains(" ecn_capable 1 ")
            && l.contains(" peer_xroce 1 ")
            && l.contains(" cc_hello_packets 8 ")),
        "{text}"
    );
    drop((objects, ca, cb));

    // kill -9: no cleanup runs. The restarted daemon takes the name, the interface and its
    // XDP program back, and RDMA works again.
    let status = hosts.kill(Side::A, Signal::SIGKILL).unwrap();
    assert!(!status.success());
    hosts.restart(Side::A).expect("restart after kill -9");
    let (ca, cb) = (hosts.open(Side::A).unwrap(), hosts.open(Side::B).unwrap());
    drop(write_once(&hosts, &ca, &cb));
    drop((ca, cb));

    // And once more, after a clean stop.
    let status = hosts.kill(Side::A, Signal::SIGTERM).unwrap();
    assert!(status.success(), "SIGTERM exit: {status}");
    hosts.restart(Side::A).expect("restart after SIGTERM");
    let (ca, cb) = (hosts.open(Side::A).unwrap(), hosts.open(Side::B).unwrap());
    drop(write_once(&hosts, &ca, &cb));
}
