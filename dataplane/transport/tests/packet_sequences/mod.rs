//! The property the `packet_sequences` fuzz target checks (`fuzz/`), shared with the stable
//! test that replays its corpus (`tests/fuzz_corpus.rs`).
//!
//! Two endpoints, A and B, each with an RC, a UC and a UD queue pair connected to the
//! other's, and two memory regions: one read-write, and one that grants nothing but remote
//! reads and holds a known pattern. An input is a sequence of steps: post send and receive
//! work requests (sane or not), let a host transmit, deliver, drop, duplicate, reorder or
//! mutate the frames in flight (recomputing the ICRC, so that the mutation reaches the
//! transport), inject frames built from fields the fuzzer chooses, feed raw bytes, advance
//! time, change queue pair states, deregister and re-register memory.
//!
//! After every step: nothing panicked; the read-only region is byte-for-byte unchanged and
//! no region changed size (the memory table copies only inside a region, so nothing
//! outside one can be touched); every queue of every queue pair and of the endpoints is
//! within its bound.

#![allow(dead_code, unreachable_pub)]

use std::collections::VecDeque;
use std::time::Duration;

use arbitrary::Arbitrary;
use xroce_transport::testing::{Connection, Host, Peer, bring_up, connect};
use xroce_transport::{
    Access, AttrMask, Gather, Instant, QpAttr, QpState, QpType, RecvWqe, SendFlags, SendOp,
    SendWqe, SgeList, UdDest,
};
use xroce_wire::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, EthernetAddress, ExtHeader,
    FrameRepr, Gid, IbMtu, IbRepr, IethRepr, ImmDtRepr, NakCode, Opcode, Psn, Qkey, Qpn, RethRepr,
    Rkey, RnrTimer, Syndrome, icrc,
};

// ---------------------------------------------------------------------------------------
// The input.

/// A whole fuzz input.
#[derive(Arbitrary, Debug)]
pub struct Input {
    /// What happens, in order.
    pub steps: Vec<Step>,
}

/// One of the two hosts.
#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

/// One of each host's three queue pairs.
#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Rc,
    Uc,
    Ud,
}

/// Which key (and so which region) an address names.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum KeyChoice {
    /// The read-write region.
    Rw,
    /// The region that grants only remote reads.
    Ro,
    /// A key that may name nothing.
    Other(u32),
}

/// A buffer: `len` bytes at `offset` into the region `key` names.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct Buf {
    pub key: KeyChoice,
    pub offset: u16,
    pub len: u16,
}

/// The operation of a send work request.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Op {
    Send,
    SendImm(u32),
    SendInv(KeyChoice),
    Write,
    WriteImm(u32),
    Read,
    CompareSwap(u64, u64),
    FetchAdd(u64),
}

/// Where a UD send goes.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum UdChoice {
    /// The peer's UD queue pair.
    Peer,
    /// The peer, with a Q_Key of the fuzzer's choosing.
    Qkey(u32),
    /// Another QP number.
    Qpn(u32),
    /// An IPv6 destination (the hosts have IPv4 GIDs).
    Ipv6,
    /// A source GID index that may not exist.
    SgidIndex(u8),
}

/// What happens to the frame at the head of a host's incoming queue.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Delivery {
    Next,
    All,
    Drop,
    Duplicate,
    SwapFirstTwo,
    /// XOR one byte of the IB part (BTH onwards) with `xor` and deliver; with `fix_icrc`
    /// the ICRC is recomputed so that the frame passes the ICRC check.
    Mutate {
        offset: u16,
        xor: u8,
        fix_icrc: bool,
    },
}

/// Where a crafted packet's PSN lies.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum PsnBase {
    /// Relative to the PSN the target's responder expects.
    Expected(i8),
    /// Relative to the oldest PSN the target's requester has not seen acknowledged.
    Unacked(i8),
    /// Any PSN.
    Raw(u32),
}

/// A packet built from fields the fuzzer chooses.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct FrameSpec {
    /// The low five bits pick the operation; the transport bits are the target service's,
    /// unless `raw_opcode`.
    pub opcode: u8,
    pub raw_opcode: bool,
    pub psn: PsnBase,
    pub ack_req: bool,
    pub solicited: bool,
    pub key: KeyChoice,
    pub offset: u16,
    pub dma_len: u16,
    pub payload_len: u16,
    pub fill: u8,
    pub syndrome: u8,
    pub msn: u32,
    pub swap_add: u64,
    pub compare: u64,
    pub imm: u32,
    pub qkey: Option<u32>,
    pub src_qpn: Option<u32>,
    pub pkey: Option<u16>,
}

/// A change of a queue pair's state.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Change {
    Err,
    Reset,
    Sqd,
    Rts,
    /// Reset, then connect again with start PSNs moved by these amounts.
    Reconnect {
        sq_psn: i8,
        rq_psn: i8,
    },
}

/// One step.
#[derive(Arbitrary, Debug, Clone)]
pub enum Step {
    Post {
        side: Side,
        qp: Service,
        op: Op,
        local: Buf,
        remote: KeyChoice,
        remote_offset: u16,
        flags: u8,
        inline: bool,
        ud: UdChoice,
    },
    PostRecv {
        side: Side,
        qp: Service,
        buf: Buf,
    },
    /// The host sends up to this many frames (plus one) towards the other.
    Pump {
        side: Side,
        frames: u8,
    },
    Deliver {
        to: Side,
        how: Delivery,
    },
    Inject {
        to: Side,
        qp: Service,
        spec: FrameSpec,
    },
    Raw {
        to: Side,
        bytes: Vec<u8>,
    },
    Advance {
        micros: u16,
    },
    AdvanceToTimer,
    Modify {
        side: Side,
        qp: Service,
        change: Change,
    },
    Deregister {
        side: Side,
    },
    Reregister {
        side: Side,
    },
}

// ---------------------------------------------------------------------------------------
// The world.

const RO_KEY: u32 = 0x200;
const RO_BASE: u64 = 0x2_0000;
const RO_LEN: usize = 4096;
const RW_KEY: u32 = 0x100;
const RW_BASE: u64 = 0x1_0000;
const RW_LEN: usize = 16 * 1024;
/// Send and receive queue depth.
const DEPTH: u32 = 8;
/// Frames that may wait in flight towards one host; older ones are lost.
const NET_CAP: usize = 64;
/// The largest message a step posts or injects.
const MAX_LEN: u16 = 4096;
/// At most this many timer heap entries per queue pair, live and stale.
const TIMERS_PER_QP: usize = 4;

fn connection() -> Connection {
    Connection {
        mtu: IbMtu::Mtu256,
        timeout: 1,
        retry_cnt: 3,
        rnr_retry: 3,
        min_rnr_timer: 1,
        max_rd_atomic: 2,
        access: Access::ALL,
        // A's PSNs wrap at 2^24 soon.
        psn_a: Psn::new(0xff_fff0),
        psn_b: Psn::new(0x10),
        qkey: 0x1111_1111,
        depth: DEPTH,
    }
}

fn qpn(side: Side, service: Service) -> Qpn {
    let base = match side {
        Side::A => 0x10,
        Side::B => 0x20,
    };
    let n = match service {
        Service::Rc => 1,
        Service::Uc => 2,
        Service::Ud => 3,
    };
    Qpn::new(base + n)
}

fn qp_type(service: Service) -> QpType {
    match service {
        Service::Rc => QpType::Rc,
        Service::Uc => QpType::Uc,
        Service::Ud => QpType::Ud,
    }
}

fn other(side: Side) -> Side {
    match side {
        Side::A => Side::B,
        Side::B => Side::A,
    }
}

/// The pattern of the read-only region.
fn pattern() -> Vec<u8> {
    (0..RO_LEN).map(|i| (i * 131 + 7) as u8).collect()
}

/// (lkey, rkey, base) for a key choice.
fn keys(k: KeyChoice) -> (u32, u32, u64) {
    match k {
        KeyChoice::Rw => (RW_KEY, RW_KEY | 0x8000_0000, RW_BASE),
        KeyChoice::Ro => (RO_KEY, RO_KEY | 0x8000_0000, RO_BASE),
        KeyChoice::Other(k) => (k, k, RW_BASE),
    }
}

/// Two hosts, their queue pairs, and the frames in flight.
pub struct World {
    a: Host,
    b: Host,
    now: Instant,
    /// Frames travelling towards A and towards B.
    to_a: VecDeque<Vec<u8>>,
    to_b: VecDeque<Vec<u8>>,
    next_wr_id: u64,
    ro: Vec<u8>,
    buf: Vec<u8>,
    /// The RC queue pairs are in selective repeat (turned on again after a reconnect).
    selective: bool,
}

impl Default for World {
    fn default() -> World {
        World::new()
    }
}

impl World {
    pub fn new() -> World {
        let c = connection();
        let mut hosts = [Host::new(1), Host::new(2)];
        for h in &mut hosts {
            // Index 0: the read-only region (it never moves); index 1: the read-write one.
            let ro = h.add_region(RO_KEY, RO_BASE, RO_LEN, Access::REMOTE_READ);
            h.mem.region_mut(ro).bytes = pattern();
            h.add_region(RW_KEY, RW_BASE, RW_LEN, Access::ALL);
        }
        let [mut a, mut b] = hosts;
        for s in [Service::Rc, Service::Uc, Service::Ud] {
            let (qa, qb) = (qpn(Side::A, s), qpn(Side::B, s));
            connect(&mut a, qa, &mut b, qb, qp_type(s), &c, Instant::ZERO);
        }
        World {
            a,
            b,
            now: Instant::ZERO,
            to_a: VecDeque::new(),
            to_b: VecDeque::new(),
            next_wr_id: 1,
            ro: pattern(),
            buf: vec![0; xroce_transport::frame::MAX_FRAME],
            selective: false,
        }
    }

    /// The same world with both RC queue pairs in selective repeat.
    pub fn selective() -> World {
        let mut w = World::new();
        w.selective = true;
        for side in [Side::A, Side::B] {
            let q = qpn(side, Service::Rc);
            // NOTE(unwrap): both RC QPs were just connected.
            w.host(side).endpoint.set_selective_repeat(q, true).unwrap();
        }
        w
    }

    fn host(&mut self, side: Side) -> &mut Host {
        match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }

    fn incoming(&mut self, side: Side) -> &mut VecDeque<Vec<u8>> {
        match side {
            Side::A => &mut self.to_a,
            Side::B => &mut self.to_b,
        }
    }

    fn deliver(&mut self, to: Side, frame: &[u8]) {
        let now = self.now;
        let h = self.host(to);
        let before = drops(h);
        h.endpoint.handle_frame(now, frame, &mut h.mem);
        // A frame is dropped (or NAKed) once at most: one drop/NAK counter at most moves.
        assert!(
            drops(h) - before <= 1,
            "a frame moved two drop/NAK counters"
        );
    }

    /// Runs every step, checking the invariants after each.
    pub fn run(&mut self, input: &Input) {
        self.check();
        for step in &input.steps {
            let before = (drops(&self.a), drops(&self.b));
            self.step(step);
            if !matches!(
                step,
                Step::Pump { .. } | Step::Deliver { .. } | Step::Inject { .. } | Step::Raw { .. }
            ) {
                // Posting, time and state changes drop nothing and NAK nothing.
                assert_eq!((drops(&self.a), drops(&self.b)), before, "{step:?}");
            }
            self.collect();
            self.check();
        }
    }

    pub fn step(&mut self, step: &Step) {
        match *step {
            Step::Post {
                side,
                qp,
                op,
                local,
                remote,
                remote_offset,
                flags,
                inline,
                ud,
            } => self.post(
                side,
                qp,
                op,
                local,
                remote,
                remote_offset,
                flags,
                inline,
                ud,
            ),
            Step::PostRecv { side, qp, buf } => {
                let (lkey, _, base) = keys(buf.key);
                let wqe = RecvWqe {
                    wr_id: self.wr_id(),
                    sges: SgeList::single(
                        base + u64::from(buf.offset),
                        u32::from(buf.len % (MAX_LEN + 64)),
                        lkey,
                    ),
                };
                let now = self.now;
                let _ = self.host(side).endpoint.post_recv(now, qpn(side, qp), wqe);
            }
            Step::Pump { side, frames } => {
                let now = self.now;
                for _ in 0..=frames % 16 {
                    let (h, buf) = match side {
                        Side::A => (&mut self.a, &mut self.buf),
                        Side::B => (&mut self.b, &mut self.buf),
                    };
                    let before = drops(h);
                    let Some(t) = h.endpoint.poll_transmit(now, buf, &mut h.mem) else {
                        break;
                    };
                    assert!(drops(h) - before <= 1, "one frame sent, two counted");
                    let frame = buf[..t.len].to_vec();
                    let q = self.incoming(other(side));
                    q.push_back(frame);
                    if q.len() > NET_CAP {
                        q.pop_front();
                    }
                }
            }
            Step::Deliver { to, how } => self.deliver_step(to, how),
            Step::Inject { to, qp, spec } => {
                if let Some(frame) = self.craft(to, qp, &spec) {
                    self.deliver(to, &frame);
                }
            }
            Step::Raw { to, ref bytes } => self.deliver(to, bytes),
            Step::Advance { micros } => {
                self.now = self.now + Duration::from_micros(u64::from(micros));
                self.timers();
            }
            Step::AdvanceToTimer => {
                let next = [
                    self.a.endpoint.poll_timeout(),
                    self.b.endpoint.poll_timeout(),
                ]
                .into_iter()
                .flatten()
                .min();
                if let Some(t) = next {
                    self.now = self.now.max(t);
                }
                self.timers();
            }
            Step::Modify { side, qp, change } => self.modify(side, qp, change),
            Step::Deregister { side } => self.host(side).mem.remove(RW_KEY),
            Step::Reregister { side } => {
                let h = self.host(side);
                h.mem.remove(RW_KEY);
                h.add_region(RW_KEY, RW_BASE, RW_LEN, Access::ALL);
            }
        }
    }

    fn wr_id(&mut self) -> u64 {
        self.next_wr_id += 1;
        self.next_wr_id
    }

    fn timers(&mut self) {
        let now = self.now;
        self.a.endpoint.handle_timeout(now, &mut self.a.mem);
        self.b.endpoint.handle_timeout(now, &mut self.b.mem);
    }

    #[allow(clippy::too_many_arguments)]
    fn post(
        &mut self,
        side: Side,
        qp: Service,
        op: Op,
        local: Buf,
        remote: KeyChoice,
        remote_offset: u16,
        flags: u8,
        inline: bool,
        ud: UdChoice,
    ) {
        let (lkey, _, lbase) = keys(local.key);
        let (_, rkey, rbase) = keys(remote);
        let remote_addr = rbase + u64::from(remote_offset);
        let len = local.len % (MAX_LEN + 1);
        let op = match op {
            Op::Send => SendOp::Send,
            Op::SendImm(imm) => SendOp::SendWithImm { imm },
            Op::SendInv(k) => SendOp::SendWithInv { rkey: keys(k).1 },
            Op::Write => SendOp::Write { remote_addr, rkey },
            Op::WriteImm(imm) => SendOp::WriteWithImm {
                remote_addr,
                rkey,
                imm,
            },
            Op::Read => SendOp::Read { remote_addr, rkey },
            Op::CompareSwap(compare, swap) => SendOp::CompareSwap {
                remote_addr,
                rkey,
                compare,
                swap,
            },
            Op::FetchAdd(add) => SendOp::FetchAdd {
                remote_addr,
                rkey,
                add,
            },
        };
        let data = if inline && usize::from(len) <= xroce_transport::wqe::MAX_INLINE {
            let bytes: Vec<u8> = (0..len).map(|i| i as u8 ^ 0x5a).collect();
            // NOTE(unwrap): at most MAX_INLINE bytes.
            Gather::inline(&bytes).unwrap()
        } else {
            Gather::Sges(SgeList::single(
                lbase + u64::from(local.offset),
                u32::from(len),
                lkey,
            ))
        };
        let peer = other(side);
        let ud = (qp == Service::Ud).then(|| {
            let (me, them) = match side {
                Side::A => (&self.a, &self.b),
                Side::B => (&self.b, &self.a),
            };
            let mut dest = UdDest {
                path: me.path_to(them),
                remote_qpn: qpn(peer, Service::Ud).value(),
                remote_qkey: connection().qkey,
            };
            match ud {
                UdChoice::Peer => {}
                UdChoice::Qkey(q) => dest.remote_qkey = q,
                UdChoice::Qpn(n) => dest.remote_qpn = n & 0x00ff_ffff,
                UdChoice::Ipv6 => {
                    dest.path.dgid =
                        Gid::from_ipv6(std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2));
                }
                UdChoice::SgidIndex(i) => dest.path.sgid_index = i,
            }
            dest
        });
        let wqe = SendWqe {
            wr_id: self.wr_id(),
            op,
            flags: SendFlags(u32::from(flags & 0x0f)),
            data,
            ud,
        };
        let now = self.now;
        let _ = self.host(side).endpoint.post_send(now, qpn(side, qp), wqe);
    }

    fn deliver_step(&mut self, to: Side, how: Delivery) {
        let q = self.incoming(to);
        match how {
            Delivery::Next => {
                if let Some(f) = q.pop_front() {
                    self.deliver(to, &f);
                }
            }
            Delivery::All => {
                let frames: Vec<_> = q.drain(..).collect();
                for f in frames {
                    self.deliver(to, &f);
                }
            }
            Delivery::Drop => {
                q.pop_front();
            }
            Delivery::Duplicate => {
                if let Some(f) = q.front().cloned() {
                    self.deliver(to, &f);
                }
            }
            Delivery::SwapFirstTwo => {
                if q.len() >= 2 {
                    q.swap(0, 1);
                }
            }
            Delivery::Mutate {
                offset,
                xor,
                fix_icrc,
            } => {
                let Some(mut f) = q.pop_front() else {
                    return;
                };
                // Frames in flight are untagged IPv4: the IB part starts at byte 42 and
                // the ICRC takes the last 4.
                if f.len() > 46 {
                    let at = 42 + usize::from(offset) % (f.len() - 46);
                    f[at] ^= xor.max(1);
                    if fix_icrc && let Ok(crc) = icrc::compute_frame(&f) {
                        let n = f.len();
                        f[n - 4..].copy_from_slice(&crc.to_le_bytes());
                    }
                }
                self.deliver(to, &f);
            }
        }
    }

    /// A frame from the other host to `to`'s queue pair of `service`, as `spec` says.
    fn craft(&mut self, to: Side, service: Service, spec: &FrameSpec) -> Option<Vec<u8>> {
        let target = qpn(to, service);
        let (dst, src) = match to {
            Side::A => (&self.a, &self.b),
            Side::B => (&self.b, &self.a),
        };
        let d = dst.endpoint.qp(target)?.diagnostics();
        let opcode = if spec.raw_opcode {
            Opcode(spec.opcode)
        } else {
            let transport = match service {
                Service::Rc => 0x00,
                Service::Uc => 0x20,
                Service::Ud => 0x60,
            };
            Opcode(transport | (spec.opcode & 0x1f))
        };
        let info = opcode.info();
        if !info.is_supported() {
            return None;
        }
        let psn = match spec.psn {
            PsnBase::Expected(delta) => d.expected_psn.wrapping_add(delta as u32),
            PsnBase::Unacked(delta) => d.oldest_unacked_psn.wrapping_add(delta as u32),
            PsnBase::Raw(p) => Psn::new(p & 0x00ff_ffff),
        };
        let mut bth = BthRepr::new(opcode, target, psn);
        bth.ack_request = spec.ack_req;
        bth.solicited_event = spec.solicited;
        if let Some(pkey) = spec.pkey {
            bth.pkey = xroce_wire::Pkey(pkey);
        }
        let mut ib = IbRepr::new(bth);
        let (_, rkey, base) = keys(spec.key);
        let va = base + u64::from(spec.offset);
        if info.carries(ExtHeader::Reth) {
            ib.reth = Some(RethRepr {
                va,
                rkey: Rkey(rkey),
                dma_len: u32::from(spec.dma_len),
            });
        }
        if info.carries(ExtHeader::AtomicEth) {
            ib.atomic_eth = Some(AtomicEthRepr {
                va,
                rkey: Rkey(rkey),
                swap_add: spec.swap_add,
                compare: spec.compare,
            });
        }
        if info.carries(ExtHeader::Aeth) {
            ib.aeth = Some(AethRepr {
                syndrome: syndrome(spec.syndrome),
                msn: spec.msn & 0x00ff_ffff,
            });
        }
        if info.carries(ExtHeader::AtomicAckEth) {
            ib.atomic_ack_eth = Some(AtomicAckEthRepr {
                orig_data: spec.swap_add,
            });
        }
        if info.carries(ExtHeader::ImmDt) {
            ib.immdt = Some(ImmDtRepr { data: spec.imm });
        }
        if info.carries(ExtHeader::Ieth) {
            ib.ieth = Some(IethRepr { rkey: Rkey(rkey) });
        }
        if info.carries(ExtHeader::Deth) {
            let src_qp = spec
                .src_qpn
                .map_or(qpn(other(to), Service::Ud), |n| Qpn::new(n & 0x00ff_ffff));
            ib.deth = Some(DethRepr {
                qkey: Qkey(spec.qkey.unwrap_or(connection().qkey)),
                src_qp,
            });
        }
        if info.carries(ExtHeader::Rdeth) {
            return None;
        }
        let payload_len = if info.has_payload() {
            usize::from(spec.payload_len % (MAX_LEN + 64))
        } else {
            0
        };
        let headers = FrameRepr::ipv4(
            EthernetAddress(src.mac),
            EthernetAddress(dst.mac),
            src.gid.to_ipv4()?,
            dst.gid.to_ipv4()?,
            0xc000 | spec.msn as u16,
        );
        let mut frame = vec![0u8; xroce_transport::frame::MAX_FRAME + 128];
        let at = headers.header_len();
        let n = ib.emit(&mut frame[at..], payload_len).ok()?;
        frame[at + n..at + n + payload_len].fill(spec.fill);
        let len = headers.emit(&mut frame, n + payload_len).ok()?;
        frame.truncate(len);
        Some(frame)
    }

    fn modify(&mut self, side: Side, service: Service, change: Change) {
        let now = self.now;
        let q = qpn(side, service);
        let state = |s| QpAttr {
            qp_state: s,
            ..QpAttr::default()
        };
        let to = match change {
            Change::Err => state(QpState::Err),
            Change::Reset => state(QpState::Reset),
            Change::Sqd => state(QpState::Sqd),
            Change::Rts => state(QpState::Rts),
            Change::Reconnect { sq_psn, rq_psn } => {
                let c = connection();
                let (me, them, sq, rq) = match side {
                    Side::A => (&mut self.a, &self.b, c.psn_a, c.psn_b),
                    Side::B => (&mut self.b, &self.a, c.psn_b, c.psn_a),
                };
                let reset = state(QpState::Reset);
                if me
                    .endpoint
                    .modify_qp(now, q, &reset, AttrMask::STATE)
                    .is_err()
                {
                    return;
                }
                let peer = Peer {
                    path: me.path_to(them),
                    qpn: qpn(other(side), service),
                    sq_psn: sq.wrapping_add(sq_psn as u32),
                    rq_psn: rq.wrapping_add(rq_psn as u32),
                };
                bring_up(me, now, q, qp_type(service), peer, &c);
                if self.selective && service == Service::Rc {
                    // RESET turned it off; the engine turns it on again for an xroce peer.
                    let _ = me.endpoint.set_selective_repeat(q, true);
                }
                return;
            }
        };
        let _ = self
            .host(side)
            .endpoint
            .modify_qp(now, q, &to, AttrMask::STATE);
    }

    /// Takes every completion and event, as the engine does after each call.
    fn collect(&mut self) {
        for h in [&mut self.a, &mut self.b] {
            // Everything a step can generate: every work request of every queue pair
            // flushed, plus a few events.
            let d = h.endpoint.diagnostics();
            assert!(d.completions <= 3 * 2 * DEPTH as usize, "{d:?}");
            assert!(d.events <= 3 * 4, "{d:?}");
            while h.endpoint.poll_completion().is_some() {}
            while h.endpoint.poll_event().is_some() {}
        }
    }

    /// The invariants that hold after every step.
    pub fn check(&self) {
        for (name, h) in [("A", &self.a), ("B", &self.b)] {
            // The read-only region is untouched; no region changed size.
            let mut ro = 0;
            for r in h.mem.iter() {
                match r.lkey {
                    RO_KEY => {
                        ro += 1;
                        assert!(
                            r.bytes == self.ro,
                            "{name}: the region that forbids writes was written"
                        );
                    }
                    RW_KEY => assert_eq!(r.bytes.len(), RW_LEN, "{name}"),
                    other => panic!("{name}: a region with key {other:#x} appeared"),
                }
            }
            assert_eq!(ro, 1, "{name}");
            let d = h.endpoint.diagnostics();
            assert!(d.active <= 3, "{name}: {d:?}");
            assert!(d.timers <= 3 * TIMERS_PER_QP, "{name}: {d:?}");
            for s in [Service::Rc, Service::Uc, Service::Ud] {
                let side = if name == "A" { Side::A } else { Side::B };
                let q = h.endpoint.qp(qpn(side, s)).unwrap().diagnostics();
                assert!(q.send_queue <= DEPTH as usize, "{name} {s:?}: {q:?}");
                assert!(q.recv_queue <= DEPTH as usize, "{name} {s:?}: {q:?}");
                assert!(
                    q.responses <= q.response_capacity + 1,
                    "{name} {s:?}: {q:?}"
                );
                assert!(q.resources <= 2, "{name} {s:?}: {q:?}");
                let held = xroce_transport::Limits::default().max_held_packets as usize;
                assert!(q.held <= held, "{name} {s:?}: {q:?}");
                assert_eq!(q.completions, 0, "{name} {s:?}: {q:?}");
            }
        }
        assert!(self.to_a.len() <= NET_CAP && self.to_b.len() <= NET_CAP);
    }
}

/// The sum of a host's drop/NAK counters.
fn drops(h: &Host) -> u64 {
    let c = h.endpoint.counters();
    xroce_transport::Counter::ALL
        .iter()
        .filter(|k| k.is_drop_or_nak())
        .map(|&k| c.value(k))
        .sum()
}

/// An AETH syndrome from its byte (IBTA 9.3.5 table 43).
fn syndrome(b: u8) -> Syndrome {
    let v = b & 0x1f;
    match b >> 5 & 0x3 {
        0 => Syndrome::Ack { credit_count: v },
        1 => Syndrome::RnrNak {
            timer: RnrTimer::new(v),
        },
        3 => Syndrome::Nak(NakCode::from_code(v)),
        _ => Syndrome::Reserved(v),
    }
}

/// Runs one input from its raw bytes, as the fuzz target does, and returns how many steps
/// it had.
pub fn run_bytes(data: &[u8]) -> usize {
    run_bytes_in(data, World::new)
}

/// The same with both RC queue pairs in selective repeat.
pub fn run_bytes_selective(data: &[u8]) -> usize {
    run_bytes_in(data, World::selective)
}

fn run_bytes_in(data: &[u8], world: fn() -> World) -> usize {
    let u = arbitrary::Unstructured::new(data);
    match <Input as Arbitrary>::arbitrary_take_rest(u) {
        Ok(input) => {
            world().run(&input);
            input.steps.len()
        }
        Err(_) => 0,
    }
}
