//! IP multicast group memberships of the served interface: while a queue pair of the
//! device is attached to a multicast group, the interface is a member of the group's IP
//! group, as it is for a socket that joined it. The kernel then reports the membership
//! (IGMP for IPv4, MLD for IPv6) so that snooping switches forward the group's frames, and
//! programs the NIC's multicast filter so that they come in at all. The frames themselves
//! still go to the daemon: the XDP program takes every RoCE v2 frame before the stack sees
//! it.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A membership of one group on one interface, held by a socket of its own (a socket
/// joins at most `igmp_max_memberships` groups; one each keeps clear of that limit). It
/// ends when dropped: the kernel leaves the group when the socket closes.
#[derive(Debug)]
pub struct Membership {
    _socket: OwnedFd,
}

impl Membership {
    /// Interface `ifindex` joins `group`, in the calling thread's network namespace.
    pub fn join(ifindex: u32, group: IpAddr) -> io::Result<Membership> {
        let family = match group {
            IpAddr::V4(_) => libc::AF_INET,
            IpAddr::V6(_) => libc::AF_INET6,
        };
        if !group.is_multicast() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // Safety: no pointer is passed; the result is checked.
        let fd = unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // Safety: a descriptor just opened, owned by nothing else.
        let socket = unsafe { OwnedFd::from_raw_fd(fd) };
        let index =
            i32::try_from(ifindex).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let r = match group {
            IpAddr::V4(v4) => {
                let request = libc::ip_mreqn {
                    imr_multiaddr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(v4.octets()),
                    },
                    imr_address: libc::in_addr { s_addr: 0 },
                    imr_ifindex: index,
                };
                // Safety: `request` is a valid `ip_mreqn` of the length given, read only
                // during the call.
                unsafe {
                    libc::setsockopt(
                        socket.as_raw_fd(),
                        libc::IPPROTO_IP,
                        libc::IP_ADD_MEMBERSHIP,
                        (&raw const request).cast(),
                        size_of::<libc::ip_mreqn>() as libc::socklen_t,
                    )
                }
            }
            IpAddr::V6(v6) => {
                let request = libc::ipv6_mreq {
                    ipv6mr_multiaddr: libc::in6_addr {
                        s6_addr: v6.octets(),
                    },
                    ipv6mr_interface: ifindex,
                };
                // Safety: as above, an `ipv6_mreq`.
                unsafe {
                    libc::setsockopt(
                        socket.as_raw_fd(),
                        libc::IPPROTO_IPV6,
                        libc::IPV6_ADD_MEMBERSHIP,
                        (&raw const request).cast(),
                        size_of::<libc::ipv6_mreq>() as libc::socklen_t,
                    )
                }
            }
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Membership { _socket: socket })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_multicast_groups_are_joined() {
        let e = Membership::join(1, "10.0.0.1".parse().unwrap()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        let e = Membership::join(1, "fd00::1".parse().unwrap()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    }
}
