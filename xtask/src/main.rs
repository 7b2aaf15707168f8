//! `cargo xtask`: the project's command runner.
//!
//! It compiles with the Rust toolchain alone (no C library, no clang, no `-sys` crate), so
//! it is the first thing that works on a new machine. Each command installs the Debian
//! packages it needs ([`deps`], with a line saying what and why), then runs the tool that
//! does the work as a binary of its own crate under `tools/` (`cargo run -p …`):
//!
//! | command | tool | what it does |
//! |---|---|---|
//! | `demo` | `xroce-demo` | the main job: a two-namespace lab, two daemons, every RDMA operation, a table |
//! | `test` | `cargo test` | the whole suite with every tier ([`test`]) |
//! | `deps` | | install every package any command needs, and nothing else |
//! | `bench` | `xroce-bench` | xroce's figures against raw AF_XDP, kernel UDP/TCP, Linux rxe |
//! | `interop` | `xroce-interop` | xroce against Linux rxe, both directions |
//! | `rdma-core-tests` | `xroce-rdma-core-tests` | rdma-core's own test suite on xroce |
//! | `ucx` | `xroce-ucx` | UCX's perftest and Open MPI jobs (pml ucx) between two xroce hosts |
//! | `lab` | `xroce-lab` | two-namespace labs to experiment in |
//! | `pcap` | `xroce-pcap` | one line per RoCEv2 packet of a capture, every ICRC checked |
//! | `build` | | the drop-in `libibverbs.so.1` and `librdmacm.so.1` into `target/xroce/lib` |
//!
//! Arguments after the command go to the tool unchanged (`cargo xtask bench --help`).

mod deps;
mod test;
mod tool;

use anyhow::Result;
use clap::{Parser, Subcommand};

use deps::Need;

#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "xroce's commands", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Arguments passed to a tool unchanged.
#[derive(Debug, clap::Args)]
#[command(disable_help_flag = true)]
struct Forward {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The first command to run: two namespaces, two daemons, RDMA between them, a table.
    Demo(Forward),
    /// Install what the tests need, then run the whole test suite (every tier).
    Test(test::Args),
    /// Install every Debian package the build, the tests and the tools need, and nothing
    /// else.
    Deps,
    /// Measure xroce against raw AF_XDP, kernel UDP/TCP (or Linux rxe with --peer rxe).
    Bench(Forward),
    /// Check xroce against Linux rxe (this host's own, or Debian's kernel in a VM), both
    /// directions.
    Interop(Forward),
    /// Run rdma-core's own test suite (Debian's python3-pyverbs) on xroce's device.
    RdmaCoreTests(Forward),
    /// Run UCX (ucx_perftest over rc_verbs and ud_verbs) and Open MPI jobs with pml ucx
    /// between two xroce hosts.
    Ucx(Forward),
    /// Two-namespace veth labs: `up` and `down` a fixed one, or hold one until Ctrl-C.
    Lab(Forward),
    /// Print one line per RoCEv2 packet of pcap/pcapng files and check every ICRC.
    Pcap(Forward),
    /// Build the drop-in libibverbs.so.1 and librdmacm.so.1 (release) into target/xroce/lib.
    Build,
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    use tool::Profile::{Debug, Release};
    match cli.command {
        Command::Demo(f) => tool::run("xroce-demo", Release, &[Need::Build, Need::Lab], &f.args),
        Command::Test(args) => test::run(&args),
        Command::Deps => deps::ensure(Need::ALL),
        Command::Bench(f) => {
            // The bench's own threads are the applications it measures: release.
            let mut needs = vec![Need::Build, Need::Lab, Need::VerbsTools];
            if f.args.windows(2).any(|w| w[0] == "--peer" && w[1] == "rxe")
                || f.args.iter().any(|a| a == "--peer=rxe")
            {
                needs.push(Need::Interop);
            }
            tool::run("xroce-bench", Release, &needs, &f.args)
        }
        Command::Interop(f) => tool::run("xroce-interop", Debug, Need::ALL, &f.args),
        Command::RdmaCoreTests(f) => tool::run(
            "xroce-rdma-core-tests",
            Debug,
            &[Need::Build, Need::Lab, Need::VerbsTools],
            &f.args,
        ),
        Command::Ucx(f) => tool::run(
            "xroce-ucx",
            Debug,
            &[Need::Build, Need::Lab, Need::VerbsTools, Need::Ucx],
            &f.args,
        ),
        Command::Lab(f) => tool::run("xroce-lab", Debug, &[Need::Lab], &f.args),
        Command::Pcap(f) => tool::run("xroce-pcap", Debug, &[], &f.args),
        Command::Build => build(),
    }
}

/// `cargo xtask build`: the drop-in libraries, and how to use them.
fn build() -> Result<()> {
    deps::ensure(&[Need::Build])?;
    let (lib, installed) = xroce_artifacts::install_drop_in()?;
    println!("built {}", installed.display());
    println!(
        "  and {}",
        lib.join(xroce_artifacts::RDMACM_SONAME).display()
    );
    println!(
        "  (and the links libibverbs.so -> {}, librdmacm.so -> {})",
        xroce_artifacts::IBVERBS_SONAME,
        xroce_artifacts::RDMACM_SONAME
    );
    println!();
    println!("Run unmodified verbs and rdma_cm programs on them:");
    println!("  LD_LIBRARY_PATH={} ibv_devices", lib.display());
    println!("  LD_LIBRARY_PATH={} rping -s", lib.display());
    println!("  LD_PRELOAD={} ib_write_bw …", installed.display());
    Ok(())
}
