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
//! | version (1|2) | count         | beyond (version 2; 1: zero)   |
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
//!
//! Version 1 carries 1 to 8 ranges, its reserved bytes zero. Version 2 carries 1 to
//! [`MAX_SACK_RANGES`] (30: the acknowledgement fits a 256-byte path MTU), and `beyond`:
//! a responder holding more ranges than one acknowledgement carries reports its first ones
//! (the oldest holes are what the requester must resend first) and says how far past the
//! last range reported its highest held PSN lies. Everything the requester sent up to
//! there has either arrived or been lost, so what it has in flight is what it sent after
//! it (forward acknowledgement). An acknowledgement that needs neither more than 8 ranges
//! nor `beyond` is sent as version 1, byte for byte what responders before version 2 sent,
//! so only one that needs them is one a version-1 parser refuses.

use crate::error::{EmitError, ParseError};
use crate::psn::Psn;

/// The highest version this crate emits and accepts (see the module's documentation).
pub const VERSION: u8 = 2;

/// The most ranges one selective acknowledgement carries (version 2).
pub const MAX_SACK_RANGES: usize = 30;

/// The most ranges a version-1 acknowledgement carries.
const MAX_V1_RANGES: usize = 8;

/// Length of the fixed part, before the ranges.
const FIXED_LEN: usize = 4;

/// Length of one range.
const RANGE_LEN: usize = 8;

mod field {
    pub(super) const VERSION: usize = 0;
    pub(super) const COUNT: usize = 1;
    pub(super) const BEYOND: core::ops::Range<usize> = 2..4;
}

/// A selective acknowledgement: up to [`MAX_SACK_RANGES`] PSN ranges, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SackRepr {
    count: u8,
    beyond: u16,
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
            beyond: 0,
            ranges: [(Psn::ZERO, Psn::ZERO); MAX_SACK_RANGES],
        }
    }

    /// How many PSNs past the last range the highest held one lies (0: the ranges say
    /// everything held).
    pub const fn beyond(&self) -> u16 {
        self.beyond
    }

    /// Says that the highest PSN held lies `beyond` past the last range.
    pub fn set_beyond(&mut self, beyond: u16) {
        self.beyond = beyond;
    }

    /// The highest PSN held, as far as it says: the last range's last, and `beyond`.
    pub fn highest(&self) -> Option<Psn> {
        let &(_, last) = self.ranges().last()?;
        Some(last.wrapping_add(u32::from(self.beyond)))
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
    /// acknowledgement of version 1 (1 to 8 ranges, its reserved bytes zero) or 2 (1 to
    /// [`MAX_SACK_RANGES`] ranges), its ranges in PSN order. Anything else is
    /// [`ParseError::Sack`] or [`ParseError::Truncated`].
    pub fn parse(bytes: &[u8]) -> Result<SackRepr, ParseError> {
        if bytes.len() < FIXED_LEN {
            return Err(ParseError::Sack("shorter than its fixed part"));
        }
        let version = bytes[field::VERSION];
        if version == 0 || version > VERSION {
            return Err(ParseError::Sack("unknown version"));
        }
        let count = usize::from(bytes[field::COUNT]);
        if count == 0 || count > MAX_SACK_RANGES || (version == 1 && count > MAX_V1_RANGES) {
            return Err(ParseError::Sack(
                "range count out of 1..=8 (version 1), 1..=30 (2)",
            ));
        }
        let beyond =
            u16::from_be_bytes([bytes[field::BEYOND.start], bytes[field::BEYOND.start + 1]]);
        if version == 1 && beyond != 0 {
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
        repr.beyond = beyond;
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
        let v1 = self.beyond == 0 && usize::from(self.count) <= MAX_V1_RANGES;
        buf[field::VERSION] = if v1 { 1 } else { 2 };
        buf[field::COUNT] = self.count;
        buf[field::BEYOND].copy_from_slice(&self.beyond.to_be_bytes());
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
    fn version_2_says_how_far_beyond_the_last_range_the_highest_held_psn_lies() {
        let mut r = SackRepr::new();
        assert!(r.push(Psn::new(5), Psn::new(7)));
        assert_eq!(r.highest(), Some(Psn::new(7)));
        r.set_beyond(0x0102);
        assert_eq!(r.highest(), Some(Psn::new(7 + 0x102)));
        let mut buf = [0u8; 12];
        assert_eq!(r.emit(&mut buf), Ok(12));
        assert_eq!(&buf, &[2, 1, 0x01, 0x02, 0, 0, 0, 5, 0, 0, 0, 7]);
        assert_eq!(SackRepr::parse(&buf), Ok(r));
        // Across the wrap.
        let mut w = SackRepr::new();
        assert!(w.push(Psn::new(0xff_fff0), Psn::new(0xff_fffe)));
        w.set_beyond(3);
        assert_eq!(w.highest(), Some(Psn::new(1)));
        // Nothing beyond: version 1, as before version 2.
        r.set_beyond(0);
        assert_eq!(r.emit(&mut buf), Ok(12));
        assert_eq!(buf[..4], [1, 1, 0, 0]);
        assert_eq!(SackRepr::new().highest(), None);
    }

    #[test]
    fn version_2_carries_up_to_30_ranges() {
        let mut r = SackRepr::new();
        for i in 0..MAX_SACK_RANGES as u32 {
            assert!(r.push(Psn::new(10 * i), Psn::new(10 * i + 1)));
        }
        assert!(!r.push(Psn::new(1000), Psn::new(1000)), "full");
        let mut buf = [0u8; 4 + 8 * MAX_SACK_RANGES];
        assert_eq!(r.emit(&mut buf), Ok(244));
        assert_eq!(buf[..4], [2, 30, 0, 0]);
        assert_eq!(SackRepr::parse(&buf), Ok(r));
        // Nine ranges need version 2; version 1 with nine is refused.
        let mut nine = SackRepr::new();
        for i in 0..9 {
            assert!(nine.push(Psn::new(10 * i), Psn::new(10 * i)));
        }
        let mut buf = [0u8; 4 + 8 * 9];
        assert_eq!(nine.emit(&mut buf), Ok(76));
        assert_eq!(buf[0], 2);
        assert_eq!(SackRepr::parse(&buf), Ok(nine));
        buf[0] = 1;
        assert_eq!(SackRepr::parse(&buf), Err(ParseError::Sack(COUNT)));
        let mut eight = SackRepr::new();
        for i in 0..8 {
            assert!(eight.push(Psn::new(10 * i), Psn::new(10 * i)));
        }
        assert_eq!(eight.emit(&mut buf), Ok(68));
        assert_eq!(buf[0], 1, "eight ranges and nothing beyond: version 1");
    }

    const COUNT: &str = "range count out of 1..=8 (version 1), 1..=30 (2)";

    #[test]
    fn malformed_input_is_refused() {
        let mut good = [0u8; 12];
        good[..4].copy_from_slice(&[1, 1, 0, 0]);
        good[4..].copy_from_slice(&[0, 0, 0, 9, 0, 0, 0, 9]);
        assert!(SackRepr::parse(&good).is_ok());
        for n in 0..good.len() {
            assert!(SackRepr::parse(&good[..n]).is_err(), "{n} bytes");
        }
        let cases: [(usize, u8, &str); 7] = [
            (0, 0, "unknown version"),
            (0, 3, "unknown version"),
            (1, 0, COUNT),
            (1, 9, COUNT),
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
