//! The Rust side of every entry point: what each verb does, as `Result<T, Errno>`.
//!
//! The entry points in `crate::exports` only adapt C calling conventions (argument
//! checks that need no state, the error contract, the panic guard) and call a function
//! here. This is where the verbs are implemented.
//!
//! # Status
//!
//! Every verb that applications built against rdma-core v44 reach is implemented over
//! verbs-shm, except the features a RoCE provider may lack, which answer as rdma-core
//! answers for such a provider (`EOPNOTSUPP`/NULL + `errno`, or a NULL op so verbs.h
//! answers):
//!
//! | entry points | module |
//! |---|---|
//! | `ibv_get_device_list` (the daemons of the caller's network namespace), `ibv_free_device_list`, `ibv_get_device_name`, `ibv_get_device_guid`, `ibv_get_device_index` | [`device`] |
//! | `ibv_open_device`, `ibv_close_device`, the device/port/GID/P_Key queries (also `verbs_context::query_port` and `query_device_ex`), `ibv_get_async_event`, `ibv_ack_async_event` | [`context`] |
//! | every refusal, with the daemon's reason, on stderr when `XROCE_IBVERBS_DEBUG=1` | [`debug`] |
//! | `ibv_alloc_pd`, `ibv_dealloc_pd`, `ibv_reg_mr`, `ibv_reg_mr_iova`, `ibv_reg_mr_iova2`, `ibv_rereg_mr` (keys kept), `ibv_dereg_mr` | [`memory`] |
//! | completion channels and CQs (also `verbs_context::create_cq_ex` and the `ibv_cq_ex` polling functions), `ibv_get_cq_event`, `ibv_ack_cq_events`, and (through `ibv_context_ops`) `poll_cq`, `req_notify_cq` | [`completion`] |
//! | SRQs, QPs (RC, UC, UD; also `verbs_context::create_qp_ex`), AHs (also from a work completion), and (through `ibv_context_ops`) `post_send`, `post_recv`, `post_srq_recv` | [`queue_pair`] |
//! | the `ibv_wr_*` work request builder of extended QPs (`ibv_qp_to_qp_ex`) | [`work_request`] |
//! | `ibv_wc_status_str`, `ibv_node_type_str`, `ibv_port_state_str`, `ibv_event_type_str` | [`text`] |
//! | `ibv_rate_to_mult`, `mult_to_ibv_rate`, `ibv_rate_to_mbps`, `mbps_to_ibv_rate` | [`rate`] |
//! | `ibv_fork_init`, `ibv_is_fork_initialized`, `ibv_dontfork_range`, `ibv_dofork_range` | [`fork`] |
//! | `ibv_get_sysfs_path`, `ibv_read_sysfs_file` | [`sysfs`] |
//! | the daemon's reasons for refusals the user must see (access, memory limits), on stderr | [`refusal`] |
//! | the kernel-provider interface (`IBVERBS_PRIVATE_34`: `verbs_register_driver_34`, `ibv_cmd_*`, …), permanently inert | [`kernel_provider`] |
//!
//! **Not supported** ([`verbs`]; `EOPNOTSUPP`): importing contexts and objects, dmabuf
//! regions, CQ resizing, multicast, ECE, `ibv_resolve_eth_l2_from_gid`. Through NULL ops:
//! memory windows, XRC, flow steering, work queues, device memory, counters, parent and
//! thread domains, extended SRQs (tag matching). Extended CQs refuse timestamps, VLANs,
//! flow tags and tag matching fields; extended QPs refuse memory window binds, local
//! invalidation, TSO and atomic write. Memory registration refuses on-demand paging and
//! zero-based regions.
//!
//! **Permanently inert**: `ibv_copy_*_from_kern`/`_to_kern` (`IBVERBS_1.0`/`1.1`): they
//! convert kernel rdma_cm replies for librdmacm, which cannot get one without
//! `/dev/infiniband/rdma_cm`; they set `errno` to `EOPNOTSUPP` and leave `dst` untouched.
//!
//! # Objects and pointers
//!
//! Objects returned to the application are `#[repr(C)]` structs whose first field is the
//! verbs-abi mirror, in a registry that every slow-path verb consults before reading
//! through a pointer (see [`objects`]). Functions that dereference application memory are
//! `unsafe fn`s whose `# Safety` section states what the C contract guarantees; their
//! entry points are `unsafe extern "C"` and call them in an `unsafe` block.

pub(crate) mod completion;
pub(crate) mod context;
pub(crate) mod debug;
pub(crate) mod device;
pub(crate) mod fork;
pub(crate) mod kernel_provider;
pub(crate) mod memory;
pub(crate) mod objects;
pub(crate) mod queue_pair;
pub(crate) mod rate;
pub(crate) mod refusal;
pub(crate) mod sysfs;
pub(crate) mod text;
pub(crate) mod verbs;
pub(crate) mod work_request;

use crate::ffi::{Errno, Verb};

/// The answer of every verb this library does not support: `EOPNOTSUPP`, as rdma-core's
/// dummy provider ops answer for a verb a provider does not implement.
pub(crate) fn unsupported<T>() -> Verb<T> {
    Err(Errno::EOPNOTSUPP)
}
