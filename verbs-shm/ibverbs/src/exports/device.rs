//! Device list and contexts.

use std::ffi::{c_char, c_int};

use verbs_abi::{ibv_async_event, ibv_context, ibv_device};

use crate::ffi;
use crate::provider::{context, device, verbs};

/// `struct ibv_device **ibv_get_device_list(int *num_devices)`: a NULL-terminated array
/// (NULL and `errno` on failure); `*num_devices` gets the count, 0 on failure.
///
/// # Safety
///
/// `num_devices` is NULL or valid for writing an `int`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_get_device_list(
    num_devices: *mut c_int,
) -> *mut *mut ibv_device {
    ffi::null_on_error(|| {
        // Safety: the caller passes NULL or a pointer valid for writing an int.
        let count = unsafe { num_devices.as_mut() };
        let list = device::list();
        if let Some(count) = count {
            *count = list.as_ref().map_or(0, |l| l.count);
        }
        Ok(list?.array)
    })
}

/// `void ibv_free_device_list(struct ibv_device **list)`. Devices stay valid.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    ffi::void(|| device::free_list(list))
}

/// `const char *ibv_get_device_name(struct ibv_device *device)`: NULL and `errno` if
/// `device` is not one this library listed.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char {
    ffi::const_null_on_error(|| device::name(device))
}

/// `__be64 ibv_get_device_guid(struct ibv_device *device)`: 0 on failure, as rdma-core.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_get_device_guid(device: *mut ibv_device) -> u64 {
    ffi::or_fallback(0, || device::guid(device))
}

/// `int ibv_get_device_index(struct ibv_device *device)`: -1 if unknown.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_get_device_index(device: *mut ibv_device) -> c_int {
    ffi::minus_one_on_error(|| device::index(device))
}

/// `struct ibv_context *ibv_open_device(struct ibv_device *device)`: NULL and `errno` on
/// failure.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
    ffi::null_on_error(|| context::open_device(device))
}

/// `int ibv_close_device(struct ibv_context *context)`: 0 or an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_close_device(context: *mut ibv_context) -> c_int {
    ffi::errno_value(|| context::close_device(context))
}

/// `struct ibv_context *ibv_import_device(int cmd_fd)`: NULL and `errno` on failure.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_import_device(cmd_fd: c_int) -> *mut ibv_context {
    ffi::null_on_error(|| verbs::import_device(cmd_fd))
}

/// `int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)`:
/// 0, or -1 and `errno`.
///
/// # Safety
///
/// `event` is NULL or valid for writing an `ibv_async_event`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_get_async_event(
    context: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::minus_one_on_error(|| unsafe { context::get_async_event(context, event) })
}

/// `void ibv_ack_async_event(struct ibv_async_event *event)`.
///
/// # Safety
///
/// `event` is NULL or an event filled by `ibv_get_async_event`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_ack_async_event(event: *mut ibv_async_event) {
    // Safety: forwarded from the caller.
    ffi::void(|| unsafe { context::ack_async_event(event) })
}

include!(concat!(env!("OUT_DIR"), "/symver_exports_device.rs"));
