//! The vocabulary's verbs values, and `modify_qp` against the state table of IBTA 10.3.1.

use super::*;

#[test]
fn verbs_values_round_trip() {
    for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
        assert_eq!(QpType::from_raw(t.raw()), Some(t));
    }
    assert_eq!(QpType::Rc.raw(), 2);
    assert_eq!(QpType::from_raw(1), None);
    assert_eq!(QpType::from_raw(5), None);
    for raw in 0..7 {
        // NOTE(unwrap): 0..7 are the seven states.
        let state = QpState::from_raw(raw).unwrap();
        assert_eq!(state.raw(), raw);
    }
    assert_eq!(QpState::from_raw(7), None);
    assert_eq!(QpState::Rts.name(), "RTS");
    assert_eq!(QpType::Uc.name(), "UC");
}

const RC_INIT: AttrMask = AttrMask(
    AttrMask::STATE.0 | AttrMask::PKEY_INDEX.0 | AttrMask::PORT.0 | AttrMask::ACCESS_FLAGS.0,
);
const RC_RTR: AttrMask = AttrMask(
    AttrMask::STATE.0
        | AttrMask::AV.0
        | AttrMask::PATH_MTU.0
        | AttrMask::DEST_QPN.0
        | AttrMask::RQ_PSN.0
        | AttrMask::MAX_DEST_RD_ATOMIC.0
        | AttrMask::MIN_RNR_TIMER.0,
);
const RC_RTS: AttrMask = AttrMask(
    AttrMask::STATE.0
        | AttrMask::TIMEOUT.0
        | AttrMask::RETRY_CNT.0
        | AttrMask::RNR_RETRY.0
        | AttrMask::SQ_PSN.0
        | AttrMask::MAX_QP_RD_ATOMIC.0,
);

fn to(state: QpState) -> QpAttr {
    QpAttr {
        qp_state: state,
        ..QpAttr::default()
    }
}

fn rc(from: QpState, attr: &QpAttr, mask: AttrMask) -> Result<Transition, ModifyError> {
    validate_modify(QpType::Rc, from, attr, mask, &Limits::default(), 1)
}

#[test]
fn the_verbs_bring_up_of_an_rc_qp_is_allowed() {
    let t = rc(QpState::Reset, &to(QpState::Init), RC_INIT).unwrap();
    assert_eq!((t.from, t.to), (QpState::Reset, QpState::Init));
    assert_eq!(t.given, RC_INIT.without(AttrMask::STATE));
    assert_eq!(
        rc(QpState::Init, &to(QpState::Rtr), RC_RTR).unwrap().to,
        QpState::Rtr
    );
    assert_eq!(
        rc(QpState::Rtr, &to(QpState::Rts), RC_RTS).unwrap().to,
        QpState::Rts
    );
    // Without STATE the QP stays where it is, here with an optional attribute.
    let t = rc(QpState::Rts, &to(QpState::Reset), AttrMask::MIN_RNR_TIMER).unwrap();
    assert_eq!((t.from, t.to), (QpState::Rts, QpState::Rts));
}

#[test]
fn required_and_unexpected_attributes_are_named() {
    let without_psn = RC_RTR.without(AttrMask::RQ_PSN);
    assert_eq!(
        rc(QpState::Init, &to(QpState::Rtr), without_psn),
        Err(ModifyError::MissingAttributes {
            qp_type: QpType::Rc,
            from: QpState::Init,
            to: QpState::Rtr,
            missing: AttrMask::RQ_PSN,
        })
    );
    assert_eq!(
        rc(
            QpState::Reset,
            &to(QpState::Init),
            RC_INIT | AttrMask::SQ_PSN
        ),
        Err(ModifyError::UnexpectedAttributes {
            qp_type: QpType::Rc,
            from: QpState::Reset,
            to: QpState::Init,
            extra: AttrMask::SQ_PSN,
        })
    );
    // UD needs a Q_Key where RC needs access flags.
    let ud = validate_modify(
        QpType::Ud,
        QpState::Reset,
        &to(QpState::Init),
        RC_INIT,
        &Limits::default(),
        1,
    );
    assert!(
        matches!(ud, Err(ModifyError::MissingAttributes { missing, .. }) if missing == AttrMask::QKEY)
    );
}

#[test]
fn transitions_outside_the_table_are_refused() {
    assert_eq!(
        rc(QpState::Reset, &to(QpState::Rts), RC_RTS),
        Err(ModifyError::InvalidTransition {
            qp_type: QpType::Rc,
            from: QpState::Reset,
            to: QpState::Rts,
        })
    );
    // SQE → RTS exists for UC and UD only.
    assert!(matches!(
        rc(QpState::Sqe, &to(QpState::Rts), AttrMask::STATE),
        Err(ModifyError::InvalidTransition { .. })
    ));
    let uc = validate_modify(
        QpType::Uc,
        QpState::Sqe,
        &to(QpState::Rts),
        AttrMask::STATE,
        &Limits::default(),
        1,
    );
    assert_eq!(uc.map(|t| t.to), Ok(QpState::Rts));
    // Every state may go to RESET or ERR, with no attribute.
    for from in [QpState::Init, QpState::Rts, QpState::Err] {
        assert!(rc(from, &to(QpState::Reset), AttrMask::STATE).is_ok());
        assert!(rc(from, &to(QpState::Err), AttrMask::STATE).is_ok());
        assert!(rc(from, &to(QpState::Err), AttrMask::STATE | AttrMask::QKEY).is_err());
    }
}

#[test]
fn values_and_the_current_state_are_checked() {
    let mut attr = to(QpState::Rts);
    attr.cur_qp_state = QpState::Init;
    assert_eq!(
        rc(QpState::Rtr, &attr, RC_RTS | AttrMask::CUR_STATE),
        Err(ModifyError::WrongCurrentState {
            claimed: QpState::Init,
            actual: QpState::Rtr,
        })
    );
    attr.cur_qp_state = QpState::Rtr;
    assert!(rc(QpState::Rtr, &attr, RC_RTS | AttrMask::CUR_STATE).is_ok());
    attr.timeout = 32;
    assert!(matches!(
        rc(QpState::Rtr, &attr, RC_RTS),
        Err(ModifyError::InvalidValue {
            attr: "timeout",
            ..
        })
    ));
    let mut attr = to(QpState::Rtr);
    attr.path_mtu = IbMtu::Mtu4096;
    let limits = Limits {
        max_mtu: IbMtu::Mtu1024,
        ..Limits::default()
    };
    assert!(matches!(
        validate_modify(QpType::Rc, QpState::Init, &attr, RC_RTR, &limits, 1),
        Err(ModifyError::InvalidValue {
            attr: "path_mtu",
            ..
        })
    ));
}

#[test]
fn the_source_gid_may_be_any_entry_of_the_ports_table() {
    let mut attr = to(QpState::Rtr);
    let limits = Limits::default();
    let rtr = |attr: &QpAttr, gids| {
        validate_modify(QpType::Rc, QpState::Init, attr, RC_RTR, &limits, gids)
    };
    // IPv4-mapped, global IPv6 and link-local IPv6: indices 0, 1 and 2.
    for index in 0..3 {
        attr.path.sgid_index = index;
        assert_eq!(rtr(&attr, 3).map(|t| t.to), Ok(QpState::Rtr), "{index}");
    }
    attr.path.sgid_index = 3;
    assert!(matches!(
        rtr(&attr, 3),
        Err(ModifyError::InvalidValue {
            attr: "ah_attr.grh.sgid_index",
            ..
        })
    ));
    // A port without addresses has no GID to send from.
    attr.path.sgid_index = 0;
    assert!(rtr(&attr, 0).is_err());
    // Without an address vector the index is not looked at.
    attr.path.sgid_index = 9;
    let rts = validate_modify(
        QpType::Rc,
        QpState::Rts,
        &attr,
        AttrMask::MIN_RNR_TIMER,
        &limits,
        1,
    );
    assert_eq!(rts.map(|t| t.to), Ok(QpState::Rts));
}

#[test]
fn apply_takes_only_the_attributes_given() {
    let mut attr = QpAttr::default();
    let new = QpAttr {
        qkey: 7,
        timeout: 14,
        sq_psn: Psn::new(5),
        ..QpAttr::default()
    };
    attr.apply(&new, AttrMask::TIMEOUT | AttrMask::SQ_PSN);
    assert_eq!((attr.qkey, attr.timeout, attr.sq_psn), (0, 14, Psn::new(5)));
}
