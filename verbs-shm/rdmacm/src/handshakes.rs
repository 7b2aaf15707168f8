//! Connection handshakes through the library against fake daemons and fake libibverbs
//! functions: the QP an id makes and the states it goes through around a connection, in
//! order with what the daemon is asked; what the application is told; synchronous ids and
//! endpoints.

use std::ffi::c_int;
use std::sync::Arc;

use verbs_abi::{IBV_QPS_ERR, IBV_QPS_INIT, IBV_QPT_RC, IBV_QPT_UD, ibv_qp_init_attr};
use verbs_shm::cm::{self, CmConnParam, CmRequest};

use crate::abi::*;
use crate::address;
use crate::channel::Channel;
use crate::cma::{Cma, lock};
use crate::connection;
use crate::event;
use crate::fake::{self, FakeDaemon, addr, journal, record};
use crate::ffi::Errno;
use crate::flows::{bind, create_qp, handle, new_id, next, open_channel, qp_num, resolve};
use crate::id::{self, IdPrivate};
use crate::qp;

/// An active id with a resolved route and a QP, as rping's client has before connecting.
fn active(cma: &'static Cma, daemon: &FakeDaemon, channel: &Arc<Channel>) -> &'static IdPrivate {
    let id = new_id(cma, channel, RDMA_PS_TCP);
    resolve(id, "127.0.0.1:7174").unwrap();
    daemon.send(&record(handle(id), cm::event::ADDR_RESOLVED, 0));
    next(cma, channel);
    id::resolve_route(id, 2000).unwrap();
    daemon.send(&record(handle(id), cm::event::ROUTE_RESOLVED, 0));
    next(cma, channel);
    id
}

#[test]
fn a_qp_gets_cqs_whose_context_is_the_id_and_goes_to_init() {
    let (cma, daemons) = fake::cma(&["127.0.0.1"], 0);
    let channel = open_channel(cma);
    let id = active(cma, &daemons[0], &channel);
    journal();
    create_qp(id, IBV_QPT_RC).unwrap();
    let qpn = qp_num(id);
    assert_eq!(
        journal(),
        [
            "create comp channel",
            "create cq of 32",
            "create comp channel",
            "create cq of 16",
            &format!("create qp {qpn:#x}"),
            &format!("daemon {} init QP attributes", daemons[0].name),
            &format!("modify qp {qpn:#x} to INIT"),
        ]
    );
    let (attr, mask) = fake::modified(qpn, IBV_QPS_INIT).unwrap();
    assert_eq!((attr.qp_access_flags, attr.port_num), (0xe, 1));
    assert_eq!(mask, 1 | 1 << 3 | 1 << 4 | 1 << 5);
    id.with_c(|c| {
        // Safety: the CQs the library made.
        let send = unsafe { &*c.send_cq };
        // Safety: as above.
        let recv = unsafe { &*c.recv_cq };
        assert_eq!(
            send.cq_context,
            id.as_c().cast(),
            "rdma_get_send_comp's assertion"
        );
        assert_eq!(recv.cq_context, id.as_c().cast());
        assert_eq!(send.channel, c.send_cq_channel);
        assert_ne!(c.send_cq, c.recv_cq);
    });
    assert_eq!(
        create_qp(id, IBV_QPT_RC),
        Err(Errno::EINVAL),
        "one QP per id"
    );
    qp::destroy_qp(id).unwrap();
    id.with_c(|c| assert!(c.qp.is_null() && c.send_cq.is_null() && c.recv_cq.is_null()));
    let destroyed = journal();
    assert_eq!(destroyed.iter().filter(|l| *l == "destroy cq").count(), 2);
    assert_eq!(
        destroyed
            .iter()
            .filter(|l| *l == "destroy comp channel")
            .count(),
        2
    );
}

#[test]
fn a_ud_qp_goes_to_rts_at_once_with_the_udp_qkey_and_psn_0() {
    let (cma, daemons) = fake::cma(&["127.0.0.1"], 0);
    let channel = open_channel(cma);
    let id = new_id(cma, &channel, RDMA_PS_UDP);
    resolve(id, "127.0.0.1:7174").unwrap();
    daemons[0].send(&record(handle(id), cm::event::ADDR_RESOLVED, 0));
    next(cma, &channel);
    create_qp(id, IBV_QPT_UD).unwrap();
    let qpn = qp_num(id);
    let states: Vec<String> = journal()
        .into_iter()
        .filter(|l| l.starts_with("modify"))
        .collect();
    assert_eq!(
        states,
        [
            format!("modify qp {qpn:#x} to INIT"),
            format!("modify qp {qpn:#x} to RTR"),
            format!("modify qp {qpn:#x} to RTS"),
        ]
    );
    let (init, _) = fake::modified(qpn, IBV_QPS_INIT).unwrap();
    assert_eq!(init.qkey, RDMA_UDP_QKEY);
    let (rts, mask) = fake::modified(qpn, verbs_abi::IBV_QPS_RTS).unwrap();
    assert_eq!((rts.sq_psn, mask), (0, 1 | 1 << 16));

    // SIDR's answer carries the address vector to reach the peer.
    let mut established = record(handle(id), cm::event::ESTABLISHED, 0);
    established.ud = 1;
    established.qp_num = 0x2b;
    established.qkey = RDMA_UDP_QKEY;
    established.dgid = [9; 16];
    established.sgid_index = 2;
    established.hop_limit = 64;
    daemons[0].send(&established);
    let event = next(cma, &channel);
    // Safety: a UD id's parameters.
    let ud = unsafe { event.param.ud };
    assert_eq!((ud.qp_num, ud.qkey), (0x2b, RDMA_UDP_QKEY));
    assert_eq!(ud.ah_attr.grh.dgid.raw(), [9; 16]);
    assert_eq!(
        (ud.ah_attr.grh.sgid_index, ud.ah_attr.grh.hop_limit),
        (2, 64)
    );
    assert_eq!((ud.ah_attr.is_global, ud.ah_attr.port_num), (1, 1));
}

#[test]
fn a_connect_response_moves_the_qp_to_rts_then_the_rtu_goes_and_it_is_established() {
    let (cma, daemons) = fake::cma(&["127.0.0.1"], 0);
    let channel = open_channel(cma);
    let id = active(cma, &daemons[0], &channel);
    create_qp(id, IBV_QPT_RC).unwrap();
    let qpn = qp_num(id);
    let private = *b"rping";
    let param = rdma_conn_param {
        private_data: private.as_ptr().cast(),
        private_data_len: 5,
        responder_resources: RDMA_MAX_RESP_RES,
        initiator_depth: 1,
        flow_control: 0,
        retry_count: 7,
        rnr_retry_count: 7,
        srq: 0,
        qp_num: 0,
    };
    // Safety: valid parameters with 5 bytes of private data.
    unsafe { connection::connect(id, &param) }.unwrap();
    match lock(&daemons[0].requests).last() {
        Some(CmRequest::Connect { param, .. }) => assert_eq!(
            *param,
            CmConnParam {
                private_data: b"rping".to_vec(),
                responder_resources: 128,
                initiator_depth: 1,
                retry_count: 7,
                rnr_retry_count: 7,
                qp_num: qpn,
                ..CmConnParam::default()
            }
        ),
        other => panic!("{other:?}"),
    }
    journal();
    daemons[0].send(&record(handle(id), cm::event::CONNECT_RESPONSE, 0));
    let event = next(cma, &channel);
    assert_eq!((event.event, event.status), (RDMA_CM_EVENT_ESTABLISHED, 0));
    let name = &daemons[0].name;
    assert_eq!(
        journal(),
        [
            format!("daemon {name} init QP attributes"),
            format!("modify qp {qpn:#x} to INIT"),
            format!("daemon {name} init QP attributes"),
            format!("modify qp {qpn:#x} to RTR"),
            format!("daemon {name} init QP attributes"),
            format!("modify qp {qpn:#x} to RTS"),
            format!("daemon {name} establish"),
        ]
    );
    let (rtr, _) = fake::modified(qpn, verbs_abi::IBV_QPS_RTR).unwrap();
    assert_eq!((rtr.dest_qp_num, rtr.rq_psn), (0x77, 0x1234));
    assert_eq!(rtr.ah_attr.grh.dgid.raw(), [0xfe; 16]);
    let (rts, _) = fake::modified(qpn, verbs_abi::IBV_QPS_RTS).unwrap();
    assert_eq!(
        (rts.sq_psn, rts.timeout, rts.max_rd_atomic),
        (0x4321, 19, 4)
    );

    // Too deep for the device: refused before the daemon is asked.
    let deep = rdma_conn_param {
        responder_resources: 200,
        ..param
    };
    // Safety: valid parameters.
    let refused = unsafe { connection::connect(id, &deep) };
    assert_eq!(refused, Err(Errno::EINVAL));
    // A disconnect: the QP to ERR first, then the DREQ.
    journal();
    connection::disconnect(id).unwrap();
    assert_eq!(
        journal(),
        [
            format!("modify qp {qpn:#x} to ERR"),
            format!("daemon {name} disconnect")
        ]
    );
}

#[test]
fn a_failed_connect_response_is_a_connect_error_and_hides_what_follows() {
    let (cma, daemons) = fake::cma(&["127.0.0.1"], 0);
    let channel = open_channel(cma);
    let id = active(cma, &daemons[0], &channel);
    create_qp(id, IBV_QPT_RC).unwrap();
    let qpn = qp_num(id);
    fake::fail_modify_to(Some(verbs_abi::IBV_QPS_RTR));
    daemons[0].send(&record(handle(id), cm::event::CONNECT_RESPONSE, 0));
    let event = next(cma, &channel);
    assert_eq!(event.event, RDMA_CM_EVENT_CONNECT_ERROR);
    assert_eq!(event.status, -libc::EINVAL);
    assert!(
        fake::modified(qpn, IBV_QPS_ERR).is_some(),
        "the QP went to ERR"
    );
    assert!(!daemons[0].asked().contains(&"establish"));
    daemons[0].send(&record(handle(id), cm::event::REJECTED, 28));
    daemons[0].send(&record(handle(id), cm::event::DISCONNECTED, 0));
    assert_eq!(event::get(cma, &channel), Err(Errno::EAGAIN));
    // Both hidden events count as acknowledged: the destroy does not wait for them.
    id::destroy(id).unwrap();
}

#[test]
fn a_rejection_moves_the_qp_to_err_and_carries_its_reason_and_private_data() {
    let (cma, daemons) = fake::cma(&["127.0.0.1"], 0);
    let channel = open_channel(cma);
    let id = active(cma, &daemons[0], &channel);
    create_qp(id, IBV_QPT_RC).unwrap();
    let mut rejected = record(handle(id), cm::event::REJECTED, 28);
    rejected.private_data_len = 148;
    rejected.private_data[..20].copy_from_slice(b"connection rejected\0");
    daemons[0].send(&rejected);
    let got = event::get(cma, &channel).unwrap();
    // Safety: an event just returned, live until acknowledged.
    let e = unsafe { *got };
    assert_eq!((e.event, e.status), (RDMA_CM_EVENT_REJECTED, 28));
    // Safety: a connected id's parameters.
    let conn = unsafe { e.param.conn };
    // Safety: private data valid until acknowledged, NUL-terminated by the sender.
    let text = unsafe { std::ffi::CStr::from_ptr(conn.private_data.cast()) };
    assert_eq!(text, c"connection rejected");
    event::ack(cma, got).unwrap();
    assert!(fake::modified(qp_num(id), IBV_QPS_ERR).is_some());
}

#[test]
fn a_connect_response_without_a_qp_waits_for_rdma_establish() {
    let (cma, daemons) = fake::cma(&["127.0.0.1"], 0);
    let channel = open_channel(cma);
    let id = active(cma, &daemons[0], &channel);
    let param = rdma_conn_param {
        private_data: std::ptr::null(),
        private_data_len: 0,
        responder_resources: 1,
        initiator_depth: 1,
        flow_control: 0,
        retry_count: 7,
        rnr_retry_count: 7,
        srq: 0,
        qp_num: 0x55,
    };
    // Safety: valid parameters.
    unsafe { connection::connect(id, &param) }.unwrap();
    match lock(&daemons[0].requests).last() {
        Some(CmRequest::Connect { param, .. }) => assert_eq!(param.qp_num, 0x55),
        other => panic!("{other:?}"),
    }
    daemons[0].send(&record(handle(id), cm::event::CONNECT_RESPONSE, 0));
    assert_eq!(next(cma, &channel).event, RDMA_CM_EVENT_CONNECT_RESPONSE);
    assert!(!daemons[0].asked().contains(&"establish"));
    let (attr, mask) = qp::init_qp_attr(id, verbs_abi::IBV_QPS_RTR).unwrap();
    assert_eq!((attr.dest_qp_num, mask & (1 << 20)), (0x77, 1 << 20));
    connection::establish(id).unwrap();
    assert_eq!(daemons[0].asked().last(), Some(&"establish"));
    create_qp(id, IBV_QPT_RC).unwrap();
    assert_eq!(
        connection::establish(id),
        Err(Errno::EINVAL),
        "cma.c's own QP"
    );
}

#[test]
fn an_accept_moves_the_qp_to_rts_before_the_rep() {
    let (cma, daemons) = fake::cma(&["127.0.0.1"], 0);
    let daemon = &daemons[0];
    let channel = open_channel(cma);
    let listener = new_id(cma, &channel, RDMA_PS_TCP);
    bind(listener, "127.0.0.1:7174").unwrap();
    id::listen(listener, 1).unwrap();
    let mut request = record(
        daemon.new_id(handle(listener)),
        cm::event::CONNECT_REQUEST,
        0,
    );
    request.listen_id = handle(listener);
    request.responder_resources = 1;
    request.initiator_depth = 1;
    daemon.send(&request);
    let event = next(cma, &channel);
    let child = IdPrivate::lookup(cma, event.id).unwrap();
    create_qp(child, IBV_QPT_RC).unwrap();
    let qpn = qp_num(child);
    journal();
    // Safety: NULL parameters: the QP is the id's.
    unsafe { connection::accept(child, std::ptr::null()) }.unwrap();
    let name = &daemon.name;
    assert_eq!(
        journal(),
        [
            format!("daemon {name} init QP attributes"),
            format!("modify qp {qpn:#x} to INIT"),
            format!("daemon {name} init QP attributes"),
            format!("modify qp {qpn:#x} to RTR"),
            format!("daemon {name} init QP attributes"),
            format!("modify qp {qpn:#x} to RTS"),
            format!("daemon {name} accept"),
        ]
    );
    // RDMA_MAX_* is the peer's depth, within the device's.
    let (rtr, _) = fake::modified(qpn, verbs_abi::IBV_QPS_RTR).unwrap();
    assert_eq!(rtr.max_dest_rd_atomic, 1);
    match lock(&daemon.requests).last() {
        Some(CmRequest::Accept { param, .. }) => {
            assert_eq!((param.qp_num, param.retry_count), (qpn, 7));
            assert_eq!((param.responder_resources, param.initiator_depth), (1, 1));
        }
        other => panic!("{other:?}"),
    }
    // An id without a QP needs parameters.
    let bare = new_id(cma, &channel, RDMA_PS_TCP);
    // Safety: NULL parameters.
    let refused = unsafe { connection::accept(bare, std::ptr::null()) };
    assert_eq!(refused, Err(Errno::EINVAL));
}

#[test]
fn a_synchronous_id_waits_for_each_event_and_keeps_it() {
    let (cma, daemons) = fake::cma(&["127.0.0.1"], 0);
    daemons[0]
        .auto
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let id = id::create(cma, None, std::ptr::null_mut(), RDMA_PS_TCP, IBV_QPT_RC).unwrap();
    resolve(id, "127.0.0.1:7174").unwrap();
    let first = id.with_c(|c| c.event);
    // Safety: the id's kept event, live until the next call acknowledges it.
    assert_eq!(unsafe { (*first).event }, RDMA_CM_EVENT_ADDR_RESOLVED);
    id::resolve_route(id, 2000).unwrap();
    let second = id.with_c(|c| c.event);
    // Safety: as above.
    assert_eq!(unsafe { (*second).event }, RDMA_CM_EVENT_ROUTE_RESOLVED);
    assert_eq!(lock(&cma.events).len(), 1, "the first was acknowledged");
    // A rejection is ECONNREFUSED.
    daemons[0]
        .auto
        .store(false, std::sync::atomic::Ordering::Relaxed);
    daemons[0].send(&record(handle(id), cm::event::REJECTED, 28));
    let param = rdma_conn_param {
        private_data: std::ptr::null(),
        private_data_len: 0,
        responder_resources: 0,
        initiator_depth: 0,
        flow_control: 0,
        retry_count: 7,
        rnr_retry_count: 7,
        srq: 0,
        qp_num: 0x30,
    };
    // Safety: valid parameters.
    let refused = unsafe { connection::connect(id, &param) };
    assert_eq!(refused, Err(Errno(libc::ECONNREFUSED)));
    id::destroy(id).unwrap();
    assert!(
        lock(&cma.events).is_empty(),
        "the kept event went with the id"
    );
}

#[test]
fn a_synchronous_listener_hands_each_request_over_with_its_qp() {
    let (cma, daemons) = fake::cma(&["127.0.0.1"], 0);
    let mut attr = ibv_qp_init_attr::default();
    attr.cap.max_send_wr = 8;
    attr.cap.max_recv_wr = 8;
    let src = address::storage(Some(addr("127.0.0.1:7471")));
    let res = rdma_addrinfo {
        ai_flags: RAI_PASSIVE,
        ai_family: libc::AF_INET,
        ai_qp_type: IBV_QPT_RC as c_int,
        ai_port_space: RDMA_PS_TCP,
        ai_src_len: 16,
        ai_src_addr: (&raw const src).cast_mut().cast(),
        ..rdma_addrinfo::default()
    };
    // Safety: a valid passive address list and QP attributes.
    let listen =
        unsafe { crate::endpoint::create_ep(cma, &res, std::ptr::null_mut(), &mut attr) }.unwrap();
    let listener = IdPrivate::lookup(cma, listen).unwrap();
    assert!(lock(&listener.state).sync);
    id::listen(listener, 1).unwrap();
    let mut request = record(
        daemons[0].new_id(handle(listener)),
        cm::event::CONNECT_REQUEST,
        0,
    );
    request.listen_id = handle(listener);
    daemons[0].send(&request);
    journal();
    let child = crate::endpoint::get_request(listener).unwrap();
    let child = IdPrivate::lookup(cma, child).unwrap();
    let log = journal();
    assert!(log.contains(&format!("daemon {} migrate id", daemons[0].name)));
    assert!(log.iter().any(|l| l.ends_with("to INIT")), "{log:?}");
    assert!(
        lock(&child.state).sync,
        "the child has a channel of its own"
    );
    child.with_c(|c| {
        assert!(!c.qp.is_null(), "made with the kept attributes");
        // Safety: the child's kept event.
        assert_eq!(unsafe { (*c.event).event }, RDMA_CM_EVENT_CONNECT_REQUEST);
    });
    crate::endpoint::destroy_ep(child).unwrap();
    crate::endpoint::destroy_ep(listener).unwrap();
    assert!(lock(&cma.ids).live.is_empty());
}
