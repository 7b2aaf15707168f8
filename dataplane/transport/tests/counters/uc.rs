//! UC: broken messages, duplicates, missing receives, lengths and keys.

use crate::helpers::*;
use xroce_transport::testing::Connection;
use xroce_transport::{Access, Counter, QpType, SendOp};
use xroce_wire::{RethRepr, Rkey};

#[test]
fn uc_packets_of_a_broken_message_land_in_uc_dropped() {
    let (mut a, mut b) = pair(QpType::Uc);
    let f = request(&mut a, write(3000));
    assert_eq!(f.len(), 3);
    let before = counters(&b);
    give(&mut b, &f[0]);
    give(&mut b, &f[2]);
    assert_counted(&b, &before, &[(Counter::uc_dropped, 1)]);
}

#[test]
fn a_uc_duplicate_lands_in_duplicate_request() {
    let (mut a, mut b) = pair(QpType::Uc);
    let f = request(&mut a, write(64));
    give(&mut b, &f[0]);
    give_counting(&mut b, &f[0], &[(Counter::duplicate_request, 1)]);
}

#[test]
fn a_uc_send_without_a_receive_lands_in_rcvd_no_recv_wqe() {
    let (mut a, mut b) = pair(QpType::Uc);
    let f = request(&mut a, wqe(1, SendOp::Send, 0, 64));
    give_counting(&mut b, &f[0], &[(Counter::rcvd_no_recv_wqe, 1)]);
}

#[test]
fn a_uc_send_too_long_for_the_receive_lands_in_rcvd_length_err() {
    let (mut a, mut b) = pair(QpType::Uc);
    b.endpoint.post_recv(NOW, QB, recv(1, 64)).unwrap();
    let f = request(&mut a, wqe(1, SendOp::Send, 0, 128));
    give_counting(&mut b, &f[0], &[(Counter::rcvd_length_err, 1)]);
    assert_eq!(b.endpoint.qp(QB).unwrap().recv_queue_len(), 1, "reused");
}

#[test]
fn a_uc_write_with_a_bad_rkey_lands_in_rcvd_rkey_violation() {
    let (mut a, mut b) = pair(QpType::Uc);
    let f = request(&mut a, write(64));
    let bad = rewrite(&f[0], |_, ib, _| {
        ib.reth = Some(RethRepr {
            rkey: Rkey(0xdead),
            ..ib.reth.unwrap()
        });
    });
    give_counting(&mut b, &bad, &[(Counter::rcvd_rkey_violation, 1)]);
}

#[test]
fn a_uc_write_to_a_qp_without_remote_write_lands_in_rcvd_rkey_violation() {
    let c = Connection {
        access: Access::LOCAL_WRITE,
        ..Connection::default()
    };
    let (mut a, mut b) = pair_with(QpType::Uc, &c);
    let f = request(&mut a, write(64));
    give_counting(&mut b, &f[0], &[(Counter::rcvd_rkey_violation, 1)]);
}
