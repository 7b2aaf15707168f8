//! The headers around a QP's packets are written once per path and copied per frame: what
//! they were made from changing (the source GID in the table, the path) gives frames with
//! the new headers, never stale ones.

use std::net::{IpAddr, Ipv4Addr};

use xroce_transport::testing::{Connection, Host, connect};
use xroce_transport::{Access, Gather, Instant, QpType, SendFlags, SendOp, SendWqe, SgeList};
use xroce_wire::{Frame, Gid, Qpn};

const NOW: Instant = Instant::ZERO;
const KEY: u32 = 0x1234;
const BASE: u64 = 0x10_0000;

fn send_one(a: &mut Host, qpn: Qpn, wr_id: u64) -> Vec<u8> {
    let w = SendWqe {
        wr_id,
        op: SendOp::Write {
            remote_addr: BASE,
            rkey: KEY | 0x8000_0000,
        },
        flags: SendFlags::SIGNALED,
        data: Gather::Sges(SgeList::single(BASE, 8, KEY)),
        ud: None,
    };
    a.endpoint.post_send(NOW, qpn, w).unwrap();
    let mut buf = vec![0u8; xroce_transport::frame::MAX_FRAME];
    let t = a
        .endpoint
        .poll_transmit(NOW, &mut buf, &mut a.mem)
        .expect("a frame");
    buf.truncate(t.len);
    buf
}

#[test]
fn a_new_source_gid_shows_in_the_next_frame() {
    let mut a = Host::new(1);
    let mut b = Host::new(2);
    a.add_region(KEY, BASE, 4096, Access::ALL);
    b.add_region(KEY, BASE, 4096, Access::ALL);
    let (qa, qb) = (Qpn::new(0x11), Qpn::new(0x22));
    connect(
        &mut a,
        qa,
        &mut b,
        qb,
        QpType::Rc,
        &Connection::default(),
        NOW,
    );

    let first = send_one(&mut a, qa, 1);
    let f = Frame::parse(&first).expect("a valid frame");
    assert_eq!(
        f.headers.ip.src_addr(),
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))
    );
    let id1 = match f.headers.ip {
        xroce_wire::IpRepr::Ipv4(r) => r.identification,
        _ => unreachable!("IPv4"),
    };

    // The host's address changes under the QP (same GID index).
    a.endpoint
        .set_gids(vec![Gid::from_ipv4(Ipv4Addr::new(10, 9, 9, 1))]);
    let second = send_one(&mut a, qa, 2);
    let f = Frame::parse(&second).expect("a valid frame, ICRC included");
    assert_eq!(
        f.headers.ip.src_addr(),
        IpAddr::V4(Ipv4Addr::new(10, 9, 9, 1)),
        "the template was rebuilt"
    );
    let id2 = match f.headers.ip {
        xroce_wire::IpRepr::Ipv4(r) => r.identification,
        _ => unreachable!("IPv4"),
    };
    assert_eq!(
        id2,
        id1.wrapping_add(1),
        "each frame its own identification"
    );
    // Everything else about the envelope is as before.
    let old = Frame::parse(&first).unwrap();
    assert_eq!(f.headers.ethernet, old.headers.ethernet);
    assert_eq!(f.headers.udp, old.headers.udp);
    assert_eq!(f.headers.ip.dst_addr(), old.headers.ip.dst_addr());
}
