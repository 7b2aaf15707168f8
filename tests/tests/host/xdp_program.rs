//! The XDP program, run on crafted frames through `BPF_PROG_TEST_RUN` (no network): each
//! frame gets the right action and moves exactly the right counter by one.
//!
//! Needs root, to load BPF (`#[ignore]`d: `cargo xtask test` runs it).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};

use xroce_ebpf::Counter;
use xroce_engine::xdp::{XdpProgram, action};
use xroce_lab::frame::{Endpoint, UdpFrame};

const ROCE: u16 = 4791;

fn v4_ends(dst_port: u16) -> (Endpoint, Endpoint) {
    (
        Endpoint {
            mac: [2, 0, 0, 0, 0, 1],
            ip: Ipv4Addr::new(10, 1, 0, 1).into(),
            port: 0xc123,
        },
        Endpoint {
            mac: [2, 0, 0, 0, 0, 2],
            ip: Ipv4Addr::new(10, 1, 0, 2).into(),
            port: dst_port,
        },
    )
}

fn v6_ends(dst_port: u16) -> (Endpoint, Endpoint) {
    let ip = |s: &str| -> IpAddr { s.parse::<Ipv6Addr>().expect("literal").into() };
    (
        Endpoint {
            mac: [2, 0, 0, 0, 0, 1],
            ip: ip("fd00:1::1"),
            port: 0xc123,
        },
        Endpoint {
            mac: [2, 0, 0, 0, 0, 2],
            ip: ip("fd00:1::2"),
            port: dst_port,
        },
    )
}

/// A RoCEv2-looking payload: a BTH-sized run of bytes (the program never reads past UDP).
const PAYLOAD: [u8; 16] = [
    0x04, 0, 0xff, 0xff, 0, 0, 0, 0x11, 0x80, 0, 0, 1, 0, 0, 0, 0,
];

fn roce_v4() -> Vec<u8> {
    let (src, dst) = v4_ends(ROCE);
    UdpFrame {
        src,
        dst,
        vlan: None,
        payload: &PAYLOAD,
    }
    .build()
}

fn roce_v6() -> Vec<u8> {
    let (src, dst) = v6_ends(ROCE);
    UdpFrame {
        src,
        dst,
        vlan: None,
        payload: &PAYLOAD,
    }
    .build()
}

/// Runs `frame` through the program and checks the action and that `expected` is the only
/// counter that moved, by exactly one.
fn check(program: &XdpProgram, what: &str, frame: &[u8], want_action: u32, expected: Counter) {
    let before = program.counters().expect("reading counters");
    let got = program
        .test_run(frame)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let moved = program.counters().expect("reading counters").since(&before);
    assert_eq!(got, want_action, "{what}: action");
    for (counter, delta) in moved.iter() {
        let want = u64::from(counter == expected);
        assert_eq!(
            delta,
            want,
            "{what}: counter {} moved by {delta}",
            counter.name()
        );
    }
}

/// An AF_XDP socket (unbound: enough for the XSKMAP and for a test run's redirect verdict).
fn xdp_socket() -> OwnedFd {
    // Safety: socket takes plain integers; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    assert!(
        fd >= 0,
        "socket(AF_XDP): {}",
        std::io::Error::last_os_error()
    );
    // Safety: `fd` is a fresh descriptor that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn load() -> XdpProgram {
    XdpProgram::load(4).expect("loading the XDP program")
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn xdp_roce_frames_redirect_when_the_queue_has_a_socket_and_pass_otherwise() {
    xroce_lab::require_root();
    let mut program = load();
    let mut vlan_v4 = roce_v4();
    vlan_v4.splice(12..12, [0x81, 0x00, 0x00, 0x64]);
    let mut qinq_v6 = roce_v6();
    qinq_v6.splice(12..12, [0x88, 0xa8, 0x00, 0x0a]);
    let frames = [
        ("RoCEv2/IPv4", roce_v4()),
        ("RoCEv2/IPv6", roce_v6()),
        ("RoCEv2/802.1Q/IPv4", vlan_v4),
        ("RoCEv2/802.1ad/IPv6", qinq_v6),
    ];

    // No socket in slot 0 (test runs arrive on queue 0): the kernel gets them.
    for (what, frame) in &frames {
        check(&program, what, frame, action::PASS, Counter::PassNoSocket);
    }
    // A socket in another queue's slot changes nothing for queue 0.
    let other = xdp_socket();
    program
        .insert_socket(3, other.as_fd())
        .expect("XSKMAP slot 3");
    check(
        &program,
        "RoCEv2/IPv4, socket on queue 3 only",
        &frames[0].1,
        action::PASS,
        Counter::PassNoSocket,
    );

    let socket = xdp_socket();
    program
        .insert_socket(0, socket.as_fd())
        .expect("XSKMAP slot 0");
    for (what, frame) in &frames {
        check(&program, what, frame, action::REDIRECT, Counter::Redirected);
    }
    program.remove_socket(0).expect("emptying slot 0");
    program
        .remove_socket(0)
        .expect("emptying an empty slot is fine");
    check(
        &program,
        "RoCEv2/IPv4 after removal",
        &frames[0].1,
        action::PASS,
        Counter::PassNoSocket,
    );
    assert!(
        program.insert_socket(4, socket.as_fd()).is_err(),
        "slot 4 is outside a 4-queue map"
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn xdp_ipv4_options_are_skipped_by_ihl() {
    xroce_lab::require_root();
    let mut program = load();
    let socket = xdp_socket();
    program
        .insert_socket(0, socket.as_fd())
        .expect("XSKMAP slot 0");
    for words in 1..=10usize {
        // Insert `words` 32-bit words of NOP options after the fixed IPv4 header.
        let mut frame = roce_v4();
        frame.splice(34..34, std::iter::repeat_n(1u8, words * 4));
        frame[14] = 0x40 | (5 + words as u8);
        check(
            &program,
            &format!("IPv4 IHL {}", 5 + words),
            &frame,
            action::REDIRECT,
            Counter::Redirected,
        );
        // The same options with the UDP port elsewhere: the port is read after the options.
        let mut other = frame.clone();
        let udp = 34 + words * 4;
        other[udp + 2..udp + 4].copy_from_slice(&53u16.to_be_bytes());
        check(
            &program,
            "IPv4 options, port 53",
            &other,
            action::PASS,
            Counter::PassOtherPort,
        );
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn xdp_everything_that_is_not_roce_passes() {
    xroce_lab::require_root();
    let mut program = load();
    let socket = xdp_socket();
    program
        .insert_socket(0, socket.as_fd())
        .expect("XSKMAP slot 0");

    let (src, dst) = v4_ends(53);
    let dns = UdpFrame {
        src,
        dst,
        vlan: None,
        payload: b"query",
    }
    .build();
    check(
        &program,
        "UDP/IPv4 to port 53",
        &dns,
        action::PASS,
        Counter::PassOtherPort,
    );
    let (src, dst) = v6_ends(4790);
    let udp6 = UdpFrame {
        src,
        dst,
        vlan: None,
        payload: b"x",
    }
    .build();
    check(
        &program,
        "UDP/IPv6 to port 4790",
        &udp6,
        action::PASS,
        Counter::PassOtherPort,
    );
    // Source port 4791 is not the destination port.
    let (mut src, mut dst) = v4_ends(1234);
    src.port = ROCE;
    dst.port = 1234;
    let reversed = UdpFrame {
        src,
        dst,
        vlan: None,
        payload: b"x",
    }
    .build();
    check(
        &program,
        "UDP from port 4791",
        &reversed,
        action::PASS,
        Counter::PassOtherPort,
    );

    let mut tcp = roce_v4();
    tcp[23] = 6;
    check(
        &program,
        "TCP/IPv4 (port bytes 4791)",
        &tcp,
        action::PASS,
        Counter::PassNotUdp,
    );
    let mut icmp = roce_v4();
    icmp[23] = 1;
    check(&program, "ICMP", &icmp, action::PASS, Counter::PassNotUdp);
    let mut nd = roce_v6();
    nd[20] = 58;
    check(
        &program,
        "ICMPv6 (neighbour discovery)",
        &nd,
        action::PASS,
        Counter::PassNotUdp,
    );
    let mut hop_by_hop = roce_v6();
    hop_by_hop[20] = 0;
    check(
        &program,
        "IPv6 hop-by-hop header",
        &hop_by_hop,
        action::PASS,
        Counter::PassNotUdp,
    );

    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0, 1, 0x08, 0, 6, 4, 0, 1]);
    arp.extend_from_slice(&[0; 20]);
    check(&program, "ARP", &arp, action::PASS, Counter::PassNotIp);
    let mut vlan_arp = arp.clone();
    vlan_arp.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
    check(
        &program,
        "802.1Q ARP",
        &vlan_arp,
        action::PASS,
        Counter::PassNotIp,
    );
    let mut lldp = roce_v4();
    lldp[12..14].copy_from_slice(&[0x88, 0xcc]);
    check(&program, "LLDP", &lldp, action::PASS, Counter::PassNotIp);

    // IPv4 fragments of a RoCEv2 datagram: the first (MF) and a later one (offset).
    let mut first = roce_v4();
    first[20..22].copy_from_slice(&0x2000u16.to_be_bytes());
    check(
        &program,
        "IPv4 first fragment",
        &first,
        action::PASS,
        Counter::PassFragment,
    );
    let mut later = roce_v4();
    later[20..22].copy_from_slice(&0x0010u16.to_be_bytes());
    check(
        &program,
        "IPv4 later fragment",
        &later,
        action::PASS,
        Counter::PassFragment,
    );
    let mut df = roce_v4();
    df[20..22].copy_from_slice(&0x4000u16.to_be_bytes());
    check(
        &program,
        "IPv4 with DF only is not a fragment",
        &df,
        action::REDIRECT,
        Counter::Redirected,
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn xdp_malformed_headers_pass() {
    xroce_lab::require_root();
    let mut program = load();
    let socket = xdp_socket();
    program
        .insert_socket(0, socket.as_fd())
        .expect("XSKMAP slot 0");

    let mut short_ihl = roce_v4();
    short_ihl[14] = 0x44;
    check(
        &program,
        "IPv4 IHL 4",
        &short_ihl,
        action::PASS,
        Counter::PassMalformed,
    );
    let mut v6_in_v4 = roce_v4();
    v6_in_v4[14] = 0x65;
    check(
        &program,
        "version 6 in an IPv4 EtherType",
        &v6_in_v4,
        action::PASS,
        Counter::PassMalformed,
    );
    let mut v4_in_v6 = roce_v6();
    v4_in_v6[14] = 0x45;
    check(
        &program,
        "version 4 in an IPv6 EtherType",
        &v4_in_v6,
        action::PASS,
        Counter::PassMalformed,
    );
    // IHL 15 claims 40 bytes of options the frame does not have.
    let mut long_ihl = roce_v4();
    long_ihl.truncate(14 + 20 + 8);
    long_ihl[14] = 0x4f;
    check(
        &program,
        "IPv4 IHL beyond the frame",
        &long_ihl,
        action::PASS,
        Counter::PassMalformed,
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn xdp_truncated_at_every_byte() {
    xroce_lab::require_root();
    let mut program = load();
    let socket = xdp_socket();
    program
        .insert_socket(0, socket.as_fd())
        .expect("XSKMAP slot 0");
    let mut vlan_v4 = roce_v4();
    vlan_v4.splice(12..12, [0x81, 0x00, 0x00, 0x64]);
    // (frame, bytes of headers the program reads)
    let cases = [
        ("IPv4", roce_v4(), 14 + 20 + 8),
        ("IPv6", roce_v6(), 14 + 40 + 8),
        ("802.1Q/IPv4", vlan_v4, 18 + 20 + 8),
    ];
    for (what, frame, headers) in cases {
        // BPF_PROG_TEST_RUN refuses frames shorter than an Ethernet header (as no NIC
        // delivers them), so truncation starts there.
        for len in 14..=frame.len() {
            let truncated = &frame[..len];
            let what = format!("{what} truncated to {len} bytes");
            if len < headers {
                check(
                    &program,
                    &what,
                    truncated,
                    action::PASS,
                    Counter::PassMalformed,
                );
            } else {
                check(
                    &program,
                    &what,
                    truncated,
                    action::REDIRECT,
                    Counter::Redirected,
                );
            }
        }
    }
    assert!(
        program.test_run(&roce_v4()[..13]).is_err(),
        "the kernel refuses a 13-byte frame"
    );
}
