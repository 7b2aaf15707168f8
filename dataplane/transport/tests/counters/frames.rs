//! The frame layer: the ICRC, malformed frames, the destination, the P_Key, opcodes the
//! transport does not implement, QPs that do not exist.

use crate::helpers::*;
use xroce_transport::{Counter, QpType};
use xroce_wire::{BthRepr, IbRepr, Opcode, Pkey, Psn, Qpn};

#[test]
fn a_bad_icrc_lands_in_rcvd_icrc_err() {
    let (mut a, mut b) = pair(QpType::Rc);
    let mut f = request(&mut a, write(64)).remove(0);
    let n = f.len();
    f[n - 10] ^= 1;
    give_counting(&mut b, &f, &[(Counter::rcvd_icrc_err, 1)]);
}

#[test]
fn a_truncated_frame_lands_in_rcvd_malformed() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    give_counting(&mut b, &f[..40], &[(Counter::rcvd_malformed, 1)]);
}

#[test]
fn a_frame_to_another_address_lands_in_rcvd_wrong_dgid() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    let f = rewrite(&f, |h, _, _| {
        if let xroce_wire::IpRepr::Ipv4(ip) = &mut h.ip {
            ip.dst_addr = [10, 0, 0, 9].into();
        }
    });
    give_counting(&mut b, &f, &[(Counter::rcvd_wrong_dgid, 1)]);
}

#[test]
fn a_foreign_pkey_lands_in_bad_pkey_cntr() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    let f = rewrite(&f, |_, ib, _| ib.bth.pkey = Pkey(0x1234));
    give_counting(&mut b, &f, &[(Counter::bad_pkey_cntr, 1)]);
}

#[test]
fn a_cnp_lands_in_rcvd_unsupported_opcode() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    let f = rewrite(&f, |_, ib, payload| {
        *ib = IbRepr::new(BthRepr::new(Opcode(0x81), QB, Psn::new(0)));
        payload.clear();
    });
    give_counting(&mut b, &f, &[(Counter::rcvd_unsupported_opcode, 1)]);
}

#[test]
fn a_packet_for_no_qp_lands_in_rcvd_unknown_qpn() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    let f = rewrite(&f, |_, ib, _| ib.bth.dest_qp = Qpn::new(0x999));
    give_counting(&mut b, &f, &[(Counter::rcvd_unknown_qpn, 1)]);
}
