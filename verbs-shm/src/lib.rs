//! Shared-memory verbs: how applications reach the xroce daemon.
//!
//! - [`contract`]: the `#[repr(C)]` layouts shared between applications and the daemon
//!   (rings, work requests, completions) and their memory ordering.
//! - [`ring`]: the producer and consumer ends of those rings.
//! - [`protocol`]: the control messages (object creation, QP modification) exchanged over
//!   the daemon's control socket.
//! - [`cm`]: rdma_cm requests and the event records of event channels.
//! - [`sys`]: shared memory, descriptor passing and the control socket address.
//!
//! The fast path (posting work requests, polling completions) touches only shared memory,
//! plus a doorbell write when the daemon's poller sleeps. This crate never talks to the
//! network and never trusts what it reads from shared memory beyond the checks it makes.

pub mod client;
pub mod cm;
pub mod contract;
pub mod protocol;
pub mod ring;
pub mod sys;
