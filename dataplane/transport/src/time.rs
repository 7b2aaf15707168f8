//! Time as the transport sees it: a monotonic instant handed in by the caller.
//!
//! The transport has no clock. The engine passes the current time into every `handle_*`
//! and `poll_*` call; the deterministic simulation passes virtual time. Nanoseconds since an
//! arbitrary epoch, never wrapping in practice (584 years).

use core::ops::{Add, Sub};
use core::time::Duration;

/// A point in time, in nanoseconds since an epoch chosen by the caller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant(0);

    /// An instant `nanos` nanoseconds after the epoch.
    pub const fn from_nanos(nanos: u64) -> Instant {
        Instant(nanos)
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        let nanos = u64::try_from(rhs.as_nanos()).unwrap_or(u64::MAX);
        Instant(self.0.saturating_add(nanos))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

/// The local ACK timeout for a 5-bit `timeout` attribute: 4.096 µs × 2^timeout.
/// `0` means "wait forever" and returns `None`.
///
/// IBTA 9.7.6.1.3 (and the `timeout` field of `ibv_qp_attr`).
pub fn ack_timeout(timeout: u8) -> Option<Duration> {
    if timeout == 0 {
        return None;
    }
    let shift = u32::from(timeout.min(31));
    Some(Duration::from_nanos(4096u64 << shift))
}

/// How long a QP without a retransmit timer (`timeout` 0: wait forever, IBTA 9.7.6.1.3)
/// waits for an acknowledgement before it is taken for stalled: its packets in flight stop
/// holding the endpoint's budget of unacknowledged packets and it sends nothing new until
/// the peer answers. The retransmit timeout of `timeout` 14, what ibv_rc_pingpong and
/// perftest use: 67 ms.
pub const STALL_AFTER: Duration = Duration::from_nanos(4096 << 14);

/// The RNR NAK timer for a 5-bit timer code, IBTA table 45 ("Encoding for RNR NAK Timer
/// Field"): 0 is 655.36 ms, 1 is 0.01 ms … 31 is 491.52 ms. The wire crate's
/// [`RnrTimer`](xroce_wire::RnrTimer) holds the table.
pub fn rnr_timer(code: u8) -> Duration {
    xroce_wire::RnrTimer::new(code).duration()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_timeout_follows_the_spec_formula() {
        assert_eq!(ack_timeout(0), None);
        assert_eq!(ack_timeout(1), Some(Duration::from_nanos(8192)));
        // ibv_rc_pingpong and perftest use 14: 4.096 µs × 16384 ≈ 67.1 ms.
        assert_eq!(ack_timeout(14), Some(Duration::from_nanos(67_108_864)));
        assert_eq!(ack_timeout(31), Some(Duration::from_nanos(4096u64 << 31)));
    }

    #[test]
    fn rnr_timer_table_ends() {
        assert_eq!(rnr_timer(0), Duration::from_micros(655_360));
        assert_eq!(rnr_timer(1), Duration::from_micros(10));
        assert_eq!(rnr_timer(31), Duration::from_micros(491_520));
        // Only the low five bits are the code.
        assert_eq!(rnr_timer(0x21), Duration::from_micros(10));
    }

    #[test]
    fn instant_arithmetic_saturates() {
        let t = Instant::from_nanos(10);
        assert_eq!((t + Duration::from_nanos(5)).as_nanos(), 15);
        assert_eq!(Instant::ZERO - t, Duration::ZERO);
        assert_eq!(t - Instant::ZERO, Duration::from_nanos(10));
        assert_eq!((t + Duration::MAX).as_nanos(), u64::MAX);
    }
}
