//! The UDP source port of a RoCEv2 flow.
//!
//! The destination port is always 4791; the source port only spreads flows over RSS queues
//! and ECMP paths (IBTA Annex A17 leaves it to the sender). Receivers
//! never check it. To look like rxe on the wire, and to land in the same RSS queue a Linux
//! peer's packets land in, we derive it exactly as Linux does:
//!
//! - a connected QP (RC/UC) with no flow label in its address vector uses
//!   `rdma_get_udp_sport(0, lqpn, rqpn)`: [`flow_label_from_qpns`], then
//!   [`udp_source_port_from_flow_label`];
//! - an rdma_cm connection carries a flow label the CM derived from the TCP-like ports of
//!   its private data ([`rdma_cm_flow_label`]) and uses that;
//! - a UD QP (and any QP before its address vector is set) keeps the port rxe chose when it
//!   created the QP ([`rxe_initial_udp_source_port`]).

use crate::identifiers::Qpn;

/// The lowest UDP source port RoCEv2 uses (`IB_ROCE_UDP_ENCAP_VALID_PORT_MIN`).
pub const SOURCE_PORT_MIN: u16 = 0xc000;

/// The 20-bit flow label Linux derives from the two QP numbers of a connection
/// (`rdma_calc_flow_label`). It is symmetric, so both ends compute the same label.
pub const fn flow_label_from_qpns(local: Qpn, remote: Qpn) -> u32 {
    let mut v = (local.value() as u64) * (remote.value() as u64);
    v ^= v >> 20;
    v ^= v >> 40;
    (v as u32) & 0x000f_ffff
}

/// The UDP source port for a 20-bit flow label (`rdma_flow_label_to_udp_sport`): the low 14
/// bits folded with the high 6, in 0xC000..=0xFFFF.
pub const fn udp_source_port_from_flow_label(flow_label: u32) -> u16 {
    let low = flow_label & 0x3fff;
    let high = flow_label & 0x000f_c000;
    let folded = low ^ (high >> 14);
    (folded as u16) | SOURCE_PORT_MIN
}

/// The UDP source port of a connected QP (`rdma_get_udp_sport`): from the address vector's
/// flow label if it has one, from the QP numbers otherwise.
///
/// rxe calls this when an RC/UC QP is given a GRH address vector (`rxe_modify_qp`), so we
/// do too.
pub const fn udp_source_port(flow_label: u32, local: Qpn, remote: Qpn) -> u16 {
    let fl = if flow_label & 0x000f_ffff == 0 {
        flow_label_from_qpns(local, remote)
    } else {
        flow_label & 0x000f_ffff
    };
    udp_source_port_from_flow_label(fl)
}

/// The UDP source port rxe gives a QP when it creates it:
/// `0xC000 + (hash_32(qpn, 14) & 0x3fff)`, where `hash_32` multiplies by the 32-bit golden
/// ratio `0x61C88647` and keeps the top bits. UD QPs (including QP1, which carries CM MADs)
/// keep this port for their whole life.
pub const fn rxe_initial_udp_source_port(qpn: Qpn) -> u16 {
    let hash = qpn.value().wrapping_mul(0x61c8_8647) >> (32 - 14);
    SOURCE_PORT_MIN + ((hash & 0x3fff) as u16)
}

/// The flow label rdma_cm gives an IPv4 RoCE connection (`cma_get_roce_udp_flow_label`):
/// `(src_port * 31 + dst_port)` over the 20 flow-label bits, where the ports are those of
/// the rdma_cm IDs (in the IP CM private data of the CM REQ).
pub const fn rdma_cm_flow_label(src_port: u16, dst_port: u16) -> u32 {
    ((src_port as u32)
        .wrapping_mul(31)
        .wrapping_add(dst_port as u32))
        & 0x000f_ffff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rc_pingpong_qp_0x11_both_ways_gives_49441() {
        // rc_pingpong.pcap: QPN 0x11 on both sides, UDP source port 49441 both ways.
        let qp = Qpn::new(0x11);
        assert_eq!(flow_label_from_qpns(qp, qp), 0x121);
        assert_eq!(udp_source_port(0, qp, qp), 49441);
    }

    #[test]
    fn flow_label_is_symmetric_and_ports_stay_in_range() {
        for (a, b) in [
            (0x1d, 0xb1e),
            (1, 0xff_ffff),
            (0xff_ffff, 0xff_ffff),
            (0, 5),
        ] {
            let (a, b) = (Qpn::new(a), Qpn::new(b));
            assert_eq!(flow_label_from_qpns(a, b), flow_label_from_qpns(b, a));
            assert!(udp_source_port(0, a, b) >= SOURCE_PORT_MIN);
        }
        // netns_userspace_rc_pingpong.pcap: rxe QP 0x1d talking to QP 0xb1e sends from 49763.
        assert_eq!(udp_source_port(0, Qpn::new(0x1d), Qpn::new(0xb1e)), 49763);
    }

    #[test]
    fn fold_uses_the_high_six_bits() {
        assert_eq!(udp_source_port_from_flow_label(0), 0xc000);
        assert_eq!(udp_source_port_from_flow_label(0x3fff), 0xffff);
        assert_eq!(udp_source_port_from_flow_label(0x4000), 0xc001);
        assert_eq!(udp_source_port_from_flow_label(0xf_c000), 0xc03f);
    }

    #[test]
    fn explicit_flow_label_wins_over_qpns() {
        let qp = Qpn::new(0x11);
        assert_eq!(
            udp_source_port(0x4_0000, qp, qp),
            udp_source_port_from_flow_label(0x4_0000)
        );
    }

    #[test]
    fn rxe_initial_ports_match_the_captures() {
        // ud_pingpong.pcap: UD QP 0x12 sends from 63494; CM MADs from QP1 from 55410.
        assert_eq!(rxe_initial_udp_source_port(Qpn::new(0x12)), 63494);
        assert_eq!(rxe_initial_udp_source_port(Qpn::GSI), 55410);
    }

    #[test]
    fn rdma_cm_flow_label_matches_rping() {
        // rping_rdma_cm.pcap: CM REQ private data has source port 0x894f, destination port
        // 0x1c06 (7174); the RC traffic of that connection goes from UDP port 64661.
        let fl = rdma_cm_flow_label(0x894f, 0x1c06);
        assert_eq!(udp_source_port(fl, Qpn::new(0x1a), Qpn::new(0x1a)), 64661);
    }
}
