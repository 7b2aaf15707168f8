//! The verbs this library does not support, each answering as rdma-core answers for a
//! provider without the feature: `EOPNOTSUPP` through the verb's C contract (NULL and
//! `errno`, an errno value, …), never a silent success. They check the object they are
//! called on, so a foreign pointer is still `EINVAL`.

use std::ffi::c_int;

use verbs_abi::*;

use super::objects::{Context, Pd, Qp, find};
use super::unsupported;
use crate::ffi::Verb;

/// `ibv_import_device`: sharing a context through its command fd needs the kernel's
/// uverbs file; an xroce context's `cmd_fd` is its connection to the daemon, which
/// cannot be shared.
pub(crate) fn import_device(_cmd_fd: c_int) -> Verb<*mut ibv_context> {
    unsupported()
}

/// `ibv_reg_dmabuf_mr`: no device memory to import from.
pub(crate) fn reg_dmabuf_mr(
    pd: *mut ibv_pd,
    _offset: u64,
    _length: usize,
    _iova: u64,
    _fd: c_int,
    _access: c_int,
) -> Verb<*mut ibv_mr> {
    find::<Pd>(pd)?;
    unsupported()
}

/// `ibv_import_pd`: objects belong to their context's daemon connection.
pub(crate) fn import_pd(context: *mut ibv_context, _pd_handle: u32) -> Verb<*mut ibv_pd> {
    find::<Context>(context)?;
    unsupported()
}

/// `ibv_unimport_pd`.
pub(crate) fn unimport_pd(_pd: *mut ibv_pd) -> Verb<()> {
    unsupported()
}

/// `ibv_import_mr`.
pub(crate) fn import_mr(pd: *mut ibv_pd, _mr_handle: u32) -> Verb<*mut ibv_mr> {
    find::<Pd>(pd)?;
    unsupported()
}

/// `ibv_unimport_mr`.
pub(crate) fn unimport_mr(_mr: *mut ibv_mr) -> Verb<()> {
    unsupported()
}

/// `ibv_import_dm`: there is no device memory.
pub(crate) fn import_dm(context: *mut ibv_context, _dm_handle: u32) -> Verb<*mut ibv_dm> {
    find::<Context>(context)?;
    unsupported()
}

/// `ibv_unimport_dm`.
pub(crate) fn unimport_dm(_dm: *mut ibv_dm) -> Verb<()> {
    unsupported()
}

/// `ibv_query_qp_data_in_order`: 0, "no ordering promise beyond the transport's", which
/// is what rdma-core answers for a provider without the query.
pub(crate) fn query_qp_data_in_order(
    qp: *mut ibv_qp,
    _op: ibv_wr_opcode,
    _flags: u32,
) -> Verb<c_int> {
    find::<Qp>(qp)?;
    Ok(0)
}

/// `ibv_set_ece`: no enhanced connection establishment options.
pub(crate) fn set_ece(qp: *mut ibv_qp, _ece: *mut ibv_ece) -> Verb<()> {
    find::<Qp>(qp)?;
    unsupported()
}

/// `ibv_query_ece`.
pub(crate) fn query_ece(qp: *mut ibv_qp, _ece: *mut ibv_ece) -> Verb<()> {
    find::<Qp>(qp)?;
    unsupported()
}

/// `ibv_resolve_eth_l2_from_gid`: a helper for kernel providers; the daemon resolves
/// neighbours itself when an address handle or a connected QP's path is set.
pub(crate) fn resolve_eth_l2_from_gid(
    context: *mut ibv_context,
    _attr: *mut ibv_ah_attr,
    _eth_mac: *mut u8,
    _vid: *mut u16,
) -> Verb<()> {
    find::<Context>(context)?;
    unsupported()
}
