//! The historical `IBVERBS_1.0`/`1.1` helpers other rdma-core libraries still import:
//! sysfs access and kernel-structure conversions for librdmacm.

use std::ffi::{CStr, c_char, c_int, c_void};

use verbs_abi::{ibv_ah_attr, ibv_qp_attr};

use crate::ffi::{self, Errno};
use crate::provider::{kernel_provider, sysfs};

/// `const char *ibv_get_sysfs_path(void)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    ffi::const_null_on_error(|| Ok(sysfs::path().as_ptr()))
}

/// `int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)`:
/// the length read, or -1 and `errno`.
///
/// # Safety
///
/// `dir` and `file` are NULL or NUL-terminated strings; `buf` is NULL or valid for writing
/// `size` bytes.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    ffi::minus_one_on_error(|| {
        if dir.is_null() || file.is_null() || (buf.is_null() && size > 0) {
            return Err(Errno::EINVAL);
        }
        // Safety: the caller passes a NUL-terminated string, checked non-NULL above.
        let dir = unsafe { CStr::from_ptr(dir) };
        // Safety: as for `dir`.
        let file = unsafe { CStr::from_ptr(file) };
        let buf: &mut [u8] = if size == 0 {
            &mut []
        } else {
            // Safety: the caller passes a buffer valid for writing `size` bytes, checked
            // non-NULL above; C `char` and `u8` have the same layout.
            unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), size) }
        };
        sysfs::read_file(dir, file, buf)
    })
}

/// `void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr
/// *src)`: inert (a kernel rdma_cm reply cannot exist); sets `errno`, leaves `dst` alone.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_copy_qp_attr_from_kern(_dst: *mut ibv_qp_attr, _src: *mut c_void) {
    ffi::void(kernel_provider::no_kernel)
}

/// `void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr
/// *src)`: inert, as above.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_copy_ah_attr_from_kern(_dst: *mut ibv_ah_attr, _src: *mut c_void) {
    ffi::void(kernel_provider::no_kernel)
}

/// `void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec
/// *src)`: inert, as above.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_copy_path_rec_from_kern(_dst: *mut c_void, _src: *mut c_void) {
    ffi::void(kernel_provider::no_kernel)
}

/// `void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec
/// *src)`: inert, as above.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_copy_path_rec_to_kern(_dst: *mut c_void, _src: *mut c_void) {
    ffi::void(kernel_provider::no_kernel)
}

include!(concat!(env!("OUT_DIR"), "/symver_exports_legacy.rs"));
