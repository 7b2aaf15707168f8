//! Protection domains and memory regions.
//!
//! A region is registered in place (`verbs_shm::client::Pd::register_iova`): the pages
//! holding the application's buffer are moved onto shared memory with the same contents,
//! so the daemon reads and writes the very bytes the application uses, even while the
//! application is blocked elsewhere (perftest's servers sit in a TCP `read()` while their
//! peer WRITEs and READs their buffers). Those pages stay shared after deregistration.

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::{Arc, Mutex};

use verbs_abi::*;
use verbs_shm::client::Access;

use super::context::{context, errno};
use super::debug::refused;
use super::objects::{Mr, MrState, Pd, Users, find, lock, public, publish, raw, retire};
use crate::ffi::{Errno, Verb};

/// `ibv_alloc_pd`.
pub(crate) fn alloc_pd(context: *mut ibv_context) -> Verb<*mut ibv_pd> {
    let ctx = self::context(context)?;
    let client = ctx
        .client
        .alloc_pd()
        .map_err(|e| refused("ibv_alloc_pd", &e))?;
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

/// `ibv_dealloc_pd`: `EBUSY` while regions, QPs, SRQs or AHs use it (known here, and
/// the daemon refuses so too), the daemon's errno if it refuses otherwise; the PD stays
/// usable after a refusal.
pub(crate) fn dealloc_pd(pd: *mut ibv_pd) -> Verb<()> {
    let found = find::<Pd>(pd)?;
    if found.users.busy() {
        return Err(Errno(libc::EBUSY));
    }
    found
        .client
        .clone()
        .dealloc()
        .map_err(|e| refused("ibv_dealloc_pd", &e))?;
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
    let access = checked_access(access)?;
    // Safety: the caller guarantees the range is mapped memory of this process; verbs
    // lets the library do what it must with registered pages, and the pages keep their
    // contents and addresses.
    let client = unsafe {
        pd_obj
            .client
            .register_iova(addr.cast(), length, iova, Access::from_bits(access))
    }
    .map_err(|e| {
        super::refusal::show("ibv_reg_mr", pd_obj.ctx.client.device(), &e);
        errno(&e)
    })?;
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
        state: Mutex::new(MrState {
            client,
            pd: pd_obj,
            iova,
            access,
        }),
    });
    Ok(public(&mr))
}

/// The rights of `access` the daemon enforces, after the checks `ibv_reg_mr` makes.
fn checked_access(access: c_uint) -> Verb<c_uint> {
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
    Ok(access & ENFORCED)
}

/// `ibv_rereg_mr`: changes the region's protection domain, rights and/or memory; its
/// keys stay the same, as verbs keeps them. The checks are rdma-core's; on any error the
/// region is unchanged.
///
/// # Safety
///
/// With `IBV_REREG_MR_CHANGE_TRANSLATION`, `[addr, addr + length)` is memory of the
/// calling process that stays mapped (as for `ibv_reg_mr`).
pub(crate) unsafe fn rereg_mr(
    mr: *mut ibv_mr,
    flags: c_int,
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> Verb<()> {
    let found = find::<Mr>(mr)?;
    let flags = c_uint::try_from(flags).map_err(|_| Errno::EINVAL)?;
    // All three changes are honoured.
    if flags == 0 || flags & !IBV_REREG_MR_FLAGS_SUPPORTED != 0 {
        return Err(Errno::EINVAL);
    }
    let translation = flags & IBV_REREG_MR_CHANGE_TRANSLATION != 0;
    if translation && (addr.is_null() || length == 0) {
        return Err(Errno::EINVAL);
    }
    if access != 0 && flags & IBV_REREG_MR_CHANGE_ACCESS == 0 {
        return Err(Errno::EINVAL);
    }
    let mut state = lock(&found.state);
    let new_pd = if flags & IBV_REREG_MR_CHANGE_PD != 0 {
        let p = find::<Pd>(pd)?;
        if !Arc::ptr_eq(&p.ctx, &state.pd.ctx) {
            return Err(Errno::EINVAL);
        }
        p
    } else {
        state.pd.clone()
    };
    let new_access = if flags & IBV_REREG_MR_CHANGE_ACCESS != 0 {
        checked_access(c_uint::try_from(access).map_err(|_| Errno::EINVAL)?)?
    } else {
        state.access
    };
    // Safety: the MR is live; the application does not change these fields itself.
    let ibv = unsafe { &*raw(&found.ibv) };
    let (old_addr, old_length) = (ibv.addr, ibv.length);
    let (new_addr, new_length, new_iova) = if translation {
        (addr, length, addr as u64)
    } else {
        (old_addr, old_length, state.iova)
    };
    let client_pd = &new_pd.client;
    // Safety: with a new translation the caller guarantees the range is mapped memory of
    // this process; otherwise it is the range registered before, which still is.
    unsafe {
        state.client.reregister(
            client_pd,
            new_addr.cast(),
            new_length,
            new_iova,
            Access::from_bits(new_access),
        )
    }
    .map_err(|e| {
        super::refusal::show("ibv_rereg_mr", new_pd.ctx.client.device(), &e);
        errno(&e)
    })?;
    if !Arc::ptr_eq(&new_pd, &state.pd) {
        new_pd.users.add();
        state.pd.users.remove();
        state.pd = new_pd;
    }
    state.iova = new_iova;
    state.access = new_access;
    // Safety: the MR is live; rdma-core updates these fields after a re-registration.
    let ibv = unsafe { &mut *raw(&found.ibv) };
    ibv.pd = public(&state.pd);
    ibv.addr = new_addr;
    ibv.length = new_length;
    Ok(())
}

/// `ibv_dereg_mr`.
pub(crate) fn dereg_mr(mr: *mut ibv_mr) -> Verb<()> {
    let mr = retire::<Mr>(mr)?;
    lock(&mr.state).pd.users.remove();
    drop(mr);
    Ok(())
}
