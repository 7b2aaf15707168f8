//! Memory regions registered by applications: the daemon's implementation of the
//! transport's [`MemoryTable`] over memory files shared with each application.
//!
//! A region is a range of a sealed memory file mapped into the daemon. The transport copies
//! straight between it and packet buffers; atomics use the CPU's 64-bit atomics on the
//! shared mapping, so they are atomic with respect to the application's own atomics too.
//! Keys are random 32-bit numbers (lkey and rkey differ), checked on every use against the
//! protection domain, the access rights and the bounds by the transport's
//! [`check_access`], the check the transport's own tests and simulation run too. Protection
//! domain numbers are unique across applications, so no application's QP can name another
//! application's memory even with a guessed lkey.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use verbs_shm::sys::Mapping;
use xroce_transport::{
    Access, AccessRequest, AtomicOp, KeyEntry, KeyKind, KeyRef, MemoryError, MemoryTable, PdId,
    check_access, check_invalidate,
};

/// One registered region.
#[derive(Debug)]
pub struct Region {
    /// The mapping holding it.
    pub map: Arc<Mapping>,
    /// Where the region starts in the mapping.
    pub start: usize,
    /// The application address of its first byte.
    pub iova: u64,
    /// Its length.
    pub len: u64,
    /// Its rights.
    pub access: Access,
    /// Its protection domain.
    pub pd: PdId,
    /// The local key.
    pub lkey: u32,
    /// The remote key; `None` once invalidated (SEND with invalidate).
    pub rkey: Option<u32>,
}

impl Region {
    /// What [`check_access`] checks an access against.
    fn entry(&self) -> KeyEntry {
        KeyEntry {
            lkey: self.lkey,
            rkey: self.rkey,
            pd: self.pd,
            access: self.access,
            base: self.iova,
            len: self.len,
        }
    }
}

/// The regions of one poller, by key.
#[derive(Debug, Default)]
pub struct MrTable {
    regions: HashMap<u32, Region>,
    by_rkey: HashMap<u32, u32>,
}

/// Why a region cannot be added.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InsertError {
    /// The range does not fit in the mapping.
    #[error("the region does not fit in its memory file")]
    OutOfMapping,
    /// A key is already in use.
    #[error("key collision")]
    KeyInUse,
}

impl MrTable {
    /// An empty table.
    pub fn new() -> MrTable {
        MrTable::default()
    }

    /// Adds a region.
    pub fn insert(&mut self, region: Region) -> Result<(), InsertError> {
        let end = region
            .start
            .checked_add(usize::try_from(region.len).unwrap_or(usize::MAX));
        if end.is_none_or(|e| e > region.map.len()) {
            return Err(InsertError::OutOfMapping);
        }
        let rkey = region.rkey.unwrap_or(region.lkey);
        if self.regions.contains_key(&region.lkey) || self.by_rkey.contains_key(&rkey) {
            return Err(InsertError::KeyInUse);
        }
        if let Some(rkey) = region.rkey {
            self.by_rkey.insert(rkey, region.lkey);
        }
        self.regions.insert(region.lkey, region);
        Ok(())
    }

    /// Removes the region with this lkey.
    pub fn remove(&mut self, lkey: u32) -> Option<Region> {
        let region = self.regions.remove(&lkey)?;
        if let Some(rkey) = region.rkey {
            self.by_rkey.remove(&rkey);
        }
        Some(region)
    }

    /// Whether a key (either kind) is in use.
    pub fn key_in_use(&self, key: u32) -> bool {
        self.regions.contains_key(&key) || self.by_rkey.contains_key(&key)
    }

    /// The number of regions.
    pub fn len(&self) -> usize {
        self.regions.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// The region a key names, if any.
    fn lookup(&self, key: KeyRef) -> Option<&Region> {
        let lkey = match key.kind {
            KeyKind::Local => key.key,
            KeyKind::Remote => *self.by_rkey.get(&key.key)?,
        };
        self.regions.get(&lkey)
    }

    /// The region an access may go to and the mapping offset of its first byte.
    fn find(&self, request: &AccessRequest) -> Result<(&Region, usize), MemoryError> {
        let region = self.lookup(request.key);
        let rel = check_access(region.map(Region::entry).as_ref(), request)?;
        // check_access refuses a request without a region.
        let region = region.ok_or(MemoryError::UnknownKey(request.key.key))?;
        // rel + len <= region.len, and start + region.len fits in the mapping (checked at
        // insert).
        Ok((region, region.start + rel as usize))
    }
}

impl MemoryTable for MrTable {
    fn check(&self, key: KeyRef, addr: u64, len: u64, needed: Access) -> Result<(), MemoryError> {
        let request = AccessRequest {
            key,
            addr,
            len,
            needed,
        };
        self.find(&request).map(|_| ())
    }

    fn read(
        &self,
        key: KeyRef,
        addr: u64,
        dst: &mut [u8],
        needed: Access,
    ) -> Result<(), MemoryError> {
        let request = AccessRequest {
            key,
            addr,
            len: dst.len() as u64,
            needed,
        };
        let (region, at) = self.find(&request)?;
        if region.map.copy_out(at, dst) {
            Ok(())
        } else {
            Err(MemoryError::OutOfBounds {
                key: key.key,
                addr,
                len: dst.len() as u64,
            })
        }
    }

    fn write(
        &mut self,
        key: KeyRef,
        addr: u64,
        src: &[u8],
        needed: Access,
    ) -> Result<(), MemoryError> {
        let request = AccessRequest {
            key,
            addr,
            len: src.len() as u64,
            needed,
        };
        let (region, at) = self.find(&request)?;
        if region.map.copy_in(at, src) {
            Ok(())
        } else {
            Err(MemoryError::OutOfBounds {
                key: key.key,
                addr,
                len: src.len() as u64,
            })
        }
    }

    fn atomic(&mut self, key: KeyRef, addr: u64, op: AtomicOp) -> Result<u64, MemoryError> {
        let (region, at) = self.find(&AccessRequest::atomic(key, addr)?)?;
        // The application address is 8-byte aligned; so is the mapping offset when the
        // region keeps the file's page alignment (it does: regions map whole pages).
        let word = region.map.u64_at(at).ok_or(MemoryError::Misaligned(addr))?;
        // Atomic in memory byte order (little-endian on the hosts xroce runs on), as the
        // application reads it.
        let orig = match op {
            AtomicOp::FetchAdd { add } => word.fetch_add(add, Ordering::AcqRel),
            AtomicOp::CompareSwap { compare, swap } => {
                match word.compare_exchange(compare, swap, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(v) | Err(v) => v,
                }
            }
        };
        Ok(orig)
    }

    fn invalidate(&mut self, key: KeyRef) -> Result<(), MemoryError> {
        let lkey = self.by_rkey.get(&key.key).copied();
        let region = lkey.and_then(|lkey| self.regions.get(&lkey));
        check_invalidate(region.map(Region::entry).as_ref(), key)?;
        self.by_rkey.remove(&key.key);
        if let Some(region) = lkey.and_then(|lkey| self.regions.get_mut(&lkey)) {
            region.rkey = None;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use verbs_shm::sys::memfd;

    fn table() -> (MrTable, Arc<Mapping>) {
        let fd = memfd("mr-test", 8192, false).unwrap();
        let map = Arc::new(Mapping::map(fd.as_fd(), 8192, 0, true).unwrap());
        let mut t = MrTable::new();
        t.insert(Region {
            map: map.clone(),
            start: 4096,
            iova: 0x7000_1000,
            len: 100,
            access: Access::ALL,
            pd: PdId(7),
            lkey: 11,
            rkey: Some(22),
        })
        .unwrap();
        (t, map)
    }

    fn remote(key: u32) -> KeyRef {
        KeyRef {
            key,
            kind: KeyKind::Remote,
            pd: PdId(7),
        }
    }

    #[test]
    fn writes_land_at_the_right_place_and_nowhere_else() {
        let (mut t, map) = table();
        t.write(
            remote(22),
            0x7000_1000 + 10,
            &[1, 2, 3],
            Access::REMOTE_WRITE,
        )
        .unwrap();
        let mut all = vec![0u8; 8192];
        assert!(map.copy_out(0, &mut all));
        assert_eq!(&all[4096 + 10..4096 + 13], &[1, 2, 3]);
        assert_eq!(all.iter().filter(|&&b| b != 0).count(), 3);
        // One byte past the end of the region (still inside the mapping) is refused.
        assert!(matches!(
            t.write(remote(22), 0x7000_1000 + 99, &[1, 2], Access::REMOTE_WRITE),
            Err(MemoryError::OutOfBounds { .. })
        ));
        let other_pd = KeyRef {
            pd: PdId(8),
            ..remote(22)
        };
        assert_eq!(
            t.write(other_pd, 0x7000_1000, &[1], Access::REMOTE_WRITE),
            Err(MemoryError::WrongPd(22))
        );
    }

    #[test]
    fn atomics_and_invalidation() {
        let (mut t, _) = table();
        let fa = AtomicOp::FetchAdd { add: 5 };
        assert_eq!(t.atomic(remote(22), 0x7000_1008, fa), Ok(0));
        assert_eq!(t.atomic(remote(22), 0x7000_1008, fa), Ok(5));
        assert_eq!(
            t.atomic(remote(22), 0x7000_1004, fa),
            Err(MemoryError::Misaligned(0x7000_1004))
        );
        t.invalidate(remote(22)).unwrap();
        assert_eq!(
            t.atomic(remote(22), 0x7000_1008, fa),
            Err(MemoryError::UnknownKey(22))
        );
        let local = KeyRef {
            key: 11,
            kind: KeyKind::Local,
            pd: PdId(7),
        };
        assert!(
            t.check(local, 0x7000_1000, 100, Access::LOCAL_WRITE)
                .is_ok()
        );
    }
}
