//! `cargo xtask bench --peer rxe` end to end with tiny parameters: Debian's perftest on both
//! ends, the rxe side in the interop harness's VM, the xroce side on the drop-in
//! libibverbs. It boots a VM (about a minute on an emulated CPU, plus the image build on a
//! first run), so it runs only with `XROCE_INTEROP=1`. It checks that the command succeeds
//! and that its JSON has every point with figures; the figures themselves are never judged.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// A temporary file removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(ext: &str) -> TempFile {
        TempFile(std::env::temp_dir().join(format!(
            "xroce-xtask-bench-rxe-{}.{ext}",
            std::process::id()
        )))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn positive(p: &Value, key: &str) -> f64 {
    let x = p[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number: {p}"));
    assert!(x.is_finite() && x > 0.0, "{key} = {x}: {p}");
    x
}

#[test]
fn bench_against_linux_rxe_writes_perftest_points() {
    if std::env::var("XROCE_INTEROP").as_deref() != Ok("1") {
        eprintln!(
            "skipped: bench_against_linux_rxe_writes_perftest_points boots Linux rxe in a VM \
             (about a minute); run it with XROCE_INTEROP=1 cargo test -p xtask --test bench_rxe"
        );
        return;
    }
    if !xroce_lab::require_root("bench_against_linux_rxe_writes_perftest_points") {
        return;
    }
    let json = TempFile::new("json");
    let svg = TempFile::new("svg");
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args([
            "bench",
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
            "--json",
        ])
        .arg(&json.0)
        .arg("--svg")
        .arg(&svg.0)
        .output()
        .expect("running cargo xtask bench --peer rxe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "cargo xtask bench --peer rxe failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("measured by perftest"), "{stdout}");
    assert!(
        !stdout.contains("xroce against the baselines"),
        "no baselines against rxe: {stdout}"
    );

    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&json.0).expect("the JSON file")).unwrap();
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
            positive(p, k);
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
            .map(|k| positive(p, k))
            .collect();
        assert!(f.windows(2).all(|w| w[0] <= w[1]), "{p}");
        assert_eq!(positive(p, "rtt_median_us"), 2.0 * positive(p, "median_us"));
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
