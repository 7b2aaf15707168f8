//! The connection's addresses and the keys (rxe's `check_addr` and `check_keys`).

use crate::helpers::*;
use xroce_transport::testing::Connection;
use xroce_transport::{Counter, QpType, WcStatus};
use xroce_wire::{Pkey, Qpn};

/// Sets the IP source (and destination) of a frame, keeping its family.
fn readdress(frame: &[u8], src: Option<[u8; 4]>, dst: Option<[u8; 4]>) -> Vec<u8> {
    rewrite(frame, |h, _, _| {
        if let xroce_wire::IpRepr::Ipv4(ip) = &mut h.ip {
            if let Some(src) = src {
                ip.src_addr = src.into();
            }
            if let Some(dst) = dst {
                ip.dst_addr = dst.into();
            }
        }
    })
}

/// The same frame carried over IPv6 between the IPv4-mapped forms of its addresses.
fn over_ipv6_mapped(frame: &[u8]) -> Vec<u8> {
    rewrite(frame, |h, _, _| {
        let xroce_wire::IpRepr::Ipv4(ip) = h.ip else {
            panic!("an IPv4 frame")
        };
        h.ip = xroce_wire::IpRepr::Ipv6(xroce_wire::Ipv6Repr {
            src_addr: ip.src_addr.to_ipv6_mapped(),
            dst_addr: ip.dst_addr.to_ipv6_mapped(),
            next_header: 17,
            payload_len: 0,
            dscp: 0,
            ecn: 0,
            flow_label: 0,
            hop_limit: 64,
        });
        h.ethernet.ethertype = xroce_wire::EtherType::IPV6;
    })
}

#[test]
fn a_request_from_another_address_lands_in_rcvd_wrong_addr() {
    for qp_type in [QpType::Rc, QpType::Uc] {
        let (mut a, mut b) = pair(qp_type);
        let f = request(&mut a, write(64)).remove(0);
        let psn = b.endpoint.qp(QB).unwrap().diagnostics().expected_psn;
        let before = counters(&b);
        // Another address of the peer's host, then another host.
        give(&mut b, &readdress(&f, Some([10, 0, 0, 3]), None));
        give(&mut b, &readdress(&f, Some([192, 168, 1, 1]), None));
        assert_counted(&b, &before, &[(Counter::rcvd_wrong_addr, 2)]);
        assert!(take(&mut b).is_empty(), "{qp_type:?}: no answer");
        assert_eq!(b.endpoint.qp(QB).unwrap().diagnostics().expected_psn, psn);
        assert!(b.mem.region(0).bytes.iter().all(|&x| x == 0));
        // The peer's own frame still goes through.
        give(&mut b, &f);
        assert_eq!(counters(&b).rcvd_wrong_addr, 2);
        assert_ne!(b.endpoint.qp(QB).unwrap().diagnostics().expected_psn, psn);
    }
}

#[test]
fn a_request_to_another_of_our_addresses_lands_in_rcvd_wrong_addr() {
    let (mut a, mut b) = pair(QpType::Rc);
    // B has a second address: a frame to it passes the GID table (rcvd_wrong_dgid) but is
    // not to the address the connection uses.
    let second = xroce_wire::Gid::from_ipv4([10, 0, 0, 12].into());
    b.endpoint.set_gids(vec![b.gid, second]);
    let f = request(&mut a, write(64)).remove(0);
    give_counting(
        &mut b,
        &readdress(&f, None, Some([10, 0, 0, 12])),
        &[(Counter::rcvd_wrong_addr, 1)],
    );
    assert!(take(&mut b).is_empty());
}

#[test]
fn an_ipv6_frame_with_the_peers_mapped_address_lands_in_rcvd_wrong_addr() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    give_counting(
        &mut b,
        &over_ipv6_mapped(&f),
        &[(Counter::rcvd_wrong_addr, 1)],
    );
    assert!(take(&mut b).is_empty());
}

#[test]
fn a_response_from_another_address_lands_in_rcvd_wrong_addr_and_completes_nothing() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    give(&mut b, &f);
    let acks = take(&mut b);
    assert_eq!(acks.len(), 1);
    give_counting(
        &mut a,
        &readdress(&acks[0], Some([10, 0, 0, 3]), None),
        &[(Counter::rcvd_wrong_addr, 1)],
    );
    assert!(
        a.endpoint.poll_completion().is_none(),
        "a forged ACK completes nothing"
    );
    give(&mut a, &acks[0]);
    assert_eq!(
        a.endpoint.poll_completion().unwrap().status,
        WcStatus::Success
    );
}

#[test]
fn a_ud_datagram_from_any_address_is_delivered() {
    let (mut a, mut b) = pair(QpType::Ud);
    b.endpoint.post_recv(NOW, QB, recv(1, 256)).unwrap();
    let qkey = Connection::default().qkey;
    let f = ud_send(&mut a, &b, 64, qkey);
    give_counting(&mut b, &readdress(&f[0], Some([192, 168, 1, 1]), None), &[]);
    assert_eq!(
        b.endpoint.poll_completion().unwrap().status,
        WcStatus::Success
    );
}

#[test]
fn a_foreign_pkey_for_no_qp_lands_in_rcvd_unknown_qpn_as_in_rxe() {
    // rxe looks the queue pair up before it checks the keys.
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    let f = rewrite(&f, |_, ib, _| {
        ib.bth.pkey = Pkey(0x1234);
        ib.bth.dest_qp = Qpn::new(0x999);
    });
    give_counting(&mut b, &f, &[(Counter::rcvd_unknown_qpn, 1)]);
}

#[test]
fn a_limited_member_pkey_is_taken_and_a_zero_pkey_is_not() {
    // IBTA 10.9.3: the port's P_Key is the full default (0xffff): the limited default
    // (0x7fff) matches it, any other low 15 bits do not.
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    let before = counters(&b);
    give(&mut b, &rewrite(&f, |_, ib, _| ib.bth.pkey = Pkey(0x8000)));
    assert_counted(&b, &before, &[(Counter::bad_pkey_cntr, 1)]);
    give(&mut b, &rewrite(&f, |_, ib, _| ib.bth.pkey = Pkey(0x7fff)));
    assert_counted(&b, &before, &[(Counter::bad_pkey_cntr, 1)]);
    assert_eq!(
        take(&mut b).len(),
        1,
        "the ACK of the limited member's WRITE"
    );
}
