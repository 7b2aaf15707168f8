//! The daemon: sets up the XDP program and one poller per served queue, then runs the
//! control plane until it is told to stop (SIGINT or SIGTERM), and tears everything down.
//!
//! Everything that needs privileges happens first, on this one thread: the device node,
//! the XDP program, every AF_XDP socket. Then the daemon gives its privileges up
//! ([`crate::privileges`]), and only then starts the pollers, which inherit what is left.
//! The device node goes to a keeper process before that (the program running the daemon
//! answers `keep-device-node`: `xroced` does).

use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{Context, Result, anyhow, bail};
use crossbeam_channel::{bounded, unbounded};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use tracing::{info, warn};
use verbs_shm::contract::WakePage;
use verbs_shm::sys::{self, Mapping};
use xroce_transport::{Endpoint, EndpointConfig, Limits};
use xroce_wire::IbMtu;

use crate::control::{AccessPolicy, AppLimits, Control, Host, Neighbour, PollerLink, Resolver};
use crate::device_node::{DeviceNode, Keeper};
use crate::handoff;
use crate::poller::{Command, GsiLink, Poller, PollerConfig};
use crate::privileges::{self, User};
use crate::umem::HugepagePolicy;
use crate::xdp::{AttachRequest, XdpProgram};
use crate::xsk::{Port, PortConfig, ZeroCopy};

/// How the daemon runs.
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    /// The interface to serve.
    pub interface: String,
    /// The device name applications see (`xroce0`).
    pub device: String,
    /// The receive queues to serve, one poller each.
    pub queues: Vec<u32>,
    /// The cores to pin the pollers to, in order (none: not pinned).
    pub cores: Vec<usize>,
    /// Native or generic XDP.
    pub xdp: AttachRequest,
    /// Hugepages for the AF_XDP buffers.
    pub hugepages: HugepagePolicy,
    /// Zero-copy AF_XDP.
    pub zero_copy: ZeroCopy,
    /// Receive frames and transmit frames of each queue's UMEM (each; a power of two).
    pub frames: u32,
    /// Per-application limits.
    pub limits: AppLimits,
    /// How idle pollers wait.
    pub idle: crate::poller::IdlePolicy,
    /// The memory areas the daemon may map for applications in all (`None`: from
    /// `vm.max_map_count`).
    pub map_budget: Option<usize>,
    /// Make `/dev/infiniband/uverbs-<device>` while running ([`crate::device_node`]).
    pub device_node: bool,
    /// Congestion control for every queue pair. A line rate of zero: the interface's
    /// speed ([`link_speed`]).
    pub congestion: xroce_congestion::CongestionConfig,
    /// Selective repeat with peers that are xroce daemons (known by their hello, which
    /// this sends even with ECN and the rate off); go-back-N, the standard's, with every
    /// other peer and when off.
    pub selective_repeat: bool,
    /// Who may open the device.
    pub access: AccessPolicy,
    /// The user to run as after setup (`None`: the one it was started as).
    pub user: Option<User>,
}

/// Losses per thousand packets of a round trip that a queue pair in selective repeat does
/// not take for congestion ([`xroce_congestion::CongestionConfig::loss_tolerance_per_mille`]):
/// the transport's own, beyond which its window is held as for congestion.
pub const SELECTIVE_LOSS_TOLERANCE: u32 = xroce_transport::recovery::SELECTIVE_LOSS_TOLERANCE;

/// The speed of `interface` as the kernel reports it (`/sys/class/net/IF/speed`, Mbit/s),
/// or 10 Gbit/s when it reports none (a virtual interface that is down, a tun device).
pub fn link_speed(interface: &str) -> xroce_congestion::Rate {
    std::fs::read_to_string(format!("/sys/class/net/{interface}/speed"))
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|&mbit| mbit > 0)
        .map_or(xroce_congestion::Rate::from_mbit(10_000), |mbit| {
            xroce_congestion::Rate::from_mbit(mbit as u64)
        })
}

/// The largest path MTU the daemon supports (with AF_XDP multi-buffer).
pub const MAX_PATH_MTU: IbMtu = IbMtu::Mtu4096;

/// The largest path MTU whose packets fit in `max_packet` bytes (Ethernet header onwards)
/// with every header: an 802.1Q tag, IPv6 and the longest transport headers. 2048 for one
/// 4 KiB AF_XDP frame ([`FRAME_CAPACITY`](crate::umem::FRAME_CAPACITY)), 4096 with
/// multi-buffer.
pub fn path_mtu_within(max_packet: usize) -> IbMtu {
    const ETHERNET_AND_VLAN: usize = 14 + 4;
    max_packet
        .checked_sub(ETHERNET_AND_VLAN)
        .and_then(|mtu| IbMtu::for_netdev_mtu(mtu, xroce_wire::mtu::IpVersion::V6))
        .unwrap_or(IbMtu::Mtu256)
        .min(MAX_PATH_MTU)
}

/// Whether a link of `netdev_mtu` bytes needs multi-buffer AF_XDP sockets: its largest
/// frame (with an 802.1Q tag) does not fit one UMEM frame.
pub fn needs_multi_buffer(netdev_mtu: u32) -> bool {
    netdev_mtu as usize + 14 + 4 > crate::umem::FRAME_CAPACITY
}

struct Running {
    link: PollerLink,
    thread: JoinHandle<()>,
}

/// Runs the daemon until SIGINT or SIGTERM.
pub fn run(cfg: DaemonConfig, mut host: Box<dyn Host>) -> Result<()> {
    // Block the stop signals in every thread; the control loop reads them from a signalfd.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals.thread_block().context("blocking SIGINT/SIGTERM")?;
    let signalfd = SignalFd::with_flags(&signals, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .context("creating a signalfd")?;

    // Claim the device name first: a second daemon for the same name must not touch the
    // first one's interface.
    let listener = sys::listen(&cfg.device).map_err(|e| {
        if e.raw_os_error() == Some(libc::EADDRINUSE) {
            anyhow!(
                "another xroced already serves device {} in this network namespace (its socket @{}{} is taken); stop it or choose another --name",
                cfg.device,
                sys::SOCKET_PREFIX,
                cfg.device
            )
        } else {
            anyhow!("listening on @{}{}: {e}", sys::SOCKET_PREFIX, cfg.device)
        }
    })?;

    let node = if cfg.device_node {
        match DeviceNode::create(&cfg.device) {
            Ok(node) => {
                info!("{} is the device's node", node.path().display());
                Some(node)
            }
            Err(e) => {
                warn!(
                    "cannot make {}/{}: {e}; software that checks for a device node (UCX) will not use {}",
                    crate::device_node::DIRECTORY,
                    crate::device_node::dev_name(&cfg.device),
                    cfg.device
                );
                None
            }
        }
    } else {
        None
    };

    let port = host.port();
    if port.gids.is_empty() {
        bail!(
            "{} has no IP address: RoCEv2 needs one (its GID)",
            cfg.interface
        );
    }
    info!(
        "serving {} ({} MTU {}, GIDs {:?}) as {}",
        cfg.interface,
        fmt_mac(port.mac),
        port.mtu,
        port.gids.iter().map(|g| g.to_ip()).collect::<Vec<_>>(),
        cfg.device
    );

    let most = verbs_shm::contract::MAX_POLLERS;
    if cfg.queues.is_empty() || cfg.queues.len() > most {
        bail!(
            "a daemon serves 1 to {most} queues (one poller each), not {}",
            cfg.queues.len()
        );
    }
    let wake_len = size_of::<WakePage>();
    let wake_fd = sys::memfd("xroce-wake", wake_len, false).context("creating the wake page")?;
    let wake_page = Arc::new(Mapping::map(wake_fd.as_fd(), wake_len, 0, true)?);
    // Applications may only map it read-only from now on.
    nix::fcntl::fcntl(
        wake_fd.as_fd(),
        nix::fcntl::FcntlArg::F_ADD_SEALS(
            nix::fcntl::SealFlag::F_SEAL_FUTURE_WRITE | nix::fcntl::SealFlag::F_SEAL_SEAL,
        ),
    )
    .map_err(|e| anyhow!("sealing the wake page: {e}"))?;

    let queues = cfg.queues.iter().copied().max().map_or(1, |q| q + 1);
    let mut xdp = XdpProgram::load(queues).map_err(|e| anyhow!("{e}"))?;
    let mode = xdp
        .attach(&cfg.interface, cfg.xdp)
        .map_err(|e| anyhow!("{e}"))?;
    info!("XDP program attached to {} ({mode:?})", cfg.interface);

    let doorbells = cfg
        .queues
        .iter()
        .map(|_| sys::eventfd().map(Arc::new))
        .collect::<std::io::Result<Vec<_>>>()?;
    let mut mesh =
        handoff::mesh(&doorbells, &wake_page, xroce_transport::frame::MAX_FRAME).into_iter();
    // QP1 frames, from every poller to the connection manager on this thread.
    let (gsi_tx, gsi_rx) = bounded::<Vec<u8>>(GsiLink::DEPTH);
    let gsi = GsiLink {
        frames: gsi_tx,
        bell: Arc::new(sys::eventfd()?),
    };
    let mut congestion = cfg.congestion.clone();
    congestion.announce = cfg.selective_repeat;
    if cfg.selective_repeat {
        // With selective repeat a random loss costs the packet lost: a few percent of a
        // round trip's packets lost is not congestion (an overflowing queue loses more).
        congestion.loss_tolerance_per_mille = SELECTIVE_LOSS_TOLERANCE;
    }
    if congestion.line_rate == xroce_congestion::Rate::ZERO {
        congestion.line_rate = link_speed(&cfg.interface);
    }
    info!(
        "congestion control: {:?}, ECN {:?}, line rate {} Mbit/s; selective repeat with xroce peers: {}",
        congestion.algorithm,
        congestion.ecn,
        congestion.line_rate.mbit(),
        if cfg.selective_repeat { "on" } else { "off" }
    );
    // Every AF_XDP socket, while the daemon may still open them. A link whose frames do
    // not fit one UMEM frame gets multi-buffer sockets (a 4096-byte path MTU), or, where the
    // kernel refuses them, single-frame ones (2048).
    let mut ports = Vec::new();
    let mut multi_buffer = needs_multi_buffer(port.mtu);
    for &queue in &cfg.queues {
        let mut port_cfg = PortConfig::new(&cfg.interface, queue);
        port_cfg.hugepages = cfg.hugepages;
        port_cfg.zero_copy = cfg.zero_copy;
        port_cfg.rx_frames = cfg.frames;
        port_cfg.tx_frames = cfg.frames;
        port_cfg.multi_buffer = multi_buffer;
        let opened = match Port::open(&port_cfg) {
            Err(e) if multi_buffer => {
                warn!(
                    "multi-buffer AF_XDP on {} queue {queue} refused ({e}); using single-frame \
                     sockets, path MTU at most {}",
                    cfg.interface,
                    path_mtu_within(crate::umem::FRAME_CAPACITY)
                );
                multi_buffer = false;
                port_cfg.multi_buffer = false;
                Port::open(&port_cfg)
            }
            opened => opened,
        };
        let xsk = opened
            .map_err(|e| anyhow!("opening AF_XDP on {} queue {queue}: {e}", cfg.interface))?;
        xdp.insert_socket(queue, xsk.as_fd())
            .map_err(|e| anyhow!("{e}"))?;
        ports.push(xsk);
    }
    // Every queue carries the smallest of what the sockets take.
    let max_packet = ports
        .iter()
        .map(|p| p.info().max_packet())
        .min()
        .unwrap_or(crate::umem::FRAME_CAPACITY);
    host.limit_path_mtu(path_mtu_within(max_packet));
    let port = host.port();
    info!(
        "path MTU {} on {} (MTU {}, AF_XDP packets up to {max_packet} bytes{})",
        port.active_mtu.bytes(),
        cfg.interface,
        port.mtu,
        if multi_buffer { ", multi-buffer" } else { "" }
    );

    let _keeper: Option<Keeper> = match node {
        Some(node) => match node.hand_to_keeper(Path::new("/proc/self/exe"), cfg.user.as_ref()) {
            Ok(keeper) => {
                info!(
                    "keeper pid {} removes {} when the daemon stops",
                    keeper.pid(),
                    keeper.path().display()
                );
                Some(keeper)
            }
            Err(e) => {
                warn!("no keeper for the device node ({e}): it stays after the daemon stops");
                None
            }
        },
        None => None,
    };
    privileges::drop_after_setup(cfg.user.as_ref()).context("giving up privileges")?;

    let mut pollers = Vec::new();
    for ((index, &queue), xsk) in cfg.queues.iter().enumerate().zip(ports) {
        let (tx, rx) = unbounded();
        let doorbell = doorbells[index].clone();
        // NOTE(unwrap): the mesh has one end per queue.
        let handoff = mesh.next().expect("one hand-over end per poller");
        let core = cfg.cores.get(index).map(|&id| core_affinity::CoreId { id });
        let pcfg = PollerConfig {
            index,
            wake_page: wake_page.clone(),
            doorbell: doorbell.clone(),
            commands: rx,
            core,
            idle: cfg.idle,
            handoff,
            gsi: gsi.clone(),
            congestion: congestion.clone(),
            selective_repeat: cfg.selective_repeat,
        };
        let endpoint_cfg = EndpointConfig {
            mac: port.mac,
            gids: port.gids.clone(),
            limits: Limits {
                max_mtu: port.active_mtu,
                max_rd_atomic: crate::control::MAX_RD_ATOMIC,
                ..Limits::default()
            },
            default_hop_limit: crate::control::ROCE_HOP_LIMIT,
            // Half a receive ring: a peer configured like this daemon takes that much from
            // one poller without dropping, even while it is busy.
            max_inflight: cfg.frames / 2,
        };
        let mac = port.mac;
        let thread = std::thread::Builder::new()
            .name(format!("xroce-poller-{index}"))
            .spawn(move || {
                Poller::new(pcfg, xsk, Endpoint::new(endpoint_cfg), mac).run();
            })?;
        info!(
            "poller {index}: queue {queue}{}",
            core.map(|c| format!(", core {}", c.id)).unwrap_or_default()
        );
        pollers.push(Running {
            link: PollerLink {
                commands: tx,
                doorbell,
            },
            thread,
        });
    }

    let links = pollers.iter().map(|p| p.link.clone()).collect();
    let mut control = Control::new(&cfg.device, listener, links, wake_fd, host, cfg.limits)
        .context("creating the control plane's resolution doorbell")?
        .with_gsi(gsi_rx, gsi.bell.clone())
        .with_access(cfg.access.clone());
    info!("{} may open {}", cfg.access.allowed(), cfg.device);
    if let Some(areas) = cfg.map_budget {
        control = control.with_map_budget(areas);
    }
    info!(
        "ready: applications reach {} at @{}{}",
        cfg.device,
        sys::SOCKET_PREFIX,
        cfg.device
    );

    loop {
        // At most a second, less when the connection manager has a timer due sooner.
        let wait = control.cm_deadline().map_or(1000, |t| {
            t.saturating_duration_since(std::time::Instant::now())
                .as_millis()
                .clamp(1, 1000)
        }) as u16;
        let set = control.poll_set();
        let mut fds: Vec<PollFd<'_>> = set
            .iter()
            .map(|(_, fd)| PollFd::new(*fd, PollFlags::POLLIN))
            .collect();
        fds.push(PollFd::new(signalfd.as_fd(), PollFlags::POLLIN));
        match poll(&mut fds, PollTimeout::from(wait)) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => bail!("poll: {e}"),
        }
        let stop = fds
            .last()
            .and_then(|f| f.revents())
            .is_some_and(|r| !r.is_empty());
        let ready: Vec<u64> = set
            .iter()
            .zip(fds.iter())
            .filter(|(_, f)| f.revents().is_some_and(|r| !r.is_empty()))
            .map(|((id, _), _)| *id)
            .collect();
        drop(fds);
        drop(set);
        if stop {
            // Say who asked: a stop nobody expected is then easy to trace.
            match signalfd.read_signal() {
                Ok(Some(si)) => info!(
                    "stopping: signal {} from pid {} (uid {})",
                    si.ssi_signo, si.ssi_pid, si.ssi_uid
                ),
                _ => info!("stopping"),
            }
            break;
        }
        for id in ready {
            control.on_ready(id);
        }
        control.on_tick();
        control.refresh_host();
    }
    drop(control);
    for p in pollers {
        let _ = p.link.commands.send(Command::Stop);
        sys::eventfd_signal(p.link.doorbell.as_fd());
        if p.thread.join().is_err() {
            warn!("a poller panicked");
        }
    }
    xdp.detach().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

fn fmt_mac(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The host as the kernel describes it, over rtnetlink.
#[derive(Debug)]
pub struct NetlinkHost {
    ifindex: u32,
    neighbours: crate::host::Neighbours,
    last: Option<crate::control::PortView>,
    timeout: std::time::Duration,
    /// The largest path MTU the AF_XDP sockets carry.
    most: IbMtu,
    /// The interface's multicast memberships, by group.
    groups: std::collections::HashMap<xroce_wire::Gid, crate::host::Membership>,
}

impl NetlinkHost {
    /// How long a path waits for its next hop to resolve by default (the kernel's RoCE
    /// address resolution also gives up after a few seconds).
    pub const RESOLVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

    /// The host view of interface `name` (in the calling thread's namespace).
    pub fn new(name: &str) -> Result<NetlinkHost> {
        let iface = crate::host::Interface::query(name)?;
        Ok(NetlinkHost {
            ifindex: iface.ifindex,
            neighbours: crate::host::Neighbours::new()?,
            last: None,
            timeout: NetlinkHost::RESOLVE_TIMEOUT,
            most: path_mtu_within(crate::umem::FRAME_CAPACITY),
            groups: std::collections::HashMap::new(),
        })
    }

    /// Paths wait up to `timeout` for their next hop to resolve.
    pub fn with_resolve_timeout(mut self, timeout: std::time::Duration) -> NetlinkHost {
        self.timeout = timeout;
        self
    }
}

impl Host for NetlinkHost {
    fn limit_path_mtu(&mut self, most: IbMtu) {
        self.most = most;
    }

    fn port(&mut self) -> crate::control::PortView {
        match crate::host::Interface::query_index(self.ifindex) {
            Ok(iface) => {
                let active = crate::host::path_mtu(&iface, self.most).unwrap_or(IbMtu::Mtu256);
                let view = crate::control::PortView {
                    netdev: iface.name.clone(),
                    mac: iface.mac,
                    mtu: iface.mtu,
                    active_mtu: active,
                    up: iface.is_up(),
                    gids: iface.gid_table().entries().iter().map(|e| e.gid).collect(),
                };
                self.last = Some(view.clone());
                view
            }
            Err(e) => {
                warn!("cannot read the interface: {e}");
                let mut v = self.last.clone().unwrap_or(crate::control::PortView {
                    netdev: String::new(),
                    mac: [0; 6],
                    mtu: 0,
                    active_mtu: IbMtu::Mtu256,
                    up: false,
                    gids: Vec::new(),
                });
                v.up = false;
                v
            }
        }
    }

    fn lookup(&mut self, dgid: xroce_wire::Gid) -> Neighbour {
        use crate::host::Lookup;
        let destination = dgid.to_ip();
        let mut found = self.neighbours.lookup(self.ifindex, destination);
        if let Ok(Lookup::Failed { .. }) = found {
            // An attempt of an earlier request failed; this request gets one of its own.
            found = self.neighbours.lookup(self.ifindex, destination);
        }
        match found {
            Ok(Lookup::Resolved(mac)) => Neighbour::Mac(mac),
            Ok(Lookup::Local) => Neighbour::Mac(self.port().mac),
            Ok(Lookup::Pending { .. } | Lookup::Failed { .. }) => Neighbour::Pending,
            Err(e) => Neighbour::Unreachable(e.to_string()),
        }
    }

    fn join_group(&mut self, gid: xroce_wire::Gid) -> std::io::Result<()> {
        if !self.groups.contains_key(&gid) {
            let membership = crate::host::Membership::join(self.ifindex, gid.to_ip())?;
            info!("joined multicast group {}", gid.to_ip());
            self.groups.insert(gid, membership);
        }
        Ok(())
    }

    fn leave_group(&mut self, gid: xroce_wire::Gid) {
        if self.groups.remove(&gid).is_some() {
            info!("left multicast group {}", gid.to_ip());
        }
    }

    fn hop_limit(&mut self, dgid: xroce_wire::Gid) -> u8 {
        let interface = self.port().netdev;
        self.neighbours
            .hop_limit(self.ifindex, &interface, dgid.to_ip())
            .unwrap_or(crate::control::ROCE_HOP_LIMIT)
    }

    fn is_privileged(&self, pid: i32) -> bool {
        has_capability(pid, CAP_NET_RAW)
    }

    fn route(&mut self, destination: std::net::IpAddr) -> crate::control::RouteOut {
        use crate::control::RouteOut;
        match self.neighbours.route(self.ifindex, destination) {
            Ok(route) if route.ifindex == self.ifindex => RouteOut::Port(route.source),
            Ok(route) => RouteOut::Elsewhere(format!(
                "the route to {destination} leaves by interface {}, not {}",
                route.ifindex, self.ifindex
            )),
            Err(e) => RouteOut::Unreachable(e.to_string()),
        }
    }

    fn resolver(&self) -> Resolver {
        let (ifindex, timeout) = (self.ifindex, self.timeout);
        Arc::new(move |dgid: xroce_wire::Gid| {
            match crate::host::resolve(ifindex, dgid.to_ip(), timeout) {
                Ok(crate::host::NextHop::Mac(mac)) => Ok(Some(mac)),
                Ok(crate::host::NextHop::Local) => Ok(None),
                Err(e) => Err(e.to_string()),
            }
        })
    }
}

/// `CAP_NET_RAW`'s bit in a capability set.
const CAP_NET_RAW: u32 = 13;

/// Whether process `pid` has capability `cap` in its effective set (the `CapEff` line of
/// `/proc/PID/status`); `false` when that cannot be read (the process is gone).
fn has_capability(pid: i32, cap: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .as_deref()
        .and_then(effective_capabilities)
        .is_some_and(|set| set >> cap & 1 == 1)
}

/// The effective capability set of a `/proc/PID/status` text.
fn effective_capabilities(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(line.trim(), 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_effective_capabilities_are_read_from_proc_status() {
        let status = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t0000000000002000\n";
        assert_eq!(effective_capabilities(status), Some(1 << CAP_NET_RAW));
        assert_eq!(effective_capabilities("Name:\tx\n"), None);
        // This test process: as root it has everything, otherwise (usually) nothing.
        let root = nix::unistd::geteuid().is_root();
        assert_eq!(has_capability(std::process::id() as i32, CAP_NET_RAW), root);
        assert!(!has_capability(-1, CAP_NET_RAW));
    }
}
