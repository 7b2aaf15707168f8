//! ServiceIDResolutionResponse (IBTA 12.11.2, table 120 in the Linux numbering): the
//! answer to a SIDR_REQ, with a status and, on success, the QP and Q_Key of the service.
//!
//! ```text
//!  0..4        4        5               6..8       8..11  11         12..20      20..24
//! | RequestID | Status | AddInfoLength | VendorIDh | QPN  | VendorIDl | ServiceID | Q_Key |
//!  24..96            96..232
//! | AdditionalInfo | PrivateData |
//! ```
//!
//! The 24-bit vendor ID (ECE) is split over bytes 6..8 and 11. The captures have no SIDR;
//! the fixture is built field by field from the table.

use super::fields::{put_padded, put_u24, put_u32, put_u64, u24_at, u32_at, u64_at};
use super::{CommId, ServiceId, SidrStatus, check_len};
use crate::error::{EmitError, ParseError};
use crate::identifiers::{Qkey, Qpn};

mod field {
    use core::ops::Range;

    pub(super) const REQUEST_ID: usize = 0;
    pub(super) const STATUS: usize = 4;
    pub(super) const INFO_LENGTH: usize = 5;
    pub(super) const VENDOR_ID_H: Range<usize> = 6..8;
    pub(super) const QPN: usize = 8;
    pub(super) const VENDOR_ID_L: usize = 11;
    pub(super) const SERVICE_ID: usize = 12;
    pub(super) const QKEY: usize = 20;
    pub(super) const INFO: Range<usize> = 24..96;
    pub(super) const PRIVATE_DATA: Range<usize> = 96..232;
}

/// Bytes of private data a SIDR_REP carries.
pub const PRIVATE_DATA_LEN: usize = 136;
/// Room for additional information.
pub const INFO_LEN: usize = 72;

/// A view of a SIDR_REP over the 232 bytes of CM data.
#[derive(Debug, Clone)]
pub struct SidrRepPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SidrRepPacket<T> {
    /// Wraps `buffer` without checking its length; accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> SidrRepPacket<T> {
        SidrRepPacket { buffer }
    }

    /// Wraps `buffer` after checking that it holds the 232 bytes of CM data.
    pub fn new_checked(buffer: T) -> Result<SidrRepPacket<T>, ParseError> {
        check_len(buffer.as_ref().len())?;
        Ok(SidrRepPacket { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The request ID of the SIDR_REQ answered.
    pub fn request_id(&self) -> CommId {
        CommId(u32_at(self.buffer.as_ref(), field::REQUEST_ID))
    }

    /// The status.
    pub fn status(&self) -> SidrStatus {
        SidrStatus(self.buffer.as_ref()[field::STATUS])
    }

    /// Length of the additional information (at most 72 is meaningful).
    pub fn info_length(&self) -> u8 {
        self.buffer.as_ref()[field::INFO_LENGTH]
    }

    /// Vendor ID (24 bits, from bytes 6..8 and 11).
    pub fn vendor_id(&self) -> u32 {
        let b = self.buffer.as_ref();
        let h = &b[field::VENDOR_ID_H];
        u32::from_be_bytes([0, h[0], h[1], b[field::VENDOR_ID_L]])
    }

    /// The QP that serves the service.
    pub fn qpn(&self) -> Qpn {
        Qpn::new(u24_at(self.buffer.as_ref(), field::QPN))
    }

    /// The service ID.
    pub fn service_id(&self) -> ServiceId {
        ServiceId(u64_at(self.buffer.as_ref(), field::SERVICE_ID))
    }

    /// The Q_Key of the QP.
    pub fn qkey(&self) -> Qkey {
        Qkey(u32_at(self.buffer.as_ref(), field::QKEY))
    }

    /// The additional information, as long as its length field says (at most 72 bytes).
    pub fn info(&self) -> &[u8] {
        let len = usize::from(self.info_length()).min(INFO_LEN);
        &self.buffer.as_ref()[field::INFO][..len]
    }

    /// The 136 bytes of private data.
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SidrRepPacket<T> {
    /// Sets the request ID.
    pub fn set_request_id(&mut self, id: CommId) {
        put_u32(self.buffer.as_mut(), field::REQUEST_ID, id.0);
    }

    /// Sets the status and the additional information length.
    pub fn set_status(&mut self, status: SidrStatus, info_length: u8) {
        self.buffer.as_mut()[field::STATUS] = status.0;
        self.buffer.as_mut()[field::INFO_LENGTH] = info_length;
    }

    /// Sets the QPN and the vendor ID (low 24 bits) around it.
    pub fn set_qpn(&mut self, qpn: Qpn, vendor_id: u32) {
        let [_, h, m, l] = vendor_id.to_be_bytes();
        let b = self.buffer.as_mut();
        b[field::VENDOR_ID_H].copy_from_slice(&[h, m]);
        put_u24(b, field::QPN, qpn.value());
        b[field::VENDOR_ID_L] = l;
    }

    /// Sets the service ID.
    pub fn set_service_id(&mut self, id: ServiceId) {
        put_u64(self.buffer.as_mut(), field::SERVICE_ID, id.0);
    }

    /// Sets the Q_Key.
    pub fn set_qkey(&mut self, qkey: Qkey) {
        put_u32(self.buffer.as_mut(), field::QKEY, qkey.0);
    }

    /// The whole 72-byte additional information field, to write.
    pub fn info_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::INFO]
    }

    /// The private data field, to write.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// The fields of a SIDR_REP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SidrRepRepr<'a> {
    /// The request ID of the SIDR_REQ answered.
    pub request_id: CommId,
    /// The status.
    pub status: SidrStatus,
    /// Vendor ID (24 bits).
    pub vendor_id: u32,
    /// The QP that serves the service.
    pub qpn: Qpn,
    /// The service ID.
    pub service_id: ServiceId,
    /// The Q_Key of the QP.
    pub qkey: Qkey,
    /// Additional information (at most 72 bytes); its length field is its length.
    pub info: &'a [u8],
    /// Private data: all 136 bytes when parsed; at most 136 to emit.
    pub private_data: &'a [u8],
}

impl<'a> SidrRepRepr<'a> {
    /// Reads a checked SIDR_REP (additional information beyond its length is ignored).
    pub fn parse(p: &SidrRepPacket<&'a [u8]>) -> SidrRepRepr<'a> {
        let len = usize::from(p.info_length()).min(INFO_LEN);
        SidrRepRepr {
            request_id: p.request_id(),
            status: p.status(),
            vendor_id: p.vendor_id(),
            qpn: p.qpn(),
            service_id: p.service_id(),
            qkey: p.qkey(),
            info: &p.buffer[field::INFO][..len],
            private_data: &p.buffer[field::PRIVATE_DATA],
        }
    }

    /// Writes all 232 bytes; additional information longer than 72 bytes or private data
    /// longer than 136 is an error.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut SidrRepPacket<T>,
    ) -> Result<(), EmitError> {
        put_padded(
            packet.info_mut(),
            self.info,
            "SIDR_REP additional information",
        )?;
        put_padded(
            packet.private_data_mut(),
            self.private_data,
            "SIDR_REP private data",
        )?;
        packet.set_request_id(self.request_id);
        // NOTE: at most 72 after the check above.
        packet.set_status(self.status, self.info.len() as u8);
        packet.set_qpn(self.qpn, self.vendor_id);
        packet.set_service_id(self.service_id);
        packet.set_qkey(self.qkey);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::{PortSpace, ServiceId};

    /// The answer to udaddy's SIDR_REQ (see `sidr_req.rs`): request ID 0x9ad7e16b, status
    /// 0, QPN 0x11, service ID 0x0000000001111c06, Q_Key 0x01234567 (`RDMA_UDP_QKEY`), no
    /// additional information or private data. Built from the table.
    fn data() -> [u8; 232] {
        let mut b = [0u8; 232];
        b[0..4].copy_from_slice(&[0x9a, 0xd7, 0xe1, 0x6b]);
        b[8..11].copy_from_slice(&[0x00, 0x00, 0x11]);
        b[12..20].copy_from_slice(&[0x00, 0x00, 0x00, 0x00, 0x01, 0x11, 0x1c, 0x06]);
        b[20..24].copy_from_slice(&[0x01, 0x23, 0x45, 0x67]);
        b
    }

    fn repr<'a>() -> SidrRepRepr<'a> {
        SidrRepRepr {
            request_id: CommId(0x9ad7_e16b),
            status: SidrStatus::SUCCESS,
            vendor_id: 0,
            qpn: Qpn::new(0x11),
            service_id: ServiceId::rdma_cm(PortSpace::Udp, 7174),
            qkey: Qkey(0x0123_4567),
            info: &[],
            private_data: &[],
        }
    }

    #[test]
    fn deconstruct() {
        let d = data();
        let p = SidrRepPacket::new_checked(&d[..]).unwrap();
        assert_eq!(p.request_id(), CommId(0x9ad7_e16b));
        assert_eq!(p.status(), SidrStatus::SUCCESS);
        assert_eq!(p.info_length(), 0);
        assert_eq!(p.vendor_id(), 0);
        assert_eq!(p.qpn(), Qpn::new(0x11));
        assert_eq!(p.service_id(), ServiceId(0x0000_0000_0111_1c06));
        assert_eq!(p.qkey(), Qkey(0x0123_4567));
        assert_eq!(p.info(), &[] as &[u8]);
        assert_eq!(p.private_data(), &[0u8; 136][..]);
    }

    #[test]
    fn construct() {
        let mut b = [0xa5u8; 232];
        let mut p = SidrRepPacket::new_unchecked(&mut b[..]);
        p.set_request_id(CommId(0x9ad7_e16b));
        p.set_status(SidrStatus::SUCCESS, 0);
        p.set_qpn(Qpn::new(0x11), 0);
        p.set_service_id(ServiceId(0x0000_0000_0111_1c06));
        p.set_qkey(Qkey(0x0123_4567));
        p.info_mut().fill(0);
        p.private_data_mut().fill(0);
        assert_eq!(b, data());
    }

    #[test]
    fn parse() {
        let d = data();
        let mut r = repr();
        r.private_data = &[0; 136];
        assert_eq!(
            SidrRepRepr::parse(&SidrRepPacket::new_checked(&d[..]).unwrap()),
            r
        );
    }

    #[test]
    fn emit() {
        let mut b = [0xa5u8; 232];
        repr()
            .emit(&mut SidrRepPacket::new_unchecked(&mut b[..]))
            .unwrap();
        assert_eq!(b, data());
    }

    #[test]
    fn fields_are_where_the_spec_puts_them() {
        let r = SidrRepRepr {
            status: SidrStatus::REDIRECT,
            vendor_id: 0xab_cdef,
            info: &[7; 5],
            private_data: &[9; 136],
            ..repr()
        };
        let mut b = [0xa5u8; 232];
        r.emit(&mut SidrRepPacket::new_unchecked(&mut b[..]))
            .unwrap();
        assert_eq!(b[4..12], [4, 5, 0xab, 0xcd, 0x00, 0x00, 0x11, 0xef]);
        assert_eq!(b[24..30], [7, 7, 7, 7, 7, 0]);
        assert_eq!(
            SidrRepRepr::parse(&SidrRepPacket::new_checked(&b[..]).unwrap()),
            r
        );
    }

    #[test]
    fn malformed() {
        assert!(SidrRepPacket::new_checked(&[0u8; 96][..]).is_err());
        let mut d = data();
        d[5] = 200; // longer than the field: cut to it
        let r = SidrRepRepr::parse(&SidrRepPacket::new_checked(&d[..]).unwrap());
        assert_eq!(r.info.len(), INFO_LEN);
        let mut b = [0u8; 232];
        assert!(
            SidrRepRepr {
                info: &[0; 73],
                ..repr()
            }
            .emit(&mut SidrRepPacket::new_unchecked(&mut b[..]))
            .is_err()
        );
        assert!(
            SidrRepRepr {
                private_data: &[0; 137],
                ..repr()
            }
            .emit(&mut SidrRepPacket::new_unchecked(&mut b[..]))
            .is_err()
        );
    }
}
