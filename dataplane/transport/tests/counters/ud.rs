//! UD: Q_Keys, missing receives, lengths, and a destination the port cannot reach.

use crate::helpers::*;
use xroce_transport::testing::Connection;
use xroce_transport::{Counter, QpState, QpType, SendOp, SendWqe, UdDest, WcStatus};
use xroce_wire::Frame;

#[test]
fn a_ud_send_with_a_foreign_qkey_lands_in_qkey_viol_cntr() {
    let (mut a, mut b) = pair(QpType::Ud);
    b.endpoint.post_recv(NOW, QB, recv(1, 256)).unwrap();
    let f = ud_send(&mut a, &b, 64, 0x1234);
    give_counting(&mut b, &f[0], &[(Counter::qkey_viol_cntr, 1)]);
}

#[test]
fn a_controlled_qkey_in_a_work_request_sends_the_qps_own() {
    // IBTA 10.2.5: a work request's Q_Key with the high bit set stands for the sending
    // QP's own Q_Key (the same on both sides here), so the datagram gets in.
    let (mut a, mut b) = pair(QpType::Ud);
    b.endpoint.post_recv(NOW, QB, recv(1, 256)).unwrap();
    let f = ud_send(&mut a, &b, 64, 0x8000_0001);
    let deth = Frame::parse(&f[0]).unwrap().ib.deth.unwrap();
    assert_eq!(deth.qkey.0, Connection::default().qkey);
    give_counting(&mut b, &f[0], &[]);
    assert_eq!(
        b.endpoint.poll_completion().unwrap().status,
        WcStatus::Success
    );
}

#[test]
fn a_ud_send_without_a_receive_lands_in_rcvd_no_recv_wqe() {
    let (mut a, mut b) = pair(QpType::Ud);
    let qkey = Connection::default().qkey;
    let f = ud_send(&mut a, &b, 64, qkey);
    give_counting(&mut b, &f[0], &[(Counter::rcvd_no_recv_wqe, 1)]);
}

#[test]
fn a_ud_send_too_long_for_the_receive_lands_in_rcvd_length_err() {
    let (mut a, mut b) = pair(QpType::Ud);
    // 40 bytes of GRH + 64 of payload do not fit in 100.
    b.endpoint.post_recv(NOW, QB, recv(1, 100)).unwrap();
    let qkey = Connection::default().qkey;
    let f = ud_send(&mut a, &b, 64, qkey);
    let before = counters(&b);
    give(&mut b, &f[0]);
    assert_counted(&b, &before, &[(Counter::rcvd_length_err, 1)]);
}

#[test]
fn a_ud_send_to_an_address_of_the_other_family_fails_instead_of_waiting() {
    let (mut a, b) = pair(QpType::Ud);
    let mut path = a.path_to(&b);
    path.dgid = xroce_wire::Gid::from_ipv6("fd00::2".parse().unwrap());
    let w = SendWqe {
        ud: Some(UdDest {
            path,
            remote_qpn: QB.value(),
            remote_qkey: Connection::default().qkey,
        }),
        ..wqe(7, SendOp::Send, 0, 64)
    };
    let before = counters(&a);
    assert!(request(&mut a, w).is_empty());
    assert_counted(&a, &before, &[]);
    assert_eq!(a.endpoint.counters().send_err, 1);
    let c = a.endpoint.poll_completion().unwrap();
    assert_eq!(
        (c.wr_id, c.status),
        (7, xroce_transport::WcStatus::LocQpOpErr)
    );
    assert_eq!(a.endpoint.qp(QA).unwrap().state(), QpState::Sqe);
}
