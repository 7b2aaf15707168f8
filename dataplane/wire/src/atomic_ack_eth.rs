//! Atomic Acknowledge Extended Transport Header (IBTA 9.3.6): the value the target held
//! before an atomic operation.
//!
//! ```text
//! | Original Remote Data (8) |
//! ```

use zerocopy::byteorder::network_endian::U64;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Length of the AtomicAckETH.
pub const HEADER_LEN: usize = 8;

/// The AtomicAckETH as it lies on the wire.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct AtomicAckEth {
    /// The 8 bytes the target held before the operation.
    pub orig_data: U64,
}

crate::zerocopy_header!(AtomicAckEth, HEADER_LEN);

/// The fields of an AtomicAckETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicAckEthRepr {
    /// The value the target held before the operation.
    pub orig_data: u64,
}

impl AtomicAckEthRepr {
    /// Reads an AtomicAckETH.
    pub fn parse(header: &AtomicAckEth) -> AtomicAckEthRepr {
        AtomicAckEthRepr {
            orig_data: header.orig_data.get(),
        }
    }

    /// Writes an AtomicAckETH.
    pub fn emit(&self, header: &mut AtomicAckEth) {
        header.orig_data.set(self.orig_data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AtomicAckETH of atomic_fadd_bw.pcap frame 27: 866885116966070052.
    static ATOMIC_ACK_ETH: [u8; 8] = [0x0c, 0x07, 0xcb, 0x6b, 0xc1, 0xd5, 0xe7, 0x24];

    fn repr() -> AtomicAckEthRepr {
        AtomicAckEthRepr {
            orig_data: 866_885_116_966_070_052,
        }
    }

    #[test]
    fn deconstruct() {
        let h = AtomicAckEth::new_checked(&ATOMIC_ACK_ETH).unwrap();
        assert_eq!(h.orig_data.get(), 866_885_116_966_070_052);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 8];
        AtomicAckEth::new_checked_mut(&mut bytes)
            .unwrap()
            .orig_data
            .set(866_885_116_966_070_052);
        assert_eq!(bytes, ATOMIC_ACK_ETH);
    }

    #[test]
    fn parse() {
        assert_eq!(
            AtomicAckEthRepr::parse(AtomicAckEth::new_checked(&ATOMIC_ACK_ETH).unwrap()),
            repr()
        );
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5u8; 8];
        repr().emit(AtomicAckEth::new_checked_mut(&mut bytes).unwrap());
        assert_eq!(bytes, ATOMIC_ACK_ETH);
    }
}
