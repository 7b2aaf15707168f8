//! Fork protection: xroce needs none.
//!
//! rdma-core's fork support (`ibv_fork_init`, `MADV_DONTFORK` on registered ranges) exists
//! because a NIC DMAs into pinned physical pages, which a copy-on-write fork can swap
//! under it. No device DMAs into an xroce application: the daemon reaches registered
//! memory through ordinary virtual mappings (shared memory or the process's own address
//! space), which copy-on-write keeps consistent. So this library answers like rdma-core on
//! a kernel with copy-on-fork support (`IBV_FORK_UNNEEDED`), and the range calls succeed
//! doing nothing. Rings that verbs-shm maps into the application are its own business
//! (`MADV_DONTFORK` there if needed).

use std::ffi::c_void;

use verbs_abi::{IBV_FORK_UNNEEDED, ibv_fork_status};

use crate::ffi::Verb;

/// `ibv_fork_init`: nothing to initialise.
pub(crate) fn init() -> Verb<()> {
    Ok(())
}

/// `ibv_is_fork_initialized`.
pub(crate) fn status() -> ibv_fork_status {
    IBV_FORK_UNNEEDED
}

/// `ibv_dontfork_range` (`inherited` false) / `ibv_dofork_range` (true): nothing to
/// change.
pub(crate) fn set_range_inherited(_base: *mut c_void, _size: usize, _inherited: bool) -> Verb<()> {
    Ok(())
}
