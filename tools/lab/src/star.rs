//! A star: N hosts, each a network namespace with one veth interface into one router
//! namespace, as N servers hang off one switch. Host `i` is `10.78.i.1/24` (and
//! `fd00:78:i::1/64`) behind the router's `10.78.i.254` on interface `xr-r<i>`, with a
//! default route through it; the router forwards between all of them.
//!
//! On its own the router's kernel forwards everything. A forwarder on the router's
//! interfaces (the `xroce-impair` crate's switch) takes the RoCEv2 frames instead and gives
//! the port toward a host what a switch port has: a rate, a bounded queue, ECN marks and
//! tail drop. ARP, ICMP and TCP keep going through the kernel.
//!
//! Names are unique per process and star (`xr-<pid>-<n>-h<i>` and `xr-<pid>-<n>-r`), and
//! everything is deleted when the [`Star`] is dropped, on every exit path, as for a
//! [`Lab`](crate::Lab) ([`crate::signals::install`], [`crate::cleanup_stale`]).

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::Command;

use log::{debug, warn};

use crate::{Host, LabError, NAME_PREFIX, NEXT_LAB, delete_namespace, mac_text, netns, run};

/// The most hosts a star has (one octet of the addresses names the host).
pub const MAX_HOSTS: usize = 200;

/// How to build a [`Star`].
#[derive(Clone, Copy, Debug)]
pub struct StarConfig {
    /// Hosts (at least 2).
    pub hosts: usize,
    /// MTU of every veth interface.
    pub mtu: u32,
}

impl Default for StarConfig {
    fn default() -> StarConfig {
        StarConfig {
            hosts: 5,
            mtu: 1500,
        }
    }
}

/// The router of a star.
#[derive(Clone, Debug)]
pub struct StarRouter {
    /// Its network namespace.
    pub netns: String,
    /// Its interface toward host `i`, at index `i`.
    pub interfaces: Vec<String>,
    /// Their Ethernet addresses.
    pub macs: Vec<[u8; 6]>,
}

/// N hosts behind one router. Dropping it deletes the namespaces (and with them the
/// interfaces), after killing what runs in them.
#[derive(Debug)]
pub struct Star {
    id: u64,
    prefix: String,
    /// The hosts, in order.
    pub hosts: Vec<Host>,
    /// The router.
    pub router: StarRouter,
    namespaces: Vec<String>,
    torn_down: bool,
}

/// The Ethernet address of host `i`'s interface.
pub fn host_mac(i: usize) -> [u8; 6] {
    [0x02, 0x78, 0x72, 0x00, 0x02, i as u8]
}

/// The Ethernet address of the router's interface toward host `i`.
pub fn router_mac(i: usize) -> [u8; 6] {
    [0x02, 0x78, 0x72, 0x00, 0x03, i as u8]
}

impl Star {
    /// Builds a star. On error, whatever was already made is deleted.
    pub fn new(config: &StarConfig) -> Result<Star, LabError> {
        if !(2..=MAX_HOSTS).contains(&config.hosts) {
            return Err(LabError::Config("a star has 2 to 200 hosts"));
        }
        if !(68..=65535).contains(&config.mtu) {
            return Err(LabError::Config("mtu must be within 68..=65535"));
        }
        let id = NEXT_LAB.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let prefix = format!("{NAME_PREFIX}{}-{id}", std::process::id());
        let router_ns = format!("{prefix}-r");
        let hosts: Vec<Host> = (0..config.hosts)
            .map(|i| Host {
                netns: format!("{prefix}-h{i}"),
                interface: format!("xr-h{i}"),
                mac: host_mac(i),
                ipv4: Ipv4Addr::new(10, 78, i as u8, 1),
                ipv6: Ipv6Addr::new(0xfd00, 0x78, i as u16, 0, 0, 0, 0, 1),
                next_hop_mac: router_mac(i),
            })
            .collect();
        let mut namespaces = vec![router_ns.clone()];
        namespaces.extend(hosts.iter().map(|h| h.netns.clone()));
        // Registered before anything exists, so that a signal arriving half-way through
        // still finds everything to delete.
        crate::register(id, &namespaces);
        let mut star = Star {
            id,
            prefix,
            router: StarRouter {
                netns: router_ns,
                interfaces: (0..config.hosts).map(|i| format!("xr-r{i}")).collect(),
                macs: (0..config.hosts).map(router_mac).collect(),
            },
            hosts,
            namespaces,
            torn_down: false,
        };
        // On error `star` is dropped here, which deletes what was made.
        star.build(config)?;
        Ok(star)
    }

    fn build(&mut self, config: &StarConfig) -> Result<(), LabError> {
        for ns in &self.namespaces {
            run(Command::new("ip").args(["netns", "add", ns]))?;
            netns::sysctl(ns, "net.ipv6.conf.all.accept_dad", "0")?;
            netns::sysctl(ns, "net.ipv6.conf.default.accept_dad", "0")?;
            run(Command::new("ip").args(["-n", ns, "link", "set", "lo", "up"]))?;
        }
        let r = &self.router;
        let mtu = config.mtu.to_string();
        for (i, host) in self.hosts.iter().enumerate() {
            let (ns, dev) = (host.netns.as_str(), host.interface.as_str());
            run(Command::new("ip")
                .args(["-n", ns, "link", "add", dev, "address", &mac_text(host.mac)])
                .args(["type", "veth", "peer", "name", &r.interfaces[i]])
                .args(["address", &mac_text(r.macs[i]), "netns", &r.netns]))?;
            for (ns, ifname) in [(ns, dev), (r.netns.as_str(), r.interfaces[i].as_str())] {
                run(Command::new("ip").args(["-n", ns, "link", "set", ifname, "mtu", &mtu, "up"]))?;
            }
            let v4 = format!("{}/24", host.ipv4);
            let v6 = format!("{}/64", host.ipv6);
            run(Command::new("ip").args(["-n", ns, "addr", "add", &v4, "dev", dev]))?;
            run(Command::new("ip").args(["-n", ns, "-6", "addr", "add", &v6, "dev", dev, "nodad"]))?;
            let (gw4, gw6) = gateway(i);
            let rdev = r.interfaces[i].as_str();
            run(Command::new("ip").args([
                "-n",
                &r.netns,
                "addr",
                "add",
                &format!("{gw4}/24"),
                "dev",
                rdev,
            ]))?;
            run(Command::new("ip").args([
                "-n",
                &r.netns,
                "-6",
                "addr",
                "add",
                &format!("{gw6}/64"),
                "dev",
                rdev,
                "nodad",
            ]))?;
            run(Command::new("ip").args([
                "-n",
                ns,
                "route",
                "add",
                "default",
                "via",
                &gw4.to_string(),
            ]))?;
            run(Command::new("ip").args([
                "-n",
                ns,
                "-6",
                "route",
                "add",
                "default",
                "via",
                &gw6.to_string(),
            ]))?;
        }
        netns::sysctl(&r.netns, "net.ipv4.ip_forward", "1")?;
        netns::sysctl(&r.netns, "net.ipv6.conf.all.forwarding", "1")?;
        debug!("star {}: up ({} hosts)", self.prefix, self.hosts.len());
        Ok(())
    }

    /// The `xr-<pid>-<n>` prefix of this star's namespaces.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Every namespace of the star (the router's first).
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// Runs `f` on a thread inside host `i`'s namespace.
    pub fn run_in<T: Send>(&self, i: usize, f: impl FnOnce() -> T + Send) -> io::Result<T> {
        netns::run_in(&self.hosts[i].netns, f)
    }

    /// A command running `argv` inside host `i`'s namespace.
    pub fn command(&self, i: usize, argv: &[&str]) -> Command {
        netns::command(&self.hosts[i].netns, argv)
    }

    /// Deletes the star now (dropping it does the same; doing both is harmless).
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
        crate::unregister(self.id);
        debug!("star {}: torn down", self.prefix);
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for Star {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            warn!("star {}: teardown: {e}", self.prefix);
        }
    }
}

/// The router's addresses toward host `i`.
pub fn gateway(i: usize) -> (Ipv4Addr, Ipv6Addr) {
    (
        Ipv4Addr::new(10, 78, i as u8, 254),
        Ipv6Addr::new(0xfd00, 0x78, i as u16, 0, 0, 0, 0, 0xfe),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_name_the_host() {
        assert_eq!(host_mac(3), [2, 0x78, 0x72, 0, 2, 3]);
        assert_eq!(router_mac(3), [2, 0x78, 0x72, 0, 3, 3]);
        assert_eq!(gateway(7).0, Ipv4Addr::new(10, 78, 7, 254));
    }

    #[test]
    fn a_star_needs_two_hosts() {
        let e = Star::new(&StarConfig {
            hosts: 1,
            mtu: 1500,
        })
        .unwrap_err();
        assert!(matches!(e, LabError::Config(_)), "{e}");
    }
}
