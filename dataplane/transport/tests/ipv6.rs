//! RoCEv2 over IPv6: the envelope of the frames a queue pair sends comes from its path: the
//! traffic class (DSCP and ECN), the flow label, the hop limit, the addresses (global and
//! link-local), and the UDP source port rxe would pick; the ICRC, which masks the traffic
//! class, flow label and hop limit, verifies.

use std::net::Ipv6Addr;

use xroce_transport::testing::{Connection, Host, Peer, bring_up, connect, qp_config};
use xroce_transport::{
    Access, Gather, Instant, Path, QpType, SendFlags, SendOp, SendWqe, SgeList, UdDest,
};
use xroce_wire::{Frame, Gid, IpRepr, Ipv6Repr, Psn, Qpn, source_port};

const NOW: Instant = Instant::ZERO;
const QA: Qpn = Qpn::new(0x11);
const QB: Qpn = Qpn::new(0x22);
const BASE: u64 = 0x10_0000;
const KEY: u32 = 0x1234;

fn ipv6_host(n: u8) -> Host {
    let mut h = Host::ipv6(n);
    h.add_region(KEY, BASE, 1 << 16, Access::ALL);
    h
}

fn send(len: u32) -> SendWqe {
    SendWqe {
        wr_id: 1,
        op: SendOp::Send,
        flags: SendFlags::SIGNALED,
        data: Gather::Sges(SgeList::single(BASE, len, KEY)),
        ud: None,
    }
}

/// The first frame `host` sends, taken apart.
fn first_frame(host: &mut Host) -> Vec<u8> {
    let mut buf = vec![0u8; xroce_transport::frame::MAX_FRAME];
    let t = host
        .endpoint
        .poll_transmit(NOW, &mut buf, &mut host.mem)
        .expect("a frame");
    buf.truncate(t.len);
    buf
}

fn ipv6_header(frame: &[u8]) -> (Ipv6Repr, u16) {
    let f = Frame::parse(frame).expect("a frame that parses, its ICRC verified");
    let IpRepr::Ipv6(ip) = f.headers.ip else {
        panic!("not IPv6: {:?}", f.headers.ip);
    };
    (ip, f.headers.udp.src_port)
}

/// A path with a traffic class, a flow label and a hop limit of its own.
fn marked(path: Path) -> Path {
    Path {
        // DSCP 46 (expedited forwarding), ECN 1 (ECT(1)).
        traffic_class: (46 << 2) | 1,
        flow_label: 0x1_2345,
        hop_limit: 33,
        ..path
    }
}

#[test]
fn a_ud_datagram_carries_its_address_handles_traffic_class_flow_label_and_hop_limit() {
    let (mut a, mut b) = (ipv6_host(1), ipv6_host(2));
    connect(
        &mut a,
        QA,
        &mut b,
        QB,
        QpType::Ud,
        &Connection::default(),
        NOW,
    );
    let path = marked(a.path_to(&b));
    let w = SendWqe {
        ud: Some(UdDest {
            path,
            remote_qpn: QB.value(),
            remote_qkey: Connection::default().qkey,
        }),
        ..send(100)
    };
    a.endpoint.post_send(NOW, QA, w).unwrap();
    let (ip, sport) = ipv6_header(&first_frame(&mut a));
    assert_eq!(
        (ip.src_addr, ip.dst_addr),
        (a.gid.to_ipv6(), b.gid.to_ipv6())
    );
    assert_eq!((ip.dscp, ip.ecn), (46, 1));
    assert_eq!((ip.flow_label, ip.hop_limit), (0x1_2345, 33));
    // rxe keeps a UD QP's source port whatever the address handle says.
    assert_eq!(sport, source_port::rxe_initial_udp_source_port(QA));
}

#[test]
fn an_rc_qp_between_link_local_addresses_sends_as_its_path_says() {
    let link_local = |n: u16| Gid::from_ipv6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, n));
    let mut a = ipv6_host(1);
    let mut b = ipv6_host(2);
    // The global address first, the link-local one second, as a port lists them.
    let (a_ll, b_ll) = (link_local(1), link_local(2));
    a.endpoint.set_gids(vec![a.gid, a_ll]);
    b.endpoint.set_gids(vec![b.gid, b_ll]);
    let c = Connection::default();
    let limits = a.endpoint.config().limits;
    a.endpoint
        .create_qp(qp_config(QA, QpType::Rc, c.depth, limits))
        .unwrap();
    b.endpoint
        .create_qp(qp_config(QB, QpType::Rc, c.depth, limits))
        .unwrap();
    let path_ab = Path {
        dgid: b_ll,
        sgid_index: 1,
        ..marked(a.path_to(&b))
    };
    let path_ba = Path {
        dgid: a_ll,
        sgid_index: 1,
        ..b.path_to(&a)
    };
    let peer = |path, qpn, sq: u32, rq: u32| Peer {
        path,
        qpn,
        sq_psn: Psn::new(sq),
        rq_psn: Psn::new(rq),
    };
    bring_up(&mut a, NOW, QA, QpType::Rc, peer(path_ab, QB, 10, 20), &c);
    bring_up(&mut b, NOW, QB, QpType::Rc, peer(path_ba, QA, 20, 10), &c);
    b.endpoint
        .post_recv(
            NOW,
            QB,
            xroce_transport::RecvWqe {
                wr_id: 7,
                sges: SgeList::single(BASE + 0x8000, 256, KEY),
            },
        )
        .unwrap();
    a.endpoint.post_send(NOW, QA, send(100)).unwrap();
    let frame = first_frame(&mut a);
    let (ip, sport) = ipv6_header(&frame);
    assert_eq!((ip.src_addr, ip.dst_addr), (a_ll.to_ipv6(), b_ll.to_ipv6()));
    assert_eq!(
        (ip.dscp, ip.ecn, ip.flow_label, ip.hop_limit),
        (46, 1, 0x1_2345, 33)
    );
    // rdma_get_udp_sport: from the flow label when the path has one.
    assert_eq!(sport, source_port::udp_source_port(0x1_2345, QA, QB));
    // The peer takes it (its path names these addresses) and acknowledges it.
    b.endpoint.handle_frame(NOW, &frame, &mut b.mem);
    let done = b.endpoint.poll_completion().expect("the receive completes");
    assert_eq!((done.wr_id, done.byte_len), (7, 100));
    let (ack, _) = ipv6_header(&first_frame(&mut b));
    assert_eq!(
        (ack.src_addr, ack.dst_addr),
        (b_ll.to_ipv6(), a_ll.to_ipv6())
    );
    assert_eq!(
        (ack.dscp, ack.flow_label),
        (0, 0),
        "B's own path has neither"
    );
}
