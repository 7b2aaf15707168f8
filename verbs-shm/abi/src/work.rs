//! Work requests, work completions and events: what crosses the fast path.
//!
//! verbs.h declares some members inside anonymous unions (`imm_data`/`invalidate_rkey`,
//! `bind_mw`/`tso`). Where both members are a `u32` the mirror has one `u32` field (named
//! after the first member); otherwise the union gets a named field (`bind_mw_tso`).

use core::ffi::{c_int, c_uint, c_void};
use core::fmt;

use crate::*;

/// `struct ibv_sge` (verbs.h 1117–1121): one scatter/gather element.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_sge {
    /// Start address in the application's address space.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key of the MR covering `[addr, addr + length)`.
    pub lkey: u32,
}

/// `wr.rdma` of [`ibv_send_wr`]: RDMA write/read target.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_send_wr_rdma {
    /// Remote virtual address.
    pub remote_addr: u64,
    /// Remote key.
    pub rkey: u32,
}

/// `wr.atomic` of [`ibv_send_wr`]: atomic target and operands.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_send_wr_atomic {
    /// Remote virtual address (8-byte aligned).
    pub remote_addr: u64,
    /// Compare operand (compare-and-swap) or addend (fetch-and-add).
    pub compare_add: u64,
    /// Swap operand.
    pub swap: u64,
    /// Remote key.
    pub rkey: u32,
}

/// `wr.ud` of [`ibv_send_wr`]: UD destination.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_send_wr_ud {
    /// Address handle.
    pub ah: *mut ibv_ah,
    /// Destination QP number.
    pub remote_qpn: u32,
    /// Destination Q_Key.
    pub remote_qkey: u32,
}

/// The `wr` union of [`ibv_send_wr`]; which member is valid follows from the opcode and
/// the QP type.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_wr {
    /// RDMA write/read.
    pub rdma: ibv_send_wr_rdma,
    /// Atomics.
    pub atomic: ibv_send_wr_atomic,
    /// UD sends.
    pub ud: ibv_send_wr_ud,
}

impl fmt::Debug for ibv_send_wr_wr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ibv_send_wr_wr { .. }")
    }
}

/// `qp_type.xrc` of [`ibv_send_wr`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_send_wr_xrc {
    /// Remote SRQ number.
    pub remote_srqn: u32,
}

/// The `qp_type` union of [`ibv_send_wr`].
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_qp_type {
    /// XRC.
    pub xrc: ibv_send_wr_xrc,
}

impl fmt::Debug for ibv_send_wr_qp_type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ibv_send_wr_qp_type { .. }")
    }
}

/// `bind_mw` of [`ibv_send_wr`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_send_wr_bind_mw {
    /// The memory window.
    pub mw: *mut ibv_mw,
    /// The new remote key.
    pub rkey: u32,
    /// What to bind.
    pub bind_info: ibv_mw_bind_info,
}

/// `tso` of [`ibv_send_wr`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_send_wr_tso {
    /// Header.
    pub hdr: *mut c_void,
    /// Header size.
    pub hdr_sz: u16,
    /// Maximum segment size.
    pub mss: u16,
}

/// The anonymous `bind_mw`/`tso` union at the end of [`ibv_send_wr`].
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_bind_mw_tso {
    /// `IBV_WR_BIND_MW`.
    pub bind_mw: ibv_send_wr_bind_mw,
    /// `IBV_WR_TSO`.
    pub tso: ibv_send_wr_tso,
}

impl fmt::Debug for ibv_send_wr_bind_mw_tso {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ibv_send_wr_bind_mw_tso { .. }")
    }
}

/// `struct ibv_send_wr` (verbs.h 1123–1171): a send work request, posted through the inline
/// `ibv_post_send` (`qp->context->ops.post_send`), usually as a `next`-linked list.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_send_wr {
    /// The application's id, returned in the completion.
    pub wr_id: u64,
    /// The next request, or NULL.
    pub next: *mut ibv_send_wr,
    /// Scatter/gather list.
    pub sg_list: *mut ibv_sge,
    /// Entries in `sg_list`.
    pub num_sge: c_int,
    /// An [`ibv_wr_opcode`].
    pub opcode: ibv_wr_opcode,
    /// [`ibv_send_flags`] bits.
    pub send_flags: c_uint,
    /// Immediate data in network order (`*_WITH_IMM`), or the rkey to invalidate
    /// (`invalidate_rkey`, `*_INV`): one anonymous union of two `u32`s in C.
    pub imm_data: u32,
    /// Operation-specific fields.
    pub wr: ibv_send_wr_wr,
    /// QP-type-specific fields.
    pub qp_type: ibv_send_wr_qp_type,
    /// The anonymous `bind_mw`/`tso` union.
    pub bind_mw_tso: ibv_send_wr_bind_mw_tso,
}

/// `struct ibv_recv_wr` (verbs.h 1173–1178): a receive work request.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_recv_wr {
    /// The application's id, returned in the completion.
    pub wr_id: u64,
    /// The next request, or NULL.
    pub next: *mut ibv_recv_wr,
    /// Scatter list.
    pub sg_list: *mut ibv_sge,
    /// Entries in `sg_list`.
    pub num_sge: c_int,
}

/// `struct ibv_wc` (verbs.h 586–606): a work completion, written by `ibv_poll_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_wc {
    /// The request's `wr_id`.
    pub wr_id: u64,
    /// An [`ibv_wc_status`].
    pub status: ibv_wc_status,
    /// An [`ibv_wc_opcode`].
    pub opcode: ibv_wc_opcode,
    /// Vendor error code.
    pub vendor_err: u32,
    /// Bytes received (receive completions).
    pub byte_len: u32,
    /// Immediate data in network order (`IBV_WC_WITH_IMM`), or the invalidated rkey
    /// (`invalidated_rkey`, `IBV_WC_WITH_INV`): one anonymous union of two `u32`s in C.
    pub imm_data: u32,
    /// The local QP number.
    pub qp_num: u32,
    /// The remote QP number (UD).
    pub src_qp: u32,
    /// [`ibv_wc_flags`] bits.
    pub wc_flags: c_uint,
    /// P_Key index (GSI).
    pub pkey_index: u16,
    /// Source LID.
    pub slid: u16,
    /// Service level.
    pub sl: u8,
    /// DLID path bits.
    pub dlid_path_bits: u8,
}

/// `struct ibv_mw_bind` (verbs.h 1209–1213): the argument of the inline `ibv_bind_mw`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_mw_bind {
    /// The application's id.
    pub wr_id: u64,
    /// [`ibv_send_flags`] bits.
    pub send_flags: c_uint,
    /// What to bind.
    pub bind_info: ibv_mw_bind_info,
}

/// `struct ibv_data_buf` (verbs.h 1112–1115): one buffer of `ibv_wr_set_inline_data_list`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_data_buf {
    /// Start.
    pub addr: *mut c_void,
    /// Length.
    pub length: usize,
}

/// `tm.add` of [`ibv_ops_wr`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_ops_wr_tm_add {
    /// Receive work request id.
    pub recv_wr_id: u64,
    /// Scatter list.
    pub sg_list: *mut ibv_sge,
    /// Entries.
    pub num_sge: c_int,
    /// Tag.
    pub tag: u64,
    /// Tag mask.
    pub mask: u64,
}

/// `tm` of [`ibv_ops_wr`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_ops_wr_tm {
    /// Unexpected message count.
    pub unexpected_cnt: u32,
    /// Tag handle.
    pub handle: u32,
    /// `IBV_WR_TAG_ADD` arguments.
    pub add: ibv_ops_wr_tm_add,
}

/// `struct ibv_ops_wr` (verbs.h 1191–1207): a tag-matching list operation.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_ops_wr {
    /// The application's id.
    pub wr_id: u64,
    /// The next operation, or NULL.
    pub next: *mut ibv_ops_wr,
    /// An [`ibv_ops_wr_opcode`].
    pub opcode: ibv_ops_wr_opcode,
    /// Flags.
    pub flags: c_int,
    /// Tag-matching arguments.
    pub tm: ibv_ops_wr_tm,
}

/// The `element` union of [`ibv_async_event`]; which member is valid follows from
/// `event_type`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_async_event_element {
    /// CQ events.
    pub cq: *mut ibv_cq,
    /// QP events.
    pub qp: *mut ibv_qp,
    /// SRQ events.
    pub srq: *mut ibv_srq,
    /// WQ events.
    pub wq: *mut ibv_wq,
    /// Port events.
    pub port_num: c_int,
}

impl fmt::Debug for ibv_async_event_element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ibv_async_event_element { .. }")
    }
}

/// `struct ibv_async_event` (verbs.h 472–481), filled by `ibv_get_async_event`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_async_event {
    /// The affected object.
    pub element: ibv_async_event_element,
    /// An [`ibv_event_type`].
    pub event_type: ibv_event_type,
}

zeroed_default!(
    ibv_send_wr_ud,
    ibv_send_wr_wr,
    ibv_send_wr_qp_type,
    ibv_send_wr_bind_mw,
    ibv_send_wr_tso,
    ibv_send_wr_bind_mw_tso,
    ibv_send_wr,
    ibv_recv_wr,
    ibv_mw_bind,
    ibv_data_buf,
    ibv_ops_wr_tm_add,
    ibv_ops_wr_tm,
    ibv_ops_wr,
    ibv_async_event_element,
    ibv_async_event,
);
