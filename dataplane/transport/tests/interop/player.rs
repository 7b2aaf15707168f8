//! The captured hosts and the player: an endpoint set up as one captured host was, fed the
//! other host's frames in order, its application modelled, and what it sends compared with
//! what the captured host sent, field by field and then byte for byte.

use std::net::Ipv4Addr;

use crate::NOW;
use crate::capture::{Capture, Side};
use xroce_transport::frame::MAX_FRAME;
use xroce_transport::testing::{self, Connection, Host, Peer, bring_up, qp_config};
use xroce_transport::{
    Access, Completion, CompletionQueue, Endpoint, EndpointConfig, Gather, Limits, Path, QpType,
    RecvWqe, Region, Regions, SendFlags, SendOp, SendWqe, SgeList, WcOpcode, WcStatus,
};
use xroce_wire::{Frame, Gid, IbMtu, IpRepr, Psn, Qpn, icrc};

/// One end of a captured connection, as its out-of-band exchange describes it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct End {
    pub(crate) mac: [u8; 6],
    pub(crate) ip: [u8; 4],
    pub(crate) qpn: u32,
    pub(crate) psn: u32,
}

/// One of the two rxe VMs of the captures (`52:54:00:77:00:n`, `10.77.0.n`).
pub(crate) const fn rxe_vm(n: u8, qpn: u32, psn: u32) -> End {
    End {
        mac: [0x52, 0x54, 0x00, 0x77, 0x00, n],
        ip: [10, 77, 0, n],
        qpn,
        psn,
    }
}

impl End {
    pub(crate) fn gid(&self) -> Gid {
        Gid::from_ipv4(Ipv4Addr::from(self.ip))
    }

    /// The path to this end, as the kernel resolves an address vector for RoCEv2: the
    /// neighbour's MAC and the route's TTL (64; `ib_resolve_eth_dmac` replaces the hop
    /// limit the application gave).
    pub(crate) fn path(&self) -> Path {
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
pub(crate) fn rxe_limits() -> Limits {
    Limits {
        max_mtu: IbMtu::Mtu1024,
        max_rd_atomic: 128,
        ..Limits::default()
    }
}

/// An endpoint playing one captured host.
pub(crate) struct Player {
    pub(crate) host: Host,
    pub(crate) qpn: Qpn,
    pub(crate) side: Side,
    pub(crate) emitted: Vec<Vec<u8>>,
    pub(crate) completions: Vec<Completion>,
}

/// The application: what it does with each completion (post more work, usually).
type App<'a> = dyn FnMut(&mut Host, Qpn, &Completion) + 'a;

impl Player {
    pub(crate) fn new(side: Side, me: End, peer: End, qp_type: QpType, c: &Connection) -> Player {
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
    pub(crate) fn region(&mut self, key: u32, base: u64, len: usize, access: Access) -> usize {
        self.host.mem.insert(Region {
            lkey: key,
            rkey: Some(key),
            pd: testing::PD,
            access,
            base,
            bytes: vec![0; len],
        })
    }

    pub(crate) fn put(&mut self, region: usize, addr: u64, bytes: &[u8]) {
        let r = self.host.mem.region_mut(region);
        let at = (addr - r.base) as usize;
        r.bytes[at..at + bytes.len()].copy_from_slice(bytes);
    }

    pub(crate) fn bytes(&self, region: usize, addr: u64, len: usize) -> &[u8] {
        let r = self.host.mem.region(region);
        let at = (addr - r.base) as usize;
        &r.bytes[at..at + len]
    }

    pub(crate) fn post_send(&mut self, wqe: SendWqe) {
        self.host.endpoint.post_send(NOW, self.qpn, wqe).unwrap();
    }

    pub(crate) fn post_recv(&mut self, wqe: RecvWqe) {
        self.host.endpoint.post_recv(NOW, self.qpn, wqe).unwrap();
    }

    /// Plays the capture: everything the other side sent is fed in, in order, and after
    /// each frame (and once before the first) the application sees the completions and the
    /// endpoint sends all it wants to.
    pub(crate) fn play(&mut self, cap: &Capture, app: &mut App<'_>) {
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

    pub(crate) fn drain(&mut self, app: &mut App<'_>) {
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
    pub(crate) fn assert_sent_what_rxe_sent(&self, cap: &Capture) {
        assert_same_frames(cap, self.side, &self.emitted);
    }
}

pub(crate) fn describe<'a>(frames: impl Iterator<Item = &'a [u8]>) -> Vec<String> {
    frames
        .map(|f| match Frame::parse(f) {
            Ok(f) => format!("{} psn {:#08x}", f.ib.info().name, f.ib.bth.psn.value()),
            Err(e) => format!("unparsable: {e}"),
        })
        .collect()
}

pub(crate) fn assert_same_frames(cap: &Capture, side: Side, ours: &[Vec<u8>]) {
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
pub(crate) fn with_identification(frame: &[u8], id: u16) -> Vec<u8> {
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

pub(crate) fn signaled(wr_id: u64, op: SendOp, addr: u64, len: u32, lkey: u32) -> SendWqe {
    SendWqe {
        wr_id,
        op,
        flags: SendFlags::SIGNALED,
        data: Gather::Sges(SgeList::single(addr, len, lkey)),
        ud: None,
    }
}

pub(crate) fn assert_all_succeeded(p: &Player, queue: CompletionQueue, opcode: WcOpcode, n: usize) {
    let got: Vec<_> = p
        .completions
        .iter()
        .filter(|c| c.queue == queue)
        .map(|c| (c.status, c.opcode))
        .collect();
    assert_eq!(got, vec![(WcStatus::Success, opcode); n]);
}

/// The iterations every capture ran (`-n 5`).
pub(crate) const ITERS: u64 = 5;
