//! The Rust side of every entry point: what each verb does, as `Result<T, Errno>`.
//!
//! The entry points in `crate::exports` only adapt C calling conventions (argument
//! checks that need no state, the error contract, the panic guard) and call a function
//! here. This is where the verbs are implemented.
//!
//! # Status
//!
//! **Implemented now** (they need no daemon):
//!
//! | entry points | module |
//! |---|---|
//! | `ibv_get_device_list` (empty: no device discovery yet), `ibv_free_device_list`, `ibv_get_device_name`, `ibv_get_device_guid`, `ibv_get_device_index` | [`device`] |
//! | `ibv_wc_status_str`, `ibv_node_type_str`, `ibv_port_state_str`, `ibv_event_type_str` | [`text`] |
//! | `ibv_rate_to_mult`, `mult_to_ibv_rate`, `ibv_rate_to_mbps`, `mbps_to_ibv_rate` | [`rate`] |
//! | `ibv_fork_init`, `ibv_is_fork_initialized`, `ibv_dontfork_range`, `ibv_dofork_range` | [`fork`] |
//! | `ibv_get_sysfs_path`, `ibv_read_sysfs_file` | [`sysfs`] |
//! | the kernel-provider interface (`IBVERBS_PRIVATE_34`: `verbs_register_driver_34`, `ibv_cmd_*`, …), permanently inert | [`kernel_provider`] |
//!
//! **Waiting for verbs-shm** (each answers [`pending`], i.e. `EOPNOTSUPP` through its C
//! contract; all in [`verbs`]):
//!
//! - device discovery: [`device::register`] has no caller until the daemon reports its
//!   devices, so `ibv_get_device_list` is empty;
//! - contexts: `ibv_open_device`, `ibv_close_device`, `ibv_import_device`,
//!   `ibv_get_async_event`, `ibv_ack_async_event`;
//! - queries: `ibv_query_device`, `ibv_query_port` (and `verbs_context::query_port`, which
//!   the inline `ibv_query_port` uses), `ibv_query_gid`, `_ibv_query_gid_ex`,
//!   `_ibv_query_gid_table`, `ibv_query_gid_type`, `ibv_query_pkey`, `ibv_get_pkey_index`;
//! - memory: `ibv_alloc_pd`, `ibv_dealloc_pd`, `ibv_reg_mr`, `ibv_reg_mr_iova`,
//!   `ibv_reg_mr_iova2`, `ibv_reg_dmabuf_mr`, `ibv_rereg_mr`, `ibv_dereg_mr`,
//!   `ibv_import_pd`/`mr`/`dm`, `ibv_unimport_pd`/`mr`/`dm`;
//! - completions: `ibv_create_comp_channel`, `ibv_destroy_comp_channel`, `ibv_create_cq`,
//!   `ibv_resize_cq`, `ibv_destroy_cq`, `ibv_get_cq_event`, `ibv_ack_cq_events`;
//! - SRQs: `ibv_create_srq`, `ibv_modify_srq`, `ibv_query_srq`, `ibv_destroy_srq`;
//! - QPs: `ibv_create_qp`, `ibv_qp_to_qp_ex`, `ibv_query_qp`, `ibv_query_qp_data_in_order`
//!   (answers 0, "no ordering promise", until then), `ibv_modify_qp`, `ibv_destroy_qp`,
//!   `ibv_attach_mcast`, `ibv_detach_mcast`, `ibv_set_ece`, `ibv_query_ece`;
//! - address handles: `ibv_create_ah`, `ibv_init_ah_from_wc`, `ibv_create_ah_from_wc`,
//!   `ibv_destroy_ah`, `ibv_resolve_eth_l2_from_gid`;
//! - everything reached through function pointers of objects this library will allocate:
//!   `ibv_context_ops` (`post_send`, `post_recv`, `poll_cq`, `req_notify_cq`,
//!   `post_srq_recv`, memory windows) and `verbs_context` (`query_port`,
//!   `query_device_ex`, `create_qp_ex` with `ibv_qp_ex`'s `wr_*`, `create_cq_ex` with
//!   `ibv_cq_ex`'s readers, `create_srq_ex`, …). Inline verbs.h code calls these directly,
//!   so they have no entry point in this crate; verbs.h answers `EOPNOTSUPP` for a NULL
//!   `verbs_context` op.
//!
//! **Permanently inert**: `ibv_copy_*_from_kern`/`_to_kern` (`IBVERBS_1.0`/`1.1`): they
//! convert kernel rdma_cm replies for librdmacm, which cannot get one without
//! `/dev/infiniband/rdma_cm`; they set `errno` to `EOPNOTSUPP` and leave `dst` untouched.
//!
//! # Implementing a pending verb
//!
//! Replace the body of its function in [`verbs`]; the entry point already applies the C
//! error contract. If the implementation dereferences an argument, make the function an
//! `unsafe fn` with a `# Safety` section, make the entry point `unsafe extern "C"` with the
//! C contract's guarantees in its `# Safety` section, and call it in an `unsafe` block with
//! a `// Safety:` comment. Objects returned to the application are `#[repr(C)]` structs
//! whose first field is the verbs-abi mirror (`ibv_qp_ex` for QPs, so that
//! `ibv_qp_to_qp_ex` is a cast); look every incoming pointer up before reading it, as
//! [`device`] does.

pub(crate) mod device;
pub(crate) mod fork;
pub(crate) mod kernel_provider;
pub(crate) mod rate;
pub(crate) mod sysfs;
pub(crate) mod text;
pub(crate) mod verbs;

use crate::ffi::{Errno, Verb};

/// The answer of every verb that waits for verbs-shm: `EOPNOTSUPP`, as rdma-core's dummy
/// provider ops answer for a verb a provider does not implement.
pub(crate) fn pending<T>() -> Verb<T> {
    Err(Errno::EOPNOTSUPP)
}
