//! RDMA Extended Transport Header (IBTA 9.3.3): the remote buffer of an RDMA WRITE (first
//! or only packet) or an RDMA READ request.
//!
//! ```text
//! | Virtual Address (8) | R_Key (4) | DMA Length (4) |
//! ```

use zerocopy::byteorder::network_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::identifiers::Rkey;

/// Length of the RETH.
pub const HEADER_LEN: usize = 16;

/// The RETH as it lies on the wire (a plain big-endian struct, read in place).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct Reth {
    /// Virtual address of the remote buffer.
    pub va: U64,
    /// Remote key of the memory region.
    pub rkey: U32,
    /// Length of the whole transfer (not just this packet).
    pub dma_len: U32,
}

crate::zerocopy_header!(Reth, HEADER_LEN);

/// The fields of a RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RethRepr {
    /// Virtual address of the remote buffer.
    pub va: u64,
    /// Remote key of the memory region.
    pub rkey: Rkey,
    /// Length of the whole transfer, in bytes.
    pub dma_len: u32,
}

impl RethRepr {
    /// Reads a RETH.
    pub fn parse(header: &Reth) -> RethRepr {
        RethRepr {
            va: header.va.get(),
            rkey: Rkey(header.rkey.get()),
            dma_len: header.dma_len.get(),
        }
    }

    /// Writes a RETH.
    pub fn emit(&self, header: &mut Reth) {
        header.va.set(self.va);
        header.rkey.set(self.rkey.0);
        header.dma_len.set(self.dma_len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The RETH of read_bw_multipkt.pcap frame 22: VA 0x000055ee3ce7b000, R_Key 0x776,
    /// length 2050.
    static RETH: [u8; 16] = [
        0x00, 0x00, 0x55, 0xee, 0x3c, 0xe7, 0xb0, 0x00, 0x00, 0x00, 0x07, 0x76, 0x00, 0x00, 0x08,
        0x02,
    ];

    fn repr() -> RethRepr {
        RethRepr {
            va: 0x0000_55ee_3ce7_b000,
            rkey: Rkey(0x776),
            dma_len: 2050,
        }
    }

    #[test]
    fn deconstruct() {
        let h = Reth::new_checked(&RETH).unwrap();
        assert_eq!(h.va.get(), 0x0000_55ee_3ce7_b000);
        assert_eq!(h.rkey.get(), 0x776);
        assert_eq!(h.dma_len.get(), 2050);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 16];
        let h = Reth::new_checked_mut(&mut bytes).unwrap();
        h.va.set(0x0000_55ee_3ce7_b000);
        h.rkey.set(0x776);
        h.dma_len.set(2050);
        assert_eq!(bytes, RETH);
    }

    #[test]
    fn parse() {
        assert_eq!(RethRepr::parse(Reth::new_checked(&RETH).unwrap()), repr());
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5u8; 16];
        repr().emit(Reth::new_checked_mut(&mut bytes).unwrap());
        assert_eq!(bytes, RETH);
    }

    #[test]
    fn truncated() {
        assert!(Reth::new_checked(&RETH[..15]).is_err());
    }
}
