//! A deterministic two-host simulation of the transport: virtual time, a seeded network
//! that drops, duplicates, reorders, delays and corrupts frames, and a random workload of
//! every operation over several queue pairs, with every outcome checked.
//!
//! What is checked, for every operation:
//! - WRITE, READ and SEND data lands exactly where it should, byte for byte (RC always; UC
//!   and UD for the messages that arrive, which must arrive whole);
//! - atomics execute exactly once: every original value returned is the one the model
//!   predicts, and the final word is the model's;
//! - send completions come exactly once and in posting order; receive completions come
//!   once, in order (RC), for messages that were sent;
//! - RC queue pairs never leave RTS (the retry budgets are never exhausted at these loss
//!   rates) and every RC operation completes successfully.
//!
//! Corrupted frames must be caught by the ICRC (or fail to parse): the data checks prove no
//! corrupted byte was ever accepted.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::fmt;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xroce_transport::frame::MAX_FRAME;
use xroce_transport::testing::{Connection, Host, connect};
use xroce_transport::{
    Access, Completion, CompletionQueue, Gather, Instant, Limits, QpState, QpType, RecvWqe,
    SendFlags, SendOp, SendWqe, SgeList, UdDest, WcFlags, WcOpcode, WcStatus,
};
use xroce_wire::{IbMtu, Psn, Qpn};

/// The knobs of one simulation run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SimConfig {
    /// The seed of every random choice.
    pub seed: u64,
    /// Operations to complete in total.
    pub ops: usize,
    /// Probability that a frame is lost.
    pub loss: f64,
    /// Probability that a frame is delivered twice.
    pub duplicate: f64,
    /// Probability that a frame is held back (and so overtaken).
    pub reorder: f64,
    /// Probability that one bit of a frame is flipped.
    pub corrupt: f64,
    /// The path MTU.
    pub mtu: IbMtu,
    /// Start PSNs near the 2^24 wrap.
    pub near_wrap: bool,
    /// Let receive queues run dry now and then (RNR NAKs).
    pub starve_receives: bool,
    /// The RC QPs' local ACK timeout code.
    pub timeout: u8,
    /// The hosts' floor of the retransmission timeout derived from measured round trips.
    pub min_rto: Duration,
}

impl SimConfig {
    /// A run with `loss` and proportionate duplication, reordering and corruption.
    /// `loss` is the probability that a frame does not arrive intact: three quarters of it
    /// are drops, one quarter bit flips.
    pub(crate) fn lossy(seed: u64, ops: usize, loss: f64) -> SimConfig {
        SimConfig {
            seed,
            ops,
            loss: loss * 0.75,
            duplicate: loss / 2.0,
            reorder: loss,
            corrupt: loss * 0.25,
            mtu: IbMtu::Mtu1024,
            near_wrap: seed % 2 == 1,
            starve_receives: seed.is_multiple_of(3),
            timeout: 8,
            min_rto: Limits::default().min_retransmit_timeout,
        }
    }
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub(crate) struct SimReport {
    /// Operations completed (and checked).
    pub completed: usize,
    /// RC flows that failed with an exhausted retry budget, each failure checked against
    /// the network's log: every one of the last `retry_cnt + 1` attempts lost its request
    /// or every response to it.
    pub justified_failures: usize,
    /// UC/UD messages sent that never arrived.
    pub unreliable_lost: usize,
    /// Frames the network carried, dropped, duplicated, held back and corrupted.
    pub frames: usize,
    /// Frames dropped.
    pub dropped: usize,
    /// Frames duplicated.
    pub duplicated: usize,
    /// Frames reordered.
    pub reordered: usize,
    /// Frames corrupted.
    pub corrupted: usize,
    /// Virtual time at the end.
    pub elapsed: Duration,
    /// Counters of both hosts, summed.
    pub counters: xroce_transport::Counters,
}

/// Why a run failed: the first violated expectation.
#[derive(Debug)]
pub(crate) struct SimFailure(pub(crate) String);

impl fmt::Display for SimFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(SimFailure(format!($($fmt)*)));
        }
    };
}

const BASE: u64 = 0x1000_0000;
const KEY: u32 = 0x55;
const RKEY: u32 = KEY | 0x8000_0000;
/// Bytes per data slot: up to four MTUs of 1024 and a bit.
const SLOTS: usize = 24;
const WINDOW: usize = 12;
/// The transport retry budget of every RC QP (the most the 3-bit field allows).
const RETRY_CNT: u8 = 7;
const GRH: usize = 40;
/// UC and UD never resend: a message not delivered this long after it was sent is lost.
const UNRELIABLE_EXPIRY: Duration = Duration::from_millis(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    A,
    B,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OpKind {
    Write,
    WriteImm,
    Send,
    SendImm,
    Read,
    FetchAdd,
    CompareSwap,
}

#[derive(Clone, Debug)]
struct Op {
    id: u64,
    kind: OpKind,
    slot: usize,
    len: usize,
    data: Vec<u8>,
    /// Atomics: the original value the model expects back.
    expect_orig: u64,
    /// UC/UD: when the send completed (the message is lost if it has not arrived within
    /// [`UNRELIABLE_EXPIRY`] of that).
    sent_at: Option<Instant>,
    /// UC/UD: how many times it arrived.
    deliveries: u32,
}

/// One direction of traffic over one QP pair.
struct Flow {
    qp_type: QpType,
    requester: Side,
    req_qpn: Qpn,
    resp_qpn: Qpn,
    /// Byte offsets of this flow's areas in the two hosts' regions.
    src_area: u64,
    dst_area: u64,
    recv_area: u64,
    atomic_word: u64,
    next_id: u64,
    free_slots: Vec<usize>,
    in_flight: VecDeque<Op>,
    /// Ops that consume a receive at the responder, in posting order (RC).
    recv_consumers: VecDeque<u64>,
    /// UC/UD ops by id, until checked.
    unreliable: HashMap<u64, Op>,
    free_recv_slots: Vec<usize>,
    /// Receive slots posted, in order.
    posted_recvs: VecDeque<usize>,
    atomic_value: u64,
    slot_len: usize,
    /// UC/UD messages that never arrived.
    lost: usize,
    /// The requester's oldest unacknowledged PSN and when it last changed (RC).
    oldest: Option<(Psn, Instant)>,
    /// The flow's QP failed with an exhausted retry budget (justified by the network log);
    /// what remains is flushed.
    failed: bool,
}

impl Flow {
    fn src(&self, slot: usize) -> u64 {
        self.src_area + (slot * self.slot_len) as u64
    }
    fn dst(&self, slot: usize) -> u64 {
        self.dst_area + (slot * self.slot_len) as u64
    }
    fn recv(&self, slot: usize) -> u64 {
        self.recv_area + (slot * (self.slot_len + GRH)) as u64
    }
}

struct InFlight {
    to: Side,
    frame: Vec<u8>,
}

/// What the network did with one frame, for judging retry exhaustion.
#[derive(Clone, Copy, Debug)]
struct Sent {
    at: Instant,
    to: Side,
    dest_qpn: Qpn,
    psn: Psn,
    /// The last PSN the request covers (a READ covers one per response packet).
    last_psn: Psn,
    response: bool,
    /// A positive response: an ACK (not a NAK or RNR NAK), a READ response, an atomic
    /// acknowledgement.
    positive: bool,
    /// A plain ACKNOWLEDGE (which cannot carry READ data or an atomic result).
    plain_ack: bool,
    /// At least one copy arrived uncorrupted.
    intact: bool,
    /// When the first uncorrupted copy arrived.
    arrived: Option<Instant>,
}

/// The simulated network: one queue of frames ordered by delivery time.
struct Network {
    rng: StdRng,
    cfg: SimConfig,
    queue: BinaryHeap<Reverse<(Instant, u64)>>,
    frames: HashMap<u64, InFlight>,
    seq: u64,
    /// The delivery time of the last in-order frame, per direction.
    last: [Instant; 2],
    log: Vec<Sent>,
    report: SimReport,
}

impl Network {
    fn send(&mut self, now: Instant, to: Side, frame: &[u8]) {
        self.report.frames += 1;
        let mut entry = xroce_wire::Frame::parse(frame).ok().map(|f| {
            let positive = f.ib.aeth.is_none_or(|a| a.syndrome.is_ack());
            let response = f.ib.info().is_response();
            let psn = f.ib.bth.psn;
            let mtu = self.cfg.mtu.bytes() as u64;
            let last_psn = match (f.ib.info().operation, f.ib.reth) {
                (xroce_wire::Operation::RdmaReadRequest, Some(reth)) => {
                    psn.wrapping_add((u64::from(reth.dma_len).div_ceil(mtu).max(1) - 1) as u32)
                }
                _ => psn,
            };
            let plain_ack = f.ib.info().operation == xroce_wire::Operation::Acknowledge;
            Sent {
                at: now,
                to,
                dest_qpn: f.ib.bth.dest_qp,
                psn,
                last_psn,
                response,
                positive,
                plain_ack,
                intact: false,
                arrived: None,
            }
        });
        if self.rng.random_bool(self.cfg.loss) {
            self.report.dropped += 1;
            self.log.extend(entry);
            return;
        }
        let copies = if self.rng.random_bool(self.cfg.duplicate) {
            self.report.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut frame = frame.to_vec();
            let mut intact_copy = false;
            if self.rng.random_bool(self.cfg.corrupt) {
                // Corrupt something the ICRC covers: from the IP header to the end.
                let bit = self.rng.random_range(14 * 8..frame.len() * 8);
                frame[bit / 8] ^= 1 << (bit % 8);
                self.report.corrupted += 1;
            } else {
                intact_copy = true;
            }
            // A link delivers in order with a little jitter; a reordered frame is held back
            // and overtaken by the frames behind it.
            let jitter = Duration::from_nanos(self.rng.random_range(2_000..8_000));
            let lane = usize::from(to == Side::A);
            let mut at = (now + jitter).max(self.last[lane]);
            self.last[lane] = at;
            if self.rng.random_bool(self.cfg.reorder) {
                at = at + Duration::from_nanos(self.rng.random_range(10_000..60_000));
                self.report.reordered += 1;
            }
            if intact_copy && let Some(e) = entry.as_mut() {
                e.intact = true;
                e.arrived = Some(e.arrived.map_or(at, |t| t.min(at)));
            }
            self.seq += 1;
            self.queue.push(Reverse((at, self.seq)));
            self.frames.insert(self.seq, InFlight { to, frame });
        }
        self.log.extend(entry);
    }

    fn next_time(&self) -> Option<Instant> {
        self.queue.peek().map(|Reverse((t, _))| *t)
    }

    fn pop_due(&mut self, now: Instant) -> Option<InFlight> {
        let Reverse((t, seq)) = *self.queue.peek()?;
        if t > now {
            return None;
        }
        self.queue.pop();
        self.frames.remove(&seq)
    }
}

struct Sim {
    cfg: SimConfig,
    rng: StdRng,
    a: Host,
    b: Host,
    net: Network,
    now: Instant,
    flows: Vec<Flow>,
    completed: usize,
    posted: usize,
}

impl Sim {
    fn host(&mut self, side: Side) -> &mut Host {
        match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }

    fn new(cfg: SimConfig) -> Sim {
        let limits = Limits {
            min_retransmit_timeout: cfg.min_rto,
            ..Limits::default()
        };
        let mut a = Host::with_limits(1, limits);
        let mut b = Host::with_limits(2, limits);
        let mtu = cfg.mtu.bytes();
        let slot_len = 4 * mtu + 64;
        let flow_specs: [(QpType, Side, u32, u32); 8] = [
            // Two RC pairs with traffic both ways, one one-way RC pair each way, UC and UD.
            (QpType::Rc, Side::A, 0x101, 0x201),
            (QpType::Rc, Side::B, 0x201, 0x101),
            (QpType::Rc, Side::A, 0x102, 0x202),
            (QpType::Rc, Side::B, 0x203, 0x103),
            (QpType::Rc, Side::A, 0x104, 0x204),
            (QpType::Uc, Side::A, 0x105, 0x205),
            (QpType::Uc, Side::B, 0x206, 0x106),
            (QpType::Ud, Side::A, 0x107, 0x207),
        ];
        let area = slot_len * SLOTS;
        let recv_area = (slot_len + GRH) * SLOTS;
        let per_flow = 2 * area + recv_area + 4096;
        let region_len = per_flow * flow_specs.len();
        a.add_region(KEY, BASE, region_len, Access::ALL);
        b.add_region(KEY, BASE, region_len, Access::ALL);
        let mut conn = Connection {
            mtu: cfg.mtu,
            timeout: cfg.timeout,
            retry_cnt: RETRY_CNT,
            rnr_retry: 7,
            min_rnr_timer: 1,
            max_rd_atomic: 4,
            depth: 64,
            ..Connection::default()
        };
        if cfg.near_wrap {
            conn.psn_a = Psn::new(0xff_ff00);
            conn.psn_b = Psn::new(0xff_fff0);
        }
        let mut flows = Vec::new();
        for (i, &(qp_type, requester, req, resp)) in flow_specs.iter().enumerate() {
            let (req_qpn, resp_qpn) = (Qpn::new(req), Qpn::new(resp));
            let exists = a
                .endpoint
                .qp(if requester == Side::A {
                    req_qpn
                } else {
                    resp_qpn
                })
                .is_some();
            if !exists {
                let (qa, qb) = if requester == Side::A {
                    (req_qpn, resp_qpn)
                } else {
                    (resp_qpn, req_qpn)
                };
                connect(&mut a, qa, &mut b, qb, qp_type, &conn, Instant::ZERO);
            }
            let start = (i * per_flow) as u64;
            flows.push(Flow {
                qp_type,
                requester,
                req_qpn,
                resp_qpn,
                src_area: start,
                dst_area: start + area as u64,
                recv_area: start + 2 * area as u64,
                atomic_word: start + (2 * area + recv_area) as u64,
                next_id: 1,
                free_slots: (0..SLOTS).rev().collect(),
                in_flight: VecDeque::new(),
                recv_consumers: VecDeque::new(),
                unreliable: HashMap::new(),
                free_recv_slots: (0..SLOTS).rev().collect(),
                posted_recvs: VecDeque::new(),
                atomic_value: 0,
                slot_len,
                lost: 0,
                oldest: None,
                failed: false,
            });
        }
        let rng = StdRng::seed_from_u64(cfg.seed);
        let net_rng = StdRng::seed_from_u64(cfg.seed ^ 0x5eed_f00d);
        Sim {
            cfg,
            rng,
            a,
            b,
            net: Network {
                rng: net_rng,
                cfg,
                queue: BinaryHeap::new(),
                frames: HashMap::new(),
                seq: 0,
                last: [Instant::ZERO; 2],
                log: Vec::new(),
                report: SimReport::default(),
            },
            now: Instant::ZERO,
            flows,
            completed: 0,
            posted: 0,
        }
    }

    fn mem_write(&mut self, side: Side, offset: u64, bytes: &[u8]) {
        let region = self.host(side).mem.region_mut(0);
        region.bytes[offset as usize..offset as usize + bytes.len()].copy_from_slice(bytes);
    }

    fn mem_read(&mut self, side: Side, offset: u64, len: usize) -> Vec<u8> {
        self.host(side).mem.region(0).bytes[offset as usize..offset as usize + len].to_vec()
    }

    fn pick_len(&mut self, max: usize) -> usize {
        let mtu = self.cfg.mtu.bytes();
        let edges = [0, 1, 7, 8, mtu - 1, mtu, mtu + 1, 2 * mtu, 4 * mtu];
        let len = if self.rng.random_bool(0.3) {
            edges[self.rng.random_range(0..edges.len())]
        } else {
            self.rng.random_range(0..=4 * mtu)
        };
        len.min(max)
    }

    fn random_bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.rng.fill(&mut v[..]);
        v
    }

    /// Keeps receive queues stocked (now and then letting them run dry).
    fn post_receives(&mut self) -> Result<(), SimFailure> {
        for f in 0..self.flows.len() {
            if self.cfg.starve_receives && self.rng.random_bool(0.05) {
                continue;
            }
            let (resp_side, resp_qpn) = {
                let flow = &self.flows[f];
                let side = if flow.requester == Side::A {
                    Side::B
                } else {
                    Side::A
                };
                (side, flow.resp_qpn)
            };
            while let Some(slot) = self.flows[f].free_recv_slots.pop() {
                let flow = &self.flows[f];
                let len = (flow.slot_len + GRH) as u32;
                let wqe = RecvWqe {
                    wr_id: slot as u64,
                    sges: SgeList::single(BASE + flow.recv(slot), len, KEY),
                };
                let now = self.now;
                let r = self.host(resp_side).endpoint.post_recv(now, resp_qpn, wqe);
                ensure!(r.is_ok(), "post_recv on {resp_qpn} failed: {r:?}");
                self.flows[f].posted_recvs.push_back(slot);
            }
        }
        Ok(())
    }

    /// Posts new operations while the flows have room and work remains.
    fn post_ops(&mut self) -> Result<(), SimFailure> {
        for f in 0..self.flows.len() {
            while self.posted < self.cfg.ops
                && !self.flows[f].failed
                && self.flows[f].in_flight.len() < WINDOW
                && !self.flows[f].free_slots.is_empty()
            {
                self.post_one(f)?;
            }
        }
        Ok(())
    }

    fn post_one(&mut self, f: usize) -> Result<(), SimFailure> {
        let qp_type = self.flows[f].qp_type;
        let kinds: &[OpKind] = match qp_type {
            QpType::Rc => &[
                OpKind::Write,
                OpKind::WriteImm,
                OpKind::Send,
                OpKind::SendImm,
                OpKind::Read,
                OpKind::FetchAdd,
                OpKind::CompareSwap,
            ],
            QpType::Uc => &[
                OpKind::Write,
                OpKind::WriteImm,
                OpKind::Send,
                OpKind::SendImm,
            ],
            QpType::Ud => &[OpKind::Send, OpKind::SendImm],
        };
        let kind = kinds[self.rng.random_range(0..kinds.len())];
        // NOTE(unwrap): post_ops checked that a slot is free.
        let slot = self.flows[f].free_slots.pop().unwrap();
        let slot_len = self.flows[f].slot_len;
        let mtu = self.cfg.mtu.bytes();
        let mut len = match (qp_type, kind) {
            (_, OpKind::FetchAdd | OpKind::CompareSwap) => 8,
            (QpType::Ud, _) => self.pick_len(mtu),
            _ => self.pick_len(slot_len - 64),
        };
        // Unreliable messages that carry no immediate are identified by their first 8 bytes.
        if qp_type != QpType::Rc && kind == OpKind::Send {
            len = len.max(8);
        }
        let id = self.flows[f].next_id;
        self.flows[f].next_id += 1;
        let mut data = self.random_bytes(len);
        if qp_type != QpType::Rc && kind == OpKind::Send {
            data[..8].copy_from_slice(&id.to_le_bytes());
        }
        let flow = &self.flows[f];
        let (req_side, resp_side) = if flow.requester == Side::A {
            (Side::A, Side::B)
        } else {
            (Side::B, Side::A)
        };
        let src = flow.src(slot);
        let dst = flow.dst(slot);
        let word = flow.atomic_word;
        let mut expect_orig = 0;
        let op = match kind {
            OpKind::Write => SendOp::Write {
                remote_addr: BASE + dst,
                rkey: RKEY,
            },
            OpKind::WriteImm => SendOp::WriteWithImm {
                remote_addr: BASE + dst,
                rkey: RKEY,
                imm: id as u32,
            },
            OpKind::Send => SendOp::Send,
            OpKind::SendImm => SendOp::SendWithImm { imm: id as u32 },
            OpKind::Read => SendOp::Read {
                remote_addr: BASE + dst,
                rkey: RKEY,
            },
            OpKind::FetchAdd => {
                let add = self.rng.random::<u64>() >> 8;
                let flow = &mut self.flows[f];
                expect_orig = flow.atomic_value;
                flow.atomic_value = flow.atomic_value.wrapping_add(add);
                SendOp::FetchAdd {
                    remote_addr: BASE + word,
                    rkey: RKEY,
                    add,
                }
            }
            OpKind::CompareSwap => {
                let hit = self.rng.random_bool(0.5);
                let swap = self.rng.random::<u64>();
                let flow = &mut self.flows[f];
                let compare = if hit {
                    flow.atomic_value
                } else {
                    flow.atomic_value ^ 1
                };
                expect_orig = flow.atomic_value;
                if hit {
                    flow.atomic_value = swap;
                }
                SendOp::CompareSwap {
                    remote_addr: BASE + word,
                    rkey: RKEY,
                    compare,
                    swap,
                }
            }
        };
        match kind {
            OpKind::Read => self.mem_write(resp_side, dst, &data),
            OpKind::FetchAdd | OpKind::CompareSwap => {}
            _ => self.mem_write(req_side, src, &data),
        }
        let ud = if qp_type == QpType::Ud {
            let (from, to) = if req_side == Side::A {
                (&self.a, &self.b)
            } else {
                (&self.b, &self.a)
            };
            Some(UdDest {
                path: from.path_to(to),
                remote_qpn: self.flows[f].resp_qpn.value(),
                remote_qkey: 0x1111_1111,
            })
        } else {
            None
        };
        let wqe = SendWqe {
            wr_id: id,
            op,
            flags: SendFlags::SIGNALED,
            data: Gather::Sges(SgeList::single(BASE + src, len as u32, KEY)),
            ud,
        };
        let now = self.now;
        let req_qpn = self.flows[f].req_qpn;
        let r = self.host(req_side).endpoint.post_send(now, req_qpn, wqe);
        ensure!(r.is_ok(), "post_send {kind:?} on {req_qpn} failed: {r:?}");
        let op = Op {
            id,
            kind,
            slot,
            len,
            data,
            expect_orig,
            sent_at: None,
            deliveries: 0,
        };
        let flow = &mut self.flows[f];
        if qp_type != QpType::Rc {
            flow.unreliable.insert(id, op.clone());
        } else if matches!(kind, OpKind::Send | OpKind::SendImm | OpKind::WriteImm) {
            flow.recv_consumers.push_back(id);
        }
        flow.in_flight.push_back(op);
        self.posted += 1;
        Ok(())
    }

    fn flow_of(&self, side: Side, c: &Completion) -> Option<usize> {
        self.flows.iter().position(|f| match c.queue {
            CompletionQueue::Send => f.requester == side && f.req_qpn.value() == c.qpn,
            CompletionQueue::Recv => f.requester != side && f.resp_qpn.value() == c.qpn,
        })
    }

    fn check_completions(&mut self, side: Side) -> Result<(), SimFailure> {
        while let Some(c) = self.host(side).endpoint.poll_completion() {
            let Some(f) = self.flow_of(side, &c) else {
                // Two flows share an RC pair: the send side of one is the other's requester.
                return Err(SimFailure(format!("completion for no flow: {c:?}")));
            };
            match c.queue {
                CompletionQueue::Send => self.on_send_completion(f, side, c)?,
                CompletionQueue::Recv => self.on_recv_completion(f, side, c)?,
            }
        }
        Ok(())
    }

    fn on_send_completion(
        &mut self,
        f: usize,
        side: Side,
        c: Completion,
    ) -> Result<(), SimFailure> {
        let flow = &mut self.flows[f];
        let Some(op) = flow.in_flight.pop_front() else {
            return Err(SimFailure(format!(
                "send completion with nothing in flight: {c:?}"
            )));
        };
        ensure!(
            c.wr_id == op.id,
            "flow {f}: completion for wr {} but {} was posted first",
            c.wr_id,
            op.id
        );
        if flow.failed {
            ensure!(
                c.status == WcStatus::WrFlushErr,
                "flow {f}: after the failure, {:?} instead of a flush",
                c.status
            );
            self.completed += 1;
            return Ok(());
        }
        if c.status == WcStatus::RetryExcErr && flow.qp_type == QpType::Rc {
            let req = flow.req_qpn;
            let psn = self
                .host(side)
                .endpoint
                .qp(req)
                .map(|q| q.oldest_unacked_psn());
            let ra = matches!(
                op.kind,
                OpKind::Read | OpKind::FetchAdd | OpKind::CompareSwap
            );
            match self.justify_retry_exhaustion(f, side, psn, ra) {
                Ok(()) => {}
                Err(e) if std::env::var("SIM_TRACE").is_ok() => {
                    let qp = self.host(side).endpoint.qp(req).map(|q| format!("{q:#?}"));
                    return Err(SimFailure(format!(
                        "{e}\n{}\n{:?}",
                        qp.unwrap_or_default(),
                        self.host(side).endpoint.counters()
                    )));
                }
                Err(e) => return Err(e),
            }
            let flow = &mut self.flows[f];
            flow.failed = true;
            self.net.report.justified_failures += 1;
            self.completed += 1;
            return Ok(());
        }
        let flow = &mut self.flows[f];
        ensure!(
            c.status == WcStatus::Success,
            "flow {f} ({:?}): {:?} failed with {:?}",
            flow.qp_type,
            op.kind,
            c.status
        );
        let qp_type = flow.qp_type;
        let (src, dst) = (flow.src(op.slot), flow.dst(op.slot));
        let resp_side = if side == Side::A { Side::B } else { Side::A };
        if qp_type == QpType::Rc {
            match op.kind {
                OpKind::Write | OpKind::WriteImm => {
                    let got = self.mem_read(resp_side, dst, op.len);
                    ensure!(
                        got == op.data,
                        "flow {f}: WRITE {} of {} bytes did not land intact",
                        op.id,
                        op.len
                    );
                }
                OpKind::Read => {
                    let got = self.mem_read(side, src, op.len);
                    ensure!(
                        got == op.data,
                        "flow {f}: READ {} of {} bytes did not come back intact",
                        op.id,
                        op.len
                    );
                }
                OpKind::FetchAdd | OpKind::CompareSwap => {
                    let got = self.mem_read(side, src, 8);
                    let orig = u64::from_le_bytes(got.try_into().unwrap_or_default());
                    ensure!(
                        orig == op.expect_orig,
                        "flow {f}: atomic {} returned {orig:#x}, the model says {:#x}",
                        op.id,
                        op.expect_orig
                    );
                }
                OpKind::Send | OpKind::SendImm => {}
            }
        }
        let expected_opcode = match op.kind {
            OpKind::Write | OpKind::WriteImm => WcOpcode::RdmaWrite,
            OpKind::Send | OpKind::SendImm => WcOpcode::Send,
            OpKind::Read => WcOpcode::RdmaRead,
            OpKind::FetchAdd => WcOpcode::FetchAdd,
            OpKind::CompareSwap => WcOpcode::CompSwap,
        };
        ensure!(
            c.opcode == expected_opcode,
            "flow {f}: completion opcode {:?} for {:?}",
            c.opcode,
            op.kind
        );
        if qp_type == QpType::Rc {
            self.flows[f].free_slots.push(op.slot);
        } else if let Some(u) = self.flows[f].unreliable.get_mut(&op.id) {
            // The slot stays busy until the message arrives or is known lost: a late
            // packet must not land in a reused slot.
            u.sent_at = Some(self.now);
        }
        self.completed += 1;
        Ok(())
    }

    fn on_recv_completion(
        &mut self,
        f: usize,
        side: Side,
        c: Completion,
    ) -> Result<(), SimFailure> {
        let qp_failed = self
            .flows
            .iter()
            .any(|g| g.failed && (g.req_qpn.value() == c.qpn || g.resp_qpn.value() == c.qpn));
        let flow = &mut self.flows[f];
        let slot = flow.posted_recvs.pop_front();
        ensure!(
            slot == Some(c.wr_id as usize),
            "flow {f}: receive completion {} out of order (expected {slot:?})",
            c.wr_id
        );
        if c.status == WcStatus::WrFlushErr && qp_failed {
            // The QP of a failed flow was flushed.
            return Ok(());
        }
        ensure!(
            c.status == WcStatus::Success,
            "flow {f}: receive failed with {:?}",
            c.status
        );
        let slot = c.wr_id as usize;
        let recv_at = flow.recv(slot);
        let qp_type = flow.qp_type;
        let grh = if qp_type == QpType::Ud { GRH } else { 0 };
        let op = if qp_type == QpType::Rc {
            let Some(id) = flow.recv_consumers.pop_front() else {
                return Err(SimFailure(format!(
                    "flow {f}: receive completion with no message sent"
                )));
            };
            flow.in_flight
                .iter()
                .find(|o| o.id == id)
                .cloned()
                .or_else(|| flow.unreliable.get(&id).cloned())
        } else {
            let id = if c.flags.contains(WcFlags::WITH_IMM) {
                Some(u64::from(c.imm))
            } else {
                None
            };
            let id = match id {
                Some(id) => id,
                None => {
                    let first = self.mem_read(side, recv_at + grh as u64, 8);
                    u64::from_le_bytes(first.try_into().unwrap_or_default())
                }
            };
            let flow = &mut self.flows[f];
            let qp_type = flow.qp_type;
            let Some(op) = flow.unreliable.get_mut(&id) else {
                return Err(SimFailure(format!(
                    "flow {f}: message {id} was never sent, or arrived too late"
                )));
            };
            op.deliveries += 1;
            // UD has no duplicate detection: a duplicated datagram is delivered twice, as on
            // any RDMA NIC. UC drops duplicates by PSN.
            ensure!(
                op.deliveries == 1 || qp_type == QpType::Ud,
                "flow {f}: UC message {id} delivered {} times",
                op.deliveries
            );
            Some(op.clone())
        };
        if let Some(op) = op {
            match op.kind {
                OpKind::WriteImm => {
                    ensure!(
                        c.opcode == WcOpcode::RecvRdmaWithImm && c.byte_len as usize == op.len,
                        "flow {f}: WRITE_IMM receive {c:?} for {} bytes",
                        op.len
                    );
                    let dst = self.flows[f].dst(op.slot);
                    let got = self.mem_read(side, dst, op.len);
                    ensure!(
                        got == op.data,
                        "flow {f}: WRITE_IMM {} data wrong at the responder",
                        op.id
                    );
                }
                _ => {
                    ensure!(
                        c.opcode == WcOpcode::Recv && c.byte_len as usize == op.len + grh,
                        "flow {f}: receive {c:?} for a {}-byte SEND",
                        op.len
                    );
                    let got = self.mem_read(side, recv_at + grh as u64, op.len);
                    ensure!(
                        got == op.data,
                        "flow {f}: SEND {} data wrong in the receive buffer",
                        op.id
                    );
                }
            }
            if matches!(op.kind, OpKind::SendImm | OpKind::WriteImm) {
                ensure!(
                    c.flags.contains(WcFlags::WITH_IMM) && c.imm == op.id as u32,
                    "flow {f}: immediate data lost"
                );
            }
        }
        self.flows[f].free_recv_slots.push(slot);
        Ok(())
    }

    /// Notes when each RC requester's oldest unacknowledged PSN moves: its retry budget is
    /// reset then, so only what happens afterwards can exhaust it.
    fn sample_progress(&mut self) {
        for f in 0..self.flows.len() {
            let flow = &self.flows[f];
            if flow.qp_type != QpType::Rc {
                continue;
            }
            let (side, qpn) = (flow.requester, flow.req_qpn);
            let now = self.now;
            let psn = self
                .host(side)
                .endpoint
                .qp(qpn)
                .map(|q| q.oldest_unacked_psn());
            let flow = &mut self.flows[f];
            match (psn, flow.oldest) {
                (Some(p), Some((q, _))) if p == q => {}
                (Some(p), _) => flow.oldest = Some((p, now)),
                (None, _) => {}
            }
        }
    }

    /// A retry exhaustion is legitimate only if each of the last `retry_cnt + 1` attempts to
    /// get the oldest unacknowledged PSN through failed on the network: its request did not
    /// arrive intact, or no response covering it came back intact before the next attempt.
    fn justify_retry_exhaustion(
        &self,
        f: usize,
        side: Side,
        psn: Option<Psn>,
        read_or_atomic: bool,
    ) -> Result<(), SimFailure> {
        let flow = &self.flows[f];
        let (req, resp) = (flow.req_qpn, flow.resp_qpn);
        let Some(psn) = psn else {
            return Err(SimFailure(format!("QP {req} vanished")));
        };
        // Since when P has been the oldest unacknowledged PSN (the budget was full then).
        let since = match flow.oldest {
            Some((p, t)) if p == psn => t,
            _ => self.now,
        };
        let other = if side == Side::A { Side::B } else { Side::A };
        let attempts = self
            .net
            .log
            .iter()
            .filter(|e| {
                e.to == other
                    && e.dest_qpn == resp
                    && !e.response
                    && e.at >= since
                    && e.psn.distance(psn) <= 0
                    && e.last_psn.distance(psn) >= 0
            })
            .count();
        // The first transmission may predate `since`; the retransmissions cannot.
        ensure!(
            attempts >= usize::from(RETRY_CNT),
            "QP {req}: retry budget exhausted after only {attempts} retransmissions of PSN {psn:?} since {since:?}"
        );
        // Any answer to P arriving intact after `since` would have moved P on: for a READ a
        // response for P itself, for an atomic its acknowledgement, for a SEND/WRITE a
        // positive ACK for P or any response for a later PSN.
        let answer = self.net.log.iter().find(|e| {
            e.to == side
                && e.dest_qpn == req
                && e.response
                && e.arrived.is_some_and(|t| t >= since && t <= self.now)
                && if read_or_atomic {
                    e.psn == psn && e.positive && !e.plain_ack
                } else {
                    e.psn.distance(psn) > 0 || (e.psn == psn && e.positive)
                }
        });
        if let Some(e) = answer {
            return Err(SimFailure(format!(
                "QP {req}: retry budget exhausted (noticed at {:?}) although an answer for PSN {psn:?} (read/atomic: {read_or_atomic}) arrived intact at {:?}, after it became the oldest at {since:?}: {e:?}",
                self.now, e.arrived
            )));
        }
        Ok(())
    }

    /// UC/UD messages (and UC WRITEs, which complete nowhere at the responder) that were
    /// sent long enough ago are either delivered or lost: release their slots.
    fn expire_unreliable(&mut self) {
        let now = self.now;
        for flow in &mut self.flows {
            let expired: Vec<u64> = flow
                .unreliable
                .iter()
                .filter(|(_, op)| op.sent_at.is_some_and(|t| now - t >= UNRELIABLE_EXPIRY))
                .map(|(&id, _)| id)
                .collect();
            for id in expired {
                if let Some(op) = flow.unreliable.remove(&id) {
                    flow.free_slots.push(op.slot);
                    let consumes =
                        matches!(op.kind, OpKind::Send | OpKind::SendImm | OpKind::WriteImm);
                    if consumes && op.deliveries == 0 {
                        flow.lost += 1;
                    }
                }
            }
        }
    }

    fn transmit(&mut self) {
        let mut buf = vec![0u8; MAX_FRAME];
        let now = self.now;
        while let Some(t) = self
            .a
            .endpoint
            .poll_transmit(now, &mut buf, &mut self.a.mem)
        {
            self.net.send(now, Side::B, &buf[..t.len]);
        }
        while let Some(t) = self
            .b
            .endpoint
            .poll_transmit(now, &mut buf, &mut self.b.mem)
        {
            self.net.send(now, Side::A, &buf[..t.len]);
        }
    }

    fn run(mut self) -> Result<SimReport, SimFailure> {
        let deadline = Instant::ZERO + Duration::from_secs(3600);
        let mut steps = 0u64;
        loop {
            self.post_receives()?;
            self.post_ops()?;
            self.transmit();
            self.check_completions(Side::A)?;
            self.check_completions(Side::B)?;
            self.expire_unreliable();
            let done =
                self.posted >= self.cfg.ops && self.flows.iter().all(|f| f.in_flight.is_empty());
            if done {
                break;
            }
            let next = [
                self.net.next_time(),
                self.a.endpoint.poll_timeout(),
                self.b.endpoint.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next else {
                let stuck: Vec<_> = self
                    .flows
                    .iter()
                    .map(|f| (f.req_qpn, f.in_flight.len()))
                    .collect();
                return Err(SimFailure(format!(
                    "stuck with nothing to do at {:?}: {stuck:?}",
                    self.now
                )));
            };
            self.now = self.now.max(next);
            ensure!(
                self.now < deadline,
                "no progress within an hour of virtual time"
            );
            while let Some(frame) = self.net.pop_due(self.now) {
                let now = self.now;
                let host = self.host(frame.to);
                host.endpoint.handle_frame(now, &frame.frame, &mut host.mem);
            }
            let now = self.now;
            self.a.endpoint.handle_timeout(now, &mut self.a.mem);
            self.b.endpoint.handle_timeout(now, &mut self.b.mem);
            self.sample_progress();
            steps += 1;
            ensure!(steps < 50_000_000, "too many steps");
        }
        // Final checks.
        let failed_qps: Vec<u32> = self
            .flows
            .iter()
            .filter(|g| g.failed)
            .flat_map(|g| [g.req_qpn.value(), g.resp_qpn.value()])
            .collect();
        for (f, flow) in self.flows.iter().enumerate() {
            if failed_qps.contains(&flow.req_qpn.value()) {
                continue;
            }
            let resp = if flow.requester == Side::A {
                &self.b
            } else {
                &self.a
            };
            let req = if flow.requester == Side::A {
                &self.a
            } else {
                &self.b
            };
            for (host, qpn) in [(req, flow.req_qpn), (resp, flow.resp_qpn)] {
                let state = host.endpoint.qp(qpn).map(|q| q.state());
                ensure!(
                    state == Some(QpState::Rts),
                    "flow {f}: QP {qpn} ended in {state:?}"
                );
            }
            if flow.qp_type == QpType::Rc {
                let at = flow.atomic_word as usize;
                let word = u64::from_le_bytes(
                    resp.mem.region(0).bytes[at..at + 8]
                        .try_into()
                        .unwrap_or_default(),
                );
                ensure!(
                    word == flow.atomic_value,
                    "flow {f}: atomic word is {word:#x}, the model says {:#x}",
                    flow.atomic_value
                );
                ensure!(
                    flow.recv_consumers.is_empty(),
                    "flow {f}: {} messages never received",
                    flow.recv_consumers.len()
                );
            }
        }
        let mut report = std::mem::take(&mut self.net.report);
        report.completed = self.completed;
        report.unreliable_lost = self
            .flows
            .iter()
            .map(|f| {
                let pending = f.unreliable.values();
                f.lost
                    + pending
                        .filter(|o| o.kind != OpKind::Write && o.deliveries == 0)
                        .count()
            })
            .sum();
        report.elapsed = self.now - Instant::ZERO;
        report.counters.add(self.a.endpoint.counters());
        report.counters.add(self.b.endpoint.counters());
        if self.cfg.loss == 0.0 && self.cfg.corrupt == 0.0 {
            ensure!(
                report.unreliable_lost == 0,
                "{} UC/UD messages lost on a lossless network",
                report.unreliable_lost
            );
        }
        Ok(report)
    }
}

/// Runs one simulation.
pub(crate) fn run(cfg: SimConfig) -> Result<SimReport, SimFailure> {
    Sim::new(cfg).run()
}
