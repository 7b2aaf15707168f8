//! `xroce-pingpong`: ping-pong SEND messages with `ibv_rc_pingpong` (or `--uc`, `--ud`: the
//! UC and UD examples) over an xroce device.
//!
//! ```text
//! xroce-pingpong -g 0                       server: wait for a client
//! xroce-pingpong -g 0 -s 64 -n 100 HOST     client
//! ```
//!
//! The options are the examples' (`-p -d -i -s -m -r -n -l -e -g -c`); `--verify`,
//! `--verify-fill`, `--timeout` and `--connect-timeout` are additions.

use std::time::Duration;

use clap::Parser;
use xroce_pingpong::{Options, Service, Verify};

#[derive(Debug, Parser)]
#[command(
    name = "xroce-pingpong",
    version,
    about = "ibv_rc_pingpong (and the UC/UD variants) over xroce, wire-compatible with the originals"
)]
struct Args {
    /// Connect to the server at this host; without it, wait for a client.
    server: Option<String>,
    /// Listen on / connect to this TCP port.
    #[arg(short, long, default_value_t = 18515)]
    port: u16,
    /// Use this device (default: the first one).
    #[arg(short = 'd', long = "ib-dev")]
    ib_dev: Option<String>,
    /// Use this port of the device.
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    ib_port: u8,
    /// Size of the messages (default 4096; UD 1024).
    #[arg(short, long)]
    size: Option<u32>,
    /// Path MTU in bytes.
    #[arg(short, long, default_value_t = 1024)]
    mtu: u32,
    /// Receives to post at a time.
    #[arg(short, long = "rx-depth", default_value_t = 500)]
    rx_depth: u32,
    /// Messages to exchange.
    #[arg(short = 'n', long, default_value_t = 1000)]
    iters: u32,
    /// Service level.
    #[arg(short = 'l', long, default_value_t = 0)]
    sl: u8,
    /// Sleep on completion events instead of polling.
    #[arg(short, long)]
    events: bool,
    /// Local GID index (RoCE needs one).
    #[arg(short, long = "gid-idx")]
    gid_idx: Option<u8>,
    /// Mark the first byte of every page and check the marks at the end.
    #[arg(short = 'c', long = "chk")]
    chk: bool,
    /// Unreliable connected (ibv_uc_pingpong).
    #[arg(long, conflicts_with = "ud")]
    uc: bool,
    /// Unreliable datagram (ibv_ud_pingpong).
    #[arg(long)]
    ud: bool,
    /// Send a different pattern in every message and check every message received
    /// (both sides must be xroce-pingpong, or the server must echo like the examples).
    #[arg(long, conflicts_with = "verify_fill")]
    verify: bool,
    /// Check that every byte of every message received is this one (the examples send
    /// 0x7b).
    #[arg(long = "verify-fill", value_parser = parse_byte)]
    verify_fill: Option<u8>,
    /// Give up (exit status 1) when the exchange takes longer than this many seconds.
    #[arg(long)]
    timeout: Option<f64>,
    /// Keep retrying to connect to the server for this many seconds.
    #[arg(long = "connect-timeout")]
    connect_timeout: Option<f64>,
}

fn parse_byte(s: &str) -> Result<u8, String> {
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u8::from_str_radix(hex, 16),
        None => s.parse(),
    };
    v.map_err(|e| format!("{s:?} is not a byte: {e}"))
}

fn seconds(s: Option<f64>) -> Option<Duration> {
    s.filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64)
}

fn main() {
    let a = Args::parse();
    let opts = Options {
        server: a.server,
        port: a.port,
        device: a.ib_dev,
        ib_port: a.ib_port,
        size: a.size,
        mtu: a.mtu,
        rx_depth: a.rx_depth,
        iters: a.iters,
        sl: a.sl,
        events: a.events,
        gid_index: a.gid_idx,
        check_pages: a.chk,
        service: if a.ud {
            Service::Ud
        } else if a.uc {
            Service::Uc
        } else {
            Service::Rc
        },
        verify: match (a.verify, a.verify_fill) {
            (true, _) => Verify::Pattern,
            (false, Some(b)) => Verify::Fill(b),
            (false, None) => Verify::Off,
        },
        timeout: seconds(a.timeout),
        connect_timeout: seconds(a.connect_timeout),
    };
    let mut out = std::io::stdout();
    if let Err(e) = xroce_pingpong::run(&opts, &mut out) {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
