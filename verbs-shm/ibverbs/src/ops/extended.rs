//! The function tables of extended objects: `ibv_cq_ex` (`ibv_start_poll`,
//! `ibv_next_poll`, `ibv_end_poll`, `ibv_wc_read_*`) and `ibv_qp_ex` (`ibv_wr_*`), all
//! inline in verbs.h and called through the pointers set here. Each is a thin shim: the
//! panic guard and the C contract from `crate::ffi` around a function of
//! `crate::provider`. A `void` function has no error channel: the builder of an extended
//! QP keeps its first error for `ibv_wr_complete`.

use std::ffi::{c_int, c_uint, c_void};

use verbs_abi::*;
use verbs_shm::client::WorkCompletion;

use crate::ffi;
use crate::provider::{completion, work_request};

/// Sets the polling functions of an extended CQ.
pub(crate) fn set_cq_ex_ops(cq: &mut ibv_cq_ex) {
    cq.start_poll = Some(start_poll);
    cq.next_poll = Some(next_poll);
    cq.end_poll = Some(end_poll);
    cq.read_opcode = Some(read_opcode);
    cq.read_vendor_err = Some(read_vendor_err);
    cq.read_byte_len = Some(read_byte_len);
    cq.read_imm_data = Some(read_imm_data);
    cq.read_qp_num = Some(read_qp_num);
    cq.read_src_qp = Some(read_src_qp);
    cq.read_wc_flags = Some(read_wc_flags);
    cq.read_slid = Some(read_slid);
    cq.read_sl = Some(read_sl);
    cq.read_dlid_path_bits = Some(read_dlid_path_bits);
}

/// `int (*start_poll)(struct ibv_cq_ex *, struct ibv_poll_cq_attr *)`: 0, `ENOENT` when
/// the CQ is empty, or an errno value.
///
/// # Safety
///
/// `cq` is an extended CQ of this library; `attr` is NULL or readable.
unsafe extern "C" fn start_poll(cq: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int {
    // Safety: forwarded from the caller.
    ffi::errno_value(|| unsafe { completion::start_poll(cq, attr) })
}

/// `int (*next_poll)(struct ibv_cq_ex *)`: 0, `ENOENT`, or an errno value.
///
/// # Safety
///
/// `cq` is an extended CQ of this library.
unsafe extern "C" fn next_poll(cq: *mut ibv_cq_ex) -> c_int {
    // Safety: forwarded from the caller.
    ffi::errno_value(|| unsafe { completion::next_poll(cq) })
}

/// `void (*end_poll)(struct ibv_cq_ex *)`.
///
/// # Safety
///
/// `cq` is an extended CQ of this library.
unsafe extern "C" fn end_poll(cq: *mut ibv_cq_ex) {
    // Safety: forwarded from the caller.
    ffi::void(|| unsafe { completion::end_poll(cq) })
}

/// A field of the current completion (0 if `cq` is not a CQ of this library).
///
/// # Safety
///
/// `cq` is an extended CQ of this library.
unsafe fn read<T: Default>(cq: *mut ibv_cq_ex, field: impl FnOnce(&WorkCompletion) -> T) -> T {
    ffi::or_fallback(T::default(), || {
        // Safety: forwarded from the caller.
        unsafe { completion::current(cq) }.map(|c| field(&c))
    })
}

/// `enum ibv_wc_opcode (*read_opcode)(struct ibv_cq_ex *)`.
///
/// # Safety
///
/// `cq` is an extended CQ of this library.
unsafe extern "C" fn read_opcode(cq: *mut ibv_cq_ex) -> ibv_wc_opcode {
    // Safety: forwarded from the caller.
    unsafe { read(cq, |c| c.opcode) }
}

/// `uint32_t (*read_vendor_err)(struct ibv_cq_ex *)`.
///
/// # Safety
///
/// `cq` is an extended CQ of this library.
unsafe extern "C" fn read_vendor_err(cq: *mut ibv_cq_ex) -> u32 {
    // Safety: forwarded from the caller.
    unsafe { read(cq, |c| c.vendor_err) }
}

/// `uint32_t (*read_byte_len)(struct ibv_cq_ex *)`.
///
/// # Safety
///
/// `cq` is an extended CQ of this library.
unsafe extern "C" fn read_byte_len(cq: *mut ibv_cq_ex) -> u32 {
    // Safety: forwarded from the caller.
    unsafe { read(cq, |c| c.byte_len) }
}

/// `__be32 (*read_imm_data)(struct ibv_cq_ex *)`.
///
/// # Safety
///
/// `cq` is an extended CQ of this library.
unsafe extern "C" fn read_imm_data(cq: *mut ibv_cq_ex) -> u32 {
    // Safety: forwarded from the caller.
    unsafe { read(cq, |c| c.imm_data) }
}

/// `uint32_t (*read_qp_num)(struct ibv_cq_ex *)`.
///
/// # Safety
///
/// `cq` is an extended CQ of this library.
unsafe extern "C" fn read_qp_num(cq: *mut ibv_cq_ex) -> u32 {
    // Safety: forwarded from the caller.
    unsafe { read(cq, |c| c.qp_num) }
}

/// `uint32_t (*read_src_qp)(struct ibv_cq_ex *)`.
///
/// # Safety
///
/// `cq` is an extended CQ of this library.
unsafe extern "C" fn read_src_qp(cq: *mut ibv_cq_ex) -> u32 {
    // Safety: forwarded from the caller.
    unsafe { read(cq, |c| c.src_qp) }
}

/// `unsigned int (*read_wc_flags)(struct ibv_cq_ex *)`.
///
/// # Safety
///
/// `cq` is an extended CQ of this library.
unsafe extern "C" fn read_wc_flags(cq: *mut ibv_cq_ex) -> c_uint {
    // Safety: forwarded from the caller.
    unsafe { read(cq, |c| c.wc_flags) }
}

/// `uint32_t (*read_slid)(struct ibv_cq_ex *)`.
///
/// # Safety
///
/// `cq` is an extended CQ of this library.
unsafe extern "C" fn read_slid(cq: *mut ibv_cq_ex) -> u32 {
    // Safety: forwarded from the caller.
    unsafe { read(cq, |c| u32::from(c.slid)) }
}

/// `uint8_t (*read_sl)(struct ibv_cq_ex *)`.
///
/// # Safety
///
/// `cq` is an extended CQ of this library.
unsafe extern "C" fn read_sl(cq: *mut ibv_cq_ex) -> u8 {
    // Safety: forwarded from the caller.
    unsafe { read(cq, |c| c.sl) }
}

/// `uint8_t (*read_dlid_path_bits)(struct ibv_cq_ex *)`.
///
/// # Safety
///
/// `cq` is an extended CQ of this library.
unsafe extern "C" fn read_dlid_path_bits(cq: *mut ibv_cq_ex) -> u8 {
    // Safety: forwarded from the caller.
    unsafe { read(cq, |c| c.dlid_path_bits) }
}

/// Sets the `ibv_wr_*` functions of an extended QP. Memory windows, local invalidation,
/// TSO and atomic write stay NULL: a QP is never created with them.
pub(crate) fn set_qp_ex_ops(qp: &mut ibv_qp_ex) {
    qp.wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp);
    qp.wr_atomic_fetch_add = Some(wr_atomic_fetch_add);
    qp.wr_rdma_read = Some(wr_rdma_read);
    qp.wr_rdma_write = Some(wr_rdma_write);
    qp.wr_rdma_write_imm = Some(wr_rdma_write_imm);
    qp.wr_send = Some(wr_send);
    qp.wr_send_imm = Some(wr_send_imm);
    qp.wr_send_inv = Some(wr_send_inv);
    qp.wr_set_ud_addr = Some(wr_set_ud_addr);
    qp.wr_set_xrc_srqn = Some(wr_set_xrc_srqn);
    qp.wr_set_inline_data = Some(wr_set_inline_data);
    qp.wr_set_inline_data_list = Some(wr_set_inline_data_list);
    qp.wr_set_sge = Some(wr_set_sge);
    qp.wr_set_sge_list = Some(wr_set_sge_list);
    qp.wr_start = Some(wr_start);
    qp.wr_complete = Some(wr_complete);
    qp.wr_abort = Some(wr_abort);
}

/// `void (*wr_start)(struct ibv_qp_ex *)`.
///
/// # Safety
///
/// `qp` is an extended QP of this library.
unsafe extern "C" fn wr_start(qp: *mut ibv_qp_ex) {
    // Safety: forwarded from the caller.
    ffi::void(|| unsafe { work_request::start(qp) })
}

/// `int (*wr_complete)(struct ibv_qp_ex *)`: 0 or an errno value (nothing is posted then).
///
/// # Safety
///
/// `qp` is an extended QP of this library.
unsafe extern "C" fn wr_complete(qp: *mut ibv_qp_ex) -> c_int {
    // Safety: forwarded from the caller.
    ffi::errno_value(|| unsafe { work_request::complete(qp) })
}

/// `void (*wr_abort)(struct ibv_qp_ex *)`.
///
/// # Safety
///
/// `qp` is an extended QP of this library.
unsafe extern "C" fn wr_abort(qp: *mut ibv_qp_ex) {
    // Safety: forwarded from the caller.
    ffi::void(|| unsafe { work_request::abort(qp) })
}

/// Begins a request with `opcode`; `fill` sets its operation's fields.
///
/// # Safety
///
/// `qp` is an extended QP of this library.
unsafe fn begin(
    qp: *mut ibv_qp_ex,
    opcode: u32,
    fill: impl FnOnce(&mut verbs_shm::contract::SendWqe),
) {
    // Safety: forwarded from the caller.
    ffi::void(|| unsafe { work_request::begin(qp, opcode, fill) })
}

/// `void (*wr_atomic_cmp_swp)(struct ibv_qp_ex *, uint32_t rkey, uint64_t remote_addr,
/// uint64_t compare, uint64_t swap)`.
///
/// # Safety
///
/// `qp` is an extended QP of this library.
unsafe extern "C" fn wr_atomic_cmp_swp(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    // Safety: forwarded from the caller.
    unsafe {
        begin(qp, IBV_WR_ATOMIC_CMP_AND_SWP, |w| {
            w.rkey = rkey;
            w.remote_addr = remote_addr;
            w.compare_add = compare;
            w.swap = swap;
        })
    }
}

/// `void (*wr_atomic_fetch_add)(struct ibv_qp_ex *, uint32_t rkey, uint64_t remote_addr,
/// uint64_t add)`.
///
/// # Safety
///
/// `qp` is an extended QP of this library.
unsafe extern "C" fn wr_atomic_fetch_add(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    add: u64,
) {
    // Safety: forwarded from the caller.
    unsafe {
        begin(qp, IBV_WR_ATOMIC_FETCH_AND_ADD, |w| {
            w.rkey = rkey;
            w.remote_addr = remote_addr;
            w.compare_add = add;
        })
    }
}

/// `void (*wr_rdma_read)(struct ibv_qp_ex *, uint32_t rkey, uint64_t remote_addr)`.
///
/// # Safety
///
/// `qp` is an extended QP of this library.
unsafe extern "C" fn wr_rdma_read(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    // Safety: forwarded from the caller.
    unsafe {
        begin(qp, IBV_WR_RDMA_READ, |w| {
            w.rkey = rkey;
            w.remote_addr = remote_addr;
        })
    }
}

/// `void (*wr_rdma_write)(struct ibv_qp_ex *, uint32_t rkey, uint64_t remote_addr)`.
///
/// # Safety
///
/// `qp` is an extended QP of this library.
unsafe extern "C" fn wr_rdma_write(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    // Safety: forwarded from the caller.
    unsafe {
        begin(qp, IBV_WR_RDMA_WRITE, |w| {
            w.rkey = rkey;
            w.remote_addr = remote_addr;
        })
    }
}

/// `void (*wr_rdma_write_imm)(struct ibv_qp_ex *, uint32_t rkey, uint64_t remote_addr,
/// __be32 imm_data)`.
///
/// # Safety
///
/// `qp` is an extended QP of this library.
unsafe extern "C" fn wr_rdma_write_imm(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    imm_data: u32,
) {
    // Safety: forwarded from the caller.
    unsafe {
        begin(qp, IBV_WR_RDMA_WRITE_WITH_IMM, |w| {
            w.rkey = rkey;
            w.remote_addr = remote_addr;
            w.imm_data = imm_data;
        })
    }
}

/// `void (*wr_send)(struct ibv_qp_ex *)`.
///
/// # Safety
///
/// `qp` is an extended QP of this library.
unsafe extern "C" fn wr_send(qp: *mut ibv_qp_ex) {
    // Safety: forwarded from the caller.
    unsafe { begin(qp, IBV_WR_SEND, |_| {}) }
}

/// `void (*wr_send_imm)(struct ibv_qp_ex *, __be32 imm_data)`.
///
/// # Safety
///
/// `qp` is an extended QP of this library.
unsafe extern "C" fn wr_send_imm(qp: *mut ibv_qp_ex, imm_data: u32) {
    // Safety: forwarded from the caller.
    unsafe { begin(qp, IBV_WR_SEND_WITH_IMM, |w| w.imm_data = imm_data) }
}

/// `void (*wr_send_inv)(struct ibv_qp_ex *, uint32_t invalidate_rkey)`.
///
/// # Safety
///
/// `qp` is an extended QP of this library.
unsafe extern "C" fn wr_send_inv(qp: *mut ibv_qp_ex, invalidate_rkey: u32) {
    // Safety: forwarded from the caller.
    unsafe { begin(qp, IBV_WR_SEND_WITH_INV, |w| w.imm_data = invalidate_rkey) }
}

/// `void (*wr_set_ud_addr)(struct ibv_qp_ex *, struct ibv_ah *, uint32_t remote_qpn,
/// uint32_t remote_qkey)`.
///
/// # Safety
///
/// `qp` is an extended QP of this library; `ah` an address handle of this library.
unsafe extern "C" fn wr_set_ud_addr(
    qp: *mut ibv_qp_ex,
    ah: *mut ibv_ah,
    remote_qpn: u32,
    remote_qkey: u32,
) {
    // Safety: forwarded from the caller.
    ffi::void(|| unsafe { work_request::set_ud_addr(qp, ah, remote_qpn, remote_qkey) })
}

/// `void (*wr_set_xrc_srqn)(struct ibv_qp_ex *, uint32_t remote_srqn)`: there are no XRC
/// QPs; a mistake kept for `ibv_wr_complete`.
///
/// # Safety
///
/// `qp` is an extended QP of this library.
unsafe extern "C" fn wr_set_xrc_srqn(qp: *mut ibv_qp_ex, _remote_srqn: u32) {
    // Safety: forwarded from the caller.
    ffi::void(|| unsafe { work_request::unsupported_setter(qp) })
}

/// `void (*wr_set_inline_data)(struct ibv_qp_ex *, void *addr, size_t length)`.
///
/// # Safety
///
/// `qp` is an extended QP of this library; `addr` is readable for `length` bytes.
unsafe extern "C" fn wr_set_inline_data(qp: *mut ibv_qp_ex, addr: *mut c_void, length: usize) {
    // Safety: forwarded from the caller.
    ffi::void(|| unsafe { work_request::set_inline_data(qp, addr, length) })
}

/// `void (*wr_set_inline_data_list)(struct ibv_qp_ex *, size_t num_buf, const struct
/// ibv_data_buf *buf_list)`.
///
/// # Safety
///
/// `qp` is an extended QP of this library; `buf_list` holds `num_buf` readable buffers.
unsafe extern "C" fn wr_set_inline_data_list(
    qp: *mut ibv_qp_ex,
    num_buf: usize,
    buf_list: *const ibv_data_buf,
) {
    // Safety: forwarded from the caller.
    ffi::void(|| unsafe { work_request::set_inline_data_list(qp, num_buf, buf_list) })
}

/// `void (*wr_set_sge)(struct ibv_qp_ex *, uint32_t lkey, uint64_t addr, uint32_t
/// length)`.
///
/// # Safety
///
/// `qp` is an extended QP of this library.
unsafe extern "C" fn wr_set_sge(qp: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    let one = ibv_sge { addr, length, lkey };
    // Safety: forwarded from the caller; one local element.
    ffi::void(|| unsafe { work_request::set_sge_list(qp, 1, &one) })
}

/// `void (*wr_set_sge_list)(struct ibv_qp_ex *, size_t num_sge, const struct ibv_sge
/// *sg_list)`.
///
/// # Safety
///
/// `qp` is an extended QP of this library; `sg_list` is readable for `num_sge` elements.
unsafe extern "C" fn wr_set_sge_list(qp: *mut ibv_qp_ex, num_sge: usize, sg_list: *const ibv_sge) {
    // Safety: forwarded from the caller.
    ffi::void(|| unsafe { work_request::set_sge_list(qp, num_sge, sg_list) })
}
