//! The InfiniBand transport of xroce as a deterministic, sans-IO state machine: queue pairs
//! (RC, UC, UD) with their requester, responder and completer, shared receive queues,
//! timers and counters.
//!
//! Packets come in as bytes ([`Endpoint::handle_frame`]) and go out as bytes
//! ([`Endpoint::poll_transmit`]); time comes in as an argument ([`Instant`]); memory is
//! reached through the [`MemoryTable`] trait, which checks every access. This crate never
//! performs I/O, never spawns a thread, never reads a clock and contains no `unsafe` code.
//! The engine drives it with real frames and real time; the tests drive it with virtual
//! time and a lossy simulated network.
//!
//! The decomposition follows Linux rxe: one module per role — [`requester`] (`rxe_req.c`),
//! [`responder`] (`rxe_resp.c`), [`completer`] (`rxe_comp.c`) — and the wire crate's opcode
//! table answers every question about an opcode. Where the specification leaves room and
//! interoperability with rxe decides, the code says so.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod attributes;
pub mod completer;
pub mod completion;
pub mod context;
pub mod counters;
pub mod endpoint;
pub mod frame;
pub mod memory;
pub mod packet;
pub mod qp;
pub mod requester;
pub mod responder;
pub mod send_queue;
pub mod srq;
pub mod testing;
pub mod time;
pub mod wqe;

pub use attributes::{
    Access, AttrMask, Limits, ModifyError, Path, QpAttr, QpCaps, QpState, QpType,
};
pub use completion::{Completion, CompletionQueue, WcFlags, WcOpcode, WcStatus};
pub use context::{AsyncEvent, Cx, Emit};
pub use counters::{Counter, Counters};
pub use endpoint::{Endpoint, EndpointConfig, EndpointError, Transmit};
pub use memory::{
    AccessRequest, AtomicOp, KeyEntry, KeyKind, KeyRef, MemoryError, MemoryTable, PdId,
    check_access, check_invalidate,
};
pub use qp::{QpConfig, QueuePair};
pub use srq::{Srq, SrqAttr, SrqId};
pub use testing::{Region, Regions};
pub use time::Instant;
pub use wqe::{Gather, PostError, RecvWqe, SendFlags, SendOp, SendWqe, Sge, SgeList, UdDest};
