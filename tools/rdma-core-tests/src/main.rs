//! `xroce-rdma-core-tests` (run as `cargo xtask rdma-core-tests`): rdma-core's own Python test suite
//! on xroce.
//!
//! Debian's `python3-pyverbs` ships rdma-core's test suite (`/usr/share/doc/rdma-core/tests`,
//! started with `run_tests.py`); pyverbs is a Cython binding over `libibverbs.so.1`, so
//! with the drop-in library first on `LD_LIBRARY_PATH` the suite drives xroce like any
//! RDMA device. Most of its tests put both ends on one device: xroce's loopback carries
//! them.
//!
//! It needs `python3-pyverbs` (which `cargo xtask` installs), builds `xroced` and the library
//! (release), copies the suite (Debian compresses some of its files) under
//! `target/xroce/rdma-core-tests/`, brings up one daemon in a lab namespace and runs the
//! suite there on xroce's device (`--dev xroce0`, the suite's own option), one test at a
//! time through a small driver (`driver.py`) that loads the suite as
//! `run_tests.py` does and reports each test's outcome on a pipe. A test that outlives
//! `--timeout` is killed (with everything it started) and counted as an error, and the
//! run goes on with the next test. It prints the counts (passed, failed, skipped, errors),
//! each failure with its reason and the skips by reason, keeps the suite's output in
//! `target/xroce/rdma-core-tests/suite.log`, and exits non-zero when a test failed or
//! erred. `--report FILE` also writes every test's outcome (tab-separated: status, id,
//! reason), which `tests/tests/ibverbs/rdma_core_suite.rs` checks.

use std::collections::{BTreeMap, VecDeque};
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use xroce_lab::{Lab, LabConfig, Side};

/// Where Debian's `python3-pyverbs` puts the suite.
const SUITE: &str = "/usr/share/doc/rdma-core/tests";
/// Run before the driver, in a mount namespace of its own: puts a tmpfs over /sys/class
/// with links back to every real class (kept on a tmpfs at /mnt), and adds
/// `infiniband/$1/device/net/$2` for the device and its interface; then runs the rest of
/// the arguments. Nothing outside the new mount namespace changes.
const SYSFS_SHIM: &str = r#"set -e
dev=$1; ifname=$2; shift 2
mount -t tmpfs xroce-shim /mnt
mkdir /mnt/class
mount --bind /sys/class /mnt/class
mount -t tmpfs xroce-shim /sys/class
for c in /mnt/class/*; do ln -s "$c" "/sys/class/${c##*/}"; done
mkdir -p "/sys/class/infiniband/$dev/device/net/$ifname"
exec "$@"
"#;

/// The module whose tests fork the driver's process (multiprocessing) for their two sides.
const FORKING_TESTS: &str = "tests.test_rdmacm.";

/// Debian's interpreter, the one `python3-pyverbs` is built for (not whatever `python3`
/// comes first on `PATH`).
const PYTHON: &str = "/usr/bin/python3";
/// The device the daemon serves.
const DEVICE: &str = "xroce0";
/// The driver that runs the suite one test at a time.
const DRIVER: &str = include_str!("driver.py");
/// How long the driver may take to load the suite.
const STARTUP: Duration = Duration::from_secs(120);

#[derive(Debug, clap::Parser)]
#[command(
    name = "cargo xtask rdma-core-tests",
    about = "Run rdma-core's own test suite (Debian's python3-pyverbs) on xroce's device"
)]
struct Args {
    /// The longest one test may run, in seconds; it is then killed and counted as an error.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Only the tests whose id contains one of these words (repeatable).
    #[arg(long)]
    only: Vec<String>,
    /// Also write every test's outcome to FILE (tab-separated: status, id, reason).
    #[arg(long)]
    report: Option<PathBuf>,
    /// Print every test's outcome as it comes, not only failures.
    #[arg(long, short)]
    verbose: bool,
}

/// What became of one test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Status {
    Passed,
    Failed,
    Skipped,
    Error,
}

impl Status {
    /// The driver's word for an outcome, as counted: an expected failure is a pass, an
    /// unexpected success a failure (as unittest counts them).
    fn parse(word: &str) -> Status {
        match word {
            "passed" | "expected-failure" => Status::Passed,
            "failed" | "unexpected-success" => Status::Failed,
            "skipped" => Status::Skipped,
            _ => Status::Error,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
            Status::Error => "error",
        }
    }
}

/// One test's outcome.
#[derive(Debug)]
struct Outcome {
    id: String,
    status: Status,
    reason: String,
}

fn main() {
    let args = <Args as clap::Parser>::parse();
    if let Err(e) = run(&args) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<()> {
    // First, before any thread exists: Ctrl-C and SIGTERM tear the lab down.
    xroce_lab::signals::install().context("installing the Ctrl-C handler")?;
    let _ = xroce_lab::cleanup_stale();
    xroce_lab::require_packages(&["python3-pyverbs", "iproute2"])?;
    // Safety: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("rdma-core-tests needs root (network namespaces, AF_XDP)");
    }

    eprintln!("rdma-core-tests: building xroced and the drop-in libraries (release)");
    let xroced = xroce_lab::daemons::xroced_release().context("building xroced")?;
    let (lib, _) = xroce_artifacts::install_drop_in()?;
    let work = lib
        .parent()
        .context("the library directory has no parent")?
        .join("rdma-core-tests");
    let suite = prepare_suite(&work)?;
    let driver = work.join("driver.py");
    fs::write(&driver, DRIVER).with_context(|| format!("writing {}", driver.display()))?;
    let log = work.join("suite.log");
    fs::write(&log, "").with_context(|| format!("creating {}", log.display()))?;

    let lab = Lab::new(&LabConfig::default()).context("building the lab (needs iproute2)")?;
    let daemon = Daemon::start(&lab, &xroced, &work.join("xroced.log"))?;
    // The suite's huge-page tests map 2 MiB pages: make sure a few are free (best effort;
    // they go back to the pool when the run ends).
    let _pages = xroce_lab::hugepages::HugepageReservation::reserve(4)
        .inspect_err(|e| eprintln!("rdma-core-tests: no hugepages reserved: {e}"))
        .ok();

    let runner = Runner {
        lab: &lab,
        lib: &lib,
        driver: &driver,
        suite: &suite,
        log: &log,
        work: &work,
        timeout: Duration::from_secs(args.timeout.max(1)),
        verbose: args.verbose,
    };
    let mut ids = runner.list()?;
    if !args.only.is_empty() {
        ids.retain(|id| args.only.iter().any(|w| id.contains(w.as_str())));
    }
    eprintln!(
        "rdma-core-tests: {} tests of python3-pyverbs {} on {DEVICE} (at most {} s each)",
        ids.len(),
        package_version("python3-pyverbs"),
        args.timeout
    );
    // The rdma_cm tests fork their two sides from the driver: they run in a driver of
    // their own, started fresh (see the README's known issues: a process that registered
    // heap memory and then forks).
    let (forking, rest): (Vec<String>, Vec<String>) = ids
        .into_iter()
        .partition(|id| id.starts_with(FORKING_TESTS));
    let mut outcomes = runner.run(rest)?;
    outcomes.extend(runner.run(forking)?);
    drop(daemon);
    drop(lab);

    if let Some(path) = &args.report {
        let text: String = outcomes
            .iter()
            .map(|o| format!("{}\t{}\t{}\n", o.status.name(), o.id, o.reason))
            .collect();
        fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let bad = summarize(&outcomes, &log);
    if bad > 0 {
        bail!("{bad} tests failed or erred (see {})", log.display());
    }
    Ok(())
}

/// Copies the suite to `work/suite/tests`, uncompressing the files Debian compressed.
fn prepare_suite(work: &Path) -> Result<PathBuf> {
    let root = work.join("suite");
    let tests = root.join("tests");
    if root.exists() {
        fs::remove_dir_all(&root).with_context(|| format!("removing {}", root.display()))?;
    }
    fs::create_dir_all(&tests).with_context(|| format!("creating {}", tests.display()))?;
    let entries = fs::read_dir(SUITE)
        .with_context(|| format!("reading {SUITE} (is python3-pyverbs installed?)"))?;
    let mut compressed = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let to = tests.join(&name);
        fs::copy(entry.path(), &to)
            .with_context(|| format!("copying {}", entry.path().display()))?;
        if name.to_string_lossy().ends_with(".gz") {
            compressed.push(to);
        }
    }
    if !compressed.is_empty() {
        let status = std::process::Command::new("gzip")
            .arg("-d")
            .args(&compressed)
            .status()
            .context("running gzip -d")?;
        if !status.success() {
            bail!("gzip -d failed ({status})");
        }
    }
    if !tests.join("run_tests.py").is_file() {
        bail!("{SUITE} has no run_tests.py");
    }
    Ok(root)
}

fn package_version(package: &str) -> String {
    std::process::Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", package])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "(unknown version)".into())
}

/// `xroced` serving host A of the lab; stopped on drop.
struct Daemon {
    child: Child,
}

impl Daemon {
    fn start(lab: &Lab, xroced: &Path, log: &Path) -> Result<Daemon> {
        let file = fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let bin = xroced.to_string_lossy().into_owned();
        let host = lab.host(Side::A);
        let mut cmd = lab.command(
            Side::A,
            &[&bin, "--netdev", host.interface.as_str(), "--name", DEVICE],
        );
        cmd.stdout(Stdio::null()).stderr(file);
        // The daemon dies with us even when we are killed (no Drop runs then).
        let die_with_parent = || {
            // Safety: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no memory.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
            Ok(())
        };
        // Safety: the closure only makes one async-signal-safe system call.
        unsafe { cmd.pre_exec(die_with_parent) };
        let child = cmd.spawn().context("starting xroced")?;
        let mut daemon = Daemon { child };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let up = lab
                .run_in(Side::A, || xroce_lab::daemons::serving(DEVICE))
                .context("entering the lab's namespace")?;
            if up {
                return Ok(daemon);
            }
            if let Some(status) = daemon.child.try_wait()? {
                bail!("xroced exited ({status}): see {}", log.display());
            }
            if Instant::now() > deadline {
                bail!("xroced did not come up in 30 s: see {}", log.display());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // Only a child not reaped yet: a reaped child's pid may be another process's.
        if let Ok(None) = self.child.try_wait() {
            // Safety: kill(2) on our own unreaped child.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Runs the driver in the lab.
struct Runner<'a> {
    lab: &'a Lab,
    lib: &'a Path,
    driver: &'a Path,
    suite: &'a Path,
    log: &'a Path,
    work: &'a Path,
    timeout: Duration,
    verbose: bool,
}

/// A running driver: its process group and its report lines.
struct Driver {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Driver {
    /// Kills the driver and whatever it started (its process group), then reaps it.
    fn kill(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // Safety: kill(2) on the process group our unreaped child leads (it called
            // setpgid(0, 0) before exec).
            unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        }
        let _ = self.child.wait();
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Runner<'_> {
    /// Starts the driver with `mode_args` (`--list`, or `--run FILE`).
    fn spawn(&self, mode_args: &[&str]) -> Result<Driver> {
        let mut fds = [0 as libc::c_int; 2];
        // Safety: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error()).context("creating the report pipe");
        }
        // Safety: pipe2 just returned this descriptor; it is owned once.
        let read = unsafe { OwnedFd::from_raw_fd(fds[0]) };
        // Safety: as above.
        let write = unsafe { OwnedFd::from_raw_fd(fds[1]) };
        let driver = self.driver.to_string_lossy().into_owned();
        let suite = self.suite.to_string_lossy().into_owned();
        let interface = self.lab.host(Side::A).interface.clone();
        // The suite finds a device's network interface (and from it the IP address its
        // rdma_cm tests use) under /sys/class/infiniband/<dev>/device/net/, which the
        // kernel makes for its own RDMA devices only: give it one, in a mount namespace
        // of the driver's own.
        let mut argv = vec![
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "/bin/sh",
            "-c",
            SYSFS_SHIM,
            "sysfs-shim",
            DEVICE,
            interface.as_str(),
            PYTHON,
            driver.as_str(),
            suite.as_str(),
        ];
        argv.extend_from_slice(mode_args);
        // The suite's own option: only xroce's device.
        argv.extend_from_slice(&["--dev", DEVICE]);
        let mut cmd = self.lab.command(Side::A, &argv);
        let log = fs::OpenOptions::new()
            .append(true)
            .open(self.log)
            .with_context(|| format!("opening {}", self.log.display()))?;
        cmd.env("LD_LIBRARY_PATH", self.lib)
            .env_remove("LD_PRELOAD")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .current_dir(self.work)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let write_fd = write.as_raw_fd();
        let before_exec = move || {
            // Safety: dup2 is async-signal-safe; it puts the pipe on descriptor 3 (without
            // close-on-exec) for the driver.
            if unsafe { libc::dup2(write_fd, 3) } < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Safety: setpgid is async-signal-safe: the driver leads its own process group,
            // so a hung test is killed with everything it started.
            if unsafe { libc::setpgid(0, 0) } < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Safety: prctl(PR_SET_PDEATHSIG) is async-signal-safe: it dies with us.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
            Ok(())
        };
        // Safety: the closure makes only async-signal-safe system calls and touches no
        // memory but its captured descriptor number.
        unsafe { cmd.pre_exec(before_exec) };
        let child = cmd.spawn().context("starting the suite's driver")?;
        drop(write);
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(fs::File::from(read)).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Driver { child, lines })
    }

    /// The ids of every test the suite has.
    fn list(&self) -> Result<Vec<String>> {
        let mut driver = self.spawn(&["--list"])?;
        let mut ids = Vec::new();
        let deadline = Instant::now() + STARTUP;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match driver.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(id) = line.strip_prefix("TEST\t") {
                        ids.push(id.to_owned());
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    bail!("listing the suite's tests took over {STARTUP:?}")
                }
            }
        }
        let status = driver.child.wait()?;
        if !status.success() || ids.is_empty() {
            bail!(
                "the suite did not load ({status}): see {}",
                self.log.display()
            );
        }
        Ok(ids)
    }

    /// Runs `ids`, each bounded by the timeout; a driver that hangs or dies is replaced
    /// and the run goes on after the test it was running.
    fn run(&self, ids: Vec<String>) -> Result<Vec<Outcome>> {
        let mut remaining: VecDeque<String> = ids.into();
        let mut outcomes = Vec::new();
        let ids_file = self.work.join("ids.txt");
        while !remaining.is_empty() {
            if xroce_lab::signals::interrupted() {
                bail!("interrupted");
            }
            let list: String = remaining.iter().map(|id| format!("{id}\n")).collect();
            fs::write(&ids_file, list)?;
            let ids_text = ids_file.to_string_lossy().into_owned();
            let mut driver = self.spawn(&["--run", &ids_text])?;
            let mut current: Option<(String, Instant)> = None;
            loop {
                let bound = match &current {
                    Some((_, since)) => *since + self.timeout,
                    // Loading the suite, or between two tests.
                    None => Instant::now() + STARTUP.min(self.timeout * 2),
                };
                let left = bound.saturating_duration_since(Instant::now());
                match driver.lines.recv_timeout(left) {
                    Ok(line) => {
                        let fields: Vec<&str> = line.splitn(4, '\t').collect();
                        match fields.as_slice() {
                            ["START", id] => current = Some(((*id).to_owned(), Instant::now())),
                            ["RESULT", id, status, rest @ ..] => {
                                let outcome = Outcome {
                                    id: (*id).to_owned(),
                                    status: Status::parse(status),
                                    reason: rest.first().copied().unwrap_or("").to_owned(),
                                };
                                remaining.retain(|r| r != id);
                                current = None;
                                self.show(&outcome);
                                outcomes.push(outcome);
                            }
                            _ => {}
                        }
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        driver.kill();
                        let id = match current.take() {
                            Some((id, _)) => id,
                            // The driver hung before starting a test: blame the next one so
                            // the run cannot loop.
                            None => remaining.front().cloned().unwrap_or_default(),
                        };
                        let outcome = Outcome {
                            reason: format!(
                                "timed out after {} s (killed with everything it started)",
                                self.timeout.as_secs()
                            ),
                            id,
                            status: Status::Error,
                        };
                        remaining.retain(|r| *r != outcome.id);
                        self.show(&outcome);
                        outcomes.push(outcome);
                        break;
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        let status = driver.child.wait()?;
                        if let Some((id, _)) = current.take() {
                            let outcome = Outcome {
                                reason: format!("the test process died ({status})"),
                                id,
                                status: Status::Error,
                            };
                            remaining.retain(|r| *r != outcome.id);
                            self.show(&outcome);
                            outcomes.push(outcome);
                        } else if !remaining.is_empty() {
                            bail!(
                                "the suite's driver exited ({status}) before running {}: see {}",
                                remaining.front().map_or("", String::as_str),
                                self.log.display()
                            );
                        }
                        break;
                    }
                }
            }
        }
        Ok(outcomes)
    }

    fn show(&self, o: &Outcome) {
        match o.status {
            Status::Failed | Status::Error => {
                println!(
                    "{:7} {}: {}",
                    o.status.name().to_uppercase(),
                    o.id,
                    o.reason
                )
            }
            _ if self.verbose => {
                println!("{:7} {} {}", o.status.name(), o.id, o.reason)
            }
            _ => {}
        }
    }
}

/// Prints the counts, the failures and the skips by reason; returns how many tests
/// failed or erred.
fn summarize(outcomes: &[Outcome], log: &Path) -> usize {
    let count = |s: Status| outcomes.iter().filter(|o| o.status == s).count();
    let (passed, failed, skipped, errors) = (
        count(Status::Passed),
        count(Status::Failed),
        count(Status::Skipped),
        count(Status::Error),
    );
    let mut skips: BTreeMap<&str, usize> = BTreeMap::new();
    for o in outcomes.iter().filter(|o| o.status == Status::Skipped) {
        *skips.entry(o.reason.as_str()).or_default() += 1;
    }
    let mut skips: Vec<(&str, usize)> = skips.into_iter().collect();
    skips.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    println!();
    println!("skipped, by reason:");
    for (reason, n) in &skips {
        println!("  {n:4}  {reason}");
    }
    if failed + errors > 0 {
        println!();
        println!("failed and erred (tracebacks in {}):", log.display());
        for o in outcomes
            .iter()
            .filter(|o| matches!(o.status, Status::Failed | Status::Error))
        {
            println!("  {:7} {}: {}", o.status.name(), o.id, o.reason);
        }
    }
    println!();
    println!(
        "rdma-core tests on {DEVICE}: {} tests: {passed} passed, {failed} failed, {skipped} skipped, {errors} errors",
        outcomes.len()
    );
    failed + errors
}
