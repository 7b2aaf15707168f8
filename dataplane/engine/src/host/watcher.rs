//! rtnetlink notifications about the served interface, as a pollable file descriptor.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use netlink_packet_core::NetlinkPayload;
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::neighbour::{NeighbourAttribute, NeighbourFlags, NeighbourMessage};
use netlink_packet_route::route::{RouteAttribute, RouteMessage};
use netlink_sys::{Socket, protocols::NETLINK_ROUTE};

use super::gid::GidTable;
use super::interface::{
    Interface, InterfaceAddress, Link, OperState, Selector, open_socket, parse_address,
    query_addresses, query_link,
};
use super::neighbour::NeighbourEntry;
use super::netlink::{RequestSocket, parse_datagram, receive, receive_buffer};
use super::{HostError, Mac};

/// The receive buffer asked for (the kernel caps it at `net.core.rmem_max`): room for bursts
/// of notifications, such as a neighbour table filling up.
const RECEIVE_BUFFER_BYTES: usize = 1 << 20;

/// Something that changed about the watched interface, as [`Watcher::poll_changes`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The MTU changed: the path MTU may be different ([`path_mtu`](super::path_mtu)).
    Mtu {
        /// Before.
        old: u32,
        /// Now.
        new: u32,
    },
    /// The operational state changed (the interface went up or down).
    State {
        /// Before.
        old: OperState,
        /// Now.
        new: OperState,
    },
    /// The Ethernet address changed.
    Mac {
        /// Before.
        old: Mac,
        /// Now.
        new: Mac,
    },
    /// An address was added.
    AddressAdded(InterfaceAddress),
    /// An address changed flags or prefix (a tentative address finished duplicate address
    /// detection, an address became deprecated, ...).
    AddressChanged(InterfaceAddress),
    /// An address was removed.
    AddressRemoved(InterfaceAddress),
    /// The GID table is not what it was before this call: read
    /// [`Watcher::gid_table`] again (indices may have moved).
    GidTable,
    /// A neighbour entry of the interface appeared, or changed state or address.
    Neighbour(NeighbourEntry),
    /// A neighbour entry of the interface was removed.
    NeighbourRemoved {
        /// Its IP address.
        ip: IpAddr,
    },
    /// A route that may lead through the interface was added, changed or removed: next hops
    /// found before may be different now.
    Routes,
    /// The interface was deleted. Nothing more will be reported about it.
    InterfaceRemoved,
    /// Notifications were lost (the socket's receive buffer overflowed, `ENOBUFS`), so the
    /// watcher read the interface, its addresses and its neighbour table again with full
    /// dumps. The changes reported with this one come from comparing the two; route changes
    /// cannot be compared, so [`Change::Routes`] comes too.
    Resynced,
}

/// Watches one interface through rtnetlink notifications (links, IPv4 and IPv6 addresses,
/// neighbours, IPv4 and IPv6 routes) and keeps a picture of it: the [`Interface`] with its
/// addresses, its [`GidTable`] and its neighbour entries.
///
/// The watcher is a file descriptor to put in the daemon's poll set ([`AsFd`]): when it is
/// readable, [`poll_changes`](Self::poll_changes) reads what arrived without blocking.
/// Created in the network namespace of the calling thread.
#[derive(Debug)]
pub struct Watcher {
    events: Socket,
    requests: RequestSocket,
    buffer: Vec<u8>,
    interface: Interface,
    gid_table: GidTable,
    neighbours: HashMap<IpAddr, NeighbourEntry>,
    removed: bool,
}

impl Watcher {
    /// Subscribes to the notifications, then reads the interface with index `ifindex`, its
    /// addresses and its neighbour entries (in that order, so that nothing happening in
    /// between is missed).
    pub fn new(ifindex: u32) -> Result<Watcher, HostError> {
        let subscribe = || -> io::Result<Socket> {
            let mut socket = Socket::new(NETLINK_ROUTE)?;
            socket.bind_auto()?;
            for group in [
                libc::RTNLGRP_LINK,
                libc::RTNLGRP_IPV4_IFADDR,
                libc::RTNLGRP_IPV6_IFADDR,
                libc::RTNLGRP_NEIGH,
                libc::RTNLGRP_IPV4_ROUTE,
                libc::RTNLGRP_IPV6_ROUTE,
            ] {
                socket.add_membership(group)?;
            }
            socket.set_non_blocking(true)?;
            Ok(socket)
        };
        let events = subscribe()
            .map_err(|e| HostError::netlink("subscribing to rtnetlink notifications", e))?;
        if let Err(e) = events.set_rx_buf_sz(RECEIVE_BUFFER_BYTES) {
            tracing::warn!("rtnetlink notifications: keeping the default receive buffer: {e}");
        }
        let mut requests = open_socket()?;
        let interface =
            query_link(&mut requests, Selector::Index(ifindex))?.into_interface(&mut requests)?;
        let neighbours = dump_neighbours(&mut requests, ifindex)?;
        Ok(Watcher {
            events,
            requests,
            buffer: receive_buffer(),
            gid_table: interface.gid_table(),
            interface,
            neighbours,
            removed: false,
        })
    }

    /// The interface as last seen, with its addresses in the kernel's order.
    pub fn interface(&self) -> &Interface {
        &self.interface
    }

    /// The GID table of the interface's current addresses.
    pub fn gid_table(&self) -> &GidTable {
        &self.gid_table
    }

    /// The neighbour entry of `ip` on the interface, as last seen.
    pub fn neighbour(&self, ip: IpAddr) -> Option<&NeighbourEntry> {
        self.neighbours.get(&ip)
    }

    /// Every neighbour entry of the interface, as last seen, in no particular order.
    pub fn neighbours(&self) -> impl Iterator<Item = &NeighbourEntry> {
        self.neighbours.values()
    }

    /// Sets the notification socket's receive buffer (`SO_RCVBUF`, capped by the kernel at
    /// `net.core.rmem_max`). The watcher asks for 1 MiB; a smaller one loses notifications
    /// sooner, which the watcher survives by resynchronising.
    pub fn set_receive_buffer(&self, bytes: usize) -> Result<(), HostError> {
        self.events
            .set_rx_buf_sz(bytes)
            .map_err(|e| HostError::netlink("setting the notification receive buffer", e))
    }

    /// Reads every notification that arrived, without blocking, updates the picture and
    /// returns what changed (empty when nothing did). When notifications were lost, reads
    /// everything again and reports the differences with [`Change::Resynced`].
    pub fn poll_changes(&mut self) -> Result<Vec<Change>, HostError> {
        let mut changes = Vec::new();
        if self.removed {
            self.discard_pending();
            return Ok(changes);
        }
        let gids_before = self.gid_table.clone();
        let mut lost = false;
        let mut addresses_touched = false;
        loop {
            match receive(&self.events, &mut self.buffer, libc::MSG_DONTWAIT) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    lost = true;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(HostError::netlink("reading notifications", e)),
            }
            for message in parse_datagram(&self.buffer) {
                match message.parsed {
                    Ok(parsed) => {
                        if let NetlinkPayload::InnerMessage(inner) = parsed.payload {
                            addresses_touched |= self.apply(inner, &mut changes);
                        }
                    }
                    Err(why) => tracing::warn!(
                        "rtnetlink: a notification of type {} does not parse: {why}",
                        message.header.message_type
                    ),
                }
            }
        }
        if self.removed {
            return Ok(changes);
        }
        if lost {
            tracing::info!(
                "interface {}: rtnetlink notifications were lost; reading everything again",
                self.interface.name
            );
            self.resync_into(&mut changes)?;
        } else if addresses_touched {
            self.refresh_addresses(&mut changes)?;
        }
        if self.gid_table != gids_before {
            changes.push(Change::GidTable);
        }
        Ok(changes)
    }

    /// Reads the interface, its addresses and its neighbour table again now (as after lost
    /// notifications) and reports the differences, with [`Change::Resynced`].
    pub fn resync(&mut self) -> Result<Vec<Change>, HostError> {
        let mut changes = Vec::new();
        if self.removed {
            return Ok(changes);
        }
        let gids_before = self.gid_table.clone();
        self.resync_into(&mut changes)?;
        if self.gid_table != gids_before {
            changes.push(Change::GidTable);
        }
        Ok(changes)
    }

    fn discard_pending(&mut self) {
        while receive(&self.events, &mut self.buffer, libc::MSG_DONTWAIT).is_ok() {}
    }

    /// Applies one notification; `true` when it concerns the interface's addresses (which
    /// are then read again as a whole, to keep the kernel's order).
    fn apply(&mut self, message: RouteNetlinkMessage, changes: &mut Vec<Change>) -> bool {
        let ifindex = self.interface.ifindex;
        match message {
            RouteNetlinkMessage::NewLink(m) if m.header.index == ifindex => {
                if let Some(link) = Link::parse(&m) {
                    self.update_link(link, changes);
                }
            }
            RouteNetlinkMessage::DelLink(m) if m.header.index == ifindex => {
                self.removed = true;
                changes.push(Change::InterfaceRemoved);
            }
            RouteNetlinkMessage::NewAddress(m) | RouteNetlinkMessage::DelAddress(m) => {
                return parse_address(&m).is_some_and(|(index, _)| index == ifindex);
            }
            RouteNetlinkMessage::NewNeighbour(m) => {
                if let Some(entry) = self.neighbour_of(&m)
                    && self.neighbours.insert(entry.ip, entry) != Some(entry)
                {
                    changes.push(Change::Neighbour(entry));
                }
            }
            RouteNetlinkMessage::DelNeighbour(m) => {
                if let Some(entry) = self.neighbour_of(&m)
                    && self.neighbours.remove(&entry.ip).is_some()
                {
                    changes.push(Change::NeighbourRemoved { ip: entry.ip });
                }
            }
            RouteNetlinkMessage::NewRoute(m) | RouteNetlinkMessage::DelRoute(m)
                if may_use(&m, ifindex) && !changes.contains(&Change::Routes) =>
            {
                changes.push(Change::Routes);
            }
            _ => {}
        }
        false
    }

    /// The entry a neighbour notification is about, if it is one of the interface's (proxy
    /// entries are not neighbours).
    fn neighbour_of(&self, message: &NeighbourMessage) -> Option<NeighbourEntry> {
        if message.header.flags.contains(NeighbourFlags::Proxy) {
            return None;
        }
        NeighbourEntry::parse(message).filter(|e| e.ifindex == self.interface.ifindex)
    }

    fn update_link(&mut self, link: Link, changes: &mut Vec<Change>) {
        let i = &mut self.interface;
        if link.mtu != i.mtu {
            changes.push(Change::Mtu {
                old: i.mtu,
                new: link.mtu,
            });
        }
        if link.oper_state != i.oper_state {
            changes.push(Change::State {
                old: i.oper_state,
                new: link.oper_state,
            });
        }
        if let Some(mac) = link.mac
            && mac != i.mac
        {
            changes.push(Change::Mac {
                old: i.mac,
                new: mac,
            });
            i.mac = mac;
        }
        i.name = link.name;
        i.mtu = link.mtu;
        i.oper_state = link.oper_state;
        i.admin_up = link.admin_up;
        i.lower_up = link.lower_up;
    }

    fn refresh_addresses(&mut self, changes: &mut Vec<Change>) -> Result<(), HostError> {
        let now = query_addresses(&mut self.requests, self.interface.ifindex)?;
        let before = &self.interface.addresses;
        for address in &now {
            match before.iter().find(|a| a.ip == address.ip) {
                None => changes.push(Change::AddressAdded(*address)),
                Some(old) if old != address => changes.push(Change::AddressChanged(*address)),
                Some(_) => {}
            }
        }
        for address in before {
            if !now.iter().any(|a| a.ip == address.ip) {
                changes.push(Change::AddressRemoved(*address));
            }
        }
        self.gid_table = GidTable::from_addresses(&now);
        self.interface.addresses = now;
        Ok(())
    }

    fn resync_into(&mut self, changes: &mut Vec<Change>) -> Result<(), HostError> {
        let ifindex = self.interface.ifindex;
        let link = match query_link(&mut self.requests, Selector::Index(ifindex)) {
            Ok(link) => link,
            Err(HostError::NoSuchIfindex { .. }) => {
                self.removed = true;
                changes.push(Change::InterfaceRemoved);
                changes.push(Change::Resynced);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        self.update_link(link, changes);
        self.refresh_addresses(changes)?;
        let now = dump_neighbours(&mut self.requests, ifindex)?;
        for (ip, entry) in &now {
            if self.neighbours.get(ip) != Some(entry) {
                changes.push(Change::Neighbour(*entry));
            }
        }
        for ip in self.neighbours.keys() {
            if !now.contains_key(ip) {
                changes.push(Change::NeighbourRemoved { ip: *ip });
            }
        }
        self.neighbours = now;
        if !changes.contains(&Change::Routes) {
            changes.push(Change::Routes);
        }
        changes.push(Change::Resynced);
        Ok(())
    }
}

impl AsFd for Watcher {
    /// The notification socket: readable when [`Watcher::poll_changes`] has something to
    /// read.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.events.as_fd()
    }
}

impl AsRawFd for Watcher {
    fn as_raw_fd(&self) -> RawFd {
        self.events.as_raw_fd()
    }
}

/// Whether a route may lead through interface `ifindex`: it names it, or names no interface
/// at all (multipath, blackhole, unreachable: they can change which way a lookup goes).
fn may_use(route: &RouteMessage, ifindex: u32) -> bool {
    route
        .attributes
        .iter()
        .find_map(|a| match a {
            RouteAttribute::Oif(index) => Some(*index),
            _ => None,
        })
        .is_none_or(|oif| oif == ifindex)
}

/// The neighbour entries of interface `ifindex` (a dump filtered by the kernel under strict
/// checking, and again here).
fn dump_neighbours(
    socket: &mut RequestSocket,
    ifindex: u32,
) -> Result<HashMap<IpAddr, NeighbourEntry>, HostError> {
    let mut request = NeighbourMessage::default();
    request
        .attributes
        .push(NeighbourAttribute::IfIndex(ifindex));
    let replies = socket
        .dump(&RouteNetlinkMessage::GetNeighbour(request))
        .map_err(|e| {
            HostError::netlink(
                format_args!("reading the neighbours of interface {ifindex}"),
                e,
            )
        })?;
    Ok(replies
        .iter()
        .filter_map(|r| match r {
            RouteNetlinkMessage::NewNeighbour(m)
                if !m.header.flags.contains(NeighbourFlags::Proxy) =>
            {
                NeighbourEntry::parse(m)
            }
            _ => None,
        })
        .filter(|e| e.ifindex == ifindex)
        .map(|e| (e.ip, e))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_through_other_interfaces_are_not_ours() {
        let mut m = RouteMessage::default();
        assert!(may_use(&m, 3), "a route without an interface may be ours");
        m.attributes.push(RouteAttribute::Oif(3));
        assert!(may_use(&m, 3));
        assert!(!may_use(&m, 4));
    }
}
