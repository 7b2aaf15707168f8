//! Two hosts in network namespaces, each with a running `xroced`: the harness of the
//! end-to-end tests, the demo and the bench.
//!
//! The daemon is built with the cargo that runs us ([`xroced`], [`xroced_release`]).
//!
//! The daemons are stopped (SIGTERM, then SIGKILL after a grace period) and the namespaces
//! deleted when the [`TwoHosts`] is dropped, on every exit path.

use std::io;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use verbs_shm::client::{AhAttr, Connection, Context};
use xroce_artifacts::{Profile, Target};

use crate::{Family, Lab, LabConfig, Side};

/// The path of the `xroced` binary, built once per process with the profile of this build
/// (debug for the tests).
pub fn xroced() -> io::Result<PathBuf> {
    static PATH: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PATH.get_or_init(|| {
        built(
            "xroce-engine",
            Target::Bin("xroced"),
            Profile::of_this_build(),
        )
    })
    .clone()
    .map_err(io::Error::other)
}

/// The path of a release build of `xroced` (for the demo and the bench), built once per
/// process.
pub fn xroced_release() -> io::Result<PathBuf> {
    static PATH: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PATH.get_or_init(|| built("xroce-engine", Target::Bin("xroced"), Profile::Release))
        .clone()
        .map_err(io::Error::other)
}

fn built(package: &str, target: Target<'_>, profile: Profile) -> Result<PathBuf, String> {
    xroce_artifacts::build(package, target, profile).map_err(|e| e.to_string())
}

/// Whether the daemon of `device` in the calling thread's network namespace serves
/// applications. Its socket is there as soon as it claimed the name, before its XDP
/// program and pollers are; a hello is answered only once it serves.
pub fn serving(device: &str) -> bool {
    verbs_shm::client::devices()
        .unwrap_or_default()
        .iter()
        .any(|d| d == device)
        && Context::open(device).is_ok()
}

/// Two lab hosts with a daemon each.
#[derive(Debug)]
pub struct TwoHosts {
    daemons: Vec<(Side, Child)>,
    bin: PathBuf,
    extra: [Vec<String>; 2],
    /// The lab (dropped after the daemons).
    pub lab: Lab,
}

/// Daemon arguments under which a poller reads an application's rings only when their
/// post bits say so: no periodic reading of every ring, and no sleep (a poller reads every
/// ring before it sleeps). A work request whose post bit is not set, or not seen, then
/// waits forever, and the test that posted it fails.
pub const POST_BITS_ONLY: &[&str] = &["--full-scan-ms", "0", "--yield-us", "3600000000"];

/// The device name the daemons serve.
pub const DEVICE: &str = "xroce0";

impl TwoHosts {
    /// Builds a lab and starts `xroced` on both hosts, with `extra` arguments.
    pub fn start(config: &LabConfig, extra: &[&str]) -> io::Result<TwoHosts> {
        TwoHosts::start_with(&xroced()?, config, extra)
    }

    /// Like [`TwoHosts::start`], with the daemon binary `bin`.
    pub fn start_with(
        bin: &std::path::Path,
        config: &LabConfig,
        extra: &[&str],
    ) -> io::Result<TwoHosts> {
        TwoHosts::start_sides(bin, config, extra, extra)
    }

    /// Like [`TwoHosts::start_with`], with different extra arguments for the daemon of
    /// host `a` and of host `b` (for example their own `--cores`).
    pub fn start_sides(
        bin: &std::path::Path,
        config: &LabConfig,
        extra_a: &[&str],
        extra_b: &[&str],
    ) -> io::Result<TwoHosts> {
        let lab = Lab::new(config).map_err(io::Error::other)?;
        let mut hosts = TwoHosts {
            daemons: Vec::new(),
            bin: bin.to_owned(),
            extra: [extra_a, extra_b].map(|e| e.iter().map(|s| s.to_string()).collect()),
            lab,
        };
        for side in [Side::A, Side::B] {
            let _ = std::fs::remove_file(hosts.log(side));
            hosts.spawn(side)?;
        }
        for side in [Side::A, Side::B] {
            hosts.wait_ready(side)?;
        }
        Ok(hosts)
    }

    fn spawn(&mut self, side: Side) -> io::Result<()> {
        let h = self.lab.host(side).clone();
        let log = self.log(side);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let bin_text = self.bin.to_string_lossy().into_owned();
        let mut argv = vec![
            bin_text.as_str(),
            "--netdev",
            h.interface.as_str(),
            "--name",
            DEVICE,
        ];
        let extra = match side {
            Side::A => &self.extra[0],
            Side::B => &self.extra[1],
        };
        argv.extend(extra.iter().map(String::as_str));
        let mut cmd = self.lab.command(side, &argv);
        cmd.stdout(Stdio::null()).stderr(file);
        // The daemon dies with the test even when the test is killed (no Drop runs then).
        let die_with_parent = || {
            // Safety: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no memory.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
            Ok(())
        };
        // Safety: the closure only makes one async-signal-safe system call.
        unsafe { std::os::unix::process::CommandExt::pre_exec(&mut cmd, die_with_parent) };
        let child = cmd.spawn()?;
        self.daemons.push((side, child));
        Ok(())
    }

    /// Sends `signal` to the daemon of `side` and waits for it to exit; returns its status.
    pub fn kill(
        &mut self,
        side: Side,
        signal: nix::sys::signal::Signal,
    ) -> io::Result<std::process::ExitStatus> {
        let at = self
            .daemons
            .iter()
            .position(|(s, _)| *s == side)
            .ok_or_else(|| io::Error::other(format!("no daemon runs on {side:?}")))?;
        let (_, mut child) = self.daemons.remove(at);
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal)
            .map_err(io::Error::other)?;
        child.wait()
    }

    /// The process id of the daemon of `side`, while it runs (`None` once it exited).
    pub fn pid(&mut self, side: Side) -> Option<u32> {
        let (_, child) = self.daemons.iter_mut().find(|(s, _)| *s == side)?;
        matches!(child.try_wait(), Ok(None)).then(|| child.id())
    }

    /// Starts the daemon of `side` again (after [`TwoHosts::kill`]).
    pub fn restart(&mut self, side: Side) -> io::Result<()> {
        self.spawn(side)?;
        self.wait_ready(side)
    }

    fn wait_ready(&mut self, side: Side) -> io::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let serving = self.lab.run_in(side, || serving(DEVICE))?;
            if serving {
                return Ok(());
            }
            if let Some((_, child)) = self.daemons.iter_mut().find(|(s, _)| *s == side)
                && let Some(status) = child.try_wait()?
            {
                return Err(io::Error::other(format!(
                    "xroced on {side:?} exited ({status}): see {}",
                    self.log(side).display()
                )));
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "xroced on {side:?} did not come up in 20 s"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The daemon's log file of `side`.
    pub fn log(&self, side: Side) -> PathBuf {
        std::env::temp_dir().join(format!("xroced-{}.log", self.lab.host(side).netns))
    }

    /// Opens the device on `side` (the connection is made inside its namespace; the context
    /// then works from any thread).
    pub fn open(&self, side: Side) -> io::Result<Context> {
        self.lab
            .run_in(side, || Context::open(DEVICE))?
            .map_err(io::Error::other)
    }

    /// The address vector from `side` to the other host, over IPv4.
    pub fn av(&self, side: Side) -> AhAttr {
        self.av_over(side, Family::Ipv4)
    }

    /// The address vector from `side` to the other host, between their addresses of
    /// `family`.
    pub fn av_over(&self, side: Side, family: Family) -> AhAttr {
        let peer = self.lab.host(side.peer());
        AhAttr {
            dgid: xroce_wire::Gid::from_ip(peer.address(family)).0,
            flow_label: 0,
            sgid_index: family.gid_index(),
            hop_limit: 64,
            traffic_class: 0,
            sl: 0,
            is_global: true,
            port_num: 1,
        }
    }

    /// Stops the daemons (also done on drop). Returns their logs' tails on failure.
    pub fn stop(&mut self) {
        for (_, child) in &mut self.daemons {
            // Only a child not yet reaped: a reaped child's pid may already be another
            // process's (another test's daemon, say), and pids wrap quickly under load.
            if let Ok(None) = child.try_wait() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(child.id() as i32),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for (_, child) in &mut self.daemons {
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        self.daemons.clear();
    }
}

impl Drop for TwoHosts {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Moves an RC or UC QP to RTS connected to `dest_qpn` at `av`, the way `ibv_rc_pingpong`
/// does (path MTU 1024, timeout 14, retry 7, RNR retry 7): [`verbs_shm::client::Qp::connect`].
pub fn connect(
    qp: &verbs_shm::client::Qp,
    av: AhAttr,
    dest_qpn: u32,
    my_psn: u32,
    their_psn: u32,
) -> verbs_shm::client::Result<()> {
    qp.connect(&Connection::new(av, dest_qpn, my_psn, their_psn))
        .map_err(|e| e.source)
}

/// Polls `cq` until `n` completions arrived (panics after 10 s with what came).
pub fn wait_completions(
    cq: &verbs_shm::client::Cq,
    n: usize,
) -> Vec<verbs_shm::client::WorkCompletion> {
    use verbs_shm::client::WorkCompletion;
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = [WorkCompletion::default(); 16];
    while got.len() < n {
        let k = cq.poll(&mut buf).expect("poll");
        got.extend_from_slice(&buf[..k.min(n - got.len())]);
        assert!(
            Instant::now() < deadline,
            "only {} of {n} completions after 10 s: {got:?}",
            got.len()
        );
        if k == 0 {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    got
}

/// Moves a UD QP to RTS with Q_Key `qkey`: [`verbs_shm::client::Qp::ud_ready`].
pub fn ud_ready(qp: &verbs_shm::client::Qp, qkey: u32, psn: u32) -> verbs_shm::client::Result<()> {
    qp.ud_ready(qkey, psn).map_err(|e| e.source)
}

/// The value of counter `name` in `stats`.
pub fn counter(stats: &[(String, u64)], name: &str) -> u64 {
    stats
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| *v)
        .unwrap_or(0)
}

/// The hosts of a [`Star`](crate::star::Star) with a daemon each (stopped, then the star
/// deleted, when dropped).
#[derive(Debug)]
pub struct StarHosts {
    daemons: Vec<Child>,
    /// The star (dropped after the daemons).
    pub star: crate::star::Star,
}

impl StarHosts {
    /// Builds a star and starts `bin` on every host, with `extra` arguments (`extra(i)`
    /// for host `i`).
    pub fn start(
        bin: &std::path::Path,
        config: &crate::star::StarConfig,
        extra: impl Fn(usize) -> Vec<String>,
    ) -> io::Result<StarHosts> {
        let star = crate::star::Star::new(config).map_err(io::Error::other)?;
        let mut hosts = StarHosts {
            daemons: Vec::new(),
            star,
        };
        for i in 0..hosts.star.hosts.len() {
            let log = hosts.log(i);
            let _ = std::fs::remove_file(&log);
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)?;
            let h = hosts.star.hosts[i].clone();
            let bin_text = bin.to_string_lossy().into_owned();
            let extra = extra(i);
            let mut argv = vec![
                bin_text.as_str(),
                "--netdev",
                h.interface.as_str(),
                "--name",
                DEVICE,
            ];
            argv.extend(extra.iter().map(String::as_str));
            let mut cmd = hosts.star.command(i, &argv);
            cmd.stdout(Stdio::null()).stderr(file);
            let die_with_parent = || {
                // Safety: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no memory.
                unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
                Ok(())
            };
            // Safety: the closure only makes one async-signal-safe system call.
            unsafe { std::os::unix::process::CommandExt::pre_exec(&mut cmd, die_with_parent) };
            hosts.daemons.push(cmd.spawn()?);
        }
        for i in 0..hosts.star.hosts.len() {
            hosts.wait_ready(i)?;
        }
        Ok(hosts)
    }

    fn wait_ready(&mut self, i: usize) -> io::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if self.star.run_in(i, || serving(DEVICE))? {
                return Ok(());
            }
            if let Some(status) = self.daemons[i].try_wait()? {
                return Err(io::Error::other(format!(
                    "xroced on host {i} exited ({status}): see {}",
                    self.log(i).display()
                )));
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "xroced on host {i} did not come up in 30 s"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The daemon's log file of host `i`.
    pub fn log(&self, i: usize) -> PathBuf {
        std::env::temp_dir().join(format!("xroced-{}.log", self.star.hosts[i].netns))
    }

    /// Opens the device on host `i`.
    pub fn open(&self, i: usize) -> io::Result<Context> {
        self.star
            .run_in(i, || Context::open(DEVICE))?
            .map_err(io::Error::other)
    }

    /// The address vector from any host to host `to`, over IPv4, with `traffic_class`.
    pub fn av(&self, to: usize, traffic_class: u8) -> AhAttr {
        AhAttr {
            dgid: xroce_wire::Gid::from_ipv4(self.star.hosts[to].ipv4).0,
            flow_label: 0,
            sgid_index: 0,
            hop_limit: 64,
            traffic_class,
            sl: 0,
            is_global: true,
            port_num: 1,
        }
    }

    /// Stops the daemons (also done on drop).
    pub fn stop(&mut self) {
        for child in &mut self.daemons {
            if let Ok(None) = child.try_wait() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(child.id() as i32),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for child in &mut self.daemons {
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        self.daemons.clear();
    }
}

impl Drop for StarHosts {
    fn drop(&mut self) {
        self.stop();
    }
}
