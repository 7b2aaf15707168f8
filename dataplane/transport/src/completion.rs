//! Work completions: what the transport reports back for every work request.

/// The status of a work completion, with the numeric values of `ibv_wc_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WcStatus {
    /// The work request completed successfully.
    Success = 0,
    /// A local length error: a received message did not fit the receive buffer, or a send
    /// was longer than the path allows (UD).
    LocLenErr = 1,
    /// A local queue pair operation error: an internal inconsistency of the work request.
    LocQpOpErr = 2,
    /// A local protection error: an lkey that is not valid for the access.
    LocProtErr = 4,
    /// The work request was flushed because the queue pair entered the error state.
    WrFlushErr = 5,
    /// An unexpected response opcode from the responder.
    BadRespErr = 7,
    /// A local access error.
    LocAccessErr = 8,
    /// The responder reported an invalid request (NAK code 1).
    RemInvReqErr = 9,
    /// The responder reported a remote access error (NAK code 2).
    RemAccessErr = 10,
    /// The responder reported a remote operational error (NAK code 3).
    RemOpErr = 11,
    /// The transport retry counter was exhausted.
    RetryExcErr = 12,
    /// The RNR retry counter was exhausted.
    RnrRetryExcErr = 13,
    /// A fatal error.
    FatalErr = 19,
    /// A general error.
    GeneralErr = 21,
}

impl WcStatus {
    /// The message `ibv_wc_status_str` prints for this status.
    pub fn as_str(self) -> &'static str {
        match self {
            WcStatus::Success => "success",
            WcStatus::LocLenErr => "local length error",
            WcStatus::LocQpOpErr => "local QP operation error",
            WcStatus::LocProtErr => "local protection error",
            WcStatus::WrFlushErr => "Work Request Flushed Error",
            WcStatus::BadRespErr => "bad response error",
            WcStatus::LocAccessErr => "local access error",
            WcStatus::RemInvReqErr => "remote invalid request error",
            WcStatus::RemAccessErr => "remote access error",
            WcStatus::RemOpErr => "remote operation error",
            WcStatus::RetryExcErr => "transport retry counter exceeded",
            WcStatus::RnrRetryExcErr => "RNR retry counter exceeded",
            WcStatus::FatalErr => "fatal error",
            WcStatus::GeneralErr => "general error",
        }
    }
}

/// The opcode of a work completion, with the numeric values of `ibv_wc_opcode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WcOpcode {
    /// A SEND (any kind) completed.
    Send = 0,
    /// An RDMA WRITE (with or without immediate) completed.
    RdmaWrite = 1,
    /// An RDMA READ completed.
    RdmaRead = 2,
    /// A compare-and-swap completed.
    CompSwap = 3,
    /// A fetch-and-add completed.
    FetchAdd = 4,
    /// A SEND arrived.
    Recv = 128,
    /// An RDMA WRITE with immediate arrived.
    RecvRdmaWithImm = 129,
}

/// Flags of a work completion, with the values of `ibv_wc_flags`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WcFlags(pub u32);

impl WcFlags {
    /// The first 40 bytes of the receive buffer hold the network header (UD).
    pub const GRH: WcFlags = WcFlags(1);
    /// `imm` holds immediate data.
    pub const WITH_IMM: WcFlags = WcFlags(1 << 1);
    /// `imm` holds the rkey that was invalidated.
    pub const WITH_INV: WcFlags = WcFlags(1 << 3);

    /// Whether every flag of `other` is set.
    pub fn contains(self, other: WcFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for WcFlags {
    type Output = WcFlags;
    fn bitor(self, rhs: WcFlags) -> WcFlags {
        WcFlags(self.0 | rhs.0)
    }
}

/// The network header a UD datagram arrived with: the kernel's `network_hdr_type` of a
/// work completion, which rxe sets for every UD receive of a kernel consumer. RoCE has no
/// service level on the wire (no LRH), and RDMA NICs report this in a UD receive's `sl`
/// instead (IBTA Annex A17.4.5.1: a RoCEv2 UD completion says whether the datagram came
/// over IPv4 or IPv6, which tells where the destination address sits in the 40-byte GRH
/// area).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NetworkHeader {
    /// IPv4: 20 undefined bytes, then the IPv4 header.
    Ipv4,
    /// IPv6: the IPv6 header fills the 40 bytes.
    Ipv6,
}

/// Which queue of a queue pair a completion belongs to, and so which CQ it goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompletionQueue {
    /// The send queue's CQ.
    Send,
    /// The receive queue's CQ.
    Recv,
}

/// A work completion (the fields of `ibv_wc` the transport knows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The `wr_id` of the work request.
    pub wr_id: u64,
    /// The status.
    pub status: WcStatus,
    /// The opcode.
    pub opcode: WcOpcode,
    /// Which queue it belongs to.
    pub queue: CompletionQueue,
    /// The local QP number.
    pub qpn: u32,
    /// Bytes transferred (receive: bytes placed, including the 40-byte GRH for UD).
    pub byte_len: u32,
    /// Immediate data or the invalidated rkey, per `flags`.
    pub imm: u32,
    /// Flags.
    pub flags: WcFlags,
    /// The source QP (UD receives).
    pub src_qp: u32,
    /// The message carried the solicited event bit (receives).
    pub solicited: bool,
    /// The network header of a UD receive (`None` otherwise).
    pub network_header: Option<NetworkHeader>,
}

impl Completion {
    /// A completion for a work request that never executed because the queue pair is in
    /// the error state.
    pub fn flushed(wr_id: u64, opcode: WcOpcode, queue: CompletionQueue, qpn: u32) -> Completion {
        Completion {
            wr_id,
            status: WcStatus::WrFlushErr,
            opcode,
            queue,
            qpn,
            byte_len: 0,
            imm: 0,
            flags: WcFlags::default(),
            src_qp: 0,
            solicited: false,
            network_header: None,
        }
    }
}
