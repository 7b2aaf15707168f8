//! Arbitrary sequences of packets, work requests, time and state changes into an RC, a UC
//! and a UD queue pair on each of two endpoints: nothing panics, nothing outside a region
//! (or inside one that forbids writes) is touched, and no queue grows without bound (see
//! `tests/packet_sequences/mod.rs`, which the stable test suite also runs over the
//! committed corpus).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/packet_sequences/mod.rs"]
mod packet_sequences;

fuzz_target!(|input: packet_sequences::Input| {
    packet_sequences::World::new().run(&input);
});
