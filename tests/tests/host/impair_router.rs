//! The impairment router on its own: kernel UDP datagrams to port 4791 from host `a` to
//! host `b` go through the forwarder on the lab's router (its XDP program takes every UDP
//! 4791 frame), which loses, duplicates and reorders them; what `b` receives must match
//! the forwarder's counters exactly (every datagram lost is missing, every one duplicated
//! arrives twice, reordered ones arrive late), and the datagrams `b`'s kernel accepts prove
//! the rewritten MACs and IPv4 checksums right. Meanwhile ping still crosses the router
//! through its kernel.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use xroce_impair::{Impairer, Impairment};
use xroce_lab::{Lab, LabConfig, Side, netns, require_root};

const DATAGRAMS: u32 = 2000;

fn ping(lab: &Lab) {
    let out = lab
        .command(
            Side::A,
            &[
                "ping",
                "-c",
                "3",
                "-i",
                "0.2",
                "-W",
                "2",
                &lab.b.ipv4.to_string(),
            ],
        )
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("3 packets transmitted, 3 received"),
        "ping across the router: {text}"
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn the_impairment_router_does_what_its_counters_say() {
    require_root();
    let lab = router_lab();
    let impairment = Impairment {
        loss: 0.05,
        duplicate: 0.05,
        reorder: 0.05,
        reorder_gap: 2,
        seed: 99,
        ..Impairment::default()
    };
    let impairer = Impairer::start(&lab, &impairment).expect("the forwarder starts");

    let to = SocketAddr::from((lab.b.ipv4, 4791));
    let receiver = receive_on_b(&lab, to);
    lab.run_in(Side::A, || {
        let socket = UdpSocket::bind((lab.a.ipv4, 0)).unwrap();
        let mut datagram = [0x5au8; 256];
        for seq in 0..DATAGRAMS {
            datagram[..4].copy_from_slice(&seq.to_be_bytes());
            socket.send_to(&datagram, to).unwrap();
            if seq % 20 == 19 {
                // Paced, so that no socket buffer on the way overflows.
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    })
    .unwrap();
    ping(&lab);
    let got: Vec<u32> = receiver
        .join()
        .unwrap()
        .iter()
        .map(|&(seq, _)| seq)
        .collect();
    assert!(impairer.is_running());
    let counters = impairer.stop().expect("the forwarder's counters");
    eprintln!("{counters}");
    let c = counters.a_to_b;

    assert_eq!(c.received, u64::from(DATAGRAMS), "{counters}");
    assert_eq!(
        got.len() as u64,
        c.forwarded,
        "b received what was forwarded"
    );
    let mut seen = vec![0u32; DATAGRAMS as usize];
    for &seq in &got {
        seen[seq as usize] += 1;
    }
    let missing = seen.iter().filter(|&&n| n == 0).count() as u64;
    let twice = seen.iter().filter(|&&n| n == 2).count() as u64;
    assert!(seen.iter().all(|&n| n <= 2));
    let overtaken = got
        .iter()
        .scan(0u32, |highest, &seq| {
            let late = seq < *highest;
            *highest = (*highest).max(seq);
            Some(late)
        })
        .filter(|&late| late)
        .count() as u64;
    eprintln!(
        "b: {} datagrams, {missing} missing, {twice} twice, {overtaken} late",
        got.len()
    );
    assert_eq!(missing, c.dropped);
    assert_eq!(twice, c.duplicated);
    assert!(
        c.dropped > 0 && c.duplicated > 0 && c.reordered > 0,
        "{counters}"
    );
    // Each reordered datagram arrives after a later one, and nothing else does.
    assert_eq!(overtaken, c.reordered);
    assert_eq!((c.ttl_expired, c.malformed, c.tx_full), (0, 0, 0));
    assert_eq!(counters.b_to_a.received, 0, "b sent no RoCEv2 port traffic");
}

/// Receives 256-byte datagrams on `to` in host `b` until none came for 1.5 s: each one's
/// sequence number (its first four bytes) and when it arrived. Returns once the socket is
/// bound.
fn receive_on_b(lab: &Lab, to: SocketAddr) -> std::thread::JoinHandle<Vec<(u32, Instant)>> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let b_ns = lab.b.netns.clone();
    let receiver = std::thread::spawn(move || {
        netns::enter(&b_ns).unwrap();
        let socket = UdpSocket::bind(to).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        // Room for every datagram the router can forward, so that a receiver starved of
        // its core by other work loses none in its socket buffer (it is the forwarder's
        // counters under test, not this thread's scheduling).
        let bytes: libc::c_int = 16 << 20;
        // Safety: a valid socket, an int option, its size.
        let set = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&socket),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&raw const bytes).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(
            set,
            0,
            "SO_RCVBUFFORCE: {}",
            std::io::Error::last_os_error()
        );
        ready_tx.send(()).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        while let Ok(n) = socket.recv(&mut buf) {
            assert_eq!(n, 256, "datagram length");
            got.push((
                u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]),
                Instant::now(),
            ));
        }
        got
    });
    ready_rx.recv().unwrap();
    receiver
}

/// A lab with a router whose `a` computes its UDP checksums (its kernel would leave them to
/// veth's offload, which a frame taken out of the kernel by XDP never gets; RoCEv2 over
/// IPv4 sends UDP checksum 0 and xroce computes IPv6 ones in software), neighbours
/// resolved.
fn router_lab() -> Lab {
    let lab = Lab::new(&LabConfig {
        router: true,
        ..LabConfig::default()
    })
    .expect("lab with a router");
    let ethtool = lab
        .command(Side::A, &["ethtool", "-K", &lab.a.interface, "tx", "off"])
        .output()
        .expect("ethtool runs (apt-get install -y ethtool)");
    assert!(ethtool.status.success(), "{ethtool:?}");
    ping(&lab);
    lab
}

/// A bottleneck on the router: a burst from `a` faster than its rate leaves at its rate,
/// what its queue cannot take is dropped and counted, and nothing else is lost.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn the_impairment_router_holds_its_bottleneck_rate() {
    require_root();
    let lab = router_lab();
    const RATE: u64 = 10_000_000;
    const QUEUE: usize = 32 << 10;
    // Ethernet, IPv4 and UDP headers around 256 bytes.
    const FRAME: u64 = 14 + 20 + 8 + 256;
    let impairment = Impairment {
        rate_bps: RATE,
        queue_bytes: QUEUE,
        ..Impairment::default()
    };
    let impairer = Impairer::start(&lab, &impairment).expect("the forwarder starts");
    let to = SocketAddr::from((lab.b.ipv4, 4791));
    let receiver = receive_on_b(&lab, to);
    // 400 datagrams as fast as a's kernel sends them: 119 KB, ten times what leaves the
    // port while they come (and four times its queue).
    lab.run_in(Side::A, || {
        let socket = UdpSocket::bind((lab.a.ipv4, 0)).unwrap();
        let mut datagram = [0x5au8; 256];
        for seq in 0..400u32 {
            datagram[..4].copy_from_slice(&seq.to_be_bytes());
            socket.send_to(&datagram, to).unwrap();
        }
    })
    .unwrap();
    let got = receiver.join().unwrap();
    let counters = impairer.stop().expect("the forwarder's counters");
    eprintln!("{counters}");
    let c = counters.a_to_b;
    assert!(c.received > 0, "{counters}");
    assert!(
        c.queue_dropped > 0,
        "a burst of 4 queues dropped nothing: {counters}"
    );
    assert_eq!(c.forwarded + c.queue_dropped, c.received, "{counters}");
    assert_eq!(
        got.len() as u64,
        c.forwarded,
        "b received what was forwarded"
    );
    assert!(
        c.queue_max_bytes <= QUEUE as u64 && c.queue_max_bytes > 0,
        "{counters}"
    );
    assert_eq!((c.dropped, c.tx_full, c.malformed), (0, 0, 0), "{counters}");
    // In order (a queue reorders nothing), and no faster than the rate: the frames after
    // the first took at least their bytes' time at the rate to leave (a late forwarder
    // only makes them later; the port's clock starts with the first frame).
    assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "out of order");
    let (first, last) = (got[0].1, got[got.len() - 1].1);
    let least = Duration::from_nanos((got.len() as u64 - 1) * FRAME * 8 * 1_000_000_000 / RATE);
    // The receiving kernel may take the first datagram late and the rest at once: allow
    // one queue's worth of them to arrive together.
    let slack = Duration::from_nanos(QUEUE as u64 * 8 * 1_000_000_000 / RATE);
    assert!(
        last - first + slack >= least,
        "{} datagrams in {:?}: faster than {RATE} bit/s",
        got.len(),
        last - first
    );
}
