//! Memory regions: registration, re-registration and deregistration, and the mapping of
//! the memory files an application sends.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use verbs_shm::protocol::{Piece, Reply, Request};
use verbs_shm::sys::{self, Mapping};
use xroce_transport::{Access, PdId};

use super::memlock;
use super::registry::{MrInfo, Object};
use super::{Control, Refusal};
use crate::memory::Region;
use crate::poller::Command;

/// Where the memory of a region to register is.
#[derive(Debug)]
pub(super) enum Memory {
    /// At `offset` of one memory file.
    File { offset: u64 },
    /// `start` bytes into `pieces` of several memory files, mapped side by side.
    Pieces { start: u64, pieces: Vec<Piece> },
}

impl Memory {
    /// The pages a region of `length` bytes on this memory spans.
    fn pages(&self, length: u64) -> u64 {
        let offset = match self {
            Memory::File { offset } => *offset,
            Memory::Pieces { start, .. } => *start,
        };
        memlock::pages(offset, length)
    }

    /// The memory areas its mapping takes (one per memory file).
    fn areas(&self) -> usize {
        match self {
            Memory::File { .. } => 1,
            Memory::Pieces { pieces, .. } => pieces.len(),
        }
    }
}

/// What `ibv_reg_mr` and `ibv_rereg_mr` ask for.
#[derive(Debug)]
struct Registration {
    /// The region to replace (`ibv_rereg_mr`).
    existing: Option<u32>,
    pd: u32,
    iova: u64,
    length: u64,
    access: u32,
    memory: Memory,
}

impl Registration {
    /// The registration a request asks for, if it asks for one.
    fn of(request: Request) -> Option<Registration> {
        let new = |existing, pd, iova, length, access, memory| Registration {
            existing,
            pd,
            iova,
            length,
            access,
            memory,
        };
        let file = |offset| Memory::File { offset };
        let pieces = |start, pieces| Memory::Pieces { start, pieces };
        Some(match request {
            Request::RegMr {
                pd,
                iova,
                length,
                access,
                offset,
            } => new(None, pd, iova, length, access, file(offset)),
            Request::RegMrPieces {
                pd,
                iova,
                length,
                access,
                start,
                pieces: p,
            } => new(None, pd, iova, length, access, pieces(start, p)),
            Request::ReregMr {
                mr,
                pd,
                iova,
                length,
                access,
                start,
                pieces: p,
            } => new(Some(mr), pd, iova, length, access, pieces(start, p)),
            _ => return None,
        })
    }
}

impl Control {
    /// `ibv_reg_mr` (a new region, handle and keys) and `ibv_rereg_mr`: the region behind
    /// the handle it names is replaced in one step on its poller, keeping the handle and
    /// keys (as verbs does). Within the application's limit of registered bytes, and the
    /// pages its process registered on all its connections within that process's
    /// `RLIMIT_MEMLOCK` ([`memlock`]).
    pub(super) fn register_mr(
        &mut self,
        id: u64,
        request: Request,
        fds: Vec<OwnedFd>,
    ) -> Result<Reply, Refusal> {
        let r = Registration::of(request)
            .ok_or_else(|| Refusal::invalid("not a registration of memory"))?;
        let max_bytes = self.registry.limits.max_mr_bytes;
        let c = self.registry.conn(id);
        let old = match r.existing {
            Some(mr) => {
                let info = c
                    .mrs
                    .get(&mr)
                    .ok_or_else(|| Refusal::invalid("no such memory region"))?;
                Some((mr, *info))
            }
            None => {
                self.registry.room_for(id, Object::Mr)?;
                None
            }
        };
        c.pd(r.pd)?;
        if r.length == 0 {
            return Err(Refusal::invalid("a memory region needs at least one byte"));
        }
        let replaced = old.map_or(0, |(_, info)| info.len);
        let bytes = (c.mr_bytes - replaced).saturating_add(r.length);
        if bytes > max_bytes {
            return Err(Refusal::new(
                libc::ENOMEM,
                format!(
                    "{bytes} bytes of registered memory would exceed this application's limit of {max_bytes} ({} MiB; raise it with xroced --max-mr-mib, or `max_mr_mib = ...` in xroced's configuration file)",
                    max_bytes >> 20
                ),
            ));
        }
        let pages = r.memory.pages(r.length);
        let peer = self.registry.conn(id).peer.clone();
        let locking = (self.registry.locking)(&peer).map_err(|why| {
            Refusal::new(
                libc::EPERM,
                format!("memory lock limit unknown, so no registration: {why}"),
            )
        })?;
        let held = self.registry.pages_of_process(&peer) - old.map_or(0, |(_, info)| info.pages);
        memlock::check(locking, &peer, held, pages)?;
        let areas = r.memory.areas();
        self.registry.map_room(id, areas)?;
        let (map, start) = map_region(fds, r.memory, r.length)?;
        let (handle, lkey, rkey) = match old {
            Some((mr, info)) => (mr, info.lkey, info.rkey),
            None => (
                self.registry.handle(),
                self.registry.key(),
                self.registry.key(),
            ),
        };
        let region = Region {
            map,
            start,
            iova: r.iova,
            len: r.length,
            access: Access::from_bits(r.access),
            pd: PdId(r.pd),
            lkey,
            rkey: Some(rkey),
        };
        let poller = self.registry.conn(id).poller;
        let answer = if old.is_some() {
            self.ask(poller, |tx| Command::ReregMr(region, tx))
        } else {
            self.ask(poller, |tx| Command::RegMr(region, tx))
        };
        if let Err(refusal) = answer.and_then(|r| r.map_err(Refusal::invalid)) {
            if old.is_none() {
                self.registry.release_keys(lkey, rkey);
            }
            return Err(refusal);
        }
        let c = self.registry.conn_mut(id);
        c.mrs.insert(
            handle,
            MrInfo {
                lkey,
                rkey,
                len: r.length,
                pages,
                areas,
                pd: r.pd,
            },
        );
        c.mr_bytes = bytes;
        c.mr_pages = c.mr_pages - old.map_or(0, |(_, info)| info.pages) + pages;
        Ok(Reply::Mr {
            mr: handle,
            lkey,
            rkey,
        })
    }

    /// `ibv_dereg_mr`.
    pub(super) fn dereg_mr(&mut self, id: u64, mr: u32) -> Result<Reply, Refusal> {
        let c = self.registry.conn_mut(id);
        let info = c
            .mrs
            .remove(&mr)
            .ok_or_else(|| Refusal::invalid("no such memory region"))?;
        c.mr_bytes -= info.len;
        c.mr_pages -= info.pages;
        let poller = c.poller;
        self.pollers[poller].call(|tx| Command::DeregMr(info.lkey, tx));
        self.registry.release_keys(info.lkey, info.rkey);
        Ok(Reply::Done)
    }
}

/// Maps the memory behind a region of `length` bytes: the mapping and where the region
/// starts in it.
fn map_region(
    fds: Vec<OwnedFd>,
    memory: Memory,
    length: u64,
) -> Result<(Arc<Mapping>, usize), Refusal> {
    match memory {
        Memory::File { offset } => map_file(fds, offset, length),
        Memory::Pieces { start, pieces } => map_pieces(fds, start, &pieces, length),
    }
}

/// The size of a memory file an application sent.
fn file_size(fd: &OwnedFd) -> Result<u64, Refusal> {
    sys::sealed_size(fd).map_err(|e| Refusal::invalid(format!("memory file refused: {e}")))
}

fn map_refused(e: std::io::Error) -> Refusal {
    Refusal::new(libc::ENOMEM, format!("cannot map the region: {e}"))
}

/// `length` bytes at `offset` of the one memory file in `fds`.
fn map_file(
    mut fds: Vec<OwnedFd>,
    offset: u64,
    length: u64,
) -> Result<(Arc<Mapping>, usize), Refusal> {
    if fds.len() != 1 {
        return Err(Refusal::invalid(
            "registering memory needs exactly one memory file",
        ));
    }
    let fd = fds.remove(0);
    let size = file_size(&fd)?;
    if offset.checked_add(length).is_none_or(|end| end > size) {
        return Err(Refusal::invalid("the region lies outside its memory file"));
    }
    let page = sys::PAGE_SIZE as u64;
    let map_offset = offset - offset % page;
    let delta = offset - map_offset;
    let map_len = (delta + length).div_ceil(page) * page;
    let map_len = map_len.min(size - map_offset);
    let map = Mapping::map(fd.as_fd(), map_len as usize, map_offset, true).map_err(map_refused)?;
    Ok((Arc::new(map), delta as usize))
}

/// `length` bytes from `start` bytes into `pieces` (whole pages of the memory files in
/// `fds`, one each), mapped side by side.
fn map_pieces(
    fds: Vec<OwnedFd>,
    start: u64,
    pieces: &[Piece],
    length: u64,
) -> Result<(Arc<Mapping>, usize), Refusal> {
    if pieces.is_empty() || pieces.len() > sys::MAX_FDS || fds.len() != pieces.len() {
        return Err(Refusal::invalid(format!(
            "a region needs 1 to {} pieces, each with its memory file",
            sys::MAX_FDS
        )));
    }
    let page = sys::PAGE_SIZE as u64;
    let mut total = 0u64;
    let mut parts = Vec::with_capacity(pieces.len());
    for (fd, p) in fds.iter().zip(pieces) {
        if p.len == 0 || !p.offset.is_multiple_of(page) || !p.len.is_multiple_of(page) {
            return Err(Refusal::invalid("pieces are whole pages"));
        }
        let size = file_size(fd)?;
        if p.offset.checked_add(p.len).is_none_or(|end| end > size) {
            return Err(Refusal::invalid("a piece lies outside its memory file"));
        }
        let (Ok(len), Some(sum)) = (usize::try_from(p.len), total.checked_add(p.len)) else {
            return Err(Refusal::invalid("the pieces are too long"));
        };
        total = sum;
        parts.push((fd.as_fd(), p.offset, len));
    }
    if start.checked_add(length).is_none_or(|end| end > total) {
        return Err(Refusal::invalid("the region lies outside its pieces"));
    }
    let map = Mapping::map_pieces(&parts, true).map_err(map_refused)?;
    Ok((Arc::new(map), start as usize))
}

#[cfg(test)]
mod tests {
    use verbs_shm::protocol::Request;

    use super::*;
    use crate::control::fake::{FakeHost, Fixture, refused};
    use crate::control::memlock::Locking;
    use crate::control::{Answer, AppLimits};

    /// An application with these limits and a protection domain.
    fn app(limits: AppLimits) -> (Fixture, u32) {
        let mut fx = Fixture::with(limits, FakeHost::default());
        let pd = fx.pd();
        (fx, pd)
    }

    #[test]
    fn a_region_gets_two_random_keys_and_reaches_its_poller() {
        let (mut fx, pd) = app(AppLimits::default());
        let before = fx.commands();
        let Ok(Reply::Mr { lkey, rkey, .. }) = fx.reg_mr(pd, 2) else {
            panic!("not registered");
        };
        assert_ne!(lkey, rkey);
        assert_eq!(fx.commands(), before + 1);
        let state = fx.poller.state();
        let Some(Command::RegMr(region, _)) = state.commands.last() else {
            panic!("no RegMr");
        };
        assert_eq!(
            (region.lkey, region.rkey, region.len),
            (lkey, Some(rkey), 8192)
        );
    }

    #[test]
    fn registered_bytes_and_regions_stop_at_their_limits() {
        let limits = AppLimits {
            max_mr_bytes: 3 * sys::PAGE_SIZE as u64,
            max_mrs: 2,
            ..AppLimits::default()
        };
        let (mut fx, pd) = app(limits);
        let before = fx.commands();
        refused(fx.reg_mr(pd, 4), libc::ENOMEM, "--max-mr-mib");
        assert_eq!(fx.commands(), before, "a refusal never reaches the poller");
        let first = fx.mr(pd);
        fx.mr(pd);
        refused(
            fx.reg_mr(pd, 1),
            libc::ENOMEM,
            "already has 2 memory regions",
        );
        // Deregistration gives the bytes and the count back.
        assert_eq!(fx.ask(Request::DeregMr { mr: first }), Ok(Reply::Done));
        assert!(fx.reg_mr(pd, 2).is_ok());
        refused(
            fx.ask(Request::DeregMr { mr: first }),
            libc::EINVAL,
            "no such memory region",
        );
    }

    #[test]
    fn regions_stay_within_the_applications_share_of_the_map_budget() {
        let (mut fx, pd) = app(AppLimits::default());
        // A share of 2: the post-bits page and one region.
        fx.control.registry.map_budget = 8;
        fx.mr(pd);
        refused(fx.reg_mr(pd, 1), libc::ENOMEM, "would pass its share of 2");
        // The daemon's whole budget counts every application's mappings.
        fx.control.registry.map_budget = 400;
        fx.control.registry.live_areas = || 400;
        refused(
            fx.reg_mr(pd, 1),
            libc::ENOMEM,
            "the daemon has 400 memory mappings",
        );
    }

    #[test]
    fn memory_that_cannot_back_the_region_is_refused() {
        let (mut fx, pd) = app(AppLimits::default());
        let page = sys::PAGE_SIZE as u64;
        let file = || sys::memfd("test-mr", 2 * sys::PAGE_SIZE, false).unwrap();
        let pieces = |start, length, pieces: Vec<Piece>| Request::RegMrPieces {
            pd,
            iova: 0,
            length,
            access: 0,
            start,
            pieces,
        };
        let whole = Piece {
            offset: 0,
            len: 2 * page,
        };
        let cases = [
            (pieces(0, page, vec![whole]), 0, "each with its memory file"),
            (
                pieces(
                    0,
                    page,
                    vec![Piece {
                        offset: 0,
                        len: 100,
                    }],
                ),
                1,
                "pieces are whole pages",
            ),
            (
                pieces(
                    0,
                    page,
                    vec![Piece {
                        offset: page,
                        len: 2 * page,
                    }],
                ),
                1,
                "a piece lies outside its memory file",
            ),
            (pieces(page, 2 * page, vec![whole]), 1, "outside its pieces"),
            (pieces(0, 0, vec![whole]), 1, "at least one byte"),
        ];
        for (request, files, words) in cases {
            let fds = (0..files).map(|_| file()).collect();
            refused(fx.ask_with(request, fds), libc::EINVAL, words);
        }
        let one_file = Request::RegMr {
            pd,
            iova: 0,
            length: 3 * page,
            access: 0,
            offset: 0,
        };
        refused(
            fx.ask_with(one_file, vec![file()]),
            libc::EINVAL,
            "outside its memory file",
        );
        assert!(fx.control.registry.conn(fx.id).mrs.is_empty());
    }

    #[test]
    fn reregistration_keeps_the_handle_and_keys() {
        let (mut fx, pd) = app(AppLimits::default());
        let Ok(Reply::Mr { mr, lkey, rkey }) = fx.reg_mr(pd, 1) else {
            panic!("not registered");
        };
        let page = sys::PAGE_SIZE as u64;
        let rereg = |mr| Request::ReregMr {
            mr,
            pd,
            iova: 0,
            length: 2 * page,
            access: 0,
            start: 0,
            pieces: vec![Piece {
                offset: 0,
                len: 2 * page,
            }],
        };
        let file = || vec![sys::memfd("test-mr", 2 * sys::PAGE_SIZE, false).unwrap()];
        let again = fx.ask_with(rereg(mr), file()).map(|a| a.reply);
        assert_eq!(again, Ok(Reply::Mr { mr, lkey, rkey }));
        assert_eq!(fx.control.registry.conn(fx.id).mr_bytes, 2 * page);
        refused(
            fx.ask_with(rereg(mr + 1), file()),
            libc::EINVAL,
            "no such memory region",
        );
    }

    /// A bound of `pages` pages on the process of every connection, as `/proc` would
    /// report it.
    fn memlock(fx: &mut Fixture, pages: Option<u64>) {
        let locking = Locking {
            limit: pages.map(|p| p * sys::PAGE_SIZE as u64),
            ipc_lock: false,
        };
        fx.control.registry.locking = Box::new(move |_| Ok(locking));
    }

    #[test]
    fn a_process_registers_no_more_than_its_memory_lock_limit_on_all_its_connections() {
        let (mut fx, pd) = app(AppLimits::default());
        memlock(&mut fx, Some(4));
        let first = fx.mr(pd);
        assert!(fx.reg_mr(pd, 2).is_ok());
        let before = fx.commands();
        refused(
            fx.reg_mr(pd, 2),
            libc::ENOMEM,
            "memory lock limit exceeded (RLIMIT_MEMLOCK 16 KiB): registering 8 KiB more would make pid 1",
        );
        assert_eq!(fx.commands(), before, "a refusal never reaches the poller");
        // Another connection of the same process shares the bound.
        let (other, _app) = Fixture::connect(&mut fx.control);
        let version = verbs_shm::contract::VERSION;
        assert!(
            fx.control
                .handle(other, Request::Hello { version }, Vec::new())
                .is_ok()
        );
        let Ok(Answer {
            reply: Reply::Pd { pd: theirs },
            ..
        }) = fx.control.handle(other, Request::AllocPd, Vec::new())
        else {
            panic!("no PD");
        };
        let page = sys::PAGE_SIZE;
        let one_page = |pd| {
            let request = Request::RegMr {
                pd,
                iova: 0,
                length: page as u64,
                access: 0,
                offset: 0,
            };
            (request, vec![sys::memfd("test-mr", page, false).unwrap()])
        };
        let (request, fds) = one_page(theirs);
        assert!(fx.control.handle(other, request, fds).is_ok());
        let (request, fds) = one_page(theirs);
        refused(
            fx.control.handle(other, request, fds),
            libc::ENOMEM,
            "hold 20 KiB",
        );
        // Deregistration gives the pages back.
        assert_eq!(fx.ask(Request::DeregMr { mr: first }), Ok(Reply::Done));
        let (request, fds) = one_page(theirs);
        assert!(fx.control.handle(other, request, fds).is_ok());
        // A process of another pid has a bound of its own.
        let stranger = crate::control::Peer {
            pid: 2,
            ..crate::control::Peer::default()
        };
        let (id, _app) = Fixture::connect_as(&mut fx.control, stranger);
        assert!(
            fx.control
                .handle(id, Request::Hello { version }, Vec::new())
                .is_ok()
        );
        let Ok(Answer {
            reply: Reply::Pd { pd: its },
            ..
        }) = fx.control.handle(id, Request::AllocPd, Vec::new())
        else {
            panic!("no PD");
        };
        let (request, fds) = one_page(its);
        assert!(fx.control.handle(id, request, fds).is_ok());
    }

    #[test]
    fn reregistration_counts_the_new_pages_instead_of_the_old() {
        let (mut fx, pd) = app(AppLimits::default());
        memlock(&mut fx, Some(3));
        let Ok(Reply::Mr { mr, .. }) = fx.reg_mr(pd, 2) else {
            panic!("not registered");
        };
        let page = sys::PAGE_SIZE as u64;
        let rereg = |pages: u64| {
            let request = Request::ReregMr {
                mr,
                pd,
                iova: 0,
                length: pages * page,
                access: 0,
                start: 0,
                pieces: vec![Piece {
                    offset: 0,
                    len: pages * page,
                }],
            };
            let fds = vec![sys::memfd("test-mr", (pages * page) as usize, false).unwrap()];
            (request, fds)
        };
        let (request, fds) = rereg(3);
        assert!(fx.ask_with(request, fds).is_ok(), "3 pages replace 2");
        let (request, fds) = rereg(4);
        refused(fx.ask_with(request, fds), libc::ENOMEM, "hold 16 KiB");
        assert_eq!(fx.control.registry.conn(fx.id).mr_pages, 3);
    }

    #[test]
    fn no_memory_lock_limit_or_an_unknown_one_registers_nothing() {
        let (mut fx, pd) = app(AppLimits::default());
        memlock(&mut fx, Some(0));
        refused(
            fx.reg_mr(pd, 1),
            libc::EPERM,
            "memory lock limit exceeded (RLIMIT_MEMLOCK 0)",
        );
        fx.control.registry.locking = Box::new(|_| Err("the process has exited".into()));
        refused(fx.reg_mr(pd, 1), libc::EPERM, "the process has exited");
        // The capability, or no limit, lifts the bound.
        fx.control.registry.locking = Box::new(|_| {
            Ok(Locking {
                limit: Some(0),
                ipc_lock: true,
            })
        });
        assert!(fx.reg_mr(pd, 64).is_ok());
        memlock(&mut fx, None);
        assert!(fx.reg_mr(pd, 64).is_ok());
        assert!(fx.control.registry.conn(fx.id).mrs.len() == 2);
    }

    #[test]
    fn the_pollers_refusal_or_absence_leaves_no_region() {
        let (mut fx, pd) = app(AppLimits::default());
        fx.poller.state().refuse = Some("overlapping keys".into());
        refused(fx.reg_mr(pd, 1), libc::EINVAL, "overlapping keys");
        fx.poller.state().refuse = None;
        fx.poller.state().stopped = true;
        refused(fx.reg_mr(pd, 1), libc::EIO, "the poller stopped");
        let c = fx.control.registry.conn(fx.id);
        assert!(c.mrs.is_empty());
        assert_eq!(c.mr_bytes, 0);
    }
}
