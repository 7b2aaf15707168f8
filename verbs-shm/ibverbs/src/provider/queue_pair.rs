//! Shared receive queues, queue pairs, address handles, and posting work requests.
//!
//! Posting (`post_send`, `post_recv`, `post_srq_recv`) converts each `ibv_*_wr` of the
//! application's list into the shared-memory work request of verbs-shm and publishes it
//! in the queue's ring: shared memory only, plus a doorbell write when the daemon's poller
//! sleeps. Each QP and SRQ ring has its own lock, so threads posting to different QPs
//! never wait for each other.

use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use verbs_abi::*;
use verbs_shm::client::{self, AhAttr, QpAttr, QpCaps, QpInit, QpType, RecvWr};
use verbs_shm::contract::{MAX_INLINE, MAX_SGE, SendWqe, Sge};
use zerocopy::FromZeros;

use super::context::{context, errno};
use super::debug::{refused, refused_here};
use super::objects::{
    Ah, Context, Cq, EventCount, Magic, Pd, Qp, Srq, Users, find, lock, public, publish, raw,
    retire, trusted,
};
use super::work_request::{self, Builder};
use crate::ffi::{Errno, Verb};

// `ibv_sge` and the shared-memory `Sge` are the same three fields in the same places, so
// an application's scatter/gather list is used as it is.
const _: () = {
    assert!(size_of::<ibv_sge>() == size_of::<Sge>());
    assert!(align_of::<ibv_sge>() == align_of::<Sge>());
    assert!(core::mem::offset_of!(ibv_sge, addr) == core::mem::offset_of!(Sge, addr));
    assert!(core::mem::offset_of!(ibv_sge, length) == core::mem::offset_of!(Sge, length));
    assert!(core::mem::offset_of!(ibv_sge, lkey) == core::mem::offset_of!(Sge, lkey));
};

/// An application's scatter/gather list as shared-memory elements.
///
/// # Safety
///
/// `list` is valid for reading `n` `ibv_sge`s (or `n` is 0) for `'a`.
unsafe fn sges<'a>(list: *const ibv_sge, n: usize) -> Verb<&'a [Sge]> {
    if n == 0 {
        return Ok(&[]);
    }
    if list.is_null() || n > MAX_SGE {
        return Err(Errno::EINVAL);
    }
    // Safety: same layout (checked above); readable for `n` elements per the caller.
    Ok(unsafe { std::slice::from_raw_parts(list.cast::<Sge>(), n) })
}

/// The errno of a failed post: a full queue is `ENOMEM`, as providers answer.
fn post_errno(error: &client::Error) -> Errno {
    errno(error)
}

// Shared receive queues.

/// `ibv_create_srq`: writes the capacities granted back into `init_attr->attr`.
///
/// # Safety
///
/// `init_attr` is NULL or valid for reading and writing an `ibv_srq_init_attr`.
pub(crate) unsafe fn create_srq(
    pd: *mut ibv_pd,
    init_attr: *mut ibv_srq_init_attr,
) -> Verb<*mut ibv_srq> {
    let pd_obj = find::<Pd>(pd)?;
    // Safety: NULL or valid, per the caller.
    let Some(init) = (unsafe { init_attr.as_mut() }) else {
        return Err(Errno::EINVAL);
    };
    let client = pd_obj
        .client
        .create_srq(init.attr.max_wr, init.attr.max_sge, init.attr.srq_limit)
        .map_err(|e| refused("ibv_create_srq", &e))?;
    let (max_wr, max_sge, _) = client.query().map_err(|e| errno(&e))?;
    init.attr.max_wr = max_wr;
    init.attr.max_sge = max_sge;
    let ctx = pd_obj.ctx.clone();
    let ibv = ibv_srq {
        context: ctx.ibv(),
        srq_context: init.srq_context,
        pd,
        handle: client.handle(),
        ..ibv_srq::default()
    };
    let handle = client.handle();
    pd_obj.users.add();
    let srq = publish(Srq {
        ibv: UnsafeCell::new(ibv),
        magic: Srq::MAGIC,
        client,
        ctx: ctx.clone(),
        pd: pd_obj,
        users: Users::default(),
        events: EventCount::default(),
    });
    lock(&ctx.targets).srqs.insert(handle, srq.clone());
    Ok(public(&srq))
}

/// `ibv_modify_srq`: only the limit can change (`IBV_SRQ_MAX_WR`, resizing, is
/// `EOPNOTSUPP`: the device does not claim `IBV_DEVICE_SRQ_RESIZE`).
///
/// # Safety
///
/// `attr` is NULL or readable.
pub(crate) unsafe fn modify_srq(
    srq: *mut ibv_srq,
    attr: *mut ibv_srq_attr,
    mask: c_int,
) -> Verb<()> {
    let srq = find::<Srq>(srq)?;
    // Safety: NULL or readable, per the caller.
    let Some(attr) = (unsafe { attr.as_ref() }) else {
        return Err(Errno::EINVAL);
    };
    let mask = u32::try_from(mask).map_err(|_| Errno::EINVAL)?;
    if mask & !(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT) != 0 {
        return Err(Errno::EINVAL);
    }
    if mask & IBV_SRQ_MAX_WR != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    if mask & IBV_SRQ_LIMIT != 0 {
        srq.client
            .set_limit(attr.srq_limit)
            .map_err(|e| refused("ibv_modify_srq", &e))?;
    }
    Ok(())
}

/// `ibv_query_srq`.
///
/// # Safety
///
/// `attr` is NULL or valid for writing.
pub(crate) unsafe fn query_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> Verb<()> {
    let srq = find::<Srq>(srq)?;
    if attr.is_null() {
        return Err(Errno::EINVAL);
    }
    let (max_wr, max_sge, srq_limit) = srq.client.query().map_err(|e| errno(&e))?;
    // Safety: checked non-NULL; writable per the caller.
    unsafe {
        attr.write(ibv_srq_attr {
            max_wr,
            max_sge,
            srq_limit,
        })
    };
    Ok(())
}

/// `ibv_destroy_srq`: `EBUSY` while QPs use it; waits for its events' acknowledgements.
pub(crate) fn destroy_srq(srq: *mut ibv_srq) -> Verb<()> {
    let found = find::<Srq>(srq)?;
    if found.users.busy() {
        return Err(Errno(libc::EBUSY));
    }
    found.events.wait_all_acked();
    drop(found);
    let srq = retire::<Srq>(srq)?;
    lock(&srq.ctx.targets).srqs.remove(&srq.client.handle());
    srq.pd.users.remove();
    drop(srq);
    Ok(())
}

/// `ibv_post_srq_recv` (through `ibv_context_ops`).
///
/// # Safety
///
/// `srq` is an SRQ of this library; `wr` a valid list; `bad_wr` NULL or writable.
pub(crate) unsafe fn post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> Verb<()> {
    // Safety: forwarded from the caller.
    let srq = unsafe { trusted::<Srq>(srq) }.inspect_err(|_| {
        // Safety: as above.
        unsafe { set_bad(bad_wr, wr) }
    })?;
    // Safety: forwarded from the caller.
    unsafe { post_receives(wr, bad_wr, |wrs| srq.client.post_recv(wrs)) }
}

/// Stores the first work request not posted.
///
/// # Safety
///
/// `bad_wr` is NULL or writable.
unsafe fn set_bad<T>(bad_wr: *mut *mut T, wr: *mut T) {
    if !bad_wr.is_null() {
        // Safety: non-NULL and writable per the caller.
        unsafe { bad_wr.write(wr) };
    }
}

/// Walks a receive list and posts it in batches through `post`.
///
/// # Safety
///
/// `wr` is NULL or a valid `next`-linked list whose scatter/gather lists are readable;
/// `bad_wr` NULL or writable.
unsafe fn post_receives(
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
    post: impl Fn(&[RecvWr<'_>]) -> Result<(), (usize, client::Error)>,
) -> Verb<()> {
    const BATCH: usize = 16;
    let empty = RecvWr {
        wr_id: 0,
        sges: &[],
    };
    let mut batch = [empty; BATCH];
    let mut origin = [std::ptr::null_mut::<ibv_recv_wr>(); BATCH];
    let mut cur = wr;
    loop {
        let mut n = 0;
        let mut refused = None;
        while n < BATCH && !cur.is_null() {
            // Safety: a node of the caller's valid list.
            let w = unsafe { &*cur };
            let count = usize::try_from(w.num_sge).map_err(|_| Errno::EINVAL);
            // Safety: the node's list is readable for `num_sge` elements (caller).
            match count.and_then(|c| unsafe { sges(w.sg_list, c) }) {
                Ok(list) => {
                    batch[n] = RecvWr {
                        wr_id: w.wr_id,
                        sges: list,
                    };
                    origin[n] = cur;
                    n += 1;
                    cur = w.next;
                }
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        if n > 0
            && let Err((i, e)) = post(&batch[..n])
        {
            // Safety: writable per the caller.
            unsafe { set_bad(bad_wr, origin[i]) };
            return Err(post_errno(&e));
        }
        if let Some(e) = refused {
            // Safety: as above.
            unsafe { set_bad(bad_wr, cur) };
            return Err(e);
        }
        if cur.is_null() {
            return Ok(());
        }
    }
}

// Queue pairs.

fn qp_type(raw: u32) -> Verb<QpType> {
    // XRC, raw packet, driver QPs: a provider without them answers EOPNOTSUPP.
    QpType::from_raw(raw).ok_or(Errno::EOPNOTSUPP)
}

fn to_caps(c: &ibv_qp_cap) -> QpCaps {
    QpCaps {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

fn from_caps(c: &QpCaps) -> ibv_qp_cap {
    ibv_qp_cap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

/// `ibv_create_qp` (and the inline `ibv_create_qp_ex` for plain QPs): RC, UC or UD;
/// writes the capacities granted back into `init_attr->cap`.
///
/// # Safety
///
/// `init_attr` is NULL or valid for reading and writing an `ibv_qp_init_attr`.
pub(crate) unsafe fn create_qp(
    pd: *mut ibv_pd,
    init_attr: *mut ibv_qp_init_attr,
) -> Verb<*mut ibv_qp> {
    // Safety: NULL or valid, per the caller.
    let Some(init) = (unsafe { init_attr.as_mut() }) else {
        return Err(Errno::EINVAL);
    };
    let qp = new_qp(pd, init, 0)?;
    Ok(public(&qp))
}

/// The `ibv_qp_init_attr_ex` fields this library honours: the protection domain, creation
/// flags (none is offered) and the `ibv_wr_*` operations.
const INIT_ATTR_MASK: u32 =
    IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;

/// `verbs_context::create_qp_ex` (behind the inline `ibv_create_qp_ex` whenever
/// `comp_mask` asks for more than a protection domain): with
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` the QP is an extended one, posted to with the
/// `ibv_wr_*` functions (`ibv_qp_to_qp_ex`). XRC domains, TSO, RSS and creation flags are
/// `EOPNOTSUPP`, as are operations the QP type cannot carry (memory windows, local
/// invalidation, TSO, atomic write): the answer of a provider without them.
///
/// # Safety
///
/// `init_attr` is NULL or valid for reading and writing an `ibv_qp_init_attr_ex`.
pub(crate) unsafe fn create_qp_ex(
    context: *mut ibv_context,
    init_attr: *mut ibv_qp_init_attr_ex,
) -> Verb<*mut ibv_qp> {
    let ctx = self::context(context)?;
    // Safety: NULL or valid, per the caller.
    let Some(attr) = (unsafe { init_attr.as_mut() }) else {
        return Err(Errno::EINVAL);
    };
    if attr.comp_mask & IBV_QP_INIT_ATTR_PD == 0 {
        // Only XRC target QPs come without a protection domain.
        return Err(Errno::EOPNOTSUPP);
    }
    if attr.comp_mask & !INIT_ATTR_MASK != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    if attr.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS != 0 && attr.create_flags != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    let send_ops = if attr.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 {
        let supported = work_request::supported_send_ops(attr.qp_type);
        if attr.send_ops_flags == 0 || attr.send_ops_flags & !supported != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        attr.send_ops_flags
    } else {
        0
    };
    let pd_obj = find::<Pd>(attr.pd)?;
    if !Arc::ptr_eq(&pd_obj.ctx, &ctx) {
        return Err(Errno::EINVAL);
    }
    let mut init = ibv_qp_init_attr {
        qp_context: attr.qp_context,
        send_cq: attr.send_cq,
        recv_cq: attr.recv_cq,
        srq: attr.srq,
        cap: attr.cap,
        qp_type: attr.qp_type,
        sq_sig_all: attr.sq_sig_all,
    };
    let qp = new_qp(attr.pd, &mut init, send_ops)?;
    attr.cap = init.cap;
    Ok(public(&qp))
}

/// Creates a QP; `send_ops` non-zero makes it an extended one with those operations.
fn new_qp(pd: *mut ibv_pd, init: &mut ibv_qp_init_attr, send_ops: u64) -> Verb<Arc<Qp>> {
    let pd_obj = find::<Pd>(pd)?;
    let kind = qp_type(init.qp_type)?;
    let send_cq = find::<Cq>(init.send_cq)?;
    let recv_cq = find::<Cq>(init.recv_cq)?;
    let srq = if init.srq.is_null() {
        None
    } else {
        Some(find::<Srq>(init.srq)?)
    };
    let ctx = pd_obj.ctx.clone();
    let same_context = |c: &Arc<Context>| Arc::ptr_eq(c, &ctx);
    if !same_context(&send_cq.ctx)
        || !same_context(&recv_cq.ctx)
        || srq.as_ref().is_some_and(|s| !same_context(&s.ctx))
    {
        return Err(Errno::EINVAL);
    }
    let setup = QpInit {
        qp_type: kind,
        send_cq: &send_cq.client,
        recv_cq: &recv_cq.client,
        srq: srq.as_ref().map(|s| &s.client),
        caps: to_caps(&init.cap),
        sq_sig_all: init.sq_sig_all != 0,
    };
    let client = pd_obj
        .client
        .create_qp(&setup)
        .map_err(|e| refused("ibv_create_qp", &e))?;
    init.cap = from_caps(&client.caps());
    let mut ibv = ibv_qp_ex {
        qp_base: ibv_qp {
            context: ctx.ibv(),
            qp_context: init.qp_context,
            pd,
            send_cq: init.send_cq,
            recv_cq: init.recv_cq,
            srq: init.srq,
            handle: client.handle(),
            qp_num: client.qpn(),
            state: IBV_QPS_RESET,
            qp_type: init.qp_type,
            ..ibv_qp::default()
        },
        ..ibv_qp_ex::default()
    };
    if send_ops != 0 {
        crate::ops::set_qp_ex_ops(&mut ibv);
    }
    let handle = client.handle();
    pd_obj.users.add();
    send_cq.users.add();
    recv_cq.users.add();
    if let Some(s) = &srq {
        s.users.add();
    }
    let qp = publish(Qp {
        ibv: UnsafeCell::new(ibv),
        magic: Qp::MAGIC,
        client,
        ctx: ctx.clone(),
        pd: pd_obj,
        send_cq,
        recv_cq,
        srq,
        qp_type: init.qp_type,
        sq_sig_all: init.sq_sig_all != 0,
        events: EventCount::default(),
        send_ops,
        builder: Mutex::new(Builder::default()),
        state: AtomicU32::new(IBV_QPS_RESET),
    });
    lock(&ctx.targets).qps.insert(handle, qp.clone());
    Ok(qp)
}

/// An `ibv_ah_attr` as the daemon's address vector, for `verb`. RoCE needs the GRH
/// (`is_global`): without it there is no destination address, which real RoCE devices
/// refuse too.
fn to_av(verb: &str, a: &ibv_ah_attr) -> Verb<AhAttr> {
    if a.is_global == 0 {
        return Err(refused_here(
            verb,
            Errno::EINVAL,
            "the address vector has no GRH (is_global 0): RoCE needs the destination's GID \
             (ibv_*_pingpong: pass -g with a GID index; perftest: -x)",
        ));
    }
    Ok(AhAttr {
        dgid: a.grh.dgid.raw(),
        flow_label: a.grh.flow_label,
        sgid_index: a.grh.sgid_index,
        hop_limit: a.grh.hop_limit,
        traffic_class: a.grh.traffic_class,
        sl: a.sl,
        is_global: true,
        port_num: a.port_num,
    })
}

fn from_av(a: &AhAttr) -> ibv_ah_attr {
    ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ibv_gid::from_raw(a.dgid),
            flow_label: a.flow_label,
            sgid_index: a.sgid_index,
            hop_limit: a.hop_limit,
            traffic_class: a.traffic_class,
        },
        sl: a.sl,
        is_global: u8::from(a.is_global),
        port_num: a.port_num,
        ..ibv_ah_attr::default()
    }
}

/// Attribute bits this library passes to the daemon; alternate paths, path migration,
/// capacity changes and rate limits are not supported.
const MODIFY_MASK: u32 = IBV_QP_STATE
    | IBV_QP_CUR_STATE
    | IBV_QP_EN_SQD_ASYNC_NOTIFY
    | IBV_QP_ACCESS_FLAGS
    | IBV_QP_PKEY_INDEX
    | IBV_QP_PORT
    | IBV_QP_QKEY
    | IBV_QP_AV
    | IBV_QP_PATH_MTU
    | IBV_QP_TIMEOUT
    | IBV_QP_RETRY_CNT
    | IBV_QP_RNR_RETRY
    | IBV_QP_RQ_PSN
    | IBV_QP_MAX_QP_RD_ATOMIC
    | IBV_QP_MIN_RNR_TIMER
    | IBV_QP_SQ_PSN
    | IBV_QP_MAX_DEST_RD_ATOMIC
    | IBV_QP_DEST_QPN;

/// `ibv_modify_qp`.
///
/// # Safety
///
/// `attr` is NULL or readable.
pub(crate) unsafe fn modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> Verb<()> {
    let qp = find::<Qp>(qp)?;
    // Safety: NULL or readable, per the caller.
    let Some(a) = (unsafe { attr.as_ref() }) else {
        return Err(Errno::EINVAL);
    };
    let mask = u32::try_from(mask).map_err(|_| Errno::EINVAL)?;
    if mask & !MODIFY_MASK != 0 {
        return Err(refused_here(
            "ibv_modify_qp",
            Errno::EOPNOTSUPP,
            &format!(
                "attribute mask bits {:#x} are not supported (alternate paths, path \
                 migration, capacity changes, rate limits)",
                mask & !MODIFY_MASK
            ),
        ));
    }
    if mask & IBV_QP_PORT != 0 && a.port_num != 1 {
        return Err(refused_here(
            "ibv_modify_qp",
            Errno::EINVAL,
            &format!("port {} does not exist: the device has port 1", a.port_num),
        ));
    }
    let ah_attr = if mask & IBV_QP_AV != 0 {
        to_av("ibv_modify_qp", &a.ah_attr)?
    } else {
        AhAttr::default()
    };
    let wire = QpAttr {
        qp_state: a.qp_state,
        cur_qp_state: a.cur_qp_state,
        path_mtu: a.path_mtu,
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: a.qp_access_flags,
        ah_attr,
        pkey_index: a.pkey_index,
        en_sqd_async_notify: a.en_sqd_async_notify != 0,
        sq_draining: false,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        port_num: a.port_num,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
    };
    qp.client
        .modify(&wire, client::AttrMask(mask))
        .map_err(|e| refused("ibv_modify_qp", &e))?;
    if mask & IBV_QP_STATE != 0 && a.qp_state == IBV_QPS_RESET {
        // The completions of its past life that nobody polled go, as RDMA NICs' providers
        // clean them (mlx5's `mlx5_cq_clean`): a reused QP starts from empty CQs.
        // A broken CQ (overrun) has nothing left to clean: the reset stands either way.
        let qpn = qp.client.qpn();
        for cq in [&qp.send_cq, &qp.recv_cq] {
            let _ = cq.client.purge(qpn);
        }
    }
    if mask & IBV_QP_STATE != 0 {
        // Safety: the QP is live; rdma-core records the new state here the same way.
        unsafe { (*raw(&qp.ibv)).qp_base.state = a.qp_state };
        qp.state.store(a.qp_state, Ordering::Release);
    }
    Ok(())
}

/// `ibv_query_qp`: every attribute (whatever the mask), and the creation attributes.
///
/// # Safety
///
/// `attr` and `init_attr` are NULL or valid for writing.
pub(crate) unsafe fn query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    _mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> Verb<()> {
    let qp = find::<Qp>(qp)?;
    if attr.is_null() || init_attr.is_null() {
        return Err(Errno::EINVAL);
    }
    let a = qp.client.query().map_err(|e| errno(&e))?;
    let cap = from_caps(&qp.client.caps());
    let ah_attr = if qp.qp_type == IBV_QPT_UD {
        ibv_ah_attr::default()
    } else {
        from_av(&a.ah_attr)
    };
    let value = ibv_qp_attr {
        qp_state: a.qp_state,
        cur_qp_state: a.cur_qp_state,
        path_mtu: a.path_mtu,
        path_mig_state: IBV_MIG_MIGRATED,
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: a.qp_access_flags,
        cap,
        ah_attr,
        pkey_index: a.pkey_index,
        en_sqd_async_notify: u8::from(a.en_sqd_async_notify),
        sq_draining: u8::from(a.sq_draining),
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        port_num: a.port_num,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        ..ibv_qp_attr::default()
    };
    // Safety: the QP is live; these are the application's own values from creation.
    let ibv = unsafe { &(*raw(&qp.ibv)).qp_base };
    let init = ibv_qp_init_attr {
        qp_context: ibv.qp_context,
        send_cq: ibv.send_cq,
        recv_cq: ibv.recv_cq,
        srq: ibv.srq,
        cap,
        qp_type: qp.qp_type,
        sq_sig_all: c_int::from(qp.sq_sig_all),
    };
    // Safety: the QP is live; rdma-core records the state it reads here too.
    unsafe { (*raw(&qp.ibv)).qp_base.state = a.qp_state };
    qp.state.store(a.qp_state, Ordering::Release);
    // Safety: checked non-NULL; writable per the caller.
    unsafe { attr.write(value) };
    // Safety: as above.
    unsafe { init_attr.write(init) };
    Ok(())
}

/// `ibv_destroy_qp`: waits until every asynchronous event reported on it has been
/// acknowledged.
pub(crate) fn destroy_qp(qp: *mut ibv_qp) -> Verb<()> {
    let found = find::<Qp>(qp)?;
    found.events.wait_all_acked();
    drop(found);
    let qp = retire::<Qp>(qp)?;
    lock(&qp.ctx.targets).qps.remove(&qp.client.handle());
    qp.pd.users.remove();
    qp.send_cq.users.remove();
    qp.recv_cq.users.remove();
    if let Some(s) = &qp.srq {
        s.users.remove();
    }
    drop(qp);
    Ok(())
}

/// `ibv_attach_mcast`: the UD QP joins the multicast group `gid` (an IPv4 group in its
/// mapped form, `::ffff:224.0.0.0/4`, or an IPv6 one, `ff00::/8`). The daemon checks it as
/// the kernel does (`EINVAL` for another QP type or a GID that is not multicast, success
/// for a group joined already, `ENOMEM` past the device's `max_mcast_*` limits). The LID
/// has no meaning on RoCE and is not looked at, as in rxe.
///
/// # Safety
///
/// `gid` is NULL or valid for reading.
pub(crate) unsafe fn attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, _lid: u16) -> Verb<()> {
    let qp = find::<Qp>(qp)?;
    // Safety: NULL or valid (caller).
    let gid = unsafe { gid.as_ref() }.ok_or(Errno(libc::EINVAL))?.raw();
    qp.client
        .attach_mcast(gid)
        .map_err(|e| refused("ibv_attach_mcast", &e))
}

/// `ibv_detach_mcast`: `EINVAL` for a group the QP is not attached to.
///
/// # Safety
///
/// `gid` is NULL or valid for reading.
pub(crate) unsafe fn detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, _lid: u16) -> Verb<()> {
    let qp = find::<Qp>(qp)?;
    // Safety: NULL or valid (caller).
    let gid = unsafe { gid.as_ref() }.ok_or(Errno(libc::EINVAL))?.raw();
    qp.client
        .detach_mcast(gid)
        .map_err(|e| refused("ibv_detach_mcast", &e))
}

/// `ibv_qp_to_qp_ex`: the extended QP of a QP created with
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`, NULL for any other, as rdma-core answers.
pub(crate) fn qp_to_qp_ex(qp: *mut ibv_qp) -> Verb<*mut ibv_qp_ex> {
    let qp = find::<Qp>(qp)?;
    if qp.send_ops == 0 {
        return Ok(std::ptr::null_mut());
    }
    Ok(raw(&qp.ibv))
}

/// The send flags this library knows.
const SEND_FLAGS: u32 = IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE;

/// One `ibv_send_wr` as a shared-memory work request.
///
/// # Safety
///
/// `w`'s scatter/gather list is readable for `num_sge` elements, and with
/// `IBV_SEND_INLINE` each element's bytes are readable; a UD request's `ah` is an address
/// handle of this library.
unsafe fn encode_send(qp: &Qp, w: &ibv_send_wr) -> Verb<SendWqe> {
    let num_sge = usize::try_from(w.num_sge).map_err(|_| Errno::EINVAL)?;
    if w.send_flags & !SEND_FLAGS != 0 {
        return Err(Errno::EINVAL);
    }
    let mut out = SendWqe::new_zeroed();
    out.wr_id = w.wr_id;
    out.opcode = w.opcode;
    out.send_flags = w.send_flags;
    out.imm_data = w.imm_data;
    let read_or_atomic = match w.opcode {
        IBV_WR_RDMA_WRITE | IBV_WR_RDMA_WRITE_WITH_IMM | IBV_WR_RDMA_READ => {
            // Safety: the `rdma` member is the one meant for these opcodes; it is plain
            // integers.
            let rdma = unsafe { w.wr.rdma };
            out.remote_addr = rdma.remote_addr;
            out.rkey = rdma.rkey;
            w.opcode == IBV_WR_RDMA_READ
        }
        IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD => {
            // Safety: the `atomic` member is the one meant for these opcodes.
            let atomic = unsafe { w.wr.atomic };
            out.remote_addr = atomic.remote_addr;
            out.rkey = atomic.rkey;
            out.compare_add = atomic.compare_add;
            out.swap = atomic.swap;
            true
        }
        IBV_WR_SEND | IBV_WR_SEND_WITH_IMM | IBV_WR_SEND_WITH_INV => false,
        // Memory windows, local invalidation, TSO, driver and atomic-write operations are
        // not supported.
        _ => return Err(Errno::EINVAL),
    };
    if qp.qp_type == IBV_QPT_UD {
        if !matches!(w.opcode, IBV_WR_SEND | IBV_WR_SEND_WITH_IMM) {
            return Err(Errno::EINVAL);
        }
        // Safety: the `ud` member is the one meant on a UD QP.
        let ud = unsafe { w.wr.ud };
        // Safety: the caller guarantees `ah` is an address handle of this library.
        let ah = unsafe { trusted::<Ah>(ud.ah) }?;
        out.ah = ah.client.handle();
        out.remote_qpn = ud.remote_qpn;
        out.remote_qkey = ud.remote_qkey;
    }
    // Safety: readable for `num_sge` elements (caller).
    let list = unsafe { sges(w.sg_list, num_sge) }?;
    if w.send_flags & IBV_SEND_INLINE != 0 && !read_or_atomic {
        let mut at = 0usize;
        for s in list {
            let len = s.length as usize;
            let end = at.checked_add(len).ok_or(Errno::EINVAL)?;
            if end > MAX_INLINE || end > qp.client.caps().max_inline_data as usize {
                return Err(Errno::EINVAL);
            }
            if len > 0 {
                // Safety: with IBV_SEND_INLINE the caller guarantees each element's bytes
                // are readable; they are copied now, as verbs allows the buffer to be
                // reused as soon as the post returns.
                let bytes = unsafe { std::slice::from_raw_parts(s.addr as *const u8, len) };
                out.data[at..end].copy_from_slice(bytes);
            }
            at = end;
        }
        out.num_sge = at as u32;
    } else {
        out.send_flags &= !IBV_SEND_INLINE;
        out.num_sge = list.len() as u32;
        for (i, s) in list.iter().enumerate() {
            out.set_sge(i, *s);
        }
    }
    Ok(out)
}

/// `ibv_post_send` (through `ibv_context_ops`).
///
/// # Safety
///
/// `qp` is a QP of this library; `wr` a valid list (see [`encode_send`]); `bad_wr` NULL
/// or writable.
pub(crate) unsafe fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> Verb<()> {
    // Safety: forwarded from the caller.
    let qp = unsafe { trusted::<Qp>(qp) }
        .and_then(|qp| qp.may_send().map(|()| qp))
        .inspect_err(|_| {
            // Safety: as above.
            unsafe { set_bad(bad_wr, wr) }
        })?;
    let mut cur = wr;
    while !cur.is_null() {
        // Safety: a node of the caller's valid list.
        let w = unsafe { &*cur };
        // Safety: forwarded from the caller.
        let posted = unsafe { encode_send(qp, w) }.and_then(|wqe| {
            qp.client
                .post_send_wqes(std::slice::from_ref(&wqe))
                .map_err(|(_, e)| post_errno(&e))
        });
        if let Err(e) = posted {
            // Safety: writable per the caller.
            unsafe { set_bad(bad_wr, cur) };
            return Err(e);
        }
        cur = w.next;
    }
    Ok(())
}

/// `ibv_post_recv` (through `ibv_context_ops`).
///
/// # Safety
///
/// `qp` is a QP of this library; `wr` a valid list; `bad_wr` NULL or writable.
pub(crate) unsafe fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> Verb<()> {
    // Safety: forwarded from the caller.
    let qp = unsafe { trusted::<Qp>(qp) }
        .and_then(|qp| qp.may_receive().map(|()| qp))
        .inspect_err(|_| {
            // Safety: as above.
            unsafe { set_bad(bad_wr, wr) }
        })?;
    // Safety: forwarded from the caller.
    unsafe { post_receives(wr, bad_wr, |wrs| qp.client.post_recv(wrs)) }
}

// Address handles.

/// `ibv_create_ah`.
///
/// # Safety
///
/// `attr` is NULL or readable.
pub(crate) unsafe fn create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> Verb<*mut ibv_ah> {
    let pd_obj = find::<Pd>(pd)?;
    // Safety: NULL or readable, per the caller.
    let Some(attr) = (unsafe { attr.as_ref() }) else {
        return Err(Errno::EINVAL);
    };
    let client = pd_obj
        .client
        .create_ah(&to_av("ibv_create_ah", attr)?)
        .map_err(|e| refused("ibv_create_ah", &e))?;
    let ibv = ibv_ah {
        context: pd_obj.ctx.ibv(),
        pd,
        handle: client.handle(),
    };
    pd_obj.users.add();
    let ah = publish(Ah {
        ibv: UnsafeCell::new(ibv),
        magic: Ah::MAGIC,
        client,
        pd: pd_obj,
    });
    Ok(public(&ah))
}

/// `ibv_destroy_ah`.
pub(crate) fn destroy_ah(ah: *mut ibv_ah) -> Verb<()> {
    let ah = retire::<Ah>(ah)?;
    ah.pd.users.remove();
    drop(ah);
    Ok(())
}

/// IPv4 header fields inside the 40-byte GRH area of a RoCE v2 UD receive: rxe (and so
/// xroce) places the 20-byte IPv4 header in its last 20 bytes.
const IPV4_AT: usize = 20;

/// Where a reply to a UD message goes, read from the network header the message arrived
/// with (the 40-byte GRH area of its receive buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ReplyRoute {
    /// The sender's GID (the reply's destination).
    peer: [u8; 16],
    /// The GID the message was sent to (the reply's source).
    local: [u8; 16],
    traffic_class: u8,
    hop_limit: u8,
    flow_label: u32,
}

/// The one's-complement sum of an IPv4 header, folded and inverted: 0 for a header whose
/// checksum field is right (RFC 791).
fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl ReplyRoute {
    /// RoCE v2 over IPv4 (a 20-byte IPv4 header with a valid checksum in the last 20
    /// bytes; GIDs IPv4-mapped), or over IPv6 (the 40-byte IPv6 header); `None` for
    /// anything else. The checksum tells the two apart when an IPv6 source address
    /// happens to hold 0x45 where an IPv4 header would start, as rdma-core does.
    fn from_grh(grh: &[u8; 40]) -> Option<ReplyRoute> {
        let v4 = &grh[IPV4_AT..];
        if v4[0] == 0x45 && ipv4_checksum(v4) == 0 {
            let mapped = |a: &[u8]| {
                let mut g = [0u8; 16];
                g[10] = 0xff;
                g[11] = 0xff;
                g[12..].copy_from_slice(a);
                g
            };
            return Some(ReplyRoute {
                peer: mapped(&v4[12..16]),
                local: mapped(&v4[16..20]),
                traffic_class: v4[1],
                hop_limit: v4[8],
                flow_label: 0,
            });
        }
        if grh[0] >> 4 == 6 {
            let head = u32::from_be_bytes([grh[0], grh[1], grh[2], grh[3]]);
            let mut peer = [0u8; 16];
            peer.copy_from_slice(&grh[8..24]);
            let mut local = [0u8; 16];
            local.copy_from_slice(&grh[24..40]);
            return Some(ReplyRoute {
                peer,
                local,
                traffic_class: (head >> 20) as u8,
                hop_limit: grh[7],
                flow_label: head & 0xf_ffff,
            });
        }
        None
    }
}

/// `ibv_init_ah_from_wc`: the address vector that answers the sender of a UD receive.
/// With a GRH the reply goes to the packet's source address, from the local GID the
/// packet was sent to, with its traffic class and hop limit; as rdma-core does.
///
/// # Safety
///
/// `wc` is NULL or readable; `grh` is NULL or readable for 40 bytes; `ah_attr` is NULL or
/// writable.
pub(crate) unsafe fn init_ah_from_wc(
    context: *mut ibv_context,
    port_num: u8,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    ah_attr: *mut ibv_ah_attr,
) -> Verb<c_int> {
    let ctx = self::context(context)?;
    // Safety: NULL or readable, per the caller.
    let Some(wc) = (unsafe { wc.as_ref() }) else {
        return Err(Errno::EINVAL);
    };
    if ah_attr.is_null() {
        return Err(Errno::EINVAL);
    }
    let mut out = ibv_ah_attr {
        dlid: wc.slid,
        sl: wc.sl,
        src_path_bits: wc.dlid_path_bits,
        port_num,
        ..ibv_ah_attr::default()
    };
    if wc.wc_flags & IBV_WC_GRH != 0 {
        if grh.is_null() {
            return Err(Errno::EINVAL);
        }
        let mut bytes = [0u8; 40];
        // Safety: readable for 40 bytes, per the caller.
        unsafe { std::ptr::copy_nonoverlapping(grh.cast::<u8>(), bytes.as_mut_ptr(), 40) };
        let route = ReplyRoute::from_grh(&bytes).ok_or(Errno::EINVAL)?;
        let port = ctx.client.query_port().map_err(|e| errno(&e))?;
        let sgid_index = port
            .gids
            .iter()
            .position(|g| *g == route.local)
            .ok_or(Errno(libc::ENOENT))?;
        out.is_global = 1;
        out.grh = ibv_global_route {
            dgid: ibv_gid::from_raw(route.peer),
            flow_label: route.flow_label,
            sgid_index: u8::try_from(sgid_index).map_err(|_| Errno(libc::ENOENT))?,
            hop_limit: route.hop_limit,
            traffic_class: route.traffic_class,
        };
    }
    // Safety: checked non-NULL; writable per the caller.
    unsafe { ah_attr.write(out) };
    Ok(0)
}

/// `ibv_create_ah_from_wc`.
///
/// # Safety
///
/// As [`init_ah_from_wc`].
pub(crate) unsafe fn create_ah_from_wc(
    pd: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    port_num: u8,
) -> Verb<*mut ibv_ah> {
    let pd_obj = find::<Pd>(pd)?;
    let mut attr = ibv_ah_attr::default();
    // Safety: forwarded from the caller; `attr` is a local.
    unsafe { init_ah_from_wc(pd_obj.ctx.ibv(), port_num, wc, grh, &mut attr) }?;
    // Safety: `attr` is a local, readable.
    unsafe { create_ah(pd, &mut attr) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reply_route_comes_from_the_ipv4_header_in_the_grh_area() {
        let mut grh = [0u8; 40];
        // IPv4: version 4, IHL 5, TOS 0x28, TTL 63, UDP, 10.77.0.2 -> 10.77.0.1.
        grh[20..40].copy_from_slice(&[
            0x45, 0x28, 0x00, 0x54, 0x12, 0x34, 0x40, 0x00, 63, 17, 0x00, 0x00, 10, 77, 0, 2, 10,
            77, 0, 1,
        ]);
        assert_eq!(
            ReplyRoute::from_grh(&grh),
            None,
            "a wrong checksum is no IPv4 header"
        );
        let checksum = ipv4_checksum(&grh[20..40]);
        grh[30..32].copy_from_slice(&checksum.to_be_bytes());
        assert_eq!(ipv4_checksum(&grh[20..40]), 0);
        let r = ReplyRoute::from_grh(&grh).unwrap();
        let mapped = |last: u8| {
            let mut g = [0u8; 16];
            g[10..].copy_from_slice(&[0xff, 0xff, 10, 77, 0, last]);
            g
        };
        assert_eq!(
            r,
            ReplyRoute {
                peer: mapped(2),
                local: mapped(1),
                traffic_class: 0x28,
                hop_limit: 63,
                flow_label: 0,
            }
        );
    }

    #[test]
    fn the_reply_route_comes_from_the_ipv6_header() {
        let mut grh = [0u8; 40];
        // Version 6, traffic class 0xb8, flow label 0x12345, hop limit 64.
        grh[..8].copy_from_slice(&[0x6b, 0x81, 0x23, 0x45, 0x00, 0x20, 17, 64]);
        grh[8..24].copy_from_slice(&[0xfd, 0, 0, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        grh[24..40].copy_from_slice(&[0xfd, 0, 0, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        // A source address byte where an IPv4 header would start does not fool it.
        grh[20] = 0x45;
        let r = ReplyRoute::from_grh(&grh).unwrap();
        assert_eq!((r.peer[12], r.peer[15], r.local[15]), (0x45, 2, 1));
        assert_eq!(
            (r.traffic_class, r.hop_limit, r.flow_label),
            (0xb8, 64, 0x12345)
        );
    }

    #[test]
    fn a_grh_area_with_no_known_header_gives_no_route() {
        assert_eq!(ReplyRoute::from_grh(&[0u8; 40]), None);
        let mut grh = [0u8; 40];
        grh[20] = 0x46; // IPv4 with options: not what RoCE v2 sends.
        assert_eq!(ReplyRoute::from_grh(&grh), None);
    }

    #[test]
    fn address_vectors_need_the_grh_on_roce() {
        let mut a = ibv_ah_attr::default();
        assert_eq!(to_av("ibv_create_ah", &a), Err(Errno::EINVAL));
        a.is_global = 1;
        a.grh.hop_limit = 64;
        a.grh.dgid = ibv_gid::from_raw([7; 16]);
        let av = to_av("ibv_create_ah", &a).unwrap();
        assert_eq!((av.dgid, av.hop_limit, av.is_global), ([7; 16], 64, true));
        assert_eq!(from_av(&av).grh.dgid.raw(), [7; 16]);
    }
}
