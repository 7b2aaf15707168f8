//! The progress line: what is running, how far it is, and how long the bench has run.
//!
//! On a terminal one line on stderr is rewritten four times a second; otherwise each step
//! prints one line when it starts.

use std::io::{IsTerminal as _, Write as _};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Debug)]
struct State {
    step: usize,
    total: usize,
    what: String,
    started: Instant,
    /// What "done" means for the current step: seconds, or a count of round trips.
    expect: Expect,
}

/// How far a step is measured.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Expect {
    /// About this long.
    Secs(f64),
    /// This many units counted with [`Progress::count`].
    Count(u64),
    /// Unknown (setting up).
    Unknown,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    count: AtomicU64,
    stop: AtomicBool,
}

/// The progress reporter of one bench run.
#[derive(Debug)]
pub(crate) struct Progress {
    shared: Arc<Shared>,
    begun: Instant,
    ticker: Option<JoinHandle<()>>,
}

fn clock(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}", s / 60, s % 60)
}

fn line(shared: &Shared, begun: Instant) -> String {
    let s = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    let here = s.started.elapsed().as_secs_f64();
    let how_far = match s.expect {
        Expect::Secs(total) => format!("{here:.1} s of ~{total:.1} s"),
        Expect::Count(total) => format!(
            "{} of {total} ({here:.1} s)",
            shared.count.load(Ordering::Relaxed)
        ),
        Expect::Unknown => format!("{here:.1} s"),
    };
    format!(
        "[{:>2}/{}, {} elapsed] {}: {how_far}",
        s.step,
        s.total,
        clock(begun.elapsed()),
        s.what
    )
}

impl Progress {
    /// A reporter for `total` steps.
    pub(crate) fn new(total: usize) -> Progress {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                step: 0,
                total,
                what: "starting".into(),
                started: Instant::now(),
                expect: Expect::Unknown,
            }),
            count: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        let begun = Instant::now();
        let ticker = std::io::stderr().is_terminal().then(|| {
            let shared = shared.clone();
            std::thread::spawn(move || {
                while !shared.stop.load(Ordering::Relaxed) {
                    let text = line(&shared, begun);
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "\r\x1b[2K{text}");
                    let _ = err.flush();
                    drop(err);
                    std::thread::sleep(Duration::from_millis(250));
                }
                let _ = write!(std::io::stderr(), "\r\x1b[2K");
            })
        });
        Progress {
            shared,
            begun,
            ticker,
        }
    }

    /// Starts the next step.
    pub(crate) fn step(&self, what: impl Into<String>, expect: Expect) {
        let mut s = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        s.step += 1;
        s.what = what.into();
        s.started = Instant::now();
        s.expect = expect;
        self.shared.count.store(0, Ordering::Relaxed);
        drop(s);
        if self.ticker.is_none() {
            eprintln!("{}", line(&self.shared, self.begun));
        }
    }

    /// Sets how many units of the current step are done.
    pub(crate) fn count(&self, done: u64) {
        self.shared.count.store(done, Ordering::Relaxed);
    }

    /// How long the run has taken.
    pub(crate) fn elapsed(&self) -> Duration {
        self.begun.elapsed()
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}
