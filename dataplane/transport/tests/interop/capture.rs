//! The captures: the RoCEv2 frames of two rxe hosts, in capture order, and which host sent
//! each.

use std::path::PathBuf;

use pcap_file::pcap::PcapReader;
use xroce_wire::{Frame, IbRepr};

/// Which captured host sent a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// 10.77.0.2.
    Server,
    /// Anyone else (10.77.0.3, or 10.77.0.1 for the userspace client).
    Client,
}

pub(crate) const SERVER_IP: [u8; 4] = [10, 77, 0, 2];

/// The RoCEv2 frames of one capture, in capture order.
pub(crate) struct Capture {
    pub(crate) name: &'static str,
    pub(crate) frames: Vec<(Side, Vec<u8>)>,
}

impl Capture {
    pub(crate) fn load(name: &'static str) -> Capture {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../wire/tests/fixtures")
            .join(format!("{name}.pcap"));
        let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut reader = PcapReader::new(file).unwrap();
        let mut frames = Vec::new();
        while let Some(packet) = reader.next_packet() {
            let data = packet.unwrap().data.into_owned();
            // IPv4, UDP, destination port 4791: judged from fixed offsets (untagged frames).
            let roce = data.len() > 42
                && data[12..14] == [0x08, 0x00]
                && data[23] == 17
                && data[36..38] == 4791u16.to_be_bytes();
            if roce {
                let side = if data[26..30] == SERVER_IP {
                    Side::Server
                } else {
                    Side::Client
                };
                frames.push((side, data));
            }
        }
        assert!(!frames.is_empty(), "{name}: no RoCEv2 frames");
        Capture { name, frames }
    }

    pub(crate) fn sent_by(&self, side: Side) -> impl Iterator<Item = &[u8]> {
        self.frames
            .iter()
            .filter(move |(s, _)| *s == side)
            .map(|(_, f)| f.as_slice())
    }

    /// The messages one side sent: the first packet's headers and the payload of all its
    /// packets, in order.
    pub(crate) fn messages(&self, side: Side) -> Vec<(IbRepr, Vec<u8>)> {
        let mut out: Vec<(IbRepr, Vec<u8>)> = Vec::new();
        for bytes in self.sent_by(side) {
            let f = Frame::parse(bytes).unwrap();
            if f.ib.info().starts_message() {
                out.push((f.ib, f.payload.to_vec()));
            } else {
                out.last_mut().unwrap().1.extend_from_slice(f.payload);
            }
        }
        out
    }
}
