//! Event channels and events.

use std::ffi::{c_char, c_int};

use crate::abi::{rdma_cm_event, rdma_event_channel};
use crate::channel::Channel;
use crate::cma::Cma;
use crate::event;
use crate::ffi::{self, Errno};
use crate::id;

/// `struct rdma_event_channel *rdma_create_event_channel(void)`: NULL and `errno` on
/// failure (`ENODEV` when no device is listed, as librdmacm).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_create_event_channel() -> *mut rdma_event_channel {
    ffi::null_on_error(|| {
        let cma = Cma::global();
        cma.init()?;
        Ok(Channel::new(cma)?.as_c())
    })
}

/// `void rdma_destroy_event_channel(struct rdma_event_channel *channel)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_destroy_event_channel(channel: *mut rdma_event_channel) {
    ffi::void(|| {
        let cma = Cma::global();
        id::close_channel(cma, &Channel::lookup(cma, channel)?);
        Ok(())
    })
}

/// `int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event
/// **event)`: 0, or -1 and `errno` (`EAGAIN` on a non-blocking channel without an event).
///
/// # Safety
///
/// `event` is NULL or valid for writing a pointer.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_get_cm_event(
    channel: *mut rdma_event_channel,
    event: *mut *mut rdma_cm_event,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        let cma = Cma::global();
        cma.init()?;
        if event.is_null() {
            return Err(Errno::EINVAL);
        }
        let channel = Channel::lookup(cma, channel)?;
        let got = event::get(cma, &channel)?;
        // Safety: writable (caller).
        unsafe { event.write(got) };
        Ok(())
    })
}

/// `int rdma_ack_cm_event(struct rdma_cm_event *event)`: 0, or -1 and `EINVAL` for an
/// event this library did not return (or already freed).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int {
    ffi::zero_or_minus_one(|| event::ack(Cma::global(), event))
}

/// `const char *rdma_event_str(enum rdma_cm_event_type event)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_event_str(event: c_int) -> *const c_char {
    event::name_ptr(event)
}

include!(concat!(env!("OUT_DIR"), "/symver_exports_channel.rs"));
