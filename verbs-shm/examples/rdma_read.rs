//! `rdma_read`: fetch a file-sized buffer from a peer with RDMA READ, many requests in
//! flight, and prove it arrived whole (SHA-256 of both buffers compared over TCP).
//!
//! The server registers a region holding the data (generated, or `--file`'s contents) for
//! the client to read; the client reads it in `--chunk`-byte READs, `--depth` outstanding,
//! prints the throughput, and both sides compare digests. Run each side in a network
//! namespace where `xroced` serves the interface:
//!
//! ```text
//! cargo run -p verbs-shm --example rdma_read -- --size 64M               # server
//! cargo run -p verbs-shm --example rdma_read -- HOST                     # client
//! cargo run -p verbs-shm --example rdma_read -- --file big.iso           # serve a file
//! cargo run -p verbs-shm --example rdma_read -- --output copy.iso HOST   # and save it
//! ```
//!
//! Options: `-p PORT` (TCP, 18516), `-d DEV`, `-g IDX` (GID index, 0), `-s SIZE` (generated
//! data, 64M), `--file PATH` (the server serves this file instead), `--output PATH` (the
//! client saves what it read), `--chunk SIZE` (64K), `--depth N` (32), `--timeout SECS`,
//! `--connect-timeout SECS`. It exits with status 0 only when the data is verified.

mod transfer;

fn main() {
    transfer::main(transfer::Op::Read);
}
