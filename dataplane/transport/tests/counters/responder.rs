//! The RC responder: PSNs, duplicates, resources, RNR and every NAK it sends, with the
//! requester counting each NAK it receives.

use crate::helpers::*;
use xroce_transport::testing::{Connection, Host};
use xroce_transport::{Access, Counter, QpType, RecvWqe, SendOp, SgeList, WcStatus};
use xroce_wire::{NakCode, Opcode, Psn, Rkey, Syndrome};

#[test]
fn a_psn_gap_is_nakked_once_and_the_rest_of_it_dropped() {
    let (mut a, mut b) = pair(QpType::Rc);
    a.endpoint.post_send(NOW, QA, write(64)).unwrap();
    a.endpoint.post_send(NOW, QA, write(64)).unwrap();
    let f = request(&mut a, write(64));
    let before = counters(&b);
    give(&mut b, &f[1]);
    assert_counted(&b, &before, &[(Counter::out_of_seq_request, 1)]);
    give(&mut b, &f[2]);
    assert_counted(
        &b,
        &before,
        &[
            (Counter::out_of_seq_request, 1),
            (Counter::out_of_seq_dropped, 1),
        ],
    );
    let nak = take(&mut b);
    assert_eq!(syndrome(&nak), Syndrome::Nak(NakCode::PsnSequenceError));
    give_counting(&mut a, &nak[0], &[(Counter::rcvd_seq_err, 1)]);
    assert_eq!(a.endpoint.counters().completer_retry_err, 1);
}

#[test]
fn a_duplicate_write_is_acknowledged_again_and_counted_once() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    give(&mut b, &f);
    assert_eq!(take(&mut b).len(), 1);
    give_counting(&mut b, &f, &[(Counter::duplicate_request, 1)]);
    assert_eq!(syndrome(&take(&mut b)), Syndrome::ACK_UNLIMITED);
}

#[test]
fn a_duplicate_read_is_replayed_and_counted_once() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, read(64)).remove(0);
    give(&mut b, &f);
    let first = take(&mut b);
    give_counting(&mut b, &f, &[(Counter::duplicate_request, 1)]);
    assert_eq!(ib_parts(&take(&mut b)), ib_parts(&first));
}

#[test]
fn a_duplicate_read_outside_the_resource_lands_in_duplicate_request_no_resource() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, read(64)).remove(0);
    give(&mut b, &f);
    take(&mut b);
    // The same PSN asking for other bytes than the original request did.
    let other = rewrite(&f, |_, ib, _| {
        let reth = ib.reth.as_mut().unwrap();
        reth.va += 4096;
    });
    give_counting(
        &mut b,
        &other,
        &[(Counter::duplicate_request_no_resource, 1)],
    );
    assert!(take(&mut b).is_empty());
}

#[test]
fn a_duplicate_atomic_is_answered_from_its_resource_and_counted_once() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, fetch_add(1)).remove(0);
    give(&mut b, &f);
    let first = take(&mut b);
    give_counting(&mut b, &f, &[(Counter::duplicate_request, 1)]);
    assert_eq!(
        ib_parts(&take(&mut b)),
        ib_parts(&first),
        "the same original value, not executed again"
    );
}

#[test]
fn a_duplicate_atomic_whose_resource_was_recycled_is_dropped_and_counted() {
    let c = Connection {
        max_rd_atomic: 1,
        ..Connection::default()
    };
    let (mut a, mut b) = pair_with(QpType::Rc, &c);
    let f1 = request(&mut a, fetch_add(1)).remove(0);
    give(&mut b, &f1);
    give(&mut a, &take(&mut b)[0]);
    let f2 = request(&mut a, fetch_add(2)).remove(0);
    give(&mut b, &f2);
    take(&mut b);
    give_counting(&mut b, &f1, &[(Counter::duplicate_request_no_resource, 1)]);
    assert!(take(&mut b).is_empty());
}

#[test]
fn a_send_without_a_receive_is_rnr_nakked() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, wqe(1, SendOp::Send, 0, 64)).remove(0);
    give_counting(&mut b, &f, &[(Counter::send_rnr_err, 1)]);
    let nak = take(&mut b);
    assert!(matches!(syndrome(&nak), Syndrome::RnrNak { .. }));
    give_counting(&mut a, &nak[0], &[(Counter::rcvd_rnr_err, 1)]);
}

/// A NAK as both ends count it: its code, the counter of the responder that sends it and
/// the counter of the requester that receives it.
#[derive(Clone, Copy)]
struct CountedNak {
    code: NakCode,
    sent: Counter,
    rcvd: Counter,
}

const INVALID_REQUEST: CountedNak = CountedNak {
    code: NakCode::InvalidRequest,
    sent: Counter::sent_nak_invalid_request,
    rcvd: Counter::rcvd_nak_invalid_request,
};

const REMOTE_ACCESS: CountedNak = CountedNak {
    code: NakCode::RemoteAccessError,
    sent: Counter::sent_nak_remote_access,
    rcvd: Counter::rcvd_nak_remote_access,
};

const REMOTE_OPERATIONAL: CountedNak = CountedNak {
    code: NakCode::RemoteOperationalError,
    sent: Counter::sent_nak_remote_op,
    rcvd: Counter::rcvd_nak_remote_op,
};

/// B NAKs `frames` with `nak.code`, counted in `nak.sent`; A counts the NAK in `nak.rcvd`.
fn nak_round_trip(a: &mut Host, b: &mut Host, frames: &[Vec<u8>], nak: CountedNak) {
    let before = counters(b);
    for f in frames {
        give(b, f);
    }
    assert_counted(b, &before, &[(nak.sent, 1)]);
    let sent = take(b);
    assert_eq!(syndrome(&sent), Syndrome::Nak(nak.code));
    give_counting(a, &sent[0], &[(nak.rcvd, 1)]);
    assert_eq!(a.endpoint.counters().send_err, 1, "the work request failed");
}

#[test]
fn a_write_to_a_qp_without_remote_write_is_nakked_invalid_request() {
    let c = Connection {
        access: Access::LOCAL_WRITE | Access::REMOTE_READ,
        ..Connection::default()
    };
    let (mut a, mut b) = pair_with(QpType::Rc, &c);
    let f = request(&mut a, write(64));
    nak_round_trip(&mut a, &mut b, &f, INVALID_REQUEST);
}

#[test]
fn a_middle_without_a_first_is_nakked_invalid_request() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(2050));
    // The FIRST, turned into a MIDDLE (same PSN, no RETH).
    let middle = rewrite(&f[0], |_, ib, _| {
        ib.bth.opcode = Opcode::RC_RDMA_WRITE_MIDDLE;
        ib.reth = None;
    });
    nak_round_trip(&mut a, &mut b, &[middle], INVALID_REQUEST);
}

#[test]
fn a_first_shorter_than_the_mtu_is_nakked_invalid_request() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(2050));
    let short = rewrite(&f[0], |_, _, payload| payload.truncate(1000));
    nak_round_trip(&mut a, &mut b, &[short], INVALID_REQUEST);
}

#[test]
fn a_reth_longer_than_2_pow_31_is_nakked_invalid_request() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64));
    let long = rewrite(&f[0], |_, ib, _| {
        ib.reth.as_mut().unwrap().dma_len = (1 << 31) + 1;
    });
    nak_round_trip(&mut a, &mut b, &[long], INVALID_REQUEST);
}

#[test]
fn a_misaligned_atomic_is_nakked_invalid_request() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, fetch_add(1));
    let odd = rewrite(&f[0], |_, ib, _| ib.atomic_eth.as_mut().unwrap().va += 4);
    nak_round_trip(&mut a, &mut b, &[odd], INVALID_REQUEST);
}

#[test]
fn a_read_to_a_qp_that_takes_none_is_nakked_invalid_request() {
    // max_dest_rd_atomic 0 on B (and max_rd_atomic 0 on A, which then posts a WRITE that
    // is turned into a READ on the way).
    let c = Connection {
        max_rd_atomic: 0,
        ..Connection::default()
    };
    let (mut a, mut b) = pair_with(QpType::Rc, &c);
    let f = request(&mut a, write(64));
    let read = rewrite(&f[0], |_, ib, payload| {
        ib.bth.opcode = Opcode::RC_RDMA_READ_REQUEST;
        payload.clear();
    });
    nak_round_trip(&mut a, &mut b, &[read], INVALID_REQUEST);
}

#[test]
fn an_rc_send_longer_than_its_receive_is_nakked_invalid_request() {
    let (mut a, mut b) = pair(QpType::Rc);
    b.endpoint.post_recv(NOW, QB, recv(1, 16)).unwrap();
    let f = request(&mut a, wqe(1, SendOp::Send, 0, 64));
    nak_round_trip(&mut a, &mut b, &f, INVALID_REQUEST);
    let c = b.endpoint.poll_completion().unwrap();
    assert_eq!((c.wr_id, c.status), (1, WcStatus::LocLenErr));
}

#[test]
fn a_send_with_invalidate_of_a_foreign_rkey_is_nakked_invalid_request() {
    let (mut a, mut b) = pair(QpType::Rc);
    b.endpoint.post_recv(NOW, QB, recv(1, 256)).unwrap();
    let inv = SendOp::SendWithInv { rkey: 0x0bad_0001 };
    let f = request(&mut a, wqe(1, inv, 0, 64));
    nak_round_trip(&mut a, &mut b, &f, INVALID_REQUEST);
}

#[test]
fn a_write_with_a_bad_rkey_is_nakked_remote_access() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64));
    let bad = rewrite(&f[0], |_, ib, _| {
        ib.reth.as_mut().unwrap().rkey = Rkey(0xdead);
    });
    nak_round_trip(&mut a, &mut b, &[bad], REMOTE_ACCESS);
}

#[test]
fn a_send_into_a_receive_with_a_bad_lkey_is_nakked_remote_operational() {
    let (mut a, mut b) = pair(QpType::Rc);
    let bad = RecvWqe {
        wr_id: 9,
        sges: SgeList::single(BASE, 64, 0xbad),
    };
    b.endpoint.post_recv(NOW, QB, bad).unwrap();
    let f = request(&mut a, wqe(1, SendOp::Send, 0, 64));
    nak_round_trip(&mut a, &mut b, &f, REMOTE_OPERATIONAL);
}

#[test]
fn a_read_whose_region_goes_away_before_the_response_is_nakked_remote_access() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, read(64));
    let before = counters(&b);
    give(&mut b, &f[0]);
    assert_counted(&b, &before, &[]);
    b.mem.remove(KEY);
    let nak = take(&mut b);
    assert_counted(&b, &before, &[(Counter::sent_nak_remote_access, 1)]);
    assert_eq!(syndrome(&nak), Syndrome::Nak(NakCode::RemoteAccessError));
}

#[test]
fn reads_beyond_the_response_queue_are_dropped_unexecuted_and_counted() {
    // max_dest_rd_atomic 1: room for 1 + 8 responses.
    let c = Connection {
        max_rd_atomic: 1,
        ..Connection::default()
    };
    let (mut a, mut b) = pair_with(QpType::Rc, &c);
    let f = request(&mut a, read(64)).remove(0);
    let at = |i: u32| rewrite(&f, |_, ib, _| ib.bth.psn = Psn::new(PSN_A + i));
    let before = counters(&b);
    for i in 0..9 {
        give(&mut b, &at(i));
    }
    assert_counted(&b, &before, &[]);
    give(&mut b, &at(9));
    assert_counted(&b, &before, &[(Counter::response_queue_full, 1)]);
    // A gap NAK finds no room either: not sent, and not remembered as sent.
    give(&mut b, &at(20));
    assert_counted(&b, &before, &[(Counter::response_queue_full, 2)]);
    assert_eq!(
        take(&mut b).len(),
        9,
        "the nine READs accepted are answered"
    );
    // The READ dropped unexecuted is executed when it comes again.
    give(&mut b, &at(9));
    assert_counted(&b, &before, &[(Counter::response_queue_full, 2)]);
    assert_eq!(take(&mut b).len(), 1);
    give(&mut b, &at(20));
    assert_counted(
        &b,
        &before,
        &[
            (Counter::response_queue_full, 2),
            (Counter::out_of_seq_request, 1),
        ],
    );
    assert_eq!(
        syndrome(&take(&mut b)),
        Syndrome::Nak(NakCode::PsnSequenceError)
    );
}
