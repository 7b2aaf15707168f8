//! A delay- and loss-based rate controller, for paths whose switches mark nothing: the
//! sender finds the path's rate from what it sees itself, the round-trip time and losses.
//!
//! It follows Swift (Kumar et al., SIGCOMM 2020) on a rate instead of a window: the
//! queueing delay is the round-trip time above the lowest one seen (the base); below the
//! target delay the rate grows by a fixed step per round trip (and by a larger one after
//! many round trips in a row below it, as DCQCN's hyper increase does), above it the rate
//! is cut in proportion to how far above, `rate *= 1 - beta * (delay - target) / delay`,
//! by at most `max_decrease`, at most once per round trip. A loss (a packet sent again)
//! cuts the rate by `loss_decrease`, at most once per round trip. The rate starts at the
//! line rate, as an RDMA NIC starts a flow, and a rate back at the line rate is unlimited.
//!
//! The delay signal is the smallest of the last `filter` round-trip samples: queueing lasts,
//! while the noise of a host that was busy elsewhere for a moment comes one sample at a
//! time. The base is the smallest sample of the last two `base_epoch`s, so that it follows
//! a path that became longer.

use core::time::Duration;

use xroce_transport::Instant;

use crate::rate::Rate;

/// The delay controller's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DelayParams {
    /// Queueing delay aimed at: the round-trip time above the base (default 100 µs).
    pub target: Duration,
    /// Rate added per round trip below the target (default 20 Mbit/s).
    pub ai_rate: Rate,
    /// Rate added per round trip after `hai_after` round trips in a row below the target
    /// (default 200 Mbit/s).
    pub hai_rate: Rate,
    /// Round trips below the target before the larger step (default 8).
    pub hai_after: u32,
    /// Percent of the relative excess delay a cut takes (Swift's beta; default 80).
    pub beta: u32,
    /// The most a delay cut takes, in percent of the rate (default 50).
    pub max_decrease: u32,
    /// What a loss takes, in percent of the rate (default 50).
    pub loss_decrease: u32,
    /// The lowest rate (default 1 Mbit/s).
    pub min_rate: Rate,
    /// Samples the delay signal is the smallest of (default 2).
    pub filter: usize,
    /// How long a lowest sample stays the base (default 10 s).
    pub base_epoch: Duration,
}

impl Default for DelayParams {
    fn default() -> DelayParams {
        DelayParams {
            target: Duration::from_micros(100),
            ai_rate: Rate::from_mbit(20),
            hai_rate: Rate::from_mbit(200),
            hai_after: 8,
            beta: 80,
            max_decrease: 50,
            loss_decrease: 50,
            min_rate: Rate::from_mbit(1),
            filter: 2,
            base_epoch: Duration::from_secs(10),
        }
    }
}

/// The most samples the delay signal is taken from.
pub const MAX_FILTER: usize = 8;

/// One queue pair's delay controller.
#[derive(Clone, Debug)]
pub struct DelayControl {
    params: DelayParams,
    max_rate: u64,
    rate: u64,
    /// The lowest sample of this epoch and of the last.
    base: [Option<Duration>; 2],
    epoch_start: Option<Instant>,
    recent: [Duration; MAX_FILTER],
    samples: usize,
    /// When the rate was last cut and the round trip then: no second cut within it.
    last_cut: Option<(Instant, Duration)>,
    below: u32,
}

/// What one round-trip sample did to the rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DelayVerdict {
    /// The rate grew.
    Increase,
    /// The rate was cut.
    Cut,
    /// Nothing: a cut came less than a round trip ago, or not enough samples yet.
    Hold,
}

impl DelayControl {
    /// A controller at the line rate.
    pub fn new(params: DelayParams, line_rate: Rate) -> DelayControl {
        let max = line_rate.bits_per_sec().max(1);
        DelayControl {
            params: DelayParams {
                filter: params.filter.clamp(1, MAX_FILTER),
                ..params
            },
            max_rate: max,
            rate: max,
            base: [None; 2],
            epoch_start: None,
            recent: [Duration::ZERO; MAX_FILTER],
            samples: 0,
            last_cut: None,
            below: 0,
        }
    }

    /// The rate.
    pub fn rate(&self) -> Rate {
        Rate::from_bits_per_sec(self.rate)
    }

    /// Whether the rate is below the line rate.
    pub fn is_limited(&self) -> bool {
        self.rate < self.max_rate
    }

    /// The base round-trip time, once there is a sample.
    pub fn base_rtt(&self) -> Option<Duration> {
        match self.base {
            [Some(a), Some(b)] => Some(a.min(b)),
            [a, b] => a.or(b),
        }
    }

    /// A round-trip time measured at `now`.
    pub fn on_rtt(&mut self, now: Instant, rtt: Duration) -> DelayVerdict {
        let p = self.params;
        let start = *self.epoch_start.get_or_insert(now);
        if now.saturating_duration_since(start) >= p.base_epoch {
            self.base = [None, self.base[0]];
            self.epoch_start = Some(now);
        }
        self.base[0] = Some(self.base[0].map_or(rtt, |b| b.min(rtt)));
        self.recent[self.samples % p.filter] = rtt;
        self.samples += 1;
        if self.samples < p.filter {
            return DelayVerdict::Hold;
        }
        let signal = self.recent[..p.filter].iter().copied().min().unwrap_or(rtt);
        // NOTE(unwrap): a sample was just recorded, so there is a base.
        let base = self.base_rtt().unwrap_or(rtt);
        let delay = signal.saturating_sub(base);
        if delay <= p.target {
            self.below = self.below.saturating_add(1);
            let step = if self.below > p.hai_after {
                p.hai_rate
            } else {
                p.ai_rate
            };
            self.rate = (self.rate + step.bits_per_sec()).min(self.max_rate);
            return DelayVerdict::Increase;
        }
        if self.recently_cut(now) {
            return DelayVerdict::Hold;
        }
        let excess = delay - p.target;
        // rate *= 1 - beta * excess / delay, at most max_decrease.
        let by_delay = u128::from(self.rate) * u128::from(p.beta) * excess.as_nanos()
            / (100 * delay.as_nanos().max(1));
        let at_most = u128::from(self.rate) * u128::from(p.max_decrease.min(100)) / 100;
        self.cut_by(by_delay.min(at_most) as u64, now, signal);
        DelayVerdict::Cut
    }

    /// A loss was seen at `now` (a packet sent again). `true` if the rate was cut.
    pub fn on_loss(&mut self, now: Instant) -> bool {
        if self.recently_cut(now) {
            return false;
        }
        let by = u128::from(self.rate) * u128::from(self.params.loss_decrease.min(100)) / 100;
        let rtt = self.recent_rtt();
        self.cut_by(by as u64, now, rtt);
        true
    }

    fn recent_rtt(&self) -> Duration {
        if self.samples == 0 {
            return Duration::ZERO;
        }
        self.recent[(self.samples - 1) % self.params.filter]
    }

    fn recently_cut(&self, now: Instant) -> bool {
        self.last_cut
            .is_some_and(|(at, rtt)| now.saturating_duration_since(at) < rtt)
    }

    fn cut_by(&mut self, by: u64, now: Instant, rtt: Duration) {
        let min = self.params.min_rate.bits_per_sec().min(self.max_rate);
        self.rate = self.rate.saturating_sub(by).max(min);
        self.last_cut = Some((now, rtt));
        self.below = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GBIT: Rate = Rate::from_mbit(1000);

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    fn at(micros: u64) -> Instant {
        Instant::from_nanos(micros * 1000)
    }

    fn single_sample() -> DelayParams {
        DelayParams {
            filter: 1,
            ..DelayParams::default()
        }
    }

    #[test]
    fn below_the_target_the_rate_grows_by_steps_then_faster() {
        let mut d = DelayControl::new(single_sample(), GBIT);
        d.on_loss(at(0));
        assert_eq!(d.rate(), Rate::from_mbit(500));
        let mut t = 100;
        for i in 1..=8 {
            assert_eq!(d.on_rtt(at(t), us(20)), DelayVerdict::Increase);
            assert_eq!(d.rate(), Rate::from_mbit(500 + 20 * i));
            t += 20;
        }
        d.on_rtt(at(t), us(20));
        assert_eq!(d.rate(), Rate::from_mbit(500 + 160 + 200));
        d.on_rtt(at(t + 20), us(20));
        assert_eq!(d.rate(), GBIT, "never above the line rate");
        assert!(!d.is_limited());
    }

    #[test]
    fn above_the_target_the_cut_follows_the_excess_at_most_once_per_round_trip() {
        let mut d = DelayControl::new(single_sample(), GBIT);
        assert_eq!(d.on_rtt(at(0), us(20)), DelayVerdict::Increase);
        assert_eq!(d.base_rtt(), Some(us(20)));
        // Delay 200 µs above the base, 100 above the target: cut by 0.8 * 100 / 200 = 40 %.
        assert_eq!(d.on_rtt(at(10), us(220)), DelayVerdict::Cut);
        assert_eq!(d.rate(), Rate::from_mbit(600));
        // Within the round trip of that cut (220 µs): held.
        assert_eq!(d.on_rtt(at(200), us(220)), DelayVerdict::Hold);
        assert_eq!(d.rate(), Rate::from_mbit(600));
        // A huge delay: the cut stops at half.
        assert_eq!(d.on_rtt(at(300), us(20_020)), DelayVerdict::Cut);
        assert_eq!(d.rate(), Rate::from_mbit(300));
    }

    #[test]
    fn losses_cut_once_per_round_trip_and_never_below_the_minimum() {
        let mut d = DelayControl::new(single_sample(), GBIT);
        d.on_rtt(at(0), us(50));
        assert!(d.on_loss(at(100)));
        assert!(!d.on_loss(at(120)), "the same round trip");
        assert_eq!(d.rate(), Rate::from_mbit(500));
        let mut t = 200;
        for _ in 0..40 {
            d.on_loss(at(t));
            t += 100;
        }
        assert_eq!(d.rate(), Rate::from_mbit(1));
    }

    #[test]
    fn the_filter_ignores_a_lone_spike_but_not_a_lasting_queue() {
        let mut d = DelayControl::new(DelayParams::default(), GBIT);
        d.on_loss(at(0));
        d.on_rtt(at(100), us(20));
        d.on_rtt(at(120), us(20));
        let before = d.rate();
        // One sample of a host that was busy for 2 ms: the smallest of the last two is 20.
        assert_eq!(d.on_rtt(at(140), us(2000)), DelayVerdict::Increase);
        assert!(d.rate() > before);
        // Two in a row: a queue.
        assert_eq!(d.on_rtt(at(2200), us(1000)), DelayVerdict::Cut);
    }

    #[test]
    fn the_base_follows_a_longer_path_after_two_epochs() {
        let p = DelayParams {
            base_epoch: Duration::from_millis(1),
            filter: 1,
            ..DelayParams::default()
        };
        let mut d = DelayControl::new(p, GBIT);
        d.on_rtt(at(0), us(10));
        d.on_rtt(at(1000), us(300));
        assert_eq!(d.base_rtt(), Some(us(10)));
        d.on_rtt(at(2000), us(300));
        assert_eq!(d.base_rtt(), Some(us(300)));
    }
}
