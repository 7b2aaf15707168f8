//! Least privilege: the capabilities the daemon keeps after setup, and how it gives up the
//! rest.
//!
//! Setting up takes root, or the capabilities of [`SETUP`]: loading and attaching the XDP
//! program (`CAP_BPF`, `CAP_PERFMON` for the verifier to accept its packet pointer
//! arithmetic, `CAP_NET_ADMIN`; `CAP_SYS_ADMIN` instead of the first two on kernels older
//! than 5.8), AF_XDP sockets (`CAP_NET_RAW`) whose buffers are pinned (`CAP_IPC_LOCK`),
//! and the device node in `/dev` (`CAP_MKNOD`, and `CAP_DAC_OVERRIDE` to write in that
//! root-owned directory; without them the daemon runs without a node). After setup the
//! daemon parses frames from the wire and descriptors from applications for the rest of
//! its life, so it gives all of that up, while it is still one thread (capabilities belong
//! to each thread; every thread started afterwards inherits the result): it becomes a user
//! of its own (`--user`), keeps only [`KEPT`], clears its ambient and inheritable sets
//! and, when it may, its bounding set, sets `PR_SET_NO_NEW_PRIVS` (no program it could run
//! would gain anything) and makes itself non-dumpable (no other process of its user may
//! trace it or read its memory, which maps every application's registered memory).
//!
//! What it still needs, and why:
//!
//! - `CAP_NET_ADMIN`: asking the kernel to resolve a next hop (`RTM_NEWNEIGH` with
//!   `NTF_USE`, what `ip neigh … use` sends) for queue pairs, address handles and rdma_cm's
//!   address resolution threads, whenever a destination is not in the neighbour table yet;
//!   and detaching the XDP program at exit on kernels older than 5.9, which attach it over
//!   netlink rather than with a BPF link.
//!
//! And what it does not, though it goes on doing it:
//!
//! - Detaching the XDP program at exit: it is attached with a BPF link (Linux 5.9+), which
//!   goes when the daemon closes it.
//! - Sending and receiving MADs: QP1 is the daemon's own, over its AF_XDP sockets.
//! - Reading the neighbour and route tables, watching the interface's addresses: rtnetlink
//!   dumps and notifications need no capability.
//! - Hugepages: memory files on hugepages (`MFD_HUGETLB`) need none, and the AF_XDP
//!   buffers were allocated during setup.
//! - Pinning its threads to cores: a process sets its own affinity.
//! - Reading an application's memory lock limit and capabilities: `/proc/<pid>/limits` and
//!   `status` are readable by every user.
//! - Removing the device node: a keeper process does that ([`crate::device_node`]), holding
//!   `CAP_DAC_OVERRIDE` and nothing else, reading nothing but the end of its pipe.

use std::io;

use tracing::{info, warn};

/// A set of capabilities, by bit (`capability.h`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CapSet(pub u64);

impl CapSet {
    /// `CAP_DAC_OVERRIDE`.
    pub const DAC_OVERRIDE: u32 = 1;
    /// `CAP_SETGID`.
    pub const SETGID: u32 = 6;
    /// `CAP_SETUID`.
    pub const SETUID: u32 = 7;
    /// `CAP_SETPCAP`.
    pub const SETPCAP: u32 = 8;
    /// `CAP_NET_ADMIN`.
    pub const NET_ADMIN: u32 = 12;
    /// `CAP_NET_RAW`.
    pub const NET_RAW: u32 = 13;
    /// `CAP_IPC_LOCK`.
    pub const IPC_LOCK: u32 = 14;
    /// `CAP_SYS_ADMIN`.
    pub const SYS_ADMIN: u32 = 21;
    /// `CAP_MKNOD`.
    pub const MKNOD: u32 = 27;
    /// `CAP_PERFMON`.
    pub const PERFMON: u32 = 38;
    /// `CAP_BPF`.
    pub const BPF: u32 = 39;

    /// The set of these capabilities.
    pub const fn of(caps: &[u32]) -> CapSet {
        let mut bits = 0u64;
        let mut i = 0;
        while i < caps.len() {
            bits |= 1 << caps[i];
            i += 1;
        }
        CapSet(bits)
    }

    /// Whether `cap` is in the set.
    pub fn has(self, cap: u32) -> bool {
        cap < 64 && self.0 & (1 << cap) != 0
    }

    /// The capabilities of both sets.
    pub fn and(self, other: CapSet) -> CapSet {
        CapSet(self.0 & other.0)
    }

    /// The capabilities of this set that are not in `other`.
    pub fn without(self, other: CapSet) -> CapSet {
        CapSet(self.0 & !other.0)
    }

    /// Their names, as `capabilities(7)` spells them (`CAP_NET_ADMIN`; `CAP_40` for one
    /// this list does not name).
    pub fn names(self) -> Vec<String> {
        (0..64)
            .filter(|&c| self.has(c))
            .map(|c| match NAMES.get(c as usize) {
                Some(n) => format!("CAP_{n}"),
                None => format!("CAP_{c}"),
            })
            .collect()
    }
}

impl std::fmt::Display for CapSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0 == 0 {
            return f.write_str("none");
        }
        f.write_str(&self.names().join(" "))
    }
}

/// The names of capabilities 0 to 40 (`capability.h`).
const NAMES: [&str; 41] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

/// What setting up takes when the daemon is not started as root (what the shipped service
/// grants it): see the module's documentation.
pub const SETUP: CapSet = CapSet::of(&[
    CapSet::NET_ADMIN,
    CapSet::NET_RAW,
    CapSet::IPC_LOCK,
    CapSet::BPF,
    CapSet::PERFMON,
    CapSet::MKNOD,
    CapSet::DAC_OVERRIDE,
]);

/// Of [`SETUP`], what the daemon cannot start without (`CAP_SYS_ADMIN` stands for
/// `CAP_BPF` and `CAP_PERFMON`); the device node's two may be missing.
pub fn missing_for_setup(held: CapSet) -> CapSet {
    let mut needed = SETUP.without(CapSet::of(&[CapSet::MKNOD, CapSet::DAC_OVERRIDE]));
    if held.has(CapSet::SYS_ADMIN) {
        needed = needed.without(CapSet::of(&[CapSet::BPF, CapSet::PERFMON]));
    }
    needed.without(held)
}

/// What the daemon keeps after setup (see the module's documentation).
pub const KEPT: CapSet = CapSet::of(&[CapSet::NET_ADMIN]);

/// What the device node's keeper keeps: removing the node from `/dev/infiniband`.
pub const KEEPER_KEPT: CapSet = CapSet::of(&[CapSet::DAC_OVERRIDE]);

/// The user a process runs as after setup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// Its uid.
    pub uid: u32,
    /// Its gid.
    pub gid: u32,
    /// How it was named (for the log).
    pub name: String,
}

/// Why privileges could not be given up as asked.
#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    /// The user to become does not exist.
    #[error("no user {0:?} (give a name from the password database, UID or UID:GID)")]
    NoUser(String),
    /// Neither `xroce` nor `nobody` exists to run as.
    #[error("neither a user xroce nor nobody exists to run as after setup: give --user")]
    NoDefaultUser,
    /// Changing user takes root or `CAP_SETUID` and `CAP_SETGID`.
    #[error(
        "cannot become {0} without root or CAP_SETUID and CAP_SETGID (a service manager that starts xroced as its user needs no --user)"
    )]
    CannotSwitch(String),
    /// Other threads run: they would keep what this one gives up.
    #[error("{0} threads run: privileges are given up while the process is one thread")]
    Threads(usize),
    /// A system call failed.
    #[error("{what}: {source}")]
    System {
        /// What was being done.
        what: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
}

fn system(what: &'static str) -> impl FnOnce(io::Error) -> PrivilegeError {
    move |source| PrivilegeError::System { what, source }
}

impl User {
    /// The user `spec` names: a name from the password database (its uid and primary
    /// group), `UID`, or `UID:GID`.
    pub fn resolve(spec: &str) -> Result<User, PrivilegeError> {
        let numbers = spec
            .split_once(':')
            .map_or((spec, None), |(u, g)| (u, Some(g)));
        if let Ok(uid) = numbers.0.parse::<u32>() {
            let gid = match numbers.1 {
                Some(g) => g
                    .parse::<u32>()
                    .map_err(|_| PrivilegeError::NoUser(spec.into()))?,
                None => nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
                    .ok()
                    .flatten()
                    .map_or(uid, |u| u.gid.as_raw()),
            };
            return Ok(User {
                uid,
                gid,
                name: spec.into(),
            });
        }
        let found = nix::unistd::User::from_name(spec)
            .ok()
            .flatten()
            .ok_or_else(|| PrivilegeError::NoUser(spec.into()))?;
        Ok(User {
            uid: found.uid.as_raw(),
            gid: found.gid.as_raw(),
            name: spec.into(),
        })
    }

    /// The user the daemon becomes after setup when started as root and told nothing: a
    /// dedicated `xroce` if the system has one, else `nobody`.
    pub fn default_for_daemon() -> Result<User, PrivilegeError> {
        User::resolve("xroce")
            .or_else(|_| User::resolve("nobody"))
            .map_err(|_| PrivilegeError::NoDefaultUser)
    }

    /// `UID:GID`, as [`User::resolve`] reads it back.
    pub fn numeric(&self) -> String {
        format!("{}:{}", self.uid, self.gid)
    }
}

/// The calling thread's capability sets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caps {
    /// Effective.
    pub effective: CapSet,
    /// Permitted.
    pub permitted: CapSet,
    /// Inheritable.
    pub inheritable: CapSet,
}

/// `capget`/`capset`'s header (`_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

impl Caps {
    /// The calling thread's.
    pub fn current() -> io::Result<Caps> {
        let mut header = CapHeader {
            version: CAPABILITY_VERSION_3,
            pid: 0,
        };
        let mut data = [CapData::default(); 2];
        // Safety: capget writes two `CapData` (version 3) into `data`, which holds two.
        let r = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        let join =
            |f: fn(&CapData) -> u32| CapSet(u64::from(f(&data[0])) | u64::from(f(&data[1])) << 32);
        Ok(Caps {
            effective: join(|d| d.effective),
            permitted: join(|d| d.permitted),
            inheritable: join(|d| d.inheritable),
        })
    }

    /// Makes these the calling thread's sets.
    fn apply(self) -> io::Result<()> {
        let mut header = CapHeader {
            version: CAPABILITY_VERSION_3,
            pid: 0,
        };
        let word = |s: CapSet, high: bool| (if high { s.0 >> 32 } else { s.0 }) as u32;
        let data = [false, true].map(|high| CapData {
            effective: word(self.effective, high),
            permitted: word(self.permitted, high),
            inheritable: word(self.inheritable, high),
        });
        // Safety: capset reads the header and two `CapData` (version 3) from live values.
        let r = unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// `prctl(option, arg)`, its result or the error.
fn prctl(option: libc::c_int, arg: libc::c_ulong) -> io::Result<libc::c_int> {
    // Safety: the options used here take integer arguments only (or, for
    // PR_GET_PDEATHSIG, see `parent_death_signal`).
    let r = unsafe { libc::prctl(option, arg, 0 as libc::c_ulong, 0 as libc::c_ulong, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r)
}

/// The signal the calling thread gets when its parent dies (0: none).
fn parent_death_signal() -> io::Result<libc::c_int> {
    let mut signal: libc::c_int = 0;
    // Safety: PR_GET_PDEATHSIG stores an int at the address given, a live local.
    let r = unsafe { libc::prctl(libc::PR_GET_PDEATHSIG, &mut signal as *mut libc::c_int) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(signal)
}

/// Threads of this process.
fn threads() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(1)
}

/// The highest capability this kernel knows.
fn last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
}

/// What [`drop_to`] left the process with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    /// Its uid and gid.
    pub uid: u32,
    /// Its gid.
    pub gid: u32,
    /// The capabilities it holds (effective and permitted alike).
    pub caps: CapSet,
    /// The capabilities of `keep` it did not have to keep.
    pub missing: CapSet,
}

/// Gives up every privilege but `keep`: becomes `user` (when given: the process must be
/// root, or hold `CAP_SETUID` and `CAP_SETGID`), with no supplementary groups; holds
/// `keep` (those of it it had) as its effective and permitted sets, nothing inheritable or
/// ambient, and when it may (`CAP_SETPCAP`) no more than `keep` in its bounding set; sets
/// `PR_SET_NO_NEW_PRIVS`; becomes non-dumpable. A parent-death signal set by whoever
/// started the process (the kernel clears it when the user changes) is set again. Called
/// while the process is one thread.
pub fn drop_to(user: Option<&User>, keep: CapSet) -> Result<Dropped, PrivilegeError> {
    let n = threads();
    if n > 1 {
        return Err(PrivilegeError::Threads(n));
    }
    let death_signal = parent_death_signal().map_err(system("reading PR_GET_PDEATHSIG"))?;
    let parent = nix::unistd::getppid();
    let before = Caps::current().map_err(system("capget"))?;
    if before.effective.has(CapSet::SETPCAP) {
        for cap in (0..=last_cap()).filter(|&c| !keep.has(c)) {
            // EINVAL: a capability this kernel does not have.
            let _ = prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap));
        }
    }
    if let Some(user) = user {
        let (uid, gid) = (
            nix::unistd::Uid::from_raw(user.uid),
            nix::unistd::Gid::from_raw(user.gid),
        );
        let ids = nix::unistd::getresuid().map_err(|e| system("getresuid")(e.into()))?;
        let gids = nix::unistd::getresgid().map_err(|e| system("getresgid")(e.into()))?;
        let groups = nix::unistd::getgroups().unwrap_or_default();
        let already = [ids.real, ids.effective, ids.saved] == [uid; 3]
            && [gids.real, gids.effective, gids.saved] == [gid; 3]
            && groups.iter().all(|&g| g == gid);
        if !already {
            let can = before.effective.has(CapSet::SETUID) && before.effective.has(CapSet::SETGID);
            if !can {
                return Err(PrivilegeError::CannotSwitch(user.name.clone()));
            }
            // Keep the permitted set across the change of user; the capabilities not
            // kept go just after.
            prctl(libc::PR_SET_KEEPCAPS, 1).map_err(system("PR_SET_KEEPCAPS"))?;
            let nix = |what: &'static str| move |e: nix::Error| system(what)(e.into());
            nix::unistd::setgroups(&[]).map_err(nix("setgroups"))?;
            nix::unistd::setresgid(gid, gid, gid).map_err(nix("setresgid"))?;
            nix::unistd::setresuid(uid, uid, uid).map_err(nix("setresuid"))?;
            prctl(libc::PR_SET_KEEPCAPS, 0).map_err(system("PR_SET_KEEPCAPS"))?;
        }
    }
    let kept = before.permitted.and(keep);
    Caps {
        effective: kept,
        permitted: kept,
        inheritable: CapSet::default(),
    }
    .apply()
    .map_err(system("capset"))?;
    prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
    )
    .map_err(system("clearing the ambient capabilities"))?;
    prctl(libc::PR_SET_NO_NEW_PRIVS, 1).map_err(system("PR_SET_NO_NEW_PRIVS"))?;
    prctl(libc::PR_SET_DUMPABLE, 0).map_err(system("PR_SET_DUMPABLE"))?;
    if death_signal != 0 {
        prctl(libc::PR_SET_PDEATHSIG, death_signal as libc::c_ulong)
            .map_err(system("PR_SET_PDEATHSIG"))?;
        // The parent died while the signal was not armed: as if it had been.
        if nix::unistd::getppid() != parent {
            // Safety: raise has no memory arguments.
            unsafe { libc::raise(death_signal) };
        }
    }
    let after = Caps::current().map_err(system("capget"))?;
    Ok(Dropped {
        uid: nix::unistd::getuid().as_raw(),
        gid: nix::unistd::getgid().as_raw(),
        caps: after.effective,
        missing: keep.without(after.permitted),
    })
}

/// [`drop_to`] for the daemon after setup, logged: what it runs as and holds, and what it
/// lacks of [`KEPT`].
pub fn drop_after_setup(user: Option<&User>) -> Result<Dropped, PrivilegeError> {
    let dropped = drop_to(user, KEPT)?;
    info!(
        "running as uid {} gid {} with {} (and no new privileges)",
        dropped.uid, dropped.gid, dropped.caps
    );
    if dropped.missing.0 != 0 {
        warn!(
            "started without {}: destinations missing from the neighbour table will not be resolved",
            dropped.missing
        );
    }
    Ok(dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_sets_name_their_members() {
        let s = CapSet::of(&[CapSet::NET_ADMIN, CapSet::BPF, 63]);
        assert!(s.has(12) && s.has(39) && !s.has(13));
        assert_eq!(s.names(), ["CAP_NET_ADMIN", "CAP_BPF", "CAP_63"]);
        assert_eq!(KEPT.to_string(), "CAP_NET_ADMIN");
        assert_eq!(CapSet::default().to_string(), "none");
        assert_eq!(
            s.without(KEPT),
            CapSet::of(&[CapSet::BPF, 63]),
            "what is not kept"
        );
        assert_eq!(s.and(KEPT), KEPT);
        // The names are capability.h's, in order.
        assert_eq!(NAMES[CapSet::DAC_OVERRIDE as usize], "DAC_OVERRIDE");
        assert_eq!(NAMES[CapSet::IPC_LOCK as usize], "IPC_LOCK");
        assert_eq!(NAMES[CapSet::MKNOD as usize], "MKNOD");
        assert_eq!(NAMES[CapSet::SYS_ADMIN as usize], "SYS_ADMIN");
    }

    #[test]
    fn setup_takes_bpf_and_perfmon_or_sys_admin_and_keeps_less() {
        assert_eq!(
            SETUP.to_string(),
            "CAP_DAC_OVERRIDE CAP_NET_ADMIN CAP_NET_RAW CAP_IPC_LOCK CAP_MKNOD CAP_PERFMON CAP_BPF"
        );
        assert_eq!(
            KEPT.without(SETUP),
            CapSet::default(),
            "nothing kept is new"
        );
        assert_eq!(missing_for_setup(SETUP), CapSet::default());
        let node_less = SETUP.without(CapSet::of(&[CapSet::MKNOD, CapSet::DAC_OVERRIDE]));
        assert_eq!(missing_for_setup(node_less), CapSet::default());
        let bpf = CapSet::of(&[CapSet::BPF, CapSet::PERFMON]);
        let old_kernel = CapSet(node_less.without(bpf).0 | 1 << CapSet::SYS_ADMIN);
        assert_eq!(missing_for_setup(old_kernel), CapSet::default());
        assert_eq!(
            missing_for_setup(CapSet::of(&[CapSet::NET_ADMIN, CapSet::BPF])).to_string(),
            "CAP_NET_RAW CAP_IPC_LOCK CAP_PERFMON"
        );
    }

    #[test]
    fn users_resolve_by_name_number_or_both() {
        let root = User::resolve("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        let numbers = User::resolve("64000:64001").unwrap();
        assert_eq!((numbers.uid, numbers.gid), (64000, 64001));
        assert_eq!(User::resolve(&numbers.numeric()).unwrap(), numbers);
        // A number alone takes its entry's group, or the same number without one.
        assert_eq!(User::resolve("0").unwrap().gid, 0);
        assert!(matches!(
            User::resolve("no-such-user-xroce"),
            Err(PrivilegeError::NoUser(_))
        ));
        assert!(User::resolve("1:x").is_err());
    }

    #[test]
    fn nothing_is_given_up_while_other_threads_run() {
        let before = Caps::current().unwrap();
        let (stop, wait) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || wait.recv());
        let refused = drop_to(None, CapSet::default());
        assert!(
            matches!(refused, Err(PrivilegeError::Threads(n)) if n >= 2),
            "{refused:?}"
        );
        assert_eq!(Caps::current().unwrap(), before, "nothing changed");
        stop.send(()).unwrap();
        other.join().unwrap().unwrap();
    }

    /// Runs `f` in a forked child (one thread, as the daemon is when it gives up its
    /// privileges) and returns its exit code.
    fn in_child(f: impl FnOnce() -> i32) -> i32 {
        // Safety: the child runs `f` and leaves with _exit, never returning into the test
        // harness; glibc's fork makes its allocator usable in the child.
        match unsafe { libc::fork() } {
            0 => {
                let code = f();
                // Safety: ends the child without running the parent's destructors.
                unsafe { libc::_exit(code) }
            }
            pid if pid > 0 => {
                let mut status = 0;
                // Safety: waits for our own child into a live local.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                libc::WEXITSTATUS(status)
            }
            _ => panic!("fork: {}", io::Error::last_os_error()),
        }
    }

    #[test]
    #[ignore = "needs root: changes user in a forked child"]
    fn root_becomes_the_user_with_what_it_keeps_and_no_way_back() {
        assert!(nix::unistd::geteuid().is_root(), "run as root");
        let user = User::resolve("64000:64001").unwrap();
        let code = in_child(|| {
            let Ok(dropped) = drop_to(Some(&user), KEPT) else {
                return 10;
            };
            let caps = Caps::current().unwrap();
            let ids = nix::unistd::getresuid().unwrap();
            let gids = nix::unistd::getresgid().unwrap();
            let checks = [
                dropped.caps == KEPT && dropped.missing == CapSet::default(),
                caps.effective == KEPT && caps.permitted == KEPT,
                caps.inheritable == CapSet::default(),
                [ids.real, ids.effective, ids.saved]
                    .iter()
                    .all(|u| u.as_raw() == 64000),
                [gids.real, gids.effective, gids.saved]
                    .iter()
                    .all(|g| g.as_raw() == 64001),
                nix::unistd::getgroups().unwrap().is_empty(),
                prctl(libc::PR_GET_NO_NEW_PRIVS, 0).unwrap() == 1,
                prctl(libc::PR_GET_DUMPABLE, 0).unwrap() == 0,
                // The bounding set holds what it kept and nothing more.
                prctl(libc::PR_CAPBSET_READ, CapSet::NET_ADMIN.into()).unwrap() == 1,
                prctl(libc::PR_CAPBSET_READ, CapSet::SYS_ADMIN.into()).unwrap() == 0,
                // No way back to root, nor to another user.
                nix::unistd::setuid(nix::unistd::Uid::from_raw(0)).is_err(),
                matches!(
                    drop_to(Some(&User::resolve("64002").unwrap()), KEPT),
                    Err(PrivilegeError::CannotSwitch(_))
                ),
            ];
            checks
                .iter()
                .position(|ok| !ok)
                .map_or(0, |failed| 20 + failed as i32)
        });
        assert_eq!(code, 0, "10: drop_to failed; 20 + n: check n failed");
    }

    #[test]
    fn this_threads_capabilities_read_as_proc_shows_them() {
        let caps = Caps::current().unwrap();
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let hex = |key: &str| {
            let v = status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .unwrap()
                .trim();
            u64::from_str_radix(v, 16).unwrap()
        };
        assert_eq!(caps.effective.0, hex("CapEff:"));
        assert_eq!(caps.permitted.0, hex("CapPrm:"));
        assert_eq!(caps.inheritable.0, hex("CapInh:"));
    }
}
