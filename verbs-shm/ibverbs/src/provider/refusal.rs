//! Refusals the application's user must see: the daemon's reason, on stderr.
//!
//! A verbs call reports a failure as an `errno` alone, and programs print little more
//! ("Couldn't get context for xroce0", "Couldn't register MR"). For most refusals that is
//! enough, as it is for a kernel device. Two are about the system rather than the program,
//! and the user cannot tell them apart from a bug without the daemon's reason: a device
//! the daemon's access policy does not let the user open (`EACCES` from
//! `ibv_open_device`), and memory registration past a limit (`ENOMEM` or `EPERM` from
//! `ibv_reg_mr`: the process's `RLIMIT_MEMLOCK`, or the daemon's own per-application
//! limits). Those reasons are printed, once per process for each verb, device and
//! `errno`, in rdma-core's own style (`libibverbs: …`).

use std::collections::HashSet;
use std::io::Write;
use std::sync::{Mutex, PoisonError};

use verbs_shm::client;

/// A refusal shown: verb, device, errno.
type Shown = (&'static str, String, i32);

/// The refusals shown so far.
static SHOWN: Mutex<Option<HashSet<Shown>>> = Mutex::new(None);

/// Whether `verb` failing with `errno` is one of the refusals shown.
fn worth_showing(verb: &str, errno: i32) -> bool {
    match verb {
        "ibv_open_device" => errno == libc::EACCES,
        "ibv_reg_mr" | "ibv_rereg_mr" => errno == libc::ENOMEM || errno == libc::EPERM,
        _ => false,
    }
}

/// The line shown for `error` of `verb` on `device`, if it is shown.
pub(crate) fn line(verb: &'static str, device: &str, error: &client::Error) -> Option<String> {
    let client::Error::Daemon { errno, message } = error else {
        return None;
    };
    if !worth_showing(verb, *errno) {
        return None;
    }
    let mut shown = SHOWN.lock().unwrap_or_else(PoisonError::into_inner);
    let first = shown
        .get_or_insert_with(HashSet::new)
        .insert((verb, device.to_owned(), *errno));
    first.then(|| format!("libibverbs: {device}: {verb}: {message}"))
}

/// Shows the daemon's reason for refusing `verb` on `device`, if it is one the user must
/// see and has not seen yet.
pub(crate) fn show(verb: &'static str, device: &str, error: &client::Error) {
    if let Some(line) = line(verb, device, error) {
        // A failed write to stderr leaves only the errno, as before.
        let _ = writeln!(std::io::stderr(), "{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn daemon(errno: i32, message: &str) -> client::Error {
        client::Error::Daemon {
            errno,
            message: message.into(),
        }
    }

    #[test]
    fn access_and_memory_limits_are_shown_once_other_refusals_never() {
        let denied = daemon(libc::EACCES, "access to xrtest0 denied for uid 65534");
        assert_eq!(
            line("ibv_open_device", "xrtest0", &denied).as_deref(),
            Some("libibverbs: xrtest0: ibv_open_device: access to xrtest0 denied for uid 65534")
        );
        assert_eq!(line("ibv_open_device", "xrtest0", &denied), None, "once");
        assert!(
            line("ibv_open_device", "xrtest1", &denied).is_some(),
            "per device"
        );
        let memlock = daemon(
            libc::ENOMEM,
            "memory lock limit exceeded (RLIMIT_MEMLOCK 64 KiB)",
        );
        assert!(line("ibv_reg_mr", "xrtest0", &memlock).is_some());
        assert!(line("ibv_reg_mr", "xrtest0", &daemon(libc::EPERM, "0")).is_some());
        assert_eq!(
            line("ibv_reg_mr", "xrtest0", &daemon(libc::EINVAL, "bad")),
            None
        );
        assert_eq!(line("ibv_modify_qp", "xrtest0", &memlock), None);
        assert_eq!(
            line("ibv_reg_mr", "xrtest2", &client::Error::QueueFull),
            None,
            "only the daemon's refusals carry a reason"
        );
    }
}
