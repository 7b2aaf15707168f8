//! Adaptive idling for a thread that polls a port.

use std::io;
use std::time::{Duration, Instant};

use super::Receiver;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IdlePhase {
    Spin,
    Yield,
    Sleep,
}

/// Adaptive idling for a poller thread: spin while work is near, then yield the core, then
/// sleep in `poll(2)` on the port until frames arrive. Never spins forever: on a small
/// machine two spinners sharing a core turn microseconds into milliseconds.
#[derive(Clone, Debug)]
pub struct Backoff {
    spin: Duration,
    yield_until: Duration,
    sleep: Duration,
    idle_since: Option<Instant>,
    sleeps: u64,
}

impl Default for Backoff {
    /// Spin 50 µs, yield until 1 ms, then sleep in `poll(2)` 10 ms at a time.
    fn default() -> Self {
        Backoff::new(
            Duration::from_micros(50),
            Duration::from_millis(1),
            Duration::from_millis(10),
        )
    }
}

impl Backoff {
    /// Spin for `spin` after the last work, yield the core until `yield_until`, then sleep
    /// in `poll(2)` for up to `sleep` at a time.
    pub fn new(spin: Duration, yield_until: Duration, sleep: Duration) -> Backoff {
        Backoff {
            spin,
            yield_until,
            sleep,
            idle_since: None,
            sleeps: 0,
        }
    }

    /// The poller did something: start spinning again on the next idle round.
    #[inline]
    pub fn on_work(&mut self) {
        self.idle_since = None;
    }

    /// The poller found nothing to do: spin, yield or sleep on the RX ring of `rx`
    /// (`port.rx()`), depending on how long it has been idle.
    #[inline]
    pub fn on_idle(&mut self, rx: &Receiver) -> io::Result<()> {
        let idle = self.idle_since.get_or_insert_with(Instant::now).elapsed();
        match self.phase(idle) {
            IdlePhase::Spin => std::hint::spin_loop(),
            IdlePhase::Yield => std::thread::yield_now(),
            IdlePhase::Sleep => {
                self.sleeps += 1;
                rx.wait(self.sleep)?;
            }
        }
        Ok(())
    }

    fn phase(&self, idle: Duration) -> IdlePhase {
        if idle < self.spin {
            IdlePhase::Spin
        } else if idle < self.yield_until {
            IdlePhase::Yield
        } else {
            IdlePhase::Sleep
        }
    }

    /// Times the poller went to sleep in `poll(2)`.
    pub fn sleeps(&self) -> u64 {
        self.sleeps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_spins_then_yields_then_sleeps() {
        let backoff = Backoff::default();
        assert_eq!(backoff.phase(Duration::ZERO), IdlePhase::Spin);
        assert_eq!(backoff.phase(Duration::from_micros(49)), IdlePhase::Spin);
        assert_eq!(backoff.phase(Duration::from_micros(50)), IdlePhase::Yield);
        assert_eq!(backoff.phase(Duration::from_micros(999)), IdlePhase::Yield);
        assert_eq!(backoff.phase(Duration::from_millis(1)), IdlePhase::Sleep);
        assert_eq!(backoff.phase(Duration::from_secs(60)), IdlePhase::Sleep);
    }
}
