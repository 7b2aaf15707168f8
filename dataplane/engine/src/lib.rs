//! The xroce dataplane daemon `xroced`: XDP steering, AF_XDP ports, pinned pollers.
//!
//! This crate is where xroce meets the kernel: all `unsafe` and all syscalls of the
//! dataplane live here, behind safe types. It never parses RoCEv2 itself (that is
//! `xroce-wire`) and never decides transport behaviour (that is `xroce-transport`).
//!
//! Logging goes through the `log` crate (the same facade aya uses); binaries pick the logger.
//!
//! - [`xdp`]: load and attach the XDP program, fill its XSKMAP, read its counters.
//! - `umem`: the packet buffer memory shared with the kernel (hugepages when available).
//! - `xsk`: AF_XDP ports, one socket per served queue: batched receive and transmit.

pub mod xdp;
