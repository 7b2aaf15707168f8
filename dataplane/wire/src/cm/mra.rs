//! MessageReceiptAcknowledgement (IBTA 12.6.6, table 107 in the Linux numbering): "your
//! REQ (or REP, or LAP) arrived; I need up to this long to answer it".
//!
//! ```text
//!  0..4          4..8           8                       9                          10..232
//! | LocalCommID | RemoteCommID | MsgMRAed(2) resv6 | ServiceTimeout(5) resv3 | PrivateData |
//! ```
//!
//! The captures have no MRA (Linux sends one only for a duplicate REQ or REP while the
//! application has not answered yet); the fixture is built field by field from the table.

use super::fields::{bits, put_bits, put_padded, put_u32, u32_at};
use super::{CommId, MsgResponse, check_len};
use crate::error::{EmitError, ParseError};

mod field {
    use core::ops::Range;

    pub(super) const LOCAL_COMM_ID: usize = 0;
    pub(super) const REMOTE_COMM_ID: usize = 4;
    /// Message MRAed: bits 7:6.
    pub(super) const MESSAGE_MRAED: usize = 8;
    /// Service timeout: bits 7:3.
    pub(super) const SERVICE_TIMEOUT: usize = 9;
    pub(super) const PRIVATE_DATA: Range<usize> = 10..232;
}

/// Bytes of private data an MRA carries.
pub const PRIVATE_DATA_LEN: usize = 222;

/// A view of an MRA over the 232 bytes of CM data.
#[derive(Debug, Clone)]
pub struct MraPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> MraPacket<T> {
    /// Wraps `buffer` without checking its length; accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> MraPacket<T> {
        MraPacket { buffer }
    }

    /// Wraps `buffer` after checking that it holds the 232 bytes of CM data.
    pub fn new_checked(buffer: T) -> Result<MraPacket<T>, ParseError> {
        check_len(buffer.as_ref().len())?;
        Ok(MraPacket { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The sender's communication ID (0 if it has none yet).
    pub fn local_comm_id(&self) -> CommId {
        CommId(u32_at(self.buffer.as_ref(), field::LOCAL_COMM_ID))
    }

    /// The receiver's communication ID.
    pub fn remote_comm_id(&self) -> CommId {
        CommId(u32_at(self.buffer.as_ref(), field::REMOTE_COMM_ID))
    }

    /// Which message is acknowledged (2 bits).
    pub fn message_mraed(&self) -> MsgResponse {
        MsgResponse(bits(self.buffer.as_ref(), field::MESSAGE_MRAED, 6, 2))
    }

    /// How long the sender needs (5 bits, 4.096 µs × 2^value).
    pub fn service_timeout(&self) -> u8 {
        bits(self.buffer.as_ref(), field::SERVICE_TIMEOUT, 3, 5)
    }

    /// The 222 bytes of private data.
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> MraPacket<T> {
    /// Sets both communication IDs.
    pub fn set_comm_ids(&mut self, local: CommId, remote: CommId) {
        put_u32(self.buffer.as_mut(), field::LOCAL_COMM_ID, local.0);
        put_u32(self.buffer.as_mut(), field::REMOTE_COMM_ID, remote.0);
    }

    /// Sets the message MRAed (2 bits) and zeroes the reserved bits of its byte.
    pub fn set_message_mraed(&mut self, msg: MsgResponse) {
        let b = self.buffer.as_mut();
        b[field::MESSAGE_MRAED] = 0;
        put_bits(b, field::MESSAGE_MRAED, 6, 2, msg.0);
    }

    /// Sets the service timeout (5 bits) and zeroes the reserved bits of its byte.
    pub fn set_service_timeout(&mut self, timeout: u8) {
        let b = self.buffer.as_mut();
        b[field::SERVICE_TIMEOUT] = 0;
        put_bits(b, field::SERVICE_TIMEOUT, 3, 5, timeout);
    }

    /// The private data field, to write.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// The fields of an MRA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MraRepr<'a> {
    /// The sender's communication ID.
    pub local_comm_id: CommId,
    /// The receiver's communication ID.
    pub remote_comm_id: CommId,
    /// Which message is acknowledged.
    pub message_mraed: MsgResponse,
    /// Service timeout (5 bits).
    pub service_timeout: u8,
    /// Private data: all 222 bytes when parsed; at most 222 to emit.
    pub private_data: &'a [u8],
}

impl<'a> MraRepr<'a> {
    /// Reads a checked MRA (reserved bits are ignored).
    pub fn parse(p: &MraPacket<&'a [u8]>) -> MraRepr<'a> {
        MraRepr {
            local_comm_id: p.local_comm_id(),
            remote_comm_id: p.remote_comm_id(),
            message_mraed: p.message_mraed(),
            service_timeout: p.service_timeout(),
            private_data: &p.buffer[field::PRIVATE_DATA],
        }
    }

    /// Writes all 232 bytes; private data longer than 222 bytes is an error.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut MraPacket<T>,
    ) -> Result<(), EmitError> {
        put_padded(
            packet.private_data_mut(),
            self.private_data,
            "MRA private data",
        )?;
        packet.set_comm_ids(self.local_comm_id, self.remote_comm_id);
        packet.set_message_mraed(self.message_mraed);
        packet.set_service_timeout(self.service_timeout);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the Linux CM sends for a duplicate REQ while the application has not answered
    /// (`cm_dup_req_handler` in MRA_REQ_SENT): the passive side's comm ID 0x88726210, the
    /// REQ's 0xaad7e16b, message MRAed 0 (REQ), service timeout 24 (`CMA_CM_MRA_SETTING`),
    /// no private data. Built from table 107: byte 8 = 0b00_000000, byte 9 = 24 << 3.
    fn data() -> [u8; 232] {
        let mut b = [0u8; 232];
        b[0..4].copy_from_slice(&[0x88, 0x72, 0x62, 0x10]);
        b[4..8].copy_from_slice(&[0xaa, 0xd7, 0xe1, 0x6b]);
        b[8] = 0x00;
        b[9] = 0xc0;
        b
    }

    fn repr(private_data: &[u8]) -> MraRepr<'_> {
        MraRepr {
            local_comm_id: CommId(0x8872_6210),
            remote_comm_id: CommId(0xaad7_e16b),
            message_mraed: MsgResponse::REQ,
            service_timeout: 24,
            private_data,
        }
    }

    #[test]
    fn deconstruct() {
        let d = data();
        let p = MraPacket::new_checked(&d[..]).unwrap();
        assert_eq!(p.local_comm_id(), CommId(0x8872_6210));
        assert_eq!(p.remote_comm_id(), CommId(0xaad7_e16b));
        assert_eq!(p.message_mraed(), MsgResponse::REQ);
        assert_eq!(p.service_timeout(), 24);
        assert_eq!(p.private_data(), &[0u8; 222][..]);
    }

    #[test]
    fn construct() {
        let mut b = [0xa5u8; 232];
        let mut p = MraPacket::new_unchecked(&mut b[..]);
        p.set_comm_ids(CommId(0x8872_6210), CommId(0xaad7_e16b));
        p.set_message_mraed(MsgResponse::REQ);
        p.set_service_timeout(24);
        p.private_data_mut().fill(0);
        assert_eq!(b, data());
    }

    #[test]
    fn parse() {
        let d = data();
        assert_eq!(
            MraRepr::parse(&MraPacket::new_checked(&d[..]).unwrap()),
            repr(&[0; 222])
        );
    }

    #[test]
    fn emit() {
        let mut b = [0xa5u8; 232];
        repr(&[])
            .emit(&mut MraPacket::new_unchecked(&mut b[..]))
            .unwrap();
        assert_eq!(b, data());
    }

    #[test]
    fn bit_fields_are_where_the_spec_puts_them() {
        let r = MraRepr {
            message_mraed: MsgResponse(3),
            service_timeout: 0x1f,
            private_data: &[0x5a; 222],
            ..repr(&[])
        };
        let mut b = [0xa5u8; 232];
        r.emit(&mut MraPacket::new_unchecked(&mut b[..])).unwrap();
        assert_eq!(b[8..10], [0xc0, 0xf8]);
        assert_eq!(MraRepr::parse(&MraPacket::new_checked(&b[..]).unwrap()), r);
    }

    #[test]
    fn malformed() {
        assert!(MraPacket::new_checked(&[0u8; 10][..]).is_err());
        let mut d = data();
        d[8] |= 0x3f;
        d[9] |= 0x07;
        assert_eq!(
            MraRepr::parse(&MraPacket::new_checked(&d[..]).unwrap()),
            repr(&[0; 222])
        );
        let mut b = [0u8; 232];
        assert!(
            repr(&[0; 223])
                .emit(&mut MraPacket::new_unchecked(&mut b[..]))
                .is_err()
        );
    }
}
