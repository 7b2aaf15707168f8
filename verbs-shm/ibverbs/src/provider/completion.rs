//! Completion channels and completion queues, basic and extended.
//!
//! A channel's `fd` is the application's end of a socket pair whose other end the daemon
//! writes one record to per notification; it is pollable and honours `O_NONBLOCK` like
//! rdma-core's. Polling and arming a CQ touch only the CQ's ring in shared memory. An
//! extended CQ (`ibv_create_cq_ex`) is the same CQ with the `ibv_cq_ex` polling functions
//! set: `ibv_start_poll`/`ibv_next_poll` take one completion off the ring and make it
//! current, `ibv_wc_read_*` read its fields; `ibv_poll_cq` works on it too.

use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};

use verbs_abi::*;
use verbs_shm::client::WorkCompletion;

use super::context::{context, errno};
use super::debug::refused;
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
    let entries = u32::try_from(cqe).map_err(|_| Errno::EINVAL)?;
    let comp_vector = u32::try_from(comp_vector).map_err(|_| Errno::EINVAL)?;
    let cq = new_cq(context, entries, cq_context, channel, comp_vector, false)?;
    Ok(public(&cq))
}

/// The work completion fields an extended CQ can be asked for: `IBV_WC_STANDARD_FLAGS`
/// (verbs.h). Timestamps, VLANs, flow tags and tag matching are not offered.
const WC_STANDARD_FLAGS: u64 = (IBV_WC_EX_WITH_BYTE_LEN
    | IBV_WC_EX_WITH_IMM
    | IBV_WC_EX_WITH_QP_NUM
    | IBV_WC_EX_WITH_SRC_QP
    | IBV_WC_EX_WITH_SLID
    | IBV_WC_EX_WITH_SL
    | IBV_WC_EX_WITH_DLID_PATH_BITS) as u64;

/// `verbs_context::create_cq_ex` (behind the inline `ibv_create_cq_ex`): a CQ read with
/// `ibv_start_poll`/`ibv_next_poll`/`ibv_end_poll` and the `ibv_wc_read_*` functions of
/// the standard fields. Other fields, parent domains and `IGNORE_OVERRUN` are
/// `EOPNOTSUPP`, as for a provider without them; `SINGLE_THREADED` is accepted.
///
/// # Safety
///
/// `init_attr` is NULL or readable.
pub(crate) unsafe fn create_cq_ex(
    context: *mut ibv_context,
    init_attr: *mut ibv_cq_init_attr_ex,
) -> Verb<*mut ibv_cq_ex> {
    self::context(context)?;
    // Safety: NULL or readable, per the caller.
    let Some(attr) = (unsafe { init_attr.as_ref() }) else {
        return Err(Errno::EINVAL);
    };
    let known_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
    if attr.comp_mask & !known_mask != 0 {
        return Err(Errno::EINVAL);
    }
    if attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD != 0 {
        // Parent domains are not supported.
        return Err(Errno::EOPNOTSUPP);
    }
    if attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 {
        let known = IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
        if attr.flags & !known != 0 {
            return Err(Errno::EINVAL);
        }
        if attr.flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
    }
    if attr.wc_flags & !WC_STANDARD_FLAGS != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    let cq = new_cq(
        context,
        attr.cqe,
        attr.cq_context,
        attr.channel,
        attr.comp_vector,
        true,
    )?;
    Ok(raw(&cq.ibv))
}

/// Creates a CQ; `extended` sets the `ibv_cq_ex` polling functions.
fn new_cq(
    context: *mut ibv_context,
    entries: u32,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: u32,
    extended: bool,
) -> Verb<Arc<Cq>> {
    let ctx = self::context(context)?;
    if entries == 0 {
        return Err(Errno::EINVAL);
    }
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
        .map_err(|e| refused("ibv_create_cq", &e))?;
    let mut ibv = ibv_cq_ex {
        context: ctx.ibv(),
        channel: channel.as_ref().map_or(std::ptr::null_mut(), public),
        cq_context,
        handle: client.handle(),
        cqe: c_int::try_from(client.entries()).unwrap_or(c_int::MAX),
        ..ibv_cq_ex::default()
    };
    if extended {
        crate::ops::set_cq_ex_ops(&mut ibv);
    }
    let handle = client.handle();
    let cq = publish(Cq {
        ibv: UnsafeCell::new(ibv),
        magic: Cq::MAGIC,
        client,
        current: Mutex::new(WorkCompletion::default()),
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
    Ok(cq)
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

/// The extended CQ behind `cq`.
///
/// # Safety
///
/// `cq` is an `ibv_cq_ex` this library handed out (the C contract of the inline
/// `ibv_start_poll` and friends).
unsafe fn extended<'a>(cq: *mut ibv_cq_ex) -> Verb<&'a Cq> {
    // Safety: forwarded from the caller; an `ibv_cq_ex` begins with the `ibv_cq`.
    unsafe { trusted::<Cq>(cq.cast()) }
}

/// Takes the next completion, if any, and makes it current: `ENOENT` when there is none.
fn advance(cq: &Cq) -> Verb<()> {
    let mut one = [WorkCompletion::default()];
    if cq.client.poll(&mut one).map_err(|e| errno(&e))? == 0 {
        // As in `poll_cq`: let the daemon's poller have the CPU for a moment.
        std::thread::yield_now();
        return Err(Errno(libc::ENOENT));
    }
    let c = one[0];
    *lock(&cq.current) = c;
    // Safety: the CQ is live; these two fields are the provider's to write, as in
    // rdma-core (the application serialises polling a CQ).
    let ibv = unsafe { &mut *raw(&cq.ibv) };
    ibv.status = c.status;
    ibv.wr_id = c.wr_id;
    Ok(())
}

/// `ibv_start_poll`: 0 with the first completion current, `ENOENT` if there is none.
///
/// # Safety
///
/// As [`extended`]; `attr` is NULL or readable.
pub(crate) unsafe fn start_poll(cq: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> Verb<()> {
    // Safety: forwarded from the caller.
    let cq = unsafe { extended(cq) }?;
    // Safety: NULL or readable, per the caller.
    if unsafe { attr.as_ref() }.is_some_and(|a| a.comp_mask != 0) {
        return Err(Errno::EINVAL);
    }
    advance(cq)
}

/// `ibv_next_poll`: 0 with the next completion current, `ENOENT` if there is none.
///
/// # Safety
///
/// As [`extended`].
pub(crate) unsafe fn next_poll(cq: *mut ibv_cq_ex) -> Verb<()> {
    // Safety: forwarded from the caller.
    advance(unsafe { extended(cq) }?)
}

/// `ibv_end_poll`: completions are consumed as they become current, so nothing is left
/// to release.
///
/// # Safety
///
/// As [`extended`].
pub(crate) unsafe fn end_poll(cq: *mut ibv_cq_ex) -> Verb<()> {
    // Safety: forwarded from the caller.
    unsafe { extended(cq) }.map(drop)
}

/// The current completion of `cq` (for the `ibv_wc_read_*` functions).
///
/// # Safety
///
/// As [`extended`].
pub(crate) unsafe fn current(cq: *mut ibv_cq_ex) -> Verb<WorkCompletion> {
    // Safety: forwarded from the caller.
    let cq = unsafe { extended(cq) }?;
    Ok(*lock(&cq.current))
}
