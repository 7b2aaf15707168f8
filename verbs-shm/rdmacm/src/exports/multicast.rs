//! Multicast groups (`crate::multicast`), with cma.c's argument checks first: a group
//! address of IPv4 or IPv6 (`EINVAL` otherwise), and for `rdma_join_multicast_ex` a
//! `comp_mask` of known bits (`EOPNOTSUPP`) naming the address and the join flags, flags
//! `RDMA_MC_JOIN_FLAG_FULLMEMBER` or `RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER` (`EINVAL`).
//! The daemon answers a join as Linux's rdma_cm on RoCE v2: `MULTICAST_JOIN` for an IPv4
//! group, `EINVAL` for an id without a device, not bound or address-resolved, or not UD,
//! or for the unspecified group, and `ENOTSUPP` (524) for an IPv6 group. A leave of an
//! address the id did not join is `EADDRNOTAVAIL`.

use std::ffi::{c_int, c_void};

use libc::sockaddr;

use verbs_shm::cm::join_flags;

use crate::abi::{
    RDMA_CM_JOIN_MC_ATTR_ADDRESS, RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS, RDMA_CM_JOIN_MC_ATTR_RESERVED,
    RDMA_MC_JOIN_FLAG_RESERVED, rdma_cm_id, rdma_cm_join_mc_attr_ex,
};
use crate::cma::Cma;
use crate::ffi::{self, Errno};
use crate::id::IdPrivate;
use crate::multicast;

/// `int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)`.
///
/// # Safety
///
/// `addr` is NULL or a socket address as long as its family says.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_join_multicast(
    id: *mut rdma_cm_id,
    addr: *mut sockaddr,
    context: *mut c_void,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        let id = IdPrivate::lookup(Cma::global(), id)?;
        // Safety: forwarded from the caller.
        unsafe { multicast::join(id, addr, join_flags::FULLMEMBER, context) }
    })
}

/// `int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex
/// *mc_join_attr, void *context)`.
///
/// # Safety
///
/// `mc_join_attr` is NULL or valid, its `addr` NULL or a socket address.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_join_multicast_ex(
    id: *mut rdma_cm_id,
    mc_join_attr: *mut rdma_cm_join_mc_attr_ex,
    context: *mut c_void,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        let id = IdPrivate::lookup(Cma::global(), id)?;
        // Safety: NULL or valid (caller).
        let attr = unsafe { mc_join_attr.as_ref() }.ok_or(Errno::EINVAL)?;
        if attr.comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED {
            return Err(Errno::EOPNOTSUPP);
        }
        if attr.comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS == 0
            || attr.comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS == 0
            || attr.join_flags >= RDMA_MC_JOIN_FLAG_RESERVED
        {
            return Err(Errno::EINVAL);
        }
        // Safety: forwarded from the caller.
        unsafe { multicast::join(id, attr.addr, attr.join_flags, context) }
    })
}

/// `int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)`.
///
/// # Safety
///
/// `addr` is NULL or a socket address as long as its family says.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_leave_multicast(
    id: *mut rdma_cm_id,
    addr: *mut sockaddr,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        let id = IdPrivate::lookup(Cma::global(), id)?;
        // Safety: forwarded from the caller.
        unsafe { multicast::leave(id, addr) }
    })
}

include!(concat!(env!("OUT_DIR"), "/symver_exports_multicast.rs"));
