//! The host layer end to end, as root: labs of network namespaces, the XDP program, AF_XDP
//! sockets on veth, the kernel's view of interfaces and neighbours, and the impairment
//! router.
//!
//! One test binary, so the engine is linked once for all of them; every test that needs
//! root is `#[ignore]`d with the reason and runs under `cargo xtask test`.

mod host_interface;
mod host_neighbours;
mod host_support;
mod impair_router;
mod lab_hugepages;
mod lab_named;
mod lab_namespaces;
mod star_switch;
mod xdp_kernel_traffic;
mod xdp_program;
mod xsk_queues;
mod xsk_support;
mod xsk_veth;
