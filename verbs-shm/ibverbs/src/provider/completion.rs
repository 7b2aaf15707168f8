//! Completion channels and completion queues.
//!
//! A channel's `fd` is the application's end of a socket pair whose other end the daemon
//! writes one record to per notification; it is pollable and honours `O_NONBLOCK` like
//! rdma-core's. Polling and arming a CQ touch only the CQ's ring in shared memory.

use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};

use verbs_abi::*;
use verbs_shm::client::WorkCompletion;

use super::context::{context, errno};
use super::objects::{
    Channel, Cq, EventCount, Magic, Users, find, lock, public, publish, raw, retire, trusted,
};
use crate::ffi::{Errno, Verb};

/// `ibv_create_comp_channel`.
pub(crate) fn create_comp_channel(context: *mut ibv_context) -> Verb<*mut ibv_comp_channel> {
    let ctx = self::context(context)?;
    let client = ctx.client.create_comp_channel().map_err(|e| errno(&e))?;
    let ibv = ibv_comp_channel {
        context: ctx.ibv(),
        fd: client.fd().as_raw_fd(),
        refcnt: 0,
    };
    let channel = publish(Channel {
        ibv: UnsafeCell::new(ibv),
        client,
        ctx,
        cqs: Mutex::new(HashMap::new()),
    });
    Ok(public(&channel))
}

/// `ibv_destroy_comp_channel`: `EBUSY` while CQs use it.
pub(crate) fn destroy_comp_channel(channel: *mut ibv_comp_channel) -> Verb<()> {
    let found = find::<Channel>(channel)?;
    if !lock(&found.cqs).is_empty() {
        return Err(Errno(libc::EBUSY));
    }
    retire::<Channel>(channel).map(drop)
}

fn set_refcnt(channel: &Channel, cqs: usize) {
    // Safety: the channel is live; rdma-core keeps this field as the number of CQs.
    unsafe { (*raw(&channel.ibv)).refcnt = c_int::try_from(cqs).unwrap_or(c_int::MAX) };
}

/// `ibv_create_cq`: at least `cqe` entries (a power of two; `cq->cqe` says how many).
pub(crate) fn create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> Verb<*mut ibv_cq> {
    let ctx = self::context(context)?;
    let entries = u32::try_from(cqe)
        .ok()
        .filter(|&n| n > 0)
        .ok_or(Errno::EINVAL)?;
    // One completion vector (`num_comp_vectors` is 1).
    if comp_vector != 0 {
        return Err(Errno::EINVAL);
    }
    let channel = if channel.is_null() {
        None
    } else {
        let ch = find::<Channel>(channel)?;
        if !Arc::ptr_eq(&ch.ctx, &ctx) {
            return Err(Errno::EINVAL);
        }
        Some(ch)
    };
    let client = ctx
        .client
        .create_cq(entries, channel.as_ref().map(|c| &c.client))
        .map_err(|e| errno(&e))?;
    let ibv = ibv_cq {
        context: ctx.ibv(),
        channel: channel.as_ref().map_or(std::ptr::null_mut(), public),
        cq_context,
        handle: client.handle(),
        cqe: c_int::try_from(client.entries()).unwrap_or(c_int::MAX),
        ..ibv_cq::default()
    };
    let handle = client.handle();
    let cq = publish(Cq {
        ibv: UnsafeCell::new(ibv),
        magic: Cq::MAGIC,
        client,
        ctx: ctx.clone(),
        channel: channel.clone(),
        users: Users::default(),
        comp_events: EventCount::default(),
        async_events: EventCount::default(),
    });
    if let Some(ch) = &channel {
        let mut cqs = lock(&ch.cqs);
        cqs.insert(handle, cq.clone());
        set_refcnt(ch, cqs.len());
    }
    lock(&ctx.targets).cqs.insert(handle, cq.clone());
    Ok(public(&cq))
}

/// `ibv_destroy_cq`: `EBUSY` while QPs use it; waits until every completion and
/// asynchronous event handed out for it has been acknowledged, as verbs specifies.
pub(crate) fn destroy_cq(cq: *mut ibv_cq) -> Verb<()> {
    let found = find::<Cq>(cq)?;
    if found.users.busy() {
        return Err(Errno(libc::EBUSY));
    }
    found.comp_events.wait_all_acked();
    found.async_events.wait_all_acked();
    drop(found);
    let cq = retire::<Cq>(cq)?;
    let handle = cq.client.handle();
    if let Some(ch) = &cq.channel {
        let mut cqs = lock(&ch.cqs);
        cqs.remove(&handle);
        set_refcnt(ch, cqs.len());
    }
    lock(&cq.ctx.targets).cqs.remove(&handle);
    drop(cq);
    Ok(())
}

/// `ibv_get_cq_event`: the CQ of the next notification on `channel`. Blocks unless the
/// application made the channel's fd non-blocking (then `EAGAIN`).
///
/// # Safety
///
/// `cq` and `cq_context` are NULL or valid for writing a pointer.
pub(crate) unsafe fn get_cq_event(
    channel: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> Verb<c_int> {
    let ch = find::<Channel>(channel)?;
    if cq.is_null() || cq_context.is_null() {
        return Err(Errno::EINVAL);
    }
    loop {
        let handle = ch.client.get_event().map_err(|e| errno(&e))?;
        let Some(found) = lock(&ch.cqs).get(&handle).cloned() else {
            // A notification for a CQ destroyed since: nothing to report.
            continue;
        };
        found.comp_events.report();
        // Safety: the CQ is live; `cq_context` is the application's own cookie.
        let cookie = unsafe { (*raw(&found.ibv)).cq_context };
        // Safety: checked non-NULL; writable per the caller.
        unsafe { cq.write(public(&found)) };
        // Safety: as above.
        unsafe { cq_context.write(cookie) };
        return Ok(0);
    }
}

/// `ibv_ack_cq_events`.
pub(crate) fn ack_cq_events(cq: *mut ibv_cq, nevents: c_uint) -> Verb<()> {
    let cq = find::<Cq>(cq)?;
    let total = cq.comp_events.ack(nevents);
    // Safety: the CQ is live; rdma-core keeps this field as the acknowledged count.
    unsafe { (*raw(&cq.ibv)).comp_events_completed = total };
    Ok(())
}

/// `ibv_resize_cq`: not supported (`EOPNOTSUPP`, as rdma-core answers for a provider
/// without it); the daemon's CQ rings have a fixed size.
pub(crate) fn resize_cq(cq: *mut ibv_cq, _cqe: c_int) -> Verb<()> {
    find::<Cq>(cq)?;
    Err(Errno::EOPNOTSUPP)
}

fn to_wc(c: &WorkCompletion) -> ibv_wc {
    ibv_wc {
        wr_id: c.wr_id,
        status: c.status,
        opcode: c.opcode,
        vendor_err: c.vendor_err,
        byte_len: c.byte_len,
        imm_data: c.imm_data,
        qp_num: c.qp_num,
        src_qp: c.src_qp,
        wc_flags: c.wc_flags,
        pkey_index: c.pkey_index,
        slid: c.slid,
        sl: c.sl,
        dlid_path_bits: c.dlid_path_bits,
    }
}

/// `ibv_poll_cq` (through `ibv_context_ops`): shared memory only.
///
/// # Safety
///
/// `cq` is a CQ of this library; `wc` is valid for writing `num_entries` `ibv_wc`s.
pub(crate) unsafe fn poll_cq(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> Verb<c_int> {
    // Safety: forwarded from the caller.
    let cq = unsafe { trusted::<Cq>(cq) }?;
    let wanted = usize::try_from(num_entries).map_err(|_| Errno::EINVAL)?;
    if wanted > 0 && wc.is_null() {
        return Err(Errno::EINVAL);
    }
    const BATCH: usize = 32;
    let mut buf = [WorkCompletion::default(); BATCH];
    let mut done = 0usize;
    while done < wanted {
        let want = (wanted - done).min(BATCH);
        let got = cq.client.poll(&mut buf[..want]).map_err(|e| errno(&e))?;
        for (i, c) in buf[..got].iter().enumerate() {
            // Safety: `done + i < wanted`, inside the caller's array.
            let slot = unsafe { wc.add(done + i) };
            // Safety: an entry of the caller's writable array.
            unsafe { slot.write(to_wc(c)) };
        }
        done += got;
        if got < want {
            break;
        }
    }
    if done == 0 {
        // The daemon's pollers share the CPUs with applications that spin on their CQs:
        // an empty poll gives the CPU away for a moment (a no-op when nothing else is
        // runnable), so a busy-polling application cannot starve the poller it waits for.
        std::thread::yield_now();
    }
    c_int::try_from(done).map_err(|_| Errno::EINVAL)
}

/// `ibv_req_notify_cq` (through `ibv_context_ops`): shared memory only.
///
/// # Safety
///
/// `cq` is a CQ of this library.
pub(crate) unsafe fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> Verb<()> {
    // Safety: forwarded from the caller.
    let cq = unsafe { trusted::<Cq>(cq) }?;
    cq.client.req_notify(solicited_only != 0);
    Ok(())
}
