//! Host integration over rtnetlink, inside lab namespaces: reading an interface (Ethernet
//! address, MTU, state, addresses), the order of the GID table built from several IPv4 and
//! IPv6 addresses, and the watcher's reports of address, MTU and state changes, including
//! after its notifications overflowed.
//!
//! Needs root (`#[ignore]`d: `cargo xtask test` runs it).

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};

use crate::host_support::{in_ns, ip, ip_addresses, ip_link_mac, wait_for_changes};
use xroce_engine::host::{self, Change, GidType, HostError, Interface, OperState, Watcher};
use xroce_lab::{Lab, LabConfig, netns};
use xroce_wire::{Gid, IbMtu};

fn gid(ip: &str) -> Gid {
    Gid::from_ip(ip.parse().expect("an IP address"))
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn host_query_reads_mac_mtu_state_and_addresses() {
    xroce_lab::require_root();
    let lab = Lab::new(&LabConfig::default()).expect("lab");
    let (ns, dev) = (lab.a.netns.as_str(), lab.a.interface.as_str());
    let interface = in_ns(ns, || Interface::query(dev)).expect("query");

    assert_eq!(interface.name, dev);
    assert_eq!(interface.mac, ip_link_mac(ns, dev));
    assert_eq!(interface.mac, lab.a.mac);
    assert_eq!(interface.mtu, 1500);
    assert_eq!(interface.oper_state, OperState::Up);
    assert!(interface.is_up() && interface.admin_up && interface.lower_up);

    let v4 = interface
        .addresses
        .iter()
        .find(|a| a.ip == IpAddr::from(lab.a.ipv4))
        .expect("the lab's IPv4 address");
    assert_eq!(v4.prefix_len, 24);
    assert_eq!(v4.scope, host::AddressScope::Global);
    let v6 = interface
        .addresses
        .iter()
        .find(|a| a.ip == IpAddr::from(lab.a.ipv6))
        .expect("the lab's IPv6 address");
    assert_eq!(v6.prefix_len, 64);
    assert!(v6.flags.permanent() && v6.is_usable());
    // Every address `ip` lists, and no other.
    let mut listed: Vec<String> = ip_addresses(ns, "-4", dev, None)
        .into_iter()
        .chain(ip_addresses(ns, "-6", dev, None))
        .map(|(address, _)| address)
        .collect();
    let mut read: Vec<String> = interface
        .addresses
        .iter()
        .map(|a| a.ip.to_string())
        .collect();
    listed.sort();
    read.sort();
    assert_eq!(read, listed);
    assert!(
        interface
            .addresses
            .iter()
            .any(|a| a.scope == host::AddressScope::Link),
        "no link-local address: {:?}",
        interface.addresses
    );

    let by_index = in_ns(ns, || Interface::query_index(interface.ifindex)).expect("query_index");
    assert_eq!(by_index, interface);
    match in_ns(ns, || Interface::query("xr-nothing")) {
        Err(HostError::NoSuchInterface { name }) => assert_eq!(name, "xr-nothing"),
        other => panic!("a missing interface: {other:?}"),
    }
    match in_ns(ns, || Interface::query("xr-a-name-longer-than-ifnamsiz")) {
        Err(HostError::NoSuchInterface { .. }) => {}
        other => panic!("a name Linux cannot have: {other:?}"),
    }
    match in_ns(ns, || Interface::query_index(999_999)) {
        Err(HostError::NoSuchIfindex { ifindex }) => assert_eq!(ifindex, 999_999),
        other => panic!("a missing index: {other:?}"),
    }

    assert_eq!(
        host::path_mtu(&interface, IbMtu::Mtu4096).expect("path MTU"),
        IbMtu::Mtu1024
    );
    assert_eq!(
        host::path_mtu(&interface, IbMtu::Mtu512).expect("path MTU"),
        IbMtu::Mtu512
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn host_path_mtu_on_a_jumbo_link_is_capped_by_the_caller() {
    xroce_lab::require_root();
    let lab = Lab::new(&LabConfig {
        mtu: 9000,
        ..LabConfig::default()
    })
    .expect("lab");
    let interface = in_ns(&lab.b.netns, || Interface::query(&lab.b.interface)).expect("query");
    assert_eq!(interface.mtu, 9000);
    // 2 KiB AF_XDP frames without multi-buffer carry 2048 at most.
    assert_eq!(
        host::path_mtu(&interface, IbMtu::Mtu2048).expect("path MTU"),
        IbMtu::Mtu2048
    );
    assert_eq!(
        host::path_mtu(&interface, IbMtu::Mtu4096).expect("path MTU"),
        IbMtu::Mtu4096
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn host_gid_table_orders_ipv4_then_global_then_link_local_ipv6() {
    xroce_lab::require_root();
    let lab = Lab::new(&LabConfig::default()).expect("lab");
    let (ns, dev) = (lab.a.netns.as_str(), lab.a.interface.as_str());
    // Duplicate address detection on for this interface, and slow (60 s per probe), so that an
    // address added without `nodad` stays tentative for the whole test.
    netns::sysctl(ns, &format!("net.ipv6.conf.{dev}.accept_dad"), "1").expect("sysctl");
    netns::sysctl(
        ns,
        &format!("net.ipv6.neigh.{dev}.retrans_time_ms"),
        "60000",
    )
    .expect("sysctl");
    ip(ns, &["address", "add", "10.77.5.1/24", "dev", dev]);
    // Same subnet as the lab's 10.77.0.1/24: a secondary address.
    ip(ns, &["address", "add", "10.77.0.3/24", "dev", dev]);
    ip(
        ns,
        &[
            "-6",
            "address",
            "add",
            "fd00:77:9::1/64",
            "dev",
            dev,
            "nodad",
        ],
    );
    ip(
        ns,
        &[
            "-6",
            "address",
            "add",
            "2001:db8:77::1/64",
            "dev",
            dev,
            "nodad",
        ],
    );
    ip(ns, &["-6", "address", "add", "fd00:77:8::1/64", "dev", dev]);

    let interface = in_ns(ns, || Interface::query(dev)).expect("query");
    let tentative = interface
        .addresses
        .iter()
        .find(|a| a.ip == "fd00:77:8::1".parse::<IpAddr>().expect("ip"))
        .expect("the address under duplicate address detection");
    assert!(tentative.flags.tentative(), "{tentative:?}");
    let table = interface.gid_table();
    let gids: Vec<Gid> = table.entries().iter().map(|e| e.gid).collect();

    // What `ip` lists, in its order: IPv4, global IPv6 (tentative left out), link-local IPv6.
    let usable = |list: Vec<(String, String)>| -> Vec<Gid> {
        list.into_iter()
            .filter(|(_, line)| !line.contains("tentative"))
            .map(|(address, _)| gid(&address))
            .collect()
    };
    let mut expected = usable(ip_addresses(ns, "-4", dev, None));
    expected.extend(usable(ip_addresses(ns, "-6", dev, Some("global"))));
    expected.extend(usable(ip_addresses(ns, "-6", dev, Some("link"))));
    assert_eq!(gids, expected);

    // And in absolute terms: the lab's address at index 0, the other primary, the secondary.
    assert_eq!(gids.len(), 3 + 3 + 1, "{gids:?}");
    assert_eq!(gids[0], Gid::from_ipv4(lab.a.ipv4));
    assert_eq!(gids[0].to_string(), "::ffff:10.77.0.1");
    assert_eq!(gids[1], gid("10.77.5.1"));
    assert_eq!(gids[2], gid("10.77.0.3"));
    let global: Vec<Gid> = gids[3..6].to_vec();
    for g in ["fd00:77::1", "fd00:77:9::1", "2001:db8:77::1"] {
        assert!(global.contains(&gid(g)), "{g} not among {global:?}");
    }
    assert!(gids[6].to_ipv6().is_unicast_link_local(), "{:?}", gids[6]);
    assert_eq!(table.index_of(gid("fd00:77:8::1")), None);
    assert!(
        table
            .entries()
            .iter()
            .all(|e| e.gid_type == GidType::RoceV2)
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn host_watcher_reports_addresses_mtu_and_state() {
    xroce_lab::require_root();
    let lab = Lab::new(&LabConfig::default()).expect("lab");
    let (ns, dev) = (lab.a.netns.as_str(), lab.a.interface.as_str());
    let interface = in_ns(ns, || Interface::query(dev)).expect("query");
    // The watcher's socket belongs to the namespace it was opened in, whichever thread then
    // reads it.
    let mut watcher = in_ns(ns, || Watcher::new(interface.ifindex)).expect("watcher");
    assert_eq!(watcher.interface(), &interface);
    assert_eq!(watcher.gid_table(), &interface.gid_table());
    let _ = watcher.poll_changes().expect("poll_changes");

    let added: IpAddr = "10.77.0.11".parse().expect("ip");
    ip(ns, &["address", "add", "10.77.0.11/24", "dev", dev]);
    let seen = wait_for_changes(&mut watcher, |c| {
        c.contains(&Change::GidTable)
            && c.iter()
                .any(|c| matches!(c, Change::AddressAdded(a) if a.ip == added))
    });
    assert!(
        !seen.iter().any(|c| matches!(c, Change::AddressRemoved(_))),
        "{seen:?}"
    );
    assert_eq!(watcher.gid_table().index_of(Gid::from_ip(added)), Some(1));
    assert_eq!(
        watcher.gid_table().entry(0).map(|e| e.gid),
        Some(Gid::from_ipv4(lab.a.ipv4))
    );

    let added6: IpAddr = "fd00:77:9::1".parse().expect("ip");
    ip(
        ns,
        &[
            "-6",
            "address",
            "add",
            "fd00:77:9::1/64",
            "dev",
            dev,
            "nodad",
        ],
    );
    wait_for_changes(&mut watcher, |c| {
        c.iter()
            .any(|c| matches!(c, Change::AddressAdded(a) if a.ip == added6))
    });
    let index6 = watcher
        .gid_table()
        .index_of(Gid::from_ip(added6))
        .expect("in the table");
    assert!(
        index6 >= 2,
        "IPv6 after the two IPv4 addresses, not at {index6}"
    );

    ip(ns, &["address", "del", "10.77.0.11/24", "dev", dev]);
    wait_for_changes(&mut watcher, |c| {
        c.contains(&Change::GidTable)
            && c.iter()
                .any(|c| matches!(c, Change::AddressRemoved(a) if a.ip == added))
    });
    assert_eq!(watcher.gid_table().index_of(Gid::from_ip(added)), None);
    assert_eq!(
        watcher.gid_table().entries(),
        in_ns(ns, || Interface::query(dev))
            .expect("query")
            .gid_table()
            .entries()
    );

    ip(ns, &["link", "set", "dev", dev, "mtu", "1000"]);
    wait_for_changes(&mut watcher, |c| {
        c.contains(&Change::Mtu {
            old: 1500,
            new: 1000,
        })
    });
    assert_eq!(watcher.interface().mtu, 1000);
    assert_eq!(
        host::path_mtu(watcher.interface(), IbMtu::Mtu4096).expect("path MTU"),
        IbMtu::Mtu512
    );

    ip(ns, &["link", "set", "dev", dev, "down"]);
    wait_for_changes(&mut watcher, |c| {
        c.iter().any(|c| {
            matches!(
                c,
                Change::State {
                    old: OperState::Up,
                    new: OperState::Down
                }
            )
        })
    });
    assert!(!watcher.interface().is_up());
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn host_watcher_resyncs_when_notifications_are_lost() {
    xroce_lab::require_root();
    const ADDRESSES: usize = 300;
    let lab = Lab::new(&LabConfig::default()).expect("lab");
    let (ns, dev) = (lab.a.netns.as_str(), lab.a.interface.as_str());
    let ifindex = in_ns(ns, || Interface::query(dev)).expect("query").ifindex;
    let mut watcher = in_ns(ns, || Watcher::new(ifindex)).expect("watcher");
    // The smallest receive buffer the kernel allows: a few notifications fill it.
    watcher.set_receive_buffer(0).expect("SO_RCVBUF");
    let _ = watcher.poll_changes().expect("poll_changes");

    // Hundreds of addresses at once, while nobody reads: most notifications are lost.
    let added: Vec<Ipv4Addr> = (0..ADDRESSES)
        .map(|i| Ipv4Addr::new(10, 77, 100 + (i / 200) as u8, (i % 200) as u8 + 1))
        .collect();
    let batch: String = added
        .iter()
        .map(|a| format!("address add {a}/32 dev {dev}\n"))
        .collect();
    let mut child = Command::new("ip")
        .args(["-n", ns, "-batch", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("ip -batch");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(batch.as_bytes())
        .expect("writing the batch");
    assert!(child.wait().expect("ip -batch").success());

    let seen = wait_for_changes(&mut watcher, |c| c.contains(&Change::Resynced));
    let reported: Vec<IpAddr> = seen
        .iter()
        .filter_map(|c| match c {
            Change::AddressAdded(a) => Some(a.ip),
            _ => None,
        })
        .collect();
    for a in &added {
        let count = reported.iter().filter(|r| **r == IpAddr::from(*a)).count();
        assert_eq!(count, 1, "{a} reported added {count} times");
    }
    assert!(seen.contains(&Change::GidTable) && seen.contains(&Change::Routes));
    // The picture is the kernel's, order included.
    let now = in_ns(ns, || Interface::query(dev)).expect("query");
    assert_eq!(watcher.interface(), &now);
    assert_eq!(watcher.gid_table().len(), now.gid_table().len());
    assert!(watcher.gid_table().len() > ADDRESSES);
}
