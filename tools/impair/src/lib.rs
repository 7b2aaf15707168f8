//! An impairment router for xroce's labs: in the router namespace of a
//! [`Lab`](xroce_lab::Lab), a forwarder that carries RoCEv2 frames (UDP 4791) from one host
//! to the other through AF_XDP and loses, duplicates and reorders them on purpose, drawing
//! each frame's fate from a seeded random generator, and counts everything it did.
//!
//! Why it exists: AF_XDP transmit bypasses qdiscs, so `tc netem` on a sending host does
//! nothing to xroce's traffic; a router's egress qdisc would do, but some kernels (minimal
//! VM kernels) have no `sch_netem` at all, and [`Lab::netem`](xroce_lab::Lab::netem) then
//! fails with `NoNetem`. This forwarder needs only XDP and AF_XDP, which xroce needs anyway,
//! so it works wherever xroce does. [`Impairer::start`] is the lab's impairment API; the
//! binary `xroce-impair` runs the same forwarder by hand in the lab of `cargo xtask lab up
//! --router`.
//!
//! How: xroce's own XDP program on both router interfaces steers UDP 4791 into one AF_XDP
//! socket per interface; everything else (ARP, ND, ICMP, TCP) passes to the router's
//! kernel, which forwards it as before. One thread moves frames between the two sockets the
//! way a router does ([`route`](route::route)): the next host's MAC as destination, the
//! router's own as source, the TTL or hop limit one less (the IPv4 header checksum computed
//! again; the ICRC masks the TTL, so it stays valid), a frame whose TTL runs out dropped.
//! Then each frame meets its [`Fate`](route::Fate): lost, sent twice, or held back and
//! sent after the next `reorder_gap` frames of its direction (or after [`REORDER_HOLD`] if
//! fewer come). With a rate ([`Impairment::rate_bps`]), each direction's egress is then a
//! [`Bottleneck`](route::Bottleneck): frames wait in a queue of bounded bytes and leave at
//! that rate, and the frame that does not fit is dropped (counted in `queue_dropped`), so
//! the path is slower than its hosts, as a network path is.
//!
//! Frames must carry complete checksums: a UDP checksum a sending kernel left to its veth's
//! offload is never filled in once XDP has taken the frame out of the kernel, and the
//! receiving kernel then drops it. RoCEv2 over IPv4 sends UDP checksum 0 and xroce computes
//! IPv6 ones in software, so this matters only for kernel traffic sent to port 4791.
//!
//! It never makes frames of its own, never changes anything in a frame but the MACs, the
//! TTL/hop limit and the IPv4 header checksum, and touches nothing outside the router
//! namespace.
//!
//! [`process::ImpairProcess`] runs the release binary next to a test instead (so that
//! forwarding keeps up with two daemons even when the test itself is a debug build).
//!
//! [`switch::Switch`] is the same idea for a [`Star`](xroce_lab::star::Star) of N hosts:
//! it forwards RoCEv2 frames between all of them and makes the port toward a host a
//! bottleneck (a rate, a bounded queue, ECN marking, tail drop), for congestion.

pub mod process;
pub mod route;
pub mod switch;

use std::fmt;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use xroce_engine::umem::HugepagePolicy;
use xroce_engine::xdp::{AttachMode, AttachRequest, XdpError, XdpProgram};
use xroce_engine::xsk::{Port, PortConfig, PortError, Transmitter, ZeroCopy};
use xroce_lab::Lab;

pub use route::{BURST_IDLE, Dice, Fate, Impairment, Routed};

/// The longest a frame is held back for reordering when fewer than `reorder_gap` frames
/// follow it (the end of a burst): then it goes out anyway, late.
pub const REORDER_HOLD: Duration = Duration::from_millis(2);

/// What went wrong starting the forwarder.
#[derive(Debug, thiserror::Error)]
pub enum ImpairError {
    /// The lab has no router namespace.
    #[error("the lab has no router: build it with LabConfig {{ router: true, .. }}")]
    NoRouter,
    /// The impairment cannot be applied.
    #[error("invalid impairment: {0}")]
    Config(&'static str),
    /// Entering the router's network namespace failed.
    #[error("entering the router namespace: {0}")]
    Namespace(#[source] std::io::Error),
    /// Loading or attaching the XDP program failed.
    #[error("XDP on {interface}: {source}")]
    Xdp {
        /// The router interface.
        interface: String,
        /// Why.
        #[source]
        source: XdpError,
    },
    /// Opening an AF_XDP socket failed.
    #[error(transparent)]
    Port(#[from] PortError),
    /// Waiting for packets failed.
    #[error("poll(2) on the AF_XDP sockets: {0}")]
    Poll(#[source] std::io::Error),
    /// The forwarding thread panicked or could not start.
    #[error("the forwarding thread died: {0}")]
    Thread(String),
}

/// One interface of the router: its name, its own MAC, and the MAC of the host behind it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// The router's interface.
    pub interface: String,
    /// Its Ethernet address (the source of frames it sends).
    pub mac: [u8; 6],
    /// The host behind it (the destination of frames it sends).
    pub next_hop: [u8; 6],
}

/// Where the forwarder runs: a namespace (or the caller's, with `None`) and the two
/// interfaces it joins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Router {
    /// The router's network namespace (`None`: the calling thread's).
    pub netns: Option<String>,
    /// The interface facing host `a`.
    pub toward_a: Link,
    /// The interface facing host `b`.
    pub toward_b: Link,
}

impl Router {
    /// The router of `lab`.
    pub fn of(lab: &Lab) -> Result<Router, ImpairError> {
        let r = lab.router.as_ref().ok_or(ImpairError::NoRouter)?;
        Ok(Router {
            netns: Some(r.netns.clone()),
            toward_a: Link {
                interface: r.toward_a.clone(),
                mac: lab.a.next_hop_mac,
                next_hop: lab.a.mac,
            },
            toward_b: Link {
                interface: r.toward_b.clone(),
                mac: lab.b.next_hop_mac,
                next_hop: lab.b.mac,
            },
        })
    }
}

/// What the forwarder did to the frames of one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirectionCounters {
    /// Frames received from the sending host.
    pub received: u64,
    /// Frames sent on to the other host (duplicates included).
    pub forwarded: u64,
    /// Frames dropped on purpose (loss).
    pub dropped: u64,
    /// Frames sent twice.
    pub duplicated: u64,
    /// Frames held back and overtaken by at least one later frame.
    pub reordered: u64,
    /// Frames whose TTL or hop limit ran out (dropped).
    pub ttl_expired: u64,
    /// Frames that were not Ethernet + IPv4/IPv6 (dropped).
    pub malformed: u64,
    /// Frames dropped because every transmit frame was busy: loss nobody asked for.
    pub tx_full: u64,
    /// Frames the bottleneck's full queue dropped (tail drop; see
    /// [`Impairment::rate_bps`]).
    pub queue_dropped: u64,
    /// The most bytes the bottleneck's queue held.
    pub queue_max_bytes: u64,
    /// Frames the bottleneck marked CE (see [`Impairment::ecn`]).
    pub queue_marked: u64,
}

impl DirectionCounters {
    fn add(&mut self, o: &DirectionCounters) {
        self.received += o.received;
        self.forwarded += o.forwarded;
        self.dropped += o.dropped;
        self.duplicated += o.duplicated;
        self.reordered += o.reordered;
        self.ttl_expired += o.ttl_expired;
        self.malformed += o.malformed;
        self.tx_full += o.tx_full;
        self.queue_dropped += o.queue_dropped;
        self.queue_max_bytes = self.queue_max_bytes.max(o.queue_max_bytes);
        self.queue_marked += o.queue_marked;
    }
}

impl fmt::Display for DirectionCounters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "received {} forwarded {} dropped {} duplicated {} reordered {} ttl_expired {} \
             malformed {} tx_full {} queue_dropped {} queue_max_bytes {} queue_marked {}",
            self.received,
            self.forwarded,
            self.dropped,
            self.duplicated,
            self.reordered,
            self.ttl_expired,
            self.malformed,
            self.tx_full,
            self.queue_dropped,
            self.queue_max_bytes,
            self.queue_marked
        )
    }
}

/// What the forwarder did, per direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImpairCounters {
    /// Frames from host `a` to host `b`.
    pub a_to_b: DirectionCounters,
    /// Frames from host `b` to host `a`.
    pub b_to_a: DirectionCounters,
}

impl ImpairCounters {
    /// Both directions added up.
    pub fn total(&self) -> DirectionCounters {
        let mut t = self.a_to_b;
        t.add(&self.b_to_a);
        t
    }
}

impl fmt::Display for ImpairCounters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "a -> b: {}", self.a_to_b)?;
        write!(f, "b -> a: {}", self.b_to_a)
    }
}

impl std::str::FromStr for DirectionCounters {
    type Err = String;

    /// Reads what `Display` wrote: `name value` pairs.
    fn from_str(text: &str) -> Result<DirectionCounters, String> {
        let mut c = DirectionCounters::default();
        let words: Vec<&str> = text.split_whitespace().collect();
        for pair in words.chunks(2) {
            let [name, value] = pair else {
                return Err(format!("{text:?}: a name without a value"));
            };
            let value: u64 = value
                .parse()
                .map_err(|_| format!("{text:?}: {name} is not a number"))?;
            let field = match *name {
                "received" => &mut c.received,
                "forwarded" => &mut c.forwarded,
                "dropped" => &mut c.dropped,
                "duplicated" => &mut c.duplicated,
                "reordered" => &mut c.reordered,
                "ttl_expired" => &mut c.ttl_expired,
                "malformed" => &mut c.malformed,
                "tx_full" => &mut c.tx_full,
                "queue_dropped" => &mut c.queue_dropped,
                "queue_max_bytes" => &mut c.queue_max_bytes,
                "queue_marked" => &mut c.queue_marked,
                other => return Err(format!("{text:?}: unknown counter {other}")),
            };
            *field = value;
        }
        Ok(c)
    }
}

impl std::str::FromStr for ImpairCounters {
    type Err = String;

    /// Reads what `Display` wrote (the last `a -> b:` and `b -> a:` lines of `text`), for
    /// programs that run `xroce-impair` and read its report.
    fn from_str(text: &str) -> Result<ImpairCounters, String> {
        let line = |prefix: &str| {
            text.lines()
                .rev()
                .find_map(|l| l.trim().strip_prefix(prefix))
                .ok_or_else(|| format!("no {prefix:?} line in {text:?}"))
        };
        Ok(ImpairCounters {
            a_to_b: line("a -> b:")?.parse()?,
            b_to_a: line("b -> a:")?.parse()?,
        })
    }
}

/// A running impairment forwarder. Dropping it (or [`Impairer::stop`]) stops the thread,
/// detaches the XDP programs and closes the sockets; RoCEv2 frames then go through the
/// router's kernel again, unimpaired.
#[derive(Debug)]
pub struct Impairer {
    stop: Arc<AtomicBool>,
    counters: Arc<Mutex<ImpairCounters>>,
    thread: Option<JoinHandle<Result<(), ImpairError>>>,
    attach: [AttachMode; 2],
}

impl Impairer {
    /// Starts impairing the path between the hosts of `lab` (which needs a router) and
    /// returns once the forwarder is ready: from then on every RoCEv2 frame between the
    /// hosts goes through it, both ways.
    pub fn start(lab: &Lab, impairment: &Impairment) -> Result<Impairer, ImpairError> {
        Impairer::start_on(&Router::of(lab)?, impairment)
    }

    /// Like [`Impairer::start`], on any router.
    pub fn start_on(router: &Router, impairment: &Impairment) -> Result<Impairer, ImpairError> {
        impairment.check().map_err(ImpairError::Config)?;
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Mutex::new(ImpairCounters::default()));
        let (ready_tx, ready_rx) = mpsc::channel();
        let thread = {
            let (router, impairment) = (router.clone(), *impairment);
            let (stop, counters) = (stop.clone(), counters.clone());
            std::thread::Builder::new()
                .name("xroce-impair".into())
                .spawn(move || {
                    let ports = match Ports::open(&router) {
                        Ok(ports) => ports,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return Ok(());
                        }
                    };
                    let _ = ready_tx.send(Ok(ports.attach));
                    ports.run(&router, impairment, &stop, &counters)
                })
                .map_err(|e| ImpairError::Thread(e.to_string()))?
        };
        match ready_rx.recv() {
            Ok(Ok(attach)) => Ok(Impairer {
                stop,
                counters,
                thread: Some(thread),
                attach,
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

    /// How XDP is attached on the interfaces toward `a` and toward `b`.
    pub fn attach_modes(&self) -> [AttachMode; 2] {
        self.attach
    }

    /// The counters so far.
    pub fn counters(&self) -> ImpairCounters {
        *self
            .counters
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether the forwarding thread still runs (it ends only on an error or a stop).
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the forwarder and returns the final counters, or the error that ended it
    /// earlier.
    pub fn stop(mut self) -> Result<ImpairCounters, ImpairError> {
        self.finish()?;
        Ok(self.counters())
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

impl Drop for Impairer {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            log::warn!("impairment forwarder: {e}");
        }
    }
}

/// The two AF_XDP ports and their XDP programs (index 0: toward `a`, 1: toward `b`).
struct Ports {
    // Declared before the programs: sockets close before the programs detach.
    ports: [Port; 2],
    _xdp: [XdpProgram; 2],
    attach: [AttachMode; 2],
}

fn open_port(link: &Link) -> Result<(Port, XdpProgram, AttachMode), ImpairError> {
    let xdp_error = |source| ImpairError::Xdp {
        interface: link.interface.clone(),
        source,
    };
    let mut xdp = XdpProgram::load(1).map_err(xdp_error)?;
    let mode = xdp
        .attach(&link.interface, AttachRequest::Auto)
        .map_err(xdp_error)?;
    let mut config = PortConfig::new(&link.interface, 0);
    config.zero_copy = ZeroCopy::Auto;
    // A test VM rarely has hugepages to spare; 2 x 16 MiB of ordinary pages will do.
    config.hugepages = HugepagePolicy::Never;
    let port = Port::open(&config)?;
    xdp.insert_socket(0, port.as_fd()).map_err(xdp_error)?;
    Ok((port, xdp, mode))
}

/// One direction's state: its counters and the frame held back, if any.
struct Direction {
    counters: DirectionCounters,
    /// The frame held back (already routed) and its length; 0 when none.
    held: Vec<u8>,
    held_len: usize,
    held_since: Instant,
    /// Frames still to overtake the held one.
    gap_left: u32,
    /// Frames that overtook it.
    overtaken: u32,
    /// Routing scratch space.
    scratch: Vec<u8>,
    /// The egress bottleneck, if the impairment has one.
    bottleneck: Option<route::Bottleneck>,
}

impl Direction {
    fn new(impairment: &Impairment) -> Direction {
        Direction {
            bottleneck: (impairment.rate_bps > 0).then(|| {
                route::Bottleneck::new(impairment.rate_bps, impairment.queue_bytes, Instant::now())
                    .with_marking(impairment.ecn, impairment.seed)
            }),
            counters: DirectionCounters::default(),
            held: vec![0; xroce_engine::umem::FRAME_CAPACITY],
            held_len: 0,
            held_since: Instant::now(),
            gap_left: 0,
            overtaken: 0,
            scratch: vec![0; xroce_engine::umem::FRAME_CAPACITY],
        }
    }

    /// Sends the held frame, if any.
    fn release(&mut self, tx: &mut Transmitter) {
        if self.held_len == 0 {
            return;
        }
        let len = std::mem::take(&mut self.held_len);
        let frame = &self.held[..len];
        if forward(tx, &mut self.bottleneck, frame, &mut self.counters) && self.overtaken > 0 {
            self.counters.reordered += 1;
        }
    }
}

/// Sends `frame`, or queues it behind the bottleneck when there is one (a frame its full
/// queue drops is counted there). Returns whether it went on.
fn forward(
    tx: &mut Transmitter,
    bottleneck: &mut Option<route::Bottleneck>,
    frame: &[u8],
    counters: &mut DirectionCounters,
) -> bool {
    match bottleneck {
        Some(b) => {
            let queued = b.offer(frame, Instant::now());
            counters.queue_dropped = b.dropped;
            counters.queue_max_bytes = b.max_bytes as u64;
            counters.queue_marked = b.marked;
            queued
        }
        None => send(tx, frame, counters),
    }
}

/// Copies `frame` into a transmit frame and submits it. A full ring is reaped and retried
/// a little before the frame is given up (counted as `tx_full`).
fn send(tx: &mut Transmitter, frame: &[u8], counters: &mut DirectionCounters) -> bool {
    for attempt in 0..1000 {
        if let Some(mut slot) = tx.frame() {
            let Some(dst) = slot.buf().get_mut(..frame.len()) else {
                counters.malformed += 1;
                return false;
            };
            dst.copy_from_slice(frame);
            if slot.submit(frame.len()) {
                counters.forwarded += 1;
                return true;
            }
            counters.malformed += 1;
            return false;
        }
        tx.flush();
        if tx.poll_completions() == 0 && attempt > 10 {
            std::thread::yield_now();
        }
    }
    counters.tx_full += 1;
    false
}

impl Ports {
    fn open(router: &Router) -> Result<Ports, ImpairError> {
        if let Some(ns) = &router.netns {
            xroce_lab::netns::enter(ns).map_err(ImpairError::Namespace)?;
        }
        let (pa, xa, ma) = open_port(&router.toward_a)?;
        let (pb, xb, mb) = open_port(&router.toward_b)?;
        Ok(Ports {
            ports: [pa, pb],
            _xdp: [xa, xb],
            attach: [ma, mb],
        })
    }

    fn run(
        mut self,
        router: &Router,
        impairment: Impairment,
        stop: &AtomicBool,
        shared: &Mutex<ImpairCounters>,
    ) -> Result<(), ImpairError> {
        // Index = the port frames arrive on: 0 (from a, to b), 1 (from b, to a).
        let links = [&router.toward_b, &router.toward_a];
        let mut dirs = [Direction::new(&impairment), Direction::new(&impairment)];
        let mut dice = Dice::new(impairment);
        let mut idle_since: Option<Instant> = None;
        let publish = |dirs: &[Direction; 2]| {
            let mut c = shared
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            c.a_to_b = dirs[0].counters;
            c.b_to_a = dirs[1].counters;
        };
        while !stop.load(Ordering::Relaxed) {
            let mut work = 0;
            for from in 0..2 {
                let (first, second) = self.ports.split_at_mut(1);
                let (input, output) = if from == 0 {
                    (&mut first[0], &mut second[0])
                } else {
                    (&mut second[0], &mut first[0])
                };
                let out_link = links[from];
                let dir = &mut dirs[from];
                let tx = output.tx();
                let batch = input.rx().poll();
                let arrived = Instant::now();
                work += batch.len();
                for frame in batch.iter() {
                    dir.counters.received += 1;
                    let fate = dice.roll(arrived);
                    if fate == Fate::Lose {
                        dir.counters.dropped += 1;
                        continue;
                    }
                    let Some(scratch) = dir.scratch.get_mut(..frame.len()) else {
                        dir.counters.malformed += 1;
                        continue;
                    };
                    scratch.copy_from_slice(frame);
                    match route::route(scratch, out_link.mac, out_link.next_hop) {
                        Routed::Forward => {}
                        Routed::TtlExpired => {
                            dir.counters.ttl_expired += 1;
                            continue;
                        }
                        Routed::Malformed => {
                            dir.counters.malformed += 1;
                            continue;
                        }
                    }
                    if fate == Fate::Reorder && dir.held_len == 0 {
                        dir.held[..frame.len()].copy_from_slice(scratch);
                        dir.held_len = frame.len();
                        dir.held_since = Instant::now();
                        dir.gap_left = impairment.reorder_gap;
                        dir.overtaken = 0;
                        continue;
                    }
                    let scratch = &dir.scratch[..frame.len()];
                    let (b, c) = (&mut dir.bottleneck, &mut dir.counters);
                    let sent = forward(tx, b, scratch, c);
                    if fate == Fate::Duplicate && sent && forward(tx, b, scratch, c) {
                        dir.counters.duplicated += 1;
                    }
                    if sent && dir.held_len > 0 {
                        dir.overtaken += 1;
                        dir.gap_left = dir.gap_left.saturating_sub(1);
                        if dir.gap_left == 0 {
                            dir.release(tx);
                        }
                    }
                }
                drop(batch);
                if dir.held_len > 0 && dir.held_since.elapsed() >= REORDER_HOLD {
                    dir.release(tx);
                }
                if let Some(b) = dir.bottleneck.as_mut() {
                    let counters = &mut dir.counters;
                    b.release(Instant::now(), |frame| {
                        send(tx, frame, counters);
                    });
                }
                tx.flush();
                tx.poll_completions();
            }
            if work > 0 {
                idle_since = None;
                publish(&dirs);
                continue;
            }
            // Idle: spin a little, yield the core a while, then sleep in poll(2) on both
            // sockets (never long while a frame is held back or transmits are in flight).
            let idle = idle_since.get_or_insert_with(Instant::now).elapsed();
            let busy = dirs.iter().any(|d| d.held_len > 0)
                || self.ports.iter_mut().any(|p| p.tx().in_flight() > 0);
            if dirs
                .iter()
                .any(|d| d.bottleneck.as_ref().is_some_and(|b| !b.is_empty()))
            {
                // Frames wait for the bottleneck's time: never asleep then.
                std::thread::yield_now();
            } else if idle < Duration::from_micros(50) {
                std::hint::spin_loop();
            } else if idle < Duration::from_millis(1) || busy {
                std::thread::yield_now();
                if busy && idle > Duration::from_millis(1) {
                    std::thread::sleep(Duration::from_micros(200));
                }
            } else {
                publish(&dirs);
                wait_readable(&self.ports, Duration::from_millis(20))?;
            }
        }
        publish(&dirs);
        Ok(())
    }
}

/// Sleeps in `poll(2)` until one of the ports has frames to read or `timeout` passes.
fn wait_readable(ports: &[Port; 2], timeout: Duration) -> Result<(), ImpairError> {
    let mut fds = ports.each_ref().map(|p| libc::pollfd {
        fd: p.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    });
    let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // Safety: `fds` is an array of two initialised pollfd structures and the count says two.
    let ret = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis) };
    if ret < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(ImpairError::Poll(e));
        }
    }
    Ok(())
}
