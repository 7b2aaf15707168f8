//! Protection domains and memory regions.
//!
//! A region is registered in place (`verbs_shm::client::Pd::register_iova`): the pages
//! holding the application's buffer are moved onto shared memory with the same contents,
//! so the daemon reads and writes the very bytes the application uses, even while the
//! application is blocked elsewhere (perftest's servers sit in a TCP `read()` while their
//! peer WRITEs and READs their buffers). Those pages stay shared after deregistration.

use std::cell::UnsafeCell;
use std::ffi::{c_uint, c_void};

use verbs_abi::*;
use verbs_shm::client::Access;

use super::context::{context, errno};
use super::objects::{Mr, Pd, Users, find, public, publish, retire};
use crate::ffi::{Errno, Verb};

/// `ibv_alloc_pd`.
pub(crate) fn alloc_pd(context: *mut ibv_context) -> Verb<*mut ibv_pd> {
    let ctx = self::context(context)?;
    let client = ctx.client.alloc_pd().map_err(|e| errno(&e))?;
    let ibv = ibv_pd {
        context: ctx.ibv(),
        handle: client.handle(),
    };
    let pd = publish(Pd {
        ibv: UnsafeCell::new(ibv),
        client,
        ctx,
        users: Users::default(),
    });
    Ok(public(&pd))
}

/// `ibv_dealloc_pd`: `EBUSY` while regions, QPs, SRQs or AHs use it.
pub(crate) fn dealloc_pd(pd: *mut ibv_pd) -> Verb<()> {
    let found = find::<Pd>(pd)?;
    if found.users.busy() {
        return Err(Errno(libc::EBUSY));
    }
    retire::<Pd>(pd).map(drop)
}

/// The access rights the daemon enforces.
const ENFORCED: c_uint = IBV_ACCESS_LOCAL_WRITE
    | IBV_ACCESS_REMOTE_WRITE
    | IBV_ACCESS_REMOTE_READ
    | IBV_ACCESS_REMOTE_ATOMIC;

/// Flags accepted and without effect here: binding memory windows (never possible: there
/// are none) and the huge-page hint.
const ACCEPTED: c_uint = IBV_ACCESS_MW_BIND | IBV_ACCESS_HUGETLB;

/// `ibv_reg_mr`, `ibv_reg_mr_iova` and `ibv_reg_mr_iova2`. Optional access bits
/// (`IBV_ACCESS_RELAXED_ORDERING` and the rest of the optional range) are dropped, as
/// rdma-core drops them for a device without them; on-demand paging and zero-based
/// regions are not supported (`EOPNOTSUPP`); remote write or atomic rights without local
/// write are `EINVAL`, as verbs requires.
///
/// # Safety
///
/// `[addr, addr + length)` is memory of the calling process that stays mapped, which the
/// C contract of `ibv_reg_mr` requires.
pub(crate) unsafe fn reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> Verb<*mut ibv_mr> {
    let pd_obj = find::<Pd>(pd)?;
    if addr.is_null() || length == 0 {
        return Err(Errno::EINVAL);
    }
    let access = access & !IBV_ACCESS_OPTIONAL_RANGE;
    if access & (IBV_ACCESS_ON_DEMAND | IBV_ACCESS_ZERO_BASED) != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    if access & !(ENFORCED | ACCEPTED) != 0 {
        return Err(Errno::EINVAL);
    }
    let remote_changes = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
    if access & remote_changes != 0 && access & IBV_ACCESS_LOCAL_WRITE == 0 {
        return Err(Errno::EINVAL);
    }
    // Safety: the caller guarantees the range is mapped memory of this process; verbs
    // lets the library do what it must with registered pages, and the pages keep their
    // contents and addresses.
    let client = unsafe {
        pd_obj
            .client
            .register_iova(addr.cast(), length, iova, Access(access & ENFORCED))
    }
    .map_err(|e| errno(&e))?;
    let ibv = ibv_mr {
        context: pd_obj.ctx.ibv(),
        pd,
        addr,
        length,
        handle: client.handle(),
        lkey: client.lkey(),
        rkey: client.rkey(),
    };
    pd_obj.users.add();
    let mr = publish(Mr {
        ibv: UnsafeCell::new(ibv),
        client,
        pd: pd_obj,
    });
    Ok(public(&mr))
}

/// `ibv_dereg_mr`.
pub(crate) fn dereg_mr(mr: *mut ibv_mr) -> Verb<()> {
    let mr = retire::<Mr>(mr)?;
    mr.pd.users.remove();
    drop(mr);
    Ok(())
}
