//! ConnectRequest (IBTA 12.6.5, table 106): the active side asks for a connection to a
//! service and describes its QP and the path.
//!
//! ```text
//!  0..4         4      5..8      8..16      16..24       24..28  28..32  32..35    35
//! | LocalCommID | resv | VendorID | ServiceID | LocalCAGUID | resv | LocalQKey | LocalQPN | RespRes |
//!  36..39     39        40..43      43
//! | LocalEECN | InitDepth | RemoteEECN | RemoteCMRespTimeout(5) TST(2) E2EFlowCtl(1) |
//!  44..47        47                                 48..50  50
//! | StartingPSN | LocalCMRespTimeout(5) RetryCount(3) | P_Key | PathMTU(4) RDC(1) RNRRetry(3) |
//!  51                                           52..96        96..140         140..232
//! | MaxCMRetries(4) SRQ(1) ExtTransport(3) | PrimaryPath | AlternatePath | PrivateData |
//! ```
//!
//! The vendor ID and the attribute modifier carry ECE options in Linux; rxe sends 0.
//! Bit 2 of byte 139 (the alternate path's last byte) is "SAP supported".

use super::fields::{
    bits, flag, put_bits, put_flag, put_padded, put_u24, put_u32, put_u64, u24_at, u32_at, u64_at,
};
use super::path::{CmPath, CmPathPacket};
use super::{CommId, Guid, ServiceId, TransportServiceType, check_len};
use crate::error::{EmitError, ParseError};
use crate::identifiers::{Pkey, Qkey, Qpn};
use crate::psn::Psn;

mod field {
    use core::ops::Range;

    pub(super) const LOCAL_COMM_ID: usize = 0;
    pub(super) const VENDOR_ID: usize = 5;
    pub(super) const SERVICE_ID: usize = 8;
    pub(super) const LOCAL_CA_GUID: usize = 16;
    pub(super) const LOCAL_QKEY: usize = 28;
    pub(super) const LOCAL_QPN: usize = 32;
    pub(super) const RESPONDER_RESOURCES: usize = 35;
    pub(super) const LOCAL_EECN: usize = 36;
    pub(super) const INITIATOR_DEPTH: usize = 39;
    pub(super) const REMOTE_EECN: usize = 40;
    /// Remote CM response timeout 7:3, transport service type 2:1, flow control 0.
    pub(super) const BYTE_43: usize = 43;
    pub(super) const STARTING_PSN: usize = 44;
    /// Local CM response timeout 7:3, retry count 2:0.
    pub(super) const BYTE_47: usize = 47;
    pub(super) const PKEY: usize = 48;
    /// Path MTU 7:4, RDC exists 3, RNR retry count 2:0.
    pub(super) const BYTE_50: usize = 50;
    /// Max CM retries 7:4, SRQ 3, extended transport type 2:0.
    pub(super) const BYTE_51: usize = 51;
    pub(super) const PRIMARY_PATH: Range<usize> = 52..96;
    pub(super) const ALTERNATE_PATH: Range<usize> = 96..140;
    /// SAP supported: bit 2.
    pub(super) const BYTE_139: usize = 139;
    pub(super) const PRIVATE_DATA: Range<usize> = 140..232;
}

/// Bytes of private data a REQ carries.
pub const PRIVATE_DATA_LEN: usize = 92;

/// A view of a REQ over the 232 bytes of CM data.
#[derive(Debug, Clone)]
pub struct ReqPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ReqPacket<T> {
    /// Wraps `buffer` without checking its length; accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> ReqPacket<T> {
        ReqPacket { buffer }
    }

    /// Wraps `buffer` after checking that it holds the 232 bytes of CM data.
    pub fn new_checked(buffer: T) -> Result<ReqPacket<T>, ParseError> {
        check_len(buffer.as_ref().len())?;
        Ok(ReqPacket { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// The sender's communication ID for this connection.
    pub fn local_comm_id(&self) -> CommId {
        CommId(u32_at(self.b(), field::LOCAL_COMM_ID))
    }

    /// Vendor ID (24 bits; ECE).
    pub fn vendor_id(&self) -> u32 {
        u24_at(self.b(), field::VENDOR_ID)
    }

    /// The service asked for.
    pub fn service_id(&self) -> ServiceId {
        ServiceId(u64_at(self.b(), field::SERVICE_ID))
    }

    /// The sender's CA GUID.
    pub fn local_ca_guid(&self) -> Guid {
        Guid(u64_at(self.b(), field::LOCAL_CA_GUID))
    }

    /// The sender's Q_Key (RD only; 0 from rdma_cm).
    pub fn local_qkey(&self) -> Qkey {
        Qkey(u32_at(self.b(), field::LOCAL_QKEY))
    }

    /// The sender's QP.
    pub fn local_qpn(&self) -> Qpn {
        Qpn::new(u24_at(self.b(), field::LOCAL_QPN))
    }

    /// READ/atomic requests the sender accepts as responder.
    pub fn responder_resources(&self) -> u8 {
        self.b()[field::RESPONDER_RESOURCES]
    }

    /// The sender's EE context (RD only; 24 bits).
    pub fn local_eecn(&self) -> u32 {
        u24_at(self.b(), field::LOCAL_EECN)
    }

    /// READ/atomic requests the sender issues as requester.
    pub fn initiator_depth(&self) -> u8 {
        self.b()[field::INITIATOR_DEPTH]
    }

    /// The receiver's EE context (RD only; 24 bits).
    pub fn remote_eecn(&self) -> u32 {
        u24_at(self.b(), field::REMOTE_EECN)
    }

    /// How long the receiver may take to answer (5 bits, 4.096 µs × 2^value).
    pub fn remote_cm_response_timeout(&self) -> u8 {
        bits(self.b(), field::BYTE_43, 3, 5)
    }

    /// Transport service type (2 bits).
    pub fn transport_service_type(&self) -> TransportServiceType {
        TransportServiceType(bits(self.b(), field::BYTE_43, 1, 2))
    }

    /// End-to-end flow control.
    pub fn end_to_end_flow_control(&self) -> bool {
        flag(self.b(), field::BYTE_43, 0)
    }

    /// The PSN the receiver starts sending with.
    pub fn starting_psn(&self) -> Psn {
        Psn::new(u24_at(self.b(), field::STARTING_PSN))
    }

    /// How long the sender may take to answer (5 bits).
    pub fn local_cm_response_timeout(&self) -> u8 {
        bits(self.b(), field::BYTE_47, 3, 5)
    }

    /// Transport retry count (3 bits).
    pub fn retry_count(&self) -> u8 {
        bits(self.b(), field::BYTE_47, 0, 3)
    }

    /// Partition key.
    pub fn partition_key(&self) -> Pkey {
        Pkey(super::fields::u16_at(self.b(), field::PKEY))
    }

    /// Path MTU, as the verbs code (4 bits; 1 = 256 … 5 = 4096).
    pub fn path_mtu(&self) -> u8 {
        bits(self.b(), field::BYTE_50, 4, 4)
    }

    /// RDC exists (RD only).
    pub fn rdc_exists(&self) -> bool {
        flag(self.b(), field::BYTE_50, 3)
    }

    /// RNR retry count (3 bits; 7 = forever).
    pub fn rnr_retry_count(&self) -> u8 {
        bits(self.b(), field::BYTE_50, 0, 3)
    }

    /// How often the sender retries CM messages (4 bits).
    pub fn max_cm_retries(&self) -> u8 {
        bits(self.b(), field::BYTE_51, 4, 4)
    }

    /// The sender's QP has an SRQ.
    pub fn srq(&self) -> bool {
        flag(self.b(), field::BYTE_51, 3)
    }

    /// Extended transport type (3 bits; 1 = XRC).
    pub fn extended_transport_type(&self) -> u8 {
        bits(self.b(), field::BYTE_51, 0, 3)
    }

    /// The primary path.
    pub fn primary_path(&self) -> CmPathPacket<&[u8]> {
        CmPathPacket::new_unchecked(&self.b()[field::PRIMARY_PATH])
    }

    /// The alternate path (all zero when there is none).
    pub fn alternate_path(&self) -> CmPathPacket<&[u8]> {
        CmPathPacket::new_unchecked(&self.b()[field::ALTERNATE_PATH])
    }

    /// SAP supported.
    pub fn sap_supported(&self) -> bool {
        flag(self.b(), field::BYTE_139, 2)
    }

    /// The 92 bytes of private data.
    pub fn private_data(&self) -> &[u8] {
        &self.b()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ReqPacket<T> {
    fn b_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets the local communication ID.
    pub fn set_local_comm_id(&mut self, id: CommId) {
        put_u32(self.b_mut(), field::LOCAL_COMM_ID, id.0);
    }

    /// Sets the vendor ID (low 24 bits) and zeroes the reserved byte before it.
    pub fn set_vendor_id(&mut self, vendor_id: u32) {
        put_u32(self.b_mut(), field::VENDOR_ID - 1, vendor_id & 0x00ff_ffff);
    }

    /// Sets the service ID.
    pub fn set_service_id(&mut self, id: ServiceId) {
        put_u64(self.b_mut(), field::SERVICE_ID, id.0);
    }

    /// Sets the local CA GUID and zeroes the reserved word after it.
    pub fn set_local_ca_guid(&mut self, guid: Guid) {
        put_u64(self.b_mut(), field::LOCAL_CA_GUID, guid.0);
        put_u32(self.b_mut(), field::LOCAL_CA_GUID + 8, 0);
    }

    /// Sets the local Q_Key.
    pub fn set_local_qkey(&mut self, qkey: Qkey) {
        put_u32(self.b_mut(), field::LOCAL_QKEY, qkey.0);
    }

    /// Sets the local QPN and the responder resources after it.
    pub fn set_local_qpn(&mut self, qpn: Qpn, responder_resources: u8) {
        put_u24(self.b_mut(), field::LOCAL_QPN, qpn.value());
        self.b_mut()[field::RESPONDER_RESOURCES] = responder_resources;
    }

    /// Sets the local EECN (24 bits) and the initiator depth after it.
    pub fn set_local_eecn(&mut self, eecn: u32, initiator_depth: u8) {
        put_u24(self.b_mut(), field::LOCAL_EECN, eecn);
        self.b_mut()[field::INITIATOR_DEPTH] = initiator_depth;
    }

    /// Sets the remote EECN (24 bits).
    pub fn set_remote_eecn(&mut self, eecn: u32) {
        put_u24(self.b_mut(), field::REMOTE_EECN, eecn);
    }

    /// Sets byte 43: remote CM response timeout (5 bits), transport service type (2 bits),
    /// end-to-end flow control.
    pub fn set_byte_43(&mut self, timeout: u8, tst: TransportServiceType, flow_control: bool) {
        let b = self.b_mut();
        put_bits(b, field::BYTE_43, 3, 5, timeout);
        put_bits(b, field::BYTE_43, 1, 2, tst.0);
        put_flag(b, field::BYTE_43, 0, flow_control);
    }

    /// Sets the starting PSN.
    pub fn set_starting_psn(&mut self, psn: Psn) {
        put_u24(self.b_mut(), field::STARTING_PSN, psn.value());
    }

    /// Sets byte 47: local CM response timeout (5 bits) and retry count (3 bits).
    pub fn set_byte_47(&mut self, timeout: u8, retry_count: u8) {
        let b = self.b_mut();
        put_bits(b, field::BYTE_47, 3, 5, timeout);
        put_bits(b, field::BYTE_47, 0, 3, retry_count);
    }

    /// Sets the partition key.
    pub fn set_partition_key(&mut self, pkey: Pkey) {
        super::fields::put_u16(self.b_mut(), field::PKEY, pkey.0);
    }

    /// Sets byte 50: path MTU (4 bits), RDC exists, RNR retry count (3 bits).
    pub fn set_byte_50(&mut self, path_mtu: u8, rdc_exists: bool, rnr_retry_count: u8) {
        let b = self.b_mut();
        put_bits(b, field::BYTE_50, 4, 4, path_mtu);
        put_flag(b, field::BYTE_50, 3, rdc_exists);
        put_bits(b, field::BYTE_50, 0, 3, rnr_retry_count);
    }

    /// Sets byte 51: max CM retries (4 bits), SRQ, extended transport type (3 bits).
    pub fn set_byte_51(&mut self, max_cm_retries: u8, srq: bool, extended_transport: u8) {
        let b = self.b_mut();
        put_bits(b, field::BYTE_51, 4, 4, max_cm_retries);
        put_flag(b, field::BYTE_51, 3, srq);
        put_bits(b, field::BYTE_51, 0, 3, extended_transport);
    }

    /// The primary path, to write.
    pub fn primary_path_mut(&mut self) -> CmPathPacket<&mut [u8]> {
        CmPathPacket::new_unchecked(&mut self.b_mut()[field::PRIMARY_PATH])
    }

    /// The alternate path, to write.
    pub fn alternate_path_mut(&mut self) -> CmPathPacket<&mut [u8]> {
        CmPathPacket::new_unchecked(&mut self.b_mut()[field::ALTERNATE_PATH])
    }

    /// Sets SAP supported and zeroes the two reserved bits below it.
    pub fn set_sap_supported(&mut self, sap: bool) {
        put_bits(self.b_mut(), field::BYTE_139, 0, 3, u8::from(sap) << 2);
    }

    /// The private data field, to write.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.b_mut()[field::PRIVATE_DATA]
    }
}

/// The fields of a REQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReqRepr<'a> {
    /// The sender's communication ID.
    pub local_comm_id: CommId,
    /// Vendor ID (24 bits).
    pub vendor_id: u32,
    /// The service asked for.
    pub service_id: ServiceId,
    /// The sender's CA GUID.
    pub local_ca_guid: Guid,
    /// The sender's Q_Key.
    pub local_qkey: Qkey,
    /// The sender's QP.
    pub local_qpn: Qpn,
    /// Responder resources.
    pub responder_resources: u8,
    /// The sender's EE context (24 bits).
    pub local_eecn: u32,
    /// Initiator depth.
    pub initiator_depth: u8,
    /// The receiver's EE context (24 bits).
    pub remote_eecn: u32,
    /// Remote CM response timeout (5 bits).
    pub remote_cm_response_timeout: u8,
    /// Transport service type (2 bits).
    pub transport_service_type: TransportServiceType,
    /// End-to-end flow control.
    pub end_to_end_flow_control: bool,
    /// Starting PSN (what the receiver sends with).
    pub starting_psn: Psn,
    /// Local CM response timeout (5 bits).
    pub local_cm_response_timeout: u8,
    /// Retry count (3 bits).
    pub retry_count: u8,
    /// Partition key.
    pub partition_key: Pkey,
    /// Path MTU code (4 bits).
    pub path_mtu: u8,
    /// RDC exists.
    pub rdc_exists: bool,
    /// RNR retry count (3 bits).
    pub rnr_retry_count: u8,
    /// Max CM retries (4 bits).
    pub max_cm_retries: u8,
    /// SRQ.
    pub srq: bool,
    /// Extended transport type (3 bits).
    pub extended_transport_type: u8,
    /// The primary path.
    pub primary_path: CmPath,
    /// The alternate path (all zero for none).
    pub alternate_path: CmPath,
    /// SAP supported.
    pub sap_supported: bool,
    /// Private data: all 92 bytes when parsed; at most 92 to emit.
    pub private_data: &'a [u8],
}

impl<'a> ReqRepr<'a> {
    /// Reads a checked REQ (reserved bits are ignored).
    pub fn parse(p: &ReqPacket<&'a [u8]>) -> ReqRepr<'a> {
        let bytes: &'a [u8] = p.buffer;
        ReqRepr {
            local_comm_id: p.local_comm_id(),
            vendor_id: p.vendor_id(),
            service_id: p.service_id(),
            local_ca_guid: p.local_ca_guid(),
            local_qkey: p.local_qkey(),
            local_qpn: p.local_qpn(),
            responder_resources: p.responder_resources(),
            local_eecn: p.local_eecn(),
            initiator_depth: p.initiator_depth(),
            remote_eecn: p.remote_eecn(),
            remote_cm_response_timeout: p.remote_cm_response_timeout(),
            transport_service_type: p.transport_service_type(),
            end_to_end_flow_control: p.end_to_end_flow_control(),
            starting_psn: p.starting_psn(),
            local_cm_response_timeout: p.local_cm_response_timeout(),
            retry_count: p.retry_count(),
            partition_key: p.partition_key(),
            path_mtu: p.path_mtu(),
            rdc_exists: p.rdc_exists(),
            rnr_retry_count: p.rnr_retry_count(),
            max_cm_retries: p.max_cm_retries(),
            srq: p.srq(),
            extended_transport_type: p.extended_transport_type(),
            primary_path: CmPath::parse(&p.primary_path()),
            alternate_path: CmPath::parse(&p.alternate_path()),
            sap_supported: p.sap_supported(),
            private_data: &bytes[field::PRIVATE_DATA],
        }
    }

    /// Writes all 232 bytes; values wider than their fields are cut to their low bits and
    /// reserved bits are zero. Private data longer than 92 bytes is an error.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut ReqPacket<T>,
    ) -> Result<(), EmitError> {
        put_padded(
            packet.private_data_mut(),
            self.private_data,
            "REQ private data",
        )?;
        packet.set_local_comm_id(self.local_comm_id);
        packet.set_vendor_id(self.vendor_id);
        packet.set_service_id(self.service_id);
        packet.set_local_ca_guid(self.local_ca_guid);
        packet.set_local_qkey(self.local_qkey);
        packet.set_local_qpn(self.local_qpn, self.responder_resources);
        packet.set_local_eecn(self.local_eecn, self.initiator_depth);
        packet.set_remote_eecn(self.remote_eecn);
        packet.set_byte_43(
            self.remote_cm_response_timeout,
            self.transport_service_type,
            self.end_to_end_flow_control,
        );
        packet.set_starting_psn(self.starting_psn);
        packet.set_byte_47(self.local_cm_response_timeout, self.retry_count);
        packet.set_partition_key(self.partition_key);
        packet.set_byte_50(self.path_mtu, self.rdc_exists, self.rnr_retry_count);
        packet.set_byte_51(self.max_cm_retries, self.srq, self.extended_transport_type);
        self.primary_path.emit(&mut packet.primary_path_mut());
        packet.primary_path_mut().into_inner()[43] &= 0xf8;
        self.alternate_path.emit(&mut packet.alternate_path_mut());
        packet.set_sap_supported(self.sap_supported);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::fixtures::{RPING_REQ, WRITE_BW_REQ_2};
    use crate::cm::ip_cm::{IpCmPacket, IpCmRepr};
    use crate::gid::Gid;
    use core::net::{IpAddr, Ipv4Addr};

    fn data() -> [u8; 232] {
        let mut b = [0u8; 232];
        b.copy_from_slice(&RPING_REQ[24..]);
        b
    }

    fn primary() -> CmPath {
        CmPath {
            local_lid: 0xffff,
            remote_lid: 0xffff,
            local_gid: Gid::from_ipv4(Ipv4Addr::new(10, 77, 0, 3)),
            remote_gid: Gid::from_ipv4(Ipv4Addr::new(10, 77, 0, 2)),
            flow_label: 0x0bc97,
            packet_rate: 0,
            traffic_class: 0,
            hop_limit: 64,
            sl: 0,
            subnet_local: false,
            local_ack_timeout: 19,
        }
    }

    /// rping's REQ, field by field as the raw decode of the capture reads it (tshark agrees
    /// except for the flow label, which it misreads as 0x000bc).
    fn repr(private_data: &[u8]) -> ReqRepr<'_> {
        ReqRepr {
            local_comm_id: CommId(0xaad7_e16b),
            vendor_id: 0,
            service_id: ServiceId(0x0000_0000_0106_1c06),
            local_ca_guid: Guid(0x5054_00ff_fe77_0003),
            local_qkey: Qkey(0),
            local_qpn: Qpn::new(0x1a),
            responder_resources: 1,
            local_eecn: 0,
            initiator_depth: 1,
            remote_eecn: 0,
            remote_cm_response_timeout: 20,
            transport_service_type: TransportServiceType::RC,
            end_to_end_flow_control: false,
            starting_psn: Psn::new(0xffe37a),
            local_cm_response_timeout: 20,
            retry_count: 7,
            partition_key: Pkey(0xffff),
            path_mtu: 3,
            rdc_exists: false,
            rnr_retry_count: 7,
            max_cm_retries: 15,
            srq: false,
            extended_transport_type: 0,
            primary_path: primary(),
            alternate_path: CmPath::default(),
            sap_supported: false,
            private_data,
        }
    }

    #[test]
    fn deconstruct() {
        let d = data();
        let p = ReqPacket::new_checked(&d[..]).unwrap();
        assert_eq!(p.local_comm_id(), CommId(0xaad7_e16b));
        assert_eq!(p.vendor_id(), 0);
        assert_eq!(p.service_id(), ServiceId(0x0000_0000_0106_1c06));
        assert_eq!(p.local_ca_guid(), Guid(0x5054_00ff_fe77_0003));
        assert_eq!(p.local_qkey(), Qkey(0));
        assert_eq!(p.local_qpn(), Qpn::new(0x1a));
        assert_eq!(p.responder_resources(), 1);
        assert_eq!(p.local_eecn(), 0);
        assert_eq!(p.initiator_depth(), 1);
        assert_eq!(p.remote_eecn(), 0);
        assert_eq!(p.remote_cm_response_timeout(), 20);
        assert_eq!(p.transport_service_type(), TransportServiceType::RC);
        assert!(!p.end_to_end_flow_control());
        assert_eq!(p.starting_psn(), Psn::new(0xffe37a));
        assert_eq!(p.local_cm_response_timeout(), 20);
        assert_eq!(p.retry_count(), 7);
        assert_eq!(p.partition_key(), Pkey(0xffff));
        assert_eq!(p.path_mtu(), 3);
        assert!(!p.rdc_exists());
        assert_eq!(p.rnr_retry_count(), 7);
        assert_eq!(p.max_cm_retries(), 15);
        assert!(!p.srq());
        assert_eq!(p.extended_transport_type(), 0);
        assert_eq!(CmPath::parse(&p.primary_path()), primary());
        assert!(CmPath::parse(&p.alternate_path()).is_zero());
        assert!(!p.sap_supported());
        // The private data starts with the IP CM header: 10.77.0.3:35151 -> 10.77.0.2.
        let ip_cm = IpCmRepr::parse(&IpCmPacket::new_checked(p.private_data()).unwrap());
        assert_eq!(
            ip_cm,
            Ok(IpCmRepr {
                src_port: 35151,
                src_addr: IpAddr::V4(Ipv4Addr::new(10, 77, 0, 3)),
                dst_addr: IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2)),
            })
        );
        assert!(p.private_data()[36..].iter().all(|&b| b == 0));
    }

    #[test]
    fn construct() {
        let mut b = [0xa5u8; 232];
        let mut p = ReqPacket::new_unchecked(&mut b[..]);
        p.set_local_comm_id(CommId(0xaad7_e16b));
        p.set_vendor_id(0);
        p.set_service_id(ServiceId(0x0000_0000_0106_1c06));
        p.set_local_ca_guid(Guid(0x5054_00ff_fe77_0003));
        p.set_local_qkey(Qkey(0));
        p.set_local_qpn(Qpn::new(0x1a), 1);
        p.set_local_eecn(0, 1);
        p.set_remote_eecn(0);
        p.set_byte_43(20, TransportServiceType::RC, false);
        p.set_starting_psn(Psn::new(0xffe37a));
        p.set_byte_47(20, 7);
        p.set_partition_key(Pkey(0xffff));
        p.set_byte_50(3, false, 7);
        p.set_byte_51(15, false, 0);
        p.primary_path_mut().into_inner()[43] = 0;
        primary().emit(&mut p.primary_path_mut());
        p.alternate_path_mut().into_inner()[43] = 0;
        CmPath::default().emit(&mut p.alternate_path_mut());
        p.set_sap_supported(false);
        p.private_data_mut().copy_from_slice(&RPING_REQ[24 + 140..]);
        assert_eq!(b, data());
    }

    #[test]
    fn parse() {
        let d = data();
        assert_eq!(
            ReqRepr::parse(&ReqPacket::new_checked(&d[..]).unwrap()),
            repr(&RPING_REQ[24 + 140..])
        );
    }

    #[test]
    fn emit() {
        // The private data as rdma_cm hands it over: the IP CM header, then nothing (zeros).
        let mut ip_cm = [0u8; 36];
        IpCmRepr {
            src_port: 35151,
            src_addr: IpAddr::V4(Ipv4Addr::new(10, 77, 0, 3)),
            dst_addr: IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2)),
        }
        .emit(&mut IpCmPacket::new_unchecked(&mut ip_cm[..]))
        .unwrap();
        let mut b = [0xa5u8; 232];
        repr(&ip_cm)
            .emit(&mut ReqPacket::new_unchecked(&mut b[..]))
            .unwrap();
        assert_eq!(b, data());
    }

    #[test]
    fn second_write_bw_req_has_no_rdma_read_resources() {
        let p = ReqPacket::new_checked(&WRITE_BW_REQ_2[24..]).unwrap();
        let r = ReqRepr::parse(&p);
        assert_eq!(r.local_comm_id, CommId(0xa8d7_e16b));
        assert_eq!(r.local_qpn, Qpn::new(0x1c));
        assert_eq!((r.responder_resources, r.initiator_depth), (0, 0));
        assert_eq!(r.starting_psn, Psn::new(0xa63696));
        assert_eq!(r.service_id, ServiceId(0x0000_0000_0106_4853));
        assert_eq!(r.primary_path.flow_label, 0x49c54);
    }

    #[test]
    fn bit_fields_are_where_the_spec_puts_them() {
        let mut r = repr(&[]);
        r.vendor_id = 0x12_3456;
        r.local_eecn = 0xab_cdef;
        r.remote_eecn = 0x11_2233;
        r.remote_cm_response_timeout = 0x1f;
        r.transport_service_type = TransportServiceType(3);
        r.end_to_end_flow_control = true;
        r.local_cm_response_timeout = 0x1f;
        r.retry_count = 0;
        r.path_mtu = 0xf;
        r.rdc_exists = true;
        r.rnr_retry_count = 0;
        r.max_cm_retries = 0;
        r.srq = true;
        r.extended_transport_type = 7;
        r.alternate_path.local_ack_timeout = 0x1f;
        r.sap_supported = true;
        let mut b = [0xa5u8; 232];
        r.emit(&mut ReqPacket::new_unchecked(&mut b[..])).unwrap();
        assert_eq!(b[4..8], [0x00, 0x12, 0x34, 0x56]);
        assert_eq!(b[36..39], [0xab, 0xcd, 0xef]);
        assert_eq!(b[43], 0xff);
        assert_eq!(b[47], 0xf8);
        assert_eq!(b[50], 0xf8);
        assert_eq!(b[51], 0x0f);
        assert_eq!(b[95] & 0x07, 0, "primary path's low bits are reserved");
        assert_eq!(b[139], 0xfc);
        assert!(b[140..].iter().all(|&x| x == 0));
        let back = ReqRepr::parse(&ReqPacket::new_checked(&b[..]).unwrap());
        assert_eq!(back.private_data, &[0u8; 92][..]);
        assert_eq!(
            ReqRepr {
                private_data: &[],
                ..back
            },
            r
        );
    }

    #[test]
    fn malformed() {
        assert!(ReqPacket::new_checked(&[0u8; 231][..]).is_err());
        // Reserved bytes and bits are ignored.
        let mut d = data();
        d[4] = 0xff;
        d[24..28].fill(0xff);
        d[95] |= 0x07;
        d[139] |= 0x03;
        assert_eq!(
            ReqRepr::parse(&ReqPacket::new_checked(&d[..]).unwrap()),
            repr(&RPING_REQ[24 + 140..])
        );
        let mut b = [0u8; 232];
        let too_long = [0u8; 93];
        assert_eq!(
            repr(&too_long).emit(&mut ReqPacket::new_unchecked(&mut b[..])),
            Err(EmitError::FieldTooLong {
                field: "REQ private data",
                len: 93,
                max: 92
            })
        );
    }
}
