//! The shared-memory contract between applications and the daemon: ring layouts, work
//! requests, completions, and the memory ordering that makes them safe to share.
//!
//! Every structure here is `#[repr(C)]`, made of plain integers (any bit pattern is a
//! valid value, so a scribbling application cannot create an invalid one), a multiple of 8
//! bytes long, and has its size checked at compile time. Both sides read and write the
//! shared bytes only through 64-bit atomic loads and stores ([`crate::ring`]), so a torn
//! or hostile write is garbage to validate, never undefined behaviour.
//!
//! # Rings
//!
//! A ring is a memory mapping holding a [`RingHeader`] followed by `entries` fixed-size
//! slots (`entries` a power of two). `producer` and `consumer` are free-running `u32`
//! counters on separate cache lines; a slot index is `counter & (entries - 1)`.
//!
//! - The producer writes the slot, then stores `producer + 1` with `Release`.
//! - The consumer loads `producer` with `Acquire`, reads the slots, then stores its new
//!   `consumer` with `Release`; the producer loads `consumer` with `Acquire` to see free
//!   slots.
//!
//! Send, receive and SRQ rings are produced by the application and consumed by the daemon;
//! completion rings the other way. The daemon never trusts a counter it reads: it keeps its
//! own copy of the counter it owns and treats a `producer` that runs more than `entries`
//! ahead of it as a broken ring (the QP or CQ goes to the error state, nothing else).
//!
//! # Doorbells
//!
//! Pollers spin while they have work and sleep on an eventfd when idle. Before sleeping, a
//! poller sets its word in the [`WakePage`] and then checks every ring once more
//! (`SeqCst` on both sides). After producing, an application loads that word (`SeqCst`)
//! and writes the eventfd only when the poller sleeps, so the fast path makes no system
//! call while the daemon is busy.
//!
//! # Post bits
//!
//! So that a poller serving thousands of QPs need not read every ring on every pass, each
//! application has a page of post bits ([`post_bits_bytes`]), shared with the daemon alone:
//! one bit per QP or SRQ of that application (the daemon assigns it at creation;
//! [`POST_BITS_PER_POLLER`] bits per poller, in 64-bit words, poller `p`'s region first at
//! word `p * POST_BITS_PER_POLLER / 64`). After publishing a ring's `producer`, the
//! application sets its bit (`fetch_or`, `SeqCst`), then checks the wake word as above. The
//! poller swaps a nonzero word to 0 (`SeqCst`) and then reads the rings whose bits were set.
//! A set bit only makes the poller look at the application's own rings, and an application
//! that never sets its bits only delays its own work (the poller still reads every ring
//! before it sleeps, and every few milliseconds).

use core::mem::size_of;
use core::sync::atomic::AtomicU32;

use xroce_transport::{SendFlags, SendOp};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// The contract's version. An application and a daemon with different versions refuse to
/// talk (checked in the control protocol's hello).
pub const VERSION: u32 = 2;

/// Post bits per poller in an application's post-bits page (QPs and SRQs past these are
/// read on every pass instead).
pub const POST_BITS_PER_POLLER: u32 = 4096;

/// The size of an application's post-bits page for a daemon with `pollers` pollers.
pub const fn post_bits_bytes(pollers: usize) -> usize {
    let bytes = pollers * POST_BITS_PER_POLLER as usize / 8;
    bytes.div_ceil(4096) * 4096
}

/// The scatter/gather elements a work request carries at most, and the inline bytes a
/// send work request carries at most: the transport's limits, which the slots below hold.
pub use xroce_transport::wqe::{MAX_INLINE, MAX_SGE};

/// Multicast groups a device has at most (`max_mcast_grp`), queue pairs attached to one
/// group (`max_mcast_qp_attach`), and attachments in all (`max_total_mcast_qp_attach`):
/// rxe's figures. The library reports them, the daemon holds applications to them.
pub const MAX_MCAST_GRP: u32 = 8192;
/// See [`MAX_MCAST_GRP`].
pub const MAX_MCAST_QP_ATTACH: u32 = 56;
/// See [`MAX_MCAST_GRP`].
pub const MAX_TOTAL_MCAST_QP_ATTACH: u32 = 0x70000;

/// The size of the [`RingHeader`] area at the start of every ring mapping.
pub const RING_HEADER_SIZE: usize = 256;

/// A scatter/gather element (`ibv_sge`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct Sge {
    /// Start address, in the application's address space.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// The local key of the memory region.
    pub lkey: u32,
}

/// A send work request slot (`ibv_send_wr` flattened). 384 bytes.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct SendWqe {
    /// Returned in the completion.
    pub wr_id: u64,
    /// `ibv_wr_opcode`.
    pub opcode: u32,
    /// `ibv_send_flags`.
    pub send_flags: u32,
    /// Scatter/gather elements used in `sge`, or inline bytes used in `inline` when
    /// `send_flags` has `IBV_SEND_INLINE`.
    pub num_sge: u32,
    /// Immediate data (network byte order, as in `ibv_send_wr`), or the rkey to invalidate.
    pub imm_data: u32,
    /// RDMA/atomic remote address.
    pub remote_addr: u64,
    /// RDMA/atomic remote key.
    pub rkey: u32,
    /// UD: destination QP number.
    pub remote_qpn: u32,
    /// Atomic: compare (CAS) or add (FAA) operand.
    pub compare_add: u64,
    /// Atomic: swap operand (CAS).
    pub swap: u64,
    /// UD: the address handle (as returned by `CreateAh`).
    pub ah: u32,
    /// UD: the Q_Key.
    pub remote_qkey: u32,
    /// Scatter/gather elements, or inline data (the same 256 bytes).
    pub data: [u8; MAX_INLINE],
    /// Reserved, zero.
    pub reserved: [u64; 8],
}

impl SendWqe {
    /// The scatter/gather element `i` (`i < MAX_SGE`) from the data area.
    pub fn sge(&self, i: usize) -> Sge {
        let at = (i % MAX_SGE) * size_of::<Sge>();
        // NOTE(unwrap): the slice is exactly size_of::<Sge>() bytes inside `data`.
        Sge::read_from_bytes(&self.data[at..at + size_of::<Sge>()]).unwrap_or_default()
    }

    /// Writes scatter/gather element `i` (`i < MAX_SGE`) into the data area.
    pub fn set_sge(&mut self, i: usize, sge: Sge) {
        let at = (i % MAX_SGE) * size_of::<Sge>();
        self.data[at..at + size_of::<Sge>()].copy_from_slice(sge.as_bytes());
    }

    /// Writes the operation: its `ibv_wr_opcode` and operands. Immediate data is written
    /// in network byte order, as `ibv_send_wr` holds it; the rkey to invalidate shares its
    /// field. [`SendWqe::op`] reads it back: the two are the one encoding of a
    /// [`SendOp`] in a slot.
    pub fn set_op(&mut self, op: SendOp) {
        use wr_opcode as o;
        match op {
            SendOp::Send => self.opcode = o::SEND,
            SendOp::SendWithImm { imm } => {
                self.opcode = o::SEND_WITH_IMM;
                self.imm_data = imm.to_be();
            }
            SendOp::SendWithInv { rkey } => {
                self.opcode = o::SEND_WITH_INV;
                self.imm_data = rkey;
            }
            SendOp::Write { remote_addr, rkey } => {
                self.opcode = o::RDMA_WRITE;
                (self.remote_addr, self.rkey) = (remote_addr, rkey);
            }
            SendOp::WriteWithImm {
                remote_addr,
                rkey,
                imm,
            } => {
                self.opcode = o::RDMA_WRITE_WITH_IMM;
                (self.remote_addr, self.rkey, self.imm_data) = (remote_addr, rkey, imm.to_be());
            }
            SendOp::Read { remote_addr, rkey } => {
                self.opcode = o::RDMA_READ;
                (self.remote_addr, self.rkey) = (remote_addr, rkey);
            }
            SendOp::CompareSwap {
                remote_addr,
                rkey,
                compare,
                swap,
            } => {
                self.opcode = o::ATOMIC_CMP_AND_SWP;
                (self.remote_addr, self.rkey) = (remote_addr, rkey);
                (self.compare_add, self.swap) = (compare, swap);
            }
            SendOp::FetchAdd {
                remote_addr,
                rkey,
                add,
            } => {
                self.opcode = o::ATOMIC_FETCH_AND_ADD;
                (self.remote_addr, self.rkey, self.compare_add) = (remote_addr, rkey, add);
            }
        }
    }

    /// The operation [`SendWqe::set_op`] wrote, or `None` for an opcode the transport does
    /// not carry (`LOCAL_INV`, `BIND_MW`, anything else).
    pub fn op(&self) -> Option<SendOp> {
        use wr_opcode as o;
        let (remote_addr, rkey) = (self.remote_addr, self.rkey);
        Some(match self.opcode {
            o::RDMA_WRITE => SendOp::Write { remote_addr, rkey },
            o::RDMA_WRITE_WITH_IMM => SendOp::WriteWithImm {
                remote_addr,
                rkey,
                imm: u32::from_be(self.imm_data),
            },
            o::SEND => SendOp::Send,
            o::SEND_WITH_IMM => SendOp::SendWithImm {
                imm: u32::from_be(self.imm_data),
            },
            o::SEND_WITH_INV => SendOp::SendWithInv {
                rkey: self.imm_data,
            },
            o::RDMA_READ => SendOp::Read { remote_addr, rkey },
            o::ATOMIC_CMP_AND_SWP => SendOp::CompareSwap {
                remote_addr,
                rkey,
                compare: self.compare_add,
                swap: self.swap,
            },
            o::ATOMIC_FETCH_AND_ADD => SendOp::FetchAdd {
                remote_addr,
                rkey,
                add: self.compare_add,
            },
            _ => return None,
        })
    }

    /// The `ibv_send_flags` of the slot.
    pub fn flags(&self) -> SendFlags {
        SendFlags(self.send_flags)
    }

    /// Whether the data area holds inline bytes (`num_sge` of them) rather than
    /// scatter/gather elements: `IBV_SEND_INLINE` on an operation that sends data (a READ
    /// or an atomic ignores the flag, as verbs does).
    pub fn is_inline(&self) -> bool {
        self.flags().contains(SendFlags::INLINE)
            && !matches!(
                self.opcode,
                wr_opcode::RDMA_READ
                    | wr_opcode::ATOMIC_CMP_AND_SWP
                    | wr_opcode::ATOMIC_FETCH_AND_ADD
            )
    }
}

/// A receive work request slot (`ibv_recv_wr` flattened). 272 bytes.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct RecvWqe {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Scatter/gather elements used.
    pub num_sge: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// Scatter/gather elements.
    pub sge: [Sge; MAX_SGE],
}

/// A completion slot (`ibv_wc` plus a timestamp). 64 bytes.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct Cqe {
    /// The work request's `wr_id`.
    pub wr_id: u64,
    /// `ibv_wc_status`.
    pub status: u32,
    /// `ibv_wc_opcode`.
    pub opcode: u32,
    /// Vendor error (0).
    pub vendor_err: u32,
    /// Bytes transferred.
    pub byte_len: u32,
    /// Immediate data (network byte order) or the invalidated rkey, per `wc_flags`.
    pub imm_data: u32,
    /// The local QP number.
    pub qp_num: u32,
    /// The source QP (UD receives).
    pub src_qp: u32,
    /// `ibv_wc_flags`.
    pub wc_flags: u32,
    /// P_Key index (0).
    pub pkey_index: u16,
    /// Source LID (0 on RoCE).
    pub slid: u16,
    /// Service level. RoCE carries none: a UD receive has the network header it arrived
    /// with here, as RDMA NICs report it (2 IPv4, 1 IPv6); other completions 0.
    pub sl: u8,
    /// DLID path bits (0 on RoCE).
    pub dlid_path_bits: u8,
    /// 1 if the message carried the solicited event bit.
    pub solicited: u8,
    /// Reserved, zero.
    pub reserved0: u8,
    /// When the daemon generated the completion, in nanoseconds of `CLOCK_MONOTONIC`.
    pub timestamp_ns: u64,
    /// Reserved, zero.
    pub reserved1: u64,
}

/// The header of every ring: producer and consumer on separate cache lines, and the
/// notification word of completion rings on a third.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct RingHeader {
    /// Written by the producer (`Release`), read by the consumer (`Acquire`).
    pub producer: AtomicU32,
    _pad0: [u32; 15],
    /// Written by the consumer (`Release`), read by the producer (`Acquire`).
    pub consumer: AtomicU32,
    _pad1: [u32; 15],
    /// Completion rings: the application's notification request (`ibv_req_notify_cq`):
    /// [`ARM_NONE`], [`ARM_NEXT`] or [`ARM_SOLICITED`]. The daemon swaps it back to
    /// [`ARM_NONE`] when it raises the event.
    pub arm: AtomicU32,
    /// Completion rings: events raised so far (the daemon increments it).
    pub events: AtomicU32,
    /// Set to 1 by the daemon when the object broke (a garbage counter, an overflow): the
    /// application reports errors from then on.
    pub broken: AtomicU32,
    _pad2: [u32; 13],
}

/// No notification requested.
pub const ARM_NONE: u32 = 0;
/// Notify on the next completion.
pub const ARM_NEXT: u32 = 1;
/// Notify on the next solicited (or error) completion.
pub const ARM_SOLICITED: u32 = 2;

/// The most pollers a daemon runs (the size of the [`WakePage`]).
pub const MAX_POLLERS: usize = 64;

/// One page the daemon shares read-only with every application: whether each poller
/// sleeps (so needs its eventfd written after a post).
#[derive(Debug)]
#[repr(C, align(64))]
pub struct WakePage {
    /// Nonzero while poller `i` sleeps. Each word on its own cache line.
    pub sleeping: [PaddedWord; MAX_POLLERS],
}

/// An atomic word alone on its cache line.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct PaddedWord {
    /// The word.
    pub value: AtomicU32,
    _pad: [u32; 15],
}

/// The size of a ring mapping with `entries` slots of `slot` bytes.
pub const fn ring_bytes(entries: u32, slot: usize) -> usize {
    RING_HEADER_SIZE + entries as usize * slot
}

const _: () = {
    assert!(size_of::<Sge>() == 16);
    assert!(size_of::<SendWqe>() == 384);
    assert!(size_of::<RecvWqe>() == 272);
    assert!(size_of::<Cqe>() == 64);
    assert!(size_of::<RingHeader>() == 192);
    assert!(size_of::<RingHeader>() <= RING_HEADER_SIZE);
    assert!(size_of::<PaddedWord>() == 64);
    assert!(size_of::<WakePage>() == 64 * MAX_POLLERS);
    assert!(MAX_SGE * size_of::<Sge>() == MAX_INLINE);
    assert!(size_of::<SendWqe>().is_multiple_of(8) && size_of::<RecvWqe>().is_multiple_of(8));
};

/// `ibv_wr_opcode` values.
pub mod wr_opcode {
    /// RDMA WRITE.
    pub const RDMA_WRITE: u32 = 0;
    /// RDMA WRITE with immediate.
    pub const RDMA_WRITE_WITH_IMM: u32 = 1;
    /// SEND.
    pub const SEND: u32 = 2;
    /// SEND with immediate.
    pub const SEND_WITH_IMM: u32 = 3;
    /// RDMA READ.
    pub const RDMA_READ: u32 = 4;
    /// Atomic compare and swap.
    pub const ATOMIC_CMP_AND_SWP: u32 = 5;
    /// Atomic fetch and add.
    pub const ATOMIC_FETCH_AND_ADD: u32 = 6;
    /// Local invalidate (not supported).
    pub const LOCAL_INV: u32 = 7;
    /// Bind memory window (not supported).
    pub const BIND_MW: u32 = 8;
    /// SEND with invalidate.
    pub const SEND_WITH_INV: u32 = 9;
}

#[cfg(test)]
mod tests {
    use zerocopy::FromZeros;

    use super::*;

    #[test]
    fn every_send_operation_reads_back_as_written() {
        let ops = [
            SendOp::Send,
            SendOp::SendWithImm { imm: 0x1234_5678 },
            SendOp::SendWithInv { rkey: 0x77 },
            SendOp::Write {
                remote_addr: 0x1000,
                rkey: 5,
            },
            SendOp::WriteWithImm {
                remote_addr: 0x2000,
                rkey: 6,
                imm: 9,
            },
            SendOp::Read {
                remote_addr: 0x3000,
                rkey: 7,
            },
            SendOp::CompareSwap {
                remote_addr: 0x4000,
                rkey: 8,
                compare: 1,
                swap: 2,
            },
            SendOp::FetchAdd {
                remote_addr: 0x5000,
                rkey: 9,
                add: 3,
            },
        ];
        for op in ops {
            let mut w = SendWqe::new_zeroed();
            w.set_op(op);
            assert_eq!(w.op(), Some(op));
        }
    }

    #[test]
    fn immediate_data_is_kept_in_network_order_as_ibv_send_wr_holds_it() {
        let mut w = SendWqe::new_zeroed();
        w.set_op(SendOp::SendWithImm { imm: 0x1234_5678 });
        assert_eq!(w.opcode, wr_opcode::SEND_WITH_IMM);
        assert_eq!(w.imm_data.to_ne_bytes(), [0x12, 0x34, 0x56, 0x78]);
    }

    #[test]
    fn opcodes_the_transport_does_not_carry_decode_to_none() {
        let mut w = SendWqe::new_zeroed();
        for opcode in [wr_opcode::LOCAL_INV, wr_opcode::BIND_MW, 10, u32::MAX] {
            w.opcode = opcode;
            assert_eq!(w.op(), None, "opcode {opcode}");
        }
    }

    #[test]
    fn inline_counts_only_for_operations_that_send_data() {
        let mut w = SendWqe::new_zeroed();
        w.send_flags = SendFlags::INLINE.0;
        w.set_op(SendOp::Send);
        assert!(w.is_inline());
        w.set_op(SendOp::Read {
            remote_addr: 0,
            rkey: 0,
        });
        assert!(!w.is_inline());
        w.send_flags = 0;
        w.set_op(SendOp::Send);
        assert!(!w.is_inline());
    }
}
