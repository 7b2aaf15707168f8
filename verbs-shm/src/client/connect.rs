//! Bringing a queue pair up: the INIT → RTR → RTS sequence every out-of-band connection
//! makes (`ibv_rc_pingpong`'s `pp_connect_ctx`), and the UD equivalent, written once.

use super::Error;
use super::qp::Qp;
use crate::protocol::{AhAttr, QpAttr};
use xroce_transport::{Access, AttrMask, QpState, QpType};

/// How to connect an RC or UC queue pair to its peer. [`Connection::new`] takes
/// `ibv_rc_pingpong`'s choices for everything the exchange does not decide, with room for
/// 16 READs and atomics in flight each way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Connection {
    /// The peer's address vector.
    pub av: AhAttr,
    /// The peer's QP number.
    pub dest_qpn: u32,
    /// Our first PSN (the requester's).
    pub sq_psn: u32,
    /// The peer's first PSN (what our responder expects).
    pub rq_psn: u32,
    /// `ibv_mtu` code of the path (3: 1024 bytes).
    pub path_mtu: u32,
    /// Remote access our responder allows.
    pub access: Access,
    /// READ/atomic requests in flight, each way (RC).
    pub rd_atomic: u8,
    /// RNR NAK timer code (RC).
    pub min_rnr_timer: u8,
    /// Local ACK timeout code (RC).
    pub timeout: u8,
    /// Transport retries (RC).
    pub retry_cnt: u8,
    /// RNR retries (RC; 7: for ever).
    pub rnr_retry: u8,
}

impl Connection {
    /// A connection to QP `dest_qpn` at `av`: our PSNs start at `sq_psn`, the peer's at
    /// `rq_psn`; path MTU 1024, every remote access, 16 READs/atomics in flight, RNR
    /// timer 12, timeout 14, retry 7, RNR retry 7.
    pub fn new(av: AhAttr, dest_qpn: u32, sq_psn: u32, rq_psn: u32) -> Connection {
        Connection {
            av,
            dest_qpn,
            sq_psn,
            rq_psn,
            path_mtu: 3,
            access: Access::ALL,
            rd_atomic: 16,
            min_rnr_timer: 12,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
        }
    }
}

/// A step of bringing a QP up failed.
#[derive(Debug, thiserror::Error)]
#[error("modifying the QP to {state}: {source}")]
pub struct ConnectError {
    /// The state the failed modify aimed at: `INIT`, `RTR` or `RTS`.
    pub state: &'static str,
    /// Why.
    #[source]
    pub source: Error,
}

fn step(state: &'static str) -> impl FnOnce(Error) -> ConnectError {
    move |source| ConnectError { state, source }
}

impl Qp {
    /// Moves a new (RESET) RC or UC QP through INIT and RTR to RTS, connected as `c` says.
    pub fn connect(&self, c: &Connection) -> Result<(), ConnectError> {
        let rc = self.qp_type() == QpType::Rc;
        let mut a = QpAttr {
            qp_state: QpState::Init.raw(),
            port_num: 1,
            qp_access_flags: c.access.bits(),
            ..QpAttr::default()
        };
        self.modify(
            &a,
            AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS,
        )
        .map_err(step("INIT"))?;
        a.qp_state = QpState::Rtr.raw();
        a.path_mtu = c.path_mtu;
        a.dest_qp_num = c.dest_qpn;
        a.rq_psn = c.rq_psn;
        a.ah_attr = c.av;
        a.max_dest_rd_atomic = c.rd_atomic;
        a.min_rnr_timer = c.min_rnr_timer;
        let mut m = AttrMask::STATE
            | AttrMask::AV
            | AttrMask::PATH_MTU
            | AttrMask::DEST_QPN
            | AttrMask::RQ_PSN;
        if rc {
            m |= AttrMask::MAX_DEST_RD_ATOMIC | AttrMask::MIN_RNR_TIMER;
        }
        self.modify(&a, m).map_err(step("RTR"))?;
        a.qp_state = QpState::Rts.raw();
        a.sq_psn = c.sq_psn;
        a.timeout = c.timeout;
        a.retry_cnt = c.retry_cnt;
        a.rnr_retry = c.rnr_retry;
        a.max_rd_atomic = c.rd_atomic;
        let mut m = AttrMask::STATE | AttrMask::SQ_PSN;
        if rc {
            m |= AttrMask::TIMEOUT
                | AttrMask::RETRY_CNT
                | AttrMask::RNR_RETRY
                | AttrMask::MAX_QP_RD_ATOMIC;
        }
        self.modify(&a, m).map_err(step("RTS"))
    }

    /// Moves a new (RESET) UD QP through INIT and RTR to RTS with Q_Key `qkey`, its PSNs
    /// starting at `sq_psn`.
    pub fn ud_ready(&self, qkey: u32, sq_psn: u32) -> Result<(), ConnectError> {
        let mut a = QpAttr {
            qp_state: QpState::Init.raw(),
            port_num: 1,
            qkey,
            ..QpAttr::default()
        };
        self.modify(
            &a,
            AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::QKEY,
        )
        .map_err(step("INIT"))?;
        a.qp_state = QpState::Rtr.raw();
        self.modify(&a, AttrMask::STATE).map_err(step("RTR"))?;
        a.qp_state = QpState::Rts.raw();
        a.sq_psn = sq_psn;
        self.modify(&a, AttrMask::STATE | AttrMask::SQ_PSN)
            .map_err(step("RTS"))
    }
}
