//! `xroce-pingpong`: rdma-core's `ibv_rc_pingpong`, `ibv_uc_pingpong` and `ibv_ud_pingpong`
//! rewritten over xroce's Rust verbs, so that an xroce host can ping-pong with an
//! unmodified example program on any RoCEv2 peer (Linux rxe, an RDMA NIC) or with itself.
//!
//! It speaks the examples' out-of-band TCP exchange byte for byte ([`oob`]), makes the same
//! verbs calls with the same attributes, moves the same data (a buffer filled with `0x7b`,
//! echoed by the server) and prints the same lines. Beyond the originals it can check every
//! message's data ([`pingpong::Verify`]), give up after a timeout and retry connecting.
//! [`cli`] is the examples' command line, [`pingpong`] the ping-pong itself.
//!
//! This crate never touches the network itself except for the exchange's TCP connection:
//! the RDMA traffic is the daemon's.

pub mod cli;
pub mod oob;
pub mod pingpong;

pub use pingpong::{Options, PingpongError, Report, Service, Verify, run};
