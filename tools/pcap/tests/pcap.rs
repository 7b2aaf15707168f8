//! `xroce-pcap` (what `cargo xtask pcap` runs) end to end: a clean capture passes; the same
//! capture with one payload bit flipped (as pcap and as pcapng) is reported `icrc=BAD` and
//! fails.

use std::borrow::Cow;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pcap_file::DataLink;
use pcap_file::pcap::{PcapPacket, PcapReader, PcapWriter};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;

fn capture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../dataplane/wire/tests/fixtures/rc_pingpong.pcap")
}

/// A temporary file removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(ext: &str) -> TempFile {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        TempFile(
            std::env::temp_dir().join(format!("xroce-pcap-test-{}-{n}.{ext}", std::process::id())),
        )
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn frames() -> Vec<Vec<u8>> {
    let mut reader = PcapReader::new(File::open(capture()).unwrap()).unwrap();
    let mut v = Vec::new();
    while let Some(p) = reader.next_packet() {
        v.push(p.unwrap().data.into_owned());
    }
    v
}

/// rc_pingpong.pcap with one bit of frame 15's payload (an RC SEND First) flipped.
fn corrupted() -> Vec<Vec<u8>> {
    let mut v = frames();
    assert_eq!(v[14].len(), 1082);
    v[14][600] ^= 0x08;
    v
}

fn pcap(file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xroce-pcap"))
        .arg(file)
        .output()
        .unwrap()
}

fn check_one_bad(out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "must fail:\n{stdout}");
    let bad: Vec<&str> = stdout.lines().filter(|l| l.contains("icrc=BAD")).collect();
    assert_eq!(bad.len(), 1, "{stdout}");
    assert!(
        bad[0].starts_with("   15 10.77.0.3:49441 -> 10.77.0.2:4791 RC_SEND_FIRST"),
        "{}",
        bad[0]
    );
    assert_eq!(
        stdout.lines().last(),
        Some("50 packets, 49 ok, 1 bad icrc, 0 malformed")
    );
}

#[test]
fn clean_capture_passes() {
    let out = pcap(&capture());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.lines().filter(|l| l.ends_with("icrc=ok")).count(),
        50
    );
    assert_eq!(
        stdout.lines().last(),
        Some("50 packets, 50 ok, 0 bad icrc, 0 malformed")
    );
}

#[test]
fn flipped_payload_bit_is_reported_bad_in_pcap() {
    let tmp = TempFile::new("pcap");
    let mut w = PcapWriter::new(File::create(&tmp.0).unwrap()).unwrap();
    for (i, f) in corrupted().iter().enumerate() {
        w.write_packet(&PcapPacket::new(
            Duration::from_millis(i as u64),
            f.len() as u32,
            f,
        ))
        .unwrap();
    }
    drop(w);
    check_one_bad(&pcap(&tmp.0));
}

#[test]
fn flipped_payload_bit_is_reported_bad_in_pcapng() {
    let tmp = TempFile::new("pcapng");
    let mut w = PcapNgWriter::new(File::create(&tmp.0).unwrap()).unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock {
        linktype: DataLink::ETHERNET,
        snaplen: 65535,
        options: vec![],
    })
    .unwrap();
    for (i, f) in corrupted().iter().enumerate() {
        w.write_pcapng_block(EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::from_millis(i as u64),
            original_len: f.len() as u32,
            data: Cow::Borrowed(f),
            options: vec![],
        })
        .unwrap();
    }
    drop(w);
    check_one_bad(&pcap(&tmp.0));
}

#[test]
fn unreadable_file_fails_with_a_message() {
    let out = pcap(Path::new("/nonexistent/capture.pcap"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("opening /nonexistent/capture.pcap"));
}
