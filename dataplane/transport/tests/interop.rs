//! Interop-shaped tests: the transport replays real Linux rxe traffic.
//!
//! Each test takes one capture of two rxe hosts (`../wire/tests/fixtures/NAME.pcap`, decoded
//! in `NAME.txt` beside it; the server is always 10.77.0.2) and builds an [`Endpoint`] that
//! plays one side exactly as the captured host was set up: the same MAC and IP address
//! (GID), QP number and start PSNs (from the out-of-band exchange decoded in the `.txt`),
//! memory regions at the same virtual addresses with the same keys, and the work requests
//! the application posted, in the order it posted them. The other side's frames are fed to
//! it from the capture, in order; after each one the endpoint's completions go to a model of
//! the application (which may post more work) and every frame the endpoint wants to send is
//! collected. What it sent must be what the captured host sent, frame for frame.
//!
//! Playing the server proves the responder (ACKs, READ responses, atomic acknowledgements,
//! and the server's own SENDs in the ping-pongs); playing the client proves the requester
//! (opcodes, PSNs, RETHs, AckReq positions, pad, payload bytes, and the UDP source port that
//! Linux derives from the QP numbers) and the completer (it consumes rxe's responses).
//!
//! Each pair of frames is compared field by field first, so that a mismatch names the field,
//! then as whole bytes. What legitimately differs:
//!
//! - The IPv4 identification. Linux draws it per destination from a hashed counter with a
//!   random start (`__ip_select_ident`); the transport counts from its own start. It is
//!   covered by the IPv4 header checksum and by the ICRC, so those differ with it. The
//!   whole-frame comparison copies the captured identification into our frame, recomputes
//!   the header checksum and the ICRC, and then requires every byte to be equal.
//! - Nothing else. The application model polls the endpoint after every received frame, as
//!   rxe's responder runs once per packet; fed a burst before being polled, the transport
//!   coalesces positive ACKs (which the specification allows and rxe does not do), as
//!   `a_burst_of_writes_is_acknowledged_once` shows.
//!
//! Payload bytes are whatever the applications' buffers held (perftest fills them with
//! random bytes), so the tests take them from the capture: the bytes a client WRITEs or
//! SENDs are put in the client's buffer before it posts, the bytes a server's READ responses
//! carried and the original values its atomic acknowledgements returned are put in the
//! server's region before the requests arrive.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use pcap_file::pcap::PcapReader;
use xroce_transport::frame::MAX_FRAME;
use xroce_transport::testing::{self, Connection, Host, Peer, bring_up, qp_config};
use xroce_transport::{
    Access, Completion, CompletionQueue, Endpoint, EndpointConfig, Gather, Instant, Limits, Path,
    QpType, RecvWqe, Region, Regions, SendFlags, SendOp, SendWqe, SgeList, UdDest, WcOpcode,
    WcStatus,
};
use xroce_wire::{Frame, Gid, IbMtu, IbRepr, IpRepr, Psn, Qpn, icrc};

const NOW: Instant = Instant::ZERO;

// ---------------------------------------------------------------------------------------
// Captures.

/// Which captured host sent a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    /// 10.77.0.2.
    Server,
    /// Anyone else (10.77.0.3, or 10.77.0.1 for the userspace client).
    Client,
}

const SERVER_IP: [u8; 4] = [10, 77, 0, 2];

/// The RoCEv2 frames of one capture, in capture order.
struct Capture {
    name: &'static str,
    frames: Vec<(Side, Vec<u8>)>,
}

impl Capture {
    fn load(name: &'static str) -> Capture {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../wire/tests/fixtures")
            .join(format!("{name}.pcap"));
        let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut reader = PcapReader::new(file).unwrap();
        let mut frames = Vec::new();
        while let Some(packet) = reader.next_packet() {
            let data = packet.unwrap().data.into_owned();
            // IPv4, UDP, destination port 4791: judged from fixed offsets (untagged frames).
            let roce = data.len() > 42
                && data[12..14] == [0x08, 0x00]
                && data[23] == 17
                && data[36..38] == 4791u16.to_be_bytes();
            if roce {
                let side = if data[26..30] == SERVER_IP {
                    Side::Server
                } else {
                    Side::Client
                };
                frames.push((side, data));
            }
        }
        assert!(!frames.is_empty(), "{name}: no RoCEv2 frames");
        Capture { name, frames }
    }

    fn sent_by(&self, side: Side) -> impl Iterator<Item = &[u8]> {
        self.frames
            .iter()
            .filter(move |(s, _)| *s == side)
            .map(|(_, f)| f.as_slice())
    }

    /// The messages one side sent: the first packet's headers and the payload of all its
    /// packets, in order.
    fn messages(&self, side: Side) -> Vec<(IbRepr, Vec<u8>)> {
        let mut out: Vec<(IbRepr, Vec<u8>)> = Vec::new();
        for bytes in self.sent_by(side) {
            let f = Frame::parse(bytes).unwrap();
            if f.ib.info().starts_message() {
                out.push((f.ib, f.payload.to_vec()));
            } else {
                out.last_mut().unwrap().1.extend_from_slice(f.payload);
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------------------
// The captured hosts and the player.

/// One end of a captured connection, as its out-of-band exchange describes it.
#[derive(Clone, Copy, Debug)]
struct End {
    mac: [u8; 6],
    ip: [u8; 4],
    qpn: u32,
    psn: u32,
}

/// One of the two rxe VMs of the captures (`52:54:00:77:00:n`, `10.77.0.n`).
const fn rxe_vm(n: u8, qpn: u32, psn: u32) -> End {
    End {
        mac: [0x52, 0x54, 0x00, 0x77, 0x00, n],
        ip: [10, 77, 0, n],
        qpn,
        psn,
    }
}

impl End {
    fn gid(&self) -> Gid {
        Gid::from_ipv4(Ipv4Addr::from(self.ip))
    }

    /// The path to this end, as the kernel resolves an address vector for RoCEv2: the
    /// neighbour's MAC and the route's TTL (64; `ib_resolve_eth_dmac` replaces the hop
    /// limit the application gave).
    fn path(&self) -> Path {
        Path {
            dgid: self.gid(),
            dmac: self.mac,
            hop_limit: 64,
            ..Path::default()
        }
    }
}

/// rxe's device limits on a 1500-byte link: active MTU 1024, 128 outstanding READs and
/// atomics per QP (`RXE_MAX_QP_RD_ATOM`).
fn rxe_limits() -> Limits {
    Limits {
        max_mtu: IbMtu::Mtu1024,
        max_rd_atomic: 128,
        ..Limits::default()
    }
}

/// An endpoint playing one captured host.
struct Player {
    host: Host,
    qpn: Qpn,
    side: Side,
    emitted: Vec<Vec<u8>>,
    completions: Vec<Completion>,
}

/// The application: what it does with each completion (post more work, usually).
type App<'a> = dyn FnMut(&mut Host, Qpn, &Completion) + 'a;

impl Player {
    fn new(side: Side, me: End, peer: End, qp_type: QpType, c: &Connection) -> Player {
        let limits = rxe_limits();
        let config = EndpointConfig {
            mac: me.mac,
            gids: vec![me.gid()],
            limits,
            // rxe: the route's TTL (64).
            default_hop_limit: 64,
            max_inflight: u32::MAX,
        };
        let mut host = Host {
            endpoint: Endpoint::new(config),
            mem: Regions::new(),
            mac: me.mac,
            gid: me.gid(),
        };
        let qpn = Qpn::new(me.qpn);
        host.endpoint
            .create_qp(qp_config(qpn, qp_type, 1024, limits))
            .unwrap();
        let peer = Peer {
            path: peer.path(),
            qpn: Qpn::new(peer.qpn),
            sq_psn: Psn::new(me.psn),
            rq_psn: Psn::new(peer.psn),
        };
        bring_up(&mut host, NOW, qpn, qp_type, peer, c);
        Player {
            host,
            qpn,
            side,
            emitted: Vec::new(),
            completions: Vec::new(),
        }
    }

    /// Registers a region (rxe gives a memory region one key for both uses) and returns its
    /// index.
    fn region(&mut self, key: u32, base: u64, len: usize, access: Access) -> usize {
        self.host.mem.insert(Region {
            lkey: key,
            rkey: Some(key),
            pd: testing::PD,
            access,
            base,
            bytes: vec![0; len],
        })
    }

    fn put(&mut self, region: usize, addr: u64, bytes: &[u8]) {
        let r = self.host.mem.region_mut(region);
        let at = (addr - r.base) as usize;
        r.bytes[at..at + bytes.len()].copy_from_slice(bytes);
    }

    fn bytes(&self, region: usize, addr: u64, len: usize) -> &[u8] {
        let r = self.host.mem.region(region);
        let at = (addr - r.base) as usize;
        &r.bytes[at..at + len]
    }

    fn post_send(&mut self, wqe: SendWqe) {
        self.host.endpoint.post_send(NOW, self.qpn, wqe).unwrap();
    }

    fn post_recv(&mut self, wqe: RecvWqe) {
        self.host.endpoint.post_recv(NOW, self.qpn, wqe).unwrap();
    }

    /// Plays the capture: everything the other side sent is fed in, in order, and after
    /// each frame (and once before the first) the application sees the completions and the
    /// endpoint sends all it wants to.
    fn play(&mut self, cap: &Capture, app: &mut App<'_>) {
        self.drain(app);
        for (side, frame) in &cap.frames {
            if *side != self.side {
                self.host
                    .endpoint
                    .handle_frame(NOW, frame, &mut self.host.mem);
                self.drain(app);
            }
        }
    }

    fn drain(&mut self, app: &mut App<'_>) {
        let mut buf = vec![0u8; MAX_FRAME];
        loop {
            let mut moved = false;
            while let Some(c) = self.host.endpoint.poll_completion() {
                app(&mut self.host, self.qpn, &c);
                self.completions.push(c);
                moved = true;
            }
            let ep = &mut self.host.endpoint;
            if let Some(t) = ep.poll_transmit(NOW, &mut buf, &mut self.host.mem) {
                self.emitted.push(buf[..t.len].to_vec());
                moved = true;
            }
            if !moved {
                return;
            }
        }
    }

    /// The frames this player sent must be the captured host's, frame for frame.
    fn assert_sent_what_rxe_sent(&self, cap: &Capture) {
        assert_same_frames(cap, self.side, &self.emitted);
    }
}

fn describe<'a>(frames: impl Iterator<Item = &'a [u8]>) -> Vec<String> {
    frames
        .map(|f| match Frame::parse(f) {
            Ok(f) => format!("{} psn {:#08x}", f.ib.info().name, f.ib.bth.psn.value()),
            Err(e) => format!("unparsable: {e}"),
        })
        .collect()
}

fn assert_same_frames(cap: &Capture, side: Side, ours: &[Vec<u8>]) {
    let theirs: Vec<&[u8]> = cap.sent_by(side).collect();
    assert_eq!(
        ours.len(),
        theirs.len(),
        "{}: the captured {side:?} sent {:#?}\nwe sent {:#?}",
        cap.name,
        describe(theirs.iter().copied()),
        describe(ours.iter().map(|f| f.as_slice()))
    );
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        let what = format!("{} {side:?} RoCE frame {i}", cap.name);
        let of = Frame::parse(o).unwrap_or_else(|e| panic!("{what}: ours does not parse: {e}"));
        let tf = Frame::parse(t).unwrap();
        let (ob, tb) = (&of.ib.bth, &tf.ib.bth);
        assert_eq!(
            ob.opcode.info().name,
            tb.opcode.info().name,
            "{what}: opcode"
        );
        assert_eq!(ob.dest_qp, tb.dest_qp, "{what}: destination QP");
        assert_eq!(ob.psn, tb.psn, "{what}: PSN");
        assert_eq!(ob.ack_request, tb.ack_request, "{what}: AckReq");
        assert_eq!(ob.pad_count, tb.pad_count, "{what}: pad count");
        assert_eq!(ob.solicited_event, tb.solicited_event, "{what}: SE");
        assert_eq!(of.ib.reth, tf.ib.reth, "{what}: RETH");
        assert_eq!(of.ib.aeth, tf.ib.aeth, "{what}: AETH (syndrome, MSN)");
        assert_eq!(of.ib.atomic_eth, tf.ib.atomic_eth, "{what}: AtomicETH");
        assert_eq!(
            of.ib.atomic_ack_eth, tf.ib.atomic_ack_eth,
            "{what}: AtomicAckETH"
        );
        assert_eq!(of.ib.deth, tf.ib.deth, "{what}: DETH");
        assert_eq!(of.ib, tf.ib, "{what}: IB headers");
        assert!(of.payload == tf.payload, "{what}: payload bytes differ");
        assert_eq!(
            of.headers.udp, tf.headers.udp,
            "{what}: UDP header (the source port comes from the QP numbers)"
        );
        assert_eq!(of.headers.ethernet, tf.headers.ethernet, "{what}: Ethernet");
        let (IpRepr::Ipv4(mut oip), IpRepr::Ipv4(tip)) = (of.headers.ip, tf.headers.ip) else {
            panic!("{what}: not IPv4");
        };
        oip.identification = tip.identification;
        assert_eq!(
            oip, tip,
            "{what}: IPv4 header apart from the identification"
        );
        let patched = with_identification(o, tip.identification);
        assert!(
            patched == *t,
            "{what}: with the captured IPv4 identification, the frames still differ:\nours {:02x?}\nrxe  {:02x?}",
            patched,
            t
        );
    }
}

/// `frame` (untagged Ethernet, IPv4 without options) with another IPv4 identification, and
/// the header checksum and ICRC that go with it.
fn with_identification(frame: &[u8], id: u16) -> Vec<u8> {
    assert_eq!((&frame[12..14], frame[14]), (&[0x08, 0x00][..], 0x45));
    let mut f = frame.to_vec();
    f[18..20].copy_from_slice(&id.to_be_bytes());
    f[24..26].fill(0);
    let mut sum: u32 = f[14..34]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    let crc = icrc::compute_frame(&f).unwrap();
    let n = f.len();
    f[n - 4..].copy_from_slice(&crc.to_le_bytes());
    f
}

// ---------------------------------------------------------------------------------------
// perftest (ib_write_bw, ib_read_bw, ib_send_bw, ib_atomic_bw), non-rdma_cm.

/// One perftest run: the `local address` / `remote address` lines of its `.txt`.
struct Perftest {
    name: &'static str,
    server: End,
    /// The server's buffer: RKey and VAddr.
    server_mr: (u32, u64),
    client: End,
    client_mr: (u32, u64),
    /// OUT_READS of the exchange: max_rd_atomic and max_dest_rd_atomic.
    out_reads: u8,
}

/// perftest's QP attributes (`ctx_modify_qp_to_rtr`/`_rts`): timeout 14, retry 7, RNR
/// retry 7, min RNR timer 12.
fn perftest_connection(p: &Perftest, access: Access) -> Connection {
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
const PERFTEST_BUF: usize = 64 * 1024;

/// A player for one side of a perftest run, with its buffer registered; returns the
/// region's index too.
fn perftest(p: &Perftest, side: Side, access: Access) -> (Player, usize) {
    let c = perftest_connection(p, access);
    let (me, peer, (key, va)) = match side {
        Side::Server => (p.server, p.client, p.server_mr),
        Side::Client => (p.client, p.server, p.client_mr),
    };
    let mut player = Player::new(side, me, peer, QpType::Rc, &c);
    let mr = player.region(key, va, PERFTEST_BUF, access | Access::LOCAL_WRITE);
    (player, mr)
}

fn signaled(wr_id: u64, op: SendOp, addr: u64, len: u32, lkey: u32) -> SendWqe {
    SendWqe {
        wr_id,
        op,
        flags: SendFlags::SIGNALED,
        data: Gather::Sges(SgeList::single(addr, len, lkey)),
        ud: None,
    }
}

fn assert_all_succeeded(p: &Player, queue: CompletionQueue, opcode: WcOpcode, n: usize) {
    let got: Vec<_> = p
        .completions
        .iter()
        .filter(|c| c.queue == queue)
        .map(|c| (c.status, c.opcode))
        .collect();
    assert_eq!(got, vec![(WcStatus::Success, opcode); n]);
}

// write_bw.txt: server "QPN 0x0013 PSN 0xc9b01b RKey 0x000426 VAddr 0x0056186bfd6000",
// client "QPN 0x0013 PSN 0xd67f16 RKey 0x00048e VAddr 0x0055692d8fb000", OUT_READS 1.
const WRITE_BW: Perftest = Perftest {
    name: "write_bw",
    server: rxe_vm(2, 0x13, 0xc9b01b),
    server_mr: (0x426, 0x5618_6bfd_6000),
    client: rxe_vm(3, 0x13, 0xd67f16),
    client_mr: (0x48e, 0x5569_2d8f_b000),
    out_reads: 1,
};

// write_bw_multipkt.txt: server QPN 0x14 PSN 0xa64430 RKey 0x5b9 VAddr 0x563d6b900000,
// client QPN 0x14 PSN 0x017346 RKey 0x5ae VAddr 0x55804fdb5000.
const WRITE_BW_MULTIPKT: Perftest = Perftest {
    name: "write_bw_multipkt",
    server: rxe_vm(2, 0x14, 0xa64430),
    server_mr: (0x5b9, 0x563d_6b90_0000),
    client: rxe_vm(3, 0x14, 0x017346),
    client_mr: (0x5ae, 0x5580_4fdb_5000),
    out_reads: 1,
};

// read_bw.txt: server QPN 0x15 PSN 0x2af0db RKey 0x6c3 VAddr 0x56396e687000, client QPN
// 0x15 PSN 0xaa26a3 RKey 0x658 VAddr 0x55d24f693000, OUT 0x80.
const READ_BW: Perftest = Perftest {
    name: "read_bw",
    server: rxe_vm(2, 0x15, 0x2af0db),
    server_mr: (0x6c3, 0x5639_6e68_7000),
    client: rxe_vm(3, 0x15, 0xaa26a3),
    client_mr: (0x658, 0x55d2_4f69_3000),
    out_reads: 128,
};

// read_bw_multipkt.txt: server QPN 0x16 PSN 0xf299a0 RKey 0x776 VAddr 0x55ee3ce7b000,
// client QPN 0x16 PSN 0xc21798 RKey 0x757 VAddr 0x560ae337e000, OUT 0x80.
const READ_BW_MULTIPKT: Perftest = Perftest {
    name: "read_bw_multipkt",
    server: rxe_vm(2, 0x16, 0xf299a0),
    server_mr: (0x776, 0x55ee_3ce7_b000),
    client: rxe_vm(3, 0x16, 0xc21798),
    client_mr: (0x757, 0x560a_e337_e000),
    out_reads: 128,
};

// send_bw.txt: server QPN 0x17 PSN 0xf6b357 VAddr 0x5625ca373000, client QPN 0x17 PSN
// 0xb785e0 VAddr 0x55e07e524000 (ib_send_bw sends RKey 0; the keys here are ours).
const SEND_BW: Perftest = Perftest {
    name: "send_bw",
    server: rxe_vm(2, 0x17, 0xf6b357),
    server_mr: (0x17_00, 0x5625_ca37_3000),
    client: rxe_vm(3, 0x17, 0xb785e0),
    client_mr: (0x17_01, 0x55e0_7e52_4000),
    out_reads: 1,
};

// atomic_fadd_bw.txt: server QPN 0x18 PSN 0xff6f34 RKey 0x9f5 VAddr 0x55945187a000, client
// QPN 0x18 PSN 0xdbd29c RKey 0x914 VAddr 0x562a9b0dd000, OUT 0x80.
const ATOMIC_FADD_BW: Perftest = Perftest {
    name: "atomic_fadd_bw",
    server: rxe_vm(2, 0x18, 0xff6f34),
    server_mr: (0x9f5, 0x5594_5187_a000),
    client: rxe_vm(3, 0x18, 0xdbd29c),
    client_mr: (0x914, 0x562a_9b0d_d000),
    out_reads: 128,
};

// atomic_cswap_bw.txt: server QPN 0x19 PSN 0x21334b RKey 0xac9 VAddr 0x559fe58ec000, client
// QPN 0x19 PSN 0xf4b12e RKey 0xa01 VAddr 0x55f68f6c1000, OUT 0x80.
const ATOMIC_CSWAP_BW: Perftest = Perftest {
    name: "atomic_cswap_bw",
    server: rxe_vm(2, 0x19, 0x21334b),
    server_mr: (0xac9, 0x559f_e58e_c000),
    client: rxe_vm(3, 0x19, 0xf4b12e),
    client_mr: (0xa01, 0x55f6_8f6c_1000),
    out_reads: 128,
};

/// perftest's `-n 5`.
const ITERS: u64 = 5;

/// The server of a WRITE run: nothing posted; WRITEs land and are acknowledged.
fn write_bw_server(p: &Perftest) {
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
fn write_bw_client(p: &Perftest, size: u32) {
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
fn slot(i: u64, size: u32) -> u64 {
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
fn read_bw_server(p: &Perftest) {
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
fn read_bw_client(p: &Perftest, size: u32) {
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
fn atomic_originals(cap: &Capture) -> Vec<(u64, u64)> {
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
fn atomic_server(p: &Perftest, apply: fn(u64) -> u64) {
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
fn atomic_client(p: &Perftest, op: fn(u64, u32) -> SendOp) {
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

// ---------------------------------------------------------------------------------------
// ibv_rc_pingpong and ibv_ud_pingpong (rdma-core 44).

const PINGPONG_RECV_WRID: u64 = 1;
const PINGPONG_SEND_WRID: u64 = 2;

/// The completion loop of `ibv_rc_pingpong`/`ibv_ud_pingpong`: a send is posted when the
/// previous send and a receive have both completed (`ctx->pending`), until `iters` sends;
/// every receive is reposted.
struct Pingpong {
    pending: u64,
    sends: u64,
    iters: u64,
    send: SendWqe,
    recv: RecvWqe,
}

impl Pingpong {
    fn on_completion(&mut self, host: &mut Host, qpn: Qpn, c: &Completion) {
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
const PP_BUF: u64 = 0x7f00_0000_0000;
const PP_KEY: u32 = 0x100;

/// An RC pingpong side (`-s size`, default MTU 1024, rx_depth 500). Both sides receive
/// into and send from the same buffer, so each echoes what it last received.
fn rc_pingpong(cap: &Capture, side: Side, me: End, peer: End, size: u32) -> Player {
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
const RC_PINGPONG_SERVER: End = rxe_vm(2, 0x11, 0xbbe063);
const RC_PINGPONG_CLIENT: End = rxe_vm(3, 0x11, 0x58f05a);

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
const UD_PINGPONG_SERVER: End = rxe_vm(2, 0x12, 0x3c4ddc);
const UD_PINGPONG_CLIENT: End = rxe_vm(3, 0x12, 0x288240);
const UD_QKEY: u32 = 0x1111_1111;

/// A UD pingpong side: receives of size + 40 (the GRH) at the buffer, sends of `size` from
/// buffer + 40 to the peer's address handle.
fn ud_pingpong(cap: &Capture, side: Side, me: End, peer: End) -> Player {
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

// ---------------------------------------------------------------------------------------
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
