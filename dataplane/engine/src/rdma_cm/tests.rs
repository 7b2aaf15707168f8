//! The service between two ports exchanging QP1 frames, and in loopback.

use std::os::fd::AsRawFd;

use super::*;
use verbs_shm::cm::{event, port_space};

const PID: i32 = 4242;

struct Host {
    svc: CmService,
    app: OwnedFd,
    channel: u32,
    ip: IpAddr,
}

/// A port at `ip` with MAC `mac` whose resolver answers `peer_mac` for everything,
/// with one application connection (1) and its event channel.
fn host(ip: [u8; 4], mac: u8, peer_mac: u8) -> Host {
    host_with(&[IpAddr::from(ip)], mac, peer_mac)
}

/// [`host`] with these addresses, the first of them its `ip`.
fn host_with(ips: &[IpAddr], mac: u8, peer_mac: u8) -> Host {
    let port = CmPort {
        mac: [2, 0, 0, 0, 0, mac],
        gids: ips.iter().map(|ip| Gid::from_ip(*ip)).collect(),
        active_mtu: IbMtu::Mtu1024,
    };
    let resolve: Resolver = Arc::new(move |_| Ok(Some([2, 0, 0, 0, 0, peer_mac])));
    let mut svc = CmService::new(0x0200_00ff_fe00_0000 | u64::from(mac), port, resolve).unwrap();
    let (app, daemon) = nix::sys::socket::socketpair(
        nix::sys::socket::AddressFamily::Unix,
        nix::sys::socket::SockType::SeqPacket,
        None,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
    )
    .unwrap();
    let channel = match svc
        .handle(asker(1), CmRequest::Channel, vec![daemon])
        .unwrap()
    {
        CmReply::Channel { channel } => channel,
        other => panic!("{other:?}"),
    };
    Host {
        svc,
        app,
        channel,
        ip: ips[0],
    }
}

fn owns(qpn: u32) -> Option<i32> {
    (qpn < 0x100).then_some(PID)
}

/// The routing table of the tests: empty.
fn no_route(destination: IpAddr) -> RouteOut {
    RouteOut::Unreachable(format!("no route to {destination}"))
}

fn asker(conn: u64) -> Asker<'static> {
    Asker {
        conn,
        pid: PID,
        qp_owner: &owns,
        route: &no_route,
    }
}

fn id(h: &mut Host, ps: u16, qp_type: u32) -> u64 {
    let r = h.svc.handle(
        asker(1),
        CmRequest::CreateId {
            channel: h.channel,
            port_space: ps,
            qp_type,
        },
        vec![],
    );
    match r.unwrap() {
        CmReply::Id { id } => id,
        other => panic!("{other:?}"),
    }
}

fn call(svc: &mut CmService, r: CmRequest) -> Result<CmReply, Refusal> {
    svc.handle(asker(1), r, vec![])
}

/// The events waiting on a host's channel.
fn events(h: &Host) -> Vec<CmEventRecord> {
    let mut v = Vec::new();
    loop {
        let mut r = CmEventRecord::default();
        match nix::sys::socket::recv(
            h.app.as_raw_fd(),
            zerocopy::IntoBytes::as_mut_bytes(&mut r),
            nix::sys::socket::MsgFlags::MSG_DONTWAIT,
        ) {
            Ok(n) => {
                assert_eq!(n, size_of::<CmEventRecord>());
                v.push(r);
            }
            Err(_) => return v,
        }
    }
}

/// Moves frames between two hosts until neither has one to send.
fn exchange(a: &mut Host, b: &mut Host) {
    loop {
        let mut moved = false;
        while let Some(f) = a.svc.poll_frame() {
            b.svc.handle_frame(&f);
            moved = true;
        }
        while let Some(f) = b.svc.poll_frame() {
            a.svc.handle_frame(&f);
            moved = true;
        }
        if !moved {
            return;
        }
    }
}

/// Waits for a host's resolutions and applies them.
fn resolutions(h: &mut Host) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = [PollFd::new(h.svc.bell(), PollFlags::POLLIN)];
    assert_eq!(
        poll(&mut fds, PollTimeout::from(5000u16)),
        Ok(1),
        "no resolution"
    );
    h.svc.on_resolved();
}

fn sockaddr(ip: IpAddr, port: u16) -> CmSockAddr {
    CmSockAddr::from(SocketAddr::new(ip, port))
}

fn param(qpn: u32) -> CmConnParam {
    CmConnParam {
        qp_num: qpn,
        retry_count: 7,
        rnr_retry_count: 7,
        responder_resources: 1,
        initiator_depth: 1,
        private_data: b"hello".to_vec(),
        ..CmConnParam::default()
    }
}

/// A listener of `h` on TCP `port` with `backlog`.
fn listening(h: &mut Host, port: u16, backlog: i32) -> u64 {
    let ip = h.ip;
    listening_on(h, ip, port, backlog)
}

/// A listener bound to `ip` and `port`.
fn listening_on(h: &mut Host, ip: IpAddr, port: u16, backlog: i32) -> u64 {
    let listener = id(h, port_space::TCP, 2);
    call(
        &mut h.svc,
        CmRequest::Bind {
            id: listener,
            addr: sockaddr(ip, port),
        },
    )
    .unwrap();
    call(
        &mut h.svc,
        CmRequest::Listen {
            id: listener,
            backlog,
        },
    )
    .unwrap();
    listener
}

/// rping's steps, between two daemons exchanging QP1 frames.
#[test]
fn a_connection_is_established_and_disconnected_between_two_ports() {
    let mut a = host([10, 0, 0, 1], 1, 2);
    let mut b = host([10, 0, 0, 2], 2, 1);
    let listener = listening(&mut b, 7174, 8);

    let ca = id(&mut a, port_space::TCP, 2);
    call(
        &mut a.svc,
        CmRequest::ResolveAddr {
            id: ca,
            src: CmSockAddr::NONE,
            dst: sockaddr(b.ip, 7174),
            timeout_ms: 2000,
        },
    )
    .unwrap();
    resolutions(&mut a);
    let e = events(&a);
    assert_eq!(e.len(), 1);
    assert_eq!((e[0].event, e[0].status), (event::ADDR_RESOLVED, 0));
    assert_eq!(e[0].local.ip(), Some(a.ip), "bound to the port's address");
    call(
        &mut a.svc,
        CmRequest::ResolveRoute {
            id: ca,
            timeout_ms: 2000,
        },
    )
    .unwrap();
    assert_eq!(events(&a)[0].event, event::ROUTE_RESOLVED);
    let info = match call(&mut a.svc, CmRequest::Query { id: ca }).unwrap() {
        CmReply::Info(i) => i,
        other => panic!("{other:?}"),
    };
    assert!(info.route_resolved && info.path_mtu == 3, "{info:?}");
    assert_ne!(info.local.port, 0, "an ephemeral port");

    call(
        &mut a.svc,
        CmRequest::Connect {
            id: ca,
            param: param(0x11),
        },
    )
    .unwrap();
    assert_eq!(
        a.svc.counters().gsi_sent,
        0,
        "the REQ waits for the next hop"
    );
    resolutions(&mut a);
    exchange(&mut a, &mut b);
    let req = events(&b);
    assert_eq!(req.len(), 1);
    assert_eq!(req[0].event, event::CONNECT_REQUEST);
    assert_eq!(req[0].listen_id, listener);
    assert_eq!(req[0].qp_num, 0x11);
    assert_eq!(&req[0].private_data[..5], b"hello");
    assert_eq!(req[0].remote.ip(), Some(a.ip));
    let cb = req[0].id;

    call(
        &mut b.svc,
        CmRequest::Accept {
            id: cb,
            param: param(0x22),
        },
    )
    .unwrap();
    exchange(&mut a, &mut b);
    let rep = events(&a);
    assert_eq!(rep[0].event, event::CONNECT_RESPONSE);
    assert_eq!(rep[0].qp_num, 0x22);
    let rtr = a.svc.init_qp_attr(1, ca, 2).unwrap();
    assert_eq!(rtr.0.dest_qpn, Qpn::new(0x22));
    assert_eq!(rtr.0.path.sgid_index, 0);
    call(&mut a.svc, CmRequest::Establish { id: ca }).unwrap();
    exchange(&mut a, &mut b);
    assert_eq!(events(&b)[0].event, event::ESTABLISHED);

    call(&mut a.svc, CmRequest::Disconnect { id: ca }).unwrap();
    exchange(&mut a, &mut b);
    assert_eq!(events(&b)[0].event, event::DISCONNECTED);
    call(&mut b.svc, CmRequest::Disconnect { id: cb }).unwrap();
    exchange(&mut a, &mut b);
    assert_eq!(events(&a)[0].event, event::DISCONNECTED);
    assert!(a.svc.counters().gsi_sent >= 3 && b.svc.counters().gsi_rcvd >= 3);
    assert_eq!(b.svc.counters().gsi_malformed, 0);
}

/// Both ends on one port: nothing goes on the wire.
#[test]
fn loopback_connections_never_leave_the_port() {
    let mut h = host([10, 0, 0, 1], 1, 9);
    let ip = h.ip;
    connect_on_one_port(&mut h, ip, ip, 20079);
}

/// Loopback addresses: a listener bound to 127.0.0.1 is a wildcard one, as in the kernel's
/// rdma_cm, and a destination of 127.0.0.1 is the port itself (where the kernel's route
/// fails on RoCE).
#[test]
fn a_loopback_destination_is_the_port_itself() {
    let mut h = host([10, 0, 0, 1], 1, 9);
    let loopback = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    connect_on_one_port(&mut h, loopback, loopback, 20080);
    let ip = h.ip;
    connect_on_one_port(&mut h, loopback, ip, 20081);
    // The wildcard as a destination is the port too.
    let wildcard = IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);
    connect_on_one_port(&mut h, ip, wildcard, 20082);
}

/// A listener bound to `bound` and an id of the same port connecting to `dst`: the
/// request reaches the listener without leaving the port.
fn connect_on_one_port(h: &mut Host, bound: IpAddr, dst: IpAddr, port: u16) {
    let listener = listening_on(h, bound, port, 1);
    let c = id(h, port_space::TCP, 2);
    call(
        &mut h.svc,
        CmRequest::ResolveAddr {
            id: c,
            src: CmSockAddr::NONE,
            dst: sockaddr(dst, port),
            timeout_ms: 2000,
        },
    )
    .unwrap();
    call(
        &mut h.svc,
        CmRequest::ResolveRoute {
            id: c,
            timeout_ms: 2000,
        },
    )
    .unwrap();
    call(
        &mut h.svc,
        CmRequest::Connect {
            id: c,
            // A QP of its own: a second REQ from the same QP would be a stale connection.
            param: param(u32::from(port % 0x100)),
        },
    )
    .unwrap();
    let e = events(h);
    let kinds: Vec<u32> = e.iter().map(|e| e.event).collect();
    assert_eq!(
        kinds,
        [
            event::ADDR_RESOLVED,
            event::ROUTE_RESOLVED,
            event::CONNECT_REQUEST
        ],
        "{bound} listening, {dst} asked"
    );
    assert_eq!(e[2].listen_id, listener);
    assert!(h.svc.poll_frame().is_none());
    assert!(h.svc.counters().gsi_loopback >= 1);
}

/// A connection's owner goes away: the CM rejects for it.
#[test]
fn a_closed_connection_rejects_its_pending_requests() {
    let mut a = host([10, 0, 0, 1], 1, 2);
    let mut b = host([10, 0, 0, 2], 2, 1);
    let listener = id(&mut b, port_space::TCP, 2);
    call(
        &mut b.svc,
        CmRequest::Bind {
            id: listener,
            addr: sockaddr(b.ip, 1),
        },
    )
    .unwrap();
    call(
        &mut b.svc,
        CmRequest::Listen {
            id: listener,
            backlog: 1,
        },
    )
    .unwrap();
    let ca = id(&mut a, port_space::TCP, 2);
    call(
        &mut a.svc,
        CmRequest::ResolveAddr {
            id: ca,
            src: CmSockAddr::NONE,
            dst: sockaddr(b.ip, 1),
            timeout_ms: 1,
        },
    )
    .unwrap();
    resolutions(&mut a);
    call(
        &mut a.svc,
        CmRequest::ResolveRoute {
            id: ca,
            timeout_ms: 1,
        },
    )
    .unwrap();
    call(
        &mut a.svc,
        CmRequest::Connect {
            id: ca,
            param: param(0x11),
        },
    )
    .unwrap();
    resolutions(&mut a);
    exchange(&mut a, &mut b);
    assert_eq!(events(&b)[0].event, event::CONNECT_REQUEST);
    b.svc.connection_closed(1);
    exchange(&mut a, &mut b);
    let e: Vec<(u32, i32)> = events(&a)
        .iter()
        .map(|e| (e.event, e.status))
        .filter(|e| e.0 == event::REJECTED)
        .collect();
    assert_eq!(e.len(), 1, "REJECTED with the consumer's reason");
}

#[test]
fn requests_are_refused_with_the_errno_of_librdmacm() {
    let mut h = host([10, 0, 0, 1], 1, 2);
    let err = |r: Result<CmReply, Refusal>| r.unwrap_err().errno;
    assert_eq!(
        err(call(&mut h.svc, CmRequest::Listen { id: 99, backlog: 1 })),
        libc::EINVAL
    );
    assert_eq!(
        err(call(
            &mut h.svc,
            CmRequest::CreateId {
                channel: 77,
                port_space: port_space::TCP,
                qp_type: 2
            }
        )),
        libc::EINVAL,
        "an unknown channel"
    );
    let c = id(&mut h, port_space::TCP, 2);
    // Another connection cannot touch it.
    let other = h
        .svc
        .handle(asker(2), CmRequest::DestroyId { id: c }, vec![]);
    assert_eq!(other.unwrap_err().errno, libc::EINVAL);
    // A QP of another process.
    call(
        &mut h.svc,
        CmRequest::Bind {
            id: c,
            addr: sockaddr(h.ip, 0),
        },
    )
    .unwrap();
    let foreign = call(
        &mut h.svc,
        CmRequest::Connect {
            id: c,
            param: param(0x5000),
        },
    );
    assert_eq!(foreign.unwrap_err().errno, libc::EINVAL);
    assert_eq!(
        err(call(
            &mut h.svc,
            CmRequest::DestroyChannel { channel: h.channel }
        )),
        libc::EBUSY
    );
    call(&mut h.svc, CmRequest::DestroyId { id: c }).unwrap();
    call(&mut h.svc, CmRequest::DestroyChannel { channel: h.channel }).unwrap();
}

/// The heap this thread holds: what it allocated and has not freed. Counted per thread
/// so that tests running beside each other do not disturb one another's figures.
mod heap {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static LIVE: Cell<isize> = const { Cell::new(0) };
    }

    fn add(bytes: isize) {
        // A thread being torn down has no counter left: nothing to count then.
        let _ = LIVE.try_with(|l| l.set(l.get() + bytes));
    }

    struct Counting;

    // Safety: every call goes to the system allocator unchanged; the counting beside it
    // allocates nothing.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            add(layout.size() as isize);
            // Safety: the caller's contract is passed on as it is.
            unsafe { System.alloc(layout) }
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            add(layout.size() as isize);
            // Safety: as for `alloc`.
            unsafe { System.alloc_zeroed(layout) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            add(-(layout.size() as isize));
            // Safety: as for `alloc`.
            unsafe { System.dealloc(ptr, layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            add(new_size as isize - layout.size() as isize);
            // Safety: as for `alloc`.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    /// Bytes this thread holds on the heap.
    pub(super) fn live() -> isize {
        LIVE.with(Cell::get)
    }
}

/// What a listening daemon holds for each connection request its application has not
/// answered yet: the CM's connection (kept to recognise the REQ's retransmissions), the
/// new id, and the CONNECT_REQUEST event with its private data while it waits for the
/// application to read it. The figure is printed; the test bounds it, well above what it
/// is, so that a leak or a careless copy per request shows.
#[test]
fn a_pending_connection_request_costs_a_listening_daemon_little_memory() {
    const PENDING: usize = 1000;
    let mut a = host([10, 0, 0, 1], 1, 2);
    let mut b = host([10, 0, 0, 2], 2, 1);
    listening(&mut b, 7174, 0);
    // A's REQs, made before anything is counted.
    let mut reqs = Vec::with_capacity(PENDING);
    for k in 0..PENDING {
        let c = id(&mut a, port_space::TCP, 2);
        call(
            &mut a.svc,
            CmRequest::ResolveAddr {
                id: c,
                src: CmSockAddr::NONE,
                dst: sockaddr(b.ip, 7174),
                timeout_ms: 2000,
            },
        )
        .unwrap();
        resolutions(&mut a);
        call(
            &mut a.svc,
            CmRequest::ResolveRoute {
                id: c,
                timeout_ms: 2000,
            },
        )
        .unwrap();
        // Each its own QP: the same QP asking twice would be a stale connection.
        let asking = Asker {
            qp_owner: &|_| Some(PID),
            ..asker(1)
        };
        a.svc
            .handle(
                asking,
                CmRequest::Connect {
                    id: c,
                    param: param(0x1000 + k as u32),
                },
                vec![],
            )
            .unwrap();
        if a.svc.counters().gsi_sent == k as u64 {
            resolutions(&mut a);
        }
        while let Some(f) = a.svc.poll_frame() {
            reqs.push(f);
        }
    }
    assert_eq!(reqs.len(), PENDING);
    let before = heap::live();
    for f in &reqs {
        b.svc.handle_frame(f);
    }
    // The MRAs B answers with leave at once on a real port.
    while b.svc.poll_frame().is_some() {}
    let held = heap::live() - before;
    let in_socket = events(&b)
        .iter()
        .filter(|e| e.event == event::CONNECT_REQUEST)
        .count();
    let on_heap: usize = b.svc.channels.values().map(|c| c.backlog.len()).sum();
    assert_eq!(
        in_socket + on_heap,
        PENDING,
        "every request reached the application"
    );
    let per = held / PENDING as isize;
    println!(
        "a listening daemon holds {held} bytes of heap for {PENDING} pending connection \
         requests: {per} bytes each; their {}-byte events: {in_socket} in the channel's \
         socket (kernel memory), {on_heap} on the heap (counted)",
        size_of::<CmEventRecord>()
    );
    assert!(per > 0 && per < 8192, "{per} bytes per pending request");
}

/// `rdma_bind_addr` to the wildcard (or 127.0.0.1) with a port, then `rdma_resolve_addr`:
/// the id takes the route's source address on the port it holds, as Linux's does.
#[test]
fn an_id_bound_to_the_wildcard_resolves_from_the_ports_address_on_its_port() {
    for any in [
        IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
    ] {
        let mut a = host([10, 0, 0, 1], 1, 2);
        let c = id(&mut a, port_space::TCP, 2);
        call(
            &mut a.svc,
            CmRequest::Bind {
                id: c,
                addr: sockaddr(any, 7000),
            },
        )
        .unwrap();
        call(
            &mut a.svc,
            CmRequest::ResolveAddr {
                id: c,
                src: CmSockAddr::NONE,
                dst: sockaddr(IpAddr::from([10, 0, 0, 2]), 7174),
                timeout_ms: 2000,
            },
        )
        .unwrap_or_else(|e| panic!("bound to {any}: {e:?}"));
        resolutions(&mut a);
        let e = events(&a);
        assert_eq!(
            (e[0].event, e[0].status),
            (event::ADDR_RESOLVED, 0),
            "{any}"
        );
        assert_eq!(e[0].local.ip(), Some(a.ip), "{any}");
        assert_eq!(e[0].local.port, 7000, "{any}: the port it holds");
        // An IPv4 id resolves no IPv6 destination (EINVAL, as Linux).
        let v6 = id(&mut a, port_space::TCP, 2);
        call(
            &mut a.svc,
            CmRequest::Bind {
                id: v6,
                addr: sockaddr(any, 7001),
            },
        )
        .unwrap();
        let refused = call(
            &mut a.svc,
            CmRequest::ResolveAddr {
                id: v6,
                src: CmSockAddr::NONE,
                dst: sockaddr("fd00::2".parse().unwrap(), 7174),
                timeout_ms: 2000,
            },
        )
        .unwrap_err();
        assert_eq!(refused.errno, libc::EINVAL, "{any}: {refused:?}");
    }
}

/// The group the multicast tests join (pyverbs' rdmacm tests take 230.x.y.z).
const GROUP: [u8; 4] = [230, 1, 2, 3];

/// A UDP id of `h` bound to `ip` (port 0: any).
fn ud_bound(h: &mut Host, ip: IpAddr) -> u64 {
    let c = id(h, port_space::UDP, 4);
    call(
        &mut h.svc,
        CmRequest::Bind {
            id: c,
            addr: sockaddr(ip, 0),
        },
    )
    .unwrap();
    c
}

fn resolve_to(h: &mut Host, c: u64, dst: IpAddr) -> Result<CmReply, Refusal> {
    call(
        &mut h.svc,
        CmRequest::ResolveAddr {
            id: c,
            src: CmSockAddr::NONE,
            dst: sockaddr(dst, 0),
            timeout_ms: 2000,
        },
    )
}

fn join(h: &mut Host, c: u64, join: u32, group: IpAddr, flags: u32) -> Result<CmReply, Refusal> {
    call(
        &mut h.svc,
        CmRequest::JoinMulticast {
            id: c,
            join,
            group: sockaddr(group, 0),
            flags,
        },
    )
}

fn stat(h: &Host, name: &str) -> u64 {
    h.svc
        .stats()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no counter {name}"))
}

/// `rdma_resolve_addr` to a group from an id with an address of its own: as the kernel
/// routes a group out of the interface it is asked to, no route is looked up (the tests'
/// table has none) and the address resolves.
#[test]
fn a_bound_id_resolves_a_multicast_group_without_a_route() {
    let mut h = host([10, 0, 0, 1], 1, 2);
    let ip = h.ip;
    let c = ud_bound(&mut h, ip);
    resolve_to(&mut h, c, IpAddr::from(GROUP)).unwrap();
    resolutions(&mut h);
    let e = events(&h);
    assert_eq!((e[0].event, e[0].status), (event::ADDR_RESOLVED, 0));
    assert_eq!(e[0].remote.ip(), Some(IpAddr::from(GROUP)));
    assert_eq!(e[0].local.ip(), Some(ip));
    // The source given instead of a bound address does the same.
    let d = id(&mut h, port_space::UDP, 4);
    call(
        &mut h.svc,
        CmRequest::ResolveAddr {
            id: d,
            src: sockaddr(ip, 0),
            dst: sockaddr(IpAddr::from(GROUP), 0),
            timeout_ms: 2000,
        },
    )
    .unwrap();
    resolutions(&mut h);
    assert_eq!(events(&h)[0].event, event::ADDR_RESOLVED);
}

/// An id without an address of its own resolves a group as the kernel's route to it says.
#[test]
fn an_id_without_an_address_resolves_a_group_by_its_route() {
    let second = IpAddr::from([10, 0, 0, 7]);
    let mut h = host_with(&[IpAddr::from([10, 0, 0, 1]), second], 1, 2);
    let group = IpAddr::from(GROUP);
    let resolve = |h: &mut Host, route: &dyn Fn(IpAddr) -> RouteOut| {
        let c = id(h, port_space::UDP, 4);
        let asker = Asker { route, ..asker(1) };
        let request = CmRequest::ResolveAddr {
            id: c,
            src: CmSockAddr::NONE,
            dst: sockaddr(group, 0),
            timeout_ms: 2000,
        };
        h.svc.handle(asker, request, vec![])
    };
    // No route: the call fails at once, as `rdma_resolve_ip` does.
    let refused = resolve(&mut h, &no_route).unwrap_err();
    assert_eq!(refused.errno, libc::ENETUNREACH, "{refused:?}");
    assert!(events(&h).is_empty());
    // Out of another interface: no device there.
    resolve(&mut h, &|_| RouteOut::Elsewhere("eth0".into())).unwrap();
    let e = events(&h);
    assert_eq!(
        (e[0].event, e[0].status),
        (event::ADDR_ERROR, -libc::ENODEV)
    );
    // Out of this port, from the source the route prefers.
    resolve(&mut h, &|_| RouteOut::Port(Some(second))).unwrap();
    resolutions(&mut h);
    let e = events(&h);
    assert_eq!((e[0].event, e[0].status), (event::ADDR_RESOLVED, 0));
    assert_eq!(e[0].local.ip(), Some(second));
    assert_eq!(e[0].sgid_index, 1);
}

/// `rdma_join_multicast` after `rdma_resolve_addr`, as mckey and pyverbs join:
/// `MULTICAST_JOIN` at once with the group's address vector, naming the join.
#[test]
fn a_join_reports_multicast_join_with_the_groups_address_vector() {
    let ip = IpAddr::from([10, 0, 0, 1]);
    let mut h = host_with(&[IpAddr::from([10, 0, 0, 9]), ip], 1, 2);
    let c = id(&mut h, port_space::UDP, 4);
    call(
        &mut h.svc,
        CmRequest::SetOption {
            id: c,
            option: CmOption::Tos(32),
        },
    )
    .unwrap();
    call(
        &mut h.svc,
        CmRequest::Bind {
            id: c,
            addr: sockaddr(ip, 0),
        },
    )
    .unwrap();
    resolve_to(&mut h, c, IpAddr::from(GROUP)).unwrap();
    resolutions(&mut h);
    assert_eq!(events(&h)[0].event, event::ADDR_RESOLVED);

    join(&mut h, c, 7, IpAddr::from(GROUP), 0).unwrap();
    let e = events(&h);
    assert_eq!(e.len(), 1, "{e:?}");
    let r = &e[0];
    assert_eq!((r.id, r.event, r.status), (c, event::MULTICAST_JOIN, 0));
    assert_eq!((r.ud, r.join), (1, 7));
    let mut mgid = [0u8; 16];
    mgid[10..12].copy_from_slice(&[0xff, 0xff]);
    mgid[12..].copy_from_slice(&GROUP);
    assert_eq!(r.dgid, mgid, "the IPv4-mapped group");
    assert_eq!(r.sgid_index, 1, "the index of the id's GID");
    assert_eq!(r.hop_limit, 64, "IPV6_DEFAULT_HOPLIMIT");
    assert_eq!(
        (r.traffic_class, r.flow_label),
        (0, 0),
        "Linux takes no TOS for a group"
    );
    assert_eq!((r.qp_num, r.qkey), (0xFF_FFFF, 0x0123_4567));
    assert_eq!(r.private_data_len, 0);

    // Send-only, on an id that is only bound (ADDR_BOUND), another group.
    let d = ud_bound(&mut h, ip);
    join(&mut h, d, 1, IpAddr::from([239, 0, 0, 1]), 1).unwrap();
    let e = events(&h);
    assert_eq!(
        (e[0].id, e[0].event, e[0].join),
        (d, event::MULTICAST_JOIN, 1)
    );
    assert_eq!(e[0].dgid[12..], [239, 0, 0, 1]);
    assert_eq!((stat(&h, "cm_mc_joins"), stat(&h, "cm_mc_joined")), (2, 2));

    // The id's address gone from the port since it was bound: no address vector sends
    // from it, and the join is a MULTICAST_ERROR.
    h.svc.update_port(CmPort {
        mac: [2, 0, 0, 0, 0, 1],
        gids: vec![Gid::from_ip(IpAddr::from([10, 0, 0, 9]))],
        active_mtu: IbMtu::Mtu1024,
    });
    join(&mut h, d, 2, IpAddr::from(GROUP), 0).unwrap();
    let e = events(&h);
    assert_eq!(
        (e[0].event, e[0].status, e[0].join),
        (event::MULTICAST_ERROR, -libc::EADDRNOTAVAIL, 2)
    );
}

/// What Linux refuses (`rdma_join_multicast`, `cma_iboe_join_multicast`, ucma's checks),
/// with its errno, and nothing joined.
#[test]
fn joins_are_refused_as_linux_refuses_them() {
    let mut h = host([10, 0, 0, 1], 1, 2);
    let ip = h.ip;
    let group = IpAddr::from(GROUP);
    let errno = |r: Result<CmReply, Refusal>| r.unwrap_err().errno;

    let idle = id(&mut h, port_space::UDP, 4);
    assert_eq!(
        errno(join(&mut h, idle, 1, group, 0)),
        libc::EINVAL,
        "no device"
    );
    let wildcard = ud_bound(&mut h, IpAddr::from([0, 0, 0, 0]));
    assert_eq!(
        errno(join(&mut h, wildcard, 1, group, 0)),
        libc::EINVAL,
        "bound to the wildcard: no device"
    );
    let rc = id(&mut h, port_space::TCP, 2);
    call(
        &mut h.svc,
        CmRequest::Bind {
            id: rc,
            addr: sockaddr(ip, 0),
        },
    )
    .unwrap();
    assert_eq!(errno(join(&mut h, rc, 1, group, 0)), libc::EINVAL, "RC");

    let c = ud_bound(&mut h, ip);
    assert_eq!(
        errno(join(&mut h, c, 1, IpAddr::from([0, 0, 0, 0]), 0)),
        libc::EINVAL
    );
    assert_eq!(
        errno(join(&mut h, c, 1, "ff0e::1".parse().unwrap(), 0)),
        524,
        "IPv6 on RoCE v2: ENOTSUPP"
    );
    assert_eq!(errno(join(&mut h, c, 1, group, 2)), libc::EINVAL, "flags");
    let no_family = call(
        &mut h.svc,
        CmRequest::JoinMulticast {
            id: c,
            join: 1,
            group: CmSockAddr::NONE,
            flags: 0,
        },
    );
    assert_eq!(errno(no_family), libc::EINVAL);
    assert_eq!(errno(join(&mut h, c, 0, group, 0)), libc::EINVAL, "key 0");
    assert_eq!(errno(join(&mut h, 999, 1, group, 0)), libc::EINVAL, "no id");

    // While its address is being resolved (RDMA_CM_ADDR_QUERY), and once its route is.
    resolve_to(&mut h, c, IpAddr::from([10, 0, 0, 2])).unwrap();
    assert_eq!(
        errno(join(&mut h, c, 1, group, 0)),
        libc::EINVAL,
        "resolving"
    );
    resolutions(&mut h);
    call(
        &mut h.svc,
        CmRequest::ResolveRoute {
            id: c,
            timeout_ms: 2000,
        },
    )
    .unwrap();
    assert_eq!(
        errno(join(&mut h, c, 1, group, 0)),
        libc::EINVAL,
        "route resolved"
    );

    let listener = ud_bound(&mut h, ip);
    call(
        &mut h.svc,
        CmRequest::Listen {
            id: listener,
            backlog: 1,
        },
    )
    .unwrap();
    assert_eq!(
        errno(join(&mut h, listener, 1, group, 0)),
        libc::EINVAL,
        "listening"
    );

    let joined = ud_bound(&mut h, ip);
    join(&mut h, joined, 5, group, 0).unwrap();
    assert_eq!(
        errno(join(&mut h, joined, 5, group, 0)),
        libc::EINVAL,
        "key in use"
    );
    let multicast: Vec<u32> = events(&h)
        .iter()
        .filter(|r| r.event == event::MULTICAST_JOIN || r.event == event::MULTICAST_ERROR)
        .map(|r| r.join)
        .collect();
    assert_eq!(multicast, [5], "only the one join");
    assert_eq!(stat(&h, "cm_mc_joined"), 1);
}

/// `rdma_leave_multicast`, and a leave of a join the id does not hold (`ENOENT`, as ucma
/// answers for an unknown join).
#[test]
fn a_leave_ends_the_join_and_one_not_joined_is_refused() {
    let mut h = host([10, 0, 0, 1], 1, 2);
    let ip = h.ip;
    let c = ud_bound(&mut h, ip);
    join(&mut h, c, 7, IpAddr::from(GROUP), 0).unwrap();
    // The same group again: a second join, as Linux allows.
    join(&mut h, c, 8, IpAddr::from(GROUP), 0).unwrap();
    events(&h);
    call(&mut h.svc, CmRequest::LeaveMulticast { id: c, join: 7 }).unwrap();
    assert_eq!(stat(&h, "cm_mc_joined"), 1);
    for unknown in [7, 9] {
        let refused = call(
            &mut h.svc,
            CmRequest::LeaveMulticast {
                id: c,
                join: unknown,
            },
        )
        .unwrap_err();
        assert_eq!(refused.errno, libc::ENOENT, "{unknown}: {refused:?}");
    }
    call(&mut h.svc, CmRequest::LeaveMulticast { id: c, join: 8 }).unwrap();
    assert!(events(&h).is_empty(), "a leave reports nothing");
    assert_eq!((stat(&h, "cm_mc_leaves"), stat(&h, "cm_mc_joined")), (2, 0));
    // Another connection cannot leave for it.
    join(&mut h, c, 9, IpAddr::from(GROUP), 0).unwrap();
    let other = h.svc.handle(
        asker(2),
        CmRequest::LeaveMulticast { id: c, join: 9 },
        vec![],
    );
    assert_eq!(other.unwrap_err().errno, libc::EINVAL);
}

/// `rdma_destroy_id` leaves every group of the id, and an application that dies leaves
/// every group of its ids: nothing of them stays in the daemon.
#[test]
fn ids_that_go_leave_their_groups() {
    let mut h = host([10, 0, 0, 1], 1, 2);
    let ip = h.ip;
    let c = ud_bound(&mut h, ip);
    let d = ud_bound(&mut h, ip);
    join(&mut h, c, 1, IpAddr::from(GROUP), 0).unwrap();
    join(&mut h, c, 2, IpAddr::from([239, 0, 0, 1]), 1).unwrap();
    join(&mut h, d, 1, IpAddr::from(GROUP), 0).unwrap();
    assert_eq!(stat(&h, "cm_mc_joined"), 3);
    call(&mut h.svc, CmRequest::DestroyId { id: c }).unwrap();
    assert_eq!(stat(&h, "cm_mc_joined"), 1);
    h.svc.connection_closed(1);
    assert_eq!(stat(&h, "cm_mc_joined"), 0);
    assert_eq!(stat(&h, "cm_ids"), 0);
}
