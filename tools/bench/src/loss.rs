//! `--tests loss`: goodput on a path that loses frames, as a fraction of the same path's
//! loss-free goodput.
//!
//! A lab of its own, with a router between the hosts, where the impairment router
//! (`xroce-impair`, release build) forwards the RoCEv2 frames and loses them: at random
//! (each rate of `--loss-rates`), and in bursts (`--loss-burst` frames on average, at the
//! first non-zero rate of the list, or 1 %). At every point host a WRITEs 64 KiB messages
//! to host b on one QP at the bandwidth tests' depth for `--duration`, every message timed
//! from its post to its completion. A point reports the goodput, its ratio to the
//! loss-free point of the same run, the frames the router dropped, the request packets
//! host a sent again (what it sent less what the messages needed), the retransmission
//! timeouts and NAKs it met, and the median and 99th percentile of a message's completion
//! time. A point whose QP ends in error (its retry budget spent) says so and the run goes
//! on with the next on a new QP.
//!
//! Recovery is go-back-N, the standard's (the mode column); the figures of another mode
//! will sit beside it in the same table.

use std::time::Duration;

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};
use xroce_impair::Impairment;
use xroce_impair::process::ImpairProcess;
use xroce_lab::daemons::TwoHosts;
use xroce_lab::{Family, LabConfig};

use crate::poll;
use crate::progress::{Expect, Progress};
use crate::workload::{BwSpec, Op, Timing, Xroce, frames};

/// The message size of every point.
pub(crate) const SIZE: usize = 64 << 10;

/// One point of the loss test.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct LossPoint {
    /// Percent of frames the router lost (long-run rate).
    pub(crate) loss_percent: f64,
    /// Mean length of a run of lost frames (1: independent losses).
    pub(crate) loss_burst: f64,
    /// Loss recovery: `go-back-N`.
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
}

/// What the loss test runs.
#[derive(Clone, Debug)]
pub(crate) struct LossPlan {
    /// Loss rates, in percent, each at independent losses.
    pub(crate) rates: Vec<f64>,
    /// The mean burst length of the bursty point (none: no bursty point).
    pub(crate) burst: Option<f64>,
    pub(crate) depth: usize,
    pub(crate) timing: Timing,
    pub(crate) seed: u64,
    /// The hosts' addresses the queue pair uses (through the router either way).
    pub(crate) family: Family,
}

impl LossPlan {
    /// The points, in order: (loss percent, burst length).
    pub(crate) fn points(&self) -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> = self.rates.iter().map(|&r| (r, 1.0)).collect();
        if let Some(b) = self.burst {
            let rate = self.rates.iter().copied().find(|&r| r > 0.0).unwrap_or(1.0);
            v.push((rate, b));
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
    let mut loss_free = None;
    for (loss_percent, loss_burst) in plan.points() {
        let what = if loss_burst > 1.0 {
            format!("loss {loss_percent} % in bursts of {loss_burst}")
        } else {
            format!("loss {loss_percent} %")
        };
        progress.step(what.clone(), Expect::Secs(plan.timing.expected_secs()));
        let impairment = Impairment {
            loss: loss_percent / 100.0,
            loss_burst,
            seed: plan.seed,
            ..Impairment::default()
        };
        let impair = ImpairProcess::start(&hosts.lab, &impairment)
            .with_context(|| format!("starting the impairment router ({what})"))?;
        let before = x.a.ctx.stats()?;
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
        let counters = impair.stop().context("stopping the impairment router")?;
        let after = x.a.ctx.stats()?;
        let delta = |name: &str| counter(&after, name).saturating_sub(counter(&before, name));
        let mut p = LossPoint {
            loss_percent,
            loss_burst,
            mode: "go-back-N".into(),
            size: SIZE,
            depth: plan.depth,
            frames_dropped: counters.a_to_b.dropped + counters.b_to_a.dropped,
            retransmit_timeouts: delta("retransmit_timeouts"),
            seq_naks: delta("rcvd_seq_err"),
            ..LossPoint::default()
        };
        match measured {
            Ok(m) => {
                let needed = m.posted * packets(SIZE, x.path_mtu);
                p.retransmitted_packets = delta("sent_pkts").saturating_sub(needed);
                p.retransmitted_bytes = p.retransmitted_packets * x.path_mtu as u64;
                p.messages = m.point.messages;
                p.secs = m.point.secs;
                p.gbit_per_sec = m.point.gbit_per_sec;
                let mut c = m.completion_us;
                c.sort_by(f64::total_cmp);
                p.completion_p50_us = percentile(&c, 0.5);
                p.completion_p99_us = percentile(&c, 0.99);
                if loss_percent == 0.0 && loss_free.is_none() {
                    loss_free = Some(p.gbit_per_sec);
                }
                p.ratio = loss_free.map_or(0.0, |f| if f > 0.0 { p.gbit_per_sec / f } else { 0.0 });
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
    Ok(points)
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
    fn points_put_the_bursty_one_last_at_the_first_lossy_rate() {
        let plan = LossPlan {
            rates: vec![0.0, 0.1, 1.0],
            burst: Some(8.0),
            depth: 128,
            timing: Timing {
                duration: Duration::from_secs(1),
                iters: None,
            },
            seed: 1,
            family: Family::Ipv4,
        };
        assert_eq!(
            plan.points(),
            vec![(0.0, 1.0), (0.1, 1.0), (1.0, 1.0), (0.1, 8.0)]
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
