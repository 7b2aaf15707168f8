//! The GID table of a RoCEv2 port: one GID per usable IP address of the interface.

use std::net::IpAddr;

use xroce_wire::Gid;

use super::interface::{AddressScope, InterfaceAddress};

/// The type of a GID table entry.
///
/// xroce speaks RoCEv2 only, so every entry is RoCEv2 (`IB_GID_TYPE_ROCE_UDP_ENCAP`): the
/// GID is an IP address and packets travel in UDP. Linux RoCE devices (rxe included) list
/// every address twice, once as RoCE v1 and once as RoCE v2; xroce lists each once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GidType {
    /// RoCE v2: InfiniBand transport over UDP/IP (IBTA Annex A17).
    RoceV2,
}

impl GidType {
    /// The name the kernel's RDMA sysfs gives the type
    /// (`/sys/class/infiniband/*/ports/*/gid_attrs/types/*`), which rdma-core reads.
    pub fn sysfs_name(self) -> &'static str {
        match self {
            GidType::RoceV2 => "RoCE v2",
        }
    }
}

/// One entry of a [`GidTable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GidEntry {
    /// The GID: the IPv6 address, or the IPv4 address as `::ffff:a.b.c.d`.
    pub gid: Gid,
    /// Its type (always RoCE v2).
    pub gid_type: GidType,
    /// The interface address it stands for.
    pub address: InterfaceAddress,
}

/// The GIDs of an interface, indexed as verbs programs index them (`sgid_index`,
/// `ibv_query_gid`).
///
/// The order, from index 0:
/// 1. the IPv4 addresses, IPv4-mapped (`::ffff:a.b.c.d`), in the kernel's order (that of
///    `ip -4 address show`: primary addresses, then secondary ones). **Index 0 is thus the
///    first IPv4 address**, which is what the drop-in libibverbs promises and what
///    `ibv_rc_pingpong -g 0` or perftest `--gid-index 0` get;
/// 2. the global IPv6 addresses (unique local `fd00::/8` included), in the kernel's order;
/// 3. the link-local IPv6 addresses (`fe80::/10`).
///
/// Left out: tentative addresses (duplicate address detection still running) and those whose
/// detection failed (they come in once usable), and host-scope ones (loopback). Without an
/// IPv4 address, index 0 is the first global IPv6 address.
///
/// Indices follow the interface's addresses: adding or removing an address can move the
/// entries after it. [`Watcher`](super::Watcher) reports when the table changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GidTable {
    entries: Vec<GidEntry>,
}

impl GidTable {
    /// The table for an interface with these addresses (in the kernel's order).
    pub fn from_addresses(addresses: &[InterfaceAddress]) -> GidTable {
        let rank = |a: &InterfaceAddress| -> Option<u8> {
            if !a.is_usable() || a.scope == AddressScope::Host {
                return None;
            }
            match (a.ip, a.scope) {
                (IpAddr::V4(_), _) => Some(0),
                (IpAddr::V6(_), AddressScope::Link) => Some(2),
                (IpAddr::V6(v6), _) if v6.is_unicast_link_local() => Some(2),
                (IpAddr::V6(_), _) => Some(1),
            }
        };
        let mut ranked: Vec<(u8, &InterfaceAddress)> = addresses
            .iter()
            .filter_map(|a| rank(a).map(|r| (r, a)))
            .collect();
        // A stable sort keeps the kernel's order within each rank.
        ranked.sort_by_key(|(r, _)| *r);
        let mut entries: Vec<GidEntry> = Vec::with_capacity(ranked.len());
        for (_, address) in ranked {
            let gid = Gid::from_ip(address.ip);
            if entries.iter().any(|e| e.gid == gid) {
                continue;
            }
            entries.push(GidEntry {
                gid,
                gid_type: GidType::RoceV2,
                address: *address,
            });
        }
        GidTable { entries }
    }

    /// The entries, index 0 first.
    pub fn entries(&self) -> &[GidEntry] {
        &self.entries
    }

    /// The entry at `index`.
    pub fn entry(&self, index: usize) -> Option<&GidEntry> {
        self.entries.get(index)
    }

    /// The index of `gid`.
    pub fn index_of(&self, gid: Gid) -> Option<usize> {
        self.entries.iter().position(|e| e.gid == gid)
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none (an interface without usable addresses).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::AddressFlags;

    fn address(ip: &str, scope: AddressScope, flags: u32) -> InterfaceAddress {
        InterfaceAddress {
            ip: ip.parse().expect("ip"),
            prefix_len: 24,
            scope,
            flags: AddressFlags(flags),
        }
    }

    #[test]
    fn ipv4_first_then_global_ipv6_then_link_local_in_kernel_order() {
        let g = AddressScope::Global;
        // As the kernel lists an interface's addresses: IPv4 first, IPv6 newest first.
        let addresses = [
            address("10.0.0.1", g, 0),
            address("10.0.1.1", g, AddressFlags::SECONDARY),
            address("fd00::2", g, 0),
            address("fe80::1", AddressScope::Link, 0),
            address("2001:db8::1", g, AddressFlags::DEPRECATED),
            address("fd00::3", g, AddressFlags::TENTATIVE),
            address(
                "fd00::4",
                g,
                AddressFlags::DADFAILED | AddressFlags::TENTATIVE,
            ),
            address("192.168.9.9", g, 0),
        ];
        let table = GidTable::from_addresses(&addresses);
        let gids: Vec<String> = table.entries().iter().map(|e| e.gid.to_string()).collect();
        assert_eq!(
            gids,
            [
                "::ffff:10.0.0.1",
                "::ffff:10.0.1.1",
                "::ffff:192.168.9.9",
                "fd00::2",
                "2001:db8::1",
                "fe80::1",
            ]
        );
        assert!(
            table
                .entries()
                .iter()
                .all(|e| e.gid_type == GidType::RoceV2)
        );
        assert_eq!(
            table.index_of(Gid::from_ip("fe80::1".parse().expect("ip"))),
            Some(5)
        );
        assert_eq!(
            table.index_of(Gid::from_ip("fd00::3".parse().expect("ip"))),
            None
        );
        assert_eq!(
            table.entry(0).map(|e| e.address.ip.to_string()).as_deref(),
            Some("10.0.0.1")
        );
        assert_eq!(GidType::RoceV2.sysfs_name(), "RoCE v2");
    }

    #[test]
    fn without_ipv4_index_0_is_the_first_global_ipv6_and_loopback_is_left_out() {
        let table = GidTable::from_addresses(&[
            address("fe80::1", AddressScope::Link, 0),
            address("::1", AddressScope::Host, 0),
            address("127.0.0.1", AddressScope::Host, 0),
            address("fd00::9", AddressScope::Global, 0),
        ]);
        assert_eq!(table.len(), 2);
        assert_eq!(
            table.entry(0).map(|e| e.gid.to_string()).as_deref(),
            Some("fd00::9")
        );
        assert!(GidTable::from_addresses(&[]).is_empty());
    }
}
