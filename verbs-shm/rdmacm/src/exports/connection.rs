//! Connections, the QP attributes of external QPs, and ECE.

use std::ffi::{c_int, c_void};

use verbs_abi::{ibv_ece, ibv_qp_attr};

use crate::abi::{rdma_cm_id, rdma_conn_param};
use crate::cma::Cma;
use crate::connection;
use crate::ffi::{self, Errno};
use crate::id::IdPrivate;
use crate::qp;

/// `int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)`.
///
/// # Safety
///
/// `conn_param` is NULL or valid, its `private_data` holding `private_data_len` bytes.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_connect(
    id: *mut rdma_cm_id,
    conn_param: *mut rdma_conn_param,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        let id = IdPrivate::lookup(Cma::global(), id)?;
        // Safety: forwarded from the caller.
        unsafe { connection::connect(id, conn_param) }
    })
}

/// `int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)`.
///
/// # Safety
///
/// As [`rdma_connect`].
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_accept(
    id: *mut rdma_cm_id,
    conn_param: *mut rdma_conn_param,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        let id = IdPrivate::lookup(Cma::global(), id)?;
        // Safety: forwarded from the caller.
        unsafe { connection::accept(id, conn_param) }
    })
}

/// `int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t
/// private_data_len)`.
///
/// # Safety
///
/// `private_data` is NULL or holds `private_data_len` readable bytes.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_reject(
    id: *mut rdma_cm_id,
    private_data: *const c_void,
    private_data_len: u8,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        let id = IdPrivate::lookup(Cma::global(), id)?;
        // Safety: forwarded from the caller.
        unsafe { connection::reject(id, private_data, private_data_len) }
    })
}

/// `int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data, uint8_t
/// private_data_len)`: `EOPNOTSUPP`, as every ECE call on a device without ECE.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_reject_ece(
    id: *mut rdma_cm_id,
    _private_data: *const c_void,
    _private_data_len: u8,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        IdPrivate::lookup(Cma::global(), id)?;
        Err(Errno::EOPNOTSUPP)
    })
}

/// `int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_notify(id: *mut rdma_cm_id, event: u32) -> c_int {
    ffi::zero_or_minus_one(|| connection::notify(IdPrivate::lookup(Cma::global(), id)?, event))
}

/// `int rdma_disconnect(struct rdma_cm_id *id)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
    ffi::zero_or_minus_one(|| connection::disconnect(IdPrivate::lookup(Cma::global(), id)?))
}

/// `int rdma_establish(struct rdma_cm_id *id)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_establish(id: *mut rdma_cm_id) -> c_int {
    ffi::zero_or_minus_one(|| connection::establish(IdPrivate::lookup(Cma::global(), id)?))
}

/// `int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr, int
/// *qp_attr_mask)`: the attributes for `qp_attr->qp_state`, from the daemon.
///
/// # Safety
///
/// `qp_attr` and `qp_attr_mask` are NULL or valid for reading and writing.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_init_qp_attr(
    id: *mut rdma_cm_id,
    qp_attr: *mut ibv_qp_attr,
    qp_attr_mask: *mut c_int,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        let id = IdPrivate::lookup(Cma::global(), id)?;
        if qp_attr.is_null() || qp_attr_mask.is_null() {
            return Err(Errno::EINVAL);
        }
        // Safety: valid (caller).
        let state = unsafe { (*qp_attr).qp_state };
        let (attr, mask) = qp::init_qp_attr(id, state)?;
        // Safety: valid for writing (caller).
        unsafe { qp_attr.write(attr) };
        // Safety: as above.
        unsafe { qp_attr_mask.write(mask) };
        Ok(())
    })
}

/// `int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)`: arguments checked
/// as cma.c checks them, then `EOPNOTSUPP`: xroce devices have no ECE.
///
/// # Safety
///
/// `ece` is NULL or valid for reading.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_set_local_ece(
    id: *mut rdma_cm_id,
    ece: *mut ibv_ece,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        let id = IdPrivate::lookup(Cma::global(), id)?;
        // Safety: NULL or valid (caller).
        let ece = unsafe { ece.as_ref() }.ok_or(Errno::EINVAL)?;
        if id.with_c(|c| !c.qp.is_null()) || ece.vendor_id == 0 || ece.comp_mask != 0 {
            return Err(Errno::EINVAL);
        }
        Err(Errno::EOPNOTSUPP)
    })
}

/// `int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)`: as
/// [`rdma_set_local_ece`] (`ece` is never written).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_get_remote_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
    ffi::zero_or_minus_one(|| {
        let id = IdPrivate::lookup(Cma::global(), id)?;
        if ece.is_null() || id.with_c(|c| !c.qp.is_null()) {
            return Err(Errno::EINVAL);
        }
        Err(Errno::EOPNOTSUPP)
    })
}

include!(concat!(env!("OUT_DIR"), "/symver_exports_connection.rs"));
