//! `cargo xtask interop`: xroce against Linux Soft-RoCE (rxe), over a real wire.
//!
//! Builds (once, then cached under `target/xroce/interop/`) a bootable image of Debian's
//! stock kernel with `rdma_rxe` and rdma-core's tools, from Debian packages alone
//! ([`image`]). Then, in a lab of two network namespaces ([`xroce_lab::Lab`]):
//!
//! ```text
//!   namespace a (xroce host)            namespace b (the wire)
//!   xroced --interface xr-a  ==veth==  xr-b ── bridge xr-br ── tap xr-tap ── qemu: eth0 + rxe0
//!   10.77.0.1                                                                 10.77.0.2
//! ```
//!
//! the VM boots ([`vm`]) and `xroced` serves `xr-a` (native XDP on the veth, AF_XDP copy
//! mode). The checks run the unmodified Debian programs in the VM against xroce in both
//! directions: `ibv_rc_pingpong`, `ibv_uc_pingpong` and `ibv_ud_pingpong` against
//! `xroce-pingpong`; and, once the drop-in `libibverbs.so.1` can run them, the Debian
//! `ibv_rc_pingpong`, `ib_send_bw`, `ib_write_bw`, `ib_read_bw`, `ib_atomic_bw` and the
//! three latency tests on the xroce side too ([`checks`]). Everything crossing the tap is
//! captured and every RoCEv2 packet's ICRC is checked ([`harness`]).
//!
//! `cargo xtask bench --peer rxe` runs perftest across the same lab: [`prepare`],
//! [`Harness::start`] and [`Harness::run_exchange`] are shared.
//!
//! Everything is torn down on every exit path, Ctrl-C included (deleting the lab's
//! namespaces kills what runs in them, qemu too). The run's logs stay in
//! `target/xroce/interop/runs/<pid>/`.

mod checks;
mod cpio;
mod elf;
mod harness;
mod image;
mod process;
mod vm;

use std::fs;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

pub(crate) use checks::Side;
use checks::{Check, Outcome, checks, print_table};
pub(crate) use harness::{Exchange, Handshake, Harness, Options, RXE_RETRY_NOTE, anomalies};

/// The guest's `/init`.
const INIT: &str = include_str!("../../interop/init.sh");

/// The device name of the daemon.
pub(crate) const DEVICE: &str = "xroce0";
/// The xroce host's address (the lab's host `a`).
const XROCE_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// The VM's address (the lab's host `b` gives its address up to the VM).
pub(crate) const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
const PEER_MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x77, 0x00, 0x02];
const BRIDGE: &str = "xr-br";
const TAP: &str = "xr-tap";
/// xroce's GID table starts with its IPv4 addresses.
pub(crate) const XROCE_GID_INDEX: u32 = 0;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Keep the lab up after the checks: read shell commands from stdin and run them in the
    /// VM, until end of input or Ctrl-C.
    #[arg(long)]
    keep: bool,
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
    let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().unwrap_or(xtask).to_path_buf()
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

/// What a run against the rxe peer needs, built and checked: the peer's image, `xroced`
/// and `xroce-pingpong`, the drop-in library, and a fresh run directory for the logs.
pub(crate) struct Prepared {
    pub(crate) image: image::Image,
    pub(crate) bins: (PathBuf, PathBuf),
    pub(crate) run_dir: PathBuf,
}

/// Everything before the lab: root, the Ctrl-C handler (first, before any thread exists:
/// Ctrl-C and SIGTERM then tear the lab down), stale labs removed, the Debian packages,
/// the image, the binaries (`release` or debug) and the drop-in library. `what` names the
/// command in the error when not root.
pub(crate) fn prepare(what: &str, release: bool, rebuild_image: bool) -> Result<Prepared> {
    if !xroce_lab::require_root(what) {
        bail!("{what} needs root (network namespaces, XDP, qemu's tap)");
    }
    xroce_lab::signals::install().context("installing the Ctrl-C handler")?;
    let _ = xroce_lab::cleanup_stale();
    crate::deps::ensure(&[
        "qemu-system-x86",
        "tcpdump",
        "iproute2",
        "ibverbs-utils",
        "perftest",
    ])?;
    let cache = target_dir().join("xroce/interop");
    let image = image::ensure(&cache, rebuild_image)?;
    let bins = build_binaries(release)?;
    // Debian's programs run on the library as this checkout builds it.
    crate::build::install().context("building the drop-in libibverbs (cargo xtask build)")?;
    let run_dir = cache.join("runs").join(std::process::id().to_string());
    let _ = fs::remove_dir_all(&run_dir);
    fs::create_dir_all(&run_dir)?;
    cleanup_old_runs(&cache.join("runs"));
    Ok(Prepared {
        image,
        bins,
        run_dir,
    })
}

pub(crate) fn run(args: &Args) -> Result<()> {
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
    let Prepared {
        image: img,
        bins,
        run_dir,
    } = prepare("cargo xtask interop", args.release, args.rebuild_image)?;
    let logs = run_dir.join("checks");
    fs::create_dir_all(&logs)?;

    let options = Options::default();
    let (mut h, boot) = Harness::start(&run_dir, &img, &bins, &options)?;
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
    let counters = h.counters();

    println!();
    println!("xroce against Linux rxe: {}", peer_description(&img));
    println!(
        "VM boot {boot:.1} s; xroce {XROCE_IP} ({DEVICE}), rxe {PEER_IP} (rxe0); logs in {}",
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

/// The rxe peer in one line: its kernel, how qemu runs it, and the versions of the Debian
/// programs and libraries on it.
pub(crate) fn peer_description(img: &image::Image) -> String {
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
        "kernel {} ({}), {}",
        img.release,
        accel,
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
