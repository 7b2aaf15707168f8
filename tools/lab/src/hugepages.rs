//! Reserving 2 MiB hugepages for the length of a lab, test or benchmark, and giving them
//! back. The kernel's pool (`nr_hugepages`) is global, so reservations are relative: each
//! adds its pages under a lock and removes exactly those pages when dropped, whoever else
//! reserved some in the meantime.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use log::{info, warn};

/// The 2 MiB pool's knobs.
const POOL: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB";
/// Serialises read-modify-write of `nr_hugepages` between processes.
const LOCK: &str = "/run/xroce-hugepages.lock";

/// Pages the live reservations of this process added: what the signal teardown gives back
/// when Ctrl-C ends the process before the reservations are dropped.
static LIVE: AtomicU64 = AtomicU64::new(0);

/// The size of the pages this module deals in.
pub const PAGE_SIZE: usize = 2 << 20;

/// 2 MiB hugepages reserved by [`HugepageReservation::reserve`]; dropping it gives them back.
#[derive(Debug)]
pub struct HugepageReservation {
    added: u64,
}

impl HugepageReservation {
    /// Adds up to `pages` 2 MiB pages to the kernel's pool (the kernel may find fewer free
    /// contiguous 2 MiB blocks: [`granted`](Self::granted) says how many it did). Needs root.
    pub fn reserve(pages: u64) -> io::Result<Self> {
        let _lock = PoolLock::take()?;
        let before = persistent()?;
        // The kernel takes the value as the persistent pool size, and turns surplus pages
        // (in use beyond the pool, say by a process still releasing its memory) into pool
        // pages first: count in persistent pages, or that conversion would be lost track of.
        write_u64("nr_hugepages", before + pages)?;
        let after = persistent()?;
        let added = after.saturating_sub(before);
        LIVE.fetch_add(added, Ordering::SeqCst);
        info!(
            "hugepages: reserved {added} of {pages} requested 2 MiB pages (pool {before} -> {after})"
        );
        Ok(HugepageReservation { added })
    }

    /// How many pages this reservation added to the pool.
    pub fn granted(&self) -> u64 {
        self.added
    }
}

impl Drop for HugepageReservation {
    fn drop(&mut self) {
        if self.added == 0 {
            return;
        }
        // Pages still in use (a UMEM the kernel releases from a work queue) become surplus
        // pages and go back to the system when freed.
        let result = PoolLock::take().and_then(|_lock| {
            let now = persistent()?;
            write_u64("nr_hugepages", now.saturating_sub(self.added))?;
            LIVE.fetch_sub(self.added, Ordering::SeqCst);
            Ok(())
        });
        if let Err(e) = result {
            warn!("hugepages: giving back {} pages failed: {e}", self.added);
        }
    }
}

/// Gives back the pages of every live reservation of this process (from the signal
/// thread, just before the process exits without dropping them).
pub(crate) fn release_all_live() {
    let result = PoolLock::take().and_then(|_lock| {
        let pages = LIVE.swap(0, Ordering::SeqCst);
        if pages == 0 {
            return Ok(());
        }
        let now = persistent()?;
        write_u64("nr_hugepages", now.saturating_sub(pages))
    });
    if let Err(e) = result {
        eprintln!("xroce-lab: giving back hugepages: {e}");
    }
}

/// Pages in the 2 MiB pool (`nr_hugepages`), surplus pages included.
pub fn total() -> io::Result<u64> {
    read_u64("nr_hugepages")
}

/// Pages in the 2 MiB pool that stay there when freed: `nr_hugepages` minus the surplus
/// pages that go back to the system when freed.
pub fn persistent() -> io::Result<u64> {
    Ok(read_u64("nr_hugepages")?.saturating_sub(read_u64("surplus_hugepages")?))
}

/// Free pages in the 2 MiB pool (`free_hugepages`).
pub fn free() -> io::Result<u64> {
    read_u64("free_hugepages")
}

fn read_u64(knob: &str) -> io::Result<u64> {
    let path = Path::new(POOL).join(knob);
    let text = fs::read_to_string(&path)?;
    text.trim().parse().map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

fn write_u64(knob: &str, value: u64) -> io::Result<()> {
    fs::write(Path::new(POOL).join(knob), value.to_string())
}

/// An exclusive `flock` on [`LOCK`], released when dropped (the file closes).
struct PoolLock(#[allow(dead_code, reason = "held for its lock, released on close")] File);

impl PoolLock {
    fn take() -> io::Result<PoolLock> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(LOCK)?;
        // Safety: `file` is an open descriptor; flock touches no memory of ours.
        let ret = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if ret != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(PoolLock(file))
    }
}
