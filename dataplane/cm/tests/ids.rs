//! rdma_cm ids: port spaces and ports (EADDRINUSE, wildcards, REUSEADDR, ephemeral
//! ports), options (TOS, ACK timeout, AFONLY), states that refuse calls, private data
//! limits, and the QP attributes of an id that is not connecting yet.

mod common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use common::*;
use xroce_cm::rdma_cm::error::{EADDRINUSE, EADDRNOTAVAIL, EINVAL};
use xroce_cm::testing::{Pair, Side};
use xroce_cm::{ConnParam, Error, EventKind, IdOption, IdState, Owner};
use xroce_transport::{Access, AttrMask, QpState, QpType};
use xroce_wire::{CmMessage, PortSpace};

fn tcp(p: &mut Pair) -> xroce_cm::IdHandle {
    p.b.cm
        .create_id(OWNER_B, PortSpace::Tcp, QpType::Rc)
        .unwrap()
}

#[test]
fn a_port_is_bound_once_unless_both_reuse_it_and_neither_listens() {
    let mut p = Pair::new(40);
    let addr = SocketAddr::new(p.b.addr, PORT);
    let first = tcp(&mut p);
    p.b.cm.bind(first, addr).unwrap();
    let second = tcp(&mut p);
    let e = p.b.cm.bind(second, addr).unwrap_err();
    assert_eq!(
        e,
        Error::AddrInUse {
            addr,
            ps: PortSpace::Tcp
        }
    );
    assert_eq!(e.errno(), EADDRINUSE);
    // The same port in another port space is another port.
    let udp =
        p.b.cm
            .create_id(OWNER_B, PortSpace::Udp, QpType::Ud)
            .unwrap();
    p.b.cm.bind(udp, addr).unwrap();
    // The wildcard conflicts with any address of the port.
    let any = tcp(&mut p);
    let wildcard = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), PORT);
    assert_eq!(
        p.b.cm.bind(any, wildcard).unwrap_err().errno(),
        EADDRNOTAVAIL
    );
    // REUSEADDR on both: shared, until one listens.
    p.b.cm.set_option(first, IdOption::ReuseAddr(true)).unwrap();
    p.b.cm
        .set_option(second, IdOption::ReuseAddr(true))
        .unwrap();
    p.b.cm.bind(second, addr).unwrap();
    assert_eq!(p.b.cm.port_holders(PortSpace::Tcp, PORT), 2);
    assert_eq!(p.b.cm.listen(first).unwrap_err().errno(), EADDRINUSE);
    // Destroying frees the port.
    let now = p.now;
    p.b.cm.destroy_id(now, second).unwrap();
    p.b.cm.listen(first).unwrap();
    assert_eq!(p.b.cm.id(first).unwrap().state, IdState::Listen);
    // REUSEADDR cannot be switched off once bound, nor on while listening.
    assert!(matches!(
        p.b.cm.set_option(first, IdOption::ReuseAddr(false)),
        Err(Error::Option("REUSEADDR"))
    ));
}

#[test]
fn ephemeral_ports_come_from_the_range_and_are_not_shared() {
    let mut p = Pair::new(41);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..50 {
        let id = tcp(&mut p);
        let bound = p.b.cm.bind(id, SocketAddr::new(p.b.addr, 0)).unwrap();
        assert!((32768..=60999).contains(&bound.port()), "{bound}");
        assert!(
            seen.insert(bound.port()),
            "port {} given twice",
            bound.port()
        );
    }
    // A connect without bind takes one too (rdma_resolve_addr binds).
    let a = connect(&mut p, PORT);
    let port = p.a.cm.id(a).unwrap().local.unwrap().port();
    assert!((32768..=60999).contains(&port));
    assert_eq!(p.a.cm.port_holders(PortSpace::Tcp, port), 1);
}

#[test]
fn a_full_range_is_eaddrnotavail() {
    let mut config = xroce_cm::Config::new(xroce_wire::Guid(1));
    config.port_range = (40000, 40002);
    let mut cm = xroce_cm::RdmaCm::new(config, Box::new(xroce_cm::SeededRandom::new(1)));
    let addr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    cm.add_local_address(addr);
    for _ in 0..3 {
        let id = cm.create_id(Owner(1), PortSpace::Tcp, QpType::Rc).unwrap();
        cm.bind(id, SocketAddr::new(addr, 0)).unwrap();
    }
    let id = cm.create_id(Owner(1), PortSpace::Tcp, QpType::Rc).unwrap();
    let e = cm.bind(id, SocketAddr::new(addr, 0)).unwrap_err();
    assert!(matches!(
        e,
        Error::NoFreePort {
            low: 40000,
            high: 40002,
            ..
        }
    ));
    assert_eq!(e.errno(), EADDRNOTAVAIL);
}

#[test]
fn ids_refuse_what_their_state_or_port_space_does_not_allow() {
    let mut p = Pair::new(42);
    let now = p.now;
    assert!(matches!(
        p.b.cm.create_id(OWNER_B, PortSpace::Tcp, QpType::Ud),
        Err(Error::QpType { .. })
    ));
    assert!(
        p.b.cm
            .create_id(OWNER_B, PortSpace::Ipoib, QpType::Ud)
            .is_err()
    );
    let id = tcp(&mut p);
    let e = p.b.cm.connect(now, id, &ConnParam::default()).unwrap_err();
    assert_eq!(
        (e.errno(), matches!(e, Error::InvalidState { .. })),
        (EINVAL, true)
    );
    let foreign = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 9, 9, 9)), PORT);
    assert_eq!(p.b.cm.bind(id, foreign).unwrap_err().errno(), EADDRNOTAVAIL);
    let listener = listen(&mut p.b, OWNER_B, PortSpace::Tcp, PORT);
    assert!(matches!(
        p.b.cm.accept(now, listener, &ConnParam::default()),
        Err(Error::InvalidState { .. })
    ));
    assert!(p.b.cm.set_option(listener, IdOption::AfOnly(true)).is_err());
    let ud =
        p.b.cm
            .create_id(OWNER_B, PortSpace::Udp, QpType::Ud)
            .unwrap();
    assert!(p.b.cm.set_option(ud, IdOption::AckTimeout(21)).is_err());
    assert_eq!(
        p.b.cm
            .destroy_id(now, xroce_cm::IdHandle(999))
            .unwrap_err()
            .errno(),
        xroce_cm::rdma_cm::error::ENOENT
    );
    // Unbound listeners take the IPv4 wildcard and a free port.
    let l2 = tcp(&mut p);
    p.b.cm.listen(l2).unwrap();
    let local = p.b.cm.id(l2).unwrap().local.unwrap();
    assert!(local.ip().is_unspecified() && local.port() >= 32768);
}

#[test]
fn private_data_limits_are_linuxs() {
    let mut p = Pair::new(43);
    listen(&mut p.b, OWNER_B, PortSpace::Tcp, PORT);
    let to = SocketAddr::new(p.b.addr, PORT);
    let a = resolved(&mut p.a, OWNER_A, PortSpace::Tcp, to);
    let now = p.now;
    let mut param = rping_param(0x11);
    param.private_data = vec![7; 57];
    let e = p.a.cm.connect(now, a, &param).unwrap_err();
    assert_eq!(
        e,
        Error::PrivateDataTooLong {
            op: "connect",
            len: 57,
            max: 56
        }
    );
    param.private_data = vec![7; 56];
    p.a.cm.connect(now, a, &param).unwrap();
    let req = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    assert_eq!(req.conn().unwrap().private_data, vec![7; 56]);
    let now = p.now;
    let mut accept = rping_param(0x22);
    accept.private_data = vec![1; 197];
    assert!(p.b.cm.accept(now, req.id, &accept).is_err());
    assert!(p.b.cm.reject(now, req.id, &[0; 149]).is_err());
    accept.private_data = vec![1; 196];
    p.b.cm.accept(now, req.id, &accept).unwrap();
    let resp = wait(&mut p, PATIENCE, false, EventKind::ConnectResponse);
    assert_eq!(resp.conn().unwrap().private_data, vec![1; 196]);
}

#[test]
fn tos_and_ack_timeout_options_shape_the_req_and_the_qp() {
    let mut p = Pair::new(44);
    listen(&mut p.b, OWNER_B, PortSpace::Tcp, PORT);
    p.lose = vec![0];
    let to = SocketAddr::new(p.b.addr, PORT);
    let id =
        p.a.cm
            .create_id(OWNER_A, PortSpace::Tcp, QpType::Rc)
            .unwrap();
    p.a.cm.set_option(id, IdOption::Tos(0x68)).unwrap();
    p.a.cm.set_option(id, IdOption::AckTimeout(21)).unwrap();
    let route = xroce_cm::Route {
        local: p.a.addr,
        remote: to,
        path_mtu: xroce_wire::IbMtu::Mtu1024,
        hop_limit: 64,
    };
    p.a.cm.resolve_route(id, route).unwrap();
    let now = p.now;
    p.a.cm.connect(now, id, &rping_param(0x11)).unwrap();
    let req = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    let reqs = p.sent_by(Side::A, |m| matches!(m, CmMessage::Req(_)));
    let Some(CmMessage::Req(r)) = reqs[0].message() else {
        unreachable!()
    };
    assert_eq!(r.primary_path.traffic_class, 0x68);
    // Life time 20 (ACK timeout 21 − 1): the REQ says cm_ack_timeout(15, 20) = 21 and is
    // retried every 2 × 4096 + 4096 ms.
    assert_eq!(r.primary_path.local_ack_timeout, 21);
    assert_eq!(reqs[1].at - reqs[0].at, Duration::from_millis(12288));
    let now = p.now;
    p.b.cm.accept(now, req.id, &rping_param(0x22)).unwrap();
    wait(&mut p, PATIENCE, false, EventKind::ConnectResponse);
    let (rts, _) = p.a.cm.init_qp_attr(id, QpState::Rts).unwrap();
    assert_eq!(rts.timeout, 21);
    let (rtr, _) = p.a.cm.init_qp_attr(id, QpState::Rtr).unwrap();
    assert_eq!(rtr.path.traffic_class, 0x68);
    // The passive side takes the REQ's path: traffic class and ACK timeout.
    let (b_rtr, _) = p.b.cm.init_qp_attr(req.id, QpState::Rtr).unwrap();
    assert_eq!(b_rtr.path.traffic_class, 0x68);
    assert_eq!(
        p.b.cm.init_qp_attr(req.id, QpState::Rts).unwrap().0.timeout,
        21
    );
}

#[test]
fn qp_attributes_before_connecting_are_init_only() {
    let mut p = Pair::new(45);
    let id = tcp(&mut p);
    let (attr, mask) = p.b.cm.init_qp_attr(id, QpState::Init).unwrap();
    assert_eq!(
        mask,
        AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS
    );
    assert_eq!(
        (attr.access, attr.qp_state, attr.port_num),
        (Access::NONE, QpState::Init, 1)
    );
    assert!(p.b.cm.init_qp_attr(id, QpState::Rtr).is_err());
    assert!(p.b.cm.init_qp_attr(id, QpState::Err).is_err());
}

#[test]
fn an_ipv6_wildcard_listener_takes_ipv4_requests_unless_afonly() {
    for afonly in [false, true] {
        let mut p = Pair::new(46);
        let l = tcp(&mut p);
        p.b.cm.set_option(l, IdOption::AfOnly(afonly)).unwrap();
        p.b.cm
            .bind(l, SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), PORT))
            .unwrap();
        p.b.cm.listen(l).unwrap();
        let a = connect(&mut p, PORT);
        p.run_for(Duration::from_millis(1));
        if afonly {
            let rej = p.a.event(a, EventKind::Rejected).unwrap();
            assert_eq!(rej.status, 28);
        } else {
            assert!(p.b.any(EventKind::ConnectRequest).is_some());
        }
    }
}

#[test]
fn a_listener_bound_to_the_loopback_address_is_a_wildcard_one() {
    // As the kernel's `cma_any_addr`: 127.0.0.1 (and ::1) stand for every address of the
    // host. libfabric's verbs provider binds a passive endpoint given no address there.
    let mut p = Pair::new(47);
    let l = tcp(&mut p);
    let loopback = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), PORT);
    assert_eq!(p.b.cm.bind(l, loopback).unwrap(), loopback);
    // It holds the port as the wildcard does: no other bind of it, on any address.
    let other = tcp(&mut p);
    let host = SocketAddr::new(p.b.addr, PORT);
    assert!(matches!(
        p.b.cm.bind(other, host).unwrap_err(),
        Error::WildcardConflict { .. }
    ));
    let six = tcp(&mut p);
    let v6_loopback = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), PORT + 1);
    p.b.cm.bind(six, v6_loopback).unwrap();
    // A request for the host's own address reaches it.
    p.b.cm.listen(l).unwrap();
    let a = connect(&mut p, PORT);
    p.run_for(Duration::from_millis(1));
    assert!(p.a.event(a, EventKind::Rejected).is_none());
    assert!(p.b.any(EventKind::ConnectRequest).is_some());
    // Another loopback address of 127/8 is the same.
    let mut p = Pair::new(48);
    let l = tcp(&mut p);
    let other_loopback = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 1, 1)), PORT);
    p.b.cm.bind(l, other_loopback).unwrap();
    p.b.cm.listen(l).unwrap();
    connect(&mut p, PORT);
    p.run_for(Duration::from_millis(1));
    assert!(p.b.any(EventKind::ConnectRequest).is_some());
}
