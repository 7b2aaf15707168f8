//! `cargo xtask test`: the whole test suite, with everything it needs installed first.

use anyhow::{Result, bail};
use std::process::Command;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Skip the interop checks against Linux rxe (`cargo xtask interop` and a small
    /// `cargo xtask bench --peer rxe`: a VM booted under emulation; about a minute, more on
    /// the first run, which builds its image from Debian packages).
    #[arg(long)]
    no_interop: bool,
    /// Extra arguments passed to `cargo test` (after `--workspace`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    cargo_args: Vec<String>,
}

pub(crate) fn run(args: &Args) -> Result<()> {
    crate::deps::ensure(crate::deps::ALL)?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(&cargo);
    if !args.no_interop {
        // tests/tests/interop_rxe.rs runs `cargo xtask interop` when asked to, and
        // xtask/tests/bench_rxe.rs `cargo xtask bench --peer rxe`.
        cmd.env("XROCE_INTEROP", "1");
    }
    let status = cmd
        .args(["test", "--workspace"])
        .args(&args.cargo_args)
        // Tests that need root and network namespaces fail instead of skipping when run
        // through `cargo xtask test`: a skipped end-to-end test must never look like a pass.
        .env("XROCE_REQUIRE_NETNS", "1")
        .status()?;
    if !status.success() {
        bail!("cargo test failed ({status})");
    }
    Ok(())
}
