//! Immediate Data Extended Transport Header (IBTA 9.3.7): 4 bytes handed to the receiver's
//! completion by SEND/RDMA WRITE "with immediate".
//!
//! The value is carried in network byte order and verbs hand it to the application as it
//! is (`ibv_wc.imm_data` is `__be32`): the `data` here is the big-endian reading, so
//! `imm_data == data.to_be()` on a little-endian host.

use zerocopy::byteorder::network_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Length of the ImmDt header.
pub const HEADER_LEN: usize = 4;

/// The ImmDt header as it lies on the wire.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct ImmDt {
    /// The immediate data.
    pub data: U32,
}

crate::zerocopy_header!(ImmDt, HEADER_LEN);

/// The fields of an ImmDt header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ImmDtRepr {
    /// The immediate data, read big-endian.
    pub data: u32,
}

impl ImmDtRepr {
    /// Reads an ImmDt header.
    pub fn parse(header: &ImmDt) -> ImmDtRepr {
        ImmDtRepr {
            data: header.data.get(),
        }
    }

    /// Writes an ImmDt header.
    pub fn emit(&self, header: &mut ImmDt) {
        header.data.set(self.data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static IMMDT: [u8; 4] = [0xde, 0xad, 0xbe, 0xef];

    #[test]
    fn deconstruct() {
        assert_eq!(ImmDt::new_checked(&IMMDT).unwrap().data.get(), 0xdead_beef);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 4];
        ImmDt::new_checked_mut(&mut bytes)
            .unwrap()
            .data
            .set(0xdead_beef);
        assert_eq!(bytes, IMMDT);
    }

    #[test]
    fn parse() {
        assert_eq!(
            ImmDtRepr::parse(ImmDt::new_checked(&IMMDT).unwrap()),
            ImmDtRepr { data: 0xdead_beef }
        );
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5u8; 4];
        ImmDtRepr { data: 0xdead_beef }.emit(ImmDt::new_checked_mut(&mut bytes).unwrap());
        assert_eq!(bytes, IMMDT);
    }
}
