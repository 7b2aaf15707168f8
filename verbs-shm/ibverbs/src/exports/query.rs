//! Device, port, GID and P_Key queries.

use std::ffi::{c_int, c_uint};

use verbs_abi::{
    _compat_ibv_port_attr, ibv_context, ibv_device_attr, ibv_gid, ibv_gid_entry, ibv_gid_type_sysfs,
};

use crate::ffi;
use crate::provider::context;

/// `int ibv_query_device(struct ibv_context *context, struct ibv_device_attr
/// *device_attr)`: 0 or an errno value.
///
/// # Safety
///
/// `device_attr` is NULL or valid for writing an `ibv_device_attr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_query_device(
    context: *mut ibv_context,
    device_attr: *mut ibv_device_attr,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::errno_value(|| unsafe { context::query_device(context, device_attr) })
}

/// `int ibv_query_port(struct ibv_context *context, uint8_t port_num, struct
/// _compat_ibv_port_attr *port_attr)`: 0 or an errno value. Applications built against
/// v44 reach this only when `verbs_context::query_port` is NULL.
///
/// # Safety
///
/// `port_attr` is NULL or valid for writing a `_compat_ibv_port_attr` (48 bytes).
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut _compat_ibv_port_attr,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::errno_value(|| unsafe { context::query_port(context, port_num, port_attr) })
}

/// `int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union
/// ibv_gid *gid)`: 0, or -1 and `errno`.
///
/// # Safety
///
/// `gid` is NULL or valid for writing an `ibv_gid`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_query_gid(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::minus_one_on_error(|| unsafe { context::query_gid(context, port_num, index, gid) })
}

/// `int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t
/// gid_index, struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)`: 0 or an
/// errno value.
///
/// # Safety
///
/// `entry` is NULL or valid for writing `entry_size` bytes.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn _ibv_query_gid_ex(
    context: *mut ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::errno_value(|| unsafe {
        context::query_gid_ex(context, port_num, gid_index, entry, flags, entry_size)
    })
}

/// `ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry
/// *entries, size_t max_entries, uint32_t flags, size_t entry_size)`: the number of
/// entries, or the negated errno value.
///
/// # Safety
///
/// `entries` is NULL or valid for writing `max_entries * entry_size` bytes.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn _ibv_query_gid_table(
    context: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    // Safety: forwarded from the caller.
    ffi::negated_errno(|| unsafe {
        context::query_gid_table(context, entries, max_entries, flags, entry_size)
    })
}

/// `int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int
/// index, enum ibv_gid_type_sysfs *type)` (`IBVERBS_PRIVATE_34`, imported by
/// `ibv_devinfo`): 0, or -1 and `errno`.
///
/// # Safety
///
/// `gid_type` is NULL or valid for writing.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_query_gid_type(
    context: *mut ibv_context,
    port_num: u8,
    index: c_uint,
    gid_type: *mut ibv_gid_type_sysfs,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::minus_one_on_error(|| unsafe {
        context::query_gid_type(context, port_num, index, gid_type)
    })
}

/// `int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index, __be16
/// *pkey)`: 0, or -1 and `errno`.
///
/// # Safety
///
/// `pkey` is NULL or valid for writing a `u16`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_query_pkey(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::minus_one_on_error(|| unsafe { context::query_pkey(context, port_num, index, pkey) })
}

/// `int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)`:
/// the index, or -1 and `errno`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_get_pkey_index(
    context: *mut ibv_context,
    port_num: u8,
    pkey: u16,
) -> c_int {
    ffi::minus_one_on_error(|| context::pkey_index(context, port_num, pkey))
}

include!(concat!(env!("OUT_DIR"), "/symver_exports_query.rs"));
