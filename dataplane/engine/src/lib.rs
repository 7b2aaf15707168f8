//! The xroce dataplane daemon `xroced`: XDP steering, AF_XDP ports, pinned pollers.
//!
//! This crate is where xroce meets the kernel: all `unsafe` and all syscalls of the
//! dataplane live here, behind safe types. It never parses RoCEv2 itself (that is
//! `xroce-wire`) and never decides transport behaviour (that is `xroce-transport`).
//!
//! Logging goes through the `log` crate (the same facade aya uses); binaries pick the logger.
//!
//! - [`xdp`]: load and attach the XDP program, fill its XSKMAP, read its counters.
//! - [`umem`]: the packet buffer memory shared with the kernel (hugepages when available).
//! - [`xsk`]: AF_XDP ports, one socket per served queue: batched receive and transmit.
//! - [`gsi`]: QP1, where the connection manager's MADs come in and go out.
//! - [`rdma_cm`]: the port's connection manager serving every application: QP1, ids, event channels.
//! - [`host`]: the interface, its GIDs, path MTU and neighbours, over rtnetlink.
//! - [`memory`]: the memory regions a poller reads and writes, by key.
//! - [`bells`]: which applications' rings a poller reads on a pass.
//! - [`handoff`]: frames for a queue pair another poller owns.
//! - [`poller`]: one pinned thread per served queue, running the transport.
//! - [`control`]: the control socket: applications, their objects, every verb.
//! - [`daemon`]: sets everything up, runs the control plane, tears everything down.
//! - [`device_node`]: `/dev/infiniband/uverbs-<device>`, the node some RDMA software checks for.
//! - [`privileges`]: what the daemon keeps after setup, and how it gives up the rest.

pub mod bells;
pub mod control;
pub mod daemon;
pub mod device_node;
pub mod gsi;
pub mod handoff;
pub mod host;
pub mod memory;
pub mod poller;
pub mod privileges;
pub mod rdma_cm;
pub mod umem;
pub mod xdp;
pub mod xsk;

/// An error and its sources, joined: the top-level messages of aya and xsk-rs alone rarely
/// say what the kernel refused.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let next = e.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = e.source();
    }
    text
}
