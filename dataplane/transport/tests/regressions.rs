//! Regression tests for what the `packet_sequences` fuzz target found, one per finding.

use xroce_transport::testing::{Connection, Host, Peer, bring_up, connect};
use xroce_transport::{
    Access, AttrMask, Gather, Instant, QpAttr, QpState, QpType, SendFlags, SendOp, SendWqe, SgeList,
};
use xroce_wire::Qpn;

const NOW: Instant = Instant::ZERO;

fn send() -> SendWqe {
    SendWqe {
        wr_id: 1,
        op: SendOp::Send,
        flags: SendFlags::SIGNALED,
        data: Gather::Sges(SgeList::single(0x1000, 8, 1)),
        ud: None,
    }
}

/// A QP reset while on the endpoint's active list lost its "scheduled" mark, so posting
/// again put it on the list a second time; repeated, the list grew without bound.
#[test]
fn a_reset_qp_keeps_one_place_on_the_active_list() {
    let (qa, qb) = (Qpn::new(0x11), Qpn::new(0x22));
    let mut a = Host::new(1);
    let mut b = Host::new(2);
    a.add_region(1, 0x1000, 4096, Access::ALL);
    let c = Connection::default();
    connect(&mut a, qa, &mut b, qb, QpType::Rc, &c, NOW);
    let reset = QpAttr {
        qp_state: QpState::Reset,
        ..QpAttr::default()
    };
    for _ in 0..10 {
        a.endpoint.post_send(NOW, qa, send()).unwrap();
        a.endpoint
            .modify_qp(NOW, qa, &reset, AttrMask::STATE)
            .unwrap();
        let peer = Peer {
            path: a.path_to(&b),
            qpn: qb,
            sq_psn: c.psn_a,
            rq_psn: c.psn_b,
        };
        bring_up(&mut a, NOW, qa, QpType::Rc, peer, &c);
    }
    a.endpoint.post_send(NOW, qa, send()).unwrap();
    assert_eq!(a.endpoint.diagnostics().active, 1);
}

/// The same through destroy and create with the same QP number.
#[test]
fn a_qp_created_with_the_number_of_a_destroyed_one_gets_one_place() {
    let (qa, qb) = (Qpn::new(0x11), Qpn::new(0x22));
    let mut a = Host::new(1);
    let mut b = Host::new(2);
    a.add_region(1, 0x1000, 4096, Access::ALL);
    let c = Connection::default();
    connect(&mut a, qa, &mut b, qb, QpType::Rc, &c, NOW);
    a.endpoint.post_send(NOW, qa, send()).unwrap();
    a.endpoint.destroy_qp(qa).unwrap();
    b.endpoint.destroy_qp(qb).unwrap();
    connect(&mut a, qa, &mut b, qb, QpType::Rc, &c, NOW);
    a.endpoint.post_send(NOW, qa, send()).unwrap();
    assert_eq!(a.endpoint.diagnostics().active, 1);
}
