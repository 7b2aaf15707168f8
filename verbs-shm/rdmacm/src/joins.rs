//! Multicast joins through the library against fake daemons and fake libibverbs
//! functions: what the daemon is asked, what the application is told (`param.ud`, its
//! `context` back), the QP's attachment when `MULTICAST_JOIN` is read, leaves and their
//! waits.

use std::ffi::c_void;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use verbs_abi::IBV_QPT_UD;
use verbs_shm::cm::{self, CmRequest, join_flags};

use crate::abi::*;
use crate::address;
use crate::channel::Channel;
use crate::cma::{Cma, lock};
use crate::event;
use crate::fake::{self, FakeDaemon, addr, journal, record};
use crate::ffi::{Cm, Errno};
use crate::flows::{bind, create_qp, handle, new_id, next, open_channel, qp_num};
use crate::id::{self, IdPrivate};
use crate::multicast;

/// The group the tests join.
const GROUP: &str = "230.1.2.3:0";

/// The IPv4-mapped GID of `GROUP`, as the journal names it.
const MGID: &str = "::ffff:230.1.2.3";

fn join_flags_of(id: &IdPrivate, group: &str, flags: u32, context: usize) -> Cm<()> {
    let storage = address::storage(Some(addr(group)));
    // Safety: a socket address in a storage.
    unsafe {
        multicast::join(
            id,
            (&raw const storage).cast(),
            flags,
            context as *mut c_void,
        )
    }
}

fn join(id: &IdPrivate, group: &str, context: usize) -> Cm<()> {
    join_flags_of(id, group, join_flags::FULLMEMBER, context)
}

fn leave(id: &IdPrivate, group: &str) -> Cm<()> {
    let storage = address::storage(Some(addr(group)));
    // Safety: a socket address in a storage.
    unsafe { multicast::leave(id, (&raw const storage).cast()) }
}

/// The keys of the joins and leaves the daemon was asked, in order.
fn asked_joins(daemon: &FakeDaemon) -> Vec<(&'static str, u32, Option<SocketAddr>, u32)> {
    lock(&daemon.requests)
        .iter()
        .filter_map(|r| match r {
            CmRequest::JoinMulticast {
                join, group, flags, ..
            } => Some(("join", *join, group.to_socket_addr(), *flags)),
            CmRequest::LeaveMulticast { join, .. } => Some(("leave", *join, None, 0)),
            _ => None,
        })
        .collect()
}

/// A UD id bound to the fake device's address, its address resolved to `GROUP` (the fake
/// daemon emitting the events), with a UD QP when `with_qp`.
fn resolved(
    cma: &'static Cma,
    daemon: &FakeDaemon,
    channel: &Arc<Channel>,
    with_qp: bool,
) -> &'static IdPrivate {
    daemon.auto.store(true, Ordering::Relaxed);
    let id = new_id(cma, channel, RDMA_PS_UDP);
    bind(id, "10.0.0.1:0").unwrap();
    let storage = address::storage(Some(addr(GROUP)));
    // Safety: a socket address in a storage; no source.
    unsafe { id::resolve_addr(id, std::ptr::null(), (&raw const storage).cast(), 2000) }.unwrap();
    assert_eq!(next(cma, channel).event, RDMA_CM_EVENT_ADDR_RESOLVED);
    if with_qp {
        create_qp(id, IBV_QPT_UD).unwrap();
    }
    journal();
    id
}

/// mckey's and pyverbs' join: `MULTICAST_JOIN` with the group's address vector as the
/// daemon said it, the join's context as `private_data`, and the QP attached to the
/// group when the event is read; a leave detaches it and tells the daemon.
#[test]
fn a_join_reports_the_groups_address_vector_with_its_context_and_attaches_the_qp() {
    let (cma, daemons) = fake::cma(&["10.0.0.1"], 0);
    let channel = open_channel(cma);
    let id = resolved(cma, &daemons[0], &channel, true);
    let qpn = qp_num(id);
    join(id, GROUP, 0x5eed).unwrap();
    let asked = asked_joins(&daemons[0]);
    assert_eq!(asked.len(), 1);
    let (_, key, group, flags) = asked[0];
    assert_ne!(key, 0);
    assert_eq!((group, flags), (Some(addr(GROUP)), join_flags::FULLMEMBER));
    assert_eq!(
        journal(),
        [format!("daemon {} join multicast", daemons[0].name)],
        "nothing attached before the event is read"
    );

    let event = next(cma, &channel);
    assert_eq!(
        (event.event, event.status, event.id),
        (RDMA_CM_EVENT_MULTICAST_JOIN, 0, id.as_c())
    );
    // Safety: a multicast event's parameters are `param.ud`.
    let ud = unsafe { event.param.ud };
    assert_eq!(
        ud.private_data, 0x5eed as *const c_void,
        "the join's context"
    );
    assert_eq!(ud.private_data_len, 0);
    let mgid: std::net::Ipv6Addr = MGID.parse().unwrap();
    assert_eq!(ud.ah_attr.grh.dgid.raw(), mgid.octets());
    assert_eq!(
        (ud.ah_attr.grh.sgid_index, ud.ah_attr.grh.hop_limit),
        (2, 64)
    );
    assert_eq!((ud.ah_attr.is_global, ud.ah_attr.port_num), (1, 1));
    assert_eq!((ud.qp_num, ud.qkey), (0xFF_FFFF, RDMA_UDP_QKEY));
    assert_eq!(journal(), [format!("attach qp {qpn:#x} to {MGID} lid 0")]);

    leave(id, GROUP).unwrap();
    let left = journal();
    assert_eq!(
        left,
        [
            format!("detach qp {qpn:#x} from {MGID} lid 0"),
            format!("daemon {} leave multicast", daemons[0].name),
        ]
    );
    assert_eq!(asked_joins(&daemons[0])[1], ("leave", key, None, 0));
    assert_eq!(leave(id, GROUP), Err(Errno(libc::EADDRNOTAVAIL)), "left");
    id::destroy(id).unwrap();
}

/// A send-only join is not attached (nor detached), nor is the join of an id without a
/// QP; the daemon hears the flags.
#[test]
fn a_send_only_join_and_an_id_without_a_qp_attach_nothing() {
    let (cma, daemons) = fake::cma(&["10.0.0.1"], 0);
    let channel = open_channel(cma);
    let id = resolved(cma, &daemons[0], &channel, true);
    join_flags_of(id, GROUP, join_flags::SENDONLY_FULLMEMBER, 1).unwrap();
    assert_eq!(next(cma, &channel).event, RDMA_CM_EVENT_MULTICAST_JOIN);
    assert_eq!(
        asked_joins(&daemons[0])[0].3,
        join_flags::SENDONLY_FULLMEMBER
    );
    leave(id, GROUP).unwrap();
    let without_qp = resolved(cma, &daemons[0], &channel, false);
    join(without_qp, GROUP, 2).unwrap();
    assert_eq!(next(cma, &channel).event, RDMA_CM_EVENT_MULTICAST_JOIN);
    leave(without_qp, GROUP).unwrap();
    let verbs: Vec<String> = journal()
        .into_iter()
        .filter(|l| !l.starts_with("daemon"))
        .collect();
    assert!(verbs.is_empty(), "{verbs:?}");
}

/// An attach that fails turns the event into `MULTICAST_ERROR` with the error (negated,
/// as this library's own errors are), the context still there.
#[test]
fn a_failed_attach_is_a_multicast_error() {
    let (cma, daemons) = fake::cma(&["10.0.0.1"], 0);
    let channel = open_channel(cma);
    let id = resolved(cma, &daemons[0], &channel, true);
    fake::fail_attach(Some(libc::ENOMEM));
    join(id, GROUP, 0x77).unwrap();
    let event = next(cma, &channel);
    assert_eq!(
        (event.event, event.status),
        (RDMA_CM_EVENT_MULTICAST_ERROR, -libc::ENOMEM)
    );
    // Safety: a multicast event's parameters are `param.ud`.
    let context = unsafe { event.param.ud.private_data };
    assert_eq!(context, 0x77 as *const c_void);
    // A daemon's MULTICAST_ERROR carries the context alone.
    fake::fail_attach(None);
    daemons[0].auto.store(false, Ordering::Relaxed);
    join(id, "230.1.2.4:0", 0x78).unwrap();
    let key = asked_joins(&daemons[0])[1].1;
    let mut error = record(handle(id), cm::event::MULTICAST_ERROR, -libc::EADDRNOTAVAIL);
    error.join = key;
    daemons[0].send(&error);
    let event = next(cma, &channel);
    assert_eq!(
        (event.event, event.status),
        (RDMA_CM_EVENT_MULTICAST_ERROR, -libc::EADDRNOTAVAIL)
    );
    // Safety: as above.
    let ud = unsafe { event.param.ud };
    assert_eq!((ud.private_data, ud.qp_num), (0x78 as *const c_void, 0));
}

/// cma.c finds the join to leave by the bytes of its address (`memcmp`): another group,
/// another port, an id that joined nothing: `EADDRNOTAVAIL`; not an address: `EINVAL`.
#[test]
fn a_leave_finds_the_join_by_its_address_bytes() {
    let (cma, daemons) = fake::cma(&["10.0.0.1"], 0);
    let channel = open_channel(cma);
    let id = resolved(cma, &daemons[0], &channel, true);
    join(id, GROUP, 0).unwrap();
    next(cma, &channel);
    for other in ["230.1.2.4:0", "230.1.2.3:5", "[::ffff:230.1.2.3]:0"] {
        assert_eq!(leave(id, other), Err(Errno(libc::EADDRNOTAVAIL)), "{other}");
    }
    let fresh = new_id(cma, &channel, RDMA_PS_UDP);
    assert_eq!(leave(fresh, GROUP), Err(Errno(libc::EADDRNOTAVAIL)));
    // Safety: NULL is checked first.
    let null = unsafe { multicast::leave(id, std::ptr::null()) };
    assert_eq!(null, Err(Errno::EINVAL));
    assert_eq!(
        asked_joins(&daemons[0])
            .iter()
            .filter(|a| a.0 == "leave")
            .count(),
        0
    );
    leave(id, GROUP).unwrap();
}

/// A leave returns once the join's events are acknowledged; a record of a join already
/// left is dropped unread, and the id's count stays right (its destroy does not wait).
#[test]
fn a_leave_waits_for_the_joins_events_and_drops_those_unread() {
    let (cma, daemons) = fake::cma(&["10.0.0.1"], 0);
    let channel = open_channel(cma);
    let id = resolved(cma, &daemons[0], &channel, true);
    daemons[0].auto.store(false, Ordering::Relaxed);
    join(id, GROUP, 0).unwrap();
    let key = asked_joins(&daemons[0])[0].1;
    daemons[0].send(&fake::multicast_join(handle(id), key, [0; 16]));
    let event = event::get(cma, &channel).unwrap();
    let address = id.as_c() as usize;
    let leaving = std::thread::spawn(move || {
        // Safety: the id lives until the test destroys it, after this thread ends.
        let id = unsafe { &*(address as *const IdPrivate) };
        leave(id, GROUP)
    });
    std::thread::sleep(Duration::from_millis(50));
    assert!(!leaving.is_finished(), "waits for the acknowledgement");
    event::ack(cma, event).unwrap();
    leaving.join().unwrap().unwrap();

    // Its record arriving late: dropped.
    daemons[0].send(&fake::multicast_join(handle(id), key, [0; 16]));
    assert_eq!(event::get(cma, &channel), Err(Errno::EAGAIN));
    id::destroy(id).unwrap();
}

/// A join the daemon refuses is forgotten, with the daemon's errno (Linux's `ENOTSUPP`
/// for an IPv6 group); an id without a device is `EINVAL`, the daemon not asked.
#[test]
fn a_refused_join_is_forgotten() {
    let (cma, daemons) = fake::cma(&["10.0.0.1"], 0);
    let channel = open_channel(cma);
    let idle = new_id(cma, &channel, RDMA_PS_UDP);
    assert_eq!(join(idle, GROUP, 0), Err(Errno::EINVAL));
    assert!(daemons[0].asked().is_empty());
    assert!(lock(&idle.state).multicast.is_empty());

    let id = resolved(cma, &daemons[0], &channel, true);
    daemons[0].refuse("join multicast", 524);
    assert_eq!(join(id, "[ff0e::1]:0", 0), Err(Errno(524)));
    assert!(lock(&id.state).multicast.is_empty());
    assert_eq!(leave(id, "[ff0e::1]:0"), Err(Errno(libc::EADDRNOTAVAIL)));
}

/// A synchronous id's join returns once its `MULTICAST_JOIN` is read (the QP attached),
/// keeping the event; the leave acknowledges it rather than waiting for ever.
#[test]
fn a_synchronous_id_waits_for_its_join() {
    let (cma, daemons) = fake::cma(&["10.0.0.1"], 0);
    daemons[0].auto.store(true, Ordering::Relaxed);
    let id = id::create(cma, None, std::ptr::null_mut(), RDMA_PS_UDP, IBV_QPT_UD).unwrap();
    bind(id, "10.0.0.1:0").unwrap();
    create_qp(id, IBV_QPT_UD).unwrap();
    let qpn = qp_num(id);
    journal();
    join(id, GROUP, 9).unwrap();
    let kept = id.with_c(|c| c.event);
    // Safety: the id's kept event, live until its next call acknowledges it.
    assert_eq!(unsafe { (*kept).event }, RDMA_CM_EVENT_MULTICAST_JOIN);
    assert!(journal().contains(&format!("attach qp {qpn:#x} to {MGID} lid 0")));
    leave(id, GROUP).unwrap();
    assert!(id.with_c(|c| c.event.is_null()));
    assert!(lock(&cma.events).is_empty());
    id::destroy(id).unwrap();
}

/// `rdma_destroy_id` of an id whose QP is still attached detaches it from every group.
#[test]
fn destroying_an_id_detaches_its_qp_from_its_groups() {
    let (cma, daemons) = fake::cma(&["10.0.0.1"], 0);
    let channel = open_channel(cma);
    let id = resolved(cma, &daemons[0], &channel, true);
    let qpn = qp_num(id);
    join(id, GROUP, 0).unwrap();
    join(id, "230.1.2.4:0", 0).unwrap();
    next(cma, &channel);
    next(cma, &channel);
    journal();
    id::destroy(id).unwrap();
    let log = journal();
    for group in [MGID, "::ffff:230.1.2.4"] {
        let detached = format!("detach qp {qpn:#x} from {group} lid 0");
        assert!(log.contains(&detached), "{detached}: {log:?}");
    }
    assert!(log.contains(&format!("daemon {} destroy id", daemons[0].name)));
}
