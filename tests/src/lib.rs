//! xroce's end-to-end tests, in a few test binaries so that the engine is linked once for
//! each (`tests/tests/`):
//!
//! | binary | what it tests |
//! |---|---|
//! | `host` | labs of network namespaces, the XDP program, AF_XDP on veth, the kernel's interfaces and neighbours, the impairment router |
//! | `daemon` | two namespaces with an `xroced` each: every operation on the Rust API, every failure an application or the wire can cause |
//! | `ibverbs` | unmodified Debian programs (ibv_*, perftest, rdma-core's suite) and the Rust examples on the drop-in `libibverbs.so.1` |
//! | `rxe` | xroce against Linux rxe in a VM (`cargo xtask interop`) |
//!
//! The tiers are marked one way: a test that needs root is `#[ignore = "needs root: …"]`,
//! and one that boots Linux rxe is `#[ignore = "interop: …"]` with `against_linux_rxe` in
//! its name. `cargo test` lists them as ignored, with the reason; `cargo xtask test` runs
//! them all (`--no-interop` leaves the rxe ones out). The sans-IO tests, the loss
//! simulation among them, live with their crates and run anywhere (`cargo test -p
//! xroce-transport`). The harnesses these tests share with the tools are in `xroce-lab`
//! (labs, daemons) and `xroce-impair` (the impairment router as a process).
//!
//! These tests never touch an interface or an address outside the network namespaces they
//! create, which they remove on every exit path, and never assert a time or a throughput.
