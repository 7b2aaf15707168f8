//! The command line of the ping-pong programs, shared by the `xroce-pingpong` binary and
//! verbs-shm's `rc_pingpong` example: the examples' options (`-p -d -i -s -m -r -n -l -e
//! -g -c`) plus `--verify`, `--verify-fill`, `--timeout` and `--connect-timeout`.

use std::time::Duration;

use clap::{Args, Parser};

use crate::{Options, Service, Verify};

/// The options every ping-pong program takes (`ibv_rc_pingpong`'s, and the additions).
#[derive(Debug, Clone, Args)]
pub struct Common {
    /// Connect to the server at this host; without it, wait for a client.
    pub server: Option<String>,
    /// Listen on / connect to this TCP port.
    #[arg(short, long, default_value_t = 18515)]
    pub port: u16,
    /// Use this device (default: the first one).
    #[arg(short = 'd', long = "ib-dev")]
    pub ib_dev: Option<String>,
    /// Use this port of the device.
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    pub ib_port: u8,
    /// Size of the messages (default 4096; UD 1024).
    #[arg(short, long)]
    pub size: Option<u32>,
    /// Path MTU in bytes.
    #[arg(short, long, default_value_t = 1024)]
    pub mtu: u32,
    /// Receives to post at a time.
    #[arg(short, long = "rx-depth", default_value_t = 500)]
    pub rx_depth: u32,
    /// Messages to exchange.
    #[arg(short = 'n', long, default_value_t = 1000)]
    pub iters: u32,
    /// Service level.
    #[arg(short = 'l', long, default_value_t = 0)]
    pub sl: u8,
    /// Sleep on completion events instead of polling.
    #[arg(short, long)]
    pub events: bool,
    /// Local GID index (RoCE needs one).
    #[arg(short, long = "gid-idx")]
    pub gid_idx: Option<u8>,
    /// Mark the first byte of every page and check the marks at the end.
    #[arg(short = 'c', long = "chk")]
    pub chk: bool,
    /// Send a different pattern in every message and check every message received
    /// (both sides must be xroce-pingpong, or the server must echo like the examples).
    #[arg(long, conflicts_with = "verify_fill")]
    pub verify: bool,
    /// Check that every byte of every message received is this one (the examples send
    /// 0x7b).
    #[arg(long = "verify-fill", value_parser = parse_byte)]
    pub verify_fill: Option<u8>,
    /// Give up (exit status 1) when the exchange takes longer than this many seconds.
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Keep retrying to connect to the server for this many seconds.
    #[arg(long = "connect-timeout")]
    pub connect_timeout: Option<f64>,
}

/// `ibv_rc_pingpong`'s command line (reliable connected only).
#[derive(Debug, Parser)]
#[command(
    name = "rc_pingpong",
    version,
    about = "ibv_rc_pingpong over xroce's Rust verbs, wire-compatible with the original"
)]
pub struct RcArgs {
    /// The options.
    #[command(flatten)]
    pub common: Common,
}

/// `xroce-pingpong`'s command line: RC, or UC and UD with `--uc` and `--ud`.
#[derive(Debug, Parser)]
#[command(
    name = "xroce-pingpong",
    version,
    about = "ibv_rc_pingpong (and the UC/UD variants) over xroce, wire-compatible with the originals"
)]
pub struct PingpongArgs {
    /// The options.
    #[command(flatten)]
    pub common: Common,
    /// Unreliable connected (ibv_uc_pingpong).
    #[arg(long, conflicts_with = "ud")]
    pub uc: bool,
    /// Unreliable datagram (ibv_ud_pingpong).
    #[arg(long)]
    pub ud: bool,
}

impl PingpongArgs {
    /// The transport service the flags choose.
    pub fn service(&self) -> Service {
        if self.ud {
            Service::Ud
        } else if self.uc {
            Service::Uc
        } else {
            Service::Rc
        }
    }
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

impl Common {
    /// The options of a run of `service`.
    pub fn options(self, service: Service) -> Options {
        Options {
            server: self.server,
            port: self.port,
            device: self.ib_dev,
            ib_port: self.ib_port,
            size: self.size,
            mtu: self.mtu,
            rx_depth: self.rx_depth,
            iters: self.iters,
            sl: self.sl,
            events: self.events,
            gid_index: self.gid_idx,
            check_pages: self.chk,
            service,
            verify: match (self.verify, self.verify_fill) {
                (true, _) => Verify::Pattern,
                (false, Some(b)) => Verify::Fill(b),
                (false, None) => Verify::Off,
            },
            timeout: seconds(self.timeout),
            connect_timeout: seconds(self.connect_timeout),
        }
    }
}

/// Runs one side with `opts`, printing what the examples print; exits with status 1 and
/// the error on standard error when it fails.
pub fn run_or_exit(opts: &Options) {
    let mut out = std::io::stdout();
    if let Err(e) = crate::run(opts, &mut out) {
        eprintln!("{e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rc_arguments_are_the_examples() {
        let a = RcArgs::parse_from([
            "rc_pingpong",
            "-p",
            "19000",
            "-s",
            "64",
            "-n",
            "5",
            "-g",
            "0",
        ]);
        let o = a.common.options(Service::Rc);
        assert_eq!(
            (o.port, o.size, o.iters, o.gid_index),
            (19000, Some(64), 5, Some(0))
        );
        assert!(o.server.is_none(), "no host: server");
        let a = RcArgs::parse_from(["rc_pingpong", "-d", "xroce0", "10.0.0.2"]);
        let o = a.common.options(Service::Rc);
        assert_eq!(o.device.as_deref(), Some("xroce0"));
        assert_eq!(o.server.as_deref(), Some("10.0.0.2"));
        assert_eq!(
            (o.port, o.size, o.iters, o.gid_index),
            (18515, None, 1000, None)
        );
        assert!(RcArgs::try_parse_from(["rc_pingpong", "--ud"]).is_err());
    }

    #[test]
    fn pingpong_arguments_pick_the_service() {
        let a = PingpongArgs::parse_from(["xroce-pingpong", "--ud", "--verify-fill", "0x7b"]);
        assert_eq!(a.service(), Service::Ud);
        assert_eq!(a.common.options(Service::Ud).verify, Verify::Fill(0x7b));
        assert!(PingpongArgs::try_parse_from(["xroce-pingpong", "--uc", "--ud"]).is_err());
    }
}
