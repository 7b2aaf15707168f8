//! What every counter test does: two connected hosts, work requests, frames taken from one
//! host and given to the other (sometimes rewritten), and the check that exactly the
//! expected drop/NAK counters moved.

use xroce_transport::testing::{Connection, Host, connect};
use xroce_transport::{
    Access, AttrMask, Counter, Counters, Gather, Instant, QpAttr, QpState, QpType, RecvWqe,
    SendFlags, SendOp, SendWqe, SgeList, UdDest,
};
use xroce_wire::{
    AethRepr, BthRepr, EthernetAddress, Frame, FrameRepr, IbRepr, Opcode, Psn, Qpn, Syndrome,
};

pub(crate) const NOW: Instant = Instant::ZERO;
pub(crate) const QA: Qpn = Qpn::new(0x11);
pub(crate) const QB: Qpn = Qpn::new(0x22);
pub(crate) const BASE: u64 = 0x10_0000;
pub(crate) const KEY: u32 = 0x1234;
pub(crate) const RKEY: u32 = KEY | 0x8000_0000;
/// The first PSN A sends (`Connection::default().psn_a`).
pub(crate) const PSN_A: u32 = 0x100;

pub(crate) fn pair_with(qp_type: QpType, c: &Connection) -> (Host, Host) {
    let mut a = Host::new(1);
    let mut b = Host::new(2);
    a.add_region(KEY, BASE, 1 << 16, Access::ALL);
    b.add_region(KEY, BASE, 1 << 16, Access::ALL);
    connect(&mut a, QA, &mut b, QB, qp_type, c, NOW);
    (a, b)
}

pub(crate) fn pair(qp_type: QpType) -> (Host, Host) {
    pair_with(qp_type, &Connection::default())
}

/// Every frame `host` wants to send now.
pub(crate) fn take(host: &mut Host) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; xroce_transport::frame::MAX_FRAME];
    let mut out = Vec::new();
    while let Some(t) = host.endpoint.poll_transmit(NOW, &mut buf, &mut host.mem) {
        out.push(buf[..t.len].to_vec());
    }
    out
}

pub(crate) fn give(host: &mut Host, frame: &[u8]) {
    host.endpoint.handle_frame(NOW, frame, &mut host.mem);
}

pub(crate) fn wqe(wr_id: u64, op: SendOp, offset: u64, len: u32) -> SendWqe {
    SendWqe {
        wr_id,
        op,
        flags: SendFlags::SIGNALED,
        data: Gather::Sges(SgeList::single(BASE + offset, len, KEY)),
        ud: None,
    }
}

pub(crate) fn write(len: u32) -> SendWqe {
    let op = SendOp::Write {
        remote_addr: BASE + 0x8000,
        rkey: RKEY,
    };
    wqe(1, op, 0, len)
}

pub(crate) fn read(len: u32) -> SendWqe {
    let op = SendOp::Read {
        remote_addr: BASE + 0x8000,
        rkey: RKEY,
    };
    wqe(1, op, 0, len)
}

pub(crate) fn fetch_add(wr_id: u64) -> SendWqe {
    let op = SendOp::FetchAdd {
        remote_addr: BASE + 0x8000,
        rkey: RKEY,
        add: 1,
    };
    wqe(wr_id, op, 8 * wr_id, 8)
}

pub(crate) fn recv(wr_id: u64, len: u32) -> RecvWqe {
    RecvWqe {
        wr_id,
        sges: SgeList::single(BASE + 0x4000, len, KEY),
    }
}

/// Posts `w` on A and returns the frames A sends for it.
pub(crate) fn request(a: &mut Host, w: SendWqe) -> Vec<Vec<u8>> {
    a.endpoint.post_send(NOW, QA, w).unwrap();
    take(a)
}

pub(crate) fn counters(host: &Host) -> Counters {
    host.endpoint.counters().clone()
}

/// Since `before`, exactly the drop/NAK counters in `expected` moved, each by its amount.
#[track_caller]
pub(crate) fn assert_counted(host: &Host, before: &Counters, expected: &[(Counter, u64)]) {
    let after = host.endpoint.counters();
    for &c in Counter::ALL.iter().filter(|c| c.is_drop_or_nak()) {
        let moved = after.value(c) - before.value(c);
        let want = expected
            .iter()
            .find(|(e, _)| *e == c)
            .map_or(0, |&(_, n)| n);
        assert_eq!(
            moved,
            want,
            "{} moved by {moved}, expected {want}",
            c.name()
        );
    }
    for (c, _) in expected {
        assert!(c.is_drop_or_nak(), "{} is not a drop/NAK counter", c.name());
    }
}

/// Gives `frame` to `host`: exactly the drop/NAK counters in `expected` move, each by its
/// amount.
#[track_caller]
pub(crate) fn give_counting(host: &mut Host, frame: &[u8], expected: &[(Counter, u64)]) {
    let before = counters(host);
    give(host, frame);
    assert_counted(host, &before, expected);
}

/// A frame taken apart, edited and put together again (with a correct ICRC).
pub(crate) fn rewrite(
    frame: &[u8],
    edit: impl FnOnce(&mut FrameRepr, &mut IbRepr, &mut Vec<u8>),
) -> Vec<u8> {
    let f = Frame::parse(frame).unwrap();
    let (mut headers, mut ib, mut payload) = (f.headers, f.ib, f.payload.to_vec());
    edit(&mut headers, &mut ib, &mut payload);
    emit(&headers, &ib, &payload)
}

pub(crate) fn emit(headers: &FrameRepr, ib: &IbRepr, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; 8192];
    let at = headers.header_len();
    let n = ib.emit(&mut buf[at..], payload.len()).unwrap();
    buf[at + n..at + n + payload.len()].copy_from_slice(payload);
    let len = headers.emit(&mut buf, n + payload.len()).unwrap();
    buf.truncate(len);
    buf
}

/// A response from B to A built from scratch.
pub(crate) fn response(a: &Host, b: &Host, ib: IbRepr, payload: &[u8]) -> Vec<u8> {
    let headers = FrameRepr::ipv4(
        EthernetAddress(b.mac),
        EthernetAddress(a.mac),
        b.gid.to_ipv4().unwrap(),
        a.gid.to_ipv4().unwrap(),
        0xc000,
    );
    emit(&headers, &ib, payload)
}

pub(crate) fn ack(psn: u32, syndrome: Syndrome, msn: u32) -> IbRepr {
    let mut ib = IbRepr::new(BthRepr::new(Opcode::RC_ACKNOWLEDGE, QA, Psn::new(psn)));
    ib.aeth = Some(AethRepr { syndrome, msn });
    ib
}

pub(crate) fn move_to(host: &mut Host, qpn: Qpn, state: QpState) {
    let attr = QpAttr {
        qp_state: state,
        ..QpAttr::default()
    };
    host.endpoint
        .modify_qp(NOW, qpn, &attr, AttrMask::STATE)
        .unwrap();
}

/// The IB headers and payload of frames (what is left when the IPv4 identification is not
/// compared).
pub(crate) fn ib_parts(frames: &[Vec<u8>]) -> Vec<(IbRepr, Vec<u8>)> {
    frames
        .iter()
        .map(|f| {
            let f = Frame::parse(f).unwrap();
            (f.ib, f.payload.to_vec())
        })
        .collect()
}

/// The syndrome of the one frame in `frames`, which must be an ACK/NAK.
pub(crate) fn syndrome(frames: &[Vec<u8>]) -> Syndrome {
    assert_eq!(frames.len(), 1);
    Frame::parse(&frames[0]).unwrap().ib.aeth.unwrap().syndrome
}

pub(crate) fn ud_send(a: &mut Host, b: &Host, len: u32, qkey: u32) -> Vec<Vec<u8>> {
    let w = SendWqe {
        ud: Some(UdDest {
            path: a.path_to(b),
            remote_qpn: QB.value(),
            remote_qkey: qkey,
        }),
        ..wqe(1, SendOp::Send, 0, len)
    };
    request(a, w)
}
