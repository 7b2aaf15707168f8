//! `cargo xtask build`: builds the drop-in `libibverbs.so.1` (release) and installs it
//! under `target/xroce/lib/`, with the `libibverbs.so` development symlink.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The soname the dynamic loader looks for.
const SONAME: &str = "libibverbs.so.1";

#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: &Args) -> Result<()> {
    let (lib, installed) = install()?;
    let link = lib.join("libibverbs.so");
    println!("built {}", installed.display());
    println!("  (and {} -> {SONAME})", link.display());
    println!();
    println!("Run unmodified verbs programs on it:");
    println!("  LD_LIBRARY_PATH={} ibv_devices", lib.display());
    println!("  LD_PRELOAD={} ib_write_bw …", installed.display());
    Ok(())
}

/// Builds the library (release) and installs it in `<target>/xroce/lib`; returns that
/// directory and the installed file.
pub(crate) fn install() -> Result<(PathBuf, PathBuf)> {
    let artifact = build_release()?;
    // `<target>/release/libibverbs.so` → `<target>`.
    let target = artifact
        .parent()
        .and_then(Path::parent)
        .with_context(|| format!("unexpected artifact path {}", artifact.display()))?;
    let lib = target.join("xroce").join("lib");
    std::fs::create_dir_all(&lib).with_context(|| format!("creating {}", lib.display()))?;

    // Copy then rename: a process that has the old library mapped keeps its inode intact.
    let installed = lib.join(SONAME);
    let staging = lib.join(format!("{SONAME}.new"));
    std::fs::copy(&artifact, &staging)
        .with_context(|| format!("copying {} to {}", artifact.display(), staging.display()))?;
    std::fs::rename(&staging, &installed)
        .with_context(|| format!("installing {}", installed.display()))?;
    let link = lib.join("libibverbs.so");
    match std::fs::remove_file(&link) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("removing {}", link.display())),
    }
    std::os::unix::fs::symlink(SONAME, &link)
        .with_context(|| format!("creating {}", link.display()))?;
    Ok((lib, installed))
}

/// Runs `cargo build --release -p xroce-ibverbs` and returns the path cargo reports for
/// the cdylib.
fn build_release() -> Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(&cargo)
        .args(["build", "--release", "-p", "xroce-ibverbs", "--lib"])
        .args(["--message-format=json-render-diagnostics"])
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running cargo build")?;
    if !output.status.success() {
        bail!(
            "cargo build --release -p xroce-ibverbs failed ({})",
            output.status
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    // One JSON object per line; the artifact line of the `ibverbs` lib lists its files.
    let line = stdout
        .lines()
        .find(|l| {
            l.contains("\"reason\":\"compiler-artifact\"")
                && l.contains("\"name\":\"ibverbs\"")
                && l.contains("libibverbs.so\"")
        })
        .context("cargo did not report the libibverbs.so artifact")?;
    let end = line
        .find("libibverbs.so\"")
        .map(|i| i + "libibverbs.so".len());
    let start = end.and_then(|end| line[..end].rfind('"').map(|s| (s + 1, end)));
    let (start, end) = start.context("no file name in cargo's artifact report")?;
    Ok(PathBuf::from(&line[start..end]))
}
