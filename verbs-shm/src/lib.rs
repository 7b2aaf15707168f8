//! Shared-memory verbs: how applications reach the xroce daemon.
//!
//! - [`contract`]: the `#[repr(C)]` layouts shared between applications and the daemon
//!   (rings, work requests, completions) and their memory ordering.
//! - [`ring`]: the producer and consumer ends of those rings.
//! - [`protocol`]: the control messages (object creation, QP modification) exchanged over
//!   the daemon's control socket.
//! - [`cm`]: rdma_cm requests and the event records of event channels.
//! - [`sys`]: shared memory, descriptor passing and the control socket address.
//! - [`client`]: the application library (devices, protection domains, memory regions,
//!   completion queues, queue pairs, shared receive queues, address handles, rdma_cm event
//!   channels).
//!
//! The fast path (posting work requests, polling completions) touches only shared memory,
//! plus a doorbell write when the daemon's poller sleeps. This crate never talks to the
//! network and never trusts what it reads from shared memory beyond the checks it makes.
//!
//! # The verbs vocabulary
//!
//! The words of verbs — [`QpType`](xroce_transport::QpType),
//! [`QpState`](xroce_transport::QpState), [`AttrMask`](xroce_transport::AttrMask),
//! [`Access`](xroce_transport::Access), [`SendOp`](xroce_transport::SendOp),
//! [`SendFlags`](xroce_transport::SendFlags), the work request limits — are defined once,
//! in the transport's bottom layer (`xroce_transport::attributes` and `wqe`), and this
//! crate uses them as they are: the application, the control protocol, the daemon and the
//! transport speak of one `QpType`, not of two that must agree. The transport is pure,
//! sans-IO Rust with no system library and no `unsafe`, so depending on it costs this crate
//! (and the drop-in libraries built on it) build time and nothing at run time: what the
//! client does not call is not linked. A separate vocabulary crate would have split the
//! transport's bottom layer in two for no reader's benefit. What crosses shared memory or
//! the control socket stays an encoding of plain integers ([`contract`], [`protocol`]),
//! and each encoding has one pair of conversions: [`contract::SendWqe::set_op`] and
//! [`contract::SendWqe::op`] for send operations, `raw`/`from_raw` on
//! [`QpType`](xroce_transport::QpType) and [`QpState`](xroce_transport::QpState),
//! `bits`/`from_bits` on [`Access`](xroce_transport::Access).

pub mod client;
pub mod cm;
pub mod contract;
pub mod protocol;
pub mod ring;
pub mod sys;
