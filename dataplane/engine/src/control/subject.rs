//! What a request is about, in the words of the verb the application called: the log line
//! of a refusal names the application, this subject and the reason.

use verbs_shm::protocol::Request;
use xroce_transport::{AttrMask, QpState, QpType};
use xroce_wire::{Gid, Qpn};

/// The verb `request` stands for and the object it concerns, such as
/// `ibv_modify_qp of QP 0x61533b to RTR`. `qpn` is the QP number of the queue pair the
/// request names, when the application owns one by that handle.
pub(super) fn subject(request: &Request, qpn: Option<Qpn>) -> String {
    let qp = |handle: u32| match qpn {
        Some(qpn) => format!("QP {:#x}", qpn.value()),
        None => format!("QP handle {handle}"),
    };
    match request {
        Request::Hello { version } => format!("hello (contract version {version})"),
        Request::QueryDevice => "ibv_query_device".into(),
        Request::QueryPort => "ibv_query_port".into(),
        Request::AllocPd => "ibv_alloc_pd".into(),
        Request::DeallocPd { pd } => format!("ibv_dealloc_pd of PD {pd}"),
        Request::RegMr { pd, length, .. } | Request::RegMrPieces { pd, length, .. } => {
            format!("ibv_reg_mr of {length} bytes in PD {pd}")
        }
        Request::ReregMr { mr, length, .. } => {
            format!("ibv_rereg_mr of MR {mr} ({length} bytes)")
        }
        Request::DeregMr { mr } => format!("ibv_dereg_mr of MR {mr}"),
        Request::CreateCq { entries, .. } => format!("ibv_create_cq of {entries} entries"),
        Request::DestroyCq { cq } => format!("ibv_destroy_cq of CQ {cq}"),
        Request::CreateSrq { pd, max_wr, .. } => {
            format!("ibv_create_srq of {max_wr} work requests in PD {pd}")
        }
        Request::ModifySrq { srq, limit } => format!("ibv_modify_srq of SRQ {srq} (limit {limit})"),
        Request::QuerySrq { srq } => format!("ibv_query_srq of SRQ {srq}"),
        Request::DestroySrq { srq } => format!("ibv_destroy_srq of SRQ {srq}"),
        Request::CreateQp { pd, qp_type, .. } => {
            let kind = match QpType::from_raw(*qp_type) {
                Some(QpType::Rc) => "an RC QP",
                Some(QpType::Uc) => "a UC QP",
                Some(QpType::Ud) => "a UD QP",
                None => "a QP of unknown type",
            };
            format!("ibv_create_qp of {kind} in PD {pd}")
        }
        Request::ModifyQp {
            qp: handle,
            attr,
            mask,
        } => {
            let to = if AttrMask(*mask).contains(AttrMask::STATE) {
                let state =
                    QpState::from_raw(attr.qp_state).map_or("an unknown state", QpState::name);
                format!(" to {state}")
            } else {
                String::new()
            };
            format!("ibv_modify_qp of {}{to}", qp(*handle))
        }
        Request::QueryQp { qp: handle } => format!("ibv_query_qp of {}", qp(*handle)),
        Request::DestroyQp { qp: handle } => format!("ibv_destroy_qp of {}", qp(*handle)),
        Request::CreateAh { pd, attr } => format!(
            "ibv_create_ah to {} from GID {} in PD {pd}",
            Gid(attr.dgid).to_ip(),
            attr.sgid_index
        ),
        Request::DestroyAh { ah } => format!("ibv_destroy_ah of AH {ah}"),
        Request::AttachMcast { qp: handle, gid } => format!(
            "ibv_attach_mcast of {} to {}",
            qp(*handle),
            Gid(*gid).to_ip()
        ),
        Request::DetachMcast { qp: handle, gid } => format!(
            "ibv_detach_mcast of {} from {}",
            qp(*handle),
            Gid(*gid).to_ip()
        ),
        Request::Stats | Request::QpStats | Request::QpStatsPage { .. } => "statistics".into(),
        Request::Cm(request) => {
            // The variant's name: `Listen`, `ResolveAddr`, …
            let text = format!("{request:?}");
            let name = text
                .split(|c: char| !c.is_alphanumeric())
                .next()
                .unwrap_or_default();
            format!("rdma_cm {name}")
        }
    }
}

#[cfg(test)]
mod tests {
    use verbs_shm::protocol::{AhAttr, QpAttr};

    use super::*;

    #[test]
    fn a_modify_names_its_qp_number_and_target_state() {
        let modify = Request::ModifyQp {
            qp: 3,
            attr: QpAttr {
                qp_state: 2,
                ..QpAttr::default()
            },
            mask: AttrMask::STATE.0 | 0x80,
        };
        assert_eq!(
            subject(&modify, Some(Qpn::new(0x61_533b))),
            "ibv_modify_qp of QP 0x61533b to RTR"
        );
        assert_eq!(
            subject(&modify, None),
            "ibv_modify_qp of QP handle 3 to RTR"
        );
        let no_state = Request::ModifyQp {
            qp: 3,
            attr: QpAttr::default(),
            mask: 0x80,
        };
        assert_eq!(subject(&no_state, None), "ibv_modify_qp of QP handle 3");
    }

    #[test]
    fn creations_and_registrations_say_what_was_asked() {
        let ah = Request::CreateAh {
            pd: 4,
            attr: AhAttr {
                dgid: Gid::from_ip("fd00:77::2".parse().expect("ip")).0,
                sgid_index: 1,
                ..AhAttr::default()
            },
        };
        assert_eq!(
            subject(&ah, None),
            "ibv_create_ah to fd00:77::2 from GID 1 in PD 4"
        );
        let mr = Request::RegMr {
            pd: 1,
            iova: 0,
            length: 4096,
            access: 0,
            offset: 0,
        };
        assert_eq!(subject(&mr, None), "ibv_reg_mr of 4096 bytes in PD 1");
        assert_eq!(subject(&Request::AllocPd, None), "ibv_alloc_pd");
    }
}
