//! `rdma_write`: move a file-sized buffer to a peer with RDMA WRITE, many requests in
//! flight, and prove it arrived whole (SHA-256 of both buffers compared over TCP).
//!
//! The server registers a region the client may write into; the client writes its buffer
//! there in `--chunk`-byte WRITEs, `--depth` outstanding, prints the throughput, and both
//! sides compare digests. Run each side in a network namespace where `xroced` serves the
//! interface:
//!
//! ```text
//! cargo run -p verbs-shm --example rdma_write                           # server
//! cargo run -p verbs-shm --example rdma_write -- --size 64M HOST        # client
//! cargo run -p verbs-shm --example rdma_write -- --file big.iso HOST    # a real file
//! ```
//!
//! Options: `-p PORT` (TCP, 18516), `-d DEV`, `-g IDX` (GID index, 0), `-s SIZE` (generated
//! data, 64M), `--file PATH` (the client sends this file instead), `--output PATH` (the
//! server saves what arrived), `--chunk SIZE` (64K), `--depth N` (32), `--timeout SECS`,
//! `--connect-timeout SECS`. It exits with status 0 only when the data is verified.

mod transfer;

fn main() {
    transfer::main(transfer::Op::Write);
}
