//! Protection domains, memory registration, imports and fork protection.

use std::ffi::{c_int, c_uint, c_void};

use verbs_abi::{ibv_context, ibv_dm, ibv_fork_status, ibv_mr, ibv_pd};

use crate::ffi;
use crate::provider::{fork, memory, verbs};

/// `struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)`: NULL and `errno` on failure.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    ffi::null_on_error(|| memory::alloc_pd(context))
}

/// `int ibv_dealloc_pd(struct ibv_pd *pd)`: 0 or an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    ffi::errno_value(|| memory::dealloc_pd(pd))
}

/// `struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)`
/// (called by the `ibv_reg_mr` macro for constant access flags without optional bits):
/// NULL and `errno` on failure. Registers with `iova = addr`, as rdma-core does.
///
/// # Safety
///
/// `[addr, addr + length)` is memory of the calling process that stays mapped while
/// registered (its pages are moved onto shared memory in place).
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    // The access flags are a bit set; C passes the same bits as int or unsigned.
    // Safety: forwarded from the caller.
    ffi::null_on_error(|| unsafe {
        memory::reg_mr(pd, addr, length, addr as u64, access as c_uint)
    })
}

/// `struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t
/// iova, int access)`: NULL and `errno` on failure.
///
/// # Safety
///
/// `[addr, addr + length)` is memory of the calling process that stays mapped while
/// registered (its pages are moved onto shared memory in place).
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    // Safety: forwarded from the caller.
    ffi::null_on_error(|| unsafe { memory::reg_mr(pd, addr, length, iova, access as c_uint) })
}

/// `struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t
/// iova, unsigned int access)` (what the `ibv_reg_mr` macro calls for optional access
/// bits, e.g. perftest's `IBV_ACCESS_RELAXED_ORDERING`): NULL and `errno` on failure.
///
/// # Safety
///
/// `[addr, addr + length)` is memory of the calling process that stays mapped while
/// registered (its pages are moved onto shared memory in place).
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
    // Safety: forwarded from the caller.
    ffi::null_on_error(|| unsafe { memory::reg_mr(pd, addr, length, iova, access) })
}

/// `struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
/// uint64_t iova, int fd, int access)`: NULL and `errno` on failure.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_reg_dmabuf_mr(
    pd: *mut ibv_pd,
    offset: u64,
    length: usize,
    iova: u64,
    fd: c_int,
    access: c_int,
) -> *mut ibv_mr {
    ffi::null_on_error(|| verbs::reg_dmabuf_mr(pd, offset, length, iova, fd, access))
}

/// `int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t
/// length, int access)`: 0, or an `IBV_REREG_MR_ERR_*` code with `errno` set.
///
/// # Safety
///
/// With `IBV_REREG_MR_CHANGE_TRANSLATION`, `[addr, addr + length)` is memory of the calling
/// process that stays mapped, as for `ibv_reg_mr`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_rereg_mr(
    mr: *mut ibv_mr,
    flags: c_int,
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::rereg_code(|| unsafe { memory::rereg_mr(mr, flags, pd, addr, length, access) })
}

/// `int ibv_dereg_mr(struct ibv_mr *mr)`: 0 or an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    ffi::errno_value(|| memory::dereg_mr(mr))
}

/// `struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)`: NULL
/// and `errno` on failure.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_import_pd(context: *mut ibv_context, pd_handle: u32) -> *mut ibv_pd {
    ffi::null_on_error(|| verbs::import_pd(context, pd_handle))
}

/// `void ibv_unimport_pd(struct ibv_pd *pd)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_unimport_pd(pd: *mut ibv_pd) {
    ffi::void(|| verbs::unimport_pd(pd))
}

/// `struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)`: NULL and
/// `errno` on failure.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_import_mr(pd: *mut ibv_pd, mr_handle: u32) -> *mut ibv_mr {
    ffi::null_on_error(|| verbs::import_mr(pd, mr_handle))
}

/// `void ibv_unimport_mr(struct ibv_mr *mr)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_unimport_mr(mr: *mut ibv_mr) {
    ffi::void(|| verbs::unimport_mr(mr))
}

/// `struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)`: NULL
/// and `errno` on failure.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_import_dm(context: *mut ibv_context, dm_handle: u32) -> *mut ibv_dm {
    ffi::null_on_error(|| verbs::import_dm(context, dm_handle))
}

/// `void ibv_unimport_dm(struct ibv_dm *dm)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_unimport_dm(dm: *mut ibv_dm) {
    ffi::void(|| verbs::unimport_dm(dm))
}

/// `int ibv_fork_init(void)`: 0, or an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_fork_init() -> c_int {
    ffi::errno_value(fork::init)
}

/// `enum ibv_fork_status ibv_is_fork_initialized(void)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_is_fork_initialized() -> ibv_fork_status {
    ffi::or_fallback(verbs_abi::IBV_FORK_DISABLED, || Ok(fork::status()))
}

/// `int ibv_dontfork_range(void *base, size_t size)`: 0 or an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_dontfork_range(base: *mut c_void, size: usize) -> c_int {
    ffi::errno_value(|| fork::set_range_inherited(base, size, false))
}

/// `int ibv_dofork_range(void *base, size_t size)`: 0 or an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_dofork_range(base: *mut c_void, size: usize) -> c_int {
    ffi::errno_value(|| fork::set_range_inherited(base, size, true))
}

include!(concat!(env!("OUT_DIR"), "/symver_exports_memory.rs"));
