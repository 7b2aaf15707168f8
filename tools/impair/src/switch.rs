//! A switch for a [`Star`](xroce_lab::star::Star): the RoCEv2 frames between its hosts go
//! through one thread on the router, which forwards each to the port of its destination
//! address and gives a port toward a host what a switch port has when it is the bottleneck
//! ([`Bottleneck`]): a rate, a bounded queue, ECN marks above a threshold (CE on
//! ECN-capable frames, RED-like between two thresholds) and tail drop when the queue is
//! full. Other ports forward at once. It samples every bottleneck's queue depth over time.
//!
//! Why here and not in the kernel: the router's kernel has TBF and HTB but neither RED nor
//! any other qdisc that marks ECN on some kernels (this project's development VM's among
//! them), and AF_XDP transmit on the hosts bypasses their qdiscs anyway. As for the
//! impairment forwarder, xroce's XDP program on every router interface steers UDP 4791
//! into one AF_XDP socket per interface; ARP, ICMP and TCP go through the router's kernel.
//!
//! The queue ([`EgressQueue`]) is sans-IO and keeps time in nanoseconds since the switch
//! started: a frame leaves when the port has sent the frames before it at its rate (frame
//! bytes, Ethernet header to ICRC), so the port is busy exactly as a wire of that rate;
//! a forwarding loop that falls behind sends the frames due since at once. Marking and
//! dropping are decided on arrival, from the bytes queued then.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xroce_engine::umem::HugepagePolicy;
use xroce_engine::xdp::{AttachRequest, XdpProgram};
use xroce_engine::xsk::{Port, PortConfig, Transmitter, ZeroCopy};
use xroce_lab::star::Star;
use xroce_wire::peek::{self, ECN_CE, ECN_NOT_ECT};

use crate::route::{self, Routed};
use crate::{ImpairError, Link};

/// ECN marking of a bottleneck: none below `kmin` bytes queued, every ECN-capable frame
/// from `kmax`, and in between with a chance rising linearly to `pmax_percent` (RED's
/// marking curve, on the instantaneous queue as DCQCN's switches use it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marking {
    /// Bytes queued below which nothing is marked.
    pub kmin: usize,
    /// Bytes queued from which every ECN-capable frame is marked.
    pub kmax: usize,
    /// The chance of a mark just below `kmax`, in percent.
    pub pmax_percent: u32,
}

impl Marking {
    /// Whether an ECN-capable frame that finds `queued` bytes ahead of it is marked.
    pub fn marks(&self, queued: usize, rng: &mut impl Rng) -> bool {
        if queued < self.kmin {
            return false;
        }
        queued >= self.kmax || {
            let span = self.kmax.saturating_sub(self.kmin).max(1) as u64;
            let chance = (queued - self.kmin) as u64 * u64::from(self.pmax_percent.min(100));
            rng.random_range(0..span * 100) < chance
        }
    }

    /// Marks `frame` CE if it is ECN-capable and `queued` bytes wait ahead of it; returns
    /// whether it did.
    pub fn apply(&self, frame: &mut [u8], queued: usize, rng: &mut impl Rng) -> bool {
        if queued < self.kmin {
            return false;
        }
        let Some(p) = peek::peek(frame) else {
            return false;
        };
        if p.ecn == ECN_NOT_ECT || !self.marks(queued, rng) {
            return false;
        }
        if p.ecn != ECN_CE {
            peek::set_ecn(frame, &p, ECN_CE);
        }
        true
    }
}

/// A port that is a bottleneck.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bottleneck {
    /// Its rate, in bits per second of frame bytes.
    pub rate_bps: u64,
    /// The most bytes its queue holds; a frame that does not fit is dropped (tail drop).
    pub capacity: usize,
    /// ECN marking, if any.
    pub marking: Option<Marking>,
}

/// What a bottleneck did, and what it holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueCounters {
    /// Frames that arrived for the port.
    pub arrived: u64,
    /// Frames it sent.
    pub departed: u64,
    /// Their bytes.
    pub departed_bytes: u64,
    /// Frames dropped because the queue was full.
    pub tail_dropped: u64,
    /// Frames marked CE.
    pub marked: u64,
    /// The most bytes queued so far.
    pub max_bytes: usize,
    /// Bytes queued now.
    pub bytes: usize,
}

/// What [`EgressQueue::offer`] did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offered {
    /// Queued, as it came.
    Queued,
    /// Queued, marked CE.
    Marked,
    /// Dropped: the queue was full.
    Dropped,
}

/// A bottleneck port's queue, in nanoseconds since its switch started.
#[derive(Debug)]
pub struct EgressQueue {
    shape: Bottleneck,
    queue: VecDeque<Vec<u8>>,
    /// When the port finishes sending the frame before the queue's head.
    busy_until: u64,
    counters: QueueCounters,
}

impl EgressQueue {
    /// An empty queue of `shape`.
    pub fn new(shape: Bottleneck) -> EgressQueue {
        EgressQueue {
            shape,
            queue: VecDeque::new(),
            busy_until: 0,
            counters: QueueCounters::default(),
        }
    }

    /// Its counters.
    pub fn counters(&self) -> QueueCounters {
        self.counters
    }

    /// How long the port takes to send `len` bytes.
    fn time_for(&self, len: usize) -> u64 {
        let bits = len as u128 * 8 * 1_000_000_000;
        (bits / u128::from(self.shape.rate_bps.max(1))) as u64
    }

    /// A frame arrives at `now`: queued (perhaps marked) or dropped. A dropped frame is
    /// given back.
    pub fn offer(
        &mut self,
        now: u64,
        mut frame: Vec<u8>,
        rng: &mut impl Rng,
    ) -> (Offered, Option<Vec<u8>>) {
        self.counters.arrived += 1;
        let queued = self.counters.bytes;
        if queued + frame.len() > self.shape.capacity {
            self.counters.tail_dropped += 1;
            return (Offered::Dropped, Some(frame));
        }
        let mut offered = Offered::Queued;
        if let Some(m) = self.shape.marking
            && m.apply(&mut frame, queued, rng)
        {
            self.counters.marked += 1;
            offered = Offered::Marked;
        }
        if self.queue.is_empty() {
            // An idle port starts sending at once.
            self.busy_until = self.busy_until.max(now);
        }
        self.counters.bytes += frame.len();
        self.counters.max_bytes = self.counters.max_bytes.max(self.counters.bytes);
        self.queue.push_back(frame);
        (offered, None)
    }

    /// The next frame that has finished leaving by `now`.
    pub fn pop_due(&mut self, now: u64) -> Option<Vec<u8>> {
        let front = self.queue.front()?;
        let done = self.busy_until + self.time_for(front.len());
        if done > now {
            return None;
        }
        self.busy_until = done;
        let frame = self.queue.pop_front()?;
        self.counters.bytes -= frame.len();
        self.counters.departed += 1;
        self.counters.departed_bytes += frame.len() as u64;
        Some(frame)
    }

    /// Whether it holds frames.
    pub fn is_busy(&self) -> bool {
        !self.queue.is_empty()
    }
}

/// One port of the switch: its interface, the host behind it, the addresses that lead
/// there, and its shape when it is a bottleneck.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchPort {
    /// The router's interface, its MAC and the host's.
    pub link: Link,
    /// Destination addresses this port leads to.
    pub addresses: Vec<IpAddr>,
    /// The port's shape, if it is a bottleneck.
    pub bottleneck: Option<Bottleneck>,
}

/// A switch's ports and where it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchConfig {
    /// The router's network namespace (`None`: the calling thread's).
    pub netns: Option<String>,
    /// The ports.
    pub ports: Vec<SwitchPort>,
    /// How often every bottleneck's queue depth is sampled.
    pub sample_every: Duration,
    /// Seed of the marking's random draws.
    pub seed: u64,
}

impl SwitchConfig {
    /// The switch of `star`, with `bottleneck` on the port toward each host it gives
    /// (`bottleneck(i)`), sampling every millisecond.
    pub fn of(star: &Star, bottleneck: impl Fn(usize) -> Option<Bottleneck>) -> SwitchConfig {
        let ports = star
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| SwitchPort {
                link: Link {
                    interface: star.router.interfaces[i].clone(),
                    mac: star.router.macs[i],
                    next_hop: h.mac,
                },
                addresses: vec![IpAddr::V4(h.ipv4), IpAddr::V6(h.ipv6)],
                bottleneck: bottleneck(i),
            })
            .collect();
        SwitchConfig {
            netns: Some(star.router.netns.clone()),
            ports,
            sample_every: Duration::from_millis(1),
            seed: 1,
        }
    }
}

/// What the switch did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchCounters {
    /// Frames received on any port.
    pub received: u64,
    /// Frames sent on any port.
    pub forwarded: u64,
    /// Frames for an address no port leads to (dropped).
    pub unroutable: u64,
    /// Frames whose TTL or hop limit ran out (dropped).
    pub ttl_expired: u64,
    /// Frames that were not Ethernet + IPv4/IPv6 (dropped).
    pub malformed: u64,
    /// Frames lost to a full transmit ring: loss nobody asked for.
    pub tx_full: u64,
    /// Each bottleneck port's queue, by port index (`None`: not a bottleneck).
    pub queues: Vec<Option<QueueCounters>>,
}

/// One sample of the queues: nanoseconds since the switch started, and the bytes queued at
/// each bottleneck (in port order, bottlenecks only).
pub type QueueSample = (u64, Vec<usize>);

#[derive(Debug, Default)]
struct Shared {
    counters: SwitchCounters,
    samples: Vec<QueueSample>,
}

/// The most samples kept (an hour at one a millisecond).
const MAX_SAMPLES: usize = 3_600_000;

/// A running switch. Dropping it (or [`Switch::stop`]) stops the thread, detaches the XDP
/// programs and closes the sockets; the router's kernel then forwards everything again.
#[derive(Debug)]
pub struct Switch {
    stop: Arc<AtomicBool>,
    shared: Arc<Mutex<Shared>>,
    started: Instant,
    thread: Option<JoinHandle<Result<(), ImpairError>>>,
}

impl Switch {
    /// Starts the switch and returns once every port is ready.
    pub fn start(config: &SwitchConfig) -> Result<Switch, ImpairError> {
        if config.ports.is_empty() {
            return Err(ImpairError::Config("a switch needs ports"));
        }
        if config
            .ports
            .iter()
            .filter_map(|p| p.bottleneck)
            .any(|b| b.rate_bps == 0 || b.capacity == 0)
        {
            return Err(ImpairError::Config(
                "a bottleneck needs a rate and a queue of at least one byte",
            ));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (ready_tx, ready_rx) = mpsc::channel();
        let thread = {
            let config = config.clone();
            let (stop, shared) = (stop.clone(), shared.clone());
            std::thread::Builder::new()
                .name("xroce-switch".into())
                .spawn(move || {
                    let ports = match SwitchPorts::open(&config) {
                        Ok(p) => p,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return Ok(());
                        }
                    };
                    let started = Instant::now();
                    let _ = ready_tx.send(Ok(started));
                    ports.run(&config, started, &stop, &shared)
                })
                .map_err(|e| ImpairError::Thread(e.to_string()))?
        };
        match ready_rx.recv() {
            Ok(Ok(started)) => Ok(Switch {
                stop,
                shared,
                started,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(ImpairError::Thread(
                "it ended before saying it was ready".into(),
            )),
        }
    }

    /// Nanoseconds since the switch started (the clock of its samples).
    pub fn now(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    /// The counters so far (published at least every millisecond while busy).
    pub fn counters(&self) -> SwitchCounters {
        self.lock().counters.clone()
    }

    /// The queue samples taken from `from` nanoseconds on.
    pub fn samples_since(&self, from: u64) -> Vec<QueueSample> {
        let shared = self.lock();
        let start = shared.samples.partition_point(|(t, _)| *t < from);
        shared.samples[start..].to_vec()
    }

    /// Whether the forwarding thread still runs.
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the switch and returns the final counters, or the error that ended it.
    pub fn stop(mut self) -> Result<SwitchCounters, ImpairError> {
        self.finish()?;
        Ok(self.counters())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn finish(&mut self) -> Result<(), ImpairError> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(JoinHandle::join) {
            None => Ok(()),
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(ImpairError::Thread("it panicked".into())),
        }
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            log::warn!("switch: {e}");
        }
    }
}

/// The destination address of an Ethernet frame carrying IPv4 or IPv6.
pub fn destination(frame: &[u8]) -> Option<IpAddr> {
    let p = peek_ip(frame)?;
    match p {
        (4, ip) => {
            let a: [u8; 4] = frame.get(ip + 16..ip + 20)?.try_into().ok()?;
            Some(IpAddr::V4(Ipv4Addr::from(a)))
        }
        (_, ip) => {
            let a: [u8; 16] = frame.get(ip + 24..ip + 40)?.try_into().ok()?;
            Some(IpAddr::V6(Ipv6Addr::from(a)))
        }
    }
}

/// The IP version and where its header starts (after one 802.1Q or 802.1ad tag).
fn peek_ip(frame: &[u8]) -> Option<(u8, usize)> {
    let be16 = |at: usize| Some(u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]));
    let (ethertype, ip) = match be16(12)? {
        0x8100 | 0x88a8 => (be16(16)?, 18),
        t => (t, 14),
    };
    match ethertype {
        0x0800 => Some((4, ip)),
        0x86dd => Some((6, ip)),
        _ => None,
    }
}

struct SwitchPorts {
    // Declared before the programs: sockets close before the programs detach.
    ports: Vec<Port>,
    _xdp: Vec<XdpProgram>,
}

impl SwitchPorts {
    fn open(config: &SwitchConfig) -> Result<SwitchPorts, ImpairError> {
        if let Some(ns) = &config.netns {
            xroce_lab::netns::enter(ns).map_err(ImpairError::Namespace)?;
        }
        let mut ports = Vec::new();
        let mut xdp = Vec::new();
        for p in &config.ports {
            let link = &p.link;
            let xdp_error = |source| ImpairError::Xdp {
                interface: link.interface.clone(),
                source,
            };
            let mut program = XdpProgram::load(1).map_err(xdp_error)?;
            program
                .attach(&link.interface, AttachRequest::Auto)
                .map_err(xdp_error)?;
            let mut pc = PortConfig::new(&link.interface, 0);
            pc.zero_copy = ZeroCopy::Auto;
            pc.hugepages = HugepagePolicy::Never;
            let port = Port::open(&pc)?;
            program.insert_socket(0, port.as_fd()).map_err(xdp_error)?;
            ports.push(port);
            xdp.push(program);
        }
        Ok(SwitchPorts { ports, _xdp: xdp })
    }

    fn run(
        mut self,
        config: &SwitchConfig,
        started: Instant,
        stop: &AtomicBool,
        shared: &Mutex<Shared>,
    ) -> Result<(), ImpairError> {
        let routes: HashMap<IpAddr, usize> = config
            .ports
            .iter()
            .enumerate()
            .flat_map(|(i, p)| p.addresses.iter().map(move |a| (*a, i)))
            .collect();
        let mut queues: Vec<Option<EgressQueue>> = config
            .ports
            .iter()
            .map(|p| p.bottleneck.map(EgressQueue::new))
            .collect();
        let mut rng = StdRng::seed_from_u64(config.seed);
        let mut counters = SwitchCounters::default();
        let mut pool: Vec<Vec<u8>> = Vec::new();
        let mut routed: Vec<(usize, Vec<u8>)> = Vec::new();
        let sample_every = config.sample_every.as_nanos().max(1) as u64;
        let mut next_sample = 0u64;
        let mut next_publish = 0u64;
        let mut idle_since: Option<Instant> = None;
        let mut samples: Vec<QueueSample> = Vec::new();
        let n = self.ports.len();
        while !stop.load(Ordering::Relaxed) {
            let mut work = 0;
            let now = started.elapsed().as_nanos() as u64;
            for i in 0..n {
                let batch = self.ports[i].rx().poll();
                work += batch.len();
                for frame in batch.iter() {
                    counters.received += 1;
                    let Some(out) = destination(frame).and_then(|d| routes.get(&d).copied()) else {
                        counters.unroutable += 1;
                        continue;
                    };
                    let mut buf = pool.pop().unwrap_or_default();
                    buf.clear();
                    buf.extend_from_slice(frame);
                    let link = &config.ports[out].link;
                    match route::route(&mut buf, link.mac, link.next_hop) {
                        Routed::Forward => routed.push((out, buf)),
                        Routed::TtlExpired => {
                            counters.ttl_expired += 1;
                            pool.push(buf);
                        }
                        Routed::Malformed => {
                            counters.malformed += 1;
                            pool.push(buf);
                        }
                    }
                }
            }
            for (out, buf) in routed.drain(..) {
                match &mut queues[out] {
                    Some(q) => {
                        if let (Offered::Dropped, Some(buf)) = q.offer(now, buf, &mut rng) {
                            pool.push(buf);
                        }
                    }
                    None => {
                        if send(self.ports[out].tx(), &buf) {
                            counters.forwarded += 1;
                        } else {
                            counters.tx_full += 1;
                        }
                        pool.push(buf);
                    }
                }
            }
            let now = started.elapsed().as_nanos() as u64;
            let mut busy = false;
            for (out, q) in queues.iter_mut().enumerate() {
                let Some(q) = q else { continue };
                while let Some(buf) = q.pop_due(now) {
                    work += 1;
                    if send(self.ports[out].tx(), &buf) {
                        counters.forwarded += 1;
                    } else {
                        counters.tx_full += 1;
                    }
                    pool.push(buf);
                }
                busy |= q.is_busy();
            }
            for port in &mut self.ports {
                let tx = port.tx();
                tx.flush();
                tx.poll_completions();
                busy |= tx.in_flight() > 0;
            }
            if now >= next_sample {
                next_sample = now + sample_every;
                if samples.len() < MAX_SAMPLES {
                    let depths = queues
                        .iter()
                        .flatten()
                        .map(|q| q.counters().bytes)
                        .collect();
                    samples.push((now, depths));
                }
            }
            if now >= next_publish || work == 0 {
                next_publish = now + 1_000_000;
                counters.queues = queues
                    .iter()
                    .map(|q| q.as_ref().map(EgressQueue::counters))
                    .collect();
                let mut s = shared
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                s.counters = counters.clone();
                s.samples.append(&mut samples);
            }
            if work > 0 || busy {
                idle_since = None;
                if work == 0 {
                    // Frames wait for their time: give the core away for a moment.
                    std::thread::yield_now();
                }
                continue;
            }
            let idle = idle_since.get_or_insert_with(Instant::now).elapsed();
            if idle < Duration::from_micros(50) {
                std::hint::spin_loop();
            } else if idle < Duration::from_millis(1) {
                std::thread::yield_now();
            } else {
                wait_readable(&self.ports, Duration::from_millis(5))?;
            }
        }
        counters.queues = queues
            .iter()
            .map(|q| q.as_ref().map(EgressQueue::counters))
            .collect();
        let mut s = shared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        s.counters = counters;
        s.samples.append(&mut samples);
        Ok(())
    }
}

/// Copies `frame` into a transmit frame and submits it, reaping a full ring a little
/// before giving up.
fn send(tx: &mut Transmitter, frame: &[u8]) -> bool {
    for attempt in 0..1000 {
        if let Some(mut slot) = tx.frame() {
            let Some(dst) = slot.buf().get_mut(..frame.len()) else {
                return false;
            };
            dst.copy_from_slice(frame);
            return slot.submit(frame.len());
        }
        tx.flush();
        if tx.poll_completions() == 0 && attempt > 10 {
            std::thread::yield_now();
        }
    }
    false
}

/// Sleeps in `poll(2)` until a port has frames to read or `timeout` passes.
fn wait_readable(ports: &[Port], timeout: Duration) -> Result<(), ImpairError> {
    let mut fds: Vec<libc::pollfd> = ports
        .iter()
        .map(|p| libc::pollfd {
            fd: p.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // Safety: `fds` holds `fds.len()` initialised pollfd structures.
    let ret = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis) };
    if ret < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(ImpairError::Poll(e));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use xroce_wire::peek::ECN_ECT0;

    /// An IPv4 UDP frame of `len` bytes to 10.78.`host`.1 with ECN bits `ecn`.
    fn frame(len: usize, host: u8, ecn: u8) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[1] = ecn;
        ip[2..4].copy_from_slice(&((len - 14) as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[10, 78, 1, 1]);
        ip[16..20].copy_from_slice(&[10, 78, host, 1]);
        f[36..38].copy_from_slice(&4791u16.to_be_bytes());
        f
    }

    const GBIT: u64 = 1_000_000_000;

    #[test]
    fn frames_leave_at_the_rate_in_order() {
        let mut q = EgressQueue::new(Bottleneck {
            rate_bps: GBIT,
            capacity: 1 << 20,
            marking: None,
        });
        let mut rng = StdRng::seed_from_u64(1);
        // 1000 bytes take 8 µs at 1 Gbit/s.
        for k in 0..3u8 {
            let mut f = frame(1000, 0, 0);
            f[999] = k;
            assert_eq!(q.offer(100, f, &mut rng).0, Offered::Queued);
        }
        assert_eq!(q.pop_due(8_099), None);
        assert_eq!(q.pop_due(8_100).map(|f| f[999]), Some(0));
        assert_eq!(q.pop_due(16_099), None);
        // A loop that falls behind sends what is due since at once.
        assert_eq!(q.pop_due(50_000).map(|f| f[999]), Some(1));
        assert_eq!(q.pop_due(50_000).map(|f| f[999]), Some(2));
        assert_eq!(q.pop_due(50_000), None);
        // An idle port starts with the next frame, not back in the past.
        q.offer(100_000, frame(1000, 0, 0), &mut rng);
        assert_eq!(q.pop_due(107_999), None);
        assert!(q.pop_due(108_000).is_some());
        let c = q.counters();
        assert_eq!(
            (c.arrived, c.departed, c.departed_bytes, c.bytes),
            (4, 4, 4000, 0)
        );
        assert_eq!(c.max_bytes, 3000);
    }

    #[test]
    fn a_full_queue_drops_the_arrival() {
        let mut q = EgressQueue::new(Bottleneck {
            rate_bps: GBIT,
            capacity: 2500,
            marking: None,
        });
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(q.offer(0, frame(1000, 0, 0), &mut rng).0, Offered::Queued);
        assert_eq!(q.offer(0, frame(1000, 0, 0), &mut rng).0, Offered::Queued);
        let (offered, back) = q.offer(0, frame(1000, 0, 0), &mut rng);
        assert_eq!(offered, Offered::Dropped);
        assert_eq!(back.map(|f| f.len()), Some(1000), "the frame comes back");
        assert_eq!(
            q.offer(0, frame(500, 0, 0), &mut rng).0,
            Offered::Queued,
            "fits"
        );
        assert_eq!(q.counters().tail_dropped, 1);
    }

    #[test]
    fn ecn_capable_frames_are_marked_above_the_threshold_and_others_never() {
        let mut q = EgressQueue::new(Bottleneck {
            rate_bps: GBIT,
            capacity: 1 << 20,
            marking: Some(Marking {
                kmin: 10_000,
                kmax: 20_000,
                pmax_percent: 100,
            }),
        });
        let mut rng = StdRng::seed_from_u64(1);
        let mut marked = Vec::new();
        for _ in 0..40 {
            let (offered, _) = q.offer(0, frame(1000, 0, ECN_ECT0), &mut rng);
            marked.push(offered == Offered::Marked);
        }
        assert!(marked[..10].iter().all(|m| !m), "below kmin: {marked:?}");
        assert!(marked[20..].iter().all(|m| *m), "from kmax: {marked:?}");
        let between = marked[10..20].iter().filter(|m| **m).count();
        assert!((1..10).contains(&between), "some in between: {marked:?}");
        // Not ECN-capable: never marked, even on a long queue.
        assert_eq!(q.offer(0, frame(1000, 0, 0), &mut rng).0, Offered::Queued);
        // Marks are CE; the rest leave as they came.
        let mut ecn = Vec::new();
        while let Some(f) = q.pop_due(u64::MAX / 2) {
            ecn.push(f[15] & 3);
        }
        assert_eq!(ecn.len(), 41);
        assert!(ecn[..10].iter().all(|&e| e == ECN_ECT0), "{ecn:?}");
        assert!(ecn[20..40].iter().all(|&e| e == ECN_CE), "{ecn:?}");
        assert_eq!(ecn[40], ECN_NOT_ECT);
        assert_eq!(q.counters().marked, 20 + between as u64);
    }

    #[test]
    fn the_routers_bottleneck_marks_as_the_switchs_ports_do() {
        // xroce-impair's two-port bottleneck with the same marking: below kmin nothing,
        // from kmax every ECN-capable frame, frames that are not ECN-capable never.
        let t0 = Instant::now();
        let mut b = route::Bottleneck::new(GBIT, 1 << 20, t0).with_marking(
            Some(Marking {
                kmin: 10_000,
                kmax: 20_000,
                pmax_percent: 100,
            }),
            1,
        );
        for _ in 0..40 {
            assert!(b.offer(&frame(1000, 0, ECN_ECT0), t0));
        }
        assert!(b.offer(&frame(1000, 0, 0), t0));
        let mut ecn = Vec::new();
        b.release(t0 + Duration::from_secs(1), |f| ecn.push(f[15] & 3));
        assert_eq!(ecn.len(), 41);
        assert!(ecn[..10].iter().all(|&e| e == ECN_ECT0), "{ecn:?}");
        assert!(ecn[20..40].iter().all(|&e| e == ECN_CE), "{ecn:?}");
        let between = ecn[10..20].iter().filter(|&&e| e == ECN_CE).count();
        assert!((1..10).contains(&between), "{ecn:?}");
        assert_eq!(ecn[40], ECN_NOT_ECT);
        assert_eq!(b.marked, 20 + between as u64);
        // Without marking the same frames pass as they came.
        let mut plain = route::Bottleneck::new(GBIT, 1 << 20, t0);
        for _ in 0..40 {
            assert!(plain.offer(&frame(1000, 0, ECN_ECT0), t0));
        }
        let mut ecn = Vec::new();
        plain.release(t0 + Duration::from_secs(1), |f| ecn.push(f[15] & 3));
        assert!(ecn.iter().all(|&e| e == ECN_ECT0) && plain.marked == 0);
    }

    #[test]
    fn destinations_of_ipv4_and_ipv6_frames() {
        assert_eq!(
            destination(&frame(100, 3, 0)),
            Some(IpAddr::V4(Ipv4Addr::new(10, 78, 3, 1)))
        );
        let mut v6 = vec![0u8; 80];
        v6[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        v6[14] = 0x60;
        v6[38..54].copy_from_slice(&Ipv6Addr::new(0xfd00, 0x78, 2, 0, 0, 0, 0, 1).octets());
        assert_eq!(
            destination(&v6),
            Some(IpAddr::V6(Ipv6Addr::new(0xfd00, 0x78, 2, 0, 0, 0, 0, 1)))
        );
        assert_eq!(destination(&[0u8; 10]), None);
        let mut arp = frame(60, 0, 0);
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(destination(&arp), None);
    }
}
