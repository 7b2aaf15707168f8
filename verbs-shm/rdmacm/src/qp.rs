//! The verbs objects of an id: its QP, the CQs and completion channels made for it, its
//! SRQ, and the QP attributes the daemon computes.
//!
//! As cma.c: `rdma_create_qp` makes the CQs the application did not give (each with its
//! own completion channel, and the id as `cq_context`, which rdma_verbs.h's
//! `rdma_get_send_comp`/`rdma_get_recv_comp` assert), creates the QP in the id's PD, and
//! moves it to INIT with the daemon's attributes; a UD QP goes on to RTR and RTS at once
//! (`sq_psn` 0, its Q_Key the daemon's `RDMA_UDP_QKEY`). All of it goes through the
//! process's libibverbs. XRC needs an XRC domain, which xroce does not have: `EOPNOTSUPP`.

use std::ffi::c_int;

use verbs_abi::{
    IBV_QP_INIT_ATTR_PD, IBV_QP_SQ_PSN, IBV_QP_STATE, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS,
    IBV_QPT_UD, IBV_QPT_XRC_RECV, IBV_SRQ_INIT_ATTR_PD, IBV_SRQ_INIT_ATTR_TYPE, IBV_SRQT_BASIC,
    IBV_SRQT_XRC, ibv_ah_attr, ibv_gid, ibv_global_route, ibv_pd, ibv_qp_attr, ibv_qp_init_attr,
    ibv_qp_init_attr_ex, ibv_srq_init_attr, ibv_srq_init_attr_ex,
};
use verbs_shm::cm::{CmReply, CmRequest};
use verbs_shm::protocol::QpAttr;

use crate::cma::lock;
use crate::ffi::{Cm, Errno};
use crate::id::IdPrivate;

/// A daemon's QP attributes as `ibv_qp_attr` (cma.c's `ibv_copy_qp_attr_from_kern`: every
/// field the daemon does not set is 0).
pub(crate) fn to_ibv(attr: &QpAttr) -> ibv_qp_attr {
    let av = &attr.ah_attr;
    ibv_qp_attr {
        qp_state: attr.qp_state,
        cur_qp_state: attr.cur_qp_state,
        path_mtu: attr.path_mtu,
        qkey: attr.qkey,
        rq_psn: attr.rq_psn,
        sq_psn: attr.sq_psn,
        dest_qp_num: attr.dest_qp_num,
        qp_access_flags: attr.qp_access_flags,
        ah_attr: ibv_ah_attr {
            grh: ibv_global_route {
                dgid: ibv_gid::from_raw(av.dgid),
                flow_label: av.flow_label,
                sgid_index: av.sgid_index,
                hop_limit: av.hop_limit,
                traffic_class: av.traffic_class,
            },
            sl: av.sl,
            is_global: u8::from(av.is_global),
            port_num: av.port_num,
            ..ibv_ah_attr::default()
        },
        pkey_index: attr.pkey_index,
        en_sqd_async_notify: u8::from(attr.en_sqd_async_notify),
        sq_draining: u8::from(attr.sq_draining),
        max_rd_atomic: attr.max_rd_atomic,
        max_dest_rd_atomic: attr.max_dest_rd_atomic,
        min_rnr_timer: attr.min_rnr_timer,
        port_num: attr.port_num,
        timeout: attr.timeout,
        retry_cnt: attr.retry_cnt,
        rnr_retry: attr.rnr_retry,
        ..ibv_qp_attr::default()
    }
}

/// `rdma_init_qp_attr`: the attributes and mask for moving the id's QP to `state`.
pub(crate) fn init_qp_attr(id: &IdPrivate, state: u32) -> Cm<(ibv_qp_attr, c_int)> {
    match id.ask(|id| CmRequest::InitQpAttr { id, state })? {
        CmReply::QpAttr { attr, mask } => Ok((
            to_ibv(&attr),
            c_int::try_from(mask).map_err(|_| Errno(libc::EPROTO))?,
        )),
        _ => Err(Errno(libc::EPROTO)),
    }
}

/// Destroys the CQs and completion channels the library made for the id (cma.c's
/// `ucma_destroy_cqs`).
pub(crate) fn destroy_cqs(id: &IdPrivate) {
    let Ok(verbs) = id.cma.verbs() else { return };
    let destroy_cq = |cq| {
        // Safety: a CQ this library made for the id, forgotten right after.
        unsafe { (verbs.destroy_cq)(cq) };
    };
    let destroy_channel = |channel| {
        // Safety: a completion channel this library made for the id, forgotten right after.
        unsafe { (verbs.destroy_comp_channel)(channel) };
    };
    id.with_c(|c| {
        for cq in [c.recv_cq, c.send_cq]
            .into_iter()
            .enumerate()
            .filter(|&(i, cq)| !cq.is_null() && (i == 0 || cq != c.recv_cq))
            .map(|(_, cq)| cq)
        {
            destroy_cq(cq);
        }
        for channel in [c.recv_cq_channel, c.send_cq_channel]
            .into_iter()
            .enumerate()
            .filter(|&(i, ch)| !ch.is_null() && (i == 0 || ch != c.recv_cq_channel))
            .map(|(_, ch)| ch)
        {
            destroy_channel(channel);
        }
        c.recv_cq = std::ptr::null_mut();
        c.send_cq = std::ptr::null_mut();
        c.recv_cq_channel = std::ptr::null_mut();
        c.send_cq_channel = std::ptr::null_mut();
    });
}

/// Makes a receive CQ of `recv_size` and a send CQ of `send_size` entries (0: none), each
/// with its own completion channel, `cq_context` the id (cma.c's `ucma_create_cqs`).
fn create_cqs(id: &IdPrivate, send_size: u32, recv_size: u32) -> Cm<()> {
    let verbs = id.cma.verbs()?;
    let context = id.with_c(|c| c.verbs);
    let cq_context = id.as_c().cast();
    let make = |size: u32| -> Cm<(*mut _, *mut _)> {
        // Safety: the id's device context, of the loaded libibverbs.
        let channel = unsafe { (verbs.create_comp_channel)(context) };
        if channel.is_null() {
            return Err(Errno::last());
        }
        let entries = c_int::try_from(size).map_err(|_| Errno::EINVAL)?;
        // Safety: as above; the channel was made on the same context.
        let cq = unsafe { (verbs.create_cq)(context, entries, cq_context, channel, 0) };
        if cq.is_null() {
            let errno = Errno::last();
            // Safety: the channel made just above, used by nothing.
            unsafe { (verbs.destroy_comp_channel)(channel) };
            return Err(errno);
        }
        Ok((channel, cq))
    };
    let made = (|| {
        if recv_size > 0 {
            let (channel, cq) = make(recv_size)?;
            id.with_c(|c| {
                c.recv_cq_channel = channel;
                c.recv_cq = cq;
            });
        }
        if send_size > 0 {
            let (channel, cq) = make(send_size)?;
            id.with_c(|c| {
                c.send_cq_channel = channel;
                c.send_cq = cq;
            });
        }
        Ok(())
    })();
    if made.is_err() {
        destroy_cqs(id);
    }
    made
}

/// `rdma_create_qp_ex`.
///
/// # Safety
///
/// `attr` is a valid `ibv_qp_init_attr_ex` whose pointers are NULL or objects of
/// libibverbs.
pub(crate) unsafe fn create_qp_ex(id: &IdPrivate, attr: *mut ibv_qp_init_attr_ex) -> Cm<()> {
    // Safety: valid (caller).
    let a = unsafe { attr.as_mut() }.ok_or(Errno::EINVAL)?;
    let (context, id_pd, has_qp, id_send_cq, id_recv_cq, id_srq) =
        id.with_c(|c| (c.verbs, c.pd, !c.qp.is_null(), c.send_cq, c.recv_cq, c.srq));
    if has_qp || context.is_null() {
        return Err(Errno::EINVAL);
    }
    let qp_type = lock(&id.state).qp_type;
    if qp_type == IBV_QPT_XRC_RECV {
        return Err(Errno::EOPNOTSUPP);
    }
    if a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 || a.pd.is_null() {
        a.comp_mask |= IBV_QP_INIT_ATTR_PD;
        a.pd = id_pd;
    } else if pd_context(a.pd) != context {
        return Err(Errno::EINVAL);
    }
    if (!id_recv_cq.is_null() && !a.recv_cq.is_null() && id_recv_cq != a.recv_cq)
        || (!id_send_cq.is_null() && !a.send_cq.is_null() && id_send_cq != a.send_cq)
    {
        return Err(Errno::EINVAL);
    }
    let send_size = if a.send_cq.is_null() && id_send_cq.is_null() {
        a.cap.max_send_wr
    } else {
        0
    };
    let recv_size = if a.recv_cq.is_null() && id_recv_cq.is_null() {
        a.cap.max_recv_wr
    } else {
        0
    };
    create_cqs(id, send_size, recv_size)?;
    id.with_c(|c| {
        if a.send_cq.is_null() {
            a.send_cq = c.send_cq;
        }
        if a.recv_cq.is_null() {
            a.recv_cq = c.recv_cq;
        }
    });
    if !id_srq.is_null() && a.srq.is_null() {
        a.srq = id_srq;
    }
    let verbs = id.cma.verbs()?;
    // Safety: the id's context; `attr` valid with libibverbs objects (caller and above).
    let qp = match unsafe { verbs.create_qp_ex(context, attr) } {
        Ok(qp) => qp,
        Err(e) => {
            destroy_cqs(id);
            return Err(e);
        }
    };
    id.with_c(|c| c.qp = qp);
    let initialised = if qp_type == IBV_QPT_UD {
        init_ud_qp(id)
    } else {
        init_conn_qp(id)
    };
    if let Err(e) = initialised {
        id.with_c(|c| c.qp = std::ptr::null_mut());
        // Safety: the QP made just above, never handed out.
        unsafe { (verbs.destroy_qp)(qp) };
        destroy_cqs(id);
        return Err(e);
    }
    // Safety: a live QP of libibverbs.
    let qp_pd = unsafe { (*qp).pd };
    id.with_c(|c| c.pd = qp_pd);
    Ok(())
}

/// The context of an application's PD (`pd->context`).
fn pd_context(pd: *mut ibv_pd) -> *mut verbs_abi::ibv_context {
    // Safety: a PD of libibverbs (the C contract of rdma_create_qp); its first field is
    // the context.
    unsafe { (*pd).context }
}

/// A connected QP to INIT with the daemon's attributes.
fn init_conn_qp(id: &IdPrivate) -> Cm<()> {
    let (attr, mask) = init_qp_attr(id, IBV_QPS_INIT)?;
    let qp = id.with_c(|c| c.qp);
    // Safety: the id's QP, made just before.
    unsafe { id.cma.verbs()?.modify(qp, &attr, mask) }
}

/// A UD QP to INIT with the daemon's attributes, then RTR, then RTS with `sq_psn` 0.
fn init_ud_qp(id: &IdPrivate) -> Cm<()> {
    let verbs = id.cma.verbs()?;
    let qp = id.with_c(|c| c.qp);
    let (mut attr, mask) = init_qp_attr(id, IBV_QPS_INIT)?;
    // Safety: the id's QP, made just before.
    unsafe { verbs.modify(qp, &attr, mask) }?;
    attr.qp_state = IBV_QPS_RTR;
    // Safety: as above.
    unsafe { verbs.modify(qp, &attr, IBV_QP_STATE as c_int) }?;
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = 0;
    // Safety: as above.
    unsafe { verbs.modify(qp, &attr, (IBV_QP_STATE | IBV_QP_SQ_PSN) as c_int) }
}

/// `rdma_create_qp`: [`create_qp_ex`] with `pd` (NULL: the id's), the attributes written
/// back (with the CQs used).
///
/// # Safety
///
/// `attr` is a valid `ibv_qp_init_attr` whose pointers are NULL or libibverbs objects;
/// `pd` is NULL or a libibverbs PD.
pub(crate) unsafe fn create_qp(
    id: &IdPrivate,
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> Cm<()> {
    // Safety: valid (caller).
    let plain = unsafe { attr.as_mut() }.ok_or(Errno::EINVAL)?;
    let mut ex = ibv_qp_init_attr_ex {
        qp_context: plain.qp_context,
        send_cq: plain.send_cq,
        recv_cq: plain.recv_cq,
        srq: plain.srq,
        cap: plain.cap,
        qp_type: plain.qp_type,
        sq_sig_all: plain.sq_sig_all,
        comp_mask: IBV_QP_INIT_ATTR_PD,
        pd: if pd.is_null() {
            id.with_c(|c| c.pd)
        } else {
            pd
        },
        ..Default::default()
    };
    // Safety: a local attribute structure; the pointers are the caller's.
    let result = unsafe { create_qp_ex(id, &mut ex) };
    plain.send_cq = ex.send_cq;
    plain.recv_cq = ex.recv_cq;
    plain.srq = ex.srq;
    plain.cap = ex.cap;
    result
}

/// `rdma_destroy_qp`: the QP and the CQs the library made for it.
pub(crate) fn destroy_qp(id: &IdPrivate) -> Cm<()> {
    let qp = id.with_c(|c| std::mem::replace(&mut c.qp, std::ptr::null_mut()));
    if !qp.is_null() {
        // Safety: the QP `rdma_create_qp` made for the id, forgotten above.
        unsafe { (id.cma.verbs()?.destroy_qp)(qp) };
    }
    destroy_cqs(id);
    Ok(())
}

/// `rdma_create_srq_ex`: basic SRQs in the id's PD (or the one given).
///
/// # Safety
///
/// `attr` is a valid `ibv_srq_init_attr_ex` whose pointers are NULL or libibverbs objects.
pub(crate) unsafe fn create_srq_ex(id: &IdPrivate, attr: *mut ibv_srq_init_attr_ex) -> Cm<()> {
    // Safety: valid (caller).
    let a = unsafe { attr.as_mut() }.ok_or(Errno::EINVAL)?;
    if a.comp_mask & IBV_SRQ_INIT_ATTR_TYPE == 0 {
        return Err(Errno::EINVAL);
    }
    let (context, id_pd) = id.with_c(|c| (c.verbs, c.pd));
    if context.is_null() {
        return Err(Errno::EINVAL);
    }
    if a.comp_mask & IBV_SRQ_INIT_ATTR_PD == 0 || a.pd.is_null() {
        a.pd = id_pd;
        a.comp_mask |= IBV_SRQ_INIT_ATTR_PD;
    }
    if a.srq_type == IBV_SRQT_XRC {
        return Err(Errno::EOPNOTSUPP);
    }
    // Safety: the id's context; `attr` valid (caller).
    let srq = unsafe { id.cma.verbs()?.create_srq_ex(context, attr) }?;
    let pd = a.pd;
    id.with_c(|c| {
        if c.pd.is_null() {
            c.pd = pd;
        }
        c.srq = srq;
    });
    Ok(())
}

/// `rdma_create_srq`.
///
/// # Safety
///
/// `attr` is a valid `ibv_srq_init_attr`; `pd` is NULL or a libibverbs PD.
pub(crate) unsafe fn create_srq(
    id: &IdPrivate,
    pd: *mut ibv_pd,
    attr: *mut ibv_srq_init_attr,
) -> Cm<()> {
    // Safety: valid (caller).
    let plain = unsafe { attr.as_mut() }.ok_or(Errno::EINVAL)?;
    let srq_type = if lock(&id.state).qp_type == IBV_QPT_XRC_RECV {
        IBV_SRQT_XRC
    } else {
        IBV_SRQT_BASIC
    };
    let mut ex = ibv_srq_init_attr_ex {
        srq_context: plain.srq_context,
        attr: plain.attr,
        comp_mask: IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD,
        srq_type,
        pd,
        ..Default::default()
    };
    // Safety: a local attribute structure.
    let result = unsafe { create_srq_ex(id, &mut ex) };
    plain.attr = ex.attr;
    result
}

/// `rdma_destroy_srq`: the SRQ and the CQs the library made for the id.
pub(crate) fn destroy_srq(id: &IdPrivate) -> Cm<()> {
    let srq = id.with_c(|c| std::mem::replace(&mut c.srq, std::ptr::null_mut()));
    if !srq.is_null() {
        // Safety: the SRQ `rdma_create_srq` made for the id, forgotten above.
        unsafe { (id.cma.verbs()?.destroy_srq)(srq) };
    }
    destroy_cqs(id);
    Ok(())
}
