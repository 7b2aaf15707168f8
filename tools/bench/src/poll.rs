//! Adaptive waiting for the bench's own threads: spin a little, then yield the core (the
//! latency tests) or sleep briefly (the bandwidth tests), and give up with an error when
//! nothing moves for too long.
//!
//! On a machine with few cores the daemons' pollers and the bench's threads share them: a
//! thread that spun forever would steal the core from the very poller it waits for. Even
//! yielding steals a share of it: a poller with work never yields, so the yielding thread
//! only runs when the scheduler preempts the poller, and then for a whole time slice. A
//! bandwidth test's thread has nothing to do until a completion arrives, so it sleeps.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};

/// How long a wait may see no progress before the bench gives up on the point.
pub(crate) const STALL: Duration = Duration::from_secs(10);

/// What an idle thread does once it has spun for its spin time.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Then {
    /// `sched_yield` on every idle round (for latency: it runs again at once when the core
    /// is free).
    Yield,
    /// Sleep this long on every idle round (for bandwidth: the core goes to the pollers).
    Sleep(Duration),
}

/// Spin for `spin` after the last progress, then yield or sleep on every idle round; fail
/// after [`STALL`] without progress.
#[derive(Debug)]
pub(crate) struct Idle {
    spin: Duration,
    then: Then,
    since: Option<Instant>,
}

impl Idle {
    pub(crate) fn new(spin: Duration, then: Then) -> Idle {
        Idle {
            spin,
            then,
            since: None,
        }
    }

    /// Something happened: spin again on the next idle round.
    #[inline]
    pub(crate) fn progress(&mut self) {
        self.since = None;
    }

    /// Nothing happened. `what` names what is awaited, for the error after [`STALL`].
    #[inline]
    pub(crate) fn idle(&mut self, what: &dyn Fn() -> String) -> Result<()> {
        let since = *self.since.get_or_insert_with(Instant::now);
        let idle = since.elapsed();
        if idle < self.spin {
            std::hint::spin_loop();
        } else if idle < STALL {
            match self.then {
                Then::Yield => std::thread::yield_now(),
                Then::Sleep(d) => std::thread::sleep(d),
            }
        } else {
            bail!(
                "no progress for {} s while waiting for {}",
                STALL.as_secs(),
                what()
            );
        }
        if xroce_lab::signals::interrupted() {
            bail!("interrupted");
        }
        Ok(())
    }
}

/// Pins the calling thread to `core` (`None`: leaves it where the scheduler puts it), and
/// makes its sleeps precise (a timer slack of 1 µs instead of 50 µs).
pub(crate) fn place(core: Option<usize>) {
    // Safety: PR_SET_TIMERSLACK takes an integer and touches no memory of ours; a failure
    // only leaves the default slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000u64, 0u64, 0u64, 0u64) };
    if let Some(id) = core {
        core_affinity::set_for_current(core_affinity::CoreId { id });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_waits_without_error_before_the_stall_limit() {
        let mut idle = Idle::new(Duration::ZERO, Then::Yield);
        for _ in 0..100 {
            idle.idle(&|| "nothing".into()).unwrap();
        }
        idle.progress();
        assert!(idle.since.is_none());
        idle.idle(&|| "nothing".into()).unwrap();
        assert!(idle.since.is_some());
    }
}
