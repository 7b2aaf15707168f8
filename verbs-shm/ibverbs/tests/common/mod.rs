//! Shared by the integration tests: the freshly built library, installed under its soname
//! in a private directory, and the reference data in `abi/`.
//!
//! How the tests get the library they test: a cdylib is not linked into integration
//! tests, and whether cargo has (re)built it before running them depends on how the tests
//! were invoked. So [`Library::build`] runs `cargo build -p xroce-ibverbs
//! --message-format=json` itself (a no-op when up to date), takes the path of the
//! `libibverbs.so` artifact from cargo's own report, and copies it into a fresh temporary
//! directory as `libibverbs.so.1`, which is what the dynamic loader looks for.

#![allow(dead_code, reason = "each test binary uses a different part")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The library under test, in a private directory removed on drop.
pub(crate) struct Library {
    pub(crate) dir: PathBuf,
    pub(crate) path: PathBuf,
}

impl Library {
    pub(crate) fn build() -> Library {
        let artifact = artifact();
        static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("xroce-ibverbs-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("libibverbs.so.1");
        std::fs::copy(artifact, &path).unwrap();
        Library { dir, path }
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Builds the cdylib once per test process and returns cargo's path to it.
fn artifact() -> &'static Path {
    static ARTIFACT: OnceLock<PathBuf> = OnceLock::new();
    ARTIFACT.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        let output = Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "--message-format=json",
                "--manifest-path",
            ])
            .arg(&manifest)
            .args(["-p", "xroce-ibverbs", "--lib"])
            .output()
            .expect("running cargo build");
        assert!(
            output.status.success(),
            "cargo build -p xroce-ibverbs failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        // Each line is a JSON object; the artifact line of our lib lists its file names.
        let stdout = String::from_utf8(output.stdout).unwrap();
        let line = stdout
            .lines()
            .find(|l| {
                l.contains("\"reason\":\"compiler-artifact\"")
                    && l.contains("\"name\":\"ibverbs\"")
                    && l.contains("libibverbs.so\"")
            })
            .expect("cargo reported the libibverbs.so artifact");
        let end = line.find("libibverbs.so\"").unwrap() + "libibverbs.so".len();
        let start = line[..end].rfind('"').unwrap() + 1;
        let path = PathBuf::from(&line[start..end]);
        assert!(path.is_file(), "{} exists", path.display());
        path
    })
}

/// `abi/defsyms.txt` as `symbol@@NODE` strings.
pub(crate) fn expected_exports() -> BTreeSet<String> {
    let text = std::fs::read_to_string(abi_file("defsyms.txt")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut fields = l.split_whitespace();
            let (node, name) = (fields.next().unwrap(), fields.next().unwrap());
            format!("{name}@@{node}")
        })
        .collect()
}

/// `abi/imports_per_binary.txt`: for each program or library, what it imports
/// (`symbol@VERSION`).
pub(crate) fn imports_per_binary() -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(abi_file("imports_per_binary.txt")).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("== "))
        .map(|l| {
            let (name, imports) = l.split_once(':').unwrap();
            (
                name.to_string(),
                imports.split_whitespace().map(str::to_string).collect(),
            )
        })
        .collect()
}

pub(crate) fn abi_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("abi").join(name)
}

/// The defined dynamic symbols of an ELF file, as readelf prints them (`name@@NODE`, or
/// `name@NODE` for non-default versions, or `name` when unversioned).
pub(crate) fn defined_dynamic_symbols(path: &Path) -> Vec<String> {
    let output = Command::new("readelf")
        .args(["--dyn-syms", "--wide"])
        .arg(path)
        .output()
        .expect("running readelf (binutils)");
    assert!(
        output.status.success(),
        "readelf failed on {}",
        path.display()
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| {
            // Num: Value Size Type Bind Vis Ndx Name [(version index)]
            let fields: Vec<&str> = line.split_whitespace().collect();
            let defined = fields.len() >= 8
                && fields[0]
                    .strip_suffix(':')
                    .is_some_and(|n| n.parse::<u32>().is_ok())
                && fields[6] != "UND"
                && fields[3] != "SECTION"
                && fields[3] != "FILE";
            defined.then(|| fields[7].to_string())
        })
        .collect()
}

/// `readelf --version-info`: the version definitions (name, parent names), in order, and
/// the dynamic section's SONAME.
pub(crate) fn version_definitions(path: &Path) -> Vec<(String, Vec<String>)> {
    let output = Command::new("readelf")
        .args(["--version-info", "--wide"])
        .arg(path)
        .output()
        .expect("running readelf (binutils)");
    let text = String::from_utf8(output.stdout).unwrap();
    let mut definitions: Vec<(String, Vec<String>)> = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("Version definition section") {
            inside = true;
        } else if line.starts_with("Version needs section") || line.starts_with("Version symbols") {
            inside = false;
        } else if inside {
            if let Some((_, name)) = line.split_once("Name: ") {
                definitions.push((name.trim().to_string(), Vec::new()));
            } else if let Some((_, parent)) = line.split_once(": Parent ") {
                let parent = parent.split_once(": ").map_or(parent, |p| p.1);
                definitions
                    .last_mut()
                    .unwrap()
                    .1
                    .push(parent.trim().to_string());
            }
        }
    }
    definitions
}

pub(crate) fn soname(path: &Path) -> Option<String> {
    let output = Command::new("readelf")
        .args(["--dynamic", "--wide"])
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    let line = text.lines().find(|l| l.contains("(SONAME)"))?;
    Some(line.split_once('[')?.1.trim_end_matches(']').to_string())
}
