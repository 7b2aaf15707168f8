//! ibv_rc_pingpong and ibv_ud_pingpong (rdma-core 44).

use crate::NOW;
use crate::capture::{Capture, Side};
use crate::player::*;
use xroce_transport::testing::{Connection, Host};
use xroce_transport::{
    Access, Completion, CompletionQueue, QpType, RecvWqe, SendOp, SendWqe, SgeList, UdDest,
    WcOpcode, WcStatus,
};
use xroce_wire::{IbMtu, Qpn};

pub(crate) const PINGPONG_RECV_WRID: u64 = 1;
pub(crate) const PINGPONG_SEND_WRID: u64 = 2;

/// The completion loop of `ibv_rc_pingpong`/`ibv_ud_pingpong`: a send is posted when the
/// previous send and a receive have both completed (`ctx->pending`), until `iters` sends;
/// every receive is reposted.
pub(crate) struct Pingpong {
    pub(crate) pending: u64,
    pub(crate) sends: u64,
    pub(crate) iters: u64,
    pub(crate) send: SendWqe,
    pub(crate) recv: RecvWqe,
}

impl Pingpong {
    pub(crate) fn on_completion(&mut self, host: &mut Host, qpn: Qpn, c: &Completion) {
        assert_eq!(c.status, WcStatus::Success, "{c:?}");
        match c.wr_id {
            PINGPONG_SEND_WRID => self.sends += 1,
            PINGPONG_RECV_WRID => host.endpoint.post_recv(NOW, qpn, self.recv).unwrap(),
            other => panic!("unexpected wr_id {other}"),
        }
        self.pending &= !c.wr_id;
        if self.sends < self.iters && self.pending == 0 {
            host.endpoint.post_send(NOW, qpn, self.send).unwrap();
            self.pending = PINGPONG_RECV_WRID | PINGPONG_SEND_WRID;
        }
    }
}

/// The pingpong buffer (one page; the address and key are ours: neither goes on the wire).
pub(crate) const PP_BUF: u64 = 0x7f00_0000_0000;
pub(crate) const PP_KEY: u32 = 0x100;

/// An RC pingpong side (`-s size`, default MTU 1024, rx_depth 500). Both sides receive
/// into and send from the same buffer, so each echoes what it last received.
pub(crate) fn rc_pingpong(cap: &Capture, side: Side, me: End, peer: End, size: u32) -> Player {
    let c = Connection {
        mtu: IbMtu::Mtu1024,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        min_rnr_timer: 12,
        max_rd_atomic: 1,
        access: Access::LOCAL_WRITE,
        ..Connection::default()
    };
    let mut player = Player::new(side, me, peer, QpType::Rc, &c);
    let mr = player.region(PP_KEY, PP_BUF, 4096, Access::LOCAL_WRITE);
    let recv = RecvWqe {
        wr_id: PINGPONG_RECV_WRID,
        sges: SgeList::single(PP_BUF, size, PP_KEY),
    };
    for _ in 0..500 {
        player.post_recv(recv);
    }
    let send = signaled(PINGPONG_SEND_WRID, SendOp::Send, PP_BUF, size, PP_KEY);
    let mut app = Pingpong {
        pending: PINGPONG_RECV_WRID,
        sends: 0,
        iters: ITERS,
        send,
        recv,
    };
    if side == Side::Client {
        // The client sends first: its buffer holds what its first SEND carried.
        let first = &cap.messages(Side::Client)[0].1;
        player.put(mr, PP_BUF, first);
        player.post_send(send);
        app.pending |= PINGPONG_SEND_WRID;
    }
    player.play(cap, &mut |host, qpn, c| app.on_completion(host, qpn, c));
    assert_eq!(app.sends, ITERS);
    player
}

// rc_pingpong.txt: server "QPN 0x000011, PSN 0xbbe063", client "QPN 0x000011, PSN
// 0x58f05a"; 4096-byte messages.
pub(crate) const RC_PINGPONG_SERVER: End = rxe_vm(2, 0x11, 0xbbe063);
pub(crate) const RC_PINGPONG_CLIENT: End = rxe_vm(3, 0x11, 0x58f05a);

#[test]
fn rc_pingpong_server_answers_like_rxe() {
    let cap = Capture::load("rc_pingpong");
    let p = rc_pingpong(
        &cap,
        Side::Server,
        RC_PINGPONG_SERVER,
        RC_PINGPONG_CLIENT,
        4096,
    );
    p.assert_sent_what_rxe_sent(&cap);
    assert_all_succeeded(&p, CompletionQueue::Recv, WcOpcode::Recv, 5);
}

#[test]
fn rc_pingpong_client_pings_like_rxe() {
    let cap = Capture::load("rc_pingpong");
    let p = rc_pingpong(
        &cap,
        Side::Client,
        RC_PINGPONG_CLIENT,
        RC_PINGPONG_SERVER,
        4096,
    );
    p.assert_sent_what_rxe_sent(&cap);
    assert_all_succeeded(&p, CompletionQueue::Send, WcOpcode::Send, 5);
}

#[test]
fn rc_pingpong_server_answers_a_userspace_client_like_rxe() {
    // netns_userspace_rc_pingpong.txt: rxe server "QPN 0x00001d, PSN 0xd90e23" at 10.77.0.2;
    // the userspace client (not rxe, so only the server is compared) "QPN 0x000b1e, PSN
    // 0x70c2e4" at 10.77.0.1, MAC 1e:95:d4:7e:2b:34; 64-byte messages.
    let cap = Capture::load("netns_userspace_rc_pingpong");
    let client = End {
        mac: [0x1e, 0x95, 0xd4, 0x7e, 0x2b, 0x34],
        ip: [10, 77, 0, 1],
        qpn: 0xb1e,
        psn: 0x70c2e4,
    };
    let p = rc_pingpong(&cap, Side::Server, rxe_vm(2, 0x1d, 0xd90e23), client, 64);
    p.assert_sent_what_rxe_sent(&cap);
}

// ud_pingpong.txt: server "QPN 0x000012, PSN 0x3c4ddc", client "QPN 0x000012, PSN
// 0x288240"; `-s 512`; ibv_ud_pingpong's Q_Key is 0x11111111.
pub(crate) const UD_PINGPONG_SERVER: End = rxe_vm(2, 0x12, 0x3c4ddc);
pub(crate) const UD_PINGPONG_CLIENT: End = rxe_vm(3, 0x12, 0x288240);
pub(crate) const UD_QKEY: u32 = 0x1111_1111;

/// A UD pingpong side: receives of size + 40 (the GRH) at the buffer, sends of `size` from
/// buffer + 40 to the peer's address handle.
pub(crate) fn ud_pingpong(cap: &Capture, side: Side, me: End, peer: End) -> Player {
    let size = 512;
    let c = Connection {
        qkey: UD_QKEY,
        ..Connection::default()
    };
    let mut player = Player::new(side, me, peer, QpType::Ud, &c);
    let mr = player.region(PP_KEY, PP_BUF, 4096, Access::LOCAL_WRITE);
    let recv = RecvWqe {
        wr_id: PINGPONG_RECV_WRID,
        sges: SgeList::single(PP_BUF, size + 40, PP_KEY),
    };
    for _ in 0..500 {
        player.post_recv(recv);
    }
    let send = SendWqe {
        ud: Some(UdDest {
            path: peer.path(),
            remote_qpn: peer.qpn,
            remote_qkey: UD_QKEY,
        }),
        ..signaled(PINGPONG_SEND_WRID, SendOp::Send, PP_BUF + 40, size, PP_KEY)
    };
    let mut app = Pingpong {
        pending: PINGPONG_RECV_WRID,
        sends: 0,
        iters: ITERS,
        send,
        recv,
    };
    if side == Side::Client {
        let first = &cap.messages(Side::Client)[0].1;
        player.put(mr, PP_BUF + 40, first);
        player.post_send(send);
        app.pending |= PINGPONG_SEND_WRID;
    }
    player.play(cap, &mut |host, qpn, c| app.on_completion(host, qpn, c));
    assert_eq!(app.sends, ITERS);
    player
}

#[test]
fn ud_pingpong_server_answers_like_rxe() {
    let cap = Capture::load("ud_pingpong");
    let p = ud_pingpong(&cap, Side::Server, UD_PINGPONG_SERVER, UD_PINGPONG_CLIENT);
    p.assert_sent_what_rxe_sent(&cap);
    // Every receive holds the GRH (20 zero bytes, then the sender's IPv4 header) and the
    // payload.
    let recvs: Vec<_> = p
        .completions
        .iter()
        .filter(|c| c.queue == CompletionQueue::Recv)
        .collect();
    assert_eq!(recvs.len(), 5);
    assert!(recvs.iter().all(|c| c.byte_len == 552 && c.src_qp == 0x12));
}

#[test]
fn ud_pingpong_client_pings_like_rxe() {
    let cap = Capture::load("ud_pingpong");
    let p = ud_pingpong(&cap, Side::Client, UD_PINGPONG_CLIENT, UD_PINGPONG_SERVER);
    p.assert_sent_what_rxe_sent(&cap);
}
