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
//!
//! This module holds the run: its knobs, its report, the two hosts and the loop of virtual
//! time, with the final checks. [`network`] is the lossy network and its log, [`workload`]
//! the flows and the operations posted on them, [`checks`] what every completion is checked
//! against.

use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::fmt;
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use xroce_transport::frame::MAX_FRAME;
use xroce_transport::testing::{Connection, Host, connect};
use xroce_transport::{Access, Instant, Limits, QpState, QpType};
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
    /// Selective repeat on host A's and on host B's RC queue pairs: both for the mode
    /// between two xroce endpoints, one for an xroce endpoint that has it facing one that
    /// does not (each RC pair carries traffic both ways, so both mixes run at once).
    pub selective: (bool, bool),
    /// The most packets a responder in selective repeat holds (`None`: the default).
    pub max_held: Option<u32>,
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
            selective: (false, false),
            max_held: None,
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

mod checks;
mod network;
mod workload;

use network::Network;
use workload::{Flow, OpKind};

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
            max_held_packets: cfg.max_held.unwrap_or(Limits::default().max_held_packets),
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
            if qp_type == QpType::Rc {
                let (qa, qb) = if requester == Side::A {
                    (req_qpn, resp_qpn)
                } else {
                    (resp_qpn, req_qpn)
                };
                // NOTE(unwrap): both QPs were just connected.
                a.endpoint
                    .set_selective_repeat(qa, cfg.selective.0)
                    .unwrap();
                b.endpoint
                    .set_selective_repeat(qb, cfg.selective.1)
                    .unwrap();
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
        // A UC packet overtaken on the path breaks its message as a lost one does, so
        // only a network that neither loses nor reorders delivers every UC/UD message.
        if self.cfg.loss == 0.0 && self.cfg.corrupt == 0.0 && self.cfg.reorder == 0.0 {
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
