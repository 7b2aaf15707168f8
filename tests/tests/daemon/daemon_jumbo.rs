//! Path MTU from the link MTU, end to end: on a 9000-byte link the daemons offer path MTU
//! 4096 and carry it in AF_XDP multi-buffer frames (a 4096-byte payload does not fit one
//! 4 KiB UMEM frame); on a 1500-byte link they offer 1024, in single frames. WRITE, READ and
//! SEND of 1 MiB run at the path MTU the port offers, their data checked, and each side's
//! counters show how many packets crossed and in how many frames. A frame longer than the
//! daemon takes lands in its counter.

use verbs_shm::client::{
    Access, Connection, Context, Mr, Pd, Qp, QpInit, QpType, RecvWr, SendOp, SendWr, Sge,
};
use xroce_lab::daemons::{TwoHosts, counter, wait_completions};
use xroce_lab::{LabConfig, Side, require_root};

/// The message size.
const MESSAGE: usize = 1 << 20;

#[test]
#[ignore = "needs root: network namespaces, XDP and AF_XDP"]
fn rc_at_path_mtu_4096_on_a_9000_byte_link() {
    rc_at_the_link_path_mtu(9000, 4096, &[]);
}

/// The same with the XDP program in generic (SKB) mode, where the kernel builds the
/// multi-buffer descriptors from an skb rather than from veth's XDP buffers.
#[test]
#[ignore = "needs root: network namespaces, XDP and AF_XDP"]
fn rc_at_path_mtu_4096_on_a_9000_byte_link_with_generic_xdp() {
    rc_at_the_link_path_mtu(9000, 4096, &["--xdp", "generic"]);
}

#[test]
#[ignore = "needs root: network namespaces, XDP and AF_XDP"]
fn rc_at_path_mtu_1024_on_a_1500_byte_link() {
    rc_at_the_link_path_mtu(1500, 1024, &[]);
}

/// One side: its context, region and queue pair.
struct End {
    ctx: Context,
    _pd: Pd,
    mr: Mr,
    cq: verbs_shm::client::Cq,
    qp: Qp,
}

fn end(hosts: &TwoHosts, side: Side) -> End {
    let ctx = hosts.open(side).expect("open the device");
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.alloc_mr(4 * MESSAGE, Access::ALL).unwrap();
    let cq = ctx.create_cq(256, None).unwrap();
    let qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq, &cq)).unwrap();
    End {
        ctx,
        _pd: pd,
        mr,
        cq,
        qp,
    }
}

/// The counters of `ctx` named `names`, in order.
fn counters(ctx: &Context, names: &[&str]) -> Vec<u64> {
    let stats = ctx.stats().expect("stats");
    names.iter().map(|n| counter(&stats, n)).collect()
}

const SENT: &str = "sent_pkts";
const TX_MULTI: &str = "xsk_tx_multi_buffer_packets";
const RX_MULTI: &str = "xsk_rx_multi_buffer_packets";
const OVERSIZED: &str = "xsk_rx_oversized_drops";

fn rc_at_the_link_path_mtu(link_mtu: u32, path_mtu: usize, extra: &[&str]) {
    require_root();
    let lab = LabConfig {
        mtu: link_mtu,
        ..LabConfig::default()
    };
    let hosts = TwoHosts::start(&lab, extra).expect("lab with two daemons");
    let (a, b) = (end(&hosts, Side::A), end(&hosts, Side::B));
    let code = xroce_wire::IbMtu::from_bytes(path_mtu).unwrap().code();
    for e in [&a, &b] {
        let port = e.ctx.query_port().unwrap();
        assert_eq!(
            (port.netdev_mtu, port.active_mtu),
            (link_mtu, u32::from(code)),
            "the port's active MTU on a {link_mtu}-byte link"
        );
    }
    for (from, to, avs) in [(&a, &b, Side::A), (&b, &a, Side::B)] {
        let mut conn = Connection::new(hosts.av(avs), to.qp.qpn(), 0x100, 0x100);
        conn.path_mtu = u32::from(code);
        from.qp
            .connect(&conn)
            .expect("connect at the port's path MTU");
    }
    // A packet is multi-buffer when it does not fit one 4 KiB UMEM frame.
    let multi = path_mtu > 2048;
    let packets = (MESSAGE / path_mtu) as u64;
    let data: Vec<u8> = (0..MESSAGE as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();

    // WRITE A -> B.
    assert!(a.mr.write(0, &data));
    let before = counters(&a.ctx, &[SENT, TX_MULTI]);
    let sge = [Sge {
        addr: a.mr.addr(),
        length: MESSAGE as u32,
        lkey: a.mr.lkey(),
    }];
    let write = SendOp::Write {
        remote_addr: b.mr.addr() + MESSAGE as u64,
        rkey: b.mr.rkey(),
    };
    a.qp.post_send(&[SendWr::new(1, write, &sge)]).unwrap();
    let c = wait_completions(&a.cq, 1);
    assert_eq!((c[0].wr_id, c[0].status), (1, 0), "{c:?}");
    let mut got = vec![0u8; MESSAGE];
    assert!(b.mr.read(MESSAGE, &mut got));
    assert!(got == data, "WRITE data differs");
    let after = counters(&a.ctx, &[SENT, TX_MULTI]);
    // One packet per path MTU of payload: the wire carried full path-MTU packets.
    assert_eq!(after[0] - before[0], packets, "WRITE packets at {path_mtu}");
    assert_eq!(
        after[1] - before[1],
        if multi { packets } else { 0 },
        "WRITE packets sent in two frames"
    );

    // READ it back into A (B's responder sends the data).
    let before = counters(&b.ctx, &[SENT, TX_MULTI]);
    let sge = [Sge {
        addr: a.mr.addr() + 2 * MESSAGE as u64,
        length: MESSAGE as u32,
        lkey: a.mr.lkey(),
    }];
    let read = SendOp::Read {
        remote_addr: b.mr.addr() + MESSAGE as u64,
        rkey: b.mr.rkey(),
    };
    a.qp.post_send(&[SendWr::new(2, read, &sge)]).unwrap();
    let c = wait_completions(&a.cq, 1);
    assert_eq!(
        (c[0].wr_id, c[0].status, c[0].byte_len),
        (2, 0, MESSAGE as u32),
        "{c:?}"
    );
    let mut back = vec![0u8; MESSAGE];
    assert!(a.mr.read(2 * MESSAGE, &mut back));
    assert!(back == data, "READ data differs");
    let after = counters(&b.ctx, &[SENT, TX_MULTI]);
    assert_eq!(
        after[0] - before[0],
        packets,
        "READ responses at {path_mtu}"
    );
    assert_eq!(after[1] - before[1], if multi { packets } else { 0 });

    // SEND B -> A into a posted 1 MiB receive.
    let rsge = [Sge {
        addr: a.mr.addr() + 3 * MESSAGE as u64,
        length: MESSAGE as u32,
        lkey: a.mr.lkey(),
    }];
    a.qp.post_recv(&[RecvWr {
        wr_id: 3,
        sges: &rsge,
    }])
    .unwrap();
    let reversed: Vec<u8> = data.iter().rev().copied().collect();
    assert!(b.mr.write(0, &reversed));
    let ssge = [Sge {
        addr: b.mr.addr(),
        length: MESSAGE as u32,
        lkey: b.mr.lkey(),
    }];
    b.qp.post_send(&[SendWr::new(4, SendOp::Send, &ssge)])
        .unwrap();
    let c = wait_completions(&a.cq, 1);
    assert_eq!(
        (c[0].wr_id, c[0].status, c[0].byte_len),
        (3, 0, MESSAGE as u32),
        "{c:?}"
    );
    assert_eq!(wait_completions(&b.cq, 1)[0].status, 0);
    let mut sent = vec![0u8; MESSAGE];
    assert!(a.mr.read(3 * MESSAGE, &mut sent));
    assert!(sent == reversed, "SEND data differs");

    // Each side received in two frames what the other sent in two, and dropped nothing
    // as too long: A got the READ responses and the SEND, B the WRITE.
    let (ra, rb) = (
        counters(&a.ctx, &[RX_MULTI, OVERSIZED]),
        counters(&b.ctx, &[RX_MULTI, OVERSIZED]),
    );
    let expect = |n: u64| if multi { n } else { 0 };
    assert_eq!(
        ra,
        vec![expect(2 * packets), 0],
        "A: {RX_MULTI}, {OVERSIZED}"
    );
    assert_eq!(rb, vec![expect(packets), 0], "B: {RX_MULTI}, {OVERSIZED}");
}

/// On a 9000-byte link: a UDP datagram to port 4791 whose frame spans three UMEM frames
/// (more than a multi-buffer packet may) is dropped by the daemon, in one counter, and the
/// queue pairs go on working.
#[test]
#[ignore = "needs root: network namespaces, XDP and AF_XDP"]
fn a_frame_longer_than_the_daemon_takes_lands_in_a_counter() {
    require_root();
    let lab = LabConfig {
        mtu: 9000,
        ..LabConfig::default()
    };
    let hosts = TwoHosts::start(&lab, &[]).expect("lab with two daemons");
    let a = end(&hosts, Side::A);
    let to = std::net::SocketAddr::from((hosts.lab.host(Side::A).ipv4, 4791));
    // 8000 bytes of UDP payload: an 8042-byte frame, over two frames' 7680.
    let sent = hosts
        .lab
        .run_in(Side::B, move || {
            let socket = std::net::UdpSocket::bind("0.0.0.0:0")?;
            socket.send_to(&[0x5a; 8000], to)
        })
        .expect("enter host b")
        .expect("send the datagram");
    assert_eq!(sent, 8000);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let got = counters(&a.ctx, &[OVERSIZED, RX_MULTI]);
        if got[0] > 0 {
            assert_eq!(got, vec![1, 0], "{OVERSIZED}, {RX_MULTI}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no oversized frame counted: {:?}",
            a.ctx.stats()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The port still takes two-frame packets: a WRITE of 1 MiB at path MTU 4096 from A to
    // B and its acknowledgements cross as usual.
    drop(a);
    let (a, b) = (end(&hosts, Side::A), end(&hosts, Side::B));
    for (from, to, avs) in [(&a, &b, Side::A), (&b, &a, Side::B)] {
        let mut conn = Connection::new(hosts.av(avs), to.qp.qpn(), 0x100, 0x100);
        conn.path_mtu = u32::from(xroce_wire::IbMtu::Mtu4096.code());
        from.qp.connect(&conn).expect("connect at path MTU 4096");
    }
    let data = vec![0xc3u8; MESSAGE];
    assert!(a.mr.write(0, &data));
    let sge = [Sge {
        addr: a.mr.addr(),
        length: MESSAGE as u32,
        lkey: a.mr.lkey(),
    }];
    let write = SendOp::Write {
        remote_addr: b.mr.addr(),
        rkey: b.mr.rkey(),
    };
    a.qp.post_send(&[SendWr::new(1, write, &sge)]).unwrap();
    let c = wait_completions(&a.cq, 1);
    assert_eq!((c[0].wr_id, c[0].status), (1, 0), "{c:?}");
    let mut got = vec![0u8; MESSAGE];
    assert!(b.mr.read(0, &mut got));
    assert!(got == data, "WRITE data differs");
}
