//! The endpoint's budget of unacknowledged RC request packets
//! (`EndpointConfig::max_inflight`): many QPs starting messages at once never have more
//! than the budget unacknowledged, every admitted chunk ends with a packet asking for an
//! acknowledgement (so the budget comes back), and every message still completes, in order,
//! with its data.

use xroce_transport::testing::{Connection, Host, connect};
use xroce_transport::{
    Access, Counter, Gather, Instant, QpType, SendFlags, SendOp, SendWqe, SgeList, WcStatus,
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
    let mut buf = vec![0u8; xroce_transport::frame::MAX_FRAME];
    let mut out = Vec::new();
    while let Some(t) = host.endpoint.poll_transmit(NOW, &mut buf, &mut host.mem) {
        let frame = buf[..t.len].to_vec();
        let ack_req = Frame::parse_unverified(&frame)
            .map(|f| f.ib.bth.ack_request)
            .unwrap_or(false);
        out.push((frame, ack_req));
    }
    out
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
        for (frame, _) in &burst {
            b.endpoint.handle_frame(NOW, frame, &mut b.mem);
        }
        for (frame, _) in take(&mut b) {
            a.endpoint.handle_frame(NOW, &frame, &mut a.mem);
        }
        while let Some(c) = a.endpoint.poll_completion() {
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
        for (frame, _) in &burst {
            b.endpoint.handle_frame(NOW, frame, &mut b.mem);
        }
        for (frame, _) in take(&mut b) {
            a.endpoint.handle_frame(NOW, &frame, &mut a.mem);
        }
        while let Some(c) = a.endpoint.poll_completion() {
            assert_eq!(c.status, WcStatus::Success, "{c:?}");
            completed += 1;
        }
        burst = take(&mut a);
    }
    assert_eq!(a.endpoint.inflight(), 0);
}
