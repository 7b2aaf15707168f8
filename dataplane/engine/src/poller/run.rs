//! The run loop and how an idle poller waits.
//!
//! A poller that spins keeps a core from the applications that share it, and one that
//! sleeps too soon makes every round trip pay a wake-up: after work, an idle poller spins
//! only as long as told (`--spin-us`, none by default), then yields its core until 1 ms has
//! passed without work, then sleeps in `ppoll(2)` on its socket, its doorbell and its next
//! timer. Before sleeping it says so in its word of the wake page, so that applications
//! ring its doorbell, and takes a last look at every ring: a post that raced with the word
//! is seen then, and nothing posted waits for a doorbell that never comes.

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU32, Ordering, fence};
use std::time::Duration;

use tracing::warn;
use verbs_shm::contract;
use xroce_transport::Instant;

use super::Poller;
use crate::bells::FULL_SCAN_EVERY;
use crate::xsk::RX_BATCH;

/// How an idle poller waits for work: spin, then yield the core, then sleep in `ppoll(2)`.
/// On a machine with few cores shared with the applications, spinning steals the core the
/// application needs; on a dedicated core it buys the lowest latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdlePolicy {
    /// Spin this long after the last work.
    pub spin: Duration,
    /// Then yield the core until this long after the last work; then sleep.
    pub yield_until: Duration,
    /// Read every ring this often even when no post bit says so (zero: only before
    /// sleeping). A safety net for applications that do not set their bits.
    pub full_scan: Duration,
}

impl Default for IdlePolicy {
    fn default() -> IdlePolicy {
        IdlePolicy {
            spin: Duration::ZERO,
            yield_until: Duration::from_millis(1),
            full_scan: FULL_SCAN_EVERY,
        }
    }
}

/// The longest sleep (so the poller notices a stop even with no traffic).
const MAX_SLEEP: Duration = Duration::from_millis(100);

impl Poller {
    pub(super) fn now(&self) -> Instant {
        Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    fn sleeping_word(&self) -> &AtomicU32 {
        let at = self.cfg.index * core::mem::size_of::<contract::PaddedWord>();
        // NOTE(unwrap): the wake page has MAX_POLLERS words and index < MAX_POLLERS.
        self.cfg
            .wake_page
            .u32_at(at)
            .expect("poller word inside the wake page")
    }

    /// Runs until [`super::Command::Stop`].
    pub fn run(mut self) {
        if let Some(core) = self.cfg.core
            && !core_affinity::set_for_current(core)
        {
            warn!(
                "poller {}: could not pin to core {}",
                self.cfg.index, core.id
            );
        }
        // When the poller last found work, by the clock reading each pass takes anyway: an
        // idle pass reads the clock once, not once more to time its idleness.
        let mut idle_since: Option<Instant> = None;
        loop {
            let mut work = 0usize;
            match self.commands() {
                Some(n) => work += n,
                None => return,
            }
            let now = self.now();
            let received = self.receive(now);
            work += received;
            work += self.rings.pull(&mut self.endpoint, now);
            // Timers wait while the RX ring still holds frames: an acknowledgement that has
            // arrived but not been read yet must not count as lost (a starved poller would
            // otherwise retransmit, and exhaust retries, on answers sitting in its ring).
            if received < RX_BATCH && self.endpoint.poll_timeout().is_some_and(|t| t <= now) {
                self.endpoint.handle_timeout(now, &mut self.mem);
                work += 1;
            }
            work += self.transmit(now);
            work += self.deliver(now);
            // Frames still on the TX ring are work: in copy mode the kernel sends only when
            // kicked (at most 32 frames a kick), and each pass kicks it again.
            if self.port.tx().in_flight() > 0 {
                work += 1;
            }
            if work > 0 {
                idle_since = None;
                continue;
            }
            let idle = now.saturating_duration_since(*idle_since.get_or_insert(now));
            if idle < self.cfg.idle.spin {
                std::hint::spin_loop();
            } else if idle < self.cfg.idle.yield_until {
                std::thread::yield_now();
            } else if self.sleep() > 0 {
                // The last look before sleeping found work: back to polling.
                idle_since = None;
            }
        }
    }

    /// Sleeps until a frame, a doorbell, a command or the next timer, unless the last look
    /// finds work; returns how much it found.
    fn sleep(&mut self) -> usize {
        let word = self.sleeping_word();
        word.store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        // A post that raced with the store above is visible now.
        let now = self.now();
        // Every ring, bits or not: nothing posted may wait for a doorbell that never comes.
        let pending = self.rings.pull_every_ring(&mut self.endpoint, now)
            + self.transmit(now)
            + self.deliver(now);
        if pending == 0
            && self.cfg.commands.is_empty()
            && !self.cfg.handoff.pending()
            && self.raw_tx.is_empty()
        {
            let timeout = match self.endpoint.poll_timeout() {
                Some(t) => (t.saturating_duration_since(self.now())).min(MAX_SLEEP),
                None => MAX_SLEEP,
            };
            // To the microsecond: a retransmission timer or a pacing deadline a fraction of a
            // millisecond away is kept, not rounded up to `poll(2)`'s millisecond.
            let timeout = nix::sys::time::TimeSpec::from_duration(timeout);
            let mut fds = [
                nix::poll::PollFd::new(self.port.as_fd(), nix::poll::PollFlags::POLLIN),
                nix::poll::PollFd::new(self.cfg.doorbell.as_fd(), nix::poll::PollFlags::POLLIN),
            ];
            let _ = nix::poll::ppoll(&mut fds, Some(timeout), None);
            self.counters.idle_sleeps += 1;
        }
        self.sleeping_word().store(0, Ordering::SeqCst);
        // Doorbells rung while the word was set (whether or not it slept): drained, so the
        // next sleep does not wake for them.
        verbs_shm::sys::eventfd_drain(self.cfg.doorbell.as_fd());
        pending
    }
}
