//! Byte and bit access shared by the CM message views. Offsets are into the 232 bytes of
//! CM data; a bit field is named by the byte it lives in, its shift from the least
//! significant bit and its width (IBTA 12.6 numbers bits from the most significant one;
//! the views say both where it helps).

use crate::error::EmitError;
use crate::gid::Gid;

pub(super) fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

pub(super) fn u24_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
}

pub(super) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(super) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(v)
}

pub(super) fn gid_at(b: &[u8], at: usize) -> Gid {
    let mut g = [0u8; 16];
    g.copy_from_slice(&b[at..at + 16]);
    Gid(g)
}

pub(super) fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Writes the low 24 bits of `v` into the three bytes at `at`.
pub(super) fn put_u24(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 3].copy_from_slice(&v.to_be_bytes()[1..]);
}

pub(super) fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

pub(super) fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

pub(super) fn put_gid(b: &mut [u8], at: usize, gid: Gid) {
    b[at..at + 16].copy_from_slice(&gid.0);
}

const fn mask(width: u8) -> u8 {
    ((1u16 << width) - 1) as u8
}

/// The `width` bits of byte `at` that start `shift` bits above the least significant one.
pub(super) fn bits(b: &[u8], at: usize, shift: u8, width: u8) -> u8 {
    (b[at] >> shift) & mask(width)
}

/// Sets the `width` bits of byte `at` that start `shift` bits above the least significant
/// one to the low `width` bits of `v`, leaving the other bits of the byte alone.
pub(super) fn put_bits(b: &mut [u8], at: usize, shift: u8, width: u8, v: u8) {
    let m = mask(width) << shift;
    b[at] = (b[at] & !m) | ((v << shift) & m);
}

pub(super) fn flag(b: &[u8], at: usize, shift: u8) -> bool {
    bits(b, at, shift, 1) != 0
}

pub(super) fn put_flag(b: &mut [u8], at: usize, shift: u8, v: bool) {
    put_bits(b, at, shift, 1, u8::from(v));
}

/// Copies `data` to the start of `field` and zeroes the rest of it; `data` longer than the
/// field is an error naming `name`.
pub(super) fn put_padded(
    field: &mut [u8],
    data: &[u8],
    name: &'static str,
) -> Result<(), EmitError> {
    if data.len() > field.len() {
        return Err(EmitError::FieldTooLong {
            field: name,
            len: data.len(),
            max: field.len(),
        });
    }
    let (head, tail) = field.split_at_mut(data.len());
    head.copy_from_slice(data);
    tail.fill(0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_fields_leave_their_neighbours_alone() {
        let mut b = [0xffu8; 1];
        put_bits(&mut b, 0, 3, 5, 0);
        assert_eq!(b[0], 0x07);
        put_bits(&mut b, 0, 3, 5, 0xff); // only 5 bits are written
        assert_eq!(b[0], 0xff);
        put_bits(&mut b, 0, 0, 3, 2);
        assert_eq!(b[0], 0xfa);
        assert_eq!(bits(&b, 0, 0, 3), 2);
        assert_eq!(bits(&b, 0, 3, 5), 0x1f);
    }

    #[test]
    fn padded_fields_zero_the_rest_or_refuse() {
        let mut f = [0xa5u8; 4];
        put_padded(&mut f, &[1, 2], "private data").unwrap();
        assert_eq!(f, [1, 2, 0, 0]);
        assert_eq!(
            put_padded(&mut f, &[0; 5], "private data"),
            Err(EmitError::FieldTooLong {
                field: "private data",
                len: 5,
                max: 4
            })
        );
    }
}
