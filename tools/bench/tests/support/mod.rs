//! What the `cargo xtask bench` tests share: temporary output files, running the command,
//! and checking a figure.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// A temporary file removed on drop.
pub(crate) struct TempFile(pub(crate) PathBuf);

impl TempFile {
    pub(crate) fn new(name: &str, ext: &str) -> TempFile {
        TempFile(std::env::temp_dir().join(format!("{name}-{}.{ext}", std::process::id())))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs `xroce-bench ARGS` (what `cargo xtask bench ARGS` runs) --json JSON --svg SVG`, fails the test unless it succeeds,
/// and returns its output and the JSON report.
pub(crate) fn run_bench(args: &[&str], json: &TempFile, svg: &TempFile) -> (String, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_xroce-bench"))
        .args(args)
        .arg("--json")
        .arg(&json.0)
        .arg("--svg")
        .arg(&svg.0)
        .output()
        .expect("running xroce-bench");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "cargo xtask bench {} failed ({}):\n{stdout}\n{stderr}",
        args.join(" "),
        out.status
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&json.0).expect("the JSON file")).unwrap();
    (stdout, report)
}

/// `v[key]`, which must be a finite positive number (`what` names `v` in the message).
pub(crate) fn positive(v: &Value, what: &str, key: &str) -> f64 {
    let x = v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{what}.{key} is not a number: {v}"));
    assert!(x.is_finite() && x > 0.0, "{what}.{key} = {x}: {v}");
    x
}
