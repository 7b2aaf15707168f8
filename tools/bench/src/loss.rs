//! `--tests loss`: goodput on a path that loses frames, as a fraction of the same path's
//! loss-free goodput.
//!
//! A lab of its own, with a router between the hosts, where the impairment router
//! (`xroce-impair`, release build) forwards the RoCEv2 frames and loses them: at random
//! (each rate of `--loss-rates`), and in bursts (`--loss-burst` frames on average, at the
//! first non-zero rate of the list, or 1 %; a pause of the path of
//! [`xroce_impair::BURST_IDLE`] ends a burst, as time ends a network's). At every point host a WRITEs 64 KiB messages
//! to host b on one QP at the bandwidth tests' depth for `--duration`, every message timed
//! from its post to its completion. A point reports the goodput, its ratio to the
//! loss-free point of the same run, the frames the router dropped, the request packets
//! host a sent again (what it sent less what the messages needed), the retransmission
//! timeouts and NAKs it met, and the median and 99th percentile of a message's completion
//! time. A point whose QP ends in error (its retry budget spent) says so and the run goes
//! on with the next on a new QP. A last point reorders frames without losing any
//! (`--loss-reorder` percent of the frames overtaken by the next three): what is resent
//! there is resent for nothing.
//!
//! Every point runs once per recovery mode (`--loss-modes`, the mode column), each mode
//! with daemons of its own: `go-back-N`, the standard's (`xroced --selective-repeat off`),
//! and `selective repeat` between the two xroce daemons (the default). Each mode's ratio is
//! to its own loss-free point.
//!
//! Without a bottleneck the path is as fast as the hosts' cores move frames, so on a small
//! machine a point measures what its losses cost those cores (the resends, the NAKs, the
//! packets a responder holds) as much as what they cost the path. `--loss-bottleneck-mbit
//! M` gives the router's egress each way a rate of M Mbit/s and a queue of
//! `--loss-queue-kib` (tail drop; its drops are counted apart from the loss asked for): a
//! path slower than the hosts, as a network is, where a point measures what loss recovery
//! leaves of the path.
//!
//! On a host whose throughput moves from one run to the next (threads sharing cores, other
//! work), one ratio says little: `--loss-rounds N` runs the whole list of points N times in
//! turn, each round's ratios to that round's own loss-free point, and reports per point the
//! median ratio over the rounds with the smallest and the largest (a failed round counts
//! as 0). The targets are judged on the medians.

use std::time::Duration;

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};
use xroce_impair::Impairment;
use xroce_impair::process::ImpairProcess;
use xroce_lab::daemons::TwoHosts;
use xroce_lab::{Family, LabConfig};

use crate::poll;
use crate::progress::{Expect, Progress};
use crate::workload::{BwSpec, LatSpec, Op, Timing, Xroce, frames};

/// The message size of every point.
pub(crate) const SIZE: usize = 64 << 10;

/// One point of the loss test.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct LossPoint {
    /// The round the point ran in, from 1 (0: a report from before rounds existed).
    #[serde(default)]
    pub(crate) round: usize,
    /// Percent of frames the router lost (long-run rate).
    pub(crate) loss_percent: f64,
    /// Mean length of a run of lost frames (1: independent losses).
    pub(crate) loss_burst: f64,
    /// A pause of the path this many µs long ended a burst of loss (0: bursts counted
    /// frames only, as in reports from before the pause ended them).
    #[serde(default)]
    pub(crate) loss_burst_idle_us: u64,
    /// Percent of frames reordered (overtaken by the next three).
    #[serde(default)]
    pub(crate) reorder_percent: f64,
    /// Loss recovery: `go-back-N` or `selective repeat`.
    pub(crate) mode: String,
    pub(crate) size: usize,
    pub(crate) depth: usize,
    /// Messages completed inside the measured window.
    pub(crate) messages: u64,
    pub(crate) secs: f64,
    /// Payload goodput.
    pub(crate) gbit_per_sec: f64,
    /// Goodput over the loss-free point's (1 for that point; 0 when it failed).
    pub(crate) ratio: f64,
    /// Frames the router dropped, both directions.
    pub(crate) frames_dropped: u64,
    /// The router's egress rate each way, Mbit/s (0: none; `--loss-bottleneck-mbit`).
    #[serde(default)]
    pub(crate) bottleneck_mbit: u64,
    /// Frames its full queue dropped, both directions (beside the loss asked for).
    #[serde(default)]
    pub(crate) queue_dropped: u64,
    /// Request packets host a sent.
    #[serde(default)]
    pub(crate) sent_packets: u64,
    /// Request packets host a sent beyond what its messages needed.
    pub(crate) retransmitted_packets: u64,
    /// The same in payload bytes (full-MTU packets).
    pub(crate) retransmitted_bytes: u64,
    /// Retransmit timer expirations at host a.
    pub(crate) retransmit_timeouts: u64,
    /// PSN sequence error NAKs host a received.
    pub(crate) seq_naks: u64,
    /// Median time from a message's post to its completion.
    pub(crate) completion_p50_us: f64,
    /// 99th percentile of the same.
    pub(crate) completion_p99_us: f64,
    /// Why the point failed (its QP is in error: the retry budget ran out), if it did.
    pub(crate) error: Option<String>,
    /// Host a's loss recovery counters over the point: how it resent and what held it.
    #[serde(default)]
    pub(crate) recovery: Recovery,
    /// A ping-pong through the same loss after the stream (none: not run, or failed).
    #[serde(default)]
    pub(crate) ping: Option<Ping>,
}

/// A ping-pong of 64-byte WRITEs, one at a time, on a queue pair of its own, through the
/// loss of its point: what a latency-bound application sees (a lost packet of a
/// ping-pong is a tail: nothing follows it to draw a NAK, so only a timer finds it).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Ping {
    /// Round trips measured.
    pub(crate) iterations: usize,
    /// Round trip: median, 99th percentile, 99.9th and largest.
    pub(crate) rtt_p50_us: f64,
    pub(crate) rtt_p99_us: f64,
    pub(crate) rtt_p999_us: f64,
    pub(crate) rtt_max_us: f64,
    /// Why it failed, if it did.
    pub(crate) error: Option<String>,
}

/// Round trips of each point's ping-pong.
pub(crate) const PING_ITERS: usize = 2000;

/// The ping-pong's message size.
const PING_SIZE: usize = 64;

/// Host a's loss recovery counters over one point (the transport's counters of the same
/// names).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Recovery {
    /// Resends started at once (a sequence-error NAK, a response showing a loss).
    pub(crate) prompt_retries: u64,
    /// Expiries of the timer derived from measured round trips.
    pub(crate) adaptive_timeouts: u64,
    /// Those that resent a gap a NAK's resend had not filled.
    pub(crate) gap_retries: u64,
    /// Expiries found needless (the peer answered late).
    #[serde(default)]
    pub(crate) spurious_timeouts: u64,
    /// Expiries while nothing in flight asked for an answer (nothing resent).
    #[serde(default)]
    pub(crate) unasked_timeouts: u64,
    /// Expiries after which the oldest packet was resent alone, to tell a late peer from
    /// a loss before going back (RFC 5682's test).
    #[serde(default)]
    pub(crate) frto_probes: u64,
    /// Round trips measured.
    pub(crate) rtt_samples: u64,
    /// Times the measured window held a packet back.
    pub(crate) held_by_window: u64,
    /// Times pacing held a resent packet back.
    pub(crate) held_by_pacing: u64,
    /// Selective repeat: NAKs with what the responder held, received.
    #[serde(default)]
    pub(crate) sr_naks_received: u64,
    /// Selective repeat: packets resent because they were missing (holes only).
    #[serde(default)]
    pub(crate) sr_packets_resent: u64,
    /// Selective repeat: times a packet waited because the PSNs beyond a hole filled what
    /// b's store holds.
    #[serde(default)]
    pub(crate) sr_held_by_store: u64,
    /// Selective repeat, host b: packets held ahead of a gap.
    #[serde(default)]
    pub(crate) sr_packets_held: u64,
    /// Selective repeat, host b: packets that found its store full.
    #[serde(default)]
    pub(crate) sr_held_dropped_full: u64,
    /// Congestion control: losses taken for congestion (each may cut the rate), and those
    /// taken for random loss.
    #[serde(default)]
    pub(crate) cc_loss_events: u64,
    #[serde(default)]
    pub(crate) cc_losses_tolerated: u64,
}

/// A loss recovery mode the loss test measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Mode {
    /// The standard's: the daemons run `--selective-repeat off`.
    #[value(name = "go-back-n")]
    GoBackN,
    /// Between two xroce daemons (their default).
    #[value(name = "selective-repeat")]
    SelectiveRepeat,
}

impl Mode {
    /// Its name in the table and the JSON.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Mode::GoBackN => "go-back-N",
            Mode::SelectiveRepeat => "selective repeat",
        }
    }

    /// What the daemons are told.
    pub(crate) fn daemon_args(self) -> [&'static str; 2] {
        match self {
            Mode::GoBackN => ["--selective-repeat", "off"],
            Mode::SelectiveRepeat => ["--selective-repeat", "on"],
        }
    }
}

/// One point of the plan.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Point {
    /// Percent of frames lost.
    pub(crate) loss: f64,
    /// Mean length of a run of lost frames.
    pub(crate) burst: f64,
    /// Percent of frames reordered.
    pub(crate) reorder: f64,
}

/// How many frames overtake a reordered one.
const REORDER_GAP: u32 = 3;

/// What the loss test runs.
#[derive(Clone, Debug)]
pub(crate) struct LossPlan {
    /// The recovery mode of this run's daemons.
    pub(crate) mode: Mode,
    /// Loss rates, in percent, each at independent losses.
    pub(crate) rates: Vec<f64>,
    /// The mean burst length of the bursty point (none: no bursty point).
    pub(crate) burst: Option<f64>,
    /// Percent of frames reordered at the reordering point (none: no such point).
    pub(crate) reorder: Option<f64>,
    pub(crate) depth: usize,
    pub(crate) timing: Timing,
    pub(crate) seed: u64,
    /// The hosts' addresses the queue pair uses (through the router either way).
    pub(crate) family: Family,
    /// How many times the whole list of points runs (at least once).
    pub(crate) rounds: usize,
    /// The router's egress rate each way, Mbit/s (0: none), and its queue in KiB.
    pub(crate) bottleneck_mbit: u64,
    pub(crate) queue_kib: usize,
}

impl LossPlan {
    /// The points, in order: the loss rates, the bursty point, the reordering point.
    pub(crate) fn points(&self) -> Vec<Point> {
        let point = |loss, burst, reorder| Point {
            loss,
            burst,
            reorder,
        };
        let mut v: Vec<Point> = self.rates.iter().map(|&r| point(r, 1.0, 0.0)).collect();
        if let Some(b) = self.burst {
            let rate = self.rates.iter().copied().find(|&r| r > 0.0).unwrap_or(1.0);
            v.push(point(rate, b, 0.0));
        }
        if let Some(r) = self.reorder {
            v.push(point(0.0, 1.0, r));
        }
        v
    }
}

/// The frames one message of `size` bytes needs, and their payload, on this path.
fn packets(size: usize, path_mtu: usize) -> u64 {
    frames(Op::Write, size, path_mtu).0 as u64
}

fn counter(stats: &[(String, u64)], name: &str) -> u64 {
    stats.iter().find(|(k, _)| k == name).map_or(0, |(_, v)| *v)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Runs the loss test on `hosts` (a lab with a router) and returns its points.
pub(crate) fn run(
    hosts: &TwoHosts,
    plan: &LossPlan,
    spin: Duration,
    bw_then: poll::Then,
    app_cores: [Option<usize>; 2],
    progress: &Progress,
) -> Result<Vec<LossPoint>> {
    let mut x = Xroce::new(hosts, spin, bw_then, app_cores, plan.family)?;
    let mut points: Vec<LossPoint> = Vec::new();
    let mut pairs = x.pairs(1, plan.depth, 1)?;
    let mode = plan.mode.label();
    let rounds = plan.rounds.max(1);
    let plan_points = plan.points();
    for round in 1..=rounds {
        // Each round's ratios are to its own loss-free point.
        let mut loss_free = None;
        for &Point {
            loss: loss_percent,
            burst: loss_burst,
            reorder: reorder_percent,
        } in &plan_points
        {
            let mut what = if reorder_percent > 0.0 {
                format!("{mode}, {reorder_percent} % reordered, none lost")
            } else if loss_burst > 1.0 {
                format!("{mode}, loss {loss_percent} % in bursts of {loss_burst}")
            } else {
                format!("{mode}, loss {loss_percent} %")
            };
            if rounds > 1 {
                what = format!("{what} (round {round} of {rounds})");
            }
            progress.step(what.clone(), Expect::Secs(plan.timing.expected_secs()));
            let impairment = Impairment {
                loss: loss_percent / 100.0,
                loss_burst,
                reorder: reorder_percent / 100.0,
                reorder_gap: REORDER_GAP,
                seed: plan.seed,
                rate_bps: plan.bottleneck_mbit * 1_000_000,
                queue_bytes: plan.queue_kib * 1024,
                ..Impairment::default()
            };
            let impair = ImpairProcess::start(&hosts.lab, &impairment)
                .with_context(|| format!("starting the impairment router ({what})"))?;
            let before = x.a.ctx.stats()?;
            let b_before = x.b.ctx.stats()?;
            let spec = BwSpec {
                test: "loss",
                op: Op::Write,
                size: SIZE,
                depth: plan.depth,
                cq_mod: 1,
                post_list: 1,
                inline: false,
                recv_len: 0,
                time_completions: true,
            };
            let measured = x.bandwidth_measured(&pairs, &spec, &plan.timing, progress);
            let after = x.a.ctx.stats()?;
            let b_after = x.b.ctx.stats()?;
            // The ping-pong after the stream's counters are taken, through the same loss.
            progress.step(
                format!("{what}: ping-pong"),
                Expect::Count(PING_ITERS as u64),
            );
            let ping = ping(&mut x, plan, progress);
            let counters = impair.stop().context("stopping the impairment router")?;
            let delta = |name: &str| counter(&after, name).saturating_sub(counter(&before, name));
            let b_delta =
                |name: &str| counter(&b_after, name).saturating_sub(counter(&b_before, name));
            let mut p = LossPoint {
                round,
                loss_percent,
                loss_burst,
                loss_burst_idle_us: impairment.burst_idle.as_micros() as u64,
                reorder_percent,
                mode: mode.into(),
                size: SIZE,
                depth: plan.depth,
                frames_dropped: counters.a_to_b.dropped + counters.b_to_a.dropped,
                bottleneck_mbit: plan.bottleneck_mbit,
                queue_dropped: counters.a_to_b.queue_dropped + counters.b_to_a.queue_dropped,
                retransmit_timeouts: delta("retransmit_timeouts"),
                seq_naks: delta("rcvd_seq_err"),
                recovery: Recovery {
                    prompt_retries: delta("prompt_retries"),
                    adaptive_timeouts: delta("adaptive_timeouts"),
                    gap_retries: delta("gap_retries"),
                    spurious_timeouts: delta("spurious_timeouts"),
                    unasked_timeouts: delta("unasked_timeouts"),
                    frto_probes: delta("frto_probes"),
                    rtt_samples: delta("rtt_samples"),
                    held_by_window: delta("req_held_by_window"),
                    held_by_pacing: delta("req_held_by_pacing"),
                    sr_naks_received: delta("sr_naks_received"),
                    sr_packets_resent: delta("sr_packets_resent"),
                    sr_held_by_store: delta("sr_held_by_store"),
                    sr_packets_held: b_delta("sr_packets_held"),
                    sr_held_dropped_full: b_delta("sr_held_dropped_full"),
                    cc_loss_events: delta("cc_loss_events"),
                    cc_losses_tolerated: delta("cc_losses_tolerated"),
                },
                ping: Some(ping),
                ..LossPoint::default()
            };
            match measured {
                Ok(m) => {
                    let needed = m.posted * packets(SIZE, x.path_mtu);
                    p.sent_packets = delta("sent_pkts");
                    p.retransmitted_packets = p.sent_packets.saturating_sub(needed);
                    p.retransmitted_bytes = p.retransmitted_packets * x.path_mtu as u64;
                    p.messages = m.point.messages;
                    p.secs = m.point.secs;
                    p.gbit_per_sec = m.point.gbit_per_sec;
                    let mut c = m.completion_us;
                    c.sort_by(f64::total_cmp);
                    p.completion_p50_us = percentile(&c, 0.5);
                    p.completion_p99_us = percentile(&c, 0.99);
                    if loss_percent == 0.0 && reorder_percent == 0.0 && loss_free.is_none() {
                        loss_free = Some(p.gbit_per_sec);
                    }
                    p.ratio =
                        loss_free.map_or(0.0, |f| if f > 0.0 { p.gbit_per_sec / f } else { 0.0 });
                }
                Err(e) => {
                    p.error = Some(format!("{e:#}"));
                    // Its QP is gone to error: the next point gets new ones.
                    x.a.drain_cqs()?;
                    x.b.drain_cqs()?;
                    pairs = x.pairs(1, plan.depth, 1)?;
                }
            }
            points.push(p);
        }
    }
    Ok(points)
}

/// The ping-pong of one point, on a queue pair of its own (a new one each point: the
/// stream's losses are not its history).
fn ping(x: &mut Xroce<'_>, plan: &LossPlan, progress: &Progress) -> Ping {
    let mut run = || -> Result<crate::report::LatPoint> {
        let pairs = x.pairs(1, 128, 128)?;
        x.prepare_lat(&pairs[0], Op::Write, PING_SIZE)?;
        let spec = LatSpec {
            op: Op::Write,
            size: PING_SIZE,
            max_size: PING_SIZE,
            iters: PING_ITERS,
            max_time: plan.timing.duration,
        };
        x.latency(&pairs[0], &spec, progress)
    };
    match run() {
        // The latency test reports half the round trip of a WRITE ping-pong.
        Ok(l) => Ping {
            iterations: l.iterations,
            rtt_p50_us: 2.0 * l.median_us,
            rtt_p99_us: 2.0 * l.p99_us,
            rtt_p999_us: 2.0 * l.p999_us,
            rtt_max_us: 2.0 * l.max_us,
            error: None,
        },
        Err(e) => Ping {
            error: Some(format!("{e:#}")),
            ..Ping::default()
        },
    }
}

/// One point of the plan over every round it ran in.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct LossSummary {
    pub(crate) loss_percent: f64,
    pub(crate) loss_burst: f64,
    pub(crate) reorder_percent: f64,
    pub(crate) mode: String,
    /// Rounds it ran in, and those whose QP ended in error.
    pub(crate) rounds: usize,
    pub(crate) failed: usize,
    /// Each round's ratio to its own loss-free point (a failed round: 0): the median, the
    /// smallest and the largest.
    pub(crate) ratio_median: f64,
    pub(crate) ratio_min: f64,
    pub(crate) ratio_max: f64,
    /// The median goodput of the rounds that did not fail.
    pub(crate) gbit_median: f64,
    /// Request packets sent, and sent again, over the rounds that did not fail.
    pub(crate) sent_packets: u64,
    pub(crate) retransmitted_packets: u64,
    /// Frames the bottleneck's full queue dropped over the same rounds.
    #[serde(default)]
    pub(crate) queue_dropped: u64,
}

/// The median of `v` (the mean of the two middle values of an even count; 0 if empty).
fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The points gathered per mode and point of the plan, in the order they first ran.
pub(crate) fn summarize(points: &[LossPoint]) -> Vec<LossSummary> {
    let same = |a: &LossPoint, s: &LossSummary| {
        a.mode == s.mode
            && a.loss_percent == s.loss_percent
            && a.loss_burst == s.loss_burst
            && a.reorder_percent == s.reorder_percent
    };
    let mut out: Vec<LossSummary> = Vec::new();
    for p in points {
        if out.iter().any(|s| same(p, s)) {
            continue;
        }
        let mut s = LossSummary {
            loss_percent: p.loss_percent,
            loss_burst: p.loss_burst,
            reorder_percent: p.reorder_percent,
            mode: p.mode.clone(),
            ..LossSummary::default()
        };
        let all: Vec<&LossPoint> = points.iter().filter(|q| same(q, &s)).collect();
        let ratios: Vec<f64> = all
            .iter()
            .map(|q| if q.error.is_some() { 0.0 } else { q.ratio })
            .collect();
        let ok: Vec<&&LossPoint> = all.iter().filter(|q| q.error.is_none()).collect();
        s.rounds = all.len();
        s.failed = all.len() - ok.len();
        s.ratio_min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        s.ratio_max = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        s.ratio_median = median(ratios);
        s.gbit_median = median(ok.iter().map(|q| q.gbit_per_sec).collect());
        s.sent_packets = ok.iter().map(|q| q.sent_packets).sum();
        s.retransmitted_packets = ok.iter().map(|q| q.retransmitted_packets).sum();
        s.queue_dropped = ok.iter().map(|q| q.queue_dropped).sum();
        out.push(s);
    }
    out
}

/// The targets for the loss test, judged on `points` (reported, never asserted;
/// over several rounds, on each point's median ratio): `(mode, what, the figure, met)`.
pub(crate) fn targets(points: &[LossPoint]) -> Vec<(String, String, f64, bool)> {
    let summaries = summarize(points);
    let mut out = Vec::new();
    let at = |mode: &str, loss: f64| {
        summaries.iter().find(|p| {
            p.mode == mode
                && p.loss_percent == loss
                && p.loss_burst <= 1.0
                && p.reorder_percent == 0.0
        })
    };
    let mut ratio = |mode: Mode, loss: f64, least: f64| {
        if let Some(p) = at(mode.label(), loss) {
            let r = p.ratio_median;
            out.push((
                mode.label().to_string(),
                format!("goodput at {loss} % loss >= {least} of loss-free"),
                r,
                r >= least,
            ));
        }
    };
    ratio(Mode::GoBackN, 0.1, 0.95);
    ratio(Mode::GoBackN, 1.0, 0.6);
    ratio(Mode::SelectiveRepeat, 1.0, 0.9);
    ratio(Mode::SelectiveRepeat, 5.0, 0.75);
    for mode in [Mode::GoBackN, Mode::SelectiveRepeat] {
        let within: Vec<&LossSummary> = summaries
            .iter()
            .filter(|p| p.mode == mode.label() && p.loss_percent <= 5.0)
            .collect();
        if !within.is_empty() {
            let failed: usize = within.iter().map(|p| p.failed).sum();
            out.push((
                mode.label().to_string(),
                "QPs in retry exceeded at <= 5 % loss: none".into(),
                failed as f64,
                failed == 0,
            ));
        }
    }
    if let Some(p) = summaries.iter().find(|p| {
        p.mode == Mode::SelectiveRepeat.label() && p.reorder_percent > 0.0 && p.loss_percent == 0.0
    }) && p.sent_packets > 0
    {
        // Through a bottleneck its full queue drops frames too: resending those is not
        // spurious (one resend each; the rest is).
        let spurious = p.retransmitted_packets.saturating_sub(p.queue_dropped);
        let share = spurious as f64 / p.sent_packets as f64;
        out.push((
            Mode::SelectiveRepeat.label().to_string(),
            format!(
                "resent under reordering alone ({} %) < 0.01 of sent{}",
                p.reorder_percent,
                if p.queue_dropped > 0 {
                    " (less the queue's drops)"
                } else {
                    ""
                }
            ),
            share,
            share < 0.01,
        ));
    }
    out
}

/// Draws the loss test into an SVG file at `path`: each mode's goodput as a fraction of its
/// loss-free point (the median over the rounds) against the random loss rate (the bursty
/// and reordering points are in the table). Returns `false` (and draws nothing) when there
/// is nothing to plot.
pub(crate) fn draw(points: &[LossPoint], path: &std::path::Path) -> Result<bool> {
    use plotters::prelude::*;
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("drawing the loss plot: {e}");
    let summaries = summarize(points);
    let random: Vec<&LossSummary> = summaries
        .iter()
        .filter(|p| p.loss_burst <= 1.0 && p.reorder_percent == 0.0)
        .collect();
    let mut rates: Vec<f64> = random.iter().map(|p| p.loss_percent).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    if rates.len() < 2 {
        return Ok(false);
    }
    // The rates are evenly spaced on the axis, whatever their values (0, 0.1, 1, 2, 5).
    let x = |rate: f64| rates.iter().position(|&r| r == rate).unwrap_or(0) as f64;
    let root = SVGBackend::new(path, (700, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let labels = rates.clone();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Goodput under random loss, WRITE 64 KiB on 1 QP (fraction of loss-free)",
            ("sans-serif", 16),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(-0.3..(rates.len() as f64 - 0.7), 0.0..1.1)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("frames lost, %")
        .y_desc("goodput / loss-free")
        .x_labels(rates.len())
        .x_label_formatter(&|v: &f64| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 {
                labels
                    .get(i as usize)
                    .map_or(String::new(), |r| format!("{r}"))
            } else {
                String::new()
            }
        })
        .draw()
        .map_err(|e| err(&e))?;
    for (k, mode) in [Mode::GoBackN, Mode::SelectiveRepeat]
        .into_iter()
        .enumerate()
    {
        let line: Vec<(f64, f64)> = random
            .iter()
            .filter(|p| p.mode == mode.label())
            .map(|p| (x(p.loss_percent), p.ratio_median))
            .collect();
        if line.is_empty() {
            continue;
        }
        let colour = Palette99::pick(k).to_rgba();
        chart
            .draw_series(LineSeries::new(line.clone(), colour.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(mode.label())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
        chart
            .draw_series(line.into_iter().map(|p| Circle::new(p, 3, colour.filled())))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(true)
}

/// The lab of the loss test: two hosts behind a router.
pub(crate) fn lab_config(mtu: u32) -> LabConfig {
    LabConfig {
        mtu,
        router: true,
        queues: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_put_the_bursty_one_at_the_first_lossy_rate_then_the_reordering_one() {
        let plan = LossPlan {
            mode: Mode::SelectiveRepeat,
            rates: vec![0.0, 0.1, 1.0],
            burst: Some(8.0),
            reorder: Some(2.0),
            depth: 128,
            timing: Timing {
                duration: Duration::from_secs(1),
                iters: None,
            },
            seed: 1,
            family: Family::Ipv4,
            rounds: 1,
            bottleneck_mbit: 0,
            queue_kib: 128,
        };
        let points: Vec<(f64, f64, f64)> = plan
            .points()
            .iter()
            .map(|p| (p.loss, p.burst, p.reorder))
            .collect();
        assert_eq!(
            points,
            vec![
                (0.0, 1.0, 0.0),
                (0.1, 1.0, 0.0),
                (1.0, 1.0, 0.0),
                (0.1, 8.0, 0.0),
                (0.0, 1.0, 2.0)
            ]
        );
    }

    /// A random-loss point of `mode` at `loss` percent with `ratio`.
    fn point(mode: Mode, loss: f64, ratio: f64) -> LossPoint {
        LossPoint {
            loss_percent: loss,
            loss_burst: 1.0,
            mode: mode.label().into(),
            ratio,
            ..LossPoint::default()
        }
    }

    #[test]
    fn targets_are_judged_per_mode() {
        let mut points = vec![
            point(Mode::GoBackN, 0.0, 1.0),
            point(Mode::GoBackN, 0.1, 0.96),
            point(Mode::GoBackN, 1.0, 0.5),
            point(Mode::SelectiveRepeat, 1.0, 0.95),
            point(Mode::SelectiveRepeat, 5.0, 0.7),
        ];
        points[2].error = Some("retry exceeded".into());
        let mut reordered = point(Mode::SelectiveRepeat, 0.0, 1.0);
        reordered.reorder_percent = 1.0;
        reordered.sent_packets = 1000;
        reordered.retransmitted_packets = 5;
        points.push(reordered);
        let t = targets(&points);
        let met: Vec<bool> = t.iter().map(|x| x.3).collect();
        // 0.1 % met, 1 % failed (its QP in error: ratio 0), SR 1 % met, SR 5 % not,
        // go-back-N had a QP in error, SR none, 0.5 % resent under reordering.
        assert_eq!(met, [true, false, true, false, false, true, true], "{t:?}");
        assert_eq!(t[1].2, 0.0);
        assert_eq!(t[6].2, 0.005);
        // Through a bottleneck that dropped 3 frames, 3 of the 5 resends were not
        // spurious.
        points[5].queue_dropped = 3;
        let t = targets(&points);
        assert_eq!(t[6].2, 0.002);
        assert!(t[6].1.ends_with("(less the queue's drops)"), "{t:?}");
    }

    /// `point` of round `round`.
    fn in_round(round: usize, mut p: LossPoint) -> LossPoint {
        p.round = round;
        p
    }

    #[test]
    fn rounds_are_summarized_per_point_and_the_targets_judge_their_medians() {
        let mut points = Vec::new();
        // Go-back-N at 0.1 %: 0.97, 0.80 (a bad round), failed (0), 0.96: median 0.88.
        for (round, ratio) in [(1, 0.97), (2, 0.80), (3, 0.5), (4, 0.96)] {
            points.push(in_round(round, point(Mode::GoBackN, 0.0, 1.0)));
            let mut p = in_round(round, point(Mode::GoBackN, 0.1, ratio));
            p.gbit_per_sec = ratio;
            p.sent_packets = 1000;
            p.retransmitted_packets = 10;
            if round == 3 {
                p.error = Some("retry exceeded".into());
            }
            points.push(p);
        }
        // Selective repeat at 1 %: 0.95, 0.70, 0.92: median 0.92 (met although one round
        // was not).
        for (round, ratio) in [(1, 0.95), (2, 0.70), (3, 0.92)] {
            points.push(in_round(round, point(Mode::SelectiveRepeat, 0.0, 1.0)));
            points.push(in_round(round, point(Mode::SelectiveRepeat, 1.0, ratio)));
        }
        let s = summarize(&points);
        let keys: Vec<(&str, f64, usize)> = s
            .iter()
            .map(|p| (p.mode.as_str(), p.loss_percent, p.rounds))
            .collect();
        assert_eq!(
            keys,
            [
                ("go-back-N", 0.0, 4),
                ("go-back-N", 0.1, 4),
                ("selective repeat", 0.0, 3),
                ("selective repeat", 1.0, 3)
            ]
        );
        let g = &s[1];
        assert_eq!(g.failed, 1);
        assert!((g.ratio_median - 0.88).abs() < 1e-9, "{g:?}");
        assert_eq!((g.ratio_min, g.ratio_max), (0.0, 0.97));
        // The failed round's goodput and packets are left out.
        assert_eq!(g.gbit_median, 0.96);
        assert_eq!((g.sent_packets, g.retransmitted_packets), (3000, 30));
        assert_eq!(s[3].ratio_median, 0.92);
        let t = targets(&points);
        let judged: Vec<(&str, f64, bool)> = t.iter().map(|x| (x.1.as_str(), x.2, x.3)).collect();
        assert_eq!(
            judged,
            [
                (
                    "goodput at 0.1 % loss >= 0.95 of loss-free",
                    g.ratio_median,
                    false
                ),
                ("goodput at 1 % loss >= 0.9 of loss-free", 0.92, true),
                ("QPs in retry exceeded at <= 5 % loss: none", 1.0, false),
                ("QPs in retry exceeded at <= 5 % loss: none", 0.0, true),
            ]
        );
    }

    #[test]
    fn the_plot_has_a_line_per_mode_and_nothing_without_two_rates() {
        let path = std::env::temp_dir().join(format!("xroce-loss-plot-{}.svg", std::process::id()));
        let one = [point(Mode::GoBackN, 0.0, 1.0)];
        assert!(!draw(&one, &path).unwrap());
        let points = [
            point(Mode::GoBackN, 0.0, 1.0),
            point(Mode::GoBackN, 1.0, 0.2),
            point(Mode::SelectiveRepeat, 0.0, 1.0),
            point(Mode::SelectiveRepeat, 1.0, 0.9),
        ];
        assert!(draw(&points, &path).unwrap());
        let svg = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(
            svg.contains("go-back-N") && svg.contains("selective repeat"),
            "{svg:.300}"
        );
    }

    #[test]
    fn percentiles_of_sorted_samples() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 51.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[], 0.99), 0.0);
    }
}
