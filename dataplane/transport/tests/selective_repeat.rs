//! Selective repeat, frame by frame: the requester resends only the holes the responder
//! shows, the responder runs what it held in PSN order once a hole is filled, the timer
//! resends the oldest hole alone or goes back N when nothing is known held, and the held
//! packets go when the QP enters the error state or is reset (which turns the switch off).

use xroce_transport::testing::{Connection, Host, connect};
use xroce_transport::{
    Access, AttrMask, Completion, Gather, Instant, QpAttr, QpState, QpType, SendFlags, SendOp,
    SendWqe, SgeList, WcStatus,
};
use xroce_wire::{Frame, Psn, Qpn};

const QA: Qpn = Qpn::new(0x11);
const QB: Qpn = Qpn::new(0x22);
const BASE: u64 = 0x10_0000;
const KEY: u32 = 0x1234;
const RKEY: u32 = KEY | 0x8000_0000;
/// The first PSN A sends (`Connection::default().psn_a`).
const PSN_A: u32 = 0x100;
const NOW: Instant = Instant::ZERO;

fn pair() -> (Host, Host) {
    let mut a = Host::new(1);
    let mut b = Host::new(2);
    a.add_region(KEY, BASE, 1 << 20, Access::ALL);
    b.add_region(KEY, BASE, 1 << 20, Access::ALL);
    for (i, byte) in a.mem.region_mut(0).bytes.iter_mut().enumerate() {
        *byte = (i * 7 % 251) as u8;
    }
    connect(
        &mut a,
        QA,
        &mut b,
        QB,
        QpType::Rc,
        &Connection::default(),
        NOW,
    );
    a.endpoint.set_selective_repeat(QA, true).unwrap();
    b.endpoint.set_selective_repeat(QB, true).unwrap();
    (a, b)
}

/// `n` one-packet WRITEs of 100 bytes on QA, each to its own place.
fn post_writes(a: &mut Host, n: u64) {
    post_writes_on(a, QA, n);
}

/// `n` one-packet WRITEs of 100 bytes on `qp`, each to its own place.
fn post_writes_on(a: &mut Host, qp: Qpn, n: u64) {
    for i in 0..n {
        let w = SendWqe {
            wr_id: i,
            op: SendOp::Write {
                remote_addr: BASE + 0x8_0000 + 128 * i,
                rkey: RKEY,
            },
            flags: SendFlags::SIGNALED,
            data: Gather::Sges(SgeList::single(BASE + 128 * i, 100, KEY)),
            ud: None,
        };
        a.endpoint.post_send(NOW, qp, w).unwrap();
    }
}

fn take_at(host: &mut Host, now: Instant) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; xroce_transport::frame::MAX_FRAME];
    let mut out = Vec::new();
    while let Some(t) = host.endpoint.poll_transmit(now, &mut buf, &mut host.mem) {
        out.push(buf[..t.len].to_vec());
    }
    out
}

fn take(host: &mut Host) -> Vec<Vec<u8>> {
    take_at(host, NOW)
}

fn give_all(host: &mut Host, frames: &[Vec<u8>]) {
    for f in frames {
        host.endpoint.handle_frame(NOW, f, &mut host.mem);
    }
}

fn psn(frame: &[u8]) -> u32 {
    Frame::parse(frame)
        .or_else(|_| Frame::parse_acknowledge_with_trailer(frame))
        .unwrap()
        .ib
        .bth
        .psn
        .value()
}

fn completions(host: &mut Host) -> Vec<Completion> {
    std::iter::from_fn(|| host.endpoint.poll_completion()).collect()
}

fn landed(a: &Host, b: &Host, n: u64) -> bool {
    (0..n as usize).all(|i| {
        let src = &a.mem.region(0).bytes[128 * i..128 * i + 100];
        let dst = &b.mem.region(0).bytes[0x8_0000 + 128 * i..0x8_0000 + 128 * i + 100];
        src == dst
    })
}

#[test]
fn only_the_holes_are_resent_and_what_was_held_completes_in_order() {
    let (mut a, mut b) = pair();
    post_writes(&mut a, 8);
    let sent = take(&mut a);
    assert_eq!(sent.len(), 8);
    // The second and the fifth are lost.
    let arrived: Vec<Vec<u8>> = sent
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != 1 && i != 4)
        .map(|(_, f)| f.clone())
        .collect();
    give_all(&mut b, &arrived);
    assert_eq!(b.endpoint.counters().sr_packets_held, 5);
    assert!(completions(&mut b).is_empty());
    let naks = take(&mut b);
    assert!(!naks.is_empty());
    give_all(&mut a, &naks);
    // The first WRITE completes (the NAK acknowledges it); the two holes are resent.
    let done = completions(&mut a);
    assert_eq!(done.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0]);
    let resent = take(&mut a);
    let psns: Vec<u32> = resent.iter().map(|f| psn(f)).collect();
    assert_eq!(psns, [PSN_A + 1, PSN_A + 4]);
    assert!(
        resent
            .iter()
            .all(|f| Frame::parse(f).unwrap().ib.bth.ack_request)
    );
    assert_eq!(a.endpoint.counters().sr_packets_resent, 2);
    give_all(&mut b, &resent);
    let answer = take(&mut b);
    give_all(&mut a, &answer);
    let done = completions(&mut a);
    assert_eq!(
        done.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        (1..8).collect::<Vec<_>>()
    );
    assert!(done.iter().all(|c| c.status == WcStatus::Success));
    assert!(landed(&a, &b, 8));
    assert_eq!(b.endpoint.qp(QB).unwrap().diagnostics().held, 0);
    assert_eq!(a.endpoint.counters().retransmitted_pkts, 2);
}

#[test]
fn the_timer_goes_back_when_too_little_is_known_held_and_else_resends_the_oldest_hole_alone() {
    let (mut a, mut b) = pair();
    post_writes(&mut a, 6);
    let sent = take(&mut a);
    // The first and the third are lost; two are held beyond the first hole.
    give_all(&mut b, &[sent[1].clone(), sent[3].clone()]);
    let naks = take(&mut b);
    assert_eq!(naks.len(), 1);
    // Only two held beyond the first hole: it waits (it may have been overtaken).
    give_all(&mut a, &naks);
    assert!(take(&mut a).is_empty());
    // The timer (the QP's: nothing measured) goes back N: with fewer than three held
    // beyond it no hole would ever be resent but by the timer, one per expiry, which after
    // a burst of losses is a timeout per packet lost.
    let later = a.endpoint.poll_timeout().unwrap();
    a.endpoint.handle_timeout(later, &mut a.mem);
    let resent = take_at(&mut a, later);
    assert_eq!(
        resent.iter().map(|f| psn(f)).collect::<Vec<_>>(),
        (0..6).map(|i| PSN_A + i).collect::<Vec<_>>(),
        "go-back-N"
    );
    give_all(&mut b, &resent);
    give_all(&mut a, &take(&mut b));
    let done = completions(&mut a);
    assert_eq!(done.len(), 6);
    assert!(landed(&a, &b, 6));
    assert_eq!(b.endpoint.qp(QB).unwrap().diagnostics().held, 0);
    // A lost tail: nothing is held, so the timer goes back N.
    post_writes(&mut a, 3);
    let tail = take(&mut a);
    assert_eq!(tail.len(), 3);
    let later = a.endpoint.poll_timeout().unwrap();
    a.endpoint.handle_timeout(later, &mut a.mem);
    let resent = take_at(&mut a, later);
    assert_eq!(resent.len(), 3, "go-back-N");
    assert_eq!(a.endpoint.counters().sr_packets_resent, 0);

    // The first lost, five held beyond it: the hole is resent at once; that resend is
    // lost too, and the timer resends the oldest hole alone.
    let (mut a, mut b) = pair();
    post_writes(&mut a, 6);
    let sent = take(&mut a);
    give_all(&mut b, &sent[1..]);
    let naks = take(&mut b);
    give_all(&mut a, &naks);
    let first = take(&mut a);
    assert_eq!(
        first.iter().map(|f| psn(f)).collect::<Vec<_>>(),
        [PSN_A],
        "the hole alone"
    );
    let later = a.endpoint.poll_timeout().unwrap();
    a.endpoint.handle_timeout(later, &mut a.mem);
    let resent = take_at(&mut a, later);
    assert_eq!(
        resent.iter().map(|f| psn(f)).collect::<Vec<_>>(),
        [PSN_A],
        "the oldest alone"
    );
    give_all(&mut b, &resent);
    give_all(&mut a, &take(&mut b));
    assert_eq!(completions(&mut a).len(), 6);
    assert!(landed(&a, &b, 6));
    assert_eq!(a.endpoint.counters().sr_packets_resent, 2);
}

#[test]
fn held_packets_go_with_the_error_state_and_reset_turns_the_switch_off() {
    let (mut a, mut b) = pair();
    post_writes(&mut a, 4);
    let sent = take(&mut a);
    give_all(&mut b, &sent[1..]);
    assert_eq!(b.endpoint.qp(QB).unwrap().diagnostics().held, 3);
    let to = |state| QpAttr {
        qp_state: state,
        ..QpAttr::default()
    };
    b.endpoint
        .modify_qp(NOW, QB, &to(QpState::Err), AttrMask::STATE)
        .unwrap();
    assert_eq!(b.endpoint.qp(QB).unwrap().diagnostics().held, 0);
    b.endpoint
        .modify_qp(NOW, QB, &to(QpState::Reset), AttrMask::STATE)
        .unwrap();
    assert!(!b.endpoint.qp(QB).unwrap().selective_repeat());
    // Turning it off drops what is held as well.
    let (mut a, mut b) = pair();
    post_writes(&mut a, 3);
    let sent = take(&mut a);
    give_all(&mut b, &sent[1..]);
    assert_eq!(b.endpoint.qp(QB).unwrap().diagnostics().held, 2);
    b.endpoint.set_selective_repeat(QB, false).unwrap();
    assert_eq!(b.endpoint.qp(QB).unwrap().diagnostics().held, 0);
    assert_eq!(
        b.endpoint.qp(QB).unwrap().diagnostics().expected_psn,
        Psn::new(PSN_A)
    );
}

#[test]
fn a_resend_that_fills_a_hole_shows_the_next_and_a_hole_is_resent_when_due_without_another_answer()
{
    let (mut a, mut b) = pair();
    post_writes(&mut a, 8);
    let sent = take(&mut a);
    // The first two are lost; six are held beyond them, and both holes are resent.
    give_all(&mut b, &sent[2..]);
    give_all(&mut a, &take(&mut b));
    let resent = take(&mut a);
    assert_eq!(
        resent.iter().map(|f| psn(f)).collect::<Vec<_>>(),
        [PSN_A, PSN_A + 1]
    );
    // The first resend arrives, the second is lost again. The responder says at once
    // what it still holds beyond the next gap: an acknowledgement alone would tell the
    // requester nothing of the six held, and only its timer would resend the hole.
    let naks_before = b.endpoint.counters().sr_naks_sent;
    give_all(&mut b, &resent[..1]);
    let answers = take(&mut b);
    assert_eq!(b.endpoint.counters().sr_naks_sent, naks_before + 1);
    give_all(&mut a, &answers);
    assert_eq!(
        completions(&mut a)
            .iter()
            .map(|c| c.wr_id)
            .collect::<Vec<_>>(),
        [0]
    );
    // The second hole was resent a moment ago: it is due again after its interval, and
    // the requester looks at it then, with no further answer and before its
    // retransmission timer.
    assert!(take(&mut a).is_empty());
    let due = a.endpoint.poll_timeout().unwrap();
    a.endpoint.handle_timeout(due, &mut a.mem);
    let again = take_at(&mut a, due);
    assert_eq!(
        again.iter().map(|f| psn(f)).collect::<Vec<_>>(),
        [PSN_A + 1]
    );
    let c = a.endpoint.counters();
    assert_eq!(
        (c.adaptive_timeouts, c.retransmit_timeouts),
        (0, 0),
        "the timer did not expire"
    );
    assert_eq!(c.sr_packets_resent, 3);
    give_all(&mut b, &again);
    give_all(&mut a, &take(&mut b));
    assert_eq!(completions(&mut a).len(), 7);
    assert!(landed(&a, &b, 8));
    assert_eq!(b.endpoint.qp(QB).unwrap().diagnostics().held, 0);
}

#[test]
fn what_the_queue_pairs_of_an_endpoint_hold_together_is_bounded() {
    // Room for two 100-byte packets in the whole endpoint, whatever each QP may hold.
    let limits = xroce_transport::Limits {
        max_endpoint_held_bytes: 250,
        ..xroce_transport::Limits::default()
    };
    let mut a = Host::with_limits(1, limits);
    let mut b = Host::with_limits(2, limits);
    a.add_region(KEY, BASE, 1 << 20, Access::ALL);
    b.add_region(KEY, BASE, 1 << 20, Access::ALL);
    const QA2: Qpn = Qpn::new(0x33);
    const QB2: Qpn = Qpn::new(0x44);
    let c = Connection::default();
    connect(&mut a, QA, &mut b, QB, QpType::Rc, &c, NOW);
    connect(&mut a, QA2, &mut b, QB2, QpType::Rc, &c, NOW);
    for (qa, qb) in [(QA, QB), (QA2, QB2)] {
        a.endpoint.set_selective_repeat(qa, true).unwrap();
        b.endpoint.set_selective_repeat(qb, true).unwrap();
    }
    post_writes_on(&mut a, QA, 4);
    let first = take(&mut a);
    assert_eq!(first.len(), 4);
    // Three ahead of the first QP's gap: two fit, the third does not.
    give_all(&mut b, &first[1..]);
    assert_eq!(b.endpoint.diagnostics().held_bytes, 200);
    assert_eq!(b.endpoint.counters().sr_held_dropped_full, 1);
    // The second QP holds nothing, and still finds no room.
    post_writes_on(&mut a, QA2, 2);
    let second = take(&mut a);
    give_all(&mut b, &second[1..]);
    assert_eq!(b.endpoint.qp(QB2).unwrap().diagnostics().held, 0);
    assert_eq!(b.endpoint.counters().sr_held_dropped_full, 2);
    // The first QP's gap is filled: what it held has had its turn, and the room is back.
    give_all(&mut b, &first[..1]);
    assert_eq!(b.endpoint.qp(QB).unwrap().diagnostics().held, 0);
    assert_eq!(b.endpoint.diagnostics().held_bytes, 0);
    give_all(&mut b, &second[1..]);
    assert_eq!(b.endpoint.diagnostics().held_bytes, 100);
    // A reset QP gives its room back, and the new one shares the endpoint's.
    let reset = QpAttr {
        qp_state: QpState::Reset,
        ..QpAttr::default()
    };
    b.endpoint
        .modify_qp(NOW, QB2, &reset, AttrMask::STATE)
        .unwrap();
    assert_eq!(b.endpoint.diagnostics().held_bytes, 0);
    // A destroyed one too.
    post_writes_on(&mut a, QA, 3);
    let third = take(&mut a);
    give_all(&mut b, &third[1..]);
    assert_eq!(b.endpoint.diagnostics().held_bytes, 200);
    b.endpoint.destroy_qp(QB).unwrap();
    assert_eq!(b.endpoint.diagnostics().held_bytes, 0);
}

#[test]
fn packets_shown_held_leave_the_window_and_the_store_bounds_how_far_beyond_a_hole_the_requester_goes()
 {
    // A window of 16 packets, a store of 48.
    let limits = xroce_transport::Limits {
        max_unacked_psns: 16,
        max_held_packets: 48,
        ..xroce_transport::Limits::default()
    };
    let mut a = Host::with_limits(1, limits);
    let mut b = Host::with_limits(2, limits);
    a.add_region(KEY, BASE, 1 << 20, Access::ALL);
    b.add_region(KEY, BASE, 1 << 20, Access::ALL);
    let c = Connection {
        depth: 128,
        ..Connection::default()
    };
    connect(&mut a, QA, &mut b, QB, QpType::Rc, &c, NOW);
    a.endpoint.set_selective_repeat(QA, true).unwrap();
    b.endpoint.set_selective_repeat(QB, true).unwrap();
    for (i, byte) in a.mem.region_mut(0).bytes.iter_mut().enumerate() {
        *byte = (i * 7 % 251) as u8;
    }
    post_writes(&mut a, 100);
    let window = take(&mut a);
    assert_eq!(window.len(), 16, "the device's window");
    give_all(&mut b, &window[1..]);
    give_all(&mut a, &take(&mut b));

    // The first packet is lost, and every resend of it too: the rest arrives, and the
    // selective acknowledgements show it held, so the window keeps opening, until the
    // PSNs from the hole fill the store.
    let mut now = NOW;
    let mut highest = 0;
    for _ in 0..200 {
        now = now + std::time::Duration::from_micros(100);
        fire_timers(&mut a, now);
        fire_timers(&mut b, now);
        let sent = take_at(&mut a, now);
        let arrived: Vec<Vec<u8>> = sent.into_iter().filter(|f| psn(f) != PSN_A).collect();
        for f in &arrived {
            highest = highest.max(psn(f));
            b.endpoint.handle_frame(now, f, &mut b.mem);
        }
        for f in take_at(&mut b, now) {
            a.endpoint.handle_frame(now, &f, &mut a.mem);
        }
    }
    assert_eq!(
        highest,
        PSN_A + 47,
        "as far as the store holds beyond the hole"
    );
    assert!(a.endpoint.counters().sr_held_by_store > 0);
    assert_eq!(b.endpoint.counters().sr_held_dropped_full, 0);
    assert_eq!(b.endpoint.qp(QB).unwrap().diagnostics().held, 47);
    assert!(completions(&mut a).is_empty());

    // The hole's next resend arrives: everything completes, in order, exactly once.
    let mut done = Vec::new();
    for _ in 0..2000 {
        now = now + std::time::Duration::from_micros(100);
        fire_timers(&mut a, now);
        fire_timers(&mut b, now);
        for f in take_at(&mut a, now) {
            b.endpoint.handle_frame(now, &f, &mut b.mem);
        }
        for f in take_at(&mut b, now) {
            a.endpoint.handle_frame(now, &f, &mut a.mem);
        }
        done.extend(completions(&mut a));
        if done.len() == 100 {
            break;
        }
    }
    assert_eq!(
        done.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        (0..100).collect::<Vec<_>>()
    );
    assert!(done.iter().all(|c| c.status == WcStatus::Success));
    assert!(landed(&a, &b, 100));
    assert_eq!(b.endpoint.counters().sr_held_dropped_full, 0);
}

/// Runs `host`'s timers that are due at `now`, as the engine does.
fn fire_timers(host: &mut Host, now: Instant) {
    if host.endpoint.poll_timeout().is_some_and(|t| t <= now) {
        host.endpoint.handle_timeout(now, &mut host.mem);
    }
}
