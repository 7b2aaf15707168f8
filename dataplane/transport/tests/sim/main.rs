//! The deterministic two-host simulation of the transport across seeds and loss rates.
//!
//! Each run completes 10 000 operations over eight queue pairs (RC both ways, UC, UD) on a
//! network that drops, duplicates, reorders and corrupts frames; every byte, atomic and
//! completion is checked (see `simulation/`). Up to 10 % loss no RC queue pair may
//! fail. At 20 % a retry budget (7 retries, the most the spec allows) can legitimately run
//! out: each such failure is accepted only when the network log shows that every one of the
//! last eight attempts lost its request or its answer.

mod selective;
mod simulation;

use std::time::Duration;

use simulation::{SimConfig, SimReport, run};

fn check(cfg: SimConfig) -> SimReport {
    let r = match run(cfg) {
        Ok(r) => r,
        Err(e) => panic!("{cfg:?}: {e}"),
    };
    assert_eq!(r.completed, cfg.ops, "{cfg:?}");
    if r.corrupted > 0 {
        let caught = r.counters.rcvd_icrc_err + r.counters.rcvd_malformed;
        assert!(caught > 0, "corrupted frames went unnoticed: {r:?}");
    }
    if cfg.loss == 0.0 && cfg.corrupt == 0.0 {
        assert_eq!(
            r.counters.completer_retry_err, 0,
            "retries on a perfect network: {r:?}"
        );
    }
    eprintln!(
        "seed {:>3} loss {:>4.1}%: {} ops, {} frames ({} dropped, {} duplicated, {} reordered, {} corrupted; {} caught by the ICRC), {} retries, {} UC/UD messages lost, {} justified retry exhaustions, {:?} virtual",
        cfg.seed,
        (cfg.loss + cfg.corrupt) * 100.0,
        r.completed,
        r.frames,
        r.dropped,
        r.duplicated,
        r.reordered,
        r.corrupted,
        r.counters.rcvd_icrc_err,
        r.counters.completer_retry_err,
        r.unreliable_lost,
        r.justified_failures,
        r.elapsed
    );
    if std::env::var("SIM_COUNTERS").is_ok() {
        for (n, v) in r.counters.iter().filter(|(_, v)| *v > 0) {
            eprintln!("  {n} = {v}");
        }
    }
    r
}

fn sweep(seeds: std::ops::Range<u64>, loss: f64) -> usize {
    seeds
        .map(|seed| check(SimConfig::lossy(seed, 10_000, loss)).justified_failures)
        .sum()
}

#[test]
fn lossless_network() {
    assert_eq!(sweep(0..8, 0.0), 0);
}

#[test]
fn one_percent_loss() {
    assert_eq!(sweep(10..18, 0.01), 0);
}

#[test]
fn five_percent_loss() {
    assert_eq!(sweep(20..28, 0.05), 0);
}

#[test]
fn ten_percent_loss() {
    assert_eq!(sweep(30..38, 0.10), 0);
}

#[test]
fn twenty_percent_loss() {
    // Failures here are each proven legitimate by the network log (see the module docs).
    sweep(40..48, 0.20);
}

#[test]
fn small_and_large_mtus() {
    for (seed, mtu) in [
        (50, xroce_wire::IbMtu::Mtu256),
        (51, xroce_wire::IbMtu::Mtu4096),
    ] {
        let cfg = SimConfig {
            mtu,
            ..SimConfig::lossy(seed, 5_000, 0.05)
        };
        assert_eq!(check(cfg).justified_failures, 0);
    }
}

/// Loss recovery on measured round trips: with perftest's QP timeout (67 ms) the resends
/// are the measured timer's once a QP has measured its path, and with a floor below the
/// network's reordering delay some are spurious. Every byte, atomic and completion is still checked; no RC QP runs out of
/// retries.
#[test]
fn measured_timers_under_loss() {
    for (seeds, loss) in [(60..64, 0.01), (64..68, 0.05)] {
        for seed in seeds {
            let cfg = SimConfig {
                timeout: 14,
                min_rto: Duration::from_micros(20),
                ..SimConfig::lossy(seed, 10_000, loss)
            };
            let r = check(cfg);
            assert_eq!(r.justified_failures, 0, "{cfg:?}");
            assert_eq!(r.counters.retry_exceeded_err, 0, "{cfg:?}");
            assert!(r.counters.rtt_samples > 0, "{cfg:?}");
            assert!(r.counters.adaptive_timeouts > 0, "{cfg:?}");
            // Before its first round trip is measured a QP has only its own timeout: one
            // whose first packets are lost waits for it, once (five RC requesters).
            assert!(r.counters.retransmit_timeouts <= 5, "{cfg:?}");
        }
    }
}
