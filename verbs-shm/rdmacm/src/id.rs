//! Ids (`rdma_cm_id`): creation, addresses, options, channels and destruction.
//!
//! An id lives in the library first: it has no device (`verbs` NULL) and no daemon id
//! until `rdma_bind_addr` or `rdma_resolve_addr` says which device it belongs to, as with
//! the kernel's rdma_cm. Then the library creates the daemon's id on that device's
//! connection ([`IdPrivate::create_handle`]) and applies the options set so far. The
//! device of an address is the one whose GID table has it; a destination's is the one
//! whose address the kernel's route to it starts from, or the only device when there is
//! one (its daemon then reports `ADDR_ERROR` if it cannot reach the destination).
//!
//! A bind to a wildcard address (`0.0.0.0`, `::`) belongs to no device, as in cma.c: the
//! id keeps `verbs` NULL, and the library binds a daemon id on every device (the first
//! chooses the port when it is 0, the others take the same), so that `rdma_listen`
//! listens on all of them and each connection request brings its own device. A later
//! `rdma_resolve_addr` keeps the daemon id of the device the destination is reached from
//! and destroys the others.
//!
//! Every event the library returns for an id is counted, every acknowledgement too:
//! `rdma_destroy_id` and `rdma_migrate_id` wait until they are equal, as cma.c waits for
//! the kernel's `events_reported`.

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Condvar, Mutex};

use libc::sockaddr;
use verbs_abi::{ibv_gid, ibv_qp_init_attr, ibv_qp_type};
use verbs_shm::cm::{CmIdInfo, CmOption, CmReply, CmRequest};

use crate::abi::{
    RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
    RDMA_OPTION_ID_AFONLY, RDMA_OPTION_ID_REUSEADDR, RDMA_OPTION_ID_TOS, ibv_sa_path_rec,
    rdma_cm_id,
};
use crate::address;
use crate::channel::Channel;
use crate::cma::{Cma, lock};
use crate::daemon;
use crate::device::Device;
use crate::event;
use crate::ffi::{Cm, Errno};
use crate::multicast::{self, Membership};

/// The packet lifetime code of a RoCE path, as Debian 12's kernel gives it
/// (`CMA_IBOE_PACKET_LIFETIME`).
const PACKET_LIFETIME: u8 = 18;
/// `path_rec.*_selector`: exactly this value.
const SELECTOR_EXACTLY: u8 = 2;

/// An id's daemon id on one device.
#[derive(Debug, Clone)]
pub(crate) struct Handle {
    pub(crate) device: Arc<Device>,
    pub(crate) id: u64,
}

/// What the library keeps about an id beyond its C part.
#[derive(Debug)]
pub(crate) struct IdState {
    /// The channel its events go to.
    pub(crate) channel: Arc<Channel>,
    /// The channel is the id's own (a synchronous id, made with a NULL channel).
    pub(crate) sync: bool,
    /// `rdma_port_space`, as created.
    pub(crate) ps: c_int,
    /// `ibv_qp_type`, as created.
    pub(crate) qp_type: ibv_qp_type,
    /// The device the id got (`verbs` and `pd` set from it), holding its PD.
    pub(crate) device: Option<Arc<Device>>,
    /// Its daemon ids: one once it has a device, one per device after a wildcard bind.
    pub(crate) handles: Vec<Handle>,
    /// Options set so far, applied to every daemon id made later.
    pub(crate) options: Vec<CmOption>,
    /// A wildcard bind's address (with the port the daemons chose).
    pub(crate) bound: Option<SocketAddr>,
    /// READ/atomic depths negotiated for the connection (cma.c's `initiator_depth`,
    /// `responder_resources`).
    pub(crate) initiator_depth: u8,
    pub(crate) responder_resources: u8,
    /// The connection failed after `CONNECT_RESPONSE`: its `REJECTED`/`DISCONNECTED` are
    /// not reported.
    pub(crate) connect_error: bool,
    /// `ai_connect` data of `rdma_create_ep`, put before the next connect's private data.
    pub(crate) connect_data: Vec<u8>,
    /// A passive endpoint's QP attributes (`rdma_create_ep`), for `rdma_get_request`.
    pub(crate) qp_init_attr: Option<ibv_qp_init_attr>,
    /// The multicast groups it joined, newest first (cma.c's `mc_list`).
    pub(crate) multicast: Vec<Arc<Membership>>,
}

/// The events returned to the application for an id or a join, the acknowledgements of
/// them, and a wait for the two to meet (cma.c's `events_reported`, `events_completed`
/// and the condition variable a destroy, a migrate or a leave waits on).
#[derive(Debug, Default)]
pub(crate) struct Acks {
    count: Mutex<(u64, u64)>,
    acked: Condvar,
}

impl Acks {
    /// Counts an event returned.
    pub(crate) fn reported(&self) {
        lock(&self.count).0 += 1;
    }

    /// Counts an acknowledgement and wakes a waiter (cma.c's `ucma_complete_event`).
    pub(crate) fn completed(&self) {
        lock(&self.count).1 += 1;
        self.acked.notify_all();
    }

    /// Waits until every event returned is acknowledged.
    pub(crate) fn wait(&self) {
        let mut count = lock(&self.count);
        while count.1 < count.0 {
            // NOTE(unwrap): as `lock`: a poisoned count is still a count.
            count = self.acked.wait(count).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// An id. The application holds a pointer to its first field.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct IdPrivate {
    c: UnsafeCell<rdma_cm_id>,
    path: UnsafeCell<ibv_sa_path_rec>,
    /// Held while the library reads or writes the C part, so that its own threads (an
    /// event processed while the application calls on the id) never touch it at once.
    c_guard: Mutex<()>,
    pub(crate) cma: &'static Cma,
    pub(crate) state: Mutex<IdState>,
    acks: Acks,
}

// Safety: the C part is the application's to read and write as librdmacm's contract says;
// the library touches it only under `c_guard` (cma.c does not lock it at all). Everything
// else is behind the mutexes.
unsafe impl Sync for IdPrivate {}
// Safety: nothing in an id is tied to the thread that made it.
unsafe impl Send for IdPrivate {}

impl IdPrivate {
    /// A new id reporting to `channel` (its own when `sync`), registered as live.
    pub(crate) fn create(
        cma: &'static Cma,
        channel: Arc<Channel>,
        sync: bool,
        context: *mut c_void,
        ps: c_int,
        qp_type: ibv_qp_type,
    ) -> &'static IdPrivate {
        let c = rdma_cm_id {
            channel: channel.as_c(),
            context,
            ps,
            qp_type,
            ..rdma_cm_id::default()
        };
        let id = Box::leak(Box::new(IdPrivate {
            c: UnsafeCell::new(c),
            path: UnsafeCell::new(ibv_sa_path_rec::default()),
            c_guard: Mutex::new(()),
            cma,
            state: Mutex::new(IdState {
                channel,
                sync,
                ps,
                qp_type,
                device: None,
                handles: Vec::new(),
                options: Vec::new(),
                bound: None,
                initiator_depth: 0,
                responder_resources: 0,
                connect_error: false,
                connect_data: Vec::new(),
                qp_init_attr: None,
                multicast: Vec::new(),
            }),
            acks: Acks::default(),
        }));
        let address = id.c.get() as usize;
        lock(&cma.ids).live.insert(address);
        lock(&id.state).channel.join(address);
        id
    }

    /// The live id behind an application's pointer; `EINVAL` for NULL or anything else.
    /// The reference is valid until `rdma_destroy_id`, which the application must not call
    /// while it uses the id in another thread (as with librdmacm).
    pub(crate) fn lookup<'a>(cma: &Cma, id: *mut rdma_cm_id) -> Cm<&'a IdPrivate> {
        if id.is_null() || !lock(&cma.ids).live.contains(&(id as usize)) {
            return Err(Errno::EINVAL);
        }
        // Safety: a live id's address is that of its `IdPrivate`, whose first field the
        // pointer is (repr(C)); it is freed only by `destroy`.
        Ok(unsafe { &*id.cast::<IdPrivate>() })
    }

    /// The pointer the application holds.
    pub(crate) fn as_c(&self) -> *mut rdma_cm_id {
        self.c.get()
    }

    /// Runs `f` on the C part (`f` must not call `with_c` again).
    pub(crate) fn with_c<R>(&self, f: impl FnOnce(&mut rdma_cm_id) -> R) -> R {
        let _guard = lock(&self.c_guard);
        // Safety: the guard keeps the library's accesses apart; the application's own are
        // its business, as with librdmacm (see the `Sync` impl).
        f(unsafe { &mut *self.c.get() })
    }

    /// Counts an event returned for this id (the caller holds the id registry's lock, so
    /// the id cannot be destroyed in between).
    pub(crate) fn count_reported(&self) {
        self.acks.reported();
    }

    /// Counts an acknowledgement and wakes a waiting destroy or migrate.
    pub(crate) fn count_completed(&self) {
        self.acks.completed();
    }

    /// Waits until every event returned for this id has been acknowledged.
    fn wait_acked(&self) {
        self.acks.wait();
    }

    /// The id's one daemon id; `EINVAL` when it has none yet (or one per device).
    pub(crate) fn handle(&self) -> Cm<Handle> {
        match lock(&self.state).handles.as_slice() {
            [one] => Ok(one.clone()),
            _ => Err(Errno::EINVAL),
        }
    }

    /// Sends `request` (made for the daemon id) to the id's one daemon.
    pub(crate) fn ask(&self, request: impl FnOnce(u64) -> CmRequest) -> Cm<CmReply> {
        let handle = self.handle()?;
        ask(&handle, request(handle.id))
    }

    /// Makes the id's daemon id on `device` and applies its options there.
    pub(crate) fn create_handle(&self, state: &mut IdState, device: &Arc<Device>) -> Cm<Handle> {
        let channel = state.channel.handle(device)?;
        let port_space = u16::try_from(state.ps).map_err(|_| Errno::EINVAL)?;
        let request = CmRequest::CreateId {
            channel,
            port_space,
            qp_type: state.qp_type,
        };
        let open = device.opened().ok_or(Errno::ENODEV)?;
        let id = match daemon::ask(&device.name, open.daemon.as_ref(), request)? {
            CmReply::Id { id } => id,
            _ => return Err(Errno(libc::EPROTO)),
        };
        let handle = Handle {
            device: device.clone(),
            id,
        };
        self.add_handle(state, handle.clone());
        for option in state.options.clone() {
            if let Err(e) = ask(&handle, CmRequest::SetOption { id, option }) {
                self.drop_handles(state, |h| h.id == id && h.device.index == device.index);
                return Err(e);
            }
        }
        Ok(handle)
    }

    /// Adopts a daemon id the daemon made (a connection request's).
    pub(crate) fn add_handle(&self, state: &mut IdState, handle: Handle) {
        lock(&self.cma.ids)
            .by_handle
            .insert((handle.device.index, handle.id), self.as_c() as usize);
        state.handles.push(handle);
    }

    /// Destroys the daemon ids `which` selects (errors ignored: the id goes either way).
    fn drop_handles(&self, state: &mut IdState, which: impl Fn(&Handle) -> bool) {
        let (gone, kept): (Vec<Handle>, Vec<Handle>) = std::mem::take(&mut state.handles)
            .into_iter()
            .partition(which);
        state.handles = kept;
        let mut ids = lock(&self.cma.ids);
        for handle in &gone {
            ids.by_handle.remove(&(handle.device.index, handle.id));
        }
        drop(ids);
        for handle in gone {
            let _ = ask(&handle, CmRequest::DestroyId { id: handle.id });
        }
    }

    /// Gives the id its device: `verbs`, `pd` and `port_num` (cma.c's `ucma_get_device`).
    pub(crate) fn acquire_device(&self, state: &mut IdState, device: &Arc<Device>) -> Cm<()> {
        if state.device.is_some() {
            return Ok(());
        }
        let open = device.opened().ok_or(Errno::ENODEV)?;
        let pd = device.acquire_pd(self.cma.verbs()?)?;
        self.with_c(|c| {
            c.verbs = open.verbs.0;
            c.pd = pd;
            c.port_num = 1;
        });
        state.device = Some(device.clone());
        Ok(())
    }

    /// Copies what the daemon says of the id into its C part: addresses, GIDs, P_Key and,
    /// once resolved, the path record.
    pub(crate) fn apply_info(&self, info: &CmIdInfo) {
        let path = self.path.get();
        self.with_c(|c| {
            let addr = &mut c.route.addr;
            if info.local.family != 0 {
                addr.src.src_storage = address::storage(address::from_cm(&info.local));
            }
            if info.remote.family != 0 {
                addr.dst.dst_storage = address::storage(address::from_cm(&info.remote));
            }
            addr.addr.ibaddr.sgid = ibv_gid::from_raw(info.sgid);
            addr.addr.ibaddr.dgid = ibv_gid::from_raw(info.dgid);
            addr.addr.ibaddr.pkey = 0xffff_u16.to_be();
            if info.route_resolved {
                let record = ibv_sa_path_rec {
                    dgid: ibv_gid::from_raw(info.dgid),
                    sgid: ibv_gid::from_raw(info.sgid),
                    hop_limit: info.hop_limit,
                    traffic_class: info.traffic_class,
                    reversible: 1,
                    numb_path: 1,
                    pkey: 0xffff_u16.to_be(),
                    mtu_selector: SELECTOR_EXACTLY,
                    mtu: u8::try_from(info.path_mtu).unwrap_or(0),
                    rate_selector: SELECTOR_EXACTLY,
                    packet_life_time_selector: SELECTOR_EXACTLY,
                    packet_life_time: PACKET_LIFETIME,
                    ..ibv_sa_path_rec::default()
                };
                // Safety: the id's own path record, read by the application only through
                // `route.path_rec` once it is set, just below.
                unsafe { path.write(record) };
                c.route.path_rec = path;
                c.route.num_paths = 1;
            }
        });
    }

    /// Asks the daemon about the id and copies the answer into its C part.
    pub(crate) fn query(&self, handle: &Handle) -> Cm<CmIdInfo> {
        match ask(handle, CmRequest::Query { id: handle.id })? {
            CmReply::Info(info) => {
                self.apply_info(&info);
                Ok(info)
            }
            _ => Err(Errno(libc::EPROTO)),
        }
    }
}

/// Sends `request` to the daemon of `handle`'s device.
pub(crate) fn ask(handle: &Handle, request: CmRequest) -> Cm<CmReply> {
    let open = handle.device.opened().ok_or(Errno::ENODEV)?;
    daemon::ask(&handle.device.name, open.daemon.as_ref(), request)
}

/// `rdma_create_id` (cma.c's `rdma_create_id2`): `channel` NULL makes a synchronous id
/// with a channel of its own.
pub(crate) fn create(
    cma: &'static Cma,
    channel: Option<Arc<Channel>>,
    context: *mut c_void,
    ps: c_int,
    qp_type: ibv_qp_type,
) -> Cm<&'static IdPrivate> {
    cma.init()?;
    let (channel, sync) = match channel {
        Some(c) => (c, false),
        None => (Channel::new(cma)?, true),
    };
    Ok(IdPrivate::create(cma, channel, sync, context, ps, qp_type))
}

/// `rdma_destroy_id`: the daemon ids go (a connection is disconnected, a request
/// rejected, the multicast groups left), the id's QP, if it still has one, is detached
/// from its groups, the id's pending `event` is acknowledged, then the call waits until
/// every event returned for the id is acknowledged, and frees it.
pub(crate) fn destroy(id: &IdPrivate) -> Cm<()> {
    let cma = id.cma;
    let mut state = lock(&id.state);
    // Unregistered at once, by address and by every daemon id: from now on a record of
    // the id is discarded, not returned.
    let mut ids = lock(&cma.ids);
    ids.live.remove(&(id.as_c() as usize));
    for handle in &state.handles {
        ids.by_handle.remove(&(handle.device.index, handle.id));
    }
    drop(ids);
    id.drop_handles(&mut state, |_| true);
    let joins = std::mem::take(&mut state.multicast);
    let pending = id.with_c(|c| std::mem::replace(&mut c.event, std::ptr::null_mut()));
    drop(state);
    for mc in &joins {
        multicast::detach(id, mc);
    }
    if !pending.is_null() {
        let _ = event::ack(cma, pending);
    }
    id.wait_acked();
    let (device, channel, sync) = {
        let state = lock(&id.state);
        (state.device.clone(), state.channel.clone(), state.sync)
    };
    if let (Some(device), Ok(verbs)) = (device, cma.verbs()) {
        device.release_pd(verbs);
    }
    channel.leave(id.as_c() as usize);
    if sync {
        channel.close(cma);
    }
    let raw = id.as_c().cast::<IdPrivate>();
    // Safety: made by `Box::leak` in `IdPrivate::create`, no longer registered, and every
    // event naming it acknowledged: nothing of this library refers to it any more.
    drop(unsafe { Box::from_raw(raw) });
    Ok(())
}

/// `rdma_destroy_event_channel`: as when the kernel's `rdma_cm` descriptor is closed, the
/// daemon ids of the ids still reporting to the channel go with it (their connections are
/// disconnected, their requests rejected); the ids themselves stay for `rdma_destroy_id`.
pub(crate) fn close_channel(cma: &Cma, channel: &Arc<Channel>) {
    for address in channel.take_members() {
        let Ok(id) = IdPrivate::lookup(cma, address as *mut rdma_cm_id) else {
            continue;
        };
        let mut state = lock(&id.state);
        id.drop_handles(&mut state, |_| true);
    }
    channel.close(cma);
}

/// `rdma_migrate_id`: the id's events go to `channel` from now on (NULL: a channel of its
/// own, making it synchronous).
pub(crate) fn migrate(id: &IdPrivate, channel: Option<Arc<Channel>>) -> Cm<()> {
    let mut state = lock(&id.state);
    if state.sync && channel.is_none() {
        return Err(Errno::EINVAL);
    }
    let (channel, sync) = match channel {
        Some(c) => (c, false),
        None => (Channel::new(id.cma)?, true),
    };
    let moved = state.handles.iter().try_for_each(|handle| {
        let new = channel.handle(&handle.device)?;
        ask(
            handle,
            CmRequest::MigrateId {
                id: handle.id,
                channel: new,
            },
        )
        .map(drop)
    });
    if let Err(e) = moved {
        if sync {
            channel.close(id.cma);
        }
        return Err(e);
    }
    let old = std::mem::replace(&mut state.channel, channel.clone());
    let was_sync = std::mem::replace(&mut state.sync, sync);
    let pending = id.with_c(|c| {
        c.channel = channel.as_c();
        if was_sync {
            std::mem::replace(&mut c.event, std::ptr::null_mut())
        } else {
            std::ptr::null_mut()
        }
    });
    drop(state);
    old.leave(id.as_c() as usize);
    channel.join(id.as_c() as usize);
    if was_sync {
        if !pending.is_null() {
            let _ = event::ack(id.cma, pending);
        }
        old.close(id.cma);
    }
    id.wait_acked();
    Ok(())
}

/// `rdma_set_option`: checked as the kernel checks it, remembered for daemon ids made
/// later, and applied to those the id has.
///
/// # Safety
///
/// `optval` is NULL or valid for reading `optlen` bytes.
pub(crate) unsafe fn set_option(
    id: &IdPrivate,
    level: c_int,
    optname: c_int,
    optval: *const c_void,
    optlen: usize,
) -> Cm<()> {
    if optval.is_null() {
        return Err(Errno::EINVAL);
    }
    let byte = || -> Cm<u8> {
        if optlen != 1 {
            return Err(Errno::EINVAL);
        }
        // Safety: one readable byte (caller).
        Ok(unsafe { optval.cast::<u8>().read() })
    };
    let flag = || -> Cm<bool> {
        if optlen != size_of::<c_int>() {
            return Err(Errno::EINVAL);
        }
        // Safety: an int's worth of readable bytes (caller); read unaligned.
        Ok(unsafe { optval.cast::<c_int>().read_unaligned() } != 0)
    };
    let option = match (level, optname) {
        (RDMA_OPTION_ID, RDMA_OPTION_ID_TOS) => CmOption::Tos(byte()?),
        (RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR) => CmOption::ReuseAddr(flag()?),
        (RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY) => CmOption::AfOnly(flag()?),
        (RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT) => CmOption::AckTimeout(byte()?),
        // Path records come from ibacm or an SA, which RoCE on xroce does not have.
        (RDMA_OPTION_IB, RDMA_OPTION_IB_PATH) => return Err(Errno::EOPNOTSUPP),
        // The kernel's answer to an option it does not know.
        _ => return Err(Errno::ENOSYS),
    };
    let mut state = lock(&id.state);
    for handle in &state.handles {
        ask(
            handle,
            CmRequest::SetOption {
                id: handle.id,
                option,
            },
        )?;
    }
    state
        .options
        .retain(|o| std::mem::discriminant(o) != std::mem::discriminant(&option));
    state.options.push(option);
    Ok(())
}

/// `rdma_bind_addr`.
///
/// # Safety
///
/// `addr` is NULL or a socket address as long as its family says.
pub(crate) unsafe fn bind(id: &IdPrivate, addr: *const sockaddr) -> Cm<()> {
    // Safety: forwarded from the caller.
    let addr = unsafe { address::read(addr) }?;
    let mut state = lock(&id.state);
    if !state.handles.is_empty() || state.bound.is_some() {
        return Err(Errno::EINVAL);
    }
    if address::is_any(addr.ip()) {
        return bind_everywhere(id, &mut state, addr);
    }
    let ip = addr.ip();
    let Some((device, _)) = id.cma.device_with_address(ip)? else {
        return Err(if address::is_local(ip) {
            Errno::ENODEV
        } else {
            Errno(libc::EADDRNOTAVAIL)
        });
    };
    let handle = id.create_handle(&mut state, &device)?;
    let bound = ask(
        &handle,
        CmRequest::Bind {
            id: handle.id,
            addr: address::to_cm(Some(addr)),
        },
    )
    .and_then(|reply| match reply {
        CmReply::Info(info) => Ok(info),
        _ => Err(Errno(libc::EPROTO)),
    })
    .and_then(|info| id.acquire_device(&mut state, &device).map(|()| info));
    match bound {
        Ok(info) => {
            id.apply_info(&info);
            Ok(())
        }
        Err(e) => {
            id.drop_handles(&mut state, |_| true);
            Err(e)
        }
    }
}

/// A wildcard bind: a daemon id bound on every device, all on one port; the id itself has
/// no device.
fn bind_everywhere(id: &IdPrivate, state: &mut IdState, addr: SocketAddr) -> Cm<()> {
    let devices = id.cma.live_devices()?;
    if devices.is_empty() {
        return Err(Errno::ENODEV);
    }
    let mut addr = addr;
    let mut first = None;
    for device in &devices {
        let bound = id.create_handle(state, device).and_then(|handle| {
            ask(
                &handle,
                CmRequest::Bind {
                    id: handle.id,
                    addr: address::to_cm(Some(addr)),
                },
            )
        });
        let info = match bound {
            Ok(CmReply::Info(info)) => info,
            other => {
                id.drop_handles(state, |_| true);
                return Err(other.err().unwrap_or(Errno(libc::EPROTO)));
            }
        };
        if addr.port() == 0 {
            addr.set_port(info.local.port);
        }
        first.get_or_insert(info);
    }
    state.bound = Some(addr);
    if let Some(info) = first {
        id.apply_info(&CmIdInfo {
            local: address::to_cm(Some(addr)),
            ..info
        });
    }
    Ok(())
}

/// The device an id resolving `dst` from `src` gets (see the module's documentation).
fn device_for(id: &IdPrivate, src: Option<SocketAddr>, dst: SocketAddr) -> Cm<Arc<Device>> {
    if let Some(src) = src.filter(|s| !address::is_any(s.ip())) {
        return match id.cma.device_with_address(src.ip())? {
            Some((device, _)) => Ok(device),
            None if address::is_local(src.ip()) => Err(Errno::ENODEV),
            None => Err(Errno(libc::EADDRNOTAVAIL)),
        };
    }
    if let Some(source) = address::route_source(dst)
        && let Some((device, _)) = id.cma.device_with_address(source)?
    {
        return Ok(device);
    }
    match id.cma.live_devices()?.as_slice() {
        [only] => Ok(only.clone()),
        _ => Err(Errno::ENODEV),
    }
}

/// `rdma_resolve_addr`: `ADDR_RESOLVED` or `ADDR_ERROR` follows (a synchronous id waits
/// for it).
///
/// # Safety
///
/// `src` is NULL or a socket address; `dst` is a socket address.
pub(crate) unsafe fn resolve_addr(
    id: &IdPrivate,
    src: *const sockaddr,
    dst: *const sockaddr,
    timeout_ms: c_int,
) -> Cm<()> {
    // Safety: forwarded from the caller.
    let dst = unsafe { address::read(dst) }?;
    // Safety: forwarded from the caller.
    let src = unsafe { address::read_optional(src) }?;
    let mut state = lock(&id.state);
    let handle = match (state.device.is_some(), state.handles.as_slice()) {
        (true, [one]) => one.clone(),
        _ => {
            let device = device_for(id, src.or(state.bound), dst)?;
            id.drop_handles(&mut state, |h| h.device.index != device.index);
            match state.handles.first().cloned() {
                Some(h) => h,
                None => {
                    let handle = id.create_handle(&mut state, &device)?;
                    if let Some(bound) = state.bound {
                        ask(
                            &handle,
                            CmRequest::Bind {
                                id: handle.id,
                                addr: address::to_cm(Some(bound)),
                            },
                        )?;
                    }
                    handle
                }
            }
        }
    };
    ask(
        &handle,
        CmRequest::ResolveAddr {
            id: handle.id,
            src: address::to_cm(src),
            dst: address::to_cm(Some(dst)),
            timeout_ms: u32::try_from(timeout_ms).unwrap_or(0),
        },
    )?;
    id.with_c(|c| c.route.addr.dst.dst_storage = address::storage(Some(dst)));
    drop(state);
    crate::connection::complete(id)
}

/// `rdma_resolve_route`: `ROUTE_RESOLVED` or `ROUTE_ERROR` follows.
pub(crate) fn resolve_route(id: &IdPrivate, timeout_ms: c_int) -> Cm<()> {
    id.ask(|id| CmRequest::ResolveRoute {
        id,
        timeout_ms: u32::try_from(timeout_ms).unwrap_or(0),
    })?;
    crate::connection::complete(id)
}

/// `rdma_listen`: an id not bound yet is bound to `0.0.0.0` first, as the kernel does.
pub(crate) fn listen(id: &IdPrivate, backlog: c_int) -> Cm<()> {
    let mut state = lock(&id.state);
    if state.handles.is_empty() {
        if state.bound.is_some() {
            return Err(Errno::EINVAL);
        }
        bind_everywhere(id, &mut state, SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)))?;
    }
    for handle in &state.handles {
        ask(
            handle,
            CmRequest::Listen {
                id: handle.id,
                backlog,
            },
        )?;
    }
    if state.device.is_some()
        && let Some(handle) = state.handles.first()
    {
        id.query(handle)?;
    }
    Ok(())
}
