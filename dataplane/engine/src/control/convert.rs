//! Conversions between the control protocol's types ([`verbs_shm::protocol`], what
//! applications send) and the transport's ([`xroce_transport`], what pollers run), each
//! checking every value it takes from an application.

use verbs_shm::protocol::{self, AhAttr, Reply};
use xroce_transport::{Access, AttrMask, QpState, QpType, SrqAttr};
use xroce_wire::{IbMtu, Psn, Qpn};

use super::Refusal;

/// The transport's QP type for an `ibv_qp_type`.
pub(super) fn qp_type(raw: u32) -> Result<QpType, Refusal> {
    QpType::from_raw(raw).ok_or_else(|| {
        Refusal::new(
            libc::EOPNOTSUPP,
            format!("QP type {raw} is not supported (RC, UC, UD are)"),
        )
    })
}

/// The transport's capacities for those the control plane granted.
pub(super) fn transport_caps(granted: &protocol::QpCaps) -> xroce_transport::QpCaps {
    xroce_transport::QpCaps {
        max_send_wr: granted.max_send_wr,
        max_recv_wr: granted.max_recv_wr,
        max_send_sge: granted.max_send_sge,
        max_recv_sge: granted.max_recv_sge,
        max_inline_data: granted.max_inline_data,
    }
}

/// An SRQ's attributes as `ibv_modify_srq` and `ibv_query_srq` answer them.
pub(super) fn srq_attr_reply(a: SrqAttr) -> Reply {
    Reply::SrqAttr {
        max_wr: a.max_wr,
        max_sge: a.max_sge,
        limit: a.srq_limit,
    }
}

/// Converts protocol QP attributes into the transport's, checking every value a mask bit
/// names (the path is the caller's: it needs the host).
pub(super) fn qp_attr_from_protocol(
    a: &protocol::QpAttr,
    mask: AttrMask,
) -> Result<xroce_transport::QpAttr, String> {
    let state = |v: u32| QpState::from_raw(v).ok_or_else(|| format!("invalid QP state {v}"));
    let mut t = xroce_transport::QpAttr::default();
    if mask.contains(AttrMask::STATE) {
        t.qp_state = state(a.qp_state)?;
    }
    if mask.contains(AttrMask::CUR_STATE) {
        t.cur_qp_state = state(a.cur_qp_state)?;
    }
    if mask.contains(AttrMask::PATH_MTU) {
        t.path_mtu = u8::try_from(a.path_mtu)
            .ok()
            .and_then(IbMtu::from_code)
            .ok_or_else(|| format!("invalid path MTU code {}", a.path_mtu))?;
    }
    if mask.contains(AttrMask::DEST_QPN) {
        t.dest_qpn = Qpn::checked(a.dest_qp_num).ok_or_else(|| {
            format!(
                "destination QP number {:#x} is larger than 24 bits",
                a.dest_qp_num
            )
        })?;
    }
    for (bit, value, name) in [
        (AttrMask::RQ_PSN, a.rq_psn, "rq_psn"),
        (AttrMask::SQ_PSN, a.sq_psn, "sq_psn"),
    ] {
        if mask.contains(bit) && value > Psn::MASK {
            return Err(format!("{name} {value:#x} is larger than 24 bits"));
        }
    }
    t.rq_psn = Psn::new(a.rq_psn);
    t.sq_psn = Psn::new(a.sq_psn);
    t.qkey = a.qkey;
    t.access = Access::from_bits(a.qp_access_flags);
    t.pkey_index = a.pkey_index;
    t.en_sqd_async_notify = a.en_sqd_async_notify;
    t.max_rd_atomic = a.max_rd_atomic;
    t.max_dest_rd_atomic = a.max_dest_rd_atomic;
    t.min_rnr_timer = a.min_rnr_timer;
    t.port_num = a.port_num;
    t.timeout = a.timeout;
    t.retry_cnt = a.retry_cnt;
    t.rnr_retry = a.rnr_retry;
    Ok(t)
}

/// Converts transport QP attributes into the protocol's (`ibv_query_qp`).
pub(super) fn qp_attr_to_protocol(t: &xroce_transport::QpAttr) -> protocol::QpAttr {
    protocol::QpAttr {
        qp_state: t.qp_state.raw(),
        cur_qp_state: t.cur_qp_state.raw(),
        path_mtu: u32::from(t.path_mtu.code()),
        qkey: t.qkey,
        rq_psn: t.rq_psn.value(),
        sq_psn: t.sq_psn.value(),
        dest_qp_num: t.dest_qpn.value(),
        qp_access_flags: t.access.bits(),
        ah_attr: AhAttr {
            dgid: t.path.dgid.0,
            flow_label: t.path.flow_label,
            sgid_index: t.path.sgid_index,
            hop_limit: t.path.hop_limit,
            traffic_class: t.path.traffic_class,
            sl: 0,
            is_global: true,
            port_num: 1,
        },
        pkey_index: t.pkey_index,
        en_sqd_async_notify: t.en_sqd_async_notify,
        sq_draining: false,
        max_rd_atomic: t.max_rd_atomic,
        max_dest_rd_atomic: t.max_dest_rd_atomic,
        min_rnr_timer: t.min_rnr_timer,
        port_num: t.port_num,
        timeout: t.timeout,
        retry_cnt: t.retry_cnt,
        rnr_retry: t.rnr_retry,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_checked() {
        let a = protocol::QpAttr {
            qp_state: 9,
            ..Default::default()
        };
        assert!(qp_attr_from_protocol(&a, AttrMask::STATE).is_err());
        let a = protocol::QpAttr {
            dest_qp_num: 1 << 24,
            ..Default::default()
        };
        assert!(qp_attr_from_protocol(&a, AttrMask::DEST_QPN).is_err());
        let a = protocol::QpAttr {
            path_mtu: 6,
            ..Default::default()
        };
        assert!(qp_attr_from_protocol(&a, AttrMask::PATH_MTU).is_err());
        let a = protocol::QpAttr {
            path_mtu: 3,
            sq_psn: 0x123456,
            ..Default::default()
        };
        let t = qp_attr_from_protocol(&a, AttrMask::PATH_MTU | AttrMask::SQ_PSN).unwrap();
        assert_eq!((t.path_mtu, t.sq_psn), (IbMtu::Mtu1024, Psn::new(0x123456)));
    }

    #[test]
    fn unmasked_values_are_not_checked() {
        let a = protocol::QpAttr {
            qp_state: 9,
            rq_psn: 1 << 24,
            ..Default::default()
        };
        assert!(qp_attr_from_protocol(&a, AttrMask(0)).is_ok());
        let a = protocol::QpAttr {
            rq_psn: 1 << 24,
            ..Default::default()
        };
        let e = qp_attr_from_protocol(&a, AttrMask::RQ_PSN).unwrap_err();
        assert!(e.contains("rq_psn"), "{e}");
    }

    #[test]
    fn attributes_go_back_as_they_came() {
        let a = protocol::QpAttr {
            qp_state: QpState::Rts.raw(),
            path_mtu: 3,
            qkey: 0x1111_0000,
            rq_psn: 0xabc,
            sq_psn: 0x123,
            dest_qp_num: 0x42,
            qp_access_flags: 7,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic: 16,
            ..Default::default()
        };
        let every = AttrMask::STATE
            | AttrMask::PATH_MTU
            | AttrMask::RQ_PSN
            | AttrMask::SQ_PSN
            | AttrMask::DEST_QPN;
        let back = qp_attr_to_protocol(&qp_attr_from_protocol(&a, every).unwrap());
        assert_eq!(
            (
                back.qp_state,
                back.path_mtu,
                back.qkey,
                back.rq_psn,
                back.sq_psn
            ),
            (a.qp_state, a.path_mtu, a.qkey, a.rq_psn, a.sq_psn)
        );
        assert_eq!(
            (
                back.dest_qp_num,
                back.qp_access_flags,
                back.timeout,
                back.max_rd_atomic
            ),
            (0x42, 7, 14, 16)
        );
    }

    #[test]
    fn only_rc_uc_and_ud_are_taken() {
        assert_eq!(qp_type(2), Ok(QpType::Rc));
        assert_eq!(qp_type(4), Ok(QpType::Ud));
        assert_eq!(qp_type(8).unwrap_err().errno, libc::EOPNOTSUPP);
    }
}
