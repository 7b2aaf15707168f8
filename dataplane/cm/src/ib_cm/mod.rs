//! The InfiniBand connection manager (IBTA chapter 12) as the Linux kernel's `ib_cm`
//! (`drivers/infiniband/core/cm.c`) runs it: connections named by comm IDs, the
//! REQ/REP/RTU handshake with MRA and REJ, DREQ/DREP and TimeWait, service ID resolution
//! for UD, retransmission of every MAD that waits for an answer, and the answers Linux
//! gives to duplicates, strays and stale connections.
//!
//! Sans-IO: MADs come in through [`IbCm::handle_mad`] and go out through
//! [`IbCm::poll_transmit`]; what happens to connections comes out of
//! [`IbCm::poll_event`]; time comes in as an argument and [`IbCm::poll_timeout`] says when
//! to call [`IbCm::handle_timeout`]. The consumer (rdma_cm, [`crate::RdmaCm`]) answers
//! events with the `send_*` calls, as a Linux `ib_cm` client does.
//!
//! The modules: [`connection`] (a connection and its states), `handshake` (REQ, MRA, REP,
//! RTU, communication established), `teardown` (REJ, DREQ, DREP, TimeWait, destroy),
//! `sidr`, `attributes` (the QP attributes each state implies), [`timers`].

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::time::Duration;

use xroce_transport::Instant;
use xroce_wire::mad::MAD_LEN;
use xroce_wire::{CmMad, CmMessage, CommId, Gid, Guid, ParseError, Qpn, ServiceId};

use crate::address::{MadAddress, Transmit};
use crate::counters::{Counter, Counters};
use crate::random::Random;

mod attributes;
pub mod connection;
mod handshake;
pub mod params;
mod sidr;
mod teardown;
pub mod timers;

use connection::{CmState, Connection, Outstanding};
use params::{CmError, CmEvent, CmEventKind};
use timers::Timers;

/// `IB_CM_MRA_FLAG_DELAY`: an MRA service timeout with this bit is not sent at once; it
/// is held back and sent only if a duplicate of the REQ (or REP) arrives. rdma_cm sets it
/// with a timeout of 24 (`CMA_CM_MRA_SETTING`) after every request it hands upwards.
pub const MRA_FLAG_DELAY: u8 = 0x80;

/// The constants of this CM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IbCmConfig {
    /// The node GUID this CM names its CA by in REQ and REP.
    pub ca_guid: Guid,
    /// The CA ACK delay (IBA code) sent as REP target ACK delay and used in
    /// `cm_ack_timeout`: rxe reports 15, and so does xroce.
    pub ack_delay: u8,
    /// The high 32 bits of the transaction IDs of exchanges this CM starts (Linux: its MAD
    /// agent's `hi_tid`; 2 in the captures).
    pub hi_tid: u32,
    /// How long a REQ for a service ID nobody listens on waits for a listener before it is
    /// refused (REJ 8). Linux refuses at once (zero). Programs that tell their peer to
    /// connect over another channel and then listen (perftest's `-R` does, between its two
    /// connections) race their peer's REQ; a listen a moment late still gets the
    /// connection. The wire sees the same REJ, later. The active side does the same for
    /// its peer: a REQ refused with REJ 8, or a SIDR_REQ with status 1, within this time
    /// of its first sending is sent again every [`LISTEN_RETRY`] until it is over.
    pub listen_grace: Duration,
}

/// How soon a request refused for want of a listener is sent again, while
/// [`IbCmConfig::listen_grace`] lasts since it was first sent.
pub const LISTEN_RETRY: Duration = Duration::from_millis(50);

/// How long a SIDR_REP sent is kept to answer a copy of its request (a requester that did
/// not get it sends the request again: librdmacm 15 times, 4096 ms apart), and how many
/// are kept at most.
pub const ANSWERED_SIDR_LIFETIME: Duration = Duration::from_secs(64);
/// See [`ANSWERED_SIDR_LIFETIME`].
pub const ANSWERED_SIDRS: usize = 256;

/// A SIDR_REP sent: the request it answered (request ID, requester, transaction ID), when,
/// and the MAD.
#[derive(Debug)]
struct AnsweredSidr {
    key: (CommId, IpAddr),
    tid: u64,
    at: Instant,
    to: MadAddress,
    mad: [u8; MAD_LEN],
}

/// A REQ or SIDR_REQ waiting for a listener ([`IbCmConfig::listen_grace`]).
#[derive(Debug, Clone)]
struct HeldReq {
    /// When it is refused, or, once a listener came, the moment it arrived (then it is
    /// due at once).
    until: Instant,
    arrived: Instant,
    service_id: ServiceId,
    remote: (Guid, CommId),
    from: MadAddress,
    mad: [u8; MAD_LEN],
}

/// The connection manager of one port.
#[derive(Debug)]
pub struct IbCm {
    config: IbCmConfig,
    conns: HashMap<CommId, Connection>,
    /// Listened service IDs, with how many listeners share each.
    listeners: HashMap<ServiceId, usize>,
    /// Live connections by (remote CA GUID, remote comm ID): catches duplicate REQs.
    remote_ids: HashMap<(Guid, CommId), CommId>,
    /// Live connections by (remote CA GUID, remote QPN): catches stale connections.
    remote_qps: HashMap<(Guid, Qpn), CommId>,
    /// Pending SIDR requests by (request ID, requester): catches duplicate SIDR_REQs.
    remote_sidr: HashMap<(CommId, IpAddr), CommId>,
    /// SIDR_REPs sent lately, oldest first: a copy of their request gets the same answer.
    answered_sidr: VecDeque<AnsweredSidr>,
    /// REQs and SIDR_REQs that found no listener, waiting for one.
    held: Vec<HeldReq>,
    /// GIDs of this port: a REQ for another is refused (REJ 12).
    local_gids: HashSet<Gid>,
    timers: Timers,
    next_index: u32,
    /// Scrambles comm IDs, as the Linux CM's `random_id_operand`.
    id_operand: u32,
    transmits: VecDeque<Transmit>,
    events: VecDeque<CmEvent>,
    counters: Counters,
}

impl IbCm {
    /// A CM with no connections. One value is drawn from `random` (the comm ID operand).
    pub fn new(config: IbCmConfig, random: &mut dyn Random) -> IbCm {
        IbCm {
            config,
            conns: HashMap::new(),
            listeners: HashMap::new(),
            remote_ids: HashMap::new(),
            remote_qps: HashMap::new(),
            remote_sidr: HashMap::new(),
            answered_sidr: VecDeque::new(),
            held: Vec::new(),
            local_gids: HashSet::new(),
            timers: Timers::default(),
            next_index: 0,
            id_operand: random.next_u32(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            counters: Counters::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &IbCmConfig {
        &self.config
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    pub(crate) fn counters_mut(&mut self) -> &mut Counters {
        &mut self.counters
    }

    /// Adds a GID of this port (an IP address of this host, as a GID).
    pub fn add_local_gid(&mut self, gid: Gid) {
        self.local_gids.insert(gid);
    }

    /// Removes a GID of this port.
    pub fn remove_local_gid(&mut self, gid: Gid) {
        self.local_gids.remove(&gid);
    }

    /// Starts listening on a service ID (`ib_cm_insert_listen`: listeners of one service
    /// ID share it; each call must be matched by [`IbCm::stop_listen`]).
    pub fn listen(&mut self, service_id: ServiceId) {
        *self.listeners.entry(service_id).or_insert(0) += 1;
        // REQs held for this service are due now: [`IbCm::handle_timeout`] takes them.
        for h in self.held.iter_mut().filter(|h| h.service_id == service_id) {
            h.until = h.arrived;
        }
    }

    /// Stops one listener of a service ID.
    pub fn stop_listen(&mut self, service_id: ServiceId) {
        if let Some(n) = self.listeners.get_mut(&service_id) {
            *n -= 1;
            if *n == 0 {
                self.listeners.remove(&service_id);
            }
        }
    }

    /// Whether anyone listens on a service ID.
    pub fn is_listening(&self, service_id: ServiceId) -> bool {
        self.listeners.contains_key(&service_id)
    }

    /// The state of a connection, `None` if it does not exist.
    pub fn state(&self, id: CommId) -> Option<CmState> {
        self.conns.get(&id).map(|c| c.state)
    }

    /// The peer's comm ID of a connection (0 until known).
    pub fn remote_id(&self, id: CommId) -> Option<CommId> {
        self.conns.get(&id).map(|c| c.remote_id)
    }

    /// How many connections exist (in any state).
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// Whether no connection exists.
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// The next MAD to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<CmEvent> {
        self.events.pop_front()
    }

    /// When [`IbCm::handle_timeout`] should be called next.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        let held = self.held.iter().map(|h| h.until).min();
        while let Some((when, id)) = self.timers.peek() {
            if self.is_live_timer(when, id) {
                return Some(held.map_or(when, |h| h.min(when)));
            }
            self.timers.pop();
        }
        held
    }

    fn is_live_timer(&self, when: Instant, id: CommId) -> bool {
        self.conns.get(&id).is_some_and(|c| {
            c.outstanding.as_ref().is_some_and(|o| o.deadline == when)
                || c.timewait_until == Some(when)
        })
    }

    /// Retransmits what is due (the same bytes, the same TID), gives up on what has no
    /// retries left, and ends TimeWait periods that are over.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.release_held(now);
        while let Some((when, id)) = self.timers.peek() {
            if when > now {
                break;
            }
            self.timers.pop();
            let Some(conn) = self.conns.get_mut(&id) else {
                continue;
            };
            if let Some(o) = conn.outstanding.as_mut().filter(|o| o.deadline == when) {
                if o.retries_left > 0 {
                    o.retries_left -= 1;
                    o.deadline = now + o.timeout;
                    let (deadline, to, mad) = (o.deadline, o.to, o.mad);
                    self.timers.push(deadline, id);
                    self.counters.inc(Counter::retransmits);
                    self.queue(to, mad);
                } else {
                    let sent_in = o.sent_in;
                    conn.outstanding = None;
                    self.send_error(now, id, sent_in);
                }
            } else if conn.timewait_until == Some(when) && conn.state == CmState::TimeWait {
                conn.timewait_until = None;
                conn.state = CmState::Idle;
                self.event(id, CmEventKind::TimewaitExit);
            }
        }
    }

    /// A MAD that used all its retries (`cm_process_send_error`).
    fn send_error(&mut self, now: Instant, id: CommId, sent_in: CmState) {
        let Some(state) = self.state(id) else {
            return;
        };
        if state != sent_in {
            return;
        }
        let (counter, kind) = match state {
            CmState::ReqSent | CmState::MraReqRcvd => {
                self.reset_to_idle(id);
                (Counter::req_timeouts, CmEventKind::ReqError)
            }
            CmState::RepSent | CmState::MraRepRcvd => {
                self.reset_to_idle(id);
                (Counter::rep_timeouts, CmEventKind::RepError)
            }
            CmState::DreqSent => {
                self.enter_timewait(now, id);
                (Counter::dreq_timeouts, CmEventKind::DreqError)
            }
            CmState::SidrReqSent => {
                self.set_state(id, CmState::Idle);
                (Counter::sidr_req_timeouts, CmEventKind::SidrReqError)
            }
            _ => return,
        };
        self.counters.inc(counter);
        self.event(id, kind);
    }

    /// Takes a received MAD: `from` is where it came from (the reply to a request goes
    /// there). Whatever the bytes, this never panics, and exactly one disposition counter
    /// says what became of them.
    pub fn handle_mad(&mut self, now: Instant, from: MadAddress, bytes: &[u8]) {
        self.counters.inc(Counter::rcvd_mads);
        let disposition = match CmMad::parse(bytes) {
            Ok(mad) => self.dispatch(now, from, &mad, bytes),
            Err(e) => match e {
                ParseError::NotCm { .. } | ParseError::CmMethod(_) => Counter::rcvd_not_cm,
                ParseError::CmAttribute(_) => Counter::rcvd_unsupported_attribute,
                _ => Counter::rcvd_malformed,
            },
        };
        self.counters.inc(disposition);
    }

    fn dispatch(&mut self, now: Instant, from: MadAddress, mad: &CmMad<'_>, raw: &[u8]) -> Counter {
        let tid = mad.transaction_id;
        match &mad.message {
            CmMessage::Req(req) => self.handle_req(now, from, tid, req, raw),
            CmMessage::Mra(mra) => self.handle_mra(now, mra),
            CmMessage::Rej(rej) => self.handle_rej(now, rej, raw),
            CmMessage::Rep(rep) => self.handle_rep(now, from, tid, rep, raw),
            CmMessage::Rtu(rtu) => self.handle_rtu(rtu),
            CmMessage::Dreq(dreq) => self.handle_dreq(from, tid, dreq),
            CmMessage::Drep(drep) => self.handle_drep(now, drep),
            CmMessage::SidrReq(req) => self.handle_sidr_req(now, from, tid, req, raw),
            CmMessage::SidrRep(rep) => self.handle_sidr_rep(now, rep),
        }
    }

    // --- Helpers shared by the handlers ---

    /// The connection with comm ID `local` whose peer's comm ID is `remote`
    /// (`cm_acquire_id`).
    fn find(&self, local: CommId, remote: CommId) -> Option<CommId> {
        self.conns
            .get(&local)
            .filter(|c| c.remote_id == remote)
            .map(|c| c.local_id)
    }

    fn conn(&self, id: CommId) -> Result<&Connection, CmError> {
        self.conns.get(&id).ok_or(CmError::UnknownId(id))
    }

    fn conn_mut(&mut self, id: CommId) -> Result<&mut Connection, CmError> {
        self.conns.get_mut(&id).ok_or(CmError::UnknownId(id))
    }

    fn set_state(&mut self, id: CommId, state: CmState) {
        if let Some(c) = self.conns.get_mut(&id) {
            c.state = state;
        }
    }

    /// A new comm ID: a cyclic counter scrambled with the random operand, as the Linux CM
    /// forms them (`cm_alloc_id_priv`: the counter XOR the operand, as stored in memory on
    /// a little-endian host, is the ID on the wire). Never 0 (0 means "unknown").
    fn alloc_id(&mut self) -> CommId {
        loop {
            let index = self.next_index;
            self.next_index = index.wrapping_add(1);
            let id = CommId((index ^ self.id_operand).swap_bytes());
            if id.0 != 0 && !self.conns.contains_key(&id) {
                return id;
            }
        }
    }

    /// The transaction ID of an exchange a connection starts (`cm_form_tid`): the MAD
    /// agent's high word, and the comm ID as the Linux CM stores it in memory, so its low
    /// word is the comm ID byte-swapped (comm ID 0xaad7e16b, TID 0x000000026be1d7aa in the
    /// captures). Receivers never depend on this.
    fn form_tid(&self, id: CommId) -> u64 {
        (u64::from(self.config.hi_tid) << 32) | u64::from(id.0.swap_bytes())
    }

    fn event(&mut self, id: CommId, kind: CmEventKind) {
        self.events.push_back(CmEvent { id, kind });
    }

    fn queue(&mut self, to: MadAddress, mad: [u8; MAD_LEN]) {
        self.counters.inc(Counter::sent_mads);
        self.transmits.push_back(Transmit { to, mad });
    }

    /// Sends a MAD that waits for an answer: retried `retries` times, `timeout` apart.
    fn send_outstanding(
        &mut self,
        now: Instant,
        id: CommId,
        mad: [u8; MAD_LEN],
        retries: u8,
        timeout: Duration,
    ) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let deadline = now + timeout;
        conn.outstanding = Some(Outstanding {
            mad,
            to: conn.av,
            timeout,
            retries_left: retries,
            deadline,
            sent_in: conn.state,
            first_sent: now,
        });
        let to = conn.av;
        self.timers.push(deadline, id);
        self.queue(to, mad);
    }

    /// Whether a request refused for want of a listener is sent again (within
    /// [`IbCmConfig::listen_grace`] of its first sending, in the state it was sent in):
    /// if so it is, [`LISTEN_RETRY`] from now, and nothing else changes.
    fn retry_for_listener(&mut self, now: Instant, id: CommId) -> bool {
        let grace = self.config.listen_grace;
        let Some(conn) = self.conns.get_mut(&id) else {
            return false;
        };
        let state = conn.state;
        let Some(o) = conn.outstanding.as_mut() else {
            return false;
        };
        if grace.is_zero() || o.sent_in != state || now + LISTEN_RETRY > o.first_sent + grace {
            return false;
        }
        o.deadline = now + LISTEN_RETRY;
        o.retries_left = o.retries_left.max(1);
        let deadline = o.deadline;
        self.timers.push(deadline, id);
        true
    }

    /// Stops retransmitting a connection's MAD (`ib_cancel_mad`).
    fn cancel(&mut self, id: CommId) {
        if let Some(c) = self.conns.get_mut(&id) {
            c.outstanding = None;
        }
    }

    /// Takes a connection out of the tables of live connections (`cm_remove_remote`).
    fn remove_remote(&mut self, id: CommId) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.in_remote_ids {
            self.remote_ids.remove(&(c.remote_ca_guid, c.remote_id));
            c.in_remote_ids = false;
        }
        if c.in_remote_qps {
            self.remote_qps.remove(&(c.remote_ca_guid, c.remote_qpn));
            c.in_remote_qps = false;
        }
    }

    /// `cm_reset_to_idle`.
    fn reset_to_idle(&mut self, id: CommId) {
        self.cancel(id);
        self.remove_remote(id);
        self.set_state(id, CmState::Idle);
    }

    /// `cm_enter_timewait`: out of the live tables (so the peer's CA GUID and QPN may come
    /// back in a new REQ), no more retransmissions, and TimeWait for `cm_convert_to_ms` of
    /// the path's ACK timeout.
    fn enter_timewait(&mut self, now: Instant, id: CommId) {
        self.cancel(id);
        self.remove_remote(id);
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        c.state = CmState::TimeWait;
        let until = now + timers::cm_convert_to_ms(c.av_timeout);
        c.timewait_until = Some(until);
        self.timers.push(until, id);
    }

    /// The 256 bytes of a CM MAD.
    fn mad(tid: u64, message: CmMessage<'_>) -> [u8; MAD_LEN] {
        let mad = CmMad {
            transaction_id: tid,
            attribute_modifier: 0,
            message,
        };
        // NOTE(unwrap): emitting into 256 bytes fails only for private data, ARI or
        // additional information longer than their fields; every public call checks those
        // lengths first, and data kept from received MADs is at most its field's size.
        mad.to_bytes()
            .expect("CM message fields within their sizes")
    }
}

#[cfg(test)]
mod tests;
