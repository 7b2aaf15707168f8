//! The reaction point against the published algorithm, one parameter or two changed at a time.

use super::*;

const GBIT: Rate = Rate::from_mbit(1000);

fn at(micros: u64) -> Instant {
    Instant::from_nanos(micros * 1000)
}

#[test]
fn a_loss_halves_the_rate_and_fast_recovery_does_not_undo_it() {
    let line = Rate::from_mbit(10_000);
    let mut rp = ReactionPoint::new(DcqcnParams::paper_timers(), line);
    let t0 = Instant::from_nanos(1_000);
    // A first loss starts the limiter at the line rate, then halves it.
    rp.handle_loss(t0);
    assert_eq!(rp.rate(t0), Rate::from_mbit(5_000));
    let halved = rp.rate(t0);
    rp.handle_loss(t0 + Duration::from_micros(1));
    assert_eq!(
        rp.rate(t0 + Duration::from_micros(1)),
        Rate::from_mbit(2_500)
    );
    // Fast recovery climbs toward the target, which is the halved rate, not the one
    // before the loss: a millisecond later (about 18 increase periods, 5 Mbit/s each
    // once past fast recovery) it is still far below 5 Gbit/s.
    let later = rp.rate(t0 + Duration::from_millis(1));
    assert!(later >= Rate::from_mbit(2_500) && later < halved, "{later}");
    // Never below the minimum rate.
    for i in 0..64 {
        rp.handle_loss(t0 + Duration::from_millis(2) + Duration::from_nanos(i));
    }
    assert_eq!(
        rp.rate(t0 + Duration::from_millis(2) + Duration::from_nanos(64)),
        Rate::from_mbit(1)
    );
}

#[test]
fn defaults_are_nvidias() {
    let p = DcqcnParams::default();
    assert_eq!(p.rpg_time_reset, Duration::from_micros(300));
    assert_eq!(p.rpg_byte_reset, 32767);
    assert_eq!(p.rpg_threshold, 1);
    assert_eq!(p.rpg_ai_rate, Rate::from_mbit(5));
    assert_eq!(p.rpg_hai_rate, Rate::from_mbit(50));
    assert_eq!(p.rpg_gd, 11);
    assert_eq!(p.rpg_min_dec_fac, 50);
    assert_eq!(p.rpg_min_rate, Rate::from_mbit(1));
    assert_eq!(p.dce_tcp_g, 1019);
    assert_eq!(p.initial_alpha_value, 1023);
    assert_eq!(p.rate_reduce_monitor_period, Duration::from_micros(4));
}

#[test]
fn parameters_are_set_by_nvidia_name_in_nvidia_units() {
    let mut p = DcqcnParams::default();
    p.set("rpg_time_reset", 55).unwrap();
    p.set("rpg_ai_rate", 40).unwrap();
    p.set("clamp_tgt_rate", 1).unwrap();
    assert_eq!(p.rpg_time_reset, Duration::from_micros(55));
    assert_eq!(p.rpg_ai_rate, Rate::from_mbit(40));
    assert!(p.clamp_tgt_rate);
    assert!(matches!(
        p.set("rpg_gd", 0),
        Err(ParamError::OutOfRange { name: "rpg_gd", .. })
    ));
    assert!(matches!(
        p.set("clamp_tgt_rate", 2),
        Err(ParamError::OutOfRange { .. })
    ));
    assert_eq!(
        p.set("rpg_nonsense", 1),
        Err(ParamError::UnknownName("rpg_nonsense".into()))
    );
    for name in DcqcnParams::NAMES {
        assert!(p.set(name, 1).is_ok(), "{name}");
    }
}

#[test]
fn the_first_cnp_allocates_a_limiter_at_line_rate_without_a_cut() {
    let mut rp = ReactionPoint::new(DcqcnParams::default(), GBIT);
    assert_eq!(rp.rate(at(0)), GBIT);
    assert!(!rp.is_limited());
    rp.handle_cnp(at(10));
    assert!(rp.is_limited());
    assert_eq!(rp.state(), Some((1023, GBIT)));
    // No cut: the first CNP only starts the limiter.
    assert_eq!(rp.rate(at(30)), GBIT);
}

#[test]
fn a_second_cnp_cuts_by_half_of_alpha_at_the_next_monitor_period() {
    let mut rp = ReactionPoint::new(DcqcnParams::default(), GBIT);
    rp.handle_cnp(at(0));
    // Alpha: 1018 at 1 µs, 1013 at 2 µs; the CNP at 2 µs (after that update) raises it
    // at 3 µs (1013), it decays again at 4 µs (1008), and the cut at 4 µs uses that.
    rp.handle_cnp(at(2));
    assert_eq!(rp.rate(at(3)), GBIT, "the cut waits for the monitor period");
    let r = rp.rate(at(4));
    let (alpha, target) = rp.state().unwrap();
    assert_eq!(alpha, 1008);
    assert_eq!(target, GBIT, "no increase yet: the target is not clamped");
    // The same updates in alpha's kept scale (1/2^20ths), which the cut uses.
    let mut fine = 1023u64 << 10;
    for cnp in [false, false, true, false] {
        fine = 1019 * fine / 1024 + if cnp { 5 << 10 } else { 0 };
    }
    assert_eq!(fine >> 10, 1008);
    let expected = 1_000_000_000 - ((1_000_000_000u128 * u128::from(fine)) >> 21) as u64;
    assert_eq!(r.bits_per_sec(), expected);
    assert!(r.bits_per_sec() < 520_000_000 && r.bits_per_sec() > 500_000_000);
}

#[test]
fn a_cut_never_takes_more_than_min_dec_fac_nor_goes_below_min_rate() {
    let mut p = DcqcnParams::default();
    p.rpg_gd = 1; // alpha 1 would take the whole rate
    p.rpg_min_dec_fac = 70;
    let mut rp = ReactionPoint::new(p, GBIT);
    rp.handle_cnp(at(0));
    rp.handle_cnp(at(1));
    assert_eq!(rp.rate(at(4)), Rate::from_mbit(700));
    // Keep cutting: the rate settles at rpg_min_rate.
    for t in (8..4000).step_by(4) {
        rp.handle_cnp(at(t));
    }
    assert_eq!(rp.rate(at(4004)), Rate::from_mbit(1));
}

#[test]
fn alpha_follows_the_fixed_point_update() {
    let mut p = DcqcnParams::default();
    // No increases: the limiter stays for the whole test.
    p.rpg_time_reset = Duration::from_secs(1);
    p.rpg_byte_reset = 0;
    let mut rp = ReactionPoint::new(p, GBIT);
    rp.handle_cnp(at(0));
    // Kept in 1/2^20ths, shown in 1/1024ths.
    let mut alpha = 1023u64 << 10;
    for t in 1..=100 {
        alpha = 1019 * alpha / 1024;
        rp.rate(at(t));
        assert_eq!(u64::from(rp.state().unwrap().0), alpha >> 10, "at {t} µs");
    }
    rp.handle_cnp(at(100));
    rp.rate(at(101));
    alpha = 1019 * alpha / 1024 + (5 << 10);
    assert_eq!(u64::from(rp.state().unwrap().0), alpha >> 10);
    // Left alone, alpha decays to 0 and stays there.
    rp.rate(at(10_000));
    assert_eq!(rp.state().unwrap().0, 0);
}

#[test]
fn sparse_cnps_keep_alpha_at_the_share_of_updates_that_saw_one() {
    // The paper's timers (alpha updated every 55 µs, g = 4/1024) and a CNP every fifth
    // update, for a second: alpha settles near a fifth (about 205/1024), as the paper's
    // real-valued alpha does, and every cut takes about a tenth of the rate. Rounded in
    // 1/1024ths, every update without a CNP took at least 1/1024 off: four such updates
    // outweighed a CNP's 4/1024, and alpha fell to 0.
    let mut p = DcqcnParams::paper_timers();
    p.rpg_time_reset = Duration::from_secs(10); // no increases: cuts alone move the rate
    p.rpg_byte_reset = 0;
    let mut rp = ReactionPoint::new(p, GBIT);
    rp.handle_cnp(at(0));
    let period = 55u64;
    let mut lowest = u32::MAX;
    let mut highest = 0;
    for k in 1..=20_000u64 {
        if k % 5 == 0 {
            rp.handle_cnp(at(k * period - 1));
        }
        rp.rate(at(k * period));
        if k > 5_000 {
            let alpha = rp.state().unwrap().0;
            lowest = lowest.min(alpha);
            highest = highest.max(alpha);
        }
    }
    assert!(
        (150..=260).contains(&lowest) && (150..=260).contains(&highest),
        "alpha between {lowest} and {highest} 1024ths"
    );
    // With no increases, those cuts took the rate to its floor; with alpha at 0 they took
    // nothing and it stayed at the line rate.
    assert_eq!(rp.rate(at(20_000 * period + 1)), Rate::from_mbit(1));
}

#[test]
fn recovery_is_fast_then_additive_then_hyper() {
    let mut p = DcqcnParams::default();
    p.rpg_byte_reset = 0; // time alone drives the increases here
    let mut rp = ReactionPoint::new(p, GBIT);
    rp.handle_cnp(at(0));
    rp.handle_cnp(at(1));
    let cut = rp.rate(at(4)).bits_per_sec();
    // The increase timer restarted at the cut (4 µs): it fires at 304, 604, 904, ...
    // Fast recovery: the target stays at the line rate, the rate halves the gap.
    let r1 = rp.rate(at(304)).bits_per_sec();
    assert_eq!(r1, (cut + 1_000_000_000).div_ceil(2));
    assert_eq!(rp.state().unwrap().1, GBIT);
    // T = 1 now: additive increase, but the target is capped at the line rate.
    let r2 = rp.rate(at(604)).bits_per_sec();
    assert_eq!(r2, (r1 + 1_000_000_000).div_ceil(2));
}

#[test]
fn additive_and_hyper_steps_move_a_clamped_target() {
    let mut p = DcqcnParams::default();
    p.rpg_byte_reset = 0;
    p.clamp_tgt_rate = true;
    let mut rp = ReactionPoint::new(p, GBIT);
    rp.handle_cnp(at(0));
    rp.handle_cnp(at(1));
    let cut = rp.rate(at(4)).bits_per_sec();
    let target0 = rp.state().unwrap().1.bits_per_sec();
    assert_eq!(target0, 1_000_000_000, "clamped to the rate before the cut");
    let mut rate = cut;
    let mut target = target0;
    for (i, t) in [304u64, 604, 904, 1204].into_iter().enumerate() {
        // T before this increase is i (stage_byte stays 0): fast recovery at 0,
        // additive at 1 and later (hyper needs both counters past the threshold).
        if i >= 1 {
            target = (target + 5_000_000).min(1_000_000_000);
        }
        rate = (rate + target).div_ceil(2);
        assert_eq!(rp.rate(at(t)).bits_per_sec(), rate, "increase {i}");
    }
}

#[test]
fn the_byte_counter_raises_the_rate() {
    let mut p = DcqcnParams::default();
    p.rpg_byte_reset = 1000;
    p.clamp_tgt_rate = true;
    let mut rp = ReactionPoint::new(p, GBIT);
    rp.handle_cnp(at(0));
    rp.handle_cnp(at(1));
    let cut = rp.rate(at(4)).bits_per_sec();
    // BC = 0: fast recovery toward the clamped target (the line rate).
    rp.on_sent(at(10), 999);
    assert_eq!(
        rp.rate(at(10)).bits_per_sec(),
        cut,
        "999 bytes are not enough"
    );
    rp.on_sent(at(10), 1);
    let r1 = (cut + 1_000_000_000).div_ceil(2);
    assert_eq!(rp.rate(at(10)).bits_per_sec(), r1);
    // Two thresholds at once: two increases.
    rp.on_sent(at(11), 2000);
    let r3 = (r1 + 1_000_000_000).div_ceil(2);
    let r3 = (r3 + 1_000_000_000).div_ceil(2);
    assert_eq!(rp.rate(at(11)).bits_per_sec(), r3);
}

/// The published algorithm written the plain way, for [`matches_the_reference`]: one
/// event per timer expiry in a queue (the increase timer cancelled by a cut), alpha
/// updated at every tick, nothing skipped.
mod reference {
    use super::super::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    enum Kind {
        Alpha,
        Decrease,
        Increase,
    }

    pub(super) struct Model {
        p: DcqcnParams,
        max: u64,
        on: bool,
        pub(super) rate: u64,
        target: u64,
        /// In 1/2^20ths.
        pub(super) alpha: u64,
        alpha_cnp: bool,
        decrease_cnp: bool,
        bytes: u64,
        t: u32,
        b: u32,
        /// (time, kind, generation)
        events: BinaryHeap<Reverse<(u64, Kind, u64)>>,
        generation: u64,
        increase_generation: u64,
    }

    impl Model {
        pub(super) fn new(p: DcqcnParams, max: u64) -> Model {
            Model {
                p,
                max,
                on: false,
                rate: max,
                target: max,
                alpha: 0,
                alpha_cnp: false,
                decrease_cnp: false,
                bytes: 0,
                t: 0,
                b: 0,
                events: BinaryHeap::new(),
                generation: 0,
                increase_generation: 0,
            }
        }

        pub(super) fn limited(&self) -> bool {
            self.on
        }

        fn schedule(&mut self, at: u64, kind: Kind) {
            let g = if kind == Kind::Increase {
                self.increase_generation
            } else {
                self.generation
            };
            self.events.push(Reverse((at, kind, g)));
        }

        pub(super) fn run_until(&mut self, now: u64) {
            while let Some(&Reverse((at, kind, g))) = self.events.peek() {
                if at > now {
                    break;
                }
                self.events.pop();
                let live = match kind {
                    Kind::Increase => g == self.increase_generation,
                    _ => g == self.generation,
                };
                if !live || !self.on {
                    continue;
                }
                let p = self.p;
                match kind {
                    Kind::Alpha => {
                        let g = u64::from(p.dce_tcp_g);
                        let a = self.alpha;
                        self.alpha = if self.alpha_cnp {
                            (g * a / 1024 + ((1024 - g) << 10)).min(1023 << 10)
                        } else {
                            g * a / 1024
                        };
                        self.alpha_cnp = false;
                        self.schedule(at + p.dce_tcp_rtt.as_nanos() as u64, Kind::Alpha);
                    }
                    Kind::Decrease => {
                        self.schedule(
                            at + p.rate_reduce_monitor_period.as_nanos() as u64,
                            Kind::Decrease,
                        );
                        if self.decrease_cnp {
                            if p.clamp_tgt_rate
                                || self.b > 0
                                || (p.clamp_tgt_rate_after_time_inc && self.t > 0)
                            {
                                self.target = self.rate;
                            }
                            let by_alpha = ((self.rate as u128 * self.alpha as u128)
                                >> (p.rpg_gd + 10))
                                as u64;
                            let most = (self.rate as u128 * (100 - p.rpg_min_dec_fac) as u128 / 100)
                                as u64;
                            self.rate -= by_alpha.min(most);
                            self.rate = self.rate.max(p.rpg_min_rate.bits_per_sec().min(self.max));
                            self.decrease_cnp = false;
                            self.t = 0;
                            self.b = 0;
                            self.bytes = 0;
                            self.increase_generation += 1;
                            self.schedule(at + p.rpg_time_reset.as_nanos() as u64, Kind::Increase);
                        }
                    }
                    Kind::Increase => {
                        self.schedule(at + p.rpg_time_reset.as_nanos() as u64, Kind::Increase);
                        if self.increase() {
                            self.t += 1;
                        }
                    }
                }
            }
        }

        fn increase(&mut self) -> bool {
            let p = self.p;
            if self.t.min(self.b) > p.rpg_threshold {
                self.target += p.rpg_hai_rate.bits_per_sec();
            } else if self.t.max(self.b) >= p.rpg_threshold {
                self.target += p.rpg_ai_rate.bits_per_sec();
            }
            self.target = self.target.min(self.max);
            self.rate = (self.rate + self.target).div_ceil(2);
            if self.rate >= self.max && self.target >= self.max {
                self.on = false;
                self.rate = self.max;
                self.generation += 1;
                self.increase_generation += 1;
                return false;
            }
            true
        }

        pub(super) fn cnp(&mut self, now: u64) {
            self.run_until(now);
            if self.on {
                self.alpha_cnp = true;
                self.decrease_cnp = true;
                return;
            }
            let p = self.p;
            self.on = true;
            self.rate = self.max;
            self.target = self.max;
            self.alpha = u64::from(p.initial_alpha_value) << 10;
            self.alpha_cnp = false;
            self.decrease_cnp = false;
            self.bytes = 0;
            self.t = 0;
            self.b = 0;
            self.generation += 1;
            self.increase_generation += 1;
            self.schedule(now + p.dce_tcp_rtt.as_nanos() as u64, Kind::Alpha);
            self.schedule(
                now + p.rate_reduce_monitor_period.as_nanos() as u64,
                Kind::Decrease,
            );
            self.schedule(now + p.rpg_time_reset.as_nanos() as u64, Kind::Increase);
        }

        pub(super) fn sent(&mut self, now: u64, bytes: u64) {
            self.run_until(now);
            if !self.on {
                return;
            }
            self.bytes += bytes;
            while self.on && self.bytes >= self.p.rpg_byte_reset {
                self.bytes -= self.p.rpg_byte_reset;
                if self.increase() {
                    self.b += 1;
                }
            }
        }
    }
}

/// Random CNPs (in bursts and lulls), random bytes and random looks at the state: the
/// lazily evaluated reaction point and the plain model agree on the rate, alpha and
/// whether a limiter is allocated after every step.
#[test]
fn matches_the_reference() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    for seed in 0..6u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut p = DcqcnParams::default();
        if seed % 3 == 1 {
            p.clamp_tgt_rate = true;
            p.rpg_byte_reset = 4000;
        }
        if seed % 3 == 2 {
            p.clamp_tgt_rate_after_time_inc = false;
            p.rpg_threshold = 3;
            p.rpg_time_reset = Duration::from_micros(55);
            p.dce_tcp_rtt = Duration::from_micros(3);
        }
        let line = Rate::from_mbit(10_000);
        let mut rp = ReactionPoint::new(p, line);
        let mut model = reference::Model::new(p, line.bits_per_sec());
        let mut now = 0u64;
        let mut congested = true;
        for step in 0..20_000 {
            // Congestion comes and goes every few milliseconds.
            if rng.random_ratio(1, 400) {
                congested = !congested;
            }
            now += rng.random_range(0..if congested { 20_000 } else { 200_000 });
            match rng.random_range(0..10) {
                0..=2 if congested => {
                    rp.handle_cnp(Instant::from_nanos(now));
                    model.cnp(now);
                }
                0..=6 => {
                    let bytes = rng.random_range(64..9000);
                    rp.on_sent(Instant::from_nanos(now), bytes);
                    model.sent(now, bytes);
                }
                _ => {}
            }
            let rate = rp.rate(Instant::from_nanos(now)).bits_per_sec();
            model.run_until(now);
            assert_eq!(rp.is_limited(), model.limited(), "seed {seed} step {step}");
            assert_eq!(rate, model.rate, "seed {seed} step {step} at {now} ns");
            if let Some((alpha, _)) = rp.state() {
                assert_eq!(
                    u64::from(alpha),
                    model.alpha >> 10,
                    "seed {seed} step {step}"
                );
            }
        }
    }
}

#[test]
fn a_recovered_rate_releases_the_limiter() {
    let mut rp = ReactionPoint::new(DcqcnParams::default(), GBIT);
    rp.handle_cnp(at(0));
    rp.handle_cnp(at(1));
    assert!(rp.rate(at(4)) < GBIT);
    // Timer increases alone bring it back within a few dozen periods.
    assert_eq!(rp.rate(at(100_000)), GBIT);
    assert!(!rp.is_limited());
    // The next CNP is a first one again: alpha back at its initial value, no cut.
    rp.handle_cnp(at(100_001));
    assert_eq!(rp.state(), Some((1023, GBIT)));
}

#[test]
fn a_first_cnp_below_another_controllers_rate_starts_there() {
    let mut rp = ReactionPoint::new(DcqcnParams::default(), GBIT);
    rp.handle_cnp_below(at(0), Rate::from_mbit(300));
    assert_eq!(rp.rate(at(1)), Rate::from_mbit(300));
    assert_eq!(rp.state(), Some((1018, Rate::from_mbit(300))));
    // Later CNPs are ordinary ones.
    rp.handle_cnp_below(at(2), Rate::from_mbit(1));
    assert!(rp.rate(at(4)) < Rate::from_mbit(300));
    assert!(rp.rate(at(4)) > Rate::from_mbit(100));
}

#[test]
fn max_rate_below_line_rate_caps_recovery() {
    let mut p = DcqcnParams::default();
    p.rpg_max_rate = Rate::from_mbit(400);
    let rp = ReactionPoint::new(p, GBIT);
    assert_eq!(rp.max_rate(), Rate::from_mbit(400));
    p.rpg_max_rate = Rate::from_mbit(4000);
    assert_eq!(ReactionPoint::new(p, GBIT).max_rate(), GBIT);
}
