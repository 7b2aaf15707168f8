//! ConnectReject (IBTA 12.6.7, table 108): either side refuses a REQ or a REP (or ends a
//! connection attempt), with a reason, additional rejection information (ARI) and private
//! data.
//!
//! ```text
//!  0..4          4..8           8                    9                    10..12   12..84  84..232
//! | LocalCommID | RemoteCommID | MsgRejected(2) resv6 | ARILength(7) resv1 | Reason | ARI   | PrivateData |
//! ```
//!
//! The captures have no REJ; the fixtures are built field by field from the table, as the
//! Linux CM would send them (`cm_issue_rej`, `cm_format_rej`).

use super::fields::{bits, put_bits, put_padded, put_u16, put_u32, u16_at, u32_at};
use super::{CommId, MsgResponse, RejectReason, check_len};
use crate::error::{EmitError, ParseError};

mod field {
    use core::ops::Range;

    pub(super) const LOCAL_COMM_ID: usize = 0;
    pub(super) const REMOTE_COMM_ID: usize = 4;
    /// Message rejected: bits 7:6.
    pub(super) const MESSAGE_REJECTED: usize = 8;
    /// ARI length: bits 7:1.
    pub(super) const ARI_LENGTH: usize = 9;
    pub(super) const REASON: usize = 10;
    pub(super) const ARI: Range<usize> = 12..84;
    pub(super) const PRIVATE_DATA: Range<usize> = 84..232;
}

/// Bytes of private data a REJ carries (what the REJECTED event hands the application).
pub const PRIVATE_DATA_LEN: usize = 148;
/// Room for additional rejection information.
pub const ARI_LEN: usize = 72;

/// A view of a REJ over the 232 bytes of CM data.
#[derive(Debug, Clone)]
pub struct RejPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> RejPacket<T> {
    /// Wraps `buffer` without checking its length; accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> RejPacket<T> {
        RejPacket { buffer }
    }

    /// Wraps `buffer` after checking that it holds the 232 bytes of CM data.
    pub fn new_checked(buffer: T) -> Result<RejPacket<T>, ParseError> {
        check_len(buffer.as_ref().len())?;
        Ok(RejPacket { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The sender's communication ID (0 when a REQ is refused before one was assigned).
    pub fn local_comm_id(&self) -> CommId {
        CommId(u32_at(self.buffer.as_ref(), field::LOCAL_COMM_ID))
    }

    /// The receiver's communication ID.
    pub fn remote_comm_id(&self) -> CommId {
        CommId(u32_at(self.buffer.as_ref(), field::REMOTE_COMM_ID))
    }

    /// Which message is rejected (2 bits).
    pub fn message_rejected(&self) -> MsgResponse {
        MsgResponse(bits(self.buffer.as_ref(), field::MESSAGE_REJECTED, 6, 2))
    }

    /// Length of the additional rejection information (7 bits; at most 72 is meaningful).
    pub fn ari_length(&self) -> u8 {
        bits(self.buffer.as_ref(), field::ARI_LENGTH, 1, 7)
    }

    /// The reason.
    pub fn reason(&self) -> RejectReason {
        RejectReason(u16_at(self.buffer.as_ref(), field::REASON))
    }

    /// The additional rejection information, as long as its length field says (at most 72
    /// bytes).
    pub fn ari(&self) -> &[u8] {
        let len = usize::from(self.ari_length()).min(ARI_LEN);
        &self.buffer.as_ref()[field::ARI][..len]
    }

    /// The 148 bytes of private data.
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> RejPacket<T> {
    /// Sets both communication IDs.
    pub fn set_comm_ids(&mut self, local: CommId, remote: CommId) {
        put_u32(self.buffer.as_mut(), field::LOCAL_COMM_ID, local.0);
        put_u32(self.buffer.as_mut(), field::REMOTE_COMM_ID, remote.0);
    }

    /// Sets the message rejected (2 bits) and zeroes the reserved bits of its byte.
    pub fn set_message_rejected(&mut self, msg: MsgResponse) {
        let b = self.buffer.as_mut();
        b[field::MESSAGE_REJECTED] = 0;
        put_bits(b, field::MESSAGE_REJECTED, 6, 2, msg.0);
    }

    /// Sets the ARI length (7 bits) and zeroes the reserved bit.
    pub fn set_ari_length(&mut self, len: u8) {
        let b = self.buffer.as_mut();
        b[field::ARI_LENGTH] = 0;
        put_bits(b, field::ARI_LENGTH, 1, 7, len);
    }

    /// Sets the reason.
    pub fn set_reason(&mut self, reason: RejectReason) {
        put_u16(self.buffer.as_mut(), field::REASON, reason.0);
    }

    /// The whole 72-byte ARI field, to write.
    pub fn ari_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::ARI]
    }

    /// The private data field, to write.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// The fields of a REJ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RejRepr<'a> {
    /// The sender's communication ID.
    pub local_comm_id: CommId,
    /// The receiver's communication ID.
    pub remote_comm_id: CommId,
    /// Which message is rejected.
    pub message_rejected: MsgResponse,
    /// The reason.
    pub reason: RejectReason,
    /// Additional rejection information (at most 72 bytes); its length field is its length.
    pub ari: &'a [u8],
    /// Private data: all 148 bytes when parsed; at most 148 to emit.
    pub private_data: &'a [u8],
}

impl<'a> RejRepr<'a> {
    /// Reads a checked REJ (reserved bits and ARI bytes beyond its length are ignored).
    pub fn parse(p: &RejPacket<&'a [u8]>) -> RejRepr<'a> {
        let len = usize::from(p.ari_length()).min(ARI_LEN);
        RejRepr {
            local_comm_id: p.local_comm_id(),
            remote_comm_id: p.remote_comm_id(),
            message_rejected: p.message_rejected(),
            reason: p.reason(),
            ari: &p.buffer[field::ARI][..len],
            private_data: &p.buffer[field::PRIVATE_DATA],
        }
    }

    /// Writes all 232 bytes; an ARI longer than 72 bytes or private data longer than 148
    /// is an error.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut RejPacket<T>,
    ) -> Result<(), EmitError> {
        put_padded(
            packet.ari_mut(),
            self.ari,
            "REJ additional rejection information",
        )?;
        put_padded(
            packet.private_data_mut(),
            self.private_data,
            "REJ private data",
        )?;
        packet.set_comm_ids(self.local_comm_id, self.remote_comm_id);
        packet.set_message_rejected(self.message_rejected);
        // NOTE: at most 72 after the check above, so it fits in 7 bits.
        packet.set_ari_length(self.ari.len() as u8);
        packet.set_reason(self.reason);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The REJ a Linux passive side sends for rping's REQ when no one listens on port 7174
    /// (`cm_issue_rej(..., IB_CM_REJ_INVALID_SERVICE_ID, CM_MSG_RESPONSE_REQ, NULL, 0)`):
    /// local comm ID 0 (none assigned), remote = the REQ's 0xaad7e16b, message REQ, no
    /// ARI, reason 8, private data zero. Built from table 108.
    fn no_listener() -> [u8; 232] {
        let mut b = [0u8; 232];
        b[4..8].copy_from_slice(&[0xaa, 0xd7, 0xe1, 0x6b]);
        b[10..12].copy_from_slice(&[0x00, 0x08]);
        b
    }

    /// An application's reject with private data (`rdma_reject`: reason 28) after the
    /// delayed MRA (`cm_format_rej` in MRA_REQ_SENT): local comm ID 0x88726210, message REQ,
    /// private data "connection rejected".
    fn consumer() -> [u8; 232] {
        let mut b = [0u8; 232];
        b[0..4].copy_from_slice(&[0x88, 0x72, 0x62, 0x10]);
        b[4..8].copy_from_slice(&[0xaa, 0xd7, 0xe1, 0x6b]);
        b[10..12].copy_from_slice(&[0x00, 0x1c]);
        b[84..84 + 19].copy_from_slice(b"connection rejected");
        b
    }

    /// A REQ timed out on the active side and its cm_id destroyed (`cm_destroy_id` in
    /// REQ_SENT): reason 4 with the CA GUID as ARI (8 bytes), message "other".
    fn timeout() -> [u8; 232] {
        let mut b = [0u8; 232];
        b[0..4].copy_from_slice(&[0xaa, 0xd7, 0xe1, 0x6b]);
        b[8] = 2 << 6;
        b[9] = 8 << 1;
        b[10..12].copy_from_slice(&[0x00, 0x04]);
        b[12..20].copy_from_slice(&[0x50, 0x54, 0x00, 0xff, 0xfe, 0x77, 0x00, 0x03]);
        b
    }

    fn no_listener_repr<'a>() -> RejRepr<'a> {
        RejRepr {
            local_comm_id: CommId(0),
            remote_comm_id: CommId(0xaad7_e16b),
            message_rejected: MsgResponse::REQ,
            reason: RejectReason::INVALID_SERVICE_ID,
            ari: &[],
            private_data: &[],
        }
    }

    #[test]
    fn deconstruct() {
        let d = no_listener();
        let p = RejPacket::new_checked(&d[..]).unwrap();
        assert_eq!(p.local_comm_id(), CommId(0));
        assert_eq!(p.remote_comm_id(), CommId(0xaad7_e16b));
        assert_eq!(p.message_rejected(), MsgResponse::REQ);
        assert_eq!(p.ari_length(), 0);
        assert_eq!(p.reason(), RejectReason::INVALID_SERVICE_ID);
        assert_eq!(p.ari(), &[] as &[u8]);
        assert_eq!(p.private_data(), &[0u8; 148][..]);
        let d = timeout();
        let p = RejPacket::new_checked(&d[..]).unwrap();
        assert_eq!(p.message_rejected(), MsgResponse::OTHER);
        assert_eq!(p.ari_length(), 8);
        assert_eq!(p.ari(), &0x5054_00ff_fe77_0003u64.to_be_bytes());
        assert_eq!(p.reason(), RejectReason::TIMEOUT);
    }

    #[test]
    fn construct() {
        let mut b = [0xa5u8; 232];
        let mut p = RejPacket::new_unchecked(&mut b[..]);
        p.set_comm_ids(CommId(0x8872_6210), CommId(0xaad7_e16b));
        p.set_message_rejected(MsgResponse::REQ);
        p.set_ari_length(0);
        p.set_reason(RejectReason::CONSUMER_DEFINED);
        p.ari_mut().fill(0);
        p.private_data_mut().fill(0);
        p.private_data_mut()[..19].copy_from_slice(b"connection rejected");
        assert_eq!(b, consumer());
    }

    #[test]
    fn parse() {
        let d = no_listener();
        let mut r = no_listener_repr();
        r.private_data = &[0; 148];
        assert_eq!(RejRepr::parse(&RejPacket::new_checked(&d[..]).unwrap()), r);
        let d = consumer();
        let r = RejRepr::parse(&RejPacket::new_checked(&d[..]).unwrap());
        assert_eq!(r.reason, RejectReason::CONSUMER_DEFINED);
        assert_eq!(&r.private_data[..19], b"connection rejected");
    }

    #[test]
    fn emit() {
        let mut b = [0xa5u8; 232];
        no_listener_repr()
            .emit(&mut RejPacket::new_unchecked(&mut b[..]))
            .unwrap();
        assert_eq!(b, no_listener());
        let guid = 0x5054_00ff_fe77_0003u64.to_be_bytes();
        let r = RejRepr {
            local_comm_id: CommId(0xaad7_e16b),
            remote_comm_id: CommId(0),
            message_rejected: MsgResponse::OTHER,
            reason: RejectReason::TIMEOUT,
            ari: &guid,
            private_data: &[],
        };
        let mut b = [0xa5u8; 232];
        r.emit(&mut RejPacket::new_unchecked(&mut b[..])).unwrap();
        assert_eq!(b, timeout());
    }

    #[test]
    fn malformed() {
        assert!(RejPacket::new_checked(&[0u8; 84][..]).is_err());
        // An ARI length beyond the field is cut to the field; reserved bits are ignored.
        let mut d = timeout();
        d[9] = 0xff;
        d[8] |= 0x3f;
        let r = RejRepr::parse(&RejPacket::new_checked(&d[..]).unwrap());
        assert_eq!(r.ari.len(), 72);
        assert_eq!(r.message_rejected, MsgResponse::OTHER);
        let mut b = [0u8; 232];
        let long = [0u8; 73];
        assert!(matches!(
            RejRepr {
                ari: &long,
                ..no_listener_repr()
            }
            .emit(&mut RejPacket::new_unchecked(&mut b[..])),
            Err(EmitError::FieldTooLong { max: 72, .. })
        ));
        let long = [0u8; 149];
        assert!(matches!(
            RejRepr {
                private_data: &long,
                ..no_listener_repr()
            }
            .emit(&mut RejPacket::new_unchecked(&mut b[..])),
            Err(EmitError::FieldTooLong { max: 148, .. })
        ));
    }
}
