//! InfiniBand MTUs and the path MTU of a RoCEv2 link.

use core::fmt;

use crate::ipv4::HEADER_LEN as IPV4_HEADER_LEN;
use crate::ipv6::HEADER_LEN as IPV6_HEADER_LEN;
use crate::opcode::MAX_HEADER_LEN_WITH_PAYLOAD;
use crate::udp::HEADER_LEN as UDP_HEADER_LEN;

/// The IP version a RoCEv2 packet travels over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpVersion {
    /// IPv4 (RFC 791), 20-byte header.
    V4,
    /// IPv6 (RFC 8200), 40-byte header.
    V6,
}

impl IpVersion {
    /// Length of the IP header RoCEv2 uses (no IPv4 options, no IPv6 extension headers).
    pub const fn header_len(self) -> usize {
        match self {
            IpVersion::V4 => IPV4_HEADER_LEN,
            IpVersion::V6 => IPV6_HEADER_LEN,
        }
    }
}

/// An InfiniBand MTU: the most payload bytes one packet carries (verbs `enum ibv_mtu`).
///
/// The discriminant is the verbs encoding (`IBV_MTU_256` = 1 … `IBV_MTU_4096` = 5), the value
/// perftest exchanges in its `check_mtu` step and rdma_cm puts in the CM REQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum IbMtu {
    /// 256 bytes.
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl IbMtu {
    /// All MTUs, smallest first.
    pub const ALL: [IbMtu; 5] = [
        IbMtu::Mtu256,
        IbMtu::Mtu512,
        IbMtu::Mtu1024,
        IbMtu::Mtu2048,
        IbMtu::Mtu4096,
    ];

    /// The MTU in bytes.
    pub const fn bytes(self) -> usize {
        128 << (self as u8)
    }

    /// The MTU of exactly `bytes` bytes, `None` unless it is 256, 512, 1024, 2048 or 4096.
    pub const fn from_bytes(bytes: usize) -> Option<IbMtu> {
        match bytes {
            256 => Some(IbMtu::Mtu256),
            512 => Some(IbMtu::Mtu512),
            1024 => Some(IbMtu::Mtu1024),
            2048 => Some(IbMtu::Mtu2048),
            4096 => Some(IbMtu::Mtu4096),
            _ => None,
        }
    }

    /// The verbs encoding (1 = 256 … 5 = 4096).
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The MTU of a verbs encoding, `None` outside 1..=5.
    pub const fn from_code(code: u8) -> Option<IbMtu> {
        match code {
            1 => Some(IbMtu::Mtu256),
            2 => Some(IbMtu::Mtu512),
            3 => Some(IbMtu::Mtu1024),
            4 => Some(IbMtu::Mtu2048),
            5 => Some(IbMtu::Mtu4096),
            _ => None,
        }
    }

    /// The largest MTU not above `bytes`, `None` if `bytes` is below 256.
    pub const fn largest_within(bytes: usize) -> Option<IbMtu> {
        if bytes >= 4096 {
            Some(IbMtu::Mtu4096)
        } else if bytes >= 2048 {
            Some(IbMtu::Mtu2048)
        } else if bytes >= 1024 {
            Some(IbMtu::Mtu1024)
        } else if bytes >= 512 {
            Some(IbMtu::Mtu512)
        } else if bytes >= 256 {
            Some(IbMtu::Mtu256)
        } else {
            None
        }
    }

    /// The path MTU of a link: the largest IB MTU whose every packet fits in `netdev_mtu`.
    ///
    /// A full packet is the IP header, the UDP header, the longest header chain of any
    /// payload-carrying RC/UC/UD opcode (BTH + RETH + ImmDt, 32 bytes, taken from the
    /// opcode table), the payload and the ICRC. For a 1500-byte link that leaves 1436 bytes
    /// on IPv4 and 1416 on IPv6, so the path MTU is 1024 on both. `None` if not even 256
    /// bytes fit.
    pub const fn for_netdev_mtu(netdev_mtu: usize, ip: IpVersion) -> Option<IbMtu> {
        let overhead =
            ip.header_len() + UDP_HEADER_LEN + MAX_HEADER_LEN_WITH_PAYLOAD + crate::ICRC_LEN;
        match netdev_mtu.checked_sub(overhead) {
            Some(room) => IbMtu::largest_within(room),
            None => None,
        }
    }

    /// The active MTU rxe reports for a netdev MTU, so that a port can advertise what an
    /// rxe port on the same link would.
    ///
    /// rxe subtracts a fixed 80 bytes of headers whatever the IP version
    /// (`eth_mtu_int_to_enum`, `RXE_MAX_HDR_LENGTH`) and falls back to 256 when nothing fits
    /// (`rxe_set_mtu`). This is never larger than [`IbMtu::for_netdev_mtu`] on IPv4.
    pub const fn rxe_active_mtu(netdev_mtu: usize) -> IbMtu {
        match netdev_mtu.checked_sub(80) {
            Some(room) => match IbMtu::largest_within(room) {
                Some(mtu) => mtu,
                None => IbMtu::Mtu256,
            },
            None => IbMtu::Mtu256,
        }
    }
}

impl fmt::Display for IbMtu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_and_codes_round_trip() {
        let expected = [(1, 256), (2, 512), (3, 1024), (4, 2048), (5, 4096)];
        for (mtu, (code, bytes)) in IbMtu::ALL.iter().zip(expected) {
            assert_eq!(mtu.code(), code);
            assert_eq!(mtu.bytes(), bytes);
            assert_eq!(IbMtu::from_bytes(bytes), Some(*mtu));
            assert_eq!(IbMtu::from_code(code), Some(*mtu));
        }
        assert_eq!(IbMtu::from_bytes(1500), None);
        assert_eq!(IbMtu::from_code(0), None);
        assert_eq!(IbMtu::from_code(6), None);
    }

    #[test]
    fn path_mtu_of_common_links() {
        assert_eq!(
            IbMtu::for_netdev_mtu(1500, IpVersion::V4),
            Some(IbMtu::Mtu1024)
        );
        assert_eq!(
            IbMtu::for_netdev_mtu(1500, IpVersion::V6),
            Some(IbMtu::Mtu1024)
        );
        assert_eq!(
            IbMtu::for_netdev_mtu(9000, IpVersion::V4),
            Some(IbMtu::Mtu4096)
        );
        // veth with native XDP tops out at 3504: 2048 fits, 4096 does not.
        assert_eq!(
            IbMtu::for_netdev_mtu(3504, IpVersion::V4),
            Some(IbMtu::Mtu2048)
        );
        assert_eq!(IbMtu::for_netdev_mtu(200, IpVersion::V4), None);
        assert_eq!(IbMtu::for_netdev_mtu(0, IpVersion::V6), None);
    }

    #[test]
    fn path_mtu_boundaries_are_exact() {
        // IPv4: 20 + 8 + 32 + 4 = 64 bytes of overhead around the payload.
        assert_eq!(
            IbMtu::for_netdev_mtu(4096 + 64, IpVersion::V4),
            Some(IbMtu::Mtu4096)
        );
        assert_eq!(
            IbMtu::for_netdev_mtu(4096 + 63, IpVersion::V4),
            Some(IbMtu::Mtu2048)
        );
        // IPv6: 40 + 8 + 32 + 4 = 84.
        assert_eq!(
            IbMtu::for_netdev_mtu(1024 + 84, IpVersion::V6),
            Some(IbMtu::Mtu1024)
        );
        assert_eq!(
            IbMtu::for_netdev_mtu(1024 + 83, IpVersion::V6),
            Some(IbMtu::Mtu512)
        );
        assert_eq!(
            IbMtu::for_netdev_mtu(256 + 64, IpVersion::V4),
            Some(IbMtu::Mtu256)
        );
        assert_eq!(IbMtu::for_netdev_mtu(256 + 63, IpVersion::V4), None);
    }

    #[test]
    fn rxe_active_mtu_matches_rxe() {
        assert_eq!(IbMtu::rxe_active_mtu(1500), IbMtu::Mtu1024);
        assert_eq!(IbMtu::rxe_active_mtu(4176), IbMtu::Mtu4096);
        assert_eq!(IbMtu::rxe_active_mtu(4175), IbMtu::Mtu2048);
        assert_eq!(IbMtu::rxe_active_mtu(100), IbMtu::Mtu256);
        assert_eq!(IbMtu::rxe_active_mtu(9000), IbMtu::Mtu4096);
        for netdev_mtu in (0..10_000).step_by(7) {
            if let Some(ours) = IbMtu::for_netdev_mtu(netdev_mtu, IpVersion::V4) {
                assert!(IbMtu::rxe_active_mtu(netdev_mtu) <= ours, "{netdev_mtu}");
            }
        }
    }
}
