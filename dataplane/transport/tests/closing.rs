//! A queue pair the application destroys lingers to answer its peer's retries of what it
//! already received (`Endpoint::close_qp`), and nothing else: the acknowledgement of the
//! peer's last message may have been lost when the application, having seen the message,
//! destroyed its QP, and the peer's send would otherwise end in retry exceeded.

use xroce_transport::endpoint::MAX_LINGERING;
use xroce_transport::qp::{LINGER_MAX, LINGER_MIN};
use xroce_transport::testing::{Connection, Direction, Host, connect, exchange, qp_config, run};
use xroce_transport::{
    Access, Counter, EndpointError, Gather, Instant, QpType, SendFlags, SendOp, SendWqe, SgeList,
    WcStatus,
};
use xroce_wire::{Frame, FrameRepr, IpRepr, Qpn};

const NOW: Instant = Instant::ZERO;
const QA: Qpn = Qpn::new(0x11);
const QB: Qpn = Qpn::new(0x22);
/// Where each host's region starts; b's rkey is `1 | 0x8000_0000`.
const BASE: u64 = 0x1000;

/// A WRITE of a's 8 bytes at `offset` into b's region at the same offset.
fn write(wr_id: u64, offset: u64) -> SendWqe {
    SendWqe {
        wr_id,
        op: SendOp::Write {
            remote_addr: BASE + offset,
            rkey: 1 | 0x8000_0000,
        },
        flags: SendFlags::SIGNALED,
        data: Gather::Sges(SgeList::single(BASE + offset, 8, 1)),
        ud: None,
    }
}

/// Two hosts with a connected RC pair, a's region filled with a pattern.
fn pair(c: &Connection) -> (Host, Host) {
    let mut a = Host::new(1);
    let mut b = Host::new(2);
    let ra = a.add_region(1, BASE, 4096, Access::ALL);
    b.add_region(1, BASE, 4096, Access::ALL);
    for (i, byte) in a.mem.region_mut(ra).bytes.iter_mut().enumerate() {
        *byte = i as u8 | 1;
    }
    connect(&mut a, QA, &mut b, QB, QpType::Rc, c, NOW);
    (a, b)
}

fn statuses(host: &mut Host) -> Vec<(u64, WcStatus)> {
    std::iter::from_fn(|| host.endpoint.poll_completion())
        .map(|c| (c.wr_id, c.status))
        .collect()
}

/// a WRITEs once; the WRITE lands at b and its acknowledgement is lost; b's QP is
/// destroyed with `destroy`; then the network carries everything.
fn last_ack_lost(destroy: impl FnOnce(&mut Host)) -> (Host, Host, Instant) {
    let (mut a, mut b) = pair(&Connection::default());
    a.endpoint.post_send(NOW, QA, write(1, 0)).unwrap();
    exchange(&mut a, &mut b, NOW, &mut |dir, _| dir == Direction::AtoB);
    assert_eq!(b.endpoint.counters().rcvd_pkts, 1);
    destroy(&mut b);
    let end = run(&mut a, &mut b, NOW, 1_000, &mut |_, _| true);
    (a, b, end)
}

#[test]
fn a_destroyed_qp_answers_the_retry_of_a_message_whose_acknowledgement_was_lost() {
    let (mut a, b, end) = last_ack_lost(|b| b.endpoint.close_qp(NOW, QB).unwrap());
    assert_eq!(statuses(&mut a), [(1, WcStatus::Success)]);
    let c = b.endpoint.counters();
    assert_eq!(c.value(Counter::closed_qp_answers), 1);
    assert_eq!(c.duplicate_request, 1);
    // It went when its time was over: the run ended on its timer.
    assert_eq!(b.endpoint.lingering(), 0);
    assert!(end >= NOW + LINGER_MIN, "{end:?}");
}

#[test]
fn destroyed_at_once_the_qp_leaves_the_peer_to_retry_exceeded() {
    // What the lingering is for: the same run with the QP gone at once.
    let (mut a, b, _) = last_ack_lost(|b| b.endpoint.destroy_qp(QB).unwrap());
    assert_eq!(statuses(&mut a), [(1, WcStatus::RetryExcErr)]);
    assert_eq!(b.endpoint.counters().value(Counter::closed_qp_answers), 0);
    assert!(b.endpoint.counters().rcvd_unknown_qpn >= 7);
}

#[test]
fn an_acknowledgement_not_sent_yet_goes_out_after_the_destroy() {
    // The QP is destroyed between the WRITE's arrival and the transmit of its
    // acknowledgement (the application was quick): the acknowledgement still goes.
    let (mut a, mut b) = pair(&Connection::default());
    a.endpoint.post_send(NOW, QA, write(1, 0)).unwrap();
    let mut buf = vec![0u8; xroce_transport::frame::MAX_FRAME];
    let t = a.endpoint.poll_transmit(NOW, &mut buf, &mut a.mem).unwrap();
    b.endpoint.handle_frame(NOW, &buf[..t.len], &mut b.mem);
    b.endpoint.close_qp(NOW, QB).unwrap();
    let t = b.endpoint.poll_transmit(NOW, &mut buf, &mut b.mem).unwrap();
    assert!(t.closed);
    a.endpoint.handle_frame(NOW, &buf[..t.len], &mut a.mem);
    assert_eq!(statuses(&mut a), [(1, WcStatus::Success)]);
    assert!(
        b.endpoint
            .poll_transmit(NOW, &mut buf, &mut b.mem)
            .is_none()
    );
}

#[test]
fn a_lingering_qp_takes_nothing_new_and_is_gone_for_the_application() {
    let (mut a, mut b) = pair(&Connection::default());
    a.endpoint.post_send(NOW, QA, write(1, 0)).unwrap();
    let now = run(&mut a, &mut b, NOW, 100, &mut |_, _| true);
    assert_eq!(statuses(&mut a), [(1, WcStatus::Success)]);
    b.endpoint.close_qp(now, QB).unwrap();
    assert_eq!(b.endpoint.lingering(), 1);
    // Gone for every call.
    assert!(b.endpoint.qp(QB).is_none());
    assert_eq!(b.endpoint.qp_stats().count(), 0);
    assert_eq!(b.endpoint.qpns().count(), 0);
    assert_eq!(
        b.endpoint.post_send(now, QB, write(9, 0)),
        Err(EndpointError::NoSuchQp(QB))
    );
    assert_eq!(
        b.endpoint.close_qp(now, QB),
        Err(EndpointError::NoSuchQp(QB))
    );
    // A new WRITE (the PSN it expects) and a READ find no QP: nothing lands in memory.
    a.endpoint.post_send(now, QA, write(2, 64)).unwrap();
    let read = SendWqe {
        op: SendOp::Read {
            remote_addr: BASE,
            rkey: 1 | 0x8000_0000,
        },
        ..write(3, 128)
    };
    a.endpoint.post_send(now, QA, read).unwrap();
    run(&mut a, &mut b, now, 1_000, &mut |_, _| true);
    assert_eq!(
        statuses(&mut a),
        [(2, WcStatus::RetryExcErr), (3, WcStatus::WrFlushErr)]
    );
    assert!(b.mem.region(0).bytes[64..72].iter().all(|&x| x == 0));
    let c = b.endpoint.counters();
    assert_eq!(c.value(Counter::closed_qp_answers), 0);
    assert!(c.rcvd_unknown_qpn >= 8, "{}", c.rcvd_unknown_qpn);
    assert_eq!(b.endpoint.lingering(), 0);
}

#[test]
fn a_qp_that_received_nothing_goes_at_once_and_a_new_qp_takes_a_lingering_number() {
    let (mut a, mut b) = pair(&Connection::default());
    a.endpoint.close_qp(NOW, QA).unwrap();
    assert_eq!(a.endpoint.lingering(), 0, "QA never received a request");
    b.endpoint.destroy_qp(QB).unwrap();
    let (mut a, mut b) = pair(&Connection::default());
    a.endpoint.post_send(NOW, QA, write(1, 0)).unwrap();
    exchange(&mut a, &mut b, NOW, &mut |_, _| true);
    b.endpoint.close_qp(NOW, QB).unwrap();
    assert_eq!(b.endpoint.lingering(), 1);
    let limits = b.endpoint.config().limits;
    b.endpoint
        .create_qp(qp_config(QB, QpType::Rc, 16, limits))
        .unwrap();
    assert_eq!(b.endpoint.lingering(), 0);
    assert!(b.endpoint.qp(QB).is_some());
}

#[test]
fn how_long_a_qp_lingers_follows_its_timeout_within_bounds() {
    for (timeout, retry_cnt, at_least, at_most) in [
        // 4.096 µs × 2^14 = 67 ms, eight tries: 537 ms.
        (14, 7, LINGER_MIN, LINGER_MIN * 2),
        // 268 ms × 8 = 2.1 s.
        (16, 7, LINGER_MIN * 4, LINGER_MAX / 4),
        // No timeout at all (wait forever), and a very long one: the most.
        (0, 7, LINGER_MAX, LINGER_MAX),
        (30, 7, LINGER_MAX, LINGER_MAX),
        // A short one: the least.
        (8, 0, LINGER_MIN, LINGER_MIN),
    ] {
        let c = Connection {
            timeout,
            retry_cnt,
            ..Connection::default()
        };
        let (mut a, mut b) = pair(&c);
        a.endpoint.post_send(NOW, QA, write(1, 0)).unwrap();
        exchange(&mut a, &mut b, NOW, &mut |_, _| true);
        b.endpoint.close_qp(NOW, QB).unwrap();
        let gone = b.endpoint.poll_timeout().expect("the lingering ends");
        assert!(
            gone >= NOW + at_least && gone <= NOW + at_most,
            "timeout {timeout}: {gone:?}"
        );
    }
}

#[test]
fn at_most_max_lingering_qps_linger_and_the_first_due_goes_first() {
    let mut a = Host::new(1);
    let mut b = Host::new(2);
    a.add_region(1, BASE, 4096, Access::ALL);
    b.add_region(1, BASE, 4096, Access::ALL);
    let c = Connection {
        depth: 4,
        ..Connection::default()
    };
    let n = MAX_LINGERING as u32 + 1;
    for i in 0..n {
        let (qa, qb) = (Qpn::new(0x1000 + i), Qpn::new(0x10_0000 + i));
        connect(&mut a, qa, &mut b, qb, QpType::Rc, &c, NOW);
        a.endpoint.post_send(NOW, qa, write(1, 0)).unwrap();
    }
    exchange(&mut a, &mut b, NOW, &mut |_, _| true);
    for i in 0..n {
        // Each closed a microsecond after the one before: the first is due first.
        let now = NOW + std::time::Duration::from_micros(u64::from(i));
        b.endpoint.close_qp(now, Qpn::new(0x10_0000 + i)).unwrap();
    }
    assert_eq!(b.endpoint.lingering(), MAX_LINGERING);
    // The first one went: a retry of its WRITE is not answered; the second's is.
    let mut answered = Vec::new();
    for i in [0, 1] {
        let before = b.endpoint.counters().value(Counter::closed_qp_answers);
        let qa = Qpn::new(0x1000 + i);
        // Replay the request a sent: a QP reset and brought up again sends the same PSN.
        a.endpoint.destroy_qp(qa).unwrap();
        let qb = Qpn::new(0x10_0000 + i);
        let limits = a.endpoint.config().limits;
        a.endpoint
            .create_qp(qp_config(qa, QpType::Rc, 4, limits))
            .unwrap();
        let peer = xroce_transport::testing::Peer {
            path: a.path_to(&b),
            qpn: qb,
            sq_psn: c.psn_a,
            rq_psn: c.psn_b,
        };
        xroce_transport::testing::bring_up(&mut a, NOW, qa, QpType::Rc, peer, &c);
        a.endpoint.post_send(NOW, qa, write(2, 0)).unwrap();
        exchange(&mut a, &mut b, NOW, &mut |_, _| true);
        answered.push(b.endpoint.counters().value(Counter::closed_qp_answers) - before);
    }
    assert_eq!(answered, [0, 1]);
}

/// `frame` as if sent from 10.0.0.9 (its IPv4 source rewritten; the ICRC made again).
fn from_elsewhere(frame: &[u8]) -> Vec<u8> {
    let f = Frame::parse(frame).unwrap();
    let mut headers: FrameRepr = f.headers;
    let IpRepr::Ipv4(ref mut ip) = headers.ip else {
        panic!("IPv4 lab");
    };
    ip.src_addr = [10, 0, 0, 9].into();
    let mut buf = vec![0u8; 8192];
    let at = headers.header_len();
    let n = f.ib.emit(&mut buf[at..], f.payload.len()).unwrap();
    buf[at + n..at + n + f.payload.len()].copy_from_slice(f.payload);
    let len = headers.emit(&mut buf, n + f.payload.len()).unwrap();
    buf.truncate(len);
    buf
}

#[test]
fn a_lingering_qp_answers_its_peer_alone() {
    let (mut a, mut b) = pair(&Connection::default());
    a.endpoint.post_send(NOW, QA, write(1, 0)).unwrap();
    let mut buf = vec![0u8; xroce_transport::frame::MAX_FRAME];
    let t = a.endpoint.poll_transmit(NOW, &mut buf, &mut a.mem).unwrap();
    let request = buf[..t.len].to_vec();
    b.endpoint.handle_frame(NOW, &request, &mut b.mem);
    while b
        .endpoint
        .poll_transmit(NOW, &mut buf, &mut b.mem)
        .is_some()
    {}
    b.endpoint.close_qp(NOW, QB).unwrap();
    // The same duplicate from another address: dropped as any QP drops it.
    b.endpoint
        .handle_frame(NOW, &from_elsewhere(&request), &mut b.mem);
    let c = b.endpoint.counters();
    assert_eq!(c.rcvd_wrong_addr, 1);
    assert_eq!(c.value(Counter::closed_qp_answers), 0);
    assert!(
        b.endpoint
            .poll_transmit(NOW, &mut buf, &mut b.mem)
            .is_none()
    );
    // From the peer: answered.
    b.endpoint.handle_frame(NOW, &request, &mut b.mem);
    assert_eq!(b.endpoint.counters().value(Counter::closed_qp_answers), 1);
    assert!(
        b.endpoint
            .poll_transmit(NOW, &mut buf, &mut b.mem)
            .is_some()
    );
}
