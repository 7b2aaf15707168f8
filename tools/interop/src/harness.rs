//! The lab of a run: the namespaces, the wire (a bridge and a tap to the VM, or the bare
//! veth to this host's own rxe), the peer, the daemon and the capture; and running one
//! check across it.

use std::fmt::Write as _;
use std::fs;
use std::io::{BufRead, Write as _};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use xroce_lab::{Lab, LabConfig, netns};

use super::checks::{
    Check, CmTool, Net, Outcome, Program, Row, Side, UCX_PERFTEST_PORT, figures, is_anomaly,
    last_line, ucx_tls,
};
use super::local::LocalRxe;
use super::mads;
use super::peer::{Choice, Peer, PeerKind};
use super::process::{Proc, signal, tcp_listening};
use super::vm::{self, Finished, Vm, VmConfig};
use super::{
    BRIDGE, DEVICE, INIT, PEER_IP, PEER_IP6, PEER_MAC, TAP, XROCE_GID_INDEX, XROCE_IP,
    XROCE_IPV6_GID_INDEX, XROCE_LINK_LOCAL_GID_INDEX,
};
use super::{Prepared, log, target_dir};
use xroce_pcap::{Verdict, describe, for_each_frame};

/// Why rxe counts `completer_retry_err`: seen in every run against rxe 6.1, and not
/// xroce's doing.
pub const RXE_RETRY_NOTE: &str = "rxe 6.1 does not re-arm its retransmit timer per \
    request (rxe_comp.c: \"some timeouts are spurious\"), so in ping-pongs it resends requests \
    that were already acknowledged; xroce answers them as duplicates";

/// The counters of `rdma statistic show link DEV/PORT`: `link DEV/PORT name value ...`.
pub(crate) fn rdma_statistic(output: &str) -> Vec<(String, u64)> {
    let words: Vec<&str> = output.split_whitespace().collect();
    let start = words.iter().position(|w| *w == "link").map_or(0, |i| i + 2);
    words
        .get(start..)
        .unwrap_or_default()
        .chunks(2)
        .filter_map(|kv| Some((kv.first()?.to_string(), kv.get(1)?.parse().ok()?)))
        .collect()
}

/// The non-zero counters among `stats` that count something going wrong, as `name=value`.
pub fn anomalies(stats: &[(String, u64)]) -> Vec<String> {
    stats
        .iter()
        .filter(|(k, v)| *v > 0 && is_anomaly(k))
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

/// The lab: namespaces, the wire, the peer, the daemon, the capture.
pub struct Harness {
    /// First, so that it goes before the lab (a local device is deleted while its
    /// namespace still exists).
    peer: Peer,
    /// The peer in one line: kernel, how it runs, the versions of its programs.
    peer_description: String,
    lab: Lab,
    run_dir: PathBuf,
    xroced: Proc,
    xroced_bin: PathBuf,
    xroced_args: Vec<String>,
    restarts: usize,
    tcpdump: Option<Proc>,
    pingpong: PathBuf,
    drop_in: Result<PathBuf, String>,
}

/// How to build the lab.
#[derive(Debug, Clone)]
pub struct Options {
    /// Capture the wire (checked with [`Harness::check_capture`]).
    pub capture: bool,
    /// The veth pair's settings (the wire to the peer is 1500 bytes: `mtu` must be 1500).
    pub lab: LabConfig,
    /// More arguments of `xroced` (`--queues`, `--cores`).
    pub xroced_args: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            capture: true,
            lab: LabConfig::default(),
            xroced_args: Vec::new(),
        }
    }
}

/// How a server tells it is ready for its client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    /// The pingpong programs: the xroce server prints its `local address` line; an rxe
    /// server needs no wait (`xroce-pingpong` retries its connection).
    Pingpong,
    /// perftest: the server listens on TCP 18515 (its clients do not retry).
    Perftest,
    /// A server listening on this TCP port (its clients do not retry).
    Tcp(u16),
    /// A program connecting through rdma_cm: the server listens on this rdma_cm port (the
    /// rxe side's `rdma resource show cm_id` lists it; xroced counts its listening ids).
    RdmaCm(u16),
    /// No server to wait for (it runs nothing).
    None,
}

/// One exchange between the two sides: the server starts first, then the client.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// What it is, for the log's first line.
    pub title: String,
    /// The log's file name (without `.txt`) in the logs directory.
    pub name: String,
    pub server: Side,
    /// The shell command run on the rxe side.
    pub rxe: String,
    /// The program and arguments run in the xroce namespace.
    pub xroce: Vec<String>,
    /// Its environment.
    pub xroce_env: Vec<(String, String)>,
    pub handshake: Handshake,
    /// The longest the client may run (then it is killed); the server is given as long
    /// again after a client that succeeded, 5 s after one that failed.
    pub timeout: Duration,
}

/// How an [`Exchange`] went.
#[derive(Debug, Clone)]
pub struct Exchanged {
    /// The rxe side's status (`None`: killed after its time) and output.
    pub rxe: Finished,
    /// What the xroce side printed.
    pub xroce_output: String,
    /// Why it failed, if it did.
    pub failure: Option<String>,
}

impl Exchanged {
    /// What the client printed.
    pub fn client_output(&self, server: Side) -> &str {
        match server {
            Side::Rxe => &self.xroce_output,
            Side::Xroce => &self.rxe.output,
        }
    }
}

impl std::fmt::Debug for Harness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harness")
            .field("peer", &self.peer_description())
            .finish_non_exhaustive()
    }
}

impl Harness {
    pub fn xroce_ns(&self) -> &str {
        &self.lab.a.netns
    }

    /// The rxe device's name in the peer.
    pub fn peer_device(&self) -> &str {
        self.peer.device()
    }

    /// The index of the rxe device's IPv4 GID.
    pub fn peer_gid(&self) -> u32 {
        self.peer.gid_index()
    }

    /// Whether the peer is a VM (rather than this host's own rxe).
    pub fn peer_is_vm(&self) -> bool {
        self.peer.is_vm()
    }

    /// Where the peer is: `VM 10.77.0.2` or `namespace … 10.77.0.2`.
    pub fn peer_place(&self) -> String {
        self.peer.place()
    }

    /// The peer in one line: its kernel, how it runs, the versions of its programs.
    pub fn peer_description(&self) -> &str {
        &self.peer_description
    }

    /// Whether the peer answers ping from the xroce namespace: the wire works both ways
    /// (through the kernel's stack, not xroce's transport).
    pub fn peer_answers_ping(&self) -> bool {
        netns::command(
            self.xroce_ns(),
            &[
                "ping",
                "-q",
                "-c",
                "3",
                "-i",
                "0.2",
                "-W",
                "2",
                &PEER_IP.to_string(),
            ],
        )
        .stdin(std::process::Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success())
    }

    /// The directory of the drop-in `libibverbs.so.1`, or why it cannot run Debian's
    /// programs.
    pub fn drop_in(&self) -> Result<&Path, &str> {
        self.drop_in
            .as_ref()
            .map(PathBuf::as_path)
            .map_err(String::as_str)
    }

    /// What happened, if the daemon has exited since the last look (it is restarted).
    pub fn daemon_exited(&mut self) -> Option<String> {
        self.daemon_check().map(|row| row.detail)
    }

    /// What the daemon logged so far.
    pub fn daemon_log(&self) -> String {
        self.xroced.output()
    }
}

pub(super) fn run_lab_cmd(ns: &str, args: &[&str]) -> Result<()> {
    xroce_lab::run(Command::new("ip").arg("-n").arg(ns).args(args))?;
    Ok(())
}

/// Turns the lab's host `b` into the wire: its veth end joins a bridge with the VM's tap.
pub(super) fn make_wire(lab: &Lab) -> Result<()> {
    let b = &lab.b.netns;
    run_lab_cmd(b, &["addr", "flush", "dev", &lab.b.interface])?;
    run_lab_cmd(
        b,
        &[
            "link",
            "add",
            BRIDGE,
            "type",
            "bridge",
            "stp_state",
            "0",
            "forward_delay",
            "0",
        ],
    )?;
    netns::sysctl(b, &format!("net.ipv6.conf.{BRIDGE}.disable_ipv6"), "1")?;
    run_lab_cmd(b, &["link", "set", &lab.b.interface, "master", BRIDGE])?;
    run_lab_cmd(b, &["tuntap", "add", "dev", TAP, "mode", "tap"])?;
    run_lab_cmd(
        b,
        &["link", "set", TAP, "mtu", "1500", "master", BRIDGE, "up"],
    )?;
    run_lab_cmd(b, &["link", "set", BRIDGE, "up"])?;
    Ok(())
}

pub(super) fn drop_in_library() -> Result<PathBuf, String> {
    let lib = target_dir().join("xroce/lib");
    if !lib.join("libibverbs.so.1").is_file() {
        return Err(format!(
            "{} not built (cargo xtask build)",
            lib.join("libibverbs.so.1").display()
        ));
    }
    Ok(lib)
}

/// Whether the drop-in library runs `ibv_devices` and lists the daemon's device.
pub(super) fn probe_drop_in(ns: &str, lib: &Path) -> Result<(), String> {
    xroce_lab::require_packages(&["ibverbs-utils", "perftest"]).map_err(|e| e.to_string())?;
    let lib = lib.to_string_lossy();
    let out = netns::command(
        ns,
        &["env", &format!("LD_LIBRARY_PATH={lib}"), "ibv_devices"],
    )
    .output()
    .map_err(|e| format!("running ibv_devices: {e}"))?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if out.status.success() && text.contains(DEVICE) {
        Ok(())
    } else if out.status.success() {
        Err(format!(
            "the drop-in libibverbs.so.1 lists no device {DEVICE} yet (ibv_devices shows none)"
        ))
    } else {
        Err(format!(
            "the drop-in libibverbs.so.1 cannot run ibv_devices yet ({}: {})",
            out.status,
            last_line(&text)
        ))
    }
}

impl Harness {
    /// Builds the lab, brings the peer up (this host's rxe in the lab's second namespace,
    /// or a VM) and starts the daemon; returns the harness and how long the peer took to
    /// be ready, in seconds.
    pub fn start(prepared: &mut Prepared, options: &Options) -> Result<(Harness, f64)> {
        if options.lab.mtu != 1500 || options.lab.router {
            bail!("the rxe peer's wire is a 1500-byte Ethernet without a router");
        }
        let run_dir = prepared.run_dir.clone();
        let lab = Lab::new(&options.lab).context("building the lab (needs root)")?;
        let t0 = Instant::now();
        let local = match &prepared.choice {
            Choice::Vm { .. } => None,
            Choice::Local => {
                if lab.b.ipv4 != PEER_IP {
                    bail!("the lab's host b is {}, not {PEER_IP}", lab.b.ipv4);
                }
                let ip6 = (lab.b.ipv6 == PEER_IP6).then_some(PEER_IP6);
                let link_local = lab.b.link_local();
                match LocalRxe::start(
                    &lab.b.netns,
                    &lab.b.interface,
                    PEER_IP,
                    [ip6, Some(link_local)],
                    &run_dir,
                ) {
                    Ok(rxe) => Some(rxe),
                    Err(e) if prepared.kind == PeerKind::Auto => {
                        log(&format!(
                            "this host's rxe cannot be the peer ({e:#}): booting a VM instead"
                        ));
                        None
                    }
                    Err(e) => {
                        return Err(
                            e.context("making this host's rxe the peer (--peer-kind local)")
                        );
                    }
                }
            }
        };
        let capture_on = if local.is_some() {
            lab.b.interface.clone()
        } else {
            make_wire(&lab)?;
            TAP.to_owned()
        };
        let tcpdump = if !options.capture {
            None
        } else {
            let p = Proc::spawn(
                &lab.b.netns,
                &[
                    "tcpdump",
                    "-i",
                    &capture_on,
                    // Every packet to the file at once, as root (no privilege drop).
                    "--immediate-mode",
                    "-U",
                    "-Z",
                    "root",
                    // 64 MiB of kernel buffer: 1 MiB messages come in bursts.
                    "-B",
                    "65536",
                    // A frame's snap length: in immediate mode every ring slot is one.
                    "-s",
                    "4096",
                    "-w",
                    &run_dir.join("capture.pcap").to_string_lossy(),
                    "udp port 4791 or tcp port 18515 or arp",
                ],
                &[],
                &run_dir,
                "tcpdump",
            )?;
            let deadline = Instant::now() + Duration::from_secs(10);
            while !fs::read_to_string(&p.stderr).is_ok_and(|t| t.contains("listening on")) {
                if Instant::now() > deadline {
                    bail!("tcpdump did not start: {}", p.output());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Some(p)
        };
        let bins = prepared.bins.clone();
        let (peer, peer_description, xroced) = match local {
            Some(rxe) => {
                let xroced = start_daemon(&lab, &bins.0, &options.xroced_args, &run_dir, "xroced")?;
                let description = super::local_description(&rxe);
                let peer = Peer::Local { rxe, ip: PEER_IP };
                (peer, description, xroced)
            }
            None => {
                let img = prepared.image()?.clone();
                let initrd = run_dir.join("initrd.cpio");
                image_initrd(&img, &initrd)?;
                let (accel, _) = vm::accel();
                let mut vm = Vm::boot(&VmConfig {
                    netns: lab.b.netns.clone(),
                    tap: TAP.into(),
                    ip: PEER_IP,
                    mac: PEER_MAC,
                    kernel: img.kernel.clone(),
                    initrd,
                    dir: run_dir.clone(),
                    memory_mib: 1024,
                    accel,
                })?;
                // The daemon starts while the VM boots.
                let xroced = start_daemon(&lab, &bins.0, &options.xroced_args, &run_dir, "xroced")?;
                let ready = vm.wait_ready(Duration::from_secs(240))?;
                log(&format!(
                    "VM ready after {:.1} s (guest uptime {} s); rxe0 IPv4 GID index {}, IPv6 \
                     GID index {:?}, link-local GID index {:?}",
                    t0.elapsed().as_secs_f64(),
                    ready.uptime,
                    ready.gid_index,
                    ready.ipv6_gid_index,
                    ready.link_local_gid_index
                ));
                let peer = Peer::Vm {
                    vm,
                    gid_index: ready.gid_index,
                    ipv6_gid_index: ready.ipv6_gid_index,
                    link_local_gid_index: ready.link_local_gid_index,
                    ip: PEER_IP,
                };
                (peer, super::vm_description(&img), xroced)
            }
        };
        let ready = t0.elapsed().as_secs_f64();
        let drop_in = drop_in_library().and_then(|lib| {
            probe_drop_in(&lab.a.netns, &lib)?;
            Ok(lib)
        });
        Ok((
            Harness {
                peer,
                peer_description,
                lab,
                run_dir,
                xroced,
                xroced_bin: bins.0.clone(),
                xroced_args: options.xroced_args.clone(),
                restarts: 0,
                tcpdump,
                pingpong: bins.1.clone(),
                drop_in,
            },
            ready,
        ))
    }
}

/// The VM's initramfs: the cached image and the guest's `/init`.
fn image_initrd(img: &super::image::Image, to: &Path) -> Result<()> {
    super::image::initrd(img, INIT.as_bytes(), to)
}

/// Starts `xroced` on the lab's host `a` and waits until its device is there.
pub(super) fn start_daemon(
    lab: &Lab,
    bin: &Path,
    args: &[String],
    logs: &Path,
    name: &str,
) -> Result<Proc> {
    let bin = bin.to_string_lossy();
    let mut argv = vec![&*bin, "--netdev", &lab.a.interface, "--name", DEVICE];
    argv.extend(args.iter().map(String::as_str));
    let mut xroced = Proc::spawn(&lab.a.netns, &argv, &[], logs, name)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let up = netns::run_in(&lab.a.netns, || xroce_lab::daemons::serving(DEVICE))?;
        if up {
            return Ok(xroced);
        }
        if let Some(s) = xroced.exited() {
            bail!("xroced exited ({s}):\n{}", xroced.output());
        }
        if Instant::now() > deadline {
            bail!("xroced did not come up in 30 s:\n{}", xroced.output());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Harness {
    /// A failure row if the daemon has exited since the last check (it is restarted, so
    /// that the checks after it still say something).
    pub(super) fn daemon_check(&mut self) -> Option<Row> {
        let status = self.xroced.exited()?;
        let log = self.xroced.stderr.clone();
        let tail = last_line(&fs::read_to_string(&log).unwrap_or_default());
        self.restarts += 1;
        let name = format!("xroced-{}", self.restarts);
        let started = start_daemon(
            &self.lab,
            &self.xroced_bin,
            &self.xroced_args,
            &self.run_dir,
            &name,
        );
        let detail = match started {
            Ok(p) => {
                self.xroced = p;
                format!("{status}, restarted; log {}: {tail}", log.display())
            }
            Err(e) => format!("{status}, restart failed: {e:#}"),
        };
        Some(Row {
            check: "xroced kept running".into(),
            server: "-",
            client: "-",
            outcome: Outcome::Fail,
            secs: 0.0,
            detail,
        })
    }

    pub(super) fn run_check(&mut self, check: &Check, logs: &Path) -> Row {
        let started = Instant::now();
        let mut row = Row {
            check: check.name(),
            server: check.server.name(),
            client: check.client().name(),
            outcome: Outcome::Fail,
            secs: 0.0,
            detail: String::new(),
        };
        if let Program::DropIn { .. } | Program::RdmaCm(_) | Program::Ucx { .. } = check.program
            && let Err(why) = &self.drop_in
        {
            row.outcome = Outcome::Skip;
            row.detail = why.clone();
            return row;
        }
        if self.peer.gid_index_of(check.net).is_none() {
            row.detail = format!(
                "the peer's {} has no {:?} GID (its log says why)",
                self.peer.device(),
                check.net
            );
            return row;
        }
        match self.exchange(check, logs) {
            Ok((ok, detail)) => {
                row.outcome = if ok { Outcome::Pass } else { Outcome::Fail };
                row.detail = detail;
            }
            Err(e) => row.detail = format!("{e:#}"),
        }
        row.secs = started.elapsed().as_secs_f64();
        row
    }

    /// `LD_LIBRARY_PATH` for the xroce side's unmodified programs: the drop-in libraries.
    fn drop_in_path(&self) -> (String, String) {
        let lib = self
            .drop_in
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        ("LD_LIBRARY_PATH".to_owned(), lib)
    }

    /// The two command lines of a check: (rxe side, xroce side) and the xroce side's
    /// environment.
    pub(super) fn commands(&self, check: &Check) -> (String, Vec<String>, Vec<(String, String)>) {
        // Over IPv6 both ends use their global IPv6 GIDs; the programs' out-of-band TCP
        // exchange stays on IPv4.
        // A check runs only when the peer has the GID (`run_check`).
        let peer_gid = self.peer.gid_index_of(check.net).unwrap_or(0);
        let xroce_gid = match check.net {
            Net::Ipv4 => XROCE_GID_INDEX,
            Net::Ipv6 => XROCE_IPV6_GID_INDEX,
            Net::Ipv6LinkLocal => XROCE_LINK_LOCAL_GID_INDEX,
        };
        let dev = self.peer.device();
        let server_addr = |side: Side| match side {
            Side::Rxe => XROCE_IP.to_string(),
            Side::Xroce => PEER_IP.to_string(),
        };
        let rxe_is_client = check.server == Side::Xroce;
        let rxe_target = if rxe_is_client {
            format!(" {}", server_addr(Side::Rxe))
        } else {
            String::new()
        };
        match check.program {
            Program::Pingpong {
                service,
                size,
                iters,
            } => {
                let rxe = format!(
                    "ibv_{service}_pingpong -d {dev} -g {peer_gid} -s {size} -n {iters}{rxe_target}"
                );
                let mut x: Vec<String> = vec![
                    self.pingpong.to_string_lossy().into_owned(),
                    "-d".into(),
                    DEVICE.into(),
                    "-g".into(),
                    xroce_gid.to_string(),
                    "-s".into(),
                    size.to_string(),
                    "-n".into(),
                    iters.to_string(),
                    "--timeout".into(),
                    "120".into(),
                ];
                match service {
                    "uc" => x.push("--uc".into()),
                    "ud" => x.push("--ud".into()),
                    _ => {}
                }
                if rxe_is_client {
                    // The examples send a buffer of 0x7b; check it arrives so.
                    x.extend(["--verify-fill".into(), "0x7b".into()]);
                } else {
                    // rxe echoes what it receives: a different pattern each message.
                    x.push("--verify".into());
                    x.extend(["--connect-timeout".into(), "60".into()]);
                    x.push(PEER_IP.to_string());
                }
                (rxe, x, Vec::new())
            }
            Program::DropIn {
                program,
                size,
                iters,
            } => {
                let env = vec![self.drop_in_path()];
                let (rxe, x) = if program.ends_with("_pingpong") {
                    (
                        format!(
                            "{program} -d {dev} -g {peer_gid} -s {size} -n {iters}{rxe_target}"
                        ),
                        format!("{program} -d {DEVICE} -g {xroce_gid} -s {size} -n {iters}"),
                    )
                } else {
                    // Atomics are 8 bytes, always; perftest takes no -s for them.
                    let s = if program.starts_with("ib_atomic") {
                        String::new()
                    } else {
                        format!(" -s {size}")
                    };
                    (
                        format!("{program} -d {dev} -x {peer_gid} -F{s} -n {iters}{rxe_target}"),
                        format!("{program} -d {DEVICE} -x {xroce_gid} -F{s} -n {iters}"),
                    )
                };
                let mut x: Vec<String> = x.split_whitespace().map(str::to_owned).collect();
                if !rxe_is_client {
                    x.push(PEER_IP.to_string());
                }
                (rxe, x, env)
            }
            Program::RdmaCm(tool) => {
                let env = vec![self.drop_in_path()];
                let addr = match check.server {
                    Side::Rxe => PEER_IP.to_string(),
                    Side::Xroce => XROCE_IP.to_string(),
                };
                let (rxe_template, x_template) = if rxe_is_client {
                    (tool.client, tool.server)
                } else {
                    (tool.server, tool.client)
                };
                let rxe = match CmTool::line(rxe_template, &addr, &PEER_IP.to_string(), dev) {
                    line if line.is_empty() => "true".to_owned(),
                    line => line,
                };
                let x_line = CmTool::line(x_template, &addr, &XROCE_IP.to_string(), DEVICE);
                let x: Vec<String> = if x_line.is_empty() {
                    vec!["true".into()]
                } else if x_line.contains(['$', ';', '|']) {
                    vec!["sh".into(), "-c".into(), x_line]
                } else {
                    x_line.split_whitespace().map(str::to_owned).collect()
                };
                (rxe, x, env)
            }
            Program::Ucx {
                transport,
                test,
                size,
                iters,
            } => {
                let tls = ucx_tls(transport);
                // Each side names its device, port and GID; the rest UCX finds as it does
                // on any RoCE host.
                let env = vec![
                    self.drop_in_path(),
                    ("UCX_TLS".to_owned(), tls.to_owned()),
                    ("UCX_NET_DEVICES".to_owned(), format!("{DEVICE}:1")),
                    ("UCX_IB_GID_INDEX".to_owned(), xroce_gid.to_string()),
                ];
                let test_args = format!("-t {test} -s {size} -n {iters}");
                // On rxe, UCX's UD transport drops every datagram unless its destination
                // GID check is off: rxe leaves a completion's `sl` 0 where RDMA NICs (and
                // xroce) say the datagram came over IPv4, so UCX reads an IPv6 address out
                // of the IPv4 header in the GRH area (README, "UCX and Open MPI").
                let rxe_env = format!(
                    "UCX_UD_VERBS_ETH_DGID_CHECK=n UCX_TLS={tls} UCX_NET_DEVICES={dev}:1 \
                     UCX_IB_GID_INDEX={peer_gid}"
                );
                let rxe = if rxe_is_client {
                    format!("env {rxe_env} ucx_perftest {XROCE_IP} {test_args}")
                } else {
                    format!("env {rxe_env} ucx_perftest")
                };
                let mut x: Vec<String> = vec!["ucx_perftest".into()];
                if !rxe_is_client {
                    x.push(PEER_IP.to_string());
                    x.extend(test_args.split_whitespace().map(str::to_owned));
                }
                (rxe, x, env)
            }
        }
    }

    /// Runs a check; `(passed, detail)`. Logs go to `logs/<name>.txt`.
    pub(super) fn exchange(&mut self, check: &Check, logs: &Path) -> Result<(bool, String)> {
        let (rxe, xroce, xroce_env) = self.commands(check);
        let handshake = match check.program {
            Program::Pingpong { .. } => Handshake::Pingpong,
            Program::DropIn { .. } => Handshake::Perftest,
            Program::RdmaCm(CmTool { port: 0, .. }) => Handshake::None,
            Program::RdmaCm(tool) => Handshake::RdmaCm(tool.port),
            Program::Ucx { .. } => Handshake::Tcp(UCX_PERFTEST_PORT),
        };
        let exchange = Exchange {
            title: format!("{} (server: {})", check.name(), check.server.name()),
            name: check.name().replace([' ', '/'], "_") + "_" + check.server.name() + "_server",
            server: check.server,
            rxe,
            xroce,
            xroce_env,
            handshake,
            timeout: Duration::from_secs(150),
        };
        let done = self.run_exchange(&exchange, logs)?;
        Ok(match done.failure {
            None => (true, figures(done.client_output(check.server))),
            Some(why) => (false, why),
        })
    }

    /// Runs an exchange: its server, then its client once the server is ready. Its record
    /// (both command lines, outputs and statuses) goes to `logs/<name>.txt`. An error means
    /// the harness itself broke (the VM died); a failed exchange says why in `failure`.
    pub fn run_exchange(&mut self, ex: &Exchange, logs: &Path) -> Result<Exchanged> {
        let name = &ex.name;
        let x_argv: Vec<&str> = ex.xroce.iter().map(String::as_str).collect();
        let x_env: Vec<(&str, &str)> = ex
            .xroce_env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let ns = self.xroce_ns().to_owned();
        let log = logs.join(format!("{name}.txt"));
        let place = self.peer.place();

        let (rxe, mut x_proc, x_status);
        match ex.server {
            Side::Rxe => {
                let mut job = self.peer.spawn(&ex.rxe)?;
                let listening = match ex.handshake {
                    Handshake::Perftest => self.peer.listening(18515, Duration::from_secs(60))?,
                    Handshake::Tcp(port) => self.peer.listening(port, Duration::from_secs(60))?,
                    Handshake::RdmaCm(port) => {
                        self.peer.cm_listening(port, Duration::from_secs(60))?
                    }
                    Handshake::Pingpong | Handshake::None => true,
                };
                if !listening {
                    self.peer.kill(&mut job);
                    let output = job.output();
                    fs::write(&log, format!("## rxe ({place}): {}\n{output}", ex.rxe))?;
                    let failure = format!("the rxe server never listened: {}", last_line(&output));
                    return Ok(Exchanged {
                        rxe: Finished {
                            status: None,
                            output,
                        },
                        xroce_output: String::new(),
                        failure: Some(failure),
                    });
                }
                let mut p = Proc::spawn(&ns, &x_argv, &x_env, logs, name)?;
                x_status = p.wait(ex.timeout);
                let wait_for = if x_status.is_some_and(|s| s.success()) {
                    ex.timeout
                } else {
                    Duration::from_secs(5)
                };
                rxe = self.peer.wait(&mut job, wait_for)?;
                x_proc = p;
            }
            Side::Xroce => {
                let mut p = Proc::spawn(&ns, &x_argv, &x_env, logs, name)?;
                let deadline = Instant::now() + Duration::from_secs(30);
                loop {
                    let listening = match ex.handshake {
                        Handshake::Pingpong => {
                            fs::read_to_string(&p.stdout).is_ok_and(|t| t.contains("local address"))
                        }
                        Handshake::Perftest => tcp_listening(&ns, 18515),
                        Handshake::Tcp(port) => tcp_listening(&ns, port),
                        Handshake::RdmaCm(_) => self.xroced_stat("cm_listening") > 0,
                        Handshake::None => true,
                    };
                    if listening {
                        break;
                    }
                    if p.exited().is_some() || Instant::now() > deadline {
                        p.kill();
                        let output = p.output();
                        fs::write(&log, &output)?;
                        let failure =
                            format!("the xroce server never listened: {}", last_line(&output));
                        return Ok(Exchanged {
                            rxe: Finished {
                                status: None,
                                output: String::new(),
                            },
                            xroce_output: output,
                            failure: Some(failure),
                        });
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                let mut job = self.peer.spawn(&ex.rxe)?;
                rxe = self.peer.wait(&mut job, ex.timeout)?;
                let wait_for = if rxe.ok() {
                    ex.timeout
                } else {
                    Duration::from_secs(5)
                };
                x_status = p.wait(wait_for);
                x_proc = p;
            }
        }
        let x_out = x_proc.output();
        x_proc.kill();
        let mut record = String::new();
        let _ = writeln!(record, "# {}", ex.title);
        let _ = writeln!(record, "## rxe ({place}): {}", ex.rxe);
        let _ = writeln!(
            record,
            "{}\n-> {}",
            rxe.output,
            rxe.status
                .map_or("killed (timeout)".to_owned(), |s| format!("exit {s}"))
        );
        let env_text: String = ex
            .xroce_env
            .iter()
            .map(|(k, v)| format!("{k}={v} "))
            .collect();
        let _ = writeln!(
            record,
            "## xroce ({XROCE_IP}): {env_text}{}",
            ex.xroce.join(" ")
        );
        let _ = writeln!(
            record,
            "{x_out}\n-> {}",
            x_status.map_or("killed (timeout)".to_owned(), |s| s.to_string())
        );
        fs::write(&log, &record)?;

        let x_ok = x_status.is_some_and(|s| s.success());
        let failure = if x_ok && rxe.ok() {
            None
        } else {
            let mut why = Vec::new();
            let tail = |output: &str| match last_line(output) {
                line if line.is_empty() => "no output".to_owned(),
                line => line,
            };
            if !rxe.ok() {
                why.push(format!(
                    "rxe {}: {}",
                    rxe.status
                        .map_or("timed out".to_owned(), |s| format!("exit {s}")),
                    tail(&rxe.output)
                ));
            }
            if !x_ok {
                why.push(format!(
                    "xroce {}: {}",
                    x_status.map_or("timed out".to_owned(), |s| s.to_string()),
                    tail(&x_out)
                ));
            }
            Some(why.join("; "))
        };
        Ok(Exchanged {
            rxe,
            xroce_output: x_out,
            failure,
        })
    }

    /// Stops the capture and checks every RoCEv2 packet's ICRC.
    pub(super) fn check_capture(&mut self, copy_to: Option<&Path>, traffic: bool) -> Row {
        let started = Instant::now();
        if let Some(mut p) = self.tcpdump.take() {
            // Let the last frames reach the file, then stop tcpdump cleanly.
            std::thread::sleep(Duration::from_secs(1));
            p.signal(signal::Signal::Int);
            let _ = p.wait(Duration::from_secs(5));
        }
        let pcap = self.run_dir.join("capture.pcap");
        // tcpdump's own tally: a capture that missed packets checks less than it seems.
        let tally = fs::read_to_string(self.run_dir.join("tcpdump.err")).unwrap_or_default();
        let count = |what: &str| {
            tally
                .lines()
                .find(|l| l.ends_with(what))
                .and_then(|l| l.split_whitespace().next()?.parse::<u64>().ok())
        };
        let missed = match (
            count("packets captured"),
            count("packets received by filter"),
            count("packets dropped by kernel"),
        ) {
            (Some(c), Some(r), Some(d)) if c < r || d > 0 => {
                format!(" (tcpdump missed packets: {c} captured of {r}, {d} dropped by the kernel)")
            }
            _ => String::new(),
        };
        let mut row = Row {
            check: "ICRC of every captured RoCEv2 packet".into(),
            server: "-",
            client: "-",
            outcome: Outcome::Fail,
            secs: 0.0,
            detail: String::new(),
        };
        if let Some(to) = copy_to
            && let Err(e) = fs::copy(&pcap, to)
        {
            row.detail = format!("copying the capture to {}: {e}", to.display());
            return row;
        }
        let (mut n, mut ok, mut bad) = (0usize, 0usize, Vec::new());
        let r = for_each_frame(&pcap, |number, bytes| {
            if let Some((line, verdict)) = describe(number, bytes) {
                n += 1;
                if verdict == Verdict::Ok {
                    ok += 1;
                } else {
                    bad.push(line);
                }
            }
        });
        row.secs = started.elapsed().as_secs_f64();
        match r {
            Err(e) => row.detail = format!("{e:#}"),
            Ok(()) => {
                if bad.is_empty() && n > 0 {
                    row.outcome = Outcome::Pass;
                } else if n == 0 && !traffic {
                    row.outcome = Outcome::Skip;
                }
                row.detail = format!("{n} packets, {ok} ok, {} bad{missed}", bad.len());
                if let Some(first) = bad.first() {
                    row.detail.push_str(&format!(" (first: {})", first.trim()));
                }
            }
        }
        row
    }

    /// Checks the connection manager's MADs in the capture ([`check_capture`] stopped it):
    /// xroce's, field by field against rxe's, and the transaction ID, address and flow
    /// label rules on both sides; every problem goes to `cm-mads.txt` in the run directory.
    ///
    /// [`check_capture`]: Harness::check_capture
    pub(super) fn check_cm_mads(&self) -> Row {
        let started = Instant::now();
        let mut row = Row {
            check: "CM MADs xroce sent, against rxe's".into(),
            server: "-",
            client: "-",
            outcome: Outcome::Fail,
            secs: 0.0,
            detail: String::new(),
        };
        let pcap = self.run_dir.join("capture.pcap");
        if !pcap.is_file() {
            row.outcome = Outcome::Skip;
            row.detail = "no capture".into();
            return row;
        }
        match mads::check(&pcap, XROCE_IP.into()) {
            Err(e) => row.detail = format!("{e:#}"),
            Ok(f) => {
                let mut text = String::new();
                for p in f.problems.iter().chain(&f.peer_oddities) {
                    let _ = writeln!(text, "{p}");
                }
                let _ = fs::write(self.run_dir.join("cm-mads.txt"), text);
                row.outcome = if f.xroce_mads == 0 {
                    Outcome::Skip
                } else if f.problems.is_empty() {
                    Outcome::Pass
                } else {
                    Outcome::Fail
                };
                row.detail = f.summary();
            }
        }
        row.secs = started.elapsed().as_secs_f64();
        row
    }

    /// One of the daemon's counters or gauges (0 when it cannot be read).
    fn xroced_stat(&self, name: &str) -> u64 {
        netns::run_in(self.xroce_ns(), || {
            verbs_shm::client::Context::open(DEVICE).and_then(|c| c.stats())
        })
        .ok()
        .and_then(Result::ok)
        .and_then(|stats| stats.into_iter().find(|(k, _)| k == name))
        .map_or(0, |(_, v)| v)
    }

    /// The daemon's counters (all of them), also written to the run directory.
    pub fn xroced_counters(&self) -> Result<Vec<(String, u64)>> {
        let stats = netns::run_in(self.xroce_ns(), || {
            verbs_shm::client::Context::open(DEVICE).and_then(|c| c.stats())
        })?
        .context("reading xroced's counters")?;
        let text: String = stats.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
        let _ = fs::write(self.run_dir.join("xroced-counters.txt"), text);
        Ok(stats)
    }

    /// The rxe port's counters (`rdma statistic`), also written to the run directory.
    pub fn rxe_counters(&mut self) -> Result<Vec<(String, u64)>> {
        let command = format!("rdma statistic show link {}/1", self.peer_device());
        let f = self.peer.run(&command, Duration::from_secs(20))?;
        let _ = fs::write(self.run_dir.join("rxe-counters.txt"), &f.output);
        if !f.ok() {
            bail!("{command} failed: {}", last_line(&f.output));
        }
        Ok(rdma_statistic(&f.output))
    }

    /// Counters of both ends, written to the run directory; the anomalies as text.
    pub(super) fn counters(&mut self) -> String {
        let mut report = String::new();
        let line = |odd: &[String]| {
            if odd.is_empty() {
                "no errors, drops, retries or duplicates".to_owned()
            } else {
                odd.join(" ")
            }
        };
        if let Ok(stats) = self.xroced_counters() {
            let _ = writeln!(report, "xroced counters: {}", line(&anomalies(&stats)));
        }
        if let Ok(stats) = self.rxe_counters() {
            let odd = anomalies(&stats);
            let _ = writeln!(report, "rxe counters:    {}", line(&odd));
            if odd.iter().any(|c| c.starts_with("completer_retry_err=")) {
                let _ = writeln!(report, "  ({RXE_RETRY_NOTE})");
            }
        }
        report
    }

    /// `--keep`: runs lines from stdin on the peer until end of input or Ctrl-C.
    pub(super) fn keep(&mut self) {
        let a = &self.lab.a;
        println!();
        println!("The lab stays up until end of input (Ctrl-D) or Ctrl-C.");
        println!(
            "  xroce host: ip netns exec {} bash   ({} {XROCE_IP}, device {DEVICE}, GID index {XROCE_GID_INDEX}; IPv6 GID index {XROCE_IPV6_GID_INDEX})",
            a.netns, a.interface
        );
        println!(
            "  wire:       ip netns exec {} tcpdump -ni {}",
            self.lab.b.netns,
            if self.peer.is_vm() {
                TAP
            } else {
                &self.lab.b.interface
            }
        );
        println!(
            "  rxe peer:   {} ({}, GID index {}; IPv6 GID index {:?}); type a shell command to run it there",
            self.peer.place(),
            self.peer.device(),
            self.peer.gid_index(),
            self.peer.ipv6_gid_index()
        );
        println!("  pingpong:   {}", self.pingpong.display());
        println!("  logs:       {}", self.run_dir.display());
        let stdin = std::io::stdin();
        loop {
            print!("rxe-peer# ");
            let _ = std::io::stdout().flush();
            let mut line = String::new();
            match stdin.lock().read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            match self.peer.run(line, Duration::from_secs(300)) {
                Ok(f) => {
                    print!("{}", f.output);
                    if !f.ok() {
                        println!(
                            "[{}]",
                            f.status
                                .map_or("killed after 300 s".to_owned(), |s| format!("exit {s}"))
                        );
                    }
                }
                Err(e) => {
                    println!("error: {e:#}");
                    break;
                }
            }
        }
    }

    pub fn stop(&mut self) {
        self.peer.shutdown();
        self.xroced.signal(signal::Signal::Term);
        let _ = self.xroced.wait(Duration::from_secs(5));
        if let Some(mut t) = self.tcpdump.take() {
            t.signal(signal::Signal::Int);
            let _ = t.wait(Duration::from_secs(5));
        }
    }
}
