//! `cargo xtask test`: the whole test suite, with everything it needs installed first.

use anyhow::{Result, bail};
use std::process::Command;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Extra arguments passed to `cargo test` (after `--workspace`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    cargo_args: Vec<String>,
}

pub(crate) fn run(args: &Args) -> Result<()> {
    crate::deps::ensure(crate::deps::ALL)?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
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
