//! Fakes for the unit tests: daemons that answer as the contract says (and emit the events
//! a daemon would, when asked to), and libibverbs functions that make plain C objects.
//!
//! Everything both fakes are asked is written, in order, to the calling thread's
//! [`journal`] ("daemon fake3 connect", "modify qp 0x11 to RTR"), so a test can check the
//! order of QP state changes and CM requests. A test gets its own state with [`cma`]: fresh
//! daemons under names of their own, and a `Cma` built on them.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use verbs_abi::{
    ibv_comp_channel, ibv_context, ibv_cq, ibv_device, ibv_gid, ibv_pd, ibv_qp, ibv_qp_attr,
    ibv_qp_init_attr, ibv_srq, ibv_srq_init_attr,
};
use verbs_shm::client::{Error, EventChannel};
use verbs_shm::cm::{self, CmEventRecord, CmIdInfo, CmReply, CmRequest, CmSockAddr};
use verbs_shm::protocol::{DeviceAttr, PortAttr, QpAttr};

use crate::cma::{Cma, lock};
use crate::daemon::{self, Daemon};
use crate::device;
use crate::ffi::Cm;
use crate::verbs::Verbs;

thread_local! {
    static JOURNAL: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    static DEVICES: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    static FAIL_MODIFY_TO: RefCell<Option<u32>> = const { RefCell::new(None) };
    static FAIL_ATTACH: RefCell<Option<c_int>> = const { RefCell::new(None) };
}

/// Appends to the calling thread's journal.
fn note(entry: String) {
    JOURNAL.with(|j| j.borrow_mut().push(entry));
}

/// Takes the calling thread's journal.
pub(crate) fn journal() -> Vec<String> {
    JOURNAL.with(|j| std::mem::take(&mut *j.borrow_mut()))
}

/// Makes `ibv_modify_qp` to `state` fail (with `EINVAL`) on this thread.
pub(crate) fn fail_modify_to(state: Option<u32>) {
    FAIL_MODIFY_TO.with(|f| *f.borrow_mut() = state);
}

/// Makes `ibv_attach_mcast` return `errno` on this thread.
pub(crate) fn fail_attach(errno: Option<c_int>) {
    FAIL_ATTACH.with(|f| *f.borrow_mut() = errno);
}

/// A daemon.
#[derive(Debug)]
pub(crate) struct FakeDaemon {
    pub(crate) name: String,
    /// Its GID table.
    pub(crate) gids: Mutex<Vec<[u8; 16]>>,
    /// What it was asked, in order.
    pub(crate) requests: Mutex<Vec<CmRequest>>,
    /// Requests refused, by name, with their errno.
    refusals: Mutex<HashMap<&'static str, i32>>,
    /// Emit the event a request leads to, as a daemon would.
    pub(crate) auto: std::sync::atomic::AtomicBool,
    next_id: AtomicU64,
    next_channel: AtomicU32,
    /// The channels handed over, by handle.
    channels: Mutex<HashMap<u32, OwnedFd>>,
    /// The channel of each id.
    id_channels: Mutex<HashMap<u64, u32>>,
    /// What `Query` answers, by id.
    pub(crate) infos: Mutex<HashMap<u64, CmIdInfo>>,
}

impl FakeDaemon {
    fn new(name: String, ip: IpAddr) -> FakeDaemon {
        FakeDaemon {
            name,
            gids: Mutex::new(vec![device::gid_of(ip)]),
            requests: Mutex::default(),
            refusals: Mutex::default(),
            auto: false.into(),
            next_id: AtomicU64::new(100),
            next_channel: AtomicU32::new(1),
            channels: Mutex::default(),
            id_channels: Mutex::default(),
            infos: Mutex::default(),
        }
    }

    /// Refuses every request named `what` (as `daemon::request_name` names it).
    pub(crate) fn refuse(&self, what: &'static str, errno: i32) {
        lock(&self.refusals).insert(what, errno);
    }

    /// The requests so far, by name.
    pub(crate) fn asked(&self) -> Vec<&'static str> {
        lock(&self.requests)
            .iter()
            .map(daemon::request_name)
            .collect()
    }

    /// A new id of the daemon's own (a connection request's), reporting where `listener`
    /// reports.
    pub(crate) fn new_id(&self, listener: u64) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let channel = lock(&self.id_channels).get(&listener).copied();
        if let Some(channel) = channel {
            lock(&self.id_channels).insert(id, channel);
        }
        id
    }

    /// Writes `record` to the channel of its id (of its listener for a connection request).
    pub(crate) fn send(&self, record: &CmEventRecord) {
        let owner = if record.event == cm::event::CONNECT_REQUEST {
            record.listen_id
        } else {
            record.id
        };
        let channel = lock(&self.id_channels)[&owner];
        self.send_raw(channel, zerocopy::IntoBytes::as_bytes(record));
    }

    /// Writes bytes to channel `channel`.
    pub(crate) fn send_raw(&self, channel: u32, bytes: &[u8]) {
        let channels = lock(&self.channels);
        let fd = channels[&channel].as_fd();
        let sent =
            nix::sys::socket::send(fd.as_raw_fd(), bytes, nix::sys::socket::MsgFlags::empty());
        assert_eq!(sent, Ok(bytes.len()));
    }

    fn info(&self, id: u64) -> CmIdInfo {
        lock(&self.infos).get(&id).copied().unwrap_or_default()
    }

    fn answer(&self, request: &CmRequest) -> Result<CmReply, Error> {
        let name = daemon::request_name(request);
        if let Some(&errno) = lock(&self.refusals).get(name) {
            return Err(Error::Daemon {
                errno,
                message: format!("the fake refuses {name}"),
            });
        }
        let auto = self.auto.load(Ordering::Relaxed);
        let reply = match *request {
            CmRequest::CreateId { channel, .. } => {
                let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                lock(&self.id_channels).insert(id, channel);
                CmReply::Id { id }
            }
            CmRequest::MigrateId { id, channel } => {
                lock(&self.id_channels).insert(id, channel);
                CmReply::Done
            }
            CmRequest::Bind { id, addr } => {
                let mut local = addr;
                if local.port == 0 {
                    local.port = 40000 + u16::try_from(id).unwrap_or(0);
                }
                let info = CmIdInfo {
                    local,
                    sgid: local.addr,
                    ..self.info(id)
                };
                lock(&self.infos).insert(id, info);
                CmReply::Info(info)
            }
            CmRequest::ResolveAddr { id, src, dst, .. } => {
                let first = lock(&self.gids)[0];
                let local = if src.family != 0 {
                    src
                } else {
                    CmSockAddr {
                        family: dst.family,
                        port: 50000,
                        addr: first,
                        ..CmSockAddr::NONE
                    }
                };
                let info = CmIdInfo {
                    local,
                    remote: dst,
                    sgid: local.addr,
                    dgid: dst.addr,
                    ..self.info(id)
                };
                lock(&self.infos).insert(id, info);
                if auto {
                    self.send(&record(id, cm::event::ADDR_RESOLVED, 0));
                }
                CmReply::Done
            }
            CmRequest::ResolveRoute { id, .. } => {
                let info = CmIdInfo {
                    route_resolved: true,
                    path_mtu: 3,
                    hop_limit: 64,
                    ..self.info(id)
                };
                lock(&self.infos).insert(id, info);
                if auto {
                    self.send(&record(id, cm::event::ROUTE_RESOLVED, 0));
                }
                CmReply::Done
            }
            CmRequest::Query { id } => CmReply::Info(self.info(id)),
            CmRequest::InitQpAttr { state, .. } => init_qp_attr(state),
            CmRequest::Connect { id, .. } if auto => {
                self.send(&record(id, cm::event::CONNECT_RESPONSE, 0));
                CmReply::Done
            }
            CmRequest::Accept { id, .. } | CmRequest::Establish { id } if auto => {
                self.send(&record(id, cm::event::ESTABLISHED, 0));
                CmReply::Done
            }
            CmRequest::Disconnect { id } if auto => {
                self.send(&record(id, cm::event::DISCONNECTED, 0));
                CmReply::Done
            }
            CmRequest::JoinMulticast {
                id, join, group, ..
            } if auto => {
                self.send(&multicast_join(id, join, group.addr));
                CmReply::Done
            }
            _ => CmReply::Done,
        };
        Ok(reply)
    }
}

/// The attributes a daemon gives for moving a QP to `state`, with recognisable values.
fn init_qp_attr(state: u32) -> CmReply {
    use verbs_shm::client::AttrMask;
    let mut attr = QpAttr {
        qp_state: state,
        ..QpAttr::default()
    };
    let mask = match state {
        verbs_abi::IBV_QPS_INIT => {
            attr.qkey = cm::RDMA_UDP_QKEY;
            attr.port_num = 1;
            attr.qp_access_flags = 0xe;
            AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS
        }
        verbs_abi::IBV_QPS_RTR => {
            attr.path_mtu = 3;
            attr.dest_qp_num = 0x77;
            attr.rq_psn = 0x1234;
            attr.max_dest_rd_atomic = 4;
            attr.ah_attr.dgid = [0xfe; 16];
            attr.ah_attr.is_global = true;
            attr.ah_attr.hop_limit = 64;
            AttrMask::STATE
                | AttrMask::AV
                | AttrMask::PATH_MTU
                | AttrMask::DEST_QPN
                | AttrMask::RQ_PSN
                | AttrMask::MAX_DEST_RD_ATOMIC
                | AttrMask::MIN_RNR_TIMER
        }
        verbs_abi::IBV_QPS_RTS => {
            attr.sq_psn = 0x4321;
            attr.max_rd_atomic = 4;
            attr.timeout = 19;
            attr.retry_cnt = 7;
            attr.rnr_retry = 7;
            AttrMask::STATE
                | AttrMask::SQ_PSN
                | AttrMask::MAX_QP_RD_ATOMIC
                | AttrMask::TIMEOUT
                | AttrMask::RETRY_CNT
                | AttrMask::RNR_RETRY
        }
        _ => AttrMask::STATE,
    };
    CmReply::QpAttr { attr, mask: mask.0 }
}

/// The `MULTICAST_JOIN` a daemon reports for join `join` of `id` to the group whose
/// address (IPv4-mapped) is `mgid`: recognisable values where the daemon's own would be
/// the id's GID index and Q_Key.
pub(crate) fn multicast_join(id: u64, join: u32, mgid: [u8; 16]) -> CmEventRecord {
    CmEventRecord {
        ud: 1,
        join,
        dgid: mgid,
        hop_limit: 64,
        sgid_index: 2,
        qp_num: 0xFF_FFFF,
        qkey: cm::RDMA_UDP_QKEY,
        ..record(id, cm::event::MULTICAST_JOIN, 0)
    }
}

/// A record of `event` about `id`.
pub(crate) fn record(id: u64, event: u32, status: i32) -> CmEventRecord {
    CmEventRecord {
        id,
        event,
        status,
        ..CmEventRecord::default()
    }
}

impl Daemon for FakeDaemon {
    fn cm(&self, request: CmRequest) -> Result<CmReply, Error> {
        note(format!(
            "daemon {} {}",
            self.name,
            daemon::request_name(&request)
        ));
        let reply = self.answer(&request);
        lock(&self.requests).push(request);
        reply
    }

    fn register_channel(&self, channel: &EventChannel) -> Result<u32, Error> {
        let handle = self.next_channel.fetch_add(1, Ordering::Relaxed);
        let fd = channel.daemon_end().try_clone_to_owned()?;
        lock(&self.channels).insert(handle, fd);
        Ok(handle)
    }

    fn port(&self) -> Result<PortAttr, Error> {
        Ok(PortAttr {
            gids: lock(&self.gids).clone(),
            ..PortAttr::default()
        })
    }

    fn device(&self) -> Result<DeviceAttr, Error> {
        Ok(DeviceAttr {
            max_qp_wr: 4096,
            max_qp_rd_atom: 128,
            max_qp_init_rd_atom: 128,
            ..DeviceAttr::default()
        })
    }
}

/// Every fake daemon, by name: the connector finds them here.
static DAEMONS: Mutex<Vec<Arc<FakeDaemon>>> = Mutex::new(Vec::new());

/// The fake connector: the daemon of that name, if a test made one.
fn connect(name: &str) -> Result<Arc<dyn Daemon>, Error> {
    lock(&DAEMONS)
        .iter()
        .find(|d| d.name == name)
        .cloned()
        .map(|d| d as Arc<dyn Daemon>)
        .ok_or_else(|| Error::NoDevice(name.to_string()))
}

/// A state of its own for a test: one device per address of `addresses` (named
/// `fake<n>`, each with that one GID), plus `dead` listed devices that no daemon serves.
pub(crate) fn cma(addresses: &[&str], dead: usize) -> (&'static Cma, Vec<Arc<FakeDaemon>>) {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let mut names = Vec::new();
    let mut daemons = Vec::new();
    for address in addresses {
        let name = format!("fake{}", NEXT.fetch_add(1, Ordering::Relaxed));
        // NOTE(unwrap): tests pass valid addresses.
        let ip: IpAddr = address.parse().expect("an IP address");
        let daemon = Arc::new(FakeDaemon::new(name.clone(), ip));
        lock(&DAEMONS).push(daemon.clone());
        names.push(name);
        daemons.push(daemon);
    }
    for _ in 0..dead {
        names.push(format!("dead{}", NEXT.fetch_add(1, Ordering::Relaxed)));
    }
    DEVICES.with(|d| *d.borrow_mut() = names);
    journal();
    fail_modify_to(None);
    fail_attach(None);
    let cma: &'static Cma = Box::leak(Box::new(Cma::new(verbs, connect)));
    (cma, daemons)
}

/// A socket address.
pub(crate) fn addr(text: &str) -> SocketAddr {
    // NOTE(unwrap): tests pass valid addresses.
    text.parse().expect("a socket address")
}

fn verbs() -> Cm<Verbs> {
    Ok(Verbs {
        get_device_list,
        get_device_name,
        open_device,
        alloc_pd,
        dealloc_pd,
        create_comp_channel,
        destroy_comp_channel,
        create_cq,
        destroy_cq,
        create_qp,
        modify_qp,
        destroy_qp,
        create_srq,
        destroy_srq,
        attach_mcast,
        detach_mcast,
    })
}

/// Leaks a value as a C object.
fn leak<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// # Safety
///
/// `count` is valid for writing.
unsafe extern "C" fn get_device_list(count: *mut c_int) -> *mut *mut ibv_device {
    let names = DEVICES.with(|d| d.borrow().clone());
    let mut list: Vec<*mut ibv_device> = names
        .iter()
        .map(|name| {
            let mut device = ibv_device::default();
            for (slot, byte) in device.name.iter_mut().zip(name.bytes()) {
                *slot = byte as c_char;
            }
            leak(device)
        })
        .collect();
    // Safety: writable (caller).
    unsafe { count.write(c_int::try_from(list.len()).unwrap_or(0)) };
    list.push(std::ptr::null_mut());
    Box::leak(list.into_boxed_slice()).as_mut_ptr()
}

/// # Safety
///
/// `device` is one of the fake list's.
unsafe extern "C" fn get_device_name(device: *mut ibv_device) -> *const c_char {
    // Safety: a fake device (caller).
    unsafe { (*device).name.as_ptr() }
}

unsafe extern "C" fn open_device(device: *mut ibv_device) -> *mut ibv_context {
    leak(ibv_context {
        device,
        ..ibv_context::default()
    })
}

unsafe extern "C" fn alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    note("alloc pd".into());
    leak(ibv_pd { context, handle: 0 })
}

unsafe extern "C" fn dealloc_pd(_pd: *mut ibv_pd) -> c_int {
    note("dealloc pd".into());
    0
}

unsafe extern "C" fn create_comp_channel(context: *mut ibv_context) -> *mut ibv_comp_channel {
    note("create comp channel".into());
    leak(ibv_comp_channel {
        context,
        fd: -1,
        refcnt: 0,
    })
}

unsafe extern "C" fn destroy_comp_channel(_channel: *mut ibv_comp_channel) -> c_int {
    note("destroy comp channel".into());
    0
}

unsafe extern "C" fn create_cq(
    context: *mut ibv_context,
    entries: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    _vector: c_int,
) -> *mut ibv_cq {
    note(format!("create cq of {entries}"));
    leak(ibv_cq {
        context,
        channel,
        cq_context,
        cqe: entries,
        ..ibv_cq::default()
    })
}

unsafe extern "C" fn destroy_cq(_cq: *mut ibv_cq) -> c_int {
    note("destroy cq".into());
    0
}

/// # Safety
///
/// `pd` is a fake PD; `attr` is valid.
unsafe extern "C" fn create_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp {
    static QPN: AtomicU32 = AtomicU32::new(0x11);
    // Safety: valid (caller).
    let a = unsafe { &*attr };
    let qp_num = QPN.fetch_add(1, Ordering::Relaxed);
    note(format!("create qp {qp_num:#x}"));
    leak(ibv_qp {
        // Safety: a fake PD (caller).
        context: unsafe { (*pd).context },
        pd,
        send_cq: a.send_cq,
        recv_cq: a.recv_cq,
        srq: a.srq,
        qp_num,
        qp_type: a.qp_type,
        ..ibv_qp::default()
    })
}

/// The state names the journal uses.
pub(crate) fn state_name(state: u32) -> &'static str {
    ["RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"]
        .get(state as usize)
        .copied()
        .unwrap_or("?")
}

/// Every modify is journaled with the state and mask; the last attributes of each QP and
/// state are kept for tests to look at.
static MODIFIED: Mutex<Vec<(u32, ibv_qp_attr, c_int)>> = Mutex::new(Vec::new());

/// The attributes and mask of the last modify of QP `qp_num` to `state`.
pub(crate) fn modified(qp_num: u32, state: u32) -> Option<(ibv_qp_attr, c_int)> {
    lock(&MODIFIED)
        .iter()
        .rev()
        .find(|(n, a, _)| *n == qp_num && a.qp_state == state)
        .map(|(_, a, m)| (*a, *m))
}

/// # Safety
///
/// `qp` is a fake QP; `attr` is valid.
unsafe extern "C" fn modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> c_int {
    // Safety: valid (caller).
    let a = unsafe { *attr };
    // Safety: a fake QP (caller).
    let qp = unsafe { &mut *qp };
    note(format!(
        "modify qp {:#x} to {}",
        qp.qp_num,
        state_name(a.qp_state)
    ));
    if FAIL_MODIFY_TO.with(|f| *f.borrow()) == Some(a.qp_state) {
        return libc::EINVAL;
    }
    lock(&MODIFIED).push((qp.qp_num, a, mask));
    qp.state = a.qp_state;
    0
}

/// # Safety
///
/// `qp` is a fake QP.
unsafe extern "C" fn destroy_qp(qp: *mut ibv_qp) -> c_int {
    // Safety: a fake QP (caller).
    note(format!("destroy qp {:#x}", unsafe { (*qp).qp_num }));
    0
}

/// # Safety
///
/// `pd` is a fake PD.
unsafe extern "C" fn create_srq(pd: *mut ibv_pd, _attr: *mut ibv_srq_init_attr) -> *mut ibv_srq {
    note("create srq".into());
    leak(ibv_srq {
        // Safety: a fake PD (caller).
        context: unsafe { (*pd).context },
        pd,
        ..ibv_srq::default()
    })
}

/// The journal's name of a group: its GID as an IPv6 address.
fn group_name(gid: *const ibv_gid) -> std::net::Ipv6Addr {
    // Safety: the caller's GID, valid for the call.
    std::net::Ipv6Addr::from(unsafe { (*gid).raw() })
}

/// # Safety
///
/// `qp` is a fake QP; `gid` is valid.
unsafe extern "C" fn attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    // Safety: a fake QP (caller).
    let qp_num = unsafe { (*qp).qp_num };
    note(format!(
        "attach qp {qp_num:#x} to {} lid {lid}",
        group_name(gid)
    ));
    FAIL_ATTACH.with(|f| f.borrow().unwrap_or(0))
}

/// # Safety
///
/// `qp` is a fake QP; `gid` is valid.
unsafe extern "C" fn detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> c_int {
    // Safety: a fake QP (caller).
    let qp_num = unsafe { (*qp).qp_num };
    note(format!(
        "detach qp {qp_num:#x} from {} lid {lid}",
        group_name(gid)
    ));
    0
}

unsafe extern "C" fn destroy_srq(_srq: *mut ibv_srq) -> c_int {
    note("destroy srq".into());
    0
}
