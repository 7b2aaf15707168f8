//! Queue pair attributes, states and transitions: what `ibv_modify_qp` may set and when,
//! validated as IBTA 10.3.1 (table 91, "QP State Transition Properties") says and Linux
//! encodes it in `qp_state_table`.
//!
//! This is the bottom layer of the transport: plain values and pure functions that depend
//! on nothing else in the crate. [`validate_modify`] decides whether a `modify` is allowed
//! and which state it leads to; the queue pair then applies it ([`QpAttr::apply`]) and lets
//! each role react. The access flags ([`Access`]) live here because they are attributes of
//! queue pairs and memory regions alike.
//!
//! These are also the words of verbs for the whole of xroce: the shared-memory contract,
//! the client library and the daemon use these types (with `raw`/`from_raw` and
//! `bits`/`from_bits` where a value crosses as a plain integer) instead of their own.
//!
//! This module holds the vocabulary: QP types and states, attribute masks, the path,
//! capacities, attributes, access flags. [`modify`] holds the state table and the checks
//! of `modify_qp`.

use core::fmt;
use core::ops::{BitOr, BitOrAssign};

use xroce_wire::{Gid, IbMtu, Psn, Qpn};

pub mod modify;

pub use modify::{Limits, ModifyError, Transition, validate_modify};

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

impl QpType {
    /// The `ibv_qp_type` value.
    pub const fn raw(self) -> u32 {
        match self {
            QpType::Rc => 2,
            QpType::Uc => 3,
            QpType::Ud => 4,
        }
    }

    /// The QP type for an `ibv_qp_type` value, if the transport has it.
    pub const fn from_raw(raw: u32) -> Option<QpType> {
        match raw {
            2 => Some(QpType::Rc),
            3 => Some(QpType::Uc),
            4 => Some(QpType::Ud),
            _ => None,
        }
    }

    /// The service's short name: `RC`, `UC` or `UD`.
    pub const fn name(self) -> &'static str {
        match self {
            QpType::Rc => "RC",
            QpType::Uc => "UC",
            QpType::Ud => "UD",
        }
    }
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
    /// The verbs value.
    pub const fn raw(self) -> u32 {
        self as u32
    }

    /// The state as `ibv_qp_state` names it: `RESET`, `INIT`, `RTR`, `RTS`, `SQD`, `SQE`,
    /// `ERR`.
    pub const fn name(self) -> &'static str {
        match self {
            QpState::Reset => "RESET",
            QpState::Init => "INIT",
            QpState::Rtr => "RTR",
            QpState::Rts => "RTS",
            QpState::Sqd => "SQD",
            QpState::Sqe => "SQE",
            QpState::Err => "ERR",
        }
    }

    /// The state for a verbs value.
    pub const fn from_raw(raw: u32) -> Option<QpState> {
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

impl BitOrAssign for AttrMask {
    fn bitor_assign(&mut self, rhs: AttrMask) {
        self.0 |= rhs.0;
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

#[cfg(test)]
mod tests;
