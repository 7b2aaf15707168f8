//! Queue pairs: the verbs state machine, attributes, and `modify` validated the way
//! `ibv_modify_qp` validates them.
//!
//! A [`QueuePair`] holds the three roles of rxe's decomposition, each in its own module:
//! the [`requester`](crate::requester) (send queue → request packets), the
//! [`responder`](crate::responder) (request packets → memory, receive completions, ACKs) and
//! the [`completer`](crate::completer) (responses → send completions, retransmission).

use std::collections::VecDeque;

use xroce_wire::{Gid, IbMtu, Psn, Qpn};

use crate::completer::CompleterState;
use crate::completion::{Completion, CompletionQueue, WcOpcode};
use crate::context::{Cx, Emit};
use crate::counters::Counter;
use crate::memory::MemoryTable;
use crate::memory::{Access, PdId};
use crate::packet::Packet;
use crate::requester::{RequesterState, SendEntry};
use crate::responder::ResponderState;
use crate::srq::SrqId;
use crate::time::Instant;
use crate::wqe::{RecvWqe, SendOp, SendWqe};

/// The transport service of a queue pair (`ibv_qp_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
}

/// Queue pair states (`ibv_qp_state`), with their verbs values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum QpState {
    /// Just created or reset: nothing is processed.
    Reset = 0,
    /// Initialised: receive work requests may be posted, nothing is processed.
    Init = 1,
    /// Ready to receive.
    Rtr = 2,
    /// Ready to send.
    Rts = 3,
    /// Send queue drain: no new send work requests start.
    Sqd = 4,
    /// Send queue error (UC/UD): the send queue is flushed, receives go on.
    Sqe = 5,
    /// Error: every work request is flushed.
    Err = 6,
}

impl QpState {
    /// The state for a verbs value.
    pub fn from_raw(raw: u32) -> Option<QpState> {
        Some(match raw {
            0 => QpState::Reset,
            1 => QpState::Init,
            2 => QpState::Rtr,
            3 => QpState::Rts,
            4 => QpState::Sqd,
            5 => QpState::Sqe,
            6 => QpState::Err,
            _ => return None,
        })
    }
}

/// Which attributes of a [`QpAttr`] a `modify` sets (`ibv_qp_attr_mask`, same bits).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct AttrMask(pub u32);

macro_rules! attr_bits {
    ($($name:ident = $bit:expr, $text:literal;)*) => {
        impl AttrMask {
            $(
                #[doc = concat!("`IBV_QP_", $text, "`.")]
                pub const $name: AttrMask = AttrMask(1 << $bit);
            )*
            const NAMES: &'static [(AttrMask, &'static str)] = &[$((AttrMask::$name, $text)),*];
        }
    };
}

attr_bits! {
    STATE = 0, "STATE";
    CUR_STATE = 1, "CUR_STATE";
    EN_SQD_ASYNC_NOTIFY = 2, "EN_SQD_ASYNC_NOTIFY";
    ACCESS_FLAGS = 3, "ACCESS_FLAGS";
    PKEY_INDEX = 4, "PKEY_INDEX";
    PORT = 5, "PORT";
    QKEY = 6, "QKEY";
    AV = 7, "AV";
    PATH_MTU = 8, "PATH_MTU";
    TIMEOUT = 9, "TIMEOUT";
    RETRY_CNT = 10, "RETRY_CNT";
    RNR_RETRY = 11, "RNR_RETRY";
    RQ_PSN = 12, "RQ_PSN";
    MAX_QP_RD_ATOMIC = 13, "MAX_QP_RD_ATOMIC";
    ALT_PATH = 14, "ALT_PATH";
    MIN_RNR_TIMER = 15, "MIN_RNR_TIMER";
    SQ_PSN = 16, "SQ_PSN";
    MAX_DEST_RD_ATOMIC = 17, "MAX_DEST_RD_ATOMIC";
    PATH_MIG_STATE = 18, "PATH_MIG_STATE";
    CAP = 19, "CAP";
    DEST_QPN = 20, "DEST_QPN";
    RATE_LIMIT = 25, "RATE_LIMIT";
}

impl AttrMask {
    /// No attributes.
    pub const NONE: AttrMask = AttrMask(0);

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: AttrMask) -> bool {
        self.0 & other.0 == other.0
    }

    /// The bits of `self` that are not in `other`.
    pub const fn without(self, other: AttrMask) -> AttrMask {
        AttrMask(self.0 & !other.0)
    }

    /// Whether no bit is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl core::ops::BitOr for AttrMask {
    type Output = AttrMask;
    fn bitor(self, rhs: AttrMask) -> AttrMask {
        AttrMask(self.0 | rhs.0)
    }
}

impl core::fmt::Debug for AttrMask {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut rest = self.0;
        let mut first = true;
        for (bit, name) in AttrMask::NAMES {
            if self.contains(*bit) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
                rest &= !bit.0;
            }
        }
        if rest != 0 {
            if !first {
                f.write_str("|")?;
            }
            write!(f, "{rest:#x}")?;
        } else if first {
            f.write_str("NONE")?;
        }
        Ok(())
    }
}

/// The network path to the peer: what the engine needs to put around a packet
/// (the address vector of `ibv_ah_attr` plus the resolved next-hop MAC).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Path {
    /// The destination GID (an IPv4-mapped or IPv6 address).
    pub dgid: Gid,
    /// The index of the source GID in the local GID table.
    pub sgid_index: u8,
    /// The next hop's MAC address, resolved by the engine.
    pub dmac: [u8; 6],
    /// The IP traffic class (DSCP and ECN bits).
    pub traffic_class: u8,
    /// The IPv6 flow label (20 bits); also feeds the UDP source port when non-zero.
    pub flow_label: u32,
    /// The IP hop limit / TTL.
    pub hop_limit: u8,
    /// The UDP source port, or 0 for the one rxe uses: derived from the QP numbers (and
    /// the flow label) for RC and UC, fixed per QP number for UD.
    pub udp_sport: u16,
    /// An 802.1Q VLAN ID to tag frames with, if any.
    pub vlan: Option<u16>,
}

/// Capacities of a queue pair (`ibv_qp_cap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCaps {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth (0 with an SRQ).
    pub max_recv_wr: u32,
    /// Scatter/gather elements per send work request.
    pub max_send_sge: u32,
    /// Scatter/gather elements per receive work request.
    pub max_recv_sge: u32,
    /// Inline bytes per send work request.
    pub max_inline_data: u32,
}

/// Queue pair attributes (`ibv_qp_attr`, the part this transport implements).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpAttr {
    /// The state to move to (with [`AttrMask::STATE`]).
    pub qp_state: QpState,
    /// The state the caller believes the QP is in (with [`AttrMask::CUR_STATE`]).
    pub cur_qp_state: QpState,
    /// The path MTU.
    pub path_mtu: IbMtu,
    /// The Q_Key (UD).
    pub qkey: u32,
    /// The first PSN the responder expects.
    pub rq_psn: Psn,
    /// The first PSN the requester sends.
    pub sq_psn: Psn,
    /// The destination QP number (RC, UC).
    pub dest_qpn: Qpn,
    /// Remote access the responder allows (REMOTE_WRITE/READ/ATOMIC).
    pub access: Access,
    /// The primary path.
    pub path: Path,
    /// The P_Key index (only index 0, P_Key 0xffff, exists).
    pub pkey_index: u16,
    /// Raise an event when the send queue has drained in SQD.
    pub en_sqd_async_notify: bool,
    /// Outstanding READ/atomic requests this QP may have as requester.
    pub max_rd_atomic: u8,
    /// Outstanding READ/atomic requests this QP accepts as responder.
    pub max_dest_rd_atomic: u8,
    /// The RNR NAK timer code this QP sends as responder (5 bits).
    pub min_rnr_timer: u8,
    /// The port (only port 1 exists).
    pub port_num: u8,
    /// The local ACK timeout code (5 bits; 0 = infinite).
    pub timeout: u8,
    /// Transport retries (3 bits).
    pub retry_cnt: u8,
    /// RNR retries (3 bits; 7 = forever).
    pub rnr_retry: u8,
}

impl Default for QpAttr {
    fn default() -> QpAttr {
        QpAttr {
            qp_state: QpState::Reset,
            cur_qp_state: QpState::Reset,
            path_mtu: IbMtu::Mtu1024,
            qkey: 0,
            rq_psn: Psn::ZERO,
            sq_psn: Psn::ZERO,
            dest_qpn: Qpn::new(0),
            access: Access::NONE,
            path: Path::default(),
            pkey_index: 0,
            en_sqd_async_notify: false,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            min_rnr_timer: 0,
            port_num: 1,
            timeout: 0,
            retry_cnt: 0,
            rnr_retry: 0,
        }
    }
}

/// Device limits a `modify` checks attributes against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest path MTU the port supports (from the netdev MTU).
    pub max_mtu: IbMtu,
    /// The most outstanding READ/atomic requests per QP, either role (`max_qp_rd_atom`).
    pub max_rd_atomic: u8,
    /// Unacknowledged PSNs the requester may have in flight.
    pub max_unacked_psns: u32,
    /// The requester sets AckReq at least every this many packets. rxe asks on the packet
    /// that finds more than `RXE_MAX_PKT_PER_ACK` (64) packets sent since the last one
    /// that asked, the 66th, so the default does too.
    pub ack_req_every: u32,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_mtu: IbMtu::Mtu4096,
            max_rd_atomic: 16,
            max_unacked_psns: 512,
            ack_req_every: 66,
        }
    }
}

/// Why a `modify` was refused (`ibv_modify_qp` returns `EINVAL` for all of these).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModifyError {
    /// The transition is not allowed for this QP type.
    #[error("a {qp_type:?} QP cannot move from {from:?} to {to:?}")]
    InvalidTransition {
        /// The QP type.
        qp_type: QpType,
        /// The current state.
        from: QpState,
        /// The requested state.
        to: QpState,
    },
    /// A required attribute was not in the mask.
    #[error("moving a {qp_type:?} QP from {from:?} to {to:?} requires {missing:?}")]
    MissingAttributes {
        /// The QP type.
        qp_type: QpType,
        /// The current state.
        from: QpState,
        /// The requested state.
        to: QpState,
        /// The attributes that were missing.
        missing: AttrMask,
    },
    /// An attribute not allowed for this transition was in the mask.
    #[error("moving a {qp_type:?} QP from {from:?} to {to:?} does not accept {extra:?}")]
    UnexpectedAttributes {
        /// The QP type.
        qp_type: QpType,
        /// The current state.
        from: QpState,
        /// The requested state.
        to: QpState,
        /// The attributes that were not allowed.
        extra: AttrMask,
    },
    /// `cur_qp_state` did not match the actual state.
    #[error("cur_qp_state is {claimed:?} but the QP is in {actual:?}")]
    WrongCurrentState {
        /// What the caller said.
        claimed: QpState,
        /// The actual state.
        actual: QpState,
    },
    /// An attribute value is out of range.
    #[error("invalid {attr}: {why}")]
    InvalidValue {
        /// The attribute.
        attr: &'static str,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// Required and optional attributes of one transition for one QP type, or `None` when the
/// transition is not allowed. IBTA 10.3.1 (table 91 "QP State Transition Properties"), as
/// Linux encodes it in `qp_state_table`.
fn transition(qp_type: QpType, from: QpState, to: QpState) -> Option<(AttrMask, AttrMask)> {
    use AttrMask as A;
    use QpState::*;
    use QpType::*;
    let none = A::NONE;
    let rule = match (from, to) {
        (_, Reset) | (_, Err) => (none, none),
        (Reset, Init) => match qp_type {
            Ud => (A::PKEY_INDEX | A::PORT | A::QKEY, none),
            Uc | Rc => (A::PKEY_INDEX | A::PORT | A::ACCESS_FLAGS, none),
        },
        (Init, Init) => match qp_type {
            Ud => (none, A::PKEY_INDEX | A::PORT | A::QKEY),
            Uc | Rc => (none, A::PKEY_INDEX | A::PORT | A::ACCESS_FLAGS),
        },
        (Init, Rtr) => match qp_type {
            Ud => (none, A::PKEY_INDEX | A::QKEY),
            Uc => (
                A::AV | A::PATH_MTU | A::DEST_QPN | A::RQ_PSN,
                A::ALT_PATH | A::ACCESS_FLAGS | A::PKEY_INDEX,
            ),
            Rc => (
                A::AV
                    | A::PATH_MTU
                    | A::DEST_QPN
                    | A::RQ_PSN
                    | A::MAX_DEST_RD_ATOMIC
                    | A::MIN_RNR_TIMER,
                A::ALT_PATH | A::ACCESS_FLAGS | A::PKEY_INDEX,
            ),
        },
        (Rtr, Rts) => match qp_type {
            Ud => (A::SQ_PSN, A::CUR_STATE | A::QKEY),
            Uc => (
                A::SQ_PSN,
                A::CUR_STATE | A::ALT_PATH | A::ACCESS_FLAGS | A::PATH_MIG_STATE,
            ),
            Rc => (
                A::TIMEOUT | A::RETRY_CNT | A::RNR_RETRY | A::SQ_PSN | A::MAX_QP_RD_ATOMIC,
                A::CUR_STATE | A::ALT_PATH | A::ACCESS_FLAGS | A::MIN_RNR_TIMER | A::PATH_MIG_STATE,
            ),
        },
        (Rts, Rts) | (Sqd, Rts) => match qp_type {
            Ud => (none, A::CUR_STATE | A::QKEY),
            Uc => (
                none,
                A::CUR_STATE | A::ACCESS_FLAGS | A::ALT_PATH | A::PATH_MIG_STATE,
            ),
            Rc => (
                none,
                A::CUR_STATE | A::ACCESS_FLAGS | A::ALT_PATH | A::PATH_MIG_STATE | A::MIN_RNR_TIMER,
            ),
        },
        (Rts, Sqd) => (none, A::EN_SQD_ASYNC_NOTIFY),
        (Sqd, Sqd) => match qp_type {
            Ud => (none, A::PKEY_INDEX | A::QKEY),
            Uc => (
                none,
                A::AV | A::ALT_PATH | A::ACCESS_FLAGS | A::PKEY_INDEX | A::PATH_MIG_STATE,
            ),
            Rc => (
                none,
                A::PORT
                    | A::AV
                    | A::TIMEOUT
                    | A::RETRY_CNT
                    | A::RNR_RETRY
                    | A::MAX_QP_RD_ATOMIC
                    | A::MAX_DEST_RD_ATOMIC
                    | A::ALT_PATH
                    | A::ACCESS_FLAGS
                    | A::PKEY_INDEX
                    | A::MIN_RNR_TIMER
                    | A::PATH_MIG_STATE,
            ),
        },
        (Sqe, Rts) => match qp_type {
            Ud => (none, A::CUR_STATE | A::QKEY),
            Uc => (none, A::CUR_STATE | A::ACCESS_FLAGS),
            Rc => return None,
        },
        _ => return None,
    };
    Some(rule)
}

/// What a queue pair was created with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpConfig {
    /// The QP number the engine allocated.
    pub qpn: Qpn,
    /// The transport service.
    pub qp_type: QpType,
    /// The protection domain.
    pub pd: PdId,
    /// Capacities.
    pub caps: QpCaps,
    /// The shared receive queue, if any.
    pub srq: Option<SrqId>,
    /// Every send work request generates a completion (`sq_sig_all`).
    pub sq_sig_all: bool,
    /// Device limits.
    pub limits: Limits,
}

/// Why a work request could not be posted (`ibv_post_send`/`ibv_post_recv` errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PostError {
    /// The queue is full (`ENOMEM`).
    #[error("the work queue is full")]
    QueueFull,
    /// The QP is in a state that does not accept this work request (`EINVAL`).
    #[error("the QP is in {0:?} and does not accept this work request")]
    WrongState(QpState),
    /// The work request is malformed for this QP (`EINVAL`): the reason says how.
    #[error("invalid work request: {0}")]
    Invalid(&'static str),
}

/// A queue pair.
#[derive(Debug)]
pub struct QueuePair {
    pub(crate) config: QpConfig,
    pub(crate) state: QpState,
    pub(crate) attr: QpAttr,
    /// Send work requests not yet completed, oldest first.
    pub(crate) sq: VecDeque<SendEntry>,
    /// Receive work requests not yet consumed (no SRQ), oldest first.
    pub(crate) rq: VecDeque<RecvWqe>,
    pub(crate) req: RequesterState,
    pub(crate) comp: CompleterState,
    pub(crate) resp: ResponderState,
    /// Completions waiting for the engine, in the order they were generated.
    pub(crate) completions: VecDeque<Completion>,
    /// The QP has something to transmit and sits on the endpoint's active list.
    pub(crate) scheduled: bool,
}

impl QueuePair {
    /// A new queue pair in RESET.
    pub fn new(config: QpConfig) -> QueuePair {
        QueuePair {
            config,
            state: QpState::Reset,
            attr: QpAttr::default(),
            sq: VecDeque::with_capacity(config.caps.max_send_wr as usize),
            rq: VecDeque::with_capacity(config.caps.max_recv_wr as usize),
            req: RequesterState::default(),
            comp: CompleterState::default(),
            resp: ResponderState::default(),
            completions: VecDeque::new(),
            scheduled: false,
        }
    }

    /// The QP number.
    pub fn qpn(&self) -> Qpn {
        self.config.qpn
    }

    /// The transport service.
    pub fn qp_type(&self) -> QpType {
        self.config.qp_type
    }

    /// The current state.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// The creation parameters.
    pub fn config(&self) -> &QpConfig {
        &self.config
    }

    /// The current attributes (`ibv_query_qp`).
    pub fn attr(&self) -> QpAttr {
        QpAttr {
            qp_state: self.state,
            cur_qp_state: self.state,
            ..self.attr
        }
    }

    /// The path MTU in bytes. UD has no path MTU attribute: its messages may be as large
    /// as the port's active MTU (IBTA 10.2.4; rxe does the same).
    pub(crate) fn mtu(&self) -> u32 {
        let mtu = match self.config.qp_type {
            QpType::Ud => self.config.limits.max_mtu,
            _ => self.attr.path_mtu,
        };
        mtu.bytes() as u32
    }

    /// Modifies attributes and possibly the state, validating like `ibv_modify_qp`.
    /// On error nothing changes.
    pub fn modify(&mut self, attr: &QpAttr, mask: AttrMask) -> Result<(), ModifyError> {
        let qp_type = self.config.qp_type;
        let from = self.state;
        if mask.contains(AttrMask::CUR_STATE) && attr.cur_qp_state != from {
            return Err(ModifyError::WrongCurrentState {
                claimed: attr.cur_qp_state,
                actual: from,
            });
        }
        let to = if mask.contains(AttrMask::STATE) {
            attr.qp_state
        } else {
            from
        };
        let (required, optional) = transition(qp_type, from, to)
            .ok_or(ModifyError::InvalidTransition { qp_type, from, to })?;
        let given = mask.without(AttrMask::STATE);
        let missing = required.without(given);
        if !missing.is_empty() {
            return Err(ModifyError::MissingAttributes {
                qp_type,
                from,
                to,
                missing,
            });
        }
        let extra = given.without(required | optional);
        if !extra.is_empty() {
            return Err(ModifyError::UnexpectedAttributes {
                qp_type,
                from,
                to,
                extra,
            });
        }
        self.check_values(attr, given)?;

        // Apply the attributes.
        let a = &mut self.attr;
        if given.contains(AttrMask::ACCESS_FLAGS) {
            a.access = attr.access;
        }
        if given.contains(AttrMask::PKEY_INDEX) {
            a.pkey_index = attr.pkey_index;
        }
        if given.contains(AttrMask::PORT) {
            a.port_num = attr.port_num;
        }
        if given.contains(AttrMask::QKEY) {
            a.qkey = attr.qkey;
        }
        if given.contains(AttrMask::AV) {
            a.path = attr.path;
        }
        if given.contains(AttrMask::PATH_MTU) {
            a.path_mtu = attr.path_mtu;
        }
        if given.contains(AttrMask::TIMEOUT) {
            a.timeout = attr.timeout;
        }
        if given.contains(AttrMask::RETRY_CNT) {
            a.retry_cnt = attr.retry_cnt;
        }
        if given.contains(AttrMask::RNR_RETRY) {
            a.rnr_retry = attr.rnr_retry;
        }
        if given.contains(AttrMask::RQ_PSN) {
            a.rq_psn = attr.rq_psn;
        }
        if given.contains(AttrMask::MAX_QP_RD_ATOMIC) {
            a.max_rd_atomic = attr.max_rd_atomic;
        }
        if given.contains(AttrMask::MIN_RNR_TIMER) {
            a.min_rnr_timer = attr.min_rnr_timer;
        }
        if given.contains(AttrMask::SQ_PSN) {
            a.sq_psn = attr.sq_psn;
        }
        if given.contains(AttrMask::MAX_DEST_RD_ATOMIC) {
            a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
        }
        if given.contains(AttrMask::DEST_QPN) {
            a.dest_qpn = attr.dest_qpn;
        }
        if given.contains(AttrMask::EN_SQD_ASYNC_NOTIFY) {
            a.en_sqd_async_notify = attr.en_sqd_async_notify;
        }

        if given.contains(AttrMask::RQ_PSN) {
            self.resp.on_rq_psn(attr.rq_psn);
        }
        if given.contains(AttrMask::SQ_PSN) {
            self.req.on_sq_psn(attr.sq_psn);
            self.comp.on_sq_psn(attr.sq_psn);
        }
        if given.contains(AttrMask::MAX_DEST_RD_ATOMIC) {
            self.resp.on_max_dest_rd_atomic(attr.max_dest_rd_atomic);
        }
        if given.contains(AttrMask::RETRY_CNT) || given.contains(AttrMask::RNR_RETRY) {
            self.comp.reset_retry_counters(&self.attr);
        }

        if to != from {
            self.enter_state(to);
        }
        Ok(())
    }

    fn check_values(&self, attr: &QpAttr, given: AttrMask) -> Result<(), ModifyError> {
        let limits = &self.config.limits;
        let bad =
            |attr: &'static str, why: &'static str| Err(ModifyError::InvalidValue { attr, why });
        if given.contains(AttrMask::PORT) && attr.port_num != 1 {
            return bad("port_num", "the device has one port, port 1");
        }
        if given.contains(AttrMask::PKEY_INDEX) && attr.pkey_index != 0 {
            return bad(
                "pkey_index",
                "the P_Key table has one entry, index 0 (0xffff)",
            );
        }
        if given.contains(AttrMask::PATH_MTU) && attr.path_mtu.bytes() > limits.max_mtu.bytes() {
            return bad("path_mtu", "larger than the port's active MTU");
        }
        if given.contains(AttrMask::TIMEOUT) && attr.timeout > 31 {
            return bad("timeout", "it is a 5-bit code (0..=31)");
        }
        if given.contains(AttrMask::RETRY_CNT) && attr.retry_cnt > 7 {
            return bad("retry_cnt", "it is a 3-bit count (0..=7)");
        }
        if given.contains(AttrMask::RNR_RETRY) && attr.rnr_retry > 7 {
            return bad("rnr_retry", "it is a 3-bit count (0..=7, 7 = infinite)");
        }
        if given.contains(AttrMask::MIN_RNR_TIMER) && attr.min_rnr_timer > 31 {
            return bad("min_rnr_timer", "it is a 5-bit code (0..=31)");
        }
        if given.contains(AttrMask::MAX_QP_RD_ATOMIC) && attr.max_rd_atomic > limits.max_rd_atomic {
            return bad("max_rd_atomic", "larger than the device's max_qp_rd_atom");
        }
        if given.contains(AttrMask::MAX_DEST_RD_ATOMIC)
            && attr.max_dest_rd_atomic > limits.max_rd_atomic
        {
            return bad(
                "max_dest_rd_atomic",
                "larger than the device's max_qp_rd_atom",
            );
        }
        if given.contains(AttrMask::AV) && attr.path.sgid_index != 0 {
            return bad(
                "ah_attr.grh.sgid_index",
                "the GID table has one entry, index 0",
            );
        }
        Ok(())
    }

    /// Moves to `to`, with the side effects of entering it.
    pub(crate) fn enter_state(&mut self, to: QpState) {
        let from = self.state;
        self.state = to;
        match to {
            QpState::Reset => {
                // IBTA 10.3.1: RESET discards every work request without completions.
                // The QP keeps its place on the endpoint's active list (if it has one): a
                // second entry there would be a second turn per round.
                let (config, scheduled) = (self.config, self.scheduled);
                *self = QueuePair::new(config);
                self.scheduled = scheduled;
            }
            QpState::Err => self.flush_all(),
            QpState::Sqe => self.flush_send_queue(),
            QpState::Rts if from == QpState::Rtr => {
                self.comp.reset_retry_counters(&self.attr);
            }
            _ => {}
        }
    }

    /// Flushes every send work request not yet completed, in order.
    pub(crate) fn flush_send_queue(&mut self) {
        let qpn = self.config.qpn.value();
        while let Some(entry) = self.sq.pop_front() {
            let opcode = send_opcode(entry.wqe.op);
            self.completions.push_back(Completion::flushed(
                entry.wqe.wr_id,
                opcode,
                CompletionQueue::Send,
                qpn,
            ));
        }
        self.req.on_flush();
        self.comp.on_flush();
    }

    /// Flushes both queues (entering ERR).
    pub(crate) fn flush_all(&mut self) {
        self.flush_send_queue();
        let qpn = self.config.qpn.value();
        if let Some(wqe) = self.resp.take_current_wqe() {
            self.completions.push_back(Completion::flushed(
                wqe.wr_id,
                WcOpcode::Recv,
                CompletionQueue::Recv,
                qpn,
            ));
        }
        while let Some(wqe) = self.rq.pop_front() {
            self.completions.push_back(Completion::flushed(
                wqe.wr_id,
                WcOpcode::Recv,
                CompletionQueue::Recv,
                qpn,
            ));
        }
        self.resp.on_flush();
    }

    /// Posts a receive work request (`ibv_post_recv`).
    pub fn post_recv(&mut self, wqe: RecvWqe) -> Result<(), PostError> {
        if self.config.srq.is_some() {
            return Err(PostError::Invalid("the QP uses a shared receive queue"));
        }
        if self.state == QpState::Reset {
            return Err(PostError::WrongState(self.state));
        }
        if wqe.sges.as_slice().len() > self.config.caps.max_recv_sge as usize {
            return Err(PostError::Invalid(
                "more scatter/gather elements than max_recv_sge",
            ));
        }
        if self.state == QpState::Err {
            // Verbs: work requests posted in ERR complete at once with a flush error.
            self.completions.push_back(Completion::flushed(
                wqe.wr_id,
                WcOpcode::Recv,
                CompletionQueue::Recv,
                self.config.qpn.value(),
            ));
            return Ok(());
        }
        if self.rq.len() >= self.config.caps.max_recv_wr as usize {
            return Err(PostError::QueueFull);
        }
        self.rq.push_back(wqe);
        Ok(())
    }

    /// Posts a send work request (`ibv_post_send`). The QP then wants to transmit: the
    /// endpoint schedules it.
    #[inline]
    pub fn post_send(&mut self, wqe: SendWqe) -> Result<(), PostError> {
        match self.state {
            QpState::Rts | QpState::Sqd | QpState::Sqe | QpState::Err => {}
            s => return Err(PostError::WrongState(s)),
        }
        self.validate_send(&wqe)?;
        if matches!(self.state, QpState::Err | QpState::Sqe) {
            self.completions.push_back(Completion::flushed(
                wqe.wr_id,
                send_opcode(wqe.op),
                CompletionQueue::Send,
                self.config.qpn.value(),
            ));
            return Ok(());
        }
        if self.sq.len() >= self.config.caps.max_send_wr as usize {
            return Err(PostError::QueueFull);
        }
        self.sq.push_back(SendEntry::new(wqe));
        Ok(())
    }

    fn validate_send(&self, wqe: &SendWqe) -> Result<(), PostError> {
        use crate::wqe::Gather;
        let caps = &self.config.caps;
        match &wqe.data {
            Gather::Sges(list) if list.as_slice().len() > caps.max_send_sge as usize => {
                return Err(PostError::Invalid(
                    "more scatter/gather elements than max_send_sge",
                ));
            }
            Gather::Inline { len, .. } if u32::from(*len) > caps.max_inline_data => {
                return Err(PostError::Invalid("more inline data than max_inline_data"));
            }
            _ => {}
        }
        let qp_type = self.config.qp_type;
        let ok = match wqe.op {
            SendOp::Send | SendOp::SendWithImm { .. } => true,
            SendOp::SendWithInv { .. } => qp_type == QpType::Rc,
            SendOp::Write { .. } | SendOp::WriteWithImm { .. } => qp_type != QpType::Ud,
            SendOp::Read { .. } | SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. } => {
                qp_type == QpType::Rc
            }
        };
        if !ok {
            return Err(PostError::Invalid(
                "this operation is not available on this QP type",
            ));
        }
        if qp_type == QpType::Ud && wqe.ud.is_none() {
            return Err(PostError::Invalid("a UD send needs an address handle"));
        }
        if wqe.op.is_atomic() {
            let len = wqe.data.total_len();
            if len != 8 && !(len == 0 && matches!(wqe.data, crate::wqe::Gather::Sges(_))) {
                return Err(PostError::Invalid(
                    "an atomic needs exactly 8 bytes of local buffer",
                ));
            }
        }
        if wqe.op.is_read_or_atomic() && matches!(wqe.data, crate::wqe::Gather::Inline { .. }) {
            return Err(PostError::Invalid(
                "READ and atomics cannot use inline data",
            ));
        }
        if wqe.op.is_read_or_atomic() && self.attr.max_rd_atomic == 0 {
            return Err(PostError::Invalid(
                "max_rd_atomic is 0: READ and atomics cannot be sent",
            ));
        }
        Ok(())
    }

    /// The next completion, if any.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    /// The oldest PSN the requester has sent and not seen acknowledged (for diagnostics and
    /// tests: after a retry exhaustion it is the PSN that never got through).
    pub fn oldest_unacked_psn(&self) -> xroce_wire::Psn {
        self.comp.psn
    }

    /// RC request packets sent and not acknowledged yet (PSNs: a READ counts its
    /// responses), while the QP can still be acknowledged; 0 for UC and UD.
    pub fn unacked_packets(&self) -> u32 {
        if self.config.qp_type != QpType::Rc
            || !matches!(self.state, QpState::Rts | QpState::Sqd)
            || self.comp.stalled
        {
            return 0;
        }
        // After a timeout or during an RNR wait the packets sent are as good as lost (the
        // peer dropped or refused them): they are sent again, admitted afresh, after the
        // rewind. Counting them meanwhile would let a peer that stopped answering hold
        // the budget of every other QP.
        let sent = if self.req.retry || self.req.rnr_until.is_some() {
            0
        } else {
            self.req.psn.distance(self.comp.psn).max(0)
        };
        let reserved = self
            .req
            .chunk_end
            .map_or(0, |end| end.distance(self.comp.psn).max(0));
        sent.max(reserved) as u32
    }

    /// Work requests posted to the send queue and not completed yet.
    pub fn send_queue_len(&self) -> usize {
        self.sq.len()
    }

    /// Receive work requests posted and not consumed yet.
    pub fn recv_queue_len(&self) -> usize {
        self.rq.len()
    }

    /// The sizes of the queue pair's queues and its sequence numbers, for tests and fuzz
    /// targets that check nothing grows without bound and craft packets near the
    /// expected PSNs. Not a stable interface.
    #[doc(hidden)]
    pub fn diagnostics(&self) -> QpDiagnostics {
        QpDiagnostics {
            send_queue: self.sq.len(),
            recv_queue: self.rq.len(),
            responses: self.resp.responses.len(),
            response_capacity: self.resp.response_capacity(),
            resources: self.resp.resources.len(),
            completions: self.completions.len(),
            expected_psn: self.resp.psn,
            next_psn: self.req.psn,
            oldest_unacked_psn: self.comp.psn,
        }
    }
}

/// What [`QueuePair::diagnostics`] reports. Not a stable interface.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpDiagnostics {
    /// Send work requests not completed.
    pub send_queue: usize,
    /// Receive work requests not consumed.
    pub recv_queue: usize,
    /// Responses (ACKs, NAKs, READ responses, atomic acknowledgements) waiting to be sent.
    pub responses: usize,
    /// How many responses may wait before new ones are dropped (NAKs that move the QP to
    /// the error state may go one beyond).
    pub response_capacity: usize,
    /// READ and atomic responder resources kept for duplicates.
    pub resources: usize,
    /// Completions not yet collected by the endpoint.
    pub completions: usize,
    /// The PSN the responder expects next.
    pub expected_psn: Psn,
    /// The PSN the requester sends next.
    pub next_psn: Psn,
    /// The oldest PSN the requester has sent and not seen acknowledged.
    pub oldest_unacked_psn: Psn,
}

/// The completion opcode of a send work request.
pub(crate) fn send_opcode(op: SendOp) -> WcOpcode {
    match op {
        SendOp::Send | SendOp::SendWithImm { .. } | SendOp::SendWithInv { .. } => WcOpcode::Send,
        SendOp::Write { .. } | SendOp::WriteWithImm { .. } => WcOpcode::RdmaWrite,
        SendOp::Read { .. } => WcOpcode::RdmaRead,
        SendOp::CompareSwap { .. } => WcOpcode::CompSwap,
        SendOp::FetchAdd { .. } => WcOpcode::FetchAdd,
    }
}

impl QueuePair {
    /// Handles one received packet addressed to this QP.
    pub fn handle_packet<M: MemoryTable + ?Sized>(&mut self, pkt: &Packet<'_>, cx: &mut Cx<'_, M>) {
        if pkt.h.transport != self.config.qp_type {
            cx.count(Counter::rcvd_wrong_transport);
            return;
        }
        if pkt.h.kind.is_response() {
            self.handle_response(pkt, cx);
        } else {
            self.handle_request(pkt, cx);
        }
    }

    /// Emits the next packet, responses before requests. Returns whether one was emitted.
    pub fn poll_transmit<M: MemoryTable + ?Sized, E: Emit>(
        &mut self,
        cx: &mut Cx<'_, M>,
        out: &mut E,
    ) -> bool {
        self.poll_response(cx, out) || self.poll_request(cx, out)
    }

    /// Whether the QP has something to transmit (it may still be held back by its window).
    pub fn wants_transmit(&self) -> bool {
        !self.resp.responses.is_empty() || self.wants_to_send()
    }

    /// When [`QueuePair::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.comp.retrans_deadline, self.req.rnr_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs the timers that have expired at `cx.now`.
    pub fn handle_timeout<M: MemoryTable + ?Sized>(&mut self, cx: &mut Cx<'_, M>) {
        if self.comp.retrans_deadline.is_some_and(|t| t <= cx.now) {
            self.on_retransmit_timeout(cx);
        }
        if self.req.rnr_until.is_some_and(|t| t <= cx.now) {
            // The RNR wait is over: resend from the NAKed PSN (the retry flag is set).
            self.req.rnr_until = None;
        }
    }
}
