//! This host's own Linux rxe as the peer: a Soft-RoCE device over the far end of the lab's
//! veth, in the lab's second namespace, made as the kernel's rdma selftests make theirs
//! (`ip netns exec NS rdma link add NAME type rxe netdev IF`). This host's Debian programs
//! (ibverbs-utils, perftest) then run in that namespace instead of in a VM.
//!
//! It needs a kernel with `rdma_rxe` whose rxe opens its UDP port (4791) in the namespace
//! of its net device; rxe without network-namespace support keeps that socket in the
//! initial namespace, and frames reaching the lab's namespace would find no one. Both are
//! checked before the device is used ([`probe`], [`LocalRxe::start`]); the caller falls
//! back to a VM when either is missing.
//!
//! RDMA's network-namespace mode (`rdma system show netns`) decides who sees the device.
//! In `shared` mode (the kernel's default) every RDMA device is visible in every namespace:
//! while a run lasts, the device shows on the whole host (its name, `xrxe<pid>n<n>`, says
//! whose it is), and the programs here always name it (`-d`). In `exclusive` mode a device
//! belongs to one namespace: if it was not made in the lab's, it is moved there (`rdma dev
//! set NAME netns NS`). The mode is the host's and is never changed here.
//!
//! The device is deleted (`rdma link delete`) when dropped. If the process dies first,
//! deleting the lab's namespace (as `xroce_lab` does on Ctrl-C, or the next run's stale-lab
//! cleanup) deletes the veth, and rxe removes a device whose net device goes away.

use std::fs;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use xroce_lab::netns;

use super::checks::last_line;
use super::log;
use super::process::tcp_listening;
use super::vm::Finished;

/// RoCEv2's UDP port (IBTA A17.2.3).
const ROCE_PORT: u16 = 4791;

/// Whether this kernel has `rdma_rxe` (loaded, or loadable with `modprobe`): `Err` says
/// why not.
pub(crate) fn probe() -> Result<(), String> {
    if Path::new("/sys/module/rdma_rxe").exists() {
        return Ok(());
    }
    let out = Command::new("modprobe")
        .arg("rdma_rxe")
        .output()
        .map_err(|e| format!("rdma_rxe is not loaded and modprobe cannot run ({e})"))?;
    if out.status.success() {
        log("loaded this kernel's rdma_rxe module (modprobe rdma_rxe)");
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    Err(format!(
        "this kernel has no rdma_rxe (modprobe rdma_rxe: {})",
        if text.trim().is_empty() {
            out.status.to_string()
        } else {
            last_line(&text)
        }
    ))
}

/// RDMA's network-namespace mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NetnsMode {
    /// Every RDMA device is visible in every namespace.
    Shared,
    /// A device belongs to one namespace.
    Exclusive,
}

/// The mode in `rdma system show netns` (`netns shared copy-on-fork on`).
pub(crate) fn parse_netns_mode(text: &str) -> Option<NetnsMode> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "netns")?;
    match *words.get(at + 1)? {
        "shared" => Some(NetnsMode::Shared),
        "exclusive" => Some(NetnsMode::Exclusive),
        _ => None,
    }
}

/// `rdma link add` of the device, run inside the namespace so that `netdev` is found there.
pub(crate) fn link_add(ns: &str, device: &str, netdev: &str) -> Vec<String> {
    [
        "ip", "netns", "exec", ns, "rdma", "link", "add", device, "type", "rxe", "netdev", netdev,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// `rdma link delete` of the device, inside namespace `ns` or (`None`) this one.
pub(crate) fn link_delete(ns: Option<&str>, device: &str) -> Vec<String> {
    let mut v: Vec<String> = match ns {
        Some(ns) => ["ip", "netns", "exec", ns].map(str::to_owned).to_vec(),
        None => Vec::new(),
    };
    v.extend(["rdma", "link", "delete", device].map(str::to_owned));
    v
}

/// `rdma dev set … netns …`: moves a device into namespace `ns` (exclusive mode only).
pub(crate) fn move_into(device: &str, ns: &str) -> Vec<String> {
    ["rdma", "dev", "set", device, "netns", ns]
        .map(str::to_owned)
        .to_vec()
}

/// Whether a UDP socket is bound to `port` in a `/proc/net/udp` (or `udp6`) table.
pub(crate) fn udp_bound(table: &str, port: u16) -> bool {
    let want = format!(":{port:04X}");
    table.lines().skip(1).any(|l| {
        l.split_whitespace()
            .nth(1)
            .is_some_and(|local| local.ends_with(&want))
    })
}

/// The shell command listing a device's GID table as `INDEX GID` lines (unset entries
/// print nothing or fail to read, and are left out).
pub(crate) fn gid_listing(device: &str) -> String {
    format!(
        "for f in /sys/class/infiniband/{device}/ports/1/gids/*; do \
         g=$(cat \"$f\" 2>/dev/null) && echo \"${{f##*/}} $g\"; done; true"
    )
}

/// The index of `ip`'s IPv4-mapped GID in a [`gid_listing`].
pub(crate) fn ipv4_gid_index(listing: &str, ip: Ipv4Addr) -> Option<u32> {
    gid_index_of(listing, ip.to_ipv6_mapped())
}

/// The index of `ip`'s GID in a [`gid_listing`] (an IPv6 address is its own GID).
pub(crate) fn gid_index_of(listing: &str, ip: Ipv6Addr) -> Option<u32> {
    let want: Vec<String> = ip.segments().iter().map(|s| format!("{s:04x}")).collect();
    let want = want.join(":");
    listing.lines().find_map(|l| {
        let (index, gid) = l.trim().split_once(' ')?;
        (gid.trim() == want).then(|| index.parse().ok())?
    })
}

/// Runs a command (`argv[0]` and its arguments) to completion; its output, or why it failed.
fn run(argv: &[String]) -> Result<String> {
    let (program, rest) = argv.split_first().context("an empty command")?;
    let out = Command::new(program)
        .args(rest)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", argv.join(" ")))?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!(
            "{} failed ({}): {}",
            argv.join(" "),
            out.status,
            last_line(&text)
        );
    }
    Ok(text)
}

/// A device of this host's rxe in a namespace; deleted when dropped.
#[derive(Debug)]
pub(crate) struct LocalRxe {
    ns: String,
    device: String,
    gid_index: u32,
    /// The indices of the GIDs of the namespace's global and link-local IPv6 addresses,
    /// when it has them.
    ipv6_gid_indices: [Option<u32>; 2],
    mode: NetnsMode,
    /// Where jobs write their output.
    dir: PathBuf,
    /// Whether the device still exists (and is ours to delete).
    made: bool,
}

impl LocalRxe {
    /// Makes the device over `netdev` (addressed `ip`, and `ip6`'s global and link-local
    /// IPv6 addresses when it has them) in namespace `ns`, and checks that it can serve
    /// there. Jobs' output goes to `dir`.
    pub(crate) fn start(
        ns: &str,
        netdev: &str,
        ip: Ipv4Addr,
        ip6: [Option<Ipv6Addr>; 2],
        dir: &Path,
    ) -> Result<LocalRxe> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let mode_text = run(&["rdma", "system", "show", "netns"].map(str::to_owned))?;
        let mode = parse_netns_mode(&mode_text)
            .with_context(|| format!("rdma system show netns said {:?}", mode_text.trim()))?;
        let device = format!(
            "xrxe{}n{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = dir.join("peer");
        fs::create_dir_all(&dir)?;
        run(&link_add(ns, &device, netdev))?;
        // From here on, dropping it deletes the device.
        let mut rxe = LocalRxe {
            ns: ns.to_owned(),
            device,
            gid_index: 0,
            ipv6_gid_indices: [None; 2],
            mode,
            dir,
            made: true,
        };
        let visible = |rxe: &LocalRxe| {
            run(&[
                "ip",
                "netns",
                "exec",
                &rxe.ns,
                "rdma",
                "dev",
                "show",
                &rxe.device,
            ]
            .map(str::to_owned))
            .is_ok()
        };
        if !visible(&rxe) {
            if mode == NetnsMode::Shared {
                bail!(
                    "{} is not visible in namespace {} although rdma's namespace mode is shared",
                    rxe.device,
                    rxe.ns
                );
            }
            run(&move_into(&rxe.device, &rxe.ns))?;
            if !visible(&rxe) {
                bail!(
                    "{} could not be moved into namespace {}",
                    rxe.device,
                    rxe.ns
                );
            }
        }
        // rxe opens its UDP socket in the namespace of its net device only where it has
        // network-namespace support; without it, frames to the namespace find no socket.
        let bound = netns::run_in(&rxe.ns, || {
            ["/proc/thread-self/net/udp", "/proc/thread-self/net/udp6"]
                .iter()
                .filter_map(|p| fs::read_to_string(p).ok())
                .any(|t| udp_bound(&t, ROCE_PORT))
        })?;
        if !bound {
            bail!(
                "this kernel's rxe opened no UDP port {ROCE_PORT} in namespace {} (rxe without \
                 network-namespace support keeps its socket in the initial namespace)",
                rxe.ns
            );
        }
        // The GID table fills in asynchronously: wait for the IPv4-mapped entry.
        let deadline = Instant::now() + Duration::from_secs(10);
        rxe.gid_index = loop {
            let listing = rxe.run(&gid_listing(&rxe.device), Duration::from_secs(10))?;
            if let Some(i) = ipv4_gid_index(&listing.output, ip) {
                break i;
            }
            if Instant::now() > deadline {
                bail!(
                    "{} has no GID for {ip} after 10 s:\n{}",
                    rxe.device,
                    listing.output
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        // The lab's IPv6 addresses, for the checks over IPv6 (their GIDs came with the
        // IPv4 one's or before: addresses are added before the device).
        let listing = rxe.run(&gid_listing(&rxe.device), Duration::from_secs(10))?;
        rxe.ipv6_gid_indices = ip6.map(|ip| ip.and_then(|ip| gid_index_of(&listing.output, ip)));
        log(&format!(
            "local rxe {} over {netdev} in {} (rdma netns mode {}), IPv4 GID index {}, IPv6 \
             GID indices (global, link-local) {:?}",
            rxe.device,
            rxe.ns,
            match mode {
                NetnsMode::Shared => "shared: the device is visible in every namespace",
                NetnsMode::Exclusive => "exclusive",
            },
            rxe.gid_index,
            rxe.ipv6_gid_indices
        ));
        Ok(rxe)
    }

    pub(crate) fn device(&self) -> &str {
        &self.device
    }

    pub(crate) fn gid_index(&self) -> u32 {
        self.gid_index
    }

    /// The indices of the GIDs of its global and link-local IPv6 addresses, when it has
    /// them.
    pub(crate) fn ipv6_gid_indices(&self) -> [Option<u32>; 2] {
        self.ipv6_gid_indices
    }

    pub(crate) fn ns(&self) -> &str {
        &self.ns
    }

    pub(crate) fn mode(&self) -> NetnsMode {
        self.mode
    }

    /// Starts `script` (`sh -c`) in the namespace, in a process group of its own.
    pub(crate) fn spawn(&self, script: &str) -> Result<Job> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let log = self
            .dir
            .join(format!("j{}.log", NEXT.fetch_add(1, Ordering::Relaxed)));
        let file = fs::File::create(&log)?;
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns, "sh", "-c", script])
            .current_dir("/tmp")
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting `{script}` in {}", self.ns))?;
        Ok(Job {
            child: Some(child),
            log,
            status: None,
        })
    }

    /// Runs `script` in the namespace and waits for it.
    pub(crate) fn run(&self, script: &str, timeout: Duration) -> Result<Finished> {
        let mut job = self.spawn(script)?;
        Ok(job.wait(timeout))
    }

    /// Waits until a TCP socket listens on `port` in the namespace.
    pub(crate) fn listening(&self, port: u16, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if tcp_listening(&self.ns, port) {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Deletes the device (from the namespace, or from here if it is not visible there).
    pub(crate) fn delete(&mut self) {
        if !std::mem::take(&mut self.made) {
            return;
        }
        let inside = link_delete(Some(&self.ns), &self.device);
        if netns::exists(&self.ns) && run(&inside).is_ok() {
            return;
        }
        // Gone with its namespace's veth, or visible from here only.
        let _ = run(&link_delete(None, &self.device));
    }
}

impl Drop for LocalRxe {
    fn drop(&mut self) {
        self.delete();
    }
}

/// A job started in the namespace; killed (its whole process group) when dropped.
#[derive(Debug)]
pub(crate) struct Job {
    child: Option<Child>,
    log: PathBuf,
    status: Option<i32>,
}

impl Job {
    /// What it printed so far.
    pub(crate) fn output(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn reap(&mut self) -> Option<i32> {
        if self.status.is_some() {
            return self.status;
        }
        let status = self.child.as_mut()?.try_wait().ok()??;
        // A signal shows as 128 + its number, as shells do.
        let code = status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        self.status = Some(code);
        self.child = None;
        self.status
    }

    /// Waits for it to exit; kills it after `timeout`.
    pub(crate) fn wait(&mut self, timeout: Duration) -> Finished {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.reap() {
                return Finished {
                    status: Some(status),
                    output: self.output(),
                };
            }
            if self.child.is_none() || Instant::now() > deadline {
                self.kill();
                return Finished {
                    status: None,
                    output: self.output(),
                };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills its process group (SIGKILL) and reaps it. Only while its leader is not reaped:
    /// until then the group's id cannot belong to anyone else.
    pub(crate) fn kill(&mut self) {
        if self.reap().is_some() {
            return;
        }
        if let Some(mut child) = self.child.take() {
            if let Ok(pgid) = libc::pid_t::try_from(child.id()) {
                // Safety: kill takes plain integers and touches no memory of ours; the group
                // leader is our child and not yet reaped, so the group is ours.
                unsafe { libc::kill(-pgid, libc::SIGKILL) };
            }
            let _ = child.wait();
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_netns_mode_is_read_from_rdma_system() {
        assert_eq!(
            parse_netns_mode("netns shared copy-on-fork on\n"),
            Some(NetnsMode::Shared)
        );
        assert_eq!(
            parse_netns_mode("netns exclusive\n"),
            Some(NetnsMode::Exclusive)
        );
        assert_eq!(parse_netns_mode("netns bogus"), None);
        assert_eq!(parse_netns_mode(""), None);
    }

    #[test]
    fn device_commands_name_the_namespace_and_the_netdev() {
        assert_eq!(
            link_add("xr-1-0-b", "xrxe1n0", "xr-b").join(" "),
            "ip netns exec xr-1-0-b rdma link add xrxe1n0 type rxe netdev xr-b"
        );
        assert_eq!(
            link_delete(Some("xr-1-0-b"), "xrxe1n0").join(" "),
            "ip netns exec xr-1-0-b rdma link delete xrxe1n0"
        );
        assert_eq!(
            link_delete(None, "xrxe1n0").join(" "),
            "rdma link delete xrxe1n0"
        );
        assert_eq!(
            move_into("xrxe1n0", "xr-1-0-b").join(" "),
            "rdma dev set xrxe1n0 netns xr-1-0-b"
        );
    }

    #[test]
    fn the_rocev2_port_is_found_in_proc_net_udp() {
        let table = "\
   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  483: 00000000:12B7 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 41271 2 0000000000000000 0
";
        assert!(udp_bound(table, 4791));
        assert!(!udp_bound(table, 4790));
        // The header's columns are not a socket.
        assert!(!udp_bound(table.lines().next().unwrap(), 4791));
    }

    #[test]
    fn the_ipv4_gid_is_found_in_the_listing() {
        let listing = "\
0 fe80:0000:0000:0000:0078:72ff:fe00:000b
1 0000:0000:0000:0000:0000:ffff:0a4d:0002
2 fd00:0000:0000:0000:0000:0000:0000:0002
";
        assert_eq!(
            ipv4_gid_index(listing, Ipv4Addr::new(10, 77, 0, 2)),
            Some(1)
        );
        assert_eq!(ipv4_gid_index(listing, Ipv4Addr::new(10, 77, 0, 1)), None);
        assert_eq!(
            gid_index_of(listing, "fd00::2".parse().expect("an address")),
            Some(2)
        );
        assert!(gid_listing("xrxe1n0").contains("/sys/class/infiniband/xrxe1n0/ports/1/gids/"));
    }
}
