//! Reliable Datagram Extended Transport Header (IBTA 9.3.1): the EE context of an RD
//! packet. RD is parsed for completeness; rxe (and xroce) do not implement the RD service.
//!
//! ```text
//! | resv8 | EE-Context (3) |
//! ```

use crate::error::{Layer, ParseError};

/// Length of the RDETH.
pub const HEADER_LEN: usize = 4;

/// A view of an RDETH over a byte buffer.
#[derive(Debug, Clone)]
pub struct RdethPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> RdethPacket<T> {
    /// Wraps `buffer` without checking its length; accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> RdethPacket<T> {
        RdethPacket { buffer }
    }

    /// Wraps `buffer` after checking that it holds 4 bytes.
    pub fn new_checked(buffer: T) -> Result<RdethPacket<T>, ParseError> {
        let available = buffer.as_ref().len();
        if available < HEADER_LEN {
            return Err(ParseError::Truncated {
                layer: Layer::ExtHeaders,
                needed: HEADER_LEN,
                available,
            });
        }
        Ok(RdethPacket { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The 24-bit end-to-end context.
    pub fn ee_context(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([0, b[1], b[2], b[3]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> RdethPacket<T> {
    /// Sets the EE context (24 bits; higher bits dropped) and zeroes the reserved byte.
    pub fn set_ee_context(&mut self, eec: u32) {
        self.buffer.as_mut()[..4].copy_from_slice(&(eec & 0x00ff_ffff).to_be_bytes());
    }
}

/// The fields of an RDETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RdethRepr {
    /// The 24-bit end-to-end context.
    pub ee_context: u32,
}

impl RdethRepr {
    /// Reads an RDETH.
    pub fn parse<T: AsRef<[u8]>>(packet: &RdethPacket<T>) -> RdethRepr {
        RdethRepr {
            ee_context: packet.ee_context(),
        }
    }

    /// Writes the 4 bytes. The buffer must hold 4.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut RdethPacket<T>) {
        packet.set_ee_context(self.ee_context);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static RDETH: [u8; 4] = [0x00, 0x12, 0x34, 0x56];

    #[test]
    fn deconstruct() {
        let p = RdethPacket::new_checked(&RDETH[..]).unwrap();
        assert_eq!(p.ee_context(), 0x12_3456);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 4];
        RdethPacket::new_unchecked(&mut bytes[..]).set_ee_context(0x12_3456);
        assert_eq!(bytes, RDETH);
    }

    #[test]
    fn parse() {
        let p = RdethPacket::new_checked(&RDETH[..]).unwrap();
        assert_eq!(
            RdethRepr::parse(&p),
            RdethRepr {
                ee_context: 0x12_3456
            }
        );
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5u8; 4];
        RdethRepr {
            ee_context: 0x12_3456,
        }
        .emit(&mut RdethPacket::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, RDETH);
    }

    #[test]
    fn truncated() {
        assert!(RdethPacket::new_checked(&RDETH[..3]).is_err());
    }
}
