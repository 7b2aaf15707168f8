//! `xroce-impair`: the impairment forwarder of `xroce_impair`, by hand, in the router
//! namespace of the lab `cargo xtask lab up --router` builds.
//!
//! ```text
//! cargo xtask lab up --router
//! xroce-impair --loss 1 --duplicate 0.5 --reorder 0.5     # until Ctrl-C, then the counters
//! xroce-impair --loss 1 --rate-mbit 500 --queue-kib 128    # and a 500 Mbit/s port each way
//! ```
//!
//! Percentages are of frames, per direction. It prints the counters every `--every`
//! seconds and when it stops. The router's MAC addresses are the lab's (`xroce_lab::MAC_*`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use xroce_impair::{Impairer, Impairment, Link, Router};

#[derive(Debug, Parser)]
#[command(
    name = "xroce-impair",
    about = "Lose, duplicate and reorder RoCEv2 frames on a lab's router, and limit their rate (AF_XDP forwarder)"
)]
struct Args {
    /// The router's network namespace.
    #[arg(long, default_value = "xroce-r")]
    netns: String,
    /// The router's interface facing host a.
    #[arg(long, default_value = "xr-ra")]
    toward_a: String,
    /// The router's interface facing host b.
    #[arg(long, default_value = "xr-rb")]
    toward_b: String,
    /// Percent of frames lost.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Mean length of a run of lost frames (1: independent losses; above: bursts).
    #[arg(long, default_value_t = 1.0)]
    loss_burst: f64,
    /// A pause of the path this many microseconds long ends a burst of loss (0: bursts
    /// count frames only, however far apart they come).
    #[arg(long, default_value_t = 500)]
    burst_idle_us: u64,
    /// Percent of frames sent twice.
    #[arg(long, default_value_t = 0.0)]
    duplicate: f64,
    /// Percent of frames held back and sent after the next --gap frames.
    #[arg(long, default_value_t = 0.0)]
    reorder: f64,
    /// Frames that overtake a frame held back.
    #[arg(long, default_value_t = 3)]
    gap: u32,
    /// Seed of the random generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the counters every this many seconds (0: only at the end).
    #[arg(long, default_value_t = 5)]
    every: u64,
    /// Each direction's egress a bottleneck of this many Mbit/s of frame bytes (0: none):
    /// frames wait in a queue of --queue-kib and leave at this rate; a frame that does not
    /// fit is dropped (counted in queue_dropped)
    #[arg(long, default_value_t = 0)]
    rate_mbit: u64,
    /// The bottleneck's queue, KiB of frames
    #[arg(long, default_value_t = 128)]
    queue_kib: usize,
    /// ECN marking at the bottleneck (needs --rate-mbit): ECN-capable frames are marked CE
    /// from this many KiB queued, with a chance rising to --ecn-pmax at --ecn-kmax-kib, and
    /// every one from there (counted in queue_marked). Without it the port only drops.
    #[arg(long)]
    ecn_kmin_kib: Option<usize>,
    /// Every ECN-capable frame is marked from this many KiB queued
    #[arg(long, default_value_t = 64)]
    ecn_kmax_kib: usize,
    /// The marking chance just below --ecn-kmax-kib, in percent
    #[arg(long, default_value_t = 20)]
    ecn_pmax: u32,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn main() -> Result<()> {
    let args = Args::parse();
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // Safety: an all-zero sigaction is a valid value to fill in.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        // Safety: `action` is initialised and its handler only stores to an atomic.
        if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error()).context("installing a signal handler");
        }
    }
    let impairment = Impairment {
        loss: args.loss / 100.0,
        loss_burst: args.loss_burst,
        burst_idle: Duration::from_micros(args.burst_idle_us),
        duplicate: args.duplicate / 100.0,
        reorder: args.reorder / 100.0,
        reorder_gap: args.gap,
        seed: args.seed,
        rate_bps: args.rate_mbit.saturating_mul(1_000_000),
        queue_bytes: args.queue_kib.saturating_mul(1024),
        ecn: args.ecn_kmin_kib.map(|kmin| xroce_impair::switch::Marking {
            kmin: kmin.saturating_mul(1024),
            kmax: args.ecn_kmax_kib.saturating_mul(1024),
            pmax_percent: args.ecn_pmax,
        }),
    };
    let router = Router {
        netns: Some(args.netns.clone()),
        toward_a: Link {
            interface: args.toward_a,
            mac: xroce_lab::MAC_ROUTER_A,
            next_hop: xroce_lab::MAC_A,
        },
        toward_b: Link {
            interface: args.toward_b,
            mac: xroce_lab::MAC_ROUTER_B,
            next_hop: xroce_lab::MAC_B,
        },
    };
    let impairer = Impairer::start_on(&router, &impairment).with_context(|| {
        format!(
            "starting the forwarder in {} (is the lab up? cargo xtask lab up --router)",
            args.netns
        )
    })?;
    let [ma, mb] = impairer.attach_modes();
    eprintln!(
        "impairing RoCEv2 between the hosts of {} (XDP {ma} toward a, {mb} toward b): loss \
         {}%{}, duplicate {}%, reorder {}% (gap {}), seed {}{}; Ctrl-C stops",
        args.netns,
        args.loss,
        match (args.loss_burst > 1.0, args.burst_idle_us) {
            (false, _) => String::new(),
            (true, 0) => format!(" in bursts of {} frames", args.loss_burst),
            (true, us) => format!(
                " in bursts of {} frames, each ended by a pause of {us} µs",
                args.loss_burst
            ),
        },
        args.duplicate,
        args.reorder,
        args.gap,
        args.seed,
        if args.rate_mbit > 0 {
            format!(
                ", a {} Mbit/s port each way with a {} KiB queue{}",
                args.rate_mbit,
                args.queue_kib,
                match args.ecn_kmin_kib {
                    Some(kmin) => format!(
                        ", ECN marks from {kmin} KiB (up to {} % at {} KiB, all beyond)",
                        args.ecn_pmax, args.ecn_kmax_kib
                    ),
                    None => String::new(),
                }
            )
        } else {
            String::new()
        }
    );
    let mut last = Instant::now();
    while !STOP.load(Ordering::Relaxed) && impairer.is_running() {
        std::thread::sleep(Duration::from_millis(100));
        if args.every > 0 && last.elapsed() >= Duration::from_secs(args.every) {
            last = Instant::now();
            println!("{}", impairer.counters());
        }
    }
    let counters = impairer.stop()?;
    println!("{counters}");
    Ok(())
}
