//! `cargo xtask bench --peer rxe`: xroce against Linux Soft-RoCE, measured by perftest.
//!
//! The interop harness (`tools/interop`) builds the lab: Debian's kernel with `rdma_rxe`
//! in a VM on a bridge, or this host's own rxe in the lab's second namespace (`--peer-kind`),
//! and `xroced` on the veth into it. Every point is one run of Debian's unmodified perftest
//! on both ends: the server (`ib_write_bw`, `ib_read_bw`, `ib_send_bw`, `ib_write_lat`,
//! `ib_send_lat`, `ib_read_lat`) on the rxe device, the client in xroce's namespace on the
//! drop-in `libibverbs.so.1`. The client's result line becomes the point: perftest's
//! figures, never re-measured. The baselines are not run: they measure
//! this host's veth, while every figure here is bound by the peer (rxe, in qemu or on this
//! host's cores), so a ratio between them would say nothing about xroce.
//!
//! The harness stops everything it started on every exit path; Ctrl-C deletes the lab's
//! namespaces, and with them the VM (or the local rxe device), the daemon and perftest.

use std::fs;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};
use xroce_lab::LabConfig;

use super::progress::{Expect, Progress};
use super::report::{BwPoint, Failure, LatPoint, Placement, size_text};
use super::workload::{Op, frames};
use super::{Args, Plan, finish, new_report, setup_lines};
use xroce_interop::{self as interop, Exchange, Handshake, Harness, Side};

/// What perftest measures against rxe, in the order they run.
pub(super) const TESTS: [&str; 6] = [
    "write_bw",
    "read_bw",
    "send_bw",
    "write_lat",
    "send_lat",
    "read_lat",
];
/// Message sizes when `--sizes` is not given: the peer moves about 20 MB/s under emulation.
pub(super) const DEFAULT_SIZES: &str = "2,1K,4K,64K";
/// Messages per bandwidth point when `--iters` is not given.
pub(super) const DEFAULT_ITERS: u64 = 1000;
/// Round trips per latency point when `--lat-iters` is not given (perftest's default).
pub(super) const DEFAULT_LAT_ITERS: usize = 1000;
/// perftest's own CQ moderation, which it turns off for messages above 8 KiB unless `-Q`
/// asks for one: the bench passes `-Q` only for another value.
const PERFTEST_CQ_MOD: usize = 100;
/// perftest's path MTU when its header does not say (1500-byte Ethernet).
const PATH_MTU: usize = 1024;

/// The perftest program of a test, and its operation.
fn program(test: &str) -> Option<(&'static str, Op)> {
    Some(match test {
        "write_bw" => ("ib_write_bw", Op::Write),
        "read_bw" => ("ib_read_bw", Op::Read),
        "send_bw" => ("ib_send_bw", Op::Send),
        "write_lat" => ("ib_write_lat", Op::Write),
        "send_lat" => ("ib_send_lat", Op::Send),
        "read_lat" => ("ib_read_lat", Op::Read),
        _ => return None,
    })
}

fn is_latency(test: &str) -> bool {
    test.ends_with("_lat")
}

/// The options both ends of a point get (the device and GID index aside): perftest wants
/// the same message size and count on both.
fn options(test: &str, size: usize, plan: &Plan, args: &Args) -> Vec<String> {
    let mut o = vec!["-F".to_owned(), "-s".into(), size.to_string(), "-n".into()];
    if is_latency(test) {
        o.push(plan.lat_iters.to_string());
        return o;
    }
    o.push(plan.timing.iters.unwrap_or(DEFAULT_ITERS).to_string());
    o.extend(["-t".into(), args.tx_depth.to_string()]);
    if test == "send_bw" {
        o.extend(["-r".into(), args.rx_depth.to_string()]);
    }
    if args.cq_mod != PERFTEST_CQ_MOD {
        o.extend(["-Q".into(), args.cq_mod.to_string()]);
    }
    o
}

/// How long a point's client may run: generous, for a peer that moves about 20 MB/s and
/// answers in about 250 µs under emulation, and slows down a lot when the host is busy.
fn timeout(test: &str, size: usize, plan: &Plan) -> Duration {
    let base = Duration::from_secs(120);
    if is_latency(test) {
        base + Duration::from_millis(20) * plan.lat_iters as u32
    } else {
        let iters = plan.timing.iters.unwrap_or(DEFAULT_ITERS);
        let bytes = iters.saturating_mul(size as u64);
        // 1 MB/s and 10 ms per message at worst.
        base + Duration::from_micros(bytes) + Duration::from_millis(10 * iters.min(1 << 20))
    }
}

/// The two command lines of a point: the rxe side's shell command and the xroce side's
/// program and arguments.
fn commands(
    test: &str,
    size: usize,
    plan: &Plan,
    args: &Args,
    peer: (&str, u32),
) -> Result<(String, Vec<String>)> {
    let (program, _) = program(test).ok_or_else(|| anyhow!("{test} is not a perftest test"))?;
    let opts = options(test, size, plan, args);
    let (device, gid) = peer;
    let rxe = format!("{program} -d {device} -x {gid} {}", opts.join(" "));
    let mut xroce = Vec::new();
    if let Some(core) = plan.app_cores[0] {
        xroce.extend(["taskset".to_owned(), "-c".into(), core.to_string()]);
    }
    // Line-buffered output: a client killed after its time still shows how far it got.
    xroce.extend(["stdbuf".to_owned(), "-oL".into(), "-eL".into()]);
    xroce.extend([
        program.to_owned(),
        "-d".into(),
        interop::DEVICE.into(),
        "-x".into(),
        interop::XROCE_GID_INDEX.to_string(),
    ]);
    xroce.extend(opts);
    xroce.push(interop::PEER_IP.to_string());
    Ok((rxe, xroce))
}

/// A measured point.
#[derive(Debug)]
enum Point {
    Bandwidth(BwPoint),
    Latency(LatPoint),
}

/// perftest's settings lines: ` Key : value`, sometimes two to a line (tab-separated).
fn setting(output: &str, key: &str) -> Option<String> {
    output
        .lines()
        .flat_map(|l| l.split('\t'))
        .filter_map(|part| part.split_once(':'))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().to_owned())
}

/// The leading number of a setting such as `1024[B]`.
fn setting_number(output: &str, key: &str) -> Option<usize> {
    let value = setting(output, key)?;
    let digits: String = value.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The numbers of the first line after the header line containing `header` that has at
/// least `fields` of them, all numbers.
fn result_line(output: &str, header: &str, fields: usize) -> Option<Vec<f64>> {
    let mut lines = output.lines().skip_while(|l| !l.contains(header));
    lines.next()?;
    lines.find_map(|l| {
        let f: Option<Vec<f64>> = l.split_whitespace().map(|w| w.parse().ok()).collect();
        f.filter(|f| f.len() >= fields)
    })
}

/// perftest's bandwidth result: `#bytes #iterations BW_peak BW_average MsgRate`.
#[derive(Debug, Clone, PartialEq)]
struct BwResult {
    size: usize,
    iters: u64,
    /// MiB/s: perftest's "MB/sec" is 2^20 bytes per second.
    avg_mib: f64,
    /// Millions of messages per second.
    mpps: f64,
}

fn bw_result(output: &str) -> Option<BwResult> {
    let f = result_line(output, "BW average", 5)?;
    Some(BwResult {
        size: f[0] as usize,
        iters: f[1] as u64,
        avg_mib: f[3],
        mpps: f[4],
    })
}

/// perftest's latency result: `#bytes #iterations t_min t_max t_typical t_avg t_stdev 99%
/// 99.9%`, in µs.
#[derive(Debug, Clone, PartialEq)]
struct LatResult {
    size: usize,
    iters: u64,
    min: f64,
    max: f64,
    typical: f64,
    avg: f64,
    p99: f64,
    p999: f64,
}

fn lat_result(output: &str) -> Option<LatResult> {
    let f = result_line(output, "t_typical", 9)?;
    Some(LatResult {
        size: f[0] as usize,
        iters: f[1] as u64,
        min: f[2],
        max: f[3],
        typical: f[4],
        avg: f[5],
        p99: f[7],
        p999: f[8],
    })
}

/// The bandwidth point of a perftest client's output.
fn bw_point(test: &str, op: Op, size: usize, output: &str) -> Result<BwPoint> {
    let r = bw_result(output).context("perftest printed no bandwidth result")?;
    if r.size != size {
        bail!("perftest measured {} B messages, not {size} B", r.size);
    }
    // BW average is printed to 0.01 MiB/s and the message rate to 1 message/s: take the
    // one with more digits and derive the other (both come from the same count and time).
    let (bytes_per_sec, msgs_per_sec) = if r.avg_mib * 100.0 >= r.mpps * 1e6 {
        let b = r.avg_mib * 1048576.0;
        (b, b / size as f64)
    } else {
        let m = r.mpps * 1e6;
        (m * size as f64, m)
    };
    if !(msgs_per_sec > 0.0 && msgs_per_sec.is_finite()) || r.iters == 0 {
        bail!("perftest reported no bandwidth");
    }
    let path_mtu = setting_number(output, "Mtu").unwrap_or(PATH_MTU);
    let (packets, frame, wire) = frames(op, size, path_mtu);
    let inline = setting_number(output, "Max inline data").unwrap_or(0);
    Ok(BwPoint {
        test: test.into(),
        op: op.name().into(),
        size,
        qps: 1,
        depth: setting_number(output, "TX depth").unwrap_or(0),
        cq_mod: setting_number(output, "CQ Moderation").unwrap_or(0),
        post_list: 1,
        inline: inline > 0 && size <= inline,
        messages: r.iters,
        secs: r.iters as f64 / msgs_per_sec,
        bytes_per_sec,
        gbit_per_sec: bytes_per_sec * 8.0 / 1e9,
        msgs_per_sec,
        packets_per_msg: packets,
        frame_bytes: frame,
        wire_bytes_per_sec: msgs_per_sec * wire as f64,
        packets_per_sec: msgs_per_sec * packets as f64,
    })
}

/// The latency point of a perftest client's output. perftest reports half the round trip
/// for WRITE and SEND, the whole one for READ; its t_typical is the median.
fn lat_point(test: &str, op: Op, size: usize, output: &str) -> Result<LatPoint> {
    let r = lat_result(output).context("perftest printed no latency result")?;
    if r.size != size {
        bail!("perftest measured {} B messages, not {size} B", r.size);
    }
    if !(r.min > 0.0 && r.typical.is_finite()) {
        bail!("perftest reported no latency");
    }
    let path_mtu = setting_number(output, "Mtu").unwrap_or(PATH_MTU);
    let (_, frame, _) = frames(op, size, path_mtu);
    let inline = setting_number(output, "Max inline data").unwrap_or(0);
    let read = op == Op::Read;
    Ok(LatPoint {
        test: test.into(),
        size,
        iterations: r.iters as usize,
        reported: if read { "rtt" } else { "rtt/2" }.into(),
        min_us: r.min,
        median_us: r.typical,
        mean_us: r.avg,
        p99_us: r.p99,
        p999_us: r.p999,
        max_us: r.max,
        rtt_median_us: if read { r.typical } else { 2.0 * r.typical },
        inline: inline > 0 && size <= inline,
        frame_bytes: frame,
    })
}

/// Runs one point; also returns the path MTU perftest used. An error means the harness
/// broke; a failed point is `Ok(Err(why))`.
fn point(
    h: &mut Harness,
    test: &'static str,
    size: usize,
    plan: &Plan,
    args: &Args,
    (logs, lib): (&Path, &Path),
) -> Result<Result<(Point, Option<usize>), String>> {
    let (_, op) = program(test).ok_or_else(|| anyhow!("{test} is not a perftest test"))?;
    let (rxe, xroce) = commands(test, size, plan, args, (h.peer_device(), h.peer_gid()))?;
    let name = format!("{test}_{size}");
    let exchange = Exchange {
        title: format!("bench {test} {}", size_text(size)),
        name: name.clone(),
        server: Side::Rxe,
        rxe,
        xroce,
        xroce_env: vec![(
            "LD_LIBRARY_PATH".to_owned(),
            lib.to_string_lossy().into_owned(),
        )],
        handshake: Handshake::Perftest,
        timeout: timeout(test, size, plan),
    };
    let done = h.run_exchange(&exchange, logs)?;
    let log = logs.join(format!("{name}.txt"));
    if let Some(why) = done.failure {
        return Ok(Err(format!("{why} (log: {})", log.display())));
    }
    let output = done.client_output(Side::Rxe);
    let parsed = if is_latency(test) {
        lat_point(test, op, size, output).map(Point::Latency)
    } else {
        bw_point(test, op, size, output).map(Point::Bandwidth)
    };
    let mtu = setting_number(output, "Mtu");
    Ok(parsed
        .map(|p| (p, mtu))
        .map_err(|e| format!("{e:#} (log: {})", log.display())))
}

/// The arguments of `xroced` the bench's options ask for.
fn xroced_args(plan: &Plan, args: &Args) -> Vec<String> {
    let mut v = vec!["--queues".to_owned(), args.queues.to_string()];
    if !plan.daemon_cores[0].is_empty() {
        v.push("--cores".into());
        let cores: Vec<String> = plan.daemon_cores[0].iter().map(|c| c.to_string()).collect();
        v.push(cores.join(","));
    }
    v
}

pub(super) fn run(args: &Args, plan: &Plan) -> Result<()> {
    xroce_lab::require_packages(&["perftest", "ibverbs-utils"])?;
    let mut report = new_report(args, plan);
    let release = !args.debug_build;
    let mut prepared = interop::prepare(
        "cargo xtask bench --peer rxe",
        release,
        false,
        args.peer_kind,
    )?;
    let logs = prepared.run_dir.join("bench");
    fs::create_dir_all(&logs)?;

    let progress = Progress::new(plan.tests.len() * plan.sizes.len() + 1);
    progress.step("starting the lab, the rxe peer and xroced", Expect::Unknown);
    let options = interop::Options {
        capture: false,
        lab: LabConfig {
            mtu: args.mtu,
            router: false,
            queues: args.queues,
        },
        xroced_args: xroced_args(plan, args),
    };
    let (mut h, ready) = Harness::start(&mut prepared, &options)?;
    report.environment.peer_setup = h.peer_description().to_owned();
    let vm = h.peer_is_vm();
    let cpus = core_affinity::get_core_ids().map_or(1, |ids| ids.len());
    report.placement = Placement {
        cpus,
        daemon_a_cores: plan.daemon_cores[0].clone(),
        app_a_core: plan.app_cores[0],
        summary: format!(
            "{cpus} CPUs; xroced pollers {}; perftest's client (xroce side) {}, polling as \
             perftest does; the rxe peer {}",
            super::cores_text(&plan.daemon_cores[0]),
            super::core_text(plan.app_cores[0]),
            if vm {
                "is qemu with 1 vCPU, not pinned"
            } else {
                "is this host's kernel (rxe's work and perftest's server, not pinned)"
            }
        ),
        ..Placement::default()
    };
    let lib = match h.drop_in() {
        Ok(lib) => lib.to_path_buf(),
        Err(why) => bail!("perftest cannot run on xroce's side: {why}"),
    };
    'tests: for &test in &plan.tests {
        for (k, &size) in plan.sizes.iter().enumerate() {
            if xroce_lab::signals::interrupted() {
                break 'tests;
            }
            progress.step(format!("{test} {}", size_text(size)), Expect::Unknown);
            let measured = point(&mut h, test, size, plan, args, (&logs, &lib))?;
            if let Some(what) = h.daemon_exited() {
                report.notes.push(format!(
                    "xroced exited during {test} {}: {what}",
                    size_text(size)
                ));
            }
            if let Ok((_, Some(mtu))) = &measured {
                report.config.path_mtu = *mtu;
            }
            match measured {
                Ok((Point::Bandwidth(p), _)) => report.bandwidth.push(p),
                Ok((Point::Latency(p), _)) => report.latency.push(p),
                Err(mut error) => {
                    // A wire that stopped delivering fails every point after it: say so and
                    // stop rather than wait out each one.
                    let wire_down = !h.peer_answers_ping();
                    if wire_down {
                        error.push_str(
                            "; afterwards the peer did not answer ping from xroce's namespace",
                        );
                    }
                    report.failures.push(Failure {
                        test: test.into(),
                        size,
                        qps: 1,
                        error,
                        skipped_sizes: plan.sizes[k + 1..].to_vec(),
                    });
                    if wire_down {
                        let after: Vec<&str> = plan
                            .tests
                            .iter()
                            .skip_while(|t| **t != test)
                            .skip(1)
                            .copied()
                            .collect();
                        report.notes.push(format!(
                            "the wire from the rxe peer stopped delivering during {test} {}: \
                             the peer no longer answered ping, so the run stopped there{}",
                            size_text(size),
                            if after.is_empty() {
                                String::new()
                            } else {
                                format!(" ({} not run)", after.join(", "))
                            }
                        ));
                        break 'tests;
                    }
                    break;
                }
            }
        }
    }
    if xroce_lab::signals::interrupted() {
        bail!("interrupted");
    }

    let xroced = h.xroced_counters().unwrap_or_default();
    let rxe = h.rxe_counters().unwrap_or_default();
    let odd: Vec<String> = [("xroced", &xroced), ("rxe", &rxe)]
        .iter()
        .filter_map(|(who, stats)| {
            let odd = interop::anomalies(stats);
            (!odd.is_empty()).then(|| format!("{who}: {}", odd.join(", ")))
        })
        .collect();
    if !odd.is_empty() {
        report.notes.push(format!(
            "anomalies counted during the run: {}",
            odd.join("; ")
        ));
    }
    if rxe
        .iter()
        .any(|(k, v)| k == "completer_retry_err" && *v > 0)
    {
        report.notes.push(interop::RXE_RETRY_NOTE.to_owned());
    }
    report.daemon_counters.a = xroced.into_iter().filter(|(_, v)| *v != 0).collect();
    report.daemon_counters.b = rxe.into_iter().filter(|(_, v)| *v != 0).collect();
    report.environment.daemon_setup = format!("xroced: {}", setup_lines(&h.daemon_log()));
    let peer = format!("{} on {}", h.peer_place(), h.peer_device());
    h.stop();
    drop(h);

    report.notes.push(format!(
        "measured by Debian's perftest on both ends: the server in {peer}, the client in \
         xroce's namespace on the drop-in libibverbs.so.1 ({}); each point is one perftest run \
         of {} messages (bandwidth) or {} round trips (latency); --duration, --spin-us and \
         --bw-sleep-us do not apply; logs in {}; the peer was ready in {ready:.1} s",
        lib.display(),
        plan.timing.iters.unwrap_or(DEFAULT_ITERS),
        plan.lat_iters,
        logs.display()
    ));
    report.notes.push(format!(
        "no baselines against the rxe peer: raw AF_XDP and kernel UDP/TCP measure this host's \
         veth, while every figure here is bound by the peer ({}); a ratio between them would \
         say nothing about xroce",
        if !vm {
            "Linux rxe, a software transport, on this host's cores"
        } else if report.environment.peer_setup.contains("TCG") {
            "Linux rxe in qemu, on an emulated CPU without hardware virtualisation"
        } else {
            "Linux rxe in qemu"
        }
    ));
    if !plan.not_run.is_empty() {
        report.notes.push(format!(
            "not run against the rxe peer: {} (perftest measures {} here)",
            plan.not_run.join(", "),
            TESTS.join(", ")
        ));
    }
    report.environment.load_after = super::loadavg();
    report.environment.total_secs = progress.elapsed().as_secs_f64();
    drop(progress);
    finish(&report, args)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client's output of `ib_write_bw` against rxe (perftest 4.5-0.17).
    const WRITE_BW: &str = "\
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF\t\tDevice         : xroce0
 Number of qps   : 1\t\tTransport type : IB
 Connection type : RC\t\tUsing SRQ      : OFF
 PCIe relax order: ON
 ibv_wr* API     : OFF
 TX depth        : 20
 CQ Moderation   : 1
 Mtu             : 1024[B]
 Link type       : Ethernet
 GID index       : 0
 Max inline data : 0[B]
 rdma_cm QPs\t : OFF
 Data ex. method : Ethernet
---------------------------------------------------------------------------------------
 local address: LID 0000 QPN 0x21a407 PSN 0xce287f RKey 0xc47d4842 VAddr 0x007f22cf0c2000
 GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:77:00:01
 remote address: LID 0000 QPN 0x001f PSN 0x970e22 RKey 0x00101e VAddr 0x007f1edfbe3000
 GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:77:00:02
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      20               27.93              27.93  \t\t   0.000447
---------------------------------------------------------------------------------------
";

    /// The client's output of `ib_read_lat` against rxe, with perftest's trailing warning.
    const READ_LAT: &str = "\
---------------------------------------------------------------------------------------
                    RDMA_Read Latency Test
 Dual-port       : OFF\t\tDevice         : xroce0
 TX depth        : 1
 Mtu             : 1024[B]
 Outstand reads  : 128
---------------------------------------------------------------------------------------
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 64      100          93.91          417.84       165.69   \t       167.41      \t50.72  \t\t417.84  \t\t417.84 
---------------------------------------------------------------------------------------
Device not recognized to implement inline feature. Disabling it
";

    #[test]
    fn settings_read_from_perftest_headers() {
        assert_eq!(setting_number(WRITE_BW, "TX depth"), Some(20));
        assert_eq!(setting_number(WRITE_BW, "CQ Moderation"), Some(1));
        assert_eq!(setting_number(WRITE_BW, "Mtu"), Some(1024));
        assert_eq!(setting_number(WRITE_BW, "Max inline data"), Some(0));
        assert_eq!(setting(WRITE_BW, "Device").as_deref(), Some("xroce0"));
        assert_eq!(setting_number(WRITE_BW, "RX depth"), None);
    }

    #[test]
    fn bandwidth_results_become_points() {
        let p = bw_point("write_bw", Op::Write, 65536, WRITE_BW).unwrap();
        assert_eq!(p.messages, 20);
        assert_eq!((p.depth, p.cq_mod, p.inline), (20, 1, false));
        // 27.93 MiB/s has more digits than 0.000447 Mpps: bytes come from it.
        assert!((p.bytes_per_sec - 27.93 * 1048576.0).abs() < 1.0);
        assert!((p.msgs_per_sec - p.bytes_per_sec / 65536.0).abs() < 1e-9);
        assert_eq!(p.packets_per_msg, 64);
        assert!(p.wire_bytes_per_sec > p.bytes_per_sec);
        assert!((p.secs - 20.0 / p.msgs_per_sec).abs() < 1e-9);
        // A size other than asked is refused.
        assert!(bw_point("write_bw", Op::Write, 4096, WRITE_BW).is_err());
        // Small messages: the rate has more digits than the bandwidth.
        let small = WRITE_BW.replace(
            " 65536      20               27.93              27.93  \t\t   0.000447",
            " 2          1000             0.01               0.01   \t\t   0.004321",
        );
        let p = bw_point("write_bw", Op::Write, 2, &small).unwrap();
        assert!((p.msgs_per_sec - 4321.0).abs() < 1e-6);
        assert!((p.bytes_per_sec - 8642.0).abs() < 1e-6);
        assert!(bw_point("write_bw", Op::Write, 2, "no result here").is_err());
    }

    #[test]
    fn latency_results_become_points() {
        let p = lat_point("read_lat", Op::Read, 64, READ_LAT).unwrap();
        assert_eq!(p.iterations, 100);
        assert_eq!(p.reported, "rtt");
        assert_eq!(
            (
                p.min_us,
                p.median_us,
                p.mean_us,
                p.p99_us,
                p.p999_us,
                p.max_us
            ),
            (93.91, 165.69, 167.41, 417.84, 417.84, 417.84)
        );
        assert_eq!(p.rtt_median_us, 165.69);
        let p = lat_point("write_lat", Op::Write, 64, READ_LAT).unwrap();
        assert_eq!(p.reported, "rtt/2");
        assert_eq!(p.rtt_median_us, 2.0 * 165.69);
        assert!(lat_point("read_lat", Op::Read, 64, WRITE_BW).is_err());
    }

    fn plan_of(argv: &[&str]) -> (Args, Plan) {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: Args,
        }
        let mut all = vec!["bench", "--peer", "rxe"];
        if !argv.contains(&"--app-cores") {
            // Unpinned, whatever the machine's CPU count (`auto` pins on small machines).
            all.extend(["--app-cores", "none"]);
        }
        all.extend(argv);
        let args = Cli::parse_from(all).args;
        let plan = super::super::plan(&args).unwrap();
        (args, plan)
    }

    #[test]
    fn both_ends_get_the_same_perftest_options() {
        let (args, plan) = plan_of(&["--iters", "50", "--lat-iters", "20"]);
        let (rxe, xroce) = commands("send_bw", 4096, &plan, &args, ("rxe0", 1)).unwrap();
        assert_eq!(
            rxe,
            "ib_send_bw -d rxe0 -x 1 -F -s 4096 -n 50 -t 128 -r 512"
        );
        assert_eq!(
            xroce.join(" "),
            "stdbuf -oL -eL ib_send_bw -d xroce0 -x 0 -F -s 4096 -n 50 -t 128 -r 512 10.77.0.2"
        );
        let (rxe, xroce) = commands("read_lat", 2, &plan, &args, ("rxe0", 1)).unwrap();
        assert_eq!(rxe, "ib_read_lat -d rxe0 -x 1 -F -s 2 -n 20");
        assert_eq!(
            xroce.join(" "),
            "stdbuf -oL -eL ib_read_lat -d xroce0 -x 0 -F -s 2 -n 20 10.77.0.2"
        );
        let (args, plan) = plan_of(&["--cq-mod", "16", "--app-cores", "1"]);
        let (rxe, xroce) = commands("write_bw", 64, &plan, &args, ("rxe0", 1)).unwrap();
        assert!(rxe.ends_with("-n 1000 -t 128 -Q 16"), "{rxe}");
        assert_eq!(&xroce[..4], ["taskset", "-c", "1", "stdbuf"]);
    }

    #[test]
    fn the_rxe_peer_selects_what_perftest_measures() {
        let (_, plan) = plan_of(&[]);
        assert_eq!(plan.tests, TESTS);
        assert_eq!(plan.sizes, vec![2, 1024, 4096, 65536]);
        assert_eq!(plan.timing.iters, Some(DEFAULT_ITERS));
        assert_eq!(plan.lat_iters, DEFAULT_LAT_ITERS);
        assert_eq!(
            plan.not_run,
            ["msg_rate", "qp_scaling", "xsk", "udp", "tcp"]
        );
        let (_, plan) = plan_of(&["--tests", "write_bw,write_lat", "--sizes", "2,4K"]);
        assert_eq!(plan.tests, ["write_bw", "write_lat"]);
        assert!(plan.not_run.is_empty());
        assert_eq!(plan.sizes, vec![2, 4096]);
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: Args,
        }
        for bad in [
            &["bench", "--peer", "rxe", "--tests", "msg_rate"][..],
            &["bench", "--peer", "rxe", "--tests", "baselines"],
            &["bench", "--peer", "rxe", "--iters", "4"],
            &["bench", "--peer", "rxe", "--mtu", "3000"],
        ] {
            let args = Cli::parse_from(bad).args;
            assert!(super::super::plan(&args).is_err(), "{bad:?}");
        }
        assert!(timeout("write_bw", 65536, &plan) > Duration::from_secs(120));
    }
}
