//! `xroce-pcap` (what `cargo xtask pcap` runs) end to end: a clean capture passes; the same
//! capture with one payload bit flipped (as pcap and as pcapng) is reported `icrc=BAD` and
//! fails; xroce's selective-acknowledgement NAK is decoded with its ranges, and one whose
//! trailer is no selective acknowledgement is malformed.

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
use xroce_wire::{AethRepr, Frame, FrameRepr, NakCode, Psn, SackRepr, Syndrome};

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

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut w = PcapWriter::new(File::create(path).unwrap()).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(&PcapPacket::new(
            Duration::from_millis(i as u64),
            f.len() as u32,
            f,
        ))
        .unwrap();
    }
}

/// rc_pingpong.pcap's frame 19 (an ACK) made a PSN sequence error NAK that carries a
/// selective acknowledgement of PSNs 0x58f060..=0x58f07f and 0x58f088..=0x58f092, with its
/// ICRC computed by the wire crate's emitter.
fn sack_nak() -> Vec<u8> {
    let ack = &frames()[18];
    let headers = FrameRepr::parse(ack).unwrap();
    let mut ib = Frame::parse(ack).unwrap().ib;
    ib.aeth = Some(AethRepr {
        syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
        msn: 1,
    });
    let mut sack = SackRepr::new();
    assert!(sack.push(Psn::new(0x58_f060), Psn::new(0x58_f07f)));
    assert!(sack.push(Psn::new(0x58_f088), Psn::new(0x58_f092)));
    // The IB headers as for any ACKNOWLEDGE, the trailer after them, then the envelope
    // and the ICRC over all of it (`emit_packet` refuses a payload for this opcode).
    let mut frame = vec![0u8; 128];
    let start = headers.header_len();
    let ib_len = ib.emit(&mut frame[start..], 0).unwrap();
    assert_eq!(sack.emit(&mut frame[start + ib_len..]), Ok(20));
    let len = headers.emit(&mut frame, ib_len + 20).unwrap();
    frame.truncate(len);
    // What the daemons parse it with agrees.
    let f = Frame::parse_acknowledge_with_trailer(&frame).unwrap();
    assert_eq!(SackRepr::parse(f.payload), Ok(sack));
    frame
}

#[test]
fn selective_acknowledgement_nak_is_decoded_with_its_ranges() {
    let tmp = TempFile::new("pcap");
    write_pcap(&tmp.0, &[frames()[17].clone(), sack_nak()]);
    let out = pcap(&tmp.0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[1],
        "    2 10.77.0.2:49441 -> 10.77.0.3:4791 RC_ACKNOWLEDGE qp=0x000011 psn=0x58f05d \
         ack=0 aeth(NAK PSN sequence error msn=1) sack(0x58f060-0x58f07f, 0x58f088-0x58f092) \
         len=20 icrc=ok",
        "{stdout}"
    );
    assert_eq!(
        lines.last(),
        Some(&"2 packets, 2 ok, 0 bad icrc, 0 malformed")
    );
}

#[test]
fn garbled_selective_acknowledgement_is_malformed() {
    // The range count says 3 where 2 follow; the ICRC is made right for the bytes as they
    // are, so the trailer alone is at fault.
    let mut garbled = sack_nak();
    let trailer = garbled.len() - 4 - 20;
    garbled[trailer + 1] = 3;
    let icrc = xroce_wire::icrc::compute_frame(&garbled).unwrap();
    let end = garbled.len();
    garbled[end - 4..].copy_from_slice(&icrc.to_le_bytes());
    let tmp = TempFile::new("pcap");
    write_pcap(&tmp.0, &[garbled]);
    let out = pcap(&tmp.0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "must fail:\n{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[0],
        "    1 10.77.0.2:49441 -> 10.77.0.3:4791 malformed: RC_ACKNOWLEDGE with 20 bytes after \
         its AETH: selective acknowledgement malformed: length does not match the range count \
         icrc=ok",
        "{stdout}"
    );
    assert_eq!(
        lines.last(),
        Some(&"1 packets, 0 ok, 0 bad icrc, 1 malformed")
    );
}

/// A selective acknowledgement with a bit flipped on the path is a bad ICRC, not decoded;
/// one after an AETH that is no PSN sequence error NAK is malformed.
#[test]
fn selective_acknowledgement_with_bad_icrc_or_after_an_ack() {
    let mut flipped = sack_nak();
    let at = flipped.len() - 4 - 3;
    flipped[at] ^= 0x01;
    let mut after_ack = sack_nak();
    let aeth = after_ack.len() - 4 - 20 - 4;
    assert_eq!(after_ack[aeth], 0x60, "PSN sequence error NAK syndrome");
    after_ack[aeth] = 0x1f; // ACK, 31 credits
    let icrc = xroce_wire::icrc::compute_frame(&after_ack).unwrap();
    let end = after_ack.len();
    after_ack[end - 4..].copy_from_slice(&icrc.to_le_bytes());
    let tmp = TempFile::new("pcap");
    write_pcap(&tmp.0, &[flipped, after_ack]);
    let out = pcap(&tmp.0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "must fail:\n{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with(
            "    1 10.77.0.2:49441 -> 10.77.0.3:4791 malformed: RC_ACKNOWLEDGE with 20 bytes \
             after its AETH, not decoded icrc=BAD (carried "
        ),
        "{stdout}"
    );
    assert_eq!(
        lines[1],
        "    2 10.77.0.2:49441 -> 10.77.0.3:4791 malformed: RC_ACKNOWLEDGE with 20 bytes after \
         its AETH: a selective acknowledgement follows only a PSN sequence error NAK icrc=ok",
        "{stdout}"
    );
    assert_eq!(
        lines.last(),
        Some(&"2 packets, 0 ok, 1 bad icrc, 1 malformed")
    );
}
