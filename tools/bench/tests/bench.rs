//! `cargo xtask bench` end to end with tiny parameters (debug builds, one or two sizes, a
//! few iterations): the command runs every workload and baseline, and its JSON has every
//! documented field with sane values, so the bench cannot silently rot. Figures are never
//! judged here: performance is measured by the bench, not asserted by tests.

use serde_json::Value;

mod support;
use support::{TempFile, positive, run_bench};

fn keys(v: &Value, what: &str, keys: &[&str]) {
    let obj = v
        .as_object()
        .unwrap_or_else(|| panic!("{what} is not an object: {v}"));
    for k in keys {
        assert!(obj.contains_key(*k), "{what} has no field {k:?}: {v}");
    }
}

const BW_KEYS: &[&str] = &[
    "test",
    "op",
    "size",
    "qps",
    "depth",
    "cq_mod",
    "post_list",
    "inline",
    "messages",
    "secs",
    "bytes_per_sec",
    "gbit_per_sec",
    "msgs_per_sec",
    "packets_per_msg",
    "frame_bytes",
    "wire_bytes_per_sec",
    "packets_per_sec",
];

const LAT_KEYS: &[&str] = &[
    "test",
    "size",
    "iterations",
    "reported",
    "min_us",
    "median_us",
    "mean_us",
    "p99_us",
    "p999_us",
    "max_us",
    "rtt_median_us",
    "inline",
    "frame_bytes",
];

fn bw_point(p: &Value, what: &str) {
    keys(p, what, BW_KEYS);
    for k in [
        "bytes_per_sec",
        "gbit_per_sec",
        "msgs_per_sec",
        "secs",
        "wire_bytes_per_sec",
        "packets_per_sec",
    ] {
        positive(p, what, k);
    }
    assert!(p["messages"].as_u64().unwrap() > 0, "{what}: {p}");
    assert!(
        p["wire_bytes_per_sec"].as_f64() > p["bytes_per_sec"].as_f64(),
        "{what}: frames carry headers: {p}"
    );
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn bench_runs_every_test_and_writes_complete_json() {
    xroce_lab::require_root();
    let json = TempFile::new("xroce-xtask-bench", "json");
    let svg = TempFile::new("xroce-xtask-bench", "svg");
    let (stdout, report) = run_bench(
        &[
            "--debug-build",
            "--sizes",
            "2,4K",
            "--msg-sizes",
            "2",
            "--iters",
            "64",
            "--tx-depth",
            "16",
            "--cq-mod",
            "8",
            "--rx-depth",
            "64",
            "--duration",
            "0.5",
            "--lat-iters",
            "20",
            "--qps",
            "1,4",
            "--scaling-sizes",
            "4K",
            "--baseline-secs",
            "0.2",
            "--pingpong-count",
            "100",
        ],
        &json,
        &svg,
    );
    assert!(stdout.contains("xroce against the baselines"), "{stdout}");

    keys(
        &report,
        "report",
        &[
            "schema",
            "started_unix",
            "config",
            "placement",
            "environment",
            "bandwidth",
            "latency",
            "msg_rate",
            "qp_scaling",
            "baselines",
            "comparisons",
            "failures",
            "daemon_counters",
            "notes",
        ],
    );
    assert_eq!(report["schema"], 1);
    assert_eq!(report["failures"], Value::Array(Vec::new()));
    keys(
        &report["config"],
        "config",
        &[
            "tests",
            "sizes",
            "duration_secs",
            "iters",
            "lat_iters",
            "tx_depth",
            "cq_mod",
            "rx_depth",
            "msg_sizes",
            "post_list",
            "qps",
            "scaling_sizes",
            "baseline_secs",
            "pingpong_count",
            "queues",
            "mtu",
            "path_mtu",
            "peer",
            "build",
        ],
    );
    assert_eq!(report["config"]["path_mtu"], 1024);
    keys(
        &report["placement"],
        "placement",
        &[
            "cpus",
            "daemon_a_cores",
            "daemon_b_cores",
            "app_a_core",
            "app_b_core",
            "baseline_a_core",
            "baseline_b_core",
            "app_spin_us",
            "app_bw_sleep_us",
            "summary",
        ],
    );
    keys(
        &report["environment"],
        "environment",
        &[
            "kernel",
            "load_before",
            "load_after",
            "daemon_setup",
            "total_secs",
        ],
    );

    let bw = report["bandwidth"].as_array().unwrap();
    assert_eq!(bw.len(), 6, "3 operations x 2 sizes: {bw:?}");
    for op in ["write", "read", "send"] {
        for size in [2, 4096] {
            let p = bw
                .iter()
                .find(|p| p["op"] == op && p["size"] == size)
                .unwrap_or_else(|| panic!("no {op} bandwidth point at {size} B"));
            bw_point(p, &format!("{op}_bw {size}"));
        }
    }
    let lat = report["latency"].as_array().unwrap();
    assert_eq!(lat.len(), 6, "3 operations x 2 sizes: {lat:?}");
    for p in lat {
        keys(p, "latency point", LAT_KEYS);
        let what = p["test"].as_str().unwrap();
        let f: Vec<f64> = ["min_us", "median_us", "p99_us", "p999_us", "max_us"]
            .iter()
            .map(|k| positive(p, what, k))
            .collect();
        assert!(f.windows(2).all(|w| w[0] <= w[1]), "{what}: {p}");
        assert!(p["iterations"].as_u64().unwrap() > 0, "{p}");
        let expected = if what == "read_lat" { "rtt" } else { "rtt/2" };
        assert_eq!(p["reported"], expected, "{p}");
    }
    let rate = report["msg_rate"].as_array().unwrap();
    assert_eq!(rate.len(), 1);
    bw_point(&rate[0], "msg_rate");
    let scaling = report["qp_scaling"].as_array().unwrap();
    assert_eq!(scaling.len(), 2);
    for p in scaling {
        bw_point(p, "qp_scaling");
    }
    assert_eq!(scaling[1]["qps"], 4);

    let b = &report["baselines"];
    keys(
        b,
        "baselines",
        &[
            "xsk_flood",
            "xsk_pingpong",
            "udp_flood",
            "udp_pingpong",
            "tcp",
            "how",
        ],
    );
    for name in ["xsk_flood", "udp_flood"] {
        let points = b[name].as_array().unwrap();
        assert_eq!(
            points.len(),
            2,
            "one frame size for bandwidth, one for the rate"
        );
        for p in points {
            keys(
                p,
                name,
                &[
                    "frame_bytes",
                    "pps",
                    "bytes_per_sec",
                    "gbit_per_sec",
                    "secs",
                    "sent",
                    "received",
                ],
            );
            positive(p, name, "pps");
            positive(p, name, "bytes_per_sec");
        }
    }
    for name in ["xsk_pingpong", "udp_pingpong"] {
        let p = &b[name];
        keys(
            p,
            name,
            &[
                "frame_bytes",
                "round_trips",
                "min_us",
                "median_us",
                "p99_us",
                "p999_us",
                "max_us",
            ],
        );
        positive(p, name, "median_us");
        assert_eq!(p["frame_bytes"], 76, "the 2-byte WRITE's frame: {p}");
    }
    keys(
        &b["tcp"],
        "tcp",
        &["write_bytes", "secs", "bytes_per_sec", "gbit_per_sec"],
    );
    positive(&b["tcp"], "tcp", "bytes_per_sec");

    let comparisons = report["comparisons"].as_array().unwrap();
    for id in [
        "write_bw_vs_xsk",
        "write_bw_vs_udp",
        "write_bw_vs_tcp",
        "write_lat_rtt_vs_xsk",
        "write_lat_rtt_vs_udp",
        "msg_rate_2_vs_xsk",
        "msg_rate_2_vs_udp",
        "qp_scaling_4_vs_1_at_4096",
    ] {
        let c = comparisons
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no comparison {id}: {comparisons:?}"));
        keys(
            c,
            id,
            &[
                "id", "figure", "xroce", "unit", "against", "baseline", "ratio", "target", "met",
            ],
        );
        positive(c, id, "ratio");
        positive(c, id, "xroce");
        positive(c, id, "baseline");
        assert_eq!(c["target"].is_null(), c["met"].is_null(), "{c}");
    }
    for c in comparisons {
        positive(c, "comparison", "ratio");
    }
    keys(&report["daemon_counters"], "daemon_counters", &["a", "b"]);
    assert!(
        !report["daemon_counters"]["a"]
            .as_array()
            .unwrap()
            .is_empty(),
        "daemon a counted nothing"
    );

    let svg = std::fs::read_to_string(&svg.0).expect("the SVG file");
    assert!(
        svg.starts_with("<svg") && svg.contains("WRITE"),
        "{svg:.200}"
    );
}

/// `--tests loss` with two tiny points, a bursty one and a reordering one, in both recovery
/// modes: the lab with its router, the impairment router, daemons per mode and every field
/// of a loss point. The figures are not judged.
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn bench_loss_test_writes_its_points() {
    xroce_lab::require_root();
    let json = TempFile::new("xroce-xtask-bench-loss", "json");
    let svg = TempFile::new("xroce-xtask-bench-loss", "svg");
    let (stdout, report) = run_bench(
        &[
            "--debug-build",
            "--tests",
            "loss",
            "--loss-rates",
            "0,2",
            "--loss-burst",
            "4",
            "--loss-reorder",
            "2",
            "--iters",
            "64",
            "--tx-depth",
            "8",
        ],
        &json,
        &svg,
    );
    assert!(stdout.contains("Loss: WRITE 64 KiB"), "{stdout}");
    assert!(stdout.contains("Loss targets"), "{stdout}");
    let points = report["loss"].as_array().expect("a loss section");
    let want = [
        (0.0, 1.0, 0.0),
        (2.0, 1.0, 0.0),
        (2.0, 4.0, 0.0),
        (0.0, 1.0, 2.0),
    ];
    assert_eq!(
        points.len(),
        2 * want.len(),
        "0 %, 2 %, 2 % in bursts and 2 % reordered, in each mode: {points:?}"
    );
    let modes = ["go-back-N", "selective repeat"];
    for (i, p) in points.iter().enumerate() {
        let (rate, burst, reorder) = want[i % want.len()];
        assert_eq!(p["loss_percent"].as_f64(), Some(rate), "{p}");
        assert_eq!(p["loss_burst"].as_f64(), Some(burst), "{p}");
        assert_eq!(p["reorder_percent"].as_f64(), Some(reorder), "{p}");
        assert_eq!(p["mode"], modes[i / want.len()], "{p}");
        keys(
            p,
            "loss point",
            &[
                "gbit_per_sec",
                "ratio",
                "frames_dropped",
                "sent_packets",
                "retransmitted_packets",
                "retransmitted_bytes",
                "retransmit_timeouts",
                "seq_naks",
                "completion_p50_us",
                "completion_p99_us",
                "error",
                "recovery",
            ],
        );
        if p["error"].is_null() {
            positive(p, "loss point", "gbit_per_sec");
            positive(p, "loss point", "completion_p99_us");
        }
    }
    for first in [&points[0], &points[want.len()]] {
        assert_eq!(first["ratio"].as_f64(), Some(1.0), "{first}");
        assert_eq!(first["frames_dropped"].as_u64(), Some(0), "{first}");
    }
    // Selective repeat ran between the two daemons: at 2 % loss b held packets.
    let lossy = &points[want.len() + 1]["recovery"];
    assert!(
        lossy["sr_packets_held"].as_u64() > Some(0),
        "selective repeat never held a packet: {lossy}"
    );
    let gbn = &points[1]["recovery"];
    assert_eq!(
        gbn["sr_packets_held"].as_u64(),
        Some(0),
        "go-back-N held: {gbn}"
    );
}

/// `--loss-rounds`: the points run once per round, each round's ratios to its own
/// loss-free point, and the report sums each point up over the rounds; through a
/// bottleneck (`--loss-bottleneck-mbit`).
#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn bench_loss_rounds_through_a_bottleneck_are_summed_up_per_point() {
    xroce_lab::require_root();
    let json = TempFile::new("xroce-xtask-bench-loss-rounds", "json");
    let svg = TempFile::new("xroce-xtask-bench-loss-rounds", "svg");
    let (stdout, report) = run_bench(
        &[
            "--debug-build",
            "--tests",
            "loss",
            "--loss-modes",
            "selective-repeat",
            "--loss-rates",
            "0,2",
            "--loss-burst",
            "0",
            "--loss-reorder",
            "0",
            "--loss-rounds",
            "2",
            "--loss-bottleneck-mbit",
            "200",
            "--iters",
            "64",
            "--tx-depth",
            "8",
        ],
        &json,
        &svg,
    );
    assert!(stdout.contains("Loss over 2 rounds"), "{stdout}");
    let points = report["loss"].as_array().expect("a loss section");
    let got: Vec<(Option<u64>, Option<f64>)> = points
        .iter()
        .map(|p| (p["round"].as_u64(), p["loss_percent"].as_f64()))
        .collect();
    assert_eq!(
        got,
        [
            (Some(1), Some(0.0)),
            (Some(1), Some(2.0)),
            (Some(2), Some(0.0)),
            (Some(2), Some(2.0))
        ],
        "{points:?}"
    );
    // Each round's loss-free point is its own reference.
    for p in [&points[0], &points[2]] {
        assert_eq!(p["ratio"].as_f64(), Some(1.0), "{p}");
    }
    // Through the router's 200 Mbit/s port, said in every point and the table.
    for p in points {
        assert_eq!(p["bottleneck_mbit"].as_u64(), Some(200), "{p}");
        assert!(p["queue_dropped"].as_u64().is_some(), "{p}");
    }
    assert!(
        stdout.contains("its egress 200 Mbit/s each way"),
        "{stdout}"
    );
    let summary = report["loss_summary"].as_array().expect("a loss summary");
    assert_eq!(summary.len(), 2, "{summary:?}");
    for s in summary {
        assert_eq!(s["rounds"].as_u64(), Some(2), "{s}");
        let (lo, med, hi) = (
            s["ratio_min"].as_f64().unwrap(),
            s["ratio_median"].as_f64().unwrap(),
            s["ratio_max"].as_f64().unwrap(),
        );
        assert!(lo <= med && med <= hi, "{s}");
    }
    assert_eq!(summary[0]["ratio_median"].as_f64(), Some(1.0));
    let lossy: Vec<f64> = [&points[1], &points[3]]
        .iter()
        .map(|p| p["ratio"].as_f64().unwrap())
        .collect();
    // The median of two rounds is their mean (up to the JSON's last digit).
    let median = summary[1]["ratio_median"].as_f64().unwrap();
    assert!(
        (median - (lossy[0] + lossy[1]) / 2.0).abs() < 1e-9,
        "{summary:?}"
    );
}
