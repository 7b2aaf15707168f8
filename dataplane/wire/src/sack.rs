//! xroce's selective acknowledgement (SACK): the PSN ranges a responder holds beyond a gap,
//! carried after the AETH of a PSN sequence error NAK. Not part of the InfiniBand
//! specification: only two xroce endpoints that agreed to selective repeat send and accept
//! it, and a standard RoCEv2 peer never receives one (an ACKNOWLEDGE carries no payload,
//! so [`crate::IbRepr::parse`] refuses one that has bytes after its AETH;
//! [`crate::Frame::parse_acknowledge_with_trailer`] is the parse that accepts them).
//!
//! ```text
//!  0               1               2               3
//! +---------------+---------------+-------------------------------+
//! | version (1)   | count (1..=8) | reserved (0)                  |
//! +---------------+---------------+-------------------------------+
//! | reserved (0)  | first PSN of range 1                          |
//! +---------------+-----------------------------------------------+
//! | reserved (0)  | last PSN of range 1                           |
//! +---------------+-----------------------------------------------+
//! | ... count ranges in all, each after the one before it         |
//! ```
//!
//! A range `first..=last` says that the responder holds every request packet whose PSN
//! lies in it (a READ request stands for the PSNs of all its responses) and needs none of
//! them again. The ranges follow the NAK's PSN (the one the responder expects), in PSN
//! order, without overlap. The length, 4 + 8 × count bytes, is a multiple of 4: the
//! packet needs no pad.

use crate::error::{EmitError, ParseError};
use crate::psn::Psn;

/// The version this crate emits and accepts.
pub const VERSION: u8 = 1;

/// The most ranges one selective acknowledgement carries.
pub const MAX_SACK_RANGES: usize = 8;

/// Length of the fixed part, before the ranges.
const FIXED_LEN: usize = 4;

/// Length of one range.
const RANGE_LEN: usize = 8;

mod field {
    pub(super) const VERSION: usize = 0;
    pub(super) const COUNT: usize = 1;
    pub(super) const RESERVED: core::ops::Range<usize> = 2..4;
}

/// A selective acknowledgement: up to [`MAX_SACK_RANGES`] PSN ranges, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SackRepr {
    count: u8,
    ranges: [(Psn, Psn); MAX_SACK_RANGES],
}

impl Default for SackRepr {
    fn default() -> SackRepr {
        SackRepr::new()
    }
}

impl SackRepr {
    /// No ranges.
    pub const fn new() -> SackRepr {
        SackRepr {
            count: 0,
            ranges: [(Psn::ZERO, Psn::ZERO); MAX_SACK_RANGES],
        }
    }

    /// The ranges, `(first, last)` inclusive, in PSN order.
    pub fn ranges(&self) -> &[(Psn, Psn)] {
        &self.ranges[..usize::from(self.count)]
    }

    /// Whether it holds no range.
    pub const fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Appends the range `first..=last`, which must follow the last one: returns false
    /// (and changes nothing) when it is full, the range is reversed or does not follow.
    pub fn push(&mut self, first: Psn, last: Psn) -> bool {
        let count = usize::from(self.count);
        if count >= MAX_SACK_RANGES || !well_formed(first, last) {
            return false;
        }
        if let Some(&(_, prev_last)) = self.ranges().last()
            && first.distance(prev_last) <= 0
        {
            return false;
        }
        self.ranges[count] = (first, last);
        self.count += 1;
        true
    }

    /// Its length on the wire.
    pub const fn buffer_len(&self) -> usize {
        FIXED_LEN + RANGE_LEN * self.count as usize
    }

    /// Parses the bytes between a NAK's AETH and its ICRC: exactly one selective
    /// acknowledgement of this version, with 1 to [`MAX_SACK_RANGES`] ranges in PSN order,
    /// reserved bits zero. Anything else is [`ParseError::Sack`] or
    /// [`ParseError::Truncated`].
    pub fn parse(bytes: &[u8]) -> Result<SackRepr, ParseError> {
        if bytes.len() < FIXED_LEN {
            return Err(ParseError::Sack("shorter than its fixed part"));
        }
        if bytes[field::VERSION] != VERSION {
            return Err(ParseError::Sack("unknown version"));
        }
        let count = usize::from(bytes[field::COUNT]);
        if count == 0 || count > MAX_SACK_RANGES {
            return Err(ParseError::Sack("range count out of 1..=8"));
        }
        if bytes[field::RESERVED] != [0, 0] {
            return Err(ParseError::Sack("reserved bytes not zero"));
        }
        if bytes.len() != FIXED_LEN + RANGE_LEN * count {
            return Err(ParseError::Sack("length does not match the range count"));
        }
        let mut repr = SackRepr::new();
        for range in bytes[FIXED_LEN..].chunks_exact(RANGE_LEN) {
            let first = u32::from_be_bytes([range[0], range[1], range[2], range[3]]);
            let last = u32::from_be_bytes([range[4], range[5], range[6], range[7]]);
            if first > Psn::MASK || last > Psn::MASK {
                return Err(ParseError::Sack("reserved byte of a PSN not zero"));
            }
            if !repr.push(Psn::new(first), Psn::new(last)) {
                return Err(ParseError::Sack("ranges out of order or reversed"));
            }
        }
        Ok(repr)
    }

    /// Writes it at the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EmitError> {
        let len = self.buffer_len();
        let Some(buf) = buf.get_mut(..len) else {
            return Err(EmitError::BufferTooSmall {
                needed: len,
                available: buf.len(),
            });
        };
        buf[field::VERSION] = VERSION;
        buf[field::COUNT] = self.count;
        buf[field::RESERVED].fill(0);
        for (out, &(first, last)) in buf[FIXED_LEN..]
            .chunks_exact_mut(RANGE_LEN)
            .zip(self.ranges())
        {
            out[..4].copy_from_slice(&first.value().to_be_bytes());
            out[4..].copy_from_slice(&last.value().to_be_bytes());
        }
        Ok(len)
    }
}

/// A range of fewer than 2^23 PSNs, first to last in serial order.
fn well_formed(first: Psn, last: Psn) -> bool {
    last.distance(first) >= 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two ranges: 0x000105..=0x000107 and 0xfffffe..=0x000002 (across the wrap).
    const TWO: [u8; 20] = [
        0x01, 0x02, 0x00, 0x00, // version, count, reserved
        0x00, 0x00, 0x01, 0x05, 0x00, 0x00, 0x01, 0x07, // range 1
        0x00, 0xff, 0xff, 0xfe, 0x00, 0x00, 0x00, 0x02, // range 2 (wraps)
    ];

    #[test]
    fn deconstruct() {
        assert!(
            SackRepr::parse(&TWO[..12]).is_err(),
            "the count says two ranges"
        );
        let mut one = [0u8; 12];
        one.copy_from_slice(&TWO[..12]);
        one[1] = 1;
        let r = SackRepr::parse(&one).unwrap();
        assert_eq!(r.ranges(), &[(Psn::new(0x105), Psn::new(0x107))]);
    }

    #[test]
    fn construct() {
        let mut r = SackRepr::new();
        assert!(r.is_empty());
        assert!(r.push(Psn::new(10), Psn::new(10)));
        assert!(!r.push(Psn::new(10), Psn::new(12)), "overlaps");
        assert!(!r.push(Psn::new(9), Psn::new(9)), "before the last");
        assert!(!r.push(Psn::new(20), Psn::new(19)), "reversed");
        assert!(r.push(Psn::new(0x7f_ffff), Psn::new(0x80_0001)));
        assert_eq!(r.ranges().len(), 2);
        assert_eq!(r.buffer_len(), 20);
        for i in 2..MAX_SACK_RANGES as u32 {
            assert!(r.push(Psn::new(0x90_0000 + 4 * i), Psn::new(0x90_0001 + 4 * i)));
        }
        assert!(!r.push(Psn::new(0xa0_0000), Psn::new(0xa0_0000)), "full");
    }

    #[test]
    fn parse() {
        // The second range starts after the first in serial order only if it is less than
        // 2^23 ahead: 0xfffffe is behind 0x000107, so TWO is refused.
        assert_eq!(
            SackRepr::parse(&TWO),
            Err(ParseError::Sack("ranges out of order or reversed"))
        );
        let mut b = TWO;
        b[12..20].copy_from_slice(&[0, 0, 0x01, 0x09, 0, 0, 0x01, 0x09]);
        let r = SackRepr::parse(&b).unwrap();
        assert_eq!(
            r.ranges(),
            &[
                (Psn::new(0x105), Psn::new(0x107)),
                (Psn::new(0x109), Psn::new(0x109))
            ]
        );
    }

    #[test]
    fn emit() {
        let mut r = SackRepr::new();
        assert!(r.push(Psn::new(0xff_fffe), Psn::new(2)));
        assert!(r.push(Psn::new(5), Psn::new(7)));
        let mut buf = [0xa5u8; 24];
        assert_eq!(r.emit(&mut buf), Ok(20));
        assert_eq!(
            &buf[..20],
            &[
                1, 2, 0, 0, 0, 0xff, 0xff, 0xfe, 0, 0, 0, 2, 0, 0, 0, 5, 0, 0, 0, 7
            ]
        );
        assert_eq!(&buf[20..], &[0xa5; 4], "nothing beyond");
        assert_eq!(SackRepr::parse(&buf[..20]), Ok(r));
        assert_eq!(
            r.emit(&mut buf[..19]),
            Err(EmitError::BufferTooSmall {
                needed: 20,
                available: 19
            })
        );
    }

    #[test]
    fn malformed_input_is_refused() {
        let mut good = [0u8; 12];
        good[..4].copy_from_slice(&[1, 1, 0, 0]);
        good[4..].copy_from_slice(&[0, 0, 0, 9, 0, 0, 0, 9]);
        assert!(SackRepr::parse(&good).is_ok());
        for n in 0..good.len() {
            assert!(SackRepr::parse(&good[..n]).is_err(), "{n} bytes");
        }
        let cases: [(usize, u8, &str); 6] = [
            (0, 2, "unknown version"),
            (1, 0, "range count out of 1..=8"),
            (1, 9, "range count out of 1..=8"),
            (2, 1, "reserved bytes not zero"),
            (4, 1, "reserved byte of a PSN not zero"),
            (8, 1, "reserved byte of a PSN not zero"),
        ];
        for (at, value, why) in cases {
            let mut b = good;
            b[at] = value;
            assert_eq!(SackRepr::parse(&b), Err(ParseError::Sack(why)), "{at}");
        }
        let mut reversed = good;
        reversed[11] = 8;
        assert!(SackRepr::parse(&reversed).is_err());
        let mut long = [0u8; 16];
        long[..12].copy_from_slice(&good);
        assert_eq!(
            SackRepr::parse(&long),
            Err(ParseError::Sack("length does not match the range count"))
        );
        // Every byte string of the fixed part's length with any count parses or errs; none
        // panics.
        for v in 0..=255u8 {
            let _ = SackRepr::parse(&[1, v, 0, 0]);
            let _ = SackRepr::parse(&[v; 20]);
        }
    }
}
