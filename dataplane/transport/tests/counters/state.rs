//! Queue pair state and type (rxe's `check_type_state`).

use crate::helpers::*;
use xroce_transport::testing::qp_config;
use xroce_transport::{AttrMask, Counter, QpAttr, QpState, QpType};
use xroce_wire::{Opcode, Qpn, Syndrome};

#[test]
fn a_request_to_a_qp_in_init_lands_in_rcvd_qp_not_ready() {
    let (mut a, mut b) = pair(QpType::Rc);
    let limits = b.endpoint.config().limits;
    let qc = Qpn::new(0x33);
    b.endpoint
        .create_qp(qp_config(qc, QpType::Rc, 16, limits))
        .unwrap();
    let f = request(&mut a, write(64)).remove(0);
    let f = rewrite(&f, |_, ib, _| ib.bth.dest_qp = qc);
    let before = counters(&b);
    give(&mut b, &f); // RESET
    let init = QpAttr {
        qp_state: QpState::Init,
        port_num: 1,
        ..QpAttr::default()
    };
    let mask = AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS;
    b.endpoint.modify_qp(NOW, qc, &init, mask).unwrap();
    give(&mut b, &f); // INIT
    assert_counted(&b, &before, &[(Counter::rcvd_qp_not_ready, 2)]);
    assert!(take(&mut b).is_empty());
}

#[test]
fn a_request_to_a_qp_in_error_lands_in_rcvd_qp_error() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    move_to(&mut b, QB, QpState::Err);
    give_counting(&mut b, &f, &[(Counter::rcvd_qp_error, 1)]);
    assert!(take(&mut b).is_empty());
}

#[test]
fn a_uc_opcode_to_an_rc_qp_lands_in_rcvd_wrong_transport() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    let f = rewrite(&f, |_, ib, _| ib.bth.opcode = Opcode::UC_RDMA_WRITE_ONLY);
    give_counting(&mut b, &f, &[(Counter::rcvd_wrong_transport, 1)]);
}

#[test]
fn a_response_to_a_qp_in_rtr_lands_in_rcvd_qp_not_ready() {
    let (mut a, b) = pair(QpType::Rc);
    move_to(&mut a, QA, QpState::Reset);
    let init = QpAttr {
        qp_state: QpState::Init,
        port_num: 1,
        ..QpAttr::default()
    };
    let mask = AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS;
    a.endpoint.modify_qp(NOW, QA, &init, mask).unwrap();
    let rtr = QpAttr {
        qp_state: QpState::Rtr,
        path: a.path_to(&b),
        dest_qpn: QB,
        ..QpAttr::default()
    };
    let mask = AttrMask::STATE
        | AttrMask::AV
        | AttrMask::PATH_MTU
        | AttrMask::DEST_QPN
        | AttrMask::RQ_PSN
        | AttrMask::MAX_DEST_RD_ATOMIC
        | AttrMask::MIN_RNR_TIMER;
    a.endpoint.modify_qp(NOW, QA, &rtr, mask).unwrap();
    let f = response(&a, &b, ack(PSN_A, Syndrome::ACK_UNLIMITED, 1), &[]);
    give_counting(&mut a, &f, &[(Counter::rcvd_qp_not_ready, 1)]);
}

#[test]
fn a_response_to_a_qp_in_error_lands_in_rcvd_qp_error() {
    let (mut a, b) = pair(QpType::Rc);
    move_to(&mut a, QA, QpState::Err);
    let f = response(&a, &b, ack(PSN_A, Syndrome::ACK_UNLIMITED, 1), &[]);
    give_counting(&mut a, &f, &[(Counter::rcvd_qp_error, 1)]);
}
