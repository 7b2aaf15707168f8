//! The client and server shared by the `rdma_write` and `rdma_read` examples: move a
//! file-sized buffer with one-sided RDMA, many work requests in flight, then prove the data
//! arrived whole by comparing SHA-256 digests over the TCP connection.
//!
//! The server is passive: it registers one region the client may write into (WRITE) or read
//! from (READ) and otherwise waits on TCP. The client moves the data in chunks, keeping
//! `--depth` work requests outstanding, and measures the time from the first post to the
//! last completion.
//!
//! The exchange is one line of text each way per step:
//!
//! ```text
//! client -> server  XFER1 <qpn> <psn> <gid> <addr> <rkey> <len>   (hex; len decimal)
//! server -> client  XFER1 <qpn> <psn> <gid> <addr> <rkey> <len>
//! client -> server  DONE
//! server -> client  SHA256 <digest of the server's buffer>
//! client -> server  OK | MISMATCH <digest of the client's buffer>
//! ```
//!
//! The side holding the data (the client of `rdma_write`, the server of `rdma_read`)
//! decides the length; the other side allocates as much. The client sends `addr 0 rkey 0`:
//! only the server's region is exposed to the peer.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv6Addr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use sha2::{Digest, Sha256};
use verbs_shm::client::{
    Access, AhAttr, Connection, Context, Cq, Mr, Qp, QpInit, QpType, SendOp, SendWr, Sge,
    WorkCompletion,
};
use xroce_pingpong::oob;

/// Which one-sided operation moves the data.
// Each example program uses one of the two.
#[allow(dead_code)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// The client RDMA WRITEs its buffer into the server's.
    Write,
    /// The client RDMA READs the server's buffer into its own.
    Read,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Write => "rdma_write",
            Op::Read => "rdma_read",
        }
    }

    /// Whether this side holds the data (and decides the length).
    fn is_source(self, client: bool) -> bool {
        client == (self == Op::Write)
    }
}

/// The command line of both examples.
#[derive(Debug, Parser)]
pub(crate) struct Args {
    /// Connect to the server at this host; without it, wait for a client.
    pub(crate) host: Option<String>,
    /// Listen on / connect to this TCP port.
    #[arg(short, long, default_value_t = 18516)]
    pub(crate) port: u16,
    /// Use this device (default: the first one).
    #[arg(short = 'd', long = "ib-dev")]
    pub(crate) ib_dev: Option<String>,
    /// Local GID index.
    #[arg(short, long = "gid-idx", default_value_t = 0)]
    pub(crate) gid_idx: u8,
    /// Bytes to move, when this side holds generated data (suffixes K, M, G: powers of 1024).
    #[arg(short, long, default_value = "64M", value_parser = parse_size)]
    pub(crate) size: u64,
    /// Move this file's contents instead of generated data (on the side holding the data:
    /// the client of rdma_write, the server of rdma_read).
    #[arg(long)]
    pub(crate) file: Option<PathBuf>,
    /// Write what arrived into this file (on the side receiving the data).
    #[arg(long)]
    pub(crate) output: Option<PathBuf>,
    /// Bytes per work request.
    #[arg(long, default_value = "64K", value_parser = parse_size)]
    pub(crate) chunk: u64,
    /// Work requests outstanding at once.
    #[arg(long, default_value_t = 32)]
    pub(crate) depth: u32,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 300.0)]
    pub(crate) timeout: f64,
    /// Keep retrying to connect to the server for this many seconds.
    #[arg(long = "connect-timeout", default_value_t = 0.0)]
    pub(crate) connect_timeout: f64,
}

/// `64M`, `4K`, `1G`, `1000`.
fn parse_size(s: &str) -> Result<u64, String> {
    let (digits, shift) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|e| format!("{s:?} is not a size: {e}"))?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("{s} is too large"))
}

/// What went wrong, with what the program was doing.
#[derive(Debug)]
struct Failure(String);

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn fail(what: impl std::fmt::Display) -> Failure {
    Failure(what.to_string())
}

fn ctx_err<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> Failure {
    move |e| Failure(format!("{what}: {e}"))
}

/// One side's address: what the first line carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Dest {
    qpn: u32,
    psn: u32,
    gid: [u8; 16],
    addr: u64,
    rkey: u32,
    len: u64,
}

impl Dest {
    fn line(&self) -> String {
        let gid: String = self.gid.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "XFER1 {:06x} {:06x} {gid} {:016x} {:08x} {}\n",
            self.qpn, self.psn, self.addr, self.rkey, self.len
        )
    }

    fn parse(line: &str) -> Result<Dest, Failure> {
        let bad = |why: &str| fail(format!("malformed address {:?}: {why}", line.trim_end()));
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 7 || f[0] != "XFER1" {
            return Err(bad("expected XFER1 and six fields"));
        }
        let hex = |s: &str, why| u64::from_str_radix(s, 16).map_err(|_| bad(why));
        let qpn = hex(f[1], "QPN")?;
        let psn = hex(f[2], "PSN")?;
        if qpn > 0xff_ffff || psn > 0xff_ffff {
            return Err(bad("QPN and PSN are 24 bits"));
        }
        if f[3].len() != 32 {
            return Err(bad("the GID is not 32 hex digits"));
        }
        let mut gid = [0u8; 16];
        for (i, b) in gid.iter_mut().enumerate() {
            *b = u8::from_str_radix(f[3].get(2 * i..2 * i + 2).ok_or_else(|| bad("GID"))?, 16)
                .map_err(|_| bad("the GID is not 32 hex digits"))?;
        }
        Ok(Dest {
            qpn: qpn as u32,
            psn: psn as u32,
            gid,
            addr: hex(f[4], "address")?,
            rkey: u32::try_from(hex(f[5], "rkey")?).map_err(|_| bad("rkey"))?,
            len: f[6].parse().map_err(|_| bad("length"))?,
        })
    }

    fn describe(&self) -> String {
        format!(
            "QPN 0x{:06x}, PSN 0x{:06x}, GID {}, addr 0x{:x}, rkey 0x{:08x}, len {}",
            self.qpn,
            self.psn,
            Ipv6Addr::from(self.gid),
            self.addr,
            self.rkey,
            self.len
        )
    }
}

/// The TCP side channel: lines out, lines in.
struct Channel {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Channel {
    fn new(stream: TcpStream, timeout: Duration) -> Result<Channel, Failure> {
        stream
            .set_read_timeout(Some(timeout))
            .map_err(ctx_err("setting a read timeout"))?;
        let writer = stream.try_clone().map_err(ctx_err("cloning the socket"))?;
        Ok(Channel {
            reader: BufReader::new(stream),
            writer,
        })
    }

    fn send(&mut self, line: &str) -> Result<(), Failure> {
        self.writer
            .write_all(line.as_bytes())
            .map_err(ctx_err("writing to the peer"))
    }

    fn receive(&mut self) -> Result<String, Failure> {
        let mut line = String::new();
        let n = self
            .reader
            .read_line(&mut line)
            .map_err(ctx_err("reading from the peer"))?;
        if n == 0 {
            return Err(fail("the peer closed the connection"));
        }
        Ok(line)
    }
}

/// How much memory is copied in and out of the region at a time.
const STEP: usize = 1 << 20;

/// Fills `mr` with the contents of `file` (exactly `mr.len()` bytes).
fn fill_from_file(mr: &Mr, file: &mut File) -> Result<(), Failure> {
    let mut buf = vec![0u8; STEP];
    let mut at = 0;
    while at < mr.len() {
        let n = (mr.len() - at).min(STEP);
        file.read_exact(&mut buf[..n])
            .map_err(ctx_err("reading the file"))?;
        mr.write(at, &buf[..n]);
        at += n;
    }
    Ok(())
}

/// Fills `mr` with pseudo-random bytes (xorshift64*, seeded per run), so that a chunk lost,
/// repeated or misplaced cannot go unnoticed.
fn fill_generated(mr: &Mr, seed: u64) {
    let mut x = seed | 1;
    let mut buf = vec![0u8; STEP];
    let mut at = 0;
    while at < mr.len() {
        let n = (mr.len() - at).min(STEP);
        for word in buf.chunks_mut(8) {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let v = x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
            word.copy_from_slice(&v[..word.len()]);
        }
        mr.write(at, &buf[..n]);
        at += n;
    }
}

/// The SHA-256 of the region, and (optionally) its bytes written to `output`.
fn digest(mr: &Mr, mut output: Option<&mut File>) -> Result<String, Failure> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; STEP];
    let mut at = 0;
    while at < mr.len() {
        let n = (mr.len() - at).min(STEP);
        mr.read(at, &mut buf[..n]);
        h.update(&buf[..n]);
        if let Some(f) = output.as_deref_mut() {
            f.write_all(&buf[..n])
                .map_err(ctx_err("writing the output file"))?;
        }
        at += n;
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Moves the QP from RESET to RTS, connected to `peer` (the attributes of
/// `ibv_rc_pingpong`, with room for many READs in flight).
fn connect_qp(
    qp: &Qp,
    ib_port: u8,
    gid_idx: u8,
    mtu: u32,
    rd_atomic: u8,
    my_psn: u32,
    peer: &Dest,
) -> Result<(), Failure> {
    let av = AhAttr {
        dgid: peer.gid,
        sgid_index: gid_idx,
        hop_limit: 64,
        is_global: true,
        port_num: ib_port,
        ..AhAttr::default()
    };
    let mut c = Connection::new(av, peer.qpn, my_psn, peer.psn);
    c.path_mtu = mtu;
    c.access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    c.rd_atomic = rd_atomic;
    qp.connect(&c)
        .map_err(|e| Failure(format!("Failed to modify QP to {}: {}", e.state, e.source)))
}

/// Posts every chunk, `depth` at a time, and waits for all their completions. Returns the
/// time from the first post to the last completion.
fn stream(
    op: Op,
    qp: &Qp,
    cq: &Cq,
    mr: &Mr,
    peer: &Dest,
    args: &Args,
    deadline: Instant,
) -> Result<Duration, Failure> {
    let (chunk, depth) = (args.chunk, args.depth);
    let len = mr.len() as u64;
    let chunks = len.div_ceil(chunk);
    let (mut posted, mut done) = (0u64, 0u64);
    let mut wc = [WorkCompletion::default(); 32];
    let mut idle = 0u32;
    let started = Instant::now();
    while done < chunks {
        // Top the send queue up to `depth` outstanding requests, in one post.
        let room = (u64::from(depth) - (posted - done)).min(chunks - posted);
        if room > 0 {
            let sges: Vec<[Sge; 1]> = (posted..posted + room)
                .map(|k| {
                    let off = k * chunk;
                    [Sge {
                        addr: mr.addr() + off,
                        length: (len - off).min(chunk) as u32,
                        lkey: mr.lkey(),
                    }]
                })
                .collect();
            let wrs: Vec<SendWr<'_>> = sges
                .iter()
                .enumerate()
                .map(|(i, sge)| {
                    let k = posted + i as u64;
                    let remote_addr = peer.addr + k * chunk;
                    let what = match op {
                        Op::Write => SendOp::Write {
                            remote_addr,
                            rkey: peer.rkey,
                        },
                        Op::Read => SendOp::Read {
                            remote_addr,
                            rkey: peer.rkey,
                        },
                    };
                    SendWr::new(k, what, sge)
                })
                .collect();
            qp.post_send(&wrs).map_err(|(i, e)| {
                fail(format!(
                    "Couldn't post work request {}: {e}",
                    posted + i as u64
                ))
            })?;
            posted += room;
        }
        let n = cq.poll(&mut wc).map_err(ctx_err("poll CQ failed"))?;
        for c in &wc[..n] {
            if c.status != 0 {
                return Err(fail(format!(
                    "Failed status {} ({}) for chunk {} after {done} of {chunks} chunks",
                    xroce_pingpong::pingpong::status_str(c.status),
                    c.status,
                    c.wr_id
                )));
            }
            done += 1;
        }
        if n == 0 {
            // Spin briefly, then let the daemon run: a spinning application and a spinning
            // poller on one core turn microseconds into milliseconds.
            idle = idle.saturating_add(1);
            if idle > 20_000 {
                std::thread::sleep(Duration::from_micros(50));
            } else if idle > 200 {
                std::thread::yield_now();
            }
            if Instant::now() > deadline {
                return Err(fail(format!(
                    "timed out after {done} of {chunks} chunks completed"
                )));
            }
        } else {
            idle = 0;
        }
    }
    Ok(started.elapsed())
}

/// Runs one side of `op` with `args`; prints progress and the verdict. Exits with status 1
/// when anything fails or the data differs.
pub(crate) fn main(op: Op) {
    let args = Args::parse();
    match run(op, &args) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("{}: {e}", op.name());
            std::process::exit(1);
        }
    }
}

fn run(op: Op, args: &Args) -> Result<(), Failure> {
    let client = args.host.is_some();
    let source = op.is_source(client);
    if args.chunk == 0 || args.chunk > 1 << 31 {
        return Err(fail("--chunk must be between 1 byte and 2 GiB"));
    }
    if args.depth == 0 {
        return Err(fail("--depth must be at least 1"));
    }
    if args.file.is_some() && !source {
        return Err(fail(format!(
            "--file belongs to the side holding the data (the {} of {}); use --output here",
            if op == Op::Write { "client" } else { "server" },
            op.name()
        )));
    }
    if args.output.is_some() && source {
        return Err(fail("--output belongs to the side receiving the data"));
    }
    let timeout = Duration::from_secs_f64(args.timeout.max(0.001));
    let deadline = Instant::now() + timeout;

    // The data, when this side holds it: a file's length or --size.
    let mut input = match &args.file {
        Some(path) => {
            Some(File::open(path).map_err(|e| fail(format!("opening {}: {e}", path.display())))?)
        }
        None => None,
    };
    let my_len = match &input {
        Some(f) => f
            .metadata()
            .map_err(ctx_err("reading the file's size"))?
            .len(),
        None if source => args.size,
        None => 0,
    };
    if source && my_len == 0 {
        return Err(fail("nothing to move: the size is 0"));
    }

    let ctx = match &args.ib_dev {
        Some(name) => Context::open(name),
        None => Context::open_default(),
    }
    .map_err(ctx_err("Couldn't get context"))?;
    let port = ctx
        .query_port()
        .map_err(ctx_err("Unable to query port info"))?;
    let gid = *port
        .gids
        .get(usize::from(args.gid_idx))
        .ok_or_else(|| fail(format!("no GID at index {}", args.gid_idx)))?;
    let device = ctx
        .query_device()
        .map_err(ctx_err("Couldn't query device"))?;
    let rd_atomic = device.max_qp_rd_atom.clamp(1, 255) as u8;
    let pd = ctx.alloc_pd().map_err(ctx_err("Couldn't allocate PD"))?;
    let cq = ctx
        .create_cq(args.depth.max(1) * 2, None)
        .map_err(ctx_err("Couldn't create CQ"))?;
    let mut init = QpInit::new(QpType::Rc, &cq, &cq);
    init.caps.max_send_wr = args.depth;
    init.caps.max_recv_wr = 1;
    init.sq_sig_all = true;
    let qp = pd.create_qp(&init).map_err(ctx_err("Couldn't create QP"))?;
    let my_psn = rand::random::<u32>() & 0xff_ffff;

    // The side channel; the server learns the client's length before registering.
    let mut chan = if let Some(host) = &args.host {
        let retry =
            (args.connect_timeout > 0.0).then(|| Duration::from_secs_f64(args.connect_timeout));
        let s = oob::connect(host, args.port, retry)
            .map_err(|e| fail(format!("Couldn't connect to {host}:{}: {e}", args.port)))?;
        Channel::new(s, timeout)?
    } else {
        let listener = oob::listen(args.port)
            .map_err(|e| fail(format!("Couldn't listen to port {}: {e}", args.port)))?;
        println!(
            "{}: waiting for a client on TCP port {}",
            op.name(),
            args.port
        );
        let _ = io::stdout().flush();
        let (s, _) = listener.accept().map_err(ctx_err("accept() failed"))?;
        Channel::new(s, timeout)?
    };

    let (mr, mine, peer) = if client {
        // The client's region is local only: it needs no rkey on the wire.
        let access = Access::LOCAL_WRITE;
        let mut mine = Dest {
            qpn: qp.qpn(),
            psn: my_psn,
            gid,
            addr: 0,
            rkey: 0,
            len: my_len,
        };
        if source {
            let mr = pd
                .alloc_mr(my_len as usize, access)
                .map_err(ctx_err("Couldn't register MR"))?;
            chan.send(&mine.line())?;
            let peer = Dest::parse(&chan.receive()?)?;
            if peer.len != my_len {
                return Err(fail(format!(
                    "the server offers {} bytes, not {my_len}",
                    peer.len
                )));
            }
            (mr, mine, peer)
        } else {
            chan.send(&mine.line())?;
            let peer = Dest::parse(&chan.receive()?)?;
            if peer.len == 0 {
                return Err(fail("the server has nothing to read"));
            }
            mine.len = peer.len;
            let mr = pd
                .alloc_mr(peer.len as usize, access)
                .map_err(ctx_err("Couldn't register MR"))?;
            (mr, mine, peer)
        }
    } else {
        let peer = Dest::parse(&chan.receive()?)?;
        let len = if source { my_len } else { peer.len };
        if len == 0 {
            return Err(fail("the client announced nothing to write"));
        }
        let access = match op {
            Op::Write => Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            Op::Read => Access::REMOTE_READ,
        };
        let mr = pd
            .alloc_mr(len as usize, access)
            .map_err(ctx_err("Couldn't register MR"))?;
        let mine = Dest {
            qpn: qp.qpn(),
            psn: my_psn,
            gid,
            addr: mr.addr(),
            rkey: mr.rkey(),
            len,
        };
        (mr, mine, peer)
    };
    println!("  local address:  {}", mine.describe());
    let _ = io::stdout().flush();

    // Fill the source before the peer can touch it.
    if source {
        match input.as_mut() {
            Some(f) => fill_from_file(&mr, f)?,
            None => fill_generated(&mr, rand::random()),
        }
    }
    connect_qp(
        &qp,
        1,
        args.gid_idx,
        port.active_mtu,
        rd_atomic,
        my_psn,
        &peer,
    )?;
    if !client {
        // Ready to be written or read: say where.
        chan.send(&mine.line())?;
    }
    println!("  remote address: {}", peer.describe());
    let _ = io::stdout().flush();

    let mut output = match &args.output {
        Some(path) => Some(
            File::create(path).map_err(|e| fail(format!("creating {}: {e}", path.display())))?,
        ),
        None => None,
    };
    let verdict = if client {
        let took = stream(op, &qp, &cq, &mr, &peer, args, deadline)?;
        let bytes = mr.len() as u64;
        let secs = took.as_secs_f64().max(1e-9);
        println!(
            "{bytes} bytes in {secs:.3} seconds = {:.2} Mbit/sec ({} {} of up to {} bytes, {} outstanding)",
            bytes as f64 * 8.0 / secs / 1e6,
            bytes.div_ceil(args.chunk),
            match op {
                Op::Write => "WRITEs",
                Op::Read => "READs",
            },
            args.chunk,
            args.depth
        );
        chan.send("DONE\n")?;
        let mine = digest(&mr, output.as_mut())?;
        let line = chan.receive()?;
        let theirs = line
            .strip_prefix("SHA256 ")
            .map(str::trim)
            .ok_or_else(|| {
                fail(format!(
                    "expected the server's digest, got {:?}",
                    line.trim_end()
                ))
            })?
            .to_owned();
        println!("sha256 {mine}");
        let same = mine == theirs;
        chan.send(&if same {
            "OK\n".to_owned()
        } else {
            format!("MISMATCH {mine}\n")
        })?;
        (same, theirs)
    } else {
        let line = chan.receive()?;
        if line.trim_end() != "DONE" {
            return Err(fail(format!("expected DONE, got {:?}", line.trim_end())));
        }
        let mine = digest(&mr, output.as_mut())?;
        chan.send(&format!("SHA256 {mine}\n"))?;
        println!("sha256 {mine}");
        let line = chan.receive()?;
        match line.trim_end() {
            "OK" => (true, mine),
            other => (
                false,
                other.strip_prefix("MISMATCH ").unwrap_or(other).to_owned(),
            ),
        }
    };
    match verdict {
        (true, _) => {
            println!(
                "data verified: {} bytes, SHA-256 identical on both sides",
                mr.len()
            );
            Ok(())
        }
        (false, theirs) => Err(fail(format!(
            "DATA MISMATCH: the peer's SHA-256 is {theirs}"
        ))),
    }
}
