//! Queue pair attributes, states and transitions: what `ibv_modify_qp` may set and when,
//! validated as IBTA 10.3.1 (table 91, "QP State Transition Properties") says and Linux
//! encodes it in `qp_state_table`.
//!
//! This is the bottom layer of the transport: plain values and pure functions that depend
//! on nothing else in the crate. [`validate_modify`] decides whether a `modify` is allowed
//! and which state it leads to; the queue pair then applies it ([`QpAttr::apply`]) and lets
//! each role react. The access flags ([`Access`]) live here because they are attributes of
//! queue pairs and memory regions alike.

use core::fmt;
use core::ops::BitOr;

use xroce_wire::{Gid, IbMtu, Psn, Qpn};

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

impl BitOr for AttrMask {
    type Output = AttrMask;
    fn bitor(self, rhs: AttrMask) -> AttrMask {
        AttrMask(self.0 | rhs.0)
    }
}

impl fmt::Debug for AttrMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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

/// Access rights of a memory region or a queue pair, with the numeric values of
/// `ibv_access_flags` so that they pass through the verbs layers unchanged.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Access(u32);

impl Access {
    /// No rights beyond local read, which every region has.
    pub const NONE: Access = Access(0);
    /// `IBV_ACCESS_LOCAL_WRITE`: receive buffers and READ/atomic results may land here.
    pub const LOCAL_WRITE: Access = Access(1);
    /// `IBV_ACCESS_REMOTE_WRITE`: the peer may RDMA WRITE here.
    pub const REMOTE_WRITE: Access = Access(1 << 1);
    /// `IBV_ACCESS_REMOTE_READ`: the peer may RDMA READ from here.
    pub const REMOTE_READ: Access = Access(1 << 2);
    /// `IBV_ACCESS_REMOTE_ATOMIC`: the peer may perform atomics here.
    pub const REMOTE_ATOMIC: Access = Access(1 << 3);
    /// All the rights above.
    pub const ALL: Access = Access(0xf);

    /// Access rights from the raw `ibv_access_flags` bits; bits the transport does not
    /// interpret are kept.
    pub const fn from_bits(bits: u32) -> Access {
        Access(bits)
    }

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every right in `other` is also in `self`.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(Access, &str); 4] = [
            (Access::LOCAL_WRITE, "LOCAL_WRITE"),
            (Access::REMOTE_WRITE, "REMOTE_WRITE"),
            (Access::REMOTE_READ, "REMOTE_READ"),
            (Access::REMOTE_ATOMIC, "REMOTE_ATOMIC"),
        ];
        let mut first = true;
        for (flag, name) in NAMES {
            if self.contains(flag) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("NONE")?;
        }
        Ok(())
    }
}

/// A `modify` that [`validate_modify`] allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    /// The state the queue pair is in.
    pub from: QpState,
    /// The state it moves to (`from` when the state does not change).
    pub to: QpState,
    /// The attributes the `modify` sets (the mask without `STATE`).
    pub given: AttrMask,
}

/// Validates a `modify` of a `qp_type` queue pair in state `current` the way
/// `ibv_modify_qp` does: the transition must exist for the QP type, every required
/// attribute must be in `mask` and no attribute outside the required and optional ones,
/// and every value given must be in range for the device (`limits`) and its port, whose
/// GID table has `gids` entries.
pub fn validate_modify(
    qp_type: QpType,
    current: QpState,
    attr: &QpAttr,
    mask: AttrMask,
    limits: &Limits,
    gids: usize,
) -> Result<Transition, ModifyError> {
    let from = current;
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
    check_values(attr, given, limits, gids)?;
    Ok(Transition { from, to, given })
}

/// Checks the values of the attributes in `given` against the device and its port's
/// `gids` GIDs.
fn check_values(
    attr: &QpAttr,
    given: AttrMask,
    limits: &Limits,
    gids: usize,
) -> Result<(), ModifyError> {
    let bad = |attr: &'static str, why: &'static str| Err(ModifyError::InvalidValue { attr, why });
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
    // Any entry of the port's GID table: IPv4-mapped, global IPv6 or link-local IPv6.
    if given.contains(AttrMask::AV) && usize::from(attr.path.sgid_index) >= gids {
        return bad(
            "ah_attr.grh.sgid_index",
            "beyond the port's GID table (ibv_query_gid lists its entries)",
        );
    }
    Ok(())
}

impl QpAttr {
    /// Takes the attributes in `given` from `new` (a validated `modify`).
    pub fn apply(&mut self, new: &QpAttr, given: AttrMask) {
        if given.contains(AttrMask::ACCESS_FLAGS) {
            self.access = new.access;
        }
        if given.contains(AttrMask::PKEY_INDEX) {
            self.pkey_index = new.pkey_index;
        }
        if given.contains(AttrMask::PORT) {
            self.port_num = new.port_num;
        }
        if given.contains(AttrMask::QKEY) {
            self.qkey = new.qkey;
        }
        if given.contains(AttrMask::AV) {
            self.path = new.path;
        }
        if given.contains(AttrMask::PATH_MTU) {
            self.path_mtu = new.path_mtu;
        }
        if given.contains(AttrMask::TIMEOUT) {
            self.timeout = new.timeout;
        }
        if given.contains(AttrMask::RETRY_CNT) {
            self.retry_cnt = new.retry_cnt;
        }
        if given.contains(AttrMask::RNR_RETRY) {
            self.rnr_retry = new.rnr_retry;
        }
        if given.contains(AttrMask::RQ_PSN) {
            self.rq_psn = new.rq_psn;
        }
        if given.contains(AttrMask::MAX_QP_RD_ATOMIC) {
            self.max_rd_atomic = new.max_rd_atomic;
        }
        if given.contains(AttrMask::MIN_RNR_TIMER) {
            self.min_rnr_timer = new.min_rnr_timer;
        }
        if given.contains(AttrMask::SQ_PSN) {
            self.sq_psn = new.sq_psn;
        }
        if given.contains(AttrMask::MAX_DEST_RD_ATOMIC) {
            self.max_dest_rd_atomic = new.max_dest_rd_atomic;
        }
        if given.contains(AttrMask::DEST_QPN) {
            self.dest_qpn = new.dest_qpn;
        }
        if given.contains(AttrMask::EN_SQD_ASYNC_NOTIFY) {
            self.en_sqd_async_notify = new.en_sqd_async_notify;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RC_INIT: AttrMask = AttrMask(
        AttrMask::STATE.0 | AttrMask::PKEY_INDEX.0 | AttrMask::PORT.0 | AttrMask::ACCESS_FLAGS.0,
    );
    const RC_RTR: AttrMask = AttrMask(
        AttrMask::STATE.0
            | AttrMask::AV.0
            | AttrMask::PATH_MTU.0
            | AttrMask::DEST_QPN.0
            | AttrMask::RQ_PSN.0
            | AttrMask::MAX_DEST_RD_ATOMIC.0
            | AttrMask::MIN_RNR_TIMER.0,
    );
    const RC_RTS: AttrMask = AttrMask(
        AttrMask::STATE.0
            | AttrMask::TIMEOUT.0
            | AttrMask::RETRY_CNT.0
            | AttrMask::RNR_RETRY.0
            | AttrMask::SQ_PSN.0
            | AttrMask::MAX_QP_RD_ATOMIC.0,
    );

    fn to(state: QpState) -> QpAttr {
        QpAttr {
            qp_state: state,
            ..QpAttr::default()
        }
    }

    fn rc(from: QpState, attr: &QpAttr, mask: AttrMask) -> Result<Transition, ModifyError> {
        validate_modify(QpType::Rc, from, attr, mask, &Limits::default(), 1)
    }

    #[test]
    fn the_verbs_bring_up_of_an_rc_qp_is_allowed() {
        let t = rc(QpState::Reset, &to(QpState::Init), RC_INIT).unwrap();
        assert_eq!((t.from, t.to), (QpState::Reset, QpState::Init));
        assert_eq!(t.given, RC_INIT.without(AttrMask::STATE));
        assert_eq!(
            rc(QpState::Init, &to(QpState::Rtr), RC_RTR).unwrap().to,
            QpState::Rtr
        );
        assert_eq!(
            rc(QpState::Rtr, &to(QpState::Rts), RC_RTS).unwrap().to,
            QpState::Rts
        );
        // Without STATE the QP stays where it is, here with an optional attribute.
        let t = rc(QpState::Rts, &to(QpState::Reset), AttrMask::MIN_RNR_TIMER).unwrap();
        assert_eq!((t.from, t.to), (QpState::Rts, QpState::Rts));
    }

    #[test]
    fn required_and_unexpected_attributes_are_named() {
        let without_psn = RC_RTR.without(AttrMask::RQ_PSN);
        assert_eq!(
            rc(QpState::Init, &to(QpState::Rtr), without_psn),
            Err(ModifyError::MissingAttributes {
                qp_type: QpType::Rc,
                from: QpState::Init,
                to: QpState::Rtr,
                missing: AttrMask::RQ_PSN,
            })
        );
        assert_eq!(
            rc(
                QpState::Reset,
                &to(QpState::Init),
                RC_INIT | AttrMask::SQ_PSN
            ),
            Err(ModifyError::UnexpectedAttributes {
                qp_type: QpType::Rc,
                from: QpState::Reset,
                to: QpState::Init,
                extra: AttrMask::SQ_PSN,
            })
        );
        // UD needs a Q_Key where RC needs access flags.
        let ud = validate_modify(
            QpType::Ud,
            QpState::Reset,
            &to(QpState::Init),
            RC_INIT,
            &Limits::default(),
            1,
        );
        assert!(
            matches!(ud, Err(ModifyError::MissingAttributes { missing, .. }) if missing == AttrMask::QKEY)
        );
    }

    #[test]
    fn transitions_outside_the_table_are_refused() {
        assert_eq!(
            rc(QpState::Reset, &to(QpState::Rts), RC_RTS),
            Err(ModifyError::InvalidTransition {
                qp_type: QpType::Rc,
                from: QpState::Reset,
                to: QpState::Rts,
            })
        );
        // SQE → RTS exists for UC and UD only.
        assert!(matches!(
            rc(QpState::Sqe, &to(QpState::Rts), AttrMask::STATE),
            Err(ModifyError::InvalidTransition { .. })
        ));
        let uc = validate_modify(
            QpType::Uc,
            QpState::Sqe,
            &to(QpState::Rts),
            AttrMask::STATE,
            &Limits::default(),
            1,
        );
        assert_eq!(uc.map(|t| t.to), Ok(QpState::Rts));
        // Every state may go to RESET or ERR, with no attribute.
        for from in [QpState::Init, QpState::Rts, QpState::Err] {
            assert!(rc(from, &to(QpState::Reset), AttrMask::STATE).is_ok());
            assert!(rc(from, &to(QpState::Err), AttrMask::STATE).is_ok());
            assert!(rc(from, &to(QpState::Err), AttrMask::STATE | AttrMask::QKEY).is_err());
        }
    }

    #[test]
    fn values_and_the_current_state_are_checked() {
        let mut attr = to(QpState::Rts);
        attr.cur_qp_state = QpState::Init;
        assert_eq!(
            rc(QpState::Rtr, &attr, RC_RTS | AttrMask::CUR_STATE),
            Err(ModifyError::WrongCurrentState {
                claimed: QpState::Init,
                actual: QpState::Rtr,
            })
        );
        attr.cur_qp_state = QpState::Rtr;
        assert!(rc(QpState::Rtr, &attr, RC_RTS | AttrMask::CUR_STATE).is_ok());
        attr.timeout = 32;
        assert!(matches!(
            rc(QpState::Rtr, &attr, RC_RTS),
            Err(ModifyError::InvalidValue {
                attr: "timeout",
                ..
            })
        ));
        let mut attr = to(QpState::Rtr);
        attr.path_mtu = IbMtu::Mtu4096;
        let limits = Limits {
            max_mtu: IbMtu::Mtu1024,
            ..Limits::default()
        };
        assert!(matches!(
            validate_modify(QpType::Rc, QpState::Init, &attr, RC_RTR, &limits, 1),
            Err(ModifyError::InvalidValue {
                attr: "path_mtu",
                ..
            })
        ));
    }

    #[test]
    fn the_source_gid_may_be_any_entry_of_the_ports_table() {
        let mut attr = to(QpState::Rtr);
        let limits = Limits::default();
        let rtr = |attr: &QpAttr, gids| {
            validate_modify(QpType::Rc, QpState::Init, attr, RC_RTR, &limits, gids)
        };
        // IPv4-mapped, global IPv6 and link-local IPv6: indices 0, 1 and 2.
        for index in 0..3 {
            attr.path.sgid_index = index;
            assert_eq!(rtr(&attr, 3).map(|t| t.to), Ok(QpState::Rtr), "{index}");
        }
        attr.path.sgid_index = 3;
        assert!(matches!(
            rtr(&attr, 3),
            Err(ModifyError::InvalidValue {
                attr: "ah_attr.grh.sgid_index",
                ..
            })
        ));
        // A port without addresses has no GID to send from.
        attr.path.sgid_index = 0;
        assert!(rtr(&attr, 0).is_err());
        // Without an address vector the index is not looked at.
        attr.path.sgid_index = 9;
        let rts = validate_modify(
            QpType::Rc,
            QpState::Rts,
            &attr,
            AttrMask::MIN_RNR_TIMER,
            &limits,
            1,
        );
        assert_eq!(rts.map(|t| t.to), Ok(QpState::Rts));
    }

    #[test]
    fn apply_takes_only_the_attributes_given() {
        let mut attr = QpAttr::default();
        let new = QpAttr {
            qkey: 7,
            timeout: 14,
            sq_psn: Psn::new(5),
            ..QpAttr::default()
        };
        attr.apply(&new, AttrMask::TIMEOUT | AttrMask::SQ_PSN);
        assert_eq!((attr.qkey, attr.timeout, attr.sq_psn), (0, 14, Psn::new(5)));
    }
}
