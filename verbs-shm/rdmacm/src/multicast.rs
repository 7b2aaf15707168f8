//! Multicast groups of ids, as cma.c joins and leaves them (`rdma_join_multicast2`,
//! `ucma_process_join`, `rdma_leave_multicast`).
//!
//! A join is recorded in the id first ([`Membership`], cma.c's `struct cma_multicast`:
//! the group's address as the application gave it, its `context`, its flags), under a key
//! of the library's that the daemon's records name, then asked of the daemon
//! (`CmRequest::JoinMulticast`), which answers with `MULTICAST_JOIN` at once. Reading that
//! event ([`process_join`]) keeps the group's MGID and MLID and attaches the id's QP to it
//! with `ibv_attach_mcast`, unless the id has no QP or joined send-only; a failed attach
//! turns the event into `MULTICAST_ERROR`. Either event carries the join's `context` as
//! its `param.ud.private_data`.
//!
//! A leave finds the join by comparing the address bytes, as cma.c's `memcmp` does
//! (`EADDRNOTAVAIL` when none matches), detaches the QP, tells the daemon, and waits until
//! every event returned for the join is acknowledged. A record of a join that is gone is
//! dropped unread. `rdma_destroy_id` detaches the QP from every group it still has; the
//! daemon's joins go with the daemon's id.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use libc::{sockaddr, sockaddr_in, sockaddr_in6, sockaddr_storage};
use verbs_abi::{ibv_ah_attr, ibv_gid};
use verbs_shm::cm::{CmRequest, join_flags};

use crate::address;
use crate::cma::lock;
use crate::connection;
use crate::event;
use crate::ffi::{Cm, Errno};
use crate::id::{self, Acks, IdPrivate};

/// One join of an id.
#[derive(Debug)]
pub(crate) struct Membership {
    /// Its key, which the daemon's records of it name: unique in the process, never 0.
    pub(crate) key: u32,
    /// The group's address as the application gave it: `ucma_addrlen` bytes, zeros after.
    addr: [u8; size_of::<sockaddr_storage>()],
    /// The application's `context` of the join (a pointer, kept as its address).
    context: usize,
    /// Joined as a send-only full member: the QP is not attached.
    send_only: bool,
    /// The group's MGID and MLID, once `MULTICAST_JOIN` said them.
    group: Mutex<Option<([u8; 16], u16)>>,
    acks: Acks,
}

impl Membership {
    /// The join's `context`, for `param.ud.private_data`.
    pub(crate) fn context(&self) -> *const c_void {
        self.context as *const c_void
    }

    /// Counts an acknowledgement of one of its events and wakes a waiting leave.
    pub(crate) fn count_completed(&self) {
        self.acks.completed();
    }
}

/// A new join key.
fn next_key() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    loop {
        let key = NEXT.fetch_add(1, Ordering::Relaxed);
        if key != 0 {
            return key;
        }
    }
}

/// The bytes of a group address that cma.c keeps and compares (`ucma_addrlen` of them:
/// a whole `sockaddr_in` or `sockaddr_in6`); `EINVAL` for NULL or another family.
///
/// # Safety
///
/// `addr` is NULL or a socket address as long as its family says.
unsafe fn address_bytes(addr: *const sockaddr) -> Cm<Vec<u8>> {
    // Safety: forwarded from the caller.
    let read = unsafe { address::read(addr) }?;
    let len = if read.is_ipv4() {
        size_of::<sockaddr_in>()
    } else {
        size_of::<sockaddr_in6>()
    };
    // Safety: an address of this family has these bytes (caller).
    Ok(unsafe { std::slice::from_raw_parts(addr.cast::<u8>(), len) }.to_vec())
}

/// `rdma_join_multicast_ex` (and `rdma_join_multicast`, with `RDMA_MC_JOIN_FLAG_FULLMEMBER`):
/// the join is recorded, then asked of the daemon; a synchronous id waits for its event.
///
/// # Safety
///
/// `addr` is NULL or a socket address as long as its family says.
pub(crate) unsafe fn join(
    id: &IdPrivate,
    addr: *const sockaddr,
    flags: u32,
    context: *mut c_void,
) -> Cm<()> {
    // Safety: forwarded from the caller.
    let bytes = unsafe { address_bytes(addr) }?;
    // Safety: as above.
    let group = unsafe { address::read(addr) }?;
    let mut kept = [0; size_of::<sockaddr_storage>()];
    kept[..bytes.len()].copy_from_slice(&bytes);
    let mc = Arc::new(Membership {
        key: next_key(),
        addr: kept,
        context: context as usize,
        send_only: flags == join_flags::SENDONLY_FULLMEMBER,
        group: Mutex::new(None),
        acks: Acks::default(),
    });
    lock(&id.state).multicast.insert(0, mc.clone());
    let asked = id.handle().and_then(|handle| {
        id::ask(
            &handle,
            CmRequest::JoinMulticast {
                id: handle.id,
                join: mc.key,
                group: address::to_cm(Some(group)),
                flags,
            },
        )
    });
    if let Err(e) = asked {
        lock(&id.state).multicast.retain(|m| !Arc::ptr_eq(m, &mc));
        return Err(e);
    }
    connection::complete(id)
}

/// The join of `id` whose key a record names, counting the event as reported to it;
/// `None` when the id no longer has it (the record is then dropped). Done under the id's
/// lock, so that a leave either finds the event counted or the join gone.
pub(crate) fn reported(id: &IdPrivate, key: u32) -> Option<Arc<Membership>> {
    let state = lock(&id.state);
    let mc = state.multicast.iter().find(|m| m.key == key)?.clone();
    mc.acks.reported();
    Some(mc)
}

/// cma.c's `ucma_process_join`: the join keeps the group's MGID and MLID from the event's
/// address vector, and the id's QP, if it has one and the join is not send-only, is
/// attached to the group.
pub(crate) fn process_join(id: &IdPrivate, mc: &Membership, ah: &ibv_ah_attr) -> Cm<()> {
    let mgid = ah.grh.dgid;
    *lock(&mc.group) = Some((mgid.raw(), ah.dlid));
    let qp = id.with_c(|c| c.qp);
    if qp.is_null() || mc.send_only {
        return Ok(());
    }
    // Safety: the id's own QP, made by `rdma_create_qp`.
    unsafe { id.cma.verbs()?.attach(qp, &mgid, ah.dlid) }
}

/// Detaches the id's QP from the join's group, if the QP was attached to it (or tried to
/// be): not for a send-only join, nor before `MULTICAST_JOIN` was read.
pub(crate) fn detach(id: &IdPrivate, mc: &Membership) {
    if mc.send_only {
        return;
    }
    let Some((mgid, mlid)) = *lock(&mc.group) else {
        return;
    };
    let qp = id.with_c(|c| c.qp);
    if qp.is_null() {
        return;
    }
    if let Ok(verbs) = id.cma.verbs() {
        // Safety: the id's own QP. A failure leaves nothing to undo (cma.c ignores it).
        let _ = unsafe { verbs.detach(qp, &ibv_gid::from_raw(mgid), mlid) };
    }
}

/// `rdma_leave_multicast`: the join whose address has the same bytes (`EADDRNOTAVAIL`
/// when the id has none), the QP detached, the daemon told; then waits until the join's
/// events are acknowledged (a synchronous id's kept event, if it is one of them, is
/// acknowledged here, as its next call would).
///
/// # Safety
///
/// `addr` is NULL or a socket address as long as its family says.
pub(crate) unsafe fn leave(id: &IdPrivate, addr: *const sockaddr) -> Cm<()> {
    // Safety: forwarded from the caller.
    let bytes = unsafe { address_bytes(addr) }?;
    let mc = {
        let mut state = lock(&id.state);
        let at = state
            .multicast
            .iter()
            .position(|m| m.addr[..bytes.len()] == bytes[..]);
        at.map(|i| state.multicast.remove(i))
    }
    .ok_or(Errno(libc::EADDRNOTAVAIL))?;
    detach(id, &mc);
    let handle = id.handle()?;
    id::ask(
        &handle,
        CmRequest::LeaveMulticast {
            id: handle.id,
            join: mc.key,
        },
    )?;
    let kept = id.with_c(|c| {
        if !c.event.is_null() && event::is_of(id.cma, c.event, &mc) {
            std::mem::replace(&mut c.event, std::ptr::null_mut())
        } else {
            std::ptr::null_mut()
        }
    });
    if !kept.is_null() {
        event::ack(id.cma, kept)?;
    }
    mc.acks.wait();
    Ok(())
}
