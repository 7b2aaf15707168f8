//! Packets per second through the whole RDMA WRITE path in memory: requester → frame →
//! responder (data into the region, ACK) → frame → completer (completion), with two
//! endpoints handing frames to each other directly, no network.
//!
//! Frames move in batches, as a poller moves them between its rings: the requester emits
//! up to a batch of packets, the responder takes them all and then sends what it has
//! (its positive ACKs coalesce), the requester takes those. One element is one WRITE
//! packet; each work request is signaled and its completion taken.
//!
//! A second group times each endpoint's share of the same pipeline on its own
//! (`rc_write_side/requester/…`, `rc_write_side/responder/…`): what a core running only one
//! side would do.
//!
//! A third group (`rc_write_on_cpu/…`) times the whole pipeline again by the time its
//! thread spent on a CPU rather than by the clock on the wall: on a machine whose cores are
//! shared with other work, that is what one core of its own would do. Its samples are
//! long (the kernel's count of a running thread's time lags by up to a scheduler tick).
//!
//! `cargo bench -p xroce-transport --bench pipeline`

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use xroce_transport::frame::MAX_FRAME;
use xroce_transport::testing::{Connection, Host, connect};
use xroce_transport::{Access, Gather, Instant, QpType, SendFlags, SendOp, SendWqe, SgeList};
use xroce_wire::{IbMtu, Qpn};

const QA: Qpn = Qpn::new(0x11);
const QB: Qpn = Qpn::new(0x22);
const KEY: u32 = 0x1234;
const BASE: u64 = 0x10_0000;
/// Work requests posted per measured iteration.
const WRS: usize = 256;
/// Frames moved per turn, like an AF_XDP ring batch.
const BATCH: usize = 32;

struct Pipeline {
    a: Host,
    b: Host,
    frames: Vec<Vec<u8>>,
    lens: Vec<usize>,
    wqe: SendWqe,
    now: Instant,
}

impl Pipeline {
    fn new(size: u32, mtu: IbMtu) -> Pipeline {
        let mut a = Host::new(1);
        let mut b = Host::new(2);
        a.add_region(KEY, BASE, 1 << 20, Access::ALL);
        b.add_region(KEY, BASE, 1 << 20, Access::ALL);
        let c = Connection {
            mtu,
            depth: WRS as u32,
            ..Connection::default()
        };
        connect(&mut a, QA, &mut b, QB, QpType::Rc, &c, Instant::ZERO);
        for (i, byte) in a.mem.region_mut(0).bytes.iter_mut().enumerate() {
            *byte = i as u8;
        }
        let wqe = SendWqe {
            wr_id: 0,
            op: SendOp::Write {
                remote_addr: BASE + 4096,
                rkey: KEY | 0x8000_0000,
            },
            flags: SendFlags::SIGNALED,
            data: Gather::Sges(SgeList::single(BASE, size, KEY)),
            ud: None,
        };
        Pipeline {
            a,
            b,
            frames: vec![vec![0u8; MAX_FRAME]; BATCH],
            lens: vec![0; BATCH],
            wqe,
            now: Instant::ZERO,
        }
    }

    /// Posts `WRS` WRITEs and runs them to completion; returns the WRITE packets sent.
    fn run(&mut self) -> usize {
        self.run_timed(false).0
    }

    /// As [`Pipeline::run`], and with `timed` also the time spent in each endpoint: the
    /// requester side (posting, sending the WRITEs, taking the ACKs and the completions)
    /// and the responder side (taking the WRITEs, sending the ACKs). Clock reads bracket
    /// whole batches, so they cost a few nanoseconds per packet.
    fn run_timed(&mut self, timed: bool) -> (usize, Duration, Duration) {
        let clock = |on: bool| on.then(std::time::Instant::now);
        let elapsed = |t: Option<std::time::Instant>| t.map_or(Duration::ZERO, |t| t.elapsed());
        let (mut requester, mut responder) = (Duration::ZERO, Duration::ZERO);
        let Pipeline {
            a,
            b,
            frames,
            lens,
            wqe,
            now,
        } = self;
        let now = *now;
        let t = clock(timed);
        for i in 0..WRS {
            let w = SendWqe {
                wr_id: i as u64,
                ..*wqe
            };
            // NOTE(unwrap): the send queue holds WRS work requests and is empty here.
            a.endpoint.post_send(now, QA, w).unwrap();
        }
        requester += elapsed(t);
        let mut packets = 0;
        let mut completed = 0;
        while completed < WRS {
            let t = clock(timed);
            let mut n = 0;
            while n < BATCH {
                match a.endpoint.poll_transmit(now, &mut frames[n], &mut a.mem) {
                    Some(t) => lens[n] = t.len,
                    None => break,
                }
                n += 1;
            }
            requester += elapsed(t);
            packets += n;
            let t = clock(timed);
            for (f, &len) in frames.iter().zip(lens.iter()).take(n) {
                b.endpoint.handle_frame(now, &f[..len], &mut b.mem);
            }
            let mut m = 0;
            while m < BATCH {
                match b.endpoint.poll_transmit(now, &mut frames[m], &mut b.mem) {
                    Some(t) => lens[m] = t.len,
                    None => break,
                }
                m += 1;
            }
            responder += elapsed(t);
            let t = clock(timed);
            for (f, &len) in frames.iter().zip(lens.iter()).take(m) {
                a.endpoint.handle_frame(now, &f[..len], &mut a.mem);
            }
            while let Some(c) = a.endpoint.poll_completion() {
                black_box(c);
                completed += 1;
            }
            requester += elapsed(t);
            assert!(n + m > 0, "the pipeline stalled");
        }
        (packets, requester, responder)
    }
}

fn pipeline(c: &mut Criterion) {
    let mut group = c.benchmark_group("rc_write_pipeline");
    for (size, mtu) in [
        (64, IbMtu::Mtu1024),
        (1024, IbMtu::Mtu1024),
        (4096, IbMtu::Mtu4096),
    ] {
        let mut p = Pipeline::new(size, mtu);
        let packets = p.run();
        assert_eq!(packets, WRS, "one packet per WRITE");
        group.throughput(Throughput::Elements(packets as u64));
        group.bench_function(format!("{size}B"), |bench| {
            bench.iter(|| black_box(p.run()));
        });
    }
    group.finish();
}

/// The same pipeline, each endpoint's share timed on its own: what one core running only
/// the requester (or only the responder) would do.
fn sides(c: &mut Criterion) {
    let mut group = c.benchmark_group("rc_write_side");
    for (size, mtu) in [(64, IbMtu::Mtu1024), (4096, IbMtu::Mtu4096)] {
        let mut p = Pipeline::new(size, mtu);
        group.throughput(Throughput::Elements(WRS as u64));
        for (name, requester) in [("requester", true), ("responder", false)] {
            group.bench_function(format!("{name}/{size}B"), |bench| {
                bench.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let (_, req, resp) = p.run_timed(true);
                        total += if requester { req } else { resp };
                    }
                    total
                });
            });
        }
    }
    group.finish();
}

/// The time this thread has spent on a CPU: the first field of Linux's
/// `/proc/thread-self/schedstat`, in nanoseconds. `None` where there is no such file.
fn on_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos = stat.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}

/// The pipeline timed by its thread's time on a CPU (where the system tells it).
fn on_cpu_time(c: &mut Criterion) {
    if on_cpu().is_none() {
        return;
    }
    let mut group = c.benchmark_group("rc_write_on_cpu");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    for (size, mtu) in [(64, IbMtu::Mtu1024), (1024, IbMtu::Mtu1024)] {
        let mut p = Pipeline::new(size, mtu);
        group.throughput(Throughput::Elements(WRS as u64));
        group.bench_function(format!("{size}B"), |bench| {
            bench.iter_custom(|iters| {
                let start = on_cpu().unwrap_or_default();
                for _ in 0..iters {
                    black_box(p.run());
                }
                on_cpu().unwrap_or_default().saturating_sub(start)
            });
        });
    }
    group.finish();
}

criterion_group!(benches, pipeline, sides, on_cpu_time);
criterion_main!(benches);
