//! The endpoint's budget of unacknowledged RC request packets
//! (`EndpointConfig::max_inflight`): many QPs starting messages at once never have more
//! than the budget unacknowledged, every admitted chunk ends with a packet asking for an
//! acknowledgement (so the budget comes back), and every message still completes, in order,
//! with its data.

use xroce_transport::testing::{Connection, Host, connect};
use xroce_transport::{
    Access, Completion, Counter, Gather, Instant, QpType, SendFlags, SendOp, SendWqe, SgeList,
    WcStatus,
};
use xroce_wire::{Frame, Qpn};

const NOW: Instant = Instant::ZERO;
const KEY: u32 = 0x1234;
const RKEY: u32 = KEY | 0x8000_0000;
const BASE: u64 = 0x10_0000;
/// 1024-byte path MTU (`Connection::default()`): a 64 KiB WRITE is 64 packets.
const MSG: u32 = 64 * 1024;
const QPS: u32 = 32;

fn hosts(budget: u32) -> (Host, Host) {
    let mut a = Host::new(1);
    let mut b = Host::new(2);
    a.endpoint.set_max_inflight(budget);
    b.endpoint.set_max_inflight(budget);
    let len = (QPS * MSG) as usize;
    a.add_region(KEY, BASE, len, Access::ALL);
    b.add_region(KEY, BASE, len, Access::ALL);
    let c = Connection::default();
    for i in 0..QPS {
        connect(
            &mut a,
            Qpn::new(0x100 + i),
            &mut b,
            Qpn::new(0x200 + i),
            QpType::Rc,
            &c,
            NOW,
        );
    }
    for (i, byte) in a.mem.region_mut(0).bytes.iter_mut().enumerate() {
        *byte = (i * 7 % 251) as u8;
    }
    (a, b)
}

fn post_writes(a: &mut Host) {
    for i in 0..QPS {
        let at = u64::from(i * MSG);
        let w = SendWqe {
            wr_id: u64::from(i),
            op: SendOp::Write {
                remote_addr: BASE + at,
                rkey: RKEY,
            },
            flags: SendFlags::SIGNALED,
            data: Gather::Sges(SgeList::single(BASE + at, MSG, KEY)),
            ud: None,
        };
        a.endpoint.post_send(NOW, Qpn::new(0x100 + i), w).unwrap();
    }
}

/// Every frame `host` wants to send now, with whether it asks for an acknowledgement.
fn take(host: &mut Host) -> Vec<(Vec<u8>, bool)> {
    take_at(host, NOW)
        .into_iter()
        .map(|frame| {
            let ack_req = Frame::parse_unverified(&frame)
                .map(|f| f.ib.bth.ack_request)
                .unwrap_or(false);
            (frame, ack_req)
        })
        .collect()
}

/// Every frame `host` wants to send at `now`.
fn take_at(host: &mut Host, now: Instant) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; xroce_transport::frame::MAX_FRAME];
    let mut out = Vec::new();
    while let Some(t) = host.endpoint.poll_transmit(now, &mut buf, &mut host.mem) {
        out.push(buf[..t.len].to_vec());
    }
    out
}

/// Delivers `frames` to `b` at `now` and `b`'s answers to `a`; returns `a`'s completions.
fn exchange<'f>(
    a: &mut Host,
    b: &mut Host,
    frames: impl IntoIterator<Item = &'f [u8]>,
    now: Instant,
) -> Vec<Completion> {
    for frame in frames {
        b.endpoint.handle_frame(now, frame, &mut b.mem);
    }
    for frame in take_at(b, now) {
        a.endpoint.handle_frame(now, &frame, &mut a.mem);
    }
    std::iter::from_fn(|| a.endpoint.poll_completion()).collect()
}

#[test]
fn many_qps_never_exceed_the_budget_and_all_complete() {
    const BUDGET: u32 = 200;
    let (mut a, mut b) = hosts(BUDGET);
    post_writes(&mut a);
    let mut rounds = 0;
    let mut completed = 0;
    let mut most_in_flight = 0;
    while completed < QPS {
        rounds += 1;
        assert!(rounds < 1000, "no progress: {completed} of {QPS} completed");
        // A sends all it may: never more than the budget outstanding.
        let burst = take(&mut a);
        most_in_flight = most_in_flight.max(a.endpoint.inflight());
        assert!(
            a.endpoint.inflight() <= u64::from(BUDGET),
            "{} packets unacknowledged, budget {BUDGET}",
            a.endpoint.inflight()
        );
        // The last packet of the burst from each QP asks for an acknowledgement: otherwise
        // its packets would stay unacknowledged and the budget would not come back.
        let mut last_of_qp = std::collections::HashMap::new();
        for (frame, ack_req) in &burst {
            let f = Frame::parse_unverified(frame).unwrap();
            last_of_qp.insert(f.ib.bth.dest_qp, *ack_req);
        }
        assert!(
            last_of_qp.values().all(|&ack_req| ack_req),
            "a QP stopped after a packet that asks for no acknowledgement"
        );
        for c in exchange(&mut a, &mut b, burst.iter().map(|(f, _)| &f[..]), NOW) {
            assert_eq!(c.status, WcStatus::Success, "{c:?}");
            completed += 1;
        }
    }
    assert_eq!(a.endpoint.inflight(), 0);
    assert!(
        most_in_flight > u64::from(BUDGET / 2),
        "the budget was never used: at most {most_in_flight}"
    );
    assert!(a.endpoint.counters().value(Counter::req_held_by_budget) > 0);
    assert!(
        a.mem.region(0).bytes == b.mem.region(0).bytes,
        "the data arrived intact"
    );
}

#[test]
fn without_a_budget_every_qp_sends_its_whole_message_at_once() {
    let (mut a, _b) = hosts(u32::MAX);
    post_writes(&mut a);
    let burst = take(&mut a);
    assert_eq!(burst.len() as u32, QPS * 64);
    assert_eq!(a.endpoint.inflight(), u64::from(QPS * 64));
    assert_eq!(a.endpoint.counters().value(Counter::req_held_by_budget), 0);
}

/// A READ takes the PSNs of all its responses at once: it is admitted only when the budget
/// has room for every one of them (or nothing else is unacknowledged), not one
/// `ack_req_every` chunk's worth.
#[test]
fn a_read_waits_for_room_for_all_its_responses() {
    const BUDGET: u32 = 100;
    let (mut a, mut b) = hosts(BUDGET);
    let post = |a: &mut Host, qp: u32, wr_id: u64, op: SendOp, len: u32| {
        let w = SendWqe {
            wr_id,
            op,
            flags: SendFlags::SIGNALED,
            data: Gather::Sges(SgeList::single(BASE, len, KEY)),
            ud: None,
        };
        a.endpoint.post_send(NOW, Qpn::new(qp), w).unwrap();
    };
    // 16 WRITE packets on one QP, then a READ of 128 responses on another.
    let write = SendOp::Write {
        remote_addr: BASE,
        rkey: RKEY,
    };
    post(&mut a, 0x100, 1, write, 16 * 1024);
    let read = SendOp::Read {
        remote_addr: BASE + u64::from(MSG),
        rkey: RKEY,
    };
    post(&mut a, 0x101, 2, read, 128 * 1024);
    let burst = take(&mut a);
    assert_eq!(
        burst.len(),
        16,
        "the READ waits while the WRITE is unacknowledged"
    );
    assert!(a.endpoint.inflight() <= u64::from(BUDGET));
    let mut completed = 0;
    let mut rounds = 0;
    let mut burst = burst;
    while completed < 2 {
        rounds += 1;
        assert!(rounds < 100, "no progress: {completed} of 2 completed");
        for c in exchange(&mut a, &mut b, burst.iter().map(|(f, _)| &f[..]), NOW) {
            assert_eq!(c.status, WcStatus::Success, "{c:?}");
            completed += 1;
        }
        burst = take(&mut a);
    }
    assert_eq!(a.endpoint.inflight(), 0);
}

fn dest_qp(frame: &[u8]) -> u32 {
    Frame::parse_unverified(frame)
        .unwrap()
        .ib
        .bth
        .dest_qp
        .value()
}

/// A QP without a retransmit timer (`timeout` 0) whose peer stops answering would hold
/// the budget for ever: nothing resends its packets, nothing acknowledges them. After
/// `STALL_AFTER` without an answer it is taken for stalled: its packets stop counting and
/// it sends nothing new, so the other QPs go on; when its peer answers after all, it
/// carries on and its message completes.
#[test]
fn a_qp_without_a_retransmit_timer_does_not_hold_the_budget_of_the_others() {
    const BUDGET: u32 = 64;
    let mut a = Host::new(1);
    let mut b = Host::new(2);
    a.endpoint.set_max_inflight(BUDGET);
    b.endpoint.set_max_inflight(BUDGET);
    a.add_region(KEY, BASE, 2 * MSG as usize, Access::ALL);
    b.add_region(KEY, BASE, 2 * MSG as usize, Access::ALL);
    for (i, byte) in a.mem.region_mut(0).bytes.iter_mut().enumerate() {
        *byte = (i * 13 % 251) as u8;
    }
    let forever = Connection {
        timeout: 0,
        ..Connection::default()
    };
    let (q0, p0) = (Qpn::new(0x100), Qpn::new(0x200));
    let (q1, p1) = (Qpn::new(0x101), Qpn::new(0x201));
    connect(&mut a, q0, &mut b, p0, QpType::Rc, &forever, NOW);
    connect(
        &mut a,
        q1,
        &mut b,
        p1,
        QpType::Rc,
        &Connection::default(),
        NOW,
    );
    let write = |wr_id: u64, at: u64, len: u32| SendWqe {
        wr_id,
        op: SendOp::Write {
            remote_addr: BASE + at,
            rkey: RKEY,
        },
        flags: SendFlags::SIGNALED,
        data: Gather::Sges(SgeList::single(BASE + at, len, KEY)),
        ud: None,
    };

    // QP 0 spends the whole budget; its peer hears nothing of it (the frames are held).
    a.endpoint.post_send(NOW, q0, write(1, 0, MSG)).unwrap();
    let held = take_at(&mut a, NOW);
    assert_eq!(held.len() as u32, BUDGET);
    assert_eq!(a.endpoint.inflight(), u64::from(BUDGET));
    // QP 1 has to wait.
    a.endpoint
        .post_send(NOW, q1, write(2, u64::from(MSG), 4 * 1024))
        .unwrap();
    assert!(take_at(&mut a, NOW).is_empty());

    // A stall period later QP 0 is taken for stalled and QP 1 goes, alone.
    let later = NOW + xroce_transport::time::STALL_AFTER;
    assert!(a.endpoint.poll_timeout().is_some_and(|t| t <= later));
    a.endpoint.handle_timeout(later, &mut a.mem);
    assert_eq!(a.endpoint.counters().value(Counter::req_stalled), 1);
    assert_eq!(a.endpoint.counters().value(Counter::retransmit_timeouts), 0);
    let burst = take_at(&mut a, later);
    assert_eq!(burst.len(), 4);
    assert!(burst.iter().all(|f| dest_qp(f) == p1.value()));
    let c = exchange(&mut a, &mut b, burst.iter().map(|f| &f[..]), later);
    assert_eq!(c.len(), 1, "QP 1's WRITE completes: {c:?}");
    assert_eq!((c[0].wr_id, c[0].status), (2, WcStatus::Success));
    assert!(
        take_at(&mut a, later).is_empty(),
        "a stalled QP sends nothing"
    );

    // QP 0's peer answers after all: QP 0 carries on and its WRITE completes.
    let mut frames = held;
    let mut rounds = 0;
    loop {
        rounds += 1;
        assert!(rounds < 100, "QP 0 made no progress");
        let done = exchange(&mut a, &mut b, frames.iter().map(|f| &f[..]), later);
        if let Some(c) = done.first() {
            assert_eq!((c.wr_id, c.status), (1, WcStatus::Success));
            break;
        }
        frames = take_at(&mut a, later);
    }
    assert_eq!(a.endpoint.inflight(), 0);
    let written = MSG as usize + 4 * 1024;
    assert!(
        a.mem.region(0).bytes[..written] == b.mem.region(0).bytes[..written],
        "the data arrived intact"
    );
}
