//! Connection set-up and tear-down between two hosts in virtual time, without loss:
//! the events each side reports, the QP attributes each step implies, and the MADs on the
//! wire.

mod common;

use std::time::Duration;

use common::*;
use xroce_cm::testing::{Pair, Side};
use xroce_cm::{CmState, EventKind, EventParam, IdState};
use xroce_transport::{Access, AttrMask, QpState};
use xroce_wire::{CmMessage, Gid, IbMtu, Qpn};

#[test]
fn connect_accept_establish_and_disconnect_from_the_active_side() {
    let mut p = Pair::new(1);
    let listener = listen(&mut p.b, OWNER_B, xroce_wire::PortSpace::Tcp, PORT);
    let a = connect(&mut p, PORT);
    let a_info = p.a.cm.id(a).unwrap();
    assert_eq!(a_info.state, IdState::Connect);

    let req = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    assert_eq!(req.listen_id, Some(listener));
    let conn = req.conn().unwrap();
    assert_eq!(
        conn.private_data,
        vec![0u8; 56],
        "56 bytes after the IP CM header"
    );
    assert_eq!((conn.responder_resources, conn.initiator_depth), (1, 1));
    assert_eq!(conn.qp_num, 0x11);
    assert_eq!((conn.retry_count, conn.rnr_retry_count), (7, 7));
    let b = req.id;
    let b_info = p.b.cm.id(b).unwrap();
    assert_eq!(
        b_info.owner, OWNER_B,
        "a request belongs to its listener's owner"
    );
    assert_eq!(b_info.remote, a_info.local);
    assert_eq!(b_info.local.unwrap().port(), PORT);

    let now = p.now;
    p.b.cm.accept(now, b, &rping_param(0x22)).unwrap();
    let resp = wait(&mut p, PATIENCE, false, EventKind::ConnectResponse);
    assert_eq!(resp.id, a);
    assert_eq!(resp.conn().unwrap().qp_num, 0x22);
    assert_eq!(resp.conn().unwrap().private_data.len(), 196);
    assert!(
        p.b.any(EventKind::Established).is_none(),
        "not before the RTU"
    );

    // QP attributes on both sides, as the kernel computes them.
    let b_seq = p.b.cm.id(b).unwrap().seq_num;
    let a_seq = a_info.seq_num;
    let (init, mask) = p.a.cm.init_qp_attr(a, QpState::Init).unwrap();
    assert_eq!(
        mask,
        AttrMask::STATE | AttrMask::ACCESS_FLAGS | AttrMask::PKEY_INDEX | AttrMask::PORT
    );
    assert_eq!(
        init.access,
        Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC
    );
    let (rtr, mask) = p.a.cm.init_qp_attr(a, QpState::Rtr).unwrap();
    assert!(
        mask.contains(AttrMask::AV | AttrMask::PATH_MTU | AttrMask::DEST_QPN | AttrMask::RQ_PSN)
    );
    assert!(mask.contains(AttrMask::MAX_DEST_RD_ATOMIC | AttrMask::MIN_RNR_TIMER));
    assert_eq!(rtr.dest_qpn, Qpn::new(0x22));
    assert_eq!(rtr.rq_psn, a_seq, "our own starting PSN");
    assert_eq!(rtr.path_mtu, IbMtu::Mtu1024);
    assert_eq!(rtr.path.dgid, Gid::from_ip(p.b.addr));
    assert_eq!(rtr.path.hop_limit, 64);
    let sport = a_info.local.unwrap().port();
    assert_eq!(
        rtr.path.flow_label,
        (u32::from(sport) * 31 + u32::from(PORT)) & 0xfffff
    );
    assert_eq!(rtr.max_dest_rd_atomic, 1);
    assert_eq!(rtr.min_rnr_timer, 0);
    let (rts, mask) = p.a.cm.init_qp_attr(a, QpState::Rts).unwrap();
    assert!(mask.contains(AttrMask::SQ_PSN | AttrMask::TIMEOUT | AttrMask::RETRY_CNT));
    assert_eq!(rts.sq_psn, b_seq, "the peer's starting PSN");
    assert_eq!(rts.timeout, 19);
    assert_eq!((rts.retry_cnt, rts.rnr_retry, rts.max_rd_atomic), (7, 7, 1));
    let (b_rtr, _) = p.b.cm.init_qp_attr(b, QpState::Rtr).unwrap();
    assert_eq!(b_rtr.rq_psn, b_seq);
    assert_eq!(b_rtr.dest_qpn, Qpn::new(0x11));
    assert_eq!(b_rtr.path.dgid, Gid::from_ip(p.a.addr));
    assert_eq!(
        b_rtr.path.flow_label, rtr.path.flow_label,
        "both ends use one flow label"
    );
    let (b_rts, _) = p.b.cm.init_qp_attr(b, QpState::Rts).unwrap();
    assert_eq!(b_rts.sq_psn, a_seq);
    assert_eq!(b_rts.timeout, 19);

    let now = p.now;
    p.a.cm.establish(now, a).unwrap();
    let est = wait(&mut p, PATIENCE, true, EventKind::Established);
    assert_eq!(est.id, b);
    assert_eq!(
        p.b.cm.ib_cm().state(p.b.cm.id(b).unwrap().comm_id.unwrap()),
        Some(CmState::Established)
    );

    // The client disconnects first, as rping does; the server answers when its
    // application calls disconnect too.
    let now = p.now;
    p.a.cm.disconnect(now, a).unwrap();
    let d = wait(&mut p, PATIENCE, true, EventKind::Disconnected);
    assert_eq!((d.id, d.status), (b, 0));
    assert!(
        p.a.any(EventKind::Disconnected).is_none(),
        "A waits for the DREP"
    );
    let now = p.now;
    p.b.cm.disconnect(now, b).unwrap();
    let d = wait(&mut p, PATIENCE, false, EventKind::Disconnected);
    assert_eq!((d.id, d.status), (a, 0));

    // TimeWait: 2048 ms (ACK timeout 19), then TIMEWAIT_EXIT on both.
    let t0 = p.now;
    wait(&mut p, PATIENCE, false, EventKind::TimewaitExit);
    wait(&mut p, PATIENCE, true, EventKind::TimewaitExit);
    let waited = p.now - t0;
    assert!(
        waited >= Duration::from_millis(2048) && waited < Duration::from_millis(2100),
        "{waited:?}"
    );

    // On the wire: REQ, REP, RTU, DREQ, DREP, nothing retransmitted, nothing dropped.
    let kinds: Vec<u16> = p
        .wire
        .iter()
        .map(|s| s.message().unwrap().attribute_id().0)
        .collect();
    assert_eq!(kinds, vec![0x10, 0x13, 0x14, 0x15, 0x16]);
    for h in [&p.a, &p.b] {
        let c = h.cm.counters();
        assert_eq!(c.retransmits, 0);
        assert_eq!(c.rcvd_mads, c.rcvd_delivered);
        assert_eq!(c.rcvd_mads, c.dispositions());
    }
    // The DREP echoes the DREQ's TID; RTU and REP echo the REQ's.
    let req_tid = p.wire[0].tid();
    assert_eq!(p.wire[1].tid(), req_tid);
    assert_eq!(p.wire[2].tid(), req_tid);
    assert_eq!(p.wire[4].tid(), p.wire[3].tid());
}

#[test]
fn disconnect_from_the_passive_side_uses_its_own_tid() {
    let mut p = Pair::new(2);
    let (a, _, b) = establish(&mut p, PORT);
    let now = p.now;
    p.b.cm.disconnect(now, b).unwrap();
    wait(&mut p, PATIENCE, false, EventKind::Disconnected);
    let now = p.now;
    p.a.cm.disconnect(now, a).unwrap();
    wait(&mut p, PATIENCE, true, EventKind::Disconnected);
    let dreq = p.sent_by(Side::B, |m| matches!(m, CmMessage::Dreq(_)));
    let drep = p.sent_by(Side::A, |m| matches!(m, CmMessage::Drep(_)));
    assert_eq!(dreq.len(), 1);
    assert_eq!(drep.len(), 1);
    let b_comm = p.b.cm.id(b).unwrap().comm_id.unwrap();
    assert_eq!(
        dreq[0].tid() as u32,
        b_comm.0.swap_bytes(),
        "B's TID, from B's comm ID"
    );
    assert_eq!(drep[0].tid(), dreq[0].tid());
    assert!(matches!(
        p.a.any(EventKind::Disconnected).unwrap().param,
        EventParam::None
    ));
}
