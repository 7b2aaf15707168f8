//! `xroce-ucx` (run as `cargo xtask ucx`): UCX and Open MPI between two xroce hosts.
//!
//! UCX is the layer under Open MPI, MPICH, OpenSHMEM and many data-movement libraries; its
//! IB component (`libuct_ib`) drives any verbs device, so with the drop-in
//! `libibverbs.so.1` first on `LD_LIBRARY_PATH` it drives xroce's. This tool builds the
//! drop-in library and a release `xroced`, brings up a two-namespace lab with a daemon on
//! each host, and runs, with Debian's UCX 1.13 and Open MPI 4.1:
//!
//! - `ucx_info -d` on host `a`: xroce's device must offer `rc_verbs` and `ud_verbs`;
//! - `ucx_perftest` between the hosts over each transport ([`perftest::CASES`]), with
//!   perftest's `ib_write_bw` and `ib_send_lat` on the same lab as the yardstick; the
//!   figures are printed with their ratios, never judged;
//! - Open MPI jobs with `--mca pml ucx` across the hosts ([`mpi::JOBS`]: 2 and 4 ranks),
//!   each checking the results of an allreduce, a ping-pong and an all-to-all, and
//!   showing what UCX selected;
//! - UCX's client-server example, whose endpoint UCX connects by socket address through
//!   its rdma_cm connection manager and the drop-in `librdmacm.so.1` ([`sockaddr`]).
//!
//! It prints a table and exits non-zero when a run failed. `--only perftest|mpi|sockaddr`
//! runs a part; `--report FILE` writes every outcome (tab-separated), which
//! `tests/tests/ibverbs/ucx_mpi.rs` checks. Logs stay in `target/xroce/ucx/`.

mod mpi;
mod perftest;
mod process;
mod sockaddr;

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use xroce_lab::daemons::TwoHosts;
use xroce_lab::{LabConfig, Side};

/// The device the daemons serve.
const DEVICE: &str = xroce_lab::daemons::DEVICE;
/// The TCP ports of the programs' out-of-band exchange: this plus the run's number.
const PORT_BASE: u16 = 20_000;
/// The transports UCX must offer on xroce's device.
const TRANSPORTS: &[&str] = &["rc_verbs", "ud_verbs"];

#[derive(Debug, clap::Parser)]
#[command(
    name = "cargo xtask ucx",
    about = "UCX (ucx_perftest over rc_verbs and ud_verbs) and Open MPI with pml ucx between two xroce hosts"
)]
struct Args {
    /// Only these parts: `perftest` (ucx_info and ucx_perftest), `mpi`, `sockaddr`
    /// (repeatable).
    #[arg(long, value_parser = ["perftest", "mpi", "sockaddr"])]
    only: Vec<String>,
    /// Iterations of the bandwidth tests.
    #[arg(long, default_value_t = 2000)]
    bw_iters: u32,
    /// Round trips of the latency tests.
    #[arg(long, default_value_t = 10000)]
    lat_iters: u32,
    /// The longest one program may run, in seconds.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// Also write every outcome to FILE (tab-separated).
    #[arg(long)]
    report: Option<std::path::PathBuf>,
}

fn main() {
    let args = <Args as clap::Parser>::parse();
    if let Err(e) = run(&args) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<()> {
    // First, before any thread exists: Ctrl-C and SIGTERM tear the lab down.
    xroce_lab::signals::install().context("installing the Ctrl-C handler")?;
    let _ = xroce_lab::cleanup_stale();
    if !xroce_lab::is_root() {
        bail!("cargo xtask ucx needs root (network namespaces, XDP, AF_XDP)");
    }
    xroce_lab::require_packages(&[
        "ucx-utils",
        "openmpi-bin",
        "libopenmpi-dev",
        "libucx-dev",
        "perftest",
        "iproute2",
    ])?;
    let part = |p: &str| args.only.is_empty() || args.only.iter().any(|o| o == p);

    eprintln!("ucx: building xroced and the drop-in libraries (release)");
    let xroced = xroce_lab::daemons::xroced_release().context("building xroced")?;
    let (lib, _) = xroce_artifacts::install_drop_in()?;
    let work = lib
        .parent()
        .context("the library directory has no parent")?
        .join("ucx");
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let prepared = if part("mpi") {
        Some(mpi::prepare(&work)?)
    } else {
        None
    };
    let example = if part("sockaddr") {
        Some(sockaddr::prepare(&work)?)
    } else {
        None
    };
    let hosts = TwoHosts::start_with(&xroced, &LabConfig::default(), &[])
        .context("starting a lab with a daemon on each host")?;
    let lab = &hosts.lab;
    eprintln!(
        "ucx: lab {} ({}) and {} ({}), {DEVICE} on each; logs in {}",
        lab.host(Side::A).netns,
        lab.host(Side::A).ipv4,
        lab.host(Side::B).netns,
        lab.host(Side::B).ipv4,
        work.display()
    );
    let limits = perftest::Limits {
        bw_iters: args.bw_iters.max(1),
        lat_iters: args.lat_iters.max(1),
        timeout: Duration::from_secs(args.timeout.max(1)),
    };
    let mut report = String::new();
    let mut failures = 0usize;

    if part("perftest") {
        let offered = ucx_info(lab, &lib)?;
        println!("ucx_info -d on {}:", lab.host(Side::A).netns);
        for (transport, device) in &offered {
            println!("  {transport:<10} {device}");
            let _ = writeln!(report, "ucx_info\t{transport}\t{device}");
        }
        let device = format!("{DEVICE}:1");
        for t in TRANSPORTS {
            if !offered.iter().any(|(tl, d)| tl == t && *d == device) {
                failures += 1;
                println!("  missing: {t} on {device}");
            }
        }
        println!();
        let mut outcomes = Vec::new();
        for (n, case) in perftest::CASES.iter().enumerate() {
            if xroce_lab::signals::interrupted() {
                bail!("interrupted");
            }
            eprintln!("ucx: ucx_perftest -t {} over {}", case.test, case.transport);
            outcomes.push(perftest::run(lab, &lib, &work, case, &limits, n as u16));
        }
        let base = perftest::CASES.len() as u16;
        let write_bw = perftest::yardstick(lab, &lib, &work, "ib_write_bw", 65536, &limits, base);
        let send_lat = perftest::yardstick(lab, &lib, &work, "ib_send_lat", 8, &limits, base + 1);
        failures += print_perftest(&outcomes, &[&write_bw, &send_lat], &mut report);
    }

    if let Some(prepared) = &prepared {
        for job in mpi::JOBS {
            if xroce_lab::signals::interrupted() {
                bail!("interrupted");
            }
            eprintln!("ucx: mpirun, {}", job.name);
            let outcome = mpi::run(lab, &lib, &work, prepared, job, limits.timeout);
            failures += usize::from(outcome.result.is_err());
            print_mpi(&outcome, &mut report);
        }
    }

    if let Some(example) = &example {
        eprintln!("ucx: ucp_client_server, connected by socket address");
        let outcome = sockaddr::run(lab, &lib, &work, example, limits.timeout);
        println!("UCX's ucp_client_server, connected by socket address (tag, 10 x 4096 B):");
        match &outcome.result {
            Ok(managers) => {
                println!("  ok, connection manager: {}", managers.join(", "));
                let _ = writeln!(report, "sockaddr\tok\t{}", managers.join(","));
            }
            Err(e) => {
                failures += 1;
                println!("  FAILED: {e}");
                let _ = writeln!(report, "sockaddr\tfailed\t{e}");
            }
        }
    }

    if let Some(path) = &args.report {
        std::fs::write(path, &report).with_context(|| format!("writing {}", path.display()))?;
    }
    drop(hosts);
    if failures > 0 {
        bail!("{failures} checks failed (logs in {})", work.display());
    }
    Ok(())
}

/// The transports and devices `ucx_info -d` lists in host `a`'s namespace.
fn ucx_info(lab: &xroce_lab::Lab, lib: &Path) -> Result<Vec<(String, String)>> {
    let out = lab
        .command(Side::A, &["ucx_info", "-d"])
        .env("LD_LIBRARY_PATH", lib)
        .output()
        .context("running ucx_info -d")?;
    if !out.status.success() {
        bail!(
            "ucx_info -d failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(transports(&String::from_utf8_lossy(&out.stdout)))
}

/// `(transport, device)` of every `#      Transport: X` / `#         Device: Y` pair.
fn transports(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut transport: Option<String> = None;
    for line in text.lines() {
        let line = line.trim_start_matches('#').trim();
        if let Some(t) = line.strip_prefix("Transport:") {
            transport = Some(t.trim().to_owned());
        } else if let Some(d) = line.strip_prefix("Device:")
            && let Some(t) = transport.take()
        {
            out.push((t, d.trim().to_owned()));
        }
    }
    out
}

fn print_perftest(
    outcomes: &[perftest::Outcome],
    yardsticks: &[&perftest::Yardstick],
    report: &mut String,
) -> usize {
    let mut failures = 0;
    println!(
        "{:<9} {:<12} {:>7}  {:>12} {:>12} {:>12} {:>12}",
        "transport", "test", "bytes", "median µs", "average µs", "MiB/s", "msg/s"
    );
    for o in outcomes {
        let c = &o.case;
        match &o.result {
            Ok(m) => {
                let (median, average) = if c.latency() {
                    (
                        format!("{:.2}", m.median_us),
                        format!("{:.2}", m.average_us),
                    )
                } else {
                    ("-".into(), "-".into())
                };
                println!(
                    "{:<9} {:<12} {:>7}  {median:>12} {average:>12} {:>12.1} {:>12.0}",
                    c.transport, c.test, c.size, m.mib_per_sec, m.msgs_per_sec
                );
                let _ = writeln!(
                    report,
                    "perftest\t{}\t{}\t{}\tok\tmedian_us={:.3} average_us={:.3} mib_per_sec={:.2} msgs_per_sec={:.0}\t{}",
                    c.transport,
                    c.test,
                    c.size,
                    m.median_us,
                    m.average_us,
                    m.mib_per_sec,
                    m.msgs_per_sec,
                    m.selected.join("; ")
                );
            }
            Err(e) => {
                failures += 1;
                println!(
                    "{:<9} {:<12} {:>7}  FAILED: {e}",
                    c.transport, c.test, c.size
                );
                let _ = writeln!(
                    report,
                    "perftest\t{}\t{}\t{}\tfailed\t{e}\t",
                    c.transport, c.test, c.size
                );
            }
        }
    }
    let selected: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.case.uct)
        .filter_map(|o| {
            let m = o.result.as_ref().ok()?;
            Some(format!(
                "  {} over {}: {}",
                o.case.test,
                o.case.transport,
                m.selected.join("; ")
            ))
        })
        .collect();
    if !selected.is_empty() {
        println!("UCX selected (UCP tests, client side):");
        println!("{}", selected.join("\n"));
    }
    println!();
    println!("perftest on the same lab (drop-in libibverbs.so.1):");
    for y in yardsticks {
        match &y.result {
            Ok(v) => {
                let unit = if y.program.ends_with("_lat") {
                    "µs median"
                } else {
                    "MiB/s"
                };
                println!("  {:<12} {:>7} B  {v:.2} {unit}", y.program, y.size);
                let _ = writeln!(report, "yardstick\t{}\t{}\tok\t{v:.3}", y.program, y.size);
            }
            Err(e) => {
                println!("  {:<12} {:>7} B  FAILED: {e}", y.program, y.size);
                let _ = writeln!(report, "yardstick\t{}\t{}\tfailed\t{e}", y.program, y.size);
            }
        }
    }
    let find = |transport: &str, test: &str| {
        outcomes
            .iter()
            .find(|o| o.case.transport == transport && o.case.test == test)
            .and_then(|o| o.result.as_ref().ok())
    };
    let ratio = |name: &str, ours: Option<f64>, theirs: &perftest::Yardstick, target: &str| {
        if let (Some(ours), Ok(theirs)) = (ours, &theirs.result) {
            println!(
                "  {name}: {ours:.2} / {theirs:.2} = {:.2} (target {target})",
                ours / theirs
            );
        }
    };
    println!("ratios (reported, not judged; run on a quiet machine):");
    ratio(
        "rc_verbs put_bw 64 KiB / ib_write_bw 64 KiB",
        find("rc_verbs", "put_bw").map(|m| m.mib_per_sec),
        yardsticks[0],
        ">= 0.80",
    );
    ratio(
        "rc_verbs tag_bw 64 KiB / ib_write_bw 64 KiB",
        find("rc_verbs", "tag_bw").map(|m| m.mib_per_sec),
        yardsticks[0],
        ">= 0.80",
    );
    ratio(
        "rc_verbs tag_lat 8 B / ib_send_lat 8 B (medians)",
        find("rc_verbs", "tag_lat").map(|m| m.median_us),
        yardsticks[1],
        "<= 1.5",
    );
    println!();
    failures
}

fn print_mpi(o: &mpi::Outcome, report: &mut String) {
    println!("Open MPI, pml ucx, {}:", o.job.name);
    match &o.result {
        Ok(lines) => {
            for l in lines {
                println!("  {l}");
            }
        }
        Err(e) => println!("  FAILED: {e}"),
    }
    if !o.selected.is_empty() {
        println!("  UCX selected: {}", o.selected.join("; "));
    }
    let (status, detail) = match &o.result {
        Ok(lines) => ("ok", lines.join(" / ")),
        Err(e) => ("failed", e.clone()),
    };
    let _ = writeln!(
        report,
        "mpi\t{}\t{status}\t{detail}\t{}",
        o.job.name,
        o.selected.join("; ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transports_pair_with_their_devices() {
        let text = "#      Transport: tcp\n#         Device: xr-a\n#           Type: network\n\
                    # Memory domain: xroce0\n#      Transport: rc_verbs\n#         Device: xroce0:1\n\
                    #      Transport: ud_verbs\n#         Device: xroce0:1\n";
        assert_eq!(
            transports(text),
            [
                ("tcp".to_owned(), "xr-a".to_owned()),
                ("rc_verbs".to_owned(), "xroce0:1".to_owned()),
                ("ud_verbs".to_owned(), "xroce0:1".to_owned()),
            ]
        );
    }
}
