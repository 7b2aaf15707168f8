//! ServiceIDResolutionRequest (IBTA 12.11.1, table 119 in the Linux numbering): a UD
//! client asks which QP and Q_Key serve a service ID. rdma_cm sends one for every
//! `rdma_connect` of a UDP-port-space id, with the IP CM header at the start of its
//! private data.
//!
//! ```text
//!  0..4        4..6    6..8   8..16      16..232
//! | RequestID | P_Key | resv | ServiceID | PrivateData |
//! ```
//!
//! The captures have no SIDR; the fixture is built field by field from the table, as
//! udaddy's connect would produce it.

use super::fields::{put_padded, put_u16, put_u32, put_u64, u16_at, u32_at, u64_at};
use super::{CommId, ServiceId, check_len};
use crate::error::{EmitError, ParseError};
use crate::identifiers::Pkey;

mod field {
    use core::ops::Range;

    pub(super) const REQUEST_ID: usize = 0;
    pub(super) const PKEY: usize = 4;
    pub(super) const RESERVED: usize = 6;
    pub(super) const SERVICE_ID: usize = 8;
    pub(super) const PRIVATE_DATA: Range<usize> = 16..232;
}

/// Bytes of private data a SIDR_REQ carries.
pub const PRIVATE_DATA_LEN: usize = 216;

/// A view of a SIDR_REQ over the 232 bytes of CM data.
#[derive(Debug, Clone)]
pub struct SidrReqPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SidrReqPacket<T> {
    /// Wraps `buffer` without checking its length; accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> SidrReqPacket<T> {
        SidrReqPacket { buffer }
    }

    /// Wraps `buffer` after checking that it holds the 232 bytes of CM data.
    pub fn new_checked(buffer: T) -> Result<SidrReqPacket<T>, ParseError> {
        check_len(buffer.as_ref().len())?;
        Ok(SidrReqPacket { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The request ID (the sender's communication ID; the SIDR_REP echoes it).
    pub fn request_id(&self) -> CommId {
        CommId(u32_at(self.buffer.as_ref(), field::REQUEST_ID))
    }

    /// The partition the sender's UD QP is in.
    pub fn partition_key(&self) -> Pkey {
        Pkey(u16_at(self.buffer.as_ref(), field::PKEY))
    }

    /// The service asked about.
    pub fn service_id(&self) -> ServiceId {
        ServiceId(u64_at(self.buffer.as_ref(), field::SERVICE_ID))
    }

    /// The 216 bytes of private data.
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SidrReqPacket<T> {
    /// Sets the request ID.
    pub fn set_request_id(&mut self, id: CommId) {
        put_u32(self.buffer.as_mut(), field::REQUEST_ID, id.0);
    }

    /// Sets the partition key and zeroes the reserved field after it.
    pub fn set_partition_key(&mut self, pkey: Pkey) {
        put_u16(self.buffer.as_mut(), field::PKEY, pkey.0);
        put_u16(self.buffer.as_mut(), field::RESERVED, 0);
    }

    /// Sets the service ID.
    pub fn set_service_id(&mut self, id: ServiceId) {
        put_u64(self.buffer.as_mut(), field::SERVICE_ID, id.0);
    }

    /// The private data field, to write.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// The fields of a SIDR_REQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SidrReqRepr<'a> {
    /// The request ID.
    pub request_id: CommId,
    /// The partition key.
    pub partition_key: Pkey,
    /// The service asked about.
    pub service_id: ServiceId,
    /// Private data: all 216 bytes when parsed; at most 216 to emit.
    pub private_data: &'a [u8],
}

impl<'a> SidrReqRepr<'a> {
    /// Reads a checked SIDR_REQ (the reserved field is ignored).
    pub fn parse(p: &SidrReqPacket<&'a [u8]>) -> SidrReqRepr<'a> {
        SidrReqRepr {
            request_id: p.request_id(),
            partition_key: p.partition_key(),
            service_id: p.service_id(),
            private_data: &p.buffer[field::PRIVATE_DATA],
        }
    }

    /// Writes all 232 bytes; private data longer than 216 bytes is an error.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut SidrReqPacket<T>,
    ) -> Result<(), EmitError> {
        put_padded(
            packet.private_data_mut(),
            self.private_data,
            "SIDR_REQ private data",
        )?;
        packet.set_request_id(self.request_id);
        packet.set_partition_key(self.partition_key);
        packet.set_service_id(self.service_id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::ip_cm::{IpCmPacket, IpCmRepr};
    use crate::cm::{PortSpace, ServiceId};
    use core::net::{IpAddr, Ipv4Addr};

    /// udaddy's SIDR_REQ from 10.77.0.3:40000 to the UDP port 7174 of 10.77.0.2: request
    /// ID 0x9ad7e16b, P_Key 0xffff, service ID 0x0000000001111c06 (`RDMA_PS_UDP` << 16 |
    /// 7174), private data = IP CM header (version 0, IPv4, port 40000 = 0x9c40, the two
    /// addresses). Built from the table.
    fn data() -> [u8; 232] {
        let mut b = [0u8; 232];
        b[0..4].copy_from_slice(&[0x9a, 0xd7, 0xe1, 0x6b]);
        b[4..6].copy_from_slice(&[0xff, 0xff]);
        b[8..16].copy_from_slice(&[0x00, 0x00, 0x00, 0x00, 0x01, 0x11, 0x1c, 0x06]);
        b[16..20].copy_from_slice(&[0x00, 0x40, 0x9c, 0x40]);
        b[32..36].copy_from_slice(&[10, 77, 0, 3]);
        b[48..52].copy_from_slice(&[10, 77, 0, 2]);
        b
    }

    fn ip_cm() -> [u8; 36] {
        let mut h = [0u8; 36];
        IpCmRepr {
            src_port: 40000,
            src_addr: IpAddr::V4(Ipv4Addr::new(10, 77, 0, 3)),
            dst_addr: IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2)),
        }
        .emit(&mut IpCmPacket::new_unchecked(&mut h[..]))
        .unwrap();
        h
    }

    fn repr(private_data: &[u8]) -> SidrReqRepr<'_> {
        SidrReqRepr {
            request_id: CommId(0x9ad7_e16b),
            partition_key: Pkey(0xffff),
            service_id: ServiceId::rdma_cm(PortSpace::Udp, 7174),
            private_data,
        }
    }

    #[test]
    fn deconstruct() {
        let d = data();
        let p = SidrReqPacket::new_checked(&d[..]).unwrap();
        assert_eq!(p.request_id(), CommId(0x9ad7_e16b));
        assert_eq!(p.partition_key(), Pkey(0xffff));
        assert_eq!(p.service_id(), ServiceId(0x0000_0000_0111_1c06));
        assert_eq!(p.private_data()[..36], ip_cm());
    }

    #[test]
    fn construct() {
        let mut b = [0xa5u8; 232];
        let mut p = SidrReqPacket::new_unchecked(&mut b[..]);
        p.set_request_id(CommId(0x9ad7_e16b));
        p.set_partition_key(Pkey(0xffff));
        p.set_service_id(ServiceId(0x0000_0000_0111_1c06));
        p.private_data_mut().fill(0);
        p.private_data_mut()[..36].copy_from_slice(&ip_cm());
        assert_eq!(b, data());
    }

    #[test]
    fn parse() {
        let d = data();
        let r = SidrReqRepr::parse(&SidrReqPacket::new_checked(&d[..]).unwrap());
        assert_eq!(r, repr(&d[16..]));
        assert_eq!(r.private_data.len(), PRIVATE_DATA_LEN);
    }

    #[test]
    fn emit() {
        let h = ip_cm();
        let mut b = [0xa5u8; 232];
        repr(&h)
            .emit(&mut SidrReqPacket::new_unchecked(&mut b[..]))
            .unwrap();
        assert_eq!(b, data());
    }

    #[test]
    fn malformed() {
        assert!(SidrReqPacket::new_checked(&[0u8; 16][..]).is_err());
        let mut d = data();
        d[6] = 0xff; // reserved
        d[7] = 0xff;
        let r = SidrReqRepr::parse(&SidrReqPacket::new_checked(&d[..]).unwrap());
        assert_eq!(r, repr(&data()[16..]));
        let mut b = [0u8; 232];
        assert!(
            repr(&[0; 217])
                .emit(&mut SidrReqPacket::new_unchecked(&mut b[..]))
                .is_err()
        );
    }
}
