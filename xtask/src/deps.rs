//! The Debian packages the project needs, grouped by what needs them, installed with
//! `apt-get` when missing.
//!
//! A new machine has the Rust toolchain, gcc, make, git, python3, iproute2, llvm,
//! pkg-config and zlib1g-dev. Everything else comes from Debian's archive here, so each
//! command of `cargo xtask` works as the first command run on such a machine.

use std::process::Command;

use anyhow::{Context, Result, bail};

/// What needs packages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Building the daemon: the XDP program and the AF_XDP libraries.
    Build,
    /// Labs of network namespaces and looking at their traffic.
    Lab,
    /// Unmodified verbs and rdma_cm programs and rdma-core's test suite on the drop-in
    /// libraries, and the C headers their layouts are checked against.
    VerbsTools,
    /// The Linux rxe peer of the interop checks, booted in a VM.
    Interop,
    /// UCX and Open MPI run on the drop-in libraries, with what builds the MPI check and
    /// UCX's client-server example.
    Ucx,
}

impl Need {
    /// Every need: what `cargo xtask deps` and `cargo xtask test` install.
    pub(crate) const ALL: &'static [Need] = &[
        Need::Build,
        Need::Lab,
        Need::VerbsTools,
        Need::Interop,
        Need::Ucx,
    ];

    fn packages(self) -> &'static [&'static str] {
        match self {
            // clang -target bpf compiles the XDP program (llvm for its tools); libbpf-sys
            // builds libbpf (libelf, zlib, pkg-config, m4) and libxdp-sys builds libxdp
            // (libpcap), both for xsk-rs's AF_XDP sockets; gcc-multilib's <asm/…> headers
            // for the BPF objects libxdp compiles.
            Need::Build => &[
                "clang",
                "llvm",
                "libelf-dev",
                "zlib1g-dev",
                "libpcap-dev",
                "pkg-config",
                "m4",
                "make",
                "gcc-multilib",
            ],
            // setpriv and capsh run tests as ordinary users and the daemon as its service
            // starts it.
            Need::Lab => &[
                "iproute2",
                "ethtool",
                "iputils-ping",
                "tcpdump",
                "util-linux",
                "libcap2-bin",
            ],
            Need::VerbsTools => &[
                "libibverbs-dev",
                "ibverbs-utils",
                "ibverbs-providers",
                "perftest",
                "python3-pyverbs",
                "librdmacm1",
                "librdmacm-dev",
                "rdmacm-utils",
                "qperf",
                "fio",
                "libfabric-bin",
            ],
            Need::Interop => &["qemu-system-x86"],
            Need::Ucx => &["ucx-utils", "libucx-dev", "openmpi-bin", "libopenmpi-dev"],
        }
    }

    fn why(self) -> &'static str {
        match self {
            Need::Build => "to build the XDP program and the AF_XDP libraries",
            Need::Lab => "for the labs of network namespaces",
            Need::VerbsTools => "for the verbs and rdma_cm programs run on the drop-in libraries",
            Need::Interop => "for the Linux rxe peer in a VM",
            Need::Ucx => "for UCX and Open MPI on xroce",
        }
    }
}

fn installed(pkg: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", pkg])
        .output()
        .is_ok_and(|o| {
            o.status.success()
                && String::from_utf8_lossy(&o.stdout).contains("install ok installed")
        })
}

/// Installs every package of `needs` that is not installed yet, saying what and why.
pub(crate) fn ensure(needs: &[Need]) -> Result<()> {
    let mut missing: Vec<&str> = Vec::new();
    let mut reasons: Vec<String> = Vec::new();
    for need in needs {
        let absent: Vec<&str> = need
            .packages()
            .iter()
            .copied()
            .filter(|p| !installed(p) && !missing.contains(p))
            .collect();
        if !absent.is_empty() {
            reasons.push(format!("{} {}", absent.join(" "), need.why()));
            missing.extend(absent);
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let list = missing.join(" ");
    if !is_root() {
        bail!(
            "missing Debian packages: {list}\n  install them as root: apt-get install -y {list}\n  \
             (or run `cargo xtask deps` as root)"
        );
    }
    eprintln!("xtask: installing Debian packages:");
    for r in &reasons {
        eprintln!("  {r}");
    }
    let update = Command::new("apt-get")
        .args(["update", "-qq"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .context("running apt-get update")?;
    if !update.success() {
        bail!(
            "apt-get update failed ({update}): check /etc/apt/sources.list.d and the network, \
             then run `cargo xtask deps` again"
        );
    }
    // dpkg's lines of every file it unpacks are kept for a failure.
    let install = Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()
        .context("running apt-get install")?;
    if !install.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&install.stdout));
        eprintln!("{}", String::from_utf8_lossy(&install.stderr));
        bail!(
            "apt-get install {list} failed ({}); apt-get's message is above. Once it is \
             fixed, run `cargo xtask deps` again",
            install.status
        );
    }
    eprintln!("xtask: installed {list}");
    Ok(())
}

/// `true` when running as root, read from `/proc` so that xtask needs no C library binding.
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            == Some("0")
    })
}
