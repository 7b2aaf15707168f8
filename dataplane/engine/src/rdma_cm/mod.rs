//! The daemon's rdma_cm: the connection manager of the port, serving every application.
//!
//! The cost problem: a connection manager must keep running while its applications sleep
//! (REQ, REP and DREQ retransmissions, TimeWait), must answer for an application that died
//! (the peer gets a REJ or a DREQ, not fifteen retransmissions into the void), and must
//! share QP1, one per port, among every process. So it lives in the daemon, beside the
//! control plane, as Linux keeps it in the kernel.
//!
//! The mechanism: [`CmService`] wraps the sans-IO [`RdmaCm`] with the daemon's I/O. MADs
//! arrive as whole QP1 frames from the pollers ([`CmService::handle_frame`]) and leave as
//! frames for a poller to transmit ([`CmService::poll_frame`]), built by [`crate::gsi`];
//! the next hop of a peer comes from the MAD it sent, the kernel's neighbour table, or a
//! resolution on a thread of its own whose answer rings [`CmService::bell`]. MADs to an
//! address of this port never leave it. Applications ask through the control connection
//! ([`CmService::handle`]: ids are owned by the connection that made them) and hear
//! through their event channels, as [`CmEventRecord`]s written without blocking (a full
//! channel keeps its events in order until it drains). When a connection goes, its ids go
//! ([`CmService::connection_closed`]): the CM rejects or disconnects on its behalf.
//!
//! Multicast joins put nothing on the wire (RoCE has no subnet administrator): the CM
//! keeps the id's groups and reports `MULTICAST_JOIN` at once, naming the join by the key
//! the library chose; receiving is up to the QP, which the library attaches to the group
//! (`ibv_attach_mcast`) when it reads that event, and whose attachments make the port join
//! the group on the network. The joins of an id go with it.
//!
//! Time is the daemon's monotonic clock, turned into the transport's [`Instant`] here.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, unbounded};
use rand::{Rng, SeedableRng};
use tracing::debug;
use verbs_shm::cm::{
    CmConnParam, CmEventRecord, CmIdInfo, CmOption, CmReply, CmRequest, CmSockAddr, join_flags,
};
use verbs_shm::sys;
use xroce_cm::address::is_any;
use xroce_cm::{Config, ConnParam, IdHandle, IdOption, MadAddress, Owner, RdmaCm, Route};
use xroce_transport::{AttrMask, Instant, QpAttr, QpState, QpType};
use xroce_wire::cm::{Guid, PortSpace};
use xroce_wire::mad::MAD_LEN;
use xroce_wire::{Gid, IbMtu, Qpn};

use crate::control::{Resolver, RouteOut};
use crate::gsi::{self, GsiDrop, GsiSender};

/// The hop limit of the paths rdma_cm synthesizes (the route's TTL).
const HOP_LIMIT: u8 = 64;

/// What the service needs to know about the port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CmPort {
    /// The port's MAC address.
    pub mac: [u8; 6],
    /// Its GID table: the addresses of this port.
    pub gids: Vec<Gid>,
    /// The active path MTU.
    pub active_mtu: IbMtu,
}

/// A request refused: the errno the application's call returns, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The errno.
    pub errno: i32,
    /// What was wrong.
    pub message: String,
}

impl Refusal {
    fn new(errno: i32, message: impl Into<String>) -> Refusal {
        Refusal {
            errno,
            message: message.into(),
        }
    }
}

impl From<xroce_cm::Error> for Refusal {
    fn from(e: xroce_cm::Error) -> Refusal {
        Refusal::new(e.errno(), e.to_string())
    }
}

/// Who is asking.
#[derive(Clone, Copy)]
pub struct Asker<'a> {
    /// The control connection.
    pub conn: u64,
    /// Its process.
    pub pid: i32,
    /// The process owning a QP number, if any (a connect or accept may only name the
    /// caller's own QPs).
    pub qp_owner: &'a dyn Fn(u32) -> Option<i32>,
    /// Where the kernel's route to a destination leaves, given no outgoing interface (an
    /// id with no address of its own resolving a multicast group).
    pub route: &'a dyn Fn(IpAddr) -> RouteOut,
}

impl std::fmt::Debug for Asker<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asker")
            .field("conn", &self.conn)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// An event channel of one connection.
#[derive(Debug)]
struct Channel {
    sock: OwnedFd,
    /// Events the socket had no room for, in order.
    backlog: VecDeque<CmEventRecord>,
}

/// Where an id reports.
#[derive(Clone, Copy, Debug)]
struct IdPlace {
    conn: u64,
    channel: u32,
}

/// A finished resolution: the destination and its next hop (`None`: this host).
type Answer = (Gid, Result<Option<[u8; 6]>, String>);

/// What waits for a destination's resolution.
#[derive(Debug)]
enum Waiter {
    /// A MAD to send.
    Mad(MadAddress, Box<[u8; MAD_LEN]>),
    /// An `rdma_resolve_addr`.
    Addr(IdHandle),
}

/// The service's own counters (the CM's are [`xroce_cm::Counters`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CmServiceCounters {
    /// MAD frames received on QP1.
    pub gsi_rcvd: u64,
    /// QP1 frames dropped: malformed or bad ICRC.
    pub gsi_malformed: u64,
    /// QP1 frames dropped: addressed to none of the port's GIDs.
    pub gsi_wrong_dgid: u64,
    /// QP1 frames dropped: not a UD SEND Only.
    pub gsi_not_ud_send: u64,
    /// QP1 frames dropped: a P_Key not in the port's table.
    pub gsi_bad_pkey: u64,
    /// QP1 frames dropped: wrong Q_Key.
    pub gsi_bad_qkey: u64,
    /// QP1 frames dropped: not one 256-byte MAD.
    pub gsi_bad_length: u64,
    /// MAD frames sent.
    pub gsi_sent: u64,
    /// MADs between two ids of this port (never on the wire).
    pub gsi_loopback: u64,
    /// MADs dropped: their destination could not be reached (the CM retransmits).
    pub gsi_unreachable: u64,
    /// Events written to event channels.
    pub cm_events: u64,
    /// Events that waited for room in their channel.
    pub cm_events_delayed: u64,
    /// Events dropped: their channel was gone.
    pub cm_events_lost: u64,
    /// Multicast groups joined (`rdma_join_multicast`).
    pub mc_joins: u64,
    /// Multicast groups left (`rdma_leave_multicast`; the joins of ids that go are not
    /// counted here).
    pub mc_leaves: u64,
}

/// A random source for comm IDs, starting PSNs and ephemeral ports.
struct OsRandom(rand::rngs::StdRng);

impl xroce_cm::Random for OsRandom {
    fn next_u32(&mut self) -> u32 {
        self.0.random()
    }
}

/// The port's rdma_cm with its I/O.
pub struct CmService {
    cm: RdmaCm,
    gsi: GsiSender,
    origin: std::time::Instant,
    port: CmPort,
    resolve: Resolver,
    channels: HashMap<(u64, u32), Channel>,
    next_channel: u32,
    ids: HashMap<IdHandle, IdPlace>,
    /// Destinations rdma_resolve_addr found, by id: (source, destination).
    resolved: HashMap<IdHandle, (IpAddr, SocketAddr)>,
    /// MAC addresses peers' MADs came from.
    learned: HashMap<IpAddr, [u8; 6]>,
    waiting: HashMap<Gid, Vec<Waiter>>,
    answers: (Sender<Answer>, Receiver<Answer>),
    bell: Arc<OwnedFd>,
    loopback: VecDeque<(MadAddress, [u8; MAD_LEN])>,
    outbox: VecDeque<Vec<u8>>,
    counters: CmServiceCounters,
}

impl std::fmt::Debug for CmService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmService")
            .field("cm", &self.cm)
            .field("channels", &self.channels.len())
            .field("ids", &self.ids.len())
            .finish_non_exhaustive()
    }
}

/// How long a REQ for a port nobody listens on waits for a listener before it is refused
/// (REJ 8): an application that listens a moment after telling its peer to connect (over
/// another channel, as perftest's `-R` does between its two connections) still gets the
/// connection, on a host busy enough to make it late.
pub const LISTEN_GRACE: std::time::Duration = std::time::Duration::from_millis(250);

impl CmService {
    /// The rdma_cm of a port, naming its CA by `node_guid`.
    pub fn new(node_guid: u64, port: CmPort, resolve: Resolver) -> std::io::Result<CmService> {
        let random = OsRandom(rand::rngs::StdRng::from_os_rng());
        let mut config = Config::new(Guid(node_guid));
        config.listen_grace = LISTEN_GRACE;
        let mut cm = RdmaCm::new(config, Box::new(random));
        for gid in &port.gids {
            cm.add_local_address(gid.to_ip());
        }
        Ok(CmService {
            cm,
            gsi: GsiSender::new(),
            origin: std::time::Instant::now(),
            port,
            resolve,
            channels: HashMap::new(),
            next_channel: 1,
            ids: HashMap::new(),
            resolved: HashMap::new(),
            learned: HashMap::new(),
            waiting: HashMap::new(),
            answers: unbounded(),
            bell: Arc::new(sys::eventfd()?),
            loopback: VecDeque::new(),
            outbox: VecDeque::new(),
            counters: CmServiceCounters::default(),
        })
    }

    /// The daemon's clock as the CM's.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.origin.elapsed().as_nanos() as u64)
    }

    /// The descriptor that becomes readable when a resolution has finished
    /// ([`CmService::on_resolved`]).
    pub fn bell(&self) -> BorrowedFd<'_> {
        self.bell.as_fd()
    }

    /// The port changed: its addresses and MTU.
    pub fn update_port(&mut self, port: CmPort) {
        for gid in &self.port.gids {
            if !port.gids.contains(gid) {
                self.cm.remove_local_address(gid.to_ip());
            }
        }
        for gid in &port.gids {
            self.cm.add_local_address(gid.to_ip());
        }
        self.port = port;
    }

    /// The service's counters and the CM's, by name.
    pub fn stats(&self) -> Vec<(String, u64)> {
        let c = &self.counters;
        let mut v: Vec<(String, u64)> = [
            ("cm_gsi_rcvd", c.gsi_rcvd),
            ("cm_gsi_malformed", c.gsi_malformed),
            ("cm_gsi_wrong_dgid", c.gsi_wrong_dgid),
            ("cm_gsi_not_ud_send", c.gsi_not_ud_send),
            ("cm_gsi_bad_pkey", c.gsi_bad_pkey),
            ("cm_gsi_bad_qkey", c.gsi_bad_qkey),
            ("cm_gsi_bad_length", c.gsi_bad_length),
            ("cm_gsi_sent", c.gsi_sent),
            ("cm_gsi_loopback", c.gsi_loopback),
            ("cm_gsi_unreachable", c.gsi_unreachable),
            ("cm_events", c.cm_events),
            ("cm_events_delayed", c.cm_events_delayed),
            ("cm_events_lost", c.cm_events_lost),
            ("cm_ids", self.ids.len() as u64),
            (
                "cm_listening",
                self.ids
                    .keys()
                    .filter(|&&id| {
                        self.cm
                            .id(id)
                            .is_some_and(|i| i.state == xroce_cm::IdState::Listen)
                    })
                    .count() as u64,
            ),
            ("cm_event_channels", self.channels.len() as u64),
            ("cm_mc_joins", c.mc_joins),
            ("cm_mc_leaves", c.mc_leaves),
            ("cm_mc_joined", self.cm.multicast_joins() as u64),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_owned(), v))
        .collect();
        v.extend(
            self.cm
                .counters()
                .iter()
                .map(|(name, value)| (format!("cm_{name}"), value)),
        );
        v
    }

    /// The service's own counters.
    pub fn counters(&self) -> CmServiceCounters {
        self.counters
    }

    /// When [`CmService::handle_timeout`] is due.
    pub fn poll_timeout(&mut self) -> Option<std::time::Instant> {
        let at = self.cm.poll_timeout()?;
        Some(self.origin + std::time::Duration::from_nanos(at.as_nanos()))
    }

    /// Runs the CM's timers.
    pub fn handle_timeout(&mut self) {
        let now = self.now();
        self.cm.handle_timeout(now);
        self.flush();
    }

    /// A frame that came to QP1.
    pub fn handle_frame(&mut self, frame: &[u8]) {
        self.counters.gsi_rcvd += 1;
        match gsi::parse(frame, &self.port.gids) {
            Ok(got) => {
                self.learned.insert(got.from.remote, got.src_mac);
                let now = self.now();
                self.cm.handle_mad(now, got.from, &got.mad);
                self.flush();
            }
            Err(drop) => {
                let c = &mut self.counters;
                match drop {
                    GsiDrop::Malformed => c.gsi_malformed += 1,
                    GsiDrop::WrongDgid => c.gsi_wrong_dgid += 1,
                    GsiDrop::NotUdSend => c.gsi_not_ud_send += 1,
                    GsiDrop::BadPkey => c.gsi_bad_pkey += 1,
                    GsiDrop::BadQkey => c.gsi_bad_qkey += 1,
                    GsiDrop::BadLength => c.gsi_bad_length += 1,
                }
            }
        }
    }

    /// The next frame to transmit on the port.
    pub fn poll_frame(&mut self) -> Option<Vec<u8>> {
        self.outbox.pop_front()
    }

    /// Finished resolutions: MADs that waited go out, `rdma_resolve_addr` calls are
    /// answered.
    pub fn on_resolved(&mut self) {
        sys::eventfd_drain(self.bell.as_fd());
        while let Ok((gid, result)) = self.answers.1.try_recv() {
            let waiters = self.waiting.remove(&gid).unwrap_or_default();
            for w in waiters {
                match (w, &result) {
                    (Waiter::Mad(to, mad), Ok(mac)) => {
                        let mac = mac.unwrap_or(self.port.mac);
                        self.send_frame(&to, mac, &mad);
                    }
                    (Waiter::Mad(..), Err(why)) => {
                        debug!("rdma_cm: a MAD to {} is dropped: {why}", gid.to_ip());
                        self.counters.gsi_unreachable += 1;
                    }
                    (Waiter::Addr(id), Ok(_)) => self.addr_event(id, true),
                    (Waiter::Addr(id), Err(why)) => {
                        debug!("rdma_cm: resolving {} failed: {why}", gid.to_ip());
                        self.addr_event(id, false);
                    }
                }
            }
        }
        self.flush();
    }

    /// The control connection `conn` went: its ids and channels go, and the CM answers the
    /// peers of its connections.
    pub fn connection_closed(&mut self, conn: u64) {
        let now = self.now();
        self.cm.owner_gone(now, Owner(conn));
        self.ids.retain(|_, p| p.conn != conn);
        self.channels.retain(|&(c, _), _| c != conn);
        let ids = &self.ids;
        self.resolved.retain(|id, _| ids.contains_key(id));
        self.flush();
    }

    /// Serves one request of `asker`. A channel's socket comes in `fds`.
    pub fn handle(
        &mut self,
        asker: Asker<'_>,
        request: CmRequest,
        fds: Vec<OwnedFd>,
    ) -> Result<CmReply, Refusal> {
        let now = self.now();
        let reply = self.handle_at(now, asker, request, fds);
        self.flush();
        reply
    }

    fn handle_at(
        &mut self,
        now: Instant,
        asker: Asker<'_>,
        request: CmRequest,
        mut fds: Vec<OwnedFd>,
    ) -> Result<CmReply, Refusal> {
        let conn = asker.conn;
        match request {
            CmRequest::Channel => {
                let sock = fds
                    .pop()
                    .ok_or_else(|| Refusal::new(libc::EINVAL, "no event channel socket came"))?;
                let channel = self.next_channel;
                self.next_channel = self.next_channel.wrapping_add(1).max(1);
                self.channels.insert(
                    (conn, channel),
                    Channel {
                        sock,
                        backlog: VecDeque::new(),
                    },
                );
                Ok(CmReply::Channel { channel })
            }
            CmRequest::DestroyChannel { channel } => {
                if self
                    .ids
                    .values()
                    .any(|p| p.conn == conn && p.channel == channel)
                {
                    return Err(Refusal::new(
                        libc::EBUSY,
                        "the event channel still has ids: destroy or migrate them first",
                    ));
                }
                self.channels
                    .remove(&(conn, channel))
                    .ok_or_else(|| Refusal::new(libc::EINVAL, "no such event channel"))?;
                Ok(CmReply::Done)
            }
            CmRequest::CreateId {
                channel,
                port_space,
                qp_type,
            } => {
                self.channel_of(conn, channel)?;
                let ps = PortSpace::from_raw(port_space).ok_or_else(|| {
                    Refusal::new(libc::EINVAL, format!("unknown port space {port_space:#x}"))
                })?;
                let qp_type = QpType::from_raw(qp_type).ok_or_else(|| {
                    Refusal::new(
                        libc::EINVAL,
                        format!("QP type {qp_type} cannot be connected by rdma_cm"),
                    )
                })?;
                let id = self.cm.create_id(Owner(conn), ps, qp_type)?;
                self.ids.insert(id, IdPlace { conn, channel });
                Ok(CmReply::Id { id: id.0 })
            }
            CmRequest::DestroyId { id } => {
                let id = self.mine(conn, id)?;
                self.cm.destroy_id(now, id)?;
                self.ids.remove(&id);
                self.resolved.remove(&id);
                Ok(CmReply::Done)
            }
            CmRequest::MigrateId { id, channel } => {
                let id = self.mine(conn, id)?;
                self.channel_of(conn, channel)?;
                if let Some(p) = self.ids.get_mut(&id) {
                    p.channel = channel;
                }
                Ok(CmReply::Done)
            }
            CmRequest::SetOption { id, option } => {
                let id = self.mine(conn, id)?;
                let option = match option {
                    CmOption::Tos(t) => IdOption::Tos(t),
                    CmOption::ReuseAddr(b) => IdOption::ReuseAddr(b),
                    CmOption::AfOnly(b) => IdOption::AfOnly(b),
                    CmOption::AckTimeout(t) => IdOption::AckTimeout(t),
                };
                self.cm.set_option(id, option)?;
                Ok(CmReply::Done)
            }
            CmRequest::Bind { id, addr } => {
                let id = self.mine(conn, id)?;
                let addr = socket_addr(&addr)?;
                self.cm.bind(id, addr)?;
                Ok(CmReply::Info(self.info(id)))
            }
            CmRequest::ResolveAddr { id, src, dst, .. } => {
                let id = self.mine(conn, id)?;
                self.resolve_addr(asker, id, &src, &dst)?;
                Ok(CmReply::Done)
            }
            CmRequest::ResolveRoute { id, .. } => {
                let id = self.mine(conn, id)?;
                let &(local, remote) = self.resolved.get(&id).ok_or_else(|| {
                    Refusal::new(
                        libc::EINVAL,
                        "rdma_resolve_route before the address was resolved",
                    )
                })?;
                self.cm.resolve_route(
                    id,
                    Route {
                        local,
                        remote,
                        path_mtu: self.port.active_mtu,
                        hop_limit: HOP_LIMIT,
                    },
                )?;
                self.emit_simple(id, verbs_shm::cm::event::ROUTE_RESOLVED, 0);
                Ok(CmReply::Done)
            }
            CmRequest::Listen { id, backlog } => {
                let id = self.mine(conn, id)?;
                self.cm.listen_with_backlog(id, backlog)?;
                Ok(CmReply::Done)
            }
            CmRequest::Connect { id, param } => {
                let id = self.mine(conn, id)?;
                let param = self.conn_param(asker, &param)?;
                self.cm.connect(now, id, &param)?;
                Ok(CmReply::Done)
            }
            CmRequest::Accept { id, param } => {
                let id = self.mine(conn, id)?;
                let param = self.conn_param(asker, &param)?;
                self.cm.accept(now, id, &param)?;
                Ok(CmReply::Done)
            }
            CmRequest::Reject { id, private_data } => {
                let id = self.mine(conn, id)?;
                self.cm.reject(now, id, &private_data)?;
                Ok(CmReply::Done)
            }
            CmRequest::Establish { id } => {
                let id = self.mine(conn, id)?;
                self.cm.establish(now, id)?;
                Ok(CmReply::Done)
            }
            CmRequest::Notify { id } => {
                let id = self.mine(conn, id)?;
                self.cm.notify_established(now, id)?;
                Ok(CmReply::Done)
            }
            CmRequest::Disconnect { id } => {
                let id = self.mine(conn, id)?;
                self.cm.disconnect(now, id)?;
                Ok(CmReply::Done)
            }
            CmRequest::InitQpAttr { .. } => Err(Refusal::new(
                libc::EINVAL,
                "QP attributes are answered by init_qp_attr",
            )),
            CmRequest::Query { id } => {
                let id = self.mine(conn, id)?;
                Ok(CmReply::Info(self.info(id)))
            }
            CmRequest::JoinMulticast {
                id,
                join,
                group,
                flags,
            } => {
                let id = self.mine(conn, id)?;
                self.join_multicast(id, join, &group, flags)?;
                Ok(CmReply::Done)
            }
            CmRequest::LeaveMulticast { id, join } => {
                let id = self.mine(conn, id)?;
                let left = self.cm.leave_multicast(id, join)?;
                self.counters.mc_leaves += 1;
                debug!("rdma_cm: id {id} left multicast group {}", left.group);
                Ok(CmReply::Done)
            }
        }
    }

    /// `rdma_join_multicast`: the flags and the group's family checked as ucma checks them,
    /// then the CM joins (`MULTICAST_JOIN` follows at once). An id whose address is still
    /// being resolved is refused, as the kernel refuses one in `RDMA_CM_ADDR_QUERY`.
    fn join_multicast(
        &mut self,
        id: IdHandle,
        join: u32,
        group: &CmSockAddr,
        flags: u32,
    ) -> Result<(), Refusal> {
        let send_only = match flags {
            join_flags::FULLMEMBER => false,
            join_flags::SENDONLY_FULLMEMBER => true,
            other => {
                return Err(Refusal::new(
                    libc::EINVAL,
                    format!("unknown multicast join flags {other:#x}"),
                ));
            }
        };
        let group = group.ip().ok_or_else(|| {
            Refusal::new(
                libc::EINVAL,
                format!("address family {} is not IPv4 or IPv6", group.family),
            )
        })?;
        if join == 0 {
            return Err(Refusal::new(libc::EINVAL, "multicast join key 0"));
        }
        if self.resolving(id) {
            return Err(Refusal::new(
                libc::EINVAL,
                format!(
                    "rdma_cm id {id} is still resolving its address: join {group} after ADDR_RESOLVED"
                ),
            ));
        }
        let mgid = self.cm.join_multicast(id, join, group, send_only)?;
        self.counters.mc_joins += 1;
        debug!(
            "rdma_cm: id {id} joined multicast group {group} (MGID {}){}",
            mgid.to_ip(),
            if send_only { ", send-only" } else { "" }
        );
        Ok(())
    }

    /// Whether an `rdma_resolve_addr` of `id` waits for its answer.
    fn resolving(&self, id: IdHandle) -> bool {
        self.waiting
            .values()
            .flatten()
            .any(|w| matches!(w, Waiter::Addr(i) if *i == id))
    }

    /// `rdma_init_qp_attr`: the attributes that move `id`'s QP to `state` (raw
    /// `ibv_qp_state`), with the path's source GID index filled in.
    pub fn init_qp_attr(
        &mut self,
        conn: u64,
        id: u64,
        state: u32,
    ) -> Result<(QpAttr, AttrMask), Refusal> {
        let id = self.mine(conn, id)?;
        let state = QpState::from_raw(state)
            .ok_or_else(|| Refusal::new(libc::EINVAL, format!("invalid QP state {state}")))?;
        let (mut attr, mask) = self.cm.init_qp_attr(id, state)?;
        if mask.contains(AttrMask::AV) {
            let local = self.cm.id(id).and_then(|i| i.local).map(|a| a.ip());
            attr.path.sgid_index = local.map_or(0, |ip| self.gid_index(ip));
        }
        Ok((attr, mask))
    }

    fn gid_index(&self, ip: IpAddr) -> u8 {
        self.gid_position(ip).unwrap_or(0)
    }

    /// The index of `ip`'s GID in the port's table, if it is there.
    fn gid_position(&self, ip: IpAddr) -> Option<u8> {
        let gid = Gid::from_ip(ip);
        self.port
            .gids
            .iter()
            .position(|g| *g == gid)
            .map(|i| i as u8)
    }

    fn mine(&self, conn: u64, id: u64) -> Result<IdHandle, Refusal> {
        let handle = IdHandle(id);
        match self.ids.get(&handle) {
            Some(p) if p.conn == conn => Ok(handle),
            _ => Err(Refusal::new(libc::EINVAL, format!("no rdma_cm id {id}"))),
        }
    }

    fn channel_of(&self, conn: u64, channel: u32) -> Result<(), Refusal> {
        if self.channels.contains_key(&(conn, channel)) {
            Ok(())
        } else {
            Err(Refusal::new(
                libc::EINVAL,
                format!("no event channel {channel}"),
            ))
        }
    }

    fn conn_param(&self, asker: Asker<'_>, p: &CmConnParam) -> Result<ConnParam, Refusal> {
        let qpn = Qpn::checked(p.qp_num).ok_or_else(|| {
            Refusal::new(
                libc::EINVAL,
                format!("QP number {:#x} is not 24 bits", p.qp_num),
            )
        })?;
        match (asker.qp_owner)(p.qp_num) {
            Some(pid) if pid == asker.pid => {}
            _ => {
                return Err(Refusal::new(
                    libc::EINVAL,
                    format!("QP {:#x} is not one of this process's", p.qp_num),
                ));
            }
        }
        Ok(ConnParam {
            private_data: p.private_data.clone(),
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            flow_control: p.flow_control != 0,
            retry_count: p.retry_count,
            rnr_retry_count: p.rnr_retry_count,
            srq: p.srq != 0,
            qp_num: qpn,
            qkey: p.qkey,
        })
    }

    /// `rdma_resolve_addr`: binds the id to the source address (given, or this port's
    /// address of the destination's family), then finds the destination's next hop.
    ///
    /// A multicast group is resolved as Linux resolves it: an id with an address of its
    /// own (bound, or the source given) reaches it from that address whatever the routing
    /// table says (the kernel routes a group out of the interface it is asked to); one
    /// without asks the route, which must leave by this port (no route: `ENETUNREACH` at
    /// once, as `rdma_resolve_ip` fails; another interface: `ADDR_ERROR`, `-ENODEV`, as
    /// rdma_cm finds no RDMA device there).
    fn resolve_addr(
        &mut self,
        asker: Asker<'_>,
        id: IdHandle,
        src: &CmSockAddr,
        dst: &CmSockAddr,
    ) -> Result<(), Refusal> {
        let dst = socket_addr(dst)?;
        let bound = self.cm.id(id).and_then(|i| i.local);
        // As Linux: the id's family (of the address it is bound to, else of the source
        // given) must be the destination's.
        if let Some(from) = bound.or(src.to_socket_addr())
            && from.is_ipv4() != dst.is_ipv4()
        {
            return Err(Refusal::new(
                libc::EINVAL,
                format!("{from} and {dst} are of different address families"),
            ));
        }
        // A loopback or wildcard destination is this port: this port's first address of
        // the family stands for it. The kernel's rdma_cm resolves such an address to its
        // own device too (`cma_resolve_loopback`), but on RoCE its route then fails
        // (`ENODEV`: the loopback interface has no RDMA device); here it connects.
        let dst = match self.source_for(dst.ip()) {
            Some(own) if is_any(dst.ip()) => SocketAddr::new(own, dst.port()),
            _ => dst,
        };
        let own = match (src.to_socket_addr(), bound) {
            (_, Some(b)) if !is_any(b.ip()) => Some(b.ip()),
            (Some(s), _) if !is_any(s.ip()) => Some(s.ip()),
            _ => None,
        };
        let preferred = match own {
            None if dst.ip().is_multicast() => match (asker.route)(dst.ip()) {
                RouteOut::Port(source) => source.filter(|ip| self.gid_position(*ip).is_some()),
                RouteOut::Elsewhere(why) => {
                    debug!("rdma_cm: resolving {} for id {id}: {why}", dst.ip());
                    self.emit_simple(id, verbs_shm::cm::event::ADDR_ERROR, -libc::ENODEV);
                    return Ok(());
                }
                RouteOut::Unreachable(why) => {
                    return Err(Refusal::new(
                        libc::ENETUNREACH,
                        format!("no route to multicast group {}: {why}", dst.ip()),
                    ));
                }
            },
            _ => None,
        };
        let local = match own.or(preferred) {
            Some(ip) => ip,
            None => self.source_for(dst.ip()).ok_or_else(|| {
                Refusal::new(
                    libc::EADDRNOTAVAIL,
                    format!("this port has no address to reach {}", dst.ip()),
                )
            })?,
        };
        if bound.is_none_or(|b| is_any(b.ip())) {
            self.cm.bind_source(id, local)?;
        }
        self.resolved.insert(id, (local, dst));
        let gid = Gid::from_ip(dst.ip());
        if self.port.gids.contains(&gid) || self.learned.contains_key(&dst.ip()) {
            self.addr_event(id, true);
            return Ok(());
        }
        self.resolve_then(gid, Waiter::Addr(id));
        Ok(())
    }

    /// This port's address to reach `dst` from: the destination itself when it is ours,
    /// else the first of its family (a link-local IPv6 destination gets a link-local
    /// source).
    fn source_for(&self, dst: IpAddr) -> Option<IpAddr> {
        let ours: Vec<IpAddr> = self.port.gids.iter().map(|g| g.to_ip()).collect();
        if ours.contains(&dst) {
            return Some(dst);
        }
        let link_local =
            |ip: &IpAddr| matches!(ip, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80);
        ours.into_iter()
            .find(|ip| ip.is_ipv4() == dst.is_ipv4() && link_local(ip) == link_local(&dst))
    }

    /// Resolves `gid` on a thread (once for every waiter of the same destination).
    fn resolve_then(&mut self, gid: Gid, waiter: Waiter) {
        let first = !self.waiting.contains_key(&gid);
        self.waiting.entry(gid).or_default().push(waiter);
        if !first {
            return;
        }
        let (resolve, tx, bell) = (
            self.resolve.clone(),
            self.answers.0.clone(),
            self.bell.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name("xroced-cm-resolve".into())
            .spawn(move || {
                let result = resolve(gid);
                let _ = tx.send((gid, result));
                sys::eventfd_signal(bell.as_fd());
            });
        if let Err(e) = spawned {
            let _ = self
                .answers
                .0
                .send((gid, Err(format!("no thread to resolve: {e}"))));
            sys::eventfd_signal(self.bell.as_fd());
        }
    }

    fn addr_event(&mut self, id: IdHandle, ok: bool) {
        if ok {
            self.emit_simple(id, verbs_shm::cm::event::ADDR_RESOLVED, 0);
        } else {
            self.resolved.remove(&id);
            self.emit_simple(id, verbs_shm::cm::event::ADDR_ERROR, -libc::EHOSTUNREACH);
        }
    }

    fn info(&self, id: IdHandle) -> CmIdInfo {
        let Some(i) = self.cm.id(id) else {
            return CmIdInfo::default();
        };
        let local = i.local;
        let remote = i.remote.or_else(|| self.resolved.get(&id).map(|r| r.1));
        CmIdInfo {
            local: local.map(CmSockAddr::from).unwrap_or(CmSockAddr::NONE),
            remote: remote.map(CmSockAddr::from).unwrap_or(CmSockAddr::NONE),
            sgid: local.map_or([0; 16], |a| Gid::from_ip(a.ip()).0),
            dgid: remote.map_or([0; 16], |a| Gid::from_ip(a.ip()).0),
            sgid_index: local.map_or(0, |a| self.gid_index(a.ip())),
            path_mtu: i.path_mtu.map_or(0, |m| u32::from(m.code())),
            hop_limit: HOP_LIMIT,
            traffic_class: 0,
            route_resolved: i.path_mtu.is_some(),
        }
    }

    /// Moves what the CM produced onward: MADs to the wire or back in (loopback), events
    /// to their channels; then retries channels with a backlog.
    fn flush(&mut self) {
        loop {
            let mut progress = false;
            while let Some(t) = self.cm.poll_transmit() {
                progress = true;
                self.route_mad(t.to, t.mad);
            }
            while let Some((from, mad)) = self.loopback.pop_front() {
                progress = true;
                let now = self.now();
                self.cm.handle_mad(now, from, &mad);
            }
            while let Some(e) = self.cm.poll_event() {
                progress = true;
                self.on_event(e);
            }
            if !progress {
                break;
            }
        }
        self.drain_backlogs();
    }

    fn route_mad(&mut self, to: MadAddress, mad: [u8; MAD_LEN]) {
        let gid = Gid::from_ip(to.remote);
        if self.port.gids.contains(&gid) {
            // To an id of this port: it arrives as if it came from `to.local`.
            self.counters.gsi_loopback += 1;
            let from = MadAddress {
                local: to.remote,
                remote: to.local,
                remote_qpn: Qpn::GSI,
                pkey_index: to.pkey_index,
            };
            self.loopback.push_back((from, mad));
            return;
        }
        if let Some(&mac) = self.learned.get(&to.remote) {
            self.send_frame(&to, mac, &mad);
            return;
        }
        self.resolve_then(gid, Waiter::Mad(to, Box::new(mad)));
    }

    fn send_frame(&mut self, to: &MadAddress, dst_mac: [u8; 6], mad: &[u8; MAD_LEN]) {
        match self.gsi.frame(to, self.port.mac, dst_mac, mad) {
            Some(frame) => {
                self.counters.gsi_sent += 1;
                self.outbox.push_back(frame);
            }
            None => self.counters.gsi_unreachable += 1,
        }
    }

    /// Whether a channel waits for room (the daemon then retries on its next pass).
    pub fn has_backlog(&self) -> bool {
        self.channels.values().any(|c| !c.backlog.is_empty())
    }
}

fn socket_addr(a: &CmSockAddr) -> Result<SocketAddr, Refusal> {
    a.to_socket_addr().ok_or_else(|| {
        Refusal::new(
            libc::EAFNOSUPPORT,
            format!("address family {} is not IPv4 or IPv6", a.family),
        )
    })
}

mod delivery;
#[cfg(test)]
mod tests;
