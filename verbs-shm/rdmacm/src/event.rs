//! Events: a daemon's record becomes an `rdma_cm_event`, processed as cma.c's
//! `rdma_get_cm_event` processes the kernel's.
//!
//! - `ADDR_RESOLVED`: the id gets its device (`verbs`, `pd`, `port_num`) and addresses
//!   (`ADDR_ERROR` if the daemon cannot say them); `ROUTE_RESOLVED`: its route and path
//!   record (`ROUTE_ERROR` likewise).
//! - `CONNECT_REQUEST`: a new id, on the listener's channel with the listener's context,
//!   port space and QP type, holding the daemon's new id, its device, addresses and route
//!   (a synchronous listener's child gets a channel of its own); the depths the peer asked
//!   for are the child's to accept. If the child cannot be made, the request is dropped.
//! - `CONNECT_RESPONSE`: with a QP of the library's, the QP goes to RTR and RTS, the daemon
//!   sends the RTU, and the event is reported as `ESTABLISHED` (`CONNECT_ERROR` if that
//!   fails, after which the id's `REJECTED` and `DISCONNECTED` are not reported); without
//!   one, it is reported as is, for the application's `rdma_establish`.
//! - `REJECTED`: the QP goes to ERR.
//! - `MULTICAST_JOIN`: the join it names keeps the group's MGID and the id's QP is
//!   attached to the group (`MULTICAST_ERROR` if that fails); it and `MULTICAST_ERROR`
//!   carry the join's `context` as `param.ud.private_data` (`crate::multicast`). A record
//!   of a join that was left is dropped.
//! - Every other event carries its parameters (`param.conn`, or `param.ud` for UD ids).
//!
//! Private data is copied into the event, so `param.*.private_data` stays valid until the
//! event is acknowledged. A record of an id that no longer exists is dropped (its daemon id
//! of a connection request is destroyed).

use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

use verbs_abi::{IBV_QPT_UD, ibv_ah_attr, ibv_gid, ibv_global_route};
use verbs_shm::cm::{self, CmEventRecord, CmRequest, MAX_PRIVATE_DATA};

use crate::abi::{
    RDMA_CM_EVENT_ADDR_ERROR, RDMA_CM_EVENT_ADDR_RESOLVED, RDMA_CM_EVENT_CONNECT_ERROR,
    RDMA_CM_EVENT_CONNECT_REQUEST, RDMA_CM_EVENT_CONNECT_RESPONSE, RDMA_CM_EVENT_DISCONNECTED,
    RDMA_CM_EVENT_ESTABLISHED, RDMA_CM_EVENT_MULTICAST_ERROR, RDMA_CM_EVENT_MULTICAST_JOIN,
    RDMA_CM_EVENT_REJECTED, RDMA_CM_EVENT_ROUTE_ERROR, RDMA_CM_EVENT_ROUTE_RESOLVED, rdma_cm_event,
    rdma_conn_param, rdma_ud_param,
};
use crate::channel::Channel;
use crate::cma::{Cma, lock};
use crate::connection;
use crate::device::Device;
use crate::ffi::{Cm, Errno};
use crate::id::{self, Handle, IdPrivate};
use crate::multicast::{self, Membership};

/// An event handed to the application: the C part first, then what it points into.
#[repr(C)]
#[derive(Debug)]
struct Event {
    c: rdma_cm_event,
    private_data: [u8; MAX_PRIVATE_DATA],
    /// The id whose event count its acknowledgement completes (for a connection request,
    /// the listener's).
    owner: *const IdPrivate,
    /// The multicast join a `MULTICAST_JOIN` or `MULTICAST_ERROR` answers, whose count
    /// its acknowledgement completes too.
    mc: Option<Arc<Membership>>,
}

/// What a record is about, once matched to the library's ids.
enum Subject<'a> {
    /// An event of an id.
    Id(&'a IdPrivate),
    /// A connection request coming through a listening id.
    Request {
        listener: &'a IdPrivate,
        handle: Handle,
    },
}

/// `rdma_get_cm_event`: the next event of `channel`, processed; waits unless the channel
/// is non-blocking (then `EAGAIN`).
pub(crate) fn get(cma: &Cma, channel: &Arc<Channel>) -> Cm<*mut rdma_cm_event> {
    loop {
        let (device, record) = channel.read()?;
        let Some(subject) = matched(cma, &device, &record) else {
            continue;
        };
        if let Some(event) = process(subject, &record) {
            let event = Box::into_raw(event);
            lock(&cma.events).insert(event as usize);
            return Ok(event.cast());
        }
    }
}

/// Finds the id a record is about and counts the event as reported to it; `None` (the
/// record dropped) when the id is gone.
fn matched<'a>(cma: &Cma, device: &Arc<Device>, record: &CmEventRecord) -> Option<Subject<'a>> {
    let ids = lock(&cma.ids);
    let is_request = record.event == cm::event::CONNECT_REQUEST;
    let key = if is_request {
        record.listen_id
    } else {
        record.id
    };
    let Some(&address) = ids.by_handle.get(&(device.index, key)) else {
        drop(ids);
        if is_request {
            // The listener went: the daemon's new id has no one to answer it.
            let handle = Handle {
                device: device.clone(),
                id: record.id,
            };
            let _ = id::ask(&handle, CmRequest::DestroyId { id: record.id });
        }
        return None;
    };
    // Safety: registered ids are live; this one cannot be freed while the registry's lock
    // is held, and its reported count (incremented now) keeps `destroy` waiting until the
    // event is acknowledged.
    let id: &'a IdPrivate = unsafe { &*(address as *const IdPrivate) };
    id.count_reported();
    Some(if is_request {
        Subject::Request {
            listener: id,
            handle: Handle {
                device: device.clone(),
                id: record.id,
            },
        }
    } else {
        Subject::Id(id)
    })
}

/// Copies the record's private data into the event and points `private_data` at it.
fn private_data(event: &mut Event, record: &CmEventRecord) -> (*const c_void, u8) {
    let len = usize::from(record.private_data_len).min(MAX_PRIVATE_DATA);
    if len == 0 {
        return (std::ptr::null(), 0);
    }
    event.private_data[..len].copy_from_slice(&record.private_data[..len]);
    // The C field is a u8: at most 255 of the 196 bytes a record can carry.
    (
        event.private_data.as_ptr().cast(),
        u8::try_from(len).unwrap_or(u8::MAX),
    )
}

/// cma.c's `ucma_copy_conn_event`.
fn copy_conn(event: &mut Event, record: &CmEventRecord) {
    let (data, len) = private_data(event, record);
    event.c.param.conn = rdma_conn_param {
        private_data: data,
        private_data_len: len,
        responder_resources: record.responder_resources,
        initiator_depth: record.initiator_depth,
        flow_control: record.flow_control,
        retry_count: record.retry_count,
        rnr_retry_count: record.rnr_retry_count,
        srq: record.srq,
        qp_num: record.qp_num,
    };
}

/// cma.c's `ucma_copy_ud_event`: the address vector to reach the peer, for
/// `ibv_create_ah` (global, port 1, our GID's index).
fn copy_ud(event: &mut Event, record: &CmEventRecord) {
    let (data, len) = private_data(event, record);
    event.c.param.ud = rdma_ud_param {
        private_data: data,
        private_data_len: len,
        ah_attr: ah_attr(record),
        qp_num: record.qp_num,
        qkey: record.qkey,
    };
}

/// The record's address vector (`param.ud.ah_attr`).
fn ah_attr(record: &CmEventRecord) -> ibv_ah_attr {
    ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ibv_gid::from_raw(record.dgid),
            flow_label: record.flow_label,
            sgid_index: record.sgid_index,
            hop_limit: record.hop_limit,
            traffic_class: record.traffic_class,
        },
        is_global: 1,
        port_num: 1,
        ..ibv_ah_attr::default()
    }
}

/// The event for a record, or `None` when cma.c would drop it (and look for the next).
fn process(subject: Subject<'_>, record: &CmEventRecord) -> Option<Box<Event>> {
    let (id, owner) = match subject {
        Subject::Id(id) => (id, id),
        Subject::Request { listener, handle } => match connect_request(listener, handle, record) {
            Some(child) => (child, listener),
            None => {
                listener.count_completed();
                return None;
            }
        },
    };
    let mut event = Box::new(Event {
        c: rdma_cm_event::default(),
        private_data: [0; MAX_PRIVATE_DATA],
        owner,
        mc: None,
    });
    event.c.id = id.as_c();
    event.c.event = c_int::try_from(record.event).unwrap_or(c_int::MAX);
    event.c.status = record.status;
    let ud = lock(&id.state).qp_type == IBV_QPT_UD;
    match event.c.event {
        RDMA_CM_EVENT_ADDR_RESOLVED => {
            if let Err(e) = addr_resolved(id) {
                event.c.status = -e.0;
                event.c.event = RDMA_CM_EVENT_ADDR_ERROR;
            }
        }
        RDMA_CM_EVENT_ROUTE_RESOLVED => {
            if let Err(e) = id.handle().and_then(|h| id.query(&h)) {
                event.c.status = -e.0;
                event.c.event = RDMA_CM_EVENT_ROUTE_ERROR;
            }
        }
        RDMA_CM_EVENT_CONNECT_REQUEST => {
            event.c.listen_id = owner.as_c();
            if ud {
                copy_ud(&mut event, record);
            } else {
                copy_conn(&mut event, record);
            }
        }
        RDMA_CM_EVENT_CONNECT_RESPONSE => {
            copy_conn(&mut event, record);
            if id.with_c(|c| !c.qp.is_null()) {
                match connection::process_conn_resp(id) {
                    Ok(()) => event.c.event = RDMA_CM_EVENT_ESTABLISHED,
                    Err(e) => {
                        event.c.status = -e.0;
                        event.c.event = RDMA_CM_EVENT_CONNECT_ERROR;
                        lock(&id.state).connect_error = true;
                    }
                }
            }
        }
        RDMA_CM_EVENT_REJECTED | RDMA_CM_EVENT_DISCONNECTED => {
            if lock(&id.state).connect_error {
                id.count_completed();
                return None;
            }
            copy_conn(&mut event, record);
            if event.c.event == RDMA_CM_EVENT_REJECTED {
                let _ = connection::modify_qp_err(id);
            }
        }
        RDMA_CM_EVENT_MULTICAST_JOIN | RDMA_CM_EVENT_MULTICAST_ERROR => {
            let Some(mc) = multicast::reported(id, record.join) else {
                // The join was left: its events go unread, as ucma drops them.
                id.count_completed();
                return None;
            };
            if event.c.event == RDMA_CM_EVENT_MULTICAST_JOIN {
                copy_ud(&mut event, record);
                if let Err(e) = multicast::process_join(id, &mc, &ah_attr(record)) {
                    event.c.status = -e.0;
                    event.c.event = RDMA_CM_EVENT_MULTICAST_ERROR;
                }
            }
            // cma.c hands the join's context back here, and no private data.
            event.c.param.ud.private_data = mc.context();
            event.c.param.ud.private_data_len = 0;
            event.mc = Some(mc);
        }
        _ if ud => copy_ud(&mut event, record),
        _ => copy_conn(&mut event, record),
    }
    Some(event)
}

/// Whether a live event handed out answers the join `mc`.
pub(crate) fn is_of(cma: &Cma, event: *mut rdma_cm_event, mc: &Arc<Membership>) -> bool {
    let events = lock(&cma.events);
    if !events.contains(&(event as usize)) {
        return false;
    }
    // Safety: a registered event is a live `Event` made by `get`; the registry's lock keeps
    // it from being acknowledged (and freed) meanwhile.
    let event = unsafe { &*event.cast::<Event>() };
    event.mc.as_ref().is_some_and(|m| Arc::ptr_eq(m, mc))
}

/// `ADDR_RESOLVED`: the id's device and addresses.
fn addr_resolved(id: &IdPrivate) -> Cm<()> {
    let handle = id.handle()?;
    {
        let mut state = lock(&id.state);
        id.acquire_device(&mut state, &handle.device)?;
    }
    id.query(&handle).map(drop)
}

/// A connection request's new id (cma.c's `ucma_process_conn_req`); `None` if it cannot
/// be made, after destroying the daemon's id.
fn connect_request<'a>(
    listener: &IdPrivate,
    handle: Handle,
    record: &CmEventRecord,
) -> Option<&'a IdPrivate> {
    let (channel, sync, ps, qp_type) = {
        let state = lock(&listener.state);
        (state.channel.clone(), state.sync, state.ps, state.qp_type)
    };
    let context = listener.with_c(|c| c.context);
    let child = IdPrivate::create(listener.cma, channel, false, context, ps, qp_type);
    let made = (|| {
        let mut state = lock(&child.state);
        child.add_handle(&mut state, handle.clone());
        state.initiator_depth = record.initiator_depth;
        state.responder_resources = record.responder_resources;
        child.acquire_device(&mut state, &handle.device)?;
        drop(state);
        child.apply_info(&cm::CmIdInfo {
            local: record.local,
            remote: record.remote,
            ..Default::default()
        });
        if sync {
            id::migrate(child, None)?;
        }
        child.query(&handle).map(drop)
    })();
    match made {
        Ok(()) => Some(child),
        Err(_) => {
            let _ = id::destroy(child);
            None
        }
    }
}

/// `rdma_ack_cm_event`: frees the event and counts the acknowledgement on its id.
pub(crate) fn ack(cma: &Cma, event: *mut rdma_cm_event) -> Cm<()> {
    if event.is_null() || !lock(&cma.events).remove(&(event as usize)) {
        return Err(Errno::EINVAL);
    }
    // Safety: a registered event was made by `Box::into_raw` in `get` and is unregistered
    // now, so this is its only owner.
    let event = unsafe { Box::from_raw(event.cast::<Event>()) };
    if let Some(mc) = &event.mc {
        mc.count_completed();
    }
    // Safety: the owner cannot be freed before this acknowledgement: `destroy` waits for it.
    unsafe { &*event.owner }.count_completed();
    Ok(())
}

/// `rdma_event_str`: the event's enumerator name, "UNKNOWN EVENT" otherwise.
pub(crate) fn name(event: c_int) -> &'static std::ffi::CStr {
    const NAMES: [&std::ffi::CStr; 16] = [
        c"RDMA_CM_EVENT_ADDR_RESOLVED",
        c"RDMA_CM_EVENT_ADDR_ERROR",
        c"RDMA_CM_EVENT_ROUTE_RESOLVED",
        c"RDMA_CM_EVENT_ROUTE_ERROR",
        c"RDMA_CM_EVENT_CONNECT_REQUEST",
        c"RDMA_CM_EVENT_CONNECT_RESPONSE",
        c"RDMA_CM_EVENT_CONNECT_ERROR",
        c"RDMA_CM_EVENT_UNREACHABLE",
        c"RDMA_CM_EVENT_REJECTED",
        c"RDMA_CM_EVENT_ESTABLISHED",
        c"RDMA_CM_EVENT_DISCONNECTED",
        c"RDMA_CM_EVENT_DEVICE_REMOVAL",
        c"RDMA_CM_EVENT_MULTICAST_JOIN",
        c"RDMA_CM_EVENT_MULTICAST_ERROR",
        c"RDMA_CM_EVENT_ADDR_CHANGE",
        c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
    ];
    usize::try_from(event)
        .ok()
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or(c"UNKNOWN EVENT")
}

/// The name as a C string pointer, for the entry point.
pub(crate) fn name_ptr(event: c_int) -> *const c_char {
    name(event).as_ptr()
}
