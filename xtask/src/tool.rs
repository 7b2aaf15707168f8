//! Running a tool: `cargo run -p PACKAGE -- ARGS` after installing what it needs, with the
//! tool's exit status as ours.

use std::process::Command;

use anyhow::{Context, Result};

use crate::deps::{self, Need};

/// The profile a tool runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Profile {
    /// Orchestration (labs, VMs, captures): a debug build, shared with the tests' build.
    Debug,
    /// Tools whose own threads move the data (the demo, the bench): optimized.
    Release,
}

/// Installs `needs`, then runs the binary of `package` (named like the package) with
/// `args`, and exits with its status when it fails.
pub(crate) fn run(package: &str, profile: Profile, needs: &[Need], args: &[String]) -> Result<()> {
    deps::ensure(needs)?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.args(["run", "-p", package, "--bin", package]);
    if profile == Profile::Release {
        cmd.arg("--release");
    }
    let status = cmd
        .arg("--")
        .args(args)
        .status()
        .with_context(|| format!("running {cargo} run -p {package}"))?;
    if !status.success() {
        // The tool said why; its status is ours (a usage error stays a usage error).
        std::process::exit(status.code().unwrap_or(1));
    }
    Ok(())
}
