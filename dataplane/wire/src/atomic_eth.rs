//! Atomic Extended Transport Header (IBTA 9.3.4): the target and operands of a
//! CompareSwap or FetchAdd request.
//!
//! ```text
//! | Virtual Address (8) | R_Key (4) | Swap (Or Add) Data (8) | Compare Data (8) |
//! ```

use zerocopy::byteorder::network_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::identifiers::Rkey;

/// Length of the AtomicETH.
pub const HEADER_LEN: usize = 28;

/// The AtomicETH as it lies on the wire.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct AtomicEth {
    /// Virtual address of the 8-byte target (must be 8-byte aligned).
    pub va: U64,
    /// Remote key of the memory region.
    pub rkey: U32,
    /// Swap value (CompareSwap) or addend (FetchAdd).
    pub swap_add: U64,
    /// Compare value (CompareSwap; ignored by FetchAdd).
    pub compare: U64,
}

crate::zerocopy_header!(AtomicEth, HEADER_LEN);

/// The fields of an AtomicETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicEthRepr {
    /// Virtual address of the 8-byte target.
    pub va: u64,
    /// Remote key of the memory region.
    pub rkey: Rkey,
    /// Swap value (CompareSwap) or addend (FetchAdd).
    pub swap_add: u64,
    /// Compare value (CompareSwap).
    pub compare: u64,
}

impl AtomicEthRepr {
    /// Reads an AtomicETH.
    pub fn parse(header: &AtomicEth) -> AtomicEthRepr {
        AtomicEthRepr {
            va: header.va.get(),
            rkey: Rkey(header.rkey.get()),
            swap_add: header.swap_add.get(),
            compare: header.compare.get(),
        }
    }

    /// Writes an AtomicETH.
    pub fn emit(&self, header: &mut AtomicEth) {
        header.va.set(self.va);
        header.rkey.set(self.rkey.0);
        header.swap_add.set(self.swap_add);
        header.compare.set(self.compare);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AtomicETH of atomic_fadd_bw.pcap frame 22: VA 0x000055945187a000,
    /// R_Key 0x9f5, add 1, compare 0.
    static ATOMIC_ETH: [u8; 28] = [
        0x00, 0x00, 0x55, 0x94, 0x51, 0x87, 0xa0, 0x00, 0x00, 0x00, 0x09, 0xf5, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    fn repr() -> AtomicEthRepr {
        AtomicEthRepr {
            va: 0x0000_5594_5187_a000,
            rkey: Rkey(0x9f5),
            swap_add: 1,
            compare: 0,
        }
    }

    #[test]
    fn deconstruct() {
        let h = AtomicEth::new_checked(&ATOMIC_ETH).unwrap();
        assert_eq!(h.va.get(), 0x0000_5594_5187_a000);
        assert_eq!(h.rkey.get(), 0x9f5);
        assert_eq!(h.swap_add.get(), 1);
        assert_eq!(h.compare.get(), 0);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 28];
        let h = AtomicEth::new_checked_mut(&mut bytes).unwrap();
        h.va.set(0x0000_5594_5187_a000);
        h.rkey.set(0x9f5);
        h.swap_add.set(1);
        h.compare.set(0);
        assert_eq!(bytes, ATOMIC_ETH);
    }

    #[test]
    fn parse() {
        assert_eq!(
            AtomicEthRepr::parse(AtomicEth::new_checked(&ATOMIC_ETH).unwrap()),
            repr()
        );
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5u8; 28];
        repr().emit(AtomicEth::new_checked_mut(&mut bytes).unwrap());
        assert_eq!(bytes, ATOMIC_ETH);
    }

    #[test]
    fn field_order_swap_before_compare() {
        let mut bytes = [0u8; 28];
        AtomicEthRepr {
            swap_add: 0x1111_1111_1111_1111,
            compare: 0x2222_2222_2222_2222,
            ..repr()
        }
        .emit(AtomicEth::new_checked_mut(&mut bytes).unwrap());
        assert_eq!(bytes[12..20], [0x11; 8]);
        assert_eq!(bytes[20..28], [0x22; 8]);
    }
}
