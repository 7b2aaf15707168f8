//! Congestion control for xroce's queue pairs on ordinary Ethernet, as sans-IO state
//! machines: DCQCN's reaction point ([`dcqcn`]) and notification point
//! ([`notification`]) as RDMA NICs run them, a delay- and loss-based controller for paths
//! that mark nothing ([`delay`]), a per-QP token bucket ([`pacer`]), CNPs on the wire
//! ([`cnp`]), and [`control`], which joins them for every queue pair of one endpoint from
//! the headers of the frames going in and out.
//!
//! This crate never performs I/O, never reads a clock, never spawns a thread and contains
//! no `unsafe` code: time comes in as the transport's [`Instant`](xroce_transport::Instant),
//! frames come in as bytes. It never changes the transport's behaviour except by the one
//! thing the transport asks it, when a queue pair may send again, and never changes a
//! frame except its ECN bits. The engine drives it beside the transport in each poller;
//! the tests drive it in virtual time, with the transport's endpoints and a simulated
//! bottleneck switch (`tests/incast.rs`).
//!
//! # Modules
//!
//! From the bottom up: [`rate`]; [`dcqcn`], [`notification`], [`delay`] and [`pacer`],
//! each alone; [`cnp`]; [`control`], which uses them all.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cnp;
pub mod control;
pub mod dcqcn;
pub mod delay;
pub mod notification;
pub mod pacer;
pub mod rate;

pub use cnp::CnpPath;
pub use control::{
    Algorithm, Arrival, Congestion, CongestionConfig, CongestionCounters, Controller, DscpSet,
    EcnMode, HELLO_PACKETS, QpCongestion,
};
pub use dcqcn::{DcqcnParams, ParamError, ReactionPoint};
pub use delay::{DelayControl, DelayParams};
pub use notification::NotificationPoint;
pub use pacer::Pacer;
pub use rate::Rate;
