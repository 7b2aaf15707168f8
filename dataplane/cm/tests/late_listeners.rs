//! Listeners that come a moment late (`Config::listen_grace`): the passive side holds a
//! REQ or SIDR_REQ for one, the active side sends its request again after a refusal for
//! want of one; with the grace at zero (Linux) the refusal is immediate, and after the
//! grace it is the refusal Linux gives.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use xroce_cm::testing::{Host, Impairments, Pair, Side};
use xroce_cm::{ConnParam, EventKind, SeededRandom};
use xroce_wire::{CmMessage, PortSpace, Qpn, RejectReason, SidrStatus};

const GRACE: Duration = Duration::from_millis(250);

/// A pair in which `a_grace` and `b_grace` are the sides' listen grace.
fn pair(seed: u64, a_grace: Duration, b_grace: Duration) -> Pair {
    let a = Host::configured(1, Box::new(SeededRandom::new(seed ^ 0xa)), |c| {
        c.listen_grace = a_grace
    });
    let b = Host::configured(2, Box::new(SeededRandom::new(seed ^ 0xb)), |c| {
        c.listen_grace = b_grace
    });
    Pair::of(a, b, seed, Impairments::NONE)
}

fn ud_connect(p: &mut Pair, port: u16) -> xroce_cm::IdHandle {
    let to = SocketAddr::new(p.b.addr, port);
    let id = resolved(&mut p.a, OWNER_A, PortSpace::Udp, to);
    let now = p.now;
    p.a.cm.connect(now, id, &ConnParam::default()).unwrap();
    id
}

#[test]
fn an_active_side_sends_its_req_again_after_rej_8_until_the_peer_listens() {
    // B is Linux: it refuses at once.
    let mut p = pair(41, GRACE, Duration::ZERO);
    let a = connect(&mut p, PORT);
    p.run_for(Duration::from_millis(120));
    let rejs = p.sent_by(Side::B, |m| matches!(m, CmMessage::Rej(_))).len();
    assert!(rejs >= 2, "refused, then asked again: {rejs} REJs");
    assert_eq!(p.a.count(EventKind::Rejected), 0, "not yet told");
    listen(&mut p.b, OWNER_B, PortSpace::Tcp, PORT);
    let req = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    let now = p.now;
    p.b.cm.accept(now, req.id, &rping_param(0x22)).unwrap();
    let rep = wait(&mut p, PATIENCE, false, EventKind::ConnectResponse);
    assert_eq!(rep.id, a);
    // Every REQ was the same message: the same comm ID and TID.
    let reqs = p.sent_by(Side::A, |m| matches!(m, CmMessage::Req(_)));
    assert!(reqs.len() >= 3, "{} REQs", reqs.len());
    assert!(reqs.iter().all(|r| r.mad == reqs[0].mad));
    assert_eq!(
        p.a.cm.counters().rej_no_listener_yet as usize,
        reqs.len() - 1
    );
}

#[test]
fn after_the_grace_the_active_side_is_told_rejected_8() {
    let mut p = pair(42, GRACE, Duration::ZERO);
    let a = connect(&mut p, 9999);
    let start = p.now;
    let rej = wait(&mut p, PATIENCE, false, EventKind::Rejected);
    assert_eq!((rej.id, rej.status), (a, 8));
    let waited = p.now.saturating_duration_since(start);
    assert!(
        waited >= GRACE - Duration::from_millis(50) && waited <= GRACE + Duration::from_millis(50),
        "told after the grace: {waited:?}"
    );
    let rejs = p.sent_by(Side::B, |m| matches!(m, CmMessage::Rej(_)));
    let Some(CmMessage::Rej(r)) = rejs.last().unwrap().message() else {
        unreachable!()
    };
    assert_eq!(r.reason, RejectReason::INVALID_SERVICE_ID);
}

#[test]
fn with_no_grace_rej_8_is_immediate_as_with_linux() {
    let mut p = pair(43, Duration::ZERO, Duration::ZERO);
    connect(&mut p, 9999);
    let start = p.now;
    wait(&mut p, PATIENCE, false, EventKind::Rejected);
    assert!(p.now.saturating_duration_since(start) < Duration::from_millis(10));
    assert_eq!(
        p.sent_by(Side::A, |m| matches!(m, CmMessage::Req(_))).len(),
        1
    );
}

#[test]
fn sidr_is_asked_again_after_status_1_until_the_peer_listens() {
    let mut p = pair(44, GRACE, Duration::ZERO);
    let a = ud_connect(&mut p, 5000);
    p.run_for(Duration::from_millis(120));
    assert!(
        p.sent_by(
            Side::B,
            |m| matches!(m, CmMessage::SidrRep(r) if r.status == SidrStatus::UNSUPPORTED)
        )
        .len()
            >= 2
    );
    assert_eq!(p.a.count(EventKind::Unreachable), 0);
    listen(&mut p.b, OWNER_B, PortSpace::Udp, 5000);
    let req = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    let now = p.now;
    let accept = ConnParam {
        qp_num: Qpn::new(0x44),
        ..ConnParam::default()
    };
    p.b.cm.accept(now, req.id, &accept).unwrap();
    let est = wait(&mut p, PATIENCE, false, EventKind::Established);
    assert_eq!(est.id, a);
    assert!(p.a.cm.counters().sidr_rep_no_listener_yet >= 2);
}

#[test]
fn a_passive_side_holds_a_sidr_req_for_a_late_listener() {
    let mut p = pair(45, Duration::ZERO, GRACE);
    let a = ud_connect(&mut p, 5000);
    p.run_for(Duration::from_millis(100));
    assert!(
        p.sent_by(Side::B, |_| true).is_empty(),
        "held: no answer yet"
    );
    listen(&mut p.b, OWNER_B, PortSpace::Udp, 5000);
    let req = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    let now = p.now;
    let accept = ConnParam {
        qp_num: Qpn::new(0x44),
        ..ConnParam::default()
    };
    p.b.cm.accept(now, req.id, &accept).unwrap();
    let est = wait(&mut p, PATIENCE, false, EventKind::Established);
    assert_eq!(est.id, a);
    let c = p.b.cm.counters();
    assert_eq!((c.req_held_for_listener, c.held_req_taken), (1, 1));
}

#[test]
fn a_held_sidr_req_with_no_listener_gets_status_1_after_the_grace() {
    let mut p = pair(46, Duration::ZERO, GRACE);
    ud_connect(&mut p, 5000);
    let start = p.now;
    wait(&mut p, PATIENCE, false, EventKind::Unreachable);
    let reps = p.sent_by(Side::B, |m| matches!(m, CmMessage::SidrRep(_)));
    assert_eq!(reps.len(), 1);
    let waited = reps[0].at.saturating_duration_since(start);
    assert!(
        waited >= GRACE && waited < GRACE + Duration::from_millis(50),
        "{waited:?}"
    );
    assert_eq!(p.b.cm.counters().held_req_refused, 1);
}
