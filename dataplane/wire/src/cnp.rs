//! RoCEv2 Congestion Notification Packet (IBTA Annex A17.9.3).
//!
//! ```text
//! | BTH: opcode 0x81, BECN set, DestQP, PSN 0 | 16 reserved bytes | ICRC |
//! ```
//!
//! A notification point that receives ECN-CE-marked packets sends a CNP back to the
//! reaction point (the sender's QP), which slows that flow down (DCQCN).

use crate::bth::BthRepr;
use crate::ib::IbRepr;
use crate::identifiers::{Pkey, Qpn};
use crate::opcode::Opcode;
use crate::psn::Psn;

/// Length of the reserved bytes behind a CNP's BTH.
pub const RESERVED_LEN: usize = 16;

/// What a CNP says: which QP should slow down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CnpRepr {
    /// The QP (at the receiver of the CNP) whose flow saw congestion.
    pub dest_qp: Qpn,
    /// Partition key of that flow.
    pub pkey: Pkey,
}

impl CnpRepr {
    /// The IB headers of this CNP: opcode 0x81, BECN set, A clear, PSN 0 (A17.9.3).
    pub const fn to_ib_repr(&self) -> IbRepr {
        let mut bth = BthRepr::new(Opcode::CNP, self.dest_qp, Psn::ZERO);
        bth.pkey = self.pkey;
        bth.becn = true;
        IbRepr::new(bth)
    }

    /// The CNP an IB repr carries, `None` if its opcode is not CNP.
    pub fn from_ib_repr(ib: &IbRepr) -> Option<CnpRepr> {
        (ib.bth.opcode == Opcode::CNP).then_some(CnpRepr {
            dest_qp: ib.bth.dest_qp,
            pkey: ib.bth.pkey,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bth::BthPacket;

    /// The IB part of the CNP in the vendor example of A17.9.3: DestQP 0xd2, then 16 zero
    /// bytes and an ICRC (which covers IP/UDP headers not shown there, so it is not checked
    /// here).
    static CNP: [u8; 32] = [
        0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x00, 0xd2, 0x00, 0x00, 0x00, 0x00, // BTH
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // reserved
        0xe4, 0x2d, 0xad, 0x81, // ICRC
    ];

    fn repr() -> CnpRepr {
        CnpRepr {
            dest_qp: Qpn::new(0xd2),
            pkey: Pkey::DEFAULT,
        }
    }

    #[test]
    fn deconstruct() {
        let bth = BthPacket::new_checked(&CNP[..]).unwrap();
        assert_eq!(bth.opcode(), Opcode::CNP);
        assert!(bth.becn());
        assert_eq!(bth.dest_qp(), Qpn::new(0xd2));
        assert_eq!(bth.psn(), Psn::ZERO);
        assert_eq!(CNP[12..28], [0; 16]);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 28];
        let mut bth = BthPacket::new_unchecked(&mut bytes[..]);
        bth.set_opcode(Opcode::CNP);
        bth.set_flags(false, false, 0, 0);
        bth.set_pkey(Pkey::DEFAULT);
        bth.set_congestion(false, true);
        bth.set_dest_qp(Qpn::new(0xd2));
        bth.set_ack_request(false);
        bth.set_psn(Psn::ZERO);
        bytes[12..].fill(0);
        assert_eq!(bytes, CNP[..28]);
    }

    #[test]
    fn parse() {
        let (ib, payload) = IbRepr::parse(&CNP).unwrap();
        assert!(payload.is_empty());
        assert_eq!(CnpRepr::from_ib_repr(&ib), Some(repr()));
        assert_eq!(ib, repr().to_ib_repr());
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5u8; 28];
        assert_eq!(repr().to_ib_repr().emit(&mut bytes, 0), Ok(28));
        assert_eq!(bytes, CNP[..28]);
    }

    #[test]
    fn reserved_bytes_are_ignored_on_receive() {
        let mut b = CNP;
        b[12..28].fill(0x5a);
        let (ib, _) = IbRepr::parse(&b).unwrap();
        assert_eq!(CnpRepr::from_ib_repr(&ib), Some(repr()));
    }
}
