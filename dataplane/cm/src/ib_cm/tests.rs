//! The connection manager alone, two of them wired by hand: comm IDs and TIDs, REQs it
//! refuses, what destroying a connection in each state tells the peer.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use xroce_transport::Instant;
use xroce_wire::{
    CmMad, CmMessage, CommId, Gid, Guid, IbMtu, MsgResponse, Pkey, Psn, Qpn, RejectReason,
    ServiceId, SidrStatus, TransportServiceType,
};

use super::params::{PathRecord, RepParams, ReqParams};
use super::*;
use crate::random::ScriptedRandom;

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
const NOW: Instant = Instant::from_nanos(1_000);
const SERVICE: ServiceId = ServiceId(0x0000_0000_0106_1c06);

fn cm(guid: u64, addr: IpAddr, operand: u32) -> IbCm {
    let config = IbCmConfig {
        ca_guid: Guid(guid),
        ack_delay: 15,
        hi_tid: 2,
        listen_grace: Duration::ZERO,
    };
    let mut cm = IbCm::new(config, &mut ScriptedRandom::new(&[operand], 1));
    cm.add_local_gid(Gid::from_ip(addr));
    cm
}

fn req_params(to_gid: Gid) -> ReqParams<'static> {
    ReqParams {
        to: MadAddress::new(A, B),
        service_id: SERVICE,
        qp_num: Qpn::new(0x11),
        transport: TransportServiceType::RC,
        starting_psn: Psn::new(0x123456),
        responder_resources: 1,
        initiator_depth: 1,
        remote_cm_response_timeout: 20,
        local_cm_response_timeout: 20,
        max_cm_retries: 15,
        retry_count: 7,
        rnr_retry_count: 7,
        flow_control: false,
        srq: false,
        path: PathRecord {
            sgid: Gid::from_ip(A),
            dgid: to_gid,
            flow_label: 0x12345,
            hop_limit: 64,
            traffic_class: 0,
            sl: 0,
            pkey: Pkey::DEFAULT,
            mtu: IbMtu::Mtu1024,
            rate: 0,
            packet_life_time: 18,
        },
        private_data: &[],
    }
}

fn sent(cm: &mut IbCm) -> Vec<Transmit> {
    std::iter::from_fn(|| cm.poll_transmit()).collect()
}

fn events(cm: &mut IbCm) -> Vec<CmEvent> {
    std::iter::from_fn(|| cm.poll_event()).collect()
}

fn message(t: &Transmit) -> CmMessage<'_> {
    CmMad::parse(&t.mad).unwrap().message
}

/// Moves everything `from` wants to send into `to`.
fn carry(from: &mut IbCm, to: &mut IbCm) -> usize {
    let out = sent(from);
    for t in &out {
        let at = MadAddress::new(t.to.remote, t.to.local);
        to.handle_mad(NOW, at, &t.mad);
    }
    out.len()
}

#[test]
fn comm_ids_are_scrambled_counters_and_tids_carry_them_byte_swapped() {
    let mut cm = cm(1, A, 0x6be1_d7aa);
    let first = cm.alloc_id();
    // The operand of the rping capture: the first comm ID is 0xaad7e16b.
    assert_eq!(first, CommId(0xaad7_e16b));
    assert_eq!(cm.form_tid(first), 0x0000_0002_6be1_d7aa);
    // The next ones differ in the byte the counter changes.
    assert_eq!(cm.alloc_id(), CommId(0xabd7_e16b));
    assert_eq!(cm.alloc_id(), CommId(0xa8d7_e16b));
    // 0 is never handed out.
    let mut zero = IbCm::new(
        IbCmConfig {
            ca_guid: Guid(1),
            ack_delay: 15,
            hi_tid: 1,
            listen_grace: Duration::ZERO,
        },
        &mut ScriptedRandom::new(&[0], 1),
    );
    assert_ne!(zero.alloc_id(), CommId(0));
}

#[test]
fn a_req_for_a_gid_that_is_not_ours_is_rej_12() {
    let mut a = cm(1, A, 11);
    let mut b = cm(2, B, 22);
    b.listen(SERVICE);
    let other = Gid::from_ip(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 99)));
    let id = a.send_req(NOW, &req_params(other)).unwrap();
    carry(&mut a, &mut b);
    assert_eq!(b.counters().req_invalid_gid, 1);
    let out = sent(&mut b);
    let CmMessage::Rej(r) = message(&out[0]) else {
        panic!("no REJ")
    };
    assert_eq!(r.reason, RejectReason::INVALID_GID);
    assert_eq!(r.ari, &Gid::from_ip(B).octets());
    assert_eq!((r.local_comm_id, r.remote_comm_id), (CommId(0), id));
    assert!(b.is_empty(), "nothing is kept");
    a.handle_mad(NOW, MadAddress::new(A, B), &out[0].mad);
    let ev = events(&mut a);
    assert!(matches!(
        ev[0].kind,
        CmEventKind::RejReceived {
            reason: RejectReason::INVALID_GID,
            ..
        }
    ));
    assert_eq!(a.state(id), Some(CmState::Idle));
}

#[test]
fn calls_out_of_state_are_refused_and_change_nothing() {
    let mut a = cm(1, A, 11);
    let id = a.send_req(NOW, &req_params(Gid::from_ip(B))).unwrap();
    let rep = RepParams {
        qp_num: Qpn::new(1),
        starting_psn: Psn::ZERO,
        responder_resources: 0,
        initiator_depth: 0,
        failover_accepted: 0,
        flow_control: false,
        rnr_retry_count: 7,
        srq: false,
        private_data: &[],
    };
    assert!(matches!(
        a.send_rep(NOW, id, &rep),
        Err(CmError::InvalidState { .. })
    ));
    assert!(a.send_rtu(NOW, id, &[]).is_err());
    assert!(a.send_dreq(NOW, id, &[]).is_err());
    assert!(a.send_drep(NOW, id, &[]).is_err());
    assert!(a.establish(NOW, id).is_err());
    assert!(a.send_mra(NOW, id, 24, &[]).is_err());
    assert_eq!(
        a.send_rtu(NOW, CommId(7), &[]),
        Err(CmError::UnknownId(CommId(7)))
    );
    assert!(matches!(
        a.send_rej(NOW, id, RejectReason::CONSUMER_DEFINED, &[0; 73], &[]),
        Err(CmError::TooLong { max: 72, .. })
    ));
    assert!(matches!(
        a.send_req(
            NOW,
            &ReqParams {
                transport: TransportServiceType::RD,
                ..req_params(Gid::from_ip(B))
            }
        ),
        Err(CmError::Transport(_))
    ));
    assert!(matches!(
        a.init_qp_attr(id, xroce_transport::QpState::Rtr),
        Err(CmError::InvalidState { .. })
    ));
    assert_eq!(a.state(id), Some(CmState::ReqSent));
}

/// Sets up a connection between two CMs up to `until` (on B's side) and returns them
/// with the connection IDs.
fn connected_up_to(until: CmState) -> (IbCm, IbCm, CommId, CommId) {
    let mut a = cm(1, A, 11);
    let mut b = cm(2, B, 22);
    b.listen(SERVICE);
    let ia = a.send_req(NOW, &req_params(Gid::from_ip(B))).unwrap();
    carry(&mut a, &mut b);
    let ib = events(&mut b)[0].id;
    if until == CmState::ReqRcvd {
        return (a, b, ia, ib);
    }
    let rep = RepParams {
        qp_num: Qpn::new(0x22),
        starting_psn: Psn::new(7),
        responder_resources: 1,
        initiator_depth: 1,
        failover_accepted: 0,
        flow_control: false,
        rnr_retry_count: 7,
        srq: false,
        private_data: &[],
    };
    b.send_rep(NOW, ib, &rep).unwrap();
    if until == CmState::RepSent {
        return (a, b, ia, ib);
    }
    carry(&mut b, &mut a);
    events(&mut a);
    a.send_rtu(NOW, ia, &[]).unwrap();
    carry(&mut a, &mut b);
    events(&mut b);
    (a, b, ia, ib)
}

#[test]
fn destroying_a_connection_tells_the_peer_what_linux_tells_it() {
    // (B's state when destroyed, what B sends, what A then reports)
    let (mut a, mut b, ia, ib) = connected_up_to(CmState::ReqRcvd);
    b.destroy(NOW, ib);
    let out = sent(&mut b);
    let CmMessage::Rej(r) = message(&out[0]) else {
        panic!("no REJ")
    };
    assert_eq!(
        (r.reason, r.message_rejected, r.local_comm_id),
        (RejectReason::CONSUMER_DEFINED, MsgResponse::REQ, CommId(0))
    );
    carry(&mut b, &mut a);
    a.handle_mad(NOW, MadAddress::new(A, B), &out[0].mad);
    assert!(matches!(
        events(&mut a)[0].kind,
        CmEventKind::RejReceived { .. }
    ));
    assert_eq!(a.state(ia), Some(CmState::Idle));
    assert!(b.is_empty());

    let (mut a, mut b, _, ib) = connected_up_to(CmState::RepSent);
    sent(&mut b);
    b.destroy(NOW, ib);
    let out = sent(&mut b);
    let CmMessage::Rej(r) = message(&out[0]) else {
        panic!("no REJ")
    };
    assert_eq!(
        (r.reason, r.message_rejected),
        (RejectReason::CONSUMER_DEFINED, MsgResponse::OTHER)
    );
    assert_eq!(b.poll_timeout(), None, "the REP is not sent again");
    a.handle_mad(NOW, MadAddress::new(A, B), &out[0].mad);
    // A's REQ_SENT connection does not know B's comm ID yet: a REJ naming "other" with
    // B's comm ID does not match it (Linux matches it the same way).
    assert_eq!(a.counters().rcvd_unmatched, 1);

    let (mut a, mut b, ia, ib) = connected_up_to(CmState::Established);
    b.destroy(NOW, ib);
    let out = sent(&mut b);
    assert!(matches!(message(&out[0]), CmMessage::Dreq(_)));
    assert_eq!(b.poll_timeout(), None, "one DREQ, no retries");
    a.handle_mad(NOW, MadAddress::new(A, B), &out[0].mad);
    assert!(matches!(
        events(&mut a)[0].kind,
        CmEventKind::DreqReceived { .. }
    ));
    assert_eq!(a.state(ia), Some(CmState::DreqRcvd));
}

#[test]
fn sidr_without_listener_and_destroyed_before_answer() {
    let mut a = cm(1, A, 11);
    let mut b = cm(2, B, 22);
    let p = params::SidrReqParams {
        to: MadAddress::new(A, B),
        service_id: ServiceId(0x0000_0000_0111_0001),
        pkey: Pkey::DEFAULT,
        timeout: std::time::Duration::from_millis(4096),
        max_cm_retries: 15,
        private_data: &[],
    };
    let id = a.send_sidr_req(NOW, &p).unwrap();
    carry(&mut a, &mut b);
    let out = sent(&mut b);
    let CmMessage::SidrRep(r) = message(&out[0]) else {
        panic!("no SIDR_REP")
    };
    assert_eq!((r.status, r.request_id), (SidrStatus::UNSUPPORTED, id));
    // A listener now, and B's consumer goes away before answering: status 2.
    b.listen(p.service_id);
    let id2 = a.send_sidr_req(NOW, &p).unwrap();
    carry(&mut a, &mut b);
    let ib = events(&mut b)[0].id;
    b.destroy(NOW, ib);
    let out = sent(&mut b);
    let CmMessage::SidrRep(r) = message(&out[0]) else {
        panic!("no SIDR_REP")
    };
    assert_eq!((r.status, r.request_id), (SidrStatus::REJECT, id2));
}
