//! `modify_qp`: the state table of IBTA 10.3.1 (table 91, "QP State Transition
//! Properties") as Linux encodes it in `qp_state_table`, the checks of each value against
//! the device's limits, and applying what was allowed.

use core::time::Duration;

use xroce_wire::IbMtu;

use super::{AttrMask, QpAttr, QpState, QpType};

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
    /// The earliest a retransmission timer derived from measured round trips may expire
    /// (the QP's own `timeout` is the latest): round trips measured on a loaded host vary,
    /// and an early expiry resends the whole window.
    pub min_retransmit_timeout: Duration,
    /// Selective repeat: the most request packets a responder holds ahead of a gap (see
    /// [`crate::selective`]). A requester takes its peer's store to be as large as its
    /// own and keeps the PSNs it has unacknowledged within it while the peer holds
    /// packets, so this, not `max_unacked_psns`, bounds how far it may send beyond a
    /// hole; four times the default window, so that a hole open for a few round trips of
    /// a window does not stop the sender.
    pub max_held_packets: u32,
    /// Selective repeat: the most payload bytes a responder holds ahead of a gap (with
    /// `max_held_packets`, the bound on a requester's PSNs beyond a hole: this over the
    /// path MTU).
    pub max_held_bytes: u32,
    /// Selective repeat: the most payload bytes all the queue pairs of one endpoint hold
    /// ahead of their gaps together (a thousand QPs on a lossy path, each within its own
    /// bound, would hold gigabytes otherwise).
    pub max_endpoint_held_bytes: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_mtu: IbMtu::Mtu4096,
            max_rd_atomic: 16,
            max_unacked_psns: 512,
            ack_req_every: 66,
            min_retransmit_timeout: Duration::from_millis(1),
            max_held_packets: 2048,
            max_held_bytes: 4 << 20,
            max_endpoint_held_bytes: 64 << 20,
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
