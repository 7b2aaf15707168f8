//! `cargo xtask`: the project's automation. Every command a user or CI needs is here.
//!
//! - `cargo xtask test`: install what the tests need, then run the whole suite.
//! - `cargo xtask demo`: the first command a newcomer runs.
//! - `cargo xtask pcap FILE...`: decode the RoCEv2 packets of captures and check their ICRCs.
//! - `cargo xtask build`: the drop-in `libibverbs.so.1`, installed in `target/xroce/lib`.
//! - `cargo xtask lab up|down`: a two-namespace lab with fixed names to experiment in
//!   (`cargo xtask lab` alone holds one until Ctrl-C).
//! - `cargo xtask interop`: xroce against Linux rxe (this host's, or in a VM), both
//!   directions.
//! - `cargo xtask bench`: xroce's figures against raw AF_XDP and kernel UDP/TCP.
//! - `cargo xtask rdma-core-tests`: rdma-core's own test suite (python3-pyverbs) on xroce.

mod bench;
mod build;
mod demo;
mod deps;
mod interop;
mod lab;
mod pcap;
mod rdma_core_tests;
mod test;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "xroce project automation")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Install the Debian packages the tests need, then run the whole test suite.
    Test(test::Args),
    /// The first command to run: shows what xroce does today.
    Demo(demo::Args),
    /// Install the Debian packages the build and the tests need, and nothing else.
    Deps,
    /// Print one line per RoCEv2 packet of pcap/pcapng files and check every ICRC.
    Pcap(pcap::Args),
    /// Build the drop-in libibverbs.so.1 (release) into target/xroce/lib.
    Build(build::Args),
    /// Two-namespace veth labs: `up` and `down` a fixed one, or hold one until Ctrl-C.
    Lab(lab::Args),
    /// Check xroce against Linux rxe (this host's own, or Debian's kernel in a VM), both
    /// directions.
    Interop(interop::Args),
    /// Measure xroce (bandwidth, latency, message rate, QP scaling) against raw AF_XDP and
    /// kernel UDP/TCP in a two-namespace lab.
    Bench(Box<bench::Args>),
    /// Run rdma-core's own test suite (Debian's python3-pyverbs) on xroce's device.
    RdmaCoreTests(rdma_core_tests::Args),
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Test(args) => test::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Deps => deps::ensure(deps::ALL),
        Command::Pcap(args) => pcap::run(&args),
        Command::Build(args) => build::run(&args),
        Command::Lab(args) => lab::run(&args),
        Command::Interop(args) => interop::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::RdmaCoreTests(args) => rdma_core_tests::run(&args),
    }
}
