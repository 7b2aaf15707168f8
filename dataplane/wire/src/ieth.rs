//! Invalidate Extended Transport Header (IBTA 9.3.8): the R_Key a SEND with invalidate
//! asks the responder to invalidate.

use zerocopy::byteorder::network_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::identifiers::Rkey;

/// Length of the IETH.
pub const HEADER_LEN: usize = 4;

/// The IETH as it lies on the wire.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct Ieth {
    /// The R_Key to invalidate.
    pub rkey: U32,
}

crate::zerocopy_header!(Ieth, HEADER_LEN);

/// The fields of an IETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IethRepr {
    /// The R_Key to invalidate.
    pub rkey: Rkey,
}

impl IethRepr {
    /// Reads an IETH.
    pub fn parse(header: &Ieth) -> IethRepr {
        IethRepr {
            rkey: Rkey(header.rkey.get()),
        }
    }

    /// Writes an IETH.
    pub fn emit(&self, header: &mut Ieth) {
        header.rkey.set(self.rkey.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static IETH: [u8; 4] = [0x00, 0x00, 0x12, 0x34];

    #[test]
    fn deconstruct() {
        assert_eq!(Ieth::new_checked(&IETH).unwrap().rkey.get(), 0x1234);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 4];
        Ieth::new_checked_mut(&mut bytes).unwrap().rkey.set(0x1234);
        assert_eq!(bytes, IETH);
    }

    #[test]
    fn parse() {
        assert_eq!(
            IethRepr::parse(Ieth::new_checked(&IETH).unwrap()),
            IethRepr { rkey: Rkey(0x1234) }
        );
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5u8; 4];
        IethRepr { rkey: Rkey(0x1234) }.emit(Ieth::new_checked_mut(&mut bytes).unwrap());
        assert_eq!(bytes, IETH);
    }
}
