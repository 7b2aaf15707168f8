//! ReadyToUse (IBTA 12.6.9, table 111): the active side tells the passive side that its
//! QP is ready; the connection is established.
//!
//! ```text
//!  0..4          4..8           8..232
//! | LocalCommID | RemoteCommID | PrivateData |
//! ```

use super::fields::{put_padded, put_u32, u32_at};
use super::{CommId, check_len};
use crate::error::{EmitError, ParseError};

mod field {
    use core::ops::Range;

    pub(super) const LOCAL_COMM_ID: usize = 0;
    pub(super) const REMOTE_COMM_ID: usize = 4;
    pub(super) const PRIVATE_DATA: Range<usize> = 8..232;
}

/// Bytes of private data an RTU carries.
pub const PRIVATE_DATA_LEN: usize = 224;

/// A view of an RTU over the 232 bytes of CM data.
#[derive(Debug, Clone)]
pub struct RtuPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> RtuPacket<T> {
    /// Wraps `buffer` without checking its length; accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> RtuPacket<T> {
        RtuPacket { buffer }
    }

    /// Wraps `buffer` after checking that it holds the 232 bytes of CM data.
    pub fn new_checked(buffer: T) -> Result<RtuPacket<T>, ParseError> {
        check_len(buffer.as_ref().len())?;
        Ok(RtuPacket { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The sender's (active side's) communication ID.
    pub fn local_comm_id(&self) -> CommId {
        CommId(u32_at(self.buffer.as_ref(), field::LOCAL_COMM_ID))
    }

    /// The receiver's communication ID.
    pub fn remote_comm_id(&self) -> CommId {
        CommId(u32_at(self.buffer.as_ref(), field::REMOTE_COMM_ID))
    }

    /// The 224 bytes of private data.
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> RtuPacket<T> {
    /// Sets both communication IDs.
    pub fn set_comm_ids(&mut self, local: CommId, remote: CommId) {
        put_u32(self.buffer.as_mut(), field::LOCAL_COMM_ID, local.0);
        put_u32(self.buffer.as_mut(), field::REMOTE_COMM_ID, remote.0);
    }

    /// The private data field, to write.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// The fields of an RTU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtuRepr<'a> {
    /// The sender's communication ID.
    pub local_comm_id: CommId,
    /// The receiver's communication ID.
    pub remote_comm_id: CommId,
    /// Private data: all 224 bytes when parsed; at most 224 to emit.
    pub private_data: &'a [u8],
}

impl<'a> RtuRepr<'a> {
    /// Reads a checked RTU.
    pub fn parse(p: &RtuPacket<&'a [u8]>) -> RtuRepr<'a> {
        RtuRepr {
            local_comm_id: p.local_comm_id(),
            remote_comm_id: p.remote_comm_id(),
            private_data: &p.buffer[field::PRIVATE_DATA],
        }
    }

    /// Writes all 232 bytes; private data longer than 224 bytes is an error.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut RtuPacket<T>,
    ) -> Result<(), EmitError> {
        put_padded(
            packet.private_data_mut(),
            self.private_data,
            "RTU private data",
        )?;
        packet.set_comm_ids(self.local_comm_id, self.remote_comm_id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::fixtures::{RPING_RTU, WRITE_BW_RTU_2};

    fn data() -> [u8; 232] {
        let mut b = [0u8; 232];
        b.copy_from_slice(&RPING_RTU[24..]);
        b
    }

    fn repr(private_data: &[u8]) -> RtuRepr<'_> {
        RtuRepr {
            local_comm_id: CommId(0xaad7_e16b),
            remote_comm_id: CommId(0x8872_6210),
            private_data,
        }
    }

    #[test]
    fn deconstruct() {
        let d = data();
        let p = RtuPacket::new_checked(&d[..]).unwrap();
        assert_eq!(p.local_comm_id(), CommId(0xaad7_e16b));
        assert_eq!(p.remote_comm_id(), CommId(0x8872_6210));
        assert_eq!(p.private_data(), &[0u8; 224][..]);
        let p = RtuPacket::new_checked(&WRITE_BW_RTU_2[24..]).unwrap();
        assert_eq!(p.local_comm_id(), CommId(0xa8d7_e16b));
        assert_eq!(p.remote_comm_id(), CommId(0x8c72_6210));
    }

    #[test]
    fn construct() {
        let mut b = [0xa5u8; 232];
        let mut p = RtuPacket::new_unchecked(&mut b[..]);
        p.set_comm_ids(CommId(0xaad7_e16b), CommId(0x8872_6210));
        p.private_data_mut().fill(0);
        assert_eq!(b, data());
    }

    #[test]
    fn parse() {
        let d = data();
        assert_eq!(
            RtuRepr::parse(&RtuPacket::new_checked(&d[..]).unwrap()),
            repr(&[0; 224])
        );
    }

    #[test]
    fn emit() {
        let mut b = [0xa5u8; 232];
        repr(&[])
            .emit(&mut RtuPacket::new_unchecked(&mut b[..]))
            .unwrap();
        assert_eq!(b, data());
    }

    #[test]
    fn malformed() {
        assert!(RtuPacket::new_checked(&[0u8; 8][..]).is_err());
        let mut b = [0u8; 232];
        assert!(
            repr(&[0; 225])
                .emit(&mut RtuPacket::new_unchecked(&mut b[..]))
                .is_err()
        );
    }
}
