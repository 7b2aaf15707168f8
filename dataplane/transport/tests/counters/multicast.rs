//! UD multicast: a packet for the multicast QP (0xFFFFFF) reaches every queue pair attached
//! to the group its destination GID names, each with its own checks, and no other.

use std::net::Ipv4Addr;

use crate::helpers::*;
use xroce_transport::testing::{Connection, Host, connect};
use xroce_transport::{Counter, EndpointError, QpType, SendOp, SendWqe, UdDest, WcStatus};
use xroce_wire::{Frame, Gid, Qpn};

const QA2: Qpn = Qpn::new(0x12);
const QB2: Qpn = Qpn::new(0x23);
const QB3: Qpn = Qpn::new(0x24);

fn group() -> Gid {
    Gid::from_ipv4(Ipv4Addr::new(230, 1, 2, 3))
}

/// A and B with UD QPs QA–QB, QA2–QB2, and QB3 (Q_Key `qkey3`) on B.
fn hosts(qkey3: u32) -> (Host, Host) {
    let (mut a, mut b) = pair(QpType::Ud);
    connect(
        &mut a,
        QA2,
        &mut b,
        QB2,
        QpType::Ud,
        &Connection::default(),
        NOW,
    );
    let other = Connection {
        qkey: qkey3,
        ..Connection::default()
    };
    let mut c = Host::new(3);
    connect(&mut c, Qpn::new(0x31), &mut b, QB3, QpType::Ud, &other, NOW);
    (a, b)
}

/// The frames of a UD SEND of `len` bytes from QA to the group `gid`.
fn to_group(a: &mut Host, gid: Gid, len: u32) -> Vec<Vec<u8>> {
    let mut path = a.path_to(&Host::new(9));
    path.dgid = gid;
    // 01:00:5e and the low 23 bits of 230.1.2.3.
    path.dmac = [0x01, 0x00, 0x5e, 0x01, 0x02, 0x03];
    let w = SendWqe {
        ud: Some(UdDest {
            path,
            remote_qpn: Qpn::MULTICAST.value(),
            remote_qkey: Connection::default().qkey,
        }),
        ..wqe(1, SendOp::Send, 0, len)
    };
    request(a, w)
}

fn post_recvs(b: &mut Host, qpns: &[Qpn]) {
    for (i, &q) in qpns.iter().enumerate() {
        b.endpoint
            .post_recv(NOW, q, recv(100 + i as u64, 256))
            .unwrap();
    }
}

#[test]
fn a_multicast_send_reaches_every_attached_qp_and_no_other() {
    let (mut a, mut b) = hosts(Connection::default().qkey);
    assert_eq!(b.endpoint.attach_mcast(QB, group()), Ok(true));
    assert_eq!(b.endpoint.attach_mcast(QB2, group()), Ok(true));
    post_recvs(&mut b, &[QB, QB2, QB3]);
    let f = to_group(&mut a, group(), 64);
    assert_eq!(f.len(), 1);
    let parsed = Frame::parse(&f[0]).unwrap();
    assert_eq!(parsed.ib.bth.dest_qp, Qpn::MULTICAST);
    assert_eq!(
        parsed.headers.ethernet.dst_addr.0,
        [0x01, 0x00, 0x5e, 0x01, 0x02, 0x03]
    );
    let before = b.endpoint.counters().rcvd_pkts;
    give_counting(&mut b, &f[0], &[]);
    assert_eq!(b.endpoint.counters().rcvd_pkts - before, 2);
    let mut got = Vec::new();
    while let Some(c) = b.endpoint.poll_completion() {
        assert_eq!(c.status, WcStatus::Success);
        assert_eq!(c.byte_len, 40 + 64);
        assert_eq!(c.src_qp, QA.value());
        got.push(c.qpn);
    }
    // In the order they attached; QB3, not attached, has its receive still.
    assert_eq!(got, [QB.value(), QB2.value()]);
    // The GRH each received names the group as the destination (IPv4: the header's
    // destination address ends the 40 bytes).
    let region = b.mem.region(0);
    let at = 0x4000 + 36;
    assert_eq!(region.bytes[at..at + 4], [230, 1, 2, 3]);
}

#[test]
fn each_member_checks_its_own_keys() {
    let (mut a, mut b) = hosts(0x5555);
    for q in [QB, QB3] {
        b.endpoint.attach_mcast(q, group()).unwrap();
    }
    post_recvs(&mut b, &[QB, QB3]);
    let f = to_group(&mut a, group(), 64);
    // QB3's Q_Key is another: its copy is dropped and counted, QB still takes its own.
    give_counting(&mut b, &f[0], &[(Counter::qkey_viol_cntr, 1)]);
    let c = b.endpoint.poll_completion().unwrap();
    assert_eq!((c.qpn, c.status), (QB.value(), WcStatus::Success));
    assert!(b.endpoint.poll_completion().is_none());
    // A member without a receive: its copy is dropped as any UD message without one.
    let f = to_group(&mut a, group(), 64);
    give_counting(
        &mut b,
        &f[0],
        &[(Counter::rcvd_no_recv_wqe, 1), (Counter::qkey_viol_cntr, 1)],
    );
}

#[test]
fn a_packet_for_a_group_nobody_joined_lands_in_rcvd_mcast_unjoined() {
    let (mut a, mut b) = hosts(Connection::default().qkey);
    post_recvs(&mut b, &[QB]);
    let f = to_group(&mut a, group(), 64);
    give_counting(&mut b, &f[0], &[(Counter::rcvd_mcast_unjoined, 1)]);
    // Joined to another group only.
    let other = Gid::from_ipv4(Ipv4Addr::new(230, 1, 2, 4));
    b.endpoint.attach_mcast(QB, other).unwrap();
    give_counting(&mut b, &f[0], &[(Counter::rcvd_mcast_unjoined, 1)]);
    // A copy another poller handed over is not counted: that poller took the frame.
    let before = counters(&b);
    b.endpoint.handle_multicast_copy(NOW, &f[0], &mut b.mem);
    assert_counted(&b, &before, &[]);
    assert!(b.endpoint.poll_completion().is_none());
}

#[test]
fn detached_destroyed_and_destroyed_lingering_qps_leave_their_groups() {
    let (mut a, mut b) = hosts(Connection::default().qkey);
    for q in [QB, QB2, QB3] {
        b.endpoint.attach_mcast(q, group()).unwrap();
    }
    assert_eq!(
        b.endpoint.mcast_members(group()),
        [QB.value(), QB2.value(), QB3.value()]
    );
    b.endpoint.detach_mcast(QB2, group()).unwrap();
    assert_eq!(
        b.endpoint.detach_mcast(QB2, group()),
        Err(EndpointError::NotAttached(QB2, group()))
    );
    b.endpoint.destroy_qp(QB3).unwrap();
    assert_eq!(b.endpoint.mcast_members(group()), [QB.value()]);
    b.endpoint.close_qp(NOW, QB).unwrap();
    assert_eq!(b.endpoint.mcast_members(group()), [] as [u32; 0]);
    let f = to_group(&mut a, group(), 64);
    give_counting(&mut b, &f[0], &[(Counter::rcvd_mcast_unjoined, 1)]);
}

#[test]
fn only_a_ud_qp_joins_and_only_a_multicast_gid() {
    let (_, mut b) = hosts(Connection::default().qkey);
    let (_, mut rc) = pair(QpType::Rc);
    assert_eq!(
        rc.endpoint.attach_mcast(QB, group()),
        Err(EndpointError::NotUd(QB))
    );
    let unicast = Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 1));
    assert_eq!(
        b.endpoint.attach_mcast(QB, unicast),
        Err(EndpointError::NotMulticast(unicast))
    );
    assert_eq!(
        b.endpoint.attach_mcast(Qpn::new(0x77), group()),
        Err(EndpointError::NoSuchQp(Qpn::new(0x77)))
    );
    let v6 = Gid::from_ipv6("ff0e::1:2".parse().unwrap());
    assert_eq!(b.endpoint.attach_mcast(QB, v6), Ok(true));
    // A second attach of the same group is no second membership.
    assert_eq!(b.endpoint.attach_mcast(QB, v6), Ok(false));
    assert_eq!(b.endpoint.mcast_members(v6), [QB.value()]);
}
