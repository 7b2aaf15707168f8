//! When connections do not happen or end badly: rejects with private data, no listener,
//! no rdma_cm listener for the address, retries running out, stale connections, crossing
//! DREQs, unanswered DREQs, and owners that go away.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use common::*;
use xroce_cm::testing::{Host, Impairments, Pair, Side};
use xroce_cm::{CmState, EventKind, IdState, MadAddress, SeededRandom};
use xroce_wire::{CmMessage, MsgResponse, PortSpace, RejectReason};

#[test]
fn reject_with_private_data_reaches_the_active_side() {
    let mut p = Pair::new(3);
    listen(&mut p.b, OWNER_B, PortSpace::Tcp, PORT);
    let a = connect(&mut p, PORT);
    let req = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    let now = p.now;
    p.b.cm.reject(now, req.id, b"connection rejected").unwrap();
    let rej = wait(&mut p, PATIENCE, false, EventKind::Rejected);
    assert_eq!((rej.id, rej.status), (a, 28));
    let data = &rej.conn().unwrap().private_data;
    assert_eq!(data.len(), 148, "librdmacm reports the whole field");
    assert_eq!(&data[..19], b"connection rejected");
    assert!(data[19..].iter().all(|&b| b == 0));
    // On the wire: REJ 28 from the delayed-MRA state: our comm ID, message REQ.
    let rejs = p.sent_by(Side::B, |m| matches!(m, CmMessage::Rej(_)));
    let Some(CmMessage::Rej(r)) = rejs[0].message() else {
        unreachable!()
    };
    assert_eq!(
        (r.reason, r.message_rejected),
        (RejectReason::CONSUMER_DEFINED, MsgResponse::REQ)
    );
    assert_ne!(r.local_comm_id.0, 0);
    assert_eq!(rejs[0].tid(), p.wire[0].tid(), "the REQ's TID");
    // The REQ is not sent again, and nothing else happens.
    p.run_for(Duration::from_secs(30));
    assert_eq!(
        p.sent_by(Side::A, |m| matches!(m, CmMessage::Req(_))).len(),
        1
    );
    assert_eq!(
        p.a.cm.id(a).unwrap().state,
        IdState::Connect,
        "Linux leaves it to the app"
    );
    assert_eq!(p.a.count(EventKind::Rejected), 1);
}

#[test]
fn no_listener_is_rej_8() {
    let mut p = Pair::new(4);
    let a = connect(&mut p, 9999);
    let rej = wait(&mut p, PATIENCE, false, EventKind::Rejected);
    assert_eq!((rej.id, rej.status), (a, 8));
    assert_eq!(p.b.cm.counters().req_no_listener, 1);
    let Some(CmMessage::Rej(r)) = p.wire[1].message() else {
        panic!("no REJ")
    };
    assert_eq!(r.local_comm_id.0, 0, "no comm ID was assigned");
    assert_eq!(r.remote_comm_id, p.a.cm.id(a).unwrap().comm_id.unwrap());
}

/// A pair whose passive side holds REQs for a listener as long as `grace`.
fn pair_with_grace(seed: u64, grace: Duration) -> Pair {
    let a = Host::new(1, Box::new(SeededRandom::new(seed ^ 0xa)));
    let b = Host::configured(2, Box::new(SeededRandom::new(seed ^ 0xb)), |c| {
        c.listen_grace = grace
    });
    Pair::of(a, b, seed, Impairments::NONE)
}

#[test]
fn a_listen_within_the_grace_takes_the_request_that_came_first() {
    let mut p = pair_with_grace(21, Duration::from_millis(250));
    let a = connect(&mut p, PORT);
    p.run_for(Duration::from_millis(100));
    assert!(
        p.a.any(EventKind::Rejected).is_none(),
        "no REJ within the grace"
    );
    assert!(
        p.sent_by(Side::B, |_| true).is_empty(),
        "B answers nothing yet"
    );
    assert_eq!(p.b.cm.counters().req_held_for_listener, 1);
    listen(&mut p.b, OWNER_B, PortSpace::Tcp, PORT);
    let req = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    let now = p.now;
    p.b.cm.accept(now, req.id, &rping_param(0x22)).unwrap();
    wait(&mut p, PATIENCE, false, EventKind::ConnectResponse);
    assert_eq!(p.b.cm.counters().held_req_taken, 1);
    assert_eq!(p.b.cm.counters().req_no_listener, 0);
    assert_eq!(p.a.count(EventKind::Rejected), 0);
    let _ = a;
}

#[test]
fn without_a_listen_the_held_request_is_rej_8_after_the_grace() {
    let mut p = pair_with_grace(22, Duration::from_millis(250));
    let a = connect(&mut p, 9999);
    let sent = p.now;
    let rej = wait(&mut p, PATIENCE, false, EventKind::Rejected);
    assert_eq!((rej.id, rej.status), (a, 8));
    let rejs = p.sent_by(Side::B, |m| matches!(m, CmMessage::Rej(_)));
    assert_eq!(rejs.len(), 1);
    let waited = rejs[0].at.saturating_duration_since(sent);
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_millis(300),
        "REJ after the grace: {waited:?}"
    );
    assert_eq!(rejs[0].tid(), p.wire[0].tid(), "the REQ's TID");
    let c = p.b.cm.counters();
    assert_eq!(
        (
            c.req_held_for_listener,
            c.held_req_refused,
            c.held_req_taken
        ),
        (1, 1, 0)
    );
}

#[test]
fn a_held_request_sent_again_is_a_duplicate_and_connects_once() {
    let mut p = pair_with_grace(23, Duration::from_millis(250));
    connect(&mut p, PORT);
    p.run_for(Duration::from_millis(50));
    let req = p.wire[0].mad;
    p.inject(Side::B, &req);
    p.run_for(Duration::from_millis(10));
    assert_eq!(p.b.cm.counters().rcvd_duplicate, 1);
    listen(&mut p.b, OWNER_B, PortSpace::Tcp, PORT);
    wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    p.run_for(Duration::from_millis(500));
    assert_eq!(p.b.count(EventKind::ConnectRequest), 1);
    assert_eq!(p.b.cm.counters().held_req_taken, 1);
}

#[test]
fn a_listener_on_another_address_of_the_port_is_rej_28() {
    let mut p = Pair::new(5);
    let other = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9));
    p.b.cm.add_local_address(other);
    let l =
        p.b.cm
            .create_id(OWNER_B, PortSpace::Tcp, xroce_transport::QpType::Rc)
            .unwrap();
    p.b.cm.bind(l, SocketAddr::new(other, PORT)).unwrap();
    p.b.cm.listen(l).unwrap();
    let a = connect(&mut p, PORT); // to 10.0.0.2, same service ID
    let rej = wait(&mut p, PATIENCE, false, EventKind::Rejected);
    assert_eq!((rej.id, rej.status), (a, 28));
    assert_eq!(p.b.cm.counters().req_refused, 1);
    assert!(p.b.any(EventKind::ConnectRequest).is_none());
    assert_eq!(p.b.cm.ib_cm().len(), 0, "the refused connection is gone");
}

#[test]
fn req_retries_run_out_after_16_sends_and_98304_ms() {
    let mut p = Pair::with(6, Impairments::lossy(1.0));
    listen(&mut p.b, OWNER_B, PortSpace::Tcp, PORT);
    let t0 = p.now;
    let a = connect(&mut p, PORT);
    let ev = wait(&mut p, PATIENCE, false, EventKind::Unreachable);
    assert_eq!((ev.id, ev.status), (a, -110));
    assert_eq!(p.now - t0, Duration::from_millis(16 * 6144));
    let reqs = p.sent_by(Side::A, |m| matches!(m, CmMessage::Req(_)));
    assert_eq!(reqs.len(), 16, "the first and 15 retries");
    for (k, s) in reqs.iter().enumerate() {
        assert_eq!(
            s.at - t0,
            Duration::from_millis(6144 * k as u64),
            "send {k}"
        );
        assert_eq!(s.mad, reqs[0].mad, "retransmissions are byte-identical");
    }
    let c = p.a.cm.counters();
    assert_eq!((c.retransmits, c.req_timeouts), (15, 1));
    assert_eq!(
        p.a.cm.ib_cm().state(p.a.cm.id(a).unwrap().comm_id.unwrap()),
        Some(CmState::Idle)
    );
    p.run_for(Duration::from_secs(60));
    assert_eq!(p.a.count(EventKind::Unreachable), 1);
}

#[test]
fn a_lost_req_is_sent_again_after_6144_ms() {
    let mut p = Pair::new(7);
    p.lose = vec![0];
    let t0 = p.now;
    establish(&mut p, PORT);
    let reqs = p.sent_by(Side::A, |m| matches!(m, CmMessage::Req(_)));
    assert_eq!(reqs.len(), 2);
    assert!(reqs[0].lost && !reqs[1].lost);
    assert_eq!(reqs[1].at - t0, Duration::from_millis(6144));
    assert_eq!(p.a.cm.counters().retransmits, 1);
}

#[test]
fn rep_retries_run_out_on_the_passive_side() {
    let mut p = Pair::new(8);
    listen(&mut p.b, OWNER_B, PortSpace::Tcp, PORT);
    connect(&mut p, PORT);
    let req = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    p.impair = Impairments::lossy(1.0);
    let t0 = p.now;
    let now = p.now;
    p.b.cm.accept(now, req.id, &rping_param(0x22)).unwrap();
    let ev = wait(&mut p, PATIENCE, true, EventKind::Unreachable);
    assert_eq!((ev.id, ev.status), (req.id, -110));
    // The REQ asked for 20 (4096 ms) and 15 retries.
    assert_eq!(p.now - t0, Duration::from_millis(16 * 4096));
    assert_eq!(
        p.sent_by(Side::B, |m| matches!(m, CmMessage::Rep(_))).len(),
        16
    );
    assert_eq!(p.b.cm.counters().rep_timeouts, 1);
}

#[test]
fn unanswered_dreq_ends_in_disconnected_with_etimedout_then_timewait() {
    let mut p = Pair::new(9);
    let (a, _, _) = establish(&mut p, PORT);
    p.impair = Impairments::lossy(1.0);
    let t0 = p.now;
    let now = p.now;
    p.a.cm.disconnect(now, a).unwrap();
    let ev = wait(&mut p, PATIENCE, false, EventKind::Disconnected);
    assert_eq!((ev.id, ev.status), (a, -110));
    // The active side's CM response timeout: 2 × 1024 + 4096 ms.
    assert_eq!(p.now - t0, Duration::from_millis(16 * 6144));
    assert_eq!(
        p.sent_by(Side::A, |m| matches!(m, CmMessage::Dreq(_)))
            .len(),
        16
    );
    let t1 = p.now;
    wait(&mut p, PATIENCE, false, EventKind::TimewaitExit);
    assert_eq!(p.now - t1, Duration::from_millis(2048));
    assert_eq!(p.a.cm.counters().dreq_timeouts, 1);
}

#[test]
fn crossing_dreqs_disconnect_both_sides_once() {
    let mut p = Pair::new(10);
    let (a, _, b) = establish(&mut p, PORT);
    let now = p.now;
    p.a.cm.disconnect(now, a).unwrap();
    p.b.cm.disconnect(now, b).unwrap();
    wait(&mut p, PATIENCE, false, EventKind::Disconnected);
    wait(&mut p, PATIENCE, true, EventKind::Disconnected);
    // Both are in DREQ_RCVD: each application answers (rping calls disconnect again).
    let now = p.now;
    p.a.cm.disconnect(now, a).unwrap();
    p.b.cm.disconnect(now, b).unwrap();
    wait(&mut p, PATIENCE, false, EventKind::TimewaitExit);
    wait(&mut p, PATIENCE, true, EventKind::TimewaitExit);
    for h in [&p.a, &p.b] {
        assert_eq!(h.count(EventKind::Disconnected), 1);
        assert_eq!(h.count(EventKind::TimewaitExit), 1);
    }
    assert_eq!(
        p.sent_by(Side::A, |m| matches!(m, CmMessage::Dreq(_)))
            .len(),
        1
    );
    assert_eq!(
        p.sent_by(Side::B, |m| matches!(m, CmMessage::Dreq(_)))
            .len(),
        1
    );
    assert_eq!(
        p.sent_by(Side::A, |m| matches!(m, CmMessage::Drep(_)))
            .len(),
        1
    );
    assert_eq!(
        p.a.cm.counters().retransmits + p.b.cm.counters().retransmits,
        0
    );
}

#[test]
fn a_peer_that_comes_back_on_a_connected_qp_gets_rej_10_and_the_old_connection_a_dreq() {
    let mut p = Pair::new(11);
    let (_, _, b) = establish(&mut p, PORT);
    // Host A restarts without disconnecting: same address, same CA GUID, a new CM that
    // reuses QP 0x11.
    p.a = Host::new(1, Box::new(SeededRandom::new(99)));
    let a2 = connect(&mut p, PORT);
    let rej = wait(&mut p, PATIENCE, false, EventKind::Rejected);
    assert_eq!((rej.id, rej.status), (a2, 10));
    assert_eq!(p.b.cm.counters().req_stale, 1);
    // The old connection got a DREQ; the new A knows nothing of it and answers with a
    // DREP, as Linux does, so B's application hears DISCONNECTED at once.
    let d = wait(&mut p, PATIENCE, true, EventKind::Disconnected);
    assert_eq!(d.id, b);
    assert_eq!(p.a.cm.counters().rcvd_unmatched, 1);
    assert_eq!(
        p.sent_by(Side::A, |m| matches!(m, CmMessage::Drep(_)))
            .len(),
        1
    );
}

#[test]
fn a_qp_in_timewait_may_connect_again_as_with_linux() {
    // The Linux CM forgets (CA GUID, QPN) when a connection enters TimeWait
    // (`cm_enter_timewait` removes it from the table of live connections), so a new REQ
    // from the same QP is accepted, not refused as stale.
    let mut p = Pair::new(12);
    let (a, _, b) = establish(&mut p, PORT);
    let now = p.now;
    p.a.cm.disconnect(now, a).unwrap();
    wait(&mut p, PATIENCE, true, EventKind::Disconnected);
    let now = p.now;
    p.b.cm.disconnect(now, b).unwrap();
    wait(&mut p, PATIENCE, false, EventKind::Disconnected);
    let comm = p.b.cm.id(b).unwrap().comm_id.unwrap();
    assert_eq!(p.b.cm.ib_cm().state(comm), Some(CmState::TimeWait));
    p.a.events.clear();
    p.b.events.clear();
    let a2 = connect(&mut p, PORT);
    let req = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    assert_eq!(req.conn().unwrap().qp_num, 0x11);
    assert_eq!(p.b.cm.counters().req_stale, 0);
    assert!(p.a.event(a2, EventKind::Rejected).is_none());
}

#[test]
fn an_owner_that_goes_away_disconnects_its_connections() {
    let mut p = Pair::new(13);
    let (a, _, b) = establish(&mut p, PORT);
    let now = p.now;
    p.a.cm.owner_gone(now, OWNER_A);
    assert!(p.a.cm.id(a).is_none());
    let d = wait(&mut p, PATIENCE, true, EventKind::Disconnected);
    assert_eq!(d.id, b);
    let now = p.now;
    p.b.cm.disconnect(now, b).unwrap();
    p.run_for(Duration::from_secs(60));
    // One DREQ, never retried: the id is gone. B's DREP finds nothing on A.
    assert_eq!(
        p.sent_by(Side::A, |m| matches!(m, CmMessage::Dreq(_)))
            .len(),
        1
    );
    assert_eq!(p.a.cm.counters().rcvd_unmatched, 1);
    assert_eq!(p.a.cm.ib_cm().len(), 0);
    assert!(p.a.cm.ids_of(OWNER_A).is_empty());
}

#[test]
fn an_owner_that_goes_away_refuses_its_pending_requests() {
    let mut p = Pair::new(14);
    let listener = listen(&mut p.b, OWNER_B, PortSpace::Tcp, PORT);
    let a = connect(&mut p, PORT);
    wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    let now = p.now;
    p.b.cm.owner_gone(now, OWNER_B);
    assert!(p.b.cm.id(listener).is_none());
    let rej = wait(&mut p, PATIENCE, false, EventKind::Rejected);
    assert_eq!((rej.id, rej.status), (a, 28));
    // The port is free again.
    assert_eq!(p.b.cm.port_holders(PortSpace::Tcp, PORT), 0);
    let again = listen(&mut p.b, OWNER_B, PortSpace::Tcp, PORT);
    assert!(p.b.cm.id(again).is_some());
}

#[test]
fn an_active_owner_that_goes_away_withdraws_its_req_with_rej_4() {
    let mut p = Pair::new(15);
    listen(&mut p.b, OWNER_B, PortSpace::Tcp, PORT);
    connect(&mut p, PORT);
    let req = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    let now = p.now;
    p.a.cm.owner_gone(now, OWNER_A);
    let rej = wait(&mut p, PATIENCE, true, EventKind::Rejected);
    assert_eq!((rej.id, rej.status), (req.id, 4));
    let rejs = p.sent_by(Side::A, |m| matches!(m, CmMessage::Rej(_)));
    let Some(CmMessage::Rej(r)) = rejs[0].message() else {
        unreachable!()
    };
    assert_eq!(r.message_rejected, MsgResponse::OTHER);
    assert_eq!(r.ari, &p.a.cm.config().ca_guid.0.to_be_bytes());
}

#[test]
fn destroying_a_listener_refuses_requests_it_has_not_handed_over() {
    let mut p = Pair::new(16);
    let listener = listen(&mut p.b, OWNER_B, PortSpace::Tcp, PORT);
    let a = connect(&mut p, PORT);
    // Carry the REQ by hand so that B's CONNECT_REQUEST stays unread in its queue.
    let req = p.a.cm.poll_transmit().unwrap();
    let now = p.now;
    let from = MadAddress::new(p.b.addr, p.a.addr);
    p.b.cm.handle_mad(now, from, &req.mad);
    p.b.cm.destroy_id(now, listener).unwrap();
    assert!(
        p.b.cm.poll_event().is_none(),
        "the request went with its listener"
    );
    assert!(p.b.cm.ids_of(OWNER_B).is_empty());
    let rej = wait(&mut p, PATIENCE, false, EventKind::Rejected);
    assert_eq!((rej.id, rej.status), (a, 28));
}

#[test]
fn a_lost_drep_is_made_good_only_while_the_peer_can_answer() {
    // The DREQ side retries every 6144 ms; the peer stays in TimeWait for 2048 ms. As with
    // Linux, a peer whose id still exists after TimeWait ignores the retried DREQ (its
    // connection is idle), so the DREQ side ends with -ETIMEDOUT; a peer that destroyed
    // its id answers for it with a DREP.
    for destroy in [false, true] {
        let mut p = Pair::new(17);
        let (a, _, b) = establish(&mut p, PORT);
        let now = p.now;
        p.a.cm.disconnect(now, a).unwrap();
        wait(&mut p, PATIENCE, true, EventKind::Disconnected);
        p.lose = vec![p.wire.len()];
        let now = p.now;
        p.b.cm.disconnect(now, b).unwrap();
        if destroy {
            p.b.cm.destroy_id(now, b).unwrap();
        }
        let t0 = p.now;
        let d = wait(&mut p, PATIENCE, false, EventKind::Disconnected);
        if destroy {
            assert_eq!(d.status, 0);
            assert!(p.now - t0 < Duration::from_millis(6145));
            assert_eq!(p.b.cm.counters().rcvd_unmatched, 1);
        } else {
            assert_eq!(d.status, -110);
            assert!(p.now - t0 > Duration::from_secs(90));
            assert_eq!(p.b.cm.counters().rcvd_wrong_state, 15);
        }
    }
}
