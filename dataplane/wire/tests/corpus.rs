//! The fuzz property (parse → emit → parse, `tests/round_trip/mod.rs`) on stable Rust, over
//! the committed fuzz corpus, the inputs of past fuzz findings, and every frame of every
//! capture (whole, and its IB part alone).

mod common;
mod round_trip;

use std::path::Path;

fn files_in(dir: &Path) -> Vec<Vec<u8>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

#[test]
fn fuzz_corpus_round_trips() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/parse_emit");
    let inputs = files_in(&dir);
    assert!(inputs.len() >= 50, "corpus has only {} files", inputs.len());
    for input in &inputs {
        round_trip::check(input);
    }
}

#[test]
fn fuzz_regressions_round_trip() {
    let inputs = files_in(&common::fixtures().join("fuzz_regressions"));
    assert!(!inputs.is_empty());
    for input in &inputs {
        round_trip::check(input);
    }
}

#[test]
fn every_capture_frame_round_trips() {
    let mut n = 0;
    for path in common::all_pcaps() {
        for frame in common::read_pcap(&path) {
            round_trip::check(&frame);
            if frame.len() > 42 {
                round_trip::check(&frame[42..]); // the UDP payload of an untagged IPv4 frame
            }
            n += 1;
        }
    }
    assert!(n > 600, "{n} frames");
}
