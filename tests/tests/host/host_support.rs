//! What the host-integration tests share: running `ip` in a lab namespace, reading an
//! interface's Ethernet address the way `ip link` prints it, and waiting for a watcher's
//! changes.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test file uses a different part"
)]

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use xroce_engine::host::{Change, Mac, Watcher};
use xroce_lab::netns;

/// How long a test waits for something the kernel does at once. Only a bound against hanging
/// forever: nothing asserts how long it took.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Runs `ip <args>` inside namespace `ns`, panicking with its stderr on failure.
pub fn ip(ns: &str, args: &[&str]) -> String {
    let mut cmd = std::process::Command::new("ip");
    cmd.arg("-n").arg(ns).args(args);
    xroce_lab::run(&mut cmd).unwrap_or_else(|e| panic!("ip -n {ns} {}: {e}", args.join(" ")))
}

/// The Ethernet address of `dev` in namespace `ns`, as `ip link` prints it.
pub fn ip_link_mac(ns: &str, dev: &str) -> Mac {
    let out = ip(ns, &["-o", "link", "show", "dev", dev]);
    let text = out
        .split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .unwrap_or_else(|| panic!("no link/ether in `ip link show dev {dev}`: {out}"));
    let bytes: Vec<u8> = text
        .split(':')
        .map(|b| u8::from_str_radix(b, 16).expect("hex byte"))
        .collect();
    Mac::try_from(bytes.as_slice()).expect("6 bytes")
}

/// `02:78:72:00:00:0a`, as `ip` takes it.
pub fn mac_text(mac: Mac) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The addresses of `dev` in namespace `ns` in `ip address show`'s order, for one family
/// (`"-4"` or `"-6"`) and optional scope, with `ip`'s flags words (`tentative`, ...).
pub fn ip_addresses(
    ns: &str,
    family: &str,
    dev: &str,
    scope: Option<&str>,
) -> Vec<(String, String)> {
    let mut args = vec![family, "-o", "address", "show", "dev", dev];
    if let Some(scope) = scope {
        args.extend(["scope", scope]);
    }
    ip(ns, &args)
        .lines()
        .filter_map(|line| {
            let mut words = line
                .split_whitespace()
                .skip_while(|w| !w.starts_with("inet"));
            words.next()?;
            let address = words.next()?.split('/').next()?.to_owned();
            Some((address, line.to_owned()))
        })
        .collect()
}

/// Polls `watcher` (as a daemon would: wait for its descriptor, then read) until `done`
/// holds for the changes seen so far, and returns them. Panics with what it saw if that
/// does not happen within [`PATIENCE`].
pub fn wait_for_changes(watcher: &mut Watcher, done: impl Fn(&[Change]) -> bool) -> Vec<Change> {
    let deadline = Instant::now() + PATIENCE;
    let mut seen = Vec::new();
    loop {
        seen.extend(watcher.poll_changes().expect("poll_changes"));
        if done(&seen) {
            return seen;
        }
        assert!(
            Instant::now() < deadline,
            "the watcher did not report what was expected; it reported {seen:?}"
        );
        let mut pollfd = libc::pollfd {
            fd: watcher.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // Safety: one valid pollfd, living across the call.
        unsafe { libc::poll(&mut pollfd, 1, 200) };
    }
}

/// Runs `f` on a thread inside namespace `ns` (where it opens its netlink sockets).
pub fn in_ns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
    netns::run_in(ns, f).unwrap_or_else(|e| panic!("entering {ns}: {e}"))
}
