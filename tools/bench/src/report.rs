//! What a bench run measured: the data written with `--json` (documented in the README's
//! "Benchmarks" section), the comparisons against the baselines, and the printed table.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// The version of the JSON layout below; bumped when a field changes meaning or goes away.
pub(crate) const SCHEMA: u32 = 1;

/// Everything one run measured.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Report {
    pub(crate) schema: u32,
    /// Seconds since the Unix epoch when the run started.
    pub(crate) started_unix: u64,
    pub(crate) config: Config,
    pub(crate) placement: Placement,
    pub(crate) environment: Environment,
    pub(crate) bandwidth: Vec<BwPoint>,
    pub(crate) latency: Vec<LatPoint>,
    pub(crate) msg_rate: Vec<BwPoint>,
    pub(crate) qp_scaling: Vec<BwPoint>,
    pub(crate) baselines: Baselines,
    pub(crate) comparisons: Vec<Comparison>,
    /// Points that failed (the larger sizes of the same test are then skipped).
    pub(crate) failures: Vec<Failure>,
    /// The daemons' non-zero counters at the end of the xroce workloads.
    pub(crate) daemon_counters: DaemonCounters,
    /// Anything the reader should know about this run (skipped parts, anomalies).
    pub(crate) notes: Vec<String>,
    /// Goodput through a router that loses frames (`--tests loss`).
    #[serde(default)]
    pub(crate) loss: Vec<crate::loss::LossPoint>,
    /// The loss test's points over their rounds (`--loss-rounds`): median, smallest and
    /// largest ratio.
    #[serde(default)]
    pub(crate) loss_summary: Vec<crate::loss::LossSummary>,
    /// Incast and all-to-all through a bottleneck (`--tests incast,all_to_all`).
    #[serde(default)]
    pub(crate) congestion: Vec<crate::congestion::CongestionPoint>,
}

/// The options the run used.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Config {
    pub(crate) tests: Vec<String>,
    pub(crate) sizes: Vec<usize>,
    pub(crate) duration_secs: f64,
    pub(crate) iters: Option<u64>,
    pub(crate) lat_iters: usize,
    pub(crate) tx_depth: usize,
    pub(crate) cq_mod: usize,
    pub(crate) rx_depth: usize,
    pub(crate) msg_sizes: Vec<usize>,
    pub(crate) post_list: usize,
    pub(crate) qps: Vec<usize>,
    /// Sizes of the scaling test; the first is the one compared with 1 QP.
    pub(crate) scaling_sizes: Vec<usize>,
    pub(crate) baseline_secs: f64,
    pub(crate) pingpong_count: usize,
    pub(crate) queues: u32,
    pub(crate) mtu: u32,
    /// The path MTU the queue pairs use (the port's active MTU), in bytes.
    pub(crate) path_mtu: usize,
    pub(crate) peer: String,
    /// Whether the xroce workloads ran over IPv6 (`--ipv6`).
    pub(crate) ipv6: bool,
    /// `release`, or `debug` (figures of a debug build mean nothing).
    pub(crate) build: String,
    /// What measured the xroce figures: `bench` (the bench's own workloads over
    /// `verbs_shm::client`, peer `xroced`) or `perftest` (Debian's perftest on both ends,
    /// the xroce side on the drop-in libibverbs, peer `rxe`).
    #[serde(default)]
    pub(crate) measured_by: String,
}

/// A point that failed.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Failure {
    pub(crate) test: String,
    pub(crate) size: usize,
    pub(crate) qps: usize,
    /// What went wrong, with the daemons' anomaly counters at the time.
    pub(crate) error: String,
    /// Sizes of the same test not run because of it.
    pub(crate) skipped_sizes: Vec<usize>,
}

/// Where every thread ran.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Placement {
    pub(crate) cpus: usize,
    /// Cores of daemon a's pollers, one per queue (empty: not pinned).
    pub(crate) daemon_a_cores: Vec<usize>,
    pub(crate) daemon_b_cores: Vec<usize>,
    /// Core of the bench's thread on host a (null: not pinned).
    pub(crate) app_a_core: Option<usize>,
    pub(crate) app_b_core: Option<usize>,
    /// Cores of the two ends of every baseline (raw AF_XDP and kernel sockets).
    pub(crate) baseline_a_core: Option<usize>,
    pub(crate) baseline_b_core: Option<usize>,
    /// How the bench's threads wait: spin this long, then yield the core (latency tests)
    /// or sleep `app_bw_sleep_us` (bandwidth tests; 0: yield).
    pub(crate) app_spin_us: u64,
    pub(crate) app_bw_sleep_us: u64,
    /// A sentence saying all of the above.
    pub(crate) summary: String,
}

/// The machine the run was on.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Environment {
    pub(crate) kernel: String,
    /// The 1, 5 and 15-minute load averages before the run.
    pub(crate) load_before: [f64; 3],
    pub(crate) load_after: [f64; 3],
    /// How the daemons attached: XDP mode, AF_XDP bind mode (from their logs).
    pub(crate) daemon_setup: String,
    pub(crate) total_secs: f64,
    /// The rxe peer (empty with peer `xroced`): its kernel, how it runs, the versions of
    /// its programs.
    #[serde(default)]
    pub(crate) peer_setup: String,
}

/// One bandwidth or message-rate point.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct BwPoint {
    /// `write_bw`, `read_bw`, `send_bw`, `msg_rate` or `qp_scaling`.
    pub(crate) test: String,
    /// `write`, `read` or `send`.
    pub(crate) op: String,
    pub(crate) size: usize,
    pub(crate) qps: usize,
    /// Outstanding work requests per QP.
    pub(crate) depth: usize,
    /// One work request in this many was signaled.
    pub(crate) cq_mod: usize,
    /// Work requests per post call.
    pub(crate) post_list: usize,
    pub(crate) inline: bool,
    /// Messages completed inside the measured window.
    pub(crate) messages: u64,
    pub(crate) secs: f64,
    /// Payload bytes per second (what perftest reports).
    pub(crate) bytes_per_sec: f64,
    pub(crate) gbit_per_sec: f64,
    pub(crate) msgs_per_sec: f64,
    /// Packets per message in the data direction.
    pub(crate) packets_per_msg: usize,
    /// Size of a full data frame (Ethernet header to ICRC, no FCS): what the raw AF_XDP
    /// flood it is compared with sends.
    pub(crate) frame_bytes: usize,
    /// Frame bytes per second in the data direction (headers included), comparable with
    /// the baselines' bytes per second.
    pub(crate) wire_bytes_per_sec: f64,
    /// Data packets per second.
    pub(crate) packets_per_sec: f64,
}

/// One latency point.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct LatPoint {
    /// `write_lat`, `send_lat` or `read_lat`.
    pub(crate) test: String,
    pub(crate) size: usize,
    /// Measured round trips (after the warm-up).
    pub(crate) iterations: usize,
    /// What the `*_us` figures are: `rtt/2` (perftest's one-way figure for WRITE and SEND)
    /// or `rtt` (READ: perftest reports the whole round trip).
    pub(crate) reported: String,
    pub(crate) min_us: f64,
    pub(crate) median_us: f64,
    pub(crate) mean_us: f64,
    pub(crate) p99_us: f64,
    pub(crate) p999_us: f64,
    pub(crate) max_us: f64,
    /// The whole round trip's median, whatever `reported` says.
    pub(crate) rtt_median_us: f64,
    pub(crate) inline: bool,
    pub(crate) frame_bytes: usize,
}

/// A flood of the baselines at one frame size.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct FloodPoint {
    pub(crate) frame_bytes: usize,
    /// Frames per second at the receiver.
    pub(crate) pps: f64,
    /// Frame bytes per second at the receiver (Ethernet header included, no FCS).
    pub(crate) bytes_per_sec: f64,
    pub(crate) gbit_per_sec: f64,
    pub(crate) secs: f64,
    pub(crate) sent: u64,
    pub(crate) received: u64,
}

/// A ping-pong of the baselines.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct PingPoint {
    pub(crate) frame_bytes: usize,
    pub(crate) round_trips: usize,
    pub(crate) min_us: f64,
    pub(crate) median_us: f64,
    pub(crate) p99_us: f64,
    pub(crate) p999_us: f64,
    pub(crate) max_us: f64,
}

/// Kernel TCP over the same veth.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct TcpPoint {
    /// Bytes per `write` call.
    pub(crate) write_bytes: usize,
    pub(crate) secs: f64,
    /// Payload bytes per second at the receiver.
    pub(crate) bytes_per_sec: f64,
    pub(crate) gbit_per_sec: f64,
}

/// The baselines.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Baselines {
    /// Raw AF_XDP (`xsk-baseline flood`), one point per frame size compared.
    pub(crate) xsk_flood: Vec<FloodPoint>,
    /// Raw AF_XDP one-frame ping-pong (`xsk-baseline pingpong`).
    pub(crate) xsk_pingpong: Option<PingPoint>,
    /// Kernel UDP sockets, one point per frame size compared.
    pub(crate) udp_flood: Vec<FloodPoint>,
    pub(crate) udp_pingpong: Option<PingPoint>,
    pub(crate) tcp: Option<TcpPoint>,
    /// A sentence on where and how the baselines ran.
    pub(crate) how: String,
}

/// A target of the issue, reported against, never asserted.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Target {
    /// `>=`, `<=` or `<`.
    pub(crate) op: String,
    pub(crate) value: f64,
}

/// One xroce figure against one baseline figure.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Comparison {
    /// A stable identifier (for example `write_bw_vs_xsk`).
    pub(crate) id: String,
    /// What the xroce figure is.
    pub(crate) figure: String,
    pub(crate) xroce: f64,
    /// The unit of `xroce` and `baseline` (`bytes/s`, `us`, `msgs/s`).
    pub(crate) unit: String,
    /// What it is compared with.
    pub(crate) against: String,
    pub(crate) baseline: f64,
    /// `xroce / baseline`.
    pub(crate) ratio: f64,
    pub(crate) target: Option<Target>,
    /// Whether the ratio meets the target (null without one).
    pub(crate) met: Option<bool>,
}

/// Counters of both daemons (peer `rxe`: `a` is xroced's, `b` the rxe port's, from
/// `rdma statistic`).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct DaemonCounters {
    pub(crate) a: Vec<(String, u64)>,
    pub(crate) b: Vec<(String, u64)>,
}

impl Comparison {
    pub(crate) fn new(
        id: impl Into<String>,
        figure: impl Into<String>,
        xroce: f64,
        unit: &str,
        against: impl Into<String>,
        baseline: f64,
        target: Option<(&str, f64)>,
    ) -> Comparison {
        let ratio = xroce / baseline;
        let target = target.map(|(op, value)| Target {
            op: op.into(),
            value,
        });
        let met = target.as_ref().map(|t| match t.op.as_str() {
            ">=" => ratio >= t.value,
            "<=" => ratio <= t.value,
            _ => ratio < t.value,
        });
        Comparison {
            id: id.into(),
            figure: figure.into(),
            xroce,
            unit: unit.into(),
            against: against.into(),
            baseline,
            ratio,
            target,
            met,
        }
    }
}

/// `2 B`, `64 KiB`, `1 MiB`.
pub(crate) fn size_text(size: usize) -> String {
    if size >= 1 << 20 && size.is_multiple_of(1 << 20) {
        format!("{} MiB", size >> 20)
    } else if size >= 1 << 10 && size.is_multiple_of(1 << 10) {
        format!("{} KiB", size >> 10)
    } else {
        format!("{size} B")
    }
}

/// A value in its unit, readable.
pub(crate) fn value_text(v: f64, unit: &str) -> String {
    match unit {
        "bytes/s" => format!("{:.2} Gbit/s", v * 8.0 / 1e9),
        "msgs/s" => format!("{:.3} Mmsg/s", v / 1e6),
        "pps" => format!("{:.3} Mpps", v / 1e6),
        "us" => format!("{v:.2} µs"),
        other => format!("{v:.3} {other}"),
    }
}

fn op_name(op: &str) -> &str {
    match op {
        "write" => "WRITE",
        "read" => "READ",
        "send" => "SEND",
        other => other,
    }
}

impl Report {
    /// The human-readable report.
    pub(crate) fn table(&self) -> String {
        let mut o = String::new();
        let c = &self.config;
        let _ = writeln!(
            o,
            "xroce bench: veth lab, MTU {}, path MTU {}, {} queue(s), peer {}, {} build",
            c.mtu, c.path_mtu, c.queues, c.peer, c.build
        );
        let perftest = c.measured_by == "perftest";
        let _ = writeln!(o, "placement: {}", self.placement.summary);
        if !self.environment.daemon_setup.is_empty() {
            let _ = writeln!(o, "daemons: {}", self.environment.daemon_setup);
        }
        if !self.environment.peer_setup.is_empty() {
            let _ = writeln!(o, "peer: {}", self.environment.peer_setup);
        }
        if perftest {
            let _ = writeln!(
                o,
                "measured by perftest: the client on xroce (drop-in libibverbs), the server on rxe; \
                 the figures are the client's"
            );
        }
        let _ = writeln!(
            o,
            "machine: {} CPUs, {}, load average {:.2} {:.2} {:.2} before, {:.2} {:.2} {:.2} after",
            self.placement.cpus,
            self.environment.kernel,
            self.environment.load_before[0],
            self.environment.load_before[1],
            self.environment.load_before[2],
            self.environment.load_after[0],
            self.environment.load_after[1],
            self.environment.load_after[2],
        );

        if !self.bandwidth.is_empty() && perftest {
            let _ = writeln!(
                o,
                "\nBandwidth, 1 QP ({} messages per point; tx depth and CQ moderation as perftest applied them, in the JSON): payload Gbit/s and Mmsg/s",
                c.iters.unwrap_or(0)
            );
        } else if !self.bandwidth.is_empty() {
            let _ = writeln!(
                o,
                "\nBandwidth, 1 QP (tx depth {}, one completion every {} work requests, {}): payload Gbit/s and Mmsg/s",
                c.tx_depth,
                c.cq_mod,
                match c.iters {
                    Some(n) => format!("{n} messages per point"),
                    None => format!("{:.1} s per point", c.duration_secs),
                }
            );
        }
        if !self.bandwidth.is_empty() {
            let ops: Vec<&str> = ["write", "read", "send"]
                .into_iter()
                .filter(|op| self.bandwidth.iter().any(|p| p.op == *op))
                .collect();
            let _ = write!(o, "{:>9}", "size");
            for op in &ops {
                let _ = write!(o, " | {:>6} Gbit/s  Mmsg/s", op_name(op));
            }
            let _ = writeln!(o);
            let mut sizes: Vec<usize> = self.bandwidth.iter().map(|p| p.size).collect();
            sizes.sort_unstable();
            sizes.dedup();
            for size in sizes {
                let _ = write!(o, "{:>9}", size_text(size));
                for op in &ops {
                    match self
                        .bandwidth
                        .iter()
                        .find(|p| p.op == *op && p.size == size)
                    {
                        Some(p) => {
                            let _ = write!(
                                o,
                                " | {:>13.3} {:>7.3}",
                                p.gbit_per_sec,
                                p.msgs_per_sec / 1e6
                            );
                        }
                        None => {
                            let _ = write!(o, " | {:>13} {:>7}", "-", "-");
                        }
                    }
                }
                let _ = writeln!(o);
            }
        }

        if !self.congestion.is_empty() {
            let _ = writeln!(
                o,
                "\nCongestion: WRITE 64 KiB through a bottleneck port (utilisation: its frame bytes over its rate; queue in KiB; ping: 64 B WRITE round trip in µs, idle port in brackets)"
            );
            let _ = writeln!(
                o,
                "{:>10} {:>3} {:>3} {:>9} | {:>6} {:>5} {:>5} | {:>7} {:>7} | {:>6} {:>6} {:>6} | {:>6} {:>6} {:>5} | {:>15} {:>15}",
                "test",
                "n",
                "cc",
                "switch",
                "Gbit/s",
                "util",
                "Jain",
                "drops",
                "marks",
                "q mean",
                "q p99",
                "q max",
                "CNPs",
                "RTOs",
                "NAKs",
                "ping p50",
                "ping p99"
            );
            for p in &self.congestion {
                if let Some(e) = &p.error {
                    let _ = writeln!(
                        o,
                        "{:>10} {:>3} {:>3} {:>9} | failed: {e}",
                        p.test, p.senders, p.cc, p.switch
                    );
                    continue;
                }
                let _ = writeln!(
                    o,
                    "{:>10} {:>3} {:>3} {:>9} | {:>6.3} {:>5.2} {:>5.2} | {:>7} {:>7} | {:>6.0} {:>6.0} {:>6.0} | {:>6} {:>6} {:>5} | {:>6.0} ({:>6.0}) {:>6.0} ({:>6.0})",
                    p.test,
                    p.senders,
                    p.cc,
                    p.switch,
                    p.goodput_gbit,
                    p.utilisation,
                    p.jain,
                    p.drops,
                    p.marks,
                    p.queue_mean_bytes / 1024.0,
                    p.queue_p99_bytes as f64 / 1024.0,
                    p.queue_max_bytes as f64 / 1024.0,
                    p.cnps_handled,
                    p.retransmit_timeouts,
                    p.seq_naks,
                    p.ping_p50_us,
                    p.idle_ping_p50_us,
                    p.ping_p99_us,
                    p.idle_ping_p99_us,
                );
                if let Some(two) = p.two_hosts_gbit {
                    let _ = writeln!(
                        o,
                        "{:>10} aggregate {:.3} Gbit/s against one sender's {two:.3} through one port",
                        "", p.goodput_gbit
                    );
                }
            }
        }

        if !self.loss.is_empty() {
            let l = &self.loss[0];
            let rounds = self.loss.iter().map(|p| p.round).max().unwrap_or(0);
            let loss_key = |p: &crate::loss::LossPoint| loss_key(p, rounds > 1);
            let _ = writeln!(
                o,
                "\nLoss: WRITE {} on 1 QP (depth {}) through a router losing frames{}; goodput as a fraction of the loss-free point's",
                size_text(l.size),
                l.depth,
                if l.bottleneck_mbit > 0 {
                    format!(
                        ", its egress {} Mbit/s each way (frames its full queue dropped: the queue column)",
                        l.bottleneck_mbit
                    )
                } else {
                    String::new()
                }
            );
            let _ = writeln!(
                o,
                "{} | {:>7} {:>6} | {:>8} {:>7} {:>10} {:>8} {:>6} | {:>9} {:>9}",
                loss_head(rounds > 1),
                "Gbit/s",
                "ratio",
                "dropped",
                "queue",
                "resent",
                "timeouts",
                "NAKs",
                "p50 µs",
                "p99 µs"
            );
            for p in &self.loss {
                if let Some(e) = &p.error {
                    let _ = writeln!(o, "{} | failed: {e}", loss_key(p));
                    continue;
                }
                let _ = writeln!(
                    o,
                    "{} | {:>7.3} {:>6.3} | {:>8} {:>7} {:>10} {:>8} {:>6} | {:>9.0} {:>9.0}",
                    loss_key(p),
                    p.gbit_per_sec,
                    p.ratio,
                    p.frames_dropped,
                    p.queue_dropped,
                    p.retransmitted_packets,
                    p.retransmit_timeouts,
                    p.seq_naks,
                    p.completion_p50_us,
                    p.completion_p99_us
                );
            }
            let _ = writeln!(
                o,
                "\nLoss recovery at host a (the transport's counters): resends started at once, on the measured timer (of those: tested first by resending the oldest alone, found needless), of a persisting gap; round trips measured; packets held by the window and by pacing; selective repeat: NAKs saying what b held, holes resent, packets held back because the PSNs beyond a hole filled b's store, packets b held ahead of a gap, and those that found b's store full; congestion control: losses taken for congestion and for random loss"
            );
            let _ = writeln!(
                o,
                "{} | {:>8} {:>8} {:>6} {:>8} {:>6} | {:>8} | {:>10} {:>10} | {:>8} {:>8} {:>8} {:>8} {:>6} | {:>8} {:>8}",
                loss_head(rounds > 1),
                "prompt",
                "timer",
                "tested",
                "needless",
                "gap",
                "RTTs",
                "window",
                "pacing",
                "SR NAKs",
                "holes",
                "store",
                "b held",
                "full",
                "congest",
                "random"
            );
            for p in self.loss.iter().filter(|p| p.error.is_none()) {
                let r = &p.recovery;
                let _ = writeln!(
                    o,
                    "{} | {:>8} {:>8} {:>6} {:>8} {:>6} | {:>8} | {:>10} {:>10} | {:>8} {:>8} {:>8} {:>8} {:>6} | {:>8} {:>8}",
                    loss_key(p),
                    r.prompt_retries,
                    r.adaptive_timeouts,
                    r.frto_probes,
                    r.spurious_timeouts,
                    r.gap_retries,
                    r.rtt_samples,
                    r.held_by_window,
                    r.held_by_pacing,
                    r.sr_naks_received,
                    r.sr_packets_resent,
                    r.sr_held_by_store,
                    r.sr_packets_held,
                    r.sr_held_dropped_full,
                    r.cc_loss_events,
                    r.cc_losses_tolerated
                );
            }
            let _ = writeln!(
                o,
                "\nPing-pong through the same loss after each point's stream ({} round trips of a 64 B WRITE, one at a time, on a queue pair of its own), round trip in µs",
                crate::loss::PING_ITERS
            );
            let _ = writeln!(
                o,
                "{} | {:>9} {:>9} {:>9} {:>9}",
                loss_head(rounds > 1),
                "p50",
                "p99",
                "p99.9",
                "max"
            );
            for p in self.loss.iter() {
                let Some(ping) = &p.ping else { continue };
                if let Some(e) = &ping.error {
                    let _ = writeln!(o, "{} | failed: {e}", loss_key(p));
                    continue;
                }
                let _ = writeln!(
                    o,
                    "{} | {:>9.0} {:>9.0} {:>9.0} {:>9.0}",
                    loss_key(p),
                    ping.rtt_p50_us,
                    ping.rtt_p99_us,
                    ping.rtt_p999_us,
                    ping.rtt_max_us
                );
            }
            if rounds > 1 {
                let _ = writeln!(
                    o,
                    "\nLoss over {rounds} rounds: each round's goodput as a fraction of that round's loss-free point, median (smallest, largest); a failed round counts 0"
                );
                let _ = writeln!(
                    o,
                    "{} | {:>6} {:>6} | {:>6} {:>6} {:>6} | {:>12}",
                    loss_head(false),
                    "rounds",
                    "failed",
                    "median",
                    "min",
                    "max",
                    "Gbit/s med."
                );
                for s in crate::loss::summarize(&self.loss) {
                    let _ = writeln!(
                        o,
                        "{:>7} {:>6} {:>7} {:>16} | {:>6} {:>6} | {:>6.3} {:>6.3} {:>6.3} | {:>12.3}",
                        s.loss_percent,
                        s.loss_burst,
                        s.reorder_percent,
                        s.mode,
                        s.rounds,
                        s.failed,
                        s.ratio_median,
                        s.ratio_min,
                        s.ratio_max,
                        s.gbit_median
                    );
                }
            }
            let targets = crate::loss::targets(&self.loss);
            if !targets.is_empty() {
                let _ = writeln!(o, "\nLoss targets (reported, never asserted)");
                for (mode, what, figure, met) in targets {
                    let _ = writeln!(
                        o,
                        "{mode:>16}  {what:<58} {figure:>8.3}  {}",
                        if met { "met" } else { "NOT met" }
                    );
                }
            }
        }

        if !self.latency.is_empty() {
            let _ = writeln!(
                o,
                "\nLatency, µs (WRITE and SEND: RTT/2, as perftest's ib_write_lat/ib_send_lat report; READ: the whole round trip, as ib_read_lat{})",
                if perftest {
                    "; median is perftest's t_typical"
                } else {
                    ""
                }
            );
            let _ = writeln!(
                o,
                "{:>6} {:>9} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}  {:>10}",
                "test", "size", "iters", "min", "median", "p99", "p99.9", "max", "RTT median"
            );
            for p in &self.latency {
                let _ = writeln!(
                    o,
                    "{:>6} {:>9} {:>7} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2}  {:>10.2}",
                    op_name(p.test.trim_end_matches("_lat")),
                    size_text(p.size),
                    p.iterations,
                    p.min_us,
                    p.median_us,
                    p.p99_us,
                    p.p999_us,
                    p.max_us,
                    p.rtt_median_us
                );
            }
        }

        if !self.msg_rate.is_empty() {
            let _ = writeln!(
                o,
                "\nMessage rate, WRITE, 1 QP (tx depth {}, {} work requests per post, inline)",
                c.tx_depth, c.post_list
            );
            for p in &self.msg_rate {
                let _ = writeln!(
                    o,
                    "{:>9}: {:.3} Mmsg/s ({} B frames, {:.2} Gbit/s on the wire)",
                    size_text(p.size),
                    p.msgs_per_sec / 1e6,
                    p.frame_bytes,
                    p.wire_bytes_per_sec * 8.0 / 1e9
                );
            }
        }

        if !self.qp_scaling.is_empty() {
            let _ = writeln!(
                o,
                "\nQP scaling, WRITE: the QPs share the link, depth per QP = max(1, tx depth / QPs)"
            );
            let _ = writeln!(
                o,
                "{:>9} {:>6} {:>6} {:>12} {:>9} {:>9}",
                "size", "QPs", "depth", "Gbit/s", "Mmsg/s", "vs 1 QP"
            );
            for p in &self.qp_scaling {
                let one = self
                    .qp_scaling
                    .iter()
                    .find(|o| o.qps == 1 && o.size == p.size)
                    .map(|o| o.msgs_per_sec);
                let _ = writeln!(
                    o,
                    "{:>9} {:>6} {:>6} {:>12.3} {:>9.3} {:>9}",
                    size_text(p.size),
                    p.qps,
                    p.depth,
                    p.gbit_per_sec,
                    p.msgs_per_sec / 1e6,
                    one.map_or("-".into(), |one| format!("{:.3}", p.msgs_per_sec / one))
                );
            }
        }

        let b = &self.baselines;
        if !(b.xsk_flood.is_empty()
            && b.udp_flood.is_empty()
            && b.xsk_pingpong.is_none()
            && b.udp_pingpong.is_none()
            && b.tcp.is_none())
        {
            let _ = writeln!(o, "\nBaselines ({})", b.how);
            for (name, points) in [("raw AF_XDP", &b.xsk_flood), ("kernel UDP", &b.udp_flood)] {
                for p in points {
                    let _ = writeln!(
                        o,
                        "{name:>11} flood {:>5} B frames: {:.3} Mpps, {:.2} Gbit/s (sent {}, received {})",
                        p.frame_bytes,
                        p.pps / 1e6,
                        p.gbit_per_sec,
                        p.sent,
                        p.received
                    );
                }
            }
            for (name, p) in [
                ("raw AF_XDP", &b.xsk_pingpong),
                ("kernel UDP", &b.udp_pingpong),
            ] {
                if let Some(p) = p {
                    let _ = writeln!(
                        o,
                        "{name:>11} ping-pong {:>3} B frames: RTT min {:.2} µs, median {:.2} µs, p99 {:.2} µs, p99.9 {:.2} µs ({} round trips)",
                        p.frame_bytes, p.min_us, p.median_us, p.p99_us, p.p999_us, p.round_trips
                    );
                }
            }
            if let Some(t) = &b.tcp {
                let _ = writeln!(
                    o,
                    "{:>11} stream, {} B writes: {:.2} Gbit/s",
                    "kernel TCP", t.write_bytes, t.gbit_per_sec
                );
            }
        }

        if !self.comparisons.is_empty() {
            let _ = writeln!(
                o,
                "\nxroce against the baselines (ratio = xroce / baseline; targets are reported, never asserted)"
            );
            let _ = writeln!(
                o,
                "{:<38} {:>15}  {:<36} {:>15} {:>8}  target",
                "figure", "xroce", "against", "baseline", "ratio"
            );
            for cmp in &self.comparisons {
                let target = cmp
                    .target
                    .as_ref()
                    .map_or(String::new(), |t| format!("{} {}", t.op, t.value));
                let met = match cmp.met {
                    Some(true) => "met",
                    Some(false) => "MISSED",
                    None => "",
                };
                let unit_b = if cmp.unit == "msgs/s" {
                    "pps"
                } else {
                    &cmp.unit
                };
                let _ = writeln!(
                    o,
                    "{:<38} {:>15}  {:<36} {:>15} {:>8.3}  {:<8} {}",
                    cmp.figure,
                    value_text(cmp.xroce, &cmp.unit),
                    cmp.against,
                    value_text(cmp.baseline, unit_b),
                    cmp.ratio,
                    target,
                    met
                );
            }
        }
        if !self.failures.is_empty() {
            let _ = writeln!(o, "\nFAILED points");
            for f in &self.failures {
                let skipped = if f.skipped_sizes.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (not run: {})",
                        f.skipped_sizes
                            .iter()
                            .map(|s| size_text(*s))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                let _ = writeln!(
                    o,
                    "- {} {}, {} QP(s){skipped}: {}",
                    f.test,
                    size_text(f.size),
                    f.qps,
                    f.error
                );
            }
        }
        if !self.notes.is_empty() {
            let _ = writeln!(o, "\nNotes:");
            for n in &self.notes {
                let _ = writeln!(o, "- {n}");
            }
        }
        o
    }
}

/// The columns that name a loss point in the loss tables: loss, burst, reordering, mode,
/// and its round when there were several.
fn loss_key(p: &crate::loss::LossPoint, rounds: bool) -> String {
    let key = format!(
        "{:>7} {:>6} {:>7} {:>16}",
        p.loss_percent, p.loss_burst, p.reorder_percent, p.mode
    );
    if rounds {
        format!("{key} {:>5}", p.round)
    } else {
        key
    }
}

/// The heading of [`loss_key`]'s columns.
fn loss_head(rounds: bool) -> String {
    let head = format!(
        "{:>7} {:>6} {:>7} {:>16}",
        "loss %", "burst", "reord %", "mode"
    );
    if rounds {
        format!("{head} {:>5}", "round")
    } else {
        head
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_judge_their_targets() {
        let c = Comparison::new("x", "f", 90.0, "bytes/s", "b", 100.0, Some((">=", 0.85)));
        assert_eq!(c.met, Some(true));
        assert!((c.ratio - 0.9).abs() < 1e-12);
        let c = Comparison::new("x", "f", 4.0, "us", "b", 2.0, Some(("<=", 1.5)));
        assert_eq!(c.met, Some(false));
        let c = Comparison::new("x", "f", 4.0, "us", "b", 8.0, Some(("<", 1.0)));
        assert_eq!(c.met, Some(true));
        let c = Comparison::new("x", "f", 4.0, "us", "b", 8.0, None);
        assert_eq!(c.met, None);
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(size_text(2), "2 B");
        assert_eq!(size_text(1536), "1536 B");
        assert_eq!(size_text(65536), "64 KiB");
        assert_eq!(size_text(1 << 20), "1 MiB");
    }
}
