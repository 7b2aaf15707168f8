//! The `IBVERBS_PRIVATE_34` interface for rdma-core's kernel-device providers (driver.h,
//! cmd_ioctl.h), exported so that libmlx5.so.1 and libefa.so.1, which perftest links, can
//! be loaded. All of it is inert; see `crate::provider::kernel_provider`.
//!
//! `ibv_query_gid_type`, also in this version node, is a real query (`ibv_devinfo` uses
//! it) and lives with the other queries.

// The signatures are rdma-core's, however many arguments they have.
#![allow(clippy::too_many_arguments)]

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::AtomicBool;

use verbs_abi::*;

use crate::ffi;
use crate::provider::kernel_provider;

/// `void verbs_register_driver_34(const struct verbs_device_ops *ops)`: called by every
/// kernel provider's constructor when it is loaded; accepted and ignored.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn verbs_register_driver_34(_ops: *const verbs_device_ops) {
    ffi::void(|| {
        kernel_provider::register_driver();
        Ok(())
    })
}

/// `bool verbs_allow_disassociate_destroy` (a variable): whether destroying objects of a
/// disassociated device reports success. Kept for the symbol; nothing reads it.
#[unsafe(no_mangle)]
pub(crate) static verbs_allow_disassociate_destroy: AtomicBool = AtomicBool::new(false);

/// `void __verbs_log(struct verbs_context *ctx, uint32_t level, const char *fmt, ...)`.
/// Variadic in C; on x86_64 a function that reads only the fixed arguments may be defined
/// without the `...` and called as variadic. Logs nothing.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn __verbs_log(_ctx: *mut verbs_context, _level: u32, _fmt: *const c_char) {
    ffi::void(kernel_provider::nothing_to_do)
}

/// `void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd, size_t
/// alloc_size, struct verbs_context *context_offset, uint32_t driver_id)`: NULL and
/// `errno`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn _verbs_init_and_alloc_context(
    _device: *mut ibv_device,
    _cmd_fd: c_int,
    _alloc_size: usize,
    _context_offset: *mut verbs_context,
    _driver_id: u32,
) -> *mut c_void {
    ffi::null_on_error(kernel_provider::no_kernel)
}

/// `void verbs_uninit_context(struct verbs_context *context)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn verbs_uninit_context(_context: *mut verbs_context) {
    ffi::void(kernel_provider::no_kernel)
}

/// `void verbs_set_ops(struct verbs_context *vctx, const struct verbs_context_ops *ops)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn verbs_set_ops(_vctx: *mut verbs_context, _ops: *const verbs_context_ops) {
    ffi::void(kernel_provider::no_kernel)
}

/// `void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context, struct
/// ibv_comp_channel *channel, void *cq_context)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn verbs_init_cq(
    _cq: *mut ibv_cq,
    _context: *mut ibv_context,
    _channel: *mut ibv_comp_channel,
    _cq_context: *mut c_void,
) {
    ffi::void(kernel_provider::no_kernel)
}

/// `struct ibv_context *verbs_open_device(struct ibv_device *device, void
/// *private_data)`: NULL and `errno`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn verbs_open_device(
    _device: *mut ibv_device,
    _private_data: *mut c_void,
) -> *mut ibv_context {
    ffi::null_on_error(kernel_provider::no_kernel)
}

/// `int ibv_read_ibdev_sysfs_file(char *buf, size_t size, struct verbs_sysfs_dev
/// *sysfs_dev, const char *fnfmt, ...)`: -1 and `errno` (variadic in C; see
/// [`__verbs_log`]).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_read_ibdev_sysfs_file(
    _buf: *mut c_char,
    _size: usize,
    _sysfs_dev: *mut verbs_sysfs_dev,
    _fnfmt: *const c_char,
) -> c_int {
    ffi::minus_one_on_error(kernel_provider::no_kernel)
}

/// `int execute_ioctl(struct ibv_context *context, struct ibv_command_buffer *cmd)`: an
/// errno value.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn execute_ioctl(
    _context: *mut ibv_context,
    _cmd: *mut ibv_command_buffer,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, struct
/// ibv_command_buffer *link)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn __ioctl_final_num_attrs(
    num_attrs: c_uint,
    _link: *mut ibv_command_buffer,
) -> c_uint {
    ffi::or_fallback(num_attrs, || {
        Ok(kernel_provider::final_num_attrs(num_attrs))
    })
}

// The uverbs commands (driver.h): each answers `EOPNOTSUPP`. Kernel command and response
// structures are `void *`: nothing here looks into them.

/// `int ibv_cmd_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_advise_mr(
    _pd: *mut ibv_pd,
    _advice: ibv_advise_mr_advice,
    _flags: u32,
    _sg_list: *mut ibv_sge,
    _num_sge: u32,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_alloc_dm(struct ibv_context *ctx, const struct ibv_alloc_dm_attr *dm_attr, struct verbs_dm *dm, struct ibv_command_buffer *link)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_alloc_dm(
    _ctx: *mut ibv_context,
    _dm_attr: *const ibv_alloc_dm_attr,
    _dm: *mut verbs_dm,
    _link: *mut ibv_command_buffer,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type, struct ibv_mw *mw, struct ibv_alloc_mw *cmd, size_t cmd_size, struct ib_uverbs_alloc_mw_resp *resp, size_t resp_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_alloc_mw(
    _pd: *mut ibv_pd,
    _type: ibv_mw_type,
    _mw: *mut ibv_mw,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd, struct ibv_alloc_pd *cmd, size_t cmd_size, struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_alloc_pd(
    _context: *mut ibv_context,
    _pd: *mut ibv_pd,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_attach_mcast(
    _qp: *mut ibv_qp,
    _gid: *const ibv_gid,
    _lid: u16,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_close_xrcd(struct verbs_xrcd *xrcd)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_close_xrcd(_xrcd: *mut verbs_xrcd) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_create_ah(struct ibv_pd *pd, struct ibv_ah *ah, struct ibv_ah_attr *attr, struct ib_uverbs_create_ah_resp *resp, size_t resp_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_create_ah(
    _pd: *mut ibv_pd,
    _ah: *mut ibv_ah,
    _attr: *mut ibv_ah_attr,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_create_counters(struct ibv_context *context, struct ibv_counters_init_attr *init_attr, struct verbs_counters *vcounters, struct ibv_command_buffer *link)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_create_counters(
    _context: *mut ibv_context,
    _init_attr: *mut ibv_counters_init_attr,
    _vcounters: *mut verbs_counters,
    _link: *mut ibv_command_buffer,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_create_cq(struct ibv_context *context, int cqe, struct ibv_comp_channel *channel, int comp_vector, struct ibv_cq *cq, struct ibv_create_cq *cmd, size_t cmd_size, struct ib_uverbs_create_cq_resp *resp, size_t resp_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_create_cq(
    _context: *mut ibv_context,
    _cqe: c_int,
    _channel: *mut ibv_comp_channel,
    _comp_vector: c_int,
    _cq: *mut ibv_cq,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_create_cq_ex(struct ibv_context *context, const struct ibv_cq_init_attr_ex *cq_attr, struct verbs_cq *cq, struct ibv_create_cq_ex *cmd, size_t cmd_size, struct ib_uverbs_ex_create_cq_resp *resp, size_t resp_size, uint32_t cmd_flags)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_create_cq_ex(
    _context: *mut ibv_context,
    _cq_attr: *const ibv_cq_init_attr_ex,
    _cq: *mut verbs_cq,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
    _cmd_flags: u32,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_create_flow(struct ibv_qp *qp, struct ibv_flow *flow_id, struct ibv_flow_attr *flow_attr, void *ucmd, size_t ucmd_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_create_flow(
    _qp: *mut ibv_qp,
    _flow_id: *mut ibv_flow,
    _flow_attr: *mut ibv_flow_attr,
    _ucmd: *mut c_void,
    _ucmd_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_create_flow_action_esp(struct ibv_context *ctx, struct ibv_flow_action_esp_attr *attr, struct verbs_flow_action *flow_action, struct ibv_command_buffer *driver)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_create_flow_action_esp(
    _ctx: *mut ibv_context,
    _attr: *mut ibv_flow_action_esp_attr,
    _flow_action: *mut verbs_flow_action,
    _driver: *mut ibv_command_buffer,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_create_qp(struct ibv_pd *pd, struct ibv_qp *qp, struct ibv_qp_init_attr *attr, struct ibv_create_qp *cmd, size_t cmd_size, struct ib_uverbs_create_qp_resp *resp, size_t resp_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_create_qp(
    _pd: *mut ibv_pd,
    _qp: *mut ibv_qp,
    _attr: *mut ibv_qp_init_attr,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_create_qp_ex(struct ibv_context *context, struct verbs_qp *qp, struct ibv_qp_init_attr_ex *attr_ex, struct ibv_create_qp *cmd, size_t cmd_size, struct ib_uverbs_create_qp_resp *resp, size_t resp_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_create_qp_ex(
    _context: *mut ibv_context,
    _qp: *mut verbs_qp,
    _attr_ex: *mut ibv_qp_init_attr_ex,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_create_qp_ex2(struct ibv_context *context, struct verbs_qp *qp, struct ibv_qp_init_attr_ex *qp_attr, struct ibv_create_qp_ex *cmd, size_t cmd_size, struct ib_uverbs_ex_create_qp_resp *resp, size_t resp_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_create_qp_ex2(
    _context: *mut ibv_context,
    _qp: *mut verbs_qp,
    _qp_attr: *mut ibv_qp_init_attr_ex,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_create_rwq_ind_table(struct ibv_context *context, struct ibv_rwq_ind_table_init_attr *init_attr, struct ibv_rwq_ind_table *rwq_ind_table, struct ib_uverbs_ex_create_rwq_ind_table_resp *resp, size_t resp_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_create_rwq_ind_table(
    _context: *mut ibv_context,
    _init_attr: *mut ibv_rwq_ind_table_init_attr,
    _rwq_ind_table: *mut ibv_rwq_ind_table,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq, struct ibv_srq_init_attr *attr, struct ibv_create_srq *cmd, size_t cmd_size, struct ib_uverbs_create_srq_resp *resp, size_t resp_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_create_srq(
    _pd: *mut ibv_pd,
    _srq: *mut ibv_srq,
    _attr: *mut ibv_srq_init_attr,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_create_srq_ex(struct ibv_context *context, struct verbs_srq *srq, struct ibv_srq_init_attr_ex *attr_ex, struct ibv_create_xsrq *cmd, size_t cmd_size, struct ib_uverbs_create_srq_resp *resp, size_t resp_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_create_srq_ex(
    _context: *mut ibv_context,
    _srq: *mut verbs_srq,
    _attr_ex: *mut ibv_srq_init_attr_ex,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_create_wq(struct ibv_context *context, struct ibv_wq_init_attr *wq_init_attr, struct ibv_wq *wq, struct ibv_create_wq *cmd, size_t cmd_size, struct ib_uverbs_ex_create_wq_resp *resp, size_t resp_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_create_wq(
    _context: *mut ibv_context,
    _wq_init_attr: *mut ibv_wq_init_attr,
    _wq: *mut ibv_wq,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_dealloc_mw(struct ibv_mw *mw)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_dealloc_mw(_mw: *mut ibv_mw) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_dealloc_pd(struct ibv_pd *pd)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_dealloc_pd(_pd: *mut ibv_pd) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_dereg_mr(struct verbs_mr *vmr)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_dereg_mr(_vmr: *mut verbs_mr) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_destroy_ah(struct ibv_ah *ah)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_destroy_ah(_ah: *mut ibv_ah) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_destroy_counters(struct verbs_counters *vcounters)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_destroy_counters(_vcounters: *mut verbs_counters) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_destroy_cq(struct ibv_cq *cq)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_destroy_cq(_cq: *mut ibv_cq) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_destroy_flow(struct ibv_flow *flow_id)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_destroy_flow(_flow_id: *mut ibv_flow) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_destroy_flow_action(struct verbs_flow_action *action)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_destroy_flow_action(_action: *mut verbs_flow_action) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_destroy_qp(struct ibv_qp *qp)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_destroy_qp(_qp: *mut ibv_qp) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_destroy_rwq_ind_table(struct ibv_rwq_ind_table *rwq_ind_table)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_destroy_rwq_ind_table(
    _rwq_ind_table: *mut ibv_rwq_ind_table,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_destroy_srq(struct ibv_srq *srq)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_destroy_srq(_srq: *mut ibv_srq) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_destroy_wq(struct ibv_wq *wq)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_destroy_wq(_wq: *mut ibv_wq) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_detach_mcast(
    _qp: *mut ibv_qp,
    _gid: *const ibv_gid,
    _lid: u16,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_free_dm(struct verbs_dm *dm)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_free_dm(_dm: *mut verbs_dm) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_get_context(struct verbs_context *context, struct ibv_get_context *cmd, size_t cmd_size, struct ib_uverbs_get_context_resp *resp, size_t resp_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_get_context(
    _context: *mut verbs_context,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr, struct ibv_modify_cq *cmd, size_t cmd_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_modify_cq(
    _cq: *mut ibv_cq,
    _attr: *mut ibv_modify_cq_attr,
    _cmd: *mut c_void,
    _cmd_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_modify_flow_action_esp(struct verbs_flow_action *flow_action, struct ibv_flow_action_esp_attr *attr, struct ibv_command_buffer *driver)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_modify_flow_action_esp(
    _flow_action: *mut verbs_flow_action,
    _attr: *mut ibv_flow_action_esp_attr,
    _driver: *mut ibv_command_buffer,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask, struct ibv_modify_qp *cmd, size_t cmd_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_modify_qp(
    _qp: *mut ibv_qp,
    _attr: *mut ibv_qp_attr,
    _attr_mask: c_int,
    _cmd: *mut c_void,
    _cmd_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_modify_qp_ex(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask, struct ibv_modify_qp_ex *cmd, size_t cmd_size, struct ib_uverbs_ex_modify_qp_resp *resp, size_t resp_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_modify_qp_ex(
    _qp: *mut ibv_qp,
    _attr: *mut ibv_qp_attr,
    _attr_mask: c_int,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, int srq_attr_mask, struct ibv_modify_srq *cmd, size_t cmd_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_modify_srq(
    _srq: *mut ibv_srq,
    _srq_attr: *mut ibv_srq_attr,
    _srq_attr_mask: c_int,
    _cmd: *mut c_void,
    _cmd_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *attr, struct ibv_modify_wq *cmd, size_t cmd_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_modify_wq(
    _wq: *mut ibv_wq,
    _attr: *mut ibv_wq_attr,
    _cmd: *mut c_void,
    _cmd_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_open_qp(struct ibv_context *context, struct verbs_qp *qp, int vqp_sz, struct ibv_qp_open_attr *attr, struct ibv_open_qp *cmd, size_t cmd_size, struct ib_uverbs_create_qp_resp *resp, size_t resp_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_open_qp(
    _context: *mut ibv_context,
    _qp: *mut verbs_qp,
    _vqp_sz: c_int,
    _attr: *mut ibv_qp_open_attr,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_open_xrcd(struct ibv_context *context, struct verbs_xrcd *xrcd, int vxrcd_size, struct ibv_xrcd_init_attr *attr, struct ibv_open_xrcd *cmd, size_t cmd_size, struct ib_uverbs_open_xrcd_resp *resp, size_t resp_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_open_xrcd(
    _context: *mut ibv_context,
    _xrcd: *mut verbs_xrcd,
    _vxrcd_size: c_int,
    _attr: *mut ibv_xrcd_init_attr,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_poll_cq(_cq: *mut ibv_cq, _ne: c_int, _wc: *mut ibv_wc) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_post_recv(
    _ibqp: *mut ibv_qp,
    _wr: *mut ibv_recv_wr,
    _bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_post_send(
    _ibqp: *mut ibv_qp,
    _wr: *mut ibv_send_wr,
    _bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_post_srq_recv(
    _srq: *mut ibv_srq,
    _wr: *mut ibv_recv_wr,
    _bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_query_context(struct ibv_context *ctx, struct ibv_command_buffer *driver)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_query_context(
    _ctx: *mut ibv_context,
    _driver: *mut ibv_command_buffer,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_query_device_any(struct ibv_context *context, const struct ibv_query_device_ex_input *input, struct ibv_device_attr_ex *attr, size_t attr_size, struct ib_uverbs_ex_query_device_resp *resp, size_t *resp_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_query_device_any(
    _context: *mut ibv_context,
    _input: *const ibv_query_device_ex_input,
    _attr: *mut ibv_device_attr_ex,
    _attr_size: usize,
    _resp: *mut c_void,
    _resp_size: *mut usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_query_mr(struct ibv_pd *pd, struct verbs_mr *vmr, uint32_t mr_handle)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_query_mr(
    _pd: *mut ibv_pd,
    _vmr: *mut verbs_mr,
    _mr_handle: u32,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *port_attr, struct ibv_query_port *cmd, size_t cmd_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_query_port(
    _context: *mut ibv_context,
    _port_num: u8,
    _port_attr: *mut ibv_port_attr,
    _cmd: *mut c_void,
    _cmd_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *qp_attr, int attr_mask, struct ibv_qp_init_attr *qp_init_attr, struct ibv_query_qp *cmd, size_t cmd_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_query_qp(
    _qp: *mut ibv_qp,
    _qp_attr: *mut ibv_qp_attr,
    _attr_mask: c_int,
    _qp_init_attr: *mut ibv_qp_init_attr,
    _cmd: *mut c_void,
    _cmd_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, struct ibv_query_srq *cmd, size_t cmd_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_query_srq(
    _srq: *mut ibv_srq,
    _srq_attr: *mut ibv_srq_attr,
    _cmd: *mut c_void,
    _cmd_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_read_counters(struct verbs_counters *vcounters, uint64_t *counters_value, uint32_t ncounters, uint32_t flags, struct ibv_command_buffer *link)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_read_counters(
    _vcounters: *mut verbs_counters,
    _counters_value: *mut u64,
    _ncounters: u32,
    _flags: u32,
    _link: *mut ibv_command_buffer,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_reg_dm_mr(struct ibv_pd *pd, struct verbs_dm *dm, uint64_t offset, size_t length, unsigned int access, struct verbs_mr *vmr, struct ibv_command_buffer *link)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_reg_dm_mr(
    _pd: *mut ibv_pd,
    _dm: *mut verbs_dm,
    _offset: u64,
    _length: usize,
    _access: c_uint,
    _vmr: *mut verbs_mr,
    _link: *mut ibv_command_buffer,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access, struct verbs_mr *vmr)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_reg_dmabuf_mr(
    _pd: *mut ibv_pd,
    _offset: u64,
    _length: usize,
    _iova: u64,
    _fd: c_int,
    _access: c_int,
    _vmr: *mut verbs_mr,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va, int access, struct verbs_mr *vmr, struct ibv_reg_mr *cmd, size_t cmd_size, struct ib_uverbs_reg_mr_resp *resp, size_t resp_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_reg_mr(
    _pd: *mut ibv_pd,
    _addr: *mut c_void,
    _length: usize,
    _hca_va: u64,
    _access: c_int,
    _vmr: *mut verbs_mr,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_req_notify_cq(struct ibv_cq *cq, int solicited_only)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_req_notify_cq(_cq: *mut ibv_cq, _solicited_only: c_int) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_rereg_mr(struct verbs_mr *vmr, uint32_t flags, void *addr, size_t length, uint64_t hca_va, int access, struct ibv_pd *pd, struct ibv_rereg_mr *cmd, size_t cmd_sz, struct ib_uverbs_rereg_mr_resp *resp, size_t resp_sz)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_rereg_mr(
    _vmr: *mut verbs_mr,
    _flags: u32,
    _addr: *mut c_void,
    _length: usize,
    _hca_va: u64,
    _access: c_int,
    _pd: *mut ibv_pd,
    _cmd: *mut c_void,
    _cmd_sz: usize,
    _resp: *mut c_void,
    _resp_sz: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

/// `int ibv_cmd_resize_cq(struct ibv_cq *cq, int cqe, struct ibv_resize_cq *cmd, size_t cmd_size, struct ib_uverbs_resize_cq_resp *resp, size_t resp_size)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn ibv_cmd_resize_cq(
    _cq: *mut ibv_cq,
    _cqe: c_int,
    _cmd: *mut c_void,
    _cmd_size: usize,
    _resp: *mut c_void,
    _resp_size: usize,
) -> c_int {
    ffi::errno_value(kernel_provider::no_kernel)
}

include!(concat!(
    env!("OUT_DIR"),
    "/symver_exports_kernel_provider.rs"
));
