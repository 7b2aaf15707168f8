//! The C boundary: `errno`, and the guard every entry point runs its body in.
//!
//! librdmacm reports failure in a few ways: most functions return 0 or -1 with `errno`
//! (cma.c's `ERR(e)`), constructors return NULL with `errno`, a few have no error channel.
//! The implementation always answers `Result<T, Errno>`; the functions here turn that into
//! the function's C contract, and catch any panic so it never unwinds into the
//! application. A caught panic is a bug in this library, reported as `EIO` after the
//! default panic hook has printed it.

use std::ffi::c_int;
use std::panic::{self, AssertUnwindSafe};

/// A positive `errno` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Errno(pub(crate) c_int);

impl Errno {
    /// An argument is invalid: NULL, out of range, or not an object of this library.
    pub(crate) const EINVAL: Errno = Errno(libc::EINVAL);
    /// No device (no daemon serves this network namespace, or none has the address).
    pub(crate) const ENODEV: Errno = Errno(libc::ENODEV);
    /// What xroce does not offer yet.
    pub(crate) const EOPNOTSUPP: Errno = Errno(libc::EOPNOTSUPP);
    /// What xroce does not implement at all (the rsocket functions).
    pub(crate) const ENOSYS: Errno = Errno(libc::ENOSYS);
    /// Out of memory.
    pub(crate) const ENOMEM: Errno = Errno(libc::ENOMEM);
    /// No event waits on a non-blocking channel.
    pub(crate) const EAGAIN: Errno = Errno(libc::EAGAIN);
    /// What a caught panic is reported as.
    pub(crate) const PANICKED: Errno = Errno(libc::EIO);

    /// The errno of an I/O error, `EIO` if it has none.
    pub(crate) fn of(error: &std::io::Error) -> Errno {
        Errno(error.raw_os_error().unwrap_or(libc::EIO))
    }

    /// The calling thread's `errno` now.
    pub(crate) fn last() -> Errno {
        Errno::of(&std::io::Error::last_os_error())
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

impl From<nix::errno::Errno> for Errno {
    fn from(e: nix::errno::Errno) -> Errno {
        Errno(e as c_int)
    }
}

/// What every implementation function answers.
pub(crate) type Cm<T> = Result<T, Errno>;

/// Runs `body`, turning a panic into `Err(Errno::PANICKED)`.
fn guarded<T>(body: impl FnOnce() -> Cm<T>) -> Cm<T> {
    // AssertUnwindSafe: after a panic we only report an error; shared state a panic could
    // leave half-updated is behind `Mutex`es, whose poisoning is tolerated knowingly.
    panic::catch_unwind(AssertUnwindSafe(body)).unwrap_or(Err(Errno::PANICKED))
}

/// `int f(…)`: 0, or -1 with `errno` (cma.c's `ERR`).
pub(crate) fn zero_or_minus_one(body: impl FnOnce() -> Cm<()>) -> c_int {
    match guarded(body) {
        Ok(()) => 0,
        Err(errno) => {
            errno.set();
            -1
        }
    }
}

/// `int f(…)` with a value of its own on success (`rdma_getaddrinfo`'s `EAI_*` codes), or
/// -1 with `errno`.
pub(crate) fn value_or_minus_one(body: impl FnOnce() -> Cm<c_int>) -> c_int {
    guarded(body).unwrap_or_else(|errno| {
        errno.set();
        -1
    })
}

/// `T *f(…)`: the object, or NULL with `errno`.
pub(crate) fn null_on_error<T>(body: impl FnOnce() -> Cm<*mut T>) -> *mut T {
    guarded(body).unwrap_or_else(|errno| {
        errno.set();
        std::ptr::null_mut()
    })
}

/// `void f(…)`: failure can only be reported through `errno`.
pub(crate) fn void(body: impl FnOnce() -> Cm<()>) {
    if let Err(errno) = guarded(body) {
        errno.set();
    }
}

/// A function without an error channel: its value, or `fallback` with `errno`.
pub(crate) fn or_fallback<T>(fallback: T, body: impl FnOnce() -> Cm<T>) -> T {
    guarded(body).unwrap_or_else(|errno| {
        errno.set();
        fallback
    })
}

/// `int f(…)` and `ssize_t f(…)` of rsocket, which this library does not implement: -1
/// with `errno` `ENOSYS`.
pub(crate) fn not_implemented<T: From<i8>>() -> T {
    Errno::ENOSYS.set();
    T::from(-1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errno() -> c_int {
        Errno::last().0
    }

    #[test]
    fn each_contract_reports_an_error_its_own_way() {
        let fail = || -> Cm<()> { Err(Errno::EOPNOTSUPP) };
        assert_eq!(zero_or_minus_one(fail), -1);
        assert_eq!(errno(), libc::EOPNOTSUPP);
        Errno(0).set();
        assert!(null_on_error::<u8>(|| Err(Errno::ENODEV)).is_null());
        assert_eq!(errno(), libc::ENODEV);
        assert_eq!(value_or_minus_one(|| Err(Errno::EINVAL)), -1);
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(or_fallback(7u16, || Err(Errno::EINVAL)), 7);
        Errno(0).set();
        void(fail);
        assert_eq!(errno(), libc::EOPNOTSUPP);
        assert_eq!(not_implemented::<isize>(), -1);
        assert_eq!(errno(), libc::ENOSYS);
    }

    #[test]
    fn success_passes_the_value_through() {
        assert_eq!(zero_or_minus_one(|| Ok(())), 0);
        assert_eq!(value_or_minus_one(|| Ok(-2)), -2);
        assert_eq!(or_fallback(7u16, || Ok(8)), 8);
    }

    #[test]
    fn a_panic_becomes_the_contracts_error_and_does_not_unwind() {
        assert_eq!(zero_or_minus_one(|| panic!("deliberate test panic")), -1);
        assert_eq!(errno(), libc::EIO);
        assert!(null_on_error::<u8>(|| panic!("deliberate test panic")).is_null());
    }
}
