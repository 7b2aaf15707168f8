//! Running code inside a named network namespace (`/run/netns/<name>`, as `ip netns` makes
//! them): a closure on a thread of its own ([`run_in`]), the calling thread itself
//! ([`enter`]), or a command ([`command`]).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::Command;

/// Where `ip netns` keeps the namespace called `name`.
pub fn path(name: &str) -> PathBuf {
    PathBuf::from("/run/netns").join(name)
}

/// Whether a namespace called `name` exists.
pub fn exists(name: &str) -> bool {
    path(name).exists()
}

/// Moves the calling thread (only it) into the network namespace `name`. Sockets the thread
/// opens afterwards, interface names it resolves and XDP programs it attaches all belong to
/// that namespace. Threads it spawns afterwards start there too.
pub fn enter(name: &str) -> io::Result<()> {
    let file = File::open(path(name)).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("network namespace {name:?} ({}): {e}", path(name).display()),
        )
    })?;
    // Safety: `file` is an open descriptor of a network namespace file; setns only changes
    // the calling thread's namespace and touches no memory of ours.
    let ret = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if ret != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("setns into {name:?}: {e}"),
        ));
    }
    Ok(())
}

/// Runs `f` on a new thread inside the network namespace `name` and returns what it returns.
/// The calling thread stays where it is. A panic in `f` is propagated.
pub fn run_in<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> io::Result<T> {
    std::thread::scope(|scope| {
        let handle = scope.spawn(|| {
            enter(name)?;
            Ok(f())
        });
        match handle.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// A command that runs `argv` inside the namespace `name` (through `ip netns exec`).
///
/// # Panics
///
/// If `argv` is empty.
pub fn command(name: &str, argv: &[&str]) -> Command {
    assert!(!argv.is_empty(), "netns::command needs a program to run");
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", name]).args(argv);
    cmd
}

/// Writes `value` to `/proc/sys/<key with dots as slashes>` inside namespace `name`.
pub fn sysctl(name: &str, key: &str, value: &str) -> io::Result<()> {
    let file = PathBuf::from("/proc/sys").join(key.replace('.', "/"));
    run_in(name, || std::fs::write(&file, value))?
        .map_err(|e| io::Error::new(e.kind(), format!("sysctl {key}={value} in {name:?}: {e}")))
}
