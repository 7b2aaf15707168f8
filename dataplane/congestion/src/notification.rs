//! DCQCN's notification point: the receiver of packets that a switch marked
//! congestion-experienced (ECN CE) answers with congestion notification packets (CNPs) to
//! their sender, at most one per queue pair per interval.
//!
//! NVIDIA's adapters call the interval `min_time_between_cnps`; DCQCN's paper uses 50 µs,
//! the default here. Marks that arrive within the interval are counted and answered by
//! nothing: the reaction point reacts to CNPs, not to each mark.

use core::time::Duration;

use xroce_transport::Instant;

/// The interval between two CNPs for one queue pair, by default.
pub const DEFAULT_CNP_INTERVAL: Duration = Duration::from_micros(50);

/// One queue pair's notification point.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NotificationPoint {
    last_cnp: Option<Instant>,
}

impl NotificationPoint {
    /// A CE-marked packet arrived at `now`: `true` if a CNP goes out for it (none went out
    /// in the last `interval`).
    pub fn on_marked(&mut self, now: Instant, interval: Duration) -> bool {
        if self
            .last_cnp
            .is_some_and(|last| now.saturating_duration_since(last) < interval)
        {
            return false;
        }
        self.last_cnp = Some(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(micros: u64) -> Instant {
        Instant::from_nanos(micros * 1000)
    }

    #[test]
    fn at_most_one_cnp_per_interval() {
        let mut np = NotificationPoint::default();
        let sent: Vec<u64> = (0..300)
            .step_by(7)
            .filter(|&t| np.on_marked(at(t), DEFAULT_CNP_INTERVAL))
            .collect();
        // Marks every 7 µs: a CNP at 0, then at the first mark 50 µs or more after the last.
        assert_eq!(sent, vec![0, 56, 112, 168, 224, 280]);
    }

    #[test]
    fn a_zero_interval_answers_every_mark() {
        let mut np = NotificationPoint::default();
        assert!((0..10).all(|t| np.on_marked(at(t), Duration::ZERO)));
    }
}
