//! Next-hop resolution over rtnetlink, inside lab namespaces: a neighbour missing from the
//! table is resolved (IPv4 and IPv6) to the Ethernet address `ip link` shows in the peer's
//! namespace; through a router, to the router's; the interface's own addresses are local;
//! no route, nobody answering and a down interface fail with errors that say so.
//!
//! Needs root (`#[ignore]`d: `cargo xtask test` runs it).

use std::net::IpAddr;
use std::time::Duration;

use crate::host_support::{PATIENCE, in_ns, ip, ip_link_mac, wait_for_changes};
use xroce_engine::host::{
    self, Change, HostError, Interface, Lookup, NeighbourState, Neighbours, NextHop, Watcher,
};
use xroce_lab::{Lab, LabConfig};

/// Empties the neighbour tables (IPv4 and IPv6) of `dev` in `ns`.
fn flush_neighbours(ns: &str, dev: &str) {
    ip(ns, &["-4", "neigh", "flush", "dev", dev]);
    ip(ns, &["-6", "neigh", "flush", "dev", dev]);
}

fn ifindex(ns: &str, dev: &str) -> u32 {
    in_ns(ns, || Interface::query(dev)).expect("query").ifindex
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn host_resolve_a_neighbour_missing_from_the_table() {
    xroce_lab::require_root();
    let lab = Lab::new(&LabConfig::default()).expect("lab");
    let (ns, dev) = (lab.a.netns.as_str(), lab.a.interface.as_str());
    let peer_mac = ip_link_mac(&lab.b.netns, &lab.b.interface);
    assert_eq!(peer_mac, lab.b.mac);
    let ifindex = ifindex(ns, dev);
    flush_neighbours(ns, dev);

    for peer in [IpAddr::from(lab.b.ipv4), IpAddr::from(lab.b.ipv6)] {
        let (before, resolved, after) = in_ns(ns, || {
            let mut neighbours = Neighbours::new().expect("neighbours");
            let before = neighbours.entry(ifindex, peer).expect("entry");
            let resolved = neighbours.resolve(ifindex, peer, PATIENCE);
            let after = neighbours.entry(ifindex, peer).expect("entry");
            (before, resolved, after)
        });
        assert!(
            before.is_none_or(|e| e.usable_mac().is_none()),
            "{peer} was already resolved: {before:?}"
        );
        assert_eq!(
            resolved.expect("resolve"),
            NextHop::Mac(peer_mac),
            "{peer} resolved to another address"
        );
        let after = after.expect("an entry after resolving");
        assert_eq!(after.usable_mac(), Some(peer_mac), "{after:?}");
    }

    // A STALE entry is used, and nudged: the kernel starts confirming it at once.
    let peer = IpAddr::from(lab.b.ipv4);
    let mac = crate::host_support::mac_text(peer_mac);
    let peer_text = peer.to_string();
    ip(
        ns,
        &[
            "neigh", "change", &peer_text, "dev", dev, "lladdr", &mac, "nud", "stale",
        ],
    );
    let (stale, looked_up, nudged) = in_ns(ns, || {
        let mut neighbours = Neighbours::new().expect("neighbours");
        let stale = neighbours.entry(ifindex, peer).expect("entry");
        let looked_up = neighbours.lookup(ifindex, peer).expect("lookup");
        (
            stale,
            looked_up,
            neighbours.entry(ifindex, peer).expect("entry"),
        )
    });
    assert_eq!(stale.map(|e| e.state), Some(NeighbourState::Stale));
    assert_eq!(looked_up, Lookup::Resolved(peer_mac));
    let nudged = nudged.expect("still there");
    assert!(
        nudged.state != NeighbourState::Stale && nudged.state.is_valid(),
        "{nudged:?}"
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn host_lookup_is_pending_until_the_watcher_sees_the_answer() {
    xroce_lab::require_root();
    let lab = Lab::new(&LabConfig::default()).expect("lab");
    let (ns, dev) = (lab.a.netns.as_str(), lab.a.interface.as_str());
    let ifindex = ifindex(ns, dev);
    flush_neighbours(ns, dev);
    let peer = IpAddr::from(lab.b.ipv4);
    // As the daemon does it: a watcher and a lookup handle, both opened in its namespace.
    let (mut watcher, mut neighbours) = in_ns(ns, || {
        (
            Watcher::new(ifindex).expect("watcher"),
            Neighbours::new().expect("neighbours"),
        )
    });
    let first = neighbours.lookup(ifindex, peer).expect("lookup");
    let resolved = match first {
        Lookup::Pending { next_hop } => {
            assert_eq!(next_hop, peer);
            let seen = wait_for_changes(&mut watcher, |c| {
                c.iter().any(
                    |c| matches!(c, Change::Neighbour(e) if e.ip == peer && e.state.is_valid()),
                )
            });
            assert!(
                seen.iter()
                    .any(|c| matches!(c, Change::Neighbour(e) if e.ip == peer)),
                "{seen:?}"
            );
            neighbours.lookup(ifindex, peer).expect("lookup")
        }
        // The answer can only have come back this fast if the table was not empty.
        other => panic!("the first lookup after a flush: {other:?}"),
    };
    assert_eq!(resolved, Lookup::Resolved(lab.b.mac));
    let entry = watcher.neighbour(peer).expect("the watcher's picture");
    assert_eq!(entry.mac, Some(lab.b.mac));
    assert_ne!(entry.state, NeighbourState::Failed);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn host_resolve_through_a_router_gives_the_routers_mac() {
    xroce_lab::require_root();
    let lab = Lab::new(&LabConfig {
        router: true,
        ..LabConfig::default()
    })
    .expect("lab");
    let router = lab.router.as_ref().expect("a router");
    let router_mac = ip_link_mac(&router.netns, &router.toward_a);
    assert_eq!(router_mac, lab.a.next_hop_mac);
    assert_ne!(router_mac, lab.b.mac);
    let (ns, dev) = (lab.a.netns.as_str(), lab.a.interface.as_str());
    let ifindex = ifindex(ns, dev);
    flush_neighbours(ns, dev);

    for (peer, gateway) in [
        (IpAddr::from(lab.b.ipv4), "10.77.1.254"),
        (IpAddr::from(lab.b.ipv6), "fd00:77:1::fe"),
    ] {
        let gateway: IpAddr = gateway.parse().expect("ip");
        let (route, resolved) = in_ns(ns, || {
            let mut neighbours = Neighbours::new().expect("neighbours");
            let route = neighbours.route(ifindex, peer).expect("route");
            (route, neighbours.resolve(ifindex, peer, PATIENCE))
        });
        assert_eq!(route.gateway, Some(gateway), "{route:?}");
        assert_eq!(route.next_hop(), gateway);
        assert_eq!(route.ifindex, ifindex);
        assert!(!route.local);
        assert_eq!(
            resolved.expect("resolve"),
            NextHop::Mac(router_mac),
            "{peer}"
        );
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn host_own_addresses_are_local() {
    xroce_lab::require_root();
    let lab = Lab::new(&LabConfig::default()).expect("lab");
    let (ns, dev) = (lab.a.netns.as_str(), lab.a.interface.as_str());
    let ifindex = ifindex(ns, dev);
    let results = in_ns(ns, || {
        let mut neighbours = Neighbours::new().expect("neighbours");
        [
            neighbours.resolve(ifindex, lab.a.ipv4.into(), PATIENCE),
            neighbours.resolve(ifindex, lab.a.ipv6.into(), PATIENCE),
            neighbours.resolve(ifindex, "127.0.0.1".parse().expect("ip"), PATIENCE),
        ]
    });
    let [v4, v6, loopback] = results;
    assert_eq!(v4.expect("own IPv4"), NextHop::Local);
    assert_eq!(v6.expect("own IPv6"), NextHop::Local);
    match loopback {
        Err(HostError::LocalElsewhere { destination, .. }) => {
            assert_eq!(destination.to_string(), "127.0.0.1");
        }
        other => panic!("127.0.0.1 is this host's, but not the interface's: {other:?}"),
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn host_unreachable_destinations_fail_with_the_address_named() {
    xroce_lab::require_root();
    let lab = Lab::new(&LabConfig::default()).expect("lab");
    let (ns, dev) = (lab.a.netns.as_str(), lab.a.interface.as_str());
    let ifindex = ifindex(ns, dev);
    // A gateway nobody answers for, on the lab's link (the lab has no default route).
    ip(
        ns,
        &[
            "route",
            "add",
            "198.51.100.0/24",
            "via",
            "10.77.0.77",
            "dev",
            dev,
        ],
    );
    let ip_of = |s: &str| -> IpAddr { s.parse().expect("ip") };

    // No route at all.
    for destination in [ip_of("192.0.2.1"), ip_of("2001:db8:99::1")] {
        match in_ns(ns, || host::resolve(ifindex, destination, PATIENCE)) {
            Err(e @ HostError::NoRoute { .. }) => {
                assert!(e.to_string().contains(&destination.to_string()), "{e}");
            }
            other => panic!("{destination}: {other:?}"),
        }
    }

    // On-link, but nobody there: out of time first with a short timeout...
    let silent = ip_of("10.77.0.99");
    match in_ns(ns, || {
        host::resolve(ifindex, silent, Duration::from_millis(200))
    }) {
        Err(
            e @ HostError::ResolutionTimedOut {
                next_hop,
                destination,
                ..
            },
        ) => {
            assert_eq!((next_hop, destination), (silent, silent));
            assert!(
                e.to_string().starts_with("10.77.0.99 was not resolved"),
                "{e}"
            );
        }
        other => panic!("{silent} with a short timeout: {other:?}"),
    }
    // ... and with time enough, the kernel gives up (3 probes, 1 s apart, by default).
    for (destination, expected_next_hop) in [
        (silent, silent),
        (ip_of("fd00:77::99"), ip_of("fd00:77::99")),
        (ip_of("198.51.100.1"), ip_of("10.77.0.77")),
    ] {
        match in_ns(ns, || host::resolve(ifindex, destination, PATIENCE)) {
            Err(
                e @ HostError::ResolutionFailed {
                    next_hop,
                    destination: d,
                },
            ) => {
                assert_eq!((next_hop, d), (expected_next_hop, destination));
                let text = e.to_string();
                assert!(
                    text.starts_with(&format!("{expected_next_hop} did not answer")),
                    "{text}"
                );
                if next_hop != destination {
                    assert!(
                        text.contains(&format!("gateway towards {destination}")),
                        "{text}"
                    );
                }
            }
            other => panic!("{destination}: {other:?}"),
        }
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn host_a_down_interface_is_an_error() {
    xroce_lab::require_root();
    let lab = Lab::new(&LabConfig::default()).expect("lab");
    let (ns, dev) = (lab.a.netns.as_str(), lab.a.interface.as_str());
    let ifindex = ifindex(ns, dev);
    // The peer's end down: no carrier here (veth then reports DOWN or LOWERLAYERDOWN,
    // depending on how the two ends' indices compare).
    ip(
        &lab.b.netns,
        &["link", "set", "dev", &lab.b.interface, "down"],
    );
    let peer = IpAddr::from(lab.b.ipv4);
    match in_ns(ns, || {
        Neighbours::new().expect("neighbours").lookup(ifindex, peer)
    }) {
        Err(e @ HostError::InterfaceDown { .. }) => {
            let text = e.to_string();
            assert!(
                text.starts_with(&format!("interface {dev} is down")),
                "{text}"
            );
        }
        other => panic!("lookup over a link without carrier: {other:?}"),
    }
    ip(ns, &["link", "set", "dev", dev, "down"]);
    match in_ns(ns, || host::resolve(ifindex, peer, PATIENCE)) {
        Err(HostError::InterfaceDown { name, state }) => {
            assert_eq!(name, dev);
            assert_eq!(state, host::OperState::Down);
        }
        other => panic!("resolve over a down interface: {other:?}"),
    }
}
