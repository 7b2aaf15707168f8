//! What the `ibverbs_*` tests share: the drop-in `libibverbs.so.1` built by cargo, a lab
//! with a daemon on each host, and running Debian's unmodified verbs tools on it — servers
//! on host A, clients on host B (`ip netns exec`), each bounded in time and killed on every
//! exit path — plus parsers for the figures the tools print.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test file uses a different part"
)]

use std::path::PathBuf;
use std::process::{Child, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use xroce_artifacts::{Profile, Target};
use xroce_impair::Impairment;
use xroce_impair::process::ImpairProcess;
use xroce_lab::daemons::TwoHosts;
use xroce_lab::{LabConfig, Side};

/// The longest a tool may run. Only a bound against hanging forever: nothing asserts how
/// long it took.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// The tests of one file run one at a time: each drives two daemons and two busy-polling
/// tools, which is all this machine's CPUs can take.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Fails unless this test can run: root (network namespaces, AF_XDP) and the Debian
/// programs it runs, saying how to get what is missing.
pub fn require_tools(tools: &[&str]) {
    xroce_lab::require_root();
    for tool in tools {
        assert!(
            find_program(tool).is_some(),
            "{tool} is not installed (Debian packages ibverbs-utils, perftest): run `cargo \
             xtask deps`"
        );
    }
}

fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// The libraries under test, installed as `libibverbs.so.1` and `librdmacm.so.1` in a
/// private directory that is removed on drop.
#[derive(Debug)]
pub struct Library {
    /// The directory to put in `LD_LIBRARY_PATH`.
    pub dir: PathBuf,
}

impl Library {
    /// Builds the cdylib (with the profile of this test build; a no-op when up to date)
    /// and installs a private copy under its soname.
    pub fn build() -> Library {
        static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("xroce-ibverbs-e2e-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("creating the library directory");
        std::fs::copy(
            artifact("xroce-ibverbs", "ibverbs"),
            dir.join("libibverbs.so.1"),
        )
        .expect("installing libibverbs.so.1");
        std::fs::copy(
            artifact("xroce-rdmacm", "rdmacm"),
            dir.join("librdmacm.so.1"),
        )
        .expect("installing librdmacm.so.1");
        Library { dir }
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Builds a drop-in library (`package`, library `lib`) once per test process and returns
/// cargo's path to the cdylib.
fn artifact(package: &'static str, lib: &'static str) -> PathBuf {
    static ARTIFACTS: Mutex<Vec<(&'static str, PathBuf)>> = Mutex::new(Vec::new());
    let mut built = ARTIFACTS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, p)) = built.iter().find(|(p, _)| *p == package) {
        return p.clone();
    }
    let path = xroce_artifacts::build(package, Target::Cdylib(lib), Profile::of_this_build())
        .unwrap_or_else(|e| panic!("{e}"));
    built.push((package, path.clone()));
    path
}

/// A lab with a daemon on each host and the library to run tools with.
#[derive(Debug)]
pub struct Bench {
    /// The impairment router's forwarder, if the lab has one (stopped first).
    pub impair: Option<ImpairProcess>,
    /// The library (dropped after the hosts).
    pub library: Library,
    /// The hosts and their daemons.
    pub hosts: TwoHosts,
}

impl Bench {
    /// A fresh lab (its namespaces are removed and its daemons stopped on drop).
    pub fn start() -> Bench {
        Bench::start_with(&[])
    }

    /// A fresh lab whose daemons run with `extra` arguments (`--max-pds 1`, …).
    pub fn start_with(extra: &[&str]) -> Bench {
        let library = Library::build();
        let hosts = TwoHosts::start(&LabConfig::default(), extra).expect("lab with two daemons");
        Bench {
            impair: None,
            library,
            hosts,
        }
    }

    /// A fresh lab whose hosts are joined through a router namespace, where the
    /// `xroce-impair` forwarder impairs RoCEv2 frames both ways as `impairment` says.
    pub fn impaired(impairment: &Impairment) -> Bench {
        let library = Library::build();
        let config = LabConfig {
            router: true,
            ..LabConfig::default()
        };
        let hosts = TwoHosts::start(&config, &[]).expect("lab with a router and two daemons");
        let impair = ImpairProcess::start(&hosts.lab, impairment).expect("impairment router");
        Bench {
            impair: Some(impair),
            library,
            hosts,
        }
    }

    /// The IPv4 address of `side`, as tools take it.
    pub fn address(&self, side: Side) -> String {
        self.hosts.lab.host(side).ipv4.to_string()
    }

    /// Starts `argv` on `side` with the library, its output captured.
    pub fn spawn(&self, side: Side, argv: &[&str]) -> Running {
        self.spawn_with_env(side, argv, &[])
    }

    /// As [`Bench::spawn`], with `env` added to the tool's environment.
    pub fn spawn_with_env(&self, side: Side, argv: &[&str], env: &[(&str, &str)]) -> Running {
        let mut cmd = self.hosts.lab.command(side, argv);
        cmd.envs(env.iter().copied());
        cmd.env("LD_LIBRARY_PATH", &self.library.dir)
            .env_remove("LD_PRELOAD")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting {argv:?}: {e}"));
        let stdout = drain(child.stdout.take().expect("piped"));
        let stderr = drain(child.stderr.take().expect("piped"));
        Running {
            what: argv.join(" "),
            child: Some(child),
            stdout: Some(stdout),
            stderr: Some(stderr),
        }
    }

    /// Runs `argv` on `side` to completion.
    pub fn run(&self, side: Side, argv: &[&str]) -> Finished {
        self.spawn(side, argv).finish()
    }

    /// Waits until something listens on TCP `port` on `side` (a tool's server is ready
    /// for its client).
    pub fn wait_listening(&self, side: Side, port: u16, server: &mut Running) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let listening = self
                .hosts
                .lab
                .run_in(side, || listens(port))
                .expect("entering the namespace");
            if listening {
                return;
            }
            if let Some(status) = server.try_status() {
                let done = server.take_output(status);
                panic!("the server exited before listening:\n{done}");
            }
            assert!(
                Instant::now() < deadline,
                "nothing listens on port {port} after {PATIENCE:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until an rdma_cm id listens in `side`'s daemon (a tool's rdma_cm server is
    /// ready for its client), at least `ids` of them.
    pub fn wait_cm_listening(&self, side: Side, ids: u64, server: &mut Running) {
        let ctx = self.hosts.open(side).expect("opening the device");
        let deadline = Instant::now() + PATIENCE;
        loop {
            let stats = ctx.stats().expect("the daemon's counters");
            if xroce_lab::daemons::counter(&stats, "cm_listening") >= ids {
                return;
            }
            if let Some(status) = server.try_status() {
                let done = server.take_output(status);
                panic!("the server exited before listening:\n{done}");
            }
            assert!(
                Instant::now() < deadline,
                "no rdma_cm id listens after {PATIENCE:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs an rdma_cm tool's server (`server_argv`) on `server_side` and, once it
    /// listens, its client (`client_argv`) on the other side or the same one; both must
    /// exit. Returns (server, client).
    pub fn cm_pair(
        &self,
        server_side: Side,
        client_side: Side,
        server_argv: &[&str],
        client_argv: &[&str],
    ) -> (Finished, Finished) {
        let mut server = self.spawn(server_side, server_argv);
        self.wait_cm_listening(server_side, 1, &mut server);
        let client = self.spawn(client_side, client_argv).finish();
        let server = server.finish();
        (server, client)
    }

    /// Runs a tool's server on A and its client on B (`server_args` and `client_args`
    /// follow the tool name; the client gets A's address last). Both must exit; returns
    /// (server, client).
    pub fn pair(
        &self,
        tool: &str,
        port: u16,
        server_args: &[&str],
        client_args: &[&str],
    ) -> (Finished, Finished) {
        self.pair_with_server_env(tool, port, server_args, client_args, &[])
    }

    /// As [`Bench::pair`], with `server_env` added to the server's environment.
    pub fn pair_with_server_env(
        &self,
        tool: &str,
        port: u16,
        server_args: &[&str],
        client_args: &[&str],
        server_env: &[(&str, &str)],
    ) -> (Finished, Finished) {
        let port_text = port.to_string();
        let mut argv = vec![tool, "-p", &port_text];
        argv.extend_from_slice(server_args);
        let mut server = self.spawn_with_env(Side::A, &argv, server_env);
        self.wait_listening(Side::A, port, &mut server);
        let address = self.address(Side::A);
        let mut argv = vec![tool, "-p", &port_text];
        argv.extend_from_slice(client_args);
        argv.push(&address);
        let client = self.spawn(Side::B, &argv).finish();
        let server = server.finish();
        (server, client)
    }
}

/// Whether a TCP socket of the calling thread's network namespace listens on `port`.
fn listens(port: u16) -> bool {
    let wanted = format!(":{port:04X}");
    ["/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .any(|table| {
            table.lines().skip(1).any(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                // sl local_address rem_address st ...; 0A is LISTEN.
                fields.len() > 3 && fields[1].ends_with(&wanted) && fields[3] == "0A"
            })
        })
}

fn drain(mut pipe: impl std::io::Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Checks a pair's outcome: both exited 0.
pub fn both_ok(what: &str, (server, client): (Finished, Finished)) -> (Finished, Finished) {
    assert!(
        server.status.success() && client.status.success(),
        "{what}:\n--- server\n{server}\n--- client\n{client}"
    );
    (server, client)
}

/// A running tool; killed on drop if it is still running (every exit path of a test).
#[derive(Debug)]
pub struct Running {
    what: String,
    child: Option<Child>,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
}

impl Running {
    fn try_status(&mut self) -> Option<ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    fn take_output(&mut self, status: ExitStatus) -> Finished {
        self.child = None;
        let join = |h: Option<JoinHandle<String>>| {
            h.map(|h| h.join().unwrap_or_default()).unwrap_or_default()
        };
        Finished {
            what: std::mem::take(&mut self.what),
            status,
            stdout: join(self.stdout.take()),
            stderr: join(self.stderr.take()),
        }
    }

    /// Waits for the tool to exit (at most [`PATIENCE`]; a hang fails the test).
    pub fn finish(mut self) -> Finished {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.try_status() {
                return self.take_output(status);
            }
            if Instant::now() > deadline {
                self.kill();
                let what = self.what.clone();
                let out = self.take_output(ExitStatus::default());
                panic!("`{what}` did not exit within {PATIENCE:?}:\n{out}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn kill(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A tool that exited.
#[derive(Debug)]
pub struct Finished {
    /// The command line.
    pub what: String,
    /// How it exited.
    pub status: ExitStatus,
    /// What it printed.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
}

impl std::fmt::Display for Finished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` ({})\n--- stdout\n{}--- stderr\n{}",
            self.what, self.status, self.stdout, self.stderr
        )
    }
}

impl Finished {
    /// Panics with the output unless the tool exited 0.
    pub fn assert_success(&self) -> &Finished {
        assert!(self.status.success(), "{self}");
        self
    }
}

/// The two lines ibv_*_pingpong print at the end: `<bytes> bytes in <s> seconds = <r>
/// Mbit/sec` and `<iters> iters in <s> seconds = <t> usec/iter`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pingpong {
    /// Bytes moved.
    pub bytes: u64,
    /// Mbit/s.
    pub mbit: f64,
    /// Iterations.
    pub iters: u64,
    /// Microseconds per iteration.
    pub usec_per_iter: f64,
}

/// Parses a pingpong's summary.
pub fn pingpong(out: &Finished) -> Pingpong {
    let words = |marker: &str| -> Vec<String> {
        out.stdout
            .lines()
            .find(|l| l.contains(marker))
            .unwrap_or_else(|| panic!("no `{marker}` line in {out}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    let number = |w: &str| -> f64 {
        w.parse()
            .unwrap_or_else(|_| panic!("`{w}` is not a number in {out}"))
    };
    let bytes = words(" bytes in ");
    let iters = words(" iters in ");
    Pingpong {
        bytes: number(&bytes[0]) as u64,
        mbit: number(&bytes[6]),
        iters: number(&iters[0]) as u64,
        usec_per_iter: number(&iters[6]),
    }
}

/// One row of a perftest bandwidth table: `#bytes #iterations BW peak[MB/sec] BW
/// average[MB/sec] MsgRate[Mpps]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BwRow {
    /// Message size.
    pub bytes: u64,
    /// Iterations.
    pub iterations: u64,
    /// Peak MB/s.
    pub peak: f64,
    /// Average MB/s.
    pub average: f64,
    /// Millions of messages per second.
    pub mpps: f64,
}

/// One row of a perftest latency table: `#bytes #iterations t_min t_max t_typical t_avg
/// t_stdev 99% 99.9%` (microseconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatRow {
    /// Message size.
    pub bytes: u64,
    /// Iterations.
    pub iterations: u64,
    /// Minimum.
    pub t_min: f64,
    /// Maximum.
    pub t_max: f64,
    /// Typical (median).
    pub t_typical: f64,
    /// Average.
    pub t_avg: f64,
}

/// The numeric rows of the table that follows the header line containing `header`.
fn table(out: &Finished, header: &str) -> Vec<Vec<f64>> {
    let mut lines = out.stdout.lines().skip_while(|l| !l.contains(header));
    assert!(lines.next().is_some(), "no `{header}` table in {out}");
    lines
        .take_while(|l| !l.trim_start().starts_with("---"))
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.split_whitespace()
                .map(|w| {
                    w.parse::<f64>()
                        .unwrap_or_else(|_| panic!("`{w}` is not a number in {out}"))
                })
                .collect()
        })
        .collect()
}

/// Parses a perftest bandwidth report.
pub fn bandwidth(out: &Finished) -> Vec<BwRow> {
    table(out, "#bytes")
        .into_iter()
        .map(|r| {
            assert!(
                r.len() >= 5,
                "a bandwidth row has 5 columns: {r:?} in {out}"
            );
            BwRow {
                bytes: r[0] as u64,
                iterations: r[1] as u64,
                peak: r[2],
                average: r[3],
                mpps: r[4],
            }
        })
        .collect()
}

/// Parses a perftest latency report.
pub fn latency(out: &Finished) -> Vec<LatRow> {
    table(out, "#bytes")
        .into_iter()
        .map(|r| {
            assert!(r.len() >= 6, "a latency row has 9 columns: {r:?} in {out}");
            LatRow {
                bytes: r[0] as u64,
                iterations: r[1] as u64,
                t_min: r[2],
                t_max: r[3],
                t_typical: r[4],
                t_avg: r[5],
            }
        })
        .collect()
}
