//! Goodput of one RC queue pair through a lossy bottleneck, in virtual time: what loss
//! recovery is worth, without a network or a daemon.
//!
//! Host a WRITEs 64 KiB messages to host b, `DEPTH` outstanding, for `SECS` seconds of
//! virtual time. Frames from a to b queue for a bottleneck of `RATE` frames a second
//! (`QUEUE` frames deep, the rest dropped) and then travel `DELAY` one way; acknowledgements
//! travel back in `DELAY`. Both directions lose frames at random (`LOSS`, a fraction), or
//! in runs (`BURST` frames on average). A host may stall as a poller sharing its core
//! with other threads does: every `STALL_EVERY` µs on average (0: never) each host
//! stops for `STALL` µs, and frames reaching it meanwhile wait. A frame may also be held
//! back (`REORDER`, a fraction) until `GAP` frames behind it have passed the bottleneck, as
//! the impairment router does. Each run is made in go-back-N and in selective repeat
//! (`MODES=gbn,sr`); each line gives the goodput as a fraction of the same mode's loss-free
//! run, the packets sent again (and their share of all request packets: under reordering
//! alone every one is spurious), the holes resent, the timeouts and what the requester
//! measured. The last line of each mode is reordering alone (`REORDER_ONLY`, default 1 %).
//! `COUNTERS=1` prints both hosts' counters after each run. `MAX_UNACKED`, `MAX_HELD` and
//! `MAX_HELD_BYTES` set both hosts' `max_unacked_psns`, `max_held_packets` and
//! `max_held_bytes`.
//!
//! ```sh
//! cargo run --release -p xroce-transport --example goodput
//! LOSS=0,0.01 RATE=100000 DELAY=20 MODES=sr cargo run --release -p xroce-transport --example goodput
//! ```

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xroce_transport::frame::MAX_FRAME;
use xroce_transport::testing::{Connection, Host, connect};
use xroce_transport::{
    Access, Counters, Gather, Instant, Limits, QpType, SendFlags, SendOp, SendWqe, SgeList,
};
use xroce_wire::Qpn;

const QA: Qpn = Qpn::new(0x11);
const QB: Qpn = Qpn::new(0x22);
const KEY: u32 = 0x1234;
const BASE: u64 = 0x10_0000;
const SIZE: u32 = 64 * 1024;

#[derive(Clone, Copy, Debug)]
struct Model {
    /// Bottleneck frames per second, a to b.
    rate: f64,
    /// Frames the bottleneck queues.
    queue: usize,
    /// One-way delay.
    delay: Duration,
    /// Loss probability (long-run) and mean run of lost frames.
    loss: f64,
    burst: f64,
    depth: usize,
    secs: f64,
    seed: u64,
    min_rto: Duration,
    /// Mean time between two stalls of a host (zero: none).
    stall_every: Duration,
    /// How long a host stalls.
    stall: Duration,
    /// Probability that a frame is held back, and for how many frames behind it.
    reorder: f64,
    gap: u32,
    /// Selective repeat on both ends.
    selective: bool,
}

/// When a host stalls: exponentially distributed gaps of `every` on average between
/// stalls of `length`.
struct Stalls {
    rng: StdRng,
    every: Duration,
    length: Duration,
    /// The next stall begins.
    next: Instant,
    /// The current stall ends.
    until: Instant,
}

impl Stalls {
    fn new(seed: u64, every: Duration, length: Duration) -> Stalls {
        let mut s = Stalls {
            rng: StdRng::seed_from_u64(seed),
            every,
            length,
            next: Instant::ZERO,
            until: Instant::ZERO,
        };
        s.next = s.gap(Instant::ZERO);
        s
    }

    fn gap(&mut self, from: Instant) -> Instant {
        if self.every.is_zero() {
            return from + Duration::from_secs(1 << 30);
        }
        let u: f64 = self.rng.random_range(f64::EPSILON..1.0);
        from + self.every.mul_f64(-u.ln())
    }

    /// Whether the host is stalled at `now` (starting the stalls that are due).
    fn stalled(&mut self, now: Instant) -> bool {
        while now >= self.next {
            self.until = self.next + self.length;
            self.next = self.gap(self.until);
        }
        now < self.until
    }

    /// When the host next changes between stalled and running.
    fn change(&self, now: Instant) -> Instant {
        if now < self.until {
            self.until
        } else {
            self.next
        }
    }
}

/// A lossy link: independent losses, or a two-state Gilbert model with the same long-run
/// rate and runs of `burst` frames on average.
struct Loss {
    rng: StdRng,
    p: f64,
    burst: f64,
    bad: bool,
}

impl Loss {
    fn lose(&mut self) -> bool {
        if self.p <= 0.0 {
            return false;
        }
        if self.burst <= 1.0 {
            return self.rng.random_bool(self.p);
        }
        // Leave the bad state after a run of `burst` frames on average; enter it so that
        // the bad state's share of frames is `p`.
        let leave = 1.0 / self.burst;
        let enter = (self.p * leave / (1.0 - self.p)).min(1.0);
        self.bad = if self.bad {
            !self.rng.random_bool(leave)
        } else {
            self.rng.random_bool(enter)
        };
        self.bad
    }
}

struct Report {
    goodput: f64,
    counters: Counters,
    window: Option<u32>,
    srtt: Option<Duration>,
    p99_us: f64,
}

fn run(m: Model) -> Report {
    let limits = Limits {
        min_retransmit_timeout: m.min_rto,
        max_unacked_psns: env("MAX_UNACKED", Limits::default().max_unacked_psns),
        max_held_packets: env("MAX_HELD", Limits::default().max_held_packets),
        max_held_bytes: env("MAX_HELD_BYTES", Limits::default().max_held_bytes),
        ..Limits::default()
    };
    let mut a = Host::with_limits(1, limits);
    let mut b = Host::with_limits(2, limits);
    a.add_region(KEY, BASE, SIZE as usize, Access::ALL);
    b.add_region(KEY, BASE, SIZE as usize, Access::ALL);
    let c = Connection {
        depth: m.depth as u32 + 1,
        ..Connection::default()
    };
    connect(&mut a, QA, &mut b, QB, QpType::Rc, &c, Instant::ZERO);
    // NOTE(unwrap): both QPs were just connected.
    a.endpoint.set_selective_repeat(QA, m.selective).unwrap();
    b.endpoint.set_selective_repeat(QB, m.selective).unwrap();
    let mut reorder = StdRng::seed_from_u64(m.seed ^ 0x5e0);
    let mut loss = Loss {
        rng: StdRng::seed_from_u64(m.seed),
        p: m.loss,
        burst: m.burst,
        bad: false,
    };
    let wqe = |wr_id| SendWqe {
        wr_id,
        op: SendOp::Write {
            remote_addr: BASE,
            rkey: KEY | 0x8000_0000,
        },
        flags: SendFlags::SIGNALED,
        data: Gather::Sges(SgeList::single(BASE, SIZE, KEY)),
        ud: None,
    };
    let end = Instant::ZERO + Duration::from_secs_f64(m.secs);
    let serialize = Duration::from_secs_f64(1.0 / m.rate);
    let mut now = Instant::ZERO;
    // Frames on their way, by arrival time (then order sent).
    let mut to_b: BinaryHeap<Reverse<(Instant, u64, Vec<u8>)>> = BinaryHeap::new();
    let mut to_a: BinaryHeap<Reverse<(Instant, u64, Vec<u8>)>> = BinaryHeap::new();
    let mut seq = 0u64;
    // When the bottleneck is free again.
    let mut link_free = Instant::ZERO;
    let mut posted_at: VecDeque<Instant> = VecDeque::new();
    let mut next_id = 0u64;
    let mut completed = 0u64;
    let mut times = Vec::new();
    let mut buf = vec![0u8; MAX_FRAME];
    let mut stalls_a = Stalls::new(m.seed ^ 0xa, m.stall_every, m.stall);
    let mut stalls_b = Stalls::new(m.seed ^ 0xb, m.stall_every, m.stall);
    while now < end {
        let (a_stalled, b_stalled) = (stalls_a.stalled(now), stalls_b.stalled(now));
        while posted_at.len() < m.depth {
            // NOTE(unwrap): the send queue holds the depth.
            a.endpoint.post_send(now, QA, wqe(next_id)).unwrap();
            next_id += 1;
            posted_at.push_back(now);
        }
        while let Some(t) = (!a_stalled)
            .then(|| a.endpoint.poll_transmit(now, &mut buf, &mut a.mem))
            .flatten()
        {
            // The bottleneck: a frame waits for those ahead; a full queue drops it.
            let start = link_free.max(now);
            let queued = (start - now).as_secs_f64() * m.rate;
            if queued as usize >= m.queue {
                continue;
            }
            link_free = start + serialize;
            if !loss.lose() {
                let mut at = link_free + m.delay;
                if m.reorder > 0.0 && reorder.random_bool(m.reorder) {
                    at = at + serialize * m.gap;
                }
                seq += 1;
                to_b.push(Reverse((at, seq, buf[..t.len].to_vec())));
            }
        }
        while let Some(t) = (!b_stalled)
            .then(|| b.endpoint.poll_transmit(now, &mut buf, &mut b.mem))
            .flatten()
        {
            if !loss.lose() {
                seq += 1;
                to_a.push(Reverse((now + m.delay, seq, buf[..t.len].to_vec())));
            }
        }
        while let Some(c) = a.endpoint.poll_completion() {
            assert_eq!(c.status, xroce_transport::WcStatus::Success, "{c:?}");
            if let Some(at) = posted_at.pop_front() {
                times.push((now - at).as_secs_f64() * 1e6);
            }
            completed += 1;
        }
        while b.endpoint.poll_completion().is_some() {}
        // A stalled host's frames and timers wait for the stall's end.
        let after_a = |t: Instant| if a_stalled { t.max(stalls_a.until) } else { t };
        let after_b = |t: Instant| if b_stalled { t.max(stalls_b.until) } else { t };
        let next = [
            to_b.peek().map(|f| after_b(f.0.0)),
            to_a.peek().map(|f| after_a(f.0.0)),
            a.endpoint.poll_timeout().map(after_a),
            b.endpoint.poll_timeout().map(after_b),
            Some(stalls_a.change(now)),
            Some(stalls_b.change(now)),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else {
            break;
        };
        now = now.max(next);
        let (a_stalled, b_stalled) = (stalls_a.stalled(now), stalls_b.stalled(now));
        while !b_stalled && to_b.peek().is_some_and(|f| f.0.0 <= now) {
            if let Some(Reverse((_, _, f))) = to_b.pop() {
                b.endpoint.handle_frame(now, &f, &mut b.mem);
            }
        }
        while !a_stalled && to_a.peek().is_some_and(|f| f.0.0 <= now) {
            if let Some(Reverse((_, _, f))) = to_a.pop() {
                a.endpoint.handle_frame(now, &f, &mut a.mem);
            }
        }
        if !a_stalled {
            a.endpoint.handle_timeout(now, &mut a.mem);
        }
        if !b_stalled {
            b.endpoint.handle_timeout(now, &mut b.mem);
        }
    }
    if std::env::var("COUNTERS").is_ok() {
        for (side, host) in [("a", &a), ("b", &b)] {
            for (n, v) in host.endpoint.counters().iter().filter(|(_, v)| *v > 0) {
                println!("    {side} {n} = {v}");
            }
        }
    }
    times.sort_by(f64::total_cmp);
    let p99 = times
        .get(((times.len() as f64 - 1.0) * 0.99).round() as usize)
        .copied()
        .unwrap_or(0.0);
    let estimate = a
        .endpoint
        .qp(QA)
        .map(|q| q.path_estimate())
        .unwrap_or_default();
    Report {
        goodput: completed as f64 * f64::from(SIZE) * 8.0 / m.secs,
        counters: a.endpoint.counters().clone(),
        window: estimate.window,
        srtt: estimate.srtt,
        p99_us: p99,
    }
}

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let losses: Vec<f64> = std::env::var("LOSS")
        .unwrap_or_else(|_| "0,0.001,0.01,0.02,0.05".into())
        .split(',')
        .filter_map(|s| s.parse().ok())
        .collect();
    let model = Model {
        rate: env("RATE", 110_000.0),
        queue: env("QUEUE", 1024),
        delay: Duration::from_micros(env("DELAY", 20)),
        loss: 0.0,
        burst: env("BURST", 1.0),
        depth: env("DEPTH", 128),
        secs: env("SECS", 2.0),
        seed: env("SEED", 1),
        min_rto: Duration::from_micros(env("MIN_RTO_US", 1000)),
        stall_every: Duration::from_micros(env("STALL_EVERY", 0)),
        stall: Duration::from_micros(env("STALL", 0)),
        reorder: env("REORDER", 0.0),
        gap: env("GAP", 3),
        selective: false,
    };
    let reorder_only: f64 = env("REORDER_ONLY", 0.01);
    println!("{model:?}");
    let modes = std::env::var("MODES").unwrap_or_else(|_| "gbn,sr".into());
    for mode in modes.split(',') {
        let selective = mode == "sr";
        println!(
            "{}:",
            if selective {
                "selective repeat"
            } else {
                "go-back-N"
            }
        );
        let model = Model { selective, ..model };
        let mut free = None;
        let mut runs: Vec<(String, Model)> = losses
            .iter()
            .map(|&loss| {
                (
                    format!("loss {:>5.2} %", loss * 100.0),
                    Model { loss, ..model },
                )
            })
            .collect();
        if reorder_only > 0.0 {
            runs.push((
                format!("reorder {:>3.1} %", reorder_only * 100.0),
                Model {
                    loss: 0.0,
                    reorder: reorder_only,
                    ..model
                },
            ));
        }
        for (name, m) in runs {
            let r = run(m);
            let base = *free.get_or_insert(r.goodput);
            let c = &r.counters;
            println!(
                "  {name}: {:>6.3} Gbit/s ratio {:.3}  resent {:>7} ({:.2} % of sent) holes {:>6}  prompt {:>5} adaptive {:>5} gap {:>4} timeouts {:>3}  window {:?} srtt {:?} p99 {:.0} µs",
                r.goodput / 1e9,
                r.goodput / base,
                c.retransmitted_pkts,
                100.0 * c.retransmitted_pkts as f64 / c.sent_pkts.max(1) as f64,
                c.sr_packets_resent,
                c.prompt_retries,
                c.adaptive_timeouts,
                c.gap_retries,
                c.retransmit_timeouts,
                r.window,
                r.srtt,
                r.p99_us,
            );
        }
    }
}
