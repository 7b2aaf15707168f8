//! Selective repeat in the simulation: the same runs as go-back-N (every byte, atomic and
//! completion checked, completions in posting order, each receive once), with selective
//! repeat on both ends, on one end only (an xroce endpoint facing one without it, both
//! ways at once), and off, under loss from 0 to 20 %, duplication alone, reordering alone
//! and all of them together, at path MTUs from 256 (messages of up to 17 packets) to 1024.

use xroce_wire::IbMtu;

use crate::simulation::{SimConfig, SimReport, run};

/// The three modes of an RC pair: go-back-N, selective repeat, and each end of it facing
/// the other.
const MODES: [(bool, bool); 3] = [(false, false), (true, true), (true, false)];

fn check(cfg: SimConfig) -> SimReport {
    let r = match run(cfg) {
        Ok(r) => r,
        Err(e) => panic!("{cfg:?}: {e}"),
    };
    assert_eq!(r.completed, cfg.ops, "{cfg:?}");
    let c = &r.counters;
    eprintln!(
        "seed {:>3} {:?} loss {:>4.1}% dup {:>4.1}% reorder {:>4.1}% mtu {}: {} frames, {} resent ({} holes), {} held, {} SACK NAKs sent, {} received, {} dropped as malformed, {} go-back-N, {} retry exhaustions, {:?}",
        cfg.seed,
        cfg.selective,
        (cfg.loss + cfg.corrupt) * 100.0,
        cfg.duplicate * 100.0,
        cfg.reorder * 100.0,
        cfg.mtu.bytes(),
        r.frames,
        c.retransmitted_pkts,
        c.sr_packets_resent,
        c.sr_packets_held,
        c.sr_naks_sent,
        c.sr_naks_received,
        c.rcvd_malformed,
        c.completer_retry_err,
        r.justified_failures,
        r.elapsed,
    );
    // Without selective repeat at either end nothing of it happens.
    match cfg.selective {
        (false, false) => {
            assert_eq!(c.sr_naks_sent + c.sr_packets_held + c.sr_packets_resent, 0);
        }
        (true, true) => {
            // Lost, corrupted, or late (after what they said was acknowledged): fewer.
            assert!(c.sr_naks_received <= c.sr_naks_sent, "{cfg:?}");
        }
        _ => {}
    }
    assert_eq!(c.sr_sack_malformed, 0, "{cfg:?}");
    r
}

fn config(seed: u64, loss: f64, selective: (bool, bool)) -> SimConfig {
    SimConfig {
        selective,
        ..SimConfig::lossy(seed, 6_000, loss)
    }
}

#[test]
fn selective_repeat_under_loss_duplication_and_reordering() {
    for (i, loss) in [0.0, 0.01, 0.05, 0.10].into_iter().enumerate() {
        for seed in 0..3 {
            let r = check(config(100 + 10 * i as u64 + seed, loss, (true, true)));
            assert_eq!(r.justified_failures, 0);
            if loss > 0.0 {
                assert!(r.counters.sr_packets_held > 0);
                assert!(r.counters.sr_packets_resent > 0);
            } else {
                assert_eq!(r.counters.retransmitted_pkts, 0);
            }
        }
    }
}

#[test]
fn selective_repeat_at_twenty_percent_loss() {
    // Failures are each proven legitimate by the network log, as for go-back-N.
    for seed in 140..144 {
        check(config(seed, 0.20, (true, true)));
    }
}

#[test]
fn both_modes_under_duplication_alone_and_reordering_alone() {
    for (mode, selective) in MODES.into_iter().enumerate() {
        for seed in 0..2 {
            let seed = 150 + 10 * mode as u64 + seed;
            let base = config(seed, 0.0, selective);
            let duplication = SimConfig {
                duplicate: 0.05,
                ..base
            };
            let r = check(duplication);
            assert_eq!(r.justified_failures, 0);
            let reordering = SimConfig {
                reorder: 0.05,
                ..base
            };
            let r = check(reordering);
            assert_eq!(r.justified_failures, 0);
        }
    }
}

#[test]
fn one_end_with_selective_repeat_facing_one_without() {
    for (seed, loss) in [(180, 0.01), (181, 0.05), (182, 0.10)] {
        let r = check(config(seed, loss, (true, false)));
        assert_eq!(r.justified_failures, 0);
        let c = &r.counters;
        // A's responders hold packets and say so; B's requesters drop what they are told
        // as malformed and recover on their timers.
        assert!(c.sr_packets_held > 0);
        assert!(c.sr_naks_sent > 0);
        assert_eq!(c.sr_naks_received, 0);
        assert!(c.rcvd_malformed > 0);
        assert_eq!(c.sr_packets_resent, 0, "B's responders send no SACK");
    }
}

#[test]
fn small_mtu_many_packets_per_message_in_every_mode() {
    for (mode, selective) in MODES.into_iter().enumerate() {
        let cfg = SimConfig {
            mtu: IbMtu::Mtu256,
            ..config(190 + mode as u64, 0.05, selective)
        };
        assert_eq!(check(cfg).justified_failures, 0);
    }
}

#[test]
fn a_small_store_falls_back_to_resending_what_it_could_not_hold() {
    // Four packets held at most: most of a gap's packets are dropped and resent as holes.
    for seed in [195, 196] {
        let cfg = SimConfig {
            max_held: Some(4),
            ..config(seed, 0.05, (true, true))
        };
        let r = check(cfg);
        assert_eq!(r.justified_failures, 0);
        assert!(r.counters.sr_held_dropped_full > 0, "{cfg:?}");
    }
}
