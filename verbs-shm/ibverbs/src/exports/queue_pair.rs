//! Shared receive queues, queue pairs, multicast, ECE and address handles.
//! (`ibv_post_send`, `ibv_post_recv` and `ibv_post_srq_recv` are inline in verbs.h and go
//! through `ibv_context_ops`.)

use std::ffi::c_int;

use verbs_abi::{
    ibv_ah, ibv_ah_attr, ibv_context, ibv_ece, ibv_gid, ibv_grh, ibv_pd, ibv_qp, ibv_qp_attr,
    ibv_qp_ex, ibv_qp_init_attr, ibv_srq, ibv_srq_attr, ibv_srq_init_attr, ibv_wc, ibv_wr_opcode,
};

use crate::ffi;
use crate::provider::{queue_pair, verbs};

/// `struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr
/// *srq_init_attr)`: NULL and `errno` on failure.
///
/// # Safety
///
/// `srq_init_attr` is NULL or valid for reading and writing.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_create_srq(
    pd: *mut ibv_pd,
    srq_init_attr: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
    // Safety: forwarded from the caller.
    ffi::null_on_error(|| unsafe { queue_pair::create_srq(pd, srq_init_attr) })
}

/// `int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, int
/// srq_attr_mask)`: 0 or an errno value.
///
/// # Safety
///
/// `srq_attr` is NULL or readable.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_modify_srq(
    srq: *mut ibv_srq,
    srq_attr: *mut ibv_srq_attr,
    srq_attr_mask: c_int,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::errno_value(|| unsafe { queue_pair::modify_srq(srq, srq_attr, srq_attr_mask) })
}

/// `int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr)`: 0 or an errno
/// value.
///
/// # Safety
///
/// `srq_attr` is NULL or valid for writing.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_query_srq(
    srq: *mut ibv_srq,
    srq_attr: *mut ibv_srq_attr,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::errno_value(|| unsafe { queue_pair::query_srq(srq, srq_attr) })
}

/// `int ibv_destroy_srq(struct ibv_srq *srq)`: 0 or an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
    ffi::errno_value(|| queue_pair::destroy_srq(srq))
}

/// `struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr
/// *qp_init_attr)`: NULL and `errno` on failure.
///
/// # Safety
///
/// `qp_init_attr` is NULL or valid for reading and writing.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    // Safety: forwarded from the caller.
    ffi::null_on_error(|| unsafe { queue_pair::create_qp(pd, qp_init_attr) })
}

/// `struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)`: NULL if the QP has no extended
/// interface.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
    ffi::null_on_error(|| queue_pair::qp_to_qp_ex(qp))
}

/// `int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask, struct
/// ibv_qp_init_attr *init_attr)`: 0 or an errno value.
///
/// # Safety
///
/// `attr` and `init_attr` are NULL or valid for writing.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::errno_value(|| unsafe { queue_pair::query_qp(qp, attr, attr_mask, init_attr) })
}

/// `int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t
/// flags)`: the subset of `flags` that holds; 0 (no promise) when unknown.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_query_qp_data_in_order(
    qp: *mut ibv_qp,
    op: ibv_wr_opcode,
    flags: u32,
) -> c_int {
    ffi::or_fallback(0, || verbs::query_qp_data_in_order(qp, op, flags))
}

/// `int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)`: 0 or
/// an errno value.
///
/// # Safety
///
/// `attr` is NULL or readable.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::errno_value(|| unsafe { queue_pair::modify_qp(qp, attr, attr_mask) })
}

/// `int ibv_destroy_qp(struct ibv_qp *qp)`: 0 or an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    ffi::errno_value(|| queue_pair::destroy_qp(qp))
}

/// `int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)`: 0
/// or an errno value.
///
/// # Safety
///
/// `gid` is NULL or valid for reading.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_attach_mcast(
    qp: *mut ibv_qp,
    gid: *const ibv_gid,
    lid: u16,
) -> c_int {
    // Safety: NULL or valid for reading (caller).
    ffi::errno_value(|| unsafe { queue_pair::attach_mcast(qp, gid, lid) })
}

/// `int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)`: 0
/// or an errno value.
///
/// # Safety
///
/// `gid` is NULL or valid for reading.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_detach_mcast(
    qp: *mut ibv_qp,
    gid: *const ibv_gid,
    lid: u16,
) -> c_int {
    // Safety: NULL or valid for reading (caller).
    ffi::errno_value(|| unsafe { queue_pair::detach_mcast(qp, gid, lid) })
}

/// `int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)`: 0 or an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_set_ece(qp: *mut ibv_qp, ece: *mut ibv_ece) -> c_int {
    ffi::errno_value(|| verbs::set_ece(qp, ece))
}

/// `int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)`: 0 or an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_query_ece(qp: *mut ibv_qp, ece: *mut ibv_ece) -> c_int {
    ffi::errno_value(|| verbs::query_ece(qp, ece))
}

/// `struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)`: NULL and
/// `errno` on failure.
///
/// # Safety
///
/// `attr` is NULL or readable.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_create_ah(
    pd: *mut ibv_pd,
    attr: *mut ibv_ah_attr,
) -> *mut ibv_ah {
    // Safety: forwarded from the caller.
    ffi::null_on_error(|| unsafe { queue_pair::create_ah(pd, attr) })
}

/// `int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc
/// *wc, struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)`: 0, or -1 and `errno`.
///
/// # Safety
///
/// `wc` is NULL or readable, `grh` NULL or readable for 40 bytes, `ah_attr` NULL
/// or writable.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_init_ah_from_wc(
    context: *mut ibv_context,
    port_num: u8,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    ah_attr: *mut ibv_ah_attr,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::minus_one_on_error(|| unsafe {
        queue_pair::init_ah_from_wc(context, port_num, wc, grh, ah_attr)
    })
}

/// `struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct
/// ibv_grh *grh, uint8_t port_num)`: NULL and `errno` on failure.
///
/// # Safety
///
/// `wc` is NULL or readable, `grh` NULL or readable for 40 bytes.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn ibv_create_ah_from_wc(
    pd: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    port_num: u8,
) -> *mut ibv_ah {
    // Safety: forwarded from the caller.
    ffi::null_on_error(|| unsafe { queue_pair::create_ah_from_wc(pd, wc, grh, port_num) })
}

/// `int ibv_destroy_ah(struct ibv_ah *ah)`: 0 or an errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    ffi::errno_value(|| queue_pair::destroy_ah(ah))
}

/// `int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
/// uint8_t eth_mac[6], uint16_t *vid)`: 0 or the negated errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_resolve_eth_l2_from_gid(
    context: *mut ibv_context,
    attr: *mut ibv_ah_attr,
    eth_mac: *mut u8,
    vid: *mut u16,
) -> c_int {
    ffi::zero_or_negated_errno(|| verbs::resolve_eth_l2_from_gid(context, attr, eth_mac, vid))
}

include!(concat!(env!("OUT_DIR"), "/symver_exports_queue_pair.rs"));
