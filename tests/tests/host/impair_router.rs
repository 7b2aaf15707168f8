//! The impairment router on its own: kernel UDP datagrams to port 4791 from host `a` to
//! host `b` go through the forwarder on the lab's router (its XDP program takes every UDP
//! 4791 frame), which loses, duplicates and reorders them; what `b` receives must match
//! the forwarder's counters exactly (every datagram lost is missing, every one duplicated
//! arrives twice, reordered ones arrive late), and the datagrams `b`'s kernel accepts prove
//! the rewritten MACs and IPv4 checksums right. Meanwhile ping still crosses the router
//! through its kernel.

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

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
    let lab = Lab::new(&LabConfig {
        router: true,
        ..LabConfig::default()
    })
    .expect("lab with a router");
    // The kernel of `a` would leave UDP checksums to veth's offload, which a frame taken
    // out of the kernel by XDP never gets: `a` computes them itself. (RoCEv2 over IPv4
    // sends UDP checksum 0; xroce computes IPv6 ones in software.)
    let ethtool = lab
        .command(Side::A, &["ethtool", "-K", &lab.a.interface, "tx", "off"])
        .output()
        .expect("ethtool runs (apt-get install -y ethtool)");
    assert!(ethtool.status.success(), "{ethtool:?}");
    // Neighbours resolved on both sides before the first datagram.
    ping(&lab);
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
            got.push(u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]));
        }
        got
    });
    ready_rx.recv().unwrap();
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
    let got = receiver.join().unwrap();
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
