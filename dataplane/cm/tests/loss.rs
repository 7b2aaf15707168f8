//! Whole sessions (connect, accept, establish, disconnect from either side) over a network
//! that loses, duplicates and reorders MADs, many seeds each: every session completes,
//! each application hears each event exactly once, and every received MAD lands in
//! exactly one disposition counter.

mod common;

use std::time::Duration;

use common::*;
use xroce_cm::testing::{Impairments, Pair};
use xroce_cm::{Counters, EventKind, IdHandle};
use xroce_wire::PortSpace;

/// The applications: B accepts, A establishes on the response, the side named
/// disconnects once established, the other answers its DISCONNECTED with a disconnect;
/// both destroy their ids once disconnected (as rping does: a destroyed id's stray DREQs
/// are still answered). Returns the virtual time the session took.
fn session(p: &mut Pair, a_disconnects: bool) -> Duration {
    let t0 = p.now;
    listen(&mut p.b, OWNER_B, PortSpace::Tcp, PORT);
    let a = connect(p, PORT);
    let mut b: Option<IdHandle> = None;
    let mut disconnected = (false, false);
    let mut late_requests = 0;
    let limit = p.now + Duration::from_secs(900);
    while !(disconnected.0 && disconnected.1) {
        assert!(
            p.step(),
            "nothing left to happen, yet the session is not over"
        );
        assert!(p.now < limit, "session did not end");
        let now = p.now;
        for e in p.b.take_events() {
            match e.kind {
                EventKind::ConnectRequest if b.is_none() => {
                    b = Some(e.id);
                    p.b.cm.accept(now, e.id, &rping_param(0x22)).unwrap();
                }
                EventKind::ConnectRequest => {
                    // A late copy of the REQ, after B's connection is gone: a new request
                    // to Linux as well (the old one left the table of live connections).
                    assert!(disconnected.1, "a second request while the first is live");
                    late_requests += 1;
                    p.b.cm.reject(now, e.id, &[]).unwrap();
                    p.b.cm.destroy_id(now, e.id).unwrap();
                }
                EventKind::Established => {
                    if !a_disconnects {
                        p.b.cm.disconnect(now, e.id).unwrap();
                    }
                }
                EventKind::Disconnected => {
                    assert!(!disconnected.1, "one DISCONNECTED on B");
                    assert_eq!(e.status, 0);
                    disconnected.1 = true;
                    p.b.cm.disconnect(now, e.id).unwrap();
                    p.b.cm.destroy_id(now, e.id).unwrap();
                }
                EventKind::TimewaitExit => {}
                other => panic!("B: unexpected {other:?} ({})", e.status),
            }
        }
        for e in p.a.take_events() {
            assert_eq!(e.id, a);
            match e.kind {
                EventKind::ConnectResponse => {
                    p.a.cm.establish(now, a).unwrap();
                    if a_disconnects {
                        p.a.cm.disconnect(now, a).unwrap();
                    }
                }
                EventKind::Disconnected => {
                    assert!(!disconnected.0, "one DISCONNECTED on A");
                    assert_eq!(e.status, 0);
                    disconnected.0 = true;
                    p.a.cm.disconnect(now, a).unwrap();
                    p.a.cm.destroy_id(now, a).unwrap();
                }
                EventKind::TimewaitExit => {}
                other => panic!("A: unexpected {other:?} ({})", e.status),
            }
        }
    }
    assert!(late_requests == 0 || p.impair.duplicate > 0.0 || p.impair.reorder > 0.0);
    p.now - t0
}

fn check_counters(c: &Counters) {
    assert_eq!(c.rcvd_mads, c.dispositions(), "{c:?}");
    assert_eq!(
        c.rcvd_unsupported_attribute + c.rcvd_malformed + c.rcvd_not_cm,
        0
    );
    assert_eq!(
        c.req_timeouts + c.rep_timeouts + c.dreq_timeouts,
        0,
        "{c:?}"
    );
}

fn many(impair: Impairments, seeds: u64) -> (Counters, Duration) {
    let mut total = Counters::default();
    let mut longest = Duration::ZERO;
    for seed in 0..seeds {
        let mut p = Pair::with(seed, impair);
        let took = session(&mut p, seed % 2 == 0);
        longest = longest.max(took);
        assert_eq!(p.misrouted, 0);
        for h in [&p.a, &p.b] {
            check_counters(h.cm.counters());
            total.add(h.cm.counters());
        }
    }
    (total, longest)
}

#[test]
fn sessions_complete_without_loss_and_without_retransmissions() {
    let (c, longest) = many(Impairments::NONE, 20);
    assert_eq!(c.retransmits, 0);
    assert_eq!(c.rcvd_mads, c.rcvd_delivered);
    assert!(longest < Duration::from_millis(1), "{longest:?}");
}

#[test]
fn sessions_complete_with_one_percent_mad_loss() {
    let (c, _) = many(Impairments::lossy(0.01), 300);
    assert!(c.retransmits > 0, "some MADs were lost and sent again");
}

#[test]
fn sessions_complete_with_ten_percent_mad_loss() {
    let (c, longest) = many(Impairments::lossy(0.10), 300);
    assert!(c.retransmits > 30, "{}", c.retransmits);
    assert!(c.rcvd_duplicate > 0, "lost answers make duplicates");
    assert!(longest > Duration::from_secs(4), "{longest:?}");
}

#[test]
fn sessions_complete_with_loss_duplication_and_reordering() {
    let impair = Impairments {
        loss: 0.05,
        duplicate: 0.10,
        reorder: 0.10,
        latency: Duration::from_micros(50),
    };
    let (c, _) = many(impair, 300);
    assert!(c.rcvd_duplicate > 0);
    assert!(c.retransmits > 0);
}
