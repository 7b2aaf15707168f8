//! The kernel baselines, over the same veth of the same lab: UDP sockets (flood and
//! ping-pong at the frame sizes xroce is compared at) and a TCP stream.
//!
//! Each end is a thread of the bench that enters its host's namespace and pins itself to
//! the core the raw AF_XDP baseline's end of that host uses. They are ordinary blocking or
//! polling `std::net` sockets: what an application gets from the kernel without tuning
//! beyond a larger receive buffer.

use std::io::{ErrorKind, Read as _, Write as _};
use std::net::{SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use xroce_lab::{Lab, netns};

use super::poll::{Idle, Then, place};
use super::report::{FloodPoint, PingPoint, TcpPoint};

/// Ethernet + IPv4 + UDP headers.
pub(crate) const UDP_HEADERS: usize = 14 + 20 + 8;
const FLOOD_PORT: u16 = 47_901;
const PING_PORT: u16 = 47_902;
const TCP_PORT: u16 = 47_903;
/// Bytes per TCP `write`.
const TCP_WRITE: usize = 64 << 10;

/// Where the two ends of a kernel baseline run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ends<'l> {
    pub(crate) lab: &'l Lab,
    pub(crate) a_core: Option<usize>,
    pub(crate) b_core: Option<usize>,
    /// How long a polling end spins before yielding.
    pub(crate) spin: Duration,
}

impl Ends<'_> {
    fn b_addr(&self, port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(self.lab.b.ipv4, port)
    }

    fn a_addr(&self, port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(self.lab.a.ipv4, port)
    }
}

fn set_rcvbuf(socket: &impl AsRawFd, bytes: i32) {
    // Safety: setsockopt reads `bytes` (a live c_int) for its stated length; a failure
    // only leaves the default buffer.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&bytes as *const i32).cast(),
            size_of::<i32>() as libc::socklen_t,
        )
    };
}

/// Host a sends `frame`-byte frames to host b as fast as `send` goes for `secs`; host b
/// counts what arrives. The rate is the receiver's, between its first and last frame.
pub(crate) fn udp_flood(ends: Ends<'_>, frame: usize, secs: f64) -> Result<FloodPoint> {
    ensure!(
        frame > UDP_HEADERS,
        "a {frame}-byte frame has no room for UDP payload"
    );
    let payload = frame - UDP_HEADERS;
    let ready = Barrier::new(2);
    let stop = AtomicBool::new(false);
    let duration = Duration::from_secs_f64(secs);
    let (tx, rx) = std::thread::scope(|s| {
        let rx = s.spawn(|| -> Result<(u64, Duration)> {
            let socket = (|| -> Result<UdpSocket> {
                netns::enter(&ends.lab.b.netns)?;
                place(ends.b_core);
                let socket = UdpSocket::bind(ends.b_addr(FLOOD_PORT))?;
                set_rcvbuf(&socket, 4 << 20);
                socket.set_read_timeout(Some(Duration::from_millis(50)))?;
                Ok(socket)
            })();
            ready.wait();
            let socket = socket?;
            let mut buf = vec![0u8; 65536];
            let (mut first, mut last, mut frames) = (None::<Instant>, None::<Instant>, 0u64);
            while !stop.load(Ordering::Relaxed) {
                match socket.recv(&mut buf) {
                    Ok(n) if n == payload => {
                        let now = Instant::now();
                        first.get_or_insert(now);
                        last = Some(now);
                        frames += 1;
                    }
                    Ok(_) => {}
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            let window = match (first, last) {
                (Some(f), Some(l)) => l - f,
                _ => Duration::ZERO,
            };
            Ok((frames, window))
        });
        let tx = s.spawn(|| -> Result<u64> {
            let result = (|| -> Result<u64> {
                let socket = (|| -> Result<UdpSocket> {
                    netns::enter(&ends.lab.a.netns)?;
                    place(ends.a_core);
                    let socket = UdpSocket::bind(ends.a_addr(0))?;
                    socket.connect(ends.b_addr(FLOOD_PORT))?;
                    Ok(socket)
                })();
                ready.wait();
                let socket = socket?;
                let data = vec![0x5au8; payload];
                let start = Instant::now();
                let mut sent = 0u64;
                while start.elapsed() < duration {
                    for _ in 0..64 {
                        match socket.send(&data) {
                            Ok(_) => sent += 1,
                            // The receiver's queue or the veth's backlog is full: the
                            // kernel says so instead of dropping.
                            Err(e)
                                if e.raw_os_error() == Some(libc::ENOBUFS)
                                    || e.kind() == ErrorKind::ConnectionRefused => {}
                            Err(e) => return Err(e.into()),
                        }
                    }
                    if xroce_lab::signals::interrupted() {
                        bail!("interrupted");
                    }
                }
                Ok(sent)
            })();
            // Let the receiver drain what is queued, then stop it.
            std::thread::sleep(Duration::from_millis(300));
            stop.store(true, Ordering::Relaxed);
            result
        });
        (tx.join(), rx.join())
    });
    let sent = tx.map_err(|_| anyhow::anyhow!("the UDP sender panicked"))??;
    let (received, window) = rx.map_err(|_| anyhow::anyhow!("the UDP receiver panicked"))??;
    ensure!(
        received > 1 && !window.is_zero(),
        "host b received {received} of {sent} UDP datagrams"
    );
    let pps = (received - 1) as f64 / window.as_secs_f64();
    Ok(FloodPoint {
        frame_bytes: frame,
        pps,
        bytes_per_sec: pps * frame as f64,
        gbit_per_sec: pps * frame as f64 * 8.0 / 1e9,
        secs: window.as_secs_f64(),
        sent,
        received,
    })
}

/// `count` round trips of one `frame`-byte datagram, both ends polling non-blocking
/// sockets the way the bench's xroce threads poll their queues (spin, then yield).
pub(crate) fn udp_pingpong(ends: Ends<'_>, frame: usize, count: usize) -> Result<PingPoint> {
    ensure!(
        frame >= UDP_HEADERS + 8,
        "a {frame}-byte frame has no room for the 8-byte sequence number"
    );
    let payload = frame - UDP_HEADERS;
    let warmup = (count / 10).clamp(1, 2000);
    let ready = Barrier::new(2);
    let stop = AtomicBool::new(false);
    let (rtts, answered) = std::thread::scope(|s| {
        let responder = s.spawn(|| -> Result<u64> {
            let socket = (|| -> Result<UdpSocket> {
                netns::enter(&ends.lab.b.netns)?;
                place(ends.b_core);
                let socket = UdpSocket::bind(ends.b_addr(PING_PORT))?;
                socket.set_nonblocking(true)?;
                Ok(socket)
            })();
            ready.wait();
            let socket = socket?;
            let mut buf = vec![0u8; 65536];
            let mut idle = Idle::new(ends.spin, Then::Yield);
            let mut answered = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match socket.recv_from(&mut buf) {
                    Ok((n, from)) => {
                        idle.progress();
                        socket.send_to(&buf[..n], from)?;
                        answered += 1;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        // A quiet peer is not an error here: the initiator decides.
                        if idle.idle(&|| "a UDP ping".into()).is_err() {
                            idle.progress();
                        }
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(answered)
        });
        let initiator = s.spawn(|| -> Result<Vec<Duration>> {
            let result = (|| -> Result<Vec<Duration>> {
                let socket = (|| -> Result<UdpSocket> {
                    netns::enter(&ends.lab.a.netns)?;
                    place(ends.a_core);
                    let socket = UdpSocket::bind(ends.a_addr(0))?;
                    socket.connect(ends.b_addr(PING_PORT))?;
                    socket.set_nonblocking(true)?;
                    Ok(socket)
                })();
                ready.wait();
                let socket = socket?;
                let mut data = vec![0u8; payload];
                let mut buf = vec![0u8; 65536];
                let mut idle = Idle::new(ends.spin, Then::Yield);
                let mut rtts = Vec::with_capacity(count);
                let mut seq = 0u64;
                let mut lost = 0u32;
                while rtts.len() < count {
                    seq += 1;
                    data[..8].copy_from_slice(&seq.to_be_bytes());
                    let t = Instant::now();
                    socket.send(&data)?;
                    let answered = loop {
                        match socket.recv(&mut buf) {
                            Ok(n) if n >= 8 && buf[..8] == seq.to_be_bytes() => break true,
                            Ok(_) => {}
                            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                                if t.elapsed() > Duration::from_millis(200) {
                                    break false;
                                }
                                idle.idle(&|| "a UDP pong".into())?;
                            }
                            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                                if t.elapsed() > Duration::from_millis(200) {
                                    break false;
                                }
                            }
                            Err(e) => return Err(e.into()),
                        }
                    };
                    let rtt = t.elapsed();
                    idle.progress();
                    if !answered {
                        lost += 1;
                        ensure!(lost < 100, "100 UDP pings went unanswered");
                        continue;
                    }
                    if seq as usize > warmup {
                        rtts.push(rtt);
                    }
                }
                Ok(rtts)
            })();
            stop.store(true, Ordering::Relaxed);
            result
        });
        (initiator.join(), responder.join())
    });
    let mut rtts = rtts.map_err(|_| anyhow::anyhow!("the UDP initiator panicked"))??;
    answered.map_err(|_| anyhow::anyhow!("the UDP responder panicked"))??;
    ensure!(!rtts.is_empty(), "no UDP round trip measured");
    rtts.sort_unstable();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let pct = |p: f64| rtts[((rtts.len() as f64 * p).ceil() as usize).clamp(1, rtts.len()) - 1];
    Ok(PingPoint {
        frame_bytes: frame,
        round_trips: rtts.len(),
        min_us: us(rtts[0]),
        median_us: us(pct(0.5)),
        p99_us: us(pct(0.99)),
        p999_us: us(pct(0.999)),
        max_us: us(rtts[rtts.len() - 1]),
    })
}

/// Host a writes a TCP stream to host b for `secs`; the rate is what host b reads.
pub(crate) fn tcp_stream(ends: Ends<'_>, secs: f64) -> Result<TcpPoint> {
    let duration = Duration::from_secs_f64(secs);
    let listening = Barrier::new(2);
    let (tx, rx) = std::thread::scope(|s| {
        let rx = s.spawn(|| -> Result<(u64, Duration)> {
            let listener = (|| -> Result<TcpListener> {
                netns::enter(&ends.lab.b.netns)?;
                place(ends.b_core);
                Ok(TcpListener::bind(ends.b_addr(TCP_PORT))?)
            })();
            listening.wait();
            let listener = listener?;
            // Never wait forever for a sender that failed before connecting.
            listener.set_nonblocking(true)?;
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut stream = loop {
                match listener.accept() {
                    Ok((stream, _)) => break stream,
                    Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err(e) => return Err(e).context("accepting the TCP stream"),
                }
            };
            stream.set_nonblocking(false)?;
            stream.set_read_timeout(Some(Duration::from_secs(10)))?;
            let mut buf = vec![0u8; 1 << 20];
            let (mut bytes, mut first, mut last) = (0u64, None::<Instant>, None::<Instant>);
            loop {
                let n = stream.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                let now = Instant::now();
                if first.is_none() {
                    first = Some(now);
                } else {
                    bytes += n as u64;
                }
                last = Some(now);
            }
            let window = match (first, last) {
                (Some(f), Some(l)) => l - f,
                _ => Duration::ZERO,
            };
            Ok((bytes, window))
        });
        let tx = s.spawn(|| -> Result<()> {
            let entered = (|| -> Result<()> {
                netns::enter(&ends.lab.a.netns)?;
                place(ends.a_core);
                Ok(())
            })();
            listening.wait();
            entered?;
            let mut stream =
                TcpStream::connect(ends.b_addr(TCP_PORT)).context("connecting the TCP stream")?;
            let data = vec![0xa5u8; TCP_WRITE];
            let start = Instant::now();
            while start.elapsed() < duration {
                stream.write_all(&data)?;
                if xroce_lab::signals::interrupted() {
                    bail!("interrupted");
                }
            }
            Ok(())
        });
        (tx.join(), rx.join())
    });
    tx.map_err(|_| anyhow::anyhow!("the TCP sender panicked"))??;
    let (bytes, window) = rx.map_err(|_| anyhow::anyhow!("the TCP receiver panicked"))??;
    ensure!(bytes > 0 && !window.is_zero(), "no TCP data measured");
    let bytes_per_sec = bytes as f64 / window.as_secs_f64();
    Ok(TcpPoint {
        write_bytes: TCP_WRITE,
        secs: window.as_secs_f64(),
        bytes_per_sec,
        gbit_per_sec: bytes_per_sec * 8.0 / 1e9,
    })
}
