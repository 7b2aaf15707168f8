//! Adaptive waiting for the bench's own threads: spin a little, then yield the core, and
//! give up with an error when nothing moves for too long.
//!
//! On a machine with few cores the daemons' pollers and the bench's threads share them: a
//! thread that spun forever would steal the core from the very poller it waits for.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};

/// How long a wait may see no progress before the bench gives up on the point.
pub(crate) const STALL: Duration = Duration::from_secs(10);

/// Spin for `spin` after the last progress, then `sched_yield` on every idle round; fail
/// after [`STALL`] without progress.
#[derive(Debug)]
pub(crate) struct Idle {
    spin: Duration,
    since: Option<Instant>,
}

impl Idle {
    pub(crate) fn new(spin: Duration) -> Idle {
        Idle { spin, since: None }
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
            std::thread::yield_now();
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

/// Pins the calling thread to `core` (`None`: leaves it where the scheduler puts it).
/// Returns whether it is pinned.
pub(crate) fn pin(core: Option<usize>) -> bool {
    match core {
        Some(id) => core_affinity::set_for_current(core_affinity::CoreId { id }),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_waits_without_error_before_the_stall_limit() {
        let mut idle = Idle::new(Duration::ZERO);
        for _ in 0..100 {
            idle.idle(&|| "nothing".into()).unwrap();
        }
        idle.progress();
        assert!(idle.since.is_none());
        idle.idle(&|| "nothing".into()).unwrap();
        assert!(idle.since.is_some());
    }
}
