//! `cargo xtask demo`: the first command a newcomer runs.
//!
//! The dataplane daemon is not built yet, so for now the demo shows the layer that is: it
//! decodes the real Linux rxe captures shipped with the project using xroce's wire crate,
//! checks every ICRC, and prints a table per capture. It says so plainly when it starts.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Result, bail};
use xroce_wire::Frame;

use crate::pcap::for_each_frame;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: &Args) -> Result<()> {
    println!("xroce demo");
    println!(
        "The dataplane daemon (xroced) is not built yet: this demo decodes real Linux rxe\n\
         traffic with xroce's RoCEv2 wire layer and checks every packet's ICRC.\n"
    );
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = root.join("dataplane/wire/tests/fixtures");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .collect();
    files.sort();
    println!(
        "{:<34} {:>7} {:>7} {:>9}  opcodes",
        "capture", "RoCEv2", "icrc ok", "malformed"
    );
    let (mut total, mut bad) = (0usize, 0usize);
    for path in &files {
        let mut roce = 0usize;
        let mut ok = 0usize;
        let mut malformed = 0usize;
        let mut opcodes: BTreeMap<&'static str, usize> = BTreeMap::new();
        for_each_frame(path, |_, bytes| match Frame::parse_unverified(bytes) {
            Ok(f) => {
                roce += 1;
                if f.icrc_ok() {
                    ok += 1;
                }
                *opcodes.entry(f.ib.bth.opcode.name()).or_default() += 1;
            }
            Err(xroce_wire::ParseError::UnsupportedEthertype(_))
            | Err(xroce_wire::ParseError::NotUdp(_))
            | Err(xroce_wire::ParseError::NotRoceV2Port(_)) => {}
            Err(_) => {
                roce += 1;
                malformed += 1;
            }
        })?;
        let names: Vec<String> = opcodes.iter().map(|(n, c)| format!("{n} x{c}")).collect();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        println!(
            "{name:<34} {roce:>7} {ok:>7} {malformed:>9}  {}",
            names.join(", ")
        );
        total += roce;
        bad += roce - ok;
    }
    println!(
        "\n{total} RoCEv2 packets, {} with a valid ICRC.",
        total - bad
    );
    println!(
        "Decode one capture packet by packet: cargo xtask pcap dataplane/wire/tests/fixtures/write_bw.pcap"
    );
    if bad > 0 {
        bail!("{bad} packets failed to decode or verify");
    }
    Ok(())
}
