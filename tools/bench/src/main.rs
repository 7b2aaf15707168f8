//! `xroce-bench` (run as `cargo xtask bench`): the figures a user can trust.
//!
//! Builds a release `xroced`, makes a two-namespace veth lab with a daemon on each host,
//! and runs perftest-like workloads between them: WRITE, READ and SEND bandwidth across
//! message sizes, WRITE, SEND and READ ping-pong latency, small-WRITE message rate and
//! aggregate bandwidth with many QPs. In the same invocation, on the same cores, it
//! measures the baselines: raw AF_XDP (`xsk-baseline`, the ceiling), kernel UDP sockets
//! and a kernel TCP stream over the same veth. It prints a table with xroce's figures and
//! their ratio to each baseline (the project's targets are reported, never asserted),
//! writes the same data as JSON (`--json`, fields documented in the README's "Benchmarks"
//! section) and draws bandwidth and latency against message size into an SVG file.
//!
//! With `--peer rxe` the other end is Linux Soft-RoCE in the interop harness's VM instead,
//! and Debian's perftest measures on both ends ([`rxe`]).
//!
//! Everything it starts it stops, on every exit path: the daemons and the lab are dropped
//! on errors, and Ctrl-C tears the lab down through the lab crate's signal handling.

mod congestion;
mod kernel;
mod loss;
mod plot;
mod poll;
mod progress;
mod report;
mod rxe;
mod workload;
mod xsk;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail, ensure};
use xroce_artifacts::{Profile, Target};
use xroce_lab::daemons::TwoHosts;
use xroce_lab::{Family, LabConfig, Side};

use progress::{Expect, Progress};
use report::{BwPoint, Comparison, FloodPoint, Report, size_text};
use workload::{BwSpec, LatSpec, Op, Timing, Xroce, frames_over};

/// The xroce workloads, in the order they run.
const XROCE_TESTS: [&str; 8] = [
    "write_bw",
    "read_bw",
    "send_bw",
    "write_lat",
    "send_lat",
    "read_lat",
    "msg_rate",
    "qp_scaling",
];
/// The baselines.
const BASELINE_TESTS: [&str; 3] = ["xsk", "udp", "tcp"];
/// Tests that run only when named (a lab of their own, minutes each).
const OTHER_TESTS: [&str; 3] = ["loss", "incast", "all_to_all"];

/// Who the xroce workloads run against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Peer {
    /// A second xroced in the other namespace of the lab.
    Xroced,
    /// Linux Soft-RoCE in the interop harness's VM.
    Rxe,
}

#[derive(Debug, clap::Parser)]
#[command(
    name = "cargo xtask bench",
    about = "Measure xroce (bandwidth, latency, message rate, QP scaling) against raw AF_XDP and \
             kernel UDP/TCP in a two-namespace lab"
)]
pub(crate) struct Args {
    /// Tests to run, comma-separated: write_bw, read_bw, send_bw, write_lat, send_lat,
    /// read_lat, msg_rate, qp_scaling (over xroce); xsk, udp, tcp (baselines); or the
    /// groups all, xroce, baselines. Only when named: loss (goodput through a router that
    /// loses frames); incast and all_to_all (congestion in a star of --hosts hosts behind
    /// one bottleneck, congestion control off and on).
    #[arg(long, value_delimiter = ',', default_value = "all")]
    tests: Vec<String>,
    /// Message sizes of the bandwidth and latency tests: a comma-separated list (suffixes
    /// K and M) or a range of powers of two such as 2..1M [default: 2..1M; with --peer rxe
    /// 2,1K,4K,64K].
    #[arg(long)]
    sizes: Option<String>,
    /// Seconds measured per bandwidth point (after a warm-up of a fifth of it, at most
    /// 0.5 s); also the longest a latency point runs.
    #[arg(long, default_value_t = 1.0)]
    duration: f64,
    /// Messages measured per bandwidth point, instead of --duration (with --peer rxe:
    /// perftest's -n, default 1000).
    #[arg(long)]
    iters: Option<u64>,
    /// Round trips measured per latency point (a tenth more warm up first) [default: 10000;
    /// with --peer rxe perftest's -n, 1000].
    #[arg(long)]
    lat_iters: Option<usize>,
    /// Outstanding work requests per QP in the bandwidth tests (perftest's --tx-depth).
    #[arg(long, default_value_t = 128)]
    tx_depth: usize,
    /// One send work request in this many is signaled (perftest's --cq-mod).
    #[arg(long, default_value_t = 100)]
    cq_mod: usize,
    /// Receives kept posted in the SEND bandwidth test (perftest's --rx-depth).
    #[arg(long, default_value_t = 512)]
    rx_depth: usize,
    /// Message sizes of the message-rate test (WRITE, inline).
    #[arg(long, default_value = "2,64")]
    msg_sizes: String,
    /// Work requests per post call in the message-rate test (perftest's --post_list).
    #[arg(long, default_value_t = 16)]
    post_list: usize,
    /// QP counts of the scaling test.
    #[arg(long, value_delimiter = ',', default_value = "1,16,128,1024")]
    qps: Vec<usize>,
    /// Message sizes of the scaling test (the first is the one compared with 1 QP).
    #[arg(long, default_value = "64K,64")]
    scaling_sizes: String,
    /// Seconds of each baseline flood and of the TCP stream.
    #[arg(long, default_value_t = 2.0)]
    baseline_secs: f64,
    /// Round trips of each baseline ping-pong.
    #[arg(long, default_value_t = 20_000)]
    pingpong_count: usize,
    /// Cores of the daemons' pollers: daemon a's (one per queue), then daemon b's, reused
    /// in turn if the list is short; `none` leaves them unpinned. Each baseline's two ends
    /// run on the first core of daemon a and of daemon b.
    #[arg(long, default_value = "0,1")]
    cores: String,
    /// Cores of the bench's own threads on host a and host b (`none`: unpinned). `auto`:
    /// when the machine has fewer CPUs than pollers plus the bench's two threads, each host's
    /// thread runs on the other daemon's core (so the thread waiting for a completion never
    /// shares a core with the poller that must produce it); otherwise unpinned.
    #[arg(long, default_value = "auto")]
    app_cores: String,
    /// How long the bench's threads spin on an empty queue before yielding (latency
    /// tests) or sleeping (bandwidth tests), in µs.
    #[arg(long, default_value_t = 2)]
    spin_us: u64,
    /// How long an idle thread of the bandwidth tests sleeps after spinning, in µs (0:
    /// it yields instead, like the latency tests' threads).
    #[arg(long, default_value_t = 20)]
    bw_sleep_us: u64,
    /// Receive queues of each veth interface (one poller each in each daemon).
    #[arg(long, default_value_t = 1)]
    queues: u32,
    /// MTU of the lab's veth interfaces (the path MTU follows).
    #[arg(long, default_value_t = 1500)]
    mtu: u32,
    /// The other end of the xroce workloads: a second xroced, or the rxe peer of the
    /// interop harness (Debian's perftest on both ends, the xroce side on the drop-in
    /// libibverbs; no baselines).
    #[arg(long, value_enum, default_value_t = Peer::Xroced)]
    peer: Peer,
    /// With --peer rxe: this host's own rxe in a namespace (`local`), Debian's kernel in a
    /// VM (`vm`), or the first when this kernel has rdma_rxe (`auto`).
    #[arg(long, value_enum, default_value_t = xroce_interop::PeerKind::Auto)]
    peer_kind: xroce_interop::PeerKind,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Where to draw the SVG plot (default: target/xroce/bench.svg).
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Do not draw the plot.
    #[arg(long)]
    no_svg: bool,
    /// Loss rates of the loss test, in percent.
    #[arg(long, value_delimiter = ',', default_value = "0,0.1,1,2,5")]
    loss_rates: Vec<f64>,
    /// Mean length of a burst of lost frames at the loss test's bursty point (at the
    /// first non-zero rate; a pause of the path of 500 µs also ends a burst); 0: no bursty
    /// point.
    #[arg(long, default_value_t = 8.0)]
    loss_burst: f64,
    /// Percent of frames the loss test's last point reorders (each overtaken by the next
    /// three) without losing any; 0: no such point.
    #[arg(long, default_value_t = 1.0)]
    loss_reorder: f64,
    /// The loss test's recovery modes, each with daemons of its own.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "go-back-n,selective-repeat"
    )]
    loss_modes: Vec<loss::Mode>,
    /// Seed of the loss test's impairment router.
    #[arg(long, default_value_t = 1)]
    loss_seed: u64,
    /// Times the loss test runs its whole list of points, in turn (each round's ratios to
    /// its own loss-free point; the report gives each point's median, smallest and
    /// largest): on a host whose throughput varies from run to run one round says little.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    loss_rounds: u32,
    /// The loss test's router sends each way at most this many Mbit/s of frames, through a
    /// queue of --loss-queue-kib with tail drop (0: no bottleneck; the path is then as fast
    /// as the hosts' cores)
    #[arg(long, default_value_t = 0)]
    loss_bottleneck_mbit: u64,
    /// The queue of the loss test's bottleneck, KiB (at least 9)
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u64).range(9..=65536))]
    loss_queue_kib: u64,
    /// Hosts of the congestion tests' star (at least 5).
    #[arg(long, default_value_t = 5)]
    hosts: usize,
    /// Senders of the incast points (into host 0).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    fan_in: Vec<usize>,
    /// The bottleneck port's rate, in Mbit/s of frame bytes.
    #[arg(long, default_value_t = 500)]
    bottleneck_mbit: u64,
    /// The bottleneck port's queue, in KiB (tail drop beyond).
    #[arg(long, default_value_t = 128)]
    queue_kib: usize,
    /// ECN marking from this many KiB queued (RED-like, up to --ecn-kmax-kib).
    #[arg(long, default_value_t = 16)]
    ecn_kmin_kib: usize,
    /// Every ECN-capable frame is marked from this many KiB queued.
    #[arg(long, default_value_t = 64)]
    ecn_kmax_kib: usize,
    /// The marking chance just below --ecn-kmax-kib, in percent.
    #[arg(long, default_value_t = 20)]
    ecn_pmax: u32,
    /// WRITEs of 64 KiB each sender keeps outstanding in the congestion tests.
    #[arg(long, default_value_t = 16)]
    incast_depth: usize,
    /// Seconds measured per congestion point (after half a second of warm-up).
    #[arg(long, default_value_t = 3.0)]
    incast_secs: f64,
    /// Extra xroced arguments when congestion control is on (for example
    /// `--dcqcn-timers=nvidia`), comma-separated.
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    cc_args: Vec<String>,
    /// Extra xroced arguments for the two-host lab of the xroce workloads (for example
    /// `--cc=off` to measure them without congestion control), comma-separated.
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    daemon_args: Vec<String>,
    /// Use debug builds of the daemon and xsk-baseline (checks the command itself
    /// quickly; the figures mean nothing).
    #[arg(long, hide = true)]
    debug_build: bool,
    /// RoCEv2 over IPv6: the xroce workloads run between the hosts' global IPv6 addresses
    /// (GID 1) instead of their IPv4 ones; frame sizes count the IPv6 header, and the
    /// baselines (raw AF_XDP, kernel UDP and TCP over IPv4) run at the same frame sizes.
    /// Not with --peer rxe.
    #[arg(long)]
    ipv6: bool,
}

/// What to run, validated.
#[derive(Debug)]
struct Plan {
    tests: Vec<&'static str>,
    /// Tests of the groups asked for that do not run against this peer.
    not_run: Vec<&'static str>,
    sizes: Vec<usize>,
    lat_iters: usize,
    msg_sizes: Vec<usize>,
    scaling_sizes: Vec<usize>,
    qps: Vec<usize>,
    daemon_cores: [Vec<usize>; 2],
    app_cores: [Option<usize>; 2],
    timing: Timing,
    /// Points of the loss test (its lab's start is one more step, and each point's
    /// ping-pong one more).
    loss_points: usize,
    /// The loss test's modes (a lab each).
    loss_modes: usize,
    /// Steps of the congestion tests.
    congestion_steps: usize,
}

impl Plan {
    fn has(&self, test: &str) -> bool {
        self.tests.contains(&test)
    }

    fn any_xroce(&self) -> bool {
        XROCE_TESTS.iter().any(|t| self.has(t))
    }

    fn baseline_core(&self, side: Side) -> Option<usize> {
        let i = match side {
            Side::A => 0,
            Side::B => 1,
        };
        self.daemon_cores[i].first().copied()
    }
}

/// Parses `64`, `4K`, `1M`.
fn parse_size(text: &str) -> Result<usize> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => t.split_at(i),
        None => (t, ""),
    };
    let n: usize = digits
        .parse()
        .with_context(|| format!("{text:?} is not a size (examples: 64, 4K, 1M)"))?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        other => bail!("{other:?} in {text:?} is not a size unit (K or M)"),
    };
    Ok(n << shift)
}

/// Parses a list of sizes, or a range `A..B` of the powers of two between them.
fn parse_sizes(text: &str) -> Result<Vec<usize>> {
    let mut sizes = Vec::new();
    for part in text.split(',').filter(|p| !p.trim().is_empty()) {
        if let Some((lo, hi)) = part.split_once("..") {
            let (lo, hi) = (parse_size(lo)?, parse_size(hi)?);
            ensure!(lo >= 1 && lo <= hi, "{part:?}: the range is empty");
            let mut s = lo.next_power_of_two();
            while s <= hi {
                sizes.push(s);
                s *= 2;
            }
        } else {
            sizes.push(parse_size(part)?);
        }
    }
    for &s in &sizes {
        ensure!(
            (2..=workload::MAX_SIZE).contains(&s),
            "message size {s} is outside 2..={} bytes",
            workload::MAX_SIZE
        );
    }
    sizes.sort_unstable();
    sizes.dedup();
    ensure!(!sizes.is_empty(), "no message size in {text:?}");
    Ok(sizes)
}

fn parse_cores(text: &str) -> Result<Option<Vec<usize>>> {
    if text.trim() == "none" {
        return Ok(None);
    }
    let cores: Vec<usize> = text
        .split(',')
        .map(|c| {
            c.trim()
                .parse()
                .with_context(|| format!("{c:?} is not a core number"))
        })
        .collect::<Result<_>>()?;
    let cpus = core_affinity::get_core_ids().map_or(1, |ids| ids.len());
    for &c in &cores {
        ensure!(c < cpus, "core {c} does not exist: this machine has {cpus}");
    }
    ensure!(!cores.is_empty(), "no core in {text:?}");
    Ok(Some(cores))
}

fn plan(args: &Args) -> Result<Plan> {
    let rxe = args.peer == Peer::Rxe;
    let mut tests = Vec::new();
    let mut not_run = Vec::new();
    for t in &args.tests {
        let (group, named): (Vec<&'static str>, bool) = match t.trim() {
            "all" => (
                XROCE_TESTS.iter().chain(&BASELINE_TESTS).copied().collect(),
                false,
            ),
            "xroce" => (XROCE_TESTS.to_vec(), false),
            "baselines" => (BASELINE_TESTS.to_vec(), false),
            name => match XROCE_TESTS
                .iter()
                .chain(&BASELINE_TESTS)
                .chain(&OTHER_TESTS)
                .find(|k| **k == name)
            {
                Some(k) => (vec![*k], true),
                None => bail!(
                    "unknown test {name:?}: expected {}, {}, {}, or all, xroce, baselines",
                    XROCE_TESTS.join(", "),
                    BASELINE_TESTS.join(", "),
                    OTHER_TESTS.join(", ")
                ),
            },
        };
        for test in group {
            if !rxe || rxe::TESTS.contains(&test) {
                tests.push(test);
            } else if named {
                bail!(
                    "{test} does not run against --peer rxe: there perftest measures {}",
                    rxe::TESTS.join(", ")
                );
            } else {
                not_run.push(test);
            }
        }
    }
    // In the documented order, once each.
    let tests: Vec<&'static str> = XROCE_TESTS
        .iter()
        .chain(&BASELINE_TESTS)
        .chain(&OTHER_TESTS)
        .copied()
        .filter(|t| tests.contains(t))
        .collect();
    let not_run: Vec<&'static str> = XROCE_TESTS
        .iter()
        .chain(&BASELINE_TESTS)
        .copied()
        .filter(|t| not_run.contains(t))
        .collect();
    ensure!(!tests.is_empty(), "no test to run against this peer");
    let lat_iters = args
        .lat_iters
        .unwrap_or(if rxe { rxe::DEFAULT_LAT_ITERS } else { 10_000 });
    let iters = if rxe {
        Some(args.iters.unwrap_or(rxe::DEFAULT_ITERS))
    } else {
        args.iters
    };
    if rxe {
        // perftest's own limit.
        ensure!(
            iters.is_some_and(|n| n >= 5) && lat_iters >= 5,
            "perftest runs at least 5 iterations: --iters and --lat-iters must be 5 or more"
        );
        ensure!(
            args.mtu == 1500,
            "the rxe peer's wire is 1500 bytes: --mtu does not apply with --peer rxe"
        );
        ensure!(
            !args.ipv6,
            "--ipv6 runs the bench's own workloads between two xroced; with --peer rxe, \
             `cargo xtask interop --only IPv6` runs perftest over IPv6 against rxe"
        );
    }
    ensure!(
        args.duration > 0.0 && args.duration.is_finite(),
        "--duration must be positive"
    );
    ensure!(
        args.baseline_secs > 0.0 && args.baseline_secs.is_finite(),
        "--baseline-secs must be positive"
    );
    ensure!(args.tx_depth >= 1, "--tx-depth must be at least 1");
    ensure!(args.cq_mod >= 1, "--cq-mod must be at least 1");
    ensure!(
        args.rx_depth >= 1 && args.rx_depth <= 32768,
        "--rx-depth must be within 1..=32768"
    );
    ensure!(lat_iters >= 1, "--lat-iters must be at least 1");
    ensure!(
        args.pingpong_count >= 1,
        "--pingpong-count must be at least 1"
    );
    ensure!(
        args.post_list >= 1 && args.post_list <= 1024,
        "--post-list must be within 1..=1024"
    );
    ensure!(
        args.qps.iter().all(|&n| (1..=4096).contains(&n)),
        "--qps counts must be within 1..=4096"
    );
    ensure!(
        (1..=64).contains(&args.queues),
        "--queues must be within 1..=64"
    );
    let msg_sizes = parse_sizes(&args.msg_sizes)?;
    ensure!(
        msg_sizes.iter().all(|&s| s <= workload::INLINE_MAX),
        "--msg-sizes are sent inline: at most {} bytes",
        workload::INLINE_MAX
    );
    let q = args.queues as usize;
    let daemon_cores = match parse_cores(&args.cores)? {
        None => [Vec::new(), Vec::new()],
        Some(c) => [
            (0..q).map(|i| c[i % c.len()]).collect(),
            (q..2 * q).map(|i| c[i % c.len()]).collect(),
        ],
    };
    let app_cores = if args.app_cores == "auto" {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        match (daemon_cores[0].first(), daemon_cores[1].first()) {
            (Some(&a), Some(&b)) if a != b && cpus < 2 * q + 2 => [Some(b), Some(a)],
            _ => [None, None],
        }
    } else {
        match parse_cores(&args.app_cores)? {
            None => [None, None],
            Some(c) => [Some(c[0]), Some(c[1 % c.len()])],
        }
    };
    // The scaling test keeps its sizes in the order given: the first is compared.
    let mut scaling_sizes = Vec::new();
    for part in args.scaling_sizes.split(',') {
        scaling_sizes.extend(parse_sizes(part)?);
    }
    let default_sizes = if rxe { rxe::DEFAULT_SIZES } else { "2..1M" };
    let congestion_steps = congestion_plan(args, &tests).steps();
    Ok(Plan {
        tests,
        not_run,
        sizes: parse_sizes(args.sizes.as_deref().unwrap_or(default_sizes))?,
        lat_iters,
        msg_sizes,
        scaling_sizes,
        qps: args.qps.clone(),
        daemon_cores,
        app_cores,
        loss_points: args.loss_modes.len()
            * args.loss_rounds as usize
            * (args.loss_rates.len()
                + usize::from(args.loss_burst > 1.0)
                + usize::from(args.loss_reorder > 0.0)),
        loss_modes: args.loss_modes.len(),
        congestion_steps,
        timing: Timing {
            duration: Duration::from_secs_f64(args.duration),
            iters,
        },
    })
}

fn loadavg() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut v = text
        .split_whitespace()
        .map(|w| w.parse::<f64>().unwrap_or(0.0));
    [
        v.next().unwrap_or(0.0),
        v.next().unwrap_or(0.0),
        v.next().unwrap_or(0.0),
    ]
}

/// Builds the release bench and replaces this process with it, same arguments.
fn reexec_release() -> Result<()> {
    eprint!("building the bench (release) ... ");
    let bin = xroce_artifacts::build("xroce-bench", Target::Bin("xroce-bench"), Profile::Release)
        .context("building the release bench")?;
    eprintln!("ok");
    let err = std::os::unix::process::CommandExt::exec(
        std::process::Command::new(&bin).args(std::env::args_os().skip(1)),
    );
    Err(err).with_context(|| format!("running {}", bin.display()))
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| format!("Linux {}", s.trim()))
        .unwrap_or_else(|_| "Linux".into())
}

fn cores_text(cores: &[usize]) -> String {
    if cores.is_empty() {
        "not pinned".into()
    } else {
        format!(
            "core {}",
            cores
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )
    }
}

fn core_text(core: Option<usize>) -> String {
    core.map_or("not pinned".into(), |c| format!("core {c}"))
}

/// The default place of the plot: `<target>/xroce/bench.svg`.
fn default_svg() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("xroce").join("bench.svg")
}

/// How many progress steps `plan` takes.
fn steps(plan: &Plan, flood_frames: usize) -> usize {
    let n = plan.sizes.len();
    let mut steps = 0;
    for t in &plan.tests {
        steps += match *t {
            "write_bw" | "read_bw" | "send_bw" | "write_lat" | "send_lat" | "read_lat" => n,
            "msg_rate" => plan.msg_sizes.len(),
            "qp_scaling" => plan.qps.len() * (1 + plan.scaling_sizes.len()),
            "xsk" | "udp" => flood_frames + 1,
            "loss" => 2 * plan.loss_points + plan.loss_modes,
            // Counted once for both (see congestion::CongestionPlan::steps).
            "incast" => plan.congestion_steps,
            "all_to_all" if !plan.has("incast") => plan.congestion_steps,
            "all_to_all" => 0,
            _ => 1,
        };
    }
    steps + usize::from(plan.any_xroce())
}

fn main() {
    let args = <Args as clap::Parser>::parse();
    if let Err(e) = run(&args) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<()> {
    let plan = plan(args)?;
    if args.peer == Peer::Rxe {
        // perftest measures there, not the bench's threads: no need for a release xtask.
        return rxe::run(args, &plan);
    }
    if !args.debug_build && cfg!(debug_assertions) {
        // The bench's own threads are the applications being measured: they must be as
        // optimized as the daemon (a debug build of the verbs client adds microseconds to
        // every round trip). This is a debug build: run the release one instead.
        return reexec_release();
    }
    xroce_lab::require_packages(&["iproute2", "ethtool"])?;
    // Safety: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bail!("cargo xtask bench needs root (network namespaces, XDP, AF_XDP): run it with sudo");
    }
    xroce_lab::signals::install().context("installing the Ctrl-C handler")?;
    if let Ok(removed) = xroce_lab::cleanup_stale()
        && !removed.is_empty()
    {
        eprintln!("removed stale lab namespaces {removed:?}");
    }
    let mut report = new_report(args, &plan);
    let release = !args.debug_build;
    eprint!(
        "building xroced{} ({}) ... ",
        if plan.has("xsk") {
            " and xsk-baseline"
        } else {
            ""
        },
        if release { "release" } else { "debug" }
    );
    let profile = if release {
        Profile::Release
    } else {
        Profile::Debug
    };
    let xroced = xroce_artifacts::build("xroce-engine", Target::Bin("xroced"), profile)?;
    let xsk_bin = if plan.has("xsk") {
        Some(xroce_artifacts::build(
            "xroce-xsk-baseline",
            Target::Bin("xsk-baseline"),
            profile,
        )?)
    } else {
        None
    };
    eprintln!("ok");

    let cpus = core_affinity::get_core_ids().map_or(1, |ids| ids.len());
    let (a_base, b_base) = (plan.baseline_core(Side::A), plan.baseline_core(Side::B));
    report.placement = report::Placement {
        cpus,
        daemon_a_cores: plan.daemon_cores[0].clone(),
        daemon_b_cores: plan.daemon_cores[1].clone(),
        app_a_core: plan.app_cores[0],
        app_b_core: plan.app_cores[1],
        baseline_a_core: a_base.or(Some(0)),
        baseline_b_core: b_base.or(Some(1.min(cpus - 1))),
        app_spin_us: args.spin_us,
        app_bw_sleep_us: args.bw_sleep_us,
        summary: format!(
            "{cpus} CPUs; xroced a pollers {}, xroced b pollers {}; bench threads host a {}, \
             host b {} (spin {} µs, then yield in the latency tests, {} in the bandwidth \
             tests); baseline ends host a {}, host b {}",
            cores_text(&plan.daemon_cores[0]),
            cores_text(&plan.daemon_cores[1]),
            core_text(plan.app_cores[0]),
            core_text(plan.app_cores[1]),
            args.spin_us,
            match args.bw_sleep_us {
                0 => "yield".to_string(),
                us => format!("sleep {us} µs"),
            },
            core_text(a_base.or(Some(0))),
            core_text(b_base.or(Some(1.min(cpus - 1)))),
        ),
    };
    let busy = 2 * args.queues as usize + 2;
    if cpus < busy + 2 {
        report.notes.push(format!(
            "{cpus} CPUs for {busy} busy threads (the daemons' pollers and the bench's two): \
             threads share cores, and every hand-over between a poller and an application \
             thread on one core costs a context switch, which shows in the latency figures \
             (the raw AF_XDP ping-pong has one thread per core)"
        ));
    }

    // The frame sizes the baselines run at follow from the path MTU.
    let config = LabConfig {
        mtu: args.mtu,
        router: false,
        queues: args.queues,
    };
    let flood_estimate = 1 + plan.msg_sizes.len();
    let progress = Progress::new(steps(&plan, flood_estimate));
    let daemon_args = |side: usize| -> Vec<String> {
        let mut v = vec!["--queues".to_string(), args.queues.to_string()];
        if !plan.daemon_cores[side].is_empty() {
            v.push("--cores".into());
            v.push(
                plan.daemon_cores[side]
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        v.extend(args.daemon_args.iter().cloned());
        v
    };
    let need_lab = plan.any_xroce() || plan.has("udp") || plan.has("tcp");
    // Hugepages for the daemons' UMEMs (16 MiB per queue) and the bench's memory regions,
    // as xsk-baseline reserves for its own UMEMs: given back once the daemons are gone.
    let hugepages = if plan.any_xroce() {
        let pages = 2 * 8 * u64::from(args.queues) + 2 * (workload::MR_LEN as u64 >> 21) + 16;
        match xroce_lab::hugepages::HugepageReservation::reserve(pages) {
            Ok(r) => {
                if r.granted() < pages {
                    report.notes.push(format!(
                        "only {} of {pages} hugepages could be reserved: some memory is on 4 KiB pages",
                        r.granted()
                    ));
                }
                Some(r)
            }
            Err(e) => {
                report.notes.push(format!(
                    "no hugepages reserved ({e}): memory is on 4 KiB pages"
                ));
                None
            }
        }
    } else {
        None
    };
    let mut hosts = if need_lab {
        progress.step("starting the lab and both daemons", Expect::Unknown);
        let (a, b) = (daemon_args(0), daemon_args(1));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let b: Vec<&str> = b.iter().map(String::as_str).collect();
        Some(
            TwoHosts::start_sides(&xroced, &config, &a, &b)
                .context("starting the lab and the daemons")?,
        )
    } else {
        None
    };

    if let Some(hosts) = &hosts
        && plan.any_xroce()
    {
        run_xroce(hosts, &plan, args, &mut report, &progress)?;
        report.environment.daemon_setup = daemon_setup(hosts);
    }

    // Kernel baselines in the same lab, with the daemons stopped (and their XDP program
    // gone), on the cores the daemons' pollers had.
    if let Some(h) = &mut hosts {
        h.stop();
        detach_xdp(h);
    }
    let frames = baseline_frames(&plan, &report);
    let ends = |lab| kernel::Ends {
        lab,
        a_core: report.placement.baseline_a_core,
        b_core: report.placement.baseline_b_core,
        spin: Duration::from_micros(args.spin_us),
    };
    if let Some(h) = &hosts {
        if plan.has("udp") {
            for &frame in &frames.flood {
                progress.step(
                    format!("kernel UDP flood, {frame} B frames"),
                    Expect::Secs(args.baseline_secs),
                );
                let p = kernel::udp_flood(ends(&h.lab), frame, args.baseline_secs)?;
                report.baselines.udp_flood.push(p);
            }
            progress.step(
                format!("kernel UDP ping-pong, {} B frames", frames.pingpong),
                Expect::Unknown,
            );
            let frame = frames.pingpong.max(kernel::UDP_HEADERS + 8);
            report.baselines.udp_pingpong = Some(kernel::udp_pingpong(
                ends(&h.lab),
                frame,
                args.pingpong_count,
            )?);
        }
        if plan.has("tcp") {
            progress.step("kernel TCP stream", Expect::Secs(args.baseline_secs));
            report.baselines.tcp = Some(kernel::tcp_stream(ends(&h.lab), args.baseline_secs)?);
        }
    }
    drop(hosts);
    drop(hugepages);

    if let Some(bin) = &xsk_bin {
        let (a, b) = (
            report.placement.baseline_a_core,
            report.placement.baseline_b_core,
        );
        for &frame in &frames.flood {
            if !(xsk::MIN_FRAME..=xsk::max_frame(args.mtu)).contains(&frame) {
                report.notes.push(format!(
                    "no raw AF_XDP flood at {frame} B frames: xsk-baseline sends {}..={} B",
                    xsk::MIN_FRAME,
                    xsk::max_frame(args.mtu)
                ));
                continue;
            }
            progress.step(
                format!("raw AF_XDP flood, {frame} B frames"),
                Expect::Secs(args.baseline_secs),
            );
            report.baselines.xsk_flood.push(xsk::flood(
                bin,
                a,
                b,
                frame,
                args.mtu,
                args.baseline_secs,
            )?);
        }
        progress.step(
            format!("raw AF_XDP ping-pong, {} B frames", frames.pingpong),
            Expect::Unknown,
        );
        let frame = frames.pingpong.max(xsk::MIN_FRAME);
        report.baselines.xsk_pingpong = Some(xsk::pingpong(
            bin,
            a,
            b,
            frame,
            args.mtu,
            args.pingpong_count,
        )?);
    }
    if plan.has("loss") {
        run_loss(&xroced, &plan, args, &mut report, &progress)?;
    }
    if plan.has("incast") || plan.has("all_to_all") {
        let cplan = congestion_plan(args, &plan.tests);
        let pages = 8 * cplan.hosts as u64 + 64;
        let _hugepages = xroce_lab::hugepages::HugepageReservation::reserve(pages).ok();
        report.congestion = congestion::run(&xroced, &cplan, &progress)?;
        for p in &report.congestion {
            if let Some(e) = &p.error {
                report.notes.push(format!(
                    "{} {} (cc {}, {}) failed: {e}",
                    p.test, p.senders, p.cc, p.switch
                ));
            }
        }
    }

    report.baselines.how = format!(
        "raw AF_XDP: xsk-baseline in a lab of its own built like this one; kernel UDP and TCP: \
         std sockets in this lab's namespaces with the daemons stopped; both ends on {} and {}; \
         UDP ping-pong polls non-blocking sockets like the bench's threads",
        core_text(report.placement.baseline_a_core),
        core_text(report.placement.baseline_b_core)
    );

    compare(&mut report, &plan);
    report.environment.load_after = loadavg();
    report.environment.total_secs = progress.elapsed().as_secs_f64();
    drop(progress);

    finish(&report, args)
}

/// The congestion tests' plan from the options.
fn congestion_plan(args: &Args, tests: &[&str]) -> congestion::CongestionPlan {
    congestion::CongestionPlan {
        hosts: args.hosts,
        mtu: args.mtu,
        bottleneck_mbit: args.bottleneck_mbit,
        queue_bytes: args.queue_kib << 10,
        kmin: args.ecn_kmin_kib << 10,
        kmax: args.ecn_kmax_kib << 10,
        pmax_percent: args.ecn_pmax,
        fan_in: args.fan_in.clone(),
        depth: args.incast_depth,
        secs: args.incast_secs,
        incast: tests.contains(&"incast"),
        all_to_all: tests.contains(&"all_to_all"),
        cc_args: args.cc_args.clone(),
    }
}

/// The loss test, in a lab of its own with a router (see [`loss`]).
fn run_loss(
    xroced: &Path,
    plan: &Plan,
    args: &Args,
    report: &mut Report,
    progress: &Progress,
) -> Result<()> {
    let pages = 2 * 8 + 2 * (workload::MR_LEN as u64 >> 21) + 16;
    let _hugepages = xroce_lab::hugepages::HugepageReservation::reserve(pages).ok();
    let bw_then = match args.bw_sleep_us {
        0 => poll::Then::Yield,
        us => poll::Then::Sleep(Duration::from_micros(us)),
    };
    for &mode in &args.loss_modes {
        progress.step(
            format!(
                "starting the loss test's lab (a router between the hosts), {}",
                mode.label()
            ),
            Expect::Unknown,
        );
        let side = |side: usize| -> Vec<String> {
            let mut v: Vec<String> = mode.daemon_args().iter().map(|a| a.to_string()).collect();
            if let Some(c) = plan.daemon_cores[side].first() {
                v.extend(["--cores".into(), c.to_string()]);
            }
            v.extend(args.daemon_args.iter().cloned());
            v
        };
        let (a, b) = (side(0), side(1));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let b: Vec<&str> = b.iter().map(String::as_str).collect();
        let hosts = TwoHosts::start_sides(xroced, &loss::lab_config(args.mtu), &a, &b)
            .context("starting the loss test's lab and daemons")?;
        let loss_plan = loss::LossPlan {
            mode,
            rates: args.loss_rates.clone(),
            burst: (args.loss_burst > 1.0).then_some(args.loss_burst),
            reorder: (args.loss_reorder > 0.0).then_some(args.loss_reorder),
            depth: args.tx_depth,
            timing: plan.timing,
            seed: args.loss_seed,
            family: family(args),
            rounds: args.loss_rounds as usize,
            bottleneck_mbit: args.loss_bottleneck_mbit,
            queue_kib: args.loss_queue_kib as usize,
        };
        let points = loss::run(
            &hosts,
            &loss_plan,
            Duration::from_micros(args.spin_us),
            bw_then,
            plan.app_cores,
            progress,
        )?;
        report.loss.extend(points);
    }
    report.loss_summary = loss::summarize(&report.loss);
    Ok(())
}

/// A report with what every run records before measuring: the options, the build, the
/// machine and its load.
fn new_report(args: &Args, plan: &Plan) -> Report {
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let load_before = loadavg();
    if load_before[0] > 1.0 {
        eprintln!(
            "note: the load average is {:.2}: other work on this machine will show in the figures",
            load_before[0]
        );
    }
    let release = !args.debug_build;
    let rxe = args.peer == Peer::Rxe;
    let mut report = Report {
        schema: report::SCHEMA,
        started_unix,
        ..Report::default()
    };
    report.config = report::Config {
        tests: plan.tests.iter().map(|t| t.to_string()).collect(),
        sizes: plan.sizes.clone(),
        duration_secs: args.duration,
        iters: plan.timing.iters,
        lat_iters: plan.lat_iters,
        tx_depth: args.tx_depth,
        cq_mod: args.cq_mod,
        rx_depth: args.rx_depth,
        msg_sizes: plan.msg_sizes.clone(),
        post_list: args.post_list,
        qps: args.qps.clone(),
        scaling_sizes: plan.scaling_sizes.clone(),
        baseline_secs: args.baseline_secs,
        pingpong_count: args.pingpong_count,
        queues: args.queues,
        mtu: args.mtu,
        path_mtu: xroce_wire::mtu::IbMtu::for_netdev_mtu(
            args.mtu as usize,
            xroce_wire::mtu::IpVersion::V4,
        )
        .map_or(0, |m| m.bytes()),
        peer: if rxe { "rxe" } else { "xroced" }.into(),
        ipv6: args.ipv6,
        build: if release { "release" } else { "debug" }.into(),
        measured_by: if rxe { "perftest" } else { "bench" }.into(),
    };
    if !release {
        report
            .notes
            .push("debug build: these figures say nothing about xroce's performance".into());
    }
    report.environment.kernel = kernel_release();
    report.environment.load_before = load_before;
    if load_before[0] > 1.0 {
        report.notes.push(format!(
            "the load average was {:.2} when the run started: other work shared the cores",
            load_before[0]
        ));
    }
    report
}

/// Prints the report, writes its JSON and draws its plot; fails if a point failed.
fn finish(report: &Report, args: &Args) -> Result<()> {
    print!("{}", report.table());
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(report)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
        println!("\nJSON: {}", path.display());
    }
    if !args.no_svg {
        let path = args.svg.clone().unwrap_or_else(default_svg);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        if plot::draw(report, &path)? {
            println!("plot: {}", path.display());
        }
        let loss_path = path.with_file_name("loss.svg");
        if loss::draw(&report.loss, &loss_path)? {
            println!("loss plot: {}", loss_path.display());
        }
        let congestion_path = path.with_file_name("congestion.svg");
        if congestion::draw(&report.congestion, &congestion_path)? {
            println!("congestion plot: {}", congestion_path.display());
        }
    }
    ensure!(
        report.failures.is_empty(),
        "{} point(s) failed: see FAILED points above",
        report.failures.len()
    );
    Ok(())
}

/// The frame sizes of the baselines.
#[derive(Debug)]
struct BaselineFrames {
    /// Floods: the WRITE bandwidth comparison's full frame, then the message rate's.
    flood: Vec<usize>,
    /// The ping-pong: the frame of the smallest WRITE latency message.
    pingpong: usize,
}

/// The WRITE bandwidth size compared with the baselines: 64 KiB if measured, else the
/// largest measured.
fn write_bw_size(plan: &Plan) -> usize {
    if plan.sizes.contains(&65536) || !plan.has("write_bw") {
        65536
    } else {
        plan.sizes.last().copied().unwrap_or(65536)
    }
}

/// The WRITE latency size compared with the baselines: 2 bytes if measured, else the
/// smallest measured.
fn write_lat_size(plan: &Plan) -> usize {
    if plan.sizes.contains(&2) || !plan.has("write_lat") {
        2
    } else {
        plan.sizes[0]
    }
}

fn baseline_frames(plan: &Plan, report: &Report) -> BaselineFrames {
    let pmtu = report.config.path_mtu.max(256);
    let ipv6 = report.config.ipv6;
    let mut flood = vec![frames_over(Op::Write, write_bw_size(plan), pmtu, ipv6).1];
    for &s in &plan.msg_sizes {
        let f = frames_over(Op::Write, s, pmtu, ipv6).1;
        if !flood.contains(&f) {
            flood.push(f);
        }
    }
    BaselineFrames {
        flood,
        pingpong: frames_over(Op::Write, write_lat_size(plan), pmtu, ipv6).1,
    }
}

/// The hosts' addresses the xroce workloads use.
fn family(args: &Args) -> Family {
    if args.ipv6 {
        Family::Ipv6
    } else {
        Family::Ipv4
    }
}

/// Removes an XDP program a daemon may have left attached (it detaches on SIGTERM; this is
/// for one that was killed), so the kernel baselines see a plain veth.
fn detach_xdp(hosts: &TwoHosts) {
    for side in [Side::A, Side::B] {
        let h = hosts.lab.host(side);
        let _ = xroce_lab::run(std::process::Command::new("ip").args([
            "-n",
            &h.netns,
            "link",
            "set",
            "dev",
            &h.interface,
            "xdp",
            "off",
        ]));
    }
}

/// What the daemons said about their set-up (XDP mode, pollers), from their logs.
fn daemon_setup(hosts: &TwoHosts) -> String {
    let mut parts = Vec::new();
    for side in [Side::A, Side::B] {
        let log = std::fs::read_to_string(hosts.log(side)).unwrap_or_default();
        parts.push(format!(
            "{}: {}",
            if side == Side::A { "a" } else { "b" },
            setup_lines(&log)
        ));
    }
    parts.join(" | ")
}

/// The lines of a daemon's log that say how it attached (XDP mode, pollers), joined:
/// from those words on, without timestamps or terminal colours.
fn setup_lines(log: &str) -> String {
    let mut lines = Vec::new();
    for line in log.lines() {
        let plain = strip_colours(line);
        let at = ["XDP program attached", "poller "]
            .iter()
            .filter_map(|k| plain.find(k))
            .min();
        if let Some(at) = at {
            lines.push(plain[at..].trim().to_owned());
        }
    }
    lines.join("; ")
}

/// `text` without its ANSI escape sequences (`ESC [ … letter`).
fn strip_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // Up to and including the sequence's final letter.
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn run_xroce(
    hosts: &TwoHosts,
    plan: &Plan,
    args: &Args,
    report: &mut Report,
    progress: &Progress,
) -> Result<()> {
    let spin = Duration::from_micros(args.spin_us);
    let bw_then = match args.bw_sleep_us {
        0 => poll::Then::Yield,
        us => poll::Then::Sleep(Duration::from_micros(us)),
    };
    let mut x = Xroce::new(hosts, spin, bw_then, plan.app_cores, family(args))?;
    report.config.path_mtu = x.path_mtu;
    let result = workloads(&mut x, plan, args, report, progress);
    let mut anomalies = Vec::new();
    for (side, end) in [("a", &x.a), ("b", &x.b)] {
        let stats: Vec<(String, u64)> = end
            .ctx
            .stats()?
            .into_iter()
            .filter(|(_, v)| *v != 0)
            .collect();
        let odd: Vec<String> = stats
            .iter()
            .filter(|(k, _)| anomaly(k))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if !odd.is_empty() {
            anomalies.push(format!("daemon {side}: {}", odd.join(", ")));
        }
        match side {
            "a" => report.daemon_counters.a = stats,
            _ => report.daemon_counters.b = stats,
        }
    }
    match result {
        Ok(()) => {
            if !anomalies.is_empty() {
                report.notes.push(format!(
                    "the daemons counted anomalies during the xroce workloads: {}",
                    anomalies.join("; ")
                ));
            }
            Ok(())
        }
        Err(e) if anomalies.is_empty() => Err(e),
        Err(e) => Err(e.context(format!(
            "the daemons' anomaly counters: {}",
            anomalies.join("; ")
        ))),
    }
}

/// Whether a daemon counter named `name` counts something going wrong.
fn anomaly(name: &str) -> bool {
    // Routine: the poller reading every ring now and then.
    name != "full_ring_scans"
        && [
            "err", "nak", "drop", "dup", "seq", "full", "retry", "rnr", "overflow", "broken",
            "empty",
        ]
        .iter()
        .any(|k| name.contains(k))
}

/// The daemons' anomaly counters now, as one line.
fn anomalies(x: &Xroce<'_>) -> String {
    let mut parts = Vec::new();
    for (side, end) in [("a", &x.a), ("b", &x.b)] {
        let odd: Vec<String> = end
            .ctx
            .stats()
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, v)| *v != 0 && anomaly(k))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if !odd.is_empty() {
            parts.push(format!("daemon {side}: {}", odd.join(", ")));
        }
    }
    parts.join("; ")
}

/// Records the failure of `test` at `size`, skipping the sizes after it. Returns the
/// error itself when the run was interrupted (Ctrl-C ends the run, not the point).
fn failed(
    x: &Xroce<'_>,
    report: &mut Report,
    test: &str,
    (size, qps): (usize, usize),
    skipped: &[usize],
    error: anyhow::Error,
) -> Result<()> {
    if xroce_lab::signals::interrupted() {
        return Err(error);
    }
    let counters = anomalies(x);
    let error = if counters.is_empty() {
        format!("{error:#}")
    } else {
        format!("{error:#} (anomaly counters so far: {counters})")
    };
    report.failures.push(report::Failure {
        test: test.into(),
        size,
        qps,
        error,
        skipped_sizes: skipped.to_vec(),
    });
    Ok(())
}

fn workloads(
    x: &mut Xroce<'_>,
    plan: &Plan,
    args: &Args,
    report: &mut Report,
    progress: &Progress,
) -> Result<()> {
    let max_size = plan.sizes.last().copied().unwrap_or(2);
    let timing = plan.timing;
    let expect_bw = match timing.iters {
        Some(n) => Expect::Count(n),
        None => Expect::Secs(timing.expected_secs()),
    };
    for (test, op) in [
        ("write_bw", Op::Write),
        ("read_bw", Op::Read),
        ("send_bw", Op::Send),
    ] {
        if !plan.has(test) {
            continue;
        }
        let pairs = x.pairs(1, args.tx_depth, args.rx_depth)?;
        if op == Op::Send {
            x.prepare_send_bw(&pairs, args.rx_depth, max_size)?;
        }
        for (k, &size) in plan.sizes.iter().enumerate() {
            progress.step(format!("{test} {}", size_text(size)), expect_bw);
            let spec = BwSpec {
                test,
                op,
                size,
                depth: args.tx_depth,
                cq_mod: args.cq_mod,
                post_list: 1,
                inline: false,
                recv_len: max_size,
                time_completions: false,
            };
            match x.bandwidth(&pairs, &spec, &timing, progress) {
                Ok(p) => report.bandwidth.push(p),
                Err(e) => {
                    failed(x, report, test, (size, 1), &plan.sizes[k + 1..], e)?;
                    break;
                }
            }
        }
    }
    for (test, op) in [
        ("write_lat", Op::Write),
        ("send_lat", Op::Send),
        ("read_lat", Op::Read),
    ] {
        if !plan.has(test) {
            continue;
        }
        let pairs = x.pairs(1, 128, 128)?;
        x.prepare_lat(&pairs[0], op, max_size)?;
        for (k, &size) in plan.sizes.iter().enumerate() {
            progress.step(
                format!("{test} {}", size_text(size)),
                Expect::Count(plan.lat_iters as u64),
            );
            let spec = LatSpec {
                op,
                size,
                max_size,
                iters: plan.lat_iters,
                max_time: timing.duration,
            };
            match x.latency(&pairs[0], &spec, progress) {
                Ok(p) => report.latency.push(p),
                Err(e) => {
                    failed(x, report, test, (size, 1), &plan.sizes[k + 1..], e)?;
                    break;
                }
            }
        }
    }
    if plan.has("msg_rate") {
        let pairs = x.pairs(1, args.tx_depth, 1)?;
        for (k, &size) in plan.msg_sizes.iter().enumerate() {
            progress.step(format!("msg_rate {}", size_text(size)), expect_bw);
            let spec = BwSpec {
                test: "msg_rate",
                op: Op::Write,
                size,
                depth: args.tx_depth,
                cq_mod: args.cq_mod,
                post_list: args.post_list,
                inline: true,
                recv_len: 0,
                time_completions: false,
            };
            match x.bandwidth(&pairs, &spec, &timing, progress) {
                Ok(p) => report.msg_rate.push(p),
                Err(e) => {
                    let rest = &plan.msg_sizes[k + 1..];
                    failed(x, report, "msg_rate", (size, 1), rest, e)?;
                    break;
                }
            }
        }
    }
    if plan.has("qp_scaling") {
        for &n in &args.qps {
            let depth = (args.tx_depth / n).max(1);
            progress.step(
                format!("qp_scaling: connecting {n} QP pairs"),
                Expect::Unknown,
            );
            let pairs = x
                .pairs(n, depth, 1)
                .with_context(|| format!("creating {n} QP pairs"))?;
            for (k, &size) in plan.scaling_sizes.iter().enumerate() {
                progress.step(
                    format!("qp_scaling {n} QPs, {}", size_text(size)),
                    expect_bw,
                );
                let spec = BwSpec {
                    test: "qp_scaling",
                    op: Op::Write,
                    size,
                    depth,
                    cq_mod: args.cq_mod,
                    post_list: 1,
                    inline: false,
                    recv_len: 0,
                    time_completions: false,
                };
                match x.bandwidth(&pairs, &spec, &timing, progress) {
                    Ok(p) => report.qp_scaling.push(p),
                    Err(e) => {
                        let rest = &plan.scaling_sizes[k + 1..];
                        failed(x, report, "qp_scaling", (size, n), rest, e)?;
                        break;
                    }
                }
            }
        }
    }
    Ok(())
}

fn flood_at(points: &[FloodPoint], frame: usize) -> Option<&FloodPoint> {
    points.iter().find(|p| p.frame_bytes == frame)
}

/// The xroce figures against the baselines, with the project's targets.
fn compare(report: &mut Report, plan: &Plan) {
    let mut out = Vec::new();
    let b = &report.baselines;
    let bw_size = write_bw_size(plan);
    let write_bw: Option<&BwPoint> = report
        .bandwidth
        .iter()
        .find(|p| p.op == "write" && p.size == bw_size);
    if let Some(p) = write_bw {
        let name = format!("WRITE {} bandwidth", size_text(p.size));
        if let Some(x) = flood_at(&b.xsk_flood, p.frame_bytes) {
            out.push(Comparison::new(
                "write_bw_vs_xsk",
                format!("{name} (frame bytes/s)"),
                p.wire_bytes_per_sec,
                "bytes/s",
                format!("raw AF_XDP flood, {} B frames", x.frame_bytes),
                x.bytes_per_sec,
                Some((">=", 0.9)),
            ));
        }
        if let Some(u) = flood_at(&b.udp_flood, p.frame_bytes) {
            out.push(Comparison::new(
                "write_bw_vs_udp",
                format!("{name} (frame bytes/s)"),
                p.wire_bytes_per_sec,
                "bytes/s",
                format!("kernel UDP flood, {} B frames", u.frame_bytes),
                u.bytes_per_sec,
                None,
            ));
        }
        if let Some(t) = &b.tcp {
            out.push(Comparison::new(
                "write_bw_vs_tcp",
                format!("{name} (payload)"),
                p.bytes_per_sec,
                "bytes/s",
                "kernel TCP stream (payload)",
                t.bytes_per_sec,
                None,
            ));
        }
    }
    let lat_size = write_lat_size(plan);
    if let Some(p) = report
        .latency
        .iter()
        .find(|p| p.test == "write_lat" && p.size == lat_size)
    {
        let name = format!("WRITE {} ping-pong RTT median", size_text(p.size));
        if let Some(x) = &b.xsk_pingpong {
            out.push(Comparison::new(
                "write_lat_rtt_vs_xsk",
                name.clone(),
                p.rtt_median_us,
                "us",
                format!("raw AF_XDP ping-pong, {} B frames", x.frame_bytes),
                x.median_us,
                Some(("<=", 1.5)),
            ));
        }
        if let Some(u) = &b.udp_pingpong {
            out.push(Comparison::new(
                "write_lat_rtt_vs_udp",
                name,
                p.rtt_median_us,
                "us",
                format!("kernel UDP ping-pong, {} B frames", u.frame_bytes),
                u.median_us,
                Some(("<", 1.0)),
            ));
        }
    }
    for p in &report.msg_rate {
        let name = format!("WRITE {} message rate", size_text(p.size));
        if let Some(x) = flood_at(&b.xsk_flood, p.frame_bytes) {
            out.push(Comparison::new(
                format!("msg_rate_{}_vs_xsk", p.size),
                name.clone(),
                p.msgs_per_sec,
                "msgs/s",
                format!("raw AF_XDP flood, {} B frames", x.frame_bytes),
                x.pps,
                Some((">=", 0.8)),
            ));
        }
        if let Some(u) = flood_at(&b.udp_flood, p.frame_bytes) {
            out.push(Comparison::new(
                format!("msg_rate_{}_vs_udp", p.size),
                name,
                p.msgs_per_sec,
                "msgs/s",
                format!("kernel UDP flood, {} B frames", u.frame_bytes),
                u.pps,
                None,
            ));
        }
    }
    for (k, &size) in plan.scaling_sizes.iter().enumerate() {
        let at: Vec<&BwPoint> = report
            .qp_scaling
            .iter()
            .filter(|p| p.size == size)
            .collect();
        let one = at.iter().find(|p| p.qps == 1);
        let most = at.iter().filter(|p| p.qps > 1).max_by_key(|p| p.qps);
        if let (Some(one), Some(most)) = (one, most) {
            let (value, base, unit) = if k == 0 {
                (most.bytes_per_sec, one.bytes_per_sec, "bytes/s")
            } else {
                (most.msgs_per_sec, one.msgs_per_sec, "msgs/s")
            };
            out.push(Comparison::new(
                format!("qp_scaling_{}_vs_1_at_{size}", most.qps),
                format!(
                    "{} QPs, WRITE {} aggregate {}",
                    most.qps,
                    size_text(size),
                    if k == 0 { "bandwidth" } else { "rate" }
                ),
                value,
                unit,
                "1 QP, same size",
                base,
                (k == 0).then_some((">=", 0.9)),
            ));
        }
    }
    report.comparisons = out;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_setup_is_read_from_plain_and_coloured_logs() {
        let plain = "[2026-11-21T11:09:12Z INFO xroce_engine::daemon] XDP program attached to xr-a (Native)\n\
                     [2026-11-21T11:09:13Z INFO xroce_engine::daemon] poller 0: queue 0, core 0\n\
                     [2026-11-21T11:09:13Z INFO xroce_engine::daemon] serving xroce0\n";
        let coloured = "\x1b[2m2026-11-21T11:09:12.995075Z\x1b[0m \x1b[32m INFO\x1b[0m \
                        \x1b[2mxroce_engine::daemon\x1b[0m\x1b[2m:\x1b[0m XDP program attached to xr-a (Native)\n\
                        \x1b[2m2026-11-21T11:09:13Z\x1b[0m \x1b[32m INFO\x1b[0m poller 0: queue 0, core 0\n";
        let want = "XDP program attached to xr-a (Native); poller 0: queue 0, core 0";
        assert_eq!(setup_lines(plain), want);
        assert_eq!(setup_lines(coloured), want);
    }

    #[test]
    fn sizes_parse_as_lists_and_ranges() {
        assert_eq!(parse_sizes("2..16").unwrap(), vec![2, 4, 8, 16]);
        assert_eq!(parse_sizes("64K,2,1M").unwrap(), vec![2, 65536, 1 << 20]);
        assert_eq!(parse_sizes("2..1M").unwrap().len(), 20);
        assert!(parse_sizes("1").is_err());
        assert!(parse_sizes("64Q").is_err());
        assert!(parse_sizes("16M").is_err());
    }

    #[test]
    fn tests_expand_groups_and_reject_unknown_names() {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: Args,
        }
        let cli = Cli::parse_from(["bench", "--tests", "udp,write_bw,baselines"]);
        let p = plan(&cli.args).unwrap();
        assert_eq!(p.tests, vec!["write_bw", "xsk", "udp", "tcp"]);
        let cli = Cli::parse_from(["bench", "--tests", "write_bandwidth"]);
        assert!(plan(&cli.args).is_err());
        let cli = Cli::parse_from(["bench", "--cores", "0", "--queues", "2"]);
        let p = plan(&cli.args).unwrap();
        assert_eq!(p.daemon_cores, [vec![0, 0], vec![0, 0]]);
    }
}
