//! The libibverbs functions this library calls, found at run time in the process's own
//! `libibverbs.so.1` (`ibv_attach_mcast` and `ibv_detach_mcast` among them: the QP of an
//! id that joined a multicast group is attached to it as cma.c attaches it).
//!
//! Every verbs object an id owns (the device context, its PD, the CQs whose `cq_context`
//! is the id, completion channels, QPs, SRQs) is made through the libibverbs C API, so
//! the application uses it with libibverbs like any other: with the drop-in
//! `libibverbs.so.1` first on `LD_LIBRARY_PATH`, that is xroce's. The library is found by
//! its soname (`dlopen` with `RTLD_NOLOAD` first: the one the process has), never linked,
//! so this library does not care which one it is.
//!
//! [`Verbs`] is a table of function pointers: tests fill it with fakes. The verbs.h inline
//! functions librdmacm relies on (`ibv_create_qp_ex`, `ibv_create_srq_ex`) are
//! reproduced here over the context's `verbs_context` table, as verbs.h writes them.

use std::ffi::{CStr, c_char, c_int, c_void};

use verbs_abi::{
    __VERBS_ABI_IS_EXTENDED, IBV_QP_INIT_ATTR_PD, IBV_SRQ_INIT_ATTR_PD, IBV_SRQ_INIT_ATTR_TYPE,
    IBV_SRQT_BASIC, ibv_comp_channel, ibv_context, ibv_cq, ibv_device, ibv_gid, ibv_pd, ibv_qp,
    ibv_qp_attr, ibv_qp_init_attr, ibv_qp_init_attr_ex, ibv_srq, ibv_srq_init_attr,
    ibv_srq_init_attr_ex, verbs_context,
};

use crate::ffi::{Cm, Errno};

/// The soname of the verbs library.
const LIBIBVERBS: &CStr = c"libibverbs.so.1";

/// The libibverbs functions librdmacm calls, with their C signatures.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Verbs {
    pub(crate) get_device_list: unsafe extern "C" fn(*mut c_int) -> *mut *mut ibv_device,
    pub(crate) get_device_name: unsafe extern "C" fn(*mut ibv_device) -> *const c_char,
    pub(crate) open_device: unsafe extern "C" fn(*mut ibv_device) -> *mut ibv_context,
    pub(crate) alloc_pd: unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_pd,
    pub(crate) dealloc_pd: unsafe extern "C" fn(*mut ibv_pd) -> c_int,
    pub(crate) create_comp_channel: unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_comp_channel,
    pub(crate) destroy_comp_channel: unsafe extern "C" fn(*mut ibv_comp_channel) -> c_int,
    pub(crate) create_cq: unsafe extern "C" fn(
        *mut ibv_context,
        c_int,
        *mut c_void,
        *mut ibv_comp_channel,
        c_int,
    ) -> *mut ibv_cq,
    pub(crate) destroy_cq: unsafe extern "C" fn(*mut ibv_cq) -> c_int,
    pub(crate) create_qp: unsafe extern "C" fn(*mut ibv_pd, *mut ibv_qp_init_attr) -> *mut ibv_qp,
    pub(crate) modify_qp: unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int,
    pub(crate) destroy_qp: unsafe extern "C" fn(*mut ibv_qp) -> c_int,
    pub(crate) create_srq:
        unsafe extern "C" fn(*mut ibv_pd, *mut ibv_srq_init_attr) -> *mut ibv_srq,
    pub(crate) destroy_srq: unsafe extern "C" fn(*mut ibv_srq) -> c_int,
    pub(crate) attach_mcast: unsafe extern "C" fn(*mut ibv_qp, *const ibv_gid, u16) -> c_int,
    pub(crate) detach_mcast: unsafe extern "C" fn(*mut ibv_qp, *const ibv_gid, u16) -> c_int,
}

/// Looks up `name` in `handle` and returns it as a function pointer of type `F`.
///
/// # Safety
///
/// `F` is an `unsafe extern "C" fn` type matching the C declaration of `name`.
unsafe fn symbol<F: Copy>(handle: *mut c_void, name: &CStr) -> Cm<F> {
    // Safety: `handle` came from dlopen and `name` is NUL-terminated.
    let address = unsafe { libc::dlsym(handle, name.as_ptr()) };
    if address.is_null() {
        return Err(Errno::ENOSYS);
    }
    assert_eq!(size_of::<F>(), size_of::<*mut c_void>());
    // Safety: a non-NULL function address, reinterpreted as the pointer type the caller
    // vouches for (same size, asserted above).
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&address) })
}

impl Verbs {
    /// The process's libibverbs (loaded if it is not yet); `ENOSYS` when there is none or
    /// a function is missing from it.
    pub(crate) fn load() -> Cm<Verbs> {
        // Safety: dlopen with a NUL-terminated soname; RTLD_NOLOAD only looks.
        let mut handle =
            unsafe { libc::dlopen(LIBIBVERBS.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if handle.is_null() {
            // Safety: as above; this one loads it.
            handle = unsafe { libc::dlopen(LIBIBVERBS.as_ptr(), libc::RTLD_NOW) };
        }
        if handle.is_null() {
            return Err(Errno::ENOSYS);
        }
        /// `symbol` for a function whose type is its verbs.h declaration.
        macro_rules! function {
            ($name:literal) => {
                // Safety: the field's type is the verbs.h declaration of the function.
                unsafe { symbol(handle, $name)? }
            };
        }
        Ok(Verbs {
            get_device_list: function!(c"ibv_get_device_list"),
            get_device_name: function!(c"ibv_get_device_name"),
            open_device: function!(c"ibv_open_device"),
            alloc_pd: function!(c"ibv_alloc_pd"),
            dealloc_pd: function!(c"ibv_dealloc_pd"),
            create_comp_channel: function!(c"ibv_create_comp_channel"),
            destroy_comp_channel: function!(c"ibv_destroy_comp_channel"),
            create_cq: function!(c"ibv_create_cq"),
            destroy_cq: function!(c"ibv_destroy_cq"),
            create_qp: function!(c"ibv_create_qp"),
            modify_qp: function!(c"ibv_modify_qp"),
            destroy_qp: function!(c"ibv_destroy_qp"),
            create_srq: function!(c"ibv_create_srq"),
            destroy_srq: function!(c"ibv_destroy_srq"),
            attach_mcast: function!(c"ibv_attach_mcast"),
            detach_mcast: function!(c"ibv_detach_mcast"),
        })
    }

    /// verbs.h's inline `ibv_create_qp_ex`: plain `ibv_create_qp` when only the PD is
    /// given, else the context's `create_qp_ex` op (`EOPNOTSUPP` without one).
    ///
    /// # Safety
    ///
    /// `context` is a live context of the loaded libibverbs; `attr` is valid and its
    /// pointers are objects of that context.
    pub(crate) unsafe fn create_qp_ex(
        &self,
        context: *mut ibv_context,
        attr: *mut ibv_qp_init_attr_ex,
    ) -> Cm<*mut ibv_qp> {
        // Safety: `attr` is valid (caller).
        let a = unsafe { &mut *attr };
        let qp = if a.comp_mask == IBV_QP_INIT_ATTR_PD {
            // Safety: the plain attributes are the prefix of the extended ones (verbs-abi
            // asserts it), as verbs.h's cast assumes.
            unsafe { (self.create_qp)(a.pd, attr.cast()) }
        } else {
            let offset = std::mem::offset_of!(verbs_context, create_qp_ex);
            // Safety: `context` is live (caller).
            let op = unsafe { extended(context, offset) }.and_then(|v| v.create_qp_ex);
            let op = op.ok_or(Errno::EOPNOTSUPP)?;
            // Safety: the provider's own op on its own context.
            unsafe { op(context, attr) }
        };
        if qp.is_null() {
            Err(Errno::last())
        } else {
            Ok(qp)
        }
    }

    /// verbs.h's inline `ibv_create_srq_ex`.
    ///
    /// # Safety
    ///
    /// As [`Verbs::create_qp_ex`].
    pub(crate) unsafe fn create_srq_ex(
        &self,
        context: *mut ibv_context,
        attr: *mut ibv_srq_init_attr_ex,
    ) -> Cm<*mut ibv_srq> {
        // Safety: `attr` is valid (caller).
        let a = unsafe { &mut *attr };
        let basic = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE;
        let srq = if a.comp_mask & !basic == 0
            && a.comp_mask & IBV_SRQ_INIT_ATTR_PD != 0
            && (a.comp_mask & IBV_SRQ_INIT_ATTR_TYPE == 0 || a.srq_type == IBV_SRQT_BASIC)
        {
            // Safety: the plain attributes are the prefix of the extended ones.
            unsafe { (self.create_srq)(a.pd, attr.cast()) }
        } else {
            let offset = std::mem::offset_of!(verbs_context, create_srq_ex);
            // Safety: `context` is live (caller).
            let op = unsafe { extended(context, offset) }.and_then(|v| v.create_srq_ex);
            let op = op.ok_or(Errno::EOPNOTSUPP)?;
            // Safety: the provider's own op on its own context.
            unsafe { op(context, attr) }
        };
        if srq.is_null() {
            Err(Errno::last())
        } else {
            Ok(srq)
        }
    }

    /// `ibv_modify_qp`, its error value as an [`Errno`] (cma.c's `rdma_seterrno`).
    ///
    /// # Safety
    ///
    /// `qp` is a live QP of the loaded libibverbs.
    pub(crate) unsafe fn modify(&self, qp: *mut ibv_qp, attr: &ibv_qp_attr, mask: c_int) -> Cm<()> {
        let mut attr = *attr;
        // Safety: a live QP (caller) and a local attribute structure.
        errno_value(unsafe { (self.modify_qp)(qp, &mut attr, mask) })
    }

    /// `ibv_attach_mcast`: `qp` receives what is sent to the group `gid` (`lid` 0 on
    /// RoCE); its error value as an [`Errno`].
    ///
    /// # Safety
    ///
    /// `qp` is a live QP of the loaded libibverbs.
    pub(crate) unsafe fn attach(&self, qp: *mut ibv_qp, gid: &ibv_gid, lid: u16) -> Cm<()> {
        // Safety: a live QP (caller) and a GID that outlives the call.
        errno_value(unsafe { (self.attach_mcast)(qp, gid, lid) })
    }

    /// `ibv_detach_mcast`, as [`Verbs::attach`].
    ///
    /// # Safety
    ///
    /// As [`Verbs::attach`].
    pub(crate) unsafe fn detach(&self, qp: *mut ibv_qp, gid: &ibv_gid, lid: u16) -> Cm<()> {
        // Safety: as above.
        errno_value(unsafe { (self.detach_mcast)(qp, gid, lid) })
    }

    /// The name of a listed device.
    ///
    /// # Safety
    ///
    /// `device` is an entry of the loaded libibverbs' device list.
    pub(crate) unsafe fn device_name(&self, device: *mut ibv_device) -> Option<String> {
        // Safety: a listed device (caller).
        let name = unsafe { (self.get_device_name)(device) };
        if name.is_null() {
            return None;
        }
        // Safety: libibverbs returns a NUL-terminated string that lives with the device.
        Some(
            unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned(),
        )
    }
}

/// A verb's return value (0, an errno value, or -1 with `errno` set) as a result.
fn errno_value(value: c_int) -> Cm<()> {
    match value {
        0 => Ok(()),
        e if e > 0 => Err(Errno(e)),
        _ => Err(Errno::last()),
    }
}

/// The `verbs_context` of `context` when it has one that is large enough to hold the op
/// at `op_offset` (verbs.h's `verbs_get_ctx_op`).
///
/// # Safety
///
/// `context` is a live context.
unsafe fn extended<'a>(context: *mut ibv_context, op_offset: usize) -> Option<&'a verbs_context> {
    // Safety: a live context (caller).
    let c = unsafe { &*context };
    if c.abi_compat as usize != __VERBS_ABI_IS_EXTENDED {
        return None;
    }
    let offset = std::mem::offset_of!(verbs_context, context);
    let table = context
        .cast::<u8>()
        .wrapping_sub(offset)
        .cast::<verbs_context>();
    // Safety: an extended context is the last field of its `verbs_context`.
    let v = unsafe { &*table };
    // The table grows at the front: an older provider's is shorter and lacks the first ops.
    (v.sz >= size_of::<verbs_context>() - op_offset).then_some(v)
}
