//! `ucx_perftest` between the lab's two hosts over each verbs transport, and perftest's
//! `ib_write_bw` and `ib_send_lat` on the same lab in the same run, as the yardstick.
//!
//! UCT tests (`put_bw`, `put_lat`, `am_bw`) name the transport and the device (`-x`, `-d`).
//! UCP tests (`tag_bw`, `tag_lat`, `ucp_put_bw`, `ucp_put_lat`) pick their transports
//! among `UCX_TLS`: `rc_verbs,ud_verbs` for RC (UCP needs a transport that reaches a peer
//! from its address alone to wire RC up: UD), `ud_verbs` alone for UD. UD has no RDMA
//! WRITE, so its puts are UCP's (`ucp_put_*`), which UCP carries in active messages.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use xroce_lab::{Lab, Side};

use crate::process::{self, Background, Finished};
use crate::{DEVICE, PORT_BASE};

/// One `ucx_perftest` run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Case {
    /// The transport measured: `rc_verbs` or `ud_verbs`.
    pub transport: &'static str,
    /// The test of `ucx_perftest -t`.
    pub test: &'static str,
    /// Message size in bytes.
    pub size: u32,
    /// UCT data layout (`-D`), for UCT tests.
    pub layout: Option<&'static str>,
    /// Whether it is a UCT test (`-x`, `-d`), or a UCP one (`UCX_TLS`).
    pub uct: bool,
}

impl Case {
    /// Whether it measures latency (else bandwidth).
    pub(crate) fn latency(&self) -> bool {
        self.test.ends_with("_lat")
    }
}

const fn uct(
    transport: &'static str,
    test: &'static str,
    size: u32,
    layout: Option<&'static str>,
) -> Case {
    Case {
        transport,
        test,
        size,
        layout,
        uct: true,
    }
}

const fn ucp(transport: &'static str, test: &'static str, size: u32) -> Case {
    Case {
        transport,
        test,
        size,
        layout: None,
        uct: false,
    }
}

/// Every run: tag matching, puts and active messages over each transport.
pub(crate) const CASES: &[Case] = &[
    ucp("rc_verbs", "tag_bw", 65536),
    ucp("rc_verbs", "tag_lat", 8),
    uct("rc_verbs", "put_bw", 65536, Some("zcopy")),
    uct("rc_verbs", "put_lat", 8, None),
    uct("rc_verbs", "am_bw", 8192, Some("bcopy")),
    ucp("ud_verbs", "tag_bw", 65536),
    ucp("ud_verbs", "tag_lat", 8),
    ucp("ud_verbs", "ucp_put_bw", 65536),
    ucp("ud_verbs", "ucp_put_lat", 8),
    // A UD active message fits one packet (1024-byte path MTU less UCX's header).
    uct("ud_verbs", "am_bw", 1000, Some("bcopy")),
];

/// What one run measured.
#[derive(Debug)]
pub(crate) struct Measured {
    /// Median latency in µs (latency tests; one way, as `ucx_perftest` and perftest give it).
    pub median_us: f64,
    /// Average latency in µs.
    pub average_us: f64,
    /// Bandwidth in MiB/s (both tools' "MB/s").
    pub mib_per_sec: f64,
    /// Messages per second.
    pub msgs_per_sec: f64,
    /// What UCX chose for the endpoint (its `ep_cfg` lines), UCP tests only.
    pub selected: Vec<String>,
}

/// The outcome of one run.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// What ran.
    pub case: Case,
    /// Its figures, or why there are none.
    pub result: Result<Measured, String>,
}

/// Bounds of the runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Iterations of bandwidth tests.
    pub bw_iters: u32,
    /// Iterations (round trips) of latency tests.
    pub lat_iters: u32,
    /// The longest a run may take.
    pub timeout: Duration,
}

/// Runs `case` with the server on host `b` and the client on host `a`.
pub(crate) fn run(
    lab: &Lab,
    lib: &Path,
    work: &Path,
    case: &Case,
    limits: &Limits,
    n: u16,
) -> Outcome {
    let result = measure(lab, lib, work, case, limits, n);
    Outcome {
        case: *case,
        result,
    }
}

fn ucx_env(case: &Case, lib: &Path) -> Vec<(String, String)> {
    let mut env = vec![
        ("LD_LIBRARY_PATH".to_owned(), lib.display().to_string()),
        ("UCX_LOG_LEVEL".to_owned(), "info".to_owned()),
    ];
    if !case.uct {
        let tls = match case.transport {
            "rc_verbs" => "rc_verbs,ud_verbs",
            other => other,
        };
        env.push(("UCX_TLS".into(), tls.into()));
        env.push(("UCX_NET_DEVICES".into(), format!("{DEVICE}:1")));
    }
    env
}

fn measure(
    lab: &Lab,
    lib: &Path,
    work: &Path,
    case: &Case,
    limits: &Limits,
    n: u16,
) -> Result<Measured, String> {
    let port = (PORT_BASE + n).to_string();
    let iters = if case.latency() {
        limits.lat_iters
    } else {
        limits.bw_iters
    };
    let iters_text = iters.to_string();
    let warmup = (iters / 10).max(10).to_string();
    let size = case.size.to_string();
    let device = format!("{DEVICE}:1");
    let mut common: Vec<&str> = vec!["ucx_perftest", "-p", &port, "-v"];
    if case.uct {
        common.extend(["-d", device.as_str(), "-x", case.transport]);
    }
    let env = ucx_env(case, lib);
    let name = format!("{}-{}", case.transport, case.test);
    let mut server_cmd = lab.command(Side::B, &common);
    server_cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let mut server = Background::start(&mut server_cmd, &work.join(format!("{name}.server.log")))
        .map_err(|e| format!("{e:#}"))?;
    server
        .wait_listening(lab, Side::B, PORT_BASE + n, Duration::from_secs(20))
        .map_err(|e| format!("{e:#}"))?;
    let peer = lab.host(Side::B).ipv4.to_string();
    let mut argv = common.clone();
    argv.extend([
        "-t",
        case.test,
        "-s",
        size.as_str(),
        "-n",
        iters_text.as_str(),
        "-w",
        warmup.as_str(),
    ]);
    if let Some(layout) = case.layout {
        argv.extend(["-D", layout]);
    }
    argv.push(&peer);
    let mut client = lab.command(Side::A, &argv);
    client.envs(env.iter().map(|(k, v)| (k, v)));
    let log = work.join(format!("{name}.client.log"));
    let done = process::run(&mut client, &log, limits.timeout).map_err(|e| format!("{e:#}"))?;
    let server = server.finish(Duration::from_secs(5));
    if !done.success() {
        return Err(failure("ucx_perftest", &done, &log));
    }
    if let Ok(s) = &server
        && !s.success()
    {
        return Err(format!("the ucx_perftest server {}", failure_text(s)));
    }
    parse_csv(&done.output)
        .map(|mut m| {
            m.selected = selected(&done.output);
            m
        })
        .ok_or_else(|| format!("no result line in {}", log.display()))
}

fn failure_text(f: &Finished) -> String {
    format!("ended {}: {}", f.ending(), process::tail(&f.output, 4))
}

fn failure(what: &str, f: &Finished, log: &Path) -> String {
    format!("{what} {} (log: {})", failure_text(f), log.display())
}

/// The figures of `ucx_perftest -v`'s last CSV line: iterations, median latency, average
/// latency, overall latency, average and overall bandwidth, average and overall rate.
pub(crate) fn parse_csv(output: &str) -> Option<Measured> {
    let fields: Vec<f64> = output.lines().rev().find_map(|line| {
        let fields: Vec<f64> = line
            .trim()
            .split(',')
            .map(|f| f.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .ok()?;
        (fields.len() == 8).then_some(fields)
    })?;
    Some(Measured {
        median_us: fields[1],
        average_us: fields[3],
        mib_per_sec: fields[5],
        msgs_per_sec: fields[7],
        selected: Vec::new(),
    })
}

/// UCX's `ep_cfg[N]: …` lines (what each endpoint configuration uses), without repeats.
pub(crate) fn selected(output: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in output.lines() {
        if let Some(at) = line.find("ep_cfg[") {
            let text = line[at..]
                .split_once(": ")
                .map_or(&line[at..], |(_, rest)| rest)
                .trim()
                .to_owned();
            if !out.contains(&text) {
                out.push(text);
            }
        }
    }
    out
}

/// perftest's figures on the same lab: `ib_write_bw` at 64 KiB and `ib_send_lat` at 8
/// bytes, the yardsticks of `put_bw` and `tag_lat` over rc_verbs.
#[derive(Debug)]
pub(crate) struct Yardstick {
    /// The perftest program.
    pub program: &'static str,
    /// Message size.
    pub size: u32,
    /// MiB/s (`ib_write_bw`'s BW average) or the median one-way latency in µs
    /// (`ib_send_lat`'s t_typical).
    pub result: Result<f64, String>,
}

/// Runs one perftest program, server on `b`, client on `a`.
pub(crate) fn yardstick(
    lab: &Lab,
    lib: &Path,
    work: &Path,
    program: &'static str,
    size: u32,
    limits: &Limits,
    n: u16,
) -> Yardstick {
    let result = perftest(lab, lib, work, program, size, limits, n);
    Yardstick {
        program,
        size,
        result,
    }
}

fn perftest(
    lab: &Lab,
    lib: &Path,
    work: &Path,
    program: &'static str,
    size: u32,
    limits: &Limits,
    n: u16,
) -> Result<f64, String> {
    let latency = program.ends_with("_lat");
    let port = (PORT_BASE + n).to_string();
    let size_text = size.to_string();
    let iters = if latency {
        limits.lat_iters
    } else {
        limits.bw_iters
    }
    .to_string();
    let common = [
        program,
        "-d",
        DEVICE,
        "-F",
        "-p",
        port.as_str(),
        "-s",
        size_text.as_str(),
        "-n",
        iters.as_str(),
    ];
    let mut server_cmd = lab.command(Side::B, &common);
    server_cmd.env("LD_LIBRARY_PATH", lib);
    let mut server =
        Background::start(&mut server_cmd, &work.join(format!("{program}.server.log")))
            .map_err(|e| format!("{e:#}"))?;
    server
        .wait_listening(lab, Side::B, PORT_BASE + n, Duration::from_secs(20))
        .map_err(|e| format!("{e:#}"))?;
    let peer = lab.host(Side::B).ipv4.to_string();
    let mut argv = common.to_vec();
    argv.push(&peer);
    let mut client = lab.command(Side::A, &argv);
    client.env("LD_LIBRARY_PATH", lib);
    let log = work.join(format!("{program}.client.log"));
    let done = process::run(&mut client, &log, limits.timeout).map_err(|e| format!("{e:#}"))?;
    let _ = server.finish(Duration::from_secs(5));
    if !done.success() {
        return Err(failure(program, &done, &log));
    }
    parse_perftest(&done.output, size, latency)
        .ok_or_else(|| format!("no result line in {}", log.display()))
}

/// perftest's result line for `size`: `#bytes #iterations BW-peak BW-average MsgRate`
/// (bandwidth: the average), or `#bytes #iterations t_min t_max t_typical …` (latency:
/// t_typical).
pub(crate) fn parse_perftest(output: &str, size: u32, latency: bool) -> Option<f64> {
    output.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.first()?.parse::<u32>().ok()? != size || fields.len() < 5 {
            return None;
        }
        fields[if latency { 4 } else { 3 }].parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_csv_line_holds_the_figures() {
        let out = "iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr\n\
                   [1] [vm:1:0] ucp_worker.c:1763 UCX  INFO    ep_cfg[0]: tag(rc_verbs/xroce0:1)\n\
                   1000,11.694,13.164,13.164,0.58,0.58,75963,75963\n\
                   2000,11.5,13.0,12.9,0.59,0.61,76000,77000\n";
        let m = parse_csv(out).unwrap();
        assert_eq!(
            (m.median_us, m.average_us, m.mib_per_sec, m.msgs_per_sec),
            (11.5, 12.9, 0.61, 77000.0)
        );
        assert_eq!(selected(out), ["tag(rc_verbs/xroce0:1)"]);
        assert!(parse_csv("iterations,a\nno figures\n").is_none());
    }

    #[test]
    fn perftest_result_lines_are_found_by_size() {
        let bw = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n \
                  65536      2000             416.12             152.69 \t\t   0.002443\n";
        assert_eq!(parse_perftest(bw, 65536, false), Some(152.69));
        assert_eq!(parse_perftest(bw, 8, false), None);
        let lat = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]\n \
                   8       5000          10.26          4554.56      17.53    \t       51.39\n";
        assert_eq!(parse_perftest(lat, 8, true), Some(17.53));
    }
}
