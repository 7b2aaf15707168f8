//! `Endpoint::pace`: a paced queue pair gets no transmit turn before its instant, others
//! keep theirs, `poll_timeout` says when it may send again, and its messages still
//! complete once it does.

use xroce_transport::testing::{Connection, Host, connect, exchange};
use xroce_transport::{
    Access, Gather, Instant, QpType, SendFlags, SendOp, SendWqe, SgeList, WcStatus,
};
use xroce_wire::Qpn;

const KEY: u32 = 0x1234;
const RKEY: u32 = KEY | 0x8000_0000;
const BASE: u64 = 0x10_0000;
const QA: Qpn = Qpn::new(0x100);
const QB: Qpn = Qpn::new(0x101);

fn at(micros: u64) -> Instant {
    Instant::from_nanos(micros * 1000)
}

fn hosts() -> (Host, Host) {
    let mut a = Host::new(1);
    let mut b = Host::new(2);
    a.add_region(KEY, BASE, 1 << 20, Access::ALL);
    b.add_region(KEY, BASE, 1 << 20, Access::ALL);
    let c = Connection::default();
    connect(
        &mut a,
        QA,
        &mut b,
        Qpn::new(0x200),
        QpType::Rc,
        &c,
        Instant::ZERO,
    );
    connect(
        &mut a,
        QB,
        &mut b,
        Qpn::new(0x201),
        QpType::Rc,
        &c,
        Instant::ZERO,
    );
    (a, b)
}

fn write(a: &mut Host, qpn: Qpn, len: u32, now: Instant) {
    let w = SendWqe {
        wr_id: u64::from(qpn.value()),
        op: SendOp::Write {
            remote_addr: BASE,
            rkey: RKEY,
        },
        flags: SendFlags::SIGNALED,
        data: Gather::Sges(SgeList::single(BASE, len, KEY)),
        ud: None,
    };
    a.endpoint.post_send(now, qpn, w).unwrap();
}

fn senders(a: &mut Host, now: Instant) -> Vec<Qpn> {
    let mut buf = vec![0u8; xroce_transport::frame::MAX_FRAME];
    let mut who = Vec::new();
    while let Some(t) = a.endpoint.poll_transmit(now, &mut buf, &mut a.mem) {
        who.push(t.qpn);
    }
    who
}

#[test]
fn a_paced_qp_waits_for_its_instant_and_the_others_do_not() {
    let (mut a, _b) = hosts();
    write(&mut a, QA, 4096, at(0));
    write(&mut a, QB, 4096, at(0));
    let mut buf = vec![0u8; xroce_transport::frame::MAX_FRAME];
    // One packet of QA, then it is paced for 100 µs.
    let first = a
        .endpoint
        .poll_transmit(at(0), &mut buf, &mut a.mem)
        .unwrap();
    assert_eq!(first.qpn, QA);
    a.endpoint.pace(QA, at(100));
    assert_eq!(senders(&mut a, at(0)), vec![QB; 4], "QB sends, QA waits");
    assert_eq!(a.endpoint.poll_timeout(), Some(at(100)));
    assert!(senders(&mut a, at(99)).is_empty());
    // An earlier instant does not shorten the wait.
    a.endpoint.pace(QA, at(50));
    assert!(senders(&mut a, at(60)).is_empty());
    assert_eq!(senders(&mut a, at(100)), vec![QA; 3]);
}

#[test]
fn handle_timeout_gives_the_turn_back_and_the_messages_complete() {
    let (mut a, mut b) = hosts();
    write(&mut a, QA, 8192, at(0));
    let mut now = at(0);
    let mut sent = 0;
    let mut last = now;
    let mut buf = vec![0u8; xroce_transport::frame::MAX_FRAME];
    // One packet per 10 µs: pace after each.
    while let Some(t) = {
        if a.endpoint.poll_timeout().is_some_and(|t| t <= now) {
            a.endpoint.handle_timeout(now, &mut a.mem);
        }
        a.endpoint.poll_transmit(now, &mut buf, &mut a.mem)
    } {
        b.endpoint.handle_frame(now, &buf[..t.len], &mut b.mem);
        sent += 1;
        last = now;
        a.endpoint
            .pace(t.qpn, now + core::time::Duration::from_micros(10));
        assert!(
            a.endpoint
                .poll_transmit(now, &mut buf, &mut a.mem)
                .is_none()
        );
        now = a.endpoint.poll_timeout().expect("the paced QP's instant");
    }
    assert_eq!(sent, 8);
    assert_eq!(last, at(70), "8 packets, one per 10 µs");
    exchange(&mut a, &mut b, now, &mut |_, _| true);
    let c = a.endpoint.poll_completion().expect("the WRITE completes");
    assert_eq!(c.status, WcStatus::Success);
}

#[test]
fn pacing_an_unknown_or_destroyed_qp_is_harmless() {
    let (mut a, _b) = hosts();
    a.endpoint.pace(Qpn::new(0x999), at(5));
    assert_eq!(a.endpoint.poll_timeout(), None);
    a.endpoint.pace(QA, at(5));
    a.endpoint.destroy_qp(QA).unwrap();
    assert_eq!(a.endpoint.poll_timeout(), None, "its entry went stale");
    write(&mut a, QB, 1024, at(0));
    assert_eq!(senders(&mut a, at(0)), vec![QB]);
}
