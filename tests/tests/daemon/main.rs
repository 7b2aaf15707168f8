//! The daemon end to end, as root: two namespaces with an `xroced` each, applications on
//! the Rust API, every operation, every failure an application or the wire can cause.
//!
//! One test binary, so the engine is linked once for all of them; every test that needs
//! root is `#[ignore]`d with the reason and runs under `cargo xtask test`.

mod daemon_capture;
mod daemon_cm;
mod daemon_congestion;
mod daemon_control;
mod daemon_device_node;
mod daemon_errors;
mod daemon_fork;
mod daemon_hostile;
mod daemon_hostile_wire;
mod daemon_idle_cpu;
mod daemon_isolation;
mod daemon_kernel_traffic;
mod daemon_lifecycle;
mod daemon_loopback;
mod daemon_lossy_path;
mod daemon_many_qps;
mod daemon_multiqueue;
mod daemon_rc;
mod daemon_verbs;
mod examples;
