//! Helpers shared by the integration tests: reading the captures and their tshark decodes.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use pcap_file::pcap::PcapReader;

/// The directory of the committed fixtures.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every pcap among the fixtures, sorted by name.
pub fn all_pcaps() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("fixtures directory")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .collect();
    v.sort();
    v
}

/// The captures of real traffic (those with a tshark decode beside them), sorted by name.
pub fn captures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = all_pcaps()
        .into_iter()
        .filter(|p| p.with_extension("txt").exists())
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no captures in {}", fixtures().display());
    v
}

/// Every frame of a classic pcap file, in order (frame number = index + 1).
pub fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let file = File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut reader = PcapReader::new(file).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut frames = Vec::new();
    while let Some(packet) = reader.next_packet() {
        let packet = packet.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            packet.orig_len as usize,
            packet.data.len(),
            "truncated capture"
        );
        frames.push(packet.data.into_owned());
    }
    frames
}

/// Whether a frame is IPv4/UDP to port 4791, judged from fixed offsets (independently of
/// the parser under test, so that a packet the parser wrongly rejects is not skipped).
pub fn is_roce(frame: &[u8]) -> bool {
    frame.len() >= 42
        && frame[12..14] == [0x08, 0x00]
        && frame[23] == 17
        && frame[36..38] == 4791u16.to_be_bytes()
}

/// One line of the `tshark` summary of a RoCE frame.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Frame length on the wire.
    pub len: usize,
    /// tshark's name for the packet, e.g. `RC Send First` or `CM: ConnectRequest`.
    pub name: String,
    /// The destination QP, when tshark shows it.
    pub qp: Option<u32>,
}

/// The `RRoCE` lines of the tshark summary, by frame number.
pub fn summaries(txt: &str) -> BTreeMap<usize, Summary> {
    let mut out = BTreeMap::new();
    for line in txt.lines() {
        let Some(at) = line.find(" RRoCE ") else {
            continue;
        };
        let frame: usize = line.split_whitespace().next().unwrap().parse().unwrap();
        let rest = line[at + 7..].trim();
        let (len, rest) = rest.split_once(' ').unwrap();
        let (name, qp) = match rest.split_once(" QP=0x") {
            Some((name, qp)) => (name, Some(u32::from_str_radix(qp.trim(), 16).unwrap())),
            None => (rest, None),
        };
        out.insert(
            frame,
            Summary {
                len: len.parse().unwrap(),
                name: name.trim().to_string(),
                qp,
            },
        );
    }
    out
}

/// The fields of one `tshark -O infiniband` block.
#[derive(Debug, Clone, Default)]
pub struct Decode {
    pub src_ip: String,
    pub dst_ip: String,
    pub src_port: u16,
    pub dst_port: u16,
    pub opcode: u8,
    pub solicited_event: bool,
    pub migreq: bool,
    pub pad: u8,
    pub tver: u8,
    pub pkey: u16,
    pub dest_qp: u32,
    pub ack_req: bool,
    pub psn: u32,
    pub reth: Option<(u64, u32, u32)>,
    pub aeth: Option<(u8, u32)>,
    pub deth: Option<(u64, u32)>,
    pub atomic: Option<(u64, u32, u64, u64)>,
    pub atomic_ack: Option<u64>,
    pub icrc_be: u32,
    /// "Data (N bytes)": payload plus pad, when tshark shows raw data.
    pub data_len: Option<usize>,
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).unwrap()
}

fn boolean(s: &str) -> bool {
    match s.trim() {
        "True" => true,
        "False" => false,
        other => panic!("not a boolean: {other}"),
    }
}

/// The `tshark -O infiniband` blocks, by frame number.
pub fn decodes(txt: &str) -> BTreeMap<usize, Decode> {
    let mut out = BTreeMap::new();
    let Some(start) = txt.find("## tshark -O infiniband") else {
        return out;
    };
    let mut current: Option<(usize, Decode)> = None;
    let mut section = String::new();
    let mut aeth = (0u8, 0u32);
    let mut reth = (0u64, 0u32, 0u32);
    let mut atomic = (0u64, 0u32, 0u64, 0u64);
    for line in txt[start..].lines() {
        if let Some(rest) = line.strip_prefix("Frame ") {
            if let Some((n, d)) = current.take() {
                out.insert(n, d);
            }
            let n = rest.split(':').next().unwrap().parse().unwrap();
            current = Some((n, Decode::default()));
            section.clear();
            continue;
        }
        let Some((_, d)) = current.as_mut() else {
            continue;
        };
        if let Some(rest) = line.strip_prefix("Internet Protocol Version 4, Src: ") {
            let (src, dst) = rest.split_once(", Dst: ").unwrap();
            d.src_ip = src.to_string();
            d.dst_ip = dst.to_string();
        } else if let Some(rest) = line.strip_prefix("User Datagram Protocol, Src Port: ") {
            let (src, dst) = rest.split_once(", Dst Port: ").unwrap();
            d.src_port = src.parse().unwrap();
            d.dst_port = dst.parse().unwrap();
        } else if let Some(rest) = line.strip_prefix("Data (") {
            d.data_len = Some(rest.split(' ').next().unwrap().parse().unwrap());
        } else if line.starts_with("    ") && !line.starts_with("     ") {
            section = line.trim().to_string();
            if let Some(v) = section.strip_prefix("Invariant CRC: ") {
                d.icrc_be = hex(v) as u32;
            }
        } else if line.starts_with("        ") && !line.starts_with("         ") {
            // "        [bit pattern = ]Key: value"
            let field = line.trim();
            let field = field.split_once(" = ").map_or(field, |(_, f)| f);
            let Some((key, value)) = field.split_once(": ") else {
                continue;
            };
            match (section.split(' ').next().unwrap_or(""), key) {
                ("Base", "Opcode") => {
                    let n = value.rsplit('(').next().unwrap().trim_end_matches(')');
                    d.opcode = n.parse().unwrap();
                }
                ("Base", "Solicited Event") => d.solicited_event = boolean(value),
                ("Base", "MigReq") => d.migreq = boolean(value),
                ("Base", "Pad Count") => d.pad = value.parse().unwrap(),
                ("Base", "Header Version") => d.tver = value.parse().unwrap(),
                ("Base", "Partition Key") => d.pkey = value.parse().unwrap(),
                ("Base", "Destination Queue Pair") => d.dest_qp = hex(value) as u32,
                ("Base", "Acknowledge Request") => d.ack_req = boolean(value),
                ("Base", "Packet Sequence Number") => d.psn = value.parse().unwrap(),
                ("RETH", "Virtual Address") => reth.0 = hex(value),
                ("RETH", "Remote Key") => reth.1 = hex(value) as u32,
                ("RETH", "DMA Length") => {
                    reth.2 = value.split(' ').next().unwrap().parse().unwrap();
                    d.reth = Some(reth);
                }
                ("AETH", "Syndrome") => aeth.0 = value.split(',').next().unwrap().parse().unwrap(),
                ("AETH", "Message Sequence Number") => {
                    aeth.1 = value.parse().unwrap();
                    d.aeth = Some(aeth);
                }
                ("DETH", "Queue Key") => d.deth = Some((hex(value), 0)),
                ("DETH", "Source Queue Pair") => {
                    d.deth.as_mut().expect("Q_Key before source QP").1 = hex(value) as u32;
                }
                ("AtomicETH", "Virtual Address") => atomic.0 = hex(value),
                ("AtomicETH", "Remote Key") => atomic.1 = hex(value) as u32,
                ("AtomicETH", "Swap (Or Add) Data") => atomic.2 = value.parse().unwrap(),
                ("AtomicETH", "Compare Data") => {
                    atomic.3 = value.parse().unwrap();
                    d.atomic = Some(atomic);
                }
                ("ATOMICACKETH", "Original Remote Data") => {
                    d.atomic_ack = Some(value.parse().unwrap());
                }
                _ => {}
            }
        }
    }
    if let Some((n, d)) = current.take() {
        out.insert(n, d);
    }
    out
}
