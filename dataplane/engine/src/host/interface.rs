//! One network interface as rtnetlink describes it (`RTM_GETLINK`, `RTM_GETADDR`), and the
//! path MTU it allows.

use std::fmt;
use std::net::IpAddr;

use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkExtentMask, LinkFlags, LinkMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use xroce_wire::{IbMtu, IpVersion};

use super::gid::GidTable;
use super::netlink::RequestSocket;
use super::{HostError, Mac};

/// A network interface: identity, link state and IP addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    /// Its name (`eth0`).
    pub name: String,
    /// Its index in its network namespace.
    pub ifindex: u32,
    /// Its Ethernet address.
    pub mac: Mac,
    /// Its MTU (the largest IP packet it sends), in bytes.
    pub mtu: u32,
    /// Its operational state (RFC 2863, as `ip link` shows it).
    pub oper_state: OperState,
    /// Administratively up (`IFF_UP`, `ip link set ... up`).
    pub admin_up: bool,
    /// The link below is up (`IFF_LOWER_UP`: carrier, or a veth's peer is up).
    pub lower_up: bool,
    /// Its IP addresses, in the order the kernel lists them (the order of
    /// `ip address show`).
    pub addresses: Vec<InterfaceAddress>,
}

impl Interface {
    /// The interface called `name` in the calling thread's network namespace, with its
    /// addresses.
    pub fn query(name: &str) -> Result<Interface, HostError> {
        let mut socket = open_socket()?;
        let link = query_link(&mut socket, Selector::Name(name))?;
        link.into_interface(&mut socket)
    }

    /// The interface with index `ifindex`, with its addresses.
    pub fn query_index(ifindex: u32) -> Result<Interface, HostError> {
        let mut socket = open_socket()?;
        let link = query_link(&mut socket, Selector::Index(ifindex))?;
        link.into_interface(&mut socket)
    }

    /// Whether the interface can carry traffic: operationally up, or (for drivers that do
    /// not report an operational state) administratively up with its link up.
    pub fn is_up(&self) -> bool {
        is_up(self.oper_state, self.admin_up, self.lower_up)
    }

    /// The GID table of the interface's addresses (see [`GidTable`] for the order).
    pub fn gid_table(&self) -> GidTable {
        GidTable::from_addresses(&self.addresses)
    }

    /// Whether `ip` is one of the interface's addresses.
    pub fn has_address(&self, ip: IpAddr) -> bool {
        self.addresses.iter().any(|a| a.ip == ip)
    }
}

/// The largest InfiniBand MTU whose packets fit in `interface`'s MTU with their IP, UDP and
/// InfiniBand headers and ICRC ([`IbMtu::for_netdev_mtu`]), but not above `cap`.
///
/// The headers counted are IPv6's when the interface has an IPv6 GID (so that the MTU holds
/// for every GID of the port), IPv4's otherwise; on a 1500-byte link both give 1024. `cap`
/// is what the daemon's AF_XDP sockets carry: 2048 in one 4 KiB frame, 4096 with
/// multi-buffer ([`crate::daemon::path_mtu_within`]).
pub fn path_mtu(interface: &Interface, cap: IbMtu) -> Result<IbMtu, HostError> {
    let version = if interface
        .gid_table()
        .entries()
        .iter()
        .any(|e| e.gid.to_ipv4().is_none())
    {
        IpVersion::V6
    } else {
        IpVersion::V4
    };
    match IbMtu::for_netdev_mtu(interface.mtu as usize, version) {
        Some(mtu) => Ok(mtu.min(cap)),
        None => Err(HostError::MtuTooSmall {
            name: interface.name.clone(),
            mtu: interface.mtu,
        }),
    }
}

/// An IP address of an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InterfaceAddress {
    /// The address.
    pub ip: IpAddr,
    /// The length of its network prefix (`/24`).
    pub prefix_len: u8,
    /// Its scope.
    pub scope: AddressScope,
    /// Its flags (tentative, deprecated, ...).
    pub flags: AddressFlags,
}

impl InterfaceAddress {
    /// Whether the address can be used now: not tentative (duplicate address detection
    /// still running) and not a duplicate (DAD failed). Deprecated addresses stay usable: they
    /// are no longer chosen as source for new connections, but still answer.
    pub fn is_usable(&self) -> bool {
        !self.flags.tentative() && !self.flags.dad_failed()
    }
}

impl fmt::Display for InterfaceAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.ip, self.prefix_len)
    }
}

/// The scope of an address (`ip address` prints it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddressScope {
    /// Valid everywhere (`scope global`; IPv6 unique local addresses too).
    Global,
    /// Valid within a site (deprecated IPv6 site-local).
    Site,
    /// Valid on this link only (IPv6 `fe80::/10`).
    Link,
    /// Valid inside this host only (loopback).
    Host,
    /// Another scope number.
    Other(u8),
}

impl AddressScope {
    fn from_code(code: u8) -> AddressScope {
        // rtnetlink.h: RT_SCOPE_UNIVERSE 0, RT_SCOPE_SITE 200, RT_SCOPE_LINK 253, RT_SCOPE_HOST 254.
        match code {
            0 => AddressScope::Global,
            200 => AddressScope::Site,
            253 => AddressScope::Link,
            254 => AddressScope::Host,
            other => AddressScope::Other(other),
        }
    }
}

/// The flags of an address (`IFA_F_*` of `if_addr.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct AddressFlags(pub u32);

impl AddressFlags {
    /// `IFA_F_SECONDARY`: an IPv4 address in a subnet that already had one.
    pub const SECONDARY: u32 = 0x01;
    /// `IFA_F_NODAD`: configured without duplicate address detection.
    pub const NODAD: u32 = 0x02;
    /// `IFA_F_OPTIMISTIC`: usable while duplicate address detection runs (RFC 4429).
    pub const OPTIMISTIC: u32 = 0x04;
    /// `IFA_F_DADFAILED`: duplicate address detection found another user.
    pub const DADFAILED: u32 = 0x08;
    /// `IFA_F_DEPRECATED`: past its preferred lifetime.
    pub const DEPRECATED: u32 = 0x20;
    /// `IFA_F_TENTATIVE`: duplicate address detection still running.
    pub const TENTATIVE: u32 = 0x40;
    /// `IFA_F_PERMANENT`: configured, not autoconfigured.
    pub const PERMANENT: u32 = 0x80;

    /// Tentative: not usable until duplicate address detection completes.
    pub fn tentative(self) -> bool {
        self.0 & Self::TENTATIVE != 0
    }
    /// Deprecated: past its preferred lifetime, still valid.
    pub fn deprecated(self) -> bool {
        self.0 & Self::DEPRECATED != 0
    }
    /// Duplicate address detection failed: someone else has the address.
    pub fn dad_failed(self) -> bool {
        self.0 & Self::DADFAILED != 0
    }
    /// A secondary IPv4 address.
    pub fn secondary(self) -> bool {
        self.0 & Self::SECONDARY != 0
    }
    /// Configured (not autoconfigured).
    pub fn permanent(self) -> bool {
        self.0 & Self::PERMANENT != 0
    }
}

/// The operational state of an interface (RFC 2863 `ifOperStatus`, `IF_OPER_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OperState {
    /// The driver does not say (loopback, some virtual devices).
    Unknown,
    /// A component is missing.
    NotPresent,
    /// Down.
    Down,
    /// Down because the layer below is (no carrier, veth peer down).
    LowerLayerDown,
    /// In a test mode.
    Testing,
    /// Waiting for an external event (802.1X, ...).
    Dormant,
    /// Up: ready to carry traffic.
    Up,
    /// A state number this code does not know.
    Other(u8),
}

impl OperState {
    fn from_code(code: u8) -> OperState {
        match code {
            0 => OperState::Unknown,
            1 => OperState::NotPresent,
            2 => OperState::Down,
            3 => OperState::LowerLayerDown,
            4 => OperState::Testing,
            5 => OperState::Dormant,
            6 => OperState::Up,
            other => OperState::Other(other),
        }
    }
}

impl fmt::Display for OperState {
    /// As `ip link` prints it (`UP`, `LOWERLAYERDOWN`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OperState::Unknown => f.write_str("UNKNOWN"),
            OperState::NotPresent => f.write_str("NOTPRESENT"),
            OperState::Down => f.write_str("DOWN"),
            OperState::LowerLayerDown => f.write_str("LOWERLAYERDOWN"),
            OperState::Testing => f.write_str("TESTING"),
            OperState::Dormant => f.write_str("DORMANT"),
            OperState::Up => f.write_str("UP"),
            OperState::Other(code) => write!(f, "state {code}"),
        }
    }
}

/// An interface without its addresses: what one link message says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Link {
    pub(crate) name: String,
    pub(crate) ifindex: u32,
    pub(crate) mac: Option<Mac>,
    pub(crate) mtu: u32,
    pub(crate) oper_state: OperState,
    pub(crate) admin_up: bool,
    pub(crate) lower_up: bool,
}

fn is_up(oper_state: OperState, admin_up: bool, lower_up: bool) -> bool {
    match oper_state {
        OperState::Up => true,
        OperState::Unknown => admin_up && lower_up,
        _ => false,
    }
}

impl Link {
    /// As [`Interface::is_up`].
    pub(crate) fn is_up(&self) -> bool {
        is_up(self.oper_state, self.admin_up, self.lower_up)
    }

    /// Reads a link message. `None` when it lacks a name or an MTU (never from a kernel).
    pub(crate) fn parse(message: &LinkMessage) -> Option<Link> {
        let mut name = None;
        let mut mac = None;
        let mut mtu = None;
        let mut oper_state = OperState::Unknown;
        for attribute in &message.attributes {
            match attribute {
                LinkAttribute::IfName(n) => name = Some(n.clone()),
                LinkAttribute::Address(bytes) => mac = Mac::try_from(bytes.as_slice()).ok(),
                LinkAttribute::Mtu(m) => mtu = Some(*m),
                LinkAttribute::OperState(state) => {
                    oper_state = OperState::from_code((*state).into())
                }
                _ => {}
            }
        }
        Some(Link {
            name: name?,
            ifindex: message.header.index,
            mac,
            mtu: mtu?,
            oper_state,
            admin_up: message.header.flags.contains(LinkFlags::Up),
            lower_up: message.header.flags.contains(LinkFlags::LowerUp),
        })
    }

    /// The interface, once its addresses are read.
    pub(crate) fn into_interface(self, socket: &mut RequestSocket) -> Result<Interface, HostError> {
        let addresses = query_addresses(socket, self.ifindex)?;
        self.with_addresses(addresses)
    }

    /// The interface with these addresses; an error if it is not Ethernet.
    pub(crate) fn with_addresses(
        self,
        addresses: Vec<InterfaceAddress>,
    ) -> Result<Interface, HostError> {
        let Some(mac) = self.mac else {
            return Err(HostError::NotEthernet { name: self.name });
        };
        Ok(Interface {
            name: self.name,
            ifindex: self.ifindex,
            mac,
            mtu: self.mtu,
            oper_state: self.oper_state,
            admin_up: self.admin_up,
            lower_up: self.lower_up,
            addresses,
        })
    }
}

/// Which interface to ask for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Selector<'a> {
    Name(&'a str),
    Index(u32),
}

impl fmt::Display for Selector<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Name(name) => write!(f, "{name}"),
            Selector::Index(ifindex) => write!(f, "with index {ifindex}"),
        }
    }
}

/// `IFNAMSIZ` less the terminating zero: the longest interface name Linux accepts.
const MAX_NAME_LEN: usize = 15;

pub(crate) fn open_socket() -> Result<RequestSocket, HostError> {
    RequestSocket::open().map_err(|e| HostError::netlink("opening a NETLINK_ROUTE socket", e))
}

/// One link (`RTM_GETLINK` for a name or an index), without statistics.
pub(crate) fn query_link(
    socket: &mut RequestSocket,
    which: Selector<'_>,
) -> Result<Link, HostError> {
    if let Selector::Name(name) = which
        && (name.is_empty() || name.len() > MAX_NAME_LEN)
    {
        return Err(HostError::NoSuchInterface {
            name: name.to_owned(),
        });
    }
    let mut request = LinkMessage::default();
    match which {
        Selector::Name(name) => request
            .attributes
            .push(LinkAttribute::IfName(name.to_owned())),
        Selector::Index(ifindex) => request.header.index = ifindex,
    }
    request
        .attributes
        .push(LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats]));
    let not_found = || match which {
        Selector::Name(name) => HostError::NoSuchInterface {
            name: name.to_owned(),
        },
        Selector::Index(ifindex) => HostError::NoSuchIfindex { ifindex },
    };
    let replies = socket
        .request(RouteNetlinkMessage::GetLink(request), 0)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENODEV) => not_found(),
            _ => HostError::netlink(format_args!("reading interface {which}"), e),
        })?;
    replies
        .iter()
        .find_map(|reply| match reply {
            RouteNetlinkMessage::NewLink(link) => Link::parse(link),
            _ => None,
        })
        .ok_or_else(not_found)
}

/// The addresses of interface `ifindex` (`RTM_GETADDR` dump, filtered by the kernel under
/// strict checking and again here).
pub(crate) fn query_addresses(
    socket: &mut RequestSocket,
    ifindex: u32,
) -> Result<Vec<InterfaceAddress>, HostError> {
    let mut request = AddressMessage::default();
    request.header.index = ifindex;
    let replies = socket
        .dump(&RouteNetlinkMessage::GetAddress(request))
        .map_err(|e| {
            HostError::netlink(
                format_args!("reading the addresses of interface {ifindex}"),
                e,
            )
        })?;
    Ok(replies
        .iter()
        .filter_map(|reply| match reply {
            RouteNetlinkMessage::NewAddress(a) => parse_address(a),
            _ => None,
        })
        .filter(|(index, _)| *index == ifindex)
        .map(|(_, address)| address)
        .collect())
}

/// Reads an address message: (interface index, address). `None` for families other than
/// IPv4 and IPv6 or a message without an address.
pub(crate) fn parse_address(message: &AddressMessage) -> Option<(u32, InterfaceAddress)> {
    if !matches!(
        message.header.family,
        AddressFamily::Inet | AddressFamily::Inet6
    ) {
        return None;
    }
    let (mut local, mut address) = (None, None);
    // The header has the low 8 bits of the flags; IFA_FLAGS, when present, has them all.
    let mut flags = u32::from(message.header.flags.bits());
    for attribute in &message.attributes {
        match attribute {
            AddressAttribute::Local(ip) => local = Some(*ip),
            AddressAttribute::Address(ip) => address = Some(*ip),
            AddressAttribute::Flags(f) => flags = f.bits(),
            _ => {}
        }
    }
    // IFA_LOCAL is the interface's own address; IFA_ADDRESS is the peer's on point-to-point
    // IPv4 links, and the only one IPv6 sends.
    let ip = local.or(address)?;
    Some((
        message.header.index,
        InterfaceAddress {
            ip,
            prefix_len: message.header.prefix_len,
            scope: AddressScope::from_code(message.header.scope.into()),
            flags: AddressFlags(flags),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_route::address::{
        AddressFlags as NlFlags, AddressHeaderFlags, AddressScope as NlScope,
    };
    use netlink_packet_route::link::State;

    fn address(ip: &str, prefix_len: u8) -> InterfaceAddress {
        InterfaceAddress {
            ip: ip.parse().expect("ip"),
            prefix_len,
            scope: AddressScope::Global,
            flags: AddressFlags(AddressFlags::PERMANENT),
        }
    }

    fn interface(mtu: u32, addresses: Vec<InterfaceAddress>) -> Interface {
        Interface {
            name: "eth9".into(),
            ifindex: 9,
            mac: [2, 0, 0, 0, 0, 9],
            mtu,
            oper_state: OperState::Up,
            admin_up: true,
            lower_up: true,
            addresses,
        }
    }

    #[test]
    fn path_mtu_fits_the_link_and_respects_the_cap() {
        let v4 = vec![address("10.0.0.1", 24)];
        assert_eq!(
            path_mtu(&interface(1500, v4.clone()), IbMtu::Mtu4096).ok(),
            Some(IbMtu::Mtu1024)
        );
        assert_eq!(
            path_mtu(&interface(9000, v4.clone()), IbMtu::Mtu2048).ok(),
            Some(IbMtu::Mtu2048)
        );
        assert_eq!(
            path_mtu(&interface(9000, v4.clone()), IbMtu::Mtu4096).ok(),
            Some(IbMtu::Mtu4096)
        );
        assert_eq!(
            path_mtu(&interface(1000, v4.clone()), IbMtu::Mtu4096).ok(),
            Some(IbMtu::Mtu512)
        );
        assert!(matches!(
            path_mtu(&interface(300, v4.clone()), IbMtu::Mtu4096),
            Err(HostError::MtuTooSmall { mtu: 300, .. })
        ));
        // 4096 + 74 fits IPv4 (20 + 8 + 32 + 4 bytes of headers and ICRC) but not IPv6 (40 + ...).
        assert_eq!(
            path_mtu(&interface(4170, v4.clone()), IbMtu::Mtu4096).ok(),
            Some(IbMtu::Mtu4096)
        );
        let mut both = v4;
        both.push(address("fd00::1", 64));
        assert_eq!(
            path_mtu(&interface(4170, both), IbMtu::Mtu4096).ok(),
            Some(IbMtu::Mtu2048)
        );
    }

    #[test]
    fn is_up_follows_the_operational_state() {
        let mut i = interface(1500, vec![]);
        assert!(i.is_up());
        i.oper_state = OperState::LowerLayerDown;
        assert!(!i.is_up());
        i.oper_state = OperState::Unknown;
        assert!(i.is_up());
        i.lower_up = false;
        assert!(!i.is_up());
    }

    /// An address message of interface 4 with `attributes`.
    fn address_message(
        family: AddressFamily,
        prefix_len: u8,
        attributes: Vec<AddressAttribute>,
    ) -> AddressMessage {
        let mut m = AddressMessage::default();
        m.header.family = family;
        m.header.index = 4;
        m.header.prefix_len = prefix_len;
        m.attributes = attributes;
        m
    }

    #[test]
    fn address_messages_read_local_flags_and_scope() {
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        let mut m = address_message(
            AddressFamily::Inet,
            24,
            vec![
                AddressAttribute::Address(ip("10.0.0.2")),
                AddressAttribute::Local(ip("10.0.0.1")),
            ],
        );
        m.header.flags = AddressHeaderFlags::Permanent;
        let (index, a) = parse_address(&m).expect("parses");
        assert_eq!(index, 4);
        assert_eq!(a.ip, ip("10.0.0.1"));
        assert!(a.flags.permanent() && !a.flags.tentative());

        let mut m = address_message(
            AddressFamily::Inet6,
            64,
            vec![
                AddressAttribute::Address(ip("fe80::1")),
                AddressAttribute::Flags(NlFlags::Tentative | NlFlags::Nodad),
            ],
        );
        m.header.scope = NlScope::Link;
        let (_, a) = parse_address(&m).expect("parses");
        assert_eq!(a.scope, AddressScope::Link);
        assert!(a.flags.tentative() && !a.is_usable());
        assert_eq!(a.to_string(), "fe80::1/64");

        m.header.family = AddressFamily::Bridge;
        assert!(parse_address(&m).is_none());
    }

    #[test]
    fn link_messages_read_name_mac_mtu_and_state() {
        let mut m = LinkMessage::default();
        m.header.index = 7;
        m.header.flags = LinkFlags::Up | LinkFlags::LowerUp;
        m.attributes.push(LinkAttribute::IfName("veth7".into()));
        m.attributes
            .push(LinkAttribute::Address(vec![2, 1, 2, 3, 4, 5]));
        m.attributes.push(LinkAttribute::Mtu(9000));
        m.attributes.push(LinkAttribute::OperState(State::Up));
        let link = Link::parse(&m).expect("parses");
        assert_eq!(link.mac, Some([2, 1, 2, 3, 4, 5]));
        assert_eq!((link.ifindex, link.mtu), (7, 9000));
        assert!(link.admin_up && link.lower_up);
        assert_eq!(link.oper_state, OperState::Up);
        let i = link.with_addresses(vec![]).expect("ethernet");
        assert!(i.is_up());

        m.attributes[1] = LinkAttribute::Address(vec![0; 4]);
        let link = Link::parse(&m).expect("parses");
        assert!(matches!(
            link.with_addresses(vec![]),
            Err(HostError::NotEthernet { .. })
        ));
    }
}
