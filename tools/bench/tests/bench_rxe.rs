//! `cargo xtask bench --peer rxe` end to end with tiny parameters: Debian's perftest on both
//! ends, the rxe side in the interop harness's VM, the xroce side on the drop-in
//! libibverbs. It boots a VM (about a minute, plus the image build on a first run), so it
//! is in the interop tier (`#[ignore]`d, named `…against_linux_rxe…`). It checks that the command succeeds
//! and that its JSON has every point with figures; the figures themselves are never judged.

use serde_json::Value;

mod support;
use support::{TempFile, positive, run_bench};

#[test]
#[ignore = "interop: boots Linux rxe in a VM (cargo xtask test runs it)"]
fn bench_against_linux_rxe_writes_perftest_points() {
    xroce_lab::require_root();
    let json = TempFile::new("xroce-xtask-bench-rxe", "json");
    let svg = TempFile::new("xroce-xtask-bench-rxe", "svg");
    let (stdout, report) = run_bench(
        &[
            "--peer",
            "rxe",
            "--debug-build",
            "--tests",
            "write_bw,write_lat",
            "--sizes",
            "2,4K",
            "--iters",
            "20",
            "--lat-iters",
            "20",
        ],
        &json,
        &svg,
    );
    assert!(stdout.contains("measured by perftest"), "{stdout}");
    assert!(
        !stdout.contains("xroce against the baselines"),
        "no baselines against rxe: {stdout}"
    );

    assert_eq!(report["schema"], 1);
    assert_eq!(report["config"]["peer"], "rxe");
    assert_eq!(report["config"]["measured_by"], "perftest");
    assert_eq!(report["config"]["path_mtu"], 1024);
    assert_eq!(report["failures"], Value::Array(Vec::new()));
    assert_eq!(report["comparisons"], Value::Array(Vec::new()));
    assert!(
        report["environment"]["peer_setup"]
            .as_str()
            .is_some_and(|s| s.contains("rxe")),
        "{}",
        report["environment"]
    );

    let bw = report["bandwidth"].as_array().unwrap();
    assert_eq!(bw.len(), 2, "write_bw at 2 B and 4 KiB: {bw:?}");
    for size in [2, 4096] {
        let p = bw
            .iter()
            .find(|p| p["op"] == "write" && p["size"] == size)
            .unwrap_or_else(|| panic!("no write bandwidth point at {size} B: {bw:?}"));
        assert_eq!(p["messages"], 20, "{p}");
        for k in [
            "bytes_per_sec",
            "gbit_per_sec",
            "msgs_per_sec",
            "secs",
            "wire_bytes_per_sec",
            "packets_per_sec",
        ] {
            positive(p, "point", k);
        }
        assert!(p["depth"].as_u64().unwrap() > 0, "perftest's tx depth: {p}");
    }
    let lat = report["latency"].as_array().unwrap();
    assert_eq!(lat.len(), 2, "write_lat at 2 B and 4 KiB: {lat:?}");
    for p in lat {
        assert_eq!(p["test"], "write_lat", "{p}");
        assert_eq!(p["reported"], "rtt/2", "{p}");
        let f: Vec<f64> = ["min_us", "median_us", "p99_us", "p999_us", "max_us"]
            .iter()
            .map(|k| positive(p, "point", k))
            .collect();
        assert!(f.windows(2).all(|w| w[0] <= w[1]), "{p}");
        assert_eq!(
            positive(p, "point", "rtt_median_us"),
            2.0 * positive(p, "point", "median_us")
        );
    }
    assert!(
        !report["daemon_counters"]["a"]
            .as_array()
            .unwrap()
            .is_empty(),
        "xroced counted nothing"
    );
    assert!(
        !report["daemon_counters"]["b"]
            .as_array()
            .unwrap()
            .is_empty(),
        "rxe counted nothing"
    );
    let notes = report["notes"].to_string();
    assert!(notes.contains("no baselines"), "{notes}");

    let svg = std::fs::read_to_string(&svg.0).expect("the SVG file");
    assert!(svg.starts_with("<svg"), "{svg:.200}");
}
