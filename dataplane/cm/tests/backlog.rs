//! A listener's backlog, bounded as ucma bounds it: at most `rdma_listen`'s backlog of
//! connection requests the application has not yet accepted or rejected. A REQ beyond it
//! is dropped unanswered (its sender's retransmission finds room later, as with the
//! kernel's `-ENOMEM` in `cm_destroy_id`); a SIDR_REQ beyond it is refused with status 2.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use xroce_cm::testing::{Pair, Side};
use xroce_cm::{ConnParam, EventKind, IdHandle};
use xroce_transport::QpType;
use xroce_wire::{CmMessage, PortSpace, Qpn, SidrStatus};

/// A listener of B on `port` of `ps` with `backlog`.
fn listen_with(p: &mut Pair, ps: PortSpace, port: u16, backlog: i32) -> IdHandle {
    let qp_type = if ps == PortSpace::Udp {
        QpType::Ud
    } else {
        QpType::Rc
    };
    let id = p.b.cm.create_id(OWNER_B, ps, qp_type).unwrap();
    p.b.cm.bind(id, SocketAddr::new(p.b.addr, port)).unwrap();
    p.b.cm.listen_with_backlog(id, backlog).unwrap();
    id
}

/// A connects to B's `port` in `ps` with QP `qpn`.
fn connect_from(p: &mut Pair, ps: PortSpace, port: u16, qpn: u32) -> IdHandle {
    let to = SocketAddr::new(p.b.addr, port);
    let id = resolved(&mut p.a, OWNER_A, ps, to);
    let param = ConnParam {
        qp_num: Qpn::new(qpn),
        ..rping_param(qpn)
    };
    let now = p.now;
    p.a.cm.connect(now, id, &param).unwrap();
    id
}

#[test]
fn a_req_beyond_the_backlog_is_dropped_unanswered_and_served_when_room_comes() {
    let mut p = Pair::new(17);
    listen_with(&mut p, PortSpace::Tcp, PORT, 2);
    let actives: Vec<IdHandle> = (0..3)
        .map(|k| connect_from(&mut p, PortSpace::Tcp, PORT, 0x11 + k))
        .collect();
    p.run_for(Duration::from_millis(500));
    let requests: Vec<_> =
        p.b.take_events()
            .into_iter()
            .filter(|e| e.kind == EventKind::ConnectRequest)
            .collect();
    assert_eq!(requests.len(), 2, "the backlog holds two");
    assert_eq!(p.b.cm.counters().req_over_backlog, 1);
    assert!(
        p.sent_by(Side::B, |m| matches!(m, CmMessage::Rej(_)))
            .is_empty(),
        "no refusal: the sender may try again"
    );
    assert_eq!(p.a.count(EventKind::Rejected), 0);

    // The application answers one request: room for the third, whose REQ comes again.
    let now = p.now;
    p.b.cm
        .accept(now, requests[0].id, &rping_param(0x22))
        .unwrap();
    let third = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    assert!(requests.iter().all(|r| r.id != third.id));
    let now = p.now;
    p.b.cm.accept(now, third.id, &rping_param(0x23)).unwrap();
    let found = p.run_until(PATIENCE, |p| p.a.count(EventKind::ConnectResponse) == 2);
    assert!(found, "both accepted connections answered");
    let answered: Vec<IdHandle> =
        p.a.take_events()
            .into_iter()
            .filter(|e| e.kind == EventKind::ConnectResponse)
            .map(|e| e.id)
            .collect();
    assert!(answered.iter().all(|id| actives.contains(id)));
    assert_eq!(p.a.count(EventKind::Unreachable), 0);
}

#[test]
fn a_rejected_or_destroyed_request_makes_room_too() {
    let mut p = Pair::new(18);
    listen_with(&mut p, PortSpace::Tcp, PORT, 1);
    connect_from(&mut p, PortSpace::Tcp, PORT, 0x31);
    connect_from(&mut p, PortSpace::Tcp, PORT, 0x32);
    connect_from(&mut p, PortSpace::Tcp, PORT, 0x33);
    let first = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    p.b.take_events();
    let now = p.now;
    p.b.cm.reject(now, first.id, b"busy").unwrap();
    let second = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    p.b.take_events();
    let now = p.now;
    p.b.cm.destroy_id(now, second.id).unwrap();
    let third = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    assert!(third.id != first.id && third.id != second.id);
    assert!(p.b.cm.counters().req_over_backlog >= 2);
}

#[test]
fn a_sidr_req_beyond_the_backlog_is_refused_with_status_2() {
    let mut p = Pair::new(19);
    listen_with(&mut p, PortSpace::Udp, PORT, 1);
    let first = connect_from(&mut p, PortSpace::Udp, PORT, 0x41);
    let second = connect_from(&mut p, PortSpace::Udp, PORT, 0x42);
    p.run_for(Duration::from_millis(200));
    assert_eq!(p.b.count(EventKind::ConnectRequest), 1);
    let refused = wait(&mut p, PATIENCE, false, EventKind::Unreachable);
    assert_eq!(refused.id, second);
    assert_eq!(refused.status, i32::from(SidrStatus::REJECT.0));
    assert!(p.a.event(first, EventKind::Unreachable).is_none());
    assert_eq!(p.b.cm.counters().req_over_backlog, 1);
}

#[test]
fn a_backlog_of_zero_or_less_is_the_largest() {
    let mut p = Pair::new(20);
    listen_with(&mut p, PortSpace::Tcp, PORT, 0);
    for k in 0..40 {
        connect_from(&mut p, PortSpace::Tcp, PORT, 0x100 + k);
    }
    p.run_for(Duration::from_millis(500));
    assert_eq!(p.b.count(EventKind::ConnectRequest), 40);
    assert_eq!(p.b.cm.counters().req_over_backlog, 0);

    let mut p = Pair::new(21);
    listen_with(&mut p, PortSpace::Tcp, PORT, -5);
    connect_from(&mut p, PortSpace::Tcp, PORT, 0x200);
    connect_from(&mut p, PortSpace::Tcp, PORT, 0x201);
    p.run_for(Duration::from_millis(500));
    assert_eq!(p.b.count(EventKind::ConnectRequest), 2);
}
