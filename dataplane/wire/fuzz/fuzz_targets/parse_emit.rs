//! parse → emit → parse on arbitrary bytes: whatever parses must emit, and must parse again
//! to the same representation (see `tests/round_trip/mod.rs`, which the stable test suite
//! also runs over the committed corpus and every capture packet).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/round_trip/mod.rs"]
mod round_trip;

fuzz_target!(|data: &[u8]| {
    round_trip::check(data);
});
