//! `rdma_init_qp_attr`: the attributes of each modify-QP step of an id's QP, which the
//! daemon hands to the transport (or to the drop-in librdmacm for `ibv_modify_qp`).

use xroce_transport::{Access, AttrMask, QpAttr, QpState, QpType};

use super::error::Error;
use super::id::IdHandle;
use super::{RDMA_UDP_QKEY, RdmaCm};

impl RdmaCm {
    /// The attributes that move an id's QP to `state`, and which of them to set.
    ///
    /// - Before the CM connection exists (and always for UD ids): INIT with P_Key index 0
    ///   and port 1, plus access flags 0 for RC and UC or the Q_Key for UD
    ///   (`cma_ib_init_qp_attr`; a UD id takes `RDMA_UDP_QKEY` here unless it has one).
    ///   librdmacm then moves UD QPs to RTR and RTS itself (SQ PSN 0).
    /// - Once connecting: the CM's INIT (remote write, plus read and atomics with
    ///   responder resources), RTR (address vector, path MTU, the peer's QPN, our
    ///   starting PSN as RQ PSN, max dest RD atomic = our responder resources, RNR timer
    ///   0) and RTS (the peer's starting PSN, retry counts, max RD atomic = our initiator
    ///   depth, the path's ACK timeout, or the ACK_TIMEOUT option).
    ///
    /// An RC id asked for RTR or RTS before it is connecting is refused: there is no peer
    /// to describe yet. (Linux hands back INIT-type attributes that a modify-QP to RTR
    /// would refuse.)
    pub fn init_qp_attr(
        &mut self,
        id: IdHandle,
        state: QpState,
    ) -> Result<(QpAttr, AttrMask), Error> {
        let i = self.get(id)?;
        let (mut attr, mask) = match i.cm {
            Some(cm) if i.qp_type != QpType::Ud => self.ib.init_qp_attr(cm, state)?,
            _ => {
                if i.qp_type != QpType::Ud && state != QpState::Init {
                    return Err(Error::InvalidState {
                        op: "QP attributes for RTR or RTS",
                        state: i.state,
                    });
                }
                let mut attr = QpAttr {
                    qp_state: state,
                    pkey_index: 0,
                    port_num: 1,
                    ..QpAttr::default()
                };
                let base = AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT;
                let mask = if i.qp_type == QpType::Ud {
                    let qkey = i.qkey.unwrap_or(RDMA_UDP_QKEY);
                    attr.qkey = qkey;
                    self.get_mut(id)?.qkey = Some(qkey);
                    base | AttrMask::QKEY
                } else {
                    attr.access = Access::NONE;
                    base | AttrMask::ACCESS_FLAGS
                };
                (attr, mask)
            }
        };
        let i = self.get(id)?;
        if state == QpState::Rtr {
            attr.rq_psn = i.seq_num;
        }
        if mask.contains(AttrMask::TIMEOUT)
            && let Some(timeout) = i.ack_timeout
        {
            attr.timeout = timeout;
        }
        Ok((attr, mask))
    }
}
