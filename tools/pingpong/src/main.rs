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

use clap::Parser;
use xroce_pingpong::cli::{PingpongArgs, run_or_exit};

fn main() {
    let a = PingpongArgs::parse();
    let service = a.service();
    run_or_exit(&a.common.options(service));
}
