//! The verbs objects a provider allocates and hands to the application: protection
//! domains, memory regions and windows, completion channels and queues, shared receive
//! queues, queue pairs, address handles, and the rarer XRC/WQ/flow/counter objects.
//!
//! A provider allocates each as the first field of its own larger structure; the
//! application reads the public fields (`mr->lkey`, `qp->qp_num`, `cq->context`, …) and
//! inline verbs.h code follows `context->ops` through them.

use core::ffi::{c_int, c_uint, c_void};

use crate::*;

/// `struct ibv_pd` (verbs.h 627–630): a protection domain.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_pd {
    /// The owning context.
    pub context: *mut ibv_context,
    /// Provider handle.
    pub handle: u32,
}

/// `struct ibv_td` (verbs.h 636–638): a thread domain.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_td {
    /// The owning context.
    pub context: *mut ibv_context,
}

/// `struct ibv_xrcd` (verbs.h 652–654): an XRC domain.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_xrcd {
    /// The owning context.
    pub context: *mut ibv_context,
}

/// `struct ibv_mr` (verbs.h 663–671): a registered memory region.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_mr {
    /// The owning context.
    pub context: *mut ibv_context,
    /// The protection domain.
    pub pd: *mut ibv_pd,
    /// Start of the region in the application's address space.
    pub addr: *mut c_void,
    /// Length in bytes.
    pub length: usize,
    /// Provider handle.
    pub handle: u32,
    /// Local key, used in SGEs.
    pub lkey: u32,
    /// Remote key, sent to peers for RDMA.
    pub rkey: u32,
}

/// `struct ibv_mw` (verbs.h 678–684): a memory window.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_mw {
    /// The owning context.
    pub context: *mut ibv_context,
    /// The protection domain.
    pub pd: *mut ibv_pd,
    /// Remote key.
    pub rkey: u32,
    /// Provider handle.
    pub handle: u32,
    /// An [`ibv_mw_type`].
    pub r#type: ibv_mw_type,
}

/// `struct ibv_dm` (verbs.h 171–180): device memory.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_dm {
    /// The owning context.
    pub context: *mut ibv_context,
    /// `ibv_memcpy_to_dm` (inline).
    pub memcpy_to_dm: Option<
        unsafe extern "C" fn(
            dm: *mut ibv_dm,
            dm_offset: u64,
            host_addr: *const c_void,
            length: usize,
        ) -> c_int,
    >,
    /// `ibv_memcpy_from_dm` (inline).
    pub memcpy_from_dm: Option<
        unsafe extern "C" fn(
            host_addr: *mut c_void,
            dm: *mut ibv_dm,
            dm_offset: u64,
            length: usize,
        ) -> c_int,
    >,
    /// Which extensions are valid.
    pub comp_mask: u32,
    /// Provider handle.
    pub handle: u32,
}

/// `struct ibv_comp_channel` (verbs.h 1464–1468): a completion event channel.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_comp_channel {
    /// The owning context.
    pub context: *mut ibv_context,
    /// The fd applications poll; `ibv_get_cq_event` reads it.
    pub fd: c_int,
    /// Number of CQs using the channel (`ibv_destroy_comp_channel` fails with `EBUSY`
    /// while it is not 0).
    pub refcnt: c_int,
}

/// `struct ibv_cq` (verbs.h 1470–1481): a completion queue.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_cq {
    /// The owning context; inline `ibv_poll_cq` follows `context->ops.poll_cq`.
    pub context: *mut ibv_context,
    /// The completion channel, or NULL.
    pub channel: *mut ibv_comp_channel,
    /// The application's cookie, returned by `ibv_get_cq_event`.
    pub cq_context: *mut c_void,
    /// Provider handle.
    pub handle: u32,
    /// Capacity in entries.
    pub cqe: c_int,
    /// Protects the event counters.
    pub mutex: pthread_mutex_t,
    /// Signalled when an event is acknowledged.
    pub cond: pthread_cond_t,
    /// Completion events acknowledged by `ibv_ack_cq_events`.
    pub comp_events_completed: u32,
    /// Asynchronous events acknowledged.
    pub async_events_completed: u32,
}

/// `struct ibv_poll_cq_attr` (verbs.h 1483–1485).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_poll_cq_attr {
    /// Must be 0.
    pub comp_mask: u32,
}

/// `struct ibv_wc_tm_info` (verbs.h 1487–1490).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_wc_tm_info {
    /// Tag from the TMH.
    pub tag: u64,
    /// Opaque user data from the TMH.
    pub r#priv: u32,
}

/// `struct ibv_cq_ex` (verbs.h 1492–1527): an extended completion queue, read through
/// `ibv_start_poll`/`ibv_next_poll`/`ibv_wc_read_*` (inline). It begins with the
/// [`ibv_cq`] layout, so `ibv_cq_ex_to_cq` is a cast.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_cq_ex {
    /// As in [`ibv_cq`].
    pub context: *mut ibv_context,
    /// As in [`ibv_cq`].
    pub channel: *mut ibv_comp_channel,
    /// As in [`ibv_cq`].
    pub cq_context: *mut c_void,
    /// As in [`ibv_cq`].
    pub handle: u32,
    /// As in [`ibv_cq`].
    pub cqe: c_int,
    /// As in [`ibv_cq`].
    pub mutex: pthread_mutex_t,
    /// As in [`ibv_cq`].
    pub cond: pthread_cond_t,
    /// As in [`ibv_cq`].
    pub comp_events_completed: u32,
    /// As in [`ibv_cq`].
    pub async_events_completed: u32,
    /// Which extensions are valid.
    pub comp_mask: u32,
    /// Status of the current completion (an [`ibv_wc_status`]).
    pub status: ibv_wc_status,
    /// Work request id of the current completion.
    pub wr_id: u64,
    /// `ibv_start_poll`: 0, `ENOENT` if empty, or an errno.
    pub start_poll:
        Option<unsafe extern "C" fn(current: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int>,
    /// `ibv_next_poll`: 0, `ENOENT` if empty, or an errno.
    pub next_poll: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> c_int>,
    /// `ibv_end_poll`.
    pub end_poll: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex)>,
    /// `ibv_wc_read_opcode`.
    pub read_opcode: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> ibv_wc_opcode>,
    /// `ibv_wc_read_vendor_err`.
    pub read_vendor_err: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u32>,
    /// `ibv_wc_read_byte_len`.
    pub read_byte_len: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u32>,
    /// `ibv_wc_read_imm_data` (`__be32`).
    pub read_imm_data: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u32>,
    /// `ibv_wc_read_qp_num`.
    pub read_qp_num: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u32>,
    /// `ibv_wc_read_src_qp`.
    pub read_src_qp: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u32>,
    /// `ibv_wc_read_wc_flags`.
    pub read_wc_flags: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> c_uint>,
    /// `ibv_wc_read_slid`.
    pub read_slid: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u32>,
    /// `ibv_wc_read_sl`.
    pub read_sl: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u8>,
    /// `ibv_wc_read_dlid_path_bits`.
    pub read_dlid_path_bits: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u8>,
    /// `ibv_wc_read_completion_ts`.
    pub read_completion_ts: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u64>,
    /// `ibv_wc_read_cvlan`.
    pub read_cvlan: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u16>,
    /// `ibv_wc_read_flow_tag`.
    pub read_flow_tag: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u32>,
    /// `ibv_wc_read_tm_info`.
    pub read_tm_info:
        Option<unsafe extern "C" fn(current: *mut ibv_cq_ex, tm_info: *mut ibv_wc_tm_info)>,
    /// `ibv_wc_read_completion_wallclock_ns`.
    pub read_completion_wallclock_ns: Option<unsafe extern "C" fn(current: *mut ibv_cq_ex) -> u64>,
}

/// `struct ibv_srq` (verbs.h 1215–1224): a shared receive queue.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_srq {
    /// The owning context; inline `ibv_post_srq_recv` follows `context->ops`.
    pub context: *mut ibv_context,
    /// The application's cookie.
    pub srq_context: *mut c_void,
    /// The protection domain.
    pub pd: *mut ibv_pd,
    /// Provider handle.
    pub handle: u32,
    /// Protects `events_completed`.
    pub mutex: pthread_mutex_t,
    /// Signalled when an event is acknowledged.
    pub cond: pthread_cond_t,
    /// Asynchronous events acknowledged.
    pub events_completed: u32,
}

/// `struct ibv_wq` (verbs.h 1237–1253): a receive work queue.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_wq {
    /// The owning context.
    pub context: *mut ibv_context,
    /// The application's cookie.
    pub wq_context: *mut c_void,
    /// The protection domain.
    pub pd: *mut ibv_pd,
    /// The completion queue.
    pub cq: *mut ibv_cq,
    /// WQ number.
    pub wq_num: u32,
    /// Provider handle.
    pub handle: u32,
    /// An [`ibv_wq_state`].
    pub state: ibv_wq_state,
    /// An [`ibv_wq_type`].
    pub wq_type: ibv_wq_type,
    /// `ibv_post_wq_recv` (inline).
    pub post_recv: Option<
        unsafe extern "C" fn(
            current: *mut ibv_wq,
            recv_wr: *mut ibv_recv_wr,
            bad_recv_wr: *mut *mut ibv_recv_wr,
        ) -> c_int,
    >,
    /// Protects `events_completed`.
    pub mutex: pthread_mutex_t,
    /// Signalled when an event is acknowledged.
    pub cond: pthread_cond_t,
    /// Asynchronous events acknowledged.
    pub events_completed: u32,
    /// Which extensions are valid.
    pub comp_mask: u32,
}

/// `struct ibv_rwq_ind_table` (verbs.h 875–880): a receive WQ indirection table.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_rwq_ind_table {
    /// The owning context.
    pub context: *mut ibv_context,
    /// Provider handle.
    pub ind_tbl_handle: c_int,
    /// Table number.
    pub ind_tbl_num: c_int,
    /// Which extensions are valid.
    pub comp_mask: u32,
}

/// `struct ibv_qp` (verbs.h 1255–1270): a queue pair.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_qp {
    /// The owning context; inline `ibv_post_send`/`ibv_post_recv` follow `context->ops`.
    pub context: *mut ibv_context,
    /// The application's cookie.
    pub qp_context: *mut c_void,
    /// The protection domain.
    pub pd: *mut ibv_pd,
    /// The send CQ.
    pub send_cq: *mut ibv_cq,
    /// The receive CQ.
    pub recv_cq: *mut ibv_cq,
    /// The SRQ, or NULL.
    pub srq: *mut ibv_srq,
    /// Provider handle.
    pub handle: u32,
    /// The QP number (24 bits), exchanged with the peer.
    pub qp_num: u32,
    /// Last known [`ibv_qp_state`] (updated by `ibv_modify_qp`/`ibv_query_qp`).
    pub state: ibv_qp_state,
    /// An [`ibv_qp_type`].
    pub qp_type: ibv_qp_type,
    /// Protects `events_completed`.
    pub mutex: pthread_mutex_t,
    /// Signalled when an event is acknowledged.
    pub cond: pthread_cond_t,
    /// Asynchronous events acknowledged.
    pub events_completed: u32,
}

/// `struct ibv_qp_ex` (verbs.h 1272–1321): a queue pair with the `ibv_wr_*` work request
/// builder (all inline calls through these pointers). `ibv_qp_to_qp_ex` returns it for QPs
/// created with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_qp_ex {
    /// The base QP.
    pub qp_base: ibv_qp,
    /// Which extensions are valid.
    pub comp_mask: u64,
    /// Work request id of the next `wr_*` request.
    pub wr_id: u64,
    /// [`ibv_send_flags`] of the next request.
    pub wr_flags: c_uint,
    /// `ibv_wr_atomic_cmp_swp`.
    pub wr_atomic_cmp_swp: Option<
        unsafe extern "C" fn(
            qp: *mut ibv_qp_ex,
            rkey: u32,
            remote_addr: u64,
            compare: u64,
            swap: u64,
        ),
    >,
    /// `ibv_wr_atomic_fetch_add`.
    pub wr_atomic_fetch_add:
        Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, add: u64)>,
    /// `ibv_wr_bind_mw`.
    pub wr_bind_mw: Option<
        unsafe extern "C" fn(
            qp: *mut ibv_qp_ex,
            mw: *mut ibv_mw,
            rkey: u32,
            bind_info: *const ibv_mw_bind_info,
        ),
    >,
    /// `ibv_wr_local_inv`.
    pub wr_local_inv: Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, invalidate_rkey: u32)>,
    /// `ibv_wr_rdma_read`.
    pub wr_rdma_read: Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64)>,
    /// `ibv_wr_rdma_write`.
    pub wr_rdma_write:
        Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64)>,
    /// `ibv_wr_rdma_write_imm` (`imm_data` is `__be32`).
    pub wr_rdma_write_imm: Option<
        unsafe extern "C" fn(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, imm_data: u32),
    >,
    /// `ibv_wr_send`.
    pub wr_send: Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex)>,
    /// `ibv_wr_send_imm` (`imm_data` is `__be32`).
    pub wr_send_imm: Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, imm_data: u32)>,
    /// `ibv_wr_send_inv`.
    pub wr_send_inv: Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, invalidate_rkey: u32)>,
    /// `ibv_wr_send_tso`.
    pub wr_send_tso:
        Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, hdr: *mut c_void, hdr_sz: u16, mss: u16)>,
    /// `ibv_wr_set_ud_addr`.
    pub wr_set_ud_addr: Option<
        unsafe extern "C" fn(
            qp: *mut ibv_qp_ex,
            ah: *mut ibv_ah,
            remote_qpn: u32,
            remote_qkey: u32,
        ),
    >,
    /// `ibv_wr_set_xrc_srqn`.
    pub wr_set_xrc_srqn: Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, remote_srqn: u32)>,
    /// `ibv_wr_set_inline_data`.
    pub wr_set_inline_data:
        Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, addr: *mut c_void, length: usize)>,
    /// `ibv_wr_set_inline_data_list`.
    pub wr_set_inline_data_list: Option<
        unsafe extern "C" fn(qp: *mut ibv_qp_ex, num_buf: usize, buf_list: *const ibv_data_buf),
    >,
    /// `ibv_wr_set_sge`.
    pub wr_set_sge:
        Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32)>,
    /// `ibv_wr_set_sge_list`.
    pub wr_set_sge_list:
        Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex, num_sge: usize, sg_list: *const ibv_sge)>,
    /// `ibv_wr_start`.
    pub wr_start: Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex)>,
    /// `ibv_wr_complete`: 0 or an errno.
    pub wr_complete: Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex) -> c_int>,
    /// `ibv_wr_abort`.
    pub wr_abort: Option<unsafe extern "C" fn(qp: *mut ibv_qp_ex)>,
    /// `ibv_wr_atomic_write`.
    pub wr_atomic_write: Option<
        unsafe extern "C" fn(
            qp: *mut ibv_qp_ex,
            rkey: u32,
            remote_addr: u64,
            atomic_wr: *const c_void,
        ),
    >,
}

/// `struct ibv_ah` (verbs.h 1657–1661): an address handle (UD destination).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_ah {
    /// The owning context.
    pub context: *mut ibv_context,
    /// The protection domain.
    pub pd: *mut ibv_pd,
    /// Provider handle.
    pub handle: u32,
}

/// `struct ibv_flow` (verbs.h 1895–1899): a steering rule.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_flow {
    /// Which extensions are valid.
    pub comp_mask: u32,
    /// The owning context.
    pub context: *mut ibv_context,
    /// Provider handle.
    pub handle: u32,
}

/// `struct ibv_flow_action` (verbs.h 1901–1903).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_flow_action {
    /// The owning context.
    pub context: *mut ibv_context,
}

/// `struct ibv_counters` (verbs.h 2066–2068).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_counters {
    /// The owning context.
    pub context: *mut ibv_context,
}

zeroed_default!(
    ibv_pd,
    ibv_td,
    ibv_xrcd,
    ibv_mr,
    ibv_mw,
    ibv_dm,
    ibv_comp_channel,
    ibv_cq,
    ibv_cq_ex,
    ibv_srq,
    ibv_wq,
    ibv_rwq_ind_table,
    ibv_qp,
    ibv_qp_ex,
    ibv_ah,
    ibv_flow,
    ibv_flow_action,
    ibv_counters,
);
