//! A capture of the daemons' own traffic passes `cargo xtask pcap`: every RoCEv2 packet of
//! a mixed RC (WRITE, READ, SEND with immediate, atomics) and UD exchange between two
//! daemons, captured by tcpdump on a lab veth, carries a valid ICRC, and the capture holds
//! every packet the daemons say they sent.
//!
//! The capture runs on the router's interface toward `a` in a lab with a router: on the
//! hosts' own interfaces tcpdump sees none of the daemons' frames (AF_XDP transmit skips
//! the kernel's packet taps, and XDP redirects received frames before the taps).

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use verbs_shm::client::{Access, QpInit, QpType, RecvWr, SendOp, SendWr, Sge, UdTarget};
use xroce_lab::daemons::{TwoHosts, connect, counter, ud_ready, wait_completions};
use xroce_lab::{LabConfig, Side, require_root};

use crate::Network;

/// tcpdump in a namespace, stopped (SIGINT, so that it finishes its file) on drop.
struct Capture {
    child: Option<Child>,
    file: PathBuf,
    log: PathBuf,
}

impl Capture {
    fn start(netns: &str, interface: &str) -> Capture {
        let dir = std::env::temp_dir();
        let file = dir.join(format!("xroce-capture-{netns}.pcap"));
        let log = dir.join(format!("xroce-capture-{netns}.log"));
        let file_text = file.to_string_lossy().into_owned();
        let child = xroce_lab::netns::command(
            netns,
            &[
                "tcpdump",
                "-i",
                interface,
                "--immediate-mode",
                "-U",
                "-Z",
                "root",
                // A snap length of a frame, not 256 KiB: in immediate mode every ring slot
                // is a snap length, and a 2 MiB ring of 256 KiB slots drops bursts.
                "-s",
                "4096",
                "-B",
                "65536",
                "-w",
                &file_text,
                "udp port 4791",
            ],
        )
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("tcpdump runs (apt-get install -y tcpdump)");
        let mut capture = Capture {
            child: Some(child),
            file,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !capture.said().contains("listening on") {
            let exited = capture
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            assert!(exited.is_none(), "tcpdump exited: {}", capture.said());
            assert!(
                Instant::now() < deadline,
                "tcpdump did not start: {}",
                capture.said()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        capture
    }

    fn said(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops tcpdump and returns what it said about the capture.
    fn stop(&mut self) -> String {
        if let Some(mut child) = self.child.take() {
            // Only a child not yet reaped: a reaped child's pid may be another process's.
            if let Ok(None) = child.try_wait() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(child.id() as i32),
                    nix::sys::signal::Signal::SIGINT,
                );
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            while !matches!(child.try_wait(), Ok(Some(_))) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        self.said()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.file);
        let _ = std::fs::remove_file(&self.log);
    }
}

over_networks!(capture:
    a_capture_of_the_daemons_traffic_passes_the_icrc_check => IPV4,
    a_capture_of_the_daemons_ipv6_traffic_passes_the_icrc_check => IPV6,
);

/// The capture is always taken on the router: `network` gives the address family.
fn capture(network: Network) {
    require_root();
    let family = network.family;
    let config = LabConfig {
        router: true,
        ..LabConfig::default()
    };
    let hosts = TwoHosts::start(&config, &[]).expect("lab with a router and two daemons");
    let router = hosts.lab.router.clone().unwrap();
    let mut capture = Capture::start(&router.netns, &router.toward_a);

    let (ca, cb) = (hosts.open(Side::A).unwrap(), hosts.open(Side::B).unwrap());
    let (pa, pb) = (ca.alloc_pd().unwrap(), cb.alloc_pd().unwrap());
    let (ma, mb) = (
        pa.alloc_mr(1 << 20, Access::ALL).unwrap(),
        pb.alloc_mr(1 << 20, Access::ALL).unwrap(),
    );
    let (cqa, cqb) = (
        ca.create_cq(256, None).unwrap(),
        cb.create_cq(256, None).unwrap(),
    );

    // RC: WRITE, READ back, SEND with immediate the other way, then atomics.
    let qa = pa.create_qp(&QpInit::new(QpType::Rc, &cqa, &cqa)).unwrap();
    let qb = pb.create_qp(&QpInit::new(QpType::Rc, &cqb, &cqb)).unwrap();
    connect(&qa, hosts.av_over(Side::A, family), qb.qpn(), 0x100, 0x200).unwrap();
    connect(&qb, hosts.av_over(Side::B, family), qa.qpn(), 0x200, 0x100).unwrap();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 253) as u8).collect();
    assert!(ma.write(0, &data));
    let sge = |mr: &verbs_shm::client::Mr, off: u64, len: usize| {
        [Sge {
            addr: mr.addr() + off,
            length: len as u32,
            lkey: mr.lkey(),
        }]
    };
    let s = sge(&ma, 0, data.len());
    let write = SendOp::Write {
        remote_addr: mb.addr(),
        rkey: mb.rkey(),
    };
    qa.post_send(&[SendWr::new(1, write, &s)]).unwrap();
    assert_eq!(wait_completions(&cqa, 1)[0].status, 0);
    let s = sge(&ma, 200_000, data.len());
    let read = SendOp::Read {
        remote_addr: mb.addr(),
        rkey: mb.rkey(),
    };
    qa.post_send(&[SendWr::new(2, read, &s)]).unwrap();
    assert_eq!(wait_completions(&cqa, 1)[0].status, 0);
    let mut back = vec![0u8; data.len()];
    assert!(
        ma.read(200_000, &mut back) && back == data,
        "WRITE then READ"
    );
    let r = sge(&ma, 400_000, 4096);
    qa.post_recv(&[RecvWr { wr_id: 7, sges: &r }]).unwrap();
    assert!(mb.write(500_000, b"captured"));
    let s = sge(&mb, 500_000, 8);
    qb.post_send(&[SendWr::new(3, SendOp::SendWithImm { imm: 0x77 }, &s)])
        .unwrap();
    let c = wait_completions(&cqa, 1)[0];
    assert_eq!((c.wr_id, c.status, c.byte_len), (7, 0, 8));
    assert_eq!(wait_completions(&cqb, 1)[0].status, 0);
    assert!(mb.write(600_000, &5u64.to_le_bytes()));
    let (r1, r2) = (sge(&ma, 700_000, 8), sge(&ma, 700_008, 8));
    let fetch_add = SendOp::FetchAdd {
        remote_addr: mb.addr() + 600_000,
        rkey: mb.rkey(),
        add: 3,
    };
    let compare_swap = SendOp::CompareSwap {
        remote_addr: mb.addr() + 600_000,
        rkey: mb.rkey(),
        compare: 8,
        swap: 1,
    };
    qa.post_send(&[
        SendWr::new(4, fetch_add, &r1),
        SendWr::new(5, compare_swap, &r2),
    ])
    .unwrap();
    assert!(wait_completions(&cqa, 2).iter().all(|c| c.status == 0));
    assert_eq!(mb.load_u64(600_000), Some(1));

    // UD: eight datagrams each way, checked behind their GRH.
    let ua = pa.create_qp(&QpInit::new(QpType::Ud, &cqa, &cqa)).unwrap();
    let ub = pb.create_qp(&QpInit::new(QpType::Ud, &cqb, &cqb)).unwrap();
    ud_ready(&ua, 0x1234, 1).unwrap();
    ud_ready(&ub, 0x1234, 2).unwrap();
    let (aha, ahb) = (
        pa.create_ah(&hosts.av_over(Side::A, family)).unwrap(),
        pb.create_ah(&hosts.av_over(Side::B, family)).unwrap(),
    );
    for (from, to, mr_from, mr_to, ah, to_qpn, cq_from, cq_to) in [
        (&ua, &ub, &ma, &mb, &aha, ub.qpn(), &cqa, &cqb),
        (&ub, &ua, &mb, &ma, &ahb, ua.qpn(), &cqb, &cqa),
    ] {
        for i in 0..8u64 {
            let rs = sge(mr_to, 800_000 + i * 1024, 40 + 512);
            to.post_recv(&[RecvWr {
                wr_id: 100 + i,
                sges: &rs,
            }])
            .unwrap();
        }
        for i in 0..8u64 {
            let body = vec![i as u8 ^ 0xa5; 512];
            assert!(mr_from.write(900_000 + i as usize * 1024, &body));
            let s = sge(mr_from, 900_000 + i * 1024, 512);
            let mut wr = SendWr::new(10 + i, SendOp::Send, &s);
            wr.ud = Some(UdTarget {
                ah,
                qpn: to_qpn,
                qkey: 0x1234,
            });
            from.post_send(&[wr]).unwrap();
        }
        assert!(wait_completions(cq_from, 8).iter().all(|c| c.status == 0));
        let got = wait_completions(cq_to, 8);
        for c in &got {
            assert_eq!((c.status, c.byte_len), (0, 40 + 512), "{c:?}");
            let i = c.wr_id - 100;
            let mut body = vec![0u8; 512];
            assert!(mr_to.read(800_000 + i as usize * 1024 + 40, &mut body));
            assert!(body.iter().all(|&b| b == i as u8 ^ 0xa5), "datagram {i}");
        }
    }

    let sent =
        counter(&ca.stats().unwrap(), "sent_pkts") + counter(&cb.stats().unwrap(), "sent_pkts");
    // Let the last frames reach the file before tcpdump stops.
    std::thread::sleep(Duration::from_millis(300));
    let said = capture.stop();
    eprintln!(
        "tcpdump: {}",
        said.lines()
            .filter(|l| l.contains("packets"))
            .collect::<Vec<_>>()
            .join(", ")
    );

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["run", "--quiet", "-p", "xtask", "--", "pcap"])
        .arg(&capture.file)
        .stderr(Stdio::inherit())
        .output()
        .expect("cargo xtask pcap runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let tally = text.lines().last().unwrap_or_default().to_owned();
    eprintln!("cargo xtask pcap: {tally}");
    assert!(out.status.success(), "cargo xtask pcap failed: {tally}");
    let numbers: Vec<u64> = tally
        .split(", ")
        .filter_map(|part| part.split_whitespace().next()?.parse().ok())
        .collect();
    let [packets, ok, bad_icrc, malformed] = numbers[..] else {
        panic!("unexpected tally {tally:?}");
    };
    assert_eq!((ok, bad_icrc, malformed), (packets, 0, 0), "{tally}");
    assert_eq!(
        packets, sent,
        "the capture holds {packets} RoCEv2 packets, the daemons sent {sent}"
    );
    assert!(packets >= 200, "only {packets} packets captured");
    for opcode in [
        "RC_RDMA_WRITE_FIRST",
        "RC_RDMA_WRITE_LAST",
        "RC_RDMA_READ_REQUEST",
        "RC_RDMA_READ_RESPONSE_FIRST",
        "RC_SEND_ONLY_WITH_IMMEDIATE",
        "RC_FETCH_ADD",
        "RC_COMPARE_SWAP",
        "RC_ATOMIC_ACKNOWLEDGE",
        "RC_ACKNOWLEDGE",
        "UD_SEND_ONLY",
    ] {
        assert!(
            text.lines().any(|l| l.contains(&format!(" {opcode} "))),
            "no {opcode} in the capture"
        );
    }
    // Every packet went to or from A's address of the family asked for.
    let a = match hosts.lab.host(Side::A).address(family) {
        IpAddr::V4(a) => format!(" {a}:"),
        IpAddr::V6(a) => format!(" [{a}]:"),
    };
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(" -> ")).collect();
    assert_eq!(lines.len() as u64, packets);
    assert!(
        lines.iter().all(|l| l.contains(&a)),
        "a packet without {a}: {text}"
    );
}
