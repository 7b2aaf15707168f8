//! Memory regions as the transport sees them: a table that answers "may this key touch
//! these bytes?" and copies into or out of the region.
//!
//! The transport never holds a pointer into application memory. It asks a [`MemoryTable`]
//! to check a key against the protection domain, the access rights and the bounds of its
//! region, and to copy. The engine implements the table over shared hugepage memory; tests,
//! the simulation and the fuzz targets use [`Regions`], a plain in-process table.
//!
//! Every access is bounds- and rights-checked by the table: a violation is an error that the
//! transport turns into a NAK or a local completion error, never an out-of-range write.

use crate::attributes::Access;

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

/// One region of a [`Regions`] table.
#[derive(Clone, Debug)]
pub struct Region {
    /// The key local work requests use.
    pub lkey: u32,
    /// The key the peer uses.
    pub rkey: u32,
    /// Its protection domain.
    pub pd: PdId,
    /// Its rights.
    pub access: Access,
    /// The address of its first byte, as work requests and the peer name it.
    pub base: u64,
    /// Its contents.
    pub bytes: Vec<u8>,
}

impl Region {
    fn range(&self, key: u32, addr: u64, len: u64) -> Result<core::ops::Range<usize>, MemoryError> {
        let oob = MemoryError::OutOfBounds { key, addr, len };
        let start = addr.checked_sub(self.base).ok_or(oob)?;
        let end = start.checked_add(len).ok_or(oob)?;
        if end > self.bytes.len() as u64 {
            return Err(oob);
        }
        // Both fit in usize: end <= bytes.len().
        Ok(start as usize..end as usize)
    }
}

/// A plain in-process [`MemoryTable`]: regions backed by `Vec<u8>`, looked up linearly.
/// Used by unit tests, the deterministic simulation, the fuzz targets and the benchmarks.
#[derive(Clone, Debug, Default)]
pub struct Regions {
    regions: Vec<Region>,
}

impl Regions {
    /// An empty table.
    pub fn new() -> Regions {
        Regions::default()
    }

    /// Adds a region and returns its index.
    pub fn insert(&mut self, region: Region) -> usize {
        self.regions.push(region);
        self.regions.len() - 1
    }

    /// Removes every region with this lkey (deregistration).
    pub fn remove(&mut self, lkey: u32) {
        self.regions.retain(|r| r.lkey != lkey);
    }

    /// Every region, in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = &Region> + '_ {
        self.regions.iter()
    }

    /// The region at `index`.
    pub fn region(&self, index: usize) -> &Region {
        &self.regions[index]
    }

    /// The region at `index`, mutably.
    pub fn region_mut(&mut self, index: usize) -> &mut Region {
        &mut self.regions[index]
    }

    fn find(&self, key: KeyRef, needed: Access) -> Result<usize, MemoryError> {
        let index = self
            .regions
            .iter()
            .position(|r| match key.kind {
                KeyKind::Local => r.lkey == key.key,
                KeyKind::Remote => r.rkey == key.key,
            })
            .ok_or(MemoryError::UnknownKey(key.key))?;
        let region = &self.regions[index];
        if region.pd != key.pd {
            return Err(MemoryError::WrongPd(key.key));
        }
        if !region.access.contains(needed) {
            return Err(MemoryError::AccessDenied {
                key: key.key,
                needed,
            });
        }
        Ok(index)
    }
}

impl MemoryTable for Regions {
    fn invalidate(&mut self, key: KeyRef) -> Result<(), MemoryError> {
        let index = self.find(key, Access::NONE)?;
        let region = &mut self.regions[index];
        region.access = Access::from_bits(region.access.bits() & Access::LOCAL_WRITE.bits());
        Ok(())
    }

    fn check(&self, key: KeyRef, addr: u64, len: u64, needed: Access) -> Result<(), MemoryError> {
        let index = self.find(key, needed)?;
        self.regions[index].range(key.key, addr, len).map(|_| ())
    }

    fn read(
        &self,
        key: KeyRef,
        addr: u64,
        dst: &mut [u8],
        needed: Access,
    ) -> Result<(), MemoryError> {
        let index = self.find(key, needed)?;
        let region = &self.regions[index];
        let range = region.range(key.key, addr, dst.len() as u64)?;
        dst.copy_from_slice(&region.bytes[range]);
        Ok(())
    }

    fn write(
        &mut self,
        key: KeyRef,
        addr: u64,
        src: &[u8],
        needed: Access,
    ) -> Result<(), MemoryError> {
        let index = self.find(key, needed)?;
        let region = &mut self.regions[index];
        let range = region.range(key.key, addr, src.len() as u64)?;
        region.bytes[range].copy_from_slice(src);
        Ok(())
    }

    fn atomic(&mut self, key: KeyRef, addr: u64, op: AtomicOp) -> Result<u64, MemoryError> {
        if !addr.is_multiple_of(8) {
            return Err(MemoryError::Misaligned(addr));
        }
        let needed = match key.kind {
            KeyKind::Remote => Access::REMOTE_ATOMIC,
            KeyKind::Local => Access::LOCAL_WRITE,
        };
        let index = self.find(key, needed)?;
        let region = &mut self.regions[index];
        let range = region.range(key.key, addr, 8)?;
        let mut word = [0u8; 8];
        word.copy_from_slice(&region.bytes[range.clone()]);
        let orig = u64::from_le_bytes(word);
        region.bytes[range].copy_from_slice(&op.apply(orig).to_le_bytes());
        Ok(orig)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Regions {
        let mut t = Regions::new();
        t.insert(Region {
            lkey: 0x100,
            rkey: 0x200,
            pd: PdId(1),
            access: Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            base: 0x1000,
            bytes: vec![0; 64],
        });
        t
    }

    fn remote(key: u32) -> KeyRef {
        KeyRef {
            key,
            kind: KeyKind::Remote,
            pd: PdId(1),
        }
    }

    #[test]
    fn write_inside_the_region_lands() {
        let mut t = table();
        t.write(remote(0x200), 0x1010, &[1, 2, 3], Access::REMOTE_WRITE)
            .unwrap();
        assert_eq!(&t.region(0).bytes[0x10..0x13], &[1, 2, 3]);
    }

    #[test]
    fn every_violation_is_refused_and_nothing_is_written() {
        let mut t = table();
        let w = Access::REMOTE_WRITE;
        assert_eq!(
            t.write(remote(0x201), 0x1000, &[1], w),
            Err(MemoryError::UnknownKey(0x201))
        );
        let wrong_pd = KeyRef {
            pd: PdId(2),
            ..remote(0x200)
        };
        assert_eq!(
            t.write(wrong_pd, 0x1000, &[1], w),
            Err(MemoryError::WrongPd(0x200))
        );
        assert!(matches!(
            t.write(remote(0x200), 0x1000, &[1], Access::REMOTE_READ),
            Err(MemoryError::AccessDenied { .. })
        ));
        // One byte past the end, one byte before the start, and an overflowing range.
        assert!(matches!(
            t.write(remote(0x200), 0x103f, &[1, 2], w),
            Err(MemoryError::OutOfBounds { .. })
        ));
        assert!(matches!(
            t.write(remote(0x200), 0xfff, &[1], w),
            Err(MemoryError::OutOfBounds { .. })
        ));
        assert!(matches!(
            t.check(remote(0x200), u64::MAX, 2, w),
            Err(MemoryError::OutOfBounds { .. })
        ));
        // The lkey does not work as an rkey.
        assert_eq!(
            t.write(remote(0x100), 0x1000, &[1], w),
            Err(MemoryError::UnknownKey(0x100))
        );
        assert!(t.region(0).bytes.iter().all(|&b| b == 0));
    }

    #[test]
    fn atomics_need_alignment_and_rights() {
        let mut t = table();
        let op = AtomicOp::FetchAdd { add: 1 };
        assert_eq!(
            t.atomic(remote(0x200), 0x1004, op),
            Err(MemoryError::Misaligned(0x1004))
        );
        assert!(matches!(
            t.atomic(remote(0x200), 0x1008, op),
            Err(MemoryError::AccessDenied { .. })
        ));
        t.region_mut(0).access = Access::ALL;
        assert_eq!(t.atomic(remote(0x200), 0x1008, op), Ok(0));
        assert_eq!(t.atomic(remote(0x200), 0x1008, op), Ok(1));
        let cas = AtomicOp::CompareSwap {
            compare: 2,
            swap: 7,
        };
        assert_eq!(t.atomic(remote(0x200), 0x1008, cas), Ok(2));
        assert_eq!(t.atomic(remote(0x200), 0x1008, cas), Ok(7));
    }
}
