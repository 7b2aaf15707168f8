//! The glibc synchronisation types embedded in verbs objects, as opaque storage.
//!
//! verbs.h embeds a `pthread_mutex_t` in `ibv_context`, `ibv_cq`, `ibv_srq`, `ibv_qp` and
//! `ibv_wq`, and a `pthread_cond_t` in the last four. Inline verbs.h code never touches
//! them, but exported functions such as `ibv_ack_cq_events` do, so their size and alignment
//! must be exact. On glibc the all-zero value equals `PTHREAD_MUTEX_INITIALIZER` and
//! `PTHREAD_COND_INITIALIZER`, so `Default` gives an initialised default mutex/condition.

/// `pthread_mutex_t` on x86_64 glibc: 40 bytes, 8-byte aligned.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug)]
pub struct pthread_mutex_t {
    /// The opaque glibc state.
    pub opaque: [u8; 40],
}

/// `pthread_cond_t` on x86_64 glibc: 48 bytes, 8-byte aligned.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug)]
pub struct pthread_cond_t {
    /// The opaque glibc state.
    pub opaque: [u8; 48],
}

/// `struct timespec` on x86_64 (used by [`ibv_values_ex`](crate::ibv_values_ex)).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct timespec {
    /// Seconds.
    pub tv_sec: i64,
    /// Nanoseconds.
    pub tv_nsec: i64,
}

zeroed_default!(pthread_mutex_t, pthread_cond_t);
