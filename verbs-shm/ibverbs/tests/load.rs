//! Unmodified Debian 12 verbs programs load the library and behave as on a host without
//! RDMA devices.
//!
//! Each tool of `abi/imports_per_binary.txt` that Debian's `ibverbs-utils` and `perftest`
//! install runs with `LD_LIBRARY_PATH` pointing at the freshly built library and with
//! `LD_DEBUG=bindings` (to a file). The test asserts that:
//! - the loader accepted it: no `symbol lookup error`, `version … not found` or
//!   `undefined symbol` (all these programs are linked `BIND_NOW`, so every import is
//!   resolved at start);
//! - every `@IBVERBS_*` import of the program was bound to this library, with its version,
//!   and no other `libibverbs.so` took part (the system's one, if installed, was not bound);
//!   for perftest, libmlx5 and libefa bound their `IBVERBS_PRIVATE_34` imports to it too;
//! - the program behaved as with no devices: `ibv_devices` lists none and exits 0, the
//!   others report that no device was found and exit non-zero.

mod common;

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Library, imports_per_binary};

/// How a program with no device available is expected to end.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Exit 0 with the table header and no device line (`ibv_devices`).
    EmptyTable,
    /// Exit non-zero, saying this.
    NoDevice(&'static str),
}

const PINGPONG: Expect = Expect::NoDevice("No IB devices found");
const PERFTEST: Expect = Expect::NoDevice("Did not detect devices");
/// `ibv_asyncwatch` and `ibv_xsrq_pingpong` look for a device by name ("IB device  not
/// found", the name being empty).
const BY_NAME: Expect = Expect::NoDevice("IB device  not found");

/// A hang is a failure, not a wait: the programs stop at the device list.
const TIMEOUT: Duration = Duration::from_secs(60);

/// What the loader prints when a program cannot start.
const LOADER_ERRORS: [&str; 5] = [
    "symbol lookup error",
    "version `",
    "undefined symbol",
    "error while loading shared libraries",
    "cannot open shared object",
];

struct Run {
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
    bindings: String,
}

fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

fn run(program: &Path, library: &Library) -> Run {
    let log_prefix = library.dir.join("ld-debug");
    let mut child = Command::new(program)
        .env("LD_LIBRARY_PATH", &library.dir)
        .env("LD_DEBUG", "bindings")
        .env("LD_DEBUG_OUTPUT", &log_prefix)
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
    let pid = child.id();
    // Drain both pipes on threads so a chatty program cannot block on a full pipe.
    let mut stdout_pipe = child.stdout.take().unwrap();
    let mut stderr_pipe = child.stderr.take().unwrap();
    let stdout = std::thread::spawn(move || {
        let mut text = String::new();
        stdout_pipe.read_to_string(&mut text).map(|_| text)
    });
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        stderr_pipe.read_to_string(&mut text).map(|_| text)
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} did not exit within {TIMEOUT:?}", program.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let log = PathBuf::from(format!("{}.{pid}", log_prefix.display()));
    let bindings = std::fs::read_to_string(&log)
        .unwrap_or_else(|e| panic!("reading the LD_DEBUG log {}: {e}", log.display()));
    Run {
        status,
        stdout: stdout.join().unwrap().unwrap(),
        stderr: stderr.join().unwrap().unwrap(),
        bindings,
    }
}

fn check_tool(name: &str, package: &str, expect: Expect) {
    assert!(matches!(package, "ibverbs-utils" | "perftest"));
    let program = find_program(name).unwrap_or_else(|| {
        panic!("{name} is not installed (Debian package {package}): run `cargo xtask deps`")
    });
    let library = Library::build();
    let ours = library.path.display().to_string();
    let run = run(&program, &library);
    let output = format!("--- stdout\n{}--- stderr\n{}", run.stdout, run.stderr);

    for error in LOADER_ERRORS {
        assert!(
            !run.stderr.contains(error),
            "{name}: the loader refused the library:\n{output}"
        );
    }

    // Every libibverbs the loader mentions is ours.
    for line in run.bindings.lines() {
        for word in line.split_whitespace() {
            if word.contains("libibverbs.so") {
                assert_eq!(word, ours, "{name}: another libibverbs took part: {line}");
            }
        }
    }
    // Every @IBVERBS import of the program was bound to ours with its version.
    let imports = imports_per_binary();
    let program_imports = imports
        .get(name)
        .unwrap_or_else(|| panic!("{name} in imports"));
    let from_program = format!(
        "binding file {} [0] to {ours} [0]: normal symbol",
        program.display()
    );
    let mut bound = 0;
    for import in program_imports {
        let Some((symbol, version)) = import.split_once('@') else {
            continue;
        };
        if !version.starts_with("IBVERBS_") {
            continue;
        }
        let binding = format!("{from_program} `{symbol}' [{version}]");
        assert!(
            run.bindings.lines().any(|l| l.ends_with(&binding)),
            "{name}: `{import}` was not bound to {ours}"
        );
        bound += 1;
    }
    assert!(bound >= 4, "{name}: only {bound} imports checked");
    // perftest links libmlx5 and libefa, whose private imports must bind to ours as well.
    if package == "perftest" {
        for provider in ["libmlx5.so.1", "libefa.so.1"] {
            let private = format!("/{provider} [0] to {ours} [0]: normal symbol");
            assert!(
                run.bindings
                    .lines()
                    .any(|l| l.contains(&private) && l.ends_with("[IBVERBS_PRIVATE_34]")),
                "{name}: {provider} did not bind its IBVERBS_PRIVATE_34 imports to {ours}"
            );
        }
    }

    match expect {
        Expect::EmptyTable => {
            assert!(
                run.status.success(),
                "{name} exits 0 with no device:\n{output}"
            );
            let lines: Vec<&str> = run
                .stdout
                .lines()
                .filter(|l| !l.trim().is_empty())
                .collect();
            assert_eq!(
                lines.len(),
                2,
                "{name} prints only the table header:\n{output}"
            );
            assert!(
                lines[0].contains("device") && lines[0].contains("node GUID"),
                "{output}"
            );
            assert!(lines[1].trim_start().starts_with("------"), "{output}");
        }
        Expect::NoDevice(message) => {
            assert!(
                !run.status.success(),
                "{name} fails with no device:\n{output}"
            );
            assert!(
                run.stdout.contains(message) || run.stderr.contains(message),
                "{name} says `{message}`:\n{output}"
            );
        }
    }
}

macro_rules! tools {
    ($($test:ident: $tool:literal from $package:literal, $expect:expr;)*) => {
        $(
            #[test]
            #[ignore = "needs Debian's ibverbs-utils and perftest (cargo xtask test installs and runs them)"]
            fn $test() {
                check_tool($tool, $package, $expect);
            }
        )*

        /// Every tool run above.
        const COVERED: &[&str] = &[$($tool),*];
    };
}

tools! {
    ibv_devices_lists_no_device: "ibv_devices" from "ibverbs-utils", Expect::EmptyTable;
    ibv_devinfo_finds_no_device: "ibv_devinfo" from "ibverbs-utils", PINGPONG;
    ibv_rc_pingpong_finds_no_device: "ibv_rc_pingpong" from "ibverbs-utils", PINGPONG;
    ibv_uc_pingpong_finds_no_device: "ibv_uc_pingpong" from "ibverbs-utils", PINGPONG;
    ibv_ud_pingpong_finds_no_device: "ibv_ud_pingpong" from "ibverbs-utils", PINGPONG;
    ibv_srq_pingpong_finds_no_device: "ibv_srq_pingpong" from "ibverbs-utils", PINGPONG;
    ibv_xsrq_pingpong_finds_no_device: "ibv_xsrq_pingpong" from "ibverbs-utils", BY_NAME;
    ibv_asyncwatch_finds_no_device: "ibv_asyncwatch" from "ibverbs-utils", BY_NAME;
    ib_write_bw_finds_no_device: "ib_write_bw" from "perftest", PERFTEST;
    ib_read_bw_finds_no_device: "ib_read_bw" from "perftest", PERFTEST;
    ib_send_bw_finds_no_device: "ib_send_bw" from "perftest", PERFTEST;
    ib_atomic_bw_finds_no_device: "ib_atomic_bw" from "perftest", PERFTEST;
    ib_write_lat_finds_no_device: "ib_write_lat" from "perftest", PERFTEST;
    ib_read_lat_finds_no_device: "ib_read_lat" from "perftest", PERFTEST;
    ib_send_lat_finds_no_device: "ib_send_lat" from "perftest", PERFTEST;
    ib_atomic_lat_finds_no_device: "ib_atomic_lat" from "perftest", PERFTEST;
}

/// Every ibverbs-utils and perftest program of `imports_per_binary.txt` is run above.
#[test]
fn every_recorded_verbs_tool_is_run() {
    let imports = imports_per_binary();
    let recorded: Vec<&str> = imports
        .keys()
        .map(String::as_str)
        .filter(|k| k.starts_with("ib_") || k.starts_with("ibv_"))
        .collect();
    let mut covered = COVERED.to_vec();
    covered.sort_unstable();
    assert_eq!(recorded, covered);
}
