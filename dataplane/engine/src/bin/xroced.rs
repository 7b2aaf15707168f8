//! `xroced`: the xroce dataplane daemon.
//!
//! Serves one Ethernet interface of the network namespace it runs in: RoCEv2 frames reach
//! it through AF_XDP, everything else stays with the kernel. Applications in the same
//! namespace find it as device `--device` (default `xroce0`).
//!
//! ```text
//! xroced --interface eth0                       serve eth0 queue 0 as xroce0
//! xroced --interface eth0 --queues 0,1 --cores 2,3
//! xroced stats [--device xroce0]                the counters of a running daemon
//! ```

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand, ValueEnum};
use xroce_engine::control::AppLimits;
use xroce_engine::daemon::{DaemonConfig, NetlinkHost, run};
use xroce_engine::umem::HugepagePolicy;
use xroce_engine::xdp::AttachRequest;
use xroce_engine::xsk::ZeroCopy;

#[derive(Debug, Parser)]
#[command(name = "xroced", version, about = "The xroce RoCEv2 dataplane daemon")]
struct Args {
    #[command(subcommand)]
    command: Option<Sub>,
    /// The interface to serve.
    #[arg(long, short)]
    interface: Option<String>,
    /// The device name applications open.
    #[arg(long, default_value = "xroce0")]
    device: String,
    /// Receive queues to serve, one poller thread each.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    queues: Vec<u32>,
    /// Cores to pin the pollers to, in the order of --queues.
    #[arg(long, value_delimiter = ',')]
    cores: Vec<usize>,
    /// XDP attach mode.
    #[arg(long, value_enum, default_value_t = Mode::Auto)]
    xdp: Mode,
    /// Hugepages for the AF_XDP buffers.
    #[arg(long, value_enum, default_value_t = Policy::Auto)]
    hugepages: Policy,
    /// Zero-copy AF_XDP.
    #[arg(long, value_enum, default_value_t = Policy::Auto)]
    zero_copy: Policy,
    /// Queue pairs per application.
    #[arg(long, default_value_t = 4096)]
    max_qps: usize,
    /// Completion queues per application.
    #[arg(long, default_value_t = 4096)]
    max_cqs: usize,
    /// Registered memory per application, in MiB.
    #[arg(long, default_value_t = 16384)]
    max_mr_mib: u64,
    /// Microseconds an idle poller spins before yielding its core.
    #[arg(long, default_value_t = 50)]
    spin_us: u64,
    /// Microseconds (since the last work) an idle poller keeps yielding before it sleeps.
    #[arg(long, default_value_t = 1000)]
    yield_us: u64,
    /// More logging (-v info is the default; -vv debug).
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

#[derive(Debug, Subcommand)]
enum Sub {
    /// Print the counters of a running daemon.
    Stats {
        /// The device.
        #[arg(long, default_value = "xroce0")]
        device: String,
        /// Print counters that are zero too.
        #[arg(long)]
        all: bool,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Mode {
    Auto,
    Native,
    Generic,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Policy {
    Auto,
    Never,
    Required,
}

fn main() {
    let args = Args::parse();
    let level = match args.verbose {
        0 | 1 => log::LevelFilter::Info,
        2 => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    };
    env_logger::Builder::new()
        .filter_level(level)
        .parse_default_env()
        .init();
    if let Err(e) = main_with(args) {
        eprintln!("xroced: {e:#}");
        std::process::exit(1);
    }
}

fn main_with(args: Args) -> Result<()> {
    if let Some(Sub::Stats { device, all }) = &args.command {
        let ctx = verbs_shm::client::Context::open(device)?;
        for (name, value) in ctx.stats()? {
            if *all || value != 0 {
                println!("{name:32} {value}");
            }
        }
        return Ok(());
    }
    let interface = args.interface.context("--interface is required")?;
    let cfg = DaemonConfig {
        interface: interface.clone(),
        device: args.device,
        queues: args.queues,
        cores: args.cores,
        xdp: match args.xdp {
            Mode::Auto => AttachRequest::Auto,
            Mode::Native => AttachRequest::Native,
            Mode::Generic => AttachRequest::Generic,
        },
        hugepages: match args.hugepages {
            Policy::Auto => HugepagePolicy::Auto,
            Policy::Never => HugepagePolicy::Never,
            Policy::Required => HugepagePolicy::Required,
        },
        zero_copy: match args.zero_copy {
            Policy::Auto => ZeroCopy::Auto,
            Policy::Never => ZeroCopy::Never,
            Policy::Required => ZeroCopy::Required,
        },
        idle: xroce_engine::poller::IdlePolicy {
            spin: std::time::Duration::from_micros(args.spin_us),
            yield_until: std::time::Duration::from_micros(args.yield_us.max(args.spin_us)),
        },
        limits: AppLimits {
            max_qps: args.max_qps,
            max_cqs: args.max_cqs,
            max_mr_bytes: args.max_mr_mib << 20,
        },
    };
    let host = NetlinkHost::new(&interface)?;
    run(cfg, Box::new(host))
}
