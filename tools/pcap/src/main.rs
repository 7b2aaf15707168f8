//! `xroce-pcap FILE...` (run as `cargo xtask pcap`): one line per RoCEv2 packet of each
//! capture with its ICRC verdict, then the tally; exits 1 if any packet is malformed or
//! carries a bad ICRC.

use std::path::PathBuf;

#[derive(Debug, clap::Parser)]
#[command(
    name = "cargo xtask pcap",
    about = "Print one line per RoCEv2 packet of pcap/pcapng files and check every ICRC"
)]
struct Args {
    /// Capture files (pcap or pcapng, Ethernet).
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

fn main() {
    let args = <Args as clap::Parser>::parse();
    if let Err(e) = xroce_pcap::run(&args.files) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
