//! Verbs objects of ids, endpoints, devices and address lookups.

use std::ffi::{c_char, c_int};

use verbs_abi::{
    ibv_context, ibv_pd, ibv_qp_init_attr, ibv_qp_init_attr_ex, ibv_srq_init_attr,
    ibv_srq_init_attr_ex,
};

use crate::abi::{rdma_addrinfo, rdma_cm_id};
use crate::addrinfo;
use crate::cma::Cma;
use crate::endpoint;
use crate::ffi::{self, Errno};
use crate::id::IdPrivate;
use crate::qp;

/// `int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr
/// *qp_init_attr)`: the QP (and the CQs not given) of the id, moved to INIT (UD: to RTS).
///
/// # Safety
///
/// `qp_init_attr` is NULL or valid, its pointers NULL or libibverbs objects; `pd` is NULL
/// or a libibverbs PD.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_create_qp(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        let id = IdPrivate::lookup(Cma::global(), id)?;
        // Safety: forwarded from the caller.
        unsafe { qp::create_qp(id, pd, qp_init_attr) }
    })
}

/// `int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex
/// *qp_init_attr)`.
///
/// # Safety
///
/// `qp_init_attr` is NULL or valid, its pointers NULL or libibverbs objects.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_create_qp_ex(
    id: *mut rdma_cm_id,
    qp_init_attr: *mut ibv_qp_init_attr_ex,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        let id = IdPrivate::lookup(Cma::global(), id)?;
        // Safety: forwarded from the caller.
        unsafe { qp::create_qp_ex(id, qp_init_attr) }
    })
}

/// `void rdma_destroy_qp(struct rdma_cm_id *id)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_destroy_qp(id: *mut rdma_cm_id) {
    ffi::void(|| qp::destroy_qp(IdPrivate::lookup(Cma::global(), id)?))
}

/// `int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd, struct
/// ibv_srq_init_attr *attr)`.
///
/// # Safety
///
/// `attr` is NULL or valid; `pd` is NULL or a libibverbs PD.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_create_srq(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    attr: *mut ibv_srq_init_attr,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        let id = IdPrivate::lookup(Cma::global(), id)?;
        // Safety: forwarded from the caller.
        unsafe { qp::create_srq(id, pd, attr) }
    })
}

/// `int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)`.
///
/// # Safety
///
/// `attr` is NULL or valid, its pointers NULL or libibverbs objects.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_create_srq_ex(
    id: *mut rdma_cm_id,
    attr: *mut ibv_srq_init_attr_ex,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        let id = IdPrivate::lookup(Cma::global(), id)?;
        // Safety: forwarded from the caller.
        unsafe { qp::create_srq_ex(id, attr) }
    })
}

/// `void rdma_destroy_srq(struct rdma_cm_id *id)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_destroy_srq(id: *mut rdma_cm_id) {
    ffi::void(|| qp::destroy_srq(IdPrivate::lookup(Cma::global(), id)?))
}

/// `int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd
/// *pd, struct ibv_qp_init_attr *qp_init_attr)`.
///
/// # Safety
///
/// `id` is NULL or valid for writing a pointer; `res` is NULL or a valid `rdma_addrinfo`
/// with addresses as long as their families say; `pd` is NULL or a libibverbs PD;
/// `qp_init_attr` is NULL or valid.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_create_ep(
    id: *mut *mut rdma_cm_id,
    res: *mut rdma_addrinfo,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        if id.is_null() {
            return Err(Errno::EINVAL);
        }
        // Safety: forwarded from the caller.
        let made = unsafe { endpoint::create_ep(Cma::global(), res, pd, qp_init_attr) }?;
        // Safety: writable (caller).
        unsafe { id.write(made) };
        Ok(())
    })
}

/// `void rdma_destroy_ep(struct rdma_cm_id *id)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_destroy_ep(id: *mut rdma_cm_id) {
    ffi::void(|| endpoint::destroy_ep(IdPrivate::lookup(Cma::global(), id)?))
}

/// `int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)`.
///
/// # Safety
///
/// `id` is NULL or valid for writing a pointer.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_get_request(
    listen: *mut rdma_cm_id,
    id: *mut *mut rdma_cm_id,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        let listen = IdPrivate::lookup(Cma::global(), listen)?;
        if id.is_null() {
            return Err(Errno::EINVAL);
        }
        let child = endpoint::get_request(listen)?;
        // Safety: writable (caller).
        unsafe { id.write(child) };
        Ok(())
    })
}

/// `struct ibv_context **rdma_get_devices(int *num_devices)`: the devices' contexts, NULL
/// and `errno` on failure.
///
/// # Safety
///
/// `num_devices` is NULL or valid for writing an `int`.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_get_devices(num_devices: *mut c_int) -> *mut *mut ibv_context {
    ffi::null_on_error(|| {
        // Safety: NULL or writable (caller).
        let count = unsafe { num_devices.as_mut() };
        Cma::global().get_devices(count)
    })
}

/// `void rdma_free_devices(struct ibv_context **list)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_free_devices(list: *mut *mut ibv_context) {
    ffi::void(|| Cma::global().free_devices(list))
}

/// `int rdma_getaddrinfo(const char *node, const char *service, const struct
/// rdma_addrinfo *hints, struct rdma_addrinfo **res)`: 0, libc's `EAI_*` code of a failed
/// lookup, or -1 and `errno`.
///
/// # Safety
///
/// `node` and `service` are NULL or NUL-terminated; `hints` is NULL or valid; `res` is
/// valid for writing a pointer.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::value_or_minus_one(|| unsafe {
        addrinfo::getaddrinfo(Cma::global(), node, service, hints, res)
    })
}

/// `void rdma_freeaddrinfo(struct rdma_addrinfo *res)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_freeaddrinfo(res: *mut rdma_addrinfo) {
    ffi::void(|| addrinfo::freeaddrinfo(Cma::global(), res))
}

include!(concat!(env!("OUT_DIR"), "/symver_exports_resources.rs"));
