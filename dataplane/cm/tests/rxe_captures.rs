//! The CM against the MADs Linux rxe put on the wire (the rping and ib_write_bw -R
//! captures): fed the captured REQ, the passive side answers with the REP rxe's kernel
//! sent; fed the captured REP, the active side sends the captured RTU; and with the
//! randomness the captures imply (comm IDs, PSNs, ports), every MAD we send is the
//! captured one, byte for byte.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use common::*;
use xroce_cm::{
    Config, ConnParam, EventKind, IdHandle, MadAddress, Owner, RdmaCm, Route, ScriptedRandom,
    Transmit,
};
use xroce_transport::{Instant, QpType};
use xroce_wire::cm::{RepPacket, RepRepr};
use xroce_wire::{CmMad, CmMessage, Guid, IbMtu, PortSpace, Qpn};

const SERVER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2));
const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 77, 0, 3));
const SERVER_GUID: Guid = Guid(0x5054_00ff_fe77_0002);
const CLIENT_GUID: Guid = Guid(0x5054_00ff_fe77_0003);
const NOW: Instant = Instant::from_nanos(1_000_000);

/// The random operand that makes the first comm ID of a CM `comm_id`.
fn operand_for(comm_id: u32) -> u32 {
    comm_id.swap_bytes()
}

fn cm(addr: IpAddr, guid: Guid, hi_tid: u32, random: &[u32]) -> RdmaCm {
    let mut config = Config::new(guid);
    config.mad_hi_tid = hi_tid;
    let mut cm = RdmaCm::new(config, Box::new(ScriptedRandom::new(random, 7)));
    cm.add_local_address(addr);
    cm
}

fn from_client() -> MadAddress {
    MadAddress::new(SERVER, CLIENT)
}

fn from_server() -> MadAddress {
    MadAddress::new(CLIENT, SERVER)
}

fn sent(cm: &mut RdmaCm) -> Vec<Transmit> {
    std::iter::from_fn(|| cm.poll_transmit()).collect()
}

fn events(cm: &mut RdmaCm) -> Vec<xroce_cm::Event> {
    std::iter::from_fn(|| cm.poll_event()).collect()
}

fn listener(cm: &mut RdmaCm, port: u16) -> IdHandle {
    let id = cm.create_id(Owner(1), PortSpace::Tcp, QpType::Rc).unwrap();
    cm.bind(id, SocketAddr::new(SERVER, port)).unwrap();
    cm.listen(id).unwrap();
    id
}

fn param(qpn: u32, resources: u8) -> ConnParam {
    ConnParam {
        responder_resources: resources,
        initiator_depth: resources,
        retry_count: 7,
        rnr_retry_count: 7,
        qp_num: Qpn::new(qpn),
        ..ConnParam::default()
    }
}

#[test]
fn passive_side_answers_rpings_req_with_rxes_rep_byte_for_byte() {
    let mads = captured_mads("rping_rdma_cm.pcap");
    let (req, rep, rtu, dreq, drep) = (&mads[0], &mads[1], &mads[2], &mads[3], &mads[4]);
    // Draws: the comm ID operand, the listener's PSN, the new connection's PSN.
    let mut server = cm(
        SERVER,
        SERVER_GUID,
        2,
        &[operand_for(0x8872_6210), 0, 0xa8d369],
    );
    let l = listener(&mut server, 7174);

    server.handle_mad(NOW, from_client(), req);
    let ev = events(&mut server);
    assert_eq!(ev.len(), 1);
    assert_eq!(
        (ev[0].kind, ev[0].listen_id),
        (EventKind::ConnectRequest, Some(l))
    );
    let conn = ev[0].conn().unwrap();
    assert_eq!(
        (conn.qp_num, conn.responder_resources, conn.initiator_depth),
        (0x1a, 1, 1)
    );
    let info = server.id(ev[0].id).unwrap();
    assert_eq!(info.remote, Some(SocketAddr::new(CLIENT, 35151)));
    assert_eq!(info.local, Some(SocketAddr::new(SERVER, 7174)));
    assert!(sent(&mut server).is_empty(), "the MRA is held back");

    server.accept(NOW, ev[0].id, &param(0x1a, 1)).unwrap();
    let out = sent(&mut server);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].to, from_client(), "to the client's QP1");
    assert_eq!(&out[0].mad[..], &rep[..], "the REP rxe's kernel sent");

    server.handle_mad(NOW, from_client(), rtu);
    let ev2 = events(&mut server);
    assert_eq!(
        ev2.iter().map(|e| e.kind).collect::<Vec<_>>(),
        [EventKind::Established]
    );

    server.handle_mad(NOW, from_client(), dreq);
    let ev3 = events(&mut server);
    assert_eq!(
        ev3.iter().map(|e| e.kind).collect::<Vec<_>>(),
        [EventKind::Disconnected]
    );
    server.disconnect(NOW, ev[0].id).unwrap();
    let out = sent(&mut server);
    assert_eq!(out.len(), 1);
    assert_eq!(&out[0].mad[..], &drep[..], "the DREP rxe's kernel sent");
    let c = server.counters();
    assert_eq!((c.rcvd_mads, c.rcvd_delivered), (3, 3));
}

#[test]
fn the_rep_to_a_captured_req_carries_what_rxe_sends_whatever_the_randomness() {
    let mads = captured_mads("rping_rdma_cm.pcap");
    let mut server = cm(SERVER, SERVER_GUID, 1, &[]);
    listener(&mut server, 7174);
    server.handle_mad(NOW, from_client(), &mads[0]);
    let ev = events(&mut server);
    let id = ev[0].id;
    server.accept(NOW, id, &param(0x33, 1)).unwrap();
    let out = sent(&mut server);
    let ours = CmMad::parse(&out[0].mad).unwrap();
    let theirs = CmMad::parse(&mads[1]).unwrap();
    assert_eq!(
        ours.transaction_id, theirs.transaction_id,
        "the REQ's TID, echoed"
    );
    assert_eq!(ours.attribute_modifier, 0);
    let (CmMessage::Rep(o), CmMessage::Rep(t)) = (ours.message, theirs.message) else {
        panic!("not REPs");
    };
    // Ours are ours; the rest is what rxe's kernel sends.
    assert_eq!(o.remote_comm_id, t.remote_comm_id);
    assert_eq!(o.local_qpn, Qpn::new(0x33));
    assert_eq!(o.local_ca_guid, SERVER_GUID);
    assert_eq!(o.starting_psn, server.id(id).unwrap().seq_num);
    assert_ne!(o.local_comm_id.0, 0);
    let normalized = RepRepr {
        local_comm_id: t.local_comm_id,
        local_qpn: t.local_qpn,
        starting_psn: t.starting_psn,
        local_ca_guid: t.local_ca_guid,
        ..o
    };
    assert_eq!(normalized, t);
    // The field-by-field view of what that means.
    assert_eq!(
        (o.target_ack_delay, o.failover_accepted, o.rnr_retry_count),
        (15, 0, 7)
    );
    assert_eq!((o.responder_resources, o.initiator_depth), (1, 1));
    assert!(!o.end_to_end_flow_control && !o.srq);
    assert_eq!((o.local_qkey.0, o.local_eecn, o.vendor_id), (0, 0, 0));
    let p = RepPacket::new_checked(&out[0].mad[24..]).unwrap();
    assert!(p.private_data().iter().all(|&b| b == 0));
}

#[test]
fn active_side_sends_rpings_req_rtu_and_dreq_byte_for_byte() {
    let mads = captured_mads("rping_rdma_cm.pcap");
    // Draws: the comm ID operand, the id's PSN (the REQ's starting PSN).
    let mut client = cm(
        CLIENT,
        CLIENT_GUID,
        2,
        &[operand_for(0xaad7_e16b), 0xffe37a],
    );
    let id = client
        .create_id(Owner(1), PortSpace::Tcp, QpType::Rc)
        .unwrap();
    client.bind(id, SocketAddr::new(CLIENT, 35151)).unwrap();
    let route = Route {
        local: CLIENT,
        remote: SocketAddr::new(SERVER, 7174),
        path_mtu: IbMtu::Mtu1024,
        hop_limit: 64,
    };
    client.resolve_route(id, route).unwrap();
    client.connect(NOW, id, &param(0x1a, 1)).unwrap();
    let out = sent(&mut client);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].to, from_server());
    assert_eq!(&out[0].mad[..], &mads[0][..], "the REQ rxe's kernel sent");

    client.handle_mad(NOW, from_server(), &mads[1]);
    let ev = events(&mut client);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].kind, EventKind::ConnectResponse);
    assert_eq!(ev[0].conn().unwrap().qp_num, 0x1a);
    assert!(
        sent(&mut client).is_empty(),
        "the MRA for the REP is held back"
    );
    client.establish(NOW, id).unwrap();
    let out = sent(&mut client);
    assert_eq!(&out[0].mad[..], &mads[2][..], "the RTU rxe's kernel sent");

    client.disconnect(NOW, id).unwrap();
    let out = sent(&mut client);
    assert_eq!(&out[0].mad[..], &mads[3][..], "the DREQ rxe's kernel sent");
    client.handle_mad(NOW, from_server(), &mads[4]);
    let ev = events(&mut client);
    assert_eq!(
        ev.iter().map(|e| e.kind).collect::<Vec<_>>(),
        [EventKind::Disconnected]
    );
}

#[test]
fn write_bw_first_connection_both_sides_and_the_servers_own_dreq() {
    // ib_write_bw -R: responder resources 0, the server disconnects the first connection.
    let mads = captured_mads("write_bw_rdma_cm.pcap");
    assert_eq!(mads.len(), 10);
    let (req, rep, rtu, dreq_server, drep_client) =
        (&mads[0], &mads[1], &mads[2], &mads[8], &mads[9]);

    let mut client = cm(
        CLIENT,
        CLIENT_GUID,
        2,
        &[operand_for(0xabd7_e16b), 0xe09a13],
    );
    let a = client
        .create_id(Owner(1), PortSpace::Tcp, QpType::Rc)
        .unwrap();
    client.bind(a, SocketAddr::new(CLIENT, 35594)).unwrap();
    let route = Route {
        local: CLIENT,
        remote: SocketAddr::new(SERVER, 18515),
        path_mtu: IbMtu::Mtu1024,
        hop_limit: 64,
    };
    client.resolve_route(a, route).unwrap();
    client.connect(NOW, a, &param(0x1b, 0)).unwrap();
    assert_eq!(&sent(&mut client)[0].mad[..], &req[..]);

    let mut server = cm(
        SERVER,
        SERVER_GUID,
        2,
        &[operand_for(0x8a72_6210), 0, 0xdca268],
    );
    listener(&mut server, 18515);
    server.handle_mad(NOW, from_client(), req);
    let b = events(&mut server)[0].id;
    server.accept(NOW, b, &param(0x1b, 0)).unwrap();
    assert_eq!(&sent(&mut server)[0].mad[..], &rep[..]);

    client.handle_mad(NOW, from_server(), rep);
    events(&mut client);
    client.establish(NOW, a).unwrap();
    assert_eq!(&sent(&mut client)[0].mad[..], &rtu[..]);
    server.handle_mad(NOW, from_client(), rtu);
    events(&mut server);

    // Without READ resources the QP gets remote write only.
    let (init, _) = server
        .init_qp_attr(b, xroce_transport::QpState::Init)
        .unwrap();
    assert_eq!(init.access, xroce_transport::Access::REMOTE_WRITE);

    server.disconnect(NOW, b).unwrap();
    assert_eq!(
        &sent(&mut server)[0].mad[..],
        &dreq_server[..],
        "the server's DREQ"
    );
    client.handle_mad(NOW, from_server(), dreq_server);
    assert_eq!(events(&mut client)[0].kind, EventKind::Disconnected);
    client.disconnect(NOW, a).unwrap();
    assert_eq!(
        &sent(&mut client)[0].mad[..],
        &drep_client[..],
        "the client's DREP"
    );
    server.handle_mad(NOW, from_client(), drep_client);
    assert_eq!(events(&mut server)[0].kind, EventKind::Disconnected);
}
