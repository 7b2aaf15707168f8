//! Ctrl-C (and SIGTERM, SIGHUP) for long-running commands: the labs still alive are torn
//! down before the process exits.
//!
//! [`install`] blocks the three signals in the calling thread (call it first thing in
//! `main`, before other threads exist, so they all inherit the mask) and starts a thread
//! that waits for them with `sigwait`. On a signal it sets the flag [`interrupted`] reads,
//! deletes every lab in the registry (killing the processes inside its namespaces), and
//! exits with 128 + the signal number. Child processes do not inherit the mask (Rust's
//! `Command` clears it).

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static INSTALLED: OnceLock<()> = OnceLock::new();

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Whether a SIGINT/SIGTERM/SIGHUP has arrived since [`install`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Installs the handler (once per process; later calls do nothing).
pub fn install() -> io::Result<()> {
    let mut result = Ok(());
    INSTALLED.get_or_init(|| result = install_once());
    result
}

fn signal_set() -> libc::sigset_t {
    // Safety: an all-zero sigset_t is a valid value; sigemptyset below makes it the empty set.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // Safety: `set` is a sigset_t we own.
    unsafe { libc::sigemptyset(&mut set) };
    for signal in SIGNALS {
        // Safety: `set` is an initialised sigset_t and `signal` a valid signal number.
        unsafe { libc::sigaddset(&mut set, signal) };
    }
    set
}

fn install_once() -> io::Result<()> {
    let set = signal_set();
    // Safety: `set` is initialised; the old mask is not asked for.
    let ret = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if ret != 0 {
        return Err(io::Error::from_raw_os_error(ret));
    }
    std::thread::Builder::new()
        .name("xroce-signals".into())
        .spawn(move || {
            let mut signal: libc::c_int = 0;
            // Safety: `set` is initialised and `signal` is a valid out-parameter.
            let ret = unsafe { libc::sigwait(&set, &mut signal) };
            if ret != 0 {
                return;
            }
            INTERRUPTED.store(true, Ordering::Relaxed);
            eprintln!("xroce-lab: signal {signal}: tearing down the labs of this process");
            crate::teardown_all_registered();
            std::process::exit(128 + signal);
        })?;
    Ok(())
}

/// The namespaces of every live lab of this process, by lab id.
pub(crate) static REGISTRY: Mutex<Vec<(u64, Vec<String>)>> = Mutex::new(Vec::new());
