//! rdma_cm (the Linux kernel's `cma.c`) on top of the connection manager: ids in port
//! spaces bound to IP addresses and ports, listeners, the IP CM header and service IDs
//! of requests, the conversion of CM events into the events librdmacm reports, and the
//! QP attributes of each step.
//!
//! Like the layer below it is sans-IO: [`RdmaCm::handle_mad`], [`RdmaCm::poll_transmit`],
//! [`RdmaCm::poll_event`], [`RdmaCm::poll_timeout`] and [`RdmaCm::handle_timeout`] pass
//! MADs, events and time in and out; the calls an application makes through librdmacm
//! (create, bind, listen, connect, accept, reject, disconnect, destroy) are methods.
//! Address and route resolution are the engine's: it hands a resolved [`Route`] to
//! [`RdmaCm::resolve_route`].
//!
//! The modules: [`id`] (ids and their parameters), [`events`], [`error`], [`multicast`]
//! (groups of UD ids), `ports`, `calls` (connect, accept and the rest), `handler` (CM
//! events into rdma_cm events, incoming requests), `attributes` (`rdma_init_qp_attr`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use xroce_transport::{Instant, QpType};
use xroce_wire::{CommId, Gid, Guid, PortSpace, Psn, Qpn, ServiceId};

use crate::address::{MadAddress, Transmit, is_any};
use crate::counters::Counters;
use crate::ib_cm::{IbCm, IbCmConfig};
use crate::random::Random;

mod attributes;
mod calls;
pub mod error;
pub mod events;
mod handler;
pub mod id;
pub mod multicast;
mod ports;

use error::Error;
use events::Event;
use id::{IdHandle, IdInfo, IdOption, IdState, Owner, RdmaId, Route, RouteInfo};
pub use ports::EPHEMERAL_PORTS;
use ports::Ports;

/// `RDMA_UDP_QKEY`: the Q_Key of UD QPs of the UDP and IB port spaces.
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;
/// `CMA_CM_RESPONSE_TIMEOUT`: the CM response timeout rdma_cm asks for (4096 ms).
pub const CM_RESPONSE_TIMEOUT: u8 = 20;
/// The most connection requests a listener holds unanswered (`net.rdma_ucm.max_backlog`'s
/// default): a `rdma_listen` backlog of 0, a negative one or one above this gets this.
pub const MAX_BACKLOG: u32 = 1024;
/// `CMA_MAX_CM_RETRIES`.
pub const MAX_CM_RETRIES: u8 = 15;
/// `CMA_CM_MRA_SETTING`'s service timeout: the MRA rdma_cm holds back after each request
/// and response it hands upwards (sent only for a duplicate).
pub const MRA_SERVICE_TIMEOUT: u8 = 24;
/// `CMA_IBOE_PACKET_LIFETIME` of Linux up to 6.1 (the captured rxe peers): 18. Linux 6.2
/// and later use 16.
pub const IBOE_PACKET_LIFETIME: u8 = 18;
/// Bytes of the application's private data in a connect request: 92 − 36.
pub const REQ_USER_DATA_LEN: usize = 56;
/// Bytes of the application's private data in a UD connect request: 216 − 36.
pub const SIDR_REQ_USER_DATA_LEN: usize = 180;

/// The constants of one rdma_cm port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// The node GUID (REQ and REP name the CA by it).
    pub ca_guid: Guid,
    /// The CA ACK delay (15, as rxe).
    pub ack_delay: u8,
    /// The high word of the CM's transaction IDs.
    pub mad_hi_tid: u32,
    /// The packet life time of synthesized RoCE paths ([`IBOE_PACKET_LIFETIME`]).
    pub packet_life_time: u8,
    /// The ephemeral port range.
    pub port_range: (u16, u16),
    /// How long a REQ waits for a listener before REJ 8 ([`IbCmConfig::listen_grace`];
    /// Linux: zero).
    pub listen_grace: Duration,
}

impl Config {
    /// The configuration of a port with this node GUID, otherwise as Linux 6.1 with rxe.
    pub const fn new(ca_guid: Guid) -> Config {
        Config {
            ca_guid,
            ack_delay: 15,
            mad_hi_tid: 1,
            packet_life_time: IBOE_PACKET_LIFETIME,
            port_range: EPHEMERAL_PORTS,
            listen_grace: Duration::ZERO,
        }
    }
}

/// rdma_cm of one port.
pub struct RdmaCm {
    config: Config,
    ib: IbCm,
    ids: HashMap<IdHandle, RdmaId>,
    next_handle: u64,
    ports: Ports,
    /// Which id a CM connection belongs to.
    by_cm: HashMap<CommId, IdHandle>,
    local_addrs: HashSet<IpAddr>,
    events: VecDeque<Event>,
    random: Box<dyn Random>,
}

impl std::fmt::Debug for RdmaCm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdmaCm")
            .field("config", &self.config)
            .field("ids", &self.ids.len())
            .field("connections", &self.ib.len())
            .field("events", &self.events.len())
            .finish()
    }
}

impl RdmaCm {
    /// rdma_cm with no ids and no local addresses.
    pub fn new(config: Config, mut random: Box<dyn Random>) -> RdmaCm {
        let ib = IbCm::new(
            IbCmConfig {
                ca_guid: config.ca_guid,
                ack_delay: config.ack_delay,
                hi_tid: config.mad_hi_tid,
                listen_grace: config.listen_grace,
            },
            random.as_mut(),
        );
        RdmaCm {
            config,
            ib,
            ids: HashMap::new(),
            next_handle: 1,
            ports: Ports::new(config.port_range),
            by_cm: HashMap::new(),
            local_addrs: HashSet::new(),
            events: VecDeque::new(),
            random,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The counters of the connection manager below.
    pub fn counters(&self) -> &Counters {
        self.ib.counters()
    }

    /// The connection manager below (to inspect connections by comm ID).
    pub fn ib_cm(&self) -> &IbCm {
        &self.ib
    }

    /// Adds an address of this host: ids bind to it, requests to it are served.
    pub fn add_local_address(&mut self, addr: IpAddr) {
        self.local_addrs.insert(addr);
        self.ib.add_local_gid(Gid::from_ip(addr));
    }

    /// Removes an address of this host (ids already using it keep it).
    pub fn remove_local_address(&mut self, addr: IpAddr) {
        self.local_addrs.remove(&addr);
        self.ib.remove_local_gid(Gid::from_ip(addr));
    }

    /// What an id looks like, `None` if it does not exist.
    pub fn id(&self, id: IdHandle) -> Option<IdInfo> {
        self.ids.get(&id).map(RdmaId::info)
    }

    /// How many ids hold a port of a port space (0 when it is free).
    pub fn port_holders(&self, ps: PortSpace, port: u16) -> usize {
        self.ports.holders(ps, port)
    }

    /// The connecting id whose QP is `qpn` (set by connect or accept): how the engine finds
    /// the id to tell that a QP saw its first packet ([`RdmaCm::notify_established`]).
    pub fn id_of_qp(&self, qpn: Qpn) -> Option<IdHandle> {
        self.ids
            .iter()
            .filter(|(_, i)| i.state == IdState::Connect && i.cm.is_some() && i.qp_num == qpn)
            .map(|(h, _)| *h)
            .min()
    }

    /// The ids of an owner.
    pub fn ids_of(&self, owner: Owner) -> Vec<IdHandle> {
        let mut v: Vec<IdHandle> = self
            .ids
            .iter()
            .filter(|(_, i)| i.owner == owner)
            .map(|(h, _)| *h)
            .collect();
        v.sort();
        v
    }

    /// Creates an id (`rdma_create_id`). TCP carries RC, UDP carries UD, IB either; IPoIB
    /// is not served. Draws the id's random starting PSN.
    pub fn create_id(
        &mut self,
        owner: Owner,
        ps: PortSpace,
        qp_type: QpType,
    ) -> Result<IdHandle, Error> {
        let ok = match ps {
            PortSpace::Tcp => qp_type == QpType::Rc,
            PortSpace::Udp => qp_type == QpType::Ud,
            PortSpace::Ib => true,
            PortSpace::Ipoib => false,
        };
        if !ok {
            return Err(Error::QpType { ps, qp_type });
        }
        let handle = IdHandle(self.next_handle);
        self.next_handle += 1;
        let seq_num = Psn::new(self.random.next_u32());
        self.ids
            .insert(handle, RdmaId::new(owner, ps, qp_type, seq_num));
        Ok(handle)
    }

    fn get(&self, id: IdHandle) -> Result<&RdmaId, Error> {
        self.ids.get(&id).ok_or(Error::UnknownId(id))
    }

    fn get_mut(&mut self, id: IdHandle) -> Result<&mut RdmaId, Error> {
        self.ids.get_mut(&id).ok_or(Error::UnknownId(id))
    }

    /// Sets an option (`rdma_set_option`), with Linux's rules on when each may be set.
    pub fn set_option(&mut self, id: IdHandle, option: IdOption) -> Result<(), Error> {
        let i = self.get_mut(id)?;
        match option {
            IdOption::Tos(tos) => i.tos = Some(tos),
            IdOption::ReuseAddr(reuse) => {
                // `rdma_set_reuseaddr`: on while not listening, off only while idle.
                if (reuse && i.state != IdState::Listen) || i.state == IdState::Idle {
                    i.reuseaddr = reuse;
                } else {
                    return Err(Error::Option("REUSEADDR"));
                }
            }
            IdOption::AfOnly(afonly) => {
                if i.state != IdState::Idle {
                    return Err(Error::Option("AFONLY"));
                }
                i.afonly = afonly;
            }
            IdOption::AckTimeout(timeout) => {
                if i.qp_type != QpType::Rc {
                    return Err(Error::Option("ACK_TIMEOUT"));
                }
                i.ack_timeout = Some(timeout);
            }
        }
        Ok(())
    }

    /// Binds an id to an address and port (`rdma_bind_addr`); port 0 picks a free one.
    /// The address must be the wildcard, a loopback address (which stands for the
    /// wildcard, [`crate::address::is_any`]) or one of this host's.
    pub fn bind(&mut self, id: IdHandle, addr: SocketAddr) -> Result<SocketAddr, Error> {
        let i = self.get(id)?;
        if i.state != IdState::Idle {
            return Err(Error::InvalidState {
                op: "bind",
                state: i.state,
            });
        }
        if !is_any(addr.ip()) && !self.local_addrs.contains(&addr.ip()) {
            return Err(Error::NotLocal(addr.ip()));
        }
        let (ps, reuseaddr) = (i.ps, i.reuseaddr);
        let bound = self
            .ports
            .bind(&self.ids, id, ps, addr, reuseaddr, self.random.as_mut())?;
        let i = self.get_mut(id)?;
        i.bound = Some(bound);
        i.state = IdState::AddrBound;
        Ok(bound)
    }

    /// `rdma_resolve_addr` from `local`: an idle id is bound to it on a free port; an id
    /// bound to the wildcard (or a loopback address) takes it on the port it holds, as
    /// Linux's takes the route's source address; an id bound to an address keeps it.
    /// Returns the address bound.
    pub fn bind_source(&mut self, id: IdHandle, local: IpAddr) -> Result<SocketAddr, Error> {
        let i = self.get(id)?;
        match (i.state, i.bound) {
            (IdState::Idle, _) => self.bind(id, SocketAddr::new(local, 0)),
            (IdState::AddrBound, Some(b)) if is_any(b.ip()) => {
                if !self.local_addrs.contains(&local) {
                    return Err(Error::NotLocal(local));
                }
                let bound = SocketAddr::new(local, b.port());
                self.get_mut(id)?.bound = Some(bound);
                Ok(bound)
            }
            (IdState::AddrBound, Some(b)) => Ok(b),
            (state, _) => Err(Error::InvalidState {
                op: "resolve address",
                state,
            }),
        }
    }

    /// Takes the route the engine resolved for an id (`rdma_resolve_addr` +
    /// `rdma_resolve_route`): an unbound id is bound to the route's source address and a
    /// free port, as `rdma_resolve_addr` binds it.
    pub fn resolve_route(&mut self, id: IdHandle, route: Route) -> Result<(), Error> {
        let i = self.get(id)?;
        let (local, remote) = (route.local, route.remote.ip());
        if local.is_ipv4() != remote.is_ipv4() {
            return Err(Error::AddressFamily { local, remote });
        }
        if !self.local_addrs.contains(&local) {
            return Err(Error::NotLocal(local));
        }
        let port = match (i.state, i.bound) {
            (IdState::Idle, _) => self.bind(id, SocketAddr::new(local, 0))?.port(),
            (IdState::AddrBound, Some(b)) if is_any(b.ip()) || b.ip() == local => b.port(),
            (IdState::AddrBound, Some(b)) => return Err(Error::NotLocal(b.ip())),
            (state, _) => {
                return Err(Error::InvalidState {
                    op: "resolve route",
                    state,
                });
            }
        };
        let i = self.get_mut(id)?;
        i.src = Some(SocketAddr::new(local, port));
        i.dst = Some(route.remote);
        i.route = Some(RouteInfo {
            path_mtu: route.path_mtu,
            hop_limit: route.hop_limit,
        });
        i.state = IdState::RouteResolved;
        Ok(())
    }

    /// Listens on an id's address and port (`rdma_listen`) with the largest backlog; an
    /// unbound id is first bound to 0.0.0.0 and a free port. Requests come as
    /// CONNECT_REQUEST events on new ids.
    pub fn listen(&mut self, id: IdHandle) -> Result<(), Error> {
        self.listen_with_backlog(id, 0)
    }

    /// [`RdmaCm::listen`] holding at most `backlog` connection requests the application
    /// has not accepted or rejected yet (at most [`MAX_BACKLOG`]; 0 or less is that
    /// maximum), as ucma bounds a listener's pending requests. A request beyond it is
    /// dropped without a word, so that the active side's retransmission of its REQ finds
    /// room later (as the kernel does: no REJ for want of backlog), and counted in
    /// `req_over_backlog`.
    pub fn listen_with_backlog(&mut self, id: IdHandle, backlog: i32) -> Result<(), Error> {
        if self.get(id)?.state == IdState::Idle {
            self.bind(id, SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0))?;
        }
        let i = self.get(id)?;
        if i.state != IdState::AddrBound {
            return Err(Error::InvalidState {
                op: "listen",
                state: i.state,
            });
        }
        let (ps, reuseaddr) = (i.ps, i.reuseaddr);
        let Some(addr) = i.bound else {
            return Err(Error::InvalidState {
                op: "listen",
                state: i.state,
            });
        };
        if reuseaddr {
            self.ports.check_listen(&self.ids, id, ps, addr)?;
        }
        self.ib.listen(ServiceId::rdma_cm(ps, addr.port()));
        let i = self.get_mut(id)?;
        i.state = IdState::Listen;
        i.listening = true;
        i.backlog = match u32::try_from(backlog) {
            Ok(b) if b > 0 && b < MAX_BACKLOG => b,
            _ => MAX_BACKLOG,
        };
        Ok(())
    }

    /// The next MAD to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.ib.poll_transmit()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`RdmaCm::handle_timeout`] should be called next.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.ib.poll_timeout()
    }

    /// Retransmissions, given-up exchanges and TimeWait ends that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.ib.handle_timeout(now);
        self.pump(now);
    }

    /// Takes a MAD received on QP1 from `from`.
    pub fn handle_mad(&mut self, now: Instant, from: MadAddress, mad: &[u8]) {
        self.ib.handle_mad(now, from, mad);
        self.pump(now);
    }

    /// Passes the CM's events through rdma_cm (`cma_ib_handler`, `cma_ib_req_handler`).
    fn pump(&mut self, now: Instant) {
        while let Some(event) = self.ib.poll_event() {
            self.on_cm_event(now, event);
        }
    }

    fn push_event(&mut self, event: Event) {
        self.events.push_back(event);
    }
}
