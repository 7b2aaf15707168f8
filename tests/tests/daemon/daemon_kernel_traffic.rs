//! The kernel keeps everything that is not RoCEv2: while two daemons carry a sustained RDMA
//! WRITE and SEND stream between two namespaces, `ping` between the same namespaces gets
//! every answer (30 over 3 s) and a TCP connection carries 8 MiB both ways intact.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Stdio;
use std::time::{Duration, Instant};

use verbs_shm::client::{Access, Cq, QpInit, QpType, RecvWr, SendOp, SendWr, Sge, WorkCompletion};
use xroce_lab::daemons::{TwoHosts, connect};
use xroce_lab::{LabConfig, Side, netns, require_root};

/// Bytes the TCP connection carries each way.
const TCP_BYTES: usize = 8 << 20;
/// RDMA message size.
const MSG: usize = 64 << 10;
/// RDMA work requests kept outstanding.
const WINDOW: usize = 32;

/// A deterministic byte pattern: byte `i` of stream `seed`.
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            // xorshift64
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Serves one TCP connection in namespace `ns`: echoes everything it reads.
fn echo_server(ns: String, addr: SocketAddr) -> std::thread::JoinHandle<std::io::Result<usize>> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        netns::enter(&ns)?;
        let listener = TcpListener::bind(addr)?;
        let _ = ready_tx.send(());
        let (mut conn, _) = listener.accept()?;
        conn.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut buf = vec![0u8; 64 << 10];
        let mut total = 0;
        loop {
            let n = conn.read(&mut buf)?;
            if n == 0 {
                return Ok(total);
            }
            conn.write_all(&buf[..n])?;
            total += n;
        }
    });
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the TCP server listens");
    server
}

/// Connects from namespace `ns` to `addr`, sends [`TCP_BYTES`] of a pattern and checks the
/// echo byte for byte.
fn tcp_client(ns: String, addr: SocketAddr) -> std::thread::JoinHandle<Result<(), String>> {
    std::thread::spawn(move || {
        netns::enter(&ns).map_err(|e| e.to_string())?;
        let data = pattern(0x7c9, TCP_BYTES);
        let conn = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
            .map_err(|e| format!("connect: {e}"))?;
        conn.set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| e.to_string())?;
        let mut writer = conn.try_clone().map_err(|e| e.to_string())?;
        let sender = {
            let data = data.clone();
            std::thread::spawn(move || {
                for chunk in data.chunks(100_000) {
                    writer.write_all(chunk)?;
                    // Spread the transfer over the RDMA stream's lifetime.
                    std::thread::sleep(Duration::from_millis(2));
                }
                writer.shutdown(std::net::Shutdown::Write)
            })
        };
        let mut echoed = Vec::with_capacity(TCP_BYTES);
        (&conn)
            .read_to_end(&mut echoed)
            .map_err(|e| format!("read: {e}"))?;
        sender
            .join()
            .map_err(|_| "the sender panicked".to_string())?
            .map_err(|e| format!("write: {e}"))?;
        if echoed.len() != data.len() {
            return Err(format!("{} bytes echoed of {}", echoed.len(), data.len()));
        }
        if let Some(at) = echoed.iter().zip(&data).position(|(a, b)| a != b) {
            return Err(format!("echoed data differs at byte {at}"));
        }
        Ok(())
    })
}

fn poll_all(cq: &Cq, out: &mut Vec<WorkCompletion>) {
    let mut buf = [WorkCompletion::default(); 32];
    let n = cq.poll(&mut buf).expect("poll");
    out.extend_from_slice(&buf[..n]);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn ping_and_tcp_work_while_rdma_streams() {
    require_root();
    let hosts = TwoHosts::start(&LabConfig::default(), &[]).expect("lab with two daemons");
    let (ca, cb) = (hosts.open(Side::A).unwrap(), hosts.open(Side::B).unwrap());
    let (pa, pb) = (ca.alloc_pd().unwrap(), cb.alloc_pd().unwrap());
    let region = MSG * WINDOW;
    let (ma, mb) = (
        pa.alloc_mr(region, Access::ALL).unwrap(),
        pb.alloc_mr(2 * region, Access::ALL).unwrap(),
    );
    let (cqa, cqb) = (
        ca.create_cq(1024, None).unwrap(),
        cb.create_cq(1024, None).unwrap(),
    );
    let mut init_a = QpInit::new(QpType::Rc, &cqa, &cqa);
    init_a.caps.max_send_wr = 2 * WINDOW as u32;
    let mut init_b = QpInit::new(QpType::Rc, &cqb, &cqb);
    init_b.caps.max_recv_wr = 2 * WINDOW as u32;
    let qa = pa.create_qp(&init_a).unwrap();
    let qb = pb.create_qp(&init_b).unwrap();
    connect(&qa, hosts.av(Side::A), qb.qpn(), 100, 200).unwrap();
    connect(&qb, hosts.av(Side::B), qa.qpn(), 200, 100).unwrap();
    let source = pattern(0x5eed, region);
    assert!(ma.write(0, &source));

    // The kernel traffic, started once the RDMA stream runs.
    let (a, b) = (hosts.lab.a.clone(), hosts.lab.b.clone());
    let tcp_addr = SocketAddr::from((b.ipv4, 18_600));
    let mut kernel: Option<(std::process::Child, _, _)> = None;

    // WRITEs into B's first half and SENDs into its second half, alternating, WINDOW
    // outstanding; B's receives are replenished as they complete.
    let post_recv = |i: usize| {
        let sge = [Sge {
            addr: mb.addr() + (region + (i % WINDOW) * MSG) as u64,
            length: MSG as u32,
            lkey: mb.lkey(),
        }];
        qb.post_recv(&[RecvWr {
            wr_id: i as u64,
            sges: &sge,
        }])
        .unwrap();
    };
    for i in 0..WINDOW {
        post_recv(i);
    }
    let started = Instant::now();
    let (mut posted, mut done, mut recvs) = (0usize, 0usize, WINDOW);
    let mut during = 0usize;
    let mut kernel_started = Instant::now();
    let mut wcs = Vec::new();
    let mut rwcs = Vec::new();
    let mut received = vec![0u8; MSG];
    let mut sends_checked = 0usize;
    let outcome = loop {
        while posted - done < WINDOW {
            let slot = posted % WINDOW;
            let sge = [Sge {
                addr: ma.addr() + (slot * MSG) as u64,
                length: MSG as u32,
                lkey: ma.lkey(),
            }];
            let op = if posted % 2 == 0 {
                SendOp::Write {
                    remote_addr: mb.addr() + (slot * MSG) as u64,
                    rkey: mb.rkey(),
                }
            } else {
                SendOp::Send
            };
            qa.post_send(&[SendWr::new(posted as u64, op, &sge)])
                .unwrap();
            posted += 1;
        }
        poll_all(&cqa, &mut wcs);
        for c in wcs.drain(..) {
            assert_eq!(c.status, 0, "RDMA work request failed: {c:?}");
            done += 1;
            if kernel.is_some() {
                during += 1;
            }
        }
        poll_all(&cqb, &mut rwcs);
        for c in rwcs.drain(..) {
            assert_eq!((c.status, c.byte_len), (0, MSG as u32), "{c:?}");
            // Receive j holds the j-th SEND: work request 2j + 1, from its source slot.
            let j = c.wr_id as usize;
            assert!(mb.read(region + (j % WINDOW) * MSG, &mut received));
            let from = (2 * j + 1) % WINDOW;
            assert!(
                received[..] == source[from * MSG..(from + 1) * MSG],
                "SEND {j} arrived altered"
            );
            post_recv(recvs);
            recvs += 1;
            sends_checked += 1;
        }
        if kernel.is_none() && done >= 4 * WINDOW {
            let ping = hosts
                .lab
                .command(
                    Side::A,
                    &[
                        "ping",
                        "-c",
                        "30",
                        "-i",
                        "0.1",
                        "-W",
                        "2",
                        &b.ipv4.to_string(),
                    ],
                )
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("ping runs");
            let server = echo_server(b.netns.clone(), tcp_addr);
            let client = tcp_client(a.netns.clone(), tcp_addr);
            kernel = Some((ping, server, client));
            kernel_started = Instant::now();
        }
        if let Some((ping, server, client)) = &mut kernel
            && kernel_started.elapsed() >= Duration::from_secs(3)
            && ping.try_wait().unwrap().is_some()
            && server.is_finished()
            && client.is_finished()
        {
            break kernel.take();
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the RDMA stream and the kernel traffic did not finish in 2 minutes"
        );
    };
    let (ping, server, client) = outcome.unwrap();
    let ping = ping.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&ping.stdout);
    eprintln!(
        "{} RDMA work requests ({} MiB) completed, {during} of them while the kernel traffic ran",
        done,
        (done * MSG) >> 20
    );
    eprintln!(
        "{}",
        report.lines().rev().take(2).collect::<Vec<_>>().join(" | ")
    );
    assert!(ping.status.success(), "ping failed: {report}");
    assert!(
        report.contains("30 packets transmitted, 30 received"),
        "ping lost answers: {report}"
    );
    client.join().unwrap().expect("TCP data intact");
    assert_eq!(server.join().unwrap().expect("TCP server"), TCP_BYTES);
    assert!(
        during > 0,
        "no RDMA completed while the kernel traffic ran: they did not overlap"
    );

    // Drain the stream and check the data it wrote and sent.
    let deadline = Instant::now() + Duration::from_secs(20);
    while done < posted {
        poll_all(&cqa, &mut wcs);
        for c in wcs.drain(..) {
            assert_eq!(c.status, 0, "{c:?}");
            done += 1;
        }
        assert!(Instant::now() < deadline, "the stream did not drain");
    }
    // Even work requests WRITE their source slot into the same slot of B's first half.
    let mut got = vec![0u8; region];
    assert!(mb.read(0, &mut got));
    for slot in (0..WINDOW).step_by(2) {
        let span = slot * MSG..(slot + 1) * MSG;
        assert!(got[span.clone()] == source[span], "WRITE slot {slot}");
    }
    assert!(sends_checked > 0, "no SEND arrived");
}
