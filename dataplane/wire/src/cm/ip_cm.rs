//! The IP CM header (IBTA Annex A3.2.3, "IP Addressing CM Private Data Format"; Linux's
//! `struct cma_hdr`): the first 36 bytes of the private data of every REQ and SIDR_REQ that
//! rdma_cm sends for an IP address, naming the two IP addresses and the active side's port.
//! The passive side's port is in the service ID ([`super::ServiceId::rdma_cm`]).
//!
//! ```text
//!  byte 0        1                         2..4       4..20          20..36
//! | CMA version | IP version(7:4) resv(3:0) | SrcPort | SrcAddr (16) | DstAddr (16) |
//! ```
//!
//! An IPv4 address is 12 zero bytes and the 4 bytes of the address (not the `::ffff:`
//! mapped form of GIDs): Linux writes the `ip4.addr` member of a zeroed union, so we do too.
//! The 12 bytes are ignored on receive, as Linux ignores them.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::fields::{put_u16, u16_at};
use crate::error::{EmitError, Layer, ParseError};

mod field {
    use core::ops::Range;

    pub(super) const VERSION: usize = 0;
    pub(super) const IP_VERSION: usize = 1;
    pub(super) const SRC_PORT: usize = 2;
    pub(super) const SRC_ADDR: Range<usize> = 4..20;
    pub(super) const DST_ADDR: Range<usize> = 20..36;
}

/// Length of the IP CM header.
pub const HEADER_LEN: usize = 36;
/// The only version of the header (`CMA_VERSION`).
pub const VERSION: u8 = 0;

/// A view of an IP CM header over the start of REQ or SIDR_REQ private data.
#[derive(Debug, Clone)]
pub struct IpCmPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IpCmPacket<T> {
    /// Wraps `buffer` without checking its length; accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> IpCmPacket<T> {
        IpCmPacket { buffer }
    }

    /// Wraps `buffer` after checking that it holds 36 bytes.
    pub fn new_checked(buffer: T) -> Result<IpCmPacket<T>, ParseError> {
        let available = buffer.as_ref().len();
        if available < HEADER_LEN {
            return Err(ParseError::Truncated {
                layer: Layer::IpCm,
                needed: HEADER_LEN,
                available,
            });
        }
        Ok(IpCmPacket { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The header version (0).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// The IP version (the high nibble of byte 1): 4 or 6.
    pub fn ip_version(&self) -> u8 {
        self.buffer.as_ref()[field::IP_VERSION] >> 4
    }

    /// The active side's rdma_cm port.
    pub fn src_port(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// The 16 bytes of the source address field.
    pub fn src_addr_bytes(&self) -> [u8; 16] {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC_ADDR]);
        a
    }

    /// The 16 bytes of the destination address field.
    pub fn dst_addr_bytes(&self) -> [u8; 16] {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST_ADDR]);
        a
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IpCmPacket<T> {
    /// Sets the version.
    pub fn set_version(&mut self, version: u8) {
        self.buffer.as_mut()[field::VERSION] = version;
    }

    /// Sets the IP version (low 4 bits of `v`) in the high nibble and zeroes the low one.
    pub fn set_ip_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::IP_VERSION] = (v & 0x0f) << 4;
    }

    /// Sets the source port.
    pub fn set_src_port(&mut self, port: u16) {
        put_u16(self.buffer.as_mut(), field::SRC_PORT, port);
    }

    /// Sets the 16 bytes of the source address field.
    pub fn set_src_addr_bytes(&mut self, addr: [u8; 16]) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr);
    }

    /// Sets the 16 bytes of the destination address field.
    pub fn set_dst_addr_bytes(&mut self, addr: [u8; 16]) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr);
    }
}

fn addr_from(bytes: [u8; 16], ip_version: u8) -> IpAddr {
    if ip_version == 4 {
        IpAddr::V4(Ipv4Addr::new(bytes[12], bytes[13], bytes[14], bytes[15]))
    } else {
        IpAddr::V6(Ipv6Addr::from(bytes))
    }
}

fn addr_bytes(addr: IpAddr) -> [u8; 16] {
    match addr {
        IpAddr::V4(a) => {
            let mut b = [0u8; 16];
            b[12..].copy_from_slice(&a.octets());
            b
        }
        IpAddr::V6(a) => a.octets(),
    }
}

/// The fields of an IP CM header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpCmRepr {
    /// The active side's rdma_cm port.
    pub src_port: u16,
    /// The active side's address.
    pub src_addr: IpAddr,
    /// The passive side's address.
    pub dst_addr: IpAddr,
}

impl IpCmRepr {
    /// Reads a checked header. Errors: a version other than 0, an IP version other than 4
    /// or 6 (the checks of Linux's `cma_save_ip_info`).
    pub fn parse<T: AsRef<[u8]>>(packet: &IpCmPacket<T>) -> Result<IpCmRepr, ParseError> {
        if packet.version() != VERSION {
            return Err(ParseError::IpCmVersion(packet.version()));
        }
        let v = packet.ip_version();
        if v != 4 && v != 6 {
            return Err(ParseError::IpCmIpVersion(v));
        }
        Ok(IpCmRepr {
            src_port: packet.src_port(),
            src_addr: addr_from(packet.src_addr_bytes(), v),
            dst_addr: addr_from(packet.dst_addr_bytes(), v),
        })
    }

    /// The IP version of the two addresses.
    pub fn ip_version(&self) -> u8 {
        if self.src_addr.is_ipv4() { 4 } else { 6 }
    }

    /// Writes the 36 bytes. The two addresses must be of one IP version.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut IpCmPacket<T>,
    ) -> Result<(), EmitError> {
        if self.src_addr.is_ipv4() != self.dst_addr.is_ipv4() {
            return Err(EmitError::IpCmMixedVersions);
        }
        packet.set_version(VERSION);
        packet.set_ip_version(self.ip_version());
        packet.set_src_port(self.src_port);
        packet.set_src_addr_bytes(addr_bytes(self.src_addr));
        packet.set_dst_addr_bytes(addr_bytes(self.dst_addr));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::fixtures::RPING_REQ;

    /// The first 36 bytes of rping's REQ private data (MAD bytes 164..200).
    fn bytes() -> [u8; 36] {
        let mut b = [0u8; 36];
        b.copy_from_slice(&RPING_REQ[164..200]);
        b
    }

    fn repr() -> IpCmRepr {
        IpCmRepr {
            src_port: 35151,
            src_addr: IpAddr::V4(Ipv4Addr::new(10, 77, 0, 3)),
            dst_addr: IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2)),
        }
    }

    #[test]
    fn deconstruct() {
        let b = bytes();
        let p = IpCmPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.version(), 0);
        assert_eq!(p.ip_version(), 4);
        assert_eq!(p.src_port(), 0x894f);
        assert_eq!(p.src_addr_bytes()[12..], [10, 77, 0, 3]);
        assert!(p.src_addr_bytes()[..12].iter().all(|&x| x == 0));
        assert_eq!(p.dst_addr_bytes()[12..], [10, 77, 0, 2]);
    }

    #[test]
    fn construct() {
        let mut b = [0xa5u8; 36];
        let mut p = IpCmPacket::new_unchecked(&mut b[..]);
        p.set_version(0);
        p.set_ip_version(4);
        p.set_src_port(35151);
        p.set_src_addr_bytes(addr_bytes(IpAddr::V4(Ipv4Addr::new(10, 77, 0, 3))));
        p.set_dst_addr_bytes(addr_bytes(IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2))));
        assert_eq!(b, bytes());
    }

    #[test]
    fn parse() {
        let b = bytes();
        assert_eq!(
            IpCmRepr::parse(&IpCmPacket::new_checked(&b[..]).unwrap()),
            Ok(repr())
        );
    }

    #[test]
    fn emit() {
        let mut b = [0xa5u8; 36];
        repr()
            .emit(&mut IpCmPacket::new_unchecked(&mut b[..]))
            .unwrap();
        assert_eq!(b, bytes());
    }

    #[test]
    fn ipv6_round_trips() {
        let r = IpCmRepr {
            src_port: 1,
            src_addr: "fd00:77::3".parse().unwrap(),
            dst_addr: "fd00:77::2".parse().unwrap(),
        };
        let mut b = [0xa5u8; 36];
        r.emit(&mut IpCmPacket::new_unchecked(&mut b[..])).unwrap();
        assert_eq!(b[..4], [0x00, 0x60, 0x00, 0x01]);
        assert_eq!(
            IpCmRepr::parse(&IpCmPacket::new_checked(&b[..]).unwrap()),
            Ok(r)
        );
    }

    #[test]
    fn random_bytes_never_panic_and_what_parses_round_trips() {
        let mut rng = crate::cm::fixtures::XorShift(0x0bad_cafe_f00d_1234);
        for i in 0..5000usize {
            let mut b = [0u8; 40];
            rng.fill(&mut b);
            if i % 2 == 0 {
                b[0] = 0;
                b[1] = if i % 4 == 0 { 0x40 } else { 0x60 };
            }
            let Ok(p) = IpCmPacket::new_checked(&b[..i % 41]) else {
                continue;
            };
            let Ok(r) = IpCmRepr::parse(&p) else {
                continue;
            };
            let mut out = [0xa5u8; 36];
            r.emit(&mut IpCmPacket::new_unchecked(&mut out[..]))
                .unwrap();
            assert_eq!(
                IpCmRepr::parse(&IpCmPacket::new_checked(&out[..]).unwrap()),
                Ok(r)
            );
        }
    }

    #[test]
    fn malformed() {
        assert_eq!(
            IpCmPacket::new_checked(&[0u8; 35][..]).unwrap_err(),
            ParseError::Truncated {
                layer: Layer::IpCm,
                needed: 36,
                available: 35
            }
        );
        let mut b = bytes();
        b[0] = 0x10;
        assert_eq!(
            IpCmRepr::parse(&IpCmPacket::new_checked(&b[..]).unwrap()),
            Err(ParseError::IpCmVersion(0x10))
        );
        let mut b = bytes();
        b[1] = 0x50;
        assert_eq!(
            IpCmRepr::parse(&IpCmPacket::new_checked(&b[..]).unwrap()),
            Err(ParseError::IpCmIpVersion(5))
        );
        // The low nibble and the 12 bytes before an IPv4 address are ignored.
        let mut b = bytes();
        b[1] |= 0x0f;
        b[4] = 0xff;
        assert_eq!(
            IpCmRepr::parse(&IpCmPacket::new_checked(&b[..]).unwrap()),
            Ok(repr())
        );
        let mixed = IpCmRepr {
            dst_addr: "fd00::2".parse().unwrap(),
            ..repr()
        };
        let mut out = [0u8; 36];
        assert_eq!(
            mixed.emit(&mut IpCmPacket::new_unchecked(&mut out[..])),
            Err(EmitError::IpCmMixedVersions)
        );
    }
}
