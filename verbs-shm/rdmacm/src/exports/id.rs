//! Ids: creation, addresses, options, channels.

use std::ffi::{c_int, c_void};

use libc::sockaddr;

use crate::abi::{rdma_cm_id, rdma_event_channel};
use crate::address;
use crate::channel::Channel;
use crate::cma::Cma;
use crate::ffi::{self, Errno};
use crate::id::{self, IdPrivate};

/// `int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void
/// *context, enum rdma_port_space ps)`: a NULL channel makes a synchronous id. The QP type
/// follows the port space (UD for `RDMA_PS_UDP` and `RDMA_PS_IPOIB`, RC otherwise).
///
/// # Safety
///
/// `id` is NULL or valid for writing a pointer.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_create_id(
    channel: *mut rdma_event_channel,
    id: *mut *mut rdma_cm_id,
    context: *mut c_void,
    ps: c_int,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        let cma = Cma::global();
        if id.is_null() {
            return Err(Errno::EINVAL);
        }
        let channel = match channel.is_null() {
            true => None,
            false => Some(Channel::lookup(cma, channel)?),
        };
        let qp_type = match ps {
            crate::abi::RDMA_PS_IPOIB | crate::abi::RDMA_PS_UDP => verbs_abi::IBV_QPT_UD,
            _ => verbs_abi::IBV_QPT_RC,
        };
        let made = id::create(cma, channel, context, ps, qp_type)?;
        // Safety: writable (caller).
        unsafe { id.write(made.as_c()) };
        Ok(())
    })
}

/// `int rdma_destroy_id(struct rdma_cm_id *id)`: waits until every event returned for the
/// id has been acknowledged.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int {
    ffi::zero_or_minus_one(|| id::destroy(IdPrivate::lookup(Cma::global(), id)?))
}

/// `int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_migrate_id(
    id: *mut rdma_cm_id,
    channel: *mut rdma_event_channel,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        let cma = Cma::global();
        let id = IdPrivate::lookup(cma, id)?;
        let channel = match channel.is_null() {
            true => None,
            false => Some(Channel::lookup(cma, channel)?),
        };
        id::migrate(id, channel)
    })
}

/// `int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval,
/// size_t optlen)`.
///
/// # Safety
///
/// `optval` is NULL or holds `optlen` readable bytes.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_set_option(
    id: *mut rdma_cm_id,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: usize,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        let id = IdPrivate::lookup(Cma::global(), id)?;
        // Safety: forwarded from the caller.
        unsafe { id::set_option(id, level, optname, optval, optlen) }
    })
}

/// `int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)`.
///
/// # Safety
///
/// `addr` is NULL or a socket address as long as its family says.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut sockaddr) -> c_int {
    ffi::zero_or_minus_one(|| {
        let id = IdPrivate::lookup(Cma::global(), id)?;
        // Safety: forwarded from the caller.
        unsafe { id::bind(id, addr) }
    })
}

/// `int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr, struct
/// sockaddr *dst_addr, int timeout_ms)`.
///
/// # Safety
///
/// `src_addr` is NULL or a socket address, `dst_addr` a socket address, each as long as
/// its family says.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn rdma_resolve_addr(
    id: *mut rdma_cm_id,
    src_addr: *mut sockaddr,
    dst_addr: *mut sockaddr,
    timeout_ms: c_int,
) -> c_int {
    ffi::zero_or_minus_one(|| {
        let id = IdPrivate::lookup(Cma::global(), id)?;
        // Safety: forwarded from the caller.
        unsafe { id::resolve_addr(id, src_addr, dst_addr, timeout_ms) }
    })
}

/// `int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int {
    ffi::zero_or_minus_one(|| id::resolve_route(IdPrivate::lookup(Cma::global(), id)?, timeout_ms))
}

/// `int rdma_listen(struct rdma_cm_id *id, int backlog)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int {
    ffi::zero_or_minus_one(|| id::listen(IdPrivate::lookup(Cma::global(), id)?, backlog))
}

/// `__be16 rdma_get_src_port(struct rdma_cm_id *id)`: the source port in network order, 0
/// (and `EINVAL`) for an unknown id.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_get_src_port(id: *mut rdma_cm_id) -> u16 {
    ffi::or_fallback(0, || {
        let id = IdPrivate::lookup(Cma::global(), id)?;
        // Safety: every member of the union is plain bytes; the storage view covers all.
        Ok(id.with_c(|c| address::port_be(unsafe { &c.route.addr.src.src_storage })))
    })
}

/// `__be16 rdma_get_dst_port(struct rdma_cm_id *id)`.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn rdma_get_dst_port(id: *mut rdma_cm_id) -> u16 {
    ffi::or_fallback(0, || {
        let id = IdPrivate::lookup(Cma::global(), id)?;
        // Safety: as above.
        Ok(id.with_c(|c| address::port_be(unsafe { &c.route.addr.dst.dst_storage })))
    })
}

include!(concat!(env!("OUT_DIR"), "/symver_exports_id.rs"));
