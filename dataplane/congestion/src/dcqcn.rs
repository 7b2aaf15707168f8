//! DCQCN's reaction point: the rate of one queue pair, cut when congestion notifications
//! (CNPs) arrive and raised again while none do.
//!
//! The algorithm is DCQCN's (Zhu et al., "Congestion Control for Large-Scale RDMA
//! Deployments", SIGCOMM 2015) as NVIDIA's ConnectX adapters run it, with their parameters
//! under their names (`/sys/class/net/<if>/ecn/roce_rp/*`, `mlxconfig`'s `ROCE_CC_*`) and
//! their defaults, in their fixed-point arithmetic (alpha in 1/1024ths):
//!
//! - The first CNP gives the QP a rate limiter: its rate is `rate_to_set_on_first_cnp`
//!   (0: the line rate), alpha is `initial_alpha_value`, and three timers start. No cut yet.
//! - Every `dce_tcp_rtt`, alpha moves: `alpha = g * alpha / 1024 + (1024 - g)` (at most
//!   1023) if a CNP arrived since the last update, `alpha = g * alpha / 1024` otherwise,
//!   with `g = dce_tcp_g`.
//! - Every `rate_reduce_monitor_period`, if a CNP arrived since the last check, the rate is
//!   cut: the target rate becomes the current rate (always with `clamp_tgt_rate`; else once
//!   an increase has run: by bytes, or by time with `clamp_tgt_rate_after_time_inc`), then
//!   `rate -= min(rate * alpha >> rpg_gd, rate * (100 - rpg_min_dec_fac) / 100)`, no lower
//!   than `rpg_min_rate`; the increase stages and the byte counter start again, and so
//!   does the increase timer.
//! - Every `rpg_time_reset` without a cut (the timer), and every `rpg_byte_reset` bytes
//!   sent (the byte counter), the rate increases: while both stage counts are at most
//!   `rpg_threshold`, fast recovery (the target stays); once either reaches it, additive
//!   increase (`target += rpg_ai_rate`); once both exceed it, hyper increase (`target +=
//!   rpg_hai_rate`); the target is at most the maximum rate; then `rate = (rate + target) /
//!   2`, rounded up so that the rate reaches its target.
//! - A rate back at the maximum with its target there too releases the limiter: the QP
//!   sends unlimited again and the next CNP is a first one.
//!
//! Events due at the same instant run in the order alpha update, rate cut, rate increase,
//! and before a CNP or bytes reported at that instant. The timers are evaluated lazily,
//! when the state is next asked or told anything, with the same result as if each had
//! fired on time: [`ReactionPoint`] needs no timer of its own.

use core::time::Duration;

use xroce_transport::Instant;

use crate::rate::Rate;

/// DCQCN's reaction point parameters, named and defaulted as NVIDIA's adapters name and
/// default them (ConnectX-4 and later, `roce_rp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DcqcnParams {
    /// Time between rate increases without a CNP (`rpg_time_reset`, 300 µs).
    pub rpg_time_reset: Duration,
    /// Bytes sent between rate increases without a CNP (`rpg_byte_reset`, 32767; 0: no
    /// increase by bytes).
    pub rpg_byte_reset: u64,
    /// Increase stages before additive increase, and past which hyper increase begins
    /// (`rpg_threshold`, 1).
    pub rpg_threshold: u32,
    /// The highest rate (`rpg_max_rate`, 0: the line rate).
    pub rpg_max_rate: Rate,
    /// Additive increase step (`rpg_ai_rate`, 5 Mbit/s).
    pub rpg_ai_rate: Rate,
    /// Hyper increase step (`rpg_hai_rate`, 50 Mbit/s).
    pub rpg_hai_rate: Rate,
    /// A cut takes `rate * alpha >> rpg_gd` (`rpg_gd`, 11: with alpha in 1/1024ths, half
    /// of alpha's share).
    pub rpg_gd: u32,
    /// A cut leaves at least this percent of the rate (`rpg_min_dec_fac`, 50).
    pub rpg_min_dec_fac: u32,
    /// The lowest rate (`rpg_min_rate`, 1 Mbit/s).
    pub rpg_min_rate: Rate,
    /// The rate of a QP's first CNP (`rate_to_set_on_first_cnp`, 0: the line rate).
    pub rate_to_set_on_first_cnp: Rate,
    /// Alpha's gain, in 1/1024ths kept per update (`dce_tcp_g`, 1019).
    pub dce_tcp_g: u32,
    /// Time between alpha updates (`dce_tcp_rtt`, 1 µs).
    pub dce_tcp_rtt: Duration,
    /// Time between checks for a cut (`rate_reduce_monitor_period`, 4 µs).
    pub rate_reduce_monitor_period: Duration,
    /// Alpha at a QP's first CNP, in 1/1024ths (`initial_alpha_value`, 1023).
    pub initial_alpha_value: u32,
    /// Every cut first sets the target to the current rate (`clamp_tgt_rate`, off).
    pub clamp_tgt_rate: bool,
    /// A cut after an increase by time sets the target to the current rate
    /// (`clamp_tgt_rate_after_time_inc`, on).
    pub clamp_tgt_rate_after_time_inc: bool,
}

impl Default for DcqcnParams {
    fn default() -> DcqcnParams {
        DcqcnParams {
            rpg_time_reset: Duration::from_micros(300),
            rpg_byte_reset: 32767,
            rpg_threshold: 1,
            rpg_max_rate: Rate::ZERO,
            rpg_ai_rate: Rate::from_mbit(5),
            rpg_hai_rate: Rate::from_mbit(50),
            rpg_gd: 11,
            rpg_min_dec_fac: 50,
            rpg_min_rate: Rate::from_mbit(1),
            rate_to_set_on_first_cnp: Rate::ZERO,
            dce_tcp_g: 1019,
            dce_tcp_rtt: Duration::from_micros(1),
            rate_reduce_monitor_period: Duration::from_micros(4),
            initial_alpha_value: 1023,
            clamp_tgt_rate: false,
            clamp_tgt_rate_after_time_inc: true,
        }
    }
}

/// A DCQCN parameter that cannot be set.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// No parameter has this name.
    #[error(
        "no DCQCN parameter {0:?} (the names are NVIDIA's roce_rp names: {names})",
        names = DcqcnParams::NAMES.join(", ")
    )]
    UnknownName(String),
    /// The value is out of the parameter's range.
    #[error("DCQCN parameter {name}: {value} is out of range ({range})")]
    OutOfRange {
        /// The parameter.
        name: &'static str,
        /// The value given.
        value: u64,
        /// What it may be.
        range: &'static str,
    },
}

impl DcqcnParams {
    /// NVIDIA's defaults with the DCQCN paper's timers and gain: alpha updated and the
    /// rate raised every 55 µs (`dce_tcp_rtt`, `rpg_time_reset`), `g` of 1/256
    /// (`dce_tcp_g` 1020), a 10 MB byte counter. NVIDIA's defaults suit fabrics whose round
    /// trip is a few microseconds; where queueing makes it a millisecond (a slow port behind
    /// fast hosts), alpha forgets a CNP long before the next arrives and the byte counter
    /// raises a fast sender's rate faster than CNPs cut it: these timers keep up.
    pub fn paper_timers() -> DcqcnParams {
        DcqcnParams {
            rpg_time_reset: Duration::from_micros(55),
            rpg_byte_reset: 10 << 20,
            dce_tcp_g: 1020,
            dce_tcp_rtt: Duration::from_micros(55),
            ..DcqcnParams::default()
        }
    }

    /// Every parameter's name, in NVIDIA's spelling.
    pub const NAMES: &'static [&'static str] = &[
        "rpg_time_reset",
        "rpg_byte_reset",
        "rpg_threshold",
        "rpg_max_rate",
        "rpg_ai_rate",
        "rpg_hai_rate",
        "rpg_gd",
        "rpg_min_dec_fac",
        "rpg_min_rate",
        "rate_to_set_on_first_cnp",
        "dce_tcp_g",
        "dce_tcp_rtt",
        "rate_reduce_monitor_period",
        "initial_alpha_value",
        "clamp_tgt_rate",
        "clamp_tgt_rate_after_time_inc",
    ];

    /// Sets one parameter by its NVIDIA name, in NVIDIA's units: microseconds for times,
    /// bytes, Mbit/s for rates, 0 or 1 for the clamps.
    pub fn set(&mut self, name: &str, value: u64) -> Result<(), ParamError> {
        let range = |name: &'static str, ok: bool, range: &'static str| {
            if ok {
                Ok(())
            } else {
                Err(ParamError::OutOfRange { name, value, range })
            }
        };
        let micros = Duration::from_micros(value);
        let small = u32::try_from(value).ok();
        match name {
            "rpg_time_reset" => {
                range("rpg_time_reset", value >= 1, "at least 1 µs")?;
                self.rpg_time_reset = micros;
            }
            "rpg_byte_reset" => self.rpg_byte_reset = value,
            "rpg_threshold" => {
                range("rpg_threshold", value <= 31, "0..=31")?;
                self.rpg_threshold = value as u32;
            }
            "rpg_max_rate" => self.rpg_max_rate = Rate::from_mbit(value),
            "rpg_ai_rate" => self.rpg_ai_rate = Rate::from_mbit(value),
            "rpg_hai_rate" => self.rpg_hai_rate = Rate::from_mbit(value),
            "rpg_gd" => {
                range("rpg_gd", (1..=15).contains(&value), "1..=15")?;
                self.rpg_gd = value as u32;
            }
            "rpg_min_dec_fac" => {
                range("rpg_min_dec_fac", (1..=100).contains(&value), "1..=100")?;
                self.rpg_min_dec_fac = value as u32;
            }
            "rpg_min_rate" => {
                range("rpg_min_rate", value >= 1, "at least 1 Mbit/s")?;
                self.rpg_min_rate = Rate::from_mbit(value);
            }
            "rate_to_set_on_first_cnp" => self.rate_to_set_on_first_cnp = Rate::from_mbit(value),
            "dce_tcp_g" => {
                range("dce_tcp_g", value <= 1023, "0..=1023")?;
                self.dce_tcp_g = value as u32;
            }
            "dce_tcp_rtt" => {
                range("dce_tcp_rtt", value >= 1, "at least 1 µs")?;
                self.dce_tcp_rtt = micros;
            }
            "rate_reduce_monitor_period" => {
                range("rate_reduce_monitor_period", value >= 1, "at least 1 µs")?;
                self.rate_reduce_monitor_period = micros;
            }
            "initial_alpha_value" => {
                range("initial_alpha_value", value <= 1023, "0..=1023")?;
                self.initial_alpha_value = value as u32;
            }
            "clamp_tgt_rate" | "clamp_tgt_rate_after_time_inc" => {
                let flag = match small {
                    Some(0) => false,
                    Some(1) => true,
                    _ => {
                        return Err(ParamError::OutOfRange {
                            name: if name == "clamp_tgt_rate" {
                                "clamp_tgt_rate"
                            } else {
                                "clamp_tgt_rate_after_time_inc"
                            },
                            value,
                            range: "0 or 1",
                        });
                    }
                };
                if name == "clamp_tgt_rate" {
                    self.clamp_tgt_rate = flag;
                } else {
                    self.clamp_tgt_rate_after_time_inc = flag;
                }
            }
            other => return Err(ParamError::UnknownName(other.to_owned())),
        }
        Ok(())
    }
}

/// Alpha's scale: 1024 is 1.
const ALPHA_ONE: u32 = 1024;

/// The rate limiter a QP gets at its first CNP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Limiter {
    /// The current rate (bits per second).
    rate: u64,
    /// The target rate.
    target: u64,
    /// In 1/1024ths.
    alpha: u32,
    /// A CNP arrived since the last alpha update.
    alpha_cnp: bool,
    /// A CNP arrived since the last cut check.
    decrease_cnp: bool,
    next_alpha: Instant,
    next_decrease: Instant,
    next_increase: Instant,
    byte_count: u64,
    /// Increases by time since the last cut (T).
    stage_time: u32,
    /// Increases by bytes since the last cut (BC).
    stage_byte: u32,
}

/// One queue pair's DCQCN reaction point.
#[derive(Clone, Debug)]
pub struct ReactionPoint {
    params: DcqcnParams,
    max_rate: u64,
    limiter: Option<Limiter>,
}

impl ReactionPoint {
    /// A reaction point with no limit yet, for a port of `line_rate`.
    pub fn new(params: DcqcnParams, line_rate: Rate) -> ReactionPoint {
        let max = if params.rpg_max_rate == Rate::ZERO {
            line_rate
        } else {
            params.rpg_max_rate.min(line_rate)
        };
        ReactionPoint {
            params,
            max_rate: max.bits_per_sec().max(1),
            limiter: None,
        }
    }

    /// The parameters.
    pub fn params(&self) -> &DcqcnParams {
        &self.params
    }

    /// The highest rate.
    pub fn max_rate(&self) -> Rate {
        Rate::from_bits_per_sec(self.max_rate)
    }

    /// A CNP arrived for this QP at `now`.
    pub fn handle_cnp(&mut self, now: Instant) {
        self.handle_cnp_below(now, Rate::from_bits_per_sec(u64::MAX));
    }

    /// A CNP arrived at `now` for a QP that another controller held at `rate` until now:
    /// a first CNP starts the limiter there if that is below `rate_to_set_on_first_cnp`.
    pub fn handle_cnp_below(&mut self, now: Instant, rate: Rate) {
        self.advance(now);
        let p = &self.params;
        match &mut self.limiter {
            Some(l) => {
                l.alpha_cnp = true;
                l.decrease_cnp = true;
            }
            None => {
                let first = if p.rate_to_set_on_first_cnp == Rate::ZERO {
                    self.max_rate
                } else {
                    p.rate_to_set_on_first_cnp
                        .bits_per_sec()
                        .clamp(1, self.max_rate)
                };
                let first = first.min(rate.bits_per_sec()).max(1);
                self.limiter = Some(Limiter {
                    rate: first,
                    target: first,
                    alpha: p.initial_alpha_value.min(ALPHA_ONE - 1),
                    alpha_cnp: false,
                    decrease_cnp: false,
                    next_alpha: now + p.dce_tcp_rtt,
                    next_decrease: now + p.rate_reduce_monitor_period,
                    next_increase: now + p.rpg_time_reset,
                    byte_count: 0,
                    stage_time: 0,
                    stage_byte: 0,
                });
            }
        }
    }

    /// The QP lost a packet at `now` (it went back to resend): not part of DCQCN, whose
    /// fabrics do not drop, but where a queue overflows before its marks come back, a loss
    /// says more than a CNP. The rate is halved (at most `rpg_min_dec_fac` of it), and the
    /// target is the halved rate, so that fast recovery does not return to the rate that
    /// lost; alpha and the byte counter start over as after a cut.
    pub fn handle_loss(&mut self, now: Instant) {
        if self.limiter.is_none() {
            self.handle_cnp(now);
        }
        self.advance(now);
        let p = self.params;
        let min = p.rpg_min_rate.bits_per_sec().min(self.max_rate);
        let Some(l) = &mut self.limiter else {
            return;
        };
        let keep = 100 - p.rpg_min_dec_fac.min(100).min(50);
        l.rate = ((u128::from(l.rate) * u128::from(keep) / 100) as u64).max(min);
        l.target = l.rate;
        l.decrease_cnp = false;
        l.stage_time = 0;
        l.stage_byte = 0;
        l.byte_count = 0;
        l.next_increase = now + p.rpg_time_reset;
    }

    /// The QP sent `bytes` at `now` (the byte counter).
    pub fn on_sent(&mut self, now: Instant, bytes: u64) {
        self.advance(now);
        let byte_reset = self.params.rpg_byte_reset;
        if byte_reset == 0 {
            return;
        }
        if let Some(l) = &mut self.limiter {
            l.byte_count += bytes;
        }
        while let Some(l) = &mut self.limiter
            && l.byte_count >= byte_reset
        {
            l.byte_count -= byte_reset;
            if self.increase()
                && let Some(l) = &mut self.limiter
            {
                l.stage_byte = l.stage_byte.saturating_add(1);
            }
        }
    }

    /// The rate at `now`: the line rate (or `rpg_max_rate`) when no CNP has limited it.
    pub fn rate(&mut self, now: Instant) -> Rate {
        self.advance(now);
        Rate::from_bits_per_sec(self.limiter.map_or(self.max_rate, |l| l.rate))
    }

    /// Whether a rate limiter is allocated (a CNP came and the rate has not recovered).
    pub fn is_limited(&self) -> bool {
        self.limiter.is_some()
    }

    /// Alpha (in 1/1024ths) and the target rate, as last evaluated; `None` when unlimited.
    pub fn state(&self) -> Option<(u32, Rate)> {
        self.limiter
            .map(|l| (l.alpha, Rate::from_bits_per_sec(l.target)))
    }

    /// Runs every timer due at or before `now`, in order.
    fn advance(&mut self, now: Instant) {
        let p = self.params;
        loop {
            let Some(l) = &mut self.limiter else {
                return;
            };
            let next = l.next_alpha.min(l.next_decrease).min(l.next_increase);
            if next > now {
                return;
            }
            if l.next_alpha == next {
                if !l.alpha_cnp && l.alpha == 0 {
                    // Nothing moves alpha until a CNP comes, and none comes before `now`
                    // (callers advance first): skip every update due until then.
                    let period = p.dce_tcp_rtt.as_nanos().max(1) as u64;
                    let behind = now.as_nanos() - l.next_alpha.as_nanos();
                    l.next_alpha =
                        l.next_alpha + Duration::from_nanos((behind / period + 1) * period);
                    continue;
                }
                l.alpha = if l.alpha_cnp {
                    (p.dce_tcp_g * l.alpha / ALPHA_ONE + (ALPHA_ONE - p.dce_tcp_g))
                        .min(ALPHA_ONE - 1)
                } else {
                    p.dce_tcp_g * l.alpha / ALPHA_ONE
                };
                l.alpha_cnp = false;
                l.next_alpha = next + p.dce_tcp_rtt;
            } else if l.next_decrease == next {
                l.next_decrease = next + p.rate_reduce_monitor_period;
                if l.decrease_cnp {
                    self.cut(next);
                }
            } else {
                if let Some(l) = &mut self.limiter {
                    l.next_increase = next + p.rpg_time_reset;
                }
                if self.increase()
                    && let Some(l) = &mut self.limiter
                {
                    l.stage_time = l.stage_time.saturating_add(1);
                }
            }
        }
    }

    /// The cut of a rate reduction check that found a CNP, at `at`.
    fn cut(&mut self, at: Instant) {
        let p = self.params;
        let Some(l) = &mut self.limiter else {
            return;
        };
        let clamp = p.clamp_tgt_rate
            || l.stage_byte > 0
            || (p.clamp_tgt_rate_after_time_inc && l.stage_time > 0);
        if clamp {
            l.target = l.rate;
        }
        let by_alpha = ((u128::from(l.rate) * u128::from(l.alpha)) >> p.rpg_gd) as u64;
        let at_most =
            (u128::from(l.rate) * u128::from(100 - p.rpg_min_dec_fac.min(100)) / 100) as u64;
        l.rate -= by_alpha.min(at_most);
        l.rate = l.rate.max(p.rpg_min_rate.bits_per_sec().min(self.max_rate));
        l.decrease_cnp = false;
        l.stage_time = 0;
        l.stage_byte = 0;
        l.byte_count = 0;
        l.next_increase = at + p.rpg_time_reset;
    }

    /// One rate increase (by time or by bytes). `false` when it released the limiter.
    fn increase(&mut self) -> bool {
        let p = self.params;
        let max = self.max_rate;
        let Some(l) = &mut self.limiter else {
            return false;
        };
        let (t, b, f) = (l.stage_time, l.stage_byte, p.rpg_threshold);
        if t.min(b) > f {
            l.target = l.target.saturating_add(p.rpg_hai_rate.bits_per_sec());
        } else if t.max(b) >= f {
            l.target = l.target.saturating_add(p.rpg_ai_rate.bits_per_sec());
        }
        l.target = l.target.min(max);
        l.rate = (l.rate + l.target).div_ceil(2);
        if l.rate >= max && l.target >= max {
            self.limiter = None;
            return false;
        }
        true
    }
}

#[cfg(test)]
// Each test changes a parameter or two of NVIDIA's defaults, one statement each.
#[allow(clippy::field_reassign_with_default)]
mod tests {
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
        let expected = 1_000_000_000 - ((1_000_000_000u128 * u128::from(alpha)) >> 11) as u64;
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
        let mut alpha = 1023u32;
        for t in 1..=100 {
            alpha = 1019 * alpha / 1024;
            rp.rate(at(t));
            assert_eq!(rp.state().unwrap().0, alpha, "at {t} µs");
        }
        rp.handle_cnp(at(100));
        rp.rate(at(101));
        alpha = 1019 * alpha / 1024 + 5;
        assert_eq!(rp.state().unwrap().0, alpha);
        // Left alone, alpha decays to 0 and stays there.
        rp.rate(at(10_000));
        assert_eq!(rp.state().unwrap().0, 0);
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
            pub(super) alpha: u32,
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
                            let a = u64::from(self.alpha);
                            let next = if self.alpha_cnp {
                                (g * a / 1024 + 1024 - g).min(1023)
                            } else {
                                g * a / 1024
                            };
                            self.alpha = next as u32;
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
                                let by_alpha =
                                    ((self.rate as u128 * self.alpha as u128) >> p.rpg_gd) as u64;
                                let most = (self.rate as u128 * (100 - p.rpg_min_dec_fac) as u128
                                    / 100) as u64;
                                self.rate -= by_alpha.min(most);
                                self.rate =
                                    self.rate.max(p.rpg_min_rate.bits_per_sec().min(self.max));
                                self.decrease_cnp = false;
                                self.t = 0;
                                self.b = 0;
                                self.bytes = 0;
                                self.increase_generation += 1;
                                self.schedule(
                                    at + p.rpg_time_reset.as_nanos() as u64,
                                    Kind::Increase,
                                );
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
                self.alpha = p.initial_alpha_value;
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
                    assert_eq!(alpha, model.alpha, "seed {seed} step {step}");
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
}
