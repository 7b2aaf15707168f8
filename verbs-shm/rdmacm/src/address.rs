//! Socket addresses between their C forms (`struct sockaddr_in`, `sockaddr_in6`,
//! `sockaddr_storage`, ports in network order) and the daemon's [`CmSockAddr`], and the
//! kernel's route lookup that says which local address reaches a destination.
//!
//! Only `AF_INET` and `AF_INET6` are addresses here: `AF_IB` is InfiniBand's own, which a
//! RoCE device does not have (cma.c answers `EINVAL` for it without kernel support too).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};

use libc::{sockaddr, sockaddr_in, sockaddr_in6, sockaddr_storage};
use verbs_shm::cm::CmSockAddr;

use crate::ffi::{Cm, Errno};

/// Reads a C socket address; `EINVAL` for NULL or a family other than IPv4 and IPv6.
///
/// # Safety
///
/// `addr` is NULL or points to a socket address as long as its family says.
pub(crate) unsafe fn read(addr: *const sockaddr) -> Cm<SocketAddr> {
    if addr.is_null() {
        return Err(Errno::EINVAL);
    }
    // Safety: every socket address starts with its family (caller).
    let family = unsafe { (*addr).sa_family };
    match i32::from(family) {
        libc::AF_INET => {
            // Safety: an AF_INET address is a sockaddr_in (caller); read unaligned since
            // the caller's buffer need not be aligned for it.
            let sin = unsafe { addr.cast::<sockaddr_in>().read_unaligned() };
            Ok(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // Safety: an AF_INET6 address is a sockaddr_in6 (caller).
            let sin6 = unsafe { addr.cast::<sockaddr_in6>().read_unaligned() };
            Ok(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => Err(Errno::EINVAL),
    }
}

/// Reads an optional C socket address: NULL is none.
///
/// # Safety
///
/// As [`read`].
pub(crate) unsafe fn read_optional(addr: *const sockaddr) -> Cm<Option<SocketAddr>> {
    if addr.is_null() {
        Ok(None)
    } else {
        // Safety: forwarded from the caller.
        unsafe { read(addr) }.map(Some)
    }
}

/// The C form of an address, in a zeroed `sockaddr_storage`; all zero for none.
pub(crate) fn storage(addr: Option<SocketAddr>) -> sockaddr_storage {
    // Safety: all-zero is a valid sockaddr_storage (AF_UNSPEC).
    let mut out: sockaddr_storage = unsafe { std::mem::zeroed() };
    match addr {
        None => {}
        Some(SocketAddr::V4(v4)) => {
            // Safety: zeroed; sockaddr_in is all plain integers.
            let mut sin: sockaddr_in = unsafe { std::mem::zeroed() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = v4.port().to_be();
            sin.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
            // Safety: a sockaddr_in fits at the start of a sockaddr_storage, which is
            // aligned for it.
            unsafe { std::ptr::write((&raw mut out).cast::<sockaddr_in>(), sin) };
        }
        Some(SocketAddr::V6(v6)) => {
            // Safety: as above.
            let mut sin6: sockaddr_in6 = unsafe { std::mem::zeroed() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = v6.port().to_be();
            sin6.sin6_flowinfo = v6.flowinfo();
            sin6.sin6_addr.s6_addr = v6.ip().octets();
            sin6.sin6_scope_id = v6.scope_id();
            // Safety: as above, for a sockaddr_in6.
            unsafe { std::ptr::write((&raw mut out).cast::<sockaddr_in6>(), sin6) };
        }
    }
    out
}

/// The address held in a `sockaddr_storage`, if it is IPv4 or IPv6.
pub(crate) fn from_storage(storage: &sockaddr_storage) -> Option<SocketAddr> {
    // Safety: a sockaddr_storage is large enough for every family it may hold.
    unsafe { read((storage as *const sockaddr_storage).cast()) }.ok()
}

/// The port of a C address, in network order (cma.c's `ucma_get_port`): 0 for a family
/// without ports.
pub(crate) fn port_be(storage: &sockaddr_storage) -> u16 {
    from_storage(storage).map_or(0, |a| a.port().to_be())
}

/// The daemon's form of an address.
pub(crate) fn to_cm(addr: Option<SocketAddr>) -> CmSockAddr {
    addr.map_or(CmSockAddr::NONE, CmSockAddr::from)
}

/// The address of the daemon's form; none for no address.
pub(crate) fn from_cm(addr: &CmSockAddr) -> Option<SocketAddr> {
    addr.to_socket_addr()
}

/// Whether an address stands for every address of the host: the wildcard (`0.0.0.0`,
/// `::`) or a loopback address (`127.0.0.0/8`, `::1`), as the kernel's `cma_any_addr`
/// has it. `rdma_bind_addr` to `127.0.0.1` binds on every device and leaves the id without
/// one, as a wildcard bind does (libfabric's verbs provider binds there when given no
/// address, then lists the devices' own addresses).
pub(crate) fn is_any(ip: IpAddr) -> bool {
    ip.is_unspecified() || ip.is_loopback()
}

/// The local address the kernel's routing table chooses to reach `dst`, found as a UDP
/// `connect` finds it (nothing is sent). `None` when there is no route.
pub(crate) fn route_source(dst: SocketAddr) -> Option<IpAddr> {
    let local: SocketAddr = match dst {
        SocketAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        SocketAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
    };
    let socket = UdpSocket::bind(local).ok()?;
    let mut target = dst;
    if target.port() == 0 {
        // connect() refuses port 0; any port routes the same.
        target.set_port(9);
    }
    socket.connect(target).ok()?;
    socket.local_addr().ok().map(|a| a.ip())
}

/// Whether `ip` is an address of this host (binding a UDP socket to it succeeds), to tell
/// `EADDRNOTAVAIL` (not an address here) from `ENODEV` (an address, but of no device).
pub(crate) fn is_local(ip: IpAddr) -> bool {
    UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip_through_their_c_form() {
        for text in ["10.77.0.1:7174", "[fd00:77::1]:20079", "0.0.0.0:0"] {
            let a: SocketAddr = text.parse().unwrap();
            let c = storage(Some(a));
            assert_eq!(from_storage(&c), Some(a), "{text}");
            assert_eq!(port_be(&c), a.port().to_be(), "{text}");
            assert_eq!(from_cm(&to_cm(Some(a))), Some(a));
        }
        assert_eq!(from_storage(&storage(None)), None);
        assert_eq!(port_be(&storage(None)), 0);
    }

    #[test]
    fn the_c_form_has_network_order_ports_and_addresses() {
        let a: SocketAddr = "10.77.0.2:7174".parse().unwrap();
        let c = storage(Some(a));
        // Safety: the storage holds a sockaddr_in.
        let sin = unsafe { *(&raw const c).cast::<sockaddr_in>() };
        assert_eq!(sin.sin_family, libc::AF_INET as u16);
        assert_eq!(sin.sin_port.to_ne_bytes(), 7174u16.to_be_bytes());
        assert_eq!(sin.sin_addr.s_addr.to_ne_bytes(), [10, 77, 0, 2]);
    }

    #[test]
    fn only_ip_families_are_addresses() {
        let mut ib = storage(None);
        ib.ss_family = crate::abi::AF_IB as u16;
        // Safety: a storage is as long as any family says.
        assert_eq!(unsafe { read((&raw const ib).cast()) }, Err(Errno::EINVAL));
        // Safety: NULL is checked first.
        assert_eq!(unsafe { read(std::ptr::null()) }, Err(Errno::EINVAL));
        let unspec = storage(None);
        // Safety: a zeroed storage is AF_UNSPEC, as long as any family says.
        let read_unspec = unsafe { read((&raw const unspec).cast()) };
        assert_eq!(read_unspec, Err(Errno::EINVAL));
    }

    #[test]
    fn the_route_to_a_local_address_starts_there() {
        let lo: SocketAddr = "127.0.0.1:7174".parse().unwrap();
        assert_eq!(route_source(lo), Some(IpAddr::from([127, 0, 0, 1])));
        assert!(is_local(IpAddr::from([127, 0, 0, 1])));
        assert!(!is_local(IpAddr::from([192, 0, 2, 77])));
    }
}
