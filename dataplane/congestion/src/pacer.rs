//! A queue pair's rate limiter: a token bucket in front of its transmit turns.
//!
//! Each frame the QP sends takes its length from the bucket, which refills at the QP's
//! rate up to `burst` bytes. A bucket in debt says when the debt is paid: the QP sends
//! nothing before then. The burst lets a poller that was away from its core for a moment
//! catch up on what the rate allowed meanwhile, and keeps a QP from waiting for every
//! frame; it is also how far ahead of its rate a QP may get, so switches see bursts of at
//! most that many bytes.
//!
//! Tokens are kept in bit-nanoseconds (bits × 10^9), so refills at any rate over any
//! interval are exact.

use core::time::Duration;

use xroce_transport::Instant;

use crate::rate::Rate;

/// The bucket's size by default: 16 KiB, sixteen 1 KiB-MTU packets.
pub const DEFAULT_BURST: u64 = 16 << 10;

const SCALE: i128 = 8 * 1_000_000_000;

/// One QP's token bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pacer {
    /// Bits × 10^9; negative while in debt.
    tokens: i128,
    last: Instant,
    burst: u64,
}

impl Pacer {
    /// A full bucket of `burst` bytes.
    pub fn new(burst: u64) -> Pacer {
        Pacer {
            tokens: i128::from(burst) * SCALE,
            last: Instant::ZERO,
            burst,
        }
    }

    /// The QP sent a frame of `bytes` at `now`, at `rate`: when it may send the next one,
    /// `None` if at once. `None` for no rate at all (`Rate::ZERO` means unlimited here:
    /// the bucket is kept full).
    pub fn on_sent(&mut self, now: Instant, bytes: u64, rate: Rate) -> Option<Instant> {
        let full = i128::from(self.burst) * SCALE;
        if rate == Rate::ZERO {
            self.tokens = full;
            self.last = now;
            return None;
        }
        let elapsed = now.saturating_duration_since(self.last);
        self.last = now;
        let refill = i128::from(rate.bits_per_sec()) * elapsed.as_nanos() as i128;
        self.tokens = (self.tokens + refill).min(full);
        self.tokens -= i128::from(bytes) * SCALE;
        if self.tokens >= 0 {
            return None;
        }
        let rate = i128::from(rate.bits_per_sec());
        let wait = (-self.tokens + rate - 1) / rate;
        Some(now + Duration::from_nanos(u64::try_from(wait).unwrap_or(u64::MAX)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(nanos: u64) -> Instant {
        Instant::from_nanos(nanos)
    }

    #[test]
    fn a_full_bucket_sends_its_burst_then_paces_at_the_rate() {
        let gbit = Rate::from_mbit(1000);
        let mut p = Pacer::new(4000);
        for _ in 0..4 {
            assert_eq!(p.on_sent(at(0), 1000, gbit), None);
        }
        // The fifth 1000-byte frame puts it 1000 bytes in debt: 8 µs at 1 Gbit/s.
        assert_eq!(p.on_sent(at(0), 1000, gbit), Some(at(8000)));
        // Sending when allowed keeps it at exactly the rate.
        let mut t = 8000;
        for _ in 0..100 {
            let next = p.on_sent(at(t), 1000, gbit).unwrap();
            assert_eq!(next, at(t + 8000));
            t += 8000;
        }
    }

    #[test]
    fn an_idle_qp_refills_up_to_the_burst_only() {
        let r = Rate::from_mbit(100);
        let mut p = Pacer::new(2000);
        p.on_sent(at(0), 2000, r);
        // A second of silence refills 2000 bytes, not 12.5 MB.
        assert_eq!(p.on_sent(at(1_000_000_000), 2000, r), None);
        assert_eq!(
            p.on_sent(at(1_000_000_000), 100, r),
            Some(at(1_000_000_000 + 8000))
        );
    }

    #[test]
    fn rate_zero_is_unlimited_and_refills() {
        let mut p = Pacer::new(1000);
        for _ in 0..10 {
            assert_eq!(p.on_sent(at(5), 1500, Rate::ZERO), None);
        }
        assert_eq!(p.on_sent(at(5), 1000, Rate::from_mbit(1)), None);
    }

    #[test]
    fn odd_rates_do_not_drift() {
        // 3 Mbit/s and 333-byte frames: 888 µs each, exactly, over many frames.
        let r = Rate::from_bits_per_sec(3_000_000);
        let mut p = Pacer::new(0);
        let mut t = 0;
        let mut next = p.on_sent(at(0), 333, r).unwrap();
        for _ in 0..10_000 {
            t = next.as_nanos();
            next = p.on_sent(at(t), 333, r).unwrap();
        }
        assert_eq!(next.as_nanos(), t + 888_000);
        assert_eq!(t, 10_000 * 888_000);
    }
}
