//! Every refusal on stderr, when the user asks: `XROCE_IBVERBS_DEBUG=1`.
//!
//! A verbs call reports a failure as an `errno` alone, and programs print little more
//! ("Failed to modify QP to RTR"). The daemon says why it refused in its log and in its
//! answer; with `XROCE_IBVERBS_DEBUG=1` in the program's environment this library prints
//! that reason on stderr, one line per refused verb, as rdma-core's providers print their
//! errors with their own debug switches. The library's own refusals (an address vector
//! without a GRH, an unsupported attribute) are printed the same way. Errors of the data
//! path (a full queue, a poll that would block) are the program's to handle and are never
//! printed; without the variable nothing is.

use std::sync::OnceLock;

use verbs_shm::client;

use crate::ffi::Errno;

/// The environment variable that asks for refusals on stderr.
pub(crate) const VARIABLE: &str = "XROCE_IBVERBS_DEBUG";

/// Whether [`VARIABLE`] is 1 (read once).
fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var_os(VARIABLE).is_some_and(|v| v == "1"))
}

/// The errno of `verb` failing with `error`, after printing the daemon's reason when asked.
pub(crate) fn refused(verb: &str, error: &client::Error) -> Errno {
    report(Some(verb), error);
    Errno(error.errno())
}

/// `errno` for a request of `verb` this library refuses itself, before the daemon sees it;
/// `why` is printed as a refusal of the daemon is.
pub(crate) fn refused_here(verb: &str, errno: Errno, why: &str) -> Errno {
    if enabled() {
        eprintln!("libibverbs (xroce): {verb}: {why} (errno {})", errno.0);
    }
    errno
}

/// Prints `error` when asked to, if it is a refusal (of the daemon, or no daemon at all).
pub(crate) fn report(verb: Option<&str>, error: &client::Error) {
    if enabled()
        && let Some(line) = line(verb, error)
    {
        eprintln!("{line}");
    }
}

/// The line [`report`] prints for `error`, if it is a refusal.
fn line(verb: Option<&str>, error: &client::Error) -> Option<String> {
    if !matches!(
        error,
        client::Error::Daemon { .. } | client::Error::NoDevice(_) | client::Error::Protocol(_)
    ) {
        return None;
    }
    Some(match verb {
        Some(verb) => format!("libibverbs (xroce): {verb}: {error}"),
        None => format!("libibverbs (xroce): {error}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_of_the_daemon_is_printed_with_its_verb_and_reason() {
        let refusal = client::Error::Daemon {
            errno: libc::EINVAL,
            message: "invalid value for ah_attr.grh.sgid_index: beyond the port's GID table".into(),
        };
        assert_eq!(
            line(Some("ibv_modify_qp"), &refusal).as_deref(),
            Some(
                "libibverbs (xroce): ibv_modify_qp: invalid value for ah_attr.grh.sgid_index: \
                 beyond the port's GID table (errno 22)"
            )
        );
        assert_eq!(refused("ibv_modify_qp", &refusal), Errno::EINVAL);
        // The data path's conditions are the program's to handle: nothing printed.
        assert_eq!(line(None, &client::Error::QueueFull), None);
        let would_block = client::Error::Io(std::io::ErrorKind::WouldBlock.into());
        assert_eq!(line(None, &would_block), None);
    }
}
