//! `xsk-baseline`: raw AF_XDP between two network namespaces, with no RoCEv2 and no
//! transport, as the ceiling xroce's own figures are compared against.
//!
//! It builds its own lab (two namespaces over veth), attaches xroce's XDP program on both
//! ends, opens one AF_XDP port per end, and runs one thread per end, each inside its
//! namespace and pinned to its own core:
//!
//! - `flood`: `a` transmits UDP 4791 frames of `--size` bytes as fast as it can for
//!   `--secs` seconds; `b` receives and counts. Packets/s and bits/s as measured at the
//!   receiver, plus the transmitter's own figures.
//! - `pingpong`: one frame back and forth `--count` times; round-trip time percentiles.
//!
//! `--mtu` sets the lab's MTU; above 3822 bytes the ports use AF_XDP multi-buffer frames, so
//! frames of up to 7680 bytes cross (a 4096-byte path MTU's).
//!
//! Output: human lines, then one JSON line (the last line, starting with `{`). Needs root.
//! Ctrl-C tears the lab down.

use std::fmt::Write as _;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use xroce_engine::daemon::needs_multi_buffer;
use xroce_engine::umem::HugepagePolicy;
use xroce_engine::xdp::{AttachMode, AttachRequest, XdpProgram};
use xroce_engine::xsk::{Backoff, BindMode, Port, PortConfig, ZeroCopy};
use xroce_lab::frame::{ETH_LEN, UdpFrame, header_len};
use xroce_lab::hugepages::HugepageReservation;
use xroce_lab::{Lab, LabConfig, Side, netns};

#[derive(Debug, Parser)]
#[command(
    name = "xsk-baseline",
    about = "Raw AF_XDP flood and ping-pong between two namespaces"
)]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
    /// Core for host a's thread (the transmitter / ping initiator).
    #[arg(long, global = true, default_value_t = 0)]
    a_core: usize,
    /// Core for host b's thread (the receiver / ping responder).
    #[arg(long, global = true, default_value_t = 1)]
    b_core: usize,
    /// Frame size in bytes (Ethernet header to the end of the UDP payload, no FCS).
    #[arg(long, global = true, default_value_t = 64)]
    size: usize,
    /// Use IPv6 instead of IPv4.
    #[arg(long, global = true)]
    ipv6: bool,
    /// Do not reserve hugepages for the UMEMs (they then use ordinary pages).
    #[arg(long, global = true)]
    no_hugepages: bool,
    /// Receive and transmit frames per port (powers of two): more absorb longer stalls of the
    /// receiving thread.
    #[arg(long, global = true, default_value_t = 2048)]
    frames: u32,
    /// XDP attach mode: auto (native, else generic), native, generic.
    #[arg(long, global = true, default_value = "auto")]
    xdp: String,
    /// MTU of the lab's veth interfaces; above a UMEM frame's capacity the ports use
    /// multi-buffer frames.
    #[arg(long, global = true, default_value_t = 1500)]
    mtu: u32,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// a floods b for a while; rates at both ends.
    Flood {
        /// How long a transmits.
        #[arg(long, default_value_t = 5.0)]
        secs: f64,
    },
    /// One frame back and forth; round-trip time percentiles.
    Pingpong {
        /// Measured round trips.
        #[arg(long, default_value_t = 100_000)]
        count: usize,
        /// Round trips before measuring.
        #[arg(long, default_value_t = 2_000)]
        warmup: usize,
    },
}

/// What each end reports about its set-up.
#[derive(Clone, Debug)]
struct Setup {
    attach: AttachMode,
    bind: BindMode,
    hugepages: bool,
    backing: String,
}

struct End {
    /// Attached for as long as the end exists.
    _xdp: XdpProgram,
    port: Port,
    setup: Setup,
}

fn open_end(
    lab: &Lab,
    side: Side,
    request: AttachRequest,
    hugepages: HugepagePolicy,
    frames: u32,
    multi_buffer: bool,
) -> Result<End> {
    let interface = &lab.host(side).interface;
    let mut xdp = XdpProgram::load(1)?;
    let attach = xdp.attach(interface, request)?;
    let mut config = PortConfig::new(interface, 0);
    config.hugepages = hugepages;
    config.zero_copy = ZeroCopy::Auto;
    config.rx_frames = frames;
    config.tx_frames = frames;
    config.multi_buffer = multi_buffer;
    let port = Port::open(&config)?;
    xdp.insert_socket(0, std::os::fd::AsFd::as_fd(&port))?;
    let setup = Setup {
        attach,
        bind: port.info().bind_mode,
        hugepages: port.info().backing.is_hugepages(),
        backing: port.info().backing.to_string(),
    };
    Ok(End {
        _xdp: xdp,
        port,
        setup,
    })
}

fn pin(core: usize) {
    let ok = core_affinity::get_core_ids()
        .and_then(|ids| ids.into_iter().find(|c| c.id == core))
        .is_some_and(core_affinity::set_for_current);
    if !ok {
        log::warn!("could not pin to core {core}; running unpinned");
    }
}

/// Bytes of sequence number at the start of the UDP payload (16 bits, wrapping: a 64-byte
/// IPv6 frame has room for two bytes of payload).
const SEQ_LEN: usize = 2;

/// The frame a sends (seq 0; the sequence number sits in the first payload bytes).
fn template(lab: &Lab, from: Side, ipv6: bool, size: usize, mtu: u32) -> Result<(Vec<u8>, usize)> {
    let ip = if ipv6 {
        lab.host(from).ipv6.into()
    } else {
        lab.host(from).ipv4.into()
    };
    let headers = header_len(ip, None);
    if size < headers + SEQ_LEN {
        bail!(
            "--size {size} is below {} (headers + a {SEQ_LEN}-byte sequence number)",
            headers + SEQ_LEN
        );
    }
    let most = if needs_multi_buffer(mtu) {
        xroce_engine::umem::MULTI_BUFFER_CAPACITY
    } else {
        xroce_engine::umem::FRAME_CAPACITY
    };
    if size > most || size > mtu as usize + ETH_LEN {
        bail!("--size {size} does not fit the {mtu}-byte MTU of the lab (or {most}-byte ports)");
    }
    let (src, dst) = lab.udp_endpoints(from, ipv6, 0xc000, 4791);
    let payload = vec![0u8; size - headers];
    Ok((
        UdpFrame {
            src,
            dst,
            vlan: None,
            payload: &payload,
        }
        .build(),
        headers,
    ))
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    log::set_logger(&LOGGER)
        .map(|()| log::set_max_level(log::LevelFilter::Info))
        .ok();
    xroce_lab::signals::install().context("installing the Ctrl-C handler")?;
    if let Ok(removed) = xroce_lab::cleanup_stale()
        && !removed.is_empty()
    {
        log::info!("removed stale lab namespaces {removed:?}");
    }
    let request = match cli.xdp.as_str() {
        "auto" => AttachRequest::Auto,
        "native" => AttachRequest::Native,
        "generic" => AttachRequest::Generic,
        other => bail!("--xdp {other}: expected auto, native or generic"),
    };
    let cores = core_affinity::get_core_ids().map_or(1, |ids| ids.len());
    if cli.a_core == cli.b_core {
        log::warn!(
            "both ends on core {}: expect spinning threads to slow each other",
            cli.a_core
        );
    }
    let reservation = if cli.no_hugepages {
        None
    } else {
        // Two ports of 2 x frames x 4 KiB each (3 x with multi-buffer: transmit frames are
        // pairs).
        let per_port = if needs_multi_buffer(cli.mtu) { 3 } else { 2 };
        let pages = (2 * per_port * u64::from(cli.frames) * 4096).div_ceil(2 << 20);
        Some(HugepageReservation::reserve(pages).context("reserving hugepages")?)
    };
    let hugepages = if cli.no_hugepages {
        HugepagePolicy::Never
    } else {
        HugepagePolicy::Auto
    };
    let lab = Lab::new(&LabConfig {
        mtu: cli.mtu,
        ..LabConfig::default()
    })
    .context("building the lab")?;
    log::info!(
        "lab {} up; {cores} cores; a on core {}, b on core {}",
        lab.prefix(),
        cli.a_core,
        cli.b_core
    );

    let (human, json) = match cli.mode {
        Mode::Flood { secs } => flood(&lab, &cli, request, hugepages, secs)?,
        Mode::Pingpong { count, warmup } => {
            pingpong(&lab, &cli, request, hugepages, count, warmup)?
        }
    };
    drop(lab);
    drop(reservation);
    println!("{human}");
    println!("{json}");
    Ok(())
}

fn setup_json(name: &str, setup: &Setup) -> String {
    format!(
        "\"{name}\":{{\"xdp\":\"{}\",\"bind\":\"{}\",\"hugepages\":{}}}",
        setup.attach, setup.bind, setup.hugepages
    )
}

fn setup_line(name: &str, setup: &Setup) -> String {
    format!(
        "{name}: XDP {}, AF_XDP {} mode, UMEM on {}",
        setup.attach, setup.bind, setup.backing
    )
}

struct FloodTx {
    frames: u64,
    bytes: u64,
    elapsed: Duration,
    kicks: u64,
    ring_full: u64,
    setup: Setup,
}

struct FloodRx {
    frames: u64,
    bytes: u64,
    window: Duration,
    empty_polls: u64,
    fill_ring_empty: u64,
    kernel_rx_dropped: u64,
    kernel_fill_empty: u64,
    kernel_ring_full: u64,
    sleeps: u64,
    /// Longest time between two non-empty polls.
    max_gap: Duration,
    /// Gaps between non-empty polls above 1 ms.
    long_gaps: u64,
    setup: Setup,
}

fn flood(
    lab: &Lab,
    cli: &Cli,
    request: AttachRequest,
    hugepages: HugepagePolicy,
    secs: f64,
) -> Result<(String, String)> {
    let (frame, headers) = template(lab, Side::A, cli.ipv6, cli.size, cli.mtu)?;
    let duration = Duration::from_secs_f64(secs);
    let ready = Barrier::new(2);
    let stop = AtomicBool::new(false);

    let (tx, rx) = std::thread::scope(|scope| {
        let rx = scope.spawn(|| -> Result<FloodRx> {
            netns::enter(&lab.b.netns)?;
            pin(cli.b_core);
            let opened = open_end(
                lab,
                Side::B,
                request,
                hugepages,
                cli.frames,
                needs_multi_buffer(cli.mtu),
            );
            ready.wait();
            let mut end = opened?;
            let mut backoff = Backoff::default();
            let (mut first, mut last) = (None::<Instant>, None::<Instant>);
            let (mut frames, mut bytes) = (0u64, 0u64);
            let (mut max_gap, mut long_gaps) = (Duration::ZERO, 0u64);
            while !stop.load(Ordering::Relaxed) {
                let batch = end.port.rx().poll();
                if batch.is_empty() {
                    drop(batch);
                    backoff.on_idle(end.port.rx())?;
                    continue;
                }
                backoff.on_work();
                let now = Instant::now();
                if first.is_none() {
                    first = Some(now);
                }
                if let Some(last) = last {
                    let gap = now - last;
                    max_gap = max_gap.max(gap);
                    if gap > Duration::from_millis(1) {
                        long_gaps += 1;
                    }
                }
                last = Some(now);
                frames += batch.len() as u64;
                bytes += batch.iter().map(|f| f.len() as u64).sum::<u64>();
            }
            let window = match (first, last) {
                (Some(first), Some(last)) => last - first,
                _ => Duration::ZERO,
            };
            let counters = end.port.counters();
            let stats = end.port.kernel_stats()?;
            log::debug!("b: {counters:?} {stats:?}");
            Ok(FloodRx {
                frames,
                bytes,
                window,
                empty_polls: counters.rx.empty_polls,
                fill_ring_empty: counters.rx.fill_ring_empty,
                kernel_rx_dropped: stats.rx_dropped,
                kernel_fill_empty: stats.rx_fill_ring_empty_descs,
                kernel_ring_full: stats.rx_ring_full,
                sleeps: backoff.sleeps(),
                max_gap,
                long_gaps,
                setup: end.setup,
            })
        });
        let tx = scope.spawn(|| -> Result<FloodTx> {
            let result = (|| -> Result<FloodTx> {
                netns::enter(&lab.a.netns)?;
                pin(cli.a_core);
                let opened = open_end(
                    lab,
                    Side::A,
                    request,
                    hugepages,
                    cli.frames,
                    needs_multi_buffer(cli.mtu),
                );
                ready.wait();
                let mut end = opened?;
                let tx = end.port.tx();
                let start = Instant::now();
                let mut seq = 0u64;
                let mut backoff = Backoff::default();
                'outer: loop {
                    // Check the clock once per batch, not per frame.
                    if start.elapsed() >= duration || xroce_lab::signals::interrupted() {
                        break;
                    }
                    for _ in 0..xroce_engine::xsk::TX_BATCH {
                        let Some(mut slot) = tx.frame() else {
                            tx.flush();
                            backoff.on_work();
                            continue 'outer;
                        };
                        let buf = slot.buf();
                        buf[..frame.len()].copy_from_slice(&frame);
                        buf[headers..headers + SEQ_LEN]
                            .copy_from_slice(&(seq as u16).to_be_bytes());
                        slot.submit(frame.len());
                        seq += 1;
                    }
                    tx.flush();
                }
                tx.flush();
                let elapsed = start.elapsed();
                // Let the ring drain (bounded) so the completion count is final.
                let drain = Instant::now();
                while tx.in_flight() > 0 && drain.elapsed() < Duration::from_secs(2) {
                    if tx.poll_completions() == 0 {
                        std::thread::sleep(Duration::from_micros(100));
                    }
                }
                let counters = *tx.counters();
                Ok(FloodTx {
                    frames: counters.frames,
                    bytes: counters.bytes,
                    elapsed,
                    kicks: counters.kicks,
                    ring_full: counters.ring_full,
                    setup: end.setup,
                })
            })();
            // Give the receiver time to drain what is in flight, then stop it.
            std::thread::sleep(Duration::from_millis(300));
            stop.store(true, Ordering::Relaxed);
            result
        });
        (tx.join(), rx.join())
    });
    let tx = tx.map_err(|_| anyhow::anyhow!("the transmit thread panicked"))??;
    let rx = rx.map_err(|_| anyhow::anyhow!("the receive thread panicked"))??;

    let per_sec = |n: u64, d: Duration| {
        if d.is_zero() {
            0.0
        } else {
            n as f64 / d.as_secs_f64()
        }
    };
    let rx_pps = per_sec(rx.frames, rx.window);
    let rx_bps = per_sec(rx.bytes * 8, rx.window);
    let tx_pps = per_sec(tx.frames, tx.elapsed);
    let tx_bps = per_sec(tx.bytes * 8, tx.elapsed);
    let lost = tx.frames.saturating_sub(rx.frames);
    let mut human = String::new();
    let _ = writeln!(human, "{}", setup_line("a", &tx.setup));
    let _ = writeln!(human, "{}", setup_line("b", &rx.setup));
    let _ = writeln!(
        human,
        "flood {} B frames, {:.1} s: rx {:.3} Mpps {:.2} Gbit/s | tx {:.3} Mpps {:.2} Gbit/s | \
         sent {} received {} lost {} ({:.2}%)",
        cli.size,
        tx.elapsed.as_secs_f64(),
        rx_pps / 1e6,
        rx_bps / 1e9,
        tx_pps / 1e6,
        tx_bps / 1e9,
        tx.frames,
        rx.frames,
        lost,
        if tx.frames == 0 {
            0.0
        } else {
            100.0 * lost as f64 / tx.frames as f64
        },
    );
    let _ = write!(
        human,
        "tx kicks {} ring-full {} | rx empty polls {} sleeps {} gaps > 1 ms {} (longest {:.1} ms) \
         fill-empty {} | kernel rx dropped {} ring-full {} fill-empty {}",
        tx.kicks,
        tx.ring_full,
        rx.empty_polls,
        rx.sleeps,
        rx.long_gaps,
        rx.max_gap.as_secs_f64() * 1e3,
        rx.fill_ring_empty,
        rx.kernel_rx_dropped,
        rx.kernel_ring_full,
        rx.kernel_fill_empty
    );
    let json = format!(
        "{{\"mode\":\"flood\",\"frame_bytes\":{},\"ipv6\":{},\"secs\":{:.3},\"rx_pps\":{:.0},\
         \"rx_bps\":{:.0},\"tx_pps\":{:.0},\"tx_bps\":{:.0},\"tx_frames\":{},\"rx_frames\":{},\
         \"lost\":{},\"tx_kicks\":{},\"kernel_rx_dropped\":{},\"kernel_rx_ring_full\":{},\
         \"kernel_fill_empty\":{},\"rx_gaps_over_1ms\":{},\"rx_longest_gap_ms\":{:.3},{},{}}}",
        cli.size,
        cli.ipv6,
        tx.elapsed.as_secs_f64(),
        rx_pps,
        rx_bps,
        tx_pps,
        tx_bps,
        tx.frames,
        rx.frames,
        lost,
        tx.kicks,
        rx.kernel_rx_dropped,
        rx.kernel_ring_full,
        rx.kernel_fill_empty,
        rx.long_gaps,
        rx.max_gap.as_secs_f64() * 1e3,
        setup_json("a", &tx.setup),
        setup_json("b", &rx.setup),
    );
    Ok((human, json))
}

fn pingpong(
    lab: &Lab,
    cli: &Cli,
    request: AttachRequest,
    hugepages: HugepagePolicy,
    count: usize,
    warmup: usize,
) -> Result<(String, String)> {
    let (ping, headers) = template(lab, Side::A, cli.ipv6, cli.size, cli.mtu)?;
    let (pong, _) = template(lab, Side::B, cli.ipv6, cli.size, cli.mtu)?;
    let ready = Barrier::new(2);
    let stop = AtomicBool::new(false);
    let total = warmup + count;

    let (initiator, responder) = std::thread::scope(|scope| {
        let responder = scope.spawn(|| -> Result<(Setup, u64)> {
            netns::enter(&lab.b.netns)?;
            pin(cli.b_core);
            let opened = open_end(
                lab,
                Side::B,
                request,
                hugepages,
                cli.frames,
                needs_multi_buffer(cli.mtu),
            );
            ready.wait();
            let mut end = opened?;
            let mut backoff = Backoff::default();
            let mut answered = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let (rx, tx) = end.port.split();
                let batch = rx.poll();
                if batch.is_empty() {
                    drop(batch);
                    backoff.on_idle(rx)?;
                    continue;
                }
                backoff.on_work();
                for frame in batch.iter() {
                    let Some(seq) = frame.get(headers..headers + SEQ_LEN) else {
                        continue;
                    };
                    let Some(mut slot) = tx.frame() else { continue };
                    let buf = slot.buf();
                    buf[..pong.len()].copy_from_slice(&pong);
                    buf[headers..headers + SEQ_LEN].copy_from_slice(seq);
                    slot.submit(pong.len());
                    answered += 1;
                }
                drop(batch);
                tx.flush();
                tx.poll_completions();
            }
            Ok((end.setup, answered))
        });
        let initiator = scope.spawn(|| -> Result<(Setup, Vec<Duration>, u64)> {
            let result = (|| -> Result<(Setup, Vec<Duration>, u64)> {
                netns::enter(&lab.a.netns)?;
                pin(cli.a_core);
                let opened = open_end(
                    lab,
                    Side::A,
                    request,
                    hugepages,
                    cli.frames,
                    needs_multi_buffer(cli.mtu),
                );
                ready.wait();
                let mut end = opened?;
                let mut rtts = Vec::with_capacity(count);
                let mut timeouts = 0u64;
                let mut backoff = Backoff::default();
                // Frames sent before b's port was in its XSKMAP are lost: time out and resend.
                let timeout = Duration::from_millis(100);
                let mut seq = 0u64;
                while rtts.len() < count {
                    if xroce_lab::signals::interrupted() {
                        bail!("interrupted");
                    }
                    seq += 1;
                    let tx = end.port.tx();
                    tx.poll_completions();
                    let Some(mut slot) = tx.frame() else { continue };
                    let buf = slot.buf();
                    buf[..ping.len()].copy_from_slice(&ping);
                    let tag = (seq as u16).to_be_bytes();
                    buf[headers..headers + SEQ_LEN].copy_from_slice(&tag);
                    let sent = Instant::now();
                    slot.submit(ping.len());
                    tx.flush();
                    let answered = loop {
                        let batch = end.port.rx().poll();
                        let hit = batch
                            .iter()
                            .any(|f| f.get(headers..headers + SEQ_LEN) == Some(&tag[..]));
                        let empty = batch.is_empty();
                        drop(batch);
                        if hit {
                            break true;
                        }
                        if sent.elapsed() > timeout {
                            break false;
                        }
                        if empty {
                            backoff.on_idle(end.port.rx())?;
                        }
                    };
                    let rtt = sent.elapsed();
                    backoff.on_work();
                    if !answered {
                        timeouts += 1;
                        if timeouts > 100 {
                            bail!("no answer to 100 pings: is b up?");
                        }
                        continue;
                    }
                    if seq as usize > warmup {
                        rtts.push(rtt);
                    }
                    if seq as usize > total * 2 {
                        bail!("too many lost pings");
                    }
                }
                Ok((end.setup, rtts, timeouts))
            })();
            stop.store(true, Ordering::Relaxed);
            result
        });
        (initiator.join(), responder.join())
    });
    let (a_setup, mut rtts, timeouts) =
        initiator.map_err(|_| anyhow::anyhow!("the initiator thread panicked"))??;
    let (b_setup, answered) =
        responder.map_err(|_| anyhow::anyhow!("the responder thread panicked"))??;
    rtts.sort_unstable();
    let pct = |p: f64| -> Duration {
        let index = ((rtts.len() as f64 * p).ceil() as usize).clamp(1, rtts.len()) - 1;
        rtts[index]
    };
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mean = rtts.iter().sum::<Duration>() / rtts.len() as u32;
    let (min, median, p99, p999, max) = (
        rtts[0],
        pct(0.5),
        pct(0.99),
        pct(0.999),
        rtts[rtts.len() - 1],
    );
    let mut human = String::new();
    let _ = writeln!(human, "{}", setup_line("a", &a_setup));
    let _ = writeln!(human, "{}", setup_line("b", &b_setup));
    let _ = write!(
        human,
        "pingpong {} B frames, {} round trips ({} warm-up, {} timed out, b answered {}): min \
         {:.2} µs, median {:.2} µs, mean {:.2} µs, p99 {:.2} µs, p99.9 {:.2} µs, max {:.2} µs",
        cli.size,
        rtts.len(),
        warmup,
        timeouts,
        answered,
        us(min),
        us(median),
        us(mean),
        us(p99),
        us(p999),
        us(max)
    );
    let json = format!(
        "{{\"mode\":\"pingpong\",\"frame_bytes\":{},\"ipv6\":{},\"round_trips\":{},\
         \"timeouts\":{},\"rtt_min_us\":{:.3},\"rtt_median_us\":{:.3},\"rtt_mean_us\":{:.3},\
         \"rtt_p99_us\":{:.3},\"rtt_p999_us\":{:.3},\"rtt_max_us\":{:.3},{},{}}}",
        cli.size,
        cli.ipv6,
        rtts.len(),
        timeouts,
        us(min),
        us(median),
        us(mean),
        us(p99),
        us(p999),
        us(max),
        setup_json("a", &a_setup),
        setup_json("b", &b_setup),
    );
    Ok((human, json))
}

/// Log lines to stderr.
struct StderrLogger;

static LOGGER: StderrLogger = StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Info
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            eprintln!(
                "[{}] {}",
                record.level().as_str().to_ascii_lowercase(),
                record.args()
            );
        }
    }

    fn flush(&self) {}
}
