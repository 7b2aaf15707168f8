//! Next-hop resolution: which Ethernet address frames to a destination IP address go to.
//!
//! A lookup asks the kernel three things, as its own IP stack would for a packet: is the
//! served interface up (`RTM_GETLINK`), where does the route to the destination go
//! (`RTM_GETROUTE`: local, on-link, or through a gateway), and what does the neighbour table
//! say about the next hop (`RTM_GETNEIGH`). When the table has no valid entry, an
//! `RTM_NEWNEIGH` request with `NTF_USE` makes the kernel resolve it (ARP request or neighbour
//! solicitation, retried as its `neigh` settings say); the entry then turns valid, or FAILED
//! when nobody answers.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use netlink_packet_core::NLM_F_CREATE;
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteMessage, RouteMetric, RouteType, RouteVia,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{Socket, protocols::NETLINK_ROUTE};

use super::interface::{Selector, open_socket, query_addresses, query_link};
use super::netlink::{RequestSocket, receive, receive_buffer};
use super::{HostError, Mac};

/// What [`Neighbours::lookup`] found out, without waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Frames go to this Ethernet address (the destination's own, or its gateway's).
    Resolved(Mac),
    /// The destination is an address of the served interface itself: deliver it locally
    /// (loopback), without a frame on the wire.
    Local,
    /// The kernel is resolving `next_hop` (a request went out); ask again later, for instance
    /// when the [`Watcher`](super::Watcher) reports a change of that neighbour.
    Pending {
        /// The address being resolved: the destination, or the gateway towards it.
        next_hop: IpAddr,
    },
    /// The resolution this handle started found nobody: the kernel marked `next_hop` FAILED.
    /// The next lookup of the destination starts a new attempt.
    Failed {
        /// The address that did not answer: the destination, or the gateway towards it.
        next_hop: IpAddr,
    },
}

/// Where frames to a destination go: what [`resolve`] waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextHop {
    /// To this Ethernet address (the destination's own, or its gateway's).
    Mac(Mac),
    /// Nowhere on the wire: the destination is an address of the served interface.
    Local,
}

/// The state of a neighbour table entry (`NUD_*` of `neighbour.h`, as `ip neigh` shows it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NeighbourState {
    /// Resolution under way.
    Incomplete,
    /// Confirmed recently.
    Reachable,
    /// Valid but unconfirmed for a while; confirmed again on the next use.
    Stale,
    /// Waiting a moment for confirmation before probing.
    Delay,
    /// Being confirmed by unicast probes.
    Probe,
    /// Resolution found nobody.
    Failed,
    /// Needs no resolution (the address maps to a fixed link-layer address).
    NoArp,
    /// Configured by hand.
    Permanent,
    /// Created but never used.
    None,
    /// A combination or a number this code does not know.
    Other(u16),
}

impl NeighbourState {
    fn from_code(code: u16) -> NeighbourState {
        match code {
            0x01 => NeighbourState::Incomplete,
            0x02 => NeighbourState::Reachable,
            0x04 => NeighbourState::Stale,
            0x08 => NeighbourState::Delay,
            0x10 => NeighbourState::Probe,
            0x20 => NeighbourState::Failed,
            0x40 => NeighbourState::NoArp,
            0x80 => NeighbourState::Permanent,
            0x00 => NeighbourState::None,
            other => NeighbourState::Other(other),
        }
    }

    /// Whether an entry in this state has a link-layer address the kernel itself would send
    /// to (`NUD_VALID`): reachable, stale, delay, probe, permanent or noarp.
    pub fn is_valid(self) -> bool {
        matches!(
            self,
            NeighbourState::Reachable
                | NeighbourState::Stale
                | NeighbourState::Delay
                | NeighbourState::Probe
                | NeighbourState::Permanent
                | NeighbourState::NoArp
        )
    }
}

/// An entry of the kernel's neighbour table (ARP for IPv4, neighbour discovery for IPv6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NeighbourEntry {
    /// The interface the entry belongs to.
    pub ifindex: u32,
    /// The neighbour's IP address.
    pub ip: IpAddr,
    /// Its link-layer address, when known and Ethernet-sized.
    pub mac: Option<Mac>,
    /// The entry's state.
    pub state: NeighbourState,
}

impl NeighbourEntry {
    /// The Ethernet address to send to, if the entry is valid.
    pub fn usable_mac(&self) -> Option<Mac> {
        if self.state.is_valid() {
            self.mac
        } else {
            None
        }
    }

    /// Reads a neighbour message; `None` unless it is an IPv4 or IPv6 entry with an address.
    pub(crate) fn parse(message: &NeighbourMessage) -> Option<NeighbourEntry> {
        if !matches!(
            message.header.family,
            AddressFamily::Inet | AddressFamily::Inet6
        ) {
            return None;
        }
        let mut ip = None;
        let mut mac = None;
        for attribute in &message.attributes {
            match attribute {
                NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => {
                    ip = Some(IpAddr::V4(*v4));
                }
                NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => {
                    ip = Some(IpAddr::V6(*v6));
                }
                NeighbourAttribute::LinkLayerAddress(bytes) => {
                    mac = Mac::try_from(bytes.as_slice()).ok();
                }
                _ => {}
            }
        }
        Some(NeighbourEntry {
            ifindex: message.header.ifindex,
            ip: ip?,
            mac,
            state: NeighbourState::from_code(message.header.state.into()),
        })
    }
}

/// The kernel's route to a destination (`ip route get`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The destination asked for.
    pub destination: IpAddr,
    /// The interface the route leaves through (the loopback interface for local ones).
    pub ifindex: u32,
    /// The gateway, for destinations that are not on-link.
    pub gateway: Option<IpAddr>,
    /// The source address the kernel would pick.
    pub source: Option<IpAddr>,
    /// The destination is an address of this host.
    pub local: bool,
    /// The route's own hop limit (`ip route ... hoplimit N`, the `RTAX_HOPLIMIT` metric),
    /// if it sets one.
    pub hop_limit: Option<u8>,
}

impl Route {
    /// The address whose Ethernet address frames go to: the gateway, or the destination.
    pub fn next_hop(&self) -> IpAddr {
        self.gateway.unwrap_or(self.destination)
    }
}

/// Resolution attempts remembered at most (a bound on memory, not a limit on lookups).
const MAX_ATTEMPTS: usize = 4096;

/// How long [`Neighbours::resolve`] sleeps at most between looks at the table when no
/// notification wakes it.
const RECHECK: Duration = Duration::from_millis(100);

/// Next-hop resolution through the kernel's routes and neighbour table, in the network
/// namespace of the thread that made it.
#[derive(Debug)]
pub struct Neighbours {
    socket: RequestSocket,
    /// Subscribed to neighbour notifications, to wake [`Neighbours::resolve`]; made on first
    /// use.
    events: Option<Socket>,
    buffer: Vec<u8>,
    /// Next hops (interface, address) whose resolution a lookup saw started and whose outcome
    /// it has not reported yet: a FAILED entry among them is a failure to report, any other
    /// FAILED entry is stale and gets a new attempt.
    attempts: HashSet<(u32, IpAddr)>,
}

impl Neighbours {
    /// Opens the netlink socket.
    pub fn new() -> Result<Neighbours, HostError> {
        Ok(Neighbours {
            socket: open_socket()?,
            events: None,
            buffer: receive_buffer(),
            attempts: HashSet::new(),
        })
    }

    /// The kernel's route to `destination` (`RTM_GETROUTE`). Link-local IPv6 destinations are
    /// looked up on interface `ifindex` (they mean nothing elsewhere).
    pub fn route(&mut self, ifindex: u32, destination: IpAddr) -> Result<Route, HostError> {
        let mut request = RouteMessage::default();
        match destination {
            IpAddr::V4(_) => {
                request.header.address_family = AddressFamily::Inet;
                request.header.destination_prefix_length = 32;
            }
            IpAddr::V6(v6) => {
                request.header.address_family = AddressFamily::Inet6;
                request.header.destination_prefix_length = 128;
                if v6.is_unicast_link_local() || v6.is_multicast() {
                    request.attributes.push(RouteAttribute::Oif(ifindex));
                }
            }
        }
        request
            .attributes
            .push(RouteAttribute::Destination(RouteAddress::from(destination)));
        let replies = self
            .socket
            .request(RouteNetlinkMessage::GetRoute(request), 0)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ENETUNREACH | libc::EHOSTUNREACH | libc::EACCES | libc::EPERM) => {
                    HostError::NoRoute { destination }
                }
                _ => HostError::netlink(format_args!("looking up the route to {destination}"), e),
            })?;
        let message = replies
            .iter()
            .find_map(|r| match r {
                RouteNetlinkMessage::NewRoute(m) => Some(m),
                _ => None,
            })
            .ok_or(HostError::NoRoute { destination })?;
        parse_route(message, destination)
    }

    /// The hop limit (IPv4 TTL) the kernel gives its own packets to `destination` from
    /// interface `ifindex`, as the kernel's RDMA core takes it for a RoCE path
    /// (`ip4_dst_hoplimit`, `ip6_dst_hoplimit`): the route's `hoplimit` when it has one,
    /// otherwise `net.ipv6.conf.<interface>.hop_limit` (IPv6) or `net.ipv4.ip_default_ttl`
    /// (IPv4) of this namespace. `None` when neither can be read.
    pub fn hop_limit(&mut self, ifindex: u32, interface: &str, destination: IpAddr) -> Option<u8> {
        if let Ok(Route {
            hop_limit: Some(h), ..
        }) = self.route(ifindex, destination)
        {
            return Some(h);
        }
        let sysctl = match destination {
            IpAddr::V4(_) => "/proc/sys/net/ipv4/ip_default_ttl".to_owned(),
            IpAddr::V6(_) => format!("/proc/sys/net/ipv6/conf/{interface}/hop_limit"),
        };
        std::fs::read_to_string(sysctl)
            .ok()?
            .trim()
            .parse::<u8>()
            .ok()
            .filter(|&h| h != 0)
    }

    /// The neighbour table's entry for `ip` on interface `ifindex` (`RTM_GETNEIGH`), if any.
    pub fn entry(&mut self, ifindex: u32, ip: IpAddr) -> Result<Option<NeighbourEntry>, HostError> {
        let mut request = NeighbourMessage::default();
        request.header.family = family(ip);
        request.header.ifindex = ifindex;
        request
            .attributes
            .push(NeighbourAttribute::Destination(NeighbourAddress::from(ip)));
        let replies = match self
            .socket
            .request(RouteNetlinkMessage::GetNeighbour(request), 0)
        {
            Ok(replies) => replies,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => {
                return Err(HostError::netlink(
                    format_args!("reading the neighbour entry of {ip}"),
                    e,
                ));
            }
        };
        Ok(replies.iter().find_map(|r| match r {
            RouteNetlinkMessage::NewNeighbour(m) => {
                NeighbourEntry::parse(m).filter(|e| e.ip == ip && e.ifindex == ifindex)
            }
            _ => None,
        }))
    }

    /// Asks the kernel to resolve `ip` on interface `ifindex`: `RTM_NEWNEIGH` with `NTF_USE`
    /// (`ip neigh replace <ip> dev <if> use`), which creates the entry if it is missing and
    /// starts ARP or neighbour discovery for it as a packet to it would. It sets no state and
    /// no address: the kernel fills them in from the answer.
    fn trigger(&mut self, ifindex: u32, ip: IpAddr) -> Result<(), HostError> {
        let mut request = NeighbourMessage::default();
        request.header.family = family(ip);
        request.header.ifindex = ifindex;
        request.header.flags = NeighbourFlags::Use;
        request
            .attributes
            .push(NeighbourAttribute::Destination(NeighbourAddress::from(ip)));
        self.socket
            .request(RouteNetlinkMessage::NewNeighbour(request), NLM_F_CREATE)
            .map_err(|e| {
                HostError::netlink(format_args!("asking the kernel to resolve {ip}"), e)
            })?;
        tracing::debug!("neighbour {ip}: resolution requested on interface {ifindex}");
        Ok(())
    }

    /// Where frames from interface `ifindex` to `destination` go, without waiting: the
    /// next hop's Ethernet address when the kernel knows it, [`Lookup::Pending`] after asking
    /// the kernel to find it out, [`Lookup::Local`] for the interface's own addresses.
    ///
    /// A valid entry is used as it is; a STALE one is also nudged (`NTF_USE`), so that the
    /// kernel confirms it as it does for entries its own traffic uses.
    ///
    /// Multicast destinations map to their multicast Ethernet address (RFC 1112 6.4, RFC
    /// 2464 7). Errors: the interface is down, no route, the route leaves through another
    /// interface, a local address of another interface, broadcast or unspecified addresses.
    pub fn lookup(&mut self, ifindex: u32, destination: IpAddr) -> Result<Lookup, HostError> {
        let link = query_link(&mut self.socket, Selector::Index(ifindex))?;
        if !link.is_up() {
            return Err(HostError::InterfaceDown {
                name: link.name,
                state: link.oper_state,
            });
        }
        if let Some(mac) = multicast_mac(destination) {
            return Ok(Lookup::Resolved(mac));
        }
        if destination.is_unspecified() || destination == IpAddr::V4(Ipv4Addr::BROADCAST) {
            return Err(HostError::NotUnicast { destination });
        }
        let route = self.route(ifindex, destination)?;
        if route.local {
            let own = query_addresses(&mut self.socket, ifindex)?;
            return if own.iter().any(|a| a.ip == destination) {
                Ok(Lookup::Local)
            } else {
                Err(HostError::LocalElsewhere {
                    destination,
                    ifindex,
                })
            };
        }
        if route.ifindex != ifindex {
            return Err(HostError::OtherInterface {
                destination,
                ifindex,
                route_ifindex: route.ifindex,
            });
        }
        let next_hop = route.next_hop();
        let key = (ifindex, next_hop);
        let entry = self.entry(ifindex, next_hop)?;
        if let Some(e) = entry
            && let Some(mac) = e.usable_mac()
        {
            self.attempts.remove(&key);
            if e.state == NeighbourState::Stale {
                // xroce's frames bypass the kernel, so nothing else tells it that the entry
                // is in use: nudged, it confirms it (STALE, DELAY, PROBE) as it would for its
                // own traffic, and a neighbour that left turns FAILED instead of lingering.
                if let Err(err) = self.trigger(ifindex, next_hop) {
                    tracing::debug!("neighbour {next_hop}: could not ask for confirmation: {err}");
                }
            }
            return Ok(Lookup::Resolved(mac));
        }
        match entry.map(|e| e.state) {
            Some(NeighbourState::Incomplete) => {}
            Some(NeighbourState::Failed) if self.attempts.remove(&key) => {
                return Ok(Lookup::Failed { next_hop });
            }
            // Missing, never used, or failed before this handle asked: start an attempt.
            _ => self.trigger(ifindex, next_hop)?,
        }
        if self.attempts.len() >= MAX_ATTEMPTS {
            self.attempts.clear();
        }
        self.attempts.insert(key);
        Ok(Lookup::Pending { next_hop })
    }

    /// Where frames from interface `ifindex` to `destination` go, waiting up to `timeout`
    /// for the kernel to resolve the next hop (woken by neighbour notifications).
    ///
    /// Errors name the address that could not be resolved:
    /// [`HostError::ResolutionFailed`] when the kernel gave up (nobody answered its probes),
    /// [`HostError::ResolutionTimedOut`] when `timeout` ran out first; and those of
    /// [`lookup`](Self::lookup).
    pub fn resolve(
        &mut self,
        ifindex: u32,
        destination: IpAddr,
        timeout: Duration,
    ) -> Result<NextHop, HostError> {
        let deadline = Instant::now() + timeout;
        // Subscribed before the first look, so that no answer can slip between the look and
        // the wait.
        self.subscribe()?;
        loop {
            self.drain_events();
            match self.lookup(ifindex, destination)? {
                Lookup::Resolved(mac) => return Ok(NextHop::Mac(mac)),
                Lookup::Local => return Ok(NextHop::Local),
                Lookup::Failed { next_hop } => {
                    return Err(HostError::ResolutionFailed {
                        next_hop,
                        destination,
                    });
                }
                Lookup::Pending { next_hop } => {
                    let now = Instant::now();
                    if now >= deadline {
                        self.attempts.remove(&(ifindex, next_hop));
                        return Err(HostError::ResolutionTimedOut {
                            next_hop,
                            destination,
                            timeout,
                        });
                    }
                    self.wait_for_event((deadline - now).min(RECHECK));
                }
            }
        }
    }

    fn subscribe(&mut self) -> Result<(), HostError> {
        if self.events.is_some() {
            return Ok(());
        }
        let subscribe = || -> std::io::Result<Socket> {
            let mut socket = Socket::new(NETLINK_ROUTE)?;
            socket.bind_auto()?;
            socket.add_membership(libc::RTNLGRP_NEIGH)?;
            socket.set_non_blocking(true)?;
            Ok(socket)
        };
        let socket = subscribe()
            .map_err(|e| HostError::netlink("subscribing to neighbour notifications", e))?;
        self.events = Some(socket);
        Ok(())
    }

    /// Empties the notification socket: notifications only wake the waiting; the table is
    /// read afresh each time (lost ones, `ENOBUFS`, do not matter either).
    fn drain_events(&mut self) {
        let Some(socket) = &self.events else {
            return;
        };
        loop {
            match receive(socket, &mut self.buffer, libc::MSG_DONTWAIT) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
                Err(_) => return,
            }
        }
    }

    /// Sleeps until a neighbour notification arrives or `timeout` passes.
    fn wait_for_event(&self, timeout: Duration) {
        let Some(socket) = &self.events else {
            std::thread::sleep(timeout);
            return;
        };
        let mut pollfd = libc::pollfd {
            fd: socket.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let millis = libc::c_int::try_from(timeout.as_millis())
            .unwrap_or(libc::c_int::MAX)
            .max(1);
        // Safety: `pollfd` is one valid, initialised pollfd that outlives the call, and the
        // count passed is 1. An error or EINTR just ends the wait early.
        unsafe { libc::poll(&mut pollfd, 1, millis) };
    }
}

/// Where frames from interface `ifindex` to `destination` go, waiting up to `timeout`: a
/// one-off [`Neighbours::resolve`] on a fresh socket in the calling thread's namespace.
pub fn resolve(ifindex: u32, destination: IpAddr, timeout: Duration) -> Result<NextHop, HostError> {
    Neighbours::new()?.resolve(ifindex, destination, timeout)
}

fn family(ip: IpAddr) -> AddressFamily {
    match ip {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    }
}

/// The Ethernet address of an IP multicast group: `01:00:5e` and the low 23 bits of an IPv4
/// group (RFC 1112 6.4), `33:33` and the low 32 bits of an IPv6 group (RFC 2464 7).
fn multicast_mac(ip: IpAddr) -> Option<Mac> {
    match ip {
        IpAddr::V4(v4) if v4.is_multicast() => {
            let o = v4.octets();
            Some([0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]])
        }
        IpAddr::V6(v6) if v6.is_multicast() => {
            let o = v6.octets();
            Some([0x33, 0x33, o[12], o[13], o[14], o[15]])
        }
        _ => None,
    }
}

fn route_ip(address: &RouteAddress) -> Option<IpAddr> {
    match address {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

/// Reads the answer to a route lookup.
fn parse_route(message: &RouteMessage, destination: IpAddr) -> Result<Route, HostError> {
    let mut route = Route {
        destination,
        ifindex: 0,
        gateway: None,
        source: None,
        local: false,
        hop_limit: None,
    };
    let multicast = match message.header.kind {
        RouteType::Unicast => false,
        RouteType::Local => {
            route.local = true;
            false
        }
        // A group: out of the route's interface to the group's own Ethernet address (the
        // kernel gives a group no gateway, even through a default route).
        RouteType::Multicast => true,
        RouteType::Broadcast | RouteType::Anycast => {
            return Err(HostError::NotUnicast { destination });
        }
        _ => return Err(HostError::NoRoute { destination }),
    };
    for attribute in &message.attributes {
        match attribute {
            RouteAttribute::Oif(index) => route.ifindex = *index,
            RouteAttribute::Gateway(a) => route.gateway = route_ip(a),
            // A gateway of the other address family (RFC 5549: IPv4 routes via IPv6).
            RouteAttribute::Via(RouteVia::Inet(v4)) => route.gateway = Some(IpAddr::V4(*v4)),
            RouteAttribute::Via(RouteVia::Inet6(v6)) => route.gateway = Some(IpAddr::V6(*v6)),
            RouteAttribute::PrefSource(a) => route.source = route_ip(a),
            RouteAttribute::Metrics(metrics) => {
                route.hop_limit = metrics.iter().find_map(|m| match m {
                    RouteMetric::Hoplimit(h) => u8::try_from(*h).ok().filter(|&h| h != 0),
                    _ => None,
                });
            }
            _ => {}
        }
    }
    if multicast {
        route.gateway = None;
    }
    Ok(route)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_route::neighbour::NeighbourState as NlState;

    #[test]
    fn multicast_groups_map_to_their_ethernet_addresses() {
        assert_eq!(
            multicast_mac("239.129.2.3".parse().expect("ip")),
            Some([0x01, 0x00, 0x5e, 0x01, 0x02, 0x03])
        );
        assert_eq!(
            multicast_mac("ff02::1:ff00:1234".parse().expect("ip")),
            Some([0x33, 0x33, 0xff, 0x00, 0x12, 0x34])
        );
        assert_eq!(multicast_mac("10.0.0.1".parse().expect("ip")), None);
        assert_eq!(multicast_mac("fd00::1".parse().expect("ip")), None);
    }

    #[test]
    fn only_states_with_an_address_the_kernel_sends_to_are_valid() {
        for (code, valid) in [
            (0x01, false),
            (0x02, true),
            (0x04, true),
            (0x08, true),
            (0x10, true),
            (0x20, false),
            (0x40, true),
            (0x80, true),
            (0x00, false),
            (0x06, false),
        ] {
            assert_eq!(
                NeighbourState::from_code(code).is_valid(),
                valid,
                "{code:#x}"
            );
        }
    }

    #[test]
    fn neighbour_messages_read_address_mac_and_state() {
        let mut m = NeighbourMessage::default();
        m.header.family = AddressFamily::Inet;
        m.header.ifindex = 3;
        m.header.state = NlState::Stale;
        m.attributes
            .push(NeighbourAttribute::Destination(NeighbourAddress::Inet(
                Ipv4Addr::new(10, 0, 0, 2),
            )));
        m.attributes
            .push(NeighbourAttribute::LinkLayerAddress(vec![2, 0, 0, 0, 0, 2]));
        let e = NeighbourEntry::parse(&m).expect("parses");
        assert_eq!(e.usable_mac(), Some([2, 0, 0, 0, 0, 2]));
        m.header.state = NlState::Failed;
        assert_eq!(
            NeighbourEntry::parse(&m).expect("parses").usable_mac(),
            None
        );
        m.header.family = AddressFamily::Bridge;
        assert!(NeighbourEntry::parse(&m).is_none());
    }

    #[test]
    fn routes_read_the_gateway_and_refuse_unreachable_types() {
        let destination: IpAddr = "10.9.9.9".parse().expect("ip");
        let mut m = RouteMessage::default();
        m.header.kind = RouteType::Unicast;
        m.attributes.push(RouteAttribute::Oif(4));
        m.attributes
            .push(RouteAttribute::Gateway(RouteAddress::Inet(Ipv4Addr::new(
                10, 0, 0, 254,
            ))));
        let r = parse_route(&m, destination).expect("route");
        assert_eq!(r.next_hop(), "10.0.0.254".parse::<IpAddr>().expect("ip"));
        assert_eq!(r.ifindex, 4);
        assert!(!r.local);
        assert_eq!(r.hop_limit, None);
        m.attributes.push(RouteAttribute::Metrics(vec![
            RouteMetric::Mtu(1400),
            RouteMetric::Hoplimit(17),
        ]));
        assert_eq!(
            parse_route(&m, destination).expect("route").hop_limit,
            Some(17)
        );
        m.header.kind = RouteType::Unreachable;
        assert!(matches!(
            parse_route(&m, destination),
            Err(HostError::NoRoute { .. })
        ));
        m.header.kind = RouteType::Local;
        assert!(parse_route(&m, destination).expect("route").local);
        m.header.kind = RouteType::Broadcast;
        assert!(matches!(
            parse_route(&m, destination),
            Err(HostError::NotUnicast { .. })
        ));
    }

    #[test]
    fn a_route_to_a_group_leaves_by_its_interface_to_the_group_itself() {
        // `ip route get 230.1.2.3` through a default route: type multicast, no gateway.
        let group: IpAddr = "230.1.2.3".parse().expect("ip");
        let mut m = RouteMessage::default();
        m.header.kind = RouteType::Multicast;
        m.attributes.push(RouteAttribute::Oif(4));
        m.attributes
            .push(RouteAttribute::Gateway(RouteAddress::Inet(Ipv4Addr::new(
                10, 0, 0, 254,
            ))));
        m.attributes
            .push(RouteAttribute::PrefSource(RouteAddress::Inet(
                Ipv4Addr::new(10, 0, 0, 1),
            )));
        let r = parse_route(&m, group).expect("a multicast route");
        assert_eq!((r.ifindex, r.next_hop(), r.local), (4, group, false));
        assert_eq!(r.source, Some("10.0.0.1".parse().expect("ip")));
    }
}
