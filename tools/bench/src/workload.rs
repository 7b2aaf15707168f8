//! The workloads over xroce, modelled on perftest: bandwidth with a window of outstanding
//! work requests and one completion every `cq_mod` of them (`ib_write_bw`, `ib_read_bw`,
//! `ib_send_bw`), ping-pong latency (`ib_write_lat` polls the last byte of the buffer,
//! `ib_send_lat` the receive completion, `ib_read_lat` times each READ), message rate and
//! QP scaling. Host `a` is the requester; host `b` answers.
//!
//! Every wait spins briefly and then yields (see [`super::poll`]), and gives up with an
//! error when nothing moves for a while, so a stuck daemon ends the run instead of
//! hanging it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use verbs_shm::client::{
    Access, Connection, Context, Cq, Error as VerbsError, Mr, Pd, Qp, QpInit, QpType, RecvWr,
    SendOp, SendWr, Sge, WorkCompletion,
};
use xroce_lab::daemons::TwoHosts;
use xroce_lab::{Family, Side};

use super::poll::{Idle, Then, place};
use super::progress::Progress;
use super::report::{BwPoint, LatPoint};

/// Registered memory per host.
pub(crate) const MR_LEN: usize = 64 << 20;
/// The bandwidth tests cycle through slots in the first half of the region.
const SLOT_AREA: usize = 32 << 20;
/// Where the peer's latency messages land.
const LAT_DST: usize = 32 << 20;
/// Where latency messages are sent (or READ) from.
const LAT_SRC: usize = 48 << 20;
/// The largest message size the bench accepts.
pub(crate) const MAX_SIZE: usize = 8 << 20;
/// Messages up to this size are sent inline in the latency and message-rate tests
/// (perftest's default inline size for `ib_write_lat`).
pub(crate) const INLINE_MAX: usize = 220;
/// Completion queue entries per CQ.
const CQ_ENTRIES: u32 = 16384;
/// In the latency tests, one send in this many is signaled.
const LAT_SIGNAL: u64 = 16;
/// Receives kept posted on each side in the SEND latency test.
const LAT_RECVS: usize = 64;
/// Ethernet + IPv4 + UDP + BTH + ICRC: the bytes every RoCEv2 packet carries.
pub(crate) const PACKET_OVERHEAD: usize = 14 + 20 + 8 + 12 + 4;
/// What an IPv6 header adds to an IPv4 one (40 bytes against 20).
const IPV6_EXTRA: usize = 20;
const RETH: usize = 16;
const AETH: usize = 4;

/// An RDMA operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Write,
    Read,
    Send,
}

impl Op {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Write => "write",
            Op::Read => "read",
            Op::Send => "send",
        }
    }
}

/// Packets per message, the size of a full data frame, and the frame bytes of a whole
/// message, in the data direction (READ: the responses), over IPv4.
pub(crate) fn frames(op: Op, size: usize, path_mtu: usize) -> (usize, usize, usize) {
    frames_over(op, size, path_mtu, false)
}

/// As [`frames`], over IPv6 when `ipv6`.
pub(crate) fn frames_over(
    op: Op,
    size: usize,
    path_mtu: usize,
    ipv6: bool,
) -> (usize, usize, usize) {
    let overhead = PACKET_OVERHEAD + if ipv6 { IPV6_EXTRA } else { 0 };
    let packets = size.div_ceil(path_mtu).max(1);
    // IBTA 9.3.3: the first (or only) WRITE packet carries a RETH; READ responses carry an
    // AETH on the first and last (or only) packet; SEND carries neither.
    let (first, last) = match op {
        Op::Write => (RETH, 0),
        Op::Read => (AETH, if packets > 1 { AETH } else { 0 }),
        Op::Send => (0, 0),
    };
    let wire = overhead * packets + size + first + last;
    let frame = overhead + size.min(path_mtu) + if packets == 1 { first } else { 0 };
    (packets, frame, wire)
}

/// One host's verbs objects.
#[derive(Debug)]
pub(crate) struct End {
    pub(crate) ctx: Context,
    pd: Pd,
    mr: Mr,
    scq: Cq,
    rcq: Cq,
}

impl End {
    fn open(hosts: &TwoHosts, side: Side) -> Result<End> {
        let ctx = hosts
            .open(side)
            .with_context(|| format!("opening the device on host {side:?}"))?;
        let pd = ctx.alloc_pd()?;
        let mr = pd
            .alloc_mr(MR_LEN, Access::ALL)
            .context("registering the bench's memory")?;
        let scq = ctx.create_cq(CQ_ENTRIES, None)?;
        let rcq = ctx.create_cq(CQ_ENTRIES, None)?;
        Ok(End {
            ctx,
            pd,
            mr,
            scq,
            rcq,
        })
    }

    fn qp(&self, send_wr: usize, recv_wr: usize) -> Result<Qp> {
        let mut init = QpInit::new(QpType::Rc, &self.scq, &self.rcq);
        init.caps.max_send_wr = send_wr.max(1) as u32;
        init.caps.max_recv_wr = recv_wr.max(1) as u32;
        init.caps.max_inline_data = INLINE_MAX as u32;
        Ok(self.pd.create_qp(&init)?)
    }

    fn sge(&self, offset: usize, len: usize) -> Sge {
        Sge {
            addr: self.mr.addr() + offset as u64,
            length: len as u32,
            lkey: self.mr.lkey(),
        }
    }

    /// The byte at `offset`, read through the aligned 64-bit word holding it (an atomic
    /// load, so every read goes to memory).
    fn byte(&self, offset: usize) -> u8 {
        let word = self.mr.load_u64(offset & !7).unwrap_or(0);
        (word >> (8 * (offset & 7))) as u8
    }

    /// Throws away completions left in both CQs.
    pub(crate) fn drain_cqs(&self) -> Result<usize> {
        let mut buf = [WorkCompletion::default(); 64];
        let mut n = 0;
        for cq in [&self.scq, &self.rcq] {
            loop {
                let k = cq.poll(&mut buf)?;
                if k == 0 {
                    break;
                }
                n += k;
            }
        }
        Ok(n)
    }
}

/// A connected RC queue pair: `a` on host a, `b` on host b.
#[derive(Debug)]
pub(crate) struct Pair {
    a: Qp,
    b: Qp,
}

/// How long a bandwidth point runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timing {
    /// Measured time per point (after the warm-up).
    pub(crate) duration: Duration,
    /// Measured messages per point instead of `duration`.
    pub(crate) iters: Option<u64>,
}

impl Timing {
    fn warmup(&self) -> Duration {
        if self.iters.is_some() {
            Duration::ZERO
        } else {
            (self.duration / 5).min(Duration::from_millis(500))
        }
    }

    /// Seconds a point is expected to take.
    pub(crate) fn expected_secs(&self) -> f64 {
        (self.duration + self.warmup()).as_secs_f64()
    }
}

/// A bandwidth point's parameters.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BwSpec {
    pub(crate) test: &'static str,
    pub(crate) op: Op,
    pub(crate) size: usize,
    pub(crate) depth: usize,
    pub(crate) cq_mod: usize,
    pub(crate) post_list: usize,
    pub(crate) inline: bool,
    /// SEND: the length of host b's receives (the test's largest message).
    pub(crate) recv_len: usize,
    /// Time every message from its post to its completion (every work request is then
    /// signaled, whatever `cq_mod` says).
    pub(crate) time_completions: bool,
}

/// What a bandwidth point measured.
#[derive(Clone, Debug)]
pub(crate) struct Measured {
    /// The figures.
    pub(crate) point: BwPoint,
    /// Messages posted in all (warm-up included).
    pub(crate) posted: u64,
    /// With [`BwSpec::time_completions`]: each message's time from its post to its
    /// completion, in µs, for the messages of the measured window.
    pub(crate) completion_us: Vec<f64>,
}

/// A latency point's parameters.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LatSpec {
    pub(crate) op: Op,
    pub(crate) size: usize,
    /// The largest size of the test (what [`Xroce::prepare_lat`] was given).
    pub(crate) max_size: usize,
    /// Measured round trips (a tenth more, up to 1000, warm up first, for at most a
    /// tenth of `max_time`).
    pub(crate) iters: usize,
    /// The measurement stops early after this long.
    pub(crate) max_time: Duration,
}

impl LatSpec {
    fn warmup(&self) -> usize {
        (self.iters / 10).min(1000)
    }

    fn inline(&self) -> bool {
        self.op != Op::Read && self.size <= INLINE_MAX
    }
}

/// The xroce side of the bench: both hosts' verbs objects and how its threads run.
#[derive(Debug)]
pub(crate) struct Xroce<'h> {
    hosts: &'h TwoHosts,
    pub(crate) a: End,
    pub(crate) b: End,
    /// The path MTU (the port's active MTU) in bytes.
    pub(crate) path_mtu: usize,
    /// The same as an `ibv_mtu` code.
    mtu_code: u32,
    spin: Duration,
    /// What the bandwidth tests' threads do once they have spun.
    bw_then: Then,
    /// Cores for the bench's thread on host a and on host b.
    app_cores: [Option<usize>; 2],
    next_psn: u32,
    /// The hosts' addresses the queue pairs use.
    family: Family,
}

fn wc_check(c: &WorkCompletion, what: &str) -> Result<()> {
    if c.status != 0 {
        bail!(
            "{what}: work request {:#x} on QP {:#x} completed with status {} (opcode {}, {} bytes)",
            c.wr_id,
            c.qp_num,
            c.status,
            c.opcode,
            c.byte_len
        );
    }
    Ok(())
}

impl<'h> Xroce<'h> {
    pub(crate) fn new(
        hosts: &'h TwoHosts,
        spin: Duration,
        bw_then: Then,
        app_cores: [Option<usize>; 2],
        family: Family,
    ) -> Result<Xroce<'h>> {
        let a = End::open(hosts, Side::A)?;
        let b = End::open(hosts, Side::B)?;
        let port = a.ctx.query_port()?;
        let mtu_code = port.active_mtu;
        ensure!(
            (1..=5).contains(&mtu_code),
            "the daemon reports an active MTU code {mtu_code} outside 1..=5"
        );
        Ok(Xroce {
            hosts,
            a,
            b,
            path_mtu: 128 << mtu_code,
            mtu_code,
            spin,
            bw_then,
            app_cores,
            next_psn: 0x100,
            family,
        })
    }

    /// Creates `n` connected pairs whose send queues hold `send_wr` and receive queues
    /// `recv_wr` work requests.
    pub(crate) fn pairs(&mut self, n: usize, send_wr: usize, recv_wr: usize) -> Result<Vec<Pair>> {
        let mut pairs = Vec::with_capacity(n);
        for _ in 0..n {
            let a = self.a.qp(send_wr, recv_wr)?;
            let b = self.b.qp(send_wr, recv_wr)?;
            let (pa, pb) = (self.next_psn, self.next_psn + 0x1000);
            self.next_psn = (self.next_psn + 0x7919) & 0x7f_ffff;
            self.rts(&a, Side::A, b.qpn(), pa, pb)?;
            self.rts(&b, Side::B, a.qpn(), pb, pa)?;
            pairs.push(Pair { a, b });
        }
        Ok(pairs)
    }

    /// INIT, RTR, RTS like `ibv_rc_pingpong`, at the port's path MTU.
    fn rts(&self, qp: &Qp, side: Side, dest: u32, my_psn: u32, their_psn: u32) -> Result<()> {
        let mut c = Connection::new(
            self.hosts.av_over(side, self.family),
            dest,
            my_psn,
            their_psn,
        );
        c.path_mtu = self.mtu_code;
        qp.connect(&c)?;
        Ok(())
    }

    /// Posts `count` receives of `len` bytes at `offset` on `side`'s QP of `pair`.
    fn post_recvs(
        &self,
        pair: &Pair,
        side: Side,
        offset: usize,
        len: usize,
        count: usize,
    ) -> Result<()> {
        let (end, qp) = match side {
            Side::A => (&self.a, &pair.a),
            Side::B => (&self.b, &pair.b),
        };
        let sge = [end.sge(offset, len)];
        let wrs: Vec<RecvWr<'_>> = (0..count)
            .map(|i| RecvWr {
                wr_id: i as u64,
                sges: &sge,
            })
            .collect();
        for chunk in wrs.chunks(64) {
            qp.post_recv(chunk)
                .map_err(|(_, e)| e)
                .context("posting receives")?;
        }
        Ok(())
    }

    /// Prepares `pairs` for a SEND bandwidth test: `rx_depth` receives of `max_size` bytes
    /// posted on host b (all into the same buffer, as perftest does).
    pub(crate) fn prepare_send_bw(
        &self,
        pairs: &[Pair],
        rx_depth: usize,
        max_size: usize,
    ) -> Result<()> {
        for p in pairs {
            self.post_recvs(p, Side::B, 0, max_size, rx_depth)?;
        }
        Ok(())
    }

    /// One bandwidth point over `pairs` (each QP with `spec.depth` work requests
    /// outstanding at most).
    pub(crate) fn bandwidth(
        &self,
        pairs: &[Pair],
        spec: &BwSpec,
        timing: &Timing,
        progress: &Progress,
    ) -> Result<BwPoint> {
        self.bandwidth_measured(pairs, spec, timing, progress)
            .map(|m| m.point)
    }

    /// A bandwidth point with everything it measured.
    pub(crate) fn bandwidth_measured(
        &self,
        pairs: &[Pair],
        spec: &BwSpec,
        timing: &Timing,
        progress: &Progress,
    ) -> Result<Measured> {
        // Only a failed point leaves completions behind (its QPs are gone since).
        self.a.drain_cqs()?;
        self.b.drain_cqs()?;
        let sent_total = AtomicU64::new(u64::MAX);
        let stop = AtomicBool::new(false);
        let (result, received) = std::thread::scope(|s| {
            let receiver = (spec.op == Op::Send).then(|| {
                s.spawn(|| {
                    let r = self.receiver(pairs, spec.recv_len, &sent_total, &stop);
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
            });
            let requester = s.spawn(|| {
                let r = self.requester(pairs, spec, timing, progress, &stop);
                match &r {
                    Ok(m) => sent_total.store(m.posted, Ordering::Relaxed),
                    Err(_) => stop.store(true, Ordering::Relaxed),
                }
                r
            });
            let result = requester
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the requester thread panicked")));
            let received = receiver.map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("the receiver thread panicked")))
            });
            (result, received)
        });
        let measured = result?;
        if let Some(received) = received {
            let received = received?;
            ensure!(
                received == measured.posted,
                "host b received {received} SENDs of the {} host a sent",
                measured.posted
            );
        }
        Ok(measured)
    }

    /// Host b's side of SEND bandwidth: reposts every consumed receive until it has seen
    /// every message host a sent.
    fn receiver(
        &self,
        pairs: &[Pair],
        recv_len: usize,
        sent_total: &AtomicU64,
        stop: &AtomicBool,
    ) -> Result<u64> {
        place(self.app_cores[1]);
        let by_qpn: HashMap<u32, &Pair> = pairs.iter().map(|p| (p.b.qpn(), p)).collect();
        let mut buf = [WorkCompletion::default(); 64];
        let mut idle = Idle::new(self.spin, self.bw_then);
        let mut got = 0u64;
        // As large as every message of the test (see prepare_send_bw).
        let sge = [self.b.sge(0, recv_len)];
        loop {
            let n = self.b.rcq.poll(&mut buf)?;
            if n > 0 {
                idle.progress();
                for c in &buf[..n] {
                    wc_check(c, "send_bw, receive")?;
                    let pair = by_qpn.get(&c.qp_num).with_context(|| {
                        format!("a receive completion for unknown QP {:#x}", c.qp_num)
                    })?;
                    pair.b
                        .post_recv(&[RecvWr {
                            wr_id: c.wr_id,
                            sges: &sge,
                        }])
                        .map_err(|(_, e)| e)
                        .context("reposting a receive")?;
                }
                got += n as u64;
                continue;
            }
            if got >= sent_total.load(Ordering::Relaxed) || stop.load(Ordering::Relaxed) {
                return Ok(got);
            }
            idle.idle(&|| format!("SEND messages at host b ({got} so far)"))?;
        }
    }

    /// Host a's side of a bandwidth point.
    fn requester(
        &self,
        pairs: &[Pair],
        spec: &BwSpec,
        timing: &Timing,
        progress: &Progress,
        stop: &AtomicBool,
    ) -> Result<Measured> {
        place(self.app_cores[0]);
        let nq = pairs.len();
        let depth = spec.depth.max(1) as u64;
        let m = if spec.time_completions {
            1
        } else {
            (spec.cq_mod as u64).clamp(1, depth)
        };
        // Post times of the messages in flight, per QP (they complete in order).
        let mut posted_at: Vec<std::collections::VecDeque<Instant>> =
            vec![std::collections::VecDeque::new(); if spec.time_completions { nq } else { 0 }];
        let mut completion_us = Vec::new();
        let post_list = spec.post_list.max(1) as u64;
        let stride = spec.size.next_multiple_of(64);
        let slots = (SLOT_AREA / stride).clamp(1, 4096) as u64;
        let inline_data = vec![0u8; if spec.inline { spec.size } else { 0 }];
        let (mut posted, mut done) = (vec![0u64; nq], vec![0u64; nq]);
        let mut total_done = 0u64;
        let mut buf = [WorkCompletion::default(); 64];
        let mut idle = Idle::new(self.spin, self.bw_then);
        let warmup = timing.warmup();
        let start = Instant::now();
        let mut window: Option<(Instant, u64)> = None;
        let mut last = (start, 0u64);
        let mut stopping = false;
        let mut sges: Vec<[Sge; 1]> = Vec::with_capacity(post_list as usize);
        let what = format!("{} {} B", spec.test, spec.size);
        loop {
            if stop.load(Ordering::Relaxed) {
                bail!("{what}: stopped because host b's side failed");
            }
            let mut work = false;
            for (q, pair) in pairs.iter().enumerate() {
                let mut room = depth - (posted[q] - done[q]);
                if stopping {
                    // Finish on a signaled work request, so that the last ones complete.
                    room = room.min((m - posted[q] % m) % m);
                }
                while room > 0 {
                    let k = room.min(post_list);
                    let slot = |n: u64| ((q as u64 * depth + n) % slots) as usize * stride;
                    sges.clear();
                    sges.extend((0..k).map(|j| [self.a.sge(slot(posted[q] + j), spec.size)]));
                    let wrs: Vec<SendWr<'_>> = sges
                        .iter()
                        .enumerate()
                        .map(|(j, sge)| {
                            let n = posted[q] + j as u64;
                            let remote_addr = self.b.mr.addr() + slot(n) as u64;
                            let rkey = self.b.mr.rkey();
                            let op = match spec.op {
                                Op::Write => SendOp::Write { remote_addr, rkey },
                                Op::Read => SendOp::Read { remote_addr, rkey },
                                Op::Send => SendOp::Send,
                            };
                            let id = ((q as u64) << 32) | (n & 0xffff_ffff);
                            let mut wr = SendWr::new(id, op, sge);
                            wr.signaled = (n + 1).is_multiple_of(m);
                            if spec.inline {
                                wr.inline = Some(&inline_data);
                            }
                            wr
                        })
                        .collect();
                    let got = match pair.a.post_send(&wrs) {
                        Ok(()) => k,
                        Err((i, VerbsError::QueueFull)) => i as u64,
                        Err((_, e)) => return Err(e).with_context(|| format!("{what}: posting")),
                    };
                    if spec.time_completions {
                        let now = Instant::now();
                        posted_at[q].extend((0..got).map(|_| now));
                    }
                    posted[q] += got;
                    work |= got > 0;
                    if got < k {
                        break;
                    }
                    room -= k;
                }
            }
            let n = self.a.scq.poll(&mut buf)?;
            if n > 0 {
                work = true;
                let now = Instant::now();
                for c in &buf[..n] {
                    wc_check(c, &what)?;
                    let q = (c.wr_id >> 32) as usize;
                    ensure!(
                        q < nq,
                        "{what}: a completion for an unknown work request {:#x}",
                        c.wr_id
                    );
                    done[q] += m;
                    total_done += m;
                    if spec.time_completions
                        && let Some(at) = posted_at[q].pop_front()
                        && window.is_some()
                        && !stopping
                    {
                        completion_us.push((now - at).as_secs_f64() * 1e6);
                    }
                }
                if !stopping {
                    match window {
                        None if now - start >= warmup => window = Some((now, total_done)),
                        None => {}
                        Some((t0, d0)) => {
                            last = (now, total_done);
                            stopping = match timing.iters {
                                Some(iters) => total_done - d0 >= iters.max(1),
                                None => now - t0 >= timing.duration,
                            };
                        }
                    }
                    if let Some((_, d0)) = window {
                        progress.count(total_done - d0);
                    }
                }
            }
            if stopping && (0..nq).all(|q| posted[q] == done[q] && posted[q] % m == 0) {
                break;
            }
            if work {
                idle.progress();
            } else {
                idle.idle(&|| format!("{what}: completions ({total_done} so far)"))?;
            }
        }
        let (t0, d0) = window.context("no completion after the warm-up")?;
        let (t1, d1) = last;
        let secs = (t1 - t0).as_secs_f64();
        let messages = d1 - d0;
        ensure!(secs > 0.0 && messages > 0, "{what}: nothing measured");
        let (packets, frame, wire) =
            frames_over(spec.op, spec.size, self.path_mtu, self.family.is_ipv6());
        let msgs_per_sec = messages as f64 / secs;
        let bytes_per_sec = msgs_per_sec * spec.size as f64;
        let point = BwPoint {
            test: spec.test.into(),
            op: spec.op.name().into(),
            size: spec.size,
            qps: nq,
            depth: depth as usize,
            cq_mod: m as usize,
            post_list: post_list as usize,
            inline: spec.inline,
            messages,
            secs,
            bytes_per_sec,
            gbit_per_sec: bytes_per_sec * 8.0 / 1e9,
            msgs_per_sec,
            packets_per_msg: packets,
            frame_bytes: frame,
            wire_bytes_per_sec: msgs_per_sec * wire as f64,
            packets_per_sec: msgs_per_sec * packets as f64,
        };
        Ok(Measured {
            point,
            posted: posted.iter().sum(),
            completion_us,
        })
    }

    /// Prepares a pair for the latency tests of `op` with messages up to `max_size`.
    pub(crate) fn prepare_lat(&self, pair: &Pair, op: Op, max_size: usize) -> Result<()> {
        if op == Op::Send {
            self.post_recvs(pair, Side::A, LAT_DST, max_size, LAT_RECVS)?;
            self.post_recvs(pair, Side::B, LAT_DST, max_size, LAT_RECVS)?;
        }
        Ok(())
    }

    /// One latency point.
    pub(crate) fn latency(
        &self,
        pair: &Pair,
        spec: &LatSpec,
        progress: &Progress,
    ) -> Result<LatPoint> {
        let LatSpec { op, size, .. } = *spec;
        // Only a failed point leaves completions behind (its QPs are gone since).
        self.a.drain_cqs()?;
        self.b.drain_cqs()?;
        let zero = vec![0u8; size];
        for end in [&self.a, &self.b] {
            ensure!(end.mr.write(LAT_DST, &zero) && end.mr.write(LAT_SRC, &zero));
        }
        let stop = AtomicBool::new(false);
        let (rtts, answered) = std::thread::scope(|s| {
            let responder = (op != Op::Read).then(|| {
                s.spawn(|| {
                    let r = self.responder(pair, spec, &stop);
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
            });
            let initiator = s.spawn(|| {
                let r = self.initiator(pair, spec, progress, &stop);
                stop.store(true, Ordering::Relaxed);
                r
            });
            let rtts = initiator
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the initiator thread panicked")));
            let answered = responder.map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("the responder thread panicked")))
            });
            (rtts, answered)
        });
        let mut rtts = rtts?;
        if let Some(answered) = answered {
            answered?;
        }
        ensure!(!rtts.is_empty(), "no round trip measured");
        rtts.sort_unstable();
        let factor = if op == Op::Read { 1.0 } else { 0.5 };
        let us = |d: Duration| d.as_secs_f64() * 1e6 * factor;
        let pct = |p: f64| rtts[((rtts.len() as f64 * p).ceil() as usize).clamp(1, rtts.len()) - 1];
        let mean = rtts.iter().sum::<Duration>() / rtts.len() as u32;
        let (_, frame, _) = frames_over(op, size, self.path_mtu, self.family.is_ipv6());
        Ok(LatPoint {
            test: format!("{}_lat", op.name()),
            size,
            iterations: rtts.len(),
            reported: if op == Op::Read { "rtt" } else { "rtt/2" }.into(),
            min_us: us(rtts[0]),
            median_us: us(pct(0.5)),
            mean_us: us(mean),
            p99_us: us(pct(0.99)),
            p999_us: us(pct(0.999)),
            max_us: us(rtts[rtts.len() - 1]),
            rtt_median_us: pct(0.5).as_secs_f64() * 1e6,
            inline: spec.inline(),
            frame_bytes: frame,
        })
    }

    /// The last byte of iteration `i`'s message (never 0, and different from the
    /// previous iteration's).
    fn tag(i: usize) -> u8 {
        (i % 255) as u8 + 1
    }

    fn write_or_send(&self, op: Op, to: &End) -> SendOp {
        match op {
            Op::Write => SendOp::Write {
                remote_addr: to.mr.addr() + LAT_DST as u64,
                rkey: to.mr.rkey(),
            },
            _ => SendOp::Send,
        }
    }

    fn initiator(
        &self,
        pair: &Pair,
        spec: &LatSpec,
        progress: &Progress,
        stop: &AtomicBool,
    ) -> Result<Vec<Duration>> {
        place(self.app_cores[0]);
        let LatSpec {
            op,
            size,
            max_size,
            max_time,
            ..
        } = *spec;
        let (inline, warmup) = (spec.inline(), spec.warmup());
        let mut rtts = Vec::with_capacity(spec.iters);
        // Warm up for `warmup` round trips or a tenth of the time allowed, whichever ends
        // first; then measure `iters` round trips or until the time is up.
        let warm_until = Instant::now() + max_time / 10;
        let mut measuring: Option<Instant> = None;
        let mut idle = Idle::new(self.spin, Then::Yield);
        let mut sends = Reaper::default();
        let mut data = vec![0u8; size];
        let mut buf = [WorkCompletion::default(); 1];
        let what = format!("{}_lat {size} B", op.name());
        let src = [self.a.sge(LAT_SRC, size)];
        let dst = [self.a.sge(LAT_DST, size)];
        for i in 0.. {
            if stop.load(Ordering::Relaxed) {
                bail!("{what}: stopped because host b's side failed");
            }
            let tag = Self::tag(i);
            data[size - 1] = tag;
            if !inline {
                ensure!(self.a.mr.write(LAT_SRC + size - 1, &[tag]));
            }
            let t = Instant::now();
            match op {
                Op::Read => {
                    let read = SendOp::Read {
                        remote_addr: self.b.mr.addr() + LAT_SRC as u64,
                        rkey: self.b.mr.rkey(),
                    };
                    pair.a
                        .post_send(&[SendWr::new(i as u64, read, &dst)])
                        .map_err(|(_, e)| e)
                        .context("posting a READ")?;
                    while self.a.scq.poll(&mut buf)? == 0 {
                        idle.idle(&|| format!("{what}: the READ's completion (iteration {i})"))?;
                    }
                    wc_check(&buf[0], &what)?;
                }
                Op::Write => {
                    let write = self.write_or_send(op, &self.b);
                    let inline = inline.then_some(&data[..]);
                    sends.post(&pair.a, &self.a.scq, write, &src, inline, &mut idle, &what)?;
                    while self.a.byte(LAT_DST + size - 1) != tag {
                        sends.reap(&self.a.scq, &what)?;
                        idle.idle(&|| format!("{what}: host b's WRITE (iteration {i})"))?;
                    }
                }
                Op::Send => {
                    let inline = inline.then_some(&data[..]);
                    let send = SendOp::Send;
                    sends.post(&pair.a, &self.a.scq, send, &src, inline, &mut idle, &what)?;
                    while self.a.rcq.poll(&mut buf)? == 0 {
                        sends.reap(&self.a.scq, &what)?;
                        idle.idle(&|| format!("{what}: host b's SEND (iteration {i})"))?;
                    }
                    wc_check(&buf[0], &what)?;
                    self.post_recvs(pair, Side::A, LAT_DST, max_size, 1)?;
                }
            }
            let rtt = t.elapsed();
            idle.progress();
            let now = Instant::now();
            if measuring.is_none() && (i + 1 >= warmup || now >= warm_until) {
                measuring = Some(now);
                continue;
            }
            if let Some(since) = measuring {
                rtts.push(rtt);
                if rtts.len() % 256 == 0 {
                    progress.count(rtts.len() as u64);
                }
                if rtts.len() >= spec.iters || now - since > max_time {
                    break;
                }
            }
        }
        sends.finish(&self.a.scq, &mut idle, &what)?;
        Ok(rtts)
    }

    fn responder(&self, pair: &Pair, spec: &LatSpec, stop: &AtomicBool) -> Result<()> {
        place(self.app_cores[1]);
        let LatSpec {
            op, size, max_size, ..
        } = *spec;
        let inline = spec.inline();
        let mut idle = Idle::new(self.spin, Then::Yield);
        let mut sends = Reaper::default();
        let mut data = vec![0u8; size];
        let mut buf = [WorkCompletion::default(); 1];
        let what = format!("{}_lat {size} B (host b)", op.name());
        let src = [self.b.sge(LAT_SRC, size)];
        'iterations: for i in 0.. {
            let tag = Self::tag(i);
            if op == Op::Write {
                while self.b.byte(LAT_DST + size - 1) != tag {
                    if stop.load(Ordering::Relaxed) {
                        break 'iterations;
                    }
                    sends.reap(&self.b.scq, &what)?;
                    idle.idle(&|| format!("{what}: host a's WRITE (iteration {i})"))?;
                }
            } else {
                while self.b.rcq.poll(&mut buf)? == 0 {
                    if stop.load(Ordering::Relaxed) {
                        break 'iterations;
                    }
                    sends.reap(&self.b.scq, &what)?;
                    idle.idle(&|| format!("{what}: host a's SEND (iteration {i})"))?;
                }
                wc_check(&buf[0], &what)?;
                self.post_recvs(pair, Side::B, LAT_DST, max_size, 1)?;
            }
            idle.progress();
            data[size - 1] = tag;
            if !inline {
                ensure!(self.b.mr.write(LAT_SRC + size - 1, &[tag]));
            }
            let reply = self.write_or_send(op, &self.a);
            let inline = inline.then_some(&data[..]);
            sends.post(&pair.b, &self.b.scq, reply, &src, inline, &mut idle, &what)?;
        }
        sends.finish(&self.b.scq, &mut idle, &what)
    }
}

/// The send side of a ping-pong: one send in [`LAT_SIGNAL`] is signaled, and its
/// completion is reaped without waiting unless too many sends are outstanding.
#[derive(Debug, Default)]
struct Reaper {
    posted: u64,
    /// Sends known complete (a signaled completion covers the ones before it).
    completed: u64,
}

impl Reaper {
    /// How many sends may be outstanding before posting waits.
    const WINDOW: u64 = 64;

    #[allow(clippy::too_many_arguments)]
    fn post(
        &mut self,
        qp: &Qp,
        cq: &Cq,
        op: SendOp,
        sge: &[Sge],
        inline: Option<&[u8]>,
        idle: &mut Idle,
        what: &str,
    ) -> Result<()> {
        while self.posted - self.completed >= Self::WINDOW {
            if !self.reap(cq, what)? {
                idle.idle(&|| format!("{what}: send completions"))?;
            }
        }
        let mut wr = SendWr::new(self.posted, op, sge);
        wr.inline = inline;
        wr.signaled = (self.posted + 1).is_multiple_of(LAT_SIGNAL);
        qp.post_send(&[wr])
            .map_err(|(_, e)| e)
            .with_context(|| format!("{what}: posting"))?;
        self.posted += 1;
        Ok(())
    }

    /// Takes the send completions that arrived; whether there were any.
    fn reap(&mut self, cq: &Cq, what: &str) -> Result<bool> {
        let mut buf = [WorkCompletion::default(); 16];
        let n = cq.poll(&mut buf)?;
        for c in &buf[..n] {
            wc_check(c, what)?;
            self.completed = self.completed.max(c.wr_id + 1);
        }
        Ok(n > 0)
    }

    /// Waits for the completion of the last signaled send, so that none arrives later.
    fn finish(&mut self, cq: &Cq, idle: &mut Idle, what: &str) -> Result<()> {
        let last_signaled = self.posted / LAT_SIGNAL * LAT_SIGNAL;
        while self.completed < last_signaled {
            if !self.reap(cq, what)? {
                idle.idle(&|| format!("{what}: the last send completions"))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_count_headers_per_packet() {
        // A 2-byte WRITE: one packet with a RETH.
        assert_eq!(frames(Op::Write, 2, 1024), (1, 58 + 16 + 2, 58 + 16 + 2));
        // 64 KiB at path MTU 1024: 64 packets, the first with a RETH.
        assert_eq!(
            frames(Op::Write, 65536, 1024),
            (64, 1082, 64 * 58 + 65536 + 16)
        );
        // READ responses: AETH on the first and the last.
        assert_eq!(frames(Op::Read, 4096, 1024), (4, 1082, 4 * 58 + 4096 + 8));
        assert_eq!(frames(Op::Read, 8, 1024), (1, 58 + 4 + 8, 58 + 4 + 8));
        assert_eq!(frames(Op::Send, 1025, 1024), (2, 1082, 2 * 58 + 1025));
        // Over IPv6 every packet's IP header is 20 bytes longer.
        assert_eq!(
            frames_over(Op::Write, 65536, 1024, true),
            (64, 1102, 64 * 78 + 65536 + 16)
        );
        assert_eq!(
            frames_over(Op::Write, 2, 1024, false),
            frames(Op::Write, 2, 1024)
        );
    }

    #[test]
    fn tags_never_repeat_back_to_back_and_are_never_zero() {
        for i in 0..1000 {
            assert_ne!(Xroce::tag(i), 0);
            assert_ne!(Xroce::tag(i), Xroce::tag(i + 1));
        }
    }
}
