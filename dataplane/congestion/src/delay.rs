//! A delay- and loss-based rate controller, for paths whose switches mark nothing: the
//! sender finds the path's rate from what it sees itself, the round-trip time and losses.
//!
//! Cuts follow Swift (Kumar et al., SIGCOMM 2020) on a rate instead of a window: the
//! queueing delay is the round-trip time above the base (the lowest one seen); above the
//! target delay the rate is cut in proportion to how far above, `rate *= 1 - beta * (delay
//! - target) / delay`, by at most `max_decrease`, at most once per round trip. A loss (a
//! packet sent again) cuts the rate by `loss_decrease`, at most once per round trip.
//!
//! Increases follow DCQCN's timer, because round-trip samples come only as often as the
//! transport asks for acknowledgements, which at a low rate is seldom: every
//! `increase_period` or round trip (the last sample), whichever is longer, without a cut,
//! the rate grows by `ai_rate`, and after `hai_after` such periods in a row by `hai_rate`
//! (a step per round trip, as Swift's additive increase: a step per fixed period would
//! grow a flow behind a deep queue faster than its own signal can stop it). A sample above the target stops the increases for four
//! times the longer of its round trip and `increase_period` (or until a sample below it):
//! news of a queue holds the rate while it is news, but a flow slowed so far that its
//! samples come seldom, or stopped for a retransmission timeout, is not held forever by an
//! old one.
//!
//! A delay cut starts from the rate the path delivered the flow's packets at over the last
//! round trip when that is lower than the rate: a queue that grows delivers each flow its
//! share of the bottleneck, so a flow that started at ten times the bottleneck's rate comes
//! down to its share in one cut instead of a cut per round trip (as BBR reads the
//! bottleneck from the delivery rate). A loss cut does not: a flow that sent little
//! delivered little, and a loss says nothing of its share.
//!
//! The delay signal is the smallest of the last `filter` round-trip samples: queueing lasts,
//! while the noise of a host that was busy elsewhere for a moment comes one sample at a
//! time. The base is the smallest sample of the last two `base_epoch`s, so that it follows
//! a path that became longer, and never more than `base_max`: a flow that starts at the
//! line rate into a slower bottleneck takes its first samples behind the queue it built
//! itself, and would otherwise take that queue for the path.
//!
//! The rate starts at the line rate, as an RDMA NIC starts a flow, and a rate back at the
//! line rate is no limit.
//!
//! **Losses alone** ([`DelayParams::loss_only`], what [`Algorithm::Auto`] runs after a queue
//! pair's first loss): round-trip samples still set the length of a period and of the
//! once-per-round-trip guard, but no sample cuts or holds the rate; a loss cuts it, from the
//! delivery rate when that is lower (as TCP halves what was in flight, not a window it never
//! filled). On a host whose pollers share cores, round trips stretched by the scheduler look
//! exactly like a queue, and a controller that believed them halved a clean path's
//! throughput; a loss, rare on a clean path, costs a retransmission whatever its cause.
//!
//! [`Algorithm::Auto`]: crate::Algorithm::Auto

use core::time::Duration;

use xroce_transport::Instant;

use crate::rate::Rate;

/// The delay controller's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DelayParams {
    /// Queueing delay aimed at: the round-trip time above the base (default 100 µs).
    pub target: Duration,
    /// Time between increases, at least (default 100 µs; a longer round trip is longer).
    pub increase_period: Duration,
    /// Rate added per period (default 10 Mbit/s).
    pub ai_rate: Rate,
    /// Rate added per period after `hai_after` periods in a row (default 100 Mbit/s).
    pub hai_rate: Rate,
    /// Periods without congestion before the larger step (default 10).
    pub hai_after: u32,
    /// Percent of the relative excess delay a cut takes (Swift's beta; default 80).
    pub beta: u32,
    /// The most a delay cut takes, in percent of the rate (default 50).
    pub max_decrease: u32,
    /// What a loss takes, in percent of the rate (default 50).
    pub loss_decrease: u32,
    /// The lowest rate (default 1 Mbit/s).
    pub min_rate: Rate,
    /// Samples the delay signal is the smallest of (default 1: each sample alone).
    pub filter: usize,
    /// How long a lowest sample stays the base (default 10 s).
    pub base_epoch: Duration,
    /// The highest base round-trip time believed (default 100 µs: a data centre's).
    pub base_max: Duration,
    /// React to losses alone: samples never cut (default `false`; see the module
    /// documentation).
    pub loss_only: bool,
}

impl Default for DelayParams {
    fn default() -> DelayParams {
        DelayParams {
            target: Duration::from_micros(100),
            increase_period: Duration::from_micros(100),
            ai_rate: Rate::from_mbit(10),
            hai_rate: Rate::from_mbit(100),
            hai_after: 10,
            beta: 80,
            max_decrease: 50,
            loss_decrease: 50,
            min_rate: Rate::from_mbit(1),
            filter: 1,
            base_epoch: Duration::from_secs(10),
            base_max: Duration::from_micros(100),
            loss_only: false,
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
    /// The last sample was above the target: no increase until then (or a sample below).
    congested_until: Option<Instant>,
    /// The start of the current increase period, and periods in a row without congestion.
    period_start: Option<Instant>,
    quiet_periods: u32,
    /// The rate the path last delivered the flow's packets at.
    delivered: Option<u64>,
}

/// What one round-trip sample did to the rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DelayVerdict {
    /// Below the target.
    Fine,
    /// Above it: the rate was cut.
    Cut,
    /// Above it, but a cut came less than a round trip ago.
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
            congested_until: None,
            period_start: None,
            quiet_periods: 0,
            delivered: None,
        }
    }

    /// The rate at `now` (the increases due until then applied).
    pub fn rate(&mut self, now: Instant) -> Rate {
        self.advance(now);
        Rate::from_bits_per_sec(self.rate)
    }

    /// The rate as last evaluated.
    pub fn last_rate(&self) -> Rate {
        Rate::from_bits_per_sec(self.rate)
    }

    /// Whether the rate is below the line rate.
    pub fn is_limited(&self) -> bool {
        self.rate < self.max_rate
    }

    /// The base round-trip time, once there is a sample.
    pub fn base_rtt(&self) -> Option<Duration> {
        let lowest = match self.base {
            [Some(a), Some(b)] => Some(a.min(b)),
            [a, b] => a.or(b),
        };
        lowest.map(|b| b.min(self.params.base_max))
    }

    /// The rate the path delivered the flow's packets at over the last round trip (the
    /// acknowledged bytes over the time they took).
    pub fn on_delivered(&mut self, rate: Rate) {
        self.delivered = Some(rate.bits_per_sec());
    }

    /// A round-trip time measured at `now`.
    pub fn on_rtt(&mut self, now: Instant, rtt: Duration) -> DelayVerdict {
        self.advance(now);
        let p = self.params;
        let start = *self.epoch_start.get_or_insert(now);
        if now.saturating_duration_since(start) >= p.base_epoch {
            self.base = [None, self.base[0]];
            self.epoch_start = Some(now);
        }
        self.base[0] = Some(self.base[0].map_or(rtt, |b| b.min(rtt)));
        self.recent[self.samples % p.filter] = rtt;
        self.samples += 1;
        let signal = self.recent[..self.samples.min(p.filter)]
            .iter()
            .copied()
            .min()
            .unwrap_or(rtt);
        let base = self.base_rtt().unwrap_or(rtt);
        let delay = signal.saturating_sub(base);
        if p.loss_only || delay <= p.target {
            self.congested_until = None;
            return DelayVerdict::Fine;
        }
        self.congested_until = Some(now + rtt.max(p.increase_period) * 4);
        self.period_start = Some(now);
        if self.recently_cut(now) {
            return DelayVerdict::Hold;
        }
        let excess = delay - p.target;
        // rate *= 1 - beta * excess / delay, at most max_decrease.
        let from = u128::from(self.cut_from());
        let by_delay =
            from * u128::from(p.beta) * excess.as_nanos() / (100 * delay.as_nanos().max(1));
        let at_most = from * u128::from(p.max_decrease.min(100)) / 100;
        self.cut_to((from - by_delay.min(at_most)) as u64, now, signal);
        DelayVerdict::Cut
    }

    /// A loss was seen at `now` (a packet sent again). `true` if the rate was cut.
    pub fn on_loss(&mut self, now: Instant) -> bool {
        self.advance(now);
        if self.recently_cut(now) {
            return false;
        }
        let from = u128::from(if self.params.loss_only {
            self.cut_from()
        } else {
            self.rate
        });
        let keep = from * u128::from(100 - self.params.loss_decrease.min(100)) / 100;
        let rtt = self.recent_rtt();
        self.cut_to(keep as u64, now, rtt);
        true
    }

    /// Applies the increases due until `now`.
    fn advance(&mut self, now: Instant) {
        let p = self.params;
        let period = p
            .increase_period
            .max(self.recent_rtt())
            .max(Duration::from_nanos(1));
        let Some(start) = self.period_start else {
            self.period_start = Some(now);
            return;
        };
        if let Some(until) = self.congested_until {
            if now < until {
                self.period_start = Some(now);
                return;
            }
            self.congested_until = None;
            self.period_start = Some(start.max(until));
            return self.advance(now);
        }
        let elapsed = now.saturating_duration_since(start);
        let periods = (elapsed.as_nanos() / period.as_nanos()) as u64;
        if periods == 0 {
            return;
        }
        self.period_start =
            Some(start + Duration::from_nanos(periods.saturating_mul(period.as_nanos() as u64)));
        for _ in 0..periods.min(u64::from(p.hai_after) + 1) {
            if self.rate >= self.max_rate {
                break;
            }
            self.quiet_periods = self.quiet_periods.saturating_add(1);
            let step = if self.quiet_periods > p.hai_after {
                p.hai_rate
            } else {
                p.ai_rate
            };
            self.rate = (self.rate + step.bits_per_sec()).min(self.max_rate);
        }
        let left = periods.saturating_sub(u64::from(p.hai_after) + 1);
        if left > 0 && self.rate < self.max_rate {
            // Long quiet: the rest all at the larger step, at once.
            let add = u128::from(p.hai_rate.bits_per_sec()) * u128::from(left);
            self.rate = (u128::from(self.rate) + add).min(u128::from(self.max_rate)) as u64;
            self.quiet_periods = self.quiet_periods.saturating_add(left as u32);
        }
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

    /// What a delay cut starts from: the rate, or the delivery rate when lower.
    fn cut_from(&self) -> u64 {
        self.delivered.map_or(self.rate, |d| d.clamp(1, self.rate))
    }

    fn cut_to(&mut self, rate: u64, now: Instant, rtt: Duration) {
        let min = self.params.min_rate.bits_per_sec().min(self.max_rate);
        self.rate = rate.min(self.rate).max(min);
        self.last_cut = Some((now, rtt));
        self.quiet_periods = 0;
        self.period_start = Some(now);
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
    fn without_congestion_the_rate_grows_each_period_then_faster() {
        let mut d = DelayControl::new(single_sample(), GBIT);
        d.rate(at(0));
        d.on_loss(at(0));
        assert_eq!(d.rate(at(0)), Rate::from_mbit(500));
        assert_eq!(
            d.rate(at(99)),
            Rate::from_mbit(500),
            "not a whole period yet"
        );
        for i in 1..=10 {
            assert_eq!(d.rate(at(i * 100)), Rate::from_mbit(500 + 10 * i));
        }
        assert_eq!(d.rate(at(1100)), Rate::from_mbit(700));
        assert_eq!(d.rate(at(1300)), Rate::from_mbit(900));
        // Many periods at once, capped at the line rate.
        assert_eq!(d.rate(at(100_000)), GBIT);
        assert!(!d.is_limited());
    }

    #[test]
    fn a_sample_above_the_target_stops_the_increases_for_its_round_trip_or_until_one_is_not() {
        let mut d = DelayControl::new(single_sample(), GBIT);
        assert_eq!(d.on_rtt(at(0), us(20)), DelayVerdict::Fine);
        assert_eq!(d.base_rtt(), Some(us(20)));
        d.on_loss(at(10));
        // Within the loss cut's round trip (the last sample, 20 µs): above the target, but
        // held.
        // Held for four of its round trips (200 µs): until 815.
        assert_eq!(d.on_rtt(at(15), us(200)), DelayVerdict::Hold);
        assert_eq!(
            d.rate(at(814)),
            Rate::from_mbit(500),
            "no increase while it is news"
        );
        // Then a step per round trip (200 µs, longer than the period).
        assert_eq!(d.rate(at(1014)), Rate::from_mbit(500));
        assert_eq!(
            d.rate(at(1015)),
            Rate::from_mbit(510),
            "a round trip after it ends"
        );
        // A long queue: cut by half, and held for four round trips (4 ms) ...
        assert_eq!(d.on_rtt(at(1100), us(1000)), DelayVerdict::Cut);
        assert_eq!(d.rate(at(1100)), Rate::from_mbit(255));
        assert_eq!(d.rate(at(1199)), Rate::from_mbit(255));
        // ... unless a sample below the target comes first (and with it a short round
        // trip: a step per period again).
        assert_eq!(d.on_rtt(at(1200), us(30)), DelayVerdict::Fine);
        assert_eq!(d.rate(at(1300)), Rate::from_mbit(265));
    }

    #[test]
    fn above_the_target_the_cut_follows_the_excess_at_most_once_per_round_trip() {
        let mut d = DelayControl::new(single_sample(), GBIT);
        assert_eq!(d.on_rtt(at(0), us(20)), DelayVerdict::Fine);
        assert_eq!(d.base_rtt(), Some(us(20)));
        // Delay 200 µs above the base, 100 above the target: cut by 0.8 * 100 / 200 = 40 %.
        assert_eq!(d.on_rtt(at(10), us(220)), DelayVerdict::Cut);
        assert_eq!(d.rate(at(10)), Rate::from_mbit(600));
        // Within the round trip of that cut (220 µs): held.
        assert_eq!(d.on_rtt(at(200), us(220)), DelayVerdict::Hold);
        assert_eq!(d.rate(at(200)), Rate::from_mbit(600));
        // A huge delay: the cut stops at half.
        assert_eq!(d.on_rtt(at(300), us(20_020)), DelayVerdict::Cut);
        assert_eq!(d.rate(at(300)), Rate::from_mbit(300));
    }

    #[test]
    fn losses_cut_once_per_round_trip_and_never_below_the_minimum() {
        let mut d = DelayControl::new(single_sample(), GBIT);
        d.on_rtt(at(0), us(50));
        assert!(d.on_loss(at(100)));
        assert!(!d.on_loss(at(120)), "the same round trip");
        assert_eq!(d.rate(at(120)), Rate::from_mbit(500));
        let mut t = 200;
        for _ in 0..40 {
            d.on_loss(at(t));
            t += 60;
        }
        assert_eq!(d.rate(at(t)), Rate::from_mbit(1));
    }

    #[test]
    fn losses_alone_ignore_the_delay_and_cut_from_what_was_delivered() {
        let mut d = DelayControl::new(
            DelayParams {
                loss_only: true,
                ..single_sample()
            },
            GBIT,
        );
        assert_eq!(d.on_rtt(at(0), us(20)), DelayVerdict::Fine);
        // Round trips fifty times the base, again and again: neither a cut nor a hold.
        for i in 1..=20 {
            assert_eq!(d.on_rtt(at(i * 1000), us(1000)), DelayVerdict::Fine);
        }
        assert_eq!(d.rate(at(20_000)), GBIT);
        // A loss halves what the path delivered, not the line rate the flow never reached.
        d.on_delivered(Rate::from_mbit(300));
        assert!(d.on_loss(at(20_001)));
        assert_eq!(d.last_rate(), Rate::from_mbit(150));
        // A second loss within the round trip does nothing; one after it cuts again.
        assert!(!d.on_loss(at(20_500)));
        assert!(d.on_loss(at(21_002)));
        assert!(d.last_rate() < Rate::from_mbit(150));
        // Without losses the rate climbs back to the line rate, where it is no limit.
        assert_eq!(d.rate(at(200_000)), GBIT);
        assert!(!d.is_limited());
    }

    #[test]
    fn the_filter_ignores_a_lone_spike_but_not_a_lasting_queue() {
        let p = DelayParams {
            filter: 2,
            ..DelayParams::default()
        };
        let mut d = DelayControl::new(p, GBIT);
        d.on_loss(at(0));
        assert_eq!(d.on_rtt(at(100), us(20)), DelayVerdict::Fine);
        d.on_rtt(at(120), us(20));
        // One sample of a host that was busy for 2 ms: the smallest of the last two is 20.
        assert_eq!(d.on_rtt(at(140), us(2000)), DelayVerdict::Fine);
        // Two in a row: a queue.
        assert_eq!(d.on_rtt(at(2200), us(1000)), DelayVerdict::Cut);
    }

    #[test]
    fn a_cut_starts_from_the_delivery_rate_when_it_is_lower() {
        let mut d = DelayControl::new(single_sample(), Rate::from_mbit(10_000));
        d.on_rtt(at(0), us(20));
        // The path delivered 1 Gbit/s while the flow sent at 10: one cut brings it below 1.
        d.on_delivered(GBIT);
        assert_eq!(d.on_rtt(at(100), us(220)), DelayVerdict::Cut);
        assert_eq!(d.rate(at(100)), Rate::from_mbit(600));
        // Not a loss (a round trip later): it halves the rate.
        d.on_delivered(Rate::from_mbit(100));
        assert!(d.on_loss(at(320)));
        assert_eq!(d.last_rate(), Rate::from_mbit(300));
        // A delivery rate above the rate changes nothing (a 40 % cut of the rate, still
        // held by the first sample's news).
        d.on_delivered(GBIT);
        assert_eq!(d.on_rtt(at(540), us(220)), DelayVerdict::Cut);
        assert_eq!(d.last_rate(), Rate::from_mbit(180));
    }

    #[test]
    fn a_first_sample_behind_a_queue_is_not_the_base() {
        let mut d = DelayControl::new(single_sample(), GBIT);
        assert_eq!(d.on_rtt(at(0), us(500)), DelayVerdict::Cut);
        assert_eq!(d.base_rtt(), Some(us(100)));
        assert!(d.is_limited());
    }

    #[test]
    fn the_base_follows_a_longer_path_after_two_epochs() {
        let p = DelayParams {
            base_epoch: Duration::from_millis(1),
            filter: 1,
            base_max: Duration::from_millis(1),
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
