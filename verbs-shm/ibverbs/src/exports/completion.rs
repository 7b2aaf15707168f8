//! Completion channels and completion queues. (`ibv_poll_cq` and `ibv_req_notify_cq` are
//! inline in verbs.h and go through `ibv_context_ops`.)

use std::ffi::{c_int, c_uint, c_void};

use verbs_abi::{ibv_comp_channel, ibv_context, ibv_cq};

use crate::ffi;
use crate::provider::completion;

/// `struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)`: NULL
/// and `errno` on failure.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_create_comp_channel(
    context: *mut ibv_context,
) -> *mut ibv_comp_channel {
    ffi::null_on_error(|| completion::create_comp_channel(context))
}

/// `int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)`: 0 or an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_destroy_comp_channel(channel: *mut ibv_comp_channel) -> c_int {
    ffi::errno_value(|| completion::destroy_comp_channel(channel))
}

/// `struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
/// struct ibv_comp_channel *channel, int comp_vector)`: NULL and `errno` on failure.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    ffi::null_on_error(|| completion::create_cq(context, cqe, cq_context, channel, comp_vector))
}

/// `int ibv_resize_cq(struct ibv_cq *cq, int cqe)`: 0 or an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
    ffi::errno_value(|| completion::resize_cq(cq, cqe))
}

/// `int ibv_destroy_cq(struct ibv_cq *cq)`: 0 or an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    ffi::errno_value(|| completion::destroy_cq(cq))
}

/// `int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void
/// **cq_context)`: 0, or -1 and `errno`.
///
/// # Safety
///
/// `cq` and `cq_context` are NULL or valid for writing a pointer.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::minus_one_on_error(|| unsafe { completion::get_cq_event(channel, cq, cq_context) })
}

/// `void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: c_uint) {
    ffi::void(|| completion::ack_cq_events(cq, nevents))
}

include!(concat!(env!("OUT_DIR"), "/symver_exports_completion.rs"));
