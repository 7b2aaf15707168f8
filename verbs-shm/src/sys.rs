//! The system calls both sides of the contract need: shared memory (`memfd`, `mmap`, seals),
//! file descriptor passing over the control socket (`SCM_RIGHTS`), eventfds, and the
//! daemon's control socket address.
//!
//! This module holds the crate's `unsafe` code for memory mappings; every other module uses
//! the safe [`Mapping`] accessors, which check bounds and alignment and touch shared bytes
//! only through atomics (ring words) or through explicit bulk copies (memory regions).

use std::ffi::CString;
use std::io::{self, IoSlice, IoSliceMut};
use std::num::NonZeroUsize;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use nix::fcntl::{FcntlArg, SealFlag, fcntl};
use nix::sys::memfd::{MFdFlags, memfd_create};
use nix::sys::mman::{MapFlags, ProtFlags, mmap, munmap};
use nix::sys::socket::{
    self, AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType,
    UnixAddr,
};

/// The most file descriptors one control message carries.
pub const MAX_FDS: usize = 8;

/// The page size memory files and their mappings are counted in.
pub const PAGE_SIZE: usize = 4096;

fn to_io(e: nix::Error) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// A shared memory mapping, unmapped on drop.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    /// The memory areas (kernel VMAs) it holds: one, or one per piece.
    areas: usize,
}

/// Memory areas held by the live [`Mapping`]s of this process.
static LIVE_AREAS: AtomicUsize = AtomicUsize::new(0);

/// The memory areas (kernel VMAs, of which a process has at most `vm.max_map_count`) that
/// the live [`Mapping`]s of this process hold: what a daemon mapping every application's
/// memory keeps under a budget.
pub fn live_mapping_areas() -> usize {
    LIVE_AREAS.load(Ordering::Relaxed)
}

// Safety: a Mapping is a range of shared memory. It is only read and written through
// atomics and through explicit copies whose races with the other process are part of the
// contract (data in memory regions behaves like DMA).
unsafe impl Send for Mapping {}
// Safety: as above; no method hands out a reference that assumes exclusive access.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` at `offset`, shared, readable and (if `writable`) writable.
    pub fn map(fd: BorrowedFd<'_>, len: usize, offset: u64, writable: bool) -> io::Result<Mapping> {
        let length = NonZeroUsize::new(len)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty mapping"))?;
        let offset = i64::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        let mut prot = ProtFlags::PROT_READ;
        if writable {
            prot |= ProtFlags::PROT_WRITE;
        }
        // Safety: a fresh shared mapping chosen by the kernel (no fixed address), so no
        // existing Rust object is aliased.
        let ptr =
            unsafe { mmap(None, length, prot, MapFlags::MAP_SHARED, fd, offset) }.map_err(to_io)?;
        LIVE_AREAS.fetch_add(1, Ordering::Relaxed);
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
            areas: 1,
        })
    }

    /// Maps `pieces` one after the other into one contiguous range, shared, readable and
    /// (if `writable`) writable: each piece is `len` bytes of its file at `offset`, both
    /// multiples of the page size. A region registered from application memory that lies
    /// on several memory files is seen through such a mapping.
    pub fn map_pieces(
        pieces: &[(BorrowedFd<'_>, u64, usize)],
        writable: bool,
    ) -> io::Result<Mapping> {
        let invalid = |what| io::Error::new(io::ErrorKind::InvalidInput, what);
        let page = PAGE_SIZE as u64;
        let mut total = 0usize;
        for &(_, offset, len) in pieces {
            if len == 0 || !offset.is_multiple_of(page) || !(len as u64).is_multiple_of(page) {
                return Err(invalid("pieces are whole pages"));
            }
            total = total.checked_add(len).ok_or_else(|| invalid("too long"))?;
        }
        let length = NonZeroUsize::new(total).ok_or_else(|| invalid("empty mapping"))?;
        // Reserve the whole range first, inaccessible, so the pieces land side by side.
        // Safety: a fresh anonymous mapping chosen by the kernel aliases nothing.
        let base = unsafe {
            nix::sys::mman::mmap_anonymous(
                None,
                length,
                ProtFlags::PROT_NONE,
                MapFlags::MAP_PRIVATE | MapFlags::MAP_NORESERVE,
            )
        }
        .map_err(to_io)?;
        // From here on, dropping `mapping` unmaps the whole range, pieces included.
        LIVE_AREAS.fetch_add(pieces.len(), Ordering::Relaxed);
        let mapping = Mapping {
            ptr: base.cast(),
            len: total,
            areas: pieces.len(),
        };
        let mut prot = ProtFlags::PROT_READ;
        if writable {
            prot |= ProtFlags::PROT_WRITE;
        }
        let mut at = 0usize;
        for &(fd, offset, len) in pieces {
            let offset = i64::try_from(offset).map_err(|_| invalid("offset too large"))?;
            let addr = NonZeroUsize::new(mapping.ptr.as_ptr() as usize + at)
                .ok_or_else(|| invalid("null address"))?;
            let piece_len = NonZeroUsize::new(len).ok_or_else(|| invalid("empty piece"))?;
            // Safety: MAP_FIXED over pages of the range reserved above, which this mapping
            // owns and nothing references yet.
            unsafe {
                mmap(
                    Some(addr),
                    piece_len,
                    prot,
                    MapFlags::MAP_SHARED | MapFlags::MAP_FIXED,
                    fd,
                    offset,
                )
            }
            .map_err(to_io)?;
            at += len;
        }
        Ok(mapping)
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never: mappings have at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of the first byte in this process.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    fn check(&self, offset: usize, len: usize, align: usize) -> Option<*mut u8> {
        let end = offset.checked_add(len)?;
        if end > self.len || !offset.is_multiple_of(align) {
            return None;
        }
        // Safety: offset + len <= self.len, so the pointer stays inside the mapping.
        Some(unsafe { self.ptr.as_ptr().add(offset) })
    }

    /// The 32-bit atomic word at `offset` (4-byte aligned, inside the mapping).
    pub fn u32_at(&self, offset: usize) -> Option<&AtomicU32> {
        let p = self.check(offset, 4, 4)?;
        // Safety: in bounds and aligned (checked), and the mapping lives as long as the
        // returned reference; AtomicU32 has no invalid bit patterns.
        Some(unsafe { &*(p as *const AtomicU32) })
    }

    /// Reads `dst.len()` bytes (a multiple of 8) at `offset` (8-byte aligned) with relaxed
    /// 64-bit atomic loads. Returns `false` if the range is outside the mapping.
    pub fn load_words(&self, offset: usize, dst: &mut [u8]) -> bool {
        if !dst.len().is_multiple_of(8) {
            return false;
        }
        let Some(p) = self.check(offset, dst.len(), 8) else {
            return false;
        };
        for (i, chunk) in dst.chunks_exact_mut(8).enumerate() {
            // Safety: in bounds and 8-byte aligned (checked above).
            let word = unsafe { &*(p.wrapping_add(i * 8) as *const AtomicU64) };
            chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes());
        }
        true
    }

    /// Writes `src` (a multiple of 8 bytes) at `offset` (8-byte aligned) with relaxed 64-bit
    /// atomic stores. Returns `false` if the range is outside the mapping.
    pub fn store_words(&self, offset: usize, src: &[u8]) -> bool {
        if !src.len().is_multiple_of(8) {
            return false;
        }
        let Some(p) = self.check(offset, src.len(), 8) else {
            return false;
        };
        for (i, chunk) in src.chunks_exact(8).enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(chunk);
            // Safety: in bounds and 8-byte aligned (checked above).
            let word = unsafe { &*(p.wrapping_add(i * 8) as *const AtomicU64) };
            word.store(u64::from_ne_bytes(w), Ordering::Relaxed);
        }
        true
    }

    /// Copies `dst.len()` bytes at `offset` out of the mapping. Returns `false` if the range
    /// is outside it.
    pub fn copy_out(&self, offset: usize, dst: &mut [u8]) -> bool {
        let Some(p) = self.check(offset, dst.len(), 1) else {
            return false;
        };
        // Safety: the source range is inside the mapping (checked) and cannot overlap `dst`,
        // which is ordinary memory borrowed mutably. Concurrent writes by the other process
        // are the documented DMA semantics of memory regions.
        unsafe { std::ptr::copy_nonoverlapping(p, dst.as_mut_ptr(), dst.len()) };
        true
    }

    /// Copies `src` into the mapping at `offset`. Returns `false` if the range is outside it.
    pub fn copy_in(&self, offset: usize, src: &[u8]) -> bool {
        let Some(p) = self.check(offset, src.len(), 1) else {
            return false;
        };
        // Safety: the destination range is inside the mapping (checked) and cannot overlap
        // `src`, which is ordinary memory.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), p, src.len()) };
        true
    }

    /// The 64-bit atomic word at `offset` (8-byte aligned, inside the mapping): for atomic
    /// operations on memory regions.
    pub fn u64_at(&self, offset: usize) -> Option<&AtomicU64> {
        let p = self.check(offset, 8, 8)?;
        // Safety: in bounds and aligned (checked); AtomicU64 has no invalid bit patterns.
        Some(unsafe { &*(p as *const AtomicU64) })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // Safety: the mapping was created by mmap with this address and length, and no
        // reference into it outlives `self` (accessors borrow `self`).
        let _ = unsafe { munmap(self.ptr.cast(), self.len) };
        LIVE_AREAS.fetch_sub(self.areas, Ordering::Relaxed);
    }
}

/// Creates a memory file of `len` bytes, on 2 MiB huge pages when `huge` (failing if the
/// pool is short), sealed against shrinking and growing so the other side can map it
/// without fearing `SIGBUS`.
pub fn memfd(name: &str, len: usize, huge: bool) -> io::Result<OwnedFd> {
    let name =
        CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "name"))?;
    let mut flags = MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING;
    if huge {
        flags |= MFdFlags::MFD_HUGETLB;
    }
    let fd = memfd_create(name.as_c_str(), flags).map_err(to_io)?;
    let size =
        i64::try_from(len).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "size"))?;
    nix::unistd::ftruncate(&fd, size).map_err(to_io)?;
    if huge {
        // Touch nothing yet, but make sure the pool really has the pages: a hugetlb memfd
        // whose pages are missing faults with SIGBUS on first access.
        fallocate_all(&fd, len)?;
    }
    seal(&fd)?;
    Ok(fd)
}

fn fallocate_all(fd: &OwnedFd, len: usize) -> io::Result<()> {
    let len =
        i64::try_from(len).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "size"))?;
    nix::fcntl::fallocate(fd, nix::fcntl::FallocateFlags::empty(), 0, len).map_err(to_io)
}

/// Seals a memory file against shrinking and growing. Further seals can still be added
/// (the daemon makes its wake page read-only for applications that way).
pub fn seal(fd: &impl AsFd) -> io::Result<()> {
    let seals = SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW;
    fcntl(fd.as_fd(), FcntlArg::F_ADD_SEALS(seals)).map_err(to_io)?;
    Ok(())
}

/// The size of a memory file the other side sent, after checking it cannot shrink (else a
/// later `ftruncate` would make our accesses fault).
pub fn sealed_size(fd: &impl AsFd) -> io::Result<u64> {
    let seals = fcntl(fd.as_fd(), FcntlArg::F_GET_SEALS).map_err(to_io)?;
    if SealFlag::from_bits_truncate(seals) & SealFlag::F_SEAL_SHRINK != SealFlag::F_SEAL_SHRINK {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "the memory file is not sealed against shrinking",
        ));
    }
    let stat = nix::sys::stat::fstat(fd.as_fd()).map_err(to_io)?;
    u64::try_from(stat.st_size).map_err(|_| io::Error::other("negative size"))
}

/// Sends one message with file descriptors on a `SOCK_SEQPACKET` socket.
pub fn send_message(sock: BorrowedFd<'_>, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let iov = [IoSlice::new(bytes)];
    let cmsgs: &[ControlMessage<'_>] = if raw.is_empty() {
        &[]
    } else {
        &[ControlMessage::ScmRights(&raw)]
    };
    let sent = socket::sendmsg::<()>(sock.as_raw_fd(), &iov, cmsgs, MsgFlags::MSG_NOSIGNAL, None)
        .map_err(to_io)?;
    if sent != bytes.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "short send on a seqpacket socket",
        ));
    }
    Ok(())
}

/// Receives one message and the file descriptors that came with it. `Ok((0, []))` means
/// the peer hung up. A message or descriptor list too large for the buffers is an error
/// (and the descriptors that did arrive are closed).
pub fn recv_message(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut cmsg = nix::cmsg_space!([RawFd; MAX_FDS]);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = socket::recvmsg::<()>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(to_io)?;
    let mut fds = Vec::new();
    for c in msg.cmsgs().map_err(to_io)? {
        if let ControlMessageOwned::ScmRights(list) = c {
            for fd in list {
                // Safety: the kernel just installed these descriptors in our table for us;
                // nothing else owns them.
                fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
    }
    if msg
        .flags
        .intersects(MsgFlags::MSG_TRUNC | MsgFlags::MSG_CTRUNC)
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "control message truncated",
        ));
    }
    Ok((msg.bytes, fds))
}

/// A non-blocking, close-on-exec eventfd.
pub fn eventfd() -> io::Result<OwnedFd> {
    let fd = nix::sys::eventfd::EventFd::from_flags(
        nix::sys::eventfd::EfdFlags::EFD_CLOEXEC | nix::sys::eventfd::EfdFlags::EFD_NONBLOCK,
    )
    .map_err(to_io)?;
    Ok(OwnedFd::from(fd))
}

/// Adds 1 to an eventfd (wakes its reader). A full counter is not an error: the reader is
/// awake anyway.
pub fn eventfd_signal(fd: BorrowedFd<'_>) {
    let _ = nix::unistd::write(fd, &1u64.to_ne_bytes());
}

/// Reads and resets an eventfd's counter; 0 if nothing was pending.
pub fn eventfd_drain(fd: BorrowedFd<'_>) -> u64 {
    let mut b = [0u8; 8];
    match nix::unistd::read(fd, &mut b) {
        Ok(8) => u64::from_ne_bytes(b),
        _ => 0,
    }
}

/// The prefix of every daemon's control socket in the abstract namespace. Abstract unix
/// sockets belong to a network namespace, so applications see exactly the daemons serving
/// their own namespace.
pub const SOCKET_PREFIX: &str = "xroce/";

fn address(device: &str) -> io::Result<UnixAddr> {
    UnixAddr::new_abstract(format!("{SOCKET_PREFIX}{device}").as_bytes()).map_err(to_io)
}

/// Binds and listens on the control socket of `device` (the daemon side).
pub fn listen(device: &str) -> io::Result<OwnedFd> {
    let fd = socket::socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
    .map_err(to_io)?;
    socket::bind(fd.as_raw_fd(), &address(device)?).map_err(to_io)?;
    socket::listen(&fd, socket::Backlog::new(64).map_err(to_io)?).map_err(to_io)?;
    Ok(fd)
}

/// Accepts a connection (non-blocking listener: `WouldBlock` when none waits).
pub fn accept(listener: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let fd = socket::accept4(listener.as_raw_fd(), SockFlag::SOCK_CLOEXEC).map_err(to_io)?;
    // Safety: accept4 returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Connects to the control socket of `device` (the application side).
pub fn connect(device: &str) -> io::Result<OwnedFd> {
    let fd = socket::socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(to_io)?;
    socket::connect(fd.as_raw_fd(), &address(device)?).map_err(to_io)?;
    Ok(fd)
}

/// The process, user and group of the peer of a unix socket.
pub fn peer_credentials(sock: &impl AsFd) -> io::Result<(i32, u32, u32)> {
    let c = socket::getsockopt(sock, socket::sockopt::PeerCredentials).map_err(to_io)?;
    Ok((c.pid(), c.uid(), c.gid()))
}

/// `SO_PEERGROUPS` (Linux 4.13; the value of every architecture but MIPS and SPARC, which
/// xroce does not build for).
const SO_PEERGROUPS: libc::c_int = 59;

/// The supplementary groups of the peer of a unix socket, as they were when it connected
/// (`SO_PEERGROUPS`): what a device file's group permission would have been checked
/// against when the peer opened it.
pub fn peer_groups(sock: &impl AsFd) -> io::Result<Vec<u32>> {
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let mut len = (groups.len() * size_of::<libc::gid_t>()) as libc::socklen_t;
        // Safety: getsockopt writes at most `len` bytes into `groups`, which holds that
        // many, and stores the length it needs (or wrote) in `len`.
        let r = unsafe {
            libc::getsockopt(
                sock.as_fd().as_raw_fd(),
                libc::SOL_SOCKET,
                SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let needed = len as usize / size_of::<libc::gid_t>();
        if r == 0 {
            groups.truncate(needed);
            return Ok(groups);
        }
        let e = io::Error::last_os_error();
        // ERANGE: more groups than room; `len` says how many. The kernel caps a process at
        // NGROUPS_MAX (65536), so this ends.
        if e.raw_os_error() != Some(libc::ERANGE) || needed <= groups.len() {
            return Err(e);
        }
        groups.resize(needed, 0);
    }
}

/// The devices whose daemons listen in this network namespace, from the calling thread's
/// view of the unix socket table (`/proc/thread-self/net/unix`: a thread that entered
/// another namespace sees that namespace's daemons), sorted by name.
pub fn list_devices() -> io::Result<Vec<String>> {
    let table = std::fs::read_to_string("/proc/thread-self/net/unix")
        .or_else(|_| std::fs::read_to_string("/proc/net/unix"))?;
    let mut devices: Vec<String> = table
        .lines()
        .filter_map(|line| line.split_whitespace().nth(7))
        .filter_map(|path| path.strip_prefix('@')?.strip_prefix(SOCKET_PREFIX))
        .filter(|name| !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned)
        .collect();
    devices.sort();
    devices.dedup();
    Ok(devices)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_of(byte: u8, pages: usize) -> OwnedFd {
        let fd = memfd("test-piece", pages * PAGE_SIZE, false).unwrap();
        let m = Mapping::map(fd.as_fd(), pages * PAGE_SIZE, 0, true).unwrap();
        assert!(m.copy_in(0, &vec![byte; pages * PAGE_SIZE]));
        fd
    }

    #[test]
    fn pieces_of_several_files_are_seen_side_by_side_and_shared() {
        let a = file_of(0xaa, 2);
        let b = file_of(0xbb, 3);
        // The second page of `a`, then the last two pages of `b`.
        let m = Mapping::map_pieces(
            &[
                (a.as_fd(), PAGE_SIZE as u64, PAGE_SIZE),
                (b.as_fd(), PAGE_SIZE as u64, 2 * PAGE_SIZE),
            ],
            true,
        )
        .unwrap();
        assert_eq!(m.len(), 3 * PAGE_SIZE);
        let mut edge = [0u8; 2];
        assert!(m.copy_out(PAGE_SIZE - 1, &mut edge));
        assert_eq!(edge, [0xaa, 0xbb]);
        // Writes reach the files themselves.
        assert!(m.copy_in(PAGE_SIZE, &[1, 2, 3]));
        let direct = Mapping::map(b.as_fd(), 3 * PAGE_SIZE, 0, false).unwrap();
        let mut got = [0u8; 3];
        assert!(direct.copy_out(PAGE_SIZE, &mut got));
        assert_eq!(got, [1, 2, 3]);
    }

    #[test]
    fn pieces_must_be_whole_pages() {
        let a = file_of(0, 1);
        assert!(Mapping::map_pieces(&[(a.as_fd(), 0, 100)], true).is_err());
        assert!(Mapping::map_pieces(&[(a.as_fd(), 8, PAGE_SIZE)], true).is_err());
        assert!(Mapping::map_pieces(&[], true).is_err());
    }

    #[test]
    fn a_peer_is_known_by_its_credentials_and_groups() {
        let (a, b) = socket::socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap();
        let (pid, uid, gid) = peer_credentials(&a).unwrap();
        assert_eq!(pid as u32, std::process::id());
        assert_eq!(uid, nix::unistd::geteuid().as_raw());
        assert_eq!(gid, nix::unistd::getegid().as_raw());
        let mut mine: Vec<u32> = nix::unistd::getgroups()
            .unwrap()
            .iter()
            .map(|g| g.as_raw())
            .collect();
        let mut theirs = peer_groups(&b).unwrap();
        mine.sort_unstable();
        theirs.sort_unstable();
        assert_eq!(theirs, mine);
    }
}
