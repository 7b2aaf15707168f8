//! Connection management for xroce: the InfiniBand connection manager (IBTA chapter 12)
//! and rdma_cm on top of it, as deterministic, sans-IO state machines that behave on the
//! wire as the Linux kernel's `ib_cm` and `rdma_cm` do with Soft-RoCE, MAD for MAD.
//!
//! CM MADs come in as bytes with the address they came from ([`RdmaCm::handle_mad`]) and
//! go out as bytes with the address they go to ([`RdmaCm::poll_transmit`]); what
//! applications must hear comes out as librdmacm's events ([`RdmaCm::poll_event`]); time
//! comes in as an argument ([`Instant`], the transport's) and [`RdmaCm::poll_timeout`]
//! says when to call [`RdmaCm::handle_timeout`]; randomness (comm IDs, starting PSNs,
//! ephemeral ports) comes from a [`Random`] the caller provides; QP attributes come out as
//! the transport's [`xroce_transport::QpAttr`] for the engine to apply. This crate never
//! performs I/O, never reads a clock, never draws randomness of its own, never spawns a
//! thread, contains no `unsafe` code, and never panics on what arrives from the wire.
//! Wrapping MADs in BTH and DETH to QP1, resolving addresses and routes, and moving QPs
//! are the engine's work.
//!
//! # Layers and modules
//!
//! - [`ib_cm`]: the connection manager ([`IbCm`]): connections by comm ID, REQ, MRA, REJ,
//!   REP, RTU, DREQ, DREP, TimeWait, SIDR, retransmissions, duplicates, stale
//!   connections, the QP attributes of each state. Its modules: [`ib_cm::connection`],
//!   [`ib_cm::params`] (calls' parameters and events), [`ib_cm::timers`]; inside, the
//!   handshake (REQ to RTU), the teardown (REJ, DREQ, DREP, TimeWait), SIDR and the QP
//!   attributes.
//! - [`rdma_cm`]: ids in port spaces ([`RdmaCm`]), ports, listeners, the IP CM header,
//!   events as librdmacm reports them, `rdma_init_qp_attr`, owners, multicast groups. Its
//!   modules: [`rdma_cm::id`], [`rdma_cm::events`], [`rdma_cm::error`],
//!   [`rdma_cm::multicast`]; inside, the ports, the calls (connect to destroy), the
//!   handler of CM events and the QP attributes.
//! - [`counters`]: one counter per way a MAD fares; every received MAD lands in exactly
//!   one disposition counter.
//! - [`address`]: where MADs come from and go to; [`random`]: injected randomness.
//! - [`testing`]: two hosts exchanging MADs through a lossy, duplicating, reordering
//!   network in virtual time, for the tests and for the engine's own.
//!
//! # A connection, end to end
//!
//! ```
//! use std::net::SocketAddr;
//! use std::time::Duration;
//! use xroce_cm::testing::Pair;
//! use xroce_cm::{ConnParam, EventKind, Owner, Route};
//! use xroce_transport::{QpState, QpType};
//! use xroce_wire::{IbMtu, PortSpace, Qpn};
//!
//! let mut p = Pair::new(1); // hosts A (10.0.0.1) and B (10.0.0.2), virtual time
//! let listener = p.b.cm.create_id(Owner(2), PortSpace::Tcp, QpType::Rc)?;
//! p.b.cm.bind(listener, SocketAddr::new(p.b.addr, 7174))?;
//! p.b.cm.listen(listener)?;
//!
//! let id = p.a.cm.create_id(Owner(1), PortSpace::Tcp, QpType::Rc)?;
//! let route = Route {
//!     local: p.a.addr,
//!     remote: SocketAddr::new(p.b.addr, 7174),
//!     path_mtu: IbMtu::Mtu1024,
//!     hop_limit: 64,
//! };
//! p.a.cm.resolve_route(id, route)?;
//! let param = ConnParam { qp_num: Qpn::new(0x11), retry_count: 7, rnr_retry_count: 7, ..Default::default() };
//! p.a.cm.connect(p.now, id, &param)?; // REQ
//!
//! p.run_until(Duration::from_secs(1), |p| p.b.any(EventKind::ConnectRequest).is_some());
//! let request = p.b.any(EventKind::ConnectRequest).unwrap().id; // a new id on B
//! let accept = ConnParam { qp_num: Qpn::new(0x22), ..param };
//! p.b.cm.accept(p.now, request, &accept)?; // REP
//!
//! p.run_until(Duration::from_secs(1), |p| p.a.any(EventKind::ConnectResponse).is_some());
//! let (rtr, mask) = p.a.cm.init_qp_attr(id, QpState::Rtr)?; // for the engine's modify-QP
//! assert_eq!(rtr.dest_qpn, Qpn::new(0x22));
//! p.a.cm.establish(p.now, id)?; // RTU
//!
//! p.run_until(Duration::from_secs(1), |p| p.b.any(EventKind::Established).is_some());
//! # let _ = mask;
//! # Ok::<(), xroce_cm::Error>(())
//! ```
//!
//! # Where Linux decides
//!
//! The specification leaves many choices open; where a Linux peer's behaviour decides
//! interoperability, the code does what Linux 6.1 does (the rxe peers the captures come
//! from) and says so: timeouts from `cm_convert_to_ms`, retransmissions 16 times with
//! one TID, a held-back MRA after every request, REJ 8 for no listener and 28 when no
//! rdma_cm listener takes a request, REJ 10 and a DREQ for a QP that comes back while
//! still connected, and the contents of every REQ and REP field.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod address;
pub mod counters;
pub mod ib_cm;
pub mod random;
pub mod rdma_cm;
pub mod testing;

pub use address::{MadAddress, Transmit};
pub use counters::{Counter, Counters};
pub use ib_cm::connection::CmState;
pub use ib_cm::params::{CmError, CmEvent, CmEventKind};
pub use ib_cm::{IbCm, IbCmConfig};
pub use random::{Random, ScriptedRandom, SeededRandom};
pub use rdma_cm::error::Error;
pub use rdma_cm::events::{
    AhAttr, ConnEventParam, Event, EventKind, EventParam, McEventParam, UdEventParam,
};
pub use rdma_cm::id::{ConnParam, IdHandle, IdInfo, IdOption, IdState, Owner, Route};
pub use rdma_cm::multicast::{MC_HOP_LIMIT, MC_QPN, Membership};
pub use rdma_cm::{Config, RDMA_UDP_QKEY, RdmaCm};
pub use xroce_transport::Instant;
