//! Datagram Extended Transport Header (IBTA 9.3.2): the Q_Key and source QP of a UD (or
//! RD) packet.
//!
//! ```text
//! | Q_Key (4) | resv8 | SrcQP (3) |
//! ```

use crate::error::{Layer, ParseError};
use crate::identifiers::{Qkey, Qpn};

mod field {
    use core::ops::Range;

    pub(super) const QKEY: Range<usize> = 0..4;
    pub(super) const SRC_QP: Range<usize> = 5..8;
}

/// Length of the DETH.
pub const HEADER_LEN: usize = 8;

/// A view of a DETH over a byte buffer.
#[derive(Debug, Clone)]
pub struct DethPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> DethPacket<T> {
    /// Wraps `buffer` without checking its length; accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> DethPacket<T> {
        DethPacket { buffer }
    }

    /// Wraps `buffer` after checking that it holds 8 bytes.
    pub fn new_checked(buffer: T) -> Result<DethPacket<T>, ParseError> {
        let available = buffer.as_ref().len();
        if available < HEADER_LEN {
            return Err(ParseError::Truncated {
                layer: Layer::ExtHeaders,
                needed: HEADER_LEN,
                available,
            });
        }
        Ok(DethPacket { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The queue key.
    pub fn qkey(&self) -> Qkey {
        let b = &self.buffer.as_ref()[field::QKEY];
        Qkey(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The source queue pair.
    pub fn src_qp(&self) -> Qpn {
        let b = &self.buffer.as_ref()[field::SRC_QP];
        Qpn::new(u32::from_be_bytes([0, b[0], b[1], b[2]]))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> DethPacket<T> {
    /// Sets the queue key.
    pub fn set_qkey(&mut self, qkey: Qkey) {
        self.buffer.as_mut()[field::QKEY].copy_from_slice(&qkey.0.to_be_bytes());
    }

    /// Sets the source QP and zeroes the reserved byte before it.
    pub fn set_src_qp(&mut self, qpn: Qpn) {
        self.buffer.as_mut()[4..8].copy_from_slice(&qpn.value().to_be_bytes());
    }
}

/// The fields of a DETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DethRepr {
    /// The queue key the receiving QP checks.
    pub qkey: Qkey,
    /// The sender's QP.
    pub src_qp: Qpn,
}

impl DethRepr {
    /// Reads a DETH (the reserved byte is ignored).
    pub fn parse<T: AsRef<[u8]>>(packet: &DethPacket<T>) -> DethRepr {
        DethRepr {
            qkey: packet.qkey(),
            src_qp: packet.src_qp(),
        }
    }

    /// Writes the 8 bytes. The buffer must hold 8.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut DethPacket<T>) {
        packet.set_qkey(self.qkey);
        packet.set_src_qp(self.src_qp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The DETH of ud_pingpong.pcap frame 14: Q_Key 0x11111111, source QP 0x12.
    static DETH: [u8; 8] = [0x11, 0x11, 0x11, 0x11, 0x00, 0x00, 0x00, 0x12];

    fn repr() -> DethRepr {
        DethRepr {
            qkey: Qkey(0x1111_1111),
            src_qp: Qpn::new(0x12),
        }
    }

    #[test]
    fn deconstruct() {
        let p = DethPacket::new_checked(&DETH[..]).unwrap();
        assert_eq!(p.qkey(), Qkey(0x1111_1111));
        assert_eq!(p.src_qp(), Qpn::new(0x12));
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 8];
        let mut p = DethPacket::new_unchecked(&mut bytes[..]);
        p.set_qkey(Qkey(0x1111_1111));
        p.set_src_qp(Qpn::new(0x12));
        assert_eq!(bytes, DETH);
    }

    #[test]
    fn parse() {
        let p = DethPacket::new_checked(&DETH[..]).unwrap();
        assert_eq!(DethRepr::parse(&p), repr());
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5u8; 8];
        repr().emit(&mut DethPacket::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, DETH);
    }

    #[test]
    fn truncated() {
        assert!(DethPacket::new_checked(&DETH[..7]).is_err());
    }
}
