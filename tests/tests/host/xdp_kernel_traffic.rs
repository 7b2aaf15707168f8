//! With xroce's XDP program attached and AF_XDP ports in its XSKMAP on both ends of a veth
//! pair, the kernel still gets everything that is not RoCEv2: ping and TCP work, UDP to other
//! ports reaches kernel sockets, while kernel UDP to port 4791 is taken by XDP into the AF_XDP
//! socket. Then nothing is left behind.
//!
//! Needs root (`#[ignore]`d: `cargo xtask test` runs it).

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use crate::xsk_support::{Endpoint, Fixture, in_host};
use xroce_ebpf::Counter;
use xroce_lab::{Lab, Side};

/// Opens both endpoints, runs `f`, and closes the endpoints inside their own namespaces.
fn with_endpoints<T>(
    lab: &Lab,
    f: impl FnOnce(&mut Endpoint, &mut Endpoint) -> T,
) -> (T, [u32; 2]) {
    let mut a = in_host(lab, Side::A, || Endpoint::open(lab, Side::A));
    let mut b = in_host(lab, Side::B, || Endpoint::open(lab, Side::B));
    let ids = [
        a.xdp.program_id().expect("id"),
        b.xdp.program_id().expect("id"),
    ];
    let result = f(&mut a, &mut b);
    in_host(lab, Side::A, move || drop(a));
    in_host(lab, Side::B, move || drop(b));
    (result, ids)
}

fn ping(lab: &Lab, to: IpAddr) {
    let to = to.to_string();
    let output = lab
        .command(Side::A, &["ping", "-c", "3", "-i", "0.2", "-W", "5", &to])
        .output()
        .expect("running ping (apt-get install -y iputils-ping)");
    assert!(
        output.status.success(),
        "ping {to} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// a connects to b over TCP, sends 256 KiB, b echoes it back.
fn tcp_echo(lab: &Lab, to: IpAddr) {
    let addr = SocketAddr::new(to, 7471);
    let listener = in_host(lab, Side::B, || TcpListener::bind(addr)).expect("listening in b");
    let data: Vec<u8> = (0..256 * 1024).map(|i: u32| (i * 7 % 251) as u8).collect();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let (mut conn, _) = listener.accept().expect("accept in b");
            let mut buf = vec![0u8; data.len()];
            conn.read_exact(&mut buf).expect("b reading");
            conn.write_all(&buf).expect("b echoing");
        });
        let mut conn = in_host(lab, Side::A, || {
            TcpStream::connect_timeout(&addr, Duration::from_secs(10))
        })
        .expect("connecting from a");
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        conn.write_all(&data).expect("a sending");
        let mut back = vec![0u8; data.len()];
        conn.read_exact(&mut back).expect("a reading the echo");
        assert!(back == data, "TCP echo over {to} came back different");
    });
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn xdp_ping_and_tcp_still_reach_the_kernel() {
    xroce_lab::require_root();
    let fixture = Fixture::new();
    let lab = &fixture.lab;
    let (moved, ids) = with_endpoints(lab, |_, b| {
        let before = b.xdp.counters().expect("counters");
        ping(lab, lab.b.ipv4.into());
        ping(lab, lab.b.ipv6.into());
        tcp_echo(lab, lab.b.ipv4.into());
        tcp_echo(lab, lab.b.ipv6.into());
        b.xdp.counters().expect("counters").since(&before)
    });
    // Echo requests, TCP segments and neighbour discovery went through XDP to the kernel.
    assert!(
        moved.get(Counter::PassNotUdp) >= 6 + 2,
        "ICMP/TCP passed: {moved:?}"
    );
    assert_eq!(
        moved.get(Counter::Redirected),
        0,
        "nothing was RoCEv2: {moved:?}"
    );
    assert_eq!(moved.get(Counter::PassMalformed), 0, "{moved:?}");
    fixture.finish(&ids);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn xdp_kernel_udp_to_4791_is_taken_and_other_ports_reach_the_kernel() {
    xroce_lab::require_root();
    let fixture = Fixture::new();
    let lab = &fixture.lab;
    let (_, ids) = with_endpoints(lab, |_, b| {
        for to in [IpAddr::from(lab.b.ipv4), IpAddr::from(lab.b.ipv6)] {
            let bind = |port| {
                let socket = in_host(lab, Side::B, || UdpSocket::bind(SocketAddr::new(to, port)))
                    .expect("binding a kernel UDP socket in b");
                socket
                    .set_read_timeout(Some(Duration::from_millis(200)))
                    .expect("timeout");
                socket
            };
            let kernel_roce = bind(4791);
            let kernel_other = bind(4792);
            let unspecified: IpAddr = if to.is_ipv4() {
                std::net::Ipv4Addr::UNSPECIFIED.into()
            } else {
                std::net::Ipv6Addr::UNSPECIFIED.into()
            };
            let sender = in_host(lab, Side::A, || {
                UdpSocket::bind(SocketAddr::new(unspecified, 0))
            })
            .expect("a kernel UDP socket in a");
            let before = b.xdp.counters().expect("counters");

            // To port 4791: XDP takes it into b's AF_XDP socket.
            let roce_payload = format!("kernel udp to 4791 over {to}");
            let frame = {
                let deadline = Instant::now() + Duration::from_secs(10);
                loop {
                    // Resent until it arrives: the first may wait on ARP/ND resolution.
                    sender
                        .send_to(roce_payload.as_bytes(), (to, 4791))
                        .expect("sending to 4791");
                    let batch = b.port.rx().poll();
                    let found = batch
                        .iter()
                        .find(|f| f.ends_with(roce_payload.as_bytes()))
                        .map(<[u8]>::to_vec);
                    drop(batch);
                    if let Some(frame) = found {
                        break frame;
                    }
                    assert!(
                        Instant::now() < deadline,
                        "the 4791 datagram never reached the AF_XDP socket"
                    );
                    b.port.wait_rx(Duration::from_millis(50)).expect("poll");
                }
            };
            let udp_at = frame.len() - roce_payload.len() - 8;
            assert_eq!(&frame[udp_at + 2..udp_at + 4], &4791u16.to_be_bytes());
            let mut buf = [0u8; 2048];
            assert!(
                kernel_roce.recv_from(&mut buf).is_err(),
                "the kernel socket on 4791 got a datagram XDP should have taken"
            );

            // To port 4792: the kernel socket gets it.
            let other_payload = format!("kernel udp to 4792 over {to}");
            sender
                .send_to(other_payload.as_bytes(), (to, 4792))
                .expect("sending to 4792");
            kernel_other
                .set_read_timeout(Some(Duration::from_secs(10)))
                .expect("timeout");
            let (n, from) = kernel_other
                .recv_from(&mut buf)
                .expect("the kernel socket on 4792 got nothing");
            assert_eq!(&buf[..n], other_payload.as_bytes());
            assert_eq!(
                from.ip(),
                if to.is_ipv4() {
                    IpAddr::from(lab.a.ipv4)
                } else {
                    IpAddr::from(lab.a.ipv6)
                }
            );

            let moved = b.xdp.counters().expect("counters").since(&before);
            assert!(moved.get(Counter::Redirected) >= 1, "{moved:?}");
            assert!(moved.get(Counter::PassOtherPort) >= 1, "{moved:?}");
            assert_eq!(moved.get(Counter::PassNoSocket), 0, "{moved:?}");
        }
    });
    fixture.finish(&ids);
}
