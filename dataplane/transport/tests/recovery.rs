//! Loss recovery within the standard, one requester against one responder over a modelled
//! path: a bottleneck that serialises the request direction and a fixed delay each way, in
//! virtual time. What is checked, each test one property of the
//! [`recovery`](xroce_transport::recovery) module:
//! - once the path is measured, the window of packets in flight is what the path needs,
//!   far below the device's limit, and the requester keeps to it;
//! - a sequence-error NAK resends at once, and only what was in flight;
//! - a gap that persists (the resend lost too) or a lost last packet is resent on the timer
//!   derived from measured round trips, never sooner than the device's floor and long before
//!   the QP's own `timeout`; so is a lone packet of a ping-pong (or its acknowledgement)
//!   on a path that never lost one before;
//! - a resend leaves paced, never in one burst;
//! - a peer that stops answering fails the QP no sooner than the QP's `timeout` and retry
//!   count say, as without the measured timer;
//! - a peer that answers late now and then is rarely taken for lost, and random loss of 5 %
//!   both ways never leaves the QP waiting for its own timeout;
//! - the timer resends nothing while no packet in flight asked for an answer (a QP held
//!   after a burst none of whose packets asked), until the QP's own timeout; a READ asks
//!   for every PSN it stands for, so the loss of its last response is found by the
//!   measured timer; a peer late by more than the timer is recognised by what its answer
//!   acknowledges (RFC 5682's test), and nothing is resent for it;
//! - before the first sample, a resend the peer lost is resent on a timer derived from
//!   the gap the peer showed, not the QP's own.
//!
//! Every test also checks that every message completes once, in order, with its data.

use std::collections::VecDeque;
use std::time::Duration;

use xroce_transport::frame::MAX_FRAME;
use xroce_transport::recovery::PACE_BURST;
use xroce_transport::testing::{Connection, Host, connect};
use xroce_transport::{
    Access, Completion, Counter, Counters, Gather, Instant, Limits, QpType, SendFlags, SendOp,
    SendWqe, SgeList, WcStatus,
};
use xroce_wire::{Frame, Psn, Qpn};

const QA: Qpn = Qpn::new(0x11);
const QB: Qpn = Qpn::new(0x22);
const KEY: u32 = 0x1234;
const RKEY: u32 = KEY | 0x8000_0000;
const BASE: u64 = 0x10_0000;
/// 16 KiB messages: 16 packets at the default 1024-byte path MTU.
const MSG: u32 = 16 * 1024;
/// Messages the source region holds (a message's source and destination are its slot).
const SLOTS: u32 = 64;
/// The device's floor of the measured retransmission timeout in these tests.
const FLOOR: Duration = Duration::from_micros(200);

/// A request packet host a sent.
#[derive(Clone, Copy, Debug)]
struct Sent {
    at: Instant,
    psn: Psn,
    /// Sent before (a retransmission).
    again: bool,
}

/// The two hosts and the path between them.
struct Path {
    a: Host,
    b: Host,
    now: Instant,
    /// One-way delay, each direction.
    delay: Duration,
    /// Time a request frame takes through the bottleneck.
    serialise: Duration,
    /// When the bottleneck is free again.
    free: Instant,
    to_b: VecDeque<(Instant, Vec<u8>)>,
    to_a: VecDeque<(Instant, Vec<u8>)>,
    /// Every request packet host a sent, in order.
    sent: Vec<Sent>,
    /// The PSN after the highest host a ever sent.
    high: Option<Psn>,
    /// Completions of host a, in order.
    completions: Vec<Completion>,
    next_wr: u64,
    /// Once the window is measured, host a's packets in flight after each request packet
    /// it sent, with the window then: (in flight, window).
    in_flight: Vec<(u32, u32)>,
    /// Host a's counters at the end of the warm-up.
    warmed: Counters,
    /// Host b answers late now and then, as a peer whose threads share a busy core: every
    /// this many of its frames, what it sends waits this long (and what it sends next
    /// waits behind it).
    late: Option<(u32, Duration)>,
    /// Frames host b sent, and when the current late answer leaves.
    b_sent: u32,
    late_until: Instant,
    /// Bytes of each message (at most [`MSG`]: its slot's size).
    msg: u32,
    /// A completion's room is filled at once (a latency test's application), not at the
    /// next event on the path.
    post_at_once: bool,
    /// Host a's QP is held this long right after the first new packet from this PSN on
    /// that does not ask for an answer, as the daemon's rate limiter holds a QP after a
    /// burst.
    hold_after: Option<(Psn, Duration)>,
    /// The PSN the hold came after.
    held: Option<Psn>,
    /// Messages are READs of host b's slot into host a's, not WRITEs.
    read: bool,
}

impl Path {
    fn new(timeout: u8, retry_cnt: u8) -> Path {
        let limits = Limits {
            min_retransmit_timeout: FLOOR,
            ..Limits::default()
        };
        let mut a = Host::with_limits(1, limits);
        let mut b = Host::with_limits(2, limits);
        let len = (SLOTS * MSG) as usize;
        a.add_region(KEY, BASE, len, Access::ALL);
        b.add_region(KEY, BASE, len, Access::ALL);
        for (i, byte) in a.mem.region_mut(0).bytes.iter_mut().enumerate() {
            *byte = (i * 7 % 251) as u8;
        }
        let c = Connection {
            timeout,
            retry_cnt,
            depth: 256,
            ..Connection::default()
        };
        connect(&mut a, QA, &mut b, QB, QpType::Rc, &c, Instant::ZERO);
        Path {
            a,
            b,
            now: Instant::ZERO,
            delay: Duration::from_micros(20),
            serialise: Duration::from_micros(10),
            free: Instant::ZERO,
            to_b: VecDeque::new(),
            to_a: VecDeque::new(),
            sent: Vec::new(),
            high: None,
            completions: Vec::new(),
            next_wr: 0,
            in_flight: Vec::new(),
            warmed: Counters::default(),
            late: None,
            b_sent: 0,
            late_until: Instant::ZERO,
            msg: MSG,
            post_at_once: false,
            hold_after: None,
            held: None,
            read: false,
        }
    }

    /// Posts one signaled WRITE of a whole slot (a READ of it with [`Path::read`]).
    fn post(&mut self) {
        let slot = u64::from((self.next_wr % u64::from(SLOTS)) as u32 * MSG);
        let remote_addr = BASE + slot;
        let op = if self.read {
            SendOp::Read {
                remote_addr,
                rkey: RKEY,
            }
        } else {
            SendOp::Write {
                remote_addr,
                rkey: RKEY,
            }
        };
        let w = SendWqe {
            wr_id: self.next_wr,
            op,
            flags: SendFlags::SIGNALED,
            data: Gather::Sges(SgeList::single(BASE + slot, self.msg, KEY)),
            ud: None,
        };
        self.a.endpoint.post_send(self.now, QA, w).expect("post");
        self.next_wr += 1;
    }

    /// Messages posted and not completed.
    fn outstanding(&self) -> usize {
        self.next_wr as usize - self.completions.len()
    }

    /// Runs until `until` (virtual) or until nothing is left to do, keeping `depth` messages
    /// outstanding while fewer than `messages` have been posted. `lose` sees every request
    /// packet host a sends (with whether it is a retransmission) and every response of host
    /// b, and says whether the path loses it.
    fn run(
        &mut self,
        until: Instant,
        depth: usize,
        messages: u64,
        lose: &mut dyn FnMut(&Sent, bool) -> bool,
    ) {
        let mut buf = vec![0u8; MAX_FRAME];
        let mut steps = 0u32;
        while self.now < until {
            steps += 1;
            assert!(steps < 5_000_000, "no end in sight at {:?}", self.now);
            while self.outstanding() < depth && self.next_wr < messages {
                self.post();
            }
            while let Some(t) = self
                .a
                .endpoint
                .poll_transmit(self.now, &mut buf, &mut self.a.mem)
            {
                let frame = &buf[..t.len];
                let bth = Frame::parse(frame).expect("a's frame parses").ib.bth;
                let psn = bth.psn;
                let again = self.high.is_some_and(|h| psn.distance(h) < 0);
                if !again {
                    self.high = Some(psn.next());
                }
                let s = Sent {
                    at: self.now,
                    psn,
                    again,
                };
                self.sent.push(s);
                if let Some((from, hold)) = self.hold_after
                    && psn.distance(from) >= 0
                    && !again
                    && !bth.ack_request
                {
                    self.hold_after = None;
                    self.held = Some(psn);
                    self.a.endpoint.pace(QA, self.now + hold);
                }
                if let Some(qp) = self.a.endpoint.qp(QA)
                    && let Some(window) = qp.path_estimate().window
                {
                    let flight = psn.next().distance(qp.oldest_unacked_psn());
                    self.in_flight.push((flight as u32, window));
                }
                let start = self.free.max(self.now);
                self.free = start + self.serialise;
                if !lose(&s, true) {
                    self.to_b
                        .push_back((self.free + self.delay, frame.to_vec()));
                }
            }
            while let Some(t) = self
                .b
                .endpoint
                .poll_transmit(self.now, &mut buf, &mut self.b.mem)
            {
                let frame = &buf[..t.len];
                let psn = Frame::parse(frame).expect("b's frame parses").ib.bth.psn;
                let s = Sent {
                    at: self.now,
                    psn,
                    again: false,
                };
                self.b_sent += 1;
                if let Some((every, wait)) = self.late
                    && self.b_sent.is_multiple_of(every)
                {
                    self.late_until = self.now + wait;
                }
                if !lose(&s, false) {
                    let leaves = self.now.max(self.late_until);
                    self.to_a.push_back((leaves + self.delay, frame.to_vec()));
                }
            }
            while let Some(c) = self.a.endpoint.poll_completion() {
                self.completions.push(c);
            }
            while self.b.endpoint.poll_completion().is_some() {}
            if self.post_at_once && self.outstanding() < depth && self.next_wr < messages {
                // A completion made room: the next message is posted now, not at the next
                // event.
                continue;
            }
            let next = [
                self.to_b.front().map(|f| f.0),
                self.to_a.front().map(|f| f.0),
                self.a.endpoint.poll_timeout(),
                self.b.endpoint.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next else {
                return;
            };
            self.now = self.now.max(next);
            while self.to_b.front().is_some_and(|f| f.0 <= self.now) {
                let (_, f) = self.to_b.pop_front().expect("a frame");
                self.b.endpoint.handle_frame(self.now, &f, &mut self.b.mem);
            }
            while self.to_a.front().is_some_and(|f| f.0 <= self.now) {
                let (_, f) = self.to_a.pop_front().expect("a frame");
                self.a.endpoint.handle_frame(self.now, &f, &mut self.a.mem);
            }
            self.a.endpoint.handle_timeout(self.now, &mut self.a.mem);
            self.b.endpoint.handle_timeout(self.now, &mut self.b.mem);
        }
    }

    /// Runs until `until` as [`Path::run`] does, losing one request packet: the 100th sent
    /// for the first time once the smallest round trip is measured, while the window is
    /// still the device's (until the path lost a packet it is) and the path holds a queue
    /// of it. Counters are then taken from the end of the warm-up.
    fn warm_up(&mut self, until: Instant, depth: usize, messages: u64) {
        let step = Duration::from_micros(100);
        while self.now < until
            && self
                .a
                .endpoint
                .qp(QA)
                .is_none_or(|qp| qp.path_estimate().min_rtt.is_none())
        {
            let next = self.now + step;
            self.run(next, depth, messages, &mut |_, _| false);
        }
        assert!(self.now < until, "the probe ended during the warm-up");
        let mut fresh = 0;
        self.run(until, depth, messages, &mut |s, request| {
            if request && !s.again {
                fresh += 1;
                return fresh == 100;
            }
            false
        });
        assert!(fresh >= 100, "a packet was lost during the warm-up");
        self.warmed = self.a.endpoint.counters().clone();
        self.in_flight.clear();
    }

    /// Every message posted completed once, successfully and in order, and its data is at
    /// host b.
    fn check_all_delivered(&self) {
        assert_eq!(
            self.completions.len() as u64,
            self.next_wr,
            "every message completes"
        );
        for (i, c) in self.completions.iter().enumerate() {
            assert_eq!(c.wr_id, i as u64, "completions in posting order");
            assert_eq!(c.status, WcStatus::Success, "{c:?}");
        }
        for slot in 0..self.next_wr.min(u64::from(SLOTS)) as usize {
            let at = slot * MSG as usize;
            let n = at + self.msg as usize;
            assert!(
                self.a.mem.region(0).bytes[at..n] == self.b.mem.region(0).bytes[at..n],
                "the data of slot {slot} arrived intact"
            );
        }
    }

    /// Counter `c` of host a since the warm-up.
    fn count(&self, c: Counter) -> u64 {
        self.a.endpoint.counters().value(c) - self.warmed.value(c)
    }

    /// The send times of every transmission of `psn`.
    fn times_of(&self, psn: Psn) -> Vec<Instant> {
        self.sent
            .iter()
            .filter(|s| s.psn == psn)
            .map(|s| s.at)
            .collect()
    }
}

fn at(d: Duration) -> Instant {
    Instant::ZERO + d
}

/// How long a test runs before the part it checks: long enough for the first loss's
/// resend (of what the device's window let out) to be over.
const WARM_UP: Duration = Duration::from_millis(20);

/// The QP's own timeout at code 14, as perftest asks: 67 ms.
const QP_TIMEOUT_14: Duration = Duration::from_nanos(4096 << 14);

#[test]
fn once_measured_the_window_is_what_the_path_needs_and_is_kept() {
    let mut p = Path::new(14, 7);
    // Twice the warm-up: 32 messages keep the device's whole window (512 packets) in
    // flight until the loss, and its resend takes longer.
    p.warm_up(at(2 * WARM_UP), 32, u64::MAX);
    p.run(at(3 * WARM_UP), 32, u64::MAX, &mut |_, _| false);
    let estimate = p.a.endpoint.qp(QA).expect("qp").path_estimate();
    let window = estimate.window.expect("the path is measured");
    // The path: 100 000 packets a second through the bottleneck, a round trip of 50 µs
    // unloaded: a product of five packets. The window stays within a small multiple of
    // the product at its least loaded (the minimum of 16 included), far from the device's
    // 512.
    assert!((16..=64).contains(&window), "{estimate:?}");
    assert!(p.count(Counter::rtt_samples) > 10);
    assert!(p.count(Counter::req_held_by_window) > 0);
    // Once measured, the requester never sends beyond its window (one more, asking for an
    // acknowledgement, when the window shrank under packets that did not ask).
    assert!(p.in_flight.len() > 1000);
    for &(flight, window) in &p.in_flight {
        assert!(flight <= window + 1, "{flight} in flight, window {window}");
    }
    // Nothing was lost since: nothing was sent twice.
    assert_eq!(p.count(Counter::retransmitted_pkts), 0);
    assert_eq!(p.count(Counter::completer_retry_err), 0);
    // Finish what is outstanding.
    let end = p.now + Duration::from_millis(10);
    let posted = p.next_wr;
    p.run(end, 0, posted, &mut |_, _| false);
    p.check_all_delivered();
}

/// Runs 5 ms loss-free to measure the path, then loses the first transmission of the
/// request packet with the `nth` fresh PSN after that (and of its `also` later
/// transmissions), and runs until every one of `messages` messages completed.
fn lose_one(nth: usize, also: usize, messages: u64) -> (Path, Psn) {
    lose_one_on(Path::new(14, 7), nth, also, messages)
}

/// [`lose_one`] on path `p`.
fn lose_one_on(mut p: Path, nth: usize, also: usize, messages: u64) -> (Path, Psn) {
    p.warm_up(at(WARM_UP), 16, messages);
    assert!(
        p.a.endpoint
            .qp(QA)
            .expect("qp")
            .path_estimate()
            .window
            .is_some()
    );
    let mut fresh = 0usize;
    let mut victim: Option<Psn> = None;
    let mut lost = 0usize;
    let end = p.now + Duration::from_millis(40);
    p.run(end, 16, messages, &mut |s, request| {
        if !request {
            return false;
        }
        if !s.again && victim.is_none() {
            fresh += 1;
            if fresh == nth {
                victim = Some(s.psn);
            }
        }
        if victim == Some(s.psn) && lost <= also {
            lost += 1;
            return true;
        }
        false
    });
    let victim = victim.expect("the victim was sent");
    (p, victim)
}

#[test]
fn a_nak_resends_at_once_and_only_what_was_in_flight() {
    let (p, victim) = lose_one(100, 0, 200);
    p.check_all_delivered();
    assert_eq!(p.count(Counter::rcvd_seq_err), 1, "one sequence-error NAK");
    assert_eq!(p.count(Counter::prompt_retries), 1);
    assert_eq!(p.count(Counter::adaptive_timeouts), 0);
    assert_eq!(p.count(Counter::retransmit_timeouts), 0);
    assert_eq!(p.times_of(victim).len(), 2, "sent twice");
    // Go-back-N resent what was in flight, which the window bounds.
    let window =
        p.a.endpoint
            .qp(QA)
            .expect("qp")
            .path_estimate()
            .window
            .expect("measured");
    let resent = p.count(Counter::retransmitted_pkts);
    assert!(
        resent >= 1 && resent <= u64::from(window) + 1,
        "{resent} resent, window {window}"
    );
}

#[test]
fn a_gap_that_persists_is_resent_on_the_measured_timer() {
    // The first transmission and the NAK's resend are both lost: the responder NAKs a
    // gap once, so only the timer can find it again.
    let (p, victim) = lose_one(100, 1, 200);
    p.check_all_delivered();
    assert_eq!(p.count(Counter::prompt_retries), 1);
    assert_eq!(p.count(Counter::gap_retries), 1);
    assert!(p.count(Counter::adaptive_timeouts) >= 1);
    assert_eq!(
        p.count(Counter::retransmit_timeouts),
        0,
        "the retry count is not spent"
    );
    let times = p.times_of(victim);
    assert_eq!(times.len(), 3, "{times:?}");
    let wait = times[2] - times[1];
    assert!(wait >= FLOOR, "never sooner than the floor: {wait:?}");
    assert!(
        wait < QP_TIMEOUT_14 / 10,
        "long before the QP's timeout: {wait:?}"
    );
}

#[test]
fn a_lost_last_packet_is_resent_on_the_measured_timer() {
    // 400 messages of 16 packets: lose the very last packet once; nothing after it can
    // draw a NAK.
    let mut p = Path::new(14, 7);
    p.warm_up(at(WARM_UP), 16, 400);
    assert!(p.next_wr < 400, "still posting");
    let last = Psn::new(0x100).wrapping_add(400 * 16 - 1);
    let mut lost = false;
    let end = p.now + Duration::from_millis(60);
    p.run(end, 16, 400, &mut |s, request| {
        if request && s.psn == last && !lost {
            lost = true;
            return true;
        }
        false
    });
    assert!(lost);
    p.check_all_delivered();
    assert_eq!(p.count(Counter::rcvd_seq_err), 0);
    assert!(p.count(Counter::adaptive_timeouts) >= 1);
    assert_eq!(p.count(Counter::retransmit_timeouts), 0);
    let times = p.times_of(last);
    assert_eq!(times.len(), 2, "{times:?}");
    let wait = times[1] - times[0];
    assert!(wait >= FLOOR && wait < QP_TIMEOUT_14 / 10, "{wait:?}");
}

/// Warms the path up (it lost a packet: the measured timer is in force), then holds host
/// a's QP for `hold` right after it sends a packet that does not ask for an answer: once
/// the answers to the packets before it that asked are in, nothing in flight asks for one
/// until the hold ends. Returns the path and the PSN the hold came after.
fn hold_after_unasked(hold: Duration) -> (Path, Psn) {
    let mut p = Path::new(14, 7);
    p.warm_up(at(WARM_UP), 16, 400);
    assert!(p.next_wr < 400, "still posting");
    let from = p.high.expect("sent").wrapping_add(32);
    p.hold_after = Some((from, hold));
    let end = p.now + hold + Duration::from_millis(100);
    p.run(end, 16, 400, &mut |_, _| false);
    let held = p.held.expect("held");
    (p, held)
}

#[test]
fn a_timer_that_expires_while_nothing_in_flight_asked_for_an_answer_resends_nothing() {
    // A rate limiter holds the QP for 20 ms, far beyond the measured timeout and well
    // within the QP's own (67 ms): no answer is late, so nothing may be resent.
    let (p, target) = hold_after_unasked(Duration::from_millis(20));
    p.check_all_delivered();
    assert_eq!(
        p.times_of(target).len(),
        1,
        "the packet before the hold was sent once"
    );
    assert!(p.count(Counter::unasked_timeouts) >= 1, "the timer expired");
    assert_eq!(p.count(Counter::adaptive_timeouts), 0);
    assert_eq!(p.count(Counter::retransmit_timeouts), 0);
    assert_eq!(p.count(Counter::retransmitted_pkts), 0, "nothing resent");
    // The packet after the hold left when the hold ended, and its answer restarted the
    // timer's count: the stream went on without a resend.
    let held = p.times_of(target)[0];
    let next = p.times_of(target.next());
    assert_eq!(next.len(), 1);
    assert!(
        next[0] - held >= Duration::from_millis(20),
        "{:?}",
        next[0] - held
    );
}

#[test]
fn a_hold_beyond_the_qps_own_timeout_still_resends() {
    // Held for longer than the QP's own timeout (67 ms) since the last answer: the QP's
    // timer resends, as a requester without the measured timer does.
    let (p, _) = hold_after_unasked(Duration::from_millis(80));
    p.check_all_delivered();
    assert!(p.count(Counter::unasked_timeouts) >= 1);
    assert_eq!(p.count(Counter::retransmit_timeouts), 1);
    assert!(p.count(Counter::retransmitted_pkts) >= 1);
}

#[test]
fn a_read_whose_last_response_is_lost_is_asked_again_on_the_measured_timer() {
    // The READ's request asks for every PSN it stands for: with its first responses in,
    // its answer is still due, and the loss of the last one is found by the measured
    // timer, not the QP's own.
    let mut p = Path::new(14, 7);
    p.warm_up(at(WARM_UP), 16, 400);
    // The WRITEs posted complete; then READs, one at a time.
    let posted = p.next_wr;
    let settle = p.now + Duration::from_millis(10);
    p.run(settle, 16, posted, &mut |_, _| false);
    assert_eq!(p.completions.len() as u64, posted);
    p.read = true;
    let first = p.high.expect("sent");
    let last = first.wrapping_add(MSG / 1024 - 1);
    let mut lost = false;
    let end = p.now + Duration::from_millis(40);
    p.run(end, 1, posted + 20, &mut |s, request| {
        if !request && s.psn == last && !lost {
            lost = true;
            return true;
        }
        false
    });
    assert!(lost, "the first READ's last response was sent");
    assert_eq!(
        p.completions.len() as u64,
        posted + 20,
        "every READ completes"
    );
    assert!(p.completions.iter().all(|c| c.status == WcStatus::Success));
    assert_eq!(
        p.count(Counter::retransmit_timeouts),
        0,
        "not the QP's timer"
    );
    assert!(p.count(Counter::adaptive_timeouts) >= 1);
}

#[test]
fn a_resend_leaves_paced() {
    // A longer path (200 µs each way: a product of 40 packets), so that what is resent is
    // more than one burst.
    let mut path = Path::new(14, 7);
    path.delay = Duration::from_micros(200);
    let (p, _) = lose_one_on(path, 400, 0, 200);
    p.check_all_delivered();
    assert!(p.count(Counter::req_held_by_pacing) > 0);
    // The resent packets leave in bursts of half a window (at least PACE_BURST), never
    // all at once.
    let window = p.in_flight.iter().map(|&(_, w)| w).max().expect("measured");
    let most = (window / 2).max(PACE_BURST) as usize;
    let resent: Vec<&Sent> = p.sent.iter().filter(|s| s.again).collect();
    let mut bursts = 0;
    for burst in resent.chunk_by(|x, y| x.at == y.at) {
        assert!(
            burst.len() <= most,
            "{} in a burst, window {window}",
            burst.len()
        );
        bursts += 1;
    }
    assert!(bursts > 1);
}

#[test]
fn a_silent_peer_fails_the_qp_no_sooner_than_its_timeout_and_retry_count_say() {
    // Timeout code 10 (4.2 ms) and 3 retries: without the measured timer the QP fails at
    // the fourth expiry of its own timeout; with it, resends come sooner but the retry
    // count is spent only each `timeout` without progress.
    let qp_timeout = Duration::from_nanos(4096 << 10);
    let mut p = Path::new(10, 3);
    p.warm_up(at(WARM_UP), 16, 400);
    assert!(
        p.a.endpoint
            .qp(QA)
            .expect("qp")
            .path_estimate()
            .rto
            .is_some()
    );
    let silence = p.now;
    let end = p.now + Duration::from_secs(1);
    let posted = p.next_wr;
    p.run(end, 16, posted, &mut |_, _| true);
    let failed = p
        .completions
        .iter()
        .position(|c| c.status != WcStatus::Success)
        .expect("the QP failed");
    assert_eq!(p.completions[failed].status, WcStatus::RetryExcErr);
    assert_eq!(p.count(Counter::retry_exceeded_err), 1);
    assert_eq!(
        p.count(Counter::retransmit_timeouts),
        4,
        "each retry, and the last expiry"
    );
    assert!(
        p.count(Counter::adaptive_timeouts) > 0,
        "resent sooner meanwhile"
    );
    // The run ended at the expiry that failed the QP (nothing is left to do after it):
    // no sooner than four QP timeouts after the peer fell silent, and not much later.
    // (The last progress came at most a round trip before the silence.)
    let took = p.now - silence + Duration::from_micros(100);
    assert!(took >= 4 * qp_timeout && took < 8 * qp_timeout, "{took:?}");
    assert!(
        p.completions[failed..]
            .iter()
            .all(|c| c.status != WcStatus::Success)
    );
}

/// Host b holds every [`LATE_EVERY`]th frame it sends (and those after it) `wait`, a few
/// hundred round trips apart, for 600 ms after the warm-up: returns the path, the late
/// answers, the expiries of the timer and the packets resent meanwhile.
fn late_peer(wait: Duration) -> (Path, u64, u64, u64) {
    let mut p = Path::new(14, 7);
    p.warm_up(at(WARM_UP), 16, u64::MAX);
    p.late = Some((LATE_EVERY, wait));
    let b_before = p.b_sent;
    let end = p.now + Duration::from_millis(600);
    p.run(end, 16, u64::MAX, &mut |_, _| false);
    let late = u64::from((p.b_sent - b_before) / LATE_EVERY);
    assert!(late >= 10, "{late} late answers");
    let expiries = p.count(Counter::adaptive_timeouts) + p.count(Counter::retransmit_timeouts);
    let resent = p.count(Counter::retransmitted_pkts);
    eprintln!(
        "late by {wait:?}: {expiries} expiries for {late} late answers, {} needless, \
         {resent} packets resent",
        p.count(Counter::spurious_timeouts),
    );
    assert_eq!(p.count(Counter::completer_retry_err), expiries);
    let end = p.now + Duration::from_millis(20);
    let posted = p.next_wr;
    p.run(end, 0, posted, &mut |_, _| false);
    p.check_all_delivered();
    (p, late, expiries, resent)
}

/// Every this many frames host b sends, it is late in [`late_peer`].
const LATE_EVERY: u32 = 200;

#[test]
fn a_peer_that_answers_late_now_and_then_is_rarely_taken_for_lost() {
    // 3 ms, fifteen times the unloaded round trip: the first late answer may expire the
    // measured timer (nothing told it the peer could be that late), the later ones seldom
    // do.
    let (p, late, expiries, _) = late_peer(Duration::from_millis(3));
    assert!(
        expiries * 5 <= late,
        "{expiries} expiries for {late} late answers"
    );
    assert!(p.count(Counter::spurious_timeouts) <= expiries);
}

#[test]
fn a_peer_later_than_two_expiries_is_found_late_by_what_its_answer_acknowledges() {
    // 10 ms, two and a half times the timeout the warm-up leaves (about 4 ms): the timer
    // expires, and the late answer comes long after the resend could have been answered
    // (before the timer, backed off, expires again), so its timing alone cannot tell it
    // from the resend's answer. After the expiry only the oldest packet is resent until
    // an answer comes (RFC 5682), and the late answer acknowledges packets sent before
    // the expiry and not since, whose first copies the responder must have had: the
    // expiry was needless, the timer learns how late the peer can be, and the requester
    // goes on without resending what it had in flight.
    let (p, late, expiries, resent) = late_peer(Duration::from_millis(10));
    assert!(
        expiries * 5 <= late,
        "{expiries} expiries for {late} late answers"
    );
    assert!(p.count(Counter::spurious_timeouts) >= 1);
    assert!(
        resent <= 2 * expiries,
        "{resent} resent for {expiries} expiries"
    );
}

#[test]
fn at_five_percent_loss_both_ways_the_qp_never_waits_for_its_own_timeout() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    // Frames of both directions lost at random, 5 % each: lost resends, lost NAKs, lost
    // last packets and lost acknowledgements, over and over. The measured timer answers
    // each; an answer to a lone resend that comes a little sooner than the smallest round
    // trip measured must not be taken for a late peer (which lengthened the timeout at
    // each tail loss until it was the QP's, and the QP then waited 67 ms each time).
    for seed in 1..=4 {
        let mut p = Path::new(14, 7);
        p.warm_up(at(WARM_UP), 16, u64::MAX);
        let warmed = p.count(Counter::retransmit_timeouts);
        let mut rng = StdRng::seed_from_u64(seed);
        let end = p.now + Duration::from_millis(400);
        p.run(end, 16, u64::MAX, &mut |_, _| rng.random_bool(0.05));
        let expiries = p.count(Counter::adaptive_timeouts);
        let probes = p.count(Counter::frto_probes);
        eprintln!("seed {seed}: {expiries} expiries, {probes} tested (RFC 5682)");
        assert!(expiries > 0, "seed {seed}: tail losses");
        assert_eq!(
            p.count(Counter::retransmit_timeouts) - warmed,
            0,
            "seed {seed}: the QP's own timeout expired"
        );
        // Here nearly every expiry is a loss: testing each first (a round trip with
        // nothing sent) would only delay going back, so most expiries go back at once.
        assert!(
            probes * 2 <= expiries,
            "seed {seed}: {probes} of {expiries} expiries tested"
        );
        let end = p.now + Duration::from_millis(20);
        let posted = p.next_wr;
        p.run(end, 0, posted, &mut |_, _| false);
        p.check_all_delivered();
    }
}

#[test]
fn a_resend_lost_before_the_first_sample_is_resent_on_the_timer_the_gap_gave() {
    // The fifth packet of the first burst is lost, and so is the resend the NAK drew. The
    // peer NAKs a gap once, and nothing was answered that could be timed (every packet
    // that asked came after the gap), so only a timer finds the lost resend; the QP's own
    // is 67 ms. The NAK came a round trip and a few packets after the first packet left:
    // the timer is derived from that, and waits for what was in flight (the device's
    // window: 256 packets, 2.5 ms through the bottleneck) to drain at the rate it showed.
    let mut p = Path::new(14, 7);
    let victim = Psn::new(0x100 + 4);
    let mut lost = 0;
    p.run(at(Duration::from_millis(200)), 16, 16, &mut |s, request| {
        if request && s.psn == victim && lost < 2 {
            lost += 1;
            return true;
        }
        false
    });
    assert_eq!(lost, 2);
    p.check_all_delivered();
    assert_eq!(p.count(Counter::rcvd_seq_err), 1, "one NAK");
    assert_eq!(p.count(Counter::gap_retries), 1);
    assert_eq!(
        p.count(Counter::retransmit_timeouts),
        0,
        "not the QP's timer"
    );
    let times = p.times_of(victim);
    assert_eq!(times.len(), 3, "{times:?}");
    let wait = times[2] - times[1];
    assert!(
        wait >= FLOOR && wait < QP_TIMEOUT_14 / 10,
        "the lost resend was resent after {wait:?}"
    );
}

/// A ping-pong of one-packet messages (one in flight at a time, as a latency test keeps)
/// on a path that never lost a packet, warmed until the smallest round trip is measured.
fn ping_pong() -> Path {
    let mut p = Path::new(14, 7);
    p.msg = 64;
    p.post_at_once = true;
    let step = Duration::from_micros(100);
    while p
        .a
        .endpoint
        .qp(QA)
        .is_none_or(|qp| qp.path_estimate().min_rtt.is_none())
    {
        let next = p.now + step;
        p.run(next, 1, u64::MAX, &mut |_, _| false);
        assert!(
            p.now < at(WARM_UP),
            "the probe ended during the warm-up: {:?} {} {:?}",
            p.a.endpoint.qp(QA).map(|qp| qp.path_estimate()),
            p.completions.len(),
            p.now
        );
    }
    let end = p.now + Duration::from_millis(5);
    p.run(end, 1, u64::MAX, &mut |_, _| false);
    p.warmed = p.a.endpoint.counters().clone();
    p
}

#[test]
fn a_lone_packet_lost_before_the_path_ever_lost_one_is_resent_on_the_measured_timer() {
    // The request, or the acknowledgement that answers it: nothing else is in flight to
    // draw a NAK, and the path never lost a packet before. A latency test must not wait
    // the QP's own timeout (67 ms here; seconds through rdma_cm) for it.
    for lose_request in [true, false] {
        let mut p = ping_pong();
        let mut lost = None;
        let end = p.now + Duration::from_millis(20);
        p.run(end, 1, u64::MAX, &mut |s, request| {
            if lost.is_none() && request == lose_request && !s.again {
                lost = Some(s.psn);
                return true;
            }
            false
        });
        let lost = lost.expect("a packet was lost");
        let times = p.times_of(lost);
        assert!(times.len() >= 2, "request lost {lose_request}: {times:?}");
        let wait = times[1] - times[0];
        assert!(
            wait >= FLOOR && wait < QP_TIMEOUT_14 / 20,
            "request lost {lose_request}: resent after {wait:?}"
        );
        assert_eq!(p.count(Counter::retransmit_timeouts), 0);
        assert!(p.count(Counter::adaptive_timeouts) >= 1);
        let end = p.now + Duration::from_millis(20);
        let posted = p.next_wr;
        p.run(end, 0, posted, &mut |_, _| false);
        p.check_all_delivered();
    }
}

#[test]
fn a_ping_pong_at_one_percent_loss_both_ways_never_waits_for_the_qps_timeout() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    for seed in 1..=4 {
        let mut p = ping_pong();
        let before = p.completions.len();
        let mut rng = StdRng::seed_from_u64(seed);
        let end = p.now + Duration::from_millis(400);
        p.run(end, 1, u64::MAX, &mut |_, _| rng.random_bool(0.01));
        let done = p.completions.len() - before;
        eprintln!(
            "seed {seed}: {done} messages, {} adaptive, {} qp timeouts, {} spurious",
            p.count(Counter::adaptive_timeouts),
            p.count(Counter::retransmit_timeouts),
            p.count(Counter::spurious_timeouts)
        );
        assert_eq!(
            p.count(Counter::retransmit_timeouts),
            0,
            "seed {seed}: the QP's own timeout expired"
        );
        let end = p.now + Duration::from_millis(20);
        let posted = p.next_wr;
        p.run(end, 0, posted, &mut |_, _| false);
        p.check_all_delivered();
    }
}
