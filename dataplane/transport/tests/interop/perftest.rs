//! perftest (ib_write_bw, ib_read_bw, ib_send_bw, ib_atomic_bw), non-rdma_cm; and what
//! the captures are too short to show.

use crate::NOW;
use crate::capture::{Capture, Side};
use crate::player::*;
use xroce_transport::testing::Connection;
use xroce_transport::{
    Access, CompletionQueue, QpType, RecvWqe, SendOp, SgeList, WcOpcode, WcStatus,
};
use xroce_wire::{Frame, IbMtu};

/// One perftest run: the `local address` / `remote address` lines of its `.txt`.
pub(crate) struct Perftest {
    pub(crate) name: &'static str,
    pub(crate) server: End,
    /// The server's buffer: RKey and VAddr.
    pub(crate) server_mr: (u32, u64),
    pub(crate) client: End,
    pub(crate) client_mr: (u32, u64),
    /// OUT_READS of the exchange: max_rd_atomic and max_dest_rd_atomic.
    pub(crate) out_reads: u8,
}

/// perftest's QP attributes (`ctx_modify_qp_to_rtr`/`_rts`): timeout 14, retry 7, RNR
/// retry 7, min RNR timer 12.
pub(crate) fn perftest_connection(p: &Perftest, access: Access) -> Connection {
    Connection {
        mtu: IbMtu::Mtu1024,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        min_rnr_timer: 12,
        max_rd_atomic: p.out_reads,
        access,
        ..Connection::default()
    }
}

/// The perftest buffer: 64 KiB covers every address the runs touch.
pub(crate) const PERFTEST_BUF: usize = 64 * 1024;

/// A player for one side of a perftest run, with its buffer registered; returns the
/// region's index too.
pub(crate) fn perftest(p: &Perftest, side: Side, access: Access) -> (Player, usize) {
    let c = perftest_connection(p, access);
    let (me, peer, (key, va)) = match side {
        Side::Server => (p.server, p.client, p.server_mr),
        Side::Client => (p.client, p.server, p.client_mr),
    };
    let mut player = Player::new(side, me, peer, QpType::Rc, &c);
    let mr = player.region(key, va, PERFTEST_BUF, access | Access::LOCAL_WRITE);
    (player, mr)
}

// write_bw.txt: server "QPN 0x0013 PSN 0xc9b01b RKey 0x000426 VAddr 0x0056186bfd6000",
// client "QPN 0x0013 PSN 0xd67f16 RKey 0x00048e VAddr 0x0055692d8fb000", OUT_READS 1.
pub(crate) const WRITE_BW: Perftest = Perftest {
    name: "write_bw",
    server: rxe_vm(2, 0x13, 0xc9b01b),
    server_mr: (0x426, 0x5618_6bfd_6000),
    client: rxe_vm(3, 0x13, 0xd67f16),
    client_mr: (0x48e, 0x5569_2d8f_b000),
    out_reads: 1,
};

// write_bw_multipkt.txt: server QPN 0x14 PSN 0xa64430 RKey 0x5b9 VAddr 0x563d6b900000,
// client QPN 0x14 PSN 0x017346 RKey 0x5ae VAddr 0x55804fdb5000.
pub(crate) const WRITE_BW_MULTIPKT: Perftest = Perftest {
    name: "write_bw_multipkt",
    server: rxe_vm(2, 0x14, 0xa64430),
    server_mr: (0x5b9, 0x563d_6b90_0000),
    client: rxe_vm(3, 0x14, 0x017346),
    client_mr: (0x5ae, 0x5580_4fdb_5000),
    out_reads: 1,
};

// read_bw.txt: server QPN 0x15 PSN 0x2af0db RKey 0x6c3 VAddr 0x56396e687000, client QPN
// 0x15 PSN 0xaa26a3 RKey 0x658 VAddr 0x55d24f693000, OUT 0x80.
pub(crate) const READ_BW: Perftest = Perftest {
    name: "read_bw",
    server: rxe_vm(2, 0x15, 0x2af0db),
    server_mr: (0x6c3, 0x5639_6e68_7000),
    client: rxe_vm(3, 0x15, 0xaa26a3),
    client_mr: (0x658, 0x55d2_4f69_3000),
    out_reads: 128,
};

// read_bw_multipkt.txt: server QPN 0x16 PSN 0xf299a0 RKey 0x776 VAddr 0x55ee3ce7b000,
// client QPN 0x16 PSN 0xc21798 RKey 0x757 VAddr 0x560ae337e000, OUT 0x80.
pub(crate) const READ_BW_MULTIPKT: Perftest = Perftest {
    name: "read_bw_multipkt",
    server: rxe_vm(2, 0x16, 0xf299a0),
    server_mr: (0x776, 0x55ee_3ce7_b000),
    client: rxe_vm(3, 0x16, 0xc21798),
    client_mr: (0x757, 0x560a_e337_e000),
    out_reads: 128,
};

// send_bw.txt: server QPN 0x17 PSN 0xf6b357 VAddr 0x5625ca373000, client QPN 0x17 PSN
// 0xb785e0 VAddr 0x55e07e524000 (ib_send_bw sends RKey 0; the keys here are ours).
pub(crate) const SEND_BW: Perftest = Perftest {
    name: "send_bw",
    server: rxe_vm(2, 0x17, 0xf6b357),
    server_mr: (0x17_00, 0x5625_ca37_3000),
    client: rxe_vm(3, 0x17, 0xb785e0),
    client_mr: (0x17_01, 0x55e0_7e52_4000),
    out_reads: 1,
};

// atomic_fadd_bw.txt: server QPN 0x18 PSN 0xff6f34 RKey 0x9f5 VAddr 0x55945187a000, client
// QPN 0x18 PSN 0xdbd29c RKey 0x914 VAddr 0x562a9b0dd000, OUT 0x80.
pub(crate) const ATOMIC_FADD_BW: Perftest = Perftest {
    name: "atomic_fadd_bw",
    server: rxe_vm(2, 0x18, 0xff6f34),
    server_mr: (0x9f5, 0x5594_5187_a000),
    client: rxe_vm(3, 0x18, 0xdbd29c),
    client_mr: (0x914, 0x562a_9b0d_d000),
    out_reads: 128,
};

// atomic_cswap_bw.txt: server QPN 0x19 PSN 0x21334b RKey 0xac9 VAddr 0x559fe58ec000, client
// QPN 0x19 PSN 0xf4b12e RKey 0xa01 VAddr 0x55f68f6c1000, OUT 0x80.
pub(crate) const ATOMIC_CSWAP_BW: Perftest = Perftest {
    name: "atomic_cswap_bw",
    server: rxe_vm(2, 0x19, 0x21334b),
    server_mr: (0xac9, 0x559f_e58e_c000),
    client: rxe_vm(3, 0x19, 0xf4b12e),
    client_mr: (0xa01, 0x55f6_8f6c_1000),
    out_reads: 128,
};

/// The server of a WRITE run: nothing posted; WRITEs land and are acknowledged.
pub(crate) fn write_bw_server(p: &Perftest) {
    let cap = Capture::load(p.name);
    let (mut server, mr) = perftest(p, Side::Server, Access::REMOTE_WRITE);
    server.play(&cap, &mut |_, _, _| {});
    server.assert_sent_what_rxe_sent(&cap);
    let writes = cap.messages(Side::Client);
    assert_eq!(writes.len(), ITERS as usize);
    for (ib, data) in &writes {
        let reth = ib.reth.unwrap();
        assert_eq!(reth.dma_len as usize, data.len());
        assert!(server.bytes(mr, reth.va, data.len()) == data.as_slice());
    }
    assert!(server.completions.is_empty());
}

/// The client of a WRITE run: `-n 5` WRITEs of the message size, to consecutive
/// message-sized slots of the server's buffer while they fit in perftest's 4 KiB cycle
/// buffer, all from the matching slot of its own buffer.
pub(crate) fn write_bw_client(p: &Perftest, size: u32) {
    let cap = Capture::load(p.name);
    let (mut client, mr) = perftest(p, Side::Client, Access::REMOTE_WRITE);
    let writes = cap.messages(Side::Client);
    let (lkey, local) = p.client_mr;
    let (rkey, remote) = p.server_mr;
    for (i, (_, data)) in (0..ITERS).zip(&writes) {
        let slot = slot(i, size);
        client.put(mr, local + slot, data);
        let op = SendOp::Write {
            remote_addr: remote + slot,
            rkey,
        };
        client.post_send(signaled(i, op, local + slot, size, lkey));
    }
    client.play(&cap, &mut |_, _, _| {});
    client.assert_sent_what_rxe_sent(&cap);
    assert_all_succeeded(&client, CompletionQueue::Send, WcOpcode::RdmaWrite, 5);
}

/// perftest's buffer offset for iteration `i`: messages cycle through a 4 KiB buffer
/// (`cycle_buffer`, the page size), one slot per message; a message larger than half of
/// it always uses the start.
pub(crate) fn slot(i: u64, size: u32) -> u64 {
    let slots = (4096 / u64::from(size)).max(1);
    (i % slots) * u64::from(size)
}

#[test]
fn write_bw_server_acknowledges_like_rxe() {
    write_bw_server(&WRITE_BW);
}

#[test]
fn write_bw_client_requests_like_rxe() {
    write_bw_client(&WRITE_BW, 64);
}

#[test]
fn write_bw_multipkt_server_acknowledges_like_rxe() {
    write_bw_server(&WRITE_BW_MULTIPKT);
}

#[test]
fn write_bw_multipkt_client_segments_like_rxe() {
    write_bw_client(&WRITE_BW_MULTIPKT, 2050);
}

/// The server of a READ run: its buffer holds what rxe's READ responses carried.
pub(crate) fn read_bw_server(p: &Perftest) {
    let cap = Capture::load(p.name);
    let (mut server, mr) = perftest(p, Side::Server, Access::REMOTE_READ);
    let requests = cap.messages(Side::Client);
    let responses = cap.messages(Side::Server);
    assert_eq!((requests.len(), responses.len()), (5, 5));
    for ((req, _), (_, data)) in requests.iter().zip(&responses) {
        let reth = req.reth.unwrap();
        assert_eq!(reth.dma_len as usize, data.len());
        server.put(mr, reth.va, data);
    }
    server.play(&cap, &mut |_, _, _| {});
    server.assert_sent_what_rxe_sent(&cap);
}

/// The client of a READ run: `-n 5` READs into consecutive slots of its buffer.
pub(crate) fn read_bw_client(p: &Perftest, size: u32) {
    let cap = Capture::load(p.name);
    let (mut client, mr) = perftest(p, Side::Client, Access::REMOTE_READ);
    let (lkey, local) = p.client_mr;
    let (rkey, remote) = p.server_mr;
    for i in 0..ITERS {
        let slot = slot(i, size);
        let op = SendOp::Read {
            remote_addr: remote + slot,
            rkey,
        };
        client.post_send(signaled(i, op, local + slot, size, lkey));
    }
    client.play(&cap, &mut |_, _, _| {});
    client.assert_sent_what_rxe_sent(&cap);
    assert_all_succeeded(&client, CompletionQueue::Send, WcOpcode::RdmaRead, 5);
    // Every READ's data landed in its slot (the last one to use a slot is what remains).
    let responses = cap.messages(Side::Server);
    for i in 0..ITERS {
        let data = &responses[i as usize].1;
        let last_user = (0..ITERS).rev().find(|&j| slot(j, size) == slot(i, size));
        if last_user == Some(i) {
            assert!(client.bytes(mr, local + slot(i, size), data.len()) == data.as_slice());
        }
    }
}

#[test]
fn read_bw_server_responds_like_rxe() {
    read_bw_server(&READ_BW);
}

#[test]
fn read_bw_client_requests_like_rxe() {
    read_bw_client(&READ_BW, 64);
}

#[test]
fn read_bw_multipkt_server_segments_responses_like_rxe() {
    read_bw_server(&READ_BW_MULTIPKT);
}

#[test]
fn read_bw_multipkt_client_requests_like_rxe() {
    read_bw_client(&READ_BW_MULTIPKT, 2050);
}

#[test]
fn send_bw_server_receives_and_acknowledges_like_rxe() {
    let cap = Capture::load(SEND_BW.name);
    let (mut server, mr) = perftest(&SEND_BW, Side::Server, Access::NONE);
    let (lkey, buf) = SEND_BW.server_mr;
    // ib_send_bw's server posts its receive queue full of 64-byte receives, one slot each,
    // and reposts each one as it completes.
    for i in 0..64 {
        server.post_recv(RecvWqe {
            wr_id: i,
            sges: SgeList::single(buf + 64 * i, 64, lkey),
        });
    }
    server.play(&cap, &mut |host, qpn, c| {
        assert_eq!(c.status, WcStatus::Success);
        let wqe = RecvWqe {
            wr_id: c.wr_id,
            sges: SgeList::single(buf + 64 * c.wr_id, 64, lkey),
        };
        host.endpoint.post_recv(NOW, qpn, wqe).unwrap();
    });
    server.assert_sent_what_rxe_sent(&cap);
    assert_all_succeeded(&server, CompletionQueue::Recv, WcOpcode::Recv, 5);
    for (i, (_, data)) in cap.messages(Side::Client).iter().enumerate() {
        assert!(server.bytes(mr, buf + 64 * i as u64, 64) == data.as_slice());
    }
}

#[test]
fn send_bw_client_sends_like_rxe() {
    let cap = Capture::load(SEND_BW.name);
    let (mut client, mr) = perftest(&SEND_BW, Side::Client, Access::NONE);
    let (lkey, local) = SEND_BW.client_mr;
    for (i, (_, data)) in (0..ITERS).zip(&cap.messages(Side::Client)) {
        client.put(mr, local + 64 * i, data);
        client.post_send(signaled(i, SendOp::Send, local + 64 * i, 64, lkey));
    }
    client.play(&cap, &mut |_, _, _| {});
    client.assert_sent_what_rxe_sent(&cap);
    assert_all_succeeded(&client, CompletionQueue::Send, WcOpcode::Send, 5);
}

/// The original values rxe's atomic acknowledgements returned, with the address each
/// request named.
pub(crate) fn atomic_originals(cap: &Capture) -> Vec<(u64, u64)> {
    let requests = cap.messages(Side::Client);
    let acks = cap.messages(Side::Server);
    assert_eq!((requests.len(), acks.len()), (5, 5));
    requests
        .iter()
        .zip(&acks)
        .map(|((req, _), (ack, _))| {
            assert_eq!(req.bth.psn, ack.bth.psn);
            (
                req.atomic_eth.unwrap().va,
                ack.atomic_ack_eth.unwrap().orig_data,
            )
        })
        .collect()
}

/// The server of an atomic run: its buffer holds the original values rxe returned (rxe's
/// memory is little-endian, the AtomicAckETH big-endian).
pub(crate) fn atomic_server(p: &Perftest, apply: fn(u64) -> u64) {
    let cap = Capture::load(p.name);
    let (mut server, mr) = perftest(p, Side::Server, Access::REMOTE_ATOMIC);
    let originals = atomic_originals(&cap);
    for &(va, orig) in &originals {
        server.put(mr, va, &orig.to_le_bytes());
    }
    server.play(&cap, &mut |_, _, _| {});
    server.assert_sent_what_rxe_sent(&cap);
    for &(va, orig) in &originals {
        assert_eq!(server.bytes(mr, va, 8), apply(orig).to_le_bytes());
    }
}

/// The client of an atomic run: `-n 5` atomics on consecutive 64-byte slots of the server's
/// buffer, each result into consecutive 8-byte words of its own.
pub(crate) fn atomic_client(p: &Perftest, op: fn(u64, u32) -> SendOp) {
    let cap = Capture::load(p.name);
    let (mut client, mr) = perftest(p, Side::Client, Access::REMOTE_ATOMIC);
    let (lkey, local) = p.client_mr;
    let (rkey, remote) = p.server_mr;
    for i in 0..ITERS {
        let wqe = signaled(i, op(remote + 64 * i, rkey), local + 8 * i, 8, lkey);
        client.post_send(wqe);
    }
    client.play(&cap, &mut |_, _, _| {});
    client.assert_sent_what_rxe_sent(&cap);
    for (i, (_, orig)) in (0..ITERS).zip(atomic_originals(&cap)) {
        assert_eq!(client.bytes(mr, local + 8 * i, 8), orig.to_le_bytes());
    }
}

#[test]
fn atomic_fadd_bw_server_executes_and_acknowledges_like_rxe() {
    // ib_atomic_bw adds 1.
    atomic_server(&ATOMIC_FADD_BW, |orig| orig.wrapping_add(1));
}

#[test]
fn atomic_fadd_bw_client_requests_like_rxe() {
    atomic_client(&ATOMIC_FADD_BW, |remote_addr, rkey| SendOp::FetchAdd {
        remote_addr,
        rkey,
        add: 1,
    });
}

#[test]
fn atomic_cswap_bw_server_executes_and_acknowledges_like_rxe() {
    // ib_atomic_bw compares with 0 and swaps in 0: the random buffer never held 0, so
    // nothing changes.
    atomic_server(&ATOMIC_CSWAP_BW, |orig| if orig == 0 { 0 } else { orig });
}

#[test]
fn atomic_cswap_bw_client_requests_like_rxe() {
    atomic_client(&ATOMIC_CSWAP_BW, |remote_addr, rkey| SendOp::CompareSwap {
        remote_addr,
        rkey,
        compare: 0,
        swap: 0,
    });
}

#[test]
fn a_burst_of_writes_is_acknowledged_once() {
    // Not rxe's behaviour but the transport's own: the five WRITEs of write_bw handed over
    // before the endpoint is polled get one ACK, for the last PSN, with MSN 5.
    let cap = Capture::load(WRITE_BW.name);
    let (mut server, _) = perftest(&WRITE_BW, Side::Server, Access::REMOTE_WRITE);
    for frame in cap.sent_by(Side::Client) {
        server
            .host
            .endpoint
            .handle_frame(NOW, frame, &mut server.host.mem);
    }
    server.drain(&mut |_, _, _| {});
    assert_eq!(server.emitted.len(), 1);
    let last_rxe_ack = cap.sent_by(Side::Server).last().unwrap();
    let ours = Frame::parse(&server.emitted[0]).unwrap();
    let theirs = Frame::parse(last_rxe_ack).unwrap();
    assert_eq!(ours.ib, theirs.ib);
}

// What the captures are too short to show.

#[test]
fn a_long_write_asks_for_an_ack_on_every_66th_packet_as_rxe_does() {
    // rxe_req.c: ack_req = END || noack_pkts++ > RXE_MAX_PKT_PER_ACK (64): the 66th packet
    // since the last one that asked, and the last packet of the message.
    let p = &WRITE_BW;
    let c = perftest_connection(p, Access::REMOTE_WRITE);
    let mut client = Player::new(Side::Client, p.client, p.server, QpType::Rc, &c);
    let (lkey, local) = p.client_mr;
    client.region(lkey, local, 200 * 1024, Access::LOCAL_WRITE);
    let op = SendOp::Write {
        remote_addr: p.server_mr.1,
        rkey: p.server_mr.0,
    };
    client.post_send(signaled(1, op, local, 150 * 1024, lkey));
    client.drain(&mut |_, _, _| {});
    let asking: Vec<usize> = client
        .emitted
        .iter()
        .enumerate()
        .filter(|(_, f)| Frame::parse(f).unwrap().ib.bth.ack_request)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(client.emitted.len(), 150);
    assert_eq!(asking, vec![65, 131, 149]);
}
