//! Shared by the integration tests: the freshly built drop-in libraries, installed under
//! their sonames in a private directory, and the reference data in `abi/`.
//!
//! A cdylib is not linked into integration tests, and whether cargo has (re)built it
//! before running them depends on how they were invoked. So [`Libraries::build`] runs
//! `cargo build -p xroce-rdmacm -p xroce-ibverbs --lib --message-format=json` itself (a
//! no-op when up to date), takes the paths of the `librdmacm.so` and `libibverbs.so`
//! artifacts from cargo's own report, and copies them into a fresh temporary directory as
//! `librdmacm.so.1` and `libibverbs.so.1`, what the dynamic loader looks for.

#![allow(dead_code, reason = "each test binary uses a different part")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The two drop-in libraries, in a private directory removed on drop.
pub(crate) struct Libraries {
    pub(crate) dir: PathBuf,
    /// `<dir>/librdmacm.so.1`.
    pub(crate) rdmacm: PathBuf,
    /// `<dir>/libibverbs.so.1`.
    pub(crate) ibverbs: PathBuf,
}

impl Libraries {
    pub(crate) fn build() -> Libraries {
        let (rdmacm, ibverbs) = artifacts();
        static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("xroce-rdmacm-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let libraries = Libraries {
            rdmacm: dir.join("librdmacm.so.1"),
            ibverbs: dir.join("libibverbs.so.1"),
            dir,
        };
        std::fs::copy(rdmacm, &libraries.rdmacm).unwrap();
        std::fs::copy(ibverbs, &libraries.ibverbs).unwrap();
        libraries
    }
}

impl Drop for Libraries {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The path cargo reports for the `.so` of the cdylib `name` in its JSON messages.
fn reported(stdout: &str, name: &str) -> PathBuf {
    let file = format!("lib{name}.so\"");
    let line = stdout
        .lines()
        .find(|l| {
            l.contains("\"reason\":\"compiler-artifact\"")
                && l.contains(&format!("\"name\":\"{name}\""))
                && l.contains(&file)
        })
        .unwrap_or_else(|| panic!("cargo reported the lib{name}.so artifact"));
    let end = line.find(&file).unwrap() + file.len() - 1;
    let start = line[..end].rfind('"').unwrap() + 1;
    let path = PathBuf::from(&line[start..end]);
    assert!(path.is_file(), "{} exists", path.display());
    path
}

/// Builds both cdylibs once per test process and returns cargo's paths to them.
fn artifacts() -> &'static (PathBuf, PathBuf) {
    static ARTIFACTS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    ARTIFACTS.get_or_init(|| {
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
            .args(["-p", "xroce-rdmacm", "-p", "xroce-ibverbs", "--lib"])
            .output()
            .expect("running cargo build");
        assert!(
            output.status.success(),
            "cargo build -p xroce-rdmacm -p xroce-ibverbs failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let stdout = String::from_utf8(output.stdout).unwrap();
        (reported(&stdout, "rdmacm"), reported(&stdout, "ibverbs"))
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

/// `abi/imports_per_binary.txt`: for each program or library, what it imports from
/// librdmacm (`symbol@VERSION`).
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

/// The defined dynamic symbols of an ELF file, as readelf prints them (`name@@NODE`,
/// `name@NODE`, or `name`).
pub(crate) fn defined_dynamic_symbols(path: &Path) -> Vec<String> {
    dynamic_symbols(path, true)
}

/// The undefined (imported) dynamic symbols of an ELF file, as `name@NODE`.
pub(crate) fn imported_dynamic_symbols(path: &Path) -> Vec<String> {
    dynamic_symbols(path, false)
}

fn dynamic_symbols(path: &Path, defined: bool) -> Vec<String> {
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
            let symbol = fields.len() >= 8
                && fields[0]
                    .strip_suffix(':')
                    .is_some_and(|n| n.parse::<u32>().is_ok())
                && fields[3] != "SECTION"
                && fields[3] != "FILE";
            (symbol && (fields[6] != "UND") == defined).then(|| fields[7].to_string())
        })
        .collect()
}

/// `readelf --version-info`: the version definitions (name, parent names), in order.
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
