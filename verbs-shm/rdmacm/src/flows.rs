//! rdma_cm flows through the library against fake daemons and fake libibverbs functions
//! (`crate::fake`): event channels, which device an id gets and what the daemon is asked
//! for it, options, destruction and migration, and the device list. The handshakes
//! (connect, accept, the QP's states, synchronous ids) are in `handshakes`.

use std::ffi::c_int;
use std::sync::Arc;
use std::time::Duration;

use verbs_abi::{IBV_QPT_RC, IBV_QPT_UD, ibv_qp_init_attr};
use verbs_shm::cm::{self, CmEventRecord, CmOption, CmRequest, CmSockAddr};

use crate::abi::*;
use crate::address;
use crate::channel::Channel;
use crate::cma::{Cma, lock};
use crate::event;
use crate::fake::{self, addr, journal, record};
use crate::ffi::{Cm, Errno};
use crate::id::{self, IdPrivate};
use crate::qp;

/// A channel whose reads never wait.
pub(crate) fn open_channel(cma: &Cma) -> Arc<Channel> {
    let channel = Channel::new(cma).unwrap();
    // Safety: the C part holds the channel's open descriptor.
    let fd = unsafe { (*channel.as_c()).fd };
    // Safety: F_SETFL on an open descriptor.
    let set = unsafe { libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK) };
    assert_eq!(set, 0);
    channel
}

/// An id of port space `ps` on `channel`.
pub(crate) fn new_id(cma: &'static Cma, channel: &Arc<Channel>, ps: c_int) -> &'static IdPrivate {
    let qp_type = if ps == RDMA_PS_UDP {
        IBV_QPT_UD
    } else {
        IBV_QPT_RC
    };
    id::create(
        cma,
        Some(channel.clone()),
        std::ptr::null_mut(),
        ps,
        qp_type,
    )
    .unwrap()
}

pub(crate) fn bind(id: &IdPrivate, text: &str) -> Cm<()> {
    let storage = address::storage(Some(addr(text)));
    // Safety: a socket address in a storage.
    unsafe { id::bind(id, (&raw const storage).cast()) }
}

pub(crate) fn resolve(id: &IdPrivate, text: &str) -> Cm<()> {
    let storage = address::storage(Some(addr(text)));
    // Safety: a socket address in a storage; no source.
    unsafe { id::resolve_addr(id, std::ptr::null(), (&raw const storage).cast(), 2000) }
}

/// The next event, which must be there.
pub(crate) fn next(cma: &Cma, channel: &Arc<Channel>) -> rdma_cm_event {
    let event = event::get(cma, channel).expect("an event waits");
    // Safety: an event just returned, live until acknowledged.
    let copy = unsafe { *event };
    event::ack(cma, event).unwrap();
    copy
}

/// The source address of an id, from its C part.
pub(crate) fn source(id: &IdPrivate) -> Option<std::net::SocketAddr> {
    // Safety: the storage view covers the whole union.
    id.with_c(|c| address::from_storage(unsafe { &c.route.addr.src.src_storage }))
}

/// The daemon's id for `id` (its one handle).
pub(crate) fn handle(id: &IdPrivate) -> u64 {
    id.handle().unwrap().id
}

/// Creates the id's QP as `rdma_create_qp(id, NULL, attr)` does.
pub(crate) fn create_qp(id: &IdPrivate, qp_type: u32) -> Cm<()> {
    let mut attr = ibv_qp_init_attr {
        qp_type,
        ..Default::default()
    };
    attr.cap.max_send_wr = 16;
    attr.cap.max_recv_wr = 32;
    // Safety: a local attribute structure.
    unsafe { qp::create_qp(id, std::ptr::null_mut(), &mut attr) }
}

pub(crate) fn qp_num(id: &IdPrivate) -> u32 {
    // Safety: the id's QP, made by the fake.
    id.with_c(|c| unsafe { (*c.qp).qp_num })
}

#[test]
fn an_event_channel_without_events_answers_eagain_and_polls_idle() {
    let (cma, daemons) = fake::cma(&["10.0.0.1"], 0);
    let channel = open_channel(cma);
    assert_eq!(event::get(cma, &channel), Err(Errno::EAGAIN));
    let id = new_id(cma, &channel, RDMA_PS_TCP);
    bind(id, "10.0.0.1:7000").unwrap();
    // Safety: the channel's descriptor.
    let fd = unsafe { (*channel.as_c()).fd };
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // Safety: one valid pollfd.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    assert_eq!(ready, 0, "nothing to read yet");
    daemons[0].send(&record(handle(id), cm::event::TIMEWAIT_EXIT, 0));
    // Safety: as above.
    let ready = unsafe { libc::poll(&mut poll, 1, 100) };
    assert_eq!(ready, 1, "readable with an event");
    let event = next(cma, &channel);
    assert_eq!(event.event, RDMA_CM_EVENT_TIMEWAIT_EXIT);
    assert_eq!(event.id, id.as_c());
    assert_eq!(event::get(cma, &channel), Err(Errno::EAGAIN));
}

#[test]
fn one_channel_tells_apart_the_same_daemon_id_of_two_devices() {
    let (cma, daemons) = fake::cma(&["10.0.0.1", "10.0.0.2"], 0);
    let channel = open_channel(cma);
    let first = new_id(cma, &channel, RDMA_PS_TCP);
    let second = new_id(cma, &channel, RDMA_PS_TCP);
    bind(first, "10.0.0.1:7000").unwrap();
    bind(second, "10.0.0.2:7000").unwrap();
    // Each daemon numbers its own ids: the records alone cannot say whose 100 it is.
    assert_eq!((handle(first), handle(second)), (100, 100));
    daemons[1].send(&record(100, cm::event::DISCONNECTED, 0));
    assert_eq!(next(cma, &channel).id, second.as_c());
    daemons[0].send(&record(100, cm::event::TIMEWAIT_EXIT, 0));
    daemons[1].send(&record(100, cm::event::TIMEWAIT_EXIT, 0));
    let mut ids = [next(cma, &channel).id, next(cma, &channel).id];
    ids.sort();
    let mut expected = [first.as_c(), second.as_c()];
    expected.sort();
    assert_eq!(ids, expected);
    assert_eq!(event::get(cma, &channel), Err(Errno::EAGAIN));
}

#[test]
fn a_blocking_channel_waits_for_the_event() {
    let (cma, daemons) = fake::cma(&["10.0.0.1"], 0);
    let channel = Channel::new(cma).unwrap();
    let id = new_id(cma, &channel, RDMA_PS_TCP);
    bind(id, "10.0.0.1:7000").unwrap();
    let (daemon, id_handle) = (daemons[0].clone(), handle(id));
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        daemon.send(&record(id_handle, cm::event::DISCONNECTED, 0));
    });
    let event = next(cma, &channel);
    assert_eq!(event.event, RDMA_CM_EVENT_DISCONNECTED);
    writer.join().unwrap();
}

#[test]
fn an_id_has_no_device_and_no_daemon_id_until_it_is_bound() {
    let (cma, daemons) = fake::cma(&["10.0.0.1"], 0);
    let channel = open_channel(cma);
    let id = new_id(cma, &channel, RDMA_PS_TCP);
    id.with_c(|c| {
        assert!(c.verbs.is_null() && c.pd.is_null());
        assert_eq!(c.channel, channel.as_c());
        assert_eq!((c.ps, c.qp_type), (RDMA_PS_TCP, IBV_QPT_RC));
    });
    assert_eq!(id.handle().err(), Some(Errno::EINVAL));
    assert_eq!(id::resolve_route(id, 100), Err(Errno::EINVAL));
    id::destroy(id).unwrap();
    assert!(daemons[0].asked().is_empty(), "{:?}", daemons[0].asked());
    assert!(lock(&cma.ids).live.is_empty());
    assert_eq!(IdPrivate::lookup(cma, id.as_c()).err(), Some(Errno::EINVAL));
}

#[test]
fn a_bind_gets_the_device_whose_gid_table_has_the_address() {
    let (cma, daemons) = fake::cma(&["10.0.0.1", "10.0.0.2"], 1);
    let channel = open_channel(cma);
    let id = new_id(cma, &channel, RDMA_PS_TCP);
    bind(id, "10.0.0.2:7000").unwrap();
    assert!(daemons[0].asked().is_empty());
    assert_eq!(daemons[1].asked(), ["create id", "bind"]);
    let device = lock(&id.state).device.clone().unwrap();
    assert_eq!(device.name, daemons[1].name);
    let context = device.opened().unwrap().verbs.0;
    id.with_c(|c| {
        assert_eq!(c.verbs, context);
        assert!(!c.pd.is_null());
        assert_eq!(c.port_num, 1);
        // Safety: the only member of the union.
        let ibaddr = unsafe { c.route.addr.addr.ibaddr };
        assert_eq!(ibaddr.sgid.raw()[12..], [10, 0, 0, 2]);
    });
    assert_eq!(source(id), Some(addr("10.0.0.2:7000")));
    assert_eq!(bind(id, "10.0.0.2:7001"), Err(Errno::EINVAL), "bound once");

    let other = new_id(cma, &channel, RDMA_PS_TCP);
    assert_eq!(bind(other, "192.0.2.77:1"), Err(Errno(libc::EADDRNOTAVAIL)));
    id::destroy(other).unwrap();
    id::destroy(id).unwrap();
    assert_eq!(daemons[1].asked(), ["create id", "bind", "destroy id"]);
    assert!(journal().contains(&"dealloc pd".to_string()));
}

#[test]
fn options_set_before_the_device_are_applied_when_it_comes() {
    let (cma, daemons) = fake::cma(&["10.0.0.1"], 0);
    let channel = open_channel(cma);
    let id = new_id(cma, &channel, RDMA_PS_TCP);
    let set = |level, name, value: &[u8]| {
        // Safety: `value` holds its length in bytes.
        unsafe { id::set_option(id, level, name, value.as_ptr().cast(), value.len()) }
    };
    set(RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &[4]).unwrap();
    set(RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &[5]).unwrap();
    set(RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &[21]).unwrap();
    set(
        RDMA_OPTION_ID,
        RDMA_OPTION_ID_REUSEADDR,
        &1i32.to_ne_bytes(),
    )
    .unwrap();
    assert_eq!(
        set(RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &[1, 2]),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        set(RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &[1]),
        Err(Errno::EINVAL)
    );
    assert_eq!(set(RDMA_OPTION_ID, 99, &[1]), Err(Errno::ENOSYS));
    assert_eq!(set(7, 0, &[1]), Err(Errno::ENOSYS));
    assert_eq!(
        set(RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &[0; 64]),
        Err(Errno::EOPNOTSUPP)
    );
    assert!(daemons[0].asked().is_empty(), "no daemon id yet");

    bind(id, "10.0.0.1:7000").unwrap();
    let options: Vec<CmOption> = lock(&daemons[0].requests)
        .iter()
        .filter_map(|r| match r {
            CmRequest::SetOption { option, .. } => Some(*option),
            _ => None,
        })
        .collect();
    assert_eq!(
        options,
        [
            CmOption::Tos(5),
            CmOption::AckTimeout(21),
            CmOption::ReuseAddr(true)
        ]
    );
    assert_eq!(daemons[0].asked().last(), Some(&"bind"));
    set(RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &0i32.to_ne_bytes()).unwrap();
    assert_eq!(daemons[0].asked().last(), Some(&"set option"));
    daemons[0].refuse("set option", libc::EINVAL);
    assert_eq!(
        set(RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &[9]),
        Err(Errno::EINVAL)
    );
}

#[test]
fn a_bind_to_a_loopback_address_is_a_wildcard_bind() {
    // As the kernel's `cma_any_addr`: no device, every device asked, the address kept.
    let (cma, daemons) = fake::cma(&["10.0.0.1", "10.0.0.2"], 0);
    let channel = open_channel(cma);
    for text in ["127.0.0.1:7000", "[::1]:7001"] {
        let id = new_id(cma, &channel, RDMA_PS_TCP);
        bind(id, text).unwrap();
        id.with_c(|c| assert!(c.verbs.is_null(), "{text}: no device"));
        assert!(lock(&id.state).device.is_none(), "{text}");
        assert_eq!(source(id), Some(addr(text)));
        for daemon in &daemons {
            let requests = lock(&daemon.requests);
            match requests.last() {
                Some(CmRequest::Bind { addr: a, .. }) => {
                    assert_eq!(a.to_socket_addr(), Some(addr(text)), "{text}")
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        id::destroy(id).unwrap();
    }
}

#[test]
fn a_wildcard_bind_has_no_device_and_listens_on_every_device_on_one_port() {
    let (cma, daemons) = fake::cma(&["10.0.0.1", "10.0.0.2"], 0);
    let channel = open_channel(cma);
    let listener = new_id(cma, &channel, RDMA_PS_TCP);
    bind(listener, "0.0.0.0:0").unwrap();
    let ports: Vec<u16> = daemons
        .iter()
        .map(|d| {
            let requests = lock(&d.requests);
            match requests.last() {
                Some(CmRequest::Bind { addr, .. }) => addr.port,
                other => panic!("{other:?}"),
            }
        })
        .collect();
    assert_eq!(ports[0], 0, "the first daemon chooses the port");
    assert_ne!(ports[1], 0, "the others take it");
    assert_eq!(source(listener).map(|a| a.port()), Some(ports[1]));
    listener.with_c(|c| assert!(c.verbs.is_null(), "a wildcard bind has no device"));
    id::listen(listener, 10).unwrap();
    for daemon in &daemons {
        assert_eq!(daemon.asked(), ["create id", "bind", "listen"]);
    }

    // A request through the second device makes an id of that device.
    let daemon = &daemons[1];
    let listen_handle = lock(&listener.state).handles[1].id;
    let child_handle = daemon.new_id(listen_handle);
    lock(&daemon.infos).insert(
        child_handle,
        cm::CmIdInfo {
            route_resolved: true,
            path_mtu: 3,
            ..Default::default()
        },
    );
    let mut request = CmEventRecord {
        id: child_handle,
        listen_id: listen_handle,
        event: cm::event::CONNECT_REQUEST,
        qp_num: 0x1a,
        responder_resources: 1,
        initiator_depth: 2,
        private_data_len: 56,
        ..CmEventRecord::default()
    };
    request.private_data[..5].copy_from_slice(b"hello");
    request.local = CmSockAddr::from(addr("10.0.0.2:7000"));
    request.remote = CmSockAddr::from(addr("10.0.0.3:35151"));
    daemon.send(&request);
    let got = event::get(cma, &channel).unwrap();
    // Safety: an event just returned, live until acknowledged.
    let e = unsafe { *got };
    assert_eq!(e.event, RDMA_CM_EVENT_CONNECT_REQUEST);
    assert_eq!(e.listen_id, listener.as_c());
    let child = IdPrivate::lookup(cma, e.id).unwrap();
    assert_eq!(handle(child), child_handle);
    let device = lock(&child.state).device.clone().unwrap();
    assert_eq!(device.name, daemon.name);
    child.with_c(|c| {
        assert_eq!(c.verbs, device.opened().unwrap().verbs.0);
        assert_eq!(c.channel, channel.as_c());
        assert_eq!(c.route.num_paths, 1, "the route is the child's");
    });
    assert_eq!(source(child), Some(addr("10.0.0.2:7000")));
    // Safety: a connected port space's parameters.
    let conn = unsafe { e.param.conn };
    assert_eq!((conn.qp_num, conn.private_data_len), (0x1a, 56));
    assert_eq!((conn.responder_resources, conn.initiator_depth), (1, 2));
    // Safety: private data valid until the event is acknowledged.
    let private = unsafe { std::slice::from_raw_parts(conn.private_data.cast::<u8>(), 56) };
    assert_eq!(&private[..6], b"hello\0");
    event::ack(cma, got).unwrap();
    assert_eq!(
        event::ack(cma, got),
        Err(Errno::EINVAL),
        "acknowledged once"
    );
    id::destroy(child).unwrap();
    id::destroy(listener).unwrap();
}

#[test]
fn an_address_resolution_takes_the_device_on_the_route() {
    // 127.0.0.1 is reached from 127.0.0.1: the second device has it.
    let (cma, daemons) = fake::cma(&["10.0.0.1", "127.0.0.1"], 0);
    let channel = open_channel(cma);
    let id = new_id(cma, &channel, RDMA_PS_TCP);
    resolve(id, "127.0.0.1:7471").unwrap();
    assert!(daemons[0].asked().is_empty());
    assert_eq!(daemons[1].asked(), ["create id", "resolve address"]);
    match lock(&daemons[1].requests).last() {
        Some(CmRequest::ResolveAddr {
            src,
            dst,
            timeout_ms,
            ..
        }) => {
            assert_eq!(*src, CmSockAddr::NONE);
            assert_eq!(dst.to_socket_addr(), Some(addr("127.0.0.1:7471")));
            assert_eq!(*timeout_ms, 2000);
        }
        other => panic!("{other:?}"),
    }
    id.with_c(|c| assert!(c.verbs.is_null(), "the device comes with ADDR_RESOLVED"));
    daemons[1].send(&record(handle(id), cm::event::ADDR_RESOLVED, 0));
    let event = next(cma, &channel);
    assert_eq!(
        (event.event, event.status),
        (RDMA_CM_EVENT_ADDR_RESOLVED, 0)
    );
    id.with_c(|c| assert!(!c.verbs.is_null() && !c.pd.is_null()));
    assert_eq!(source(id), Some(addr("127.0.0.1:50000")));

    // The route, and its path record.
    id::resolve_route(id, 2000).unwrap();
    daemons[1].send(&record(handle(id), cm::event::ROUTE_RESOLVED, 0));
    assert_eq!(next(cma, &channel).event, RDMA_CM_EVENT_ROUTE_RESOLVED);
    id.with_c(|c| {
        assert_eq!(c.route.num_paths, 1);
        // Safety: the path record the library set.
        let path = unsafe { *c.route.path_rec };
        assert_eq!((path.mtu, path.hop_limit, path.numb_path), (3, 64, 1));
    });
    id::destroy(id).unwrap();
}

#[test]
fn the_only_device_resolves_what_no_device_is_on_the_route_to() {
    let (cma, daemons) = fake::cma(&["10.0.0.1"], 0);
    let channel = open_channel(cma);
    let id = new_id(cma, &channel, RDMA_PS_TCP);
    resolve(id, "127.0.0.1:7471").unwrap();
    assert_eq!(daemons[0].asked(), ["create id", "resolve address"]);
    // An address the daemon cannot say is an ADDR_ERROR.
    daemons[0].refuse("query", libc::EHOSTUNREACH);
    daemons[0].send(&record(handle(id), cm::event::ADDR_RESOLVED, 0));
    let event = next(cma, &channel);
    assert_eq!(event.event, RDMA_CM_EVENT_ADDR_ERROR);
    assert_eq!(event.status, -libc::EHOSTUNREACH);
    id::destroy(id).unwrap();

    let (cma, _) = fake::cma(&["10.0.0.1", "10.0.0.2"], 0);
    let channel = open_channel(cma);
    let id = new_id(cma, &channel, RDMA_PS_TCP);
    assert_eq!(
        resolve(id, "127.0.0.1:7471"),
        Err(Errno::ENODEV),
        "which one?"
    );
}

#[test]
fn a_destroy_waits_until_every_event_of_the_id_is_acknowledged() {
    let (cma, daemons) = fake::cma(&["10.0.0.1"], 0);
    let channel = open_channel(cma);
    let id = new_id(cma, &channel, RDMA_PS_TCP);
    bind(id, "10.0.0.1:7000").unwrap();
    daemons[0].send(&record(handle(id), cm::event::DISCONNECTED, 0));
    let event = event::get(cma, &channel).unwrap() as usize;
    let address = id.as_c() as usize;
    let destroyer = std::thread::spawn(move || {
        // Safety: the id is live until this destroy returns.
        let id = unsafe { &*(address as *const IdPrivate) };
        id::destroy(id)
    });
    std::thread::sleep(Duration::from_millis(100));
    assert!(!destroyer.is_finished(), "waits for the acknowledgement");
    event::ack(cma, event as *mut rdma_cm_event).unwrap();
    assert_eq!(destroyer.join().unwrap(), Ok(()));
    // A record of the destroyed id is dropped.
    daemons[0].send(&record(100, cm::event::DISCONNECTED, 0));
    assert_eq!(event::get(cma, &channel), Err(Errno::EAGAIN));
}

#[test]
fn destroying_a_channel_takes_its_ids_daemon_ids_along() {
    let (cma, daemons) = fake::cma(&["10.0.0.1"], 0);
    let channel = open_channel(cma);
    let other = open_channel(cma);
    let (first, second) = (
        new_id(cma, &channel, RDMA_PS_TCP),
        new_id(cma, &channel, RDMA_PS_TCP),
    );
    let elsewhere = new_id(cma, &other, RDMA_PS_TCP);
    for (id, port) in [(first, 7000), (second, 7001), (elsewhere, 7002)] {
        bind(id, &format!("10.0.0.1:{port}")).unwrap();
    }
    let before = daemons[0].asked().len();
    id::close_channel(cma, &channel);
    assert_eq!(
        daemons[0].asked()[before..],
        ["destroy id", "destroy id", "destroy channel"],
        "as the kernel does when rdma_cm's descriptor closes"
    );
    assert_eq!(
        Channel::lookup(cma, channel.as_c()).err(),
        Some(Errno::EINVAL)
    );
    assert!(
        elsewhere.handle().is_ok(),
        "an id of another channel keeps its own"
    );
    id::destroy(first).unwrap();
    id::destroy(second).unwrap();
    assert_eq!(
        daemons[0].asked().len(),
        before + 3,
        "nothing left to ask for them"
    );
}

#[test]
fn a_migrated_id_reports_to_its_new_channel() {
    let (cma, daemons) = fake::cma(&["10.0.0.1"], 0);
    let first = open_channel(cma);
    let second = open_channel(cma);
    let id = new_id(cma, &first, RDMA_PS_TCP);
    bind(id, "10.0.0.1:7000").unwrap();
    id::migrate(id, Some(second.clone())).unwrap();
    assert_eq!(daemons[0].asked().last(), Some(&"migrate id"));
    id.with_c(|c| assert_eq!(c.channel, second.as_c()));
    daemons[0].send(&record(handle(id), cm::event::DISCONNECTED, 0));
    assert_eq!(event::get(cma, &first), Err(Errno::EAGAIN));
    assert_eq!(next(cma, &second).id, id.as_c());
    // To a channel of its own: synchronous, and cannot be made so twice.
    id::migrate(id, None).unwrap();
    assert!(lock(&id.state).sync);
    assert_eq!(id::migrate(id, None), Err(Errno::EINVAL));
}

#[test]
fn a_request_for_a_listener_gone_is_dropped_and_its_id_destroyed() {
    let (cma, daemons) = fake::cma(&["10.0.0.1"], 0);
    let channel = open_channel(cma);
    let listener = new_id(cma, &channel, RDMA_PS_TCP);
    bind(listener, "10.0.0.1:7000").unwrap();
    let listen_handle = handle(listener);
    let mut request = record(
        daemons[0].new_id(listen_handle),
        cm::event::CONNECT_REQUEST,
        0,
    );
    request.listen_id = listen_handle + 1000;
    daemons[0].send_raw(1, zerocopy::IntoBytes::as_bytes(&request));
    daemons[0].send_raw(1, b"too short");
    assert_eq!(event::get(cma, &channel), Err(Errno::EAGAIN));
    assert_eq!(daemons[0].asked().last(), Some(&"destroy id"));
}

#[test]
fn the_devices_are_the_live_ones_opened_once() {
    let (cma, _) = fake::cma(&["10.0.0.1", "10.0.0.2"], 2);
    let mut count = 0;
    let list = cma.get_devices(Some(&mut count)).unwrap();
    assert_eq!(count, 2);
    // Safety: the list has `count` entries and a NULL.
    let entries = unsafe { std::slice::from_raw_parts(list, 3) };
    assert!(!entries[0].is_null() && !entries[1].is_null() && entries[2].is_null());
    let again = cma.get_devices(None).unwrap();
    // Safety: as above.
    assert_eq!(unsafe { *again }, entries[0], "the same contexts");
    cma.free_devices(list).unwrap();
    cma.free_devices(again).unwrap();
    assert_eq!(cma.free_devices(list), Err(Errno::EINVAL));

    let (nothing, _) = fake::cma(&[], 0);
    let mut count = -1;
    assert_eq!(nothing.get_devices(Some(&mut count)), Err(Errno::ENODEV));
    assert_eq!(count, 0);
}

#[test]
fn event_names_are_librdmacms() {
    assert_eq!(event::name(0), c"RDMA_CM_EVENT_ADDR_RESOLVED");
    assert_eq!(event::name(15), c"RDMA_CM_EVENT_TIMEWAIT_EXIT");
    assert_eq!(event::name(16), c"UNKNOWN EVENT");
    assert_eq!(event::name(-1), c"UNKNOWN EVENT");
}
