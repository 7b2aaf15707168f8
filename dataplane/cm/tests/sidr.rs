//! UD ids: rdma_cm resolves the peer's QP and Q_Key with SIDR_REQ/SIDR_REP (udaddy,
//! ib_send_bw -c UD -R), with every status.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use xroce_cm::testing::{Impairments, Pair, Side};
use xroce_cm::{ConnParam, EventKind, RDMA_UDP_QKEY};
use xroce_transport::{AttrMask, QpState};
use xroce_wire::cm::ip_cm::{IpCmPacket, IpCmRepr};
use xroce_wire::{CmMessage, Gid, PortSpace, Qpn, ServiceId, SidrStatus};

const UD_PORT: u16 = 5000;

fn ud_connect(p: &mut Pair, private_data: &[u8]) -> xroce_cm::IdHandle {
    let to = SocketAddr::new(p.b.addr, UD_PORT);
    let id = resolved(&mut p.a, OWNER_A, PortSpace::Udp, to);
    let now = p.now;
    let param = ConnParam {
        private_data: private_data.to_vec(),
        ..ConnParam::default()
    };
    p.a.cm.connect(now, id, &param).unwrap();
    id
}

#[test]
fn sidr_resolves_the_peers_qp_and_qkey() {
    let mut p = Pair::new(30);
    let listener = listen(&mut p.b, OWNER_B, PortSpace::Udp, UD_PORT);
    let a = ud_connect(&mut p, b"hello");
    let req = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    assert_eq!(req.listen_id, Some(listener));
    let ud = req.ud().unwrap();
    assert_eq!(ud.private_data.len(), 180, "216 minus the IP CM header");
    assert_eq!(&ud.private_data[..5], b"hello");
    // On the wire: the UDP port space's service ID and the IP CM header.
    let sent = p.sent_by(Side::A, |m| matches!(m, CmMessage::SidrReq(_)));
    let Some(CmMessage::SidrReq(r)) = sent[0].message() else {
        unreachable!()
    };
    assert_eq!(
        r.service_id,
        ServiceId(0x0000_0000_0111_0000 | u64::from(UD_PORT))
    );
    let h = IpCmRepr::parse(&IpCmPacket::new_checked(r.private_data).unwrap()).unwrap();
    assert_eq!(h.dst_addr, p.b.addr);
    assert_eq!(
        Some(SocketAddr::new(h.src_addr, h.src_port)),
        p.a.cm.id(a).unwrap().local
    );

    let now = p.now;
    let accept = ConnParam {
        qp_num: Qpn::new(0x44),
        ..ConnParam::default()
    };
    p.b.cm.accept(now, req.id, &accept).unwrap();
    let est = wait(&mut p, PATIENCE, false, EventKind::Established);
    let ud = est.ud().unwrap();
    assert_eq!((ud.qp_num, ud.qkey), (0x44, RDMA_UDP_QKEY));
    assert_eq!(ud.ah_attr.dgid, Gid::from_ip(p.b.addr));
    assert_eq!(ud.private_data.len(), 136);
    assert!(
        p.b.any(EventKind::Established).is_none(),
        "the passive side hears nothing more"
    );

    // UD QPs take the Q_Key at INIT; their RTR and RTS are librdmacm's.
    let (attr, mask) = p.a.cm.init_qp_attr(a, QpState::Init).unwrap();
    assert_eq!(
        mask,
        AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::QKEY
    );
    assert_eq!(attr.qkey, RDMA_UDP_QKEY);
    assert_eq!(
        p.b.cm.init_qp_attr(req.id, QpState::Init).unwrap().0.qkey,
        RDMA_UDP_QKEY
    );
    // Nothing waits for anything any more.
    assert_eq!(p.a.cm.poll_timeout(), None);
    assert_eq!(p.b.cm.poll_timeout(), None);
}

#[test]
fn sidr_reject_and_no_listener_are_unreachable_with_the_status() {
    let mut p = Pair::new(31);
    listen(&mut p.b, OWNER_B, PortSpace::Udp, UD_PORT);
    let a = ud_connect(&mut p, &[]);
    let req = wait(&mut p, PATIENCE, true, EventKind::ConnectRequest);
    let now = p.now;
    p.b.cm.reject(now, req.id, b"go away").unwrap();
    let ev = wait(&mut p, PATIENCE, false, EventKind::Unreachable);
    assert_eq!((ev.id, ev.status), (a, i32::from(SidrStatus::REJECT.0)));
    assert_eq!(&ev.ud().unwrap().private_data[..7], b"go away");

    let mut p = Pair::new(32);
    let a = ud_connect(&mut p, &[]);
    let ev = wait(&mut p, PATIENCE, false, EventKind::Unreachable);
    assert_eq!(
        (ev.id, ev.status),
        (a, i32::from(SidrStatus::UNSUPPORTED.0))
    );
    assert_eq!(p.b.cm.counters().sidr_req_no_listener, 1);
}

#[test]
fn an_rc_listener_does_not_take_a_sidr_req_on_the_ib_port_space() {
    // PS_IB carries both: a listener of RC QPs refuses a UD request (SIDR_REP status 2).
    let mut p = Pair::new(33);
    listen(&mut p.b, OWNER_B, PortSpace::Ib, UD_PORT);
    let to = SocketAddr::new(p.b.addr, UD_PORT);
    let id =
        p.a.cm
            .create_id(OWNER_A, PortSpace::Ib, xroce_transport::QpType::Ud)
            .unwrap();
    let route = xroce_cm::Route {
        local: p.a.addr,
        remote: to,
        path_mtu: xroce_wire::IbMtu::Mtu1024,
        hop_limit: 64,
    };
    p.a.cm.resolve_route(id, route).unwrap();
    let now = p.now;
    p.a.cm.connect(now, id, &ConnParam::default()).unwrap();
    let ev = wait(&mut p, PATIENCE, false, EventKind::Unreachable);
    assert_eq!(ev.status, i32::from(SidrStatus::REJECT.0));
    assert_eq!(p.b.cm.counters().req_refused, 1);
}

#[test]
fn sidr_retries_run_out_after_16_sends_4096_ms_apart() {
    let mut p = Pair::with(34, Impairments::lossy(1.0));
    listen(&mut p.b, OWNER_B, PortSpace::Udp, UD_PORT);
    let t0 = p.now;
    let a = ud_connect(&mut p, &[]);
    let ev = wait(&mut p, PATIENCE, false, EventKind::Unreachable);
    assert_eq!((ev.id, ev.status), (a, -110));
    assert_eq!(p.now - t0, Duration::from_millis(16 * 4096));
    assert_eq!(
        p.sent_by(Side::A, |m| matches!(m, CmMessage::SidrReq(_)))
            .len(),
        16
    );
    assert_eq!(p.a.cm.counters().sidr_req_timeouts, 1);
}

#[test]
fn a_duplicate_sidr_req_is_dropped_while_pending() {
    let mut p = Pair::new(35);
    listen(&mut p.b, OWNER_B, PortSpace::Udp, UD_PORT);
    ud_connect(&mut p, &[]);
    let req = p.a.cm.poll_transmit().unwrap();
    p.inject(Side::B, &req.mad);
    p.inject(Side::B, &req.mad);
    assert_eq!(p.b.count(EventKind::ConnectRequest), 1);
    assert_eq!(p.b.cm.counters().rcvd_duplicate, 1);
}

#[test]
fn a_copy_of_an_answered_sidr_req_gets_the_same_answer_even_once_nobody_listens() {
    let mut p = Pair::new(36);
    let listener = listen(&mut p.b, OWNER_B, PortSpace::Udp, UD_PORT);
    ud_connect(&mut p, &[]);
    let req = p.a.cm.poll_transmit().unwrap();
    p.inject(Side::B, &req.mad);
    let asked = p.b.any(EventKind::ConnectRequest).unwrap().id;
    let now = p.now;
    let accept = ConnParam {
        qp_num: Qpn::new(0x44),
        ..ConnParam::default()
    };
    p.b.cm.accept(now, asked, &accept).unwrap();
    p.settle();
    let is_rep = |m: &CmMessage<'_>| matches!(m, CmMessage::SidrRep(_));
    assert_eq!(p.sent_by(Side::B, is_rep).len(), 1);
    // The listener is gone (its server took what it waited for) when a copy of the request
    // comes: the requester lost the answer, or the path duplicated its request.
    p.b.cm.destroy_id(now, listener).unwrap();
    p.inject(Side::B, &req.mad);
    let reps = p.sent_by(Side::B, is_rep);
    assert_eq!(reps.len(), 2, "answered again");
    assert_eq!(reps[0].mad, reps[1].mad, "with the same answer");
    let Some(CmMessage::SidrRep(rep)) = reps[1].message() else {
        unreachable!()
    };
    assert_eq!((rep.status, rep.qpn), (SidrStatus::SUCCESS, Qpn::new(0x44)));
    assert_eq!(p.b.count(EventKind::ConnectRequest), 1, "no second request");
    let c = p.b.cm.counters();
    assert_eq!((c.rcvd_duplicate, c.sidr_req_no_listener), (1, 0));
    // The requester, which did get an answer, resolves once.
    let ev = wait(&mut p, PATIENCE, false, EventKind::Established);
    assert_eq!(ev.ud().unwrap().qp_num, 0x44);
    assert_eq!(p.a.count(EventKind::Established), 1);
}
