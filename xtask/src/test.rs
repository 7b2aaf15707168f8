//! `cargo xtask test`: the whole test suite, every tier, with everything it needs installed
//! first.
//!
//! The tiers, marked one way (`#[ignore = "why"]`, so that `cargo test` alone lists every
//! test it does not run as `ignored`, with the reason, in its summary):
//!
//! - **unit**: not ignored. Needs nothing but the Rust toolchain: `cargo test -p
//!   xroce-transport` is the whole sans-IO suite, the loss simulation included.
//! - **root**: ignored, "needs root: …". Network namespaces, XDP, AF_XDP, daemons and the
//!   verbs programs on the drop-in library. Run as root.
//! - **interop**: ignored, and named `…against_linux_rxe…`. Linux rxe, booted in a VM
//!   (about a minute, plus building its image from Debian packages on a first run).
//!
//! `cargo xtask test` runs them all (`--include-ignored`); `--no-interop` skips the last.

use std::process::Command;

use anyhow::{Result, bail};

use crate::deps::{self, Need};

/// The word every interop-tier test has in its name.
const INTEROP_TIER: &str = "against_linux_rxe";

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Skip the interop tier: the tests against Linux rxe in a VM (names containing
    /// `against_linux_rxe`).
    #[arg(long)]
    no_interop: bool,
    /// Extra arguments for `cargo test` (after `--workspace`); arguments after a `--` go to
    /// the test binaries, after the tier selection.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    cargo_args: Vec<String>,
}

pub(crate) fn run(args: &Args) -> Result<()> {
    deps::ensure(Need::ALL)?;
    let (cargo_args, test_args) = match args.cargo_args.iter().position(|a| a == "--") {
        Some(i) => (&args.cargo_args[..i], &args.cargo_args[i + 1..]),
        None => (&args.cargo_args[..], &[][..]),
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.args(["test", "--workspace"])
        .args(cargo_args)
        .args(["--", "--include-ignored"]);
    if args.no_interop {
        cmd.args(["--skip", INTEROP_TIER]);
    }
    let status = cmd.args(test_args).status()?;
    let tiers = if args.no_interop {
        "unit and root tiers; interop tier skipped (--no-interop)"
    } else {
        "unit, root and interop tiers"
    };
    if !status.success() {
        bail!("cargo test failed ({status}) in the {tiers}; the failures are listed above");
    }
    eprintln!("cargo xtask test: passed ({tiers})");
    Ok(())
}
