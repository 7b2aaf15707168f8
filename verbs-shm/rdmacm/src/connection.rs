//! Connections: connect, accept, reject, disconnect, and the QP's state changes around
//! them, as cma.c makes them.
//!
//! The daemon runs the CM protocol; the library drives the id's QP (when `rdma_create_qp`
//! made one) with the attributes the daemon computes (`CmRequest::InitQpAttr`): the
//! passive side moves it to RTR and RTS before it accepts (the REP follows), the active
//! side when the REP arrives (`CONNECT_RESPONSE`), before it tells the daemon to send the
//! RTU (`CmRequest::Establish`) and reports `ESTABLISHED`. A rejection or a disconnect
//! moves the QP to ERR. An id without a QP (an external one, as rping's `-q`) does the same
//! with `rdma_init_qp_attr` and `rdma_establish` itself.
//!
//! Synchronous ids (made with a NULL channel) wait for the event their call leads to and
//! keep it in `id->event` until the next call ([`complete`], cma.c's `ucma_complete`).

use std::ffi::c_void;

use verbs_abi::{IBV_QP_STATE, IBV_QPS_ERR, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPT_UD};
use verbs_shm::cm::{CmConnParam, CmRequest};

use crate::abi::{
    RDMA_CM_EVENT_REJECTED, RDMA_MAX_INIT_DEPTH, RDMA_MAX_RESP_RES, RDMA_PS_TCP, rdma_conn_param,
};
use crate::cma::lock;
use crate::event;
use crate::ffi::{Cm, Errno};
use crate::id::IdPrivate;
use crate::qp;

/// The most private data a connect or an accept carries (a REP's).
const MAX_PRIVATE_DATA: usize = verbs_shm::cm::MAX_PRIVATE_DATA;

/// cma.c's `ucma_complete`: a synchronous id acknowledges its previous event, waits for
/// the next and keeps it in `id->event`; its status becomes the call's error
/// (`ECONNREFUSED` for a rejection).
pub(crate) fn complete(id: &IdPrivate) -> Cm<()> {
    let channel = {
        let state = lock(&id.state);
        if !state.sync {
            return Ok(());
        }
        state.channel.clone()
    };
    let previous = id.with_c(|c| std::mem::replace(&mut c.event, std::ptr::null_mut()));
    if !previous.is_null() {
        event::ack(id.cma, previous)?;
    }
    let next = event::get(id.cma, &channel)?;
    id.with_c(|c| c.event = next);
    // Safety: an event just returned by `event::get`, live until acknowledged.
    let event = unsafe { &*next };
    let (kind, status) = (event.event, event.status);
    match status {
        0 => Ok(()),
        _ if kind == RDMA_CM_EVENT_REJECTED => Err(Errno(libc::ECONNREFUSED)),
        s if s < 0 => Err(Errno(-s)),
        s => Err(Errno(s)),
    }
}

/// Reads the application's connection parameters.
///
/// # Safety
///
/// `param` is NULL or a valid `rdma_conn_param` whose `private_data` holds
/// `private_data_len` bytes.
unsafe fn read_param(param: *const rdma_conn_param) -> Option<(rdma_conn_param, Vec<u8>)> {
    // Safety: NULL or valid (caller).
    let p = unsafe { param.as_ref() }?;
    let private = if p.private_data.is_null() || p.private_data_len == 0 {
        Vec::new()
    } else {
        // Safety: `private_data_len` readable bytes (caller).
        unsafe {
            std::slice::from_raw_parts(p.private_data.cast::<u8>(), usize::from(p.private_data_len))
        }
        .to_vec()
    };
    Some((*p, private))
}

/// cma.c's `ucma_valid_param`: for `RDMA_PS_TCP`, parameters are needed without a QP, and
/// depths beyond the device's are refused (`RDMA_MAX_*` mean "the device's").
fn valid_param(id: &IdPrivate, param: Option<&rdma_conn_param>) -> Cm<()> {
    let state = lock(&id.state);
    if state.ps != RDMA_PS_TCP {
        return Ok(());
    }
    let has_qp = id.with_c(|c| !c.qp.is_null());
    let Some(p) = param else {
        return if has_qp { Ok(()) } else { Err(Errno::EINVAL) };
    };
    let open = state
        .device
        .as_ref()
        .and_then(|d| d.opened())
        .ok_or(Errno::EINVAL)?;
    if (p.responder_resources != RDMA_MAX_RESP_RES
        && p.responder_resources > open.max_responder_resources)
        || (p.initiator_depth != RDMA_MAX_INIT_DEPTH
            && p.initiator_depth > open.max_initiator_depth)
    {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// The parameters the daemon gets (cma.c's `ucma_copy_conn_param_to_kern`): the id's
/// negotiated depths, the QP's number, `ai_connect` data then the application's private
/// data, and retry counts of 7 when the application gave no parameters.
fn conn_param(
    id: &IdPrivate,
    param: Option<&(rdma_conn_param, Vec<u8>)>,
    qp_num: u32,
    srq: u8,
) -> Cm<CmConnParam> {
    let mut state = lock(&id.state);
    let mut private_data = std::mem::take(&mut state.connect_data);
    let mut out = CmConnParam {
        responder_resources: state.responder_resources,
        initiator_depth: state.initiator_depth,
        qp_num,
        srq,
        retry_count: 7,
        rnr_retry_count: 7,
        ..CmConnParam::default()
    };
    if let Some((p, private)) = param {
        out.flow_control = p.flow_control;
        out.retry_count = p.retry_count;
        out.rnr_retry_count = p.rnr_retry_count;
        private_data.extend_from_slice(private);
    }
    if private_data.len() > MAX_PRIVATE_DATA {
        return Err(Errno::EINVAL);
    }
    out.private_data = private_data;
    Ok(out)
}

/// The id's QP number and whether it has an SRQ, or the application's for an external QP.
fn qp_of(id: &IdPrivate, param: Option<&rdma_conn_param>) -> Cm<(u32, u8)> {
    let qp = id.with_c(|c| c.qp);
    if qp.is_null() {
        let p = param.ok_or(Errno::EINVAL)?;
        return Ok((p.qp_num, p.srq));
    }
    // Safety: the QP `rdma_create_qp` made for this id, alive while `id->qp` holds it.
    let q = unsafe { &*qp };
    Ok((q.qp_num, u8::from(!q.srq.is_null())))
}

/// The device's limits, for `RDMA_MAX_*`.
fn device_limits(id: &IdPrivate) -> Cm<(u8, u8)> {
    let state = lock(&id.state);
    let open = state
        .device
        .as_ref()
        .and_then(|d| d.opened())
        .ok_or(Errno::EINVAL)?;
    Ok((open.max_initiator_depth, open.max_responder_resources))
}

/// `rdma_connect`.
///
/// # Safety
///
/// `param` is NULL or valid, as [`read_param`] says.
pub(crate) unsafe fn connect(id: &IdPrivate, param: *const rdma_conn_param) -> Cm<()> {
    // Safety: forwarded from the caller.
    let param = unsafe { read_param(param) };
    let p = param.as_ref().map(|(p, _)| p);
    valid_param(id, p)?;
    let (max_init, max_resp) = device_limits(id)?;
    {
        let mut state = lock(&id.state);
        state.initiator_depth = match p {
            Some(p) if p.initiator_depth != RDMA_MAX_INIT_DEPTH => p.initiator_depth,
            _ => max_init,
        };
        state.responder_resources = match p {
            Some(p) if p.responder_resources != RDMA_MAX_RESP_RES => p.responder_resources,
            _ => max_resp,
        };
    }
    // Without a QP and without parameters (a UD id) there is no QP to name.
    let (qp_num, srq) = qp_of(id, p).unwrap_or((0, 0));
    let param = conn_param(id, param.as_ref(), qp_num, srq)?;
    id.ask(|id| CmRequest::Connect { id, param })?;
    complete(id)
}

/// `rdma_accept`: the QP goes to RTR and RTS first (connected port spaces), then the daemon
/// sends the REP (or the SIDR_REP); a failure to send moves the QP to ERR.
///
/// # Safety
///
/// `param` is NULL or valid, as [`read_param`] says.
pub(crate) unsafe fn accept(id: &IdPrivate, param: *const rdma_conn_param) -> Cm<()> {
    // Safety: forwarded from the caller.
    let param = unsafe { read_param(param) };
    let p = param.as_ref().map(|(p, _)| p);
    let (qp_num, srq) = qp_of(id, p)?;
    valid_param(id, p)?;
    let (max_init, max_resp) = device_limits(id)?;
    let (init_depth, resp_res, ud) = {
        let mut state = lock(&id.state);
        state.initiator_depth = match p {
            Some(p) if p.initiator_depth != RDMA_MAX_INIT_DEPTH => p.initiator_depth,
            _ => state.initiator_depth.min(max_init),
        };
        state.responder_resources = match p {
            Some(p) if p.responder_resources != RDMA_MAX_RESP_RES => p.responder_resources,
            _ => state.responder_resources.min(max_resp),
        };
        (
            state.initiator_depth,
            state.responder_resources,
            state.qp_type == IBV_QPT_UD,
        )
    };
    let param = conn_param(id, param.as_ref(), qp_num, srq)?;
    if !ud {
        modify_qp_rtr(id, resp_res)?;
        modify_qp_rts(id, init_depth)?;
    }
    if let Err(e) = id.ask(|id| CmRequest::Accept { id, param }) {
        let _ = modify_qp_err(id);
        return Err(e);
    }
    if ud {
        return Ok(());
    }
    complete(id)
}

/// `rdma_reject` (REJ reason 28, "consumer reject", with the private data).
///
/// # Safety
///
/// `private_data` is NULL or holds `len` readable bytes.
pub(crate) unsafe fn reject(id: &IdPrivate, private_data: *const c_void, len: u8) -> Cm<()> {
    let private_data = if private_data.is_null() || len == 0 {
        Vec::new()
    } else {
        // Safety: `len` readable bytes (caller).
        unsafe { std::slice::from_raw_parts(private_data.cast::<u8>(), usize::from(len)) }.to_vec()
    };
    id.ask(|id| CmRequest::Reject { id, private_data })?;
    Ok(())
}

/// `rdma_notify`: only `IBV_EVENT_COMM_EST` means something to the CM (the kernel's
/// `ib_cm_notify` refuses other events for a RoCE connection).
pub(crate) fn notify(id: &IdPrivate, event: u32) -> Cm<()> {
    if event != verbs_abi::IBV_EVENT_COMM_EST {
        return Err(Errno::EINVAL);
    }
    id.ask(|id| CmRequest::Notify { id })?;
    Ok(())
}

/// `rdma_disconnect`: the QP goes to ERR (cma.c's `ucma_shutdown` for an InfiniBand
/// transport), then the daemon sends the DREQ (or the DREP).
pub(crate) fn disconnect(id: &IdPrivate) -> Cm<()> {
    if id.with_c(|c| c.verbs.is_null()) {
        return Err(Errno::EINVAL);
    }
    modify_qp_err(id)?;
    id.ask(|id| CmRequest::Disconnect { id })?;
    complete(id)
}

/// `rdma_establish`: an id whose QP the application drives says it is ready, and the
/// daemon sends the RTU. With a QP of the library's, `EINVAL` (cma.c does that itself).
pub(crate) fn establish(id: &IdPrivate) -> Cm<()> {
    if id.with_c(|c| !c.qp.is_null()) {
        return Err(Errno::EINVAL);
    }
    process_conn_resp(id)
}

/// cma.c's `ucma_process_conn_resp`: after a REP, the QP (if any) goes to RTR and RTS with
/// the daemon's attributes and the daemon sends the RTU; on failure the QP goes to ERR.
pub(crate) fn process_conn_resp(id: &IdPrivate) -> Cm<()> {
    let result = modify_qp_rtr(id, RDMA_MAX_RESP_RES)
        .and_then(|()| modify_qp_rts(id, RDMA_MAX_INIT_DEPTH))
        .and_then(|()| id.ask(|id| CmRequest::Establish { id }).map(drop));
    if result.is_err() {
        let _ = modify_qp_err(id);
    }
    result
}

/// The QP to INIT again (access rights now known) and then RTR; `resp_res` other than
/// `RDMA_MAX_RESP_RES` overrides `max_dest_rd_atomic`.
pub(crate) fn modify_qp_rtr(id: &IdPrivate, resp_res: u8) -> Cm<()> {
    let qp = id.with_c(|c| c.qp);
    if qp.is_null() {
        return Ok(());
    }
    let verbs = id.cma.verbs()?;
    let (attr, mask) = qp::init_qp_attr(id, IBV_QPS_INIT)?;
    // Safety: the id's own QP.
    unsafe { verbs.modify(qp, &attr, mask) }?;
    let (mut attr, mask) = qp::init_qp_attr(id, IBV_QPS_RTR)?;
    if resp_res != RDMA_MAX_RESP_RES {
        attr.max_dest_rd_atomic = resp_res;
    }
    // Safety: the id's own QP.
    unsafe { verbs.modify(qp, &attr, mask) }
}

/// The QP to RTS; `init_depth` other than `RDMA_MAX_INIT_DEPTH` overrides
/// `max_rd_atomic`.
pub(crate) fn modify_qp_rts(id: &IdPrivate, init_depth: u8) -> Cm<()> {
    let qp = id.with_c(|c| c.qp);
    if qp.is_null() {
        return Ok(());
    }
    let (mut attr, mask) = qp::init_qp_attr(id, IBV_QPS_RTS)?;
    if init_depth != RDMA_MAX_INIT_DEPTH {
        attr.max_rd_atomic = init_depth;
    }
    // Safety: the id's own QP.
    unsafe { id.cma.verbs()?.modify(qp, &attr, mask) }
}

/// The QP to ERR, if the id has one.
pub(crate) fn modify_qp_err(id: &IdPrivate) -> Cm<()> {
    let qp = id.with_c(|c| c.qp);
    if qp.is_null() {
        return Ok(());
    }
    let attr = verbs_abi::ibv_qp_attr {
        qp_state: IBV_QPS_ERR,
        ..Default::default()
    };
    // Safety: the id's own QP.
    unsafe { id.cma.verbs()?.modify(qp, &attr, IBV_QP_STATE as i32) }
}
