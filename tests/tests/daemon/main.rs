//! The daemon end to end, as root: two namespaces with an `xroced` each, applications on
//! the Rust API, every operation, every failure an application or the wire can cause.
//!
//! One test binary, so the engine is linked once for all of them; every test that needs
//! root is `#[ignore]`d with the reason and runs under `cargo xtask test`.

use xroce_lab::{Family, LabConfig};

/// The network a test's RoCE traffic crosses: the hosts' addresses of one family, on one
/// link or through the lab's router. The end-to-end tests of every operation run over each
/// ([`over_networks!`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Network {
    /// Which addresses the queue pairs use.
    pub(crate) family: Family,
    /// Whether a router sits between the hosts.
    pub(crate) routed: bool,
}

impl Network {
    pub(crate) const IPV4: Network = Network {
        family: Family::Ipv4,
        routed: false,
    };
    pub(crate) const IPV6: Network = Network {
        family: Family::Ipv6,
        routed: false,
    };
    pub(crate) const IPV6_LINK_LOCAL: Network = Network {
        family: Family::Ipv6LinkLocal,
        routed: false,
    };
    pub(crate) const ROUTED_IPV6: Network = Network {
        family: Family::Ipv6,
        routed: true,
    };

    /// The lab to build for it.
    pub(crate) fn lab(self) -> LabConfig {
        LabConfig {
            router: self.routed,
            ..LabConfig::default()
        }
    }
}

/// One root test per network for a test body `fn body(network: Network)`: the body is
/// written once and runs over IPv4, IPv6 and the rest, each a test of its own name (the
/// IPv4 one keeps the name it always had).
macro_rules! over_networks {
    ($body:ident: $($name:ident => $network:ident),+ $(,)?) => {
        $(
            #[test]
            #[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
            fn $name() {
                $body(crate::Network::$network);
            }
        )+
    };
}

mod daemon_capture;
mod daemon_cm;
mod daemon_congestion;
mod daemon_control;
mod daemon_device_node;
mod daemon_errors;
mod daemon_fork;
mod daemon_hostile;
mod daemon_hostile_wire;
mod daemon_idle_cpu;
mod daemon_isolation;
mod daemon_jumbo;
mod daemon_kernel_traffic;
mod daemon_lifecycle;
mod daemon_loopback;
mod daemon_lossy_path;
mod daemon_many_qps;
mod daemon_multicast;
mod daemon_multiqueue;
mod daemon_rc;
mod daemon_users;
mod daemon_verbs;
mod daemon_wire_trust;
mod examples;
