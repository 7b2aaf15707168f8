//! Endpoints: `rdma_create_ep`, `rdma_destroy_ep` and `rdma_get_request`, the synchronous
//! calls of rdma_verbs.h-style programs (rdma_server, rdma_client, pyverbs), as cma.c
//! writes them over the other calls.

use std::sync::Arc;

use verbs_abi::{ibv_pd, ibv_qp_init_attr};

use crate::abi::{RAI_PASSIVE, RDMA_CM_EVENT_CONNECT_REQUEST, RDMA_CM_EVENT_REJECTED};
use crate::abi::{rdma_addrinfo, rdma_cm_id};
use crate::cma::{Cma, lock};
use crate::event;
use crate::ffi::{Cm, Errno};
use crate::id::{self, IdPrivate};
use crate::qp;

/// How long `rdma_create_ep` lets address and route resolution take, as cma.c.
const RESOLVE_TIMEOUT_MS: i32 = 2000;

/// `rdma_create_ep`: a synchronous id, bound (`RAI_PASSIVE`: its QP attributes kept for
/// `rdma_get_request`) or resolved to the destination with its QP made; `ai_connect` data
/// kept for the connect.
///
/// # Safety
///
/// `res` is a valid `rdma_addrinfo` whose addresses are as long as their families say;
/// `pd` is NULL or a libibverbs PD; `qp_init_attr` is NULL or valid.
pub(crate) unsafe fn create_ep(
    cma: &'static Cma,
    res: *const rdma_addrinfo,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> Cm<*mut rdma_cm_id> {
    // Safety: valid (caller).
    let res = unsafe { res.as_ref() }.ok_or(Errno::EINVAL)?;
    let qp_type = u32::try_from(res.ai_qp_type).map_err(|_| Errno::EINVAL)?;
    let id = id::create(cma, None, std::ptr::null_mut(), res.ai_port_space, qp_type)?;
    // Safety: forwarded from the caller.
    let made = unsafe { set_up(id, res, pd, qp_init_attr) };
    match made {
        Ok(()) => Ok(id.as_c()),
        Err(e) => {
            let _ = destroy_ep(id);
            Err(e)
        }
    }
}

/// The part of [`create_ep`] after the id exists.
///
/// # Safety
///
/// As [`create_ep`].
unsafe fn set_up(
    id: &IdPrivate,
    res: &rdma_addrinfo,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> Cm<()> {
    if res.ai_flags & RAI_PASSIVE != 0 {
        // Safety: the source address as long as its family says (caller).
        unsafe { id::bind(id, res.ai_src_addr) }?;
        if !pd.is_null() {
            id.with_c(|c| c.pd = pd);
        }
        // Safety: NULL or valid (caller).
        if let Some(attr) = unsafe { qp_init_attr.as_ref() } {
            let mut attr = *attr;
            attr.qp_type = u32::try_from(res.ai_qp_type).map_err(|_| Errno::EINVAL)?;
            lock(&id.state).qp_init_attr = Some(attr);
        }
        return Ok(());
    }
    // Safety: the addresses as long as their families say (caller).
    unsafe { id::resolve_addr(id, res.ai_src_addr, res.ai_dst_addr, RESOLVE_TIMEOUT_MS) }?;
    if res.ai_route_len != 0 {
        // ibacm's path records, which this library never makes.
        return Err(Errno::EOPNOTSUPP);
    }
    id::resolve_route(id, RESOLVE_TIMEOUT_MS)?;
    // Safety: NULL or valid (caller).
    if let Some(attr) = unsafe { qp_init_attr.as_mut() } {
        attr.qp_type = u32::try_from(res.ai_qp_type).map_err(|_| Errno::EINVAL)?;
        // Safety: valid (caller); `pd` NULL or a PD.
        unsafe { qp::create_qp(id, pd, attr) }?;
    }
    if res.ai_connect_len != 0 && !res.ai_connect.is_null() {
        // Safety: `ai_connect_len` readable bytes (caller).
        let data =
            unsafe { std::slice::from_raw_parts(res.ai_connect.cast::<u8>(), res.ai_connect_len) };
        lock(&id.state).connect_data = data.to_vec();
    }
    Ok(())
}

/// `rdma_destroy_ep`: the id's QP, SRQ (and the CQs made for them) and the id.
pub(crate) fn destroy_ep(id: &IdPrivate) -> Cm<()> {
    if id.with_c(|c| !c.qp.is_null()) {
        qp::destroy_qp(id)?;
    }
    if id.with_c(|c| !c.srq.is_null()) {
        qp::destroy_srq(id)?;
    }
    lock(&id.state).qp_init_attr = None;
    id::destroy(id)
}

/// `rdma_get_request`: the next connection request of a synchronous listener, its QP made
/// with the attributes `rdma_create_ep` kept; the request stays the new id's `event`.
pub(crate) fn get_request(listen: &IdPrivate) -> Cm<*mut rdma_cm_id> {
    let (channel, attr) = {
        let state = lock(&listen.state);
        if !state.sync {
            return Err(Errno::EINVAL);
        }
        (Arc::clone(&state.channel), state.qp_init_attr)
    };
    let previous = listen.with_c(|c| std::mem::replace(&mut c.event, std::ptr::null_mut()));
    if !previous.is_null() {
        event::ack(listen.cma, previous)?;
    }
    let event = event::get(listen.cma, &channel)?;
    // Safety: an event just returned, live until acknowledged.
    let e = unsafe { *event };
    let failed = if e.event == RDMA_CM_EVENT_REJECTED {
        Some(Errno(libc::ECONNREFUSED))
    } else if e.status != 0 {
        Some(Errno(e.status.saturating_neg()))
    } else if e.event != RDMA_CM_EVENT_CONNECT_REQUEST {
        Some(Errno::EINVAL)
    } else {
        None
    };
    let child = match failed {
        None => IdPrivate::lookup(listen.cma, e.id),
        Some(errno) => Err(errno),
    };
    let made = child.and_then(|child| {
        if let Some(mut attr) = attr {
            let pd = listen.with_c(|c| c.pd);
            // Safety: a local copy of the kept attributes; the listener's PD.
            unsafe { qp::create_qp(child, pd, &mut attr) }?;
        }
        Ok(child)
    });
    match made {
        Ok(child) => {
            child.with_c(|c| c.event = event);
            Ok(child.as_c())
        }
        Err(errno) => {
            listen.with_c(|c| c.event = event);
            Err(errno)
        }
    }
}
