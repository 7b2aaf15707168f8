//! The functions applications reach through pointers this library hands out rather than
//! through exported symbols: `ibv_context_ops` (the inline `ibv_post_send`,
//! `ibv_post_recv`, `ibv_poll_cq`, `ibv_req_notify_cq`, `ibv_post_srq_recv`), the
//! extended `verbs_context` ops (the inline `ibv_query_port`, `ibv_query_device_ex`,
//! `ibv_create_cq_ex` and `ibv_create_qp_ex`), and the function tables of extended CQs and
//! QPs ([`extended`]).
//!
//! Like the exports, each is a thin shim: the panic guard and the C error contract from
//! `crate::ffi` around a function of `crate::provider`. Every other op is NULL, which
//! verbs.h turns into `EOPNOTSUPP` (memory windows, XRC, flow steering, device memory,
//! work queues, counters, parent domains, …), the answer of a provider without them.

mod extended;

use std::ffi::c_int;

use verbs_abi::*;

pub(crate) use extended::{set_cq_ex_ops, set_qp_ex_ops};

use crate::ffi;
use crate::provider::{completion, context, queue_pair};

/// The fast-path table of every context.
pub(crate) fn context_ops() -> ibv_context_ops {
    ibv_context_ops {
        poll_cq: Some(poll_cq),
        req_notify_cq: Some(req_notify_cq),
        post_srq_recv: Some(post_srq_recv),
        post_send: Some(post_send),
        post_recv: Some(post_recv),
        ..ibv_context_ops::default()
    }
}

/// `int (*poll_cq)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)`: the number of
/// completions, or -1 on error.
///
/// # Safety
///
/// `cq` is a CQ of this library; `wc` is valid for writing `num_entries` entries.
unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int {
    // Safety: forwarded from the caller.
    ffi::minus_one_on_error(|| unsafe { completion::poll_cq(cq, num_entries, wc) })
}

/// `int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only)`: 0 or an errno value.
///
/// # Safety
///
/// `cq` is a CQ of this library.
unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // Safety: forwarded from the caller.
    ffi::errno_value(|| unsafe { completion::req_notify_cq(cq, solicited_only) })
}

/// `int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr
/// **bad_wr)`: 0 or an errno value, with `*bad_wr` the first request not posted.
///
/// # Safety
///
/// `qp` is a QP of this library; `wr` is a valid list whose buffers are readable as
/// verbs requires; `bad_wr` is NULL or writable.
unsafe extern "C" fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::errno_value(|| unsafe { queue_pair::post_send(qp, wr, bad_wr) })
}

/// `int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr
/// **bad_wr)`: 0 or an errno value.
///
/// # Safety
///
/// `qp` is a QP of this library; `wr` is a valid list; `bad_wr` is NULL or writable.
unsafe extern "C" fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::errno_value(|| unsafe { queue_pair::post_recv(qp, wr, bad_wr) })
}

/// `int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *recv_wr, struct
/// ibv_recv_wr **bad_recv_wr)`: 0 or an errno value.
///
/// # Safety
///
/// `srq` is an SRQ of this library; `wr` is a valid list; `bad_wr` is NULL or writable.
unsafe extern "C" fn post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::errno_value(|| unsafe { queue_pair::post_srq_recv(srq, wr, bad_wr) })
}

/// `verbs_context::query_port`: `int (*)(struct ibv_context *, uint8_t port_num, struct
/// ibv_port_attr *, size_t port_attr_len)`: 0 or an errno value.
///
/// # Safety
///
/// `port_attr` is NULL or valid for writing `port_attr_len` bytes.
pub(crate) unsafe extern "C" fn query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut ibv_port_attr,
    port_attr_len: usize,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::errno_value(|| unsafe {
        context::query_port_ex(context, port_num, port_attr, port_attr_len)
    })
}

/// `verbs_context::query_device_ex`: `int (*)(struct ibv_context *, const struct
/// ibv_query_device_ex_input *, struct ibv_device_attr_ex *, size_t attr_size)`: 0 or an
/// errno value.
///
/// # Safety
///
/// `input` is NULL or readable; `attr` is NULL or valid for writing `attr_size` bytes.
pub(crate) unsafe extern "C" fn query_device_ex(
    context: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    // Safety: forwarded from the caller.
    ffi::errno_value(|| unsafe { context::query_device_ex(context, input, attr, attr_size) })
}

/// `verbs_context::create_cq_ex`: `struct ibv_cq_ex *(*)(struct ibv_context *, struct
/// ibv_cq_init_attr_ex *)`: NULL and `errno` on failure.
///
/// # Safety
///
/// `init_attr` is NULL or readable.
pub(crate) unsafe extern "C" fn create_cq_ex(
    context: *mut ibv_context,
    init_attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    // Safety: forwarded from the caller.
    ffi::null_on_error(|| unsafe { completion::create_cq_ex(context, init_attr) })
}

/// `verbs_context::create_qp_ex`: `struct ibv_qp *(*)(struct ibv_context *, struct
/// ibv_qp_init_attr_ex *)`: NULL and `errno` on failure.
///
/// # Safety
///
/// `init_attr` is NULL or valid for reading and writing.
pub(crate) unsafe extern "C" fn create_qp_ex(
    context: *mut ibv_context,
    init_attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    // Safety: forwarded from the caller.
    ffi::null_on_error(|| unsafe { queue_pair::create_qp_ex(context, init_attr) })
}
