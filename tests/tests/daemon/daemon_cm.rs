//! rdma_cm between two daemons, through the Rust API's requests (what the drop-in
//! librdmacm does for C programs): address and route resolution, a connection accepted
//! with private data that carries a region's key, RDMA WRITE over it, disconnects from
//! either side; a reject with private data, a port nobody listens on, and an application
//! that dies holding a connection.

use std::net::{IpAddr, SocketAddr};

use verbs_shm::client::{
    Access, Context, Cq, EventChannel, Mr, Qp, QpInit, QpType, SendOp, SendWr, Sge,
};
use verbs_shm::cm::{
    CmConnParam, CmEventRecord, CmReply, CmRequest, CmSockAddr, event, port_space,
};
use xroce_lab::daemons::{TwoHosts, counter, wait_completions};
use xroce_lab::{LabConfig, Side, require_root};

/// `IB_CM_REJ_CONSUMER_DEFINED` and `IB_CM_REJ_INVALID_SERVICE_ID`.
const REJ_CONSUMER: i32 = 28;
const REJ_INVALID_SERVICE_ID: i32 = 8;

/// One side: a device, an event channel on it, a PD, a region, a CQ.
struct End {
    ctx: Context,
    events: EventChannel,
    channel: u32,
    mr: Mr,
    cq: Cq,
    pd: verbs_shm::client::Pd,
    ip: IpAddr,
}

fn side(h: &TwoHosts, s: Side) -> End {
    let ctx = h.open(s).expect("open");
    let events = EventChannel::new().unwrap();
    let channel = ctx.cm_register_channel(&events).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.alloc_mr(1 << 16, Access::ALL).unwrap();
    let cq = ctx.create_cq(64, None).unwrap();
    End {
        ctx,
        events,
        channel,
        mr,
        cq,
        pd,
        ip: IpAddr::V4(h.lab.host(s).ipv4),
    }
}

impl End {
    fn cm(&self, r: CmRequest) -> CmReply {
        self.ctx.cm(r).unwrap_or_else(|e| panic!("{e}"))
    }

    fn id(&self) -> u64 {
        match self.cm(CmRequest::CreateId {
            channel: self.channel,
            port_space: port_space::TCP,
            qp_type: 2,
        }) {
            CmReply::Id { id } => id,
            other => panic!("{other:?}"),
        }
    }

    fn qp(&self) -> Qp {
        self.pd
            .create_qp(&QpInit::new(QpType::Rc, &self.cq, &self.cq))
            .unwrap()
    }

    /// Waits up to 10 s for the next event.
    fn event(&self) -> CmEventRecord {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        let mut fds = [PollFd::new(self.events.fd(), PollFlags::POLLIN)];
        let ready = poll(&mut fds, PollTimeout::from(10_000u16)).unwrap();
        assert_eq!(ready, 1, "no rdma_cm event within 10 s");
        self.events.read_event().unwrap()
    }

    fn expect(&self, kind: u32) -> CmEventRecord {
        let e = self.event();
        assert_eq!(
            e.event, kind,
            "event {} (status {}), not {kind}",
            e.event, e.status
        );
        e
    }

    /// Moves `qp` to `states` (raw `ibv_qp_state`s) with the CM's attributes for `id`.
    fn move_qp(&self, id: u64, qp: &Qp, states: &[u32]) {
        for &state in states {
            let CmReply::QpAttr { attr, mask } = self.cm(CmRequest::InitQpAttr { id, state })
            else {
                panic!("no attributes");
            };
            qp.modify(&attr, verbs_shm::client::AttrMask(mask))
                .unwrap_or_else(|e| panic!("to state {state}: {e}"));
        }
    }

    /// `rdma_resolve_addr` and `rdma_resolve_route` toward `to`.
    fn resolve(&self, id: u64, to: SocketAddr) {
        self.cm(CmRequest::ResolveAddr {
            id,
            src: CmSockAddr::NONE,
            dst: to.into(),
            timeout_ms: 2000,
        });
        let e = self.expect(event::ADDR_RESOLVED);
        assert_eq!(e.local.ip(), Some(self.ip));
        self.cm(CmRequest::ResolveRoute {
            id,
            timeout_ms: 2000,
        });
        self.expect(event::ROUTE_RESOLVED);
    }

    /// A new id resolved toward `to` with a QP in INIT, connecting with `private` data:
    /// `rdma_connect`'s steps. Returns the id and its QP.
    fn connect(&self, to: SocketAddr, private: &[u8]) -> (u64, Qp) {
        let id = self.id();
        self.resolve(id, to);
        let qp = self.qp();
        self.move_qp(id, &qp, &[INIT]);
        self.cm(CmRequest::Connect {
            id,
            param: param(&qp, private),
        });
        (id, qp)
    }

    fn listen(&self, port: u16) -> u64 {
        let id = self.id();
        self.cm(CmRequest::Bind {
            id,
            addr: SocketAddr::new(self.ip, port).into(),
        });
        self.cm(CmRequest::Listen { id, backlog: 8 });
        id
    }
}

fn param(qp: &Qp, private: &[u8]) -> CmConnParam {
    CmConnParam {
        private_data: private.to_vec(),
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        qp_num: qp.qpn(),
        ..CmConnParam::default()
    }
}

const INIT: u32 = 1;
const RTR: u32 = 2;
const RTS: u32 = 3;

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn a_connection_carries_a_write_and_is_disconnected_from_either_side() {
    require_root();
    let hosts = TwoHosts::start(&LabConfig::default(), &[]).expect("lab with two daemons");
    for closer in [Side::A, Side::B] {
        let (a, b) = (side(&hosts, Side::A), side(&hosts, Side::B));
        let listener = b.listen(7174);

        let (ca, qa) = a.connect(SocketAddr::new(b.ip, 7174), b"hello from a");

        let req = b.expect(event::CONNECT_REQUEST);
        assert_eq!(req.listen_id, listener);
        assert_eq!(req.qp_num, qa.qpn());
        assert_eq!(&req.private_data[..12], b"hello from a");
        assert_eq!(req.remote.ip(), Some(a.ip));
        let cb = req.id;
        let qb = b.qp();
        b.move_qp(cb, &qb, &[INIT, RTR, RTS]);
        let mut key = b.mr.addr().to_le_bytes().to_vec();
        key.extend_from_slice(&b.mr.rkey().to_le_bytes());
        b.cm(CmRequest::Accept {
            id: cb,
            param: param(&qb, &key),
        });

        let rep = a.expect(event::CONNECT_RESPONSE);
        assert_eq!(rep.qp_num, qb.qpn());
        let addr = u64::from_le_bytes(rep.private_data[..8].try_into().unwrap());
        let rkey = u32::from_le_bytes(rep.private_data[8..12].try_into().unwrap());
        a.move_qp(ca, &qa, &[INIT, RTR, RTS]);
        a.cm(CmRequest::Establish { id: ca });
        b.expect(event::ESTABLISHED);

        // The connection carries data: a WRITE into b's region with the key b sent.
        let data = b"written over an rdma_cm connection";
        assert!(a.mr.write(0, data));
        let sge = [Sge {
            addr: a.mr.addr(),
            length: data.len() as u32,
            lkey: a.mr.lkey(),
        }];
        qa.post_send(&[SendWr::new(
            1,
            SendOp::Write {
                remote_addr: addr,
                rkey,
            },
            &sge,
        )])
        .map_err(|(_, e)| e)
        .unwrap();
        assert_eq!(wait_completions(&a.cq, 1)[0].status, 0);
        let mut got = vec![0u8; data.len()];
        assert!(b.mr.read(0, &mut got));
        assert_eq!(&got[..], &data[..]);

        // Either side disconnects; both hear it.
        let (first, first_id, second, second_id) = match closer {
            Side::A => (&a, ca, &b, cb),
            Side::B => (&b, cb, &a, ca),
        };
        first.cm(CmRequest::Disconnect { id: first_id });
        second.expect(event::DISCONNECTED);
        second.cm(CmRequest::Disconnect { id: second_id });
        first.expect(event::DISCONNECTED);
        for s in [&a, &b] {
            let stats = s.ctx.stats().unwrap();
            assert!(counter(&stats, "cm_gsi_sent") >= 2, "{stats:?}");
            assert_eq!(counter(&stats, "cm_gsi_malformed"), 0);
        }
        b.cm(CmRequest::DestroyId { id: listener });
        for (s, id) in [(&a, ca), (&b, cb)] {
            s.cm(CmRequest::DestroyId { id });
        }
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn rejects_and_a_port_nobody_listens_on_are_reported() {
    require_root();
    let hosts = TwoHosts::start(&LabConfig::default(), &[]).expect("lab with two daemons");
    let (a, b) = (side(&hosts, Side::A), side(&hosts, Side::B));
    b.listen(7175);

    // The listener rejects, with private data.
    let (_ca, _qa) = a.connect(SocketAddr::new(b.ip, 7175), b"");
    let req = b.expect(event::CONNECT_REQUEST);
    b.cm(CmRequest::Reject {
        id: req.id,
        private_data: b"not today".to_vec(),
    });
    let rej = a.expect(event::REJECTED);
    assert_eq!(rej.status, REJ_CONSUMER);
    assert_eq!(&rej.private_data[..9], b"not today");

    // Nobody listens on 7176: the daemon there answers REJ 8.
    let (_c2, _q2) = a.connect(SocketAddr::new(b.ip, 7176), b"");
    let rej = a.expect(event::REJECTED);
    assert_eq!(rej.status, REJ_INVALID_SERVICE_ID);
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn the_peer_of_an_application_that_dies_is_disconnected() {
    require_root();
    let hosts = TwoHosts::start(&LabConfig::default(), &[]).expect("lab with two daemons");
    let (a, b) = (side(&hosts, Side::A), side(&hosts, Side::B));
    b.listen(7177);
    let (ca, qa) = a.connect(SocketAddr::new(b.ip, 7177), b"");
    let req = b.expect(event::CONNECT_REQUEST);
    let qb = b.qp();
    b.move_qp(req.id, &qb, &[INIT, RTR, RTS]);
    b.cm(CmRequest::Accept {
        id: req.id,
        param: param(&qb, b""),
    });
    a.expect(event::CONNECT_RESPONSE);
    a.move_qp(ca, &qa, &[INIT, RTR, RTS]);
    a.cm(CmRequest::Establish { id: ca });
    b.expect(event::ESTABLISHED);
    // b's application goes away without a word: its daemon disconnects for it.
    drop(qb);
    drop(b);
    let e = a.event();
    assert_eq!(e.event, event::DISCONNECTED, "status {}", e.status);
}
