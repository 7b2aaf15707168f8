//! Ctrl-C (and SIGTERM, SIGHUP) for long-running commands: the labs still alive are torn
//! down before the process exits.
//!
//! [`install`] sets a handler for the three signals that only writes the signal number to a
//! pipe (about all a signal handler may safely do), and starts a thread that reads the pipe.
//! On a signal that thread sets the flag [`interrupted`] reads, deletes every live lab of
//! the process (killing the processes inside its namespaces), gives back the hugepages the
//! process reserved and exits with 128 + the signal number. Whichever thread the kernel delivers the signal to, the same happens.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, OnceLock};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
static PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The namespaces of every live lab of this process, by lab id.
pub(crate) static REGISTRY: Mutex<Vec<(u64, Vec<String>)>> = Mutex::new(Vec::new());

/// Whether a SIGINT/SIGTERM/SIGHUP has arrived since [`install`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Installs the handler (once per process; later calls return the first call's result).
pub fn install() -> io::Result<()> {
    INSTALLED
        .get_or_init(|| install_once().map_err(|e| e.to_string()))
        .clone()
        .map_err(io::Error::other)
}

extern "C" fn on_signal(signal: libc::c_int) {
    let byte = signal as u8;
    let fd = PIPE_WRITE.load(Ordering::Relaxed);
    // Safety: write(2) is async-signal-safe; `byte` is a live one-byte buffer. A full pipe
    // (many signals at once) loses this one, which is harmless.
    unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
}

fn install_once() -> io::Result<()> {
    let mut fds = [0 as libc::c_int; 2];
    // Safety: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let [read_fd, write_fd] = fds;
    PIPE_WRITE.store(write_fd, Ordering::Relaxed);

    std::thread::Builder::new()
        .name("xroce-signals".into())
        .spawn(move || {
            let mut byte = 0u8;
            loop {
                // Safety: `byte` is a live one-byte buffer; `read_fd` stays open for the process.
                let n = unsafe { libc::read(read_fd, (&mut byte as *mut u8).cast(), 1) };
                if n == 1 {
                    break;
                }
                if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return;
            }
            let signal = libc::c_int::from(byte);
            INTERRUPTED.store(true, Ordering::Relaxed);
            eprintln!("xroce-lab: signal {signal}: tearing down the labs of this process");
            crate::teardown_all_registered();
            // After the labs: their processes (and the memory they pinned) are gone.
            crate::hugepages::release_all_live();
            std::process::exit(128 + signal);
        })?;

    for signal in SIGNALS {
        // Safety: an all-zero sigaction is a valid value to fill in.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        // Safety: `action` is initialised and its handler only calls write(2); the old
        // action is not asked for.
        if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
