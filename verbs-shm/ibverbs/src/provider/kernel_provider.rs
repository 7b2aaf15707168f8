//! rdma-core's interface for kernel-device providers (`IBVERBS_PRIVATE_34`): what
//! libmlx5, libefa and the other `lib*-rdmav34.so` providers call to register themselves
//! and to issue uverbs commands to `/dev/infiniband/uverbs*`.
//!
//! xroce has no kernel device, so this interface is permanently inert, not pending. It is
//! exported only because perftest links libmlx5.so.1 and libefa.so.1 directly and every
//! tool is linked `BIND_NOW`: their 62 `@IBVERBS_PRIVATE_34` imports (and `ibv_devinfo`'s
//! `ibv_query_gid_type`) must resolve for the program to start at all. Their load-time
//! constructors call `verbs_register_driver_34`, which succeeds and ignores the provider;
//! since no device is ever matched to such a provider, none of the other functions is
//! reached, and each answers `EOPNOTSUPP` (through `errno` for `void` ones) if it is.

use std::ffi::c_uint;

use crate::ffi::{Errno, Verb};

/// `verbs_register_driver_34`: accepted and ignored (kernel providers never get a device).
pub(crate) fn register_driver() {}

/// Every `ibv_cmd_*` command, `execute_ioctl`, `_verbs_init_and_alloc_context`,
/// `verbs_open_device`, `ibv_read_ibdev_sysfs_file`, the `verbs_*` bookkeeping of
/// provider-allocated objects (`verbs_uninit_context`, `verbs_set_ops`,
/// `verbs_init_cq`, which are `void` and so report through `errno` only) and the
/// `ibv_copy_*_kern` conversions: there is no kernel device to talk to.
pub(crate) fn no_kernel<T>() -> Verb<T> {
    Err(Errno::EOPNOTSUPP)
}

/// `__verbs_log`: there is nothing to log.
pub(crate) fn nothing_to_do() -> Verb<()> {
    Ok(())
}

/// `__ioctl_final_num_attrs`: how many ioctl attributes a command and its linked
/// buffers hold. Only used to size a buffer that `execute_ioctl` would fill, and
/// `execute_ioctl` refuses every command, so the caller's own count is a safe answer and
/// the linked buffers are never read.
pub(crate) fn final_num_attrs(num_attrs: c_uint) -> c_uint {
    num_attrs
}
