//! The verbs on contexts and objects, all waiting for verbs-shm (see the module list in
//! [`provider`](super)).
//!
//! Each function has the arguments of its entry point, already typed, and answers
//! [`pending`]: `EOPNOTSUPP`, the answer of rdma-core's dummy provider ops. None of them
//! dereferences an argument, so they are safe functions; an implementation that reads
//! application memory becomes an `unsafe fn` documenting what the C contract guarantees.
//! The entry points in `crate::exports` already turn each answer into the C contract
//! (NULL + `errno`, positive errno, -1 + `errno`, …), so an implementation only returns
//! `Ok(…)`/`Err(Errno)`.

use std::ffi::{c_int, c_uint, c_void};

use verbs_abi::*;

use super::pending;
use crate::ffi::Verb;

// Contexts (need the daemon's device list and a control connection).

/// `ibv_open_device`.
pub(crate) fn open_device(_device: *mut ibv_device) -> Verb<*mut ibv_context> {
    pending()
}

/// `ibv_close_device`.
pub(crate) fn close_device(_context: *mut ibv_context) -> Verb<()> {
    pending()
}

/// `ibv_import_device`: share a context through its command fd.
pub(crate) fn import_device(_cmd_fd: c_int) -> Verb<*mut ibv_context> {
    pending()
}

/// `ibv_get_async_event`: blocks on `context->async_fd` unless it is non-blocking.
pub(crate) fn get_async_event(
    _context: *mut ibv_context,
    _event: *mut ibv_async_event,
) -> Verb<c_int> {
    pending()
}

/// `ibv_ack_async_event`.
pub(crate) fn ack_async_event(_event: *mut ibv_async_event) -> Verb<()> {
    pending()
}

// Queries.

/// `ibv_query_device`. Report `vendor_id` 0 until the `ibv_qp_ex` `wr_*` API exists:
/// perftest takes its legacy `ibv_post_send` path for unknown vendors.
pub(crate) fn query_device(_context: *mut ibv_context, _attr: *mut ibv_device_attr) -> Verb<()> {
    pending()
}

/// `ibv_query_port@IBVERBS_1.1`: writes the 48-byte `_compat_ibv_port_attr` only. The
/// inline `ibv_query_port` of current applications uses `verbs_context::query_port`
/// instead, with the full `ibv_port_attr`.
pub(crate) fn query_port(
    _context: *mut ibv_context,
    _port_num: u8,
    _attr: *mut _compat_ibv_port_attr,
) -> Verb<()> {
    pending()
}

/// `ibv_query_gid`: an empty index answers 0 with a zero GID (rdma-core's behaviour).
pub(crate) fn query_gid(
    _context: *mut ibv_context,
    _port_num: u8,
    _index: c_int,
    _gid: *mut ibv_gid,
) -> Verb<c_int> {
    pending()
}

/// `_ibv_query_gid_ex` (behind the inline `ibv_query_gid_ex`): RoCE v2 entries,
/// `gid_type` `IBV_GID_TYPE_ROCE_V2`; `entry_size` is the caller's `sizeof`.
pub(crate) fn query_gid_ex(
    _context: *mut ibv_context,
    _port_num: u32,
    _gid_index: u32,
    _entry: *mut ibv_gid_entry,
    _flags: u32,
    _entry_size: usize,
) -> Verb<()> {
    pending()
}

/// `_ibv_query_gid_table`: the number of valid entries written.
pub(crate) fn query_gid_table(
    _context: *mut ibv_context,
    _entries: *mut ibv_gid_entry,
    _max_entries: usize,
    _flags: u32,
    _entry_size: usize,
) -> Verb<isize> {
    pending()
}

/// `ibv_query_gid_type` (private; `ibv_devinfo -v` uses it): RoCE v2 is
/// `IBV_GID_TYPE_SYSFS_ROCE_V2` (1) in this older enumeration.
pub(crate) fn query_gid_type(
    _context: *mut ibv_context,
    _port_num: u8,
    _index: c_uint,
    _gid_type: *mut ibv_gid_type_sysfs,
) -> Verb<c_int> {
    pending()
}

/// `ibv_query_pkey`: `pkey` is `__be16`.
pub(crate) fn query_pkey(
    _context: *mut ibv_context,
    _port_num: u8,
    _index: c_int,
    _pkey: *mut u16,
) -> Verb<c_int> {
    pending()
}

/// `ibv_get_pkey_index`: `pkey` is `__be16`; the answer is the index.
pub(crate) fn pkey_index(_context: *mut ibv_context, _port_num: u8, _pkey: u16) -> Verb<c_int> {
    pending()
}

// Protection domains and memory.

/// `ibv_alloc_pd`.
pub(crate) fn alloc_pd(_context: *mut ibv_context) -> Verb<*mut ibv_pd> {
    pending()
}

/// `ibv_dealloc_pd`.
pub(crate) fn dealloc_pd(_pd: *mut ibv_pd) -> Verb<()> {
    pending()
}

/// `ibv_reg_mr`, `ibv_reg_mr_iova` and `ibv_reg_mr_iova2` all land here (rdma-core
/// forwards the first two to the third with `iova = addr`). perftest registers with
/// `IBV_ACCESS_RELAXED_ORDERING`, so optional access bits must be accepted.
pub(crate) fn reg_mr(
    _pd: *mut ibv_pd,
    _addr: *mut c_void,
    _length: usize,
    _iova: u64,
    _access: c_uint,
) -> Verb<*mut ibv_mr> {
    pending()
}

/// `ibv_reg_dmabuf_mr`.
pub(crate) fn reg_dmabuf_mr(
    _pd: *mut ibv_pd,
    _offset: u64,
    _length: usize,
    _iova: u64,
    _fd: c_int,
    _access: c_int,
) -> Verb<*mut ibv_mr> {
    pending()
}

/// `ibv_rereg_mr`.
pub(crate) fn rereg_mr(
    _mr: *mut ibv_mr,
    _flags: c_int,
    _pd: *mut ibv_pd,
    _addr: *mut c_void,
    _length: usize,
    _access: c_int,
) -> Verb<()> {
    pending()
}

/// `ibv_dereg_mr`.
pub(crate) fn dereg_mr(_mr: *mut ibv_mr) -> Verb<()> {
    pending()
}

/// `ibv_import_pd`.
pub(crate) fn import_pd(_context: *mut ibv_context, _pd_handle: u32) -> Verb<*mut ibv_pd> {
    pending()
}

/// `ibv_unimport_pd`.
pub(crate) fn unimport_pd(_pd: *mut ibv_pd) -> Verb<()> {
    pending()
}

/// `ibv_import_mr`.
pub(crate) fn import_mr(_pd: *mut ibv_pd, _mr_handle: u32) -> Verb<*mut ibv_mr> {
    pending()
}

/// `ibv_unimport_mr`.
pub(crate) fn unimport_mr(_mr: *mut ibv_mr) -> Verb<()> {
    pending()
}

/// `ibv_import_dm`.
pub(crate) fn import_dm(_context: *mut ibv_context, _dm_handle: u32) -> Verb<*mut ibv_dm> {
    pending()
}

/// `ibv_unimport_dm`.
pub(crate) fn unimport_dm(_dm: *mut ibv_dm) -> Verb<()> {
    pending()
}

// Completions.

/// `ibv_create_comp_channel`: `fd` must be pollable and honour `O_NONBLOCK`.
pub(crate) fn create_comp_channel(_context: *mut ibv_context) -> Verb<*mut ibv_comp_channel> {
    pending()
}

/// `ibv_destroy_comp_channel`: `EBUSY` while CQs use it.
pub(crate) fn destroy_comp_channel(_channel: *mut ibv_comp_channel) -> Verb<()> {
    pending()
}

/// `ibv_create_cq`.
pub(crate) fn create_cq(
    _context: *mut ibv_context,
    _cqe: c_int,
    _cq_context: *mut c_void,
    _channel: *mut ibv_comp_channel,
    _comp_vector: c_int,
) -> Verb<*mut ibv_cq> {
    pending()
}

/// `ibv_resize_cq`.
pub(crate) fn resize_cq(_cq: *mut ibv_cq, _cqe: c_int) -> Verb<()> {
    pending()
}

/// `ibv_destroy_cq`.
pub(crate) fn destroy_cq(_cq: *mut ibv_cq) -> Verb<()> {
    pending()
}

/// `ibv_get_cq_event`: reads one event from the channel's fd.
pub(crate) fn get_cq_event(
    _channel: *mut ibv_comp_channel,
    _cq: *mut *mut ibv_cq,
    _cq_context: *mut *mut c_void,
) -> Verb<c_int> {
    pending()
}

/// `ibv_ack_cq_events`.
pub(crate) fn ack_cq_events(_cq: *mut ibv_cq, _nevents: c_uint) -> Verb<()> {
    pending()
}

// Shared receive queues.

/// `ibv_create_srq` (also the inline `ibv_create_srq_ex` for basic SRQs).
pub(crate) fn create_srq(
    _pd: *mut ibv_pd,
    _init_attr: *mut ibv_srq_init_attr,
) -> Verb<*mut ibv_srq> {
    pending()
}

/// `ibv_modify_srq`.
pub(crate) fn modify_srq(
    _srq: *mut ibv_srq,
    _attr: *mut ibv_srq_attr,
    _attr_mask: c_int,
) -> Verb<()> {
    pending()
}

/// `ibv_query_srq`.
pub(crate) fn query_srq(_srq: *mut ibv_srq, _attr: *mut ibv_srq_attr) -> Verb<()> {
    pending()
}

/// `ibv_destroy_srq`.
pub(crate) fn destroy_srq(_srq: *mut ibv_srq) -> Verb<()> {
    pending()
}

// Queue pairs.

/// `ibv_create_qp` (also the inline `ibv_create_qp_ex` when `comp_mask` is exactly
/// `IBV_QP_INIT_ATTR_PD`): must write the real capacities back into `init_attr->cap`.
pub(crate) fn create_qp(_pd: *mut ibv_pd, _init_attr: *mut ibv_qp_init_attr) -> Verb<*mut ibv_qp> {
    pending()
}

/// `ibv_qp_to_qp_ex`: the `ibv_qp_ex` of a QP created through `create_qp_ex`.
pub(crate) fn qp_to_qp_ex(_qp: *mut ibv_qp) -> Verb<*mut ibv_qp_ex> {
    pending()
}

/// `ibv_query_qp`.
pub(crate) fn query_qp(
    _qp: *mut ibv_qp,
    _attr: *mut ibv_qp_attr,
    _attr_mask: c_int,
    _init_attr: *mut ibv_qp_init_attr,
) -> Verb<()> {
    pending()
}

/// `ibv_query_qp_data_in_order`: which of `flags` hold; 0 (no ordering promise) until
/// implemented.
pub(crate) fn query_qp_data_in_order(
    _qp: *mut ibv_qp,
    _op: ibv_wr_opcode,
    _flags: u32,
) -> Verb<c_int> {
    pending()
}

/// `ibv_modify_qp`.
pub(crate) fn modify_qp(_qp: *mut ibv_qp, _attr: *mut ibv_qp_attr, _attr_mask: c_int) -> Verb<()> {
    pending()
}

/// `ibv_destroy_qp`.
pub(crate) fn destroy_qp(_qp: *mut ibv_qp) -> Verb<()> {
    pending()
}

/// `ibv_attach_mcast`.
pub(crate) fn attach_mcast(_qp: *mut ibv_qp, _gid: *const ibv_gid, _lid: u16) -> Verb<()> {
    pending()
}

/// `ibv_detach_mcast`.
pub(crate) fn detach_mcast(_qp: *mut ibv_qp, _gid: *const ibv_gid, _lid: u16) -> Verb<()> {
    pending()
}

/// `ibv_set_ece`.
pub(crate) fn set_ece(_qp: *mut ibv_qp, _ece: *mut ibv_ece) -> Verb<()> {
    pending()
}

/// `ibv_query_ece`.
pub(crate) fn query_ece(_qp: *mut ibv_qp, _ece: *mut ibv_ece) -> Verb<()> {
    pending()
}

// Address handles.

/// `ibv_create_ah`.
pub(crate) fn create_ah(_pd: *mut ibv_pd, _attr: *mut ibv_ah_attr) -> Verb<*mut ibv_ah> {
    pending()
}

/// `ibv_init_ah_from_wc`: the reply address of a received UD message (the GRH holds the
/// IPv4 header in its last 20 bytes on RoCE v2).
pub(crate) fn init_ah_from_wc(
    _context: *mut ibv_context,
    _port_num: u8,
    _wc: *mut ibv_wc,
    _grh: *mut ibv_grh,
    _ah_attr: *mut ibv_ah_attr,
) -> Verb<c_int> {
    pending()
}

/// `ibv_create_ah_from_wc`.
pub(crate) fn create_ah_from_wc(
    _pd: *mut ibv_pd,
    _wc: *mut ibv_wc,
    _grh: *mut ibv_grh,
    _port_num: u8,
) -> Verb<*mut ibv_ah> {
    pending()
}

/// `ibv_destroy_ah`.
pub(crate) fn destroy_ah(_ah: *mut ibv_ah) -> Verb<()> {
    pending()
}

/// `ibv_resolve_eth_l2_from_gid`: the peer's MAC and VLAN from the neighbour table.
pub(crate) fn resolve_eth_l2_from_gid(
    _context: *mut ibv_context,
    _attr: *mut ibv_ah_attr,
    _eth_mac: *mut u8,
    _vid: *mut u16,
) -> Verb<()> {
    pending()
}
