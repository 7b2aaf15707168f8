//! Work requests copied out of an application's ring, validated, and converted into the
//! transport's own types. Nothing here trusts a field: an application writing its ring by
//! hand can put anything in a slot, and a slot that fails a check is refused (see
//! [`super::intake`]) instead of reaching the transport.

use std::collections::HashMap;

use verbs_shm::contract;
use xroce_transport::{Gather, Path, PdId, SendFlags, SgeList, UdDest, WcOpcode};

/// What a QP's send work requests are checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SendBounds {
    /// The QP's protection domain (an address handle must be in it).
    pub(super) pd: PdId,
    /// Its `max_send_sge`.
    pub(super) max_sge: u32,
    /// Its `max_inline_data`.
    pub(super) max_inline: u32,
}

/// The address handles of a poller's applications: protection domain and path.
pub(super) type AddressHandles = HashMap<u32, (PdId, Path)>;

/// Validates and converts a send work request copied out of shared memory.
pub(super) fn convert_send(
    w: &contract::SendWqe,
    bounds: SendBounds,
    ahs: &AddressHandles,
) -> Result<xroce_transport::SendWqe, &'static str> {
    let op = w.op().ok_or("unsupported opcode")?;
    let known = SendFlags::FENCE | SendFlags::SIGNALED | SendFlags::SOLICITED | SendFlags::INLINE;
    let flags = SendFlags(w.send_flags & known.0);
    let data = if w.is_inline() {
        let len = w.num_sge as usize;
        if len > contract::MAX_INLINE || len as u32 > bounds.max_inline {
            return Err("inline data longer than max_inline_data");
        }
        Gather::inline(&w.data[..len]).map_err(|_| "inline data too long")?
    } else {
        if w.num_sge > bounds.max_sge || w.num_sge as usize > contract::MAX_SGE {
            return Err("more scatter/gather elements than max_send_sge");
        }
        Gather::Sges(sges((0..w.num_sge as usize).map(|i| w.sge(i)))?)
    };
    let ud = if w.ah != 0 || w.remote_qpn != 0 {
        match ahs.get(&w.ah) {
            Some(&(pd, path)) if pd == bounds.pd => Some(UdDest {
                path,
                remote_qpn: w.remote_qpn & 0x00ff_ffff,
                remote_qkey: w.remote_qkey,
            }),
            Some(_) => return Err("the address handle belongs to another protection domain"),
            None => return Err("unknown address handle"),
        }
    } else {
        None
    };
    Ok(xroce_transport::SendWqe {
        wr_id: w.wr_id,
        op,
        flags,
        data,
        ud,
    })
}

/// Validates and converts a receive work request copied out of shared memory.
pub(super) fn convert_recv(
    w: &contract::RecvWqe,
    max_sge: u32,
) -> Result<xroce_transport::RecvWqe, &'static str> {
    if w.num_sge > max_sge || w.num_sge as usize > contract::MAX_SGE {
        return Err("more scatter/gather elements than max_recv_sge");
    }
    Ok(xroce_transport::RecvWqe {
        wr_id: w.wr_id,
        sges: sges(w.sge[..w.num_sge as usize].iter().copied())?,
    })
}

/// The contract's scatter/gather elements as the transport's.
fn sges(from: impl Iterator<Item = contract::Sge>) -> Result<SgeList, &'static str> {
    let mut list = SgeList::new();
    for s in from {
        list.push(xroce_transport::Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        })
        .map_err(|_| "too many scatter/gather elements")?;
    }
    Ok(list)
}

/// The completion opcode of a send work request's `ibv_wr_opcode` (for one the daemon
/// refuses: its opcode may be anything).
pub(super) fn send_completion_opcode(opcode: u32) -> WcOpcode {
    use contract::wr_opcode as o;
    match opcode {
        o::RDMA_READ => WcOpcode::RdmaRead,
        o::RDMA_WRITE | o::RDMA_WRITE_WITH_IMM => WcOpcode::RdmaWrite,
        o::ATOMIC_CMP_AND_SWP => WcOpcode::CompSwap,
        o::ATOMIC_FETCH_AND_ADD => WcOpcode::FetchAdd,
        _ => WcOpcode::Send,
    }
}

#[cfg(test)]
mod tests {
    use xroce_transport::SendOp;
    use xroce_wire::Gid;
    use zerocopy::FromZeros;

    use super::*;

    const BOUNDS: SendBounds = SendBounds {
        pd: PdId(7),
        max_sge: 2,
        max_inline: 64,
    };

    fn send(opcode: u32) -> contract::SendWqe {
        let mut w = contract::SendWqe::new_zeroed();
        w.wr_id = 0x77;
        w.opcode = opcode;
        w
    }

    fn path() -> Path {
        Path {
            dgid: Gid([0; 16]),
            sgid_index: 0,
            dmac: [2, 0, 0, 0, 0, 2],
            traffic_class: 0,
            flow_label: 0,
            hop_limit: 64,
            udp_sport: 0,
            vlan: None,
        }
    }

    #[test]
    fn a_write_with_scatter_gather_elements_converts() {
        let mut w = send(contract::wr_opcode::RDMA_WRITE_WITH_IMM);
        w.num_sge = 2;
        w.imm_data = 0x1234_5678u32.to_be();
        w.rkey = 9;
        w.send_flags = SendFlags::SIGNALED.0 | 1 << 20;
        for i in 0..2 {
            let sge = contract::Sge {
                addr: 0x1000 * i as u64,
                length: 16,
                lkey: 3,
            };
            w.set_sge(i, sge);
        }
        let t = convert_send(&w, BOUNDS, &AddressHandles::new()).unwrap();
        assert_eq!(t.wr_id, 0x77);
        assert!(matches!(
            t.op,
            SendOp::WriteWithImm {
                imm: 0x1234_5678,
                rkey: 9,
                ..
            }
        ));
        assert_eq!(t.flags.0, SendFlags::SIGNALED.0, "unknown flags dropped");
        let Gather::Sges(list) = t.data else {
            panic!("not gathered from SGEs");
        };
        assert_eq!(list.as_slice()[1].addr, 0x1000);
        assert!(t.ud.is_none());
    }

    #[test]
    fn send_work_requests_past_their_bounds_are_refused() {
        let ahs = AddressHandles::new();
        assert_eq!(
            convert_send(&send(99), BOUNDS, &ahs).unwrap_err(),
            "unsupported opcode"
        );
        let mut w = send(contract::wr_opcode::SEND);
        w.num_sge = 3;
        assert!(convert_send(&w, BOUNDS, &ahs).is_err(), "max_send_sge");
        w.send_flags = SendFlags::INLINE.0;
        w.num_sge = 65;
        assert!(convert_send(&w, BOUNDS, &ahs).is_err(), "max_inline_data");
        w.num_sge = 64;
        assert!(matches!(
            convert_send(&w, BOUNDS, &ahs).map(|t| t.data),
            Ok(Gather::Inline { .. })
        ));
    }

    #[test]
    fn an_address_handle_must_exist_in_the_qps_protection_domain() {
        let mut ahs = AddressHandles::new();
        ahs.insert(1, (PdId(7), path()));
        ahs.insert(2, (PdId(8), path()));
        let mut w = send(contract::wr_opcode::SEND);
        w.remote_qpn = 0xff00_0042;
        w.remote_qkey = 0x1111;
        w.ah = 1;
        let ud = convert_send(&w, BOUNDS, &ahs).unwrap().ud.unwrap();
        assert_eq!((ud.remote_qpn, ud.remote_qkey), (0x42, 0x1111));
        w.ah = 2;
        assert!(convert_send(&w, BOUNDS, &ahs).is_err());
        w.ah = 3;
        assert_eq!(
            convert_send(&w, BOUNDS, &ahs).unwrap_err(),
            "unknown address handle"
        );
    }

    #[test]
    fn receive_work_requests_stay_within_max_recv_sge() {
        let mut w = contract::RecvWqe::new_zeroed();
        w.wr_id = 5;
        w.num_sge = 2;
        assert_eq!(convert_recv(&w, 2).unwrap().sges.as_slice().len(), 2);
        assert!(convert_recv(&w, 1).is_err());
        w.num_sge = contract::MAX_SGE as u32 + 1;
        assert!(convert_recv(&w, u32::MAX).is_err());
    }

    #[test]
    fn a_refused_send_completes_with_its_opcodes_kind() {
        use contract::wr_opcode as o;
        assert_eq!(send_completion_opcode(o::RDMA_READ), WcOpcode::RdmaRead);
        assert_eq!(
            send_completion_opcode(o::RDMA_WRITE_WITH_IMM),
            WcOpcode::RdmaWrite
        );
        assert_eq!(send_completion_opcode(12345), WcOpcode::Send);
    }
}
