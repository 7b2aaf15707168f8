//! `Congestion` beside two transport endpoints, frame by frame: ECN marking toward peers
//! that take part and not toward those that do not, CE marks answered with CNPs at most
//! once per interval, CNPs consumed and turned into a rate, losses and round trips taken
//! from the transport's own traffic, and nothing at all when it is off.

use core::time::Duration;

use xroce_congestion::{
    Algorithm, Arrival, CnpPath, Congestion, CongestionConfig, Controller, EcnMode, HELLO_PACKETS,
    Rate,
};
use xroce_transport::testing::{Connection, Host, connect};
use xroce_transport::{Access, Gather, Instant, QpType, SendFlags, SendOp, SendWqe, SgeList};
use xroce_wire::peek::{self, ECN_CE, ECN_ECT0, ECN_NOT_ECT};
use xroce_wire::{BthPacket, Frame, Opcode, Qpn};

const KEY: u32 = 0x1234;
const RKEY: u32 = KEY | 0x8000_0000;
const BASE: u64 = 0x10_0000;
const QA: Qpn = Qpn::new(0x100);
const QB: Qpn = Qpn::new(0x200);
const GBIT: Rate = Rate::from_mbit(1000);

fn at(micros: u64) -> Instant {
    Instant::from_nanos(micros * 1000)
}

/// Host a (QP 0x100) and host b (QP 0x200), connected RC with a 1024-byte path MTU.
fn hosts() -> (Host, Host) {
    let mut a = Host::new(1);
    let mut b = Host::new(2);
    a.add_region(KEY, BASE, 1 << 20, Access::ALL);
    b.add_region(KEY, BASE, 1 << 20, Access::ALL);
    let c = Connection::default();
    connect(&mut a, QA, &mut b, QB, QpType::Rc, &c, Instant::ZERO);
    (a, b)
}

fn write(a: &mut Host, qpn: Qpn, len: u32, now: Instant) {
    let w = SendWqe {
        wr_id: 7,
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

/// Every frame `host` sends at `now`, each passed through its congestion control (when
/// it has one), with the pacing it asked for applied.
fn send(host: &mut Host, cc: Option<&mut Congestion>, now: Instant) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; xroce_transport::frame::MAX_FRAME];
    let mut frames = Vec::new();
    let mut cc = cc;
    while let Some(t) = host.endpoint.poll_transmit(now, &mut buf, &mut host.mem) {
        let frame = &mut buf[..t.len];
        if let Some(cc) = cc.as_deref_mut()
            && let Some(until) = cc.on_transmit(now, t.qpn, frame)
        {
            host.endpoint.pace(t.qpn, until);
        }
        frames.push(frame.to_vec());
    }
    frames
}

/// Hands `frames` to `host`, through its congestion control when it has one.
fn receive(host: &mut Host, cc: Option<&mut Congestion>, frames: &[Vec<u8>], now: Instant) {
    let mut cc = cc;
    for f in frames {
        let arrival = match cc.as_deref_mut() {
            Some(cc) => {
                let endpoint = &host.endpoint;
                cc.handle_frame(now, f, |q| endpoint.qp(q).is_some())
            }
            None => Arrival::Transport,
        };
        if arrival == Arrival::Transport {
            host.endpoint.handle_frame(now, f, &mut host.mem);
        }
    }
}

/// A CNP for host a's QP, as host b would send it.
fn cnp_for_qa(a: &Host) -> Vec<u8> {
    let mut buf = [0u8; 256];
    let path = CnpPath {
        dest_qp: QA,
        ..CnpPath::of(&a.endpoint, QA).unwrap()
    };
    let n = path.emit(&mut buf, 48).unwrap();
    buf[..n].to_vec()
}

fn ecn(frame: &[u8]) -> u8 {
    peek::peek(frame).unwrap().ecn
}

#[test]
fn two_xroce_ends_find_each_other_and_mark_everything_after_one_round_trip() {
    let (mut a, mut b) = hosts();
    let mut ca = Congestion::new(CongestionConfig::new(GBIT));
    let mut cb = Congestion::new(CongestionConfig::new(GBIT));
    write(&mut a, QA, 4096, at(0));
    let first = send(&mut a, Some(&mut ca), at(0));
    assert_eq!(first.len(), 4);
    // Nothing is ECN-capable before the peer is known; the hello says who a is.
    assert!(first.iter().all(|f| ecn(f) == ECN_NOT_ECT && hello(f)));
    assert_eq!(cb.poll_xroce_peer(), None);
    receive(&mut b, Some(&mut cb), &first, at(1));
    assert_eq!(
        cb.poll_xroce_peer(),
        Some(QB),
        "b knows a from its first packet"
    );
    assert_eq!(cb.poll_xroce_peer(), None, "once");
    let acks = send(&mut b, Some(&mut cb), at(1));
    assert!(!acks.is_empty());
    assert!(
        acks.iter().all(|f| ecn(f) == ECN_ECT0),
        "b saw an ECN-capable packet from a: its answers are ECN-capable"
    );
    assert!(
        acks.iter().all(|f| hello(f)),
        "b's first answers say who b is"
    );
    assert_eq!(ca.poll_xroce_peer(), None);
    receive(&mut a, Some(&mut ca), &acks, at(2));
    assert_eq!(
        ca.poll_xroce_peer(),
        Some(QA),
        "a knows b from its first answer"
    );
    write(&mut a, QA, 4096, at(3));
    let second = send(&mut a, Some(&mut ca), at(3));
    assert!(second.iter().all(|f| ecn(f) == ECN_ECT0));
    // The hello is on a queue pair's first HELLO_PACKETS packets, known peer or not.
    for (i, f) in first.iter().chain(&second).enumerate() {
        assert_eq!(hello(f), i < usize::from(HELLO_PACKETS), "packet {i}");
    }
    assert_eq!(ca.counters().cc_hello_packets, u64::from(HELLO_PACKETS));
    assert_eq!(cb.counters().cc_hello_packets, acks.len() as u64);
    // Past its first packets no queue pair says hello again.
    for round in 0..4 {
        let t = 10 + round * 3;
        write(&mut a, QA, 4096, at(t));
        let frames = send(&mut a, Some(&mut ca), at(t));
        receive(&mut b, Some(&mut cb), &frames, at(t + 1));
        let answers = send(&mut b, Some(&mut cb), at(t + 1));
        receive(&mut a, Some(&mut ca), &answers, at(t + 2));
    }
    assert_eq!(ca.counters().cc_hello_packets, u64::from(HELLO_PACKETS));
    assert!(cb.counters().cc_hello_packets <= u64::from(HELLO_PACKETS));
    assert_eq!((ca.poll_xroce_peer(), cb.poll_xroce_peer()), (None, None));
    assert_eq!(ca.counters().cc_xroce_peers, 1);
    assert_eq!(cb.counters().cc_xroce_peers, 1);
    assert!(ca.qp(QA, at(30)).unwrap().peer_xroce);
    // Frames stay valid: the ICRC does not cover the ECN bits.
    for f in first.iter().chain(&second).chain(&acks) {
        assert!(Frame::parse(f).is_ok());
    }
    assert!(ca.qp(QA, at(3)).unwrap().ecn_capable);
}

/// Whether a frame carries a UDP checksum (xroce's hello), checked as a UDP receiver would.
fn hello(frame: &[u8]) -> bool {
    peek::has_udp_checksum(frame, &peek::peek(frame).unwrap())
}

#[test]
fn toward_a_peer_without_ecn_no_bit_is_set_and_only_the_first_packets_carry_a_udp_checksum() {
    // a with congestion control, and a twin without, against peers as Linux rxe is (no
    // ECN, no checksum): the frames may differ in the UDP checksum of the first
    // HELLO_PACKETS alone.
    let (mut a, mut b) = hosts();
    let (mut twin_a, mut twin_b) = hosts();
    let mut ca = Congestion::new(CongestionConfig::new(GBIT));
    let (mut all, mut plain) = (Vec::new(), Vec::new());
    for round in 0..5 {
        let (t0, t1, t2) = (at(round * 10), at(round * 10 + 1), at(round * 10 + 2));
        write(&mut a, QA, 8192, t0);
        write(&mut twin_a, QA, 8192, t0);
        let frames = send(&mut a, Some(&mut ca), t0);
        let twin = send(&mut twin_a, None, t0);
        receive(&mut b, None, &frames, t1);
        receive(&mut twin_b, None, &twin, t1);
        let acks = send(&mut b, None, t1);
        assert_eq!(
            acks,
            send(&mut twin_b, None, t1),
            "the peer sees no difference"
        );
        assert!(acks.iter().all(|f| ecn(f) == ECN_NOT_ECT));
        receive(&mut a, Some(&mut ca), &acks, t2);
        receive(&mut twin_a, None, &acks, t2);
        all.extend(frames);
        plain.extend(twin);
    }
    assert_eq!((all.len(), plain.len()), (40, 40));
    for (i, (f, p)) in all.iter().zip(&plain).enumerate() {
        let at = peek::peek(f).unwrap().udp_start + 6;
        assert_eq!(f[..at], p[..at], "frame {i}");
        assert_eq!(f[at + 2..], p[at + 2..], "frame {i}");
        assert_eq!(p[at..at + 2], [0, 0], "the transport sends none, as rxe");
        assert_eq!(hello(f), i < usize::from(HELLO_PACKETS), "frame {i}");
        assert!(Frame::parse(f).is_ok());
    }
    assert_eq!(ca.counters().cc_ect_packets, 0);
    assert_eq!(ca.counters().cc_hello_packets, u64::from(HELLO_PACKETS));
    assert!(!ca.qp(QA, at(50)).unwrap().ecn_capable);
}

#[test]
fn marked_packets_are_answered_with_one_cnp_per_interval_to_the_peer_qp() {
    let (mut a, mut b) = hosts();
    let mut ca = Congestion::new(CongestionConfig::new(GBIT));
    let mut cb = Congestion::new(CongestionConfig::new(GBIT));
    let mut cnps = Vec::new();
    for t in 0..20u64 {
        let now = at(t * 10);
        write(&mut a, QA, 1024, now);
        let mut frames = send(&mut a, Some(&mut ca), now);
        // The switch marks every data packet it forwards.
        for f in &mut frames {
            let p = peek::peek(f).unwrap();
            if p.ecn != ECN_NOT_ECT {
                peek::set_ecn(f, &p, ECN_CE);
            }
        }
        receive(&mut b, Some(&mut cb), &frames, now);
        let mut buf = [0u8; 256];
        while let Some(n) = cb.poll_cnp(&mut buf, |q| CnpPath::of(&b.endpoint, q)) {
            cnps.push((t * 10, buf[..n].to_vec()));
        }
        let acks = send(&mut b, Some(&mut cb), now);
        receive(&mut a, Some(&mut ca), &acks, now);
    }
    // Every packet after the first answer was marked (the first carried the hello, not
    // ECT(0)): 19 marks, CNPs at 10, 60, 110, 160 µs (10 µs apart, one per 50 µs).
    let marked = cb.counters().np_ecn_marked_roce_packets;
    assert!(marked >= 19, "{marked}");
    let when: Vec<u64> = cnps.iter().map(|(t, _)| *t).collect();
    assert_eq!(when, [10, 60, 110, 160]);
    assert_eq!(cb.counters().np_cnp_sent, 4);
    for (_, f) in &cnps {
        let f = Frame::parse(f).unwrap();
        assert_eq!(f.ib.bth.opcode, Opcode::CNP);
        assert_eq!(f.ib.bth.dest_qp, QA, "to the sender's QP");
        assert!(f.ib.bth.becn);
    }
    // At a, CNPs are consumed (the transport never sees them) and handled.
    let before = a.endpoint.counters().rcvd_pkts;
    for (t, f) in &cnps {
        assert_eq!(ca.handle_frame(at(*t + 1), f, |_| true), Arrival::Consumed);
    }
    assert_eq!(a.endpoint.counters().rcvd_pkts, before);
    assert_eq!(ca.counters().rp_cnp_handled, 4);
    let state = ca.qp(QA, at(200)).unwrap();
    assert_eq!(state.controller, Controller::Dcqcn);
    assert!(state.rate.is_some_and(|r| r < GBIT), "{state:?}");
}

#[test]
fn cnps_slow_a_qp_down_through_pacing() {
    let (mut a, _b) = hosts();
    let mut config = CongestionConfig::new(GBIT);
    // No increases: the rate the CNPs leave stays while the test measures it.
    config.dcqcn.rpg_time_reset = Duration::from_secs(1);
    config.dcqcn.rpg_byte_reset = 0;
    let mut ca = Congestion::new(config);
    write(&mut a, QA, 1024, at(0));
    send(&mut a, Some(&mut ca), at(0));
    let cnp = cnp_for_qa(&a);
    // A CNP every 50 µs for 2 ms: DCQCN cuts the rate far below the line rate.
    for t in (1..2000).step_by(50) {
        assert_eq!(ca.handle_frame(at(t), &cnp, |_| true), Arrival::Consumed);
    }
    let rate = ca.qp(QA, at(2000)).unwrap().rate.unwrap();
    assert!(rate < Rate::from_mbit(500), "{rate}");
    // 24 KiB now leave at that rate once the bucket's 16 KiB are spent.
    write(&mut a, QA, 24 << 10, at(2000));
    let mut now = at(2000);
    let mut frames = 0;
    let mut last = now;
    while frames < 24 {
        let sent = send(&mut a, Some(&mut ca), now).len();
        if sent > 0 {
            last = now;
        }
        frames += sent;
        if a.endpoint.poll_timeout().is_some_and(|t| t <= now) {
            a.endpoint.handle_timeout(now, &mut a.mem);
        }
        now = now + Duration::from_micros(1);
    }
    let took = last - at(2000);
    let at_rate = rate.time_for(8 << 10);
    assert!(
        took >= at_rate,
        "the last 8 KiB took {took:?}; at {rate} they take {at_rate:?}"
    );
    assert!(took < at_rate * 2, "{took:?}");
    assert!(ca.counters().cc_paced > 0);
}

#[test]
fn a_cnp_bounds_the_rate_by_what_the_qp_sent_lately() {
    // A QP that sends far less than the line rate (one 1 KiB WRITE every 100 µs, about
    // 88 Mbit/s of frames): DCQCN's rate starts at the line rate and a cut of it would not
    // slow the QP. Each CNP bounds it by what the QP sent over the last millisecond or two.
    let (mut a, mut b) = hosts();
    let mut config = CongestionConfig::new(GBIT);
    config.dcqcn.rpg_time_reset = Duration::from_secs(1);
    config.dcqcn.rpg_byte_reset = 0;
    let mut ca = Congestion::new(config);
    let mut bytes = 0;
    for k in 0..30 {
        let now = at(k * 100);
        write(&mut a, QA, 1024, now);
        let frames = send(&mut a, Some(&mut ca), now);
        bytes += frames.iter().map(Vec::len).sum::<usize>();
        receive(&mut b, None, &frames, now);
        let acks = send(&mut b, None, now);
        receive(&mut a, Some(&mut ca), &acks, now);
    }
    assert_eq!(bytes, 30 * (1024 + 74), "one frame per WRITE");
    let sending = Rate::from_bits_per_sec(bytes as u64 * 8 * 10_000 / 30);
    let cnp = cnp_for_qa(&a);
    // The meter, as `xroced stat --qp` shows it.
    let shown = ca.qp(QA, at(2950)).unwrap().sending.unwrap();
    assert!(
        shown.bits_per_sec().abs_diff(sending.bits_per_sec()) * 20 < sending.bits_per_sec(),
        "meter {shown}, sent {sending}"
    );
    ca.handle_frame(at(2950), &cnp, |_| true);
    let rate = ca.qp(QA, at(2960)).unwrap().rate.unwrap();
    assert!(
        rate.bits_per_sec() <= sending.bits_per_sec() * 21 / 20
            && rate.bits_per_sec() >= sending.bits_per_sec() * 17 / 20,
        "rate {rate} after the first CNP, sending {sending}"
    );
    // A second CNP cuts from there.
    ca.handle_frame(at(2970), &cnp, |_| true);
    let cut = ca.qp(QA, at(2980)).unwrap().rate.unwrap();
    assert!(cut < rate.scaled(3, 4), "{cut} after {rate}");
    // After a pause the meter knows nothing: a CNP then bounds nothing. (The rate is
    // already below what was sent, so the comparison below alone could not tell; the
    // meter's own figure can.)
    assert_eq!(
        ca.qp(QA, at(9000)).unwrap().sending,
        None,
        "a pause of 6 ms"
    );
    let before = ca.qp(QA, at(9000)).unwrap().rate.unwrap();
    ca.handle_frame(at(9000), &cnp, |_| true);
    assert!(ca.qp(QA, at(9001)).unwrap().rate.unwrap() >= before);
}

#[test]
fn cnps_for_unknown_or_uncontrolled_qps_are_ignored_and_bad_ones_go_to_the_transport() {
    let (a, _b) = hosts();
    let mut path = CnpPath::of(&a.endpoint, QA).unwrap();
    path.dest_qp = Qpn::new(0x777);
    let mut buf = [0u8; 256];
    let n = path.emit(&mut buf, 48).unwrap();
    let mut ca = Congestion::new(CongestionConfig::new(GBIT));
    assert_eq!(
        ca.handle_frame(at(0), &buf[..n], |_| true),
        Arrival::Consumed
    );
    assert_eq!(ca.counters().rp_cnp_ignored, 1);
    // A corrupted CNP is the transport's to count (as a bad ICRC).
    let mut bad = buf[..n].to_vec();
    bad[n - 1] ^= 1;
    assert_eq!(ca.handle_frame(at(0), &bad, |_| true), Arrival::Transport);
    // The delay controller alone does not react to CNPs.
    let mut delay_only = Congestion::new(CongestionConfig {
        algorithm: Algorithm::Delay,
        ..CongestionConfig::new(GBIT)
    });
    let (mut a, _b) = hosts();
    write(&mut a, QA, 1024, at(0));
    send(&mut a, Some(&mut delay_only), at(0));
    path.dest_qp = QA;
    let n = path.emit(&mut buf, 48).unwrap();
    assert_eq!(
        delay_only.handle_frame(at(1), &buf[..n], |_| true),
        Arrival::Consumed
    );
    assert_eq!(delay_only.counters().rp_cnp_ignored, 1);
    assert_eq!(delay_only.counters().rp_cnp_handled, 0);
}

/// Runs `a`'s retransmission timer until it sends something (its earliest entry may be an
/// older one, re-armed when run): when, and what it sent.
fn resend_on_timer(a: &mut Host, ca: &mut Congestion) -> (Instant, Vec<Vec<u8>>) {
    let mut again = Vec::new();
    let mut now = Instant::ZERO;
    for _ in 0..4 {
        now = a.endpoint.poll_timeout().unwrap();
        a.endpoint.handle_timeout(now, &mut a.mem);
        again = send(a, Some(&mut *ca), now);
        if !again.is_empty() {
            break;
        }
    }
    (now, again)
}

#[test]
fn a_retransmission_is_a_loss_once_per_recovery_and_an_rnr_wait_is_not() {
    let (mut a, mut b) = hosts();
    let mut ca = Congestion::new(CongestionConfig {
        algorithm: Algorithm::Delay,
        ..CongestionConfig::new(GBIT)
    });
    // Round trips first, so the delay controller has a base.
    for t in 0..4u64 {
        write(&mut a, QA, 1024, at(t * 100));
        let f = send(&mut a, Some(&mut ca), at(t * 100));
        receive(&mut b, None, &f, at(t * 100 + 10));
        let acks = send(&mut b, None, at(t * 100 + 10));
        receive(&mut a, Some(&mut ca), &acks, at(t * 100 + 20));
    }
    assert!(ca.counters().cc_rtt_samples >= 3);
    assert_eq!(
        ca.qp(QA, at(400)).unwrap().base_rtt,
        Some(Duration::from_micros(20))
    );
    // Eight packets, all lost; the retransmit timer sends the oldest again alone (RFC
    // 5682's test), whose answer shows it was lost, and then the seven after it.
    while a.endpoint.poll_completion().is_some() {}
    write(&mut a, QA, 8192, at(1000));
    let lost = send(&mut a, Some(&mut ca), at(1000));
    assert_eq!(lost.len(), 8);
    let (timeout, oldest) = resend_on_timer(&mut a, &mut ca);
    assert_eq!(oldest.len(), 1);
    assert_eq!(ca.counters().cc_loss_events, 1, "a loss event");
    let rate = ca.qp(QA, timeout).unwrap().rate.expect("cut by the loss");
    assert_eq!(rate, Rate::from_mbit(500));
    receive(&mut b, None, &oldest, timeout);
    let acks = send(&mut b, None, timeout);
    receive(&mut a, Some(&mut ca), &acks, timeout);
    // The answer acknowledged the oldest and no more: it was lost, and so were the
    // others (nothing beyond it is acknowledged). Go-back-N from the next, paced; each
    // resend gets through, until the WRITE completes.
    let (mut timeout, mut again) = (timeout, send(&mut a, Some(&mut ca), timeout));
    let mut resent = again.len();
    let mut done = false;
    for _ in 0..16 {
        receive(&mut b, None, &again, timeout);
        let acks = send(&mut b, None, timeout);
        receive(&mut a, Some(&mut ca), &acks, timeout);
        if a.endpoint.poll_completion().is_some() {
            done = true;
            break;
        }
        (timeout, again) = resend_on_timer(&mut a, &mut ca);
        resent += again.len();
    }
    assert!(done, "the WRITE completes");
    assert_eq!(resent, 7, "the seven after the oldest, once each");
    assert_eq!(
        ca.counters().cc_loss_events,
        1,
        "one recovery, one loss event"
    );
    // Then a SEND meets no receive at b: an RNR NAK, a wait, the SEND again. A busy
    // receiver is not congestion.
    let now = timeout + Duration::from_millis(1);
    let send_wqe = SendWqe {
        wr_id: 9,
        op: SendOp::Send,
        flags: SendFlags::SIGNALED,
        data: Gather::Sges(SgeList::single(BASE, 100, KEY)),
        ud: None,
    };
    a.endpoint.post_send(now, QA, send_wqe).unwrap();
    let sent = send(&mut a, Some(&mut ca), now);
    receive(&mut b, None, &sent, now);
    let nak = send(&mut b, None, now);
    assert_eq!(b.endpoint.counters().send_rnr_err, 1);
    receive(&mut a, Some(&mut ca), &nak, now);
    let wait = a.endpoint.poll_timeout().unwrap();
    a.endpoint.handle_timeout(wait, &mut a.mem);
    let resent = send(&mut a, Some(&mut ca), wait);
    assert_eq!(resent.len(), 1, "the SEND again after the RNR wait");
    assert_eq!(ca.counters().cc_loss_events, 1, "no loss event for it");
}

#[test]
fn off_changes_no_frame_and_makes_no_state() {
    let (mut a, mut b) = hosts();
    let mut ca = Congestion::new(CongestionConfig::off(GBIT));
    let mut cb = Congestion::new(CongestionConfig::off(GBIT));
    write(&mut a, QA, 4096, at(0));
    let frames = send(&mut a, Some(&mut ca), at(0));
    assert!(frames.iter().all(|f| ecn(f) == ECN_NOT_ECT));
    let mut marked = frames.clone();
    for f in &mut marked {
        let p = peek::peek(f).unwrap();
        peek::set_ecn(f, &p, ECN_CE);
    }
    receive(&mut b, Some(&mut cb), &marked, at(1));
    assert!(!cb.has_cnp());
    assert!(ca.is_empty() && cb.is_empty());
    assert_eq!(ca.counters(), &Default::default());
}

#[test]
fn a_traffic_class_outside_the_dscp_set_is_left_alone() {
    let (mut a, mut b) = hosts();
    let config = CongestionConfig {
        ecn: EcnMode::On,
        dscps: xroce_congestion::DscpSet::NONE.with(26),
        ..CongestionConfig::new(GBIT)
    };
    let mut ca = Congestion::new(config);
    write(&mut a, QA, 2048, at(0));
    // Traffic class 0: DSCP 0 is not in the set.
    let frames = send(&mut a, Some(&mut ca), at(0));
    assert!(frames.iter().all(|f| ecn(f) == ECN_NOT_ECT));
    assert_eq!(ca.qp(QA, at(0)).unwrap().controller, Controller::None);
    receive(&mut b, None, &frames, at(1));
}

#[test]
fn under_auto_nothing_limits_a_qp_until_it_loses_a_packet() {
    let (mut a, mut b) = hosts();
    // Every loss congestion (the test below has the rule for calm ones).
    let mut ca = Congestion::new(CongestionConfig {
        calm_losses: false,
        ..CongestionConfig::new(GBIT)
    });
    // Round trips far above any target: no sample is taken, nothing is cut.
    for t in 0..4u64 {
        write(&mut a, QA, 1024, at(t * 10_000));
        let f = send(&mut a, Some(&mut ca), at(t * 10_000));
        receive(&mut b, None, &f, at(t * 10_000 + 5000));
        let acks = send(&mut b, None, at(t * 10_000 + 5000));
        receive(&mut a, Some(&mut ca), &acks, at(t * 10_000 + 5000));
    }
    let st = ca.qp(QA, at(40_000)).unwrap();
    assert_eq!((st.controller, st.rate), (Controller::None, None));
    assert_eq!(ca.counters().cc_rtt_samples, 0);
    // A loss: the retransmit timer sends the packets again, and the delay controller takes
    // the rate on losses alone, cut by half.
    write(&mut a, QA, 4096, at(50_000));
    let lost = send(&mut a, Some(&mut ca), at(50_000));
    assert_eq!(lost.len(), 4);
    let (timeout, again) = resend_on_timer(&mut a, &mut ca);
    assert!(!again.is_empty());
    assert_eq!(ca.counters().cc_loss_events, 1);
    let st = ca.qp(QA, timeout).unwrap();
    assert_eq!(st.controller, Controller::Loss);
    assert_eq!(st.rate, Some(Rate::from_mbit(500)));
}

/// Under Auto, one-packet WRITEs whose round trips are `rtts` (µs), then four packets lost
/// and sent again by the retransmission timer, `expiries` times in a row: a's congestion
/// state and counters after the last.
fn go_back_after_round_trips(
    rtts: &[u64],
    expiries: usize,
) -> (
    xroce_congestion::QpCongestion,
    xroce_congestion::CongestionCounters,
) {
    let (mut a, mut b) = hosts();
    let mut ca = Congestion::new(CongestionConfig::new(GBIT));
    let mut t = 0;
    for &rtt in rtts {
        write(&mut a, QA, 1024, at(t));
        let f = send(&mut a, Some(&mut ca), at(t));
        receive(&mut b, None, &f, at(t + rtt / 2));
        let acks = send(&mut b, None, at(t + rtt / 2));
        receive(&mut a, Some(&mut ca), &acks, at(t + rtt));
        t += rtt + 10;
    }
    write(&mut a, QA, 4096, at(t));
    assert_eq!(send(&mut a, Some(&mut ca), at(t)).len(), 4);
    let mut now = at(t);
    for i in 0..expiries {
        let again;
        (now, again) = resend_on_timer(&mut a, &mut ca);
        // The first expiry resends the oldest alone (RFC 5682's test: was it lost?), a
        // second all four.
        let expected = if i == 0 { 1 } else { 4 };
        assert_eq!(again.len(), expected, "expiry {i}");
    }
    (ca.qp(QA, now).unwrap(), *ca.counters())
}

#[test]
fn a_go_back_n_loss_without_a_rise_of_the_round_trip_is_not_congestion() {
    // Steady round trips, then a loss: random, tolerated; nothing limits the QP.
    let (st, c) = go_back_after_round_trips(&[100; 6], 1);
    assert_eq!((c.cc_losses_tolerated, c.cc_loss_events), (1, 0), "{c:?}");
    assert_eq!((st.controller, st.rate), (Controller::None, None));
    // Round trips many times a base that came once, for long (a busy host's round trips
    // under load, noisy): no rise.
    let mut rtts = vec![20];
    rtts.extend([300, 320, 280, 310, 900, 290].repeat(8));
    let (_, c) = go_back_after_round_trips(&rtts, 1);
    assert_eq!((c.cc_losses_tolerated, c.cc_loss_events), (1, 0), "{c:?}");
    // The resends lost again at once: losses that close together are congestion.
    let (st, c) = go_back_after_round_trips(&[100; 6], 2);
    assert_eq!((c.cc_losses_tolerated, c.cc_loss_events), (1, 1), "{c:?}");
    assert_eq!(st.controller, Controller::Loss);
    assert!(st.rate.is_some());
}

#[test]
fn a_go_back_n_loss_at_the_top_of_a_rise_of_the_round_trip_is_congestion() {
    // A queue builds (the round trips grow four-fold), then overflows: halved.
    let (st, c) = go_back_after_round_trips(&[100, 100, 100, 100, 400, 400, 400, 400], 1);
    assert_eq!((c.cc_losses_tolerated, c.cc_loss_events), (0, 1), "{c:?}");
    assert_eq!(st.controller, Controller::Loss);
    assert_eq!(st.rate, Some(Rate::from_mbit(500)));
    // A queue more than a millisecond above the base is congestion however slowly it
    // grew: the moving average has caught up with it here.
    let mut rtts = vec![100; 4];
    rtts.extend([1500; 40]);
    let (_, c) = go_back_after_round_trips(&rtts, 1);
    assert_eq!((c.cc_losses_tolerated, c.cc_loss_events), (0, 1), "{c:?}");
}

#[test]
fn with_rate_and_ecn_off_the_hello_still_says_who_each_end_is_when_announced() {
    let (mut a, mut b) = hosts();
    let announced = CongestionConfig {
        announce: true,
        ..CongestionConfig::off(GBIT)
    };
    let mut ca = Congestion::new(announced.clone());
    let mut cb = Congestion::new(announced);
    write(&mut a, QA, 4096, at(0));
    let first = send(&mut a, Some(&mut ca), at(0));
    assert!(first.iter().all(|f| ecn(f) == ECN_NOT_ECT && hello(f)));
    receive(&mut b, Some(&mut cb), &first, at(1));
    assert_eq!(cb.poll_xroce_peer(), Some(QB));
    let acks = send(&mut b, Some(&mut cb), at(1));
    assert!(
        acks.iter().all(|f| ecn(f) == ECN_NOT_ECT && hello(f)),
        "no ECN bit, ever"
    );
    receive(&mut a, Some(&mut ca), &acks, at(2));
    assert_eq!(ca.poll_xroce_peer(), Some(QA));
    assert_eq!(
        ca.counters().cc_ect_packets + cb.counters().cc_ect_packets,
        0
    );
    // Off means off: nothing is sent with a checksum, nothing learned.
    let (mut a, mut b) = hosts();
    let mut ca = Congestion::new(CongestionConfig::off(GBIT));
    let mut cb = Congestion::new(CongestionConfig::off(GBIT));
    write(&mut a, QA, 4096, at(0));
    let first = send(&mut a, Some(&mut ca), at(0));
    assert!(first.iter().all(|f| !hello(f)));
    receive(&mut b, Some(&mut cb), &first, at(1));
    assert_eq!(cb.poll_xroce_peer(), None);
}

/// 256 KiB WRITEs from a to b in selective repeat, a's frames each `lose_every`th lost,
/// for `rounds` rounds; returns a's congestion counters.
fn lossy_selective_transfer(
    tolerance: u32,
    lose_every: usize,
) -> xroce_congestion::CongestionCounters {
    lossy_marked_selective_transfer(tolerance, lose_every, 1, 0)
}

/// [`lossy_selective_transfer`], losing `burst` frames in a row each time, every
/// `mark_every`-th frame that arrives marked CE (none with 0), and the receiver's CNPs
/// handed to the sender.
fn lossy_marked_selective_transfer(
    tolerance: u32,
    lose_every: usize,
    burst: usize,
    mark_every: usize,
) -> xroce_congestion::CongestionCounters {
    let config = CongestionConfig {
        loss_tolerance_per_mille: tolerance,
        // Without a tolerance every loss is congestion, go-back-N's rule for calm losses
        // included.
        calm_losses: false,
        ..CongestionConfig::new(GBIT)
    };
    lossy_transfer(config, true, lose_every, burst, mark_every, 0)
}

/// 256 KiB WRITEs from a to b under `config`, in selective repeat or go-back-N, a's
/// frames each `lose_every`th lost (`burst` in a row), every `mark_every`-th frame that
/// arrives marked CE (none with 0), b's answers reaching a `delay` µs after they leave;
/// returns a's congestion counters.
fn lossy_transfer(
    config: CongestionConfig,
    selective: bool,
    lose_every: usize,
    burst: usize,
    mark_every: usize,
    delay: u64,
) -> xroce_congestion::CongestionCounters {
    transfer_losing(
        config,
        selective,
        |n| n % lose_every < burst,
        mark_every,
        delay,
    )
}

/// [`lossy_transfer`], a's `n`th frame (from 1) lost when `lost(n)`.
fn transfer_losing(
    config: CongestionConfig,
    selective: bool,
    mut lost: impl FnMut(usize) -> bool,
    mark_every: usize,
    delay: u64,
) -> xroce_congestion::CongestionCounters {
    let (mut a, mut b) = hosts();
    let mut ca = Congestion::new(config.clone());
    let mut cb = Congestion::new(config);
    a.endpoint.set_selective_repeat(QA, selective).unwrap();
    b.endpoint.set_selective_repeat(QB, selective).unwrap();
    let mut n = 0usize;
    let mut in_flight: std::collections::VecDeque<(u64, Vec<Vec<u8>>)> = Default::default();
    for round in 0..200u64 {
        let t = round * 100;
        if round % 10 == 0 {
            write(&mut a, QA, 256 << 10, at(t));
        }
        for step in 0..100u64 {
            let now = at(t + step);
            let mut frames = send(&mut a, Some(&mut ca), now);
            frames.retain(|_| {
                n += 1;
                !lost(n)
            });
            if mark_every > 0 {
                for (i, f) in frames.iter_mut().enumerate() {
                    if let Some(p) = peek::peek(f)
                        && p.ecn != peek::ECN_NOT_ECT
                        && (n + i).is_multiple_of(mark_every)
                    {
                        peek::set_ecn(f, &p, peek::ECN_CE);
                    }
                }
            }
            receive(&mut b, Some(&mut cb), &frames, now);
            let mut cnps = Vec::new();
            let mut buf = vec![0u8; xroce_transport::frame::MAX_FRAME];
            while cb.has_cnp() {
                let endpoint = &b.endpoint;
                if let Some(len) = cb.poll_cnp(&mut buf, |q| CnpPath::of(endpoint, q)) {
                    cnps.push(buf[..len].to_vec());
                }
            }
            receive(&mut a, Some(&mut ca), &cnps, now);
            in_flight.push_back((t + step + delay, send(&mut b, Some(&mut cb), now)));
            while in_flight.front().is_some_and(|(due, _)| *due <= t + step) {
                let (_, answers) = in_flight.pop_front().unwrap();
                receive(&mut a, Some(&mut ca), &answers, now);
            }
            if a.endpoint.poll_timeout().is_some_and(|d| d <= now) {
                a.endpoint.handle_timeout(now, &mut a.mem);
            }
        }
    }
    *ca.counters()
}

#[test]
fn random_losses_on_a_steady_path_do_not_cut_a_go_back_n_rate_under_auto() {
    // Go-back-N, one frame in 100 lost, answers 20 µs after they leave: the round trip
    // never rises, so each loss is taken for random loss; every one is without the rule.
    let calm = lossy_transfer(CongestionConfig::new(GBIT), false, 100, 1, 0, 20);
    assert!(calm.cc_losses_tolerated > 10, "{calm:?}");
    assert!(
        calm.cc_loss_events * 10 <= calm.cc_losses_tolerated,
        "{calm:?}"
    );
    let strict = CongestionConfig {
        calm_losses: false,
        ..CongestionConfig::new(GBIT)
    };
    let strict = lossy_transfer(strict, false, 100, 1, 0, 20);
    assert_eq!(strict.cc_losses_tolerated, 0, "{strict:?}");
    assert!(strict.cc_loss_events > 10, "{strict:?}");
    assert!(strict.cc_delay_cuts > 0, "{strict:?}");
    // One frame in 10 lost: losses far closer together than random loss leaves them.
    let heavy = lossy_transfer(CongestionConfig::new(GBIT), false, 10, 1, 0, 20);
    assert!(heavy.cc_loss_events > 10, "{heavy:?}");
}

#[test]
fn random_losses_within_the_tolerance_do_not_cut_a_selective_repeat_peers_rate() {
    // One frame in 100 lost: within a tolerance of 10 %, no loss is taken for congestion;
    // without a tolerance, every one is.
    let tolerant = lossy_selective_transfer(100, 100);
    assert!(tolerant.cc_losses_tolerated > 10, "{tolerant:?}");
    assert_eq!(tolerant.cc_loss_events, 0, "{tolerant:?}");
    assert_eq!(tolerant.cc_delay_cuts, 0, "{tolerant:?}");
    let strict = lossy_selective_transfer(0, 100);
    assert_eq!(strict.cc_losses_tolerated, 0, "{strict:?}");
    assert!(strict.cc_loss_events > 10, "{strict:?}");
    assert!(strict.cc_delay_cuts > 0, "{strict:?}");
    // One frame in three lost is far beyond the tolerance: taken for congestion.
    let heavy = lossy_selective_transfer(100, 3);
    assert!(heavy.cc_loss_events > 0, "{heavy:?}");
    assert!(heavy.cc_delay_cuts > 0, "{heavy:?}");
}

#[test]
fn a_short_round_with_a_few_resends_is_not_taken_for_congestion_in_selective_repeat() {
    // A selective repeat peer's round of 56 packets, 8 of them holes resent one at a time
    // as acknowledgements show them (never two in a row): 14 %, above a tolerance of 10 %
    // of the round, but 5 % random loss brings such rounds now and then. Judged over at
    // least 256 packets (10 % is 25.6 of them) they are random loss, not congestion.
    let config = CongestionConfig {
        loss_tolerance_per_mille: 100,
        calm_losses: false,
        ..CongestionConfig::new(GBIT)
    };
    let (mut a, mut b) = hosts();
    let mut ca = Congestion::new(config.clone());
    let mut cb = Congestion::new(config);
    a.endpoint.set_selective_repeat(QA, true).unwrap();
    b.endpoint.set_selective_repeat(QB, true).unwrap();
    write(&mut a, QA, 4096, at(0));
    let first = send(&mut a, Some(&mut ca), at(0));
    receive(&mut b, Some(&mut cb), &first, at(1));
    let answers = send(&mut b, Some(&mut cb), at(1));
    receive(&mut a, Some(&mut ca), &answers, at(2));
    assert_eq!(ca.poll_xroce_peer(), Some(QA));
    // Request packets of that QP, with the PSNs of the round below.
    let template = first.last().unwrap().clone();
    let peeked = peek::peek(&template).unwrap();
    let bth_start = peeked.udp_start + xroce_wire::udp::HEADER_LEN;
    let base = peeked.psn.wrapping_add(100);
    let mut packet = |k: u32| {
        let mut f = template.clone();
        BthPacket::new_unchecked(&mut f[bth_start..]).set_psn(base.wrapping_add(k));
        ca.on_transmit(at(10), QA, &mut f);
    };
    for k in 0..40 {
        packet(k);
    }
    for k in 0..8 {
        packet(3 * k);
        packet(40 + k);
    }
    let c = *ca.counters();
    assert_eq!(c.cc_losses_tolerated, 8, "{c:?}");
    assert_eq!(c.cc_loss_events, 0, "{c:?}");
}

#[test]
fn a_loss_soon_after_a_cnp_is_taken_for_congestion() {
    // The same random losses, one frame in 100, while the path marks one frame in 50: a
    // loss within a millisecond of a CNP is congestion, whatever its share (unmarked, not
    // one of them is: see above).
    let marked = lossy_marked_selective_transfer(100, 100, 1, 50);
    eprintln!("{marked:?}");
    assert!(marked.rp_cnp_handled > 0, "{marked:?}");
    assert!(marked.cc_loss_events > 0, "{marked:?}");
    let unmarked = lossy_selective_transfer(100, 100);
    assert!(
        marked.cc_losses_tolerated < unmarked.cc_losses_tolerated,
        "{marked:?} {unmarked:?}"
    );
}

#[test]
fn losses_in_a_row_are_taken_for_congestion_whatever_their_share() {
    // Three frames in a row lost every 300: a share of 1 %, within the tolerance, but a
    // queue that overflows drops runs of what its senders send, and random loss rarely.
    let runs = lossy_marked_selective_transfer(100, 300, 3, 0);
    eprintln!("{runs:?}");
    assert!(runs.cc_loss_events > 0, "{runs:?}");
    assert!(runs.cc_delay_cuts > 0, "{runs:?}");
    // The same share lost one frame at a time is tolerated.
    let single = lossy_marked_selective_transfer(100, 100, 1, 0);
    assert_eq!(single.cc_loss_events, 0, "{single:?}");
}
