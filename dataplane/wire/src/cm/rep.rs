//! ConnectReply (IBTA 12.6.8, table 110): the passive side accepts a REQ and describes its
//! QP.
//!
//! ```text
//!  0..4          4..8           8..12      12..15    15          16..19     19
//! | LocalCommID | RemoteCommID | LocalQKey | LocalQPN | VendorIDh | LocalEECN | VendorIDm |
//!  20..23        23          24       25         26
//! | StartingPSN | VendorIDl | RespRes | InitDepth | TargetACKDelay(5) Failover(2) E2EFlowCtl(1) |
//!  27                          28..36       36..232
//! | RNRRetry(3) SRQ(1) resv4 | LocalCAGUID | PrivateData |
//! ```
//!
//! The 24-bit vendor ID (ECE) is split over bytes 15, 19 and 23; rxe sends 0.

use super::fields::{
    bits, flag, put_bits, put_flag, put_padded, put_u24, put_u32, put_u64, u24_at, u32_at, u64_at,
};
use super::{CommId, Guid, check_len};
use crate::error::{EmitError, ParseError};
use crate::identifiers::{Qkey, Qpn};
use crate::psn::Psn;

mod field {
    use core::ops::Range;

    pub(super) const LOCAL_COMM_ID: usize = 0;
    pub(super) const REMOTE_COMM_ID: usize = 4;
    pub(super) const LOCAL_QKEY: usize = 8;
    pub(super) const LOCAL_QPN: usize = 12;
    pub(super) const VENDOR_ID_H: usize = 15;
    pub(super) const LOCAL_EECN: usize = 16;
    pub(super) const VENDOR_ID_M: usize = 19;
    pub(super) const STARTING_PSN: usize = 20;
    pub(super) const VENDOR_ID_L: usize = 23;
    pub(super) const RESPONDER_RESOURCES: usize = 24;
    pub(super) const INITIATOR_DEPTH: usize = 25;
    /// Target ACK delay 7:3, failover accepted 2:1, end-to-end flow control 0.
    pub(super) const BYTE_26: usize = 26;
    /// RNR retry count 7:5, SRQ 4.
    pub(super) const BYTE_27: usize = 27;
    pub(super) const LOCAL_CA_GUID: usize = 28;
    pub(super) const PRIVATE_DATA: Range<usize> = 36..232;
}

/// Bytes of private data a REP carries.
pub const PRIVATE_DATA_LEN: usize = 196;

/// A view of a REP over the 232 bytes of CM data.
#[derive(Debug, Clone)]
pub struct RepPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> RepPacket<T> {
    /// Wraps `buffer` without checking its length; accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> RepPacket<T> {
        RepPacket { buffer }
    }

    /// Wraps `buffer` after checking that it holds the 232 bytes of CM data.
    pub fn new_checked(buffer: T) -> Result<RepPacket<T>, ParseError> {
        check_len(buffer.as_ref().len())?;
        Ok(RepPacket { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The sender's (passive side's) communication ID.
    pub fn local_comm_id(&self) -> CommId {
        CommId(u32_at(self.b(), field::LOCAL_COMM_ID))
    }

    /// The receiver's communication ID, from its REQ.
    pub fn remote_comm_id(&self) -> CommId {
        CommId(u32_at(self.b(), field::REMOTE_COMM_ID))
    }

    /// The sender's Q_Key (RD only).
    pub fn local_qkey(&self) -> Qkey {
        Qkey(u32_at(self.b(), field::LOCAL_QKEY))
    }

    /// The sender's QP.
    pub fn local_qpn(&self) -> Qpn {
        Qpn::new(u24_at(self.b(), field::LOCAL_QPN))
    }

    /// Vendor ID (24 bits, from bytes 15, 19 and 23).
    pub fn vendor_id(&self) -> u32 {
        let b = self.b();
        u32::from_be_bytes([
            0,
            b[field::VENDOR_ID_H],
            b[field::VENDOR_ID_M],
            b[field::VENDOR_ID_L],
        ])
    }

    /// The sender's EE context (RD only; 24 bits).
    pub fn local_eecn(&self) -> u32 {
        u24_at(self.b(), field::LOCAL_EECN)
    }

    /// The PSN the receiver (active side) starts sending with.
    pub fn starting_psn(&self) -> Psn {
        Psn::new(u24_at(self.b(), field::STARTING_PSN))
    }

    /// READ/atomic requests the sender accepts as responder.
    pub fn responder_resources(&self) -> u8 {
        self.b()[field::RESPONDER_RESOURCES]
    }

    /// READ/atomic requests the sender issues as requester.
    pub fn initiator_depth(&self) -> u8 {
        self.b()[field::INITIATOR_DEPTH]
    }

    /// The sender's CA ACK delay (5 bits; Linux sends its device's `local_ca_ack_delay`).
    pub fn target_ack_delay(&self) -> u8 {
        bits(self.b(), field::BYTE_26, 3, 5)
    }

    /// Failover accepted (2 bits).
    pub fn failover_accepted(&self) -> u8 {
        bits(self.b(), field::BYTE_26, 1, 2)
    }

    /// End-to-end flow control.
    pub fn end_to_end_flow_control(&self) -> bool {
        flag(self.b(), field::BYTE_26, 0)
    }

    /// RNR retry count (3 bits).
    pub fn rnr_retry_count(&self) -> u8 {
        bits(self.b(), field::BYTE_27, 5, 3)
    }

    /// The sender's QP has an SRQ.
    pub fn srq(&self) -> bool {
        flag(self.b(), field::BYTE_27, 4)
    }

    /// The sender's CA GUID.
    pub fn local_ca_guid(&self) -> Guid {
        Guid(u64_at(self.b(), field::LOCAL_CA_GUID))
    }

    /// The 196 bytes of private data.
    pub fn private_data(&self) -> &[u8] {
        &self.b()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> RepPacket<T> {
    fn b_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets both communication IDs.
    pub fn set_comm_ids(&mut self, local: CommId, remote: CommId) {
        put_u32(self.b_mut(), field::LOCAL_COMM_ID, local.0);
        put_u32(self.b_mut(), field::REMOTE_COMM_ID, remote.0);
    }

    /// Sets the local Q_Key.
    pub fn set_local_qkey(&mut self, qkey: Qkey) {
        put_u32(self.b_mut(), field::LOCAL_QKEY, qkey.0);
    }

    /// Sets the local QPN.
    pub fn set_local_qpn(&mut self, qpn: Qpn) {
        put_u24(self.b_mut(), field::LOCAL_QPN, qpn.value());
    }

    /// Sets the vendor ID (low 24 bits) over bytes 15, 19 and 23.
    pub fn set_vendor_id(&mut self, vendor_id: u32) {
        let [_, h, m, l] = vendor_id.to_be_bytes();
        let b = self.b_mut();
        b[field::VENDOR_ID_H] = h;
        b[field::VENDOR_ID_M] = m;
        b[field::VENDOR_ID_L] = l;
    }

    /// Sets the local EECN (24 bits).
    pub fn set_local_eecn(&mut self, eecn: u32) {
        put_u24(self.b_mut(), field::LOCAL_EECN, eecn);
    }

    /// Sets the starting PSN.
    pub fn set_starting_psn(&mut self, psn: Psn) {
        put_u24(self.b_mut(), field::STARTING_PSN, psn.value());
    }

    /// Sets responder resources and initiator depth.
    pub fn set_rdma_resources(&mut self, responder_resources: u8, initiator_depth: u8) {
        self.b_mut()[field::RESPONDER_RESOURCES] = responder_resources;
        self.b_mut()[field::INITIATOR_DEPTH] = initiator_depth;
    }

    /// Sets byte 26: target ACK delay (5 bits), failover accepted (2 bits), flow control.
    pub fn set_byte_26(&mut self, target_ack_delay: u8, failover: u8, flow_control: bool) {
        let b = self.b_mut();
        put_bits(b, field::BYTE_26, 3, 5, target_ack_delay);
        put_bits(b, field::BYTE_26, 1, 2, failover);
        put_flag(b, field::BYTE_26, 0, flow_control);
    }

    /// Sets byte 27: RNR retry count (3 bits) and SRQ; the 4 reserved bits are zeroed.
    pub fn set_byte_27(&mut self, rnr_retry_count: u8, srq: bool) {
        let b = self.b_mut();
        b[field::BYTE_27] = 0;
        put_bits(b, field::BYTE_27, 5, 3, rnr_retry_count);
        put_flag(b, field::BYTE_27, 4, srq);
    }

    /// Sets the local CA GUID.
    pub fn set_local_ca_guid(&mut self, guid: Guid) {
        put_u64(self.b_mut(), field::LOCAL_CA_GUID, guid.0);
    }

    /// The private data field, to write.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.b_mut()[field::PRIVATE_DATA]
    }
}

/// The fields of a REP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepRepr<'a> {
    /// The sender's communication ID.
    pub local_comm_id: CommId,
    /// The receiver's communication ID.
    pub remote_comm_id: CommId,
    /// The sender's Q_Key.
    pub local_qkey: Qkey,
    /// The sender's QP.
    pub local_qpn: Qpn,
    /// Vendor ID (24 bits).
    pub vendor_id: u32,
    /// The sender's EE context (24 bits).
    pub local_eecn: u32,
    /// Starting PSN (what the receiver sends with).
    pub starting_psn: Psn,
    /// Responder resources.
    pub responder_resources: u8,
    /// Initiator depth.
    pub initiator_depth: u8,
    /// Target ACK delay (5 bits).
    pub target_ack_delay: u8,
    /// Failover accepted (2 bits).
    pub failover_accepted: u8,
    /// End-to-end flow control.
    pub end_to_end_flow_control: bool,
    /// RNR retry count (3 bits).
    pub rnr_retry_count: u8,
    /// SRQ.
    pub srq: bool,
    /// The sender's CA GUID.
    pub local_ca_guid: Guid,
    /// Private data: all 196 bytes when parsed; at most 196 to emit.
    pub private_data: &'a [u8],
}

impl<'a> RepRepr<'a> {
    /// Reads a checked REP (reserved bits are ignored).
    pub fn parse(p: &RepPacket<&'a [u8]>) -> RepRepr<'a> {
        RepRepr {
            local_comm_id: p.local_comm_id(),
            remote_comm_id: p.remote_comm_id(),
            local_qkey: p.local_qkey(),
            local_qpn: p.local_qpn(),
            vendor_id: p.vendor_id(),
            local_eecn: p.local_eecn(),
            starting_psn: p.starting_psn(),
            responder_resources: p.responder_resources(),
            initiator_depth: p.initiator_depth(),
            target_ack_delay: p.target_ack_delay(),
            failover_accepted: p.failover_accepted(),
            end_to_end_flow_control: p.end_to_end_flow_control(),
            rnr_retry_count: p.rnr_retry_count(),
            srq: p.srq(),
            local_ca_guid: p.local_ca_guid(),
            private_data: &p.buffer[field::PRIVATE_DATA],
        }
    }

    /// Writes all 232 bytes; values wider than their fields are cut to their low bits.
    /// Private data longer than 196 bytes is an error.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut RepPacket<T>,
    ) -> Result<(), EmitError> {
        put_padded(
            packet.private_data_mut(),
            self.private_data,
            "REP private data",
        )?;
        packet.set_comm_ids(self.local_comm_id, self.remote_comm_id);
        packet.set_local_qkey(self.local_qkey);
        packet.set_local_qpn(self.local_qpn);
        packet.set_local_eecn(self.local_eecn);
        packet.set_starting_psn(self.starting_psn);
        packet.set_vendor_id(self.vendor_id);
        packet.set_rdma_resources(self.responder_resources, self.initiator_depth);
        packet.set_byte_26(
            self.target_ack_delay,
            self.failover_accepted,
            self.end_to_end_flow_control,
        );
        packet.set_byte_27(self.rnr_retry_count, self.srq);
        packet.set_local_ca_guid(self.local_ca_guid);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::fixtures::{RPING_REP, WRITE_BW_REP_2};

    fn data() -> [u8; 232] {
        let mut b = [0u8; 232];
        b.copy_from_slice(&RPING_REP[24..]);
        b
    }

    /// rping's REP, field by field as the capture's decode reads it.
    fn repr(private_data: &[u8]) -> RepRepr<'_> {
        RepRepr {
            local_comm_id: CommId(0x8872_6210),
            remote_comm_id: CommId(0xaad7_e16b),
            local_qkey: Qkey(0),
            local_qpn: Qpn::new(0x1a),
            vendor_id: 0,
            local_eecn: 0,
            starting_psn: Psn::new(0xa8d369),
            responder_resources: 1,
            initiator_depth: 1,
            target_ack_delay: 15,
            failover_accepted: 0,
            end_to_end_flow_control: false,
            rnr_retry_count: 7,
            srq: false,
            local_ca_guid: Guid(0x5054_00ff_fe77_0002),
            private_data,
        }
    }

    #[test]
    fn deconstruct() {
        let d = data();
        let p = RepPacket::new_checked(&d[..]).unwrap();
        assert_eq!(p.local_comm_id(), CommId(0x8872_6210));
        assert_eq!(p.remote_comm_id(), CommId(0xaad7_e16b));
        assert_eq!(p.local_qkey(), Qkey(0));
        assert_eq!(p.local_qpn(), Qpn::new(0x1a));
        assert_eq!(p.vendor_id(), 0);
        assert_eq!(p.local_eecn(), 0);
        assert_eq!(p.starting_psn(), Psn::new(0xa8d369));
        assert_eq!(p.responder_resources(), 1);
        assert_eq!(p.initiator_depth(), 1);
        assert_eq!(p.target_ack_delay(), 15);
        assert_eq!(p.failover_accepted(), 0);
        assert!(!p.end_to_end_flow_control());
        assert_eq!(p.rnr_retry_count(), 7);
        assert!(!p.srq());
        assert_eq!(p.local_ca_guid(), Guid(0x5054_00ff_fe77_0002));
        assert!(p.private_data().iter().all(|&b| b == 0));
        assert_eq!(p.private_data().len(), PRIVATE_DATA_LEN);
    }

    #[test]
    fn construct() {
        let mut b = [0xa5u8; 232];
        let mut p = RepPacket::new_unchecked(&mut b[..]);
        p.set_comm_ids(CommId(0x8872_6210), CommId(0xaad7_e16b));
        p.set_local_qkey(Qkey(0));
        p.set_local_qpn(Qpn::new(0x1a));
        p.set_local_eecn(0);
        p.set_starting_psn(Psn::new(0xa8d369));
        p.set_vendor_id(0);
        p.set_rdma_resources(1, 1);
        p.set_byte_26(15, 0, false);
        p.set_byte_27(7, false);
        p.set_local_ca_guid(Guid(0x5054_00ff_fe77_0002));
        p.private_data_mut().fill(0);
        assert_eq!(b, data());
    }

    #[test]
    fn parse() {
        let d = data();
        assert_eq!(
            RepRepr::parse(&RepPacket::new_checked(&d[..]).unwrap()),
            repr(&[0; 196])
        );
    }

    #[test]
    fn emit() {
        let mut b = [0xa5u8; 232];
        repr(&[])
            .emit(&mut RepPacket::new_unchecked(&mut b[..]))
            .unwrap();
        assert_eq!(b, data());
    }

    #[test]
    fn write_bw_rep_without_rdma_read_resources() {
        let r = RepRepr::parse(&RepPacket::new_checked(&WRITE_BW_REP_2[24..]).unwrap());
        assert_eq!(r.local_comm_id, CommId(0x8c72_6210));
        assert_eq!(r.remote_comm_id, CommId(0xa8d7_e16b));
        assert_eq!((r.responder_resources, r.initiator_depth), (0, 0));
        assert_eq!(r.starting_psn, Psn::new(0x6db21d));
        assert_eq!(r.local_qpn, Qpn::new(0x1c));
    }

    #[test]
    fn bit_fields_are_where_the_spec_puts_them() {
        let r = RepRepr {
            vendor_id: 0xab_cdef,
            local_eecn: 0x12_3456,
            target_ack_delay: 0,
            failover_accepted: 3,
            end_to_end_flow_control: true,
            rnr_retry_count: 0,
            srq: true,
            private_data: &[0x11; 196],
            ..repr(&[])
        };
        let mut b = [0xa5u8; 232];
        r.emit(&mut RepPacket::new_unchecked(&mut b[..])).unwrap();
        assert_eq!([b[15], b[19], b[23]], [0xab, 0xcd, 0xef]);
        assert_eq!(b[16..19], [0x12, 0x34, 0x56]);
        assert_eq!(b[26], 0x07);
        assert_eq!(b[27], 0x10);
        assert_eq!(RepRepr::parse(&RepPacket::new_checked(&b[..]).unwrap()), r);
    }

    #[test]
    fn malformed() {
        assert!(RepPacket::new_checked(&[0u8; 200][..]).is_err());
        let mut d = data();
        d[27] |= 0x0f; // reserved
        assert_eq!(
            RepRepr::parse(&RepPacket::new_checked(&d[..]).unwrap()),
            repr(&[0; 196])
        );
        let mut b = [0u8; 232];
        assert!(matches!(
            repr(&[0; 197]).emit(&mut RepPacket::new_unchecked(&mut b[..])),
            Err(EmitError::FieldTooLong { max: 196, .. })
        ));
    }
}
