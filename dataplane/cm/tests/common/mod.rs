//! Helpers shared by the pair tests: listeners, connects and accepts with the parameters
//! rping uses, and waiting for events.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::time::Duration;

use xroce_cm::testing::{Host, Pair};
use xroce_cm::{ConnParam, Event, EventKind, IdHandle, Owner, Route};
use xroce_transport::QpType;
use xroce_wire::{IbMtu, PortSpace, Qpn};

pub const OWNER_A: Owner = Owner(100);
pub const OWNER_B: Owner = Owner(200);
/// rping's port.
pub const PORT: u16 = 7174;
/// Long enough for every retry of a REQ (16 × 6144 ms) and then some.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// A listener of host `h` on `port` of `ps`, bound to the host's address.
pub fn listen(h: &mut Host, owner: Owner, ps: PortSpace, port: u16) -> IdHandle {
    let qp_type = if ps == PortSpace::Udp {
        QpType::Ud
    } else {
        QpType::Rc
    };
    let id = h.cm.create_id(owner, ps, qp_type).unwrap();
    h.cm.bind(id, SocketAddr::new(h.addr, port)).unwrap();
    h.cm.listen(id).unwrap();
    id
}

/// An id of host `from` with its route to `to_addr:port` resolved.
pub fn resolved(from: &mut Host, owner: Owner, ps: PortSpace, to: SocketAddr) -> IdHandle {
    let qp_type = if ps == PortSpace::Udp {
        QpType::Ud
    } else {
        QpType::Rc
    };
    let id = from.cm.create_id(owner, ps, qp_type).unwrap();
    let route = Route {
        local: from.addr,
        remote: to,
        path_mtu: IbMtu::Mtu1024,
        hop_limit: 64,
    };
    from.cm.resolve_route(id, route).unwrap();
    id
}

/// rping's connection parameters, with this QP.
pub fn rping_param(qpn: u32) -> ConnParam {
    ConnParam {
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        qp_num: Qpn::new(qpn),
        ..ConnParam::default()
    }
}

/// A connects to B's `port` (TCP port space) with QP 0x11; returns A's id.
pub fn connect(p: &mut Pair, port: u16) -> IdHandle {
    let to = SocketAddr::new(p.b.addr, port);
    let id = resolved(&mut p.a, OWNER_A, PortSpace::Tcp, to);
    let now = p.now;
    p.a.cm.connect(now, id, &rping_param(0x11)).unwrap();
    id
}

/// Waits for the first event of `kind` on `host` (A or B by closure), returns it.
pub fn wait(p: &mut Pair, limit: Duration, side_b: bool, kind: EventKind) -> Event {
    let found = p.run_until(limit, |p| {
        let h = if side_b { &p.b } else { &p.a };
        h.any(kind).is_some()
    });
    assert!(
        found,
        "no {kind:?} on {} within {limit:?}",
        if side_b { "B" } else { "A" }
    );
    let h = if side_b { &p.b } else { &p.a };
    h.any(kind).cloned().unwrap()
}

/// A full handshake: B listens on `port`, A connects, B accepts with QP 0x22, A
/// establishes. Returns (A's id, B's listener, B's connection id).
pub fn establish(p: &mut Pair, port: u16) -> (IdHandle, IdHandle, IdHandle) {
    let listener = listen(&mut p.b, OWNER_B, PortSpace::Tcp, port);
    let a = connect(p, port);
    let req = wait(p, PATIENCE, true, EventKind::ConnectRequest);
    let now = p.now;
    p.b.cm.accept(now, req.id, &rping_param(0x22)).unwrap();
    wait(p, PATIENCE, false, EventKind::ConnectResponse);
    let now = p.now;
    p.a.cm.establish(now, a).unwrap();
    wait(p, PATIENCE, true, EventKind::Established);
    (a, listener, req.id)
}

/// The CM MADs (UD payloads to QP1) of a capture of Linux rxe in the wire crate's
/// fixtures, in order.
pub fn captured_mads(name: &str) -> Vec<Vec<u8>> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../wire/tests/fixtures")
        .join(name);
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut reader = pcap_file::pcap::PcapReader::new(file).unwrap();
    let mut out = Vec::new();
    while let Some(packet) = reader.next_packet() {
        let packet = packet.unwrap();
        if let Ok(frame) = xroce_wire::Frame::parse(&packet.data)
            && frame.ib.bth.dest_qp == xroce_wire::mad::GSI_QPN
        {
            out.push(frame.payload.to_vec());
        }
    }
    out
}
