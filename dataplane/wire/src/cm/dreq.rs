//! DisconnectRequest (IBTA 12.6.10, table 112): either side ends an established
//! connection; the receiver checks that the named QP is its own.
//!
//! ```text
//!  0..4          4..8           8..11              11     12..232
//! | LocalCommID | RemoteCommID | RemoteQPN/EECN | resv | PrivateData |
//! ```

use super::fields::{put_padded, put_u24, put_u32, u24_at, u32_at};
use super::{CommId, check_len};
use crate::error::{EmitError, ParseError};
use crate::identifiers::Qpn;

mod field {
    use core::ops::Range;

    pub(super) const LOCAL_COMM_ID: usize = 0;
    pub(super) const REMOTE_COMM_ID: usize = 4;
    pub(super) const REMOTE_QPN: usize = 8;
    pub(super) const RESERVED: usize = 11;
    pub(super) const PRIVATE_DATA: Range<usize> = 12..232;
}

/// Bytes of private data a DREQ carries.
pub const PRIVATE_DATA_LEN: usize = 220;

/// A view of a DREQ over the 232 bytes of CM data.
#[derive(Debug, Clone)]
pub struct DreqPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> DreqPacket<T> {
    /// Wraps `buffer` without checking its length; accessors may then panic.
    pub const fn new_unchecked(buffer: T) -> DreqPacket<T> {
        DreqPacket { buffer }
    }

    /// Wraps `buffer` after checking that it holds the 232 bytes of CM data.
    pub fn new_checked(buffer: T) -> Result<DreqPacket<T>, ParseError> {
        check_len(buffer.as_ref().len())?;
        Ok(DreqPacket { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The sender's communication ID.
    pub fn local_comm_id(&self) -> CommId {
        CommId(u32_at(self.buffer.as_ref(), field::LOCAL_COMM_ID))
    }

    /// The receiver's communication ID.
    pub fn remote_comm_id(&self) -> CommId {
        CommId(u32_at(self.buffer.as_ref(), field::REMOTE_COMM_ID))
    }

    /// The receiver's QP (or EE context for RD).
    pub fn remote_qpn(&self) -> Qpn {
        Qpn::new(u24_at(self.buffer.as_ref(), field::REMOTE_QPN))
    }

    /// The 220 bytes of private data.
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> DreqPacket<T> {
    /// Sets both communication IDs.
    pub fn set_comm_ids(&mut self, local: CommId, remote: CommId) {
        put_u32(self.buffer.as_mut(), field::LOCAL_COMM_ID, local.0);
        put_u32(self.buffer.as_mut(), field::REMOTE_COMM_ID, remote.0);
    }

    /// Sets the remote QPN and zeroes the reserved byte after it.
    pub fn set_remote_qpn(&mut self, qpn: Qpn) {
        put_u24(self.buffer.as_mut(), field::REMOTE_QPN, qpn.value());
        self.buffer.as_mut()[field::RESERVED] = 0;
    }

    /// The private data field, to write.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// The fields of a DREQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DreqRepr<'a> {
    /// The sender's communication ID.
    pub local_comm_id: CommId,
    /// The receiver's communication ID.
    pub remote_comm_id: CommId,
    /// The receiver's QP.
    pub remote_qpn: Qpn,
    /// Private data: all 220 bytes when parsed; at most 220 to emit.
    pub private_data: &'a [u8],
}

impl<'a> DreqRepr<'a> {
    /// Reads a checked DREQ (the reserved byte is ignored).
    pub fn parse(p: &DreqPacket<&'a [u8]>) -> DreqRepr<'a> {
        DreqRepr {
            local_comm_id: p.local_comm_id(),
            remote_comm_id: p.remote_comm_id(),
            remote_qpn: p.remote_qpn(),
            private_data: &p.buffer[field::PRIVATE_DATA],
        }
    }

    /// Writes all 232 bytes; private data longer than 220 bytes is an error.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut DreqPacket<T>,
    ) -> Result<(), EmitError> {
        put_padded(
            packet.private_data_mut(),
            self.private_data,
            "DREQ private data",
        )?;
        packet.set_comm_ids(self.local_comm_id, self.remote_comm_id);
        packet.set_remote_qpn(self.remote_qpn);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::fixtures::{RPING_DREQ, WRITE_BW_DREQ_1};

    fn data() -> [u8; 232] {
        let mut b = [0u8; 232];
        b.copy_from_slice(&RPING_DREQ[24..]);
        b
    }

    /// rping's DREQ, from the active side.
    fn repr(private_data: &[u8]) -> DreqRepr<'_> {
        DreqRepr {
            local_comm_id: CommId(0xaad7_e16b),
            remote_comm_id: CommId(0x8872_6210),
            remote_qpn: Qpn::new(0x1a),
            private_data,
        }
    }

    #[test]
    fn deconstruct() {
        let d = data();
        let p = DreqPacket::new_checked(&d[..]).unwrap();
        assert_eq!(p.local_comm_id(), CommId(0xaad7_e16b));
        assert_eq!(p.remote_comm_id(), CommId(0x8872_6210));
        assert_eq!(p.remote_qpn(), Qpn::new(0x1a));
        assert_eq!(p.private_data(), &[0u8; 220][..]);
        // The server's DREQ of write_bw's first connection.
        let p = DreqPacket::new_checked(&WRITE_BW_DREQ_1[24..]).unwrap();
        assert_eq!(p.local_comm_id(), CommId(0x8a72_6210));
        assert_eq!(p.remote_comm_id(), CommId(0xabd7_e16b));
        assert_eq!(p.remote_qpn(), Qpn::new(0x1b));
    }

    #[test]
    fn construct() {
        let mut b = [0xa5u8; 232];
        let mut p = DreqPacket::new_unchecked(&mut b[..]);
        p.set_comm_ids(CommId(0xaad7_e16b), CommId(0x8872_6210));
        p.set_remote_qpn(Qpn::new(0x1a));
        p.private_data_mut().fill(0);
        assert_eq!(b, data());
    }

    #[test]
    fn parse() {
        let d = data();
        assert_eq!(
            DreqRepr::parse(&DreqPacket::new_checked(&d[..]).unwrap()),
            repr(&[0; 220])
        );
    }

    #[test]
    fn emit() {
        let mut b = [0xa5u8; 232];
        repr(&[])
            .emit(&mut DreqPacket::new_unchecked(&mut b[..]))
            .unwrap();
        assert_eq!(b, data());
    }

    #[test]
    fn malformed() {
        assert!(DreqPacket::new_checked(&[0u8; 12][..]).is_err());
        let mut d = data();
        d[11] = 0xff; // reserved
        assert_eq!(
            DreqRepr::parse(&DreqPacket::new_checked(&d[..]).unwrap()),
            repr(&[0; 220])
        );
        let mut b = [0u8; 232];
        assert!(
            repr(&[0; 221])
                .emit(&mut DreqPacket::new_unchecked(&mut b[..]))
                .is_err()
        );
    }
}
