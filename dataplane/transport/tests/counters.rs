//! Counter coverage: every way the transport drops a packet, and every NAK it sends or
//! receives, moves exactly one counter (`counters.rs`).
//!
//! Each test triggers one path with hand-delivered frames (taken from the peer, sometimes
//! rewritten, sometimes built from scratch with the wire crate) and asserts, for each host,
//! which drop/NAK counters ([`Counter::is_drop_or_nak`]) moved and by how much — every other
//! one must not have moved.

use xroce_transport::testing::{Connection, Host, connect, qp_config};
use xroce_transport::{
    Access, AttrMask, Counter, Counters, Gather, Instant, QpAttr, QpState, QpType, RecvWqe,
    SendFlags, SendOp, SendWqe, SgeList, UdDest, WcStatus,
};
use xroce_wire::{
    AethRepr, BthRepr, EthernetAddress, Frame, FrameRepr, IbRepr, NakCode, Opcode, Pkey, Psn, Qpn,
    RethRepr, Rkey, Syndrome,
};

const NOW: Instant = Instant::ZERO;
const QA: Qpn = Qpn::new(0x11);
const QB: Qpn = Qpn::new(0x22);
const BASE: u64 = 0x10_0000;
const KEY: u32 = 0x1234;
const RKEY: u32 = KEY | 0x8000_0000;
/// The first PSN A sends (`Connection::default().psn_a`).
const PSN_A: u32 = 0x100;

// ---------------------------------------------------------------------------------------
// Helpers.

fn pair_with(qp_type: QpType, c: &Connection) -> (Host, Host) {
    let mut a = Host::new(1);
    let mut b = Host::new(2);
    a.add_region(KEY, BASE, 1 << 16, Access::ALL);
    b.add_region(KEY, BASE, 1 << 16, Access::ALL);
    connect(&mut a, QA, &mut b, QB, qp_type, c, NOW);
    (a, b)
}

fn pair(qp_type: QpType) -> (Host, Host) {
    pair_with(qp_type, &Connection::default())
}

/// Every frame `host` wants to send now.
fn take(host: &mut Host) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; xroce_transport::frame::MAX_FRAME];
    let mut out = Vec::new();
    while let Some(t) = host.endpoint.poll_transmit(NOW, &mut buf, &mut host.mem) {
        out.push(buf[..t.len].to_vec());
    }
    out
}

fn give(host: &mut Host, frame: &[u8]) {
    host.endpoint.handle_frame(NOW, frame, &mut host.mem);
}

fn wqe(wr_id: u64, op: SendOp, offset: u64, len: u32) -> SendWqe {
    SendWqe {
        wr_id,
        op,
        flags: SendFlags::SIGNALED,
        data: Gather::Sges(SgeList::single(BASE + offset, len, KEY)),
        ud: None,
    }
}

fn write(len: u32) -> SendWqe {
    let op = SendOp::Write {
        remote_addr: BASE + 0x8000,
        rkey: RKEY,
    };
    wqe(1, op, 0, len)
}

fn read(len: u32) -> SendWqe {
    let op = SendOp::Read {
        remote_addr: BASE + 0x8000,
        rkey: RKEY,
    };
    wqe(1, op, 0, len)
}

fn fetch_add(wr_id: u64) -> SendWqe {
    let op = SendOp::FetchAdd {
        remote_addr: BASE + 0x8000,
        rkey: RKEY,
        add: 1,
    };
    wqe(wr_id, op, 8 * wr_id, 8)
}

fn recv(wr_id: u64, len: u32) -> RecvWqe {
    RecvWqe {
        wr_id,
        sges: SgeList::single(BASE + 0x4000, len, KEY),
    }
}

/// Posts `w` on A and returns the frames A sends for it.
fn request(a: &mut Host, w: SendWqe) -> Vec<Vec<u8>> {
    a.endpoint.post_send(NOW, QA, w).unwrap();
    take(a)
}

fn counters(host: &Host) -> Counters {
    host.endpoint.counters().clone()
}

/// Since `before`, exactly the drop/NAK counters in `expected` moved, each by its amount.
#[track_caller]
fn assert_counted(host: &Host, before: &Counters, expected: &[(Counter, u64)]) {
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

/// A frame taken apart, edited and put together again (with a correct ICRC).
fn rewrite(frame: &[u8], edit: impl FnOnce(&mut FrameRepr, &mut IbRepr, &mut Vec<u8>)) -> Vec<u8> {
    let f = Frame::parse(frame).unwrap();
    let (mut headers, mut ib, mut payload) = (f.headers, f.ib, f.payload.to_vec());
    edit(&mut headers, &mut ib, &mut payload);
    emit(&headers, &ib, &payload)
}

fn emit(headers: &FrameRepr, ib: &IbRepr, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; 8192];
    let at = headers.header_len();
    let n = ib.emit(&mut buf[at..], payload.len()).unwrap();
    buf[at + n..at + n + payload.len()].copy_from_slice(payload);
    let len = headers.emit(&mut buf, n + payload.len()).unwrap();
    buf.truncate(len);
    buf
}

/// A response from B to A built from scratch.
fn response(a: &Host, b: &Host, ib: IbRepr, payload: &[u8]) -> Vec<u8> {
    let headers = FrameRepr::ipv4(
        EthernetAddress(b.mac),
        EthernetAddress(a.mac),
        b.gid.to_ipv4().unwrap(),
        a.gid.to_ipv4().unwrap(),
        0xc000,
    );
    emit(&headers, &ib, payload)
}

fn ack(psn: u32, syndrome: Syndrome, msn: u32) -> IbRepr {
    let mut ib = IbRepr::new(BthRepr::new(Opcode::RC_ACKNOWLEDGE, QA, Psn::new(psn)));
    ib.aeth = Some(AethRepr { syndrome, msn });
    ib
}

fn move_to(host: &mut Host, qpn: Qpn, state: QpState) {
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
fn ib_parts(frames: &[Vec<u8>]) -> Vec<(IbRepr, Vec<u8>)> {
    frames
        .iter()
        .map(|f| {
            let f = Frame::parse(f).unwrap();
            (f.ib, f.payload.to_vec())
        })
        .collect()
}

/// The syndrome of the one frame in `frames`, which must be an ACK/NAK.
fn syndrome(frames: &[Vec<u8>]) -> Syndrome {
    assert_eq!(frames.len(), 1);
    Frame::parse(&frames[0]).unwrap().ib.aeth.unwrap().syndrome
}

// ---------------------------------------------------------------------------------------
// The frame layer.

#[test]
fn a_bad_icrc_lands_in_rcvd_icrc_err() {
    let (mut a, mut b) = pair(QpType::Rc);
    let mut f = request(&mut a, write(64)).remove(0);
    let n = f.len();
    f[n - 10] ^= 1;
    let before = counters(&b);
    give(&mut b, &f);
    assert_counted(&b, &before, &[(Counter::rcvd_icrc_err, 1)]);
}

#[test]
fn a_truncated_frame_lands_in_rcvd_malformed() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    let before = counters(&b);
    give(&mut b, &f[..40]);
    assert_counted(&b, &before, &[(Counter::rcvd_malformed, 1)]);
}

#[test]
fn a_frame_to_another_address_lands_in_rcvd_wrong_dgid() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    let f = rewrite(&f, |h, _, _| {
        if let xroce_wire::IpRepr::Ipv4(ip) = &mut h.ip {
            ip.dst_addr = [10, 0, 0, 9].into();
        }
    });
    let before = counters(&b);
    give(&mut b, &f);
    assert_counted(&b, &before, &[(Counter::rcvd_wrong_dgid, 1)]);
}

#[test]
fn a_foreign_pkey_lands_in_bad_pkey_cntr() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    let f = rewrite(&f, |_, ib, _| ib.bth.pkey = Pkey(0x1234));
    let before = counters(&b);
    give(&mut b, &f);
    assert_counted(&b, &before, &[(Counter::bad_pkey_cntr, 1)]);
}

#[test]
fn a_cnp_lands_in_rcvd_unsupported_opcode() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    let f = rewrite(&f, |_, ib, payload| {
        *ib = IbRepr::new(BthRepr::new(Opcode(0x81), QB, Psn::new(0)));
        payload.clear();
    });
    let before = counters(&b);
    give(&mut b, &f);
    assert_counted(&b, &before, &[(Counter::rcvd_unsupported_opcode, 1)]);
}

#[test]
fn a_packet_for_no_qp_lands_in_rcvd_unknown_qpn() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    let f = rewrite(&f, |_, ib, _| ib.bth.dest_qp = Qpn::new(0x999));
    let before = counters(&b);
    give(&mut b, &f);
    assert_counted(&b, &before, &[(Counter::rcvd_unknown_qpn, 1)]);
}

// ---------------------------------------------------------------------------------------
// The connection's addresses and the keys (rxe's `check_addr` and `check_keys`).

/// Sets the IP source (and destination) of a frame, keeping its family.
fn readdress(frame: &[u8], src: Option<[u8; 4]>, dst: Option<[u8; 4]>) -> Vec<u8> {
    rewrite(frame, |h, _, _| {
        if let xroce_wire::IpRepr::Ipv4(ip) = &mut h.ip {
            if let Some(src) = src {
                ip.src_addr = src.into();
            }
            if let Some(dst) = dst {
                ip.dst_addr = dst.into();
            }
        }
    })
}

/// The same frame carried over IPv6 between the IPv4-mapped forms of its addresses.
fn over_ipv6_mapped(frame: &[u8]) -> Vec<u8> {
    rewrite(frame, |h, _, _| {
        let xroce_wire::IpRepr::Ipv4(ip) = h.ip else {
            panic!("an IPv4 frame")
        };
        h.ip = xroce_wire::IpRepr::Ipv6(xroce_wire::Ipv6Repr {
            src_addr: ip.src_addr.to_ipv6_mapped(),
            dst_addr: ip.dst_addr.to_ipv6_mapped(),
            next_header: 17,
            payload_len: 0,
            dscp: 0,
            ecn: 0,
            flow_label: 0,
            hop_limit: 64,
        });
        h.ethernet.ethertype = xroce_wire::EtherType::IPV6;
    })
}

#[test]
fn a_request_from_another_address_lands_in_rcvd_wrong_addr() {
    for qp_type in [QpType::Rc, QpType::Uc] {
        let (mut a, mut b) = pair(qp_type);
        let f = request(&mut a, write(64)).remove(0);
        let psn = b.endpoint.qp(QB).unwrap().diagnostics().expected_psn;
        let before = counters(&b);
        // Another address of the peer's host, then another host.
        give(&mut b, &readdress(&f, Some([10, 0, 0, 3]), None));
        give(&mut b, &readdress(&f, Some([192, 168, 1, 1]), None));
        assert_counted(&b, &before, &[(Counter::rcvd_wrong_addr, 2)]);
        assert!(take(&mut b).is_empty(), "{qp_type:?}: no answer");
        assert_eq!(b.endpoint.qp(QB).unwrap().diagnostics().expected_psn, psn);
        assert!(b.mem.region(0).bytes.iter().all(|&x| x == 0));
        // The peer's own frame still goes through.
        give(&mut b, &f);
        assert_eq!(counters(&b).rcvd_wrong_addr, 2);
        assert_ne!(b.endpoint.qp(QB).unwrap().diagnostics().expected_psn, psn);
    }
}

#[test]
fn a_request_to_another_of_our_addresses_lands_in_rcvd_wrong_addr() {
    let (mut a, mut b) = pair(QpType::Rc);
    // B has a second address: a frame to it passes the GID table (rcvd_wrong_dgid) but is
    // not to the address the connection uses.
    let second = xroce_wire::Gid::from_ipv4([10, 0, 0, 12].into());
    b.endpoint.set_gids(vec![b.gid, second]);
    let f = request(&mut a, write(64)).remove(0);
    let before = counters(&b);
    give(&mut b, &readdress(&f, None, Some([10, 0, 0, 12])));
    assert_counted(&b, &before, &[(Counter::rcvd_wrong_addr, 1)]);
    assert!(take(&mut b).is_empty());
}

#[test]
fn an_ipv6_frame_with_the_peers_mapped_address_lands_in_rcvd_wrong_addr() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    let before = counters(&b);
    give(&mut b, &over_ipv6_mapped(&f));
    assert_counted(&b, &before, &[(Counter::rcvd_wrong_addr, 1)]);
    assert!(take(&mut b).is_empty());
}

#[test]
fn a_response_from_another_address_lands_in_rcvd_wrong_addr_and_completes_nothing() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    give(&mut b, &f);
    let acks = take(&mut b);
    assert_eq!(acks.len(), 1);
    let before = counters(&a);
    give(&mut a, &readdress(&acks[0], Some([10, 0, 0, 3]), None));
    assert_counted(&a, &before, &[(Counter::rcvd_wrong_addr, 1)]);
    assert!(
        a.endpoint.poll_completion().is_none(),
        "a forged ACK completes nothing"
    );
    give(&mut a, &acks[0]);
    assert_eq!(
        a.endpoint.poll_completion().unwrap().status,
        WcStatus::Success
    );
}

#[test]
fn a_ud_datagram_from_any_address_is_delivered() {
    let (mut a, mut b) = pair(QpType::Ud);
    b.endpoint.post_recv(NOW, QB, recv(1, 256)).unwrap();
    let qkey = Connection::default().qkey;
    let f = ud_send(&mut a, &b, 64, qkey);
    let before = counters(&b);
    give(&mut b, &readdress(&f[0], Some([192, 168, 1, 1]), None));
    assert_counted(&b, &before, &[]);
    assert_eq!(
        b.endpoint.poll_completion().unwrap().status,
        WcStatus::Success
    );
}

#[test]
fn a_foreign_pkey_for_no_qp_lands_in_rcvd_unknown_qpn_as_in_rxe() {
    // rxe looks the queue pair up before it checks the keys.
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    let f = rewrite(&f, |_, ib, _| {
        ib.bth.pkey = Pkey(0x1234);
        ib.bth.dest_qp = Qpn::new(0x999);
    });
    let before = counters(&b);
    give(&mut b, &f);
    assert_counted(&b, &before, &[(Counter::rcvd_unknown_qpn, 1)]);
}

#[test]
fn a_limited_member_pkey_is_taken_and_a_zero_pkey_is_not() {
    // IBTA 10.9.3: the port's P_Key is the full default (0xffff): the limited default
    // (0x7fff) matches it, any other low 15 bits do not.
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    let before = counters(&b);
    give(&mut b, &rewrite(&f, |_, ib, _| ib.bth.pkey = Pkey(0x8000)));
    assert_counted(&b, &before, &[(Counter::bad_pkey_cntr, 1)]);
    give(&mut b, &rewrite(&f, |_, ib, _| ib.bth.pkey = Pkey(0x7fff)));
    assert_counted(&b, &before, &[(Counter::bad_pkey_cntr, 1)]);
    assert_eq!(
        take(&mut b).len(),
        1,
        "the ACK of the limited member's WRITE"
    );
}

// ---------------------------------------------------------------------------------------
// Queue pair state and type.

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
    let before = counters(&b);
    give(&mut b, &f);
    assert_counted(&b, &before, &[(Counter::rcvd_qp_error, 1)]);
    assert!(take(&mut b).is_empty());
}

#[test]
fn a_uc_opcode_to_an_rc_qp_lands_in_rcvd_wrong_transport() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    let f = rewrite(&f, |_, ib, _| ib.bth.opcode = Opcode::UC_RDMA_WRITE_ONLY);
    let before = counters(&b);
    give(&mut b, &f);
    assert_counted(&b, &before, &[(Counter::rcvd_wrong_transport, 1)]);
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
    let before = counters(&a);
    give(&mut a, &f);
    assert_counted(&a, &before, &[(Counter::rcvd_qp_not_ready, 1)]);
}

#[test]
fn a_response_to_a_qp_in_error_lands_in_rcvd_qp_error() {
    let (mut a, b) = pair(QpType::Rc);
    move_to(&mut a, QA, QpState::Err);
    let f = response(&a, &b, ack(PSN_A, Syndrome::ACK_UNLIMITED, 1), &[]);
    let before = counters(&a);
    give(&mut a, &f);
    assert_counted(&a, &before, &[(Counter::rcvd_qp_error, 1)]);
}

// ---------------------------------------------------------------------------------------
// The RC responder.

#[test]
fn a_psn_gap_is_nakked_once_and_the_rest_of_it_dropped() {
    let (mut a, mut b) = pair(QpType::Rc);
    a.endpoint.post_send(NOW, QA, write(64)).unwrap();
    a.endpoint.post_send(NOW, QA, write(64)).unwrap();
    let f = request(&mut a, write(64));
    let before = counters(&b);
    give(&mut b, &f[1]);
    assert_counted(&b, &before, &[(Counter::out_of_seq_request, 1)]);
    give(&mut b, &f[2]);
    assert_counted(
        &b,
        &before,
        &[
            (Counter::out_of_seq_request, 1),
            (Counter::out_of_seq_dropped, 1),
        ],
    );
    let nak = take(&mut b);
    assert_eq!(syndrome(&nak), Syndrome::Nak(NakCode::PsnSequenceError));
    let before = counters(&a);
    give(&mut a, &nak[0]);
    assert_counted(&a, &before, &[(Counter::rcvd_seq_err, 1)]);
    assert_eq!(a.endpoint.counters().completer_retry_err, 1);
}

#[test]
fn a_duplicate_write_is_acknowledged_again_and_counted_once() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64)).remove(0);
    give(&mut b, &f);
    assert_eq!(take(&mut b).len(), 1);
    let before = counters(&b);
    give(&mut b, &f);
    assert_counted(&b, &before, &[(Counter::duplicate_request, 1)]);
    assert_eq!(syndrome(&take(&mut b)), Syndrome::ACK_UNLIMITED);
}

#[test]
fn a_duplicate_read_is_replayed_and_counted_once() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, read(64)).remove(0);
    give(&mut b, &f);
    let first = take(&mut b);
    let before = counters(&b);
    give(&mut b, &f);
    assert_counted(&b, &before, &[(Counter::duplicate_request, 1)]);
    assert_eq!(ib_parts(&take(&mut b)), ib_parts(&first));
}

#[test]
fn a_duplicate_read_outside_the_resource_lands_in_duplicate_request_no_resource() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, read(64)).remove(0);
    give(&mut b, &f);
    take(&mut b);
    // The same PSN asking for other bytes than the original request did.
    let other = rewrite(&f, |_, ib, _| {
        let reth = ib.reth.as_mut().unwrap();
        reth.va += 4096;
    });
    let before = counters(&b);
    give(&mut b, &other);
    assert_counted(&b, &before, &[(Counter::duplicate_request_no_resource, 1)]);
    assert!(take(&mut b).is_empty());
}

#[test]
fn a_duplicate_atomic_is_answered_from_its_resource_and_counted_once() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, fetch_add(1)).remove(0);
    give(&mut b, &f);
    let first = take(&mut b);
    let before = counters(&b);
    give(&mut b, &f);
    assert_counted(&b, &before, &[(Counter::duplicate_request, 1)]);
    assert_eq!(
        ib_parts(&take(&mut b)),
        ib_parts(&first),
        "the same original value, not executed again"
    );
}

#[test]
fn a_duplicate_atomic_whose_resource_was_recycled_is_dropped_and_counted() {
    let c = Connection {
        max_rd_atomic: 1,
        ..Connection::default()
    };
    let (mut a, mut b) = pair_with(QpType::Rc, &c);
    let f1 = request(&mut a, fetch_add(1)).remove(0);
    give(&mut b, &f1);
    give(&mut a, &take(&mut b)[0]);
    let f2 = request(&mut a, fetch_add(2)).remove(0);
    give(&mut b, &f2);
    take(&mut b);
    let before = counters(&b);
    give(&mut b, &f1);
    assert_counted(&b, &before, &[(Counter::duplicate_request_no_resource, 1)]);
    assert!(take(&mut b).is_empty());
}

#[test]
fn a_send_without_a_receive_is_rnr_nakked() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, wqe(1, SendOp::Send, 0, 64)).remove(0);
    let before = counters(&b);
    give(&mut b, &f);
    assert_counted(&b, &before, &[(Counter::send_rnr_err, 1)]);
    let nak = take(&mut b);
    assert!(matches!(syndrome(&nak), Syndrome::RnrNak { .. }));
    let before = counters(&a);
    give(&mut a, &nak[0]);
    assert_counted(&a, &before, &[(Counter::rcvd_rnr_err, 1)]);
}

/// B NAKs `frames` with `code`, counted in `sent`; A counts the NAK in `rcvd`.
fn nak_round_trip(
    a: &mut Host,
    b: &mut Host,
    frames: &[Vec<u8>],
    code: NakCode,
    sent: Counter,
    rcvd: Counter,
) {
    let before = counters(b);
    for f in frames {
        give(b, f);
    }
    assert_counted(b, &before, &[(sent, 1)]);
    let nak = take(b);
    assert_eq!(syndrome(&nak), Syndrome::Nak(code));
    let before = counters(a);
    give(a, &nak[0]);
    assert_counted(a, &before, &[(rcvd, 1)]);
    assert_eq!(a.endpoint.counters().send_err, 1, "the work request failed");
}

#[test]
fn a_write_to_a_qp_without_remote_write_is_nakked_invalid_request() {
    let c = Connection {
        access: Access::LOCAL_WRITE | Access::REMOTE_READ,
        ..Connection::default()
    };
    let (mut a, mut b) = pair_with(QpType::Rc, &c);
    let f = request(&mut a, write(64));
    nak_round_trip(
        &mut a,
        &mut b,
        &f,
        NakCode::InvalidRequest,
        Counter::sent_nak_invalid_request,
        Counter::rcvd_nak_invalid_request,
    );
}

#[test]
fn a_middle_without_a_first_is_nakked_invalid_request() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(2050));
    // The FIRST, turned into a MIDDLE (same PSN, no RETH).
    let middle = rewrite(&f[0], |_, ib, _| {
        ib.bth.opcode = Opcode::RC_RDMA_WRITE_MIDDLE;
        ib.reth = None;
    });
    nak_round_trip(
        &mut a,
        &mut b,
        &[middle],
        NakCode::InvalidRequest,
        Counter::sent_nak_invalid_request,
        Counter::rcvd_nak_invalid_request,
    );
}

#[test]
fn a_first_shorter_than_the_mtu_is_nakked_invalid_request() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(2050));
    let short = rewrite(&f[0], |_, _, payload| payload.truncate(1000));
    nak_round_trip(
        &mut a,
        &mut b,
        &[short],
        NakCode::InvalidRequest,
        Counter::sent_nak_invalid_request,
        Counter::rcvd_nak_invalid_request,
    );
}

#[test]
fn a_reth_longer_than_2_pow_31_is_nakked_invalid_request() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64));
    let long = rewrite(&f[0], |_, ib, _| {
        ib.reth.as_mut().unwrap().dma_len = (1 << 31) + 1;
    });
    nak_round_trip(
        &mut a,
        &mut b,
        &[long],
        NakCode::InvalidRequest,
        Counter::sent_nak_invalid_request,
        Counter::rcvd_nak_invalid_request,
    );
}

#[test]
fn a_misaligned_atomic_is_nakked_invalid_request() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, fetch_add(1));
    let odd = rewrite(&f[0], |_, ib, _| ib.atomic_eth.as_mut().unwrap().va += 4);
    nak_round_trip(
        &mut a,
        &mut b,
        &[odd],
        NakCode::InvalidRequest,
        Counter::sent_nak_invalid_request,
        Counter::rcvd_nak_invalid_request,
    );
}

#[test]
fn a_read_to_a_qp_that_takes_none_is_nakked_invalid_request() {
    // max_dest_rd_atomic 0 on B (and max_rd_atomic 0 on A, which then posts a WRITE that
    // is turned into a READ on the way).
    let c = Connection {
        max_rd_atomic: 0,
        ..Connection::default()
    };
    let (mut a, mut b) = pair_with(QpType::Rc, &c);
    let f = request(&mut a, write(64));
    let read = rewrite(&f[0], |_, ib, payload| {
        ib.bth.opcode = Opcode::RC_RDMA_READ_REQUEST;
        payload.clear();
    });
    nak_round_trip(
        &mut a,
        &mut b,
        &[read],
        NakCode::InvalidRequest,
        Counter::sent_nak_invalid_request,
        Counter::rcvd_nak_invalid_request,
    );
}

#[test]
fn an_rc_send_longer_than_its_receive_is_nakked_invalid_request() {
    let (mut a, mut b) = pair(QpType::Rc);
    b.endpoint.post_recv(NOW, QB, recv(1, 16)).unwrap();
    let f = request(&mut a, wqe(1, SendOp::Send, 0, 64));
    nak_round_trip(
        &mut a,
        &mut b,
        &f,
        NakCode::InvalidRequest,
        Counter::sent_nak_invalid_request,
        Counter::rcvd_nak_invalid_request,
    );
    let c = b.endpoint.poll_completion().unwrap();
    assert_eq!((c.wr_id, c.status), (1, WcStatus::LocLenErr));
}

#[test]
fn a_send_with_invalidate_of_a_foreign_rkey_is_nakked_invalid_request() {
    let (mut a, mut b) = pair(QpType::Rc);
    b.endpoint.post_recv(NOW, QB, recv(1, 256)).unwrap();
    let inv = SendOp::SendWithInv { rkey: 0x0bad_0001 };
    let f = request(&mut a, wqe(1, inv, 0, 64));
    nak_round_trip(
        &mut a,
        &mut b,
        &f,
        NakCode::InvalidRequest,
        Counter::sent_nak_invalid_request,
        Counter::rcvd_nak_invalid_request,
    );
}

#[test]
fn a_write_with_a_bad_rkey_is_nakked_remote_access() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, write(64));
    let bad = rewrite(&f[0], |_, ib, _| {
        ib.reth.as_mut().unwrap().rkey = Rkey(0xdead);
    });
    nak_round_trip(
        &mut a,
        &mut b,
        &[bad],
        NakCode::RemoteAccessError,
        Counter::sent_nak_remote_access,
        Counter::rcvd_nak_remote_access,
    );
}

#[test]
fn a_send_into_a_receive_with_a_bad_lkey_is_nakked_remote_operational() {
    let (mut a, mut b) = pair(QpType::Rc);
    let bad = RecvWqe {
        wr_id: 9,
        sges: SgeList::single(BASE, 64, 0xbad),
    };
    b.endpoint.post_recv(NOW, QB, bad).unwrap();
    let f = request(&mut a, wqe(1, SendOp::Send, 0, 64));
    nak_round_trip(
        &mut a,
        &mut b,
        &f,
        NakCode::RemoteOperationalError,
        Counter::sent_nak_remote_op,
        Counter::rcvd_nak_remote_op,
    );
}

#[test]
fn a_read_whose_region_goes_away_before_the_response_is_nakked_remote_access() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, read(64));
    let before = counters(&b);
    give(&mut b, &f[0]);
    assert_counted(&b, &before, &[]);
    b.mem.remove(KEY);
    let nak = take(&mut b);
    assert_counted(&b, &before, &[(Counter::sent_nak_remote_access, 1)]);
    assert_eq!(syndrome(&nak), Syndrome::Nak(NakCode::RemoteAccessError));
}

#[test]
fn reads_beyond_the_response_queue_are_dropped_unexecuted_and_counted() {
    // max_dest_rd_atomic 1: room for 1 + 8 responses.
    let c = Connection {
        max_rd_atomic: 1,
        ..Connection::default()
    };
    let (mut a, mut b) = pair_with(QpType::Rc, &c);
    let f = request(&mut a, read(64)).remove(0);
    let at = |i: u32| rewrite(&f, |_, ib, _| ib.bth.psn = Psn::new(PSN_A + i));
    let before = counters(&b);
    for i in 0..9 {
        give(&mut b, &at(i));
    }
    assert_counted(&b, &before, &[]);
    give(&mut b, &at(9));
    assert_counted(&b, &before, &[(Counter::response_queue_full, 1)]);
    // A gap NAK finds no room either: not sent, and not remembered as sent.
    give(&mut b, &at(20));
    assert_counted(&b, &before, &[(Counter::response_queue_full, 2)]);
    assert_eq!(
        take(&mut b).len(),
        9,
        "the nine READs accepted are answered"
    );
    // The READ dropped unexecuted is executed when it comes again.
    give(&mut b, &at(9));
    assert_counted(&b, &before, &[(Counter::response_queue_full, 2)]);
    assert_eq!(take(&mut b).len(), 1);
    give(&mut b, &at(20));
    assert_counted(
        &b,
        &before,
        &[
            (Counter::response_queue_full, 2),
            (Counter::out_of_seq_request, 1),
        ],
    );
    assert_eq!(
        syndrome(&take(&mut b)),
        Syndrome::Nak(NakCode::PsnSequenceError)
    );
}

// ---------------------------------------------------------------------------------------
// The completer.

#[test]
fn a_stale_ack_lands_in_duplicate_response() {
    let (mut a, mut b) = pair(QpType::Rc);
    a.endpoint.post_send(NOW, QA, write(64)).unwrap();
    let f = request(&mut a, write(64));
    give(&mut b, &f[0]);
    let ack1 = take(&mut b);
    give(&mut a, &ack1[0]);
    let before = counters(&a);
    give(&mut a, &ack1[0]);
    assert_counted(&a, &before, &[(Counter::duplicate_response, 1)]);
}

#[test]
fn an_ack_with_nothing_outstanding_lands_in_unexpected_response() {
    let (mut a, b) = pair(QpType::Rc);
    let f = response(&a, &b, ack(PSN_A, Syndrome::ACK_UNLIMITED, 1), &[]);
    let before = counters(&a);
    give(&mut a, &f);
    assert_counted(&a, &before, &[(Counter::unexpected_response, 1)]);
}

#[test]
fn a_read_response_after_a_lost_one_lands_in_response_out_of_seq() {
    let (mut a, mut b) = pair(QpType::Rc);
    let f = request(&mut a, read(2050));
    give(&mut b, &f[0]);
    let responses = take(&mut b);
    assert_eq!(responses.len(), 3);
    let before = counters(&a);
    give(&mut a, &responses[1]);
    assert_counted(&a, &before, &[(Counter::response_out_of_seq, 1)]);
}

#[test]
fn a_plain_ack_for_a_read_lands_in_response_out_of_seq() {
    let (mut a, b) = pair(QpType::Rc);
    request(&mut a, read(64));
    let f = response(&a, &b, ack(PSN_A, Syndrome::ACK_UNLIMITED, 1), &[]);
    let before = counters(&a);
    give(&mut a, &f);
    assert_counted(&a, &before, &[(Counter::response_out_of_seq, 1)]);
    assert_eq!(
        a.endpoint.counters().completer_retry_err,
        1,
        "resent at once"
    );
}

#[test]
fn a_read_response_into_a_local_buffer_that_refuses_it_fails_the_read() {
    // rxe's `do_read`: the requester's own buffer refuses the data (here its lkey is not
    // a region's): the READ completes with a local protection error; no drop, no NAK.
    let (mut a, mut b) = pair(QpType::Rc);
    let op = SendOp::Read {
        remote_addr: BASE + 0x8000,
        rkey: RKEY,
    };
    let mut w = wqe(1, op, 0, 64);
    w.data = Gather::Sges(SgeList::single(BASE, 64, 0x9999));
    let f = request(&mut a, w);
    give(&mut b, &f[0]);
    let response = take(&mut b);
    let before = counters(&a);
    give(&mut a, &response[0]);
    assert_counted(&a, &before, &[]);
    let c = a.endpoint.poll_completion().unwrap();
    assert_eq!((c.wr_id, c.status), (1, WcStatus::LocProtErr));
}

#[test]
fn a_read_response_for_a_write_lands_in_bad_response() {
    let (mut a, b) = pair(QpType::Rc);
    request(&mut a, write(64));
    let mut ib = IbRepr::new(BthRepr::new(
        Opcode::RC_RDMA_READ_RESPONSE_ONLY,
        QA,
        Psn::new(PSN_A),
    ));
    ib.aeth = Some(AethRepr {
        syndrome: Syndrome::ACK_UNLIMITED,
        msn: 1,
    });
    let f = response(&a, &b, ib, &[0; 64]);
    let before = counters(&a);
    give(&mut a, &f);
    assert_counted(&a, &before, &[(Counter::bad_response, 1)]);
    assert_eq!(a.endpoint.qp(QA).unwrap().state(), QpState::Err);
}

// ---------------------------------------------------------------------------------------
// UC.

#[test]
fn uc_packets_of_a_broken_message_land_in_uc_dropped() {
    let (mut a, mut b) = pair(QpType::Uc);
    let f = request(&mut a, write(3000));
    assert_eq!(f.len(), 3);
    let before = counters(&b);
    give(&mut b, &f[0]);
    give(&mut b, &f[2]);
    assert_counted(&b, &before, &[(Counter::uc_dropped, 1)]);
}

#[test]
fn a_uc_duplicate_lands_in_duplicate_request() {
    let (mut a, mut b) = pair(QpType::Uc);
    let f = request(&mut a, write(64));
    give(&mut b, &f[0]);
    let before = counters(&b);
    give(&mut b, &f[0]);
    assert_counted(&b, &before, &[(Counter::duplicate_request, 1)]);
}

#[test]
fn a_uc_send_without_a_receive_lands_in_rcvd_no_recv_wqe() {
    let (mut a, mut b) = pair(QpType::Uc);
    let f = request(&mut a, wqe(1, SendOp::Send, 0, 64));
    let before = counters(&b);
    give(&mut b, &f[0]);
    assert_counted(&b, &before, &[(Counter::rcvd_no_recv_wqe, 1)]);
}

#[test]
fn a_uc_send_too_long_for_the_receive_lands_in_rcvd_length_err() {
    let (mut a, mut b) = pair(QpType::Uc);
    b.endpoint.post_recv(NOW, QB, recv(1, 64)).unwrap();
    let f = request(&mut a, wqe(1, SendOp::Send, 0, 128));
    let before = counters(&b);
    give(&mut b, &f[0]);
    assert_counted(&b, &before, &[(Counter::rcvd_length_err, 1)]);
    assert_eq!(b.endpoint.qp(QB).unwrap().recv_queue_len(), 1, "reused");
}

#[test]
fn a_uc_write_with_a_bad_rkey_lands_in_rcvd_rkey_violation() {
    let (mut a, mut b) = pair(QpType::Uc);
    let f = request(&mut a, write(64));
    let bad = rewrite(&f[0], |_, ib, _| {
        ib.reth = Some(RethRepr {
            rkey: Rkey(0xdead),
            ..ib.reth.unwrap()
        });
    });
    let before = counters(&b);
    give(&mut b, &bad);
    assert_counted(&b, &before, &[(Counter::rcvd_rkey_violation, 1)]);
}

#[test]
fn a_uc_write_to_a_qp_without_remote_write_lands_in_rcvd_rkey_violation() {
    let c = Connection {
        access: Access::LOCAL_WRITE,
        ..Connection::default()
    };
    let (mut a, mut b) = pair_with(QpType::Uc, &c);
    let f = request(&mut a, write(64));
    let before = counters(&b);
    give(&mut b, &f[0]);
    assert_counted(&b, &before, &[(Counter::rcvd_rkey_violation, 1)]);
}

// ---------------------------------------------------------------------------------------
// UD.

fn ud_send(a: &mut Host, b: &Host, len: u32, qkey: u32) -> Vec<Vec<u8>> {
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

#[test]
fn a_ud_send_with_a_foreign_qkey_lands_in_qkey_viol_cntr() {
    let (mut a, mut b) = pair(QpType::Ud);
    b.endpoint.post_recv(NOW, QB, recv(1, 256)).unwrap();
    let f = ud_send(&mut a, &b, 64, 0x1234);
    let before = counters(&b);
    give(&mut b, &f[0]);
    assert_counted(&b, &before, &[(Counter::qkey_viol_cntr, 1)]);
}

#[test]
fn a_controlled_qkey_in_a_work_request_sends_the_qps_own() {
    // IBTA 10.2.5: a work request's Q_Key with the high bit set stands for the sending
    // QP's own Q_Key (the same on both sides here), so the datagram gets in.
    let (mut a, mut b) = pair(QpType::Ud);
    b.endpoint.post_recv(NOW, QB, recv(1, 256)).unwrap();
    let f = ud_send(&mut a, &b, 64, 0x8000_0001);
    let deth = Frame::parse(&f[0]).unwrap().ib.deth.unwrap();
    assert_eq!(deth.qkey.0, Connection::default().qkey);
    let before = counters(&b);
    give(&mut b, &f[0]);
    assert_counted(&b, &before, &[]);
    assert_eq!(
        b.endpoint.poll_completion().unwrap().status,
        WcStatus::Success
    );
}

#[test]
fn a_ud_send_without_a_receive_lands_in_rcvd_no_recv_wqe() {
    let (mut a, mut b) = pair(QpType::Ud);
    let qkey = Connection::default().qkey;
    let f = ud_send(&mut a, &b, 64, qkey);
    let before = counters(&b);
    give(&mut b, &f[0]);
    assert_counted(&b, &before, &[(Counter::rcvd_no_recv_wqe, 1)]);
}

#[test]
fn a_ud_send_too_long_for_the_receive_lands_in_rcvd_length_err() {
    let (mut a, mut b) = pair(QpType::Ud);
    // 40 bytes of GRH + 64 of payload do not fit in 100.
    b.endpoint.post_recv(NOW, QB, recv(1, 100)).unwrap();
    let qkey = Connection::default().qkey;
    let f = ud_send(&mut a, &b, 64, qkey);
    let before = counters(&b);
    give(&mut b, &f[0]);
    assert_counted(&b, &before, &[(Counter::rcvd_length_err, 1)]);
}

#[test]
fn every_drop_or_nak_counter_is_exercised_here() {
    // The tests above between them move every drop/NAK counter but one that no packet
    // can reach: `rcvd_wrong_transport` for a duplicate of a response kind (responses go
    // to the completer before the duplicate check). Listed so that a new counter is
    // noticed: add a test for it, then add it here.
    let covered = [
        "rcvd_icrc_err",
        "rcvd_malformed",
        "rcvd_wrong_dgid",
        "rcvd_unsupported_opcode",
        "rcvd_unknown_qpn",
        "rcvd_qp_not_ready",
        "rcvd_wrong_transport",
        "rcvd_wrong_addr",
        "bad_pkey_cntr",
        "qkey_viol_cntr",
        "duplicate_request",
        "out_of_seq_request",
        "out_of_seq_dropped",
        "duplicate_request_no_resource",
        "rcvd_rnr_err",
        "send_rnr_err",
        "rcvd_seq_err",
        "sent_nak_invalid_request",
        "sent_nak_remote_access",
        "sent_nak_remote_op",
        "rcvd_nak_invalid_request",
        "rcvd_nak_remote_access",
        "rcvd_nak_remote_op",
        "duplicate_response",
        "unexpected_response",
        "response_out_of_seq",
        "bad_response",
        "uc_dropped",
        "rcvd_no_recv_wqe",
        "rcvd_length_err",
        "rcvd_rkey_violation",
        "response_queue_full",
        "rcvd_qp_error",
    ];
    let all: Vec<&str> = Counter::ALL
        .iter()
        .filter(|c| c.is_drop_or_nak())
        .map(|c| c.name())
        .collect();
    assert_eq!(all, covered);
}

// ---------------------------------------------------------------------------------------
// Work requests that cannot be framed.

#[test]
fn a_ud_send_to_an_address_of_the_other_family_fails_instead_of_waiting() {
    let (mut a, b) = pair(QpType::Ud);
    let mut path = a.path_to(&b);
    path.dgid = xroce_wire::Gid::from_ipv6("fd00::2".parse().unwrap());
    let w = SendWqe {
        ud: Some(UdDest {
            path,
            remote_qpn: QB.value(),
            remote_qkey: Connection::default().qkey,
        }),
        ..wqe(7, SendOp::Send, 0, 64)
    };
    let before = counters(&a);
    assert!(request(&mut a, w).is_empty());
    assert_counted(&a, &before, &[]);
    assert_eq!(a.endpoint.counters().send_err, 1);
    let c = a.endpoint.poll_completion().unwrap();
    assert_eq!(
        (c.wr_id, c.status),
        (7, xroce_transport::WcStatus::LocQpOpErr)
    );
    assert_eq!(a.endpoint.qp(QA).unwrap().state(), QpState::Sqe);
}
