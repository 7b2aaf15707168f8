//! Plain Ethernet + IPv4/IPv6 + UDP frames for tests and benchmarks that need raw bytes on
//! an AF_XDP socket (RoCEv2 itself is `xroce-wire`'s business; here a payload is bytes).
//!
//! IPv4 frames carry DF and a UDP checksum of 0, as rxe sends them; IPv6 frames carry a
//! real UDP checksum (RFC 8200 8.1 forbids 0).

use std::net::IpAddr;

/// Ethernet header length.
pub const ETH_LEN: usize = 14;
/// 802.1Q tag length.
pub const VLAN_LEN: usize = 4;
/// IPv4 header length without options.
pub const IPV4_LEN: usize = 20;
/// IPv6 fixed header length.
pub const IPV6_LEN: usize = 40;
/// UDP header length.
pub const UDP_LEN: usize = 8;

/// One end of a UDP flow on an Ethernet link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Ethernet address.
    pub mac: [u8; 6],
    /// IP address (both ends of a frame use the same family).
    pub ip: IpAddr,
    /// UDP port.
    pub port: u16,
}

/// A UDP datagram in an Ethernet frame, optionally 802.1Q-tagged.
#[derive(Clone, Copy, Debug)]
pub struct UdpFrame<'a> {
    /// Sender.
    pub src: Endpoint,
    /// Receiver.
    pub dst: Endpoint,
    /// 802.1Q VLAN id (12 bits), if tagged.
    pub vlan: Option<u16>,
    /// UDP payload.
    pub payload: &'a [u8],
}

impl UdpFrame<'_> {
    /// Bytes in the frame (no FCS).
    pub fn len(&self) -> usize {
        header_len(self.src.ip, self.vlan) + self.payload.len()
    }

    /// Whether the frame is empty (it never is: there are headers).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The frame as bytes.
    ///
    /// # Panics
    ///
    /// If source and destination are of different IP families.
    pub fn build(&self) -> Vec<u8> {
        let mut buf = vec![0; self.len()];
        let n = self.write(&mut buf);
        debug_assert_eq!(n, Some(buf.len()));
        buf
    }

    /// Writes the frame at the start of `buf` and returns its length, or `None` when `buf`
    /// is too short.
    ///
    /// # Panics
    ///
    /// If source and destination are of different IP families.
    pub fn write(&self, buf: &mut [u8]) -> Option<usize> {
        let len = self.len();
        let buf = buf.get_mut(..len)?;
        buf[0..6].copy_from_slice(&self.dst.mac);
        buf[6..12].copy_from_slice(&self.src.mac);
        let mut at = 12;
        if let Some(vlan) = self.vlan {
            buf[at..at + 2].copy_from_slice(&0x8100u16.to_be_bytes());
            buf[at + 2..at + 4].copy_from_slice(&(vlan & 0x0fff).to_be_bytes());
            at += VLAN_LEN;
        }
        let udp_len = UDP_LEN + self.payload.len();
        let udp_at = match (self.src.ip, self.dst.ip) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                buf[at..at + 2].copy_from_slice(&0x0800u16.to_be_bytes());
                at += 2;
                let ip = &mut buf[at..at + IPV4_LEN];
                ip[0] = 0x45;
                ip[1] = 0;
                ip[2..4].copy_from_slice(&((IPV4_LEN + udp_len) as u16).to_be_bytes());
                ip[4..6].copy_from_slice(&[0, 0]);
                ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
                ip[8] = 64;
                ip[9] = 17;
                ip[10..12].copy_from_slice(&[0, 0]);
                ip[12..16].copy_from_slice(&src.octets());
                ip[16..20].copy_from_slice(&dst.octets());
                let sum = checksum(&[ip]);
                ip[10..12].copy_from_slice(&sum.to_be_bytes());
                at + IPV4_LEN
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                buf[at..at + 2].copy_from_slice(&0x86ddu16.to_be_bytes());
                at += 2;
                let ip = &mut buf[at..at + IPV6_LEN];
                ip[0..4].copy_from_slice(&0x6000_0000u32.to_be_bytes());
                ip[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
                ip[6] = 17;
                ip[7] = 64;
                ip[8..24].copy_from_slice(&src.octets());
                ip[24..40].copy_from_slice(&dst.octets());
                at + IPV6_LEN
            }
            _ => panic!("UdpFrame: source and destination IP families differ"),
        };
        let udp = &mut buf[udp_at..];
        udp[0..2].copy_from_slice(&self.src.port.to_be_bytes());
        udp[2..4].copy_from_slice(&self.dst.port.to_be_bytes());
        udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        udp[6..8].copy_from_slice(&[0, 0]);
        udp[UDP_LEN..].copy_from_slice(self.payload);
        if let (IpAddr::V6(src), IpAddr::V6(dst)) = (self.src.ip, self.dst.ip) {
            // RFC 8200 8.1: the pseudo-header is source, destination, upper-layer length and
            // next header.
            let mut pseudo = [0u8; 40];
            pseudo[0..16].copy_from_slice(&src.octets());
            pseudo[16..32].copy_from_slice(&dst.octets());
            pseudo[32..36].copy_from_slice(&(udp_len as u32).to_be_bytes());
            pseudo[39] = 17;
            let sum = match checksum(&[&pseudo, udp]) {
                0 => 0xffff,
                sum => sum,
            };
            udp[6..8].copy_from_slice(&sum.to_be_bytes());
        }
        Some(len)
    }
}

/// Bytes before the UDP payload for a frame of this family and tagging.
pub fn header_len(ip: IpAddr, vlan: Option<u16>) -> usize {
    let ip_len = if ip.is_ipv4() { IPV4_LEN } else { IPV6_LEN };
    ETH_LEN + vlan.map_or(0, |_| VLAN_LEN) + ip_len + UDP_LEN
}

/// The Internet checksum (RFC 1071) over the concatenation of `parts`, each of even length
/// except perhaps the last.
pub fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u32 = 0;
    for part in parts {
        let mut chunks = part.chunks_exact(2);
        for pair in &mut chunks {
            sum += u32::from(u16::from_be_bytes([pair[0], pair[1]]));
        }
        if let [last] = chunks.remainder() {
            sum += u32::from(*last) << 8;
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn ends(src: IpAddr, dst: IpAddr) -> (Endpoint, Endpoint) {
        (
            Endpoint {
                mac: [2, 0, 0, 0, 0, 1],
                ip: src,
                port: 0xc001,
            },
            Endpoint {
                mac: [2, 0, 0, 0, 0, 2],
                ip: dst,
                port: 4791,
            },
        )
    }

    #[test]
    fn ipv4_frame_has_the_expected_bytes() {
        let (src, dst) = ends(
            Ipv4Addr::new(10, 0, 0, 1).into(),
            Ipv4Addr::new(10, 0, 0, 2).into(),
        );
        let frame = UdpFrame {
            src,
            dst,
            vlan: None,
            payload: b"hi",
        }
        .build();
        assert_eq!(frame.len(), 14 + 20 + 8 + 2);
        assert_eq!(&frame[0..6], &dst.mac);
        assert_eq!(&frame[12..14], &[0x08, 0x00]);
        assert_eq!(frame[14], 0x45);
        assert_eq!(&frame[16..18], &30u16.to_be_bytes());
        assert_eq!(&frame[20..22], &[0x40, 0x00], "DF");
        assert_eq!(
            checksum(&[&frame[14..34]]),
            0,
            "IPv4 header checksum verifies"
        );
        assert_eq!(&frame[36..38], &4791u16.to_be_bytes());
        assert_eq!(&frame[40..42], &[0, 0], "UDP checksum 0 over IPv4");
        assert_eq!(&frame[42..], b"hi");
    }

    #[test]
    fn ipv6_vlan_frame_has_a_valid_udp_checksum() {
        let (src, dst) = ends(
            "fd00::1".parse::<Ipv6Addr>().unwrap().into(),
            "fd00::2".parse::<Ipv6Addr>().unwrap().into(),
        );
        let frame = UdpFrame {
            src,
            dst,
            vlan: Some(7),
            payload: b"abc",
        }
        .build();
        assert_eq!(frame.len(), 14 + 4 + 40 + 8 + 3);
        assert_eq!(&frame[12..16], &[0x81, 0x00, 0x00, 0x07]);
        assert_eq!(&frame[16..18], &[0x86, 0xdd]);
        let ip = &frame[18..58];
        let udp = &frame[58..];
        let mut pseudo = [0u8; 40];
        pseudo[0..32].copy_from_slice(&ip[8..40]);
        pseudo[32..36].copy_from_slice(&(udp.len() as u32).to_be_bytes());
        pseudo[39] = 17;
        assert_eq!(checksum(&[&pseudo, udp]), 0, "UDP checksum verifies");
    }

    #[test]
    fn write_refuses_a_short_buffer() {
        let (src, dst) = ends(
            Ipv4Addr::new(10, 0, 0, 1).into(),
            Ipv4Addr::new(10, 0, 0, 2).into(),
        );
        let frame = UdpFrame {
            src,
            dst,
            vlan: None,
            payload: &[0; 10],
        };
        let mut short = [0u8; 51];
        assert_eq!(frame.write(&mut short), None);
        let mut exact = [0u8; 52];
        assert_eq!(frame.write(&mut exact), Some(52));
    }
}
