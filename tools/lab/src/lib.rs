//! Network-namespace labs for xroce's end-to-end tests, benchmarks and demos.
//!
//! A [`Lab`] is two hosts, `a` and `b`, each a network namespace with one veth interface,
//! joined directly or through a router namespace (where `tc netem` on the router's egress,
//! or the `xroce-impair` forwarder where the kernel has no netem, can inject loss and
//! reordering: AF_XDP transmit bypasses the sender's qdiscs).
//! Names are unique per process and lab (`xr-<pid>-<n>-a`, `-b`, `-r`), and the lab deletes
//! everything it made when dropped, on every exit path: [`signals::install`] extends that to
//! Ctrl-C and SIGTERM, and [`cleanup_stale`] removes what dead processes left behind.
//!
//! This crate never touches the host's own interfaces, addresses or routes: everything it
//! creates lives in its namespaces. It needs root and iproute2.
//!
//! A [`star::Star`] is N hosts behind one router instead, as servers behind one switch (for
//! congestion: a bottleneck port toward one host).
//!
//! Also here: two hosts with a running daemon each, or a star's hosts ([`daemons`]),
//! running code in a namespace ([`netns`]), hugepage reservations
//! ([`hugepages`]), raw UDP frames for AF_XDP tests ([`frame`]) and the test suite's rule
//! for tests that need root ([`require_root`]).

pub mod daemons;
pub mod frame;
pub mod hugepages;
pub mod netns;
pub mod signals;
pub mod star;

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use log::{debug, warn};

/// What went wrong building or tearing down a lab.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A command ran and failed.
    #[error("`{command}` failed: {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// A command could not be started.
    #[error("running `{command}`: {source} (is iproute2 installed? apt-get install -y iproute2)")]
    Spawn {
        /// The command line.
        command: String,
        /// Why it could not start.
        #[source]
        source: io::Error,
    },
    /// The kernel has no netem qdisc (`CONFIG_NET_SCH_NETEM` is off and no module).
    #[error(
        "this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM): loss, delay and reordering \
         cannot be injected with tc netem here (the xroce-impair forwarder of tools/impair \
         loses, duplicates and reorders RoCEv2 frames with XDP instead)"
    )]
    NoNetem,
    /// A namespace of a named lab exists already.
    #[error("network namespace {0} exists already (remove the lab first: cargo xtask lab down)")]
    Exists(String),
    /// A lab option that cannot work.
    #[error("invalid lab configuration: {0}")]
    Config(&'static str),
    /// Anything else.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// How to build a [`Lab`].
#[derive(Clone, Copy, Debug)]
pub struct LabConfig {
    /// MTU of every veth interface (veth's native XDP accepts up to 3504).
    pub mtu: u32,
    /// Put a router namespace between `a` and `b`.
    pub router: bool,
    /// Receive and transmit queues of each veth interface.
    pub queues: u32,
}

impl Default for LabConfig {
    fn default() -> Self {
        LabConfig {
            mtu: 1500,
            router: false,
            queues: 1,
        }
    }
}

/// One of the two hosts of a lab.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// The first host.
    A,
    /// The second host.
    B,
}

impl Side {
    /// The other host.
    pub fn peer(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

/// A host of a lab: a namespace with one interface towards the other host (or the router).
#[derive(Clone, Debug)]
pub struct Host {
    /// The network namespace.
    pub netns: String,
    /// The interface's name inside [`netns`](Self::netns).
    pub interface: String,
    /// The interface's Ethernet address.
    pub mac: [u8; 6],
    /// Its IPv4 address (/24).
    pub ipv4: Ipv4Addr,
    /// Its IPv6 address (/64, configured with `nodad`).
    pub ipv6: Ipv6Addr,
    /// The Ethernet address frames to the other host go to: the peer's, or the router's.
    pub next_hop_mac: [u8; 6],
}

impl Host {
    /// Its link-local IPv6 address: `fe80::/64` with the interface identifier the kernel
    /// derives from the MAC address (modified EUI-64, RFC 4291 appendix A), the kernel's
    /// default (`addr_gen_mode` 0).
    pub fn link_local(&self) -> Ipv6Addr {
        let m = self.mac;
        let word = |hi: u8, lo: u8| u16::from_be_bytes([hi, lo]);
        Ipv6Addr::new(
            0xfe80,
            0,
            0,
            0,
            word(m[0] ^ 2, m[1]),
            word(m[2], 0xff),
            word(0xfe, m[3]),
            word(m[4], m[5]),
        )
    }

    /// Its address of `family`.
    pub fn address(&self, family: Family) -> IpAddr {
        match family {
            Family::Ipv4 => self.ipv4.into(),
            Family::Ipv6 => self.ipv6.into(),
            Family::Ipv6LinkLocal => self.link_local().into(),
        }
    }
}

/// Which addresses of the hosts RoCE traffic goes between. Each host's interface has one
/// IPv4 address, one global IPv6 address and its link-local one, so its GID table is
/// always the same: index 0 the IPv4-mapped address, 1 the global IPv6 address, 2 the
/// link-local one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// RoCEv2 over IPv4 (GID 0).
    Ipv4,
    /// RoCEv2 over IPv6, between the global addresses (GID 1); routed through the router
    /// of a lab that has one.
    Ipv6,
    /// RoCEv2 over IPv6, between the link-local addresses (GID 2): hosts on one link only.
    Ipv6LinkLocal,
}

impl Family {
    /// The index of the hosts' GID of this family.
    pub fn gid_index(self) -> u8 {
        match self {
            Family::Ipv4 => 0,
            Family::Ipv6 => 1,
            Family::Ipv6LinkLocal => 2,
        }
    }

    /// Whether frames carry an IPv6 header.
    pub fn is_ipv6(self) -> bool {
        self != Family::Ipv4
    }
}

/// The router between the hosts of a lab built with [`LabConfig::router`].
#[derive(Clone, Debug)]
pub struct Router {
    /// The network namespace.
    pub netns: String,
    /// Its interface facing host `a`.
    pub toward_a: String,
    /// Its interface facing host `b`.
    pub toward_b: String,
}

/// Two hosts in network namespaces joined by veth, perhaps through a router. Dropping it
/// deletes the namespaces (and with them the interfaces), after killing what runs in them.
#[derive(Debug)]
pub struct Lab {
    id: u64,
    prefix: String,
    /// Host `a`.
    pub a: Host,
    /// Host `b`.
    pub b: Host,
    /// The router, if the lab has one.
    pub router: Option<Router>,
    namespaces: Vec<String>,
    torn_down: bool,
}

/// Ethernet address of host `a`'s interface in every lab.
pub const MAC_A: [u8; 6] = [0x02, 0x78, 0x72, 0x00, 0x00, 0x0a];
/// Ethernet address of host `b`'s interface in every lab.
pub const MAC_B: [u8; 6] = [0x02, 0x78, 0x72, 0x00, 0x00, 0x0b];
/// Ethernet address of the router's interface facing `a`.
pub const MAC_ROUTER_A: [u8; 6] = [0x02, 0x78, 0x72, 0x00, 0x01, 0x0a];
/// Ethernet address of the router's interface facing `b`.
pub const MAC_ROUTER_B: [u8; 6] = [0x02, 0x78, 0x72, 0x00, 0x01, 0x0b];

/// Prefix of every namespace a lab of [`Lab::new`] makes.
pub const NAME_PREFIX: &str = "xr-";

/// Prefix of the lab `cargo xtask lab up` makes: `xroce-a`, `xroce-b`, `xroce-r`.
pub const FIXED_PREFIX: &str = "xroce";

static NEXT_LAB: AtomicU64 = AtomicU64::new(0);

impl Lab {
    /// Builds a lab. On error, whatever was already made is deleted.
    pub fn new(config: &LabConfig) -> Result<Lab, LabError> {
        let id = NEXT_LAB.fetch_add(1, Ordering::Relaxed);
        let prefix = format!("{NAME_PREFIX}{}-{id}", std::process::id());
        Lab::with_prefix(id, prefix, config)
    }

    /// Builds a lab whose namespaces are `<prefix>-a`, `<prefix>-b` (and `<prefix>-r` with
    /// a router), for people to use by name ([`FIXED_PREFIX`] is `cargo xtask lab up`'s).
    /// Fails with [`LabError::Exists`] if any of those namespaces exists already (remove it
    /// with [`remove_named`]). The lab is deleted when dropped, like any other, unless
    /// [`Lab::keep`] lets it outlive the process.
    pub fn new_named(prefix: &str, config: &LabConfig) -> Result<Lab, LabError> {
        let taken = ["a", "b", "r"]
            .iter()
            .map(|role| format!("{prefix}-{role}"))
            .find(|ns| netns::exists(ns));
        if let Some(ns) = taken {
            return Err(LabError::Exists(ns));
        }
        let id = NEXT_LAB.fetch_add(1, Ordering::Relaxed);
        Lab::with_prefix(id, prefix.to_owned(), config)
    }

    /// Leaves the lab in place when this value goes away (for `cargo xtask lab up`): the
    /// namespaces then live until [`remove_named`] (or `ip netns delete`) removes them.
    pub fn keep(&mut self) {
        self.torn_down = true;
        unregister(self.id);
    }

    fn with_prefix(id: u64, prefix: String, config: &LabConfig) -> Result<Lab, LabError> {
        if !(68..=65535).contains(&config.mtu) {
            return Err(LabError::Config("mtu must be within 68..=65535"));
        }
        if config.queues == 0 {
            return Err(LabError::Config("queues must be at least 1"));
        }
        let ns_a = format!("{prefix}-a");
        let ns_b = format!("{prefix}-b");
        let ns_r = format!("{prefix}-r");
        let mut namespaces = vec![ns_a.clone(), ns_b.clone()];
        if config.router {
            namespaces.push(ns_r.clone());
        }
        // Registered before anything exists, so that a signal arriving half-way through
        // still finds everything to delete.
        register(id, &namespaces);

        let (a, b, router) = if config.router {
            (
                Host {
                    netns: ns_a,
                    interface: "xr-a".into(),
                    mac: MAC_A,
                    ipv4: Ipv4Addr::new(10, 77, 1, 1),
                    ipv6: Ipv6Addr::new(0xfd00, 0x77, 1, 0, 0, 0, 0, 1),
                    next_hop_mac: MAC_ROUTER_A,
                },
                Host {
                    netns: ns_b,
                    interface: "xr-b".into(),
                    mac: MAC_B,
                    ipv4: Ipv4Addr::new(10, 77, 2, 1),
                    ipv6: Ipv6Addr::new(0xfd00, 0x77, 2, 0, 0, 0, 0, 1),
                    next_hop_mac: MAC_ROUTER_B,
                },
                Some(Router {
                    netns: ns_r,
                    toward_a: "xr-ra".into(),
                    toward_b: "xr-rb".into(),
                }),
            )
        } else {
            (
                Host {
                    netns: ns_a,
                    interface: "xr-a".into(),
                    mac: MAC_A,
                    ipv4: Ipv4Addr::new(10, 77, 0, 1),
                    ipv6: Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 1),
                    next_hop_mac: MAC_B,
                },
                Host {
                    netns: ns_b,
                    interface: "xr-b".into(),
                    mac: MAC_B,
                    ipv4: Ipv4Addr::new(10, 77, 0, 2),
                    ipv6: Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 2),
                    next_hop_mac: MAC_A,
                },
                None,
            )
        };
        let mut lab = Lab {
            id,
            prefix,
            a,
            b,
            router,
            namespaces,
            torn_down: false,
        };
        // On error `lab` is dropped here, which deletes what was made.
        lab.build(config)?;
        Ok(lab)
    }

    fn build(&mut self, config: &LabConfig) -> Result<(), LabError> {
        for ns in &self.namespaces {
            run(Command::new("ip").args(["netns", "add", ns]))?;
            // Addresses are usable at once, link-local ones included.
            netns::sysctl(ns, "net.ipv6.conf.all.accept_dad", "0")?;
            netns::sysctl(ns, "net.ipv6.conf.default.accept_dad", "0")?;
            run(Command::new("ip").args(["-n", ns, "link", "set", "lo", "up"]))?;
        }
        let queues = config.queues.to_string();
        let mtu = config.mtu.to_string();
        let veth = |ns1: &str, if1: &str, mac1: [u8; 6], ns2: &str, if2: &str, mac2: [u8; 6]| {
            let (mac1, mac2) = (mac_text(mac1), mac_text(mac2));
            let q = queues.as_str();
            run(Command::new("ip")
                .args(["-n", ns1, "link", "add", if1, "address", &mac1])
                .args([
                    "numtxqueues",
                    q,
                    "numrxqueues",
                    q,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    if2,
                    "address",
                    &mac2,
                    "numtxqueues",
                    q,
                    "numrxqueues",
                    q,
                    "netns",
                    ns2,
                ]))?;
            for (ns, ifname) in [(ns1, if1), (ns2, if2)] {
                run(Command::new("ip").args(["-n", ns, "link", "set", ifname, "mtu", &mtu, "up"]))?;
            }
            Ok::<(), LabError>(())
        };
        let (a, b) = (&self.a, &self.b);
        match &self.router {
            None => veth(&a.netns, &a.interface, a.mac, &b.netns, &b.interface, b.mac)?,
            Some(r) => {
                veth(
                    &a.netns,
                    &a.interface,
                    a.mac,
                    &r.netns,
                    &r.toward_a,
                    MAC_ROUTER_A,
                )?;
                veth(
                    &r.netns,
                    &r.toward_b,
                    MAC_ROUTER_B,
                    &b.netns,
                    &b.interface,
                    b.mac,
                )?;
            }
        }
        for host in [a, b] {
            let v4 = format!("{}/24", host.ipv4);
            let v6 = format!("{}/64", host.ipv6);
            let (ns, dev) = (host.netns.as_str(), host.interface.as_str());
            run(Command::new("ip").args(["-n", ns, "addr", "add", &v4, "dev", dev]))?;
            run(Command::new("ip").args(["-n", ns, "-6", "addr", "add", &v6, "dev", dev, "nodad"]))?;
        }
        if let Some(r) = &self.router {
            let ns = r.netns.as_str();
            for (dev, v4, v6) in [
                (&r.toward_a, "10.77.1.254/24", "fd00:77:1::fe/64"),
                (&r.toward_b, "10.77.2.254/24", "fd00:77:2::fe/64"),
            ] {
                run(Command::new("ip").args(["-n", ns, "addr", "add", v4, "dev", dev]))?;
                run(Command::new("ip")
                    .args(["-n", ns, "-6", "addr", "add", v6, "dev", dev, "nodad"]))?;
            }
            netns::sysctl(ns, "net.ipv4.ip_forward", "1")?;
            netns::sysctl(ns, "net.ipv6.conf.all.forwarding", "1")?;
            for (host, gw4, gw6) in [
                (a, "10.77.1.254", "fd00:77:1::fe"),
                (b, "10.77.2.254", "fd00:77:2::fe"),
            ] {
                let ns = host.netns.as_str();
                run(Command::new("ip").args(["-n", ns, "route", "add", "default", "via", gw4]))?;
                run(Command::new("ip")
                    .args(["-n", ns, "-6", "route", "add", "default", "via", gw6]))?;
            }
        }
        debug!(
            "lab {}: up ({} namespaces)",
            self.prefix,
            self.namespaces.len()
        );
        Ok(())
    }

    /// The host on `side`.
    pub fn host(&self, side: Side) -> &Host {
        match side {
            Side::A => &self.a,
            Side::B => &self.b,
        }
    }

    /// The `xr-<pid>-<n>` prefix of this lab's namespaces.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Every namespace of the lab.
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// The UDP endpoints of a frame sent by `from` to the other host: the source is `from`
    /// itself, the destination is the other host's IP address behind `from`'s next hop MAC.
    pub fn udp_endpoints(
        &self,
        from: Side,
        ipv6: bool,
        src_port: u16,
        dst_port: u16,
    ) -> (frame::Endpoint, frame::Endpoint) {
        let (me, peer) = (self.host(from), self.host(from.peer()));
        let ip = |h: &Host| -> IpAddr { if ipv6 { h.ipv6.into() } else { h.ipv4.into() } };
        (
            frame::Endpoint {
                mac: me.mac,
                ip: ip(me),
                port: src_port,
            },
            frame::Endpoint {
                mac: me.next_hop_mac,
                ip: ip(peer),
                port: dst_port,
            },
        )
    }

    /// Runs `f` on a thread inside `side`'s namespace.
    pub fn run_in<T: Send>(&self, side: Side, f: impl FnOnce() -> T + Send) -> io::Result<T> {
        netns::run_in(&self.host(side).netns, f)
    }

    /// A command running `argv` inside `side`'s namespace.
    pub fn command(&self, side: Side, argv: &[&str]) -> Command {
        netns::command(&self.host(side).netns, argv)
    }

    /// Replaces the root qdisc of the router's interface facing `toward` with
    /// `netem <args>` (for example `["loss", "1%"]`, `["delay", "1ms", "reorder", "25%"]`).
    /// Frames going from the router to that host then suffer it. [`LabError::NoNetem`] when
    /// the kernel has no netem (some minimal VM kernels): there, `xroce_impair::Impairer`
    /// (crate `tools/impair`) impairs the lab's RoCEv2 traffic on the router with XDP and
    /// AF_XDP instead (it needs the engine, which the labs of the tools and tests do not).
    pub fn netem(&self, toward: Side, args: &[&str]) -> Result<(), LabError> {
        let r = self
            .router
            .as_ref()
            .ok_or(LabError::Config("netem needs a lab with a router"))?;
        let dev = match toward {
            Side::A => &r.toward_a,
            Side::B => &r.toward_b,
        };
        let mut tc = Command::new("tc");
        tc.args([
            "-n", &r.netns, "qdisc", "replace", "dev", dev, "root", "netem",
        ])
        .args(args);
        match run(&mut tc) {
            Ok(_) => Ok(()),
            Err(LabError::Command { stderr, .. }) if stderr.contains("qdisc kind is unknown") => {
                Err(LabError::NoNetem)
            }
            Err(e) => Err(e),
        }
    }

    /// Deletes the lab now (dropping it does the same; doing both is harmless).
    pub fn teardown(&mut self) -> Result<(), LabError> {
        if self.torn_down {
            return Ok(());
        }
        self.torn_down = true;
        let mut first_error = None;
        for ns in &self.namespaces {
            if let Err(e) = delete_namespace(ns) {
                first_error.get_or_insert(e);
            }
        }
        unregister(self.id);
        debug!("lab {}: torn down", self.prefix);
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            warn!("lab {}: teardown: {e}", self.prefix);
        }
    }
}

/// Kills the processes inside namespace `ns` (except this one) and deletes it. Deleting a
/// namespace that does not exist is not an error.
fn delete_namespace(ns: &str) -> Result<(), LabError> {
    if !netns::exists(ns) {
        return Ok(());
    }
    let pids = run(Command::new("ip").args(["netns", "pids", ns])).unwrap_or_default();
    let me = std::process::id();
    for pid in pids
        .split_whitespace()
        .filter_map(|p| p.parse::<u32>().ok())
    {
        if pid == me {
            continue;
        }
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            continue;
        };
        // Safety: kill takes plain integers and touches no memory of ours.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    match run(Command::new("ip").args(["netns", "delete", ns])) {
        Ok(_) => Ok(()),
        Err(_) if !netns::exists(ns) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Deletes the namespaces `<prefix>-a`, `<prefix>-b` and `<prefix>-r` of a lab made by
/// [`Lab::new_named`] (killing the processes inside them first), whichever of them exist:
/// also what an interrupted build left. Returns the names it deleted.
pub fn remove_named(prefix: &str) -> Result<Vec<String>, LabError> {
    let mut removed = Vec::new();
    for role in ["a", "b", "r"] {
        let ns = format!("{prefix}-{role}");
        if netns::exists(&ns) {
            delete_namespace(&ns)?;
            removed.push(ns);
        }
    }
    Ok(removed)
}

/// Deletes the namespaces of labs whose process is gone (`xr-<pid>-*` with no process
/// `<pid>`), and returns their names. Labs of live processes are left alone.
pub fn cleanup_stale() -> Result<Vec<String>, LabError> {
    let mut removed = Vec::new();
    let entries = match std::fs::read_dir("/run/netns") {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(removed),
        Err(e) => return Err(e.into()),
    };
    for entry in entries {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(pid) = owner_pid(&name) else {
            continue;
        };
        if std::path::Path::new("/proc").join(pid.to_string()).exists() {
            continue;
        }
        delete_namespace(&name)?;
        removed.push(name);
    }
    Ok(removed)
}

/// The pid in a lab namespace name `xr-<pid>-<n>-<role>`.
fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(NAME_PREFIX)?;
    let mut parts = rest.split('-');
    let pid = parts.next()?.parse().ok()?;
    parts.next()?.parse::<u64>().ok()?;
    let role = parts.next()?;
    let star_host = role
        .strip_prefix('h')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    (matches!(role, "a" | "b" | "r") || star_host).then_some(())?;
    parts.next().is_none().then_some(pid)
}

fn register(id: u64, namespaces: &[String]) {
    let mut registry = signals::REGISTRY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    registry.push((id, namespaces.to_vec()));
}

fn unregister(id: u64) {
    let mut registry = signals::REGISTRY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    registry.retain(|(lab, _)| *lab != id);
}

/// Deletes the namespaces of every live lab of this process (from the signal thread).
pub(crate) fn teardown_all_registered() {
    let labs = {
        let registry = signals::REGISTRY
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        registry.clone()
    };
    for (_, namespaces) in labs {
        for ns in namespaces {
            if let Err(e) = delete_namespace(&ns) {
                eprintln!("xroce-lab: deleting {ns}: {e}");
            }
        }
    }
}

/// Runs a command to completion; its stdout on success, its stderr in the error otherwise.
pub fn run(cmd: &mut Command) -> Result<String, LabError> {
    let command = format!("{cmd:?}").replace('"', "");
    let output = cmd.output().map_err(|source| LabError::Spawn {
        command: command.clone(),
        source,
    })?;
    if !output.status.success() {
        return Err(LabError::Command {
            command,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn mac_text(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Fails unless every Debian package of `pkgs` is installed, naming the command that
/// installs them: `cargo xtask` installs what each of its commands needs before running
/// it, but a tool run on its own does not.
pub fn require_packages(pkgs: &[&str]) -> io::Result<()> {
    let missing: Vec<&str> = pkgs
        .iter()
        .copied()
        .filter(|pkg| {
            !Command::new("dpkg-query")
                .args(["-W", "-f=${Status}", pkg])
                .output()
                .is_ok_and(|o| {
                    o.status.success()
                        && String::from_utf8_lossy(&o.stdout).contains("install ok installed")
                })
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "missing Debian packages: {list}; install them with `cargo xtask deps` (or as root: \
         apt-get install -y {list})",
        list = missing.join(" ")
    )))
}

/// The test suite's rule for tests that need root (network namespaces, XDP, AF_XDP): they
/// are `#[ignore]`d with that reason, so `cargo test` lists them as ignored, and when one
/// is run anyway (`cargo xtask test` runs them all) without root, it fails here with a
/// message that says what to do, instead of passing without having tested anything.
pub fn require_root() {
    assert!(
        is_root(),
        "this test needs root (network namespaces, XDP, AF_XDP): run it as root, as \
         `cargo xtask test` does"
    );
}

/// `true` when this process runs as root.
pub fn is_root() -> bool {
    // Safety: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pid_reads_only_lab_names() {
        assert_eq!(owner_pid("xr-1234-0-a"), Some(1234));
        assert_eq!(owner_pid("xr-1234-17-r"), Some(1234));
        assert_eq!(owner_pid("xr-1234-17-c"), None);
        assert_eq!(owner_pid("xr-1234-17-h12"), Some(1234), "a star's host");
        assert_eq!(owner_pid("xr-1234-17-h"), None);
        assert_eq!(owner_pid("xr-1234-17-hx"), None);
        assert_eq!(owner_pid("xr-1234-a"), None);
        assert_eq!(owner_pid("xr-1234-0-a-x"), None);
        assert_eq!(owner_pid("rxe-peer"), None);
        assert_eq!(owner_pid("xr-pid-0-a"), None);
    }

    #[test]
    fn a_hosts_link_local_address_is_the_eui_64_of_its_mac() {
        let host = Host {
            netns: "x".into(),
            interface: "xr-a".into(),
            mac: MAC_A,
            ipv4: Ipv4Addr::new(10, 77, 0, 1),
            ipv6: Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 1),
            next_hop_mac: MAC_B,
        };
        // As `ip -6 addr` shows it for 02:78:72:00:00:0a.
        assert_eq!(host.link_local().to_string(), "fe80::78:72ff:fe00:a");
        assert_eq!(
            host.address(Family::Ipv6).to_string(),
            "fd00:77::1".to_string()
        );
        assert_eq!(
            [Family::Ipv4, Family::Ipv6, Family::Ipv6LinkLocal].map(Family::gid_index),
            [0, 1, 2]
        );
    }

    #[test]
    fn mac_text_is_colon_hex() {
        assert_eq!(mac_text(MAC_ROUTER_B), "02:78:72:00:01:0b");
    }
}
