//! Two hosts in network namespaces, each with a running `xroced`: the harness of the
//! end-to-end tests, the demo and the bench.
//!
//! The daemons are stopped (SIGTERM, then SIGKILL after a grace period) and the namespaces
//! deleted when the [`TwoHosts`] is dropped, on every exit path.

use std::io;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use verbs_shm::client::{AhAttr, Context, QpAttr};
use xroce_lab::{Lab, LabConfig, Side};

/// The path of the `xroced` binary, built once per process (with the profile of this
/// build: debug for the tests).
pub fn xroced() -> io::Result<PathBuf> {
    static PATH: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PATH.get_or_init(|| build_bin("xroce-engine", "xroced", !cfg!(debug_assertions)))
        .clone()
        .map_err(io::Error::other)
}

/// The path of a release build of `xroced` (for the demo and the bench), built once per
/// process.
pub fn xroced_release() -> io::Result<PathBuf> {
    static PATH: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PATH.get_or_init(|| build_bin("xroce-engine", "xroced", true))
        .clone()
        .map_err(io::Error::other)
}

/// Builds `bin` of `package` with the cargo running us, and returns its path.
pub fn build_bin(package: &str, bin: &str, release: bool) -> Result<PathBuf, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--quiet",
        "-p",
        package,
        "--bin",
        bin,
        "--message-format=json",
    ]);
    if release {
        cmd.arg("--release");
    }
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("running cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!("building {bin} failed"));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter(|l| l.contains("\"executable\"") && l.contains(&format!("\"{bin}\"")))
        .filter_map(|l| {
            let at = l.find("\"executable\":\"")? + "\"executable\":\"".len();
            let end = l[at..].find('"')?;
            Some(PathBuf::from(&l[at..at + end]))
        })
        .next()
        .ok_or_else(|| format!("cargo did not say where {bin} is"))
}

/// Two lab hosts with a daemon each.
#[derive(Debug)]
pub struct TwoHosts {
    daemons: Vec<(Side, Child)>,
    /// The lab (dropped after the daemons).
    pub lab: Lab,
}

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
            lab,
        };
        for side in [Side::A, Side::B] {
            let h = hosts.lab.host(side).clone();
            let log = std::env::temp_dir().join(format!("xroced-{}.log", h.netns));
            let file = std::fs::File::create(&log)?;
            let bin_text = bin.to_string_lossy().into_owned();
            let mut argv = vec![
                bin_text.as_str(),
                "--interface",
                h.interface.as_str(),
                "--device",
                DEVICE,
            ];
            argv.extend_from_slice(match side {
                Side::A => extra_a,
                Side::B => extra_b,
            });
            let mut cmd = hosts.lab.command(side, &argv);
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
            hosts.daemons.push((side, child));
        }
        for side in [Side::A, Side::B] {
            hosts.wait_ready(side)?;
        }
        Ok(hosts)
    }

    fn wait_ready(&mut self, side: Side) -> io::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let up = self
                .lab
                .run_in(side, || verbs_shm::client::devices().unwrap_or_default())?;
            if up.iter().any(|d| d == DEVICE) {
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
        let peer = self.lab.host(side.peer());
        AhAttr {
            dgid: xroce_wire::Gid::from_ipv4(peer.ipv4).0,
            flow_label: 0,
            sgid_index: 0,
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
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
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

/// `ibv_qp_attr_mask` bits.
pub mod mask {
    /// State.
    pub const STATE: u32 = 1;
    /// Access flags.
    pub const ACCESS_FLAGS: u32 = 1 << 3;
    /// P_Key index.
    pub const PKEY_INDEX: u32 = 1 << 4;
    /// Port.
    pub const PORT: u32 = 1 << 5;
    /// Q_Key.
    pub const QKEY: u32 = 1 << 6;
    /// Address vector.
    pub const AV: u32 = 1 << 7;
    /// Path MTU.
    pub const PATH_MTU: u32 = 1 << 8;
    /// Timeout.
    pub const TIMEOUT: u32 = 1 << 9;
    /// Retry count.
    pub const RETRY_CNT: u32 = 1 << 10;
    /// RNR retry.
    pub const RNR_RETRY: u32 = 1 << 11;
    /// RQ PSN.
    pub const RQ_PSN: u32 = 1 << 12;
    /// Max RD atomic.
    pub const MAX_QP_RD_ATOMIC: u32 = 1 << 13;
    /// Min RNR timer.
    pub const MIN_RNR_TIMER: u32 = 1 << 15;
    /// SQ PSN.
    pub const SQ_PSN: u32 = 1 << 16;
    /// Max dest RD atomic.
    pub const MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
    /// Dest QPN.
    pub const DEST_QPN: u32 = 1 << 20;
}

/// Moves an RC or UC QP to RTS connected to `dest_qpn` at `av`, the way `ibv_rc_pingpong`
/// does (path MTU 1024, timeout 14, retry 7, RNR retry 7).
pub fn connect(
    qp: &verbs_shm::client::Qp,
    av: AhAttr,
    dest_qpn: u32,
    my_psn: u32,
    their_psn: u32,
) -> verbs_shm::client::Result<()> {
    use verbs_shm::client::QpType;
    let rc = qp.qp_type() == QpType::Rc;
    let mut a = QpAttr {
        qp_state: 1,
        port_num: 1,
        qp_access_flags: 0xf,
        ..QpAttr::default()
    };
    qp.modify(
        &a,
        mask::STATE | mask::PKEY_INDEX | mask::PORT | mask::ACCESS_FLAGS,
    )?;
    a.qp_state = 2;
    a.path_mtu = 3;
    a.dest_qp_num = dest_qpn;
    a.rq_psn = their_psn;
    a.ah_attr = av;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 12;
    let mut m = mask::STATE | mask::AV | mask::PATH_MTU | mask::DEST_QPN | mask::RQ_PSN;
    if rc {
        m |= mask::MAX_DEST_RD_ATOMIC | mask::MIN_RNR_TIMER;
    }
    qp.modify(&a, m)?;
    a.qp_state = 3;
    a.sq_psn = my_psn;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 16;
    let mut m = mask::STATE | mask::SQ_PSN;
    if rc {
        m |= mask::TIMEOUT | mask::RETRY_CNT | mask::RNR_RETRY | mask::MAX_QP_RD_ATOMIC;
    }
    qp.modify(&a, m)
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

/// Moves a UD QP to RTS with Q_Key `qkey`.
pub fn ud_ready(qp: &verbs_shm::client::Qp, qkey: u32, psn: u32) -> verbs_shm::client::Result<()> {
    let mut a = QpAttr {
        qp_state: 1,
        port_num: 1,
        qkey,
        ..QpAttr::default()
    };
    qp.modify(&a, mask::STATE | mask::PKEY_INDEX | mask::PORT | mask::QKEY)?;
    a.qp_state = 2;
    qp.modify(&a, mask::STATE)?;
    a.qp_state = 3;
    a.sq_psn = psn;
    qp.modify(&a, mask::STATE | mask::SQ_PSN)
}

/// The value of counter `name` in `stats`.
pub fn counter(stats: &[(String, u64)], name: &str) -> u64 {
    stats
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| *v)
        .unwrap_or(0)
}
