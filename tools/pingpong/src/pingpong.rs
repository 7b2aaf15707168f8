//! The ping-pong itself: the same verbs calls, in the same order, with the same attributes
//! as rdma-core's `ibv_rc_pingpong`, `ibv_uc_pingpong` and `ibv_ud_pingpong`, over xroce's
//! Rust verbs ([`verbs_shm::client`]).
//!
//! Both sides post `rx_depth` receives into one buffer. The client sends first; each side
//! sends its next message once its previous send has completed and a message has arrived,
//! `iters` times. The server answers with the very buffer it received into, so the data
//! comes back unchanged. A UD receive buffer starts with the 40 bytes of the GRH and the
//! message is sent from behind them.

use std::io::{self, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use verbs_shm::client::{
    Access, AhAttr, CompChannel, Context, Cq, Mr, Qp, QpAttr, QpCaps, QpInit, QpType, RecvWr,
    SendOp, SendWr, Sge, UdTarget, WorkCompletion,
};

use crate::oob::{self, Dest, OobError};

/// `wr_id` of receives.
const RECV_WRID: u64 = 1;
/// `wr_id` of sends.
const SEND_WRID: u64 = 2;
/// The Q_Key `ibv_ud_pingpong` uses.
pub const UD_QKEY: u32 = 0x1111_1111;
/// The bytes of the GRH in front of every UD receive.
const GRH: usize = 40;
/// The byte the examples fill their buffer with.
pub const FILL: u8 = 0x7b;
/// The page size the examples' `-c` marks (the first byte of every page).
const PAGE: usize = 4096;

use verbs_shm::client::{AttrMask, QpState};

/// The transport service, as the three example programs differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// `ibv_rc_pingpong`.
    Rc,
    /// `ibv_uc_pingpong`.
    Uc,
    /// `ibv_ud_pingpong`.
    Ud,
}

impl Service {
    fn qp_type(self) -> QpType {
        match self {
            Service::Rc => QpType::Rc,
            Service::Uc => QpType::Uc,
            Service::Ud => QpType::Ud,
        }
    }

    /// The message size the example uses without `-s`.
    pub fn default_size(self) -> u32 {
        match self {
            Service::Rc | Service::Uc => 4096,
            Service::Ud => 1024,
        }
    }
}

/// What data to check in every message received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verify {
    /// Nothing (as the examples).
    Off,
    /// Message `k` is [`pattern`]`(k)`: the client sends it from a buffer of its own and
    /// checks that the echo is identical; the server checks what it receives.
    Pattern,
    /// Every byte of every message is this one (what the examples send: `0x7b`).
    Fill(u8),
}

/// How to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// The server to connect to; `None` makes this side the server.
    pub server: Option<String>,
    /// The TCP port of the exchange.
    pub port: u16,
    /// The device (`None`: the first one).
    pub device: Option<String>,
    /// The port number of the device.
    pub ib_port: u8,
    /// The message size (`None`: the service's default).
    pub size: Option<u32>,
    /// The path MTU in bytes (RC and UC).
    pub mtu: u32,
    /// Receives posted at a time.
    pub rx_depth: u32,
    /// Messages each way.
    pub iters: u32,
    /// Service level.
    pub sl: u8,
    /// Sleep on completion events instead of polling.
    pub events: bool,
    /// The GID index (`None`: exchange a zero GID, as the examples without `-g`).
    pub gid_index: Option<u8>,
    /// `-c`: mark the first byte of every page and check the marks at the end.
    pub check_pages: bool,
    /// The transport service.
    pub service: Service,
    /// Data checks on every message.
    pub verify: Verify,
    /// Give up when the ping-pong takes longer than this.
    pub timeout: Option<Duration>,
    /// Retry connecting to the server (refused connections) for this long.
    pub connect_timeout: Option<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            server: None,
            port: 18515,
            device: None,
            ib_port: 1,
            size: None,
            mtu: 1024,
            rx_depth: 500,
            iters: 1000,
            sl: 0,
            events: false,
            gid_index: None,
            check_pages: false,
            service: Service::Rc,
            verify: Verify::Off,
            timeout: None,
            connect_timeout: None,
        }
    }
}

/// What went wrong, in the examples' words where they have some.
#[derive(Debug, thiserror::Error)]
pub enum PingpongError {
    /// An option that cannot work.
    #[error("{0}")]
    Usage(String),
    /// A verbs call failed.
    #[error("{what}: {source}")]
    Verbs {
        /// What the program was doing (the example's message).
        what: &'static str,
        /// The library's error.
        source: verbs_shm::client::Error,
    },
    /// The out-of-band exchange failed.
    #[error(transparent)]
    Oob(#[from] OobError),
    /// Connecting or listening failed.
    #[error("{what}: {source}")]
    Io {
        /// What the program was doing.
        what: String,
        /// The error.
        source: io::Error,
    },
    /// A work completion with an error status.
    #[error("Failed status {} ({status}) for wr_id {wr_id}", status_str(*status))]
    Completion {
        /// `ibv_wc_status`.
        status: u32,
        /// The work request.
        wr_id: u64,
    },
    /// A completion for a work request this program never posted.
    #[error("Completion for unknown wr_id {0}")]
    UnknownWrId(u64),
    /// A message arrived with other data than expected.
    #[error(
        "message {message}: byte {offset} is {got:#04x}, expected {expected:#04x} ({len} bytes received)"
    )]
    Data {
        /// The message number (0 = first).
        message: u32,
        /// The first differing byte.
        offset: usize,
        /// What arrived.
        got: u8,
        /// What should have.
        expected: u8,
        /// The completion's length.
        len: u32,
    },
    /// `-c` found a page mark changed.
    #[error("invalid data in page {0}")]
    Page(usize),
    /// The ping-pong did not finish in time.
    #[error("timed out after {sent} sends and {received} receives of {iters}")]
    Timeout {
        /// Sends completed.
        sent: u32,
        /// Receives completed.
        received: u32,
        /// Iterations wanted.
        iters: u32,
    },
}

fn verbs(what: &'static str) -> impl FnOnce(verbs_shm::client::Error) -> PingpongError {
    move |source| PingpongError::Verbs { what, source }
}

/// `ibv_wc_status_str`.
pub fn status_str(status: u32) -> &'static str {
    const NAMES: [&str; 24] = [
        "success",
        "local length error",
        "local QP operation error",
        "local EE context operation error",
        "local protection error",
        "Work Request Flushed Error",
        "memory management operation error",
        "bad response error",
        "local access error",
        "remote invalid request error",
        "remote access error",
        "remote operation error",
        "transport retry counter exceeded",
        "RNR retry counter exceeded",
        "local RDD violation error",
        "remote invalid RD request",
        "aborted error",
        "invalid EE context number",
        "invalid EE context state",
        "fatal error",
        "response timeout error",
        "general error",
        "TM error",
        "TM software rendezvous",
    ];
    NAMES.get(status as usize).copied().unwrap_or("unknown")
}

/// The data of message `k` in [`Verify::Pattern`] mode: different for every message and
/// every byte position within 251 bytes, so lost, repeated or misplaced segments show.
pub fn pattern(k: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i % 251) as u32 + k.wrapping_mul(7) + 1) as u8)
        .collect()
}

/// The figures the examples print at the end.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Report {
    /// `size * iters * 2`.
    pub bytes: u64,
    /// Iterations.
    pub iters: u32,
    /// Wall time of the ping-pong, in microseconds.
    pub usec: f64,
}

impl Report {
    /// Megabits per second, as printed.
    pub fn mbit_per_sec(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.usec
    }

    /// Microseconds per iteration, as printed.
    pub fn usec_per_iter(&self) -> f64 {
        self.usec / f64::from(self.iters)
    }

    /// The two result lines of the examples.
    pub fn lines(&self) -> String {
        format!(
            "{} bytes in {:.2} seconds = {:.2} Mbit/sec\n{} iters in {:.2} seconds = {:.2} usec/iter\n",
            self.bytes,
            self.usec / 1e6,
            self.mbit_per_sec(),
            self.iters,
            self.usec / 1e6,
            self.usec_per_iter()
        )
    }
}

/// `pp_mtu_to_enum`: a path MTU in bytes as `ibv_mtu`.
pub fn mtu_enum(bytes: u32) -> Option<u32> {
    match bytes {
        256 => Some(1),
        512 => Some(2),
        1024 => Some(3),
        2048 => Some(4),
        4096 => Some(5),
        _ => None,
    }
}

/// Where the data lives in the one registered buffer.
#[derive(Clone, Copy, Debug)]
struct Layout {
    /// Receives land here (`recv_len` bytes; UD: GRH first).
    recv_len: usize,
    /// Sends start here.
    send_at: usize,
    /// The whole buffer.
    len: usize,
}

impl Layout {
    fn new(service: Service, size: usize, separate_send: bool) -> Layout {
        let grh = if service == Service::Ud { GRH } else { 0 };
        let recv_len = size + grh;
        if separate_send {
            Layout {
                recv_len,
                send_at: recv_len + grh,
                len: 2 * recv_len,
            }
        } else {
            Layout {
                recv_len,
                send_at: grh,
                len: recv_len,
            }
        }
    }
}

enum Role<'a> {
    Client(&'a str),
    Server(TcpListener),
}

struct Pingpong<'a> {
    opts: &'a Options,
    size: usize,
    layout: Layout,
    mr: Mr,
    cq: Cq,
    channel: Option<CompChannel>,
    qp: Qp,
    ah: Option<verbs_shm::client::Ah>,
    pd: verbs_shm::client::Pd,
    inline: bool,
    remote_qpn: u32,
}

/// Runs one side of the ping-pong; writes the lines the example prints to `out`.
pub fn run(opts: &Options, out: &mut dyn Write) -> Result<Report, PingpongError> {
    let size = opts.size.unwrap_or(opts.service.default_size()) as usize;
    if size == 0 {
        return Err(PingpongError::Usage(
            "the message size must be at least 1".into(),
        ));
    }
    let mtu = mtu_enum(opts.mtu).ok_or_else(|| {
        PingpongError::Usage(format!(
            "path MTU {} is not one of 256, 512, 1024, 2048, 4096",
            opts.mtu
        ))
    })?;
    if opts.rx_depth < 2 {
        return Err(PingpongError::Usage("rx-depth must be at least 2".into()));
    }
    let ctx = match &opts.device {
        Some(name) => Context::open(name),
        None => Context::open_default(),
    }
    .map_err(verbs("Couldn't get context"))?;
    let port = ctx
        .query_port()
        .map_err(verbs("Unable to query port info"))?;
    if opts.service == Service::Ud {
        let port_mtu = 1usize << (port.active_mtu + 7);
        if size > port_mtu {
            return Err(PingpongError::Usage(format!(
                "Requested size larger than port MTU ({port_mtu})"
            )));
        }
    }
    let mut pp = Pingpong::create(opts, &ctx, size)?;
    let mut routs = pp.post_recv(opts.rx_depth);
    if routs < opts.rx_depth {
        return Err(PingpongError::Usage(format!(
            "Couldn't post receive ({routs})"
        )));
    }
    if opts.events {
        pp.cq.req_notify(false);
    }

    let gid = match opts.gid_index {
        Some(i) => *port
            .gids
            .get(usize::from(i))
            .ok_or_else(|| PingpongError::Usage(format!("can't read sgid of index {i}")))?,
        None => [0; 16],
    };
    let mine = Dest {
        lid: 0,
        qpn: pp.qp.qpn(),
        psn: rand::random::<u32>() & 0xff_ffff,
        gid,
    };
    // The server listens before it says where it is, so that whoever reads its output
    // knows it can connect.
    let role = match &opts.server {
        None => Role::Server(listen(opts.port)?),
        Some(server) => Role::Client(server),
    };
    let sep = if opts.service == Service::Ud {
        ":"
    } else {
        ","
    };
    let _ = writeln!(
        out,
        "  local address:  LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}{sep} GID {}",
        mine.lid,
        mine.qpn,
        mine.psn,
        mine.gid_text()
    );
    let _ = out.flush();

    let remote = match role {
        Role::Client(server) => {
            let mut stream = connect(server, opts.port, opts.connect_timeout)?;
            stream
                .set_read_timeout(opts.timeout)
                .map_err(|source| PingpongError::Io {
                    what: "setting a read timeout".into(),
                    source,
                })?;
            oob::client_exchange(&mut stream, &mine)?
        }
        Role::Server(listener) => {
            let (mut stream, _) = listener.accept().map_err(|source| PingpongError::Io {
                what: "accept() failed".into(),
                source,
            })?;
            drop(listener);
            stream
                .set_read_timeout(opts.timeout)
                .map_err(|source| PingpongError::Io {
                    what: "setting a read timeout".into(),
                    source,
                })?;
            oob::server_exchange(&mut stream, &mine, |peer| pp.connect(mtu, mine.psn, peer))??
        }
    };
    let _ = writeln!(
        out,
        "  remote address: LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
        remote.lid,
        remote.qpn,
        remote.psn,
        remote.gid_text()
    );
    let _ = out.flush();
    let client = opts.server.is_some();
    if client {
        pp.connect(mtu, mine.psn, &remote)?;
    }
    pp.remote_qpn = remote.qpn;

    let iters = opts.iters;
    let start = Instant::now();
    let deadline = opts.timeout.map(|t| start + t);
    let mut pending = RECV_WRID;
    let (mut sent, mut received) = (0u32, 0u32);
    if client {
        if opts.check_pages {
            for page in (0..size).step_by(PAGE) {
                pp.write(pp.layout.send_at + page, &[0]);
            }
        }
        pp.post_send(0)?;
        pending |= SEND_WRID;
    }
    let mut wc = [WorkCompletion::default(); 2];
    let mut idle = 0u32;
    while received < iters || sent < iters {
        let n = if opts.events {
            if !pp.wait_event(deadline)? {
                return Err(PingpongError::Timeout {
                    sent,
                    received,
                    iters,
                });
            }
            pp.cq.req_notify(false);
            pp.cq.poll(&mut wc).map_err(verbs("poll CQ failed"))?
        } else {
            pp.cq.poll(&mut wc).map_err(verbs("poll CQ failed"))?
        };
        if n == 0 {
            idle = idle.saturating_add(1);
            // Spin briefly, then let the daemon and other work run: a spinning poller
            // and a spinning application on one core turn microseconds into milliseconds.
            if idle > 20_000 {
                std::thread::sleep(Duration::from_micros(50));
            } else if idle > 200 {
                std::thread::yield_now();
            }
            if let Some(d) = deadline
                && Instant::now() > d
            {
                return Err(PingpongError::Timeout {
                    sent,
                    received,
                    iters,
                });
            }
            continue;
        }
        idle = 0;
        for c in &wc[..n] {
            if c.status != 0 {
                return Err(PingpongError::Completion {
                    status: c.status,
                    wr_id: c.wr_id,
                });
            }
            match c.wr_id {
                SEND_WRID => sent += 1,
                RECV_WRID => {
                    routs -= 1;
                    if routs <= 1 {
                        routs += pp.post_recv(opts.rx_depth - routs);
                        if routs < opts.rx_depth {
                            return Err(PingpongError::Usage(format!(
                                "Couldn't post receive ({routs})"
                            )));
                        }
                    }
                    pp.check(received, c.byte_len)?;
                    received += 1;
                }
                other => return Err(PingpongError::UnknownWrId(other)),
            }
            pending &= !c.wr_id;
            if sent < iters && pending == 0 {
                pp.post_send(sent)?;
                pending = RECV_WRID | SEND_WRID;
            }
        }
    }
    let usec = start.elapsed().as_secs_f64() * 1e6;
    let report = Report {
        bytes: size as u64 * u64::from(iters) * 2,
        iters,
        usec,
    };
    let _ = write!(out, "{}", report.lines());
    let _ = out.flush();
    if opts.check_pages {
        for (n, page) in (0..size).step_by(PAGE).enumerate() {
            let mut b = [0u8];
            pp.mr.read(pp.layout.send_at + page, &mut b);
            if b[0] != 0 {
                let _ = writeln!(out, "invalid data in page {n}");
                return Err(PingpongError::Page(n));
            }
        }
    }
    Ok(report)
}

fn listen(port: u16) -> Result<TcpListener, PingpongError> {
    oob::listen(port).map_err(|source| PingpongError::Io {
        what: format!("Couldn't listen to port {port}"),
        source,
    })
}

fn connect(
    server: &str,
    port: u16,
    retry_for: Option<Duration>,
) -> Result<TcpStream, PingpongError> {
    oob::connect(server, port, retry_for).map_err(|source| PingpongError::Io {
        what: format!("Couldn't connect to {server}:{port}"),
        source,
    })
}

impl<'a> Pingpong<'a> {
    /// `pp_init_ctx`: buffer, PD, MR, CQ, QP, INIT.
    fn create(opts: &'a Options, ctx: &Context, size: usize) -> Result<Self, PingpongError> {
        // A verifying client sends from a buffer of its own, so that the echo it receives
        // cannot be mistaken for what it sent; a server always echoes its receive buffer.
        let separate = opts.verify == Verify::Pattern && opts.server.is_some();
        let layout = Layout::new(opts.service, size, separate);
        let channel = if opts.events {
            Some(
                ctx.create_comp_channel()
                    .map_err(verbs("Couldn't create completion channel"))?,
            )
        } else {
            None
        };
        let pd = ctx.alloc_pd().map_err(verbs("Couldn't allocate PD"))?;
        let mr = pd
            .alloc_mr(layout.len, Access::LOCAL_WRITE)
            .map_err(verbs("Couldn't register MR"))?;
        // The examples fill their buffer with 0x7b.
        mr.write(0, &vec![FILL; layout.len]);
        let cq = ctx
            .create_cq(opts.rx_depth + 1, channel.as_ref())
            .map_err(verbs("Couldn't create CQ"))?;
        let mut init = QpInit::new(opts.service.qp_type(), &cq, &cq);
        init.caps = QpCaps {
            max_send_wr: 1,
            max_recv_wr: opts.rx_depth,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let qp = pd.create_qp(&init).map_err(verbs("Couldn't create QP"))?;
        // The examples send inline when the QP they got allows it.
        let inline = qp.caps().max_inline_data as usize >= size;
        let mut attr = QpAttr {
            qp_state: QpState::Init.raw(),
            pkey_index: 0,
            port_num: opts.ib_port,
            ..QpAttr::default()
        };
        let mask = if opts.service == Service::Ud {
            attr.qkey = UD_QKEY;
            AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::QKEY
        } else {
            AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS
        };
        qp.modify(&attr, mask)
            .map_err(verbs("Failed to modify QP to INIT"))?;
        Ok(Pingpong {
            opts,
            size,
            layout,
            mr,
            cq,
            channel,
            qp,
            ah: None,
            pd,
            inline,
            remote_qpn: 0,
        })
    }

    fn av(&self, dest: &Dest) -> AhAttr {
        let mut av = AhAttr {
            sl: self.opts.sl,
            port_num: self.opts.ib_port,
            ..AhAttr::default()
        };
        if dest.has_gid() {
            av.is_global = true;
            av.hop_limit = 1;
            av.dgid = dest.gid;
            // Without -g the examples pass gidx -1, which the u8 field makes 255.
            av.sgid_index = self.opts.gid_index.unwrap_or(u8::MAX);
        }
        av
    }

    /// `pp_connect_ctx`: RTR and RTS (and the address handle for UD).
    fn connect(&mut self, mtu: u32, my_psn: u32, dest: &Dest) -> Result<(), PingpongError> {
        let mut attr = QpAttr {
            qp_state: QpState::Rtr.raw(),
            ..QpAttr::default()
        };
        match self.opts.service {
            Service::Ud => {
                self.qp
                    .modify(&attr, AttrMask::STATE)
                    .map_err(verbs("Failed to modify QP to RTR"))?;
                attr.qp_state = QpState::Rts.raw();
                attr.sq_psn = my_psn;
                self.qp
                    .modify(&attr, AttrMask::STATE | AttrMask::SQ_PSN)
                    .map_err(verbs("Failed to modify QP to RTS"))?;
                let ah = self
                    .pd
                    .create_ah(&self.av(dest))
                    .map_err(verbs("Failed to create AH"))?;
                self.ah = Some(ah);
            }
            Service::Rc | Service::Uc => {
                let rc = self.opts.service == Service::Rc;
                attr.path_mtu = mtu;
                attr.dest_qp_num = dest.qpn;
                attr.rq_psn = dest.psn;
                attr.ah_attr = self.av(dest);
                let mut m = AttrMask::STATE
                    | AttrMask::AV
                    | AttrMask::PATH_MTU
                    | AttrMask::DEST_QPN
                    | AttrMask::RQ_PSN;
                if rc {
                    attr.max_dest_rd_atomic = 1;
                    attr.min_rnr_timer = 12;
                    m |= AttrMask::MAX_DEST_RD_ATOMIC | AttrMask::MIN_RNR_TIMER;
                }
                self.qp
                    .modify(&attr, m)
                    .map_err(verbs("Failed to modify QP to RTR"))?;
                attr.qp_state = QpState::Rts.raw();
                attr.sq_psn = my_psn;
                let mut m = AttrMask::STATE | AttrMask::SQ_PSN;
                if rc {
                    attr.timeout = 14;
                    attr.retry_cnt = 7;
                    attr.rnr_retry = 7;
                    attr.max_rd_atomic = 1;
                    m |= AttrMask::TIMEOUT
                        | AttrMask::RETRY_CNT
                        | AttrMask::RNR_RETRY
                        | AttrMask::MAX_QP_RD_ATOMIC;
                }
                self.qp
                    .modify(&attr, m)
                    .map_err(verbs("Failed to modify QP to RTS"))?;
            }
        }
        Ok(())
    }

    fn write(&self, offset: usize, bytes: &[u8]) {
        self.mr.write(offset, bytes);
    }

    /// `pp_post_recv`: posts up to `n` receives; returns how many were posted.
    fn post_recv(&self, n: u32) -> u32 {
        let sge = [Sge {
            addr: self.mr.addr(),
            length: self.layout.recv_len as u32,
            lkey: self.mr.lkey(),
        }];
        let wr = RecvWr {
            wr_id: RECV_WRID,
            sges: &sge,
        };
        for i in 0..n {
            if self.qp.post_recv(&[wr]).is_err() {
                return i;
            }
        }
        n
    }

    /// `pp_post_send`: message `k`.
    fn post_send(&self, k: u32) -> Result<(), PingpongError> {
        let client = self.opts.server.is_some();
        if client && self.opts.verify == Verify::Pattern {
            self.write(self.layout.send_at, &pattern(k, self.size));
        }
        let sge = [Sge {
            addr: self.mr.addr() + self.layout.send_at as u64,
            length: self.size as u32,
            lkey: self.mr.lkey(),
        }];
        let mut wr = SendWr::new(SEND_WRID, SendOp::Send, &sge);
        let mut data = Vec::new();
        if self.inline {
            data.resize(self.size, 0);
            self.mr.read(self.layout.send_at, &mut data);
            wr.inline = Some(&data);
        }
        if let Some(ah) = &self.ah {
            wr.ud = Some(UdTarget {
                ah,
                qpn: self.remote_qpn,
                qkey: UD_QKEY,
            });
        }
        self.qp
            .post_send(&[wr])
            .map_err(|(_, e)| verbs("Couldn't post send")(e))
    }

    /// The data checks of [`Verify`] on received message `k`.
    fn check(&self, k: u32, len: u32) -> Result<(), PingpongError> {
        let expected = match self.opts.verify {
            Verify::Off => return Ok(()),
            Verify::Pattern => pattern(k, self.size),
            Verify::Fill(b) => vec![b; self.size],
        };
        let grh = self.layout.recv_len - self.size;
        let mut got = vec![0u8; self.size];
        self.mr.read(grh, &mut got);
        let wrong_len = len as usize != self.layout.recv_len && len as usize != self.size;
        let first = got.iter().zip(&expected).position(|(a, b)| a != b);
        match (first, wrong_len) {
            (None, false) => Ok(()),
            (first, _) => {
                let offset = first.unwrap_or(0);
                Err(PingpongError::Data {
                    message: k,
                    offset,
                    got: got[offset],
                    expected: expected[offset],
                    len,
                })
            }
        }
    }

    /// Waits for a completion event (`ibv_get_cq_event`); `false` when `deadline` passed
    /// first.
    fn wait_event(&self, deadline: Option<Instant>) -> Result<bool, PingpongError> {
        let Some(channel) = &self.channel else {
            return Ok(true);
        };
        loop {
            let ms = match deadline {
                None => -1,
                Some(d) => d
                    .saturating_duration_since(Instant::now())
                    .as_millis()
                    .min(i32::MAX as u128) as i32,
            };
            let fd = channel.fd();
            let mut fds = [nix::poll::PollFd::new(
                fd.as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            let timeout =
                nix::poll::PollTimeout::try_from(ms).unwrap_or(nix::poll::PollTimeout::NONE);
            match nix::poll::poll(&mut fds, timeout) {
                Ok(0) => return Ok(false),
                Ok(_) => break,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => {
                    return Err(PingpongError::Io {
                        what: "Failed to get cq_event".into(),
                        source: io::Error::from_raw_os_error(e as i32),
                    });
                }
            }
        }
        let cq = channel
            .get_event()
            .map_err(verbs("Failed to get cq_event"))?;
        if cq != self.cq.handle() {
            return Err(PingpongError::Usage(format!(
                "CQ event for unknown CQ {cq}"
            )));
        }
        Ok(true)
    }
}
