//! Nanoseconds per CRC of the lengths RoCEv2 packets have, against `crc32fast`.
//!
//! `cargo bench -p xroce-crc`

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

fn crc(c: &mut Criterion) {
    let data: Vec<u8> = (0..2048u32).map(|i| (i * 7 + 3) as u8).collect();
    let mut group = c.benchmark_group("crc32");
    // An ACK's ICRC input, a 64-byte WRITE's, a 1024-byte path MTU's.
    for len in [44usize, 64, 120, 127, 1080] {
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_with_input(BenchmarkId::new("xroce_crc", len), &len, |b, &len| {
            b.iter(|| xroce_crc::update(black_box(0x1234_5678), black_box(&data[..len])))
        });
        group.bench_with_input(BenchmarkId::new("crc32fast", len), &len, |b, &len| {
            b.iter(|| {
                let mut h = crc32fast::Hasher::new_with_initial(black_box(0x1234_5678));
                h.update(black_box(&data[..len]));
                h.finalize()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, crc);
criterion_main!(benches);
