//! Memory regions: memory the daemon reads and writes directly, without a copy through the
//! application.
//!
//! Two ways to get one:
//!
//! - [`super::Pd::alloc_mr`] allocates fresh memory from a memory file (2 MiB huge pages
//!   when the pool has them, ordinary pages otherwise) and shares it with the daemon.
//! - [`super::Pd::register`] registers memory the application already owns (the drop-in
//!   libibverbs needs this: perftest allocates its own buffers). The pages holding the range
//!   are replaced in place by pages of a new memory file with the same contents
//!   (`mmap(MAP_FIXED)` over the range), and that file is shared with the daemon. The
//!   application keeps using the same addresses; from then on the daemon sees and writes
//!   the very same bytes, even while the application is blocked elsewhere.
//!
//! Pages already moved by an earlier registration stay on their file, so a range that
//! overlaps earlier ones lies on several files: the daemon maps the pieces side by side
//! into one contiguous view (at most [`crate::sys::MAX_FDS`] pieces a region).
//!
//! Trade-offs of the second way, which every software RDMA stack without a kernel driver
//! faces: the whole pages around the range are remapped (other data on those pages moves
//! with them, contents intact); bytes written by another thread *during* the registration
//! copy may be lost. The remapped pages stay shared until the process exits.
//!
//! Shared pages would also be shared with a child after `fork`, heap pages included: the
//! child's allocator and its parent's would then write into each other's memory. So a
//! child gets private copies of them at once, at the same addresses ([`fork`]'s
//! handlers), which is what copy-on-write gives a child of a process using an RDMA NIC;
//! the parent keeps its registrations.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex};

use super::context::Inner;
use super::{Error, Result};
use crate::protocol::{Piece, Reply, Request};
use crate::sys::{self, Mapping};
use xroce_transport::Access;

const PAGE: usize = 4096;
const HUGE_PAGE: usize = 2 << 20;

/// A registered memory region. It keeps its protection domain alive (the domain is
/// deallocated after the region is deregistered, whichever handle is dropped first).
#[derive(Debug)]
pub struct Mr {
    pub(crate) ctx: Arc<Inner>,
    /// Its protection domain (dropped after the region is deregistered).
    pd: super::Pd,
    handle: u32,
    lkey: u32,
    rkey: u32,
    addr: u64,
    len: usize,
    /// Memory this region owns (from `alloc_mr`).
    owned: Option<Mapping>,
}

impl Mr {
    /// The local key (for scatter/gather elements).
    pub fn lkey(&self) -> u32 {
        self.lkey
    }

    /// The remote key (for peers' RDMA operations).
    pub fn rkey(&self) -> u32 {
        self.rkey
    }

    /// The address of the first byte, as work requests and peers name it.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The daemon's handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// Its protection domain.
    pub fn pd(&self) -> &super::Pd {
        &self.pd
    }

    /// Copies `dst.len()` bytes at `offset` out of a region from `alloc_mr`. Returns
    /// `false` if the range is outside it (or the region was registered from existing
    /// memory, which the application reads directly).
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> bool {
        self.owned
            .as_ref()
            .is_some_and(|m| offset + dst.len() <= self.len && m.copy_out(offset, dst))
    }

    /// Copies `src` into a region from `alloc_mr` at `offset`. Returns `false` if the range
    /// is outside it.
    pub fn write(&self, offset: usize, src: &[u8]) -> bool {
        self.owned
            .as_ref()
            .is_some_and(|m| offset + src.len() <= self.len && m.copy_in(offset, src))
    }

    /// The 64-bit word at `offset` (8-byte aligned), read atomically (for atomics targets).
    pub fn load_u64(&self, offset: usize) -> Option<u64> {
        let m = self.owned.as_ref()?;
        (offset + 8 <= self.len)
            .then(|| m.u64_at(offset))?
            .map(|w| w.load(std::sync::atomic::Ordering::Acquire))
    }

    pub(crate) fn alloc(pd: &super::Pd, len: usize, access: Access) -> Result<Mr> {
        let ctx = pd.ctx().clone();
        if len == 0 {
            return Err(Error::Invalid("a memory region needs at least one byte"));
        }
        // Huge pages first; ordinary pages when the pool is short.
        let huge_len = len.div_ceil(HUGE_PAGE) * HUGE_PAGE;
        let (fd, map_len) = match sys::memfd("xroce-mr", huge_len, true) {
            Ok(fd) => (fd, huge_len),
            Err(_) => {
                let l = len.div_ceil(PAGE) * PAGE;
                (sys::memfd("xroce-mr", l, false)?, l)
            }
        };
        let map = Mapping::map(fd.as_fd(), map_len, 0, true)?;
        let addr = map.as_ptr() as u64;
        let (handle, lkey, rkey) = register(&ctx, pd.handle(), &fd, 0, addr, len, access)?;
        Ok(Mr {
            ctx,
            pd: pd.clone(),
            handle,
            lkey,
            rkey,
            addr,
            len,
            owned: Some(map),
        })
    }

    /// # Safety
    ///
    /// `[addr, addr + len)` must be memory of this process that stays mapped, that nothing
    /// else remaps concurrently, and whose pages may be replaced in place (see the module
    /// documentation).
    pub(crate) unsafe fn register_existing(
        pd: &super::Pd,
        addr: *mut u8,
        len: usize,
        iova: u64,
        access: Access,
    ) -> Result<Mr> {
        if len == 0 {
            return Err(Error::Invalid("a memory region needs at least one byte"));
        }
        // Safety: forwarded from the caller.
        let (pieces, start) = unsafe { share_range(addr as usize, len)? };
        let ctx = pd.ctx().clone();
        let req = Request::RegMrPieces {
            pd: pd.handle(),
            iova,
            length: len as u64,
            access: access.bits(),
            start,
            pieces: pieces.iter().map(|(_, p)| *p).collect(),
        };
        let fds: Vec<BorrowedFd<'_>> = pieces.iter().map(|(f, _)| f.as_fd()).collect();
        let (handle, lkey, rkey) = match ctx.call(&req, &fds)?.0 {
            Reply::Mr { mr, lkey, rkey } => (mr, lkey, rkey),
            other => return Err(Error::Protocol(format!("unexpected reply {other:?}"))),
        };
        Ok(Mr {
            ctx,
            pd: pd.clone(),
            handle,
            lkey,
            rkey,
            addr: iova,
            len,
            owned: None,
        })
    }
}

impl Mr {
    /// Re-registers the region (`ibv_rereg_mr`): from now on it covers `[addr, addr +
    /// len)` of this process, seen by peers at `iova`, in protection domain `pd`, with
    /// `access`; its handle and keys stay the same. On error the region is unchanged.
    ///
    /// # Safety
    ///
    /// As for [`super::Pd::register`].
    pub unsafe fn reregister(
        &mut self,
        pd: &super::Pd,
        addr: *mut u8,
        len: usize,
        iova: u64,
        access: Access,
    ) -> Result<()> {
        if len == 0 {
            return Err(Error::Invalid("a memory region needs at least one byte"));
        }
        if self.owned.is_some() && (addr as u64 != self.addr || len != self.len) {
            return Err(Error::Invalid(
                "a region from alloc_mr keeps the memory it was allocated with",
            ));
        }
        // Safety: forwarded from the caller.
        let (pieces, start) = unsafe { share_range(addr as usize, len)? };
        let req = Request::ReregMr {
            mr: self.handle,
            pd: pd.handle(),
            iova,
            length: len as u64,
            access: access.bits(),
            start,
            pieces: pieces.iter().map(|(_, p)| *p).collect(),
        };
        let fds: Vec<BorrowedFd<'_>> = pieces.iter().map(|(f, _)| f.as_fd()).collect();
        match self.ctx.call(&req, &fds)?.0 {
            Reply::Mr { mr, lkey, rkey }
                if (mr, lkey, rkey) == (self.handle, self.lkey, self.rkey) => {}
            other => return Err(Error::Protocol(format!("unexpected reply {other:?}"))),
        }
        self.addr = iova;
        self.len = len;
        self.pd = pd.clone();
        Ok(())
    }
}

fn register(
    ctx: &Inner,
    pd: u32,
    fd: &OwnedFd,
    offset: u64,
    iova: u64,
    len: usize,
    access: Access,
) -> Result<(u32, u32, u32)> {
    let req = Request::RegMr {
        pd,
        iova,
        length: len as u64,
        access: access.bits(),
        offset,
    };
    match ctx.call(&req, &[fd.as_fd()])?.0 {
        Reply::Mr { mr, lkey, rkey } => Ok((mr, lkey, rkey)),
        other => Err(Error::Protocol(format!("unexpected reply {other:?}"))),
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        let _ = self.ctx.call(&Request::DeregMr { mr: self.handle }, &[]);
    }
}

/// Ranges of application memory already moved onto shared memory files: start → (end,
/// file). Never removed: the application keeps using those pages.
static SEGMENTS: Mutex<BTreeMap<usize, (usize, Arc<OwnedFd>)>> = Mutex::new(BTreeMap::new());

/// What `fork` does to the moved pages: the child's become private copies of them as they
/// were at the fork.
///
/// The copies are taken in the parent, before the fork (`prepare`): copied in the child,
/// afterwards, they would race with the parent, which goes on writing the same shared
/// pages (its allocator's among them) while the child copies, and the child's heap would be
/// a torn picture of its parent's. The child moves the copies over the shared pages
/// (`child`); the parent drops them (`parent`).
mod fork {
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use std::os::fd::OwnedFd;
    use std::sync::{Arc, MutexGuard, Once};

    use super::SEGMENTS;

    type Segments = BTreeMap<usize, (usize, Arc<OwnedFd>)>;

    /// A copy of the pages `[start, start + len)`, at `copy`.
    struct Copy {
        start: usize,
        len: usize,
        copy: *mut libc::c_void,
    }

    /// The registry, locked by the thread that forks (no registration moves pages until
    /// the fork is over), and the copies made for the child.
    struct Held {
        segments: MutexGuard<'static, Segments>,
        copies: Vec<Copy>,
    }

    thread_local! {
        static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
    }

    /// Installs the handlers, once per process (the first time pages move).
    pub(super) fn install() {
        static INSTALLED: Once = Once::new();
        INSTALLED.call_once(|| {
            // Safety: the three handlers are `extern "C"` functions with no arguments,
            // valid for the life of the process.
            unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
        });
    }

    extern "C" fn prepare() {
        // NOTE(unwrap): a poisoned registry is still consistent (entries go in whole).
        let segments = SEGMENTS.lock().unwrap_or_else(|e| e.into_inner());
        // Every page still mapped from one of the segments' files, whatever became of the
        // rest of its segment (an application may unmap part of one).
        let files: Vec<(u64, u64)> = segments
            .values()
            .filter_map(|(_, fd)| nix::sys::stat::fstat(fd).ok())
            .map(|st| (st.st_dev, st.st_ino))
            .collect();
        let mut copies = Vec::new();
        if !files.is_empty() {
            let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
            for (start, end, dev, ino) in super::mappings(&maps) {
                if files.contains(&(dev, ino)) {
                    // Safety: `[start, end)` is mapped, readable memory of this process
                    // (the kernel says so).
                    if let Some(copy) = unsafe { snapshot(start, end - start) } {
                        copies.push(Copy {
                            start,
                            len: end - start,
                            copy,
                        });
                    }
                }
            }
        }
        HELD.with(|h| *h.borrow_mut() = Some(Held { segments, copies }));
    }

    extern "C" fn parent() {
        HELD.with(|h| {
            if let Some(held) = h.borrow_mut().take() {
                for c in held.copies {
                    // Safety: a copy this handler's `prepare` mapped, used by nobody.
                    unsafe { libc::munmap(c.copy, c.len) };
                }
            }
        });
    }

    extern "C" fn child() {
        HELD.with(|h| {
            let Some(mut held) = h.borrow_mut().take() else {
                return;
            };
            for c in &held.copies {
                // Safety: moves the copy's pages over the shared ones (the kernel unmaps
                // those): the parent's contents at the fork, at the same addresses, private
                // from now on. The child runs one thread, so nothing uses them meanwhile.
                let moved = unsafe {
                    libc::mremap(
                        c.copy,
                        c.len,
                        c.len,
                        libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                        c.start as *mut libc::c_void,
                    )
                };
                if moved == libc::MAP_FAILED {
                    // Safety: the copy is ours and unused.
                    unsafe { libc::munmap(c.copy, c.len) };
                }
            }
            held.copies.clear();
            // The child's registrations are its own to make; these files are the parent's.
            held.segments.clear();
        });
    }

    /// A private copy of `len` bytes at `start`, in pages of its own.
    ///
    /// # Safety
    ///
    /// `[start, start + len)` is page-aligned, mapped and readable.
    unsafe fn snapshot(start: usize, len: usize) -> Option<*mut libc::c_void> {
        // Safety: a fresh anonymous mapping, placed by the kernel.
        let copy = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if copy == libc::MAP_FAILED {
            return None;
        }
        // Safety: both ranges are `len` bytes of mapped memory and do not overlap (the
        // copy is a new mapping).
        unsafe { std::ptr::copy_nonoverlapping(start as *const u8, copy.cast::<u8>(), len) };
        Some(copy)
    }
}

/// Forgets the segments overlapping `[start, end)` whose pages are no longer their files'
/// (the application unmapped them, by `free` or `munmap`, and the addresses may hold other
/// memory now): a registration there moves the pages afresh instead of naming a file the
/// application does not see.
fn forget_unmapped(
    segments: &mut BTreeMap<usize, (usize, Arc<OwnedFd>)>,
    start: usize,
    end: usize,
) {
    let overlapping: Vec<usize> = segments
        .range(..end)
        .filter(|(_, (e, _))| *e > start)
        .map(|(&s, _)| s)
        .collect();
    if overlapping.is_empty() {
        return;
    }
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    for s in overlapping {
        if let Some((e, fd)) = segments.get(&s)
            && !still_mapped(&maps, s, *e, fd)
        {
            segments.remove(&s);
        }
    }
}

/// The mappings of `/proc/self/maps` text `maps`, in address order: start, end, and the
/// device and inode of the file behind (0 and 0 for anonymous memory).
fn mappings(maps: &str) -> impl Iterator<Item = (usize, usize, u64, u64)> + '_ {
    maps.lines().filter_map(|line| {
        let mut fields = line.split_whitespace();
        let range = fields.next()?;
        let _perms = fields.next()?;
        let _offset = fields.next()?;
        let dev = fields.next()?;
        let inode = fields.next()?.parse::<u64>().ok()?;
        let (a, b) = range.split_once('-')?;
        let (a, b) = (
            usize::from_str_radix(a, 16).ok()?,
            usize::from_str_radix(b, 16).ok()?,
        );
        let (major, minor) = dev.split_once(':')?;
        let dev = libc::makedev(
            u32::from_str_radix(major, 16).ok()?,
            u32::from_str_radix(minor, 16).ok()?,
        );
        Some((a, b, dev, inode))
    })
}

/// Whether `[start, end)` is wholly mapped from the file `fd`, by the process's
/// `/proc/self/maps` text `maps`.
fn still_mapped(maps: &str, start: usize, end: usize, fd: &OwnedFd) -> bool {
    let Ok(stat) = nix::sys::stat::fstat(fd) else {
        return false;
    };
    let mut covered = start;
    for (a, b, dev, ino) in mappings(maps) {
        if b <= covered {
            continue;
        }
        if a > covered {
            // A hole (the lines come in address order).
            return false;
        }
        if (dev, ino) != (stat.st_dev, stat.st_ino) {
            return false;
        }
        covered = b;
        if covered >= end {
            return true;
        }
    }
    false
}

/// An earlier segment: its start and its file.
type Held = (usize, Arc<OwnedFd>);

/// The memory files behind the pages holding `[addr, addr + len)`, in order: pieces of the
/// files of earlier registrations where the range lies on pages already shared, and new
/// files for the pages not shared yet (moved onto them in place). Returns the pieces with
/// their files, and where `addr` lies in the first piece.
///
/// # Safety
///
/// As for [`Mr::register_existing`].
unsafe fn share_range(addr: usize, len: usize) -> Result<(Vec<(OwnedFd, Piece)>, u64)> {
    let start = addr - addr % PAGE;
    let end = (addr + len).div_ceil(PAGE) * PAGE;
    // NOTE(unwrap): a poisoned registry only means a panic elsewhere; its contents are
    // still consistent (entries are inserted whole).
    fork::install();
    let mut segments = SEGMENTS.lock().unwrap_or_else(|e| e.into_inner());
    forget_unmapped(&mut segments, start, end);
    // The plan first: (from, to, the segment already holding it), so a range that needs
    // too many pieces is refused before any page moves.
    let mut plan: Vec<(usize, usize, Option<Held>)> = Vec::new();
    let mut pos = start;
    while pos < end {
        if let Some((&s, (e, fd))) = segments.range(..=pos).next_back()
            && pos < *e
        {
            let to = (*e).min(end);
            plan.push((pos, to, Some((s, fd.clone()))));
            pos = to;
        } else {
            let to = segments
                .range(pos..)
                .next()
                .map_or(end, |(&s, _)| s.min(end));
            plan.push((pos, to, None));
            pos = to;
        }
    }
    if plan.len() > sys::MAX_FDS {
        return Err(Error::Invalid(
            "the range lies on more memory files than one request can carry",
        ));
    }
    let mut pieces = Vec::with_capacity(plan.len());
    for (from, to, held) in plan {
        let (fd, offset) = match held {
            Some((s, fd)) => (fd, from - s),
            None => {
                // Safety: forwarded from the caller; `[from, to)` is inside the range's
                // pages and on no earlier segment.
                let fd = Arc::new(unsafe { move_onto_file(from, to)? });
                segments.insert(from, (to, fd.clone()));
                (fd, 0)
            }
        };
        let piece = Piece {
            offset: offset as u64,
            len: (to - from) as u64,
        };
        pieces.push((fd.try_clone()?, piece));
    }
    Ok((pieces, (addr - start) as u64))
}

/// Moves the pages `[start, end)` onto a new memory file with the same contents, mapped
/// over them in place, and returns the file.
///
/// # Safety
///
/// `[start, end)` is page-aligned, mapped memory of this process that nothing else remaps
/// concurrently.
unsafe fn move_onto_file(start: usize, end: usize) -> Result<OwnedFd> {
    let size = end - start;
    let fd = sys::memfd("xroce-app-mr", size, false)?;
    // Copy the current contents into the file, then map the file over the range.
    // Safety: the caller guarantees the range is mapped memory of this process.
    let current = unsafe { std::slice::from_raw_parts(start as *const u8, size) };
    let mut written = 0;
    while written < size {
        let n = nix::sys::uio::pwrite(&fd, &current[written..], written as i64)
            .map_err(|e| std::io::Error::from_raw_os_error(e as i32))?;
        if n == 0 {
            return Err(Error::Io(std::io::Error::other(
                "short write copying a region",
            )));
        }
        written += n;
    }
    let length = std::num::NonZeroUsize::new(size).ok_or(Error::Invalid("empty range"))?;
    let at = std::num::NonZeroUsize::new(start).ok_or(Error::Invalid("null address"))?;
    // Safety: MAP_FIXED replaces exactly the pages the caller handed us, with a file
    // holding the same bytes; Rust objects in those pages keep their contents.
    unsafe {
        nix::sys::mman::mmap(
            Some(at),
            length,
            nix::sys::mman::ProtFlags::PROT_READ | nix::sys::mman::ProtFlags::PROT_WRITE,
            nix::sys::mman::MapFlags::MAP_SHARED | nix::sys::mman::MapFlags::MAP_FIXED,
            &fd,
            0,
        )
    }
    .map_err(|e| std::io::Error::from_raw_os_error(e as i32))?;
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment whose pages the application unmapped is forgotten: registering memory
    /// mapped there later moves the new pages, it does not name the old file.
    #[test]
    fn pages_unmapped_since_their_registration_are_moved_afresh() {
        let len = 2 * PAGE;
        let map = || {
            // Safety: a fresh anonymous mapping.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(p, libc::MAP_FAILED);
            p
        };
        let area = map();
        let at = area as usize;
        // Safety: our pages.
        let (first, _) = unsafe { share_range(at, len) }.unwrap();
        // The application frees them (munmap), and new memory comes at the same place.
        // Safety: ours.
        assert_eq!(unsafe { libc::munmap(area, len) }, 0);
        // Safety: a fixed anonymous mapping where ours was.
        let again = unsafe {
            libc::mmap(
                area,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        assert_eq!(again, area);
        // Safety: the new pages, ours.
        unsafe { std::ptr::write_bytes(area.cast::<u8>(), 0x77, len) };
        // Safety: our pages.
        let (second, _) = unsafe { share_range(at, len) }.unwrap();
        let ino = |fd: &OwnedFd| nix::sys::stat::fstat(fd).unwrap().st_ino;
        assert_ne!(ino(&first[0].0), ino(&second[0].0), "a new file");
        let mut seen = [0u8; 4];
        nix::sys::uio::pread(&second[0].0, &mut seen, 0).unwrap();
        assert_eq!(seen, [0x77; 4], "with the new pages' contents");
        // Safety: ours.
        unsafe { libc::munmap(area, len) };
    }

    /// Memory moved onto a shared file stays the parent's alone after a fork: the child
    /// writes into its own copy (before the fork handlers, the two shared the pages, and a
    /// child's allocator corrupted its parent's heap).
    #[test]
    fn a_child_writes_into_its_own_copy_of_registered_pages() {
        // Pages of our own, so that nothing else lives on them.
        let len = 4 * PAGE;
        // Safety: a fresh anonymous mapping.
        let area = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(area, libc::MAP_FAILED);
        let at = area as usize;
        // Safety: `area` is `len` bytes we just mapped.
        let bytes = unsafe { std::slice::from_raw_parts_mut(area.cast::<u8>(), len) };
        bytes.fill(0x5a);
        // Safety: our pages, touched by nothing else.
        let (pieces, _) = unsafe { share_range(at + 100, 2 * PAGE) }.unwrap();
        assert_eq!(pieces.len(), 1);
        assert!(bytes.iter().all(|&b| b == 0x5a), "contents kept");
        // The application unmaps part of the moved pages (a `free` may): the rest must
        // still become the child's own.
        // Safety: the third page of the area we mapped.
        let third = unsafe { area.cast::<u8>().add(2 * PAGE) };
        // Safety: that page, no longer used below.
        assert_eq!(unsafe { libc::munmap(third.cast(), PAGE) }, 0);
        let bytes = &mut bytes[..2 * PAGE];
        // Safety: the child only writes its memory and exits (no locks, no allocation).
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // Safety: in the child, one page into the area we mapped.
            let second = unsafe { area.cast::<u8>().add(PAGE) };
            // Safety: a page of the moved pages, ours to write.
            unsafe { std::ptr::write_bytes(second, 0xee, PAGE) };
            // Safety: leave at once, without the parent's atexit handlers.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // Safety: our child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            bytes.iter().all(|&b| b == 0x5a),
            "the child's write reached the parent"
        );
        // The parent's pages are still the file's: the daemon's view of them.
        let mut seen = [0u8; 16];
        nix::sys::uio::pread(&pieces[0].0, &mut seen, 0).unwrap();
        assert_eq!(seen, [0x5a; 16]);
        bytes[PAGE] = 1;
        nix::sys::uio::pread(&pieces[0].0, &mut seen[..1], PAGE as i64).unwrap();
        assert_eq!(
            seen[0], 1,
            "the parent still shares its pages with the file"
        );
    }
}
