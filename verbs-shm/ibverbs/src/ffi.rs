//! The C boundary: `errno`, and the one guard every entry point runs its body in.
//!
//! Each verbs function reports failure its own way (verbs.h and rdma-core's
//! implementation decide): NULL with `errno`, a positive errno value, `-1` with `errno`, a
//! negated errno value, or nothing at all. The provider layer always answers
//! `Result<T, Errno>`; the functions here turn that into the function's C contract, and
//! catch any panic so it never unwinds into the application. A caught panic is a bug in
//! this library; it is reported as [`Errno::PANICKED`] (`EIO`) through the same contract,
//! after the default panic hook has printed the message to stderr.
//!
//! Why not `panic = "abort"`: the library is loaded into someone else's process, and a
//! profile setting would apply to the whole workspace; a failing verb must fail that one
//! call, not kill the application.

use std::ffi::c_int;
use std::panic::{self, AssertUnwindSafe};

use verbs_abi::{IBV_REREG_MR_ERR_INPUT, ibv_rereg_mr_err_code};

/// A positive `errno` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Errno(pub(crate) c_int);

impl Errno {
    /// The verb is not supported (yet): what rdma-core's dummy provider ops answer.
    pub(crate) const EOPNOTSUPP: Errno = Errno(libc::EOPNOTSUPP);
    /// An argument is invalid (NULL, out of range, or not an object of this library).
    pub(crate) const EINVAL: Errno = Errno(libc::EINVAL);
    /// The device is not one this library listed.
    pub(crate) const ENODEV: Errno = Errno(libc::ENODEV);
    /// Out of memory.
    pub(crate) const ENOMEM: Errno = Errno(libc::ENOMEM);
    /// What a caught panic is reported as.
    pub(crate) const PANICKED: Errno = Errno(libc::EIO);

    /// The errno of an I/O error, `EIO` if it has none.
    pub(crate) fn of(error: &std::io::Error) -> Errno {
        Errno(error.raw_os_error().unwrap_or(libc::EIO))
    }

    /// Stores this value in the calling thread's `errno`.
    pub(crate) fn set(self) {
        // Safety: `__errno_location` has no preconditions.
        let slot = unsafe { libc::__errno_location() };
        // Safety: it returns the calling thread's errno slot, valid for writes for the
        // thread's lifetime.
        unsafe { *slot = self.0 };
    }
}

/// What every provider function answers.
pub(crate) type Verb<T> = Result<T, Errno>;

/// Runs `body`, turning a panic into `Err(Errno::PANICKED)`.
fn guarded<T>(body: impl FnOnce() -> Verb<T>) -> Verb<T> {
    // AssertUnwindSafe: after a panic we only report an error; shared state that a panic
    // could leave half-updated is behind `Mutex`es, which are poisoned and checked.
    panic::catch_unwind(AssertUnwindSafe(body)).unwrap_or(Err(Errno::PANICKED))
}

/// `T *f(…)`: the object, or NULL with `errno` set.
pub(crate) fn null_on_error<T>(body: impl FnOnce() -> Verb<*mut T>) -> *mut T {
    guarded(body).unwrap_or_else(|errno| {
        errno.set();
        std::ptr::null_mut()
    })
}

/// `const T *f(…)`: the object, or NULL with `errno` set.
pub(crate) fn const_null_on_error<T>(body: impl FnOnce() -> Verb<*const T>) -> *const T {
    guarded(body).unwrap_or_else(|errno| {
        errno.set();
        std::ptr::null()
    })
}

/// `int f(…)` returning 0 or a positive errno value (most verbs: `ibv_modify_qp`,
/// `ibv_dealloc_pd`, `ibv_query_port`, …). `errno` is set too, which rdma-core's providers
/// often do and callers that print `errno` expect.
pub(crate) fn errno_value(body: impl FnOnce() -> Verb<()>) -> c_int {
    match guarded(body) {
        Ok(()) => 0,
        Err(errno) => {
            errno.set();
            errno.0
        }
    }
}

/// `int f(…)` returning a non-negative value, or -1 with `errno` set (`ibv_get_cq_event`,
/// `ibv_query_gid`, `ibv_read_sysfs_file`, …).
pub(crate) fn minus_one_on_error(body: impl FnOnce() -> Verb<c_int>) -> c_int {
    guarded(body).unwrap_or_else(|errno| {
        errno.set();
        -1
    })
}

/// `ssize_t f(…)` returning a count, or the negated errno value (`_ibv_query_gid_table`).
pub(crate) fn negated_errno(body: impl FnOnce() -> Verb<isize>) -> isize {
    guarded(body).unwrap_or_else(|errno| {
        errno.set();
        -(errno.0 as isize)
    })
}

/// `int f(…)` returning 0 or the negated errno value (`ibv_resolve_eth_l2_from_gid`).
pub(crate) fn zero_or_negated_errno(body: impl FnOnce() -> Verb<()>) -> c_int {
    match guarded(body) {
        Ok(()) => 0,
        Err(errno) => {
            errno.set();
            -errno.0
        }
    }
}

/// `int ibv_rereg_mr(…)`: 0, or [`IBV_REREG_MR_ERR_INPUT`] ("the old MR is still valid")
/// with `errno` set.
pub(crate) fn rereg_code(body: impl FnOnce() -> Verb<()>) -> ibv_rereg_mr_err_code {
    match guarded(body) {
        Ok(()) => 0,
        Err(errno) => {
            errno.set();
            IBV_REREG_MR_ERR_INPUT
        }
    }
}

/// `void f(…)`: failure can only be reported through `errno`.
pub(crate) fn void(body: impl FnOnce() -> Verb<()>) {
    if let Err(errno) = guarded(body) {
        errno.set();
    }
}

/// A function whose C contract has no error channel: its value, or `fallback` (with
/// `errno` set) if the body failed or panicked.
pub(crate) fn or_fallback<T>(fallback: T, body: impl FnOnce() -> Verb<T>) -> T {
    guarded(body).unwrap_or_else(|errno| {
        errno.set();
        fallback
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errno() -> c_int {
        std::io::Error::last_os_error().raw_os_error().unwrap()
    }

    fn fail<T>() -> Verb<T> {
        Err(Errno::EOPNOTSUPP)
    }

    #[test]
    fn each_contract_reports_an_error_its_own_way() {
        assert!(null_on_error::<u8>(fail).is_null());
        assert_eq!(errno(), libc::EOPNOTSUPP);
        Errno(0).set();
        assert_eq!(errno_value(fail), libc::EOPNOTSUPP);
        assert_eq!(minus_one_on_error(fail), -1);
        assert_eq!(negated_errno(fail), -(libc::EOPNOTSUPP as isize));
        assert_eq!(zero_or_negated_errno(fail), -libc::EOPNOTSUPP);
        assert_eq!(rereg_code(fail), IBV_REREG_MR_ERR_INPUT);
        assert_eq!(or_fallback(7, fail), 7);
        Errno(0).set();
        void(fail);
        assert_eq!(errno(), libc::EOPNOTSUPP);
    }

    #[test]
    fn success_passes_the_value_through() {
        let mut x = 5u8;
        assert_eq!(null_on_error(|| Ok(&raw mut x)), &raw mut x);
        assert_eq!(errno_value(|| Ok(())), 0);
        assert_eq!(minus_one_on_error(|| Ok(3)), 3);
        assert_eq!(negated_errno(|| Ok(4)), 4);
        assert_eq!(or_fallback(7, || Ok(8)), 8);
    }

    #[test]
    fn a_panic_becomes_the_contracts_error_and_does_not_unwind() {
        let boom = || -> Verb<()> { panic!("deliberate test panic") };
        assert_eq!(errno_value(boom), libc::EIO);
        assert_eq!(errno(), libc::EIO);
        assert!(null_on_error::<u8>(|| panic!("deliberate test panic")).is_null());
        assert_eq!(minus_one_on_error(|| panic!("deliberate test panic")), -1);
    }
}
