//! The `packet_sequences` fuzz property (`tests/packet_sequences/mod.rs`) on stable Rust,
//! over the committed fuzz corpus (`fuzz/corpus/packet_sequences/`), as it is and with the
//! RC queue pairs in selective repeat.

mod packet_sequences;

use std::path::Path;

#[test]
fn fuzz_corpus_holds_the_property() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/packet_sequences");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    assert!(paths.len() >= 20, "corpus has only {} files", paths.len());
    let steps: usize = paths
        .iter()
        .map(|p| packet_sequences::run_bytes(&std::fs::read(p).unwrap()))
        .sum();
    // The inputs decode as the fuzz target decoded them (same `arbitrary` version).
    assert!(steps > 2 * paths.len(), "only {steps} steps");
    eprintln!("{} inputs, {steps} steps", paths.len());
}

#[test]
fn fuzz_corpus_holds_the_property_in_selective_repeat() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/packet_sequences");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    let steps: usize = paths
        .iter()
        .map(|p| packet_sequences::run_bytes_selective(&std::fs::read(p).unwrap()))
        .sum();
    assert!(steps > 2 * paths.len(), "only {steps} steps");
}
