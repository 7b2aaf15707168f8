//! The InfiniBand transport of xroce as a deterministic, sans-IO state machine: queue pairs
//! (RC, UC, UD) with their requester, responder and completer, shared receive queues,
//! timers and counters.
//!
//! Packets come in as bytes ([`Endpoint::handle_frame`]) and go out as bytes
//! ([`Endpoint::poll_transmit`]); time comes in as an argument ([`Instant`]); memory is
//! reached through the [`MemoryTable`] trait, and every access is checked by one function,
//! [`check_access`]. This crate never performs I/O, never spawns a thread, never reads a
//! clock and contains no `unsafe` code. The engine drives it with real frames and real
//! time; the tests drive it with virtual time and a lossy simulated network.
//!
//! The decomposition follows Linux rxe: one module per role — [`requester`] (`rxe_req.c`),
//! [`responder`] (`rxe_resp.c`, a chain of named checks), [`completer`] (`rxe_comp.c`) —
//! and the wire crate's opcode table answers every question about an opcode, in both
//! directions. Where the specification leaves room and interoperability with rxe decides,
//! the code says so.
//!
//! # Modules
//!
//! From the bottom up: a module uses only modules listed before it, except the roles
//! (with [`receive`]) and [`qp`], which use each other (the roles are `impl QueuePair` blocks on the
//! queue pair, and the queue pair calls them). No other module depends on a role.
//!
//! - [`attributes`]: QP types, states, attribute masks, attributes, access flags — the
//!   verbs vocabulary that the shared-memory contract, the client library and the daemon
//!   use too — and, in [`attributes::modify`], the `modify_qp` state table with its
//!   validation. Uses nothing else in the crate. [`time`]: instants and
//!   the transport's timeouts. [`counters`]: every counter, named and described, and the
//!   macro that defines such a set ([`counter_set!`], the connection manager's too).
//!   [`completion`]: work completions.
//! - [`wqe`]: work requests and the errors of posting them. [`packet`]: the roles' view of
//!   a packet, the wire crate's headers classified by the opcode table.
//! - [`recovery`]: what a requester measures of its path (round trips, delivery rate) and
//!   the loss recovery it derives: the window of packets in flight, the retransmission
//!   timeout, the pacing of a resend.
//! - [`selective`]: selective repeat between two xroce endpoints: the responder's store
//!   of packets held ahead of a gap and the requester's scoreboard of what it holds.
//! - [`memory`]: the memory table, the one key check, scatter and gather.
//!   [`send_queue`]: the send queue and the packets in flight, which the requester and
//!   the completer share through its methods.
//! - [`srq`]: shared receive queues.
//! - [`context`]: what a queue pair borrows for one call (time, memory, counters, events,
//!   where packets go). [`frame`]: Ethernet frames to packets and back.
//! - [`qp`] with the roles: [`receive`] (the checks every packet passes before a role sees
//!   it: service, state, the connection's addresses, P_Key and Q_Key; `rxe_recv.c`),
//!   [`requester`] (send queue → request packets), [`responder`] (request packets →
//!   memory, receive completions, responses), [`completer`] (responses → send
//!   completions, retransmission).
//! - [`endpoint`]: every queue pair and shared receive queue of one poller, scheduling,
//!   timers, frame I/O.
//! - [`testing`]: an in-process memory table, hosts, connections and a link for tests,
//!   the simulation, fuzz targets and benchmarks; the engine does not use it.
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
pub mod receive;
pub mod recovery;
pub mod requester;
pub mod responder;
pub mod selective;
pub mod send_queue;
pub mod srq;
pub mod testing;
pub mod time;
pub mod wqe;

pub use attributes::{
    Access, AttrMask, Limits, ModifyError, Path, QpAttr, QpCaps, QpState, QpType,
};
pub use completion::{Completion, CompletionQueue, NetworkHeader, WcFlags, WcOpcode, WcStatus};
pub use context::{AsyncEvent, Cx, Emit};
pub use counters::{Counter, Counters};
pub use endpoint::{Endpoint, EndpointConfig, EndpointError, Transmit};
pub use memory::{
    AccessRequest, AtomicOp, KeyEntry, KeyKind, KeyRef, MemoryError, MemoryTable, PdId,
    check_access, check_invalidate,
};
pub use qp::{QpConfig, QueuePair};
pub use recovery::PathEstimate;
pub use srq::{Srq, SrqAttr, SrqId};
pub use testing::{Region, Regions};
pub use time::Instant;
pub use wqe::{Gather, PostError, RecvWqe, SendFlags, SendOp, SendWqe, Sge, SgeList, UdDest};
