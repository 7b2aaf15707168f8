//! Global identifiers: 128-bit GIDs and their RoCEv2 meaning, an IP address.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A 16-byte global identifier, in wire (network) byte order.
///
/// In RoCEv2 a GID *is* an IP address (IBTA Annex A17): an IPv6 address as it is, an IPv4
/// address as the IPv4-mapped IPv6 address `::ffff:a.b.c.d`. That is the form rxe puts in
/// its GID table and the form `ibv_rc_pingpong` exchanges.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The all-zero GID (what verbs programs exchange when no GID index is given).
    pub const ZERO: Gid = Gid([0; 16]);

    /// The GID of an IPv4 address: `::ffff:a.b.c.d`.
    pub const fn from_ipv4(addr: Ipv4Addr) -> Gid {
        Gid(addr.to_ipv6_mapped().octets())
    }

    /// The GID of an IPv6 address: its 16 bytes.
    pub const fn from_ipv6(addr: Ipv6Addr) -> Gid {
        Gid(addr.octets())
    }

    /// The GID of an IP address.
    pub const fn from_ip(addr: IpAddr) -> Gid {
        match addr {
            IpAddr::V4(a) => Gid::from_ipv4(a),
            IpAddr::V6(a) => Gid::from_ipv6(a),
        }
    }

    /// The IPv4 address of an IPv4-mapped GID, `None` for any other GID.
    pub const fn to_ipv4(&self) -> Option<Ipv4Addr> {
        if !self.is_ipv4() {
            return None;
        }
        let b = self.0;
        Some(Ipv4Addr::new(b[12], b[13], b[14], b[15]))
    }

    /// Whether this is an IPv4-mapped GID (`::ffff:a.b.c.d`): one comparison of its first
    /// twelve bytes, asked of every packet sent and received.
    pub const fn is_ipv4(&self) -> bool {
        u128::from_be_bytes(self.0) >> 32 == 0xffff
    }

    /// Whether this is a multicast GID: an IB multicast GID (first byte 0xff: IPv6
    /// multicast), or the IPv4-mapped form of an IPv4 multicast group (`::ffff:224.0.0.0/4`),
    /// as the kernel's `rdma_is_multicast_addr` has it.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] == 0xff || (self.is_ipv4() && self.0[12] & 0xf0 == 0xe0)
    }

    /// The IP address this GID stands for: IPv4 for `::ffff:a.b.c.d`, IPv6 otherwise.
    pub const fn to_ip(&self) -> IpAddr {
        match self.to_ipv4() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from_octets(self.0)),
        }
    }

    /// The GID as an IPv6 address (IPv4 GIDs stay in their mapped form).
    pub const fn to_ipv6(&self) -> Ipv6Addr {
        Ipv6Addr::from_octets(self.0)
    }

    /// The 16 bytes, in wire order.
    pub const fn octets(&self) -> [u8; 16] {
        self.0
    }
}

impl From<IpAddr> for Gid {
    fn from(addr: IpAddr) -> Gid {
        Gid::from_ip(addr)
    }
}

impl From<Ipv4Addr> for Gid {
    fn from(addr: Ipv4Addr) -> Gid {
        Gid::from_ipv4(addr)
    }
}

impl From<Ipv6Addr> for Gid {
    fn from(addr: Ipv6Addr) -> Gid {
        Gid::from_ipv6(addr)
    }
}

impl From<Gid> for IpAddr {
    fn from(gid: Gid) -> IpAddr {
        gid.to_ip()
    }
}

impl fmt::Display for Gid {
    /// Formats as an IPv6 address, e.g. `::ffff:10.77.0.3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_ipv6(), f)
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gid({})", self.to_ipv6())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;

    #[test]
    fn ipv4_maps_to_ffff_prefix_and_back() {
        let addr = Ipv4Addr::new(10, 77, 0, 3);
        let gid = Gid::from_ipv4(addr);
        // The bytes ibv_rc_pingpong exchanged in rc_pingpong.pcap for 10.77.0.3.
        assert_eq!(
            gid.octets(),
            [
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0x0a, 0x4d, 0x00, 0x03
            ]
        );
        assert_eq!(gid.to_ipv4(), Some(addr));
        assert_eq!(gid.to_ip(), IpAddr::V4(addr));
        assert_eq!(format!("{gid}"), "::ffff:10.77.0.3");
    }

    #[test]
    fn ipv6_is_itself() {
        let addr: Ipv6Addr = "fd00:77::2".parse().unwrap();
        let gid = Gid::from(IpAddr::V6(addr));
        assert_eq!(gid.octets(), addr.octets());
        assert_eq!(gid.to_ipv4(), None);
        assert_eq!(IpAddr::from(gid), IpAddr::V6(addr));
    }

    #[test]
    fn zero_gid_is_not_ipv4() {
        assert_eq!(Gid::ZERO.to_ipv4(), None);
        assert!(!Gid::ZERO.is_ipv4());
        // Only `::ffff:0:0/96` is IPv4: not the deprecated IPv4-compatible `::a.b.c.d`, not
        // a prefix with any other bit set.
        let mut b = Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 1)).0;
        assert!(Gid(b).is_ipv4());
        b[10] = 0;
        b[11] = 0;
        assert_eq!(Gid(b).to_ipv4(), None);
        for i in 0..12 {
            let mut c = Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 1)).0;
            c[i] ^= 1;
            assert_eq!(Gid(c).to_ipv4(), None, "byte {i}");
            assert_eq!(Gid(c).to_ipv4(), Ipv6Addr::from_octets(c).to_ipv4_mapped());
        }
        assert_eq!(Gid::ZERO.to_ip(), IpAddr::V6(Ipv6Addr::UNSPECIFIED));
    }

    #[test]
    fn multicast_gids_are_ipv6_multicast_or_mapped_ipv4_groups() {
        let v4 = |a, b, c, d| Gid::from_ipv4(Ipv4Addr::new(a, b, c, d));
        assert!(v4(224, 0, 0, 1).is_multicast());
        assert!(v4(230, 77, 0, 2).is_multicast());
        assert!(v4(239, 255, 255, 255).is_multicast());
        assert!(!v4(223, 255, 255, 255).is_multicast());
        assert!(!v4(240, 0, 0, 1).is_multicast());
        assert!(!v4(10, 77, 0, 2).is_multicast());
        let v6 = |s: &str| Gid::from_ipv6(s.parse().unwrap());
        assert!(v6("ff0e::1").is_multicast());
        assert!(v6("ff12:401b:ffff::1").is_multicast());
        assert!(!v6("fe80::1").is_multicast());
        assert!(!v6("fd00:77::2").is_multicast());
        // The IPv4-compatible form of a group is not the mapped one.
        let mut b = v4(230, 0, 0, 1).0;
        b[10] = 0;
        b[11] = 0;
        assert!(!Gid(b).is_multicast());
        assert!(!Gid::ZERO.is_multicast());
    }
}
