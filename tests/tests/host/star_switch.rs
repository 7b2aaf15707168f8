//! The switch of a five-host star on its own: kernel UDP datagrams to port 4791 (which its
//! XDP programs take, as they take RoCEv2) from four hosts at once to host 0, whose port is
//! a 100 Mbit/s bottleneck with a 64 KiB queue that marks ECN-capable frames from 16 KiB
//! queued. The queue must overflow (tail drops), mark, never hold more than its capacity,
//! and deliver exactly what it says it sent; frames between two other hosts pass
//! untouched; ping crosses the router through its kernel meanwhile.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use xroce_impair::switch::{Bottleneck, Marking, Switch, SwitchConfig};
use xroce_lab::star::{Star, StarConfig};
use xroce_lab::{netns, require_root};

const PER_SENDER: u32 = 1000;
const LEN: usize = 1000;
const CAPACITY: usize = 64 << 10;

fn ping(star: &Star, from: usize, to: usize) {
    let out = star
        .command(
            from,
            &[
                "ping",
                "-c",
                "2",
                "-i",
                "0.2",
                "-W",
                "2",
                &star.hosts[to].ipv4.to_string(),
            ],
        )
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("2 packets transmitted, 2 received"),
        "ping {from} -> {to} across the router: {text}"
    );
}

/// Counts datagrams arriving at `host`'s port 4791 until `quiet` passes without one.
fn receiver(
    star: &Star,
    host: usize,
    quiet: Duration,
) -> (std::thread::JoinHandle<u64>, SocketAddr) {
    let to = SocketAddr::from((star.hosts[host].ipv4, 4791));
    let ns = star.hosts[host].netns.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        netns::enter(&ns).unwrap();
        let socket = UdpSocket::bind(to).unwrap();
        // Room for everything the senders send at once (the kernel caps it at rmem_max).
        let size: libc::c_int = 32 << 20;
        // Safety: a valid socket and a pointer to an int of the size given.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&size as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        socket.set_read_timeout(Some(quiet)).unwrap();
        ready_tx.send(()).unwrap();
        let mut n = 0;
        let mut buf = [0u8; 2048];
        while socket.recv(&mut buf).is_ok() {
            n += 1;
        }
        n
    });
    ready_rx.recv().unwrap();
    (thread, to)
}

/// Sends `count` datagrams of `LEN` bytes to `to` from host `from`, ECN-capable (ECT(0)).
fn blast(star: &Star, from: usize, to: SocketAddr, count: u32) {
    star.run_in(from, || {
        let socket = UdpSocket::bind((star.hosts[from].ipv4, 0)).unwrap();
        let tos: libc::c_int = 0x02;
        // Safety: a valid socket and a pointer to an int of the size given.
        let ret = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_TOS,
                (&tos as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(ret, 0, "IP_TOS");
        let datagram = [0x5au8; LEN - 42];
        for k in 0..count {
            socket.send_to(&datagram, to).unwrap();
            if k % 20 == 19 {
                // 160 Mbit/s from each sender, four of them: far more than the port takes,
                // and little enough for no socket or ring on the way to overflow.
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    })
    .unwrap();
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_bottleneck_port_queues_marks_and_drops_and_the_others_forward() {
    require_root();
    let star = Star::new(&StarConfig::default()).expect("a star of five hosts");
    // Kernel UDP checksums would be left to veth's offload, which frames taken out of the
    // kernel by XDP never get: the senders compute them.
    for i in 1..star.hosts.len() {
        let h = &star.hosts[i];
        let out = star
            .command(i, &["ethtool", "-K", &h.interface, "tx", "off"])
            .output()
            .expect("ethtool runs (apt-get install -y ethtool)");
        assert!(out.status.success(), "{out:?}");
    }
    for i in 1..star.hosts.len() {
        ping(&star, i, 0);
    }
    ping(&star, 1, 2);
    let config = SwitchConfig::of(&star, |i| {
        (i == 0).then_some(Bottleneck {
            rate_bps: 100_000_000,
            capacity: CAPACITY,
            marking: Some(Marking {
                kmin: 16 << 10,
                kmax: 48 << 10,
                pmax_percent: 20,
            }),
        })
    });
    let switch = Switch::start(&config).expect("the switch starts");

    // Four senders at once into host 0's port.
    let (rx0, to0) = receiver(&star, 0, Duration::from_millis(1500));
    std::thread::scope(|s| {
        for i in 1..star.hosts.len() {
            let star = &star;
            s.spawn(move || blast(star, i, to0, PER_SENDER));
        }
    });
    let got0 = rx0.join().unwrap();
    // Host 1 to host 2: no bottleneck on the way.
    let (rx2, to2) = receiver(&star, 2, Duration::from_millis(500));
    blast(&star, 1, to2, 200);
    let got2 = rx2.join().unwrap();
    ping(&star, 3, 0);
    assert!(switch.is_running());
    let samples = switch.samples_since(0);
    let c = switch.stop().expect("the switch's counters");
    eprintln!("{c:?}; host 0 got {got0}, host 2 got {got2}");
    let q = c.queues[0].expect("port 0 is a bottleneck");
    assert!(c.queues[1..].iter().all(Option::is_none));
    let sent = u64::from(PER_SENDER) * 4;
    assert_eq!(q.arrived, sent, "every datagram came to the port: {c:?}");
    assert_eq!(q.arrived, q.departed + q.tail_dropped, "{q:?}");
    assert_eq!(
        got0, q.departed,
        "host 0 received what the port sent: {q:?}"
    );
    assert!(q.tail_dropped > 0 && q.marked > 0, "{q:?}");
    assert!(q.max_bytes <= CAPACITY && q.max_bytes > 48 << 10, "{q:?}");
    assert_eq!(q.bytes, 0, "drained");
    assert_eq!(got2, 200, "no bottleneck toward host 2: {c:?}");
    assert_eq!(c.received, sent + 200, "{c:?}");
    assert_eq!(c.forwarded, q.departed + 200, "{c:?}");
    assert_eq!(
        c.unroutable + c.malformed + c.ttl_expired + c.tx_full,
        0,
        "{c:?}"
    );
    assert!(
        samples.iter().any(|(_, depths)| depths[0] > 16 << 10),
        "the samples saw the queue: {} samples",
        samples.len()
    );
}
