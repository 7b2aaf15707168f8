//! What the host knows that the InfiniBand transport needs: the served interface (its index,
//! Ethernet address, MTU, operational state and IP addresses), the GID table built from those
//! addresses, the path MTU, and the Ethernet address of the next hop towards every
//! destination GID. All of it comes from the kernel over rtnetlink (`NETLINK_ROUTE`), through
//! the `netlink-packet-route` message types and synchronous `netlink-sys` sockets.
//!
//! - [`Interface::query`]: one interface, with its addresses.
//! - [`GidTable`]: the GIDs of an interface, in a documented order (index 0 is the first IPv4
//!   address, IPv4-mapped).
//! - [`Watcher`]: rtnetlink notifications (links, addresses, neighbours, routes) behind a
//!   pollable file descriptor, turned into [`Change`]s; lost notifications (`ENOBUFS`) are
//!   made good by a full dump.
//! - [`Neighbours`] and [`resolve`]: next-hop resolution: route lookup, the kernel's
//!   neighbour table, and a nudge to the kernel to send ARP requests or neighbour
//!   solicitations when an entry is missing or failed (or to confirm it when stale).
//!   Destinations that are the interface's own addresses come back as local.
//! - [`path_mtu`]: the largest InfiniBand MTU the interface carries.
//! - [`Membership`]: the interface's membership of an IP multicast group, while queue pairs
//!   are attached to it.
//!
//! Every socket belongs to the network namespace of the thread that opened it; the daemon
//! opens them after entering its namespace.
//!
//! This module only reads the host's configuration. It never sends RoCE traffic (nor any other
//! packet of its own), and never adds, changes or removes routes, addresses or links. Its only
//! write is to the neighbour table, and only of one kind: an `RTM_NEWNEIGH` request with the
//! `NTF_USE` flag (what `ip neigh ... use` sends), which asks the kernel to resolve an address
//! the way it would for its own traffic; the kernel then sends the ARP request or neighbour
//! solicitation and manages the entry as usual. A [`Membership`] is a socket's, as any
//! program's: the kernel sends the IGMP or MLD reports.

mod gid;
mod interface;
mod membership;
mod neighbour;
mod netlink;
mod watcher;

use std::fmt;
use std::io;
use std::net::IpAddr;
use std::time::Duration;

pub use gid::{GidEntry, GidTable, GidType};
pub use interface::{AddressFlags, AddressScope, Interface, InterfaceAddress, OperState, path_mtu};
pub use membership::Membership;
pub use neighbour::{Lookup, NeighbourEntry, NeighbourState, Neighbours, NextHop, Route, resolve};
pub use watcher::{Change, Watcher};

/// An Ethernet (MAC) address.
pub type Mac = [u8; 6];

/// What went wrong asking the host.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// No interface of that name in this network namespace.
    #[error("no interface named {name:?} in this network namespace (see `ip link`)")]
    NoSuchInterface {
        /// The name asked for.
        name: String,
    },
    /// No interface of that index in this network namespace (it may have been deleted).
    #[error("no interface with index {ifindex} in this network namespace (see `ip link`)")]
    NoSuchIfindex {
        /// The index asked for.
        ifindex: u32,
    },
    /// The interface has no 6-byte hardware address.
    #[error("interface {name} is not an Ethernet interface (no 6-byte hardware address)")]
    NotEthernet {
        /// The interface.
        name: String,
    },
    /// The interface is not operationally up.
    #[error(
        "interface {name} is down (operational state {state}): bring it up with \
         `ip link set {name} up` and check its link"
    )]
    InterfaceDown {
        /// The interface.
        name: String,
        /// Its operational state.
        state: OperState,
    },
    /// The kernel has no route to the destination.
    #[error("no route to {destination} (see `ip route get {destination}`)")]
    NoRoute {
        /// The destination.
        destination: IpAddr,
    },
    /// The route to the destination leaves through another interface than the served one.
    #[error(
        "the route to {destination} leaves through interface index {route_ifindex}, not the \
         served interface (index {ifindex}): xroce reaches destinations through its own \
         interface only (see `ip route get {destination}`)"
    )]
    OtherInterface {
        /// The destination.
        destination: IpAddr,
        /// The served interface.
        ifindex: u32,
        /// The interface the route leaves through.
        route_ifindex: u32,
    },
    /// The destination is an address of this host, but not of the served interface.
    #[error(
        "{destination} is an address of this host but not of the served interface (index \
         {ifindex}): only the served interface's own addresses are delivered locally"
    )]
    LocalElsewhere {
        /// The destination.
        destination: IpAddr,
        /// The served interface.
        ifindex: u32,
    },
    /// The destination cannot be sent to (unspecified or broadcast address).
    #[error("{destination} is not a unicast or multicast address")]
    NotUnicast {
        /// The destination.
        destination: IpAddr,
    },
    /// The kernel gave up resolving the next hop: nobody answered its ARP requests or
    /// neighbour solicitations.
    #[error(
        "{next_hop} did not answer ARP/neighbour solicitation{} (the kernel marked the \
         neighbour entry FAILED): is it up and on the link?",
        towards(*.next_hop, *.destination)
    )]
    ResolutionFailed {
        /// The address that did not answer: the destination, or the gateway towards it.
        next_hop: IpAddr,
        /// The destination asked for.
        destination: IpAddr,
    },
    /// The next hop was not resolved within the time allowed.
    #[error(
        "{next_hop}{} was not resolved within {timeout:?} (no ARP/neighbour advertisement yet)",
        towards(*.next_hop, *.destination)
    )]
    ResolutionTimedOut {
        /// The address being resolved: the destination, or the gateway towards it.
        next_hop: IpAddr,
        /// The destination asked for.
        destination: IpAddr,
        /// The time allowed.
        timeout: Duration,
    },
    /// The interface's MTU leaves no room for even 256-byte RoCEv2 payloads.
    #[error(
        "interface {name} has MTU {mtu}, too small for RoCEv2: a 256-byte payload needs \
         its IP, UDP, InfiniBand headers and ICRC around it"
    )]
    MtuTooSmall {
        /// The interface.
        name: String,
        /// Its MTU.
        mtu: u32,
    },
    /// An rtnetlink request failed.
    #[error("rtnetlink: {operation}: {source}")]
    Netlink {
        /// What was being done.
        operation: String,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
}

/// " (the gateway towards D)" when the next hop is not the destination itself.
fn towards(next_hop: IpAddr, destination: IpAddr) -> String {
    if next_hop == destination {
        String::new()
    } else {
        format!(" (the gateway towards {destination})")
    }
}

impl HostError {
    /// A failed rtnetlink request.
    fn netlink(operation: impl fmt::Display, source: io::Error) -> HostError {
        HostError::Netlink {
            operation: operation.to_string(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_errors_name_the_address_and_the_gateway_only_when_different() {
        let d: IpAddr = "10.0.0.9".parse().expect("ip");
        let g: IpAddr = "10.0.0.1".parse().expect("ip");
        let direct = HostError::ResolutionFailed {
            next_hop: d,
            destination: d,
        }
        .to_string();
        assert!(direct.starts_with("10.0.0.9 did not answer"), "{direct}");
        assert!(!direct.contains("gateway"), "{direct}");
        let via = HostError::ResolutionTimedOut {
            next_hop: g,
            destination: d,
            timeout: Duration::from_millis(200),
        }
        .to_string();
        assert!(
            via.starts_with(
                "10.0.0.1 (the gateway towards 10.0.0.9) was not resolved within 200ms"
            ),
            "{via}"
        );
    }
}
