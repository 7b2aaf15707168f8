//! `xroced`: the xroce dataplane daemon.
//!
//! Serves one Ethernet interface of the network namespace it runs in: RoCEv2 frames reach
//! it through AF_XDP, everything else stays with the kernel. Applications in the same
//! namespace find it as device `--name` (default `xroce0`) on the abstract unix socket
//! `@xroce/<name>`.
//!
//! ```text
//! xroced --netdev eth0                              serve eth0 queue 0 as xroce0
//! xroced --netdev eth0 --queues 2 --cores 2,3       two queues, pollers on cores 2 and 3
//! xroced --config /etc/xroce/xroced.toml            the same settings from a file
//! xroced --netdev eth0 --cc dcqcn --ecn on          DCQCN only, every packet ECN-capable
//! xroced --netdev eth0 --cc off                     no congestion control at all
//! xroced stat [xroce0] [--qp]                       counters of a running daemon
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use serde::Deserialize;
use xroce_congestion::{Algorithm, CongestionConfig, DcqcnParams, DscpSet, EcnMode, Rate};
use xroce_engine::control::{AccessPolicy, AppLimits};
use xroce_engine::daemon::{DaemonConfig, NetlinkHost, run};
use xroce_engine::poller::IdlePolicy;
use xroce_engine::privileges::{self, Caps, User};
use xroce_engine::umem::HugepagePolicy;
use xroce_engine::xdp::AttachRequest;
use xroce_engine::xsk::ZeroCopy;

#[derive(Debug, Parser)]
#[command(name = "xroced", version, about = "The xroce RoCEv2 dataplane daemon")]
struct Args {
    #[command(subcommand)]
    command: Option<Sub>,
    /// The network interface to serve.
    #[arg(long, short = 'i', visible_alias = "interface")]
    netdev: Option<String>,
    /// The device name applications open.
    #[arg(long, visible_alias = "device")]
    name: Option<String>,
    /// Serve receive queues 0..N, one poller thread each.
    #[arg(long)]
    queues: Option<u32>,
    /// Serve exactly these receive queues instead (for example `0,2`).
    #[arg(long, value_delimiter = ',')]
    queue_ids: Option<Vec<u32>>,
    /// Cores to pin the pollers to, in queue order (for example `2,3`).
    #[arg(long, value_delimiter = ',')]
    cores: Option<Vec<usize>>,
    /// A TOML file with any of these settings (the command line wins).
    #[arg(long, conflicts_with = "config_if_present")]
    config: Option<PathBuf>,
    /// Like --config, and no error when the file does not exist (for service units).
    #[arg(long)]
    config_if_present: Option<PathBuf>,
    /// XDP attach mode.
    #[arg(long, value_enum)]
    xdp: Option<Mode>,
    /// Hugepages for the AF_XDP buffers.
    #[arg(long, value_enum)]
    hugepages: Option<Policy>,
    /// Zero-copy AF_XDP.
    #[arg(long, value_enum)]
    zero_copy: Option<Policy>,
    /// AF_XDP frames of 4 KiB per queue, for receiving and as many for sending (a power
    /// of two; default 2048).
    #[arg(long)]
    frames: Option<u32>,
    /// Queue pairs per application (default 4096).
    #[arg(long)]
    max_qps: Option<usize>,
    /// Completion queues per application (default 4096).
    #[arg(long)]
    max_cqs: Option<usize>,
    /// Registered memory per application, in MiB (default 16384).
    #[arg(long)]
    max_mr_mib: Option<u64>,
    /// Memory regions per application (default 8192).
    #[arg(long)]
    max_mrs: Option<usize>,
    /// Shared receive queues per application (default 4096).
    #[arg(long)]
    max_srqs: Option<usize>,
    /// Address handles per application (default 16384).
    #[arg(long)]
    max_ahs: Option<usize>,
    /// Protection domains per application (default 4096).
    #[arg(long)]
    max_pds: Option<usize>,
    /// Microseconds an idle poller spins before yielding its core (default 0: a spinning
    /// poller keeps the core from an application sharing it).
    #[arg(long)]
    spin_us: Option<u64>,
    /// Microseconds (since the last work) an idle poller keeps yielding before it sleeps.
    #[arg(long)]
    yield_us: Option<u64>,
    /// Milliseconds between reads of every ring without a post bit asking (0: only
    /// before sleeping). For tests that post bits are all it takes.
    #[arg(long, default_value_t = 10, hide = true)]
    full_scan_ms: u64,
    /// Milliseconds a path waits for its next hop's MAC address (ARP or neighbour
    /// discovery) before the verb fails with `EHOSTUNREACH`.
    #[arg(long, hide = true)]
    resolve_timeout_ms: Option<u64>,
    /// Memory areas the daemon may map for applications in all (default: from
    /// vm.max_map_count). For tests of the refusal.
    #[arg(long, hide = true)]
    map_budget: Option<usize>,
    /// Do not make /dev/infiniband/uverbs-NAME (the node software such as UCX checks for
    /// before it uses an RDMA device).
    #[arg(long)]
    no_device_node: bool,
    /// Congestion control: `auto` (nothing until a QP's first loss or CNP; then each loss
    /// halves its rate, and DCQCN reacts from the first CNP; round-trip times never slow
    /// it), `dcqcn`, `delay` (a delay and loss controller from the first packet) or `off`
    /// (no pacing, no ECN, no CNPs).
    #[arg(long, value_enum)]
    cc: Option<Cc>,
    /// Under `--cc auto`, a go-back-N loss that comes without a rise of the round trip
    /// (and at most one per 50 new packets) is random loss, not congestion: `on` (the
    /// default; go-back-N already resends its window for it) or `off` (every loss halves
    /// the rate: for paths whose switches drop before their queue adds to the round trip).
    #[arg(long, value_enum)]
    calm_losses: Option<OnOff>,
    /// ECN-capable packets and CNPs for CE marks: `auto` (toward peers known to take part:
    /// their packets are ECN-capable, as an RDMA NIC's with ECN on, or carry xroce's hello,
    /// a UDP checksum on a connection's first packets; never toward Linux rxe), `on`
    /// (always) or `off` (the hello too, unless selective repeat is on).
    #[arg(long, value_enum)]
    ecn: Option<Ecn>,
    /// Selective repeat with peers that are xroce daemons: the responder keeps packets that
    /// arrive after a gap and says which, the requester resends only what was lost, and a
    /// few percent of a round trip's packets lost at random no longer cut its rate. `on`,
    /// for paths that lose at random, or `off` (the default: go-back-N, the standard's, with
    /// every peer; through a congested port its window after loss overflows the queue less).
    /// Linux rxe and RDMA NICs always get go-back-N: a queue pair uses selective repeat only
    /// once its peer showed xroce's hello.
    #[arg(long, value_enum)]
    selective_repeat: Option<OnOff>,
    /// The port's rate in Mbit/s, where every queue pair starts (default: the interface's
    /// speed).
    #[arg(long)]
    line_rate_mbit: Option<u64>,
    /// Only queue pairs whose traffic class has one of these DSCPs are under congestion
    /// control (default: all).
    #[arg(long, value_delimiter = ',')]
    cc_dscp: Option<Vec<u8>>,
    /// At most one CNP per queue pair this often, in µs (default 50).
    #[arg(long)]
    cnp_interval_us: Option<u64>,
    /// The DSCP of CNPs (default 48, as NVIDIA's adapters).
    #[arg(long)]
    cnp_dscp: Option<u8>,
    /// DCQCN's timers: `damped` (the default: the DCQCN paper's 55 µs for alpha, NVIDIA's
    /// 300 µs between rate increases, for paths where queueing makes the round trip a
    /// millisecond), `paper` (the DCQCN paper's 55 µs for both) or `nvidia` (NVIDIA's
    /// defaults, for fabrics with round trips of a few µs).
    #[arg(long, value_enum)]
    dcqcn_timers: Option<DcqcnTimers>,
    /// DCQCN parameters by NVIDIA's names and units (`roce_rp`), for example
    /// `rpg_ai_rate=10,rpg_time_reset=100`.
    #[arg(long, value_delimiter = ',', value_parser = parse_param)]
    dcqcn: Option<Vec<(String, u64)>>,
    /// Only these users (names or uids), the members of --allow-groups, and root may open
    /// the device (default: every user of the network namespace).
    #[arg(long, value_delimiter = ',', value_name = "USERS")]
    allow_users: Option<Vec<String>>,
    /// Only the members of these groups (names or gids; `rdma` is the convention), the
    /// --allow-users, and root may open the device (default: every user).
    #[arg(long, value_delimiter = ',', value_name = "GROUPS")]
    allow_groups: Option<Vec<String>>,
    /// The user to run as once set up, with CAP_NET_ADMIN alone (a name, UID or UID:GID;
    /// default when started as root: `xroce` if it exists, else `nobody`; when started as
    /// another user, that user).
    #[arg(long)]
    user: Option<String>,
    /// More logging (`-vv` debug, `-vvv` trace; `RUST_LOG` overrides).
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

#[derive(Debug, Subcommand)]
enum Sub {
    /// Print the counters of a running daemon (in the style of `rdma statistic`).
    #[command(visible_alias = "stats")]
    Stat {
        /// The device.
        #[arg(default_value = "xroce0")]
        name: String,
        /// Also one line per queue pair.
        #[arg(long)]
        qp: bool,
        /// Counters that are zero too.
        #[arg(long)]
        all: bool,
    },
    /// The device node's keeper, started by the daemon: removes the node when the
    /// daemon's pipe on its standard input closes.
    #[command(hide = true)]
    KeepDeviceNode {
        /// The node's open file, inherited.
        #[arg(long)]
        fd: i32,
        /// The node.
        #[arg(long)]
        path: PathBuf,
        /// The user to run as.
        #[arg(long)]
        user: Option<String>,
    },
}

#[derive(Clone, Copy, Debug, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Auto,
    Native,
    Generic,
}

#[derive(Clone, Copy, Debug, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
enum Cc {
    Auto,
    Dcqcn,
    Delay,
    Off,
}

#[derive(Clone, Copy, Debug, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
enum Ecn {
    Auto,
    On,
    Off,
}

#[derive(Clone, Copy, Debug, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
enum OnOff {
    On,
    Off,
}

#[derive(Clone, Copy, Debug, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
enum DcqcnTimers {
    Nvidia,
    Paper,
    Damped,
}

fn parse_param(text: &str) -> Result<(String, u64), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: give NAME=VALUE"))?;
    let value = value
        .trim()
        .parse()
        .map_err(|e| format!("{text:?}: the value: {e}"))?;
    Ok((name.trim().to_owned(), value))
}

#[derive(Clone, Copy, Debug, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
enum Policy {
    Auto,
    Never,
    Required,
}

/// The settings a `--config` file may hold (same names as the options, with `_`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    netdev: Option<String>,
    name: Option<String>,
    queues: Option<u32>,
    queue_ids: Option<Vec<u32>>,
    cores: Option<Vec<usize>>,
    xdp: Option<Mode>,
    hugepages: Option<Policy>,
    zero_copy: Option<Policy>,
    frames: Option<u32>,
    max_qps: Option<usize>,
    max_cqs: Option<usize>,
    max_mr_mib: Option<u64>,
    max_mrs: Option<usize>,
    max_srqs: Option<usize>,
    max_ahs: Option<usize>,
    max_pds: Option<usize>,
    spin_us: Option<u64>,
    yield_us: Option<u64>,
    device_node: Option<bool>,
    cc: Option<Cc>,
    calm_losses: Option<OnOff>,
    ecn: Option<Ecn>,
    selective_repeat: Option<OnOff>,
    line_rate_mbit: Option<u64>,
    cc_dscp: Option<Vec<u8>>,
    cnp_interval_us: Option<u64>,
    cnp_dscp: Option<u8>,
    dcqcn_timers: Option<DcqcnTimers>,
    /// DCQCN parameters by name (a `[dcqcn]` table).
    dcqcn: Option<BTreeMap<String, u64>>,
    allow_users: Option<Vec<String>>,
    allow_groups: Option<Vec<String>>,
    user: Option<String>,
}

/// Congestion control from the command line and the file (the command line wins; a
/// parameter given in both takes the command line's value).
fn congestion_config(args: &Args, file: &FileConfig) -> Result<CongestionConfig> {
    let algorithm = match args.cc.or(file.cc).unwrap_or(Cc::Auto) {
        Cc::Auto => Algorithm::Auto,
        Cc::Dcqcn => Algorithm::Dcqcn,
        Cc::Delay => Algorithm::Delay,
        Cc::Off => Algorithm::Off,
    };
    // With no congestion control, no ECN either unless asked for.
    let ecn_default = if algorithm == Algorithm::Off {
        Ecn::Off
    } else {
        Ecn::Auto
    };
    let ecn = match args.ecn.or(file.ecn).unwrap_or(ecn_default) {
        Ecn::Auto => EcnMode::Auto,
        Ecn::On => EcnMode::On,
        Ecn::Off => EcnMode::Off,
    };
    let mut dcqcn = match args.dcqcn_timers.or(file.dcqcn_timers) {
        Some(DcqcnTimers::Damped) | None => DcqcnParams::damped_timers(),
        Some(DcqcnTimers::Paper) => DcqcnParams::paper_timers(),
        Some(DcqcnTimers::Nvidia) => DcqcnParams::default(),
    };
    let from_file = file.dcqcn.iter().flatten().map(|(n, &v)| (n.clone(), v));
    let from_args = args.dcqcn.iter().flatten().cloned();
    for (name, value) in from_file.chain(from_args) {
        dcqcn.set(&name, value)?;
    }
    let dscps = match args.cc_dscp.as_ref().or(file.cc_dscp.as_ref()) {
        None => DscpSet::ALL,
        Some(list) => {
            if let Some(bad) = list.iter().find(|&&d| d > 63) {
                bail!("--cc-dscp: {bad} is not a DSCP (0..=63)");
            }
            list.iter().fold(DscpSet::NONE, |set, &d| set.with(d))
        }
    };
    let cnp_dscp = args.cnp_dscp.or(file.cnp_dscp).unwrap_or(48);
    if cnp_dscp > 63 {
        bail!("--cnp-dscp: {cnp_dscp} is not a DSCP (0..=63)");
    }
    let mut config = CongestionConfig::new(Rate::from_mbit(
        args.line_rate_mbit.or(file.line_rate_mbit).unwrap_or(0),
    ));
    config.algorithm = algorithm;
    config.ecn = ecn;
    config.dcqcn = dcqcn;
    config.dscps = dscps;
    config.cnp_dscp = cnp_dscp;
    config.calm_losses = !matches!(args.calm_losses.or(file.calm_losses), Some(OnOff::Off));
    if let Some(us) = args.cnp_interval_us.or(file.cnp_interval_us) {
        config.cnp_interval = Duration::from_micros(us);
    }
    Ok(config)
}

fn main() {
    let args = Args::parse();
    let level = match args.verbose {
        0 | 1 => "info",
        2 => "debug",
        _ => "trace",
    };
    // RUST_LOG overrides -v; aya's and libxdp's `log` records arrive through tracing-log.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only on a terminal: logs written to files and journald stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if let Err(e) = main_with(args) {
        eprintln!("xroced: {e:#}");
        std::process::exit(1);
    }
}

fn main_with(args: Args) -> Result<()> {
    match &args.command {
        Some(Sub::Stat { name, qp, all }) => return stat(name, *qp, *all),
        Some(Sub::KeepDeviceNode { fd, path, user }) => {
            let user = user.as_deref().map(User::resolve).transpose()?;
            return Ok(xroce_engine::device_node::keep(*fd, path, user.as_ref())?);
        }
        None => {}
    }
    let file = match (&args.config, &args.config_if_present) {
        (Some(path), _) => read_config(path)?,
        (None, Some(path)) if path.exists() => read_config(path)?,
        _ => FileConfig::default(),
    };
    let congestion = congestion_config(&args, &file)?;
    let netdev = args
        .netdev
        .or(file.netdev)
        .context("which interface? give --netdev IFACE (or `netdev = \"...\"` in --config)")?;
    let queues = match (
        args.queue_ids.or(file.queue_ids),
        args.queues.or(file.queues),
    ) {
        (Some(ids), _) => ids,
        (None, Some(n)) if n > 0 => (0..n).collect(),
        (None, Some(_)) => bail!("--queues must be at least 1"),
        (None, None) => vec![0],
    };
    let most = verbs_shm::contract::MAX_POLLERS;
    if queues.is_empty() || queues.len() > most {
        bail!(
            "a daemon serves 1 to {most} queues (one poller each), not {}",
            queues.len()
        );
    }
    let spin_us = args.spin_us.or(file.spin_us).unwrap_or(0);
    let yield_us = args.yield_us.or(file.yield_us).unwrap_or(1000).max(spin_us);
    check_privileges()?;
    let frames = args.frames.or(file.frames).unwrap_or(2048);
    let mr_mib = args
        .max_mr_mib
        .or(file.max_mr_mib)
        .unwrap_or(AppLimits::MR_MIB);
    let limits = AppLimits {
        max_qps: args.max_qps.or(file.max_qps).unwrap_or(AppLimits::QPS),
        max_cqs: args.max_cqs.or(file.max_cqs).unwrap_or(AppLimits::CQS),
        max_mr_bytes: mr_mib.saturating_mul(1 << 20),
        max_mrs: args.max_mrs.or(file.max_mrs).unwrap_or(AppLimits::MRS),
        max_srqs: args.max_srqs.or(file.max_srqs).unwrap_or(AppLimits::SRQS),
        max_ahs: args.max_ahs.or(file.max_ahs).unwrap_or(AppLimits::AHS),
        max_pds: args.max_pds.or(file.max_pds).unwrap_or(AppLimits::PDS),
    };
    if !frames.is_power_of_two() || !(64..=1 << 20).contains(&frames) {
        bail!("--frames must be a power of two from 64 to 1048576 (got {frames})");
    }
    let access = AccessPolicy::resolve(
        &args.allow_users.or(file.allow_users).unwrap_or_default(),
        &args.allow_groups.or(file.allow_groups).unwrap_or_default(),
    )?;
    let user = match args.user.or(file.user) {
        Some(name) => Some(User::resolve(&name)?),
        None if nix::unistd::geteuid().is_root() => {
            let user = User::default_for_daemon()?;
            if user.name == "nobody" {
                tracing::warn!(
                    "no user xroce: running as nobody after setup, a user other processes share \
                     (create a system user xroce, or give --user)"
                );
            }
            Some(user)
        }
        None => None,
    };
    let selective_repeat = matches!(
        args.selective_repeat.or(file.selective_repeat),
        Some(OnOff::On)
    );
    let cfg = DaemonConfig {
        congestion,
        selective_repeat,
        interface: netdev.clone(),
        device: args.name.or(file.name).unwrap_or_else(|| "xroce0".into()),
        queues,
        cores: args.cores.or(file.cores).unwrap_or_default(),
        xdp: match args.xdp.or(file.xdp).unwrap_or(Mode::Auto) {
            Mode::Auto => AttachRequest::Auto,
            Mode::Native => AttachRequest::Native,
            Mode::Generic => AttachRequest::Generic,
        },
        hugepages: match args.hugepages.or(file.hugepages).unwrap_or(Policy::Auto) {
            Policy::Auto => HugepagePolicy::Auto,
            Policy::Never => HugepagePolicy::Never,
            Policy::Required => HugepagePolicy::Required,
        },
        zero_copy: match args.zero_copy.or(file.zero_copy).unwrap_or(Policy::Auto) {
            Policy::Auto => ZeroCopy::Auto,
            Policy::Never => ZeroCopy::Never,
            Policy::Required => ZeroCopy::Required,
        },
        frames,
        idle: IdlePolicy {
            spin: Duration::from_micros(spin_us),
            yield_until: Duration::from_micros(yield_us),
            full_scan: Duration::from_millis(args.full_scan_ms),
        },
        limits,
        map_budget: args.map_budget,
        device_node: !args.no_device_node && file.device_node.unwrap_or(true),
        access,
        user,
    };
    let mut host = NetlinkHost::new(&netdev)?;
    if let Some(ms) = args.resolve_timeout_ms {
        host = host.with_resolve_timeout(Duration::from_millis(ms));
    }
    run(cfg, Box::new(host))
}

fn read_config(path: &std::path::Path) -> Result<FileConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse_config(&text)
        .with_context(|| format!("{} is not a valid xroced configuration", path.display()))
}

fn parse_config(text: &str) -> Result<FileConfig> {
    Ok(toml::from_str::<FileConfig>(text)?)
}

/// xroced loads an XDP program, opens AF_XDP sockets and locks memory: root, or the
/// capabilities for each.
fn check_privileges() -> Result<()> {
    if nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    let held = Caps::current()
        .map(|c| c.effective)
        .context("reading the capabilities xroced holds")?;
    let missing = privileges::missing_for_setup(held).names();
    if missing.is_empty() {
        return Ok(());
    }
    bail!(
        "must run as root, or with {} (it loads an XDP program, opens AF_XDP sockets and locks its packet buffers)",
        missing.join(", ")
    )
}

fn stat(name: &str, per_qp: bool, all: bool) -> Result<()> {
    let ctx = verbs_shm::client::Context::open(name)?;
    let counters = ctx.stats()?;
    let line: Vec<String> = counters
        .iter()
        .filter(|(_, v)| all || *v != 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    println!("link {name}/1 {}", line.join(" "));
    if per_qp {
        for qp in ctx.qp_stats()? {
            // The path first (whether zero or not: selective repeat off is news), then the
            // counters.
            let line: Vec<String> = qp
                .path
                .iter()
                .chain(qp.counters.iter().filter(|(_, v)| all || *v != 0))
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            println!(
                "qp {:#08x} {} {} {}",
                qp.qpn,
                qp.qp_type,
                qp.state,
                line.join(" ")
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNIT: &str = include_str!("../../../../dist/xroced@.service");
    const EXAMPLE: &str = include_str!("../../../../dist/xroced.toml");
    const SYSUSERS: &str = include_str!("../../../../dist/xroce.sysusers.conf");

    #[test]
    fn the_shipped_configuration_parses_with_every_key() {
        let c = parse_config(EXAMPLE).unwrap();
        assert_eq!(c.name.as_deref(), Some("xroce0"));
        assert_eq!((c.queues, c.cores.as_deref()), (Some(2), Some(&[2, 3][..])));
        assert!(c.xdp.is_some() && c.hugepages.is_some() && c.zero_copy.is_some());
        assert_eq!(
            (c.max_qps, c.spin_us, c.yield_us),
            (Some(4096), Some(0), Some(1000))
        );
        // The example shows every per-application limit at its default.
        let d = AppLimits::default();
        assert_eq!(
            (c.max_qps, c.max_cqs, c.max_mr_mib.map(|m| m << 20)),
            (Some(d.max_qps), Some(d.max_cqs), Some(d.max_mr_bytes))
        );
        assert_eq!(
            (c.max_mrs, c.max_srqs, c.max_ahs, c.max_pds),
            (
                Some(d.max_mrs),
                Some(d.max_srqs),
                Some(d.max_ahs),
                Some(d.max_pds)
            )
        );
        assert_eq!(c.allow_users.as_deref(), Some(&[][..]), "every user");
        assert_eq!(c.allow_groups.as_deref(), Some(&[][..]));
        let c =
            parse_config("allow_users = [\"alice\", \"1001\"]\nallow_groups = [\"rdma\"]").unwrap();
        assert_eq!(c.allow_users.unwrap(), ["alice", "1001"]);
        assert_eq!(c.allow_groups.unwrap(), ["rdma"]);
        assert_eq!(
            parse_config("user = \"xroce\"").unwrap().user.as_deref(),
            Some("xroce")
        );
        let args = Args::try_parse_from([
            "xroced",
            "--netdev",
            "eth1",
            "--allow-users",
            "alice,1001",
            "--allow-groups",
            "rdma",
            "--user",
            "64000:64000",
        ])
        .unwrap();
        assert_eq!(args.allow_users.unwrap(), ["alice", "1001"]);
        assert_eq!(args.allow_groups.unwrap(), ["rdma"]);
        assert_eq!(args.user.as_deref(), Some("64000:64000"));
        assert!(
            parse_config("queus = 2").is_err(),
            "a misspelt key must be refused"
        );
        // Congestion control as shipped: the defaults, said out loud.
        let args = Args::try_parse_from(["xroced"]).unwrap();
        let shipped = parse_config(EXAMPLE).unwrap();
        let cc = congestion_config(&args, &shipped).unwrap();
        let defaults = congestion_config(&args, &FileConfig::default()).unwrap();
        assert_eq!(cc, defaults);
        assert_eq!((cc.algorithm, cc.ecn), (Algorithm::Auto, EcnMode::Auto));
    }

    #[test]
    fn congestion_control_comes_from_the_command_line_over_the_file() {
        let file = parse_config(
            "cc = \"delay\"\necn = \"on\"\nline_rate_mbit = 25000\ncc_dscp = [26]\n\
             cnp_interval_us = 4\ncnp_dscp = 46\ndcqcn_timers = \"paper\"\n\
             calm_losses = \"off\"\n\
             [dcqcn]\nrpg_ai_rate = 10\nrpg_hai_rate = 100\n",
        )
        .unwrap();
        let args = Args::try_parse_from([
            "xroced",
            "--cc",
            "dcqcn",
            "--dcqcn",
            "rpg_ai_rate=20,rpg_gd=9",
        ])
        .unwrap();
        let cc = congestion_config(&args, &file).unwrap();
        assert_eq!(cc.algorithm, Algorithm::Dcqcn, "the command line wins");
        assert_eq!(cc.ecn, EcnMode::On);
        assert_eq!(cc.line_rate, Rate::from_mbit(25_000));
        assert!(cc.dscps.contains(26) && !cc.dscps.contains(0));
        assert_eq!(cc.cnp_interval, Duration::from_micros(4));
        assert_eq!(cc.cnp_dscp, 46);
        assert!(!cc.calm_losses, "from the file");
        let mut want = DcqcnParams::paper_timers();
        want.rpg_ai_rate = Rate::from_mbit(20);
        want.rpg_hai_rate = Rate::from_mbit(100);
        want.rpg_gd = 9;
        assert_eq!(cc.dcqcn, want);
        // Off means no ECN either, unless asked for.
        let off = Args::try_parse_from(["xroced", "--cc", "off"]).unwrap();
        let cc = congestion_config(&off, &FileConfig::default()).unwrap();
        assert_eq!((cc.algorithm, cc.ecn), (Algorithm::Off, EcnMode::Off));
        assert!(cc.calm_losses, "on by default");
        let calm = Args::try_parse_from(["xroced", "--calm-losses", "on"]).unwrap();
        assert!(
            congestion_config(&calm, &file).unwrap().calm_losses,
            "over the file"
        );
        // A line rate left to the interface.
        assert_eq!(cc.line_rate, Rate::ZERO);
        // Mistakes are refused with the name at fault.
        let bad = Args::try_parse_from(["xroced", "--dcqcn", "rpg_gd=99"]).unwrap();
        let e = congestion_config(&bad, &FileConfig::default()).unwrap_err();
        assert!(format!("{e:#}").contains("rpg_gd"), "{e:#}");
        let bad = Args::try_parse_from(["xroced", "--dcqcn", "no_such=1"]).unwrap();
        assert!(congestion_config(&bad, &FileConfig::default()).is_err());
        let bad = Args::try_parse_from(["xroced", "--cc-dscp", "64"]).unwrap();
        assert!(congestion_config(&bad, &FileConfig::default()).is_err());
        assert!(Args::try_parse_from(["xroced", "--dcqcn", "rpg_gd"]).is_err());
    }

    #[test]
    fn the_service_unit_grants_what_setup_takes_to_its_own_user() {
        let value = |key: &str| {
            UNIT.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .unwrap_or_else(|| panic!("no {key}= in the unit"))
        };
        let setup = privileges::SETUP.names().join(" ");
        let mut granted: Vec<&str> = value("AmbientCapabilities").split_whitespace().collect();
        granted.sort_unstable();
        let mut wanted: Vec<&str> = setup.split(' ').collect();
        wanted.sort_unstable();
        assert_eq!(granted, wanted);
        let mut bounded: Vec<&str> = value("CapabilityBoundingSet").split_whitespace().collect();
        bounded.sort_unstable();
        assert_eq!(bounded, wanted);
        assert_eq!(value("User"), "xroce");
        assert_eq!(value("NoNewPrivileges"), "yes");
        assert_eq!(value("ProtectSystem"), "strict");
        assert!(
            !UNIT.contains("PrivateDevices") && !UNIT.contains("DeviceAllow"),
            "the device node goes in the host's /dev"
        );
        assert!(
            SYSUSERS.lines().any(|l| l.starts_with("u xroce ")),
            "the user the unit names is made"
        );
    }

    #[test]
    fn the_service_unit_command_line_parses() {
        let line = UNIT
            .lines()
            .find_map(|l| l.strip_prefix("ExecStart="))
            .expect("an ExecStart line");
        let argv: Vec<String> = line
            .split_whitespace()
            .map(|w| w.replace("%i", "eth1"))
            .collect();
        assert!(argv[0].ends_with("/xroced"));
        let args = Args::try_parse_from(&argv).unwrap();
        assert_eq!(args.netdev.as_deref(), Some("eth1"));
        assert_eq!(
            args.config_if_present.as_deref(),
            Some(std::path::Path::new("/etc/xroce/eth1.toml"))
        );
    }
}
