//! The path information a REQ carries twice, for its primary and alternate paths
//! (IBTA 12.6.5, bytes 52..96 and 96..140 of the REQ).
//!
//! ```text
//!  0..2       2..4        4..20      20..36      36..39 (20 bits) + 4 resv   39
//! | LocalLID | RemoteLID | LocalGID | RemoteGID | FlowLabel                 | resv2 PacketRate(6) |
//!  40             41         42                        43
//! | TrafficClass | HopLimit | SL(4) SubnetLocal resv3 | LocalACKTimeout(5) resv3 |
//! ```
//!
//! On RoCE the LIDs are 0xFFFF (permissive) and the GIDs are the IP addresses of the two
//! ends; the Linux CM fills the alternate path with zeros. The three low bits of byte 43 of
//! the alternate path belong to the REQ (SAP supported); this view leaves them alone.

use super::fields::{bits, flag, gid_at, put_bits, put_flag, put_gid, put_u16, u16_at, u32_at};
use crate::error::{Layer, ParseError};
use crate::gid::Gid;

mod field {
    pub(super) const LOCAL_LID: usize = 0;
    pub(super) const REMOTE_LID: usize = 2;
    pub(super) const LOCAL_GID: usize = 4;
    pub(super) const REMOTE_GID: usize = 20;
    /// Flow label in the top 20 bits of the 32-bit word at 36.
    pub(super) const FLOW_LABEL: usize = 36;
    /// Packet rate: bits 5:0 of byte 39.
    pub(super) const PACKET_RATE: usize = 39;
    pub(super) const TRAFFIC_CLASS: usize = 40;
    pub(super) const HOP_LIMIT: usize = 41;
    /// SL: bits 7:4; subnet local: bit 3.
    pub(super) const SL: usize = 42;
    /// Local ACK timeout: bits 7:3.
    pub(super) const ACK_TIMEOUT: usize = 43;
}

/// Length of one path in a REQ.
pub const PATH_LEN: usize = 44;

/// A view of a REQ path over a 44-byte buffer.
#[derive(Debug, Clone)]
pub struct CmPathPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> CmPathPacket<T> {
    /// Wraps `buffer` without checking its length; accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> CmPathPacket<T> {
        CmPathPacket { buffer }
    }

    /// Wraps `buffer` after checking that it holds 44 bytes.
    pub fn new_checked(buffer: T) -> Result<CmPathPacket<T>, ParseError> {
        let available = buffer.as_ref().len();
        if available < PATH_LEN {
            return Err(ParseError::Truncated {
                layer: Layer::Cm,
                needed: PATH_LEN,
                available,
            });
        }
        Ok(CmPathPacket { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// LID of the sender's port (0xFFFF, permissive, on RoCE).
    pub fn local_lid(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::LOCAL_LID)
    }

    /// LID of the receiver's port.
    pub fn remote_lid(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::REMOTE_LID)
    }

    /// GID of the sender's port: its IP address on RoCEv2.
    pub fn local_gid(&self) -> Gid {
        gid_at(self.buffer.as_ref(), field::LOCAL_GID)
    }

    /// GID of the receiver's port.
    pub fn remote_gid(&self) -> Gid {
        gid_at(self.buffer.as_ref(), field::REMOTE_GID)
    }

    /// The 20-bit flow label. rdma_cm derives it from the two ports
    /// ([`crate::source_port::rdma_cm_flow_label`]) and both ends send with it.
    pub fn flow_label(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::FLOW_LABEL) >> 12
    }

    /// Static rate code (6 bits; 0 = the port's current rate).
    pub fn packet_rate(&self) -> u8 {
        bits(self.buffer.as_ref(), field::PACKET_RATE, 0, 6)
    }

    /// Traffic class (the IP DSCP and ECN bits).
    pub fn traffic_class(&self) -> u8 {
        self.buffer.as_ref()[field::TRAFFIC_CLASS]
    }

    /// Hop limit (the IP TTL).
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Service level (4 bits).
    pub fn sl(&self) -> u8 {
        bits(self.buffer.as_ref(), field::SL, 4, 4)
    }

    /// Subnet local: the ends are on one subnet (the Linux CM sets it when the hop limit
    /// is at most 1).
    pub fn subnet_local(&self) -> bool {
        flag(self.buffer.as_ref(), field::SL, 3)
    }

    /// Local ACK timeout (5 bits, 4.096 µs × 2^value).
    pub fn local_ack_timeout(&self) -> u8 {
        bits(self.buffer.as_ref(), field::ACK_TIMEOUT, 3, 5)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> CmPathPacket<T> {
    /// Sets the local LID.
    pub fn set_local_lid(&mut self, lid: u16) {
        put_u16(self.buffer.as_mut(), field::LOCAL_LID, lid);
    }

    /// Sets the remote LID.
    pub fn set_remote_lid(&mut self, lid: u16) {
        put_u16(self.buffer.as_mut(), field::REMOTE_LID, lid);
    }

    /// Sets the local GID.
    pub fn set_local_gid(&mut self, gid: Gid) {
        put_gid(self.buffer.as_mut(), field::LOCAL_GID, gid);
    }

    /// Sets the remote GID.
    pub fn set_remote_gid(&mut self, gid: Gid) {
        put_gid(self.buffer.as_mut(), field::REMOTE_GID, gid);
    }

    /// Sets the flow label (low 20 bits of `label`) and zeroes the 4 reserved bits after it.
    pub fn set_flow_label(&mut self, label: u32) {
        let b = self.buffer.as_mut();
        let v = (label & 0x000f_ffff) << 12;
        b[field::FLOW_LABEL..field::FLOW_LABEL + 3].copy_from_slice(&v.to_be_bytes()[..3]);
    }

    /// Sets the packet rate (6 bits) and zeroes the 2 reserved bits before it.
    pub fn set_packet_rate(&mut self, rate: u8) {
        self.buffer.as_mut()[field::PACKET_RATE] = rate & 0x3f;
    }

    /// Sets the traffic class.
    pub fn set_traffic_class(&mut self, tc: u8) {
        self.buffer.as_mut()[field::TRAFFIC_CLASS] = tc;
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, hop_limit: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = hop_limit;
    }

    /// Sets the SL (4 bits) and subnet local, and zeroes the 3 reserved bits.
    pub fn set_sl(&mut self, sl: u8, subnet_local: bool) {
        let b = self.buffer.as_mut();
        b[field::SL] = 0;
        put_bits(b, field::SL, 4, 4, sl);
        put_flag(b, field::SL, 3, subnet_local);
    }

    /// Sets the local ACK timeout (5 bits); the 3 low bits of the byte are left alone.
    pub fn set_local_ack_timeout(&mut self, timeout: u8) {
        put_bits(self.buffer.as_mut(), field::ACK_TIMEOUT, 3, 5, timeout);
    }
}

/// The fields of a REQ path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CmPath {
    /// LID of the sender's port.
    pub local_lid: u16,
    /// LID of the receiver's port.
    pub remote_lid: u16,
    /// GID of the sender's port.
    pub local_gid: Gid,
    /// GID of the receiver's port.
    pub remote_gid: Gid,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Packet rate (6 bits).
    pub packet_rate: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Service level (4 bits).
    pub sl: u8,
    /// Subnet local.
    pub subnet_local: bool,
    /// Local ACK timeout (5 bits).
    pub local_ack_timeout: u8,
}

impl CmPath {
    /// Reads a path (reserved bits are ignored).
    pub fn parse<T: AsRef<[u8]>>(packet: &CmPathPacket<T>) -> CmPath {
        CmPath {
            local_lid: packet.local_lid(),
            remote_lid: packet.remote_lid(),
            local_gid: packet.local_gid(),
            remote_gid: packet.remote_gid(),
            flow_label: packet.flow_label(),
            packet_rate: packet.packet_rate(),
            traffic_class: packet.traffic_class(),
            hop_limit: packet.hop_limit(),
            sl: packet.sl(),
            subnet_local: packet.subnet_local(),
            local_ack_timeout: packet.local_ack_timeout(),
        }
    }

    /// Whether every field is zero: what the Linux CM sends for "no alternate path".
    pub fn is_zero(&self) -> bool {
        *self == CmPath::default()
    }

    /// Writes the 44 bytes; values wider than their fields are cut to their low bits,
    /// reserved bits are zero (except the 3 low bits of byte 43, which are left alone).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut CmPathPacket<T>) {
        packet.set_local_lid(self.local_lid);
        packet.set_remote_lid(self.remote_lid);
        packet.set_local_gid(self.local_gid);
        packet.set_remote_gid(self.remote_gid);
        packet.set_flow_label(self.flow_label);
        packet.set_packet_rate(self.packet_rate);
        packet.set_traffic_class(self.traffic_class);
        packet.set_hop_limit(self.hop_limit);
        packet.set_sl(self.sl, self.subnet_local);
        packet.set_local_ack_timeout(self.local_ack_timeout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::fixtures::RPING_REQ;

    /// The primary path of rping's REQ (MAD bytes 76..120).
    fn bytes() -> [u8; 44] {
        let mut b = [0u8; 44];
        b.copy_from_slice(&RPING_REQ[24 + 52..24 + 96]);
        b
    }

    fn repr() -> CmPath {
        CmPath {
            local_lid: 0xffff,
            remote_lid: 0xffff,
            local_gid: Gid::from_ipv4([10, 77, 0, 3].into()),
            remote_gid: Gid::from_ipv4([10, 77, 0, 2].into()),
            flow_label: 0x0bc97,
            packet_rate: 0,
            traffic_class: 0,
            hop_limit: 64,
            sl: 0,
            subnet_local: false,
            local_ack_timeout: 19,
        }
    }

    #[test]
    fn deconstruct() {
        let b = bytes();
        let p = CmPathPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.local_lid(), 0xffff);
        assert_eq!(p.remote_lid(), 0xffff);
        assert_eq!(p.local_gid(), Gid::from_ipv4([10, 77, 0, 3].into()));
        assert_eq!(p.remote_gid(), Gid::from_ipv4([10, 77, 0, 2].into()));
        // tshark 4.0 shows 0x000bc here; the bytes are 0b c9 70 00.
        assert_eq!(p.flow_label(), 0x0bc97);
        assert_eq!(p.packet_rate(), 0);
        assert_eq!(p.traffic_class(), 0);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.sl(), 0);
        assert!(!p.subnet_local());
        assert_eq!(p.local_ack_timeout(), 19);
    }

    #[test]
    fn construct() {
        let mut b = [0xa5u8; 44];
        b[43] = 0; // the low bits of byte 43 belong to the REQ
        let mut p = CmPathPacket::new_unchecked(&mut b[..]);
        p.set_local_lid(0xffff);
        p.set_remote_lid(0xffff);
        p.set_local_gid(Gid::from_ipv4([10, 77, 0, 3].into()));
        p.set_remote_gid(Gid::from_ipv4([10, 77, 0, 2].into()));
        p.set_flow_label(0x0bc97);
        p.set_packet_rate(0);
        p.set_traffic_class(0);
        p.set_hop_limit(64);
        p.set_sl(0, false);
        p.set_local_ack_timeout(19);
        assert_eq!(b, bytes());
    }

    #[test]
    fn parse() {
        let b = bytes();
        assert_eq!(
            CmPath::parse(&CmPathPacket::new_checked(&b[..]).unwrap()),
            repr()
        );
    }

    #[test]
    fn emit() {
        let mut b = [0xa5u8; 44];
        b[43] = 0;
        repr().emit(&mut CmPathPacket::new_unchecked(&mut b[..]));
        assert_eq!(b, bytes());
    }

    #[test]
    fn bit_fields_are_where_the_spec_puts_them() {
        let r = CmPath {
            flow_label: 0xfffff,
            packet_rate: 0x3f,
            sl: 0xf,
            subnet_local: true,
            local_ack_timeout: 0x1f,
            ..CmPath::default()
        };
        let mut b = [0xa5u8; 44];
        r.emit(&mut CmPathPacket::new_unchecked(&mut b[..]));
        assert_eq!(b[36..40], [0xff, 0xff, 0xf0, 0x3f]);
        assert_eq!(b[42], 0xf8);
        assert_eq!(b[43], 0xfd, "timeout in 7:3, byte's low bits left alone");
        assert_eq!(
            CmPath::parse(&CmPathPacket::new_checked(&b[..]).unwrap()),
            r
        );
    }

    #[test]
    fn malformed() {
        assert!(CmPathPacket::new_checked(&[0u8; 43][..]).is_err());
        let mut b = bytes();
        b[38] |= 0x0f; // reserved
        b[39] |= 0xc0; // reserved
        b[42] |= 0x07; // reserved
        assert_eq!(
            CmPath::parse(&CmPathPacket::new_checked(&b[..]).unwrap()),
            repr()
        );
    }
}
