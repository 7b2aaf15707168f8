//! `rc_pingpong`: rdma-core's `ibv_rc_pingpong` over xroce's Rust verbs.
//!
//! It speaks the original's out-of-band TCP exchange byte for byte (a 52-byte
//! `lid:qpn:psn:gid` message each way, then `done`), takes its options and prints its
//! lines, so either side can be the real `ibv_rc_pingpong` on a RoCEv2 peer (Linux rxe, an
//! RDMA NIC), `xroce-pingpong`, or this example. Run it in a network namespace where
//! `xroced` serves the interface:
//!
//! ```text
//! cargo run -p verbs-shm --example rc_pingpong -- -g 0                    # server
//! cargo run -p verbs-shm --example rc_pingpong -- -g 0 -s 64 -n 100 HOST  # client
//! ```
//!
//! Options: `-p PORT` (TCP port, 18515), `-d DEV` (device, the first one), `-i PORT` (device
//! port, 1), `-s SIZE` (message size, 4096), `-m MTU` (path MTU, 1024), `-r DEPTH` (receives
//! posted, 500), `-n ITERS` (messages, 1000), `-l SL`, `-e` (sleep on completion events),
//! `-g IDX` (GID index: RoCE needs one), `-c` (check page marks). Additions: `--verify`
//! (a distinct pattern in every message, checked on arrival; both sides must be xroce
//! programs), `--verify-fill BYTE` (every byte received must be BYTE: the original sends
//! 0x7b), `--timeout SECS`, `--connect-timeout SECS`.
//!
//! The ping-pong itself is `xroce_pingpong::run`, the same code as `xroce-pingpong`'s.

use clap::Parser;
use xroce_pingpong::Service;
use xroce_pingpong::cli::{RcArgs, run_or_exit};

fn main() {
    run_or_exit(&RcArgs::parse().common.options(Service::Rc));
}
