//! Multicast, which xroce does not offer yet: its devices report no multicast groups
//! (`max_mcast_grp` 0), so a join answers `EOPNOTSUPP` after cma.c's own argument checks,
//! and a leave finds no group (`EADDRNOTAVAIL`, cma.c's answer for an address not joined).

use std::ffi::{c_int, c_void};

use libc::sockaddr;

use crate::abi::{
    RDMA_CM_JOIN_MC_ATTR_ADDRESS, RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS, RDMA_CM_JOIN_MC_ATTR_RESERVED,
    RDMA_MC_JOIN_FLAG_RESERVED, rdma_cm_id, rdma_cm_join_mc_attr_ex,
};
use crate::address;
use crate::cma::Cma;
use crate::ffi::{self, Cm, Errno};
use crate::id::IdPrivate;

/// cma.c's `ucma_addrlen` check of a group address: `EINVAL` unless IPv4 or IPv6.
///
/// # Safety
///
/// `addr` is NULL or a socket address as long as its family says.
unsafe fn check_group(addr: *const sockaddr) -> Cm<()> {
    // Safety: forwarded from the caller.
    unsafe { address::read(addr) }.map(drop)
}

/// `int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)`.
///
/// # Safety
///
/// `addr` is NULL or a socket address as long as its family says.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_join_multicast(
    id: *mut rdma_cm_id,
    addr: *mut sockaddr,
    _context: *mut c_void,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        IdPrivate::lookup(Cma::global(), id)?;
        // Safety: forwarded from the caller.
        unsafe { check_group(addr) }?;
        Err(Errno::EOPNOTSUPP)
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
    _context: *mut c_void,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        IdPrivate::lookup(Cma::global(), id)?;
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
        unsafe { check_group(attr.addr) }?;
        Err(Errno::EOPNOTSUPP)
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
        IdPrivate::lookup(Cma::global(), id)?;
        // Safety: forwarded from the caller.
        unsafe { check_group(addr) }?;
        Err(Errno(libc::EADDRNOTAVAIL))
    })
}

include!(concat!(env!("OUT_DIR"), "/symver_exports_multicast.rs"));
