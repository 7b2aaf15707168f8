//! `cargo xtask interop`: xroce against Linux Soft-RoCE (rxe), over a real wire.
//!
//! The peer ([`peer`]) is this host's own rxe when its kernel has `rdma_rxe` and rxe works
//! in a network namespace ([`local`]): a device over the far end of the lab's veth, in the
//! lab's second namespace, and this host's Debian programs run there:
//!
//! ```text
//!   namespace a (xroce host)            namespace b (the peer)
//!   xroced --interface xr-a  ==veth==  xr-b + rxe device xrxe<pid>n<n>
//!   10.77.0.1                          10.77.0.2
//! ```
//!
//! Otherwise (`--peer-kind auto` logs why; `--peer-kind vm` asks for it) the peer is a VM:
//! the command builds (once, then cached under `target/xroce/interop/`) a bootable image of
//! Debian's stock kernel with `rdma_rxe` and rdma-core's tools, from Debian packages alone
//! ([`image`]). Then, in a lab of two network namespaces ([`xroce_lab::Lab`]):
//!
//! ```text
//!   namespace a (xroce host)            namespace b (the wire)
//!   xroced --interface xr-a  ==veth==  xr-b ── bridge xr-br ── tap xr-tap ── qemu: eth0 + rxe0
//!   10.77.0.1                                                                 10.77.0.2
//! ```
//!
//! the VM boots ([`vm`]) and `xroced` serves `xr-a` (native XDP on the veth, AF_XDP copy
//! mode). The checks run the unmodified Debian programs on the peer against xroce in both
//! directions: `ibv_rc_pingpong`, `ibv_uc_pingpong` and `ibv_ud_pingpong` against
//! `xroce-pingpong`; and, once the drop-in `libibverbs.so.1` can run them, the Debian
//! `ibv_rc_pingpong`, `ib_send_bw`, `ib_write_bw`, `ib_read_bw`, `ib_atomic_bw` and the
//! three latency tests on the xroce side too; and the programs that connect through
//! rdma_cm (`rping`, `ucmatose`, `udaddy`, `rdma_server`/`rdma_client`, perftest's `-R`
//! variants, SIDR for UD, `mckey` for multicast, a reject) on the drop-in `librdmacm.so.1` ([`checks`]). Everything
//! crossing the wire (the tap, or `xr-b`) is captured, every RoCEv2 packet's ICRC is checked
//! ([`harness`]), and the connection manager's MADs xroce sent are compared with rxe's
//! ([`mads`]).
//!
//! Underneath: `process` (the processes run in the lab's namespaces, their output in
//! files, killed when dropped), `elf` (the shared libraries a program needs and a kernel
//! module's `.modinfo`, for the image) and `cpio` (the image's initramfs archive).
//!
//! This crate never touches anything outside the lab's namespaces and the files under
//! `target/xroce/interop/`, and never asserts a time or a throughput.
//!
//! `cargo xtask bench --peer rxe` runs perftest across the same lab: [`prepare`],
//! [`Harness::start`] and [`Harness::run_exchange`] are shared.
//!
//! Everything is torn down on every exit path, Ctrl-C included (deleting the lab's
//! namespaces kills what runs in them, qemu too, and takes a local rxe device with its
//! veth). The run's logs stay in
//! `target/xroce/interop/runs/<pid>/`.

mod checks;
mod cpio;
mod elf;
mod harness;
mod image;
mod local;
mod mads;
mod peer;
mod process;
mod vm;

use std::fs;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

pub use checks::Side;
use checks::{Check, Outcome, checks, print_table};
pub use harness::{Exchange, Exchanged, Handshake, Harness, Options, RXE_RETRY_NOTE, anomalies};
pub use peer::PeerKind;
use peer::{Choice, choose};
pub use vm::Finished;

/// The guest's `/init`.
const INIT: &str = include_str!("../init.sh");

/// The device name of the daemon.
pub const DEVICE: &str = "xroce0";
/// The xroce host's address (the lab's host `a`).
const XROCE_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// The VM's address (the lab's host `b` gives its address up to the VM).
pub const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
const PEER_MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x77, 0x00, 0x02];
const BRIDGE: &str = "xr-br";
const TAP: &str = "xr-tap";
/// xroce's GID table starts with its IPv4 addresses.
pub const XROCE_GID_INDEX: u32 = 0;
/// Then come its global IPv6 addresses: the lab's host `a` has one IPv4 address, so its
/// IPv6 one (fd00:77::1) is GID 1.
pub const XROCE_IPV6_GID_INDEX: u32 = 1;
/// And then its link-local address.
pub const XROCE_LINK_LOCAL_GID_INDEX: u32 = 2;
/// The peer's global IPv6 address (the VM's `/init` gives it to eth0; the lab's host `b`
/// has it for a local peer).
const PEER_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 2);

#[derive(Debug, clap::Parser)]
#[command(
    name = "cargo xtask interop",
    about = "xroce against Linux rxe (this host's, or Debian's kernel in a VM), both directions"
)]
pub struct Args {
    /// Keep the lab up after the checks: read shell commands from stdin and run them on the
    /// peer, until end of input or Ctrl-C.
    #[arg(long)]
    keep: bool,
    /// The rxe peer: this host's own rxe in a namespace (`local`), a VM with Debian's
    /// kernel (`vm`), or the first when this kernel has rdma_rxe and the second otherwise
    /// (`auto`).
    #[arg(long, value_enum, default_value_t = PeerKind::Auto)]
    peer_kind: PeerKind,
    /// Also save the captured traffic (RoCEv2, the TCP exchanges, ARP) to this pcap file.
    #[arg(long, value_name = "FILE")]
    capture: Option<PathBuf>,
    /// Run only the checks whose name contains one of these words (comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// List the checks and exit.
    #[arg(long)]
    list: bool,
    /// Rebuild the VM image even if one is cached.
    #[arg(long)]
    rebuild_image: bool,
    /// Build xroced and xroce-pingpong in release mode.
    #[arg(long)]
    release: bool,
}

fn log(msg: &str) {
    eprintln!("[interop] {msg}");
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// Builds `xroced` and `xroce-pingpong` and returns their paths.
fn build_binaries(release: bool) -> Result<(PathBuf, PathBuf)> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--quiet",
        "-p",
        "xroce-engine",
        "--bin",
        "xroced",
        "-p",
        "xroce-pingpong",
        "--bin",
        "xroce-pingpong",
        "--message-format=json-render-diagnostics",
    ]);
    if release {
        cmd.arg("--release");
    }
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo build")?;
    if !out.status.success() {
        bail!("building xroced and xroce-pingpong failed ({})", out.status);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let find = |bin: &str| -> Result<PathBuf> {
        text.lines()
            .filter(|l| l.contains(&format!("\"name\":\"{bin}\"")))
            .find_map(|l| {
                let at = l.find("\"executable\":\"")? + "\"executable\":\"".len();
                let end = l[at..].find('"')?;
                Some(PathBuf::from(&l[at..at + end]))
            })
            .with_context(|| format!("cargo did not say where {bin} is"))
    };
    Ok((find("xroced")?, find("xroce-pingpong")?))
}

/// What a run against the rxe peer needs, built and checked: the choice of peer, the VM's
/// image (built when a VM is the peer), `xroced` and `xroce-pingpong`, the drop-in library,
/// and a fresh run directory for the logs.
pub struct Prepared {
    pub(crate) kind: PeerKind,
    pub(crate) choice: Choice,
    image: Option<image::Image>,
    cache: PathBuf,
    rebuild_image: bool,
    pub(crate) bins: (PathBuf, PathBuf),
    /// Where the run's logs go.
    pub run_dir: PathBuf,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("kind", &self.kind)
            .field("run_dir", &self.run_dir)
            .finish_non_exhaustive()
    }
}

impl Prepared {
    /// The VM's image, built now if it was not (a local peer that could not serve).
    pub(crate) fn image(&mut self) -> Result<&image::Image> {
        let image = match self.image.take() {
            Some(image) => image,
            None => image::ensure(&self.cache, self.rebuild_image)?,
        };
        Ok(self.image.insert(image))
    }
}

/// What the log says about the choice of peer.
fn choice_message(choice: &Choice) -> String {
    match choice {
        Choice::Local => "the peer is this host's rxe, in the lab's second namespace".into(),
        Choice::Vm {
            why_not_local: Some(why),
        } => format!("{why}: the peer is Debian's kernel in a VM"),
        Choice::Vm {
            why_not_local: None,
        } => "the peer is Debian's kernel in a VM (--peer-kind vm)".into(),
    }
}

/// Everything before the lab: root, the Ctrl-C handler (first, before any thread exists:
/// Ctrl-C and SIGTERM then tear the lab down), stale labs removed, the choice of peer
/// (`kind`), the Debian packages, the VM's image if a VM is the peer, the binaries
/// (`release` or debug) and the drop-in library. `what` names the command in the error
/// when not root.
pub fn prepare(what: &str, release: bool, rebuild_image: bool, kind: PeerKind) -> Result<Prepared> {
    if !xroce_lab::is_root() {
        bail!("{what} needs root (network namespaces, XDP, qemu's tap)");
    }
    xroce_lab::signals::install().context("installing the Ctrl-C handler")?;
    let _ = xroce_lab::cleanup_stale();
    // The xroce side's programs, and a local peer's (with rxe's provider).
    xroce_lab::require_packages(&[
        "tcpdump",
        "iproute2",
        "ibverbs-utils",
        "ibverbs-providers",
        "perftest",
    ])?;
    let choice = choose(kind, local::probe)
        .map_err(|why| anyhow::anyhow!("{why}: --peer-kind local needs this host's rdma_rxe"))?;
    log(&choice_message(&choice));
    let cache = target_dir().join("xroce/interop");
    let mut prepared = Prepared {
        kind,
        choice,
        image: None,
        cache: cache.clone(),
        rebuild_image,
        bins: (PathBuf::new(), PathBuf::new()),
        run_dir: cache.join("runs").join(std::process::id().to_string()),
    };
    // A local peer may still need the VM (auto falls back when rxe cannot serve a
    // namespace): qemu is needed either way, the image only when it is needed.
    if kind != PeerKind::Local {
        xroce_lab::require_packages(&["qemu-system-x86"])?;
    }
    if matches!(prepared.choice, Choice::Vm { .. }) {
        prepared.image()?;
    }
    prepared.bins = build_binaries(release)?;
    // Debian's programs run on the library as this checkout builds it.
    xroce_artifacts::install_drop_in()
        .context("building the drop-in libibverbs (cargo xtask build)")?;
    let _ = fs::remove_dir_all(&prepared.run_dir);
    fs::create_dir_all(&prepared.run_dir)?;
    cleanup_old_runs(&cache.join("runs"));
    Ok(prepared)
}

pub fn run(args: &Args) -> Result<()> {
    let selected: Vec<Check> = checks()
        .into_iter()
        .filter(|c| args.only.is_empty() || args.only.iter().any(|w| c.name().contains(w.as_str())))
        .collect();
    if args.list {
        for c in &selected {
            println!("{} (server: {})", c.name(), c.server.name());
        }
        return Ok(());
    }
    let total = Instant::now();
    let mut prepared = prepare(
        "cargo xtask interop",
        args.release,
        args.rebuild_image,
        args.peer_kind,
    )?;
    let run_dir = prepared.run_dir.clone();
    let logs = run_dir.join("checks");
    fs::create_dir_all(&logs)?;

    let options = Options::default();
    let (mut h, ready) = Harness::start(&mut prepared, &options)?;
    let mut rows = Vec::new();
    for c in &selected {
        if xroce_lab::signals::interrupted() {
            break;
        }
        log(&format!("{} (server: {})", c.name(), c.server.name()));
        let row = h.run_check(c, &logs);
        let died = h.daemon_check();
        if row.outcome == Outcome::Fail {
            log(&format!("  FAIL: {}", row.detail));
        }
        rows.push(row);
        if let Some(d) = died {
            log(&format!("  FAIL: xroced exited: {}", d.detail));
            rows.push(d);
        }
    }
    let traffic = rows.iter().any(|r| r.outcome != Outcome::Skip);
    rows.push(h.check_capture(args.capture.as_deref(), traffic));
    rows.push(h.check_cm_mads());
    let counters = h.counters();

    println!();
    println!("xroce against Linux rxe: {}", h.peer_description());
    println!(
        "peer ready in {ready:.1} s; xroce {XROCE_IP} ({DEVICE}), rxe {} ({}); logs in {}",
        h.peer_place(),
        h.peer_device(),
        run_dir.display()
    );
    println!();
    print_table(&rows);
    println!();
    print!("{counters}");
    let failed = rows.iter().filter(|r| r.outcome == Outcome::Fail).count();
    let skipped = rows.iter().filter(|r| r.outcome == Outcome::Skip).count();
    println!(
        "{} passed, {failed} failed, {skipped} skipped in {:.0} s",
        rows.len() - failed - skipped,
        total.elapsed().as_secs_f64()
    );
    if let Some(c) = &args.capture {
        println!(
            "capture: {} (cargo xtask pcap {})",
            c.display(),
            c.display()
        );
    }
    if args.keep {
        h.keep();
    }
    h.stop();
    drop(h);
    if failed > 0 {
        bail!(
            "{failed} interop check(s) failed (logs in {})",
            logs.display()
        );
    }
    Ok(())
}

/// The VM in one line: its kernel, how qemu runs it, and the versions of the Debian
/// programs and libraries on it.
fn vm_description(img: &image::Image) -> String {
    let (_, accel) = vm::accel();
    let versions: Vec<&str> = img
        .packages
        .iter()
        .map(String::as_str)
        .filter(|p| {
            p.starts_with("rdma-core")
                || p.starts_with("libibverbs1 ")
                || p.starts_with("perftest ")
                || p.starts_with("ibverbs-utils ")
        })
        .collect();
    format!(
        "Debian's kernel {} with rdma_rxe in qemu ({}), {}",
        img.release,
        accel,
        versions.join(", ")
    )
}

/// This host's rxe in one line: the kernel, the namespace mode, the versions of the Debian
/// programs and libraries that run on it.
pub(crate) fn local_description(rxe: &local::LocalRxe) -> String {
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let versions = Command::new("dpkg-query")
        .args(["-W", "-f=${Package} ${Version}\n"])
        .args([
            "libibverbs1",
            "ibverbs-providers",
            "ibverbs-utils",
            "perftest",
        ])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let versions: Vec<&str> = versions.lines().filter(|l| !l.trim().is_empty()).collect();
    format!(
        "this host's kernel {} (rdma_rxe, device {} in namespace {}, rdma netns mode {}), {}",
        kernel.trim(),
        rxe.device(),
        rxe.ns(),
        match rxe.mode() {
            local::NetnsMode::Shared => "shared",
            local::NetnsMode::Exclusive => "exclusive",
        },
        versions.join(", ")
    )
}

/// Keeps the logs of the last few runs only.
fn cleanup_old_runs(runs: &Path) {
    let Ok(rd) = fs::read_dir(runs) else {
        return;
    };
    let mut dirs: Vec<(std::time::SystemTime, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    dirs.sort();
    let keep = 5;
    if dirs.len() > keep {
        for (_, d) in &dirs[..dirs.len() - keep] {
            let _ = fs::remove_dir_all(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_says_why_the_peer_is_a_vm() {
        let auto = choose(PeerKind::Auto, || {
            Err(
                "this kernel has no rdma_rxe (modprobe rdma_rxe: FATAL: Module rdma_rxe not found)"
                    .into(),
            )
        })
        .unwrap();
        let message = choice_message(&auto);
        assert!(
            message.starts_with("this kernel has no rdma_rxe (modprobe rdma_rxe: FATAL"),
            "{message}"
        );
        assert!(
            message.ends_with("the peer is Debian's kernel in a VM"),
            "{message}"
        );
        let vm = choose(PeerKind::Vm, || unreachable!()).unwrap();
        assert!(choice_message(&vm).contains("--peer-kind vm"));
        let local = choose(PeerKind::Local, || Ok(())).unwrap();
        assert!(choice_message(&local).contains("this host's rxe"));
    }
}
