//! The control plane: the daemon's control socket, one connection per application
//! context, and the objects each application owns.
//!
//! Everything an application asks for costs the daemon something it cannot take back by
//! force from a running dataplane: memory, a mapping out of `vm.max_map_count`, a queue
//! pair a poller drives, keys that reach registered memory. So every request is checked
//! here, on one thread, before a [`Command`] goes to the poller that owns the
//! application's dataplane objects: handles must belong to the asking application
//! ([`registry`]), sizes are bounded, per-application limits and the budget of mappings
//! apply. Each verb is a handler (in [`device`], [`region`], [`queue`], [`queue_pair`],
//! [`address`]) that answers `Result<_, Refusal>`: a refusal carries the `errno` the verbs
//! call returns and a message naming what was wrong, and the first failed check ends the
//! request with `?`, before anything changed. When an application hangs up or dies, every
//! object it owned is destroyed: its QPs vanish (so their peers' retries run out and they
//! see the connection fail), its regions are unmapped.
//!
//! One thread serves every application, so nothing here waits on the network: a request
//! whose path needs a next hop the kernel has not resolved yet (`ibv_modify_qp` to RTR,
//! `ibv_create_ah`) is parked, its connection left unread so that its requests stay
//! answered in order, while a thread of its own waits for the resolution; the request is
//! then handled again with the outcome ([`server`]). Other applications are served
//! meanwhile. The host (addresses, neighbours) and the pollers are reached through two
//! traits, [`Host`] and [`Link`], so that the handlers run in unit tests without a network
//! namespace or a poller thread.
//!
//! - [`server`]: the socket, connections, dispatch of requests, parked requests.
//! - [`access`]: who may open the device, and the credentials of each connection.
//! - [`memlock`]: the kernel's bound on a process's registered memory (`RLIMIT_MEMLOCK`).
//! - [`registry`]: who is connected, what each application owns, limits, the map budget,
//!   handles, keys, QP numbers.
//! - [`device`]: hello, device and port attributes, protection domains, statistics.
//! - [`region`]: memory regions (registration, re-registration, mapping their files).
//! - [`queue`]: completion queues and shared receive queues, and the rings behind them.
//! - [`queue_pair`]: queue pairs.
//! - [`address`]: paths to destinations and address handles.
//! - [`cm`]: rdma_cm requests, served by the port's connection manager.
//! - [`convert`]: between the control protocol's types and the transport's.
//! - [`subject`]: what a request is about, for the log line of its refusal.

mod access;
mod address;
mod cm;
mod convert;
mod device;
#[cfg(test)]
mod fake;
mod memlock;
mod multicast;
mod queue;
mod queue_pair;
mod region;
mod registry;
mod server;
mod subject;

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use crossbeam_channel::{Sender, bounded};
use verbs_shm::protocol::Reply;
use verbs_shm::sys;
use xroce_wire::{Gid, IbMtu};

use crate::poller::Command;

pub use access::{AccessError, AccessPolicy, Named, Peer};
pub use device::node_guid;
pub use registry::AppLimits;
pub use server::Control;

/// The hop limit (IPv4 TTL, IPv6 hop limit) of a path when the host cannot say: what the
/// kernel's routes give RoCE traffic by default (`net.ipv4.ip_default_ttl`,
/// `net.ipv6.conf.*.hop_limit`).
pub const ROCE_HOP_LIMIT: u8 = 64;

/// Outstanding READ/atomic requests per QP, either role (`max_qp_rd_atom`,
/// `max_qp_init_rd_atom`). rxe allows 128, so we do too: perftest moves its QP to RTS with
/// the *peer's* limit as `max_rd_atomic`, so a smaller one here fails `ib_read_bw` and
/// `ib_atomic_bw` against rxe at RTS.
pub const MAX_RD_ATOMIC: u8 = 128;

/// The largest queue a QP, SRQ or CQ may have.
pub const MAX_QUEUE: u32 = 32768;

/// The GID table length reported to applications (at least; more when the interface has
/// more addresses).
pub const GID_TABLE_LEN: usize = 16;

/// What the control plane needs to know about the port right now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortView {
    /// The interface name.
    pub netdev: String,
    /// Its MAC address.
    pub mac: [u8; 6],
    /// Its MTU.
    pub mtu: u32,
    /// The active path MTU.
    pub active_mtu: IbMtu,
    /// Whether the link is up.
    pub up: bool,
    /// The GID table.
    pub gids: Vec<Gid>,
}

/// What the host knows about a destination right now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Neighbour {
    /// Frames go to this Ethernet address (the port's own for a GID of this host).
    Mac([u8; 6]),
    /// The kernel is finding it out (it was asked to): [`Host::resolver`] waits for it.
    Pending,
    /// It cannot be reached, and why.
    Unreachable(String),
}

/// Where the kernel's routing table sends a destination when no outgoing interface is
/// given (`ip route get`): how rdma_cm decides for an id with no address of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RouteOut {
    /// Out of the port's interface, from this source address if the route prefers one.
    Port(Option<std::net::IpAddr>),
    /// Out of another interface, and which.
    Elsewhere(String),
    /// No route, and why.
    Unreachable(String),
}

/// Waits for the kernel to resolve a destination GID, within a bound of its own: the
/// next-hop MAC address, `None` for a GID of this host, or why it cannot be reached. Runs
/// on a thread of its own, so the control plane serves other applications meanwhile.
pub type Resolver = Arc<dyn Fn(Gid) -> Result<Option<[u8; 6]>, String> + Send + Sync>;

/// What the control plane needs from the host.
pub trait Host {
    /// The port as it is now.
    fn port(&mut self) -> PortView;
    /// From now on the port's active MTU is at most `most`: the largest path MTU the
    /// daemon's AF_XDP sockets carry. A host whose port view has a fixed active MTU ignores
    /// it.
    fn limit_path_mtu(&mut self, most: IbMtu) {
        let _ = most;
    }
    /// The next-hop MAC address for a destination GID as known now, without waiting; the
    /// port's own MAC for a GID of this host (loopback). [`Neighbour::Pending`] when the
    /// kernel was asked to find it out.
    fn lookup(&mut self, dgid: Gid) -> Neighbour;
    /// The hop limit of packets to `dgid`: the one the kernel's route to it gives its own
    /// packets, which rxe's paths take too.
    fn hop_limit(&mut self, dgid: Gid) -> u8;
    /// What waits for a pending destination.
    fn resolver(&self) -> Resolver;
    /// Where the kernel's route to `destination` leaves, given no outgoing interface.
    fn route(&mut self, destination: std::net::IpAddr) -> RouteOut;
    /// Whether process `pid` is privileged for the network as the kernel's verbs mean it
    /// (`CAP_NET_RAW`): only such a process may give a queue pair a controlled Q_Key.
    fn is_privileged(&self, pid: i32) -> bool;
    /// The port's interface joins the IP multicast group of `gid` (an IPv4 group in its
    /// mapped form, or an IPv6 one): the kernel reports the membership (IGMP, MLD) so that
    /// switches forward the group, and the NIC's filter lets its frames in.
    fn join_group(&mut self, gid: Gid) -> io::Result<()> {
        let _ = gid;
        Ok(())
    }
    /// The interface leaves the group it joined with [`Host::join_group`].
    fn leave_group(&mut self, gid: Gid) {
        let _ = gid;
    }
}

/// The bit that makes a Q_Key a controlled one (IBTA 10.2.5): a work request carrying it
/// sends the queue pair's own Q_Key, and only a privileged process may give a queue pair
/// such a Q_Key (the kernel's verbs refuse others `EPERM`), so that an unprivileged one
/// cannot receive the datagrams of services that use them (QP1's 0x80010000 among them).
pub const CONTROLLED_QKEY: u32 = 0x8000_0000;

/// How the control plane reaches one poller: a command goes in, the poller is woken, and
/// the answer comes back on the channel the command carries.
pub trait Link {
    /// Hands `command` to the poller and wakes it; `false` when the poller has stopped.
    fn send(&self, command: Command) -> bool;
    /// A copy of its doorbell, for an application to wake it.
    fn doorbell(&self) -> io::Result<OwnedFd>;
}

impl dyn Link + '_ {
    /// Sends the command `make` builds around a reply channel and waits for the answer;
    /// `None` when the poller has stopped.
    pub(crate) fn call<T>(&self, make: impl FnOnce(Sender<T>) -> Command) -> Option<T> {
        let (tx, rx) = bounded(1);
        if !self.send(make(tx)) {
            return None;
        }
        rx.recv().ok()
    }
}

/// How the control plane reaches a poller thread: its command queue and its doorbell.
#[derive(Debug, Clone)]
pub struct PollerLink {
    /// Its command queue.
    pub commands: Sender<Command>,
    /// Its doorbell (written after every command so a sleeping poller wakes).
    pub doorbell: Arc<OwnedFd>,
}

impl Link for PollerLink {
    fn send(&self, command: Command) -> bool {
        if self.commands.send(command).is_err() {
            return false;
        }
        sys::eventfd_signal(self.doorbell.as_fd());
        true
    }

    fn doorbell(&self) -> io::Result<OwnedFd> {
        self.doorbell.try_clone()
    }
}

/// Why a request is refused: the `errno` its verbs call returns and what was wrong, for
/// people. The application receives it as [`Reply::Error`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message} (errno {errno})")]
pub struct Refusal {
    /// An `errno` value (`EINVAL`, `ENOMEM`, `EBUSY`, …).
    pub errno: i32,
    /// What was wrong.
    pub message: String,
}

impl Refusal {
    /// A refusal with `errno`.
    pub fn new(errno: i32, message: impl Into<String>) -> Refusal {
        Refusal {
            errno,
            message: message.into(),
        }
    }

    /// `EINVAL`: a handle, size or value the request names is not acceptable.
    pub fn invalid(message: impl Into<String>) -> Refusal {
        Refusal::new(libc::EINVAL, message)
    }

    /// `EIO`: the poller that owns the application's objects has stopped.
    pub fn poller_stopped() -> Refusal {
        Refusal::new(libc::EIO, "the poller stopped")
    }
}

impl From<Refusal> for Reply {
    fn from(r: Refusal) -> Reply {
        Reply::Error {
            errno: r.errno,
            message: r.message,
        }
    }
}

/// A reply and the descriptors that travel with it.
#[derive(Debug)]
pub(crate) struct Answer {
    /// The reply.
    pub(crate) reply: Reply,
    /// The descriptors sent along (`SCM_RIGHTS`).
    pub(crate) fds: Vec<OwnedFd>,
}

impl From<Reply> for Answer {
    fn from(reply: Reply) -> Answer {
        Answer {
            reply,
            fds: Vec::new(),
        }
    }
}

impl From<Refusal> for Answer {
    fn from(r: Refusal) -> Answer {
        Answer::from(Reply::from(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poller::PollerStats;

    fn link() -> (PollerLink, crossbeam_channel::Receiver<Command>) {
        let (commands, inbox) = crossbeam_channel::unbounded();
        // NOTE(unwrap): tests.
        let doorbell = Arc::new(sys::eventfd().unwrap());
        (PollerLink { commands, doorbell }, inbox)
    }

    #[test]
    fn a_call_waits_for_the_pollers_answer_and_rings_its_doorbell() {
        let (link, inbox) = link();
        let poller = std::thread::spawn(move || {
            let Ok(Command::Stats(reply)) = inbox.recv() else {
                panic!("no Stats");
            };
            reply.send(PollerStats::default()).unwrap();
        });
        let link: &dyn Link = &link;
        assert!(link.call(Command::Stats).is_some());
        poller.join().unwrap();
    }

    #[test]
    fn a_stopped_poller_answers_nothing() {
        let (link, inbox) = link();
        drop(inbox);
        let dyn_link: &dyn Link = &link;
        assert!(dyn_link.call(Command::Stats).is_none());
        assert_eq!(sys::eventfd_drain(link.doorbell.as_fd()), 0, "not rung");
        // A poller that takes the command and stops before answering.
        let (link, poller) = link_dropping_commands();
        let dyn_link: &dyn Link = &link;
        assert!(dyn_link.call(Command::Stats).is_none());
        drop(link);
        poller.join().unwrap();
    }

    /// A link whose poller drops every command unanswered.
    fn link_dropping_commands() -> (PollerLink, std::thread::JoinHandle<()>) {
        let (link, inbox) = link();
        let poller = std::thread::spawn(move || while inbox.recv().is_ok() {});
        (link, poller)
    }

    #[test]
    fn a_refusal_reaches_the_application_as_an_error_reply() {
        let r = Refusal::new(libc::EBUSY, "in use");
        assert_eq!(r.to_string(), format!("in use (errno {})", libc::EBUSY));
        let answer = Answer::from(r);
        assert!(answer.fds.is_empty());
        assert_eq!(
            answer.reply,
            Reply::Error {
                errno: libc::EBUSY,
                message: "in use".into()
            }
        );
    }
}
