//! Debian packages the build and the tests need, installed with `apt-get` when missing.

use anyhow::{Context, Result, bail};
use std::process::Command;

/// Packages needed to build the workspace (XDP program, libbpf/libxdp for AF_XDP) and to
/// run its tests (network namespaces, packet capture, the verbs tools the drop-in
/// libibverbs.so.1 is loaded into, the verbs.h its layouts are checked against, rxe's
/// provider for an interop peer on this host's own rxe, and rdma-core's own test suite in
/// python3-pyverbs).
pub(crate) const ALL: &[&str] = &[
    "clang",
    "llvm",
    "libelf-dev",
    "zlib1g-dev",
    "pkg-config",
    "m4",
    "gcc-multilib",
    "iproute2",
    "ethtool",
    "tcpdump",
    "libibverbs-dev",
    "ibverbs-utils",
    "ibverbs-providers",
    "perftest",
    "iputils-ping",
    "python3-pyverbs",
];

fn installed(pkg: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", pkg])
        .output()
        .map(|o| {
            o.status.success()
                && String::from_utf8_lossy(&o.stdout).contains("install ok installed")
        })
        .unwrap_or(false)
}

/// Installs every package of `pkgs` that is not installed yet.
pub(crate) fn ensure(pkgs: &[&str]) -> Result<()> {
    let missing: Vec<&str> = pkgs.iter().copied().filter(|p| !installed(p)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .context("running `id -u`")?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        bail!(
            "missing Debian packages: {}\n  install them as root: apt-get install -y {}",
            missing.join(" "),
            missing.join(" ")
        );
    }
    eprintln!("xtask: installing {}", missing.join(" "));
    let update = Command::new("apt-get")
        .args(["update", "-qq"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .context("running apt-get update")?;
    if !update.success() {
        bail!("apt-get update failed ({update})");
    }
    let status = Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .context("running apt-get install")?;
    if !status.success() {
        bail!("apt-get install {} failed ({status})", missing.join(" "));
    }
    Ok(())
}
