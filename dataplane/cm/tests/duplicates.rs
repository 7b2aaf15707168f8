//! Copies and losses inside the handshake, answered as the Linux CM answers them: a
//! duplicate REQ before the application accepted brings out the held-back MRA, which
//! stretches the active side's timer; a lost RTU is sent again for the REP's
//! retransmission; a duplicate REP while the application is busy brings out the MRA for
//! it; "communication established" stands in for a lost RTU.

mod common;

use std::time::Duration;

use common::*;
use xroce_cm::testing::{Pair, Side};
use xroce_cm::{CmState, EventKind};
use xroce_wire::{CmMessage, MsgResponse, PortSpace};

#[test]
fn a_duplicate_req_before_accept_brings_the_mra_that_stretches_the_timer() {
    let mut p = Pair::new(20);
    listen(&mut p.b, OWNER_B, PortSpace::Tcp, PORT);
    let t0 = p.now;
    let a = connect(&mut p, PORT);
    let req = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    // B's application takes its time; A sends the REQ again after 6144 ms.
    p.run_until(PATIENCE, |p| {
        !p.sent_by(Side::B, |m| matches!(m, CmMessage::Mra(_)))
            .is_empty()
    });
    let mras = p.sent_by(Side::B, |m| matches!(m, CmMessage::Mra(_)));
    // Sent as the retransmitted REQ arrives (10 µs of latency).
    assert_eq!(
        mras[0].at - t0,
        Duration::from_millis(6144) + p.impair.latency
    );
    let Some(CmMessage::Mra(m)) = mras[0].message() else {
        unreachable!()
    };
    assert_eq!((m.message_mraed, m.service_timeout), (MsgResponse::REQ, 24));
    assert_eq!(mras[0].tid(), p.wire[0].tid());
    assert_eq!(p.b.cm.counters().rcvd_duplicate, 1);
    p.run_for(Duration::from_millis(1));
    let comm = p.a.cm.id(a).unwrap().comm_id.unwrap();
    assert_eq!(p.a.cm.ib_cm().state(comm), Some(CmState::MraReqRcvd));
    // The next REQ waits for the service timeout (2^24 × 4.096 µs ≈ 65536 ms) plus the
    // path's timeout (2048 ms), from the MRA's arrival (a round trip after the REQ).
    p.run_until(PATIENCE, |p| {
        p.sent_by(Side::A, |m| matches!(m, CmMessage::Req(_))).len() == 3
    });
    let reqs = p.sent_by(Side::A, |m| matches!(m, CmMessage::Req(_)));
    assert_eq!(
        reqs[2].at - reqs[1].at,
        Duration::from_millis(65536 + 2048) + p.impair.latency * 2
    );
    // Now B accepts, and the connection completes normally.
    let now = p.now;
    p.b.cm.accept(now, req.id, &rping_param(0x22)).unwrap();
    wait(&mut p, PATIENCE, false, EventKind::ConnectResponse);
    let now = p.now;
    p.a.cm.establish(now, a).unwrap();
    wait(&mut p, PATIENCE, true, EventKind::Established);
    assert_eq!(
        p.b.count(EventKind::ConnectRequest),
        1,
        "duplicates make no new request"
    );
}

#[test]
fn a_duplicate_req_before_the_application_saw_it_is_ignored() {
    let mut p = Pair::new(21);
    listen(&mut p.b, OWNER_B, PortSpace::Tcp, PORT);
    connect(&mut p, PORT);
    let req = p.a.cm.poll_transmit().unwrap();
    // The same REQ twice in a row: the second finds the first's connection in REQ_RCVD.
    // With rdma_cm the MRA is already held back by then, so it goes out.
    p.inject(Side::B, &req.mad);
    p.inject(Side::B, &req.mad);
    assert_eq!(p.b.count(EventKind::ConnectRequest), 1);
    assert_eq!(p.b.cm.counters().rcvd_duplicate, 1);
    assert_eq!(
        p.sent_by(Side::B, |m| matches!(m, CmMessage::Mra(_))).len(),
        1
    );
}

#[test]
fn a_lost_rtu_is_sent_again_when_the_rep_comes_again() {
    let mut p = Pair::new(22);
    // REQ, REP, then the RTU is lost.
    p.lose = vec![2];
    let t0 = p.now;
    establish(&mut p, PORT);
    let rtus = p.sent_by(Side::A, |m| matches!(m, CmMessage::Rtu(_)));
    assert_eq!(rtus.len(), 2);
    assert!(rtus[0].lost);
    assert_eq!(rtus[1].mad, rtus[0].mad, "the same RTU");
    let reps = p.sent_by(Side::B, |m| matches!(m, CmMessage::Rep(_)));
    assert_eq!(reps[1].at - reps[0].at, Duration::from_millis(4096));
    assert!(p.now - t0 >= Duration::from_millis(4096));
    assert_eq!(p.a.cm.counters().rcvd_duplicate, 1);
    assert_eq!(
        p.a.count(EventKind::ConnectResponse),
        1,
        "one response for the app"
    );
}

#[test]
fn a_duplicate_rep_while_the_application_is_busy_brings_the_mra() {
    let mut p = Pair::new(23);
    listen(&mut p.b, OWNER_B, PortSpace::Tcp, PORT);
    let a = connect(&mut p, PORT);
    let req = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    let now = p.now;
    p.b.cm.accept(now, req.id, &rping_param(0x22)).unwrap();
    wait(&mut p, PATIENCE, false, EventKind::ConnectResponse);
    // A does not establish: B's REP comes again after 4096 ms and A answers with the MRA
    // it held back.
    p.run_until(PATIENCE, |p| {
        !p.sent_by(Side::A, |m| matches!(m, CmMessage::Mra(_)))
            .is_empty()
    });
    let Some(CmMessage::Mra(m)) =
        p.sent_by(Side::A, |m| matches!(m, CmMessage::Mra(_)))[0].message()
    else {
        unreachable!()
    };
    assert_eq!((m.message_mraed, m.service_timeout), (MsgResponse::REP, 24));
    p.run_for(Duration::from_millis(1));
    let comm = p.b.cm.id(req.id).unwrap().comm_id.unwrap();
    assert_eq!(p.b.cm.ib_cm().state(comm), Some(CmState::MraRepRcvd));
    let now = p.now;
    p.a.cm.establish(now, a).unwrap();
    wait(&mut p, PATIENCE, true, EventKind::Established);
}

#[test]
fn communication_established_stands_in_for_a_lost_rtu() {
    let mut p = Pair::new(24);
    p.lose = vec![2];
    listen(&mut p.b, OWNER_B, PortSpace::Tcp, PORT);
    let a = connect(&mut p, PORT);
    let req = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    let now = p.now;
    p.b.cm.accept(now, req.id, &rping_param(0x22)).unwrap();
    wait(&mut p, PATIENCE, false, EventKind::ConnectResponse);
    let now = p.now;
    p.a.cm.establish(now, a).unwrap();
    p.settle();
    assert!(
        p.b.any(EventKind::Established).is_none(),
        "the RTU was lost"
    );
    // A's first SEND reaches B's QP 0x22: the engine tells the CM.
    let now = p.now;
    let id = p.b.cm.id_of_qp(xroce_wire::Qpn::new(0x22)).unwrap();
    assert_eq!(id, req.id);
    p.b.cm.notify_established(now, id).unwrap();
    p.settle();
    assert_eq!(p.b.count(EventKind::Established), 1);
    // The REP is not sent again, and a late copy of the RTU changes nothing.
    p.run_for(Duration::from_secs(30));
    assert_eq!(
        p.sent_by(Side::B, |m| matches!(m, CmMessage::Rep(_))).len(),
        1
    );
    let rtu = p.sent_by(Side::A, |m| matches!(m, CmMessage::Rtu(_)))[0].mad;
    p.inject(Side::B, &rtu);
    assert_eq!(p.b.count(EventKind::Established), 1);
    assert_eq!(p.b.cm.counters().rcvd_duplicate, 1);
    let now = p.now;
    assert!(p.b.cm.notify_established(now, req.id).is_err(), "EISCONN");
}

#[test]
fn a_duplicate_dreq_in_timewait_gets_the_drep_again() {
    let mut p = Pair::new(25);
    let (a, _, b) = establish(&mut p, PORT);
    let now = p.now;
    p.a.cm.disconnect(now, a).unwrap();
    wait(&mut p, PATIENCE, true, EventKind::Disconnected);
    let now = p.now;
    p.b.cm.disconnect(now, b).unwrap();
    wait(&mut p, PATIENCE, false, EventKind::Disconnected);
    let dreq = p.sent_by(Side::A, |m| matches!(m, CmMessage::Dreq(_)))[0].mad;
    p.inject(Side::B, &dreq);
    let dreps = p.sent_by(Side::B, |m| matches!(m, CmMessage::Drep(_)));
    assert_eq!(dreps.len(), 2);
    assert_eq!(dreps[1].mad, dreps[0].mad);
    assert_eq!(p.b.count(EventKind::Disconnected), 1);
}
