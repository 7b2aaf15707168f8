//! Work requests: what applications post to send and receive queues.
//!
//! A work queue element (WQE) is a plain value with a fixed maximum size: the engine copies
//! each one out of the application's shared ring, validates the copy and hands it to the
//! transport, which keeps it until it completes.

use crate::attributes::{Path, QpState};

/// The most scatter/gather elements one work request may carry.
pub const MAX_SGE: usize = 16;

/// The most bytes of inline data one send work request may carry.
pub const MAX_INLINE: usize = 256;

/// The largest message a work request may describe (IBTA 9.4: 2^31 bytes).
pub const MAX_MESSAGE: u64 = 1 << 31;

/// A scatter/gather element: `length` bytes at `addr` of the region named by `lkey`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    /// The first address.
    pub addr: u64,
    /// The number of bytes.
    pub length: u32,
    /// The local key of the region.
    pub lkey: u32,
}

/// A list of up to [`MAX_SGE`] scatter/gather elements, stored inline.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SgeList {
    len: u8,
    sges: [Sge; MAX_SGE],
}

impl Default for SgeList {
    fn default() -> SgeList {
        SgeList {
            len: 0,
            sges: [Sge::default(); MAX_SGE],
        }
    }
}

impl core::fmt::Debug for SgeList {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// A scatter/gather list had more than [`MAX_SGE`] elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("too many scatter/gather elements (at most {MAX_SGE})")]
pub struct TooManySges;

impl SgeList {
    /// An empty list.
    pub fn new() -> SgeList {
        SgeList::default()
    }

    /// A list holding `sges`.
    pub fn from_slice(sges: &[Sge]) -> Result<SgeList, TooManySges> {
        let mut list = SgeList::new();
        for sge in sges {
            list.push(*sge)?;
        }
        Ok(list)
    }

    /// A list with one element.
    pub fn single(addr: u64, length: u32, lkey: u32) -> SgeList {
        let mut list = SgeList::new();
        list.sges[0] = Sge { addr, length, lkey };
        list.len = 1;
        list
    }

    /// Appends an element.
    pub fn push(&mut self, sge: Sge) -> Result<(), TooManySges> {
        let slot = self
            .sges
            .get_mut(usize::from(self.len))
            .ok_or(TooManySges)?;
        *slot = sge;
        self.len += 1;
        Ok(())
    }

    /// The elements.
    pub fn as_slice(&self) -> &[Sge] {
        &self.sges[..usize::from(self.len)]
    }

    /// The sum of the element lengths.
    pub fn total_len(&self) -> u64 {
        self.as_slice().iter().map(|s| u64::from(s.length)).sum()
    }
}

/// The operation of a send work request (`ibv_wr_opcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// SEND.
    Send,
    /// SEND with immediate data.
    SendWithImm {
        /// The immediate data, as the application wrote it (network byte order in verbs).
        imm: u32,
    },
    /// SEND with invalidate: asks the responder to invalidate `rkey`.
    SendWithInv {
        /// The rkey to invalidate.
        rkey: u32,
    },
    /// RDMA WRITE.
    Write {
        /// The remote address.
        remote_addr: u64,
        /// The remote key.
        rkey: u32,
    },
    /// RDMA WRITE with immediate data (consumes a receive WQE at the responder).
    WriteWithImm {
        /// The remote address.
        remote_addr: u64,
        /// The remote key.
        rkey: u32,
        /// The immediate data.
        imm: u32,
    },
    /// RDMA READ.
    Read {
        /// The remote address.
        remote_addr: u64,
        /// The remote key.
        rkey: u32,
    },
    /// ATOMIC compare and swap on 8 remote bytes; the original value lands in the SGE.
    CompareSwap {
        /// The remote address (8-byte aligned).
        remote_addr: u64,
        /// The remote key.
        rkey: u32,
        /// The value to compare with.
        compare: u64,
        /// The value stored when equal.
        swap: u64,
    },
    /// ATOMIC fetch and add on 8 remote bytes; the original value lands in the SGE.
    FetchAdd {
        /// The remote address (8-byte aligned).
        remote_addr: u64,
        /// The remote key.
        rkey: u32,
        /// The addend.
        add: u64,
    },
}

impl SendOp {
    /// Whether this is an RDMA READ or an atomic: an operation that needs responder resources
    /// and whose response carries data back.
    pub fn is_read_or_atomic(self) -> bool {
        matches!(
            self,
            SendOp::Read { .. } | SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. }
        )
    }

    /// Whether this is an atomic.
    pub fn is_atomic(self) -> bool {
        matches!(self, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. })
    }

    /// Whether this is a SEND of any kind.
    pub fn is_send(self) -> bool {
        matches!(
            self,
            SendOp::Send | SendOp::SendWithImm { .. } | SendOp::SendWithInv { .. }
        )
    }
}

/// Send flags (`ibv_send_flags`), with their verbs values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendFlags(pub u32);

impl SendFlags {
    /// `IBV_SEND_FENCE`: wait for earlier READs and atomics to complete first.
    pub const FENCE: SendFlags = SendFlags(1);
    /// `IBV_SEND_SIGNALED`: generate a completion on success.
    pub const SIGNALED: SendFlags = SendFlags(1 << 1);
    /// `IBV_SEND_SOLICITED`: set the solicited event bit on the last packet.
    pub const SOLICITED: SendFlags = SendFlags(1 << 2);
    /// `IBV_SEND_INLINE`: the data was copied into the work request.
    pub const INLINE: SendFlags = SendFlags(1 << 3);

    /// Whether every flag of `other` is set.
    pub fn contains(self, other: SendFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for SendFlags {
    type Output = SendFlags;
    fn bitor(self, rhs: SendFlags) -> SendFlags {
        SendFlags(self.0 | rhs.0)
    }
}

/// Where the data of a send work request comes from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Gather {
    /// From memory regions, gathered in order.
    Sges(SgeList),
    /// From bytes copied into the work request at post time.
    Inline {
        /// How many bytes of `data` are used.
        len: u16,
        /// The bytes.
        data: [u8; MAX_INLINE],
    },
}

impl core::fmt::Debug for Gather {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Gather::Sges(list) => f.debug_tuple("Sges").field(list).finish(),
            Gather::Inline { len, .. } => write!(f, "Inline({len} bytes)"),
        }
    }
}

/// Inline data was longer than [`MAX_INLINE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("inline data of {0} bytes is longer than the maximum of {MAX_INLINE}")]
pub struct InlineTooLong(pub usize);

impl Gather {
    /// Inline data copied from `bytes`.
    pub fn inline(bytes: &[u8]) -> Result<Gather, InlineTooLong> {
        if bytes.len() > MAX_INLINE {
            return Err(InlineTooLong(bytes.len()));
        }
        let mut data = [0u8; MAX_INLINE];
        data[..bytes.len()].copy_from_slice(bytes);
        // Fits: at most MAX_INLINE (256).
        Ok(Gather::Inline {
            len: bytes.len() as u16,
            data,
        })
    }

    /// The total number of bytes.
    pub fn total_len(&self) -> u64 {
        match self {
            Gather::Sges(list) => list.total_len(),
            Gather::Inline { len, .. } => u64::from(*len),
        }
    }
}

/// The destination of a UD send: an address handle plus the remote QP and Q_Key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdDest {
    /// The path from the address handle.
    pub path: Path,
    /// The destination QP number.
    pub remote_qpn: u32,
    /// The Q_Key; one with the high bit set means "use the QP's own Q_Key" (IBTA 10.2.5).
    pub remote_qkey: u32,
}

/// Why a work request could not be posted (`ibv_post_send`/`ibv_post_recv` errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PostError {
    /// The queue is full (`ENOMEM`).
    #[error("the work queue is full")]
    QueueFull,
    /// The QP is in a state that does not accept this work request (`EINVAL`).
    #[error("the QP is in {0:?} and does not accept this work request")]
    WrongState(QpState),
    /// The work request is malformed for this QP (`EINVAL`): the reason says how.
    #[error("invalid work request: {0}")]
    Invalid(&'static str),
}

/// A send work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWqe {
    /// The application's identifier, returned in the completion.
    pub wr_id: u64,
    /// What to do.
    pub op: SendOp,
    /// Flags.
    pub flags: SendFlags,
    /// The local data: the source of SEND/WRITE, the destination of READ and atomics.
    pub data: Gather,
    /// For UD queue pairs: where to send.
    pub ud: Option<UdDest>,
}

/// A receive work request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvWqe {
    /// The application's identifier, returned in the completion.
    pub wr_id: u64,
    /// Where incoming data lands.
    pub sges: SgeList,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sge_list_is_bounded() {
        let mut list = SgeList::new();
        for i in 0..MAX_SGE {
            list.push(Sge {
                addr: i as u64,
                length: 10,
                lkey: 1,
            })
            .unwrap();
        }
        assert_eq!(list.push(Sge::default()), Err(TooManySges));
        assert_eq!(list.as_slice().len(), MAX_SGE);
        assert_eq!(list.total_len(), 10 * MAX_SGE as u64);
    }

    #[test]
    fn inline_is_bounded() {
        assert!(Gather::inline(&[0; MAX_INLINE]).is_ok());
        assert_eq!(
            Gather::inline(&[0; MAX_INLINE + 1]),
            Err(InlineTooLong(MAX_INLINE + 1))
        );
        assert_eq!(Gather::inline(b"abc").unwrap().total_len(), 3);
    }
}
