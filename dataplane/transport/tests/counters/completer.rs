//! The completer: responses that are stale, unexpected, out of sequence or of the wrong
//! kind.

use crate::helpers::*;
use xroce_transport::{Counter, Gather, QpState, QpType, SendOp, SgeList, WcStatus};
use xroce_wire::{AethRepr, BthRepr, IbRepr, Opcode, Psn, Syndrome};

#[test]
fn a_stale_ack_lands_in_duplicate_response() {
    let (mut a, mut b) = pair(QpType::Rc);
    a.endpoint.post_send(NOW, QA, write(64)).unwrap();
    let f = request(&mut a, write(64));
    give(&mut b, &f[0]);
    let ack1 = take(&mut b);
    give(&mut a, &ack1[0]);
    give_counting(&mut a, &ack1[0], &[(Counter::duplicate_response, 1)]);
}

#[test]
fn an_ack_with_nothing_outstanding_lands_in_unexpected_response() {
    let (mut a, b) = pair(QpType::Rc);
    let f = response(&a, &b, ack(PSN_A, Syndrome::ACK_UNLIMITED, 1), &[]);
    give_counting(&mut a, &f, &[(Counter::unexpected_response, 1)]);
}

#[test]
fn a_read_response_after_a_lost_one_lands_in_response_out_of_seq() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, read(2050));
    give(&mut b, &f[0]);
    let responses = take(&mut b);
    assert_eq!(responses.len(), 3);
    give_counting(&mut a, &responses[1], &[(Counter::response_out_of_seq, 1)]);
}

#[test]
fn a_plain_ack_for_a_read_lands_in_response_out_of_seq() {
    let (mut a, b) = pair(QpType::Rc);
    request(&mut a, read(64));
    let f = response(&a, &b, ack(PSN_A, Syndrome::ACK_UNLIMITED, 1), &[]);
    give_counting(&mut a, &f, &[(Counter::response_out_of_seq, 1)]);
    assert_eq!(
        a.endpoint.counters().completer_retry_err,
        1,
        "resent at once"
    );
}

#[test]
fn a_read_response_into_a_local_buffer_that_refuses_it_fails_the_read() {
    // rxe's `do_read`: the requester's own buffer refuses the data (here its lkey is not
    // a region's): the READ completes with a local protection error; no drop, no NAK.
    let (mut a, mut b) = pair(QpType::Rc);
    let op = SendOp::Read {
        remote_addr: BASE + 0x8000,
        rkey: RKEY,
    };
    let mut w = wqe(1, op, 0, 64);
    w.data = Gather::Sges(SgeList::single(BASE, 64, 0x9999));
    let f = request(&mut a, w);
    give(&mut b, &f[0]);
    let response = take(&mut b);
    give_counting(&mut a, &response[0], &[]);
    let c = a.endpoint.poll_completion().unwrap();
    assert_eq!((c.wr_id, c.status), (1, WcStatus::LocProtErr));
}

#[test]
fn a_read_response_for_a_write_lands_in_bad_response() {
    let (mut a, b) = pair(QpType::Rc);
    request(&mut a, write(64));
    let mut ib = IbRepr::new(BthRepr::new(
        Opcode::RC_RDMA_READ_RESPONSE_ONLY,
        QA,
        Psn::new(PSN_A),
    ));
    ib.aeth = Some(AethRepr {
        syndrome: Syndrome::ACK_UNLIMITED,
        msn: 1,
    });
    let f = response(&a, &b, ib, &[0; 64]);
    give_counting(&mut a, &f, &[(Counter::bad_response, 1)]);
    assert_eq!(a.endpoint.qp(QA).unwrap().state(), QpState::Err);
}
