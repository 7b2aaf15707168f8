//! Unmodified Debian 12 rdma_cm programs load the drop-in libraries and behave as on a
//! host without RDMA devices.
//!
//! Each program of rdmacm-utils and perftest that `abi/imports_per_binary.txt` records (and
//! pyverbs' `cmid` and `device` modules, through Debian's python3) runs with
//! `LD_LIBRARY_PATH` pointing at the freshly built `librdmacm.so.1` and `libibverbs.so.1`,
//! `LD_BIND_NOW=1` (every import is resolved at start, as these programs are linked) and
//! `LD_DEBUG=bindings` (to a file). The test asserts that:
//! - the loader accepted them: no `symbol lookup error`, `version … not found` or
//!   `undefined symbol`;
//! - every `@RDMACM_*` import of the program (read from the program itself with readelf,
//!   and equal to the recorded list) was bound to this library with its version, and no
//!   other librdmacm or libibverbs took part;
//! - the program then did what it does on a host without devices (no daemon serves the
//!   test's network namespace): the rdma_cm tools say "No RDMA devices were detected" or
//!   that `rdma_getaddrinfo` failed, as with Debian's librdmacm; perftest finds no device;
//!   the rsocket tools say rsocket is not implemented (`ENOSYS`).

mod common;

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Libraries, imported_dynamic_symbols, imports_per_binary};

/// How a program is expected to end without a device.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Exit non-zero, saying this.
    Fails(&'static str),
    /// Exit non-zero (the program stops at its own checks first).
    FailsQuietly,
    /// Exit 0.
    Succeeds,
}

const NO_DEVICES: Expect = Expect::Fails("No RDMA devices were detected");
const NO_ADDRESS: Expect = Expect::Fails("rdma_getaddrinfo");
const NO_RSOCKET: Expect = Expect::Fails("rsocket failed: Function not implemented");
const PERFTEST: Expect = Expect::Fails("Did not detect devices");

/// A hang is a failure, not a wait: the programs stop at their first rdma_cm call.
const TIMEOUT: Duration = Duration::from_secs(60);

/// What the loader prints when a program cannot start.
const LOADER_ERRORS: [&str; 5] = [
    "symbol lookup error",
    "version `",
    "undefined symbol",
    "error while loading shared libraries",
    "cannot open shared object",
];

/// perftest's raw Ethernet tests want both MAC addresses before they look for a device.
const RAW_ETHERNET: &[&str] = &[
    "--server",
    "-B",
    "02:00:00:00:00:01",
    "-E",
    "02:00:00:00:00:02",
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

fn run(program: &Path, args: &[&str], libraries: &Libraries) -> Run {
    let log_prefix = libraries.dir.join("ld-debug");
    let mut child = Command::new(program)
        .args(args)
        .env("LD_LIBRARY_PATH", &libraries.dir)
        .env("LD_BIND_NOW", "1")
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

/// The `@RDMACM_*` imports of an ELF file, read from it, checked against the record.
fn rdmacm_imports(file: &Path, recorded_as: &str) -> Vec<String> {
    let mut imports: Vec<String> = imported_dynamic_symbols(file)
        .into_iter()
        .filter(|s| s.contains("@RDMACM_"))
        .collect();
    imports.sort();
    let mut recorded = imports_per_binary()
        .remove(recorded_as)
        .unwrap_or_else(|| panic!("{recorded_as} in abi/imports_per_binary.txt"));
    recorded.sort();
    assert_eq!(
        imports,
        recorded,
        "{} imports what abi/imports_per_binary.txt records",
        file.display()
    );
    imports
}

/// Checks that the loader took `run`'s program with only our libraries, and bound every
/// import of `importer` (the program, or a library it loaded) to ours.
fn check_bindings(
    name: &str,
    run: &Run,
    libraries: &Libraries,
    importer: &Path,
    imports: &[String],
) {
    let output = format!("--- stdout\n{}--- stderr\n{}", run.stdout, run.stderr);
    for error in LOADER_ERRORS {
        assert!(
            !run.stderr.contains(error),
            "{name}: the loader refused the libraries:\n{output}"
        );
    }
    let ours_rdmacm = libraries.rdmacm.display().to_string();
    let ours_ibverbs = libraries.ibverbs.display().to_string();
    for line in run.bindings.lines() {
        for word in line.split_whitespace() {
            if word.contains("librdmacm.so") {
                assert_eq!(
                    word, ours_rdmacm,
                    "{name}: another librdmacm took part: {line}"
                );
            }
            if word.contains("libibverbs.so") {
                assert_eq!(
                    word, ours_ibverbs,
                    "{name}: another libibverbs took part: {line}"
                );
            }
        }
    }
    let from = format!(
        "binding file {} [0] to {ours_rdmacm} [0]: normal symbol",
        importer.display()
    );
    for import in imports {
        let (symbol, version) = import.split_once('@').unwrap();
        let binding = format!("{from} `{symbol}' [{version}]");
        assert!(
            run.bindings.lines().any(|l| l.ends_with(&binding)),
            "{name}: `{import}` was not bound to {ours_rdmacm}"
        );
    }
}

fn check_outcome(name: &str, run: &Run, expect: Expect) {
    let output = format!("--- stdout\n{}--- stderr\n{}", run.stdout, run.stderr);
    match expect {
        Expect::Fails(message) => {
            assert!(
                !run.status.success(),
                "{name} fails without a device:\n{output}"
            );
            assert!(
                run.stdout.contains(message) || run.stderr.contains(message),
                "{name} says `{message}`:\n{output}"
            );
        }
        Expect::FailsQuietly => {
            assert!(
                !run.status.success(),
                "{name} fails without a device:\n{output}"
            );
        }
        Expect::Succeeds => assert!(run.status.success(), "{name} exits 0:\n{output}"),
    }
}

fn check_tool(name: &str, args: &[&str], package: &str, expect: Expect) {
    assert!(matches!(package, "rdmacm-utils" | "perftest"));
    let program = find_program(name).unwrap_or_else(|| {
        panic!("{name} is not installed (Debian package {package}): run `cargo xtask deps`")
    });
    let imports = rdmacm_imports(&program, name);
    assert!(imports.len() >= 6, "{name}: {} imports", imports.len());
    let libraries = Libraries::build();
    let run = run(&program, args, &libraries);
    check_bindings(name, &run, &libraries, &program, &imports);
    check_outcome(name, &run, expect);
}

macro_rules! tools {
    ($($test:ident: $tool:literal $args:expr, from $package:literal, $expect:expr;)*) => {
        $(
            #[test]
            #[ignore = "needs Debian's rdmacm-utils and perftest (cargo xtask test installs and runs them)"]
            fn $test() {
                check_tool($tool, $args, $package, $expect);
            }
        )*

        /// Every program run above.
        const COVERED: &[&str] = &[$($tool),*];
    };
}

tools! {
    rping_finds_no_device: "rping" &["-s"], from "rdmacm-utils", NO_DEVICES;
    ucmatose_finds_no_device: "ucmatose" &["-s", "127.0.0.1"], from "rdmacm-utils", NO_DEVICES;
    udaddy_finds_no_device: "udaddy" &["-s", "127.0.0.1"], from "rdmacm-utils", NO_DEVICES;
    cmtime_finds_no_device: "cmtime" &["-s", "127.0.0.1"], from "rdmacm-utils", NO_DEVICES;
    mckey_finds_no_device: "mckey" &["-m", "224.0.0.9"], from "rdmacm-utils", NO_DEVICES;
    rdma_server_finds_no_address: "rdma_server" &[], from "rdmacm-utils", NO_ADDRESS;
    rdma_client_finds_no_address: "rdma_client" &["-s", "127.0.0.1"], from "rdmacm-utils", NO_ADDRESS;
    rdma_xserver_finds_no_address: "rdma_xserver" &[], from "rdmacm-utils", NO_ADDRESS;
    rdma_xclient_finds_no_address: "rdma_xclient" &["-s", "127.0.0.1"], from "rdmacm-utils", NO_ADDRESS;
    rstream_has_no_rsocket: "rstream" &["-s", "127.0.0.1"], from "rdmacm-utils", NO_RSOCKET;
    rcopy_has_no_rsocket: "rcopy" &[], from "rdmacm-utils", NO_RSOCKET;
    riostream_has_no_rsocket: "riostream" &["-s", "127.0.0.1"], from "rdmacm-utils", NO_RSOCKET;
    udpong_has_no_rsocket: "udpong" &["-s", "127.0.0.1"], from "rdmacm-utils", NO_RSOCKET;
    ib_send_bw_finds_no_device: "ib_send_bw" &["-R"], from "perftest", PERFTEST;
    ib_write_bw_finds_no_device: "ib_write_bw" &["-R"], from "perftest", PERFTEST;
    ib_read_bw_finds_no_device: "ib_read_bw" &["-R"], from "perftest", PERFTEST;
    ib_atomic_bw_finds_no_device: "ib_atomic_bw" &["-R"], from "perftest", PERFTEST;
    ib_send_lat_finds_no_device: "ib_send_lat" &["-R"], from "perftest", PERFTEST;
    ib_write_lat_finds_no_device: "ib_write_lat" &["-R"], from "perftest", PERFTEST;
    ib_read_lat_finds_no_device: "ib_read_lat" &["-R"], from "perftest", PERFTEST;
    ib_atomic_lat_finds_no_device: "ib_atomic_lat" &["-R"], from "perftest", PERFTEST;
    raw_ethernet_bw_finds_no_device: "raw_ethernet_bw" RAW_ETHERNET, from "perftest", PERFTEST;
    raw_ethernet_lat_finds_no_device: "raw_ethernet_lat" RAW_ETHERNET, from "perftest", PERFTEST;
    raw_ethernet_fs_rate_finds_no_device: "raw_ethernet_fs_rate" RAW_ETHERNET, from "perftest", PERFTEST;
    raw_ethernet_burst_lat_loads: "raw_ethernet_burst_lat" RAW_ETHERNET, from "perftest", Expect::FailsQuietly;
}

/// pyverbs' rdma_cm and device modules load in Debian's python3 on the libraries (the
/// rdma-core test suite imports them).
#[test]
#[ignore = "needs Debian's python3-pyverbs (cargo xtask test installs and runs it)"]
fn pyverbs_modules_load() {
    let python = Path::new("/usr/bin/python3");
    let modules = Path::new("/usr/lib/python3/dist-packages/pyverbs");
    assert!(
        modules.is_dir(),
        "pyverbs is not installed (Debian package python3-pyverbs): run `cargo xtask deps`"
    );
    let libraries = Libraries::build();
    let run = run(
        python,
        &["-c", "import pyverbs.cmid, pyverbs.device"],
        &libraries,
    );
    for (module, recorded_as) in [
        ("cmid", "cmid.cpython-311-x86_64-linux-gnu.so"),
        ("device", "device.cpython-311-x86_64-linux-gnu.so"),
    ] {
        let file = modules.join(recorded_as);
        let imports = rdmacm_imports(&file, recorded_as);
        check_bindings(module, &run, &libraries, &file, &imports);
    }
    check_outcome("pyverbs", &run, Expect::Succeeds);
}

/// qemu (whose RDMA migration links librdmacm; the interop checks install it) loads the
/// same way, and so do fio and qperf when they are installed.
#[test]
#[ignore = "needs Debian's qemu-system-x86 (cargo xtask test installs and runs it)"]
fn qemu_and_the_other_installed_consumers_load() {
    assert!(
        find_program("qemu-system-x86_64").is_some(),
        "qemu-system-x86_64 is not installed (Debian package qemu-system-x86): run `cargo xtask deps`"
    );
    for name in ["qemu-system-x86_64", "fio", "qperf"] {
        let Some(program) = find_program(name) else {
            continue;
        };
        let imports = rdmacm_imports(&program, name);
        let libraries = Libraries::build();
        let run = run(&program, &["--version"], &libraries);
        check_bindings(name, &run, &libraries, &program, &imports);
        check_outcome(name, &run, Expect::Succeeds);
    }
}

/// Every rdmacm-utils and perftest program of `imports_per_binary.txt` is run above (the
/// other entries are libraries, and qemu, fio and qperf, run by the test before).
#[test]
fn every_recorded_rdmacm_tool_is_run() {
    let not_installed_here = ["fio", "qperf", "qemu-system-x86_64", "qemu-system-i386"];
    let recorded: Vec<String> = imports_per_binary()
        .into_keys()
        .filter(|k| !k.contains(".so") && !not_installed_here.contains(&k.as_str()))
        .collect();
    let mut covered: Vec<String> = COVERED.iter().map(|s| s.to_string()).collect();
    covered.sort_unstable();
    assert_eq!(recorded, covered);
}
