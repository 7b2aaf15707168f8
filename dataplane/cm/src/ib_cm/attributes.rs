//! The QP attributes a connection's state implies (`ib_cm_init_qp_attr`): what the owner
//! of the QP passes to modify-QP to follow the handshake.

use xroce_transport::{Access, AttrMask, Path, QpAttr, QpState};
use xroce_wire::{CommId, IbMtu, TransportServiceType};

use super::IbCm;
use super::connection::{CmState, Connection};
use super::params::CmError;

impl IbCm {
    /// The attributes that move a connection's QP to `state` (INIT, RTR or RTS), and which
    /// of them to set. The address vector's source GID index and next-hop MAC are the
    /// engine's to fill in (`Path::sgid_index`, `Path::dmac`).
    pub fn init_qp_attr(&self, id: CommId, state: QpState) -> Result<(QpAttr, AttrMask), CmError> {
        let c = self.conn(id)?;
        let invalid = || CmError::InvalidState {
            op: "QP attributes",
            state: c.state,
        };
        let mut attr = QpAttr {
            qp_state: state,
            ..QpAttr::default()
        };
        let rc = c.transport == TransportServiceType::RC;
        let mask = match state {
            QpState::Init => {
                if !(past_req(c) || matches!(c.state, CmState::ReqSent | CmState::MraReqRcvd)) {
                    return Err(invalid());
                }
                // `cm_init_qp_init_attr`: remote write always; read and atomics only with
                // responder resources.
                attr.access = if c.responder_resources > 0 {
                    Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC
                } else {
                    Access::REMOTE_WRITE
                };
                attr.pkey_index = c.av.pkey_index;
                attr.port_num = 1;
                AttrMask::STATE | AttrMask::ACCESS_FLAGS | AttrMask::PKEY_INDEX | AttrMask::PORT
            }
            QpState::Rtr => {
                if !past_req(c) {
                    return Err(invalid());
                }
                attr.path = path_of(c);
                attr.path_mtu = IbMtu::from_code(c.path_mtu).ok_or(CmError::PathMtu(c.path_mtu))?;
                attr.dest_qpn = c.remote_qpn;
                attr.rq_psn = c.rq_psn;
                let mut mask = AttrMask::STATE
                    | AttrMask::AV
                    | AttrMask::PATH_MTU
                    | AttrMask::DEST_QPN
                    | AttrMask::RQ_PSN;
                if rc {
                    // The RNR NAK timer is left at 0 (655 ms), as Linux leaves it.
                    attr.max_dest_rd_atomic = c.responder_resources;
                    attr.min_rnr_timer = 0;
                    mask = mask | AttrMask::MAX_DEST_RD_ATOMIC | AttrMask::MIN_RNR_TIMER;
                }
                mask
            }
            QpState::Rts => {
                if !past_req(c) {
                    return Err(invalid());
                }
                attr.sq_psn = c.sq_psn;
                let mut mask = AttrMask::STATE | AttrMask::SQ_PSN;
                if rc {
                    attr.retry_cnt = c.retry_count;
                    attr.rnr_retry = c.rnr_retry_count;
                    attr.max_rd_atomic = c.initiator_depth;
                    attr.timeout = c.av_timeout;
                    mask = mask
                        | AttrMask::RETRY_CNT
                        | AttrMask::RNR_RETRY
                        | AttrMask::MAX_QP_RD_ATOMIC
                        | AttrMask::TIMEOUT;
                }
                mask
            }
            other => return Err(CmError::QpState(other)),
        };
        Ok((attr, mask))
    }
}

/// The states in which both ends' parameters are known (RTR and RTS may be computed).
fn past_req(c: &Connection) -> bool {
    matches!(
        c.state,
        CmState::ReqRcvd
            | CmState::MraReqSent
            | CmState::RepRcvd
            | CmState::MraRepSent
            | CmState::RepSent
            | CmState::MraRepRcvd
            | CmState::Established
    )
}

/// The QP's address vector (the CM's `av.ah_attr`).
fn path_of(c: &Connection) -> Path {
    Path {
        dgid: c.path.remote_gid,
        sgid_index: 0,
        dmac: [0; 6],
        traffic_class: c.path.traffic_class,
        flow_label: c.path.flow_label,
        hop_limit: c.path.hop_limit,
        udp_sport: 0,
        vlan: None,
    }
}
