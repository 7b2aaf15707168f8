//! Memory regions as the transport sees them: a table that answers "may this key touch
//! these bytes?" and copies into or out of the region, and the scatter and gather every
//! role copies payloads with.
//!
//! The transport never holds a pointer into application memory. It asks a [`MemoryTable`]
//! to check a key against the protection domain, the access rights and the bounds of its
//! region, and to copy. The engine implements the table over shared hugepage memory; tests,
//! the simulation and the fuzz targets use `Regions`, the plain in-process table of the
//! `testing` module. Both find a region their own way and then ask the one check of this
//! module, [`check_access`], whether the access may go: what the simulation tests is what
//! the daemon runs.
//!
//! Every access is bounds- and rights-checked: a violation is an error that the transport
//! turns into a NAK or a local completion error, never an out-of-range write.
//!
//! The roles copy payloads with `gather` (the requester from a send work request's data,
//! the responder from a region for a READ response) and `scatter` (the responder into a
//! receive work request or a region, the completer into a READ's or an atomic's local
//! buffer), so that a payload placed at an offset of its message is placed one way.

use crate::attributes::Access;
use crate::wqe::{Gather, SgeList};

/// A protection domain, as a number the owner of the table chose.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PdId(pub u32);

/// Which key space a key comes from: an lkey in a local work request, or an rkey in a
/// request from the peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// An lkey, named by the local application in a scatter/gather element.
    Local,
    /// An rkey, named by the remote peer in a RETH, AtomicETH or IETH.
    Remote,
}

/// A key and the protection domain of the queue pair that uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyRef {
    /// The lkey or rkey.
    pub key: u32,
    /// Which key space `key` is from.
    pub kind: KeyKind,
    /// The protection domain of the queue pair using the key; the region must be in it.
    pub pd: PdId,
}

/// An atomic operation on 8 bytes of a region (IBTA 9.4.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// Compare and swap: if the value equals `compare`, store `swap`.
    CompareSwap {
        /// The value to compare with.
        compare: u64,
        /// The value stored when the comparison succeeds.
        swap: u64,
    },
    /// Fetch and add: store the value plus `add` (wrapping).
    FetchAdd {
        /// The addend.
        add: u64,
    },
}

impl AtomicOp {
    /// The value stored for an original value `orig`.
    pub fn apply(self, orig: u64) -> u64 {
        match self {
            AtomicOp::CompareSwap { compare, swap } => {
                if orig == compare {
                    swap
                } else {
                    orig
                }
            }
            AtomicOp::FetchAdd { add } => orig.wrapping_add(add),
        }
    }
}

/// Why a memory access was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    /// No region has this key.
    #[error("no memory region has key {0:#x}")]
    UnknownKey(u32),
    /// The region exists but belongs to another protection domain.
    #[error("memory region with key {0:#x} belongs to another protection domain")]
    WrongPd(u32),
    /// The region does not grant the rights the access needs.
    #[error("memory region with key {key:#x} does not grant {needed:?}")]
    AccessDenied {
        /// The key.
        key: u32,
        /// The rights the access needed.
        needed: Access,
    },
    /// The range is not entirely inside the region.
    #[error("range [{addr:#x}, +{len}) is outside the memory region with key {key:#x}")]
    OutOfBounds {
        /// The key.
        key: u32,
        /// The first address of the range.
        addr: u64,
        /// The length of the range.
        len: u64,
    },
    /// An atomic address that is not 8-byte aligned.
    #[error("atomic address {0:#x} is not 8-byte aligned")]
    Misaligned(u64),
}

/// The table of memory regions the transport reads from and writes into.
///
/// Implementations check the key, the protection domain, the rights and the bounds on every
/// call, and copy only inside the region. A zero-length access still checks the key.
pub trait MemoryTable {
    /// Checks that `[addr, addr + len)` may be accessed with `needed` rights through `key`.
    fn check(&self, key: KeyRef, addr: u64, len: u64, needed: Access) -> Result<(), MemoryError>;

    /// Copies `dst.len()` bytes starting at `addr` into `dst`.
    fn read(
        &self,
        key: KeyRef,
        addr: u64,
        dst: &mut [u8],
        needed: Access,
    ) -> Result<(), MemoryError>;

    /// Copies `src` into the region starting at `addr`.
    fn write(
        &mut self,
        key: KeyRef,
        addr: u64,
        src: &[u8],
        needed: Access,
    ) -> Result<(), MemoryError>;

    /// Performs `op` on the 8 bytes at `addr` (which must be 8-byte aligned), atomically with
    /// respect to every other atomic on the table, and returns the original value.
    fn atomic(&mut self, key: KeyRef, addr: u64, op: AtomicOp) -> Result<u64, MemoryError>;

    /// Invalidates a remote key (SEND with invalidate, IBTA 9.4.1.2): later remote accesses
    /// with it fail. Tables that cannot invalidate the key refuse.
    fn invalidate(&mut self, key: KeyRef) -> Result<(), MemoryError>;
}

/// What a memory table knows of one region: the keys that name it, its protection domain,
/// its rights and where it lies. Tables keep their regions as they like and show each one
/// to [`check_access`] as a `KeyEntry`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyEntry {
    /// The key local work requests use.
    pub lkey: u32,
    /// The key the peer uses; `None` once invalidated (SEND with invalidate).
    pub rkey: Option<u32>,
    /// Its protection domain.
    pub pd: PdId,
    /// Its rights.
    pub access: Access,
    /// The address of its first byte, as work requests and the peer name it.
    pub base: u64,
    /// Its length in bytes.
    pub len: u64,
}

impl KeyEntry {
    /// Whether `key` names this region: its lkey for a local key, its rkey (while it is
    /// valid) for a remote one.
    #[inline]
    pub fn answers(&self, key: KeyRef) -> bool {
        match key.kind {
            KeyKind::Local => self.lkey == key.key,
            KeyKind::Remote => self.rkey == Some(key.key),
        }
    }
}

/// One access a memory table is asked for: `len` bytes at `addr` through `key`, with the
/// rights `needed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccessRequest {
    /// The key and the protection domain of the queue pair using it.
    pub key: KeyRef,
    /// The first address.
    pub addr: u64,
    /// The number of bytes (0 still checks the key).
    pub len: u64,
    /// The rights the access needs.
    pub needed: Access,
}

impl AccessRequest {
    /// The access an atomic on the 8 bytes at `addr` needs: `REMOTE_ATOMIC` through an
    /// rkey, `LOCAL_WRITE` through an lkey. A misaligned address is refused before any key
    /// is looked at (IBTA 9.4.5).
    #[inline]
    pub fn atomic(key: KeyRef, addr: u64) -> Result<AccessRequest, MemoryError> {
        if !addr.is_multiple_of(8) {
            return Err(MemoryError::Misaligned(addr));
        }
        let needed = match key.kind {
            KeyKind::Remote => Access::REMOTE_ATOMIC,
            KeyKind::Local => Access::LOCAL_WRITE,
        };
        Ok(AccessRequest {
            key,
            addr,
            len: 8,
            needed,
        })
    }
}

/// The memory-key check, the one every memory table runs: `entry` is the region the table
/// found under the request's key (`None` when it found none). The key must name the region,
/// the region must be in the queue pair's protection domain and grant the rights needed,
/// and the range must lie inside it, checked in that order. Returns the offset of the first
/// byte from the region's start; the range's end is at most the region's length.
#[inline]
pub fn check_access(entry: Option<&KeyEntry>, request: &AccessRequest) -> Result<u64, MemoryError> {
    let AccessRequest {
        key,
        addr,
        len,
        needed,
    } = *request;
    let entry = entry
        .filter(|entry| entry.answers(key))
        .ok_or(MemoryError::UnknownKey(key.key))?;
    if entry.pd != key.pd {
        return Err(MemoryError::WrongPd(key.key));
    }
    if !entry.access.contains(needed) {
        return Err(MemoryError::AccessDenied {
            key: key.key,
            needed,
        });
    }
    let oob = MemoryError::OutOfBounds {
        key: key.key,
        addr,
        len,
    };
    let offset = addr.checked_sub(entry.base).ok_or(oob)?;
    let end = offset.checked_add(len).ok_or(oob)?;
    if end > entry.len {
        return Err(oob);
    }
    Ok(offset)
}

/// The check before invalidating `key.key` as a remote key (SEND with invalidate, IBTA
/// 9.4.1.2), every table's: `entry` is the region the table found under that rkey. The rkey
/// must still name it and the region must be in the queue pair's protection domain. The
/// table then forgets the rkey: later remote accesses with it fail as unknown.
pub fn check_invalidate(entry: Option<&KeyEntry>, key: KeyRef) -> Result<(), MemoryError> {
    let rkey = KeyRef {
        kind: KeyKind::Remote,
        ..key
    };
    let entry = entry
        .filter(|entry| entry.answers(rkey))
        .ok_or(MemoryError::UnknownKey(key.key))?;
    if entry.pd != key.pd {
        return Err(MemoryError::WrongPd(key.key));
    }
    Ok(())
}

/// Where [`gather`] copies from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum GatherFrom<'a> {
    /// A send work request's data: its scatter/gather list (lkeys) or its inline bytes.
    Local(&'a Gather),
    /// The region the peer names by `rkey`, from `va` on (`REMOTE_READ`).
    Remote { rkey: u32, va: u64 },
}

/// Where [`scatter`] copies to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ScatterInto<'a> {
    /// A work request's scatter/gather list, through lkeys (`LOCAL_WRITE`).
    Local(&'a SgeList),
    /// The region the peer names by `rkey`, from `va` on (`REMOTE_WRITE`).
    Remote { rkey: u32, va: u64 },
}

/// Copies bytes `[offset, offset + dst.len())` of `from` into `dst`. A scatter/gather list
/// or inline data shorter than that is an `OutOfBounds` error with key 0.
// Forced inline, as `scatter`: left to the optimizer, the packet path calls it out of line
// and the pipeline benchmark runs about 1 % more instructions (callgrind).
#[inline(always)]
pub(crate) fn gather<M: MemoryTable + ?Sized>(
    mem: &M,
    pd: PdId,
    from: GatherFrom<'_>,
    offset: u64,
    dst: &mut [u8],
) -> Result<(), MemoryError> {
    let too_short = |dst: &[u8]| MemoryError::OutOfBounds {
        key: 0,
        addr: offset,
        len: dst.len() as u64,
    };
    match from {
        GatherFrom::Local(Gather::Inline { len, data }) => {
            let start = offset as usize;
            let end = start + dst.len();
            if end > usize::from(*len) {
                return Err(too_short(dst));
            }
            dst.copy_from_slice(&data[start..end]);
            Ok(())
        }
        GatherFrom::Local(Gather::Sges(list)) => {
            let mut pieces = Pieces::new(list, offset, dst.len());
            for (lkey, addr, range) in &mut pieces {
                mem.read(local(lkey, pd), addr, &mut dst[range], Access::NONE)?;
            }
            if pieces.done == dst.len() {
                Ok(())
            } else {
                Err(too_short(dst))
            }
        }
        GatherFrom::Remote { rkey, va } => mem.read(
            remote(rkey, pd),
            va.wrapping_add(offset),
            dst,
            Access::REMOTE_READ,
        ),
    }
}

/// Copies `src` into `into` starting at byte `offset`. A scatter/gather list shorter than
/// that is an `OutOfBounds` error with key 0 (after the bytes that fit were placed).
// Forced inline: see `gather`.
#[inline(always)]
pub(crate) fn scatter<M: MemoryTable + ?Sized>(
    mem: &mut M,
    pd: PdId,
    into: ScatterInto<'_>,
    offset: u64,
    src: &[u8],
) -> Result<(), MemoryError> {
    match into {
        ScatterInto::Local(list) => {
            let mut pieces = Pieces::new(list, offset, src.len());
            for (lkey, addr, range) in &mut pieces {
                mem.write(local(lkey, pd), addr, &src[range], Access::LOCAL_WRITE)?;
            }
            if pieces.done == src.len() {
                Ok(())
            } else {
                Err(MemoryError::OutOfBounds {
                    key: 0,
                    addr: offset,
                    len: src.len() as u64,
                })
            }
        }
        ScatterInto::Remote { rkey, va } => mem.write(
            remote(rkey, pd),
            va.wrapping_add(offset),
            src,
            Access::REMOTE_WRITE,
        ),
    }
}

/// The shares of a scatter/gather list's elements in bytes `[offset, offset + len)` of a
/// message, in order: `(lkey, address, range of the caller's buffer)`. When the walk ends,
/// `done` is how many bytes the list held (less than `len` when it is too short).
struct Pieces<'a> {
    sges: core::slice::Iter<'a, crate::wqe::Sge>,
    skip: u64,
    len: usize,
    done: usize,
}

impl<'a> Pieces<'a> {
    #[inline]
    fn new(list: &'a SgeList, offset: u64, len: usize) -> Pieces<'a> {
        Pieces {
            sges: list.as_slice().iter(),
            skip: offset,
            len,
            done: 0,
        }
    }
}

impl Iterator for Pieces<'_> {
    type Item = (u32, u64, core::ops::Range<usize>);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        while self.done < self.len {
            let sge = self.sges.next()?;
            let sge_len = u64::from(sge.length);
            if self.skip >= sge_len {
                self.skip -= sge_len;
                continue;
            }
            let n = ((sge_len - self.skip) as usize).min(self.len - self.done);
            // A list from an application may name any address: one that does not fit fails
            // the key's bounds check (saturated), it does not overflow here.
            let piece = (
                sge.lkey,
                sge.addr.saturating_add(self.skip),
                self.done..self.done + n,
            );
            self.done += n;
            self.skip = 0;
            return Some(piece);
        }
        None
    }
}

fn local(key: u32, pd: PdId) -> KeyRef {
    KeyRef {
        key,
        kind: KeyKind::Local,
        pd,
    }
}

fn remote(key: u32, pd: PdId) -> KeyRef {
    KeyRef {
        key,
        kind: KeyKind::Remote,
        pd,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Region, Regions};
    use crate::wqe::Sge;

    const ENTRY: KeyEntry = KeyEntry {
        lkey: 0x100,
        rkey: Some(0x200),
        pd: PdId(1),
        access: Access::REMOTE_WRITE,
        base: 0x1000,
        len: 64,
    };

    fn request(key: u32, kind: KeyKind, addr: u64, len: u64, needed: Access) -> AccessRequest {
        AccessRequest {
            key: KeyRef {
                key,
                kind,
                pd: PdId(1),
            },
            addr,
            len,
            needed,
        }
    }

    #[test]
    fn check_access_refuses_key_pd_rights_and_bounds_in_that_order() {
        let w = Access::REMOTE_WRITE;
        let ok = request(0x200, KeyKind::Remote, 0x1010, 8, w);
        assert_eq!(check_access(Some(&ENTRY), &ok), Ok(0x10));
        assert_eq!(check_access(None, &ok), Err(MemoryError::UnknownKey(0x200)));
        // A region the key does not name, as a table's bad lookup would hand over.
        let lkey_as_rkey = request(0x100, KeyKind::Remote, 0x1010, 8, w);
        assert_eq!(
            check_access(Some(&ENTRY), &lkey_as_rkey),
            Err(MemoryError::UnknownKey(0x100))
        );
        let invalidated = KeyEntry {
            rkey: None,
            ..ENTRY
        };
        assert_eq!(
            check_access(Some(&invalidated), &ok),
            Err(MemoryError::UnknownKey(0x200))
        );
        let other_pd = KeyEntry {
            pd: PdId(2),
            access: Access::NONE,
            ..ENTRY
        };
        assert_eq!(
            check_access(Some(&other_pd), &ok),
            Err(MemoryError::WrongPd(0x200))
        );
        let read = request(0x200, KeyKind::Remote, 0x2000, 8, Access::REMOTE_READ);
        assert_eq!(
            check_access(Some(&ENTRY), &read),
            Err(MemoryError::AccessDenied {
                key: 0x200,
                needed: Access::REMOTE_READ,
            })
        );
        // The last byte, one past it, one before the start, a wrapping range, and the
        // empty range at the end.
        let at =
            |addr, len| check_access(Some(&ENTRY), &request(0x200, KeyKind::Remote, addr, len, w));
        assert_eq!(at(0x103f, 1), Ok(0x3f));
        assert!(matches!(
            at(0x103f, 2),
            Err(MemoryError::OutOfBounds { .. })
        ));
        assert!(matches!(at(0xfff, 1), Err(MemoryError::OutOfBounds { .. })));
        assert!(matches!(
            at(u64::MAX, 2),
            Err(MemoryError::OutOfBounds { .. })
        ));
        assert_eq!(at(0x1040, 0), Ok(0x40));
        // Through the lkey, local read needs no right.
        let local = request(0x100, KeyKind::Local, 0x1000, 64, Access::NONE);
        assert_eq!(check_access(Some(&ENTRY), &local), Ok(0));
    }

    #[test]
    fn atomics_are_aligned_before_anything_else() {
        let key = KeyRef {
            key: 0x200,
            kind: KeyKind::Remote,
            pd: PdId(1),
        };
        assert_eq!(
            AccessRequest::atomic(key, 0x1004),
            Err(MemoryError::Misaligned(0x1004))
        );
        let request = AccessRequest::atomic(key, 0x1008).unwrap();
        assert_eq!((request.len, request.needed), (8, Access::REMOTE_ATOMIC));
        let local = KeyRef {
            kind: KeyKind::Local,
            ..key
        };
        assert_eq!(
            AccessRequest::atomic(local, 0x1008).map(|r| r.needed),
            Ok(Access::LOCAL_WRITE)
        );
    }

    #[test]
    fn invalidation_needs_the_rkey_and_the_pd() {
        let key = KeyRef {
            key: 0x200,
            kind: KeyKind::Remote,
            pd: PdId(1),
        };
        assert_eq!(check_invalidate(Some(&ENTRY), key), Ok(()));
        let lkey = KeyRef { key: 0x100, ..key };
        assert_eq!(
            check_invalidate(Some(&ENTRY), lkey),
            Err(MemoryError::UnknownKey(0x100))
        );
        let other = KeyRef { pd: PdId(2), ..key };
        assert_eq!(
            check_invalidate(Some(&ENTRY), other),
            Err(MemoryError::WrongPd(0x200))
        );
    }

    fn regions() -> Regions {
        let mut t = Regions::new();
        t.insert(Region {
            lkey: 1,
            rkey: Some(2),
            pd: PdId(1),
            access: Access::ALL,
            base: 0x1000,
            bytes: (0..64).collect(),
        });
        t
    }

    fn list(sges: &[(u64, u32)]) -> SgeList {
        let sges: Vec<Sge> = sges
            .iter()
            .map(|&(addr, length)| Sge {
                addr,
                length,
                lkey: 1,
            })
            .collect();
        SgeList::from_slice(&sges).unwrap()
    }

    #[test]
    fn gather_and_scatter_cross_element_boundaries_at_an_offset() {
        let mut t = regions();
        let pd = PdId(1);
        // Elements of 4, 2 and 8 bytes: bytes 3..9 of the message are 0x03, 0x20, 0x21,
        // 0x30, 0x31, 0x32.
        let sges = list(&[(0x1000, 4), (0x1020, 2), (0x1030, 8)]);
        let mut dst = [0u8; 6];
        gather(&t, pd, GatherFrom::Local(&Gather::Sges(sges)), 3, &mut dst).unwrap();
        assert_eq!(dst, [0x03, 0x20, 0x21, 0x30, 0x31, 0x32]);
        scatter(&mut t, pd, ScatterInto::Local(&sges), 3, &[0xa0; 6]).unwrap();
        let bytes = &t.region(0).bytes;
        assert_eq!(&bytes[2..5], &[0x02, 0xa0, 0x04]);
        assert_eq!(&bytes[0x20..0x23], &[0xa0, 0xa0, 0x22]);
        assert_eq!(&bytes[0x2f..0x34], &[0x2f, 0xa0, 0xa0, 0xa0, 0x33]);
        // Past the end of the list: an error, not a short copy.
        let mut long = [0u8; 12];
        assert!(matches!(
            gather(&t, pd, GatherFrom::Local(&Gather::Sges(sges)), 3, &mut long),
            Err(MemoryError::OutOfBounds { key: 0, .. })
        ));
        assert!(matches!(
            scatter(&mut t, pd, ScatterInto::Local(&sges), 13, &[0; 2]),
            Err(MemoryError::OutOfBounds { key: 0, .. })
        ));
    }

    /// An element an application placed at the very top of the address space: the offset
    /// into it does not overflow, and the access fails the key's bounds.
    #[test]
    fn an_element_at_the_top_of_the_address_space_is_refused_not_overflowed() {
        let mut t = regions();
        let pd = PdId(1);
        let sges = list(&[(u64::MAX - 2, 8)]);
        let mut dst = [0u8; 4];
        assert!(matches!(
            gather(&t, pd, GatherFrom::Local(&Gather::Sges(sges)), 4, &mut dst),
            Err(MemoryError::OutOfBounds { .. } | MemoryError::UnknownKey(_))
        ));
        assert!(scatter(&mut t, pd, ScatterInto::Local(&sges), 4, &[0; 4]).is_err());
    }

    #[test]
    fn gather_and_scatter_reach_regions_through_rkeys_and_inline_data() {
        let mut t = regions();
        let pd = PdId(1);
        scatter(
            &mut t,
            pd,
            ScatterInto::Remote {
                rkey: 2,
                va: 0x1008,
            },
            2,
            &[9, 9],
        )
        .unwrap();
        assert_eq!(&t.region(0).bytes[0x09..0x0c], &[0x09, 9, 9]);
        let mut dst = [0u8; 3];
        gather(
            &t,
            pd,
            GatherFrom::Remote {
                rkey: 2,
                va: 0x1009,
            },
            0,
            &mut dst,
        )
        .unwrap();
        assert_eq!(dst, [0x09, 9, 9]);
        // The lkey is not an rkey.
        assert_eq!(
            scatter(
                &mut t,
                pd,
                ScatterInto::Remote {
                    rkey: 1,
                    va: 0x1000
                },
                0,
                &[1]
            ),
            Err(MemoryError::UnknownKey(1))
        );
        let inline = Gather::inline(b"hello").unwrap();
        let mut dst = [0u8; 3];
        gather(&t, pd, GatherFrom::Local(&inline), 2, &mut dst).unwrap();
        assert_eq!(&dst, b"llo");
        assert!(gather(&t, pd, GatherFrom::Local(&inline), 3, &mut dst).is_err());
    }
}
