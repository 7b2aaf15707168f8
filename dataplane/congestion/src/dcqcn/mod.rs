//! DCQCN's reaction point: the rate of one queue pair, cut when congestion notifications
//! (CNPs) arrive and raised again while none do.
//!
//! The algorithm is DCQCN's (Zhu et al., "Congestion Control for Large-Scale RDMA
//! Deployments", SIGCOMM 2015) as NVIDIA's ConnectX adapters run it, with their parameters
//! under their names (`/sys/class/net/<if>/ecn/roce_rp/*`, `mlxconfig`'s `ROCE_CC_*`) and
//! their defaults, in their fixed-point arithmetic (alpha in 1/1024ths, kept with ten more
//! bits, `ALPHA_EXTRA_BITS`):
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

    /// [`DcqcnParams::paper_timers`] with NVIDIA's rate-increase timer (`rpg_time_reset`
    /// 300 µs): alpha still follows every CNP, but the rate climbs back a sixth as often.
    /// Where the round trip behind a queue is a millisecond, a rise every 55 µs refills
    /// the queue long before the CNPs it causes come back: through the congesting lab's
    /// port (4→1, ECN marks from 16 to 64 KiB) the queue's mean fell from about 94 KiB to
    /// 55–62 KiB, the small-message median round trip from about 1.65 ms to 0.74–0.94 ms and
    /// the drops by half, for 2–4 % of the port's utilisation (three runs each).
    pub fn damped_timers() -> DcqcnParams {
        DcqcnParams {
            rpg_time_reset: Duration::from_micros(300),
            ..DcqcnParams::paper_timers()
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

/// Alpha's scale in the parameters and in [`ReactionPoint::state`]: 1024 is 1.
const ALPHA_ONE: u32 = 1024;

/// Alpha is kept with this many bits below the parameters' 1/1024ths. In 1/1024ths each
/// update without a CNP, `g * alpha / 1024`, rounds down, and so takes at least 1/1024 off
/// however small alpha is: below a quarter (with `dce_tcp_g` 1020, a decay of 4/1024 per
/// update at most otherwise) that is more than a CNP's rise of `1024 - g` every few updates
/// gives back. Alpha then fell to zero under CNPs that came fewer than one update in four
/// (every 220 µs or more with the paper's 55 µs), and a cut by `alpha / 2` took nothing:
/// measured in the congesting lab (4→1, every frame marked above 64 KiB queued), each
/// sender's QP showed alpha 0 to 2 in 1024ths after ten thousand CNPs, at 1.5 to 5 times
/// its share of the port, and the queue stood above the marking threshold for tens of
/// milliseconds at a time. The DCQCN paper's alpha is a real number; with ten more bits
/// the rounding costs less than a thousandth of a CNP's rise per update.
const ALPHA_EXTRA_BITS: u32 = 10;

/// [`ALPHA_ONE`] in alpha's kept scale.
const ALPHA_FINE_ONE: u64 = (ALPHA_ONE as u64) << ALPHA_EXTRA_BITS;

/// The rate limiter a QP gets at its first CNP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Limiter {
    /// The current rate (bits per second).
    rate: u64,
    /// The target rate.
    target: u64,
    /// In 1/2^20ths ([`ALPHA_EXTRA_BITS`] below the parameters' 1/1024ths).
    alpha: u64,
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
                    alpha: u64::from(p.initial_alpha_value.min(ALPHA_ONE - 1)) << ALPHA_EXTRA_BITS,
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

    /// What the QP sent lately, `sending`, bounds its rate at a CNP (call it after the
    /// CNP): a rate above what the QP sends does not hold it back, and a cut of it does not
    /// either. DCQCN's reaction point sits on a NIC that sends at the limiter's rate
    /// whenever it has anything to send; a QP of software behind a window (the transport's,
    /// which a queue's round trip narrows) sends less, and without this bound its rate
    /// floats where cuts and rises balance, far above what it sends, and no CNP slows it.
    /// The target is bounded too, at every CNP, so that fast recovery returns to no more
    /// than what was sent (the DCQCN paper's cut sets the target to the current rate each
    /// time; RFC 7661 likewise keeps a window from growing past what a sender uses).
    /// Bounding it only at the first CNP of a round of them kept NVIDIA's target rule but
    /// gave back most of what the bound buys (4→1 with ECN, three runs: drops 215 to 691,
    /// the queue's mean 42 to 44 KiB, against 36 to 207 and 32 to 39 bounding it each
    /// time).
    pub fn bound_by_sending(&mut self, now: Instant, sending: Rate) {
        self.advance(now);
        let min = self.params.rpg_min_rate.bits_per_sec().min(self.max_rate);
        if let Some(l) = &mut self.limiter {
            let sending = sending.bits_per_sec().max(min);
            l.rate = l.rate.min(sending);
            l.target = l.target.min(sending);
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

    /// Alpha (in 1/1024ths, rounded down) and the target rate, as last evaluated; `None`
    /// when unlimited.
    pub fn state(&self) -> Option<(u32, Rate)> {
        self.limiter.map(|l| {
            (
                (l.alpha >> ALPHA_EXTRA_BITS) as u32,
                Rate::from_bits_per_sec(l.target),
            )
        })
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
                let g = u64::from(p.dce_tcp_g);
                let kept = g * l.alpha / u64::from(ALPHA_ONE);
                l.alpha = if l.alpha_cnp {
                    (kept + ((u64::from(ALPHA_ONE) - g) << ALPHA_EXTRA_BITS))
                        .min(ALPHA_FINE_ONE - (1 << ALPHA_EXTRA_BITS))
                } else {
                    kept
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
        let by_alpha =
            ((u128::from(l.rate) * u128::from(l.alpha)) >> (p.rpg_gd + ALPHA_EXTRA_BITS)) as u64;
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
mod tests;
