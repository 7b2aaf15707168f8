//! The bound the kernel puts on the memory a process registers, applied to each
//! application's process: its `RLIMIT_MEMLOCK`, unless it holds `CAP_IPC_LOCK`.
//!
//! A kernel RDMA device pins the pages of every region registered on it, and pinned memory
//! is bounded per process (`ib_umem_get`): a process without `CAP_IPC_LOCK` whose
//! `RLIMIT_MEMLOCK` is 0 may not register at all (`EPERM`), and one whose registered pages
//! would pass that limit is refused (`ENOMEM`). Programs, their documentation and their
//! users all count on that bound, so the daemon keeps it, on top of its own
//! per-application limits: each region counts the pages it spans, a process's regions on
//! all its connections are summed (the kernel sums a process's pinned pages, whichever
//! device context they came from), and the limit and the capability are read from
//! `/proc/<pid>` at each registration, since a process may change its limit while it runs
//! (`prlimit`). The process is the one that connected (`SO_PEERCRED`), told apart from a
//! later process given the same pid by its start time; one that has exited registers
//! nothing more. A capability counts only in the daemon's own user namespace: a process
//! that is root in a namespace of its own is not thereby trusted with the host's memory.

use super::Refusal;
use super::access::Peer;
use verbs_shm::sys::PAGE_SIZE;

/// `CAP_IPC_LOCK`'s bit in the capability sets of `/proc/<pid>/status`.
const CAP_IPC_LOCK: u32 = 14;

/// What bounds a process's registered memory right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Locking {
    /// Its soft `RLIMIT_MEMLOCK` in bytes (`None`: unlimited).
    pub(super) limit: Option<u64>,
    /// It holds `CAP_IPC_LOCK` (in its effective set, in the daemon's user namespace): no
    /// bound.
    pub(super) ipc_lock: bool,
}

impl Locking {
    /// No bound at all.
    #[cfg(test)]
    pub(super) const UNBOUNDED: Locking = Locking {
        limit: None,
        ipc_lock: true,
    };
}

/// Reads what bounds `peer`'s process, from `/proc`. `Err` says why it cannot be known (the
/// process exited, or `/proc` hides it); the registration is then refused.
pub(super) type LockingReader = Box<dyn Fn(&Peer) -> Result<Locking, String>>;

/// The reader of the running system.
pub(super) fn from_proc() -> LockingReader {
    Box::new(read)
}

/// The pages a region spans: `length` bytes starting `offset` bytes into a page.
pub(super) fn pages(offset: u64, length: u64) -> u64 {
    let page = PAGE_SIZE as u64;
    (offset % page).saturating_add(length).div_ceil(page)
}

/// Checks that `peer`'s process, holding `held` registered pages, may register `more`.
pub(super) fn check(locking: Locking, peer: &Peer, held: u64, more: u64) -> Result<(), Refusal> {
    let Some(limit) = locking.limit.filter(|_| !locking.ipc_lock) else {
        return Ok(());
    };
    let how = "raise it with `ulimit -l`, LimitMEMLOCK= in its service or /etc/security/limits.conf, or give it CAP_IPC_LOCK";
    if limit == 0 {
        // The kernel's can_do_mlock(): no limit to stay under and no capability.
        return Err(Refusal::new(
            libc::EPERM,
            format!(
                "memory lock limit exceeded (RLIMIT_MEMLOCK 0): pid {} (uid {}) may not register memory, as on a kernel RDMA device; {how}",
                peer.pid, peer.uid
            ),
        ));
    }
    let page = PAGE_SIZE as u64;
    let total = held.saturating_add(more);
    if total > limit / page {
        return Err(Refusal::new(
            libc::ENOMEM,
            format!(
                "memory lock limit exceeded (RLIMIT_MEMLOCK {} KiB): registering {} KiB more would make pid {} (uid {}) hold {} KiB of registered memory, more than a process without CAP_IPC_LOCK may, as on a kernel RDMA device; {how}",
                limit / 1024,
                more * page / 1024,
                peer.pid,
                peer.uid,
                total * page / 1024
            ),
        ));
    }
    Ok(())
}

/// When process `pid` started, from `/proc/<pid>/stat`.
pub(super) fn start_time(pid: i32) -> Option<u64> {
    if pid <= 0 {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

/// What bounds `peer`'s process now.
fn read(peer: &Peer) -> Result<Locking, String> {
    let pid = peer.pid;
    let gone = || {
        format!(
            "the process that opened the device (pid {pid}) has exited: a process registers memory on the connections it opened itself"
        )
    };
    let started = peer.start_time.ok_or_else(|| {
        format!("cannot tell process {pid} apart in /proc, so its memory lock limit is unknown")
    })?;
    let proc = |file: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/{file}"))
            .map_err(|e| format!("cannot read /proc/{pid}/{file} for its memory lock limit: {e}"))
    };
    let limits = proc("limits")?;
    let status = proc("status")?;
    let uid_map = proc("uid_map")?;
    // Read last: if the process is still the one that connected now, the files read
    // before were its own.
    if start_time(pid) != Some(started) {
        return Err(gone());
    }
    let limit = parse_memlock(&limits)
        .ok_or_else(|| format!("no memory lock limit in /proc/{pid}/limits"))?;
    let eff = parse_cap_eff(&status)
        .ok_or_else(|| format!("no effective capabilities in /proc/{pid}/status"))?;
    let same_namespace = std::fs::read_to_string("/proc/self/uid_map").ok() == Some(uid_map);
    Ok(Locking {
        limit,
        ipc_lock: same_namespace && eff & (1 << CAP_IPC_LOCK) != 0,
    })
}

/// The soft "Max locked memory" of a `/proc/<pid>/limits` (`Some(None)`: unlimited).
fn parse_memlock(limits: &str) -> Option<Option<u64>> {
    let rest = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max locked memory"))?;
    match rest.split_whitespace().next()? {
        "unlimited" => Some(None),
        n => n.parse().ok().map(Some),
    }
}

/// The effective capability set of a `/proc/<pid>/status`.
fn parse_cap_eff(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// Field 22 (`starttime`) of a `/proc/<pid>/stat`. The command name (field 2) may hold
/// spaces and parentheses: the fields after it start after its last `)`.
fn parse_start_time(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    // Field 3 (the state) is the first after the name.
    after.split_whitespace().nth(22 - 3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> Peer {
        Peer {
            pid: 4321,
            uid: 1000,
            gid: 1000,
            groups: Vec::new(),
            start_time: Some(7),
        }
    }

    fn limited(bytes: u64) -> Locking {
        Locking {
            limit: Some(bytes),
            ipc_lock: false,
        }
    }

    #[test]
    fn a_region_counts_the_pages_it_spans() {
        assert_eq!(pages(0, 1), 1);
        assert_eq!(pages(0, 4096), 1);
        assert_eq!(pages(4095, 2), 2);
        assert_eq!(pages(8192 + 100, 4096), 2);
        assert_eq!(pages(0, 8 << 20), 2048);
    }

    #[test]
    fn registered_pages_stop_at_the_limit_as_the_kernel_counts_them() {
        // 8 MiB: 2048 pages.
        let l = limited(8 << 20);
        assert_eq!(check(l, &peer(), 0, 2048), Ok(()));
        assert_eq!(check(l, &peer(), 2000, 48), Ok(()));
        let e = check(l, &peer(), 2000, 49).unwrap_err();
        assert_eq!(e.errno, libc::ENOMEM);
        assert!(
            e.message.starts_with(
                "memory lock limit exceeded (RLIMIT_MEMLOCK 8192 KiB): registering 196 KiB more would make pid 4321 (uid 1000) hold 8196 KiB"
            ),
            "{e}"
        );
        assert!(e.message.contains("ulimit -l"), "{e}");
        // A limit that is not a whole number of pages rounds down, as the kernel's does.
        assert!(check(limited(4096 + 4095), &peer(), 1, 1).is_err());
    }

    #[test]
    fn no_limit_means_no_registration_and_the_capability_lifts_the_bound() {
        let e = check(limited(0), &peer(), 0, 1).unwrap_err();
        assert_eq!(e.errno, libc::EPERM);
        assert!(
            e.message
                .starts_with("memory lock limit exceeded (RLIMIT_MEMLOCK 0): pid 4321"),
            "{e}"
        );
        let capable = Locking {
            limit: Some(0),
            ipc_lock: true,
        };
        assert_eq!(check(capable, &peer(), u64::MAX / 2, 1 << 40), Ok(()));
        let unlimited = Locking {
            limit: None,
            ipc_lock: false,
        };
        assert_eq!(check(unlimited, &peer(), u64::MAX / 2, 1 << 40), Ok(()));
    }

    #[test]
    fn procs_files_parse() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max processes             63455                63455                processes \n\
                      Max locked memory         8388608              8388608              bytes     \n";
        assert_eq!(parse_memlock(limits), Some(Some(8 << 20)));
        let unlimited =
            "Max locked memory         unlimited            unlimited            bytes\n";
        assert_eq!(parse_memlock(unlimited), Some(None));
        assert_eq!(parse_memlock("Max processes 1 1\n"), None);
        let status = "Name:\tcat\nCapInh:\t0000000000000000\nCapEff:\t0000000000004000\n";
        assert_eq!(parse_cap_eff(status), Some(1 << CAP_IPC_LOCK));
        let stat =
            "4321 (a) b (c)) S 1 4321 4321 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 100";
        assert_eq!(parse_start_time(stat), Some(987654));
        assert_eq!(parse_start_time("4321 (x) S 1"), None);
    }

    #[test]
    fn this_process_reads_as_itself_and_a_stale_start_time_as_gone() {
        let pid = std::process::id() as i32;
        let me = Peer {
            pid,
            start_time: start_time(pid),
            ..peer()
        };
        assert!(me.start_time.is_some());
        let locking = read(&me).unwrap();
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
        assert_eq!(Some(locking.limit), parse_memlock(&limits));
        let stale = Peer {
            start_time: me.start_time.map(|t| t + 1),
            ..me.clone()
        };
        assert!(read(&stale).unwrap_err().contains("has exited"));
        let unknown = Peer {
            start_time: None,
            ..me
        };
        assert!(read(&unknown).is_err());
    }
}
