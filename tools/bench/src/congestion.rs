//! `--tests incast,all_to_all`: congestion, in a star of `--hosts` hosts (at least 5)
//! behind one router whose switch (`xroce_impair::switch`, on a thread of the bench) makes
//! the port toward a host a bottleneck: `--bottleneck-mbit`, a queue of `--queue-kib`, ECN
//! marks from `--ecn-kmin-kib` queued (RED-like up to `--ecn-kmax-kib`) or none (tail drop
//! only), tail drop when full.
//!
//! - **incast**: `n` senders (each of `--fan-in`) WRITE 64 KiB messages to host 0 at depth
//!   `--incast-depth` for `--incast-secs`, with congestion control off (`xroced --cc off`)
//!   and on (the default, `auto`), through a port that marks ECN and through one that only
//!   drops. A point reports the bottleneck's utilisation (frame bytes it sent over what
//!   its rate allows in the window), each sender's goodput and their Jain fairness, the
//!   frames it dropped and marked, its queue depth (mean, 99th percentile, largest), the
//!   CNPs and retransmissions the daemons counted, and the round trip of a 64-byte WRITE
//!   ping-pong from host `hosts - 1` into the same port, against the same ping-pong on the
//!   idle port just before.
//! - **all_to_all**: every host WRITEs to every other through ports that are all
//!   bottlenecks; the aggregate goodput against what the ports allow together, and against
//!   one sender's through one port (the incast point of 1 sender, or a run of its own).
//!
//! The time series (per-sender goodput and queue depth in 10 ms bins) go into the JSON and
//! into an SVG of their own next to the bench's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};
use verbs_shm::client::{
    Access, Context, Cq, Mr, Pd, Qp, QpInit, QpType, SendOp, SendWr, Sge, WorkCompletion,
};
use xroce_impair::switch::{Bottleneck, Marking, Switch, SwitchConfig, SwitchCounters};
use xroce_lab::daemons::{StarHosts, connect};
use xroce_lab::star::StarConfig;

use crate::progress::{Expect, Progress};

/// The message size of the senders.
pub(crate) const SIZE: usize = 64 << 10;
/// The ping-pong's message size.
const PING: usize = 64;
/// The width of a time-series bin.
const BIN: Duration = Duration::from_millis(10);
/// Warm-up before each window.
const WARMUP: Duration = Duration::from_millis(500);

/// What the congestion tests run.
#[derive(Clone, Debug)]
pub(crate) struct CongestionPlan {
    pub(crate) hosts: usize,
    pub(crate) mtu: u32,
    pub(crate) bottleneck_mbit: u64,
    pub(crate) queue_bytes: usize,
    pub(crate) kmin: usize,
    pub(crate) kmax: usize,
    pub(crate) pmax_percent: u32,
    pub(crate) fan_in: Vec<usize>,
    pub(crate) depth: usize,
    pub(crate) secs: f64,
    pub(crate) incast: bool,
    pub(crate) all_to_all: bool,
    /// Extra daemon arguments when congestion control is on.
    pub(crate) cc_args: Vec<String>,
}

impl CongestionPlan {
    /// The runs, in order: (congestion control on, ECN marking at the switch).
    fn modes(&self) -> [(bool, bool); 3] {
        [(false, true), (true, true), (true, false)]
    }

    /// How many progress steps the plan takes.
    pub(crate) fn steps(&self) -> usize {
        let incast = if self.incast { self.fan_in.len() } else { 0 };
        let all = usize::from(self.all_to_all);
        // A start of the star per setting of the daemons, then the points.
        2 + 3 * incast + 2 * all
    }

    fn bottleneck(&self, marking: bool) -> Bottleneck {
        Bottleneck {
            rate_bps: self.bottleneck_mbit * 1_000_000,
            capacity: self.queue_bytes,
            marking: marking.then_some(Marking {
                kmin: self.kmin,
                kmax: self.kmax,
                pmax_percent: self.pmax_percent,
            }),
        }
    }
}

/// The time series of one point: 10 ms bins from the start of its window.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Series {
    /// The bins' ends, in milliseconds into the window.
    pub(crate) t_ms: Vec<f64>,
    /// The largest queue sampled in each bin (bytes), at the receiving port (incast) or
    /// the fullest port (all-to-all).
    pub(crate) queue_bytes: Vec<usize>,
    /// Each sender's goodput in each bin (Mbit/s).
    pub(crate) sender_mbit: Vec<Vec<f64>>,
}

/// One point of the congestion tests.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct CongestionPoint {
    /// `incast` or `all_to_all`.
    pub(crate) test: String,
    /// Senders (incast), or hosts (all-to-all).
    pub(crate) senders: usize,
    /// Congestion control: `off` or `on`.
    pub(crate) cc: String,
    /// The switch: `ecn` (marks and tail drop) or `tail-drop`.
    pub(crate) switch: String,
    pub(crate) secs: f64,
    /// Aggregate payload goodput.
    pub(crate) goodput_gbit: f64,
    /// Each sender's (all-to-all: each host's, to all others).
    pub(crate) per_sender_gbit: Vec<f64>,
    /// Frame bytes the bottleneck(s) sent over what they could have.
    pub(crate) utilisation: f64,
    /// Jain's fairness index of the senders' goodput.
    pub(crate) jain: f64,
    /// Frames the bottleneck(s) dropped, and marked CE.
    pub(crate) drops: u64,
    pub(crate) marks: u64,
    /// Queue depth at the receiving port over the window (bytes).
    pub(crate) queue_mean_bytes: f64,
    pub(crate) queue_p99_bytes: usize,
    pub(crate) queue_max_bytes: usize,
    /// What the daemons counted in the window: CE-marked packets received, CNPs sent and
    /// handled, retransmission timeouts, sequence-error NAKs.
    pub(crate) ecn_marked_packets: u64,
    pub(crate) cnps_sent: u64,
    pub(crate) cnps_handled: u64,
    pub(crate) retransmit_timeouts: u64,
    pub(crate) seq_naks: u64,
    /// Losses the senders' congestion control took for congestion, and those it took for
    /// random loss (JSON only).
    #[serde(default)]
    pub(crate) loss_events: u64,
    #[serde(default)]
    pub(crate) losses_tolerated: u64,
    /// The 64-byte ping-pong's round trip through the port, during the point and on the
    /// idle port just before (median, 99th percentile).
    pub(crate) ping_p50_us: f64,
    pub(crate) ping_p99_us: f64,
    pub(crate) idle_ping_p50_us: f64,
    pub(crate) idle_ping_p99_us: f64,
    /// All-to-all: one sender's goodput through one port in the same setting.
    pub(crate) two_hosts_gbit: Option<f64>,
    pub(crate) series: Series,
    /// Why the point failed, if it did.
    pub(crate) error: Option<String>,
}

/// Jain's fairness index: `(sum x)^2 / (n * sum x^2)`, 1 when all are equal.
pub(crate) fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    if squares == 0.0 {
        return 0.0;
    }
    sum * sum / (x.len() as f64 * squares)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn counter(stats: &[(String, u64)], name: &str) -> u64 {
    stats.iter().find(|(k, _)| k == name).map_or(0, |(_, v)| *v)
}

/// One RC connection from a sender to a receiver, with what it needs.
struct Flow {
    qp: Qp,
    cq: Cq,
    mr: Mr,
    remote_addr: u64,
    rkey: u32,
    _rest: (Qp, Cq, Mr, Pd, Pd),
}

fn flow(
    hosts: &StarHosts,
    ctx: &[Context],
    from: usize,
    to: usize,
    len: usize,
    depth: usize,
) -> Result<Flow> {
    let (cs, cr) = (&ctx[from], &ctx[to]);
    let (ps, pr) = (cs.alloc_pd()?, cr.alloc_pd()?);
    let (ms, mr) = (
        ps.alloc_mr(len, Access::ALL)?,
        pr.alloc_mr(len, Access::ALL)?,
    );
    let (cqs, cqr) = (
        cs.create_cq(depth as u32 * 2 + 16, None)?,
        cr.create_cq(16, None)?,
    );
    let mut init = QpInit::new(QpType::Rc, &cqs, &cqs);
    init.caps.max_send_wr = depth as u32 + 8;
    let qs = ps.create_qp(&init)?;
    let qr = pr.create_qp(&QpInit::new(QpType::Rc, &cqr, &cqr))?;
    connect(&qs, hosts.av(to, 0), qr.qpn(), 0x100, 0x200)?;
    connect(&qr, hosts.av(from, 0), qs.qpn(), 0x200, 0x100)?;
    Ok(Flow {
        remote_addr: mr.addr(),
        rkey: mr.rkey(),
        qp: qs,
        cq: cqs,
        mr: ms,
        _rest: (qr, cqr, mr, ps, pr),
    })
}

impl Flow {
    fn post(&self, wr_id: u64, len: usize) -> Result<()> {
        let sge = [Sge {
            addr: self.mr.addr(),
            length: len as u32,
            lkey: self.mr.lkey(),
        }];
        let op = SendOp::Write {
            remote_addr: self.remote_addr,
            rkey: self.rkey,
        };
        self.qp
            .post_send(&[SendWr::new(wr_id, op, &sge)])
            .map_err(|(_, e)| anyhow::anyhow!("post_send: {e}"))?;
        Ok(())
    }
}

/// What a sender did: the instants its messages completed (each `SIZE` bytes).
#[derive(Default)]
struct Sent {
    done: Vec<Instant>,
    error: Option<String>,
}

/// Keeps `depth` WRITEs outstanding on each of `flows` until `stop`, then drains them.
fn send(flows: &[Flow], depth: usize, stop: &AtomicBool) -> Sent {
    let mut sent = Sent::default();
    let mut outstanding = vec![0usize; flows.len()];
    let mut buf = [WorkCompletion::default(); 32];
    let deadline_after_stop = Duration::from_secs(5);
    let mut stopped_at: Option<Instant> = None;
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        if stopping && stopped_at.is_none() {
            stopped_at = Some(Instant::now());
        }
        let mut idle = true;
        for (k, f) in flows.iter().enumerate() {
            while !stopping && outstanding[k] < depth {
                if let Err(e) = f.post(0, SIZE) {
                    sent.error = Some(format!("post: {e:#}"));
                    return sent;
                }
                outstanding[k] += 1;
            }
            let n = match f.cq.poll(&mut buf) {
                Ok(n) => n,
                Err(e) => {
                    sent.error = Some(format!("poll: {e}"));
                    return sent;
                }
            };
            if n > 0 {
                idle = false;
            }
            let now = Instant::now();
            for wc in &buf[..n] {
                outstanding[k] = outstanding[k].saturating_sub(1);
                if wc.status != 0 {
                    sent.error = Some(format!("a WRITE completed with status {}", wc.status));
                    return sent;
                }
                sent.done.push(now);
            }
        }
        if stopping && outstanding.iter().all(|&o| o == 0) {
            return sent;
        }
        if stopped_at.is_some_and(|t| t.elapsed() > deadline_after_stop) {
            sent.error = Some("WRITEs still outstanding 5 s after the end".into());
            return sent;
        }
        if idle {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// Ping-pongs 64-byte WRITEs on `flow` until `stop` (one every millisecond); returns the
/// round trips in µs.
fn ping(flow: &Flow, stop: &AtomicBool, most: usize) -> Vec<f64> {
    let mut rtts = Vec::new();
    let mut buf = [WorkCompletion::default(); 4];
    while !stop.load(Ordering::Relaxed) && rtts.len() < most {
        let t0 = Instant::now();
        if flow.post(1, PING).is_err() {
            break;
        }
        loop {
            match flow.cq.poll(&mut buf) {
                Ok(0) => {
                    if t0.elapsed() > Duration::from_secs(5) {
                        return rtts;
                    }
                    std::thread::yield_now();
                }
                Ok(_) if buf[0].status == 0 => {
                    rtts.push(t0.elapsed().as_secs_f64() * 1e6);
                    break;
                }
                _ => return rtts,
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    rtts
}

/// The daemons' counters, summed over `hosts`.
fn sum_stats(ctx: &[Context], hosts: &[usize]) -> Result<Vec<(String, u64)>> {
    let mut total: Vec<(String, u64)> = Vec::new();
    for &h in hosts {
        for (name, v) in ctx[h].stats()? {
            match total.iter_mut().find(|(n, _)| *n == name) {
                Some((_, t)) => *t += v,
                None => total.push((name, v)),
            }
        }
    }
    Ok(total)
}

/// Runs every congestion point of `plan` with `xroced`.
pub(crate) fn run(
    xroced: &std::path::Path,
    plan: &CongestionPlan,
    progress: &Progress,
) -> Result<Vec<CongestionPoint>> {
    if plan.hosts < 5 {
        bail!("the congestion tests need at least 5 hosts (--hosts)");
    }
    if let Some(&n) = plan.fan_in.iter().find(|&&n| n == 0 || n >= plan.hosts) {
        bail!(
            "a fan-in of {n} needs 1..{} senders with {} hosts",
            plan.hosts,
            plan.hosts
        );
    }
    let mut points = Vec::new();
    for cc in [false, true] {
        progress.step(
            format!(
                "starting a star of {} hosts, congestion control {}",
                plan.hosts,
                if cc { "on" } else { "off" }
            ),
            Expect::Unknown,
        );
        let extra = |_: usize| -> Vec<String> {
            if cc {
                plan.cc_args.clone()
            } else {
                vec!["--cc".into(), "off".into()]
            }
        };
        let config = StarConfig {
            hosts: plan.hosts,
            mtu: plan.mtu,
        };
        let hosts = StarHosts::start(xroced, &config, extra).context("starting the star")?;
        let ctx: Vec<Context> = (0..plan.hosts)
            .map(|i| hosts.open(i))
            .collect::<std::io::Result<_>>()?;
        let mut one_sender: Option<f64> = None;
        for (on, marking) in plan.modes() {
            if on != cc {
                continue;
            }
            if plan.incast {
                for &n in &plan.fan_in {
                    progress.step(
                        format!(
                            "incast {n}->1, congestion control {}, {}",
                            if cc { "on" } else { "off" },
                            if marking { "ECN marking" } else { "tail drop" }
                        ),
                        Expect::Secs(plan.secs + 1.5),
                    );
                    let p = incast(&hosts, &ctx, plan, n, cc, marking)
                        .unwrap_or_else(|e| failed("incast", n, cc, marking, e));
                    if n == 1 && marking {
                        one_sender = Some(p.goodput_gbit);
                    }
                    points.push(p);
                }
            }
        }
        if plan.all_to_all {
            progress.step(
                format!(
                    "all-to-all among {} hosts, congestion control {}",
                    plan.hosts,
                    if cc { "on" } else { "off" }
                ),
                Expect::Secs(plan.secs + 1.5),
            );
            let mut p = all_to_all(&hosts, &ctx, plan, cc)
                .unwrap_or_else(|e| failed("all_to_all", plan.hosts, cc, true, e));
            p.two_hosts_gbit = one_sender;
            points.push(p);
        }
        drop(ctx);
        drop(hosts);
    }
    Ok(points)
}

fn failed(
    test: &str,
    senders: usize,
    cc: bool,
    marking: bool,
    e: anyhow::Error,
) -> CongestionPoint {
    CongestionPoint {
        test: test.into(),
        senders,
        cc: if cc { "on" } else { "off" }.into(),
        switch: if marking { "ecn" } else { "tail-drop" }.into(),
        error: Some(format!("{e:#}")),
        ..CongestionPoint::default()
    }
}

/// What a window saw at the switch and the daemons.
struct Window {
    secs: f64,
    start: Instant,
    per_sender: Vec<Vec<Instant>>,
    before: SwitchCounters,
    after: SwitchCounters,
    samples: Vec<xroce_impair::switch::QueueSample>,
    stats_before: Vec<(String, u64)>,
    stats_after: Vec<(String, u64)>,
    pings: Vec<f64>,
}

/// Runs `flows` (grouped per sending thread) and the ping-pong for the warm-up and the
/// window, and records what the switch and the daemons counted over the window.
fn measure(
    switch: &Switch,
    ctx: &[Context],
    groups: &[Vec<Flow>],
    pinger: &Flow,
    depth: usize,
    secs: f64,
) -> Result<Window> {
    let stop = AtomicBool::new(false);
    let stop_ping = AtomicBool::new(false);
    let all: Vec<usize> = (0..ctx.len()).collect();
    let (sents, pings, window) = std::thread::scope(|s| -> Result<_> {
        let senders: Vec<_> = groups
            .iter()
            .map(|g| s.spawn(|| send(g, depth, &stop)))
            .collect();
        std::thread::sleep(WARMUP);
        let pinger = s.spawn(|| ping(pinger, &stop_ping, usize::MAX));
        let start = Instant::now();
        let t0 = switch.now();
        let before = switch.counters();
        let stats_before = sum_stats(ctx, &all)?;
        std::thread::sleep(Duration::from_secs_f64(secs));
        let after = switch.counters();
        let t1 = switch.now();
        let stats_after = sum_stats(ctx, &all)?;
        let end = Instant::now();
        stop_ping.store(true, Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
        let samples: Vec<_> = switch
            .samples_since(t0)
            .into_iter()
            .filter(|(t, _)| *t <= t1)
            .collect();
        let sents: Vec<Sent> = senders
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect();
        let pings = pinger.join().unwrap_or_default();
        Ok((
            sents,
            pings,
            (
                start,
                end,
                before,
                after,
                samples,
                stats_before,
                stats_after,
            ),
        ))
    })?;
    let (start, end, before, after, samples, stats_before, stats_after) = window;
    if let Some(e) = sents.iter().find_map(|s| s.error.clone()) {
        bail!("{e}");
    }
    let per_sender = sents
        .into_iter()
        .map(|s| {
            s.done
                .into_iter()
                .filter(|t| *t >= start && *t < end)
                .collect()
        })
        .collect();
    Ok(Window {
        secs: (end - start).as_secs_f64(),
        start,
        per_sender,
        before,
        after,
        samples,
        stats_before,
        stats_after,
        pings,
    })
}

/// The idle port's ping-pong: 200 round trips.
fn idle_pings(pinger: &Flow) -> Vec<f64> {
    let stop = AtomicBool::new(false);
    ping(pinger, &stop, 200)
}

fn incast(
    hosts: &StarHosts,
    ctx: &[Context],
    plan: &CongestionPlan,
    n: usize,
    cc: bool,
    marking: bool,
) -> Result<CongestionPoint> {
    let config = SwitchConfig::of(&hosts.star, |i| (i == 0).then(|| plan.bottleneck(marking)));
    let switch = Switch::start(&config).context("starting the switch")?;
    let groups: Vec<Vec<Flow>> = (1..=n)
        .map(|i| Ok(vec![flow(hosts, ctx, i, 0, SIZE, plan.depth)?]))
        .collect::<Result<_>>()?;
    let pinger = flow(hosts, ctx, plan.hosts - 1, 0, PING, 2)?;
    let mut idle = idle_pings(&pinger);
    let w = measure(&switch, ctx, &groups, &pinger, plan.depth, plan.secs)?;
    let counters = switch.stop().context("the switch")?;
    let _ = counters;
    let mut p = summarise("incast", n, cc, marking, plan, &w, &[0]);
    idle.sort_by(f64::total_cmp);
    p.idle_ping_p50_us = percentile(&idle, 0.5);
    p.idle_ping_p99_us = percentile(&idle, 0.99);
    Ok(p)
}

fn all_to_all(
    hosts: &StarHosts,
    ctx: &[Context],
    plan: &CongestionPlan,
    cc: bool,
) -> Result<CongestionPoint> {
    let config = SwitchConfig::of(&hosts.star, |_| Some(plan.bottleneck(true)));
    let switch = Switch::start(&config).context("starting the switch")?;
    let groups: Vec<Vec<Flow>> = (0..plan.hosts)
        .map(|from| {
            (0..plan.hosts)
                .filter(|&to| to != from)
                .map(|to| flow(hosts, ctx, from, to, SIZE, plan.depth))
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<_>>()?;
    let pinger = flow(hosts, ctx, plan.hosts - 1, 0, PING, 2)?;
    let mut idle = idle_pings(&pinger);
    let w = measure(&switch, ctx, &groups, &pinger, plan.depth, plan.secs)?;
    drop(switch);
    let ports: Vec<usize> = (0..plan.hosts).collect();
    let mut p = summarise("all_to_all", plan.hosts, cc, true, plan, &w, &ports);
    idle.sort_by(f64::total_cmp);
    p.idle_ping_p50_us = percentile(&idle, 0.5);
    p.idle_ping_p99_us = percentile(&idle, 0.99);
    Ok(p)
}

/// The point of window `w`, whose bottlenecks are the ports `ports` (the queue figures
/// are the fullest's, sample by sample).
fn summarise(
    test: &str,
    senders: usize,
    cc: bool,
    marking: bool,
    plan: &CongestionPlan,
    w: &Window,
    ports: &[usize],
) -> CongestionPoint {
    let per_sender_gbit: Vec<f64> = w
        .per_sender
        .iter()
        .map(|d| (d.len() * SIZE) as f64 * 8.0 / w.secs / 1e9)
        .collect();
    let queue =
        |c: &SwitchCounters, port: usize| c.queues.get(port).copied().flatten().unwrap_or_default();
    let (mut departed, mut drops, mut marks) = (0u64, 0u64, 0u64);
    for &port in ports {
        let (a, b) = (queue(&w.before, port), queue(&w.after, port));
        departed += b.departed_bytes - a.departed_bytes;
        drops += b.tail_dropped - a.tail_dropped;
        marks += b.marked - a.marked;
    }
    let capacity = plan.bottleneck_mbit as f64 * 1e6 / 8.0 * w.secs * ports.len() as f64;
    let depth: Vec<usize> = w
        .samples
        .iter()
        .map(|(_, d)| d.iter().copied().max().unwrap_or(0))
        .collect();
    let mut sorted: Vec<f64> = depth.iter().map(|&d| d as f64).collect();
    sorted.sort_by(f64::total_cmp);
    let delta =
        |name: &str| counter(&w.stats_after, name).saturating_sub(counter(&w.stats_before, name));
    let mut pings = w.pings.clone();
    pings.sort_by(f64::total_cmp);
    // The series: 10 ms bins.
    let bins = (w.secs / BIN.as_secs_f64()).floor() as usize;
    let mut series = Series {
        t_ms: (1..=bins)
            .map(|b| (b as f64) * BIN.as_secs_f64() * 1e3)
            .collect(),
        queue_bytes: vec![0; bins],
        sender_mbit: vec![vec![0.0; bins]; w.per_sender.len()],
    };
    for (k, done) in w.per_sender.iter().enumerate() {
        for t in done {
            let b = ((*t - w.start).as_secs_f64() / BIN.as_secs_f64()) as usize;
            if b < bins {
                series.sender_mbit[k][b] += (SIZE * 8) as f64 / BIN.as_secs_f64() / 1e6;
            }
        }
    }
    if let Some(&(t_first, _)) = w.samples.first() {
        for ((t, _), &d) in w.samples.iter().zip(&depth) {
            let b = ((t - t_first) as f64 / BIN.as_nanos() as f64) as usize;
            if b < bins {
                series.queue_bytes[b] = series.queue_bytes[b].max(d);
            }
        }
    }
    CongestionPoint {
        test: test.into(),
        senders,
        cc: if cc { "on" } else { "off" }.into(),
        switch: if marking { "ecn" } else { "tail-drop" }.into(),
        secs: w.secs,
        goodput_gbit: per_sender_gbit.iter().sum(),
        jain: jain(&per_sender_gbit),
        per_sender_gbit,
        utilisation: departed as f64 / capacity,
        drops,
        marks,
        queue_mean_bytes: sorted.iter().sum::<f64>() / sorted.len().max(1) as f64,
        queue_p99_bytes: percentile(&sorted, 0.99) as usize,
        queue_max_bytes: sorted.last().copied().unwrap_or(0.0) as usize,
        ecn_marked_packets: delta("np_ecn_marked_roce_packets"),
        cnps_sent: delta("np_cnp_sent"),
        cnps_handled: delta("rp_cnp_handled"),
        retransmit_timeouts: delta("retransmit_timeouts"),
        seq_naks: delta("rcvd_seq_err"),
        loss_events: delta("cc_loss_events"),
        losses_tolerated: delta("cc_losses_tolerated"),
        ping_p50_us: percentile(&pings, 0.5),
        ping_p99_us: percentile(&pings, 0.99),
        series,
        ..CongestionPoint::default()
    }
}

/// Draws the time series of `points` into an SVG at `path`: one row per point, goodput
/// per sender on the left, the queue on the right.
pub(crate) fn draw(points: &[CongestionPoint], path: &std::path::Path) -> Result<bool> {
    use plotters::prelude::*;
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("drawing the congestion plot: {e}");
    let rows: Vec<&CongestionPoint> = points
        .iter()
        .filter(|p| p.error.is_none() && !p.series.t_ms.is_empty())
        .collect();
    if rows.is_empty() {
        return Ok(false);
    }
    let root = SVGBackend::new(path, (1400, 300 * rows.len() as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    for (area, p) in root.split_evenly((rows.len(), 1)).iter().zip(rows) {
        let (left, right) = area.split_horizontally(700);
        let title = format!("{} {} cc {} {}", p.test, p.senders, p.cc, p.switch);
        let t_max = p.series.t_ms.last().copied().unwrap_or(1.0);
        let top = p
            .series
            .sender_mbit
            .iter()
            .flatten()
            .copied()
            .fold(1.0f64, f64::max);
        let mut chart = ChartBuilder::on(&left)
            .caption(
                format!("{title}: goodput per sender (Mbit/s)"),
                ("sans-serif", 14),
            )
            .margin(8)
            .x_label_area_size(24)
            .y_label_area_size(48)
            .build_cartesian_2d(0.0..t_max, 0.0..top * 1.1)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("ms")
            .draw()
            .map_err(|e| err(&e))?;
        for (k, s) in p.series.sender_mbit.iter().enumerate() {
            let colour = Palette99::pick(k);
            chart
                .draw_series(LineSeries::new(
                    p.series.t_ms.iter().copied().zip(s.iter().copied()),
                    &colour,
                ))
                .map_err(|e| err(&e))?;
        }
        let qtop = p
            .series
            .queue_bytes
            .iter()
            .copied()
            .max()
            .unwrap_or(1)
            .max(1) as f64
            / 1024.0;
        let mut chart = ChartBuilder::on(&right)
            .caption(format!("{title}: queue (KiB)"), ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(24)
            .y_label_area_size(48)
            .build_cartesian_2d(0.0..t_max, 0.0..qtop * 1.1)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("ms")
            .draw()
            .map_err(|e| err(&e))?;
        chart
            .draw_series(LineSeries::new(
                p.series
                    .t_ms
                    .iter()
                    .copied()
                    .zip(p.series.queue_bytes.iter().map(|&b| b as f64 / 1024.0)),
                &RGBColor(0xd6, 0x27, 0x28),
            ))
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_is_one_for_equal_shares_and_one_over_n_for_one_taker() {
        assert!((jain(&[1.0, 1.0, 1.0, 1.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        assert_eq!(jain(&[0.0, 0.0]), 0.0);
    }

    #[test]
    fn modes_run_off_once_and_on_with_and_without_marking() {
        let plan = CongestionPlan {
            hosts: 5,
            mtu: 1500,
            bottleneck_mbit: 500,
            queue_bytes: 128 << 10,
            kmin: 16 << 10,
            kmax: 64 << 10,
            pmax_percent: 20,
            fan_in: vec![1, 2, 4],
            depth: 16,
            secs: 3.0,
            incast: true,
            all_to_all: true,
            cc_args: Vec::new(),
        };
        assert_eq!(plan.modes(), [(false, true), (true, true), (true, false)]);
        // Two stars, 3 fan-ins in 3 modes, all-to-all twice.
        assert_eq!(plan.steps(), 2 + 9 + 2);
        assert_eq!(plan.bottleneck(false).marking, None);
        assert_eq!(plan.bottleneck(true).rate_bps, 500_000_000);
    }
}
