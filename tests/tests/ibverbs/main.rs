//! The drop-in `libibverbs.so.1` and `librdmacm.so.1` end to end, as root: unmodified
//! Debian programs (ibv_*, perftest, rdmacm-utils, rdma-core's own suite) and the Rust
//! examples on xroce's device.
//!
//! One test binary, so the engine is linked once for all of them; every test that needs
//! root is `#[ignore]`d with the reason and runs under `cargo xtask test`.

mod ibverbs_api;
mod ibverbs_perftest;
mod ibverbs_support;
mod ibverbs_users;
mod ibverbs_utils;
mod interop_oob;
mod interop_pingpong;
mod rdma_cm_load;
mod rdma_cm_tools;
mod rdma_core_suite;
mod ucx_mpi;
