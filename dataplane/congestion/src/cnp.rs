//! Congestion notification packets on the wire, as RDMA NICs send them (IBTA A17.9.3):
//! an Ethernet/IP/UDP envelope along the queue pair's own path, a BTH with opcode 0x81,
//! BECN set, the peer's QP as destination and PSN 0, sixteen zero bytes and the ICRC.
//!
//! NVIDIA's adapters send CNPs with DSCP 48 (`cnp_dscp`) and not ECN-capable, so that a
//! notification is neither marked nor queued behind the traffic it is about; so do we.
//! Linux rxe drops them (it has no congestion control).

use core::net::IpAddr;

use xroce_transport::{Endpoint, QpType};
use xroce_wire::cnp::CnpRepr;
use xroce_wire::{EmitError, EthernetAddress, FrameRepr, IpRepr, Pkey, Qpn, VlanTag, source_port};

/// The DSCP of a CNP by default (NVIDIA's `cnp_dscp`).
pub const DEFAULT_CNP_DSCP: u8 = 48;

/// Where a queue pair's CNPs go: its path, backwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CnpPath {
    /// The local MAC address.
    pub src_mac: [u8; 6],
    /// The next hop's.
    pub dst_mac: [u8; 6],
    /// The local address of the QP's path.
    pub src_ip: IpAddr,
    /// The peer's.
    pub dst_ip: IpAddr,
    /// An 802.1Q VLAN ID, if the path has one.
    pub vlan: Option<u16>,
    /// The UDP source port of the QP's flow.
    pub udp_sport: u16,
    /// The peer's QP: the reaction point.
    pub dest_qp: Qpn,
    /// The partition key.
    pub pkey: Pkey,
}

impl CnpPath {
    /// The path of `qpn`'s CNPs, from its attributes and the endpoint's addresses; `None`
    /// for a QP the endpoint does not have, a UD QP (its peers are many) or a path that
    /// cannot be reached.
    pub fn of(endpoint: &Endpoint, qpn: Qpn) -> Option<CnpPath> {
        let qp = endpoint.qp(qpn)?;
        if qp.qp_type() == QpType::Ud {
            return None;
        }
        let attr = qp.attr();
        let path = attr.path;
        let config = endpoint.config();
        let sgid = config.gids.get(usize::from(path.sgid_index))?;
        let (src_ip, dst_ip) = match (sgid.to_ipv4(), path.dgid.to_ipv4()) {
            (Some(s), Some(d)) => (IpAddr::V4(s), IpAddr::V4(d)),
            (None, None) => (IpAddr::V6(sgid.to_ipv6()), IpAddr::V6(path.dgid.to_ipv6())),
            _ => return None,
        };
        let udp_sport = if path.udp_sport != 0 {
            path.udp_sport
        } else {
            source_port::udp_source_port(path.flow_label, qpn, attr.dest_qpn)
        };
        Some(CnpPath {
            src_mac: config.mac,
            dst_mac: path.dmac,
            src_ip,
            dst_ip,
            vlan: path.vlan,
            udp_sport,
            dest_qp: attr.dest_qpn,
            pkey: Pkey::DEFAULT,
        })
    }

    /// Writes the CNP into `buf` with DSCP `dscp`; returns its length.
    pub fn emit(&self, buf: &mut [u8], dscp: u8) -> Result<usize, EmitError> {
        let (src, dst) = (EthernetAddress(self.src_mac), EthernetAddress(self.dst_mac));
        let mut repr = match (self.src_ip, self.dst_ip) {
            (IpAddr::V4(s), IpAddr::V4(d)) => FrameRepr::ipv4(src, dst, s, d, self.udp_sport),
            (IpAddr::V6(s), IpAddr::V6(d)) => FrameRepr::ipv6(src, dst, s, d, self.udp_sport),
            _ => return Err(EmitError::IbTooShort(0)),
        };
        repr = repr.with_vlan(self.vlan.map(|vid| VlanTag {
            pcp: 0,
            dei: false,
            vid,
        }));
        // UDP checksum 0, as the transport's own frames (and rxe's) carry.
        match &mut repr.ip {
            IpRepr::Ipv4(r) => r.dscp = dscp & 0x3f,
            IpRepr::Ipv6(r) => r.dscp = dscp & 0x3f,
        }
        let ib = CnpRepr {
            dest_qp: self.dest_qp,
            pkey: self.pkey,
        }
        .to_ib_repr();
        // The opcode table counts the reserved bytes as a header: emitted as zeros.
        repr.emit_packet(buf, &ib, &[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;
    use xroce_wire::{Frame, Opcode, Psn};

    fn path(v6: bool) -> CnpPath {
        let (src_ip, dst_ip) = if v6 {
            (
                IpAddr::V6("fd00::1".parse().unwrap()),
                IpAddr::V6("fd00::2".parse().unwrap()),
            )
        } else {
            (
                IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
                IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            )
        };
        CnpPath {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip,
            dst_ip,
            vlan: None,
            udp_sport: 0xc123,
            dest_qp: Qpn::new(0xd2),
            pkey: Pkey::DEFAULT,
        }
    }

    #[test]
    fn a_cnp_parses_back_as_the_annex_describes_it() {
        for v6 in [false, true] {
            let mut buf = [0xa5u8; 256];
            let n = path(v6).emit(&mut buf, DEFAULT_CNP_DSCP).unwrap();
            assert_eq!(n, if v6 { 14 + 40 } else { 14 + 20 } + 8 + 12 + 16 + 4);
            let f = Frame::parse(&buf[..n]).expect("a valid frame with a good ICRC");
            assert_eq!(f.ib.bth.opcode, Opcode::CNP);
            assert!(f.ib.bth.becn);
            assert!(!f.ib.bth.ack_request);
            assert_eq!(f.ib.bth.psn, Psn::ZERO);
            assert_eq!(f.ib.bth.dest_qp, Qpn::new(0xd2));
            assert_eq!(f.headers.ip.dscp(), 48);
            assert_eq!(f.headers.ip.ecn(), 0, "a CNP is not ECN-capable");
            assert_eq!(f.headers.udp.src_port, 0xc123);
            assert_eq!(
                CnpRepr::from_ib_repr(&f.ib).map(|c| c.dest_qp),
                Some(Qpn::new(0xd2))
            );
            // The reserved bytes are zero.
            assert_eq!(&buf[n - 20..n - 4], &[0u8; xroce_wire::cnp::RESERVED_LEN]);
        }
    }

    #[test]
    fn mixed_address_families_cannot_be_emitted() {
        let mut p = path(false);
        p.dst_ip = IpAddr::V6("fd00::2".parse().unwrap());
        assert!(p.emit(&mut [0u8; 256], 48).is_err());
    }
}
