//! Packet sequence numbers: 24-bit serial numbers (IBTA 9.7).

use core::cmp::Ordering;
use core::fmt;
use core::ops::Add;

/// A 24-bit packet sequence number.
///
/// PSNs wrap at 2^24, so they have no total order: two PSNs compare by their signed distance
/// modulo 2^24, exactly as rxe's `psn_compare` does (`((a - b) << 8) as i32`). A PSN 2^23 or
/// more ahead of another is therefore considered behind it. `Psn` deliberately does not
/// implement `Ord`; use [`Psn::serial_cmp`] or [`Psn::distance`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    /// Mask of the 24 bits of a PSN.
    pub const MASK: u32 = 0x00ff_ffff;
    /// PSN 0.
    pub const ZERO: Psn = Psn(0);

    /// A PSN from the low 24 bits of `value`; higher bits are dropped (PSNs are modular).
    pub const fn new(value: u32) -> Psn {
        Psn(value & Psn::MASK)
    }

    /// The PSN as a `u32` (always below 2^24).
    pub const fn value(self) -> u32 {
        self.0
    }

    /// This PSN advanced by `n`, modulo 2^24.
    pub const fn wrapping_add(self, n: u32) -> Psn {
        Psn::new(self.0.wrapping_add(n))
    }

    /// This PSN moved back by `n`, modulo 2^24.
    pub const fn wrapping_sub(self, n: u32) -> Psn {
        Psn::new(self.0.wrapping_sub(n))
    }

    /// The next PSN.
    pub const fn next(self) -> Psn {
        self.wrapping_add(1)
    }

    /// The signed distance `self − other` modulo 2^24, in −2^23 ..= 2^23 − 1.
    ///
    /// This is rxe's `psn_compare` scaled back to PSN units: the difference is shifted into
    /// the top 24 bits of an `i32` so that its sign is the sign of bit 23.
    pub const fn distance(self, other: Psn) -> i32 {
        ((self.0.wrapping_sub(other.0) << 8) as i32) >> 8
    }

    /// Compares two PSNs in serial-number order (see the type's documentation).
    pub const fn serial_cmp(self, other: Psn) -> Ordering {
        let d = self.distance(other);
        if d < 0 {
            Ordering::Less
        } else if d > 0 {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }

    /// `true` if `self` comes strictly before `other` in serial-number order.
    pub const fn precedes(self, other: Psn) -> bool {
        self.distance(other) < 0
    }
}

impl Add<u32> for Psn {
    type Output = Psn;

    /// Adds modulo 2^24.
    fn add(self, n: u32) -> Psn {
        self.wrapping_add(n)
    }
}

impl From<Psn> for u32 {
    fn from(psn: Psn) -> u32 {
        psn.0
    }
}

impl fmt::Debug for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Psn({:#08x})", self.0)
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#08x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rxe's `psn_compare`, written out as the kernel does it, for comparison.
    fn rxe_psn_compare(a: u32, b: u32) -> i32 {
        (a.wrapping_sub(b) << 8) as i32
    }

    #[test]
    fn masks_to_24_bits() {
        assert_eq!(Psn::new(0x0123_4567).value(), 0x23_4567);
        assert_eq!(Psn::new(0x00ff_ffff).next(), Psn::ZERO);
        assert_eq!(Psn::ZERO.wrapping_sub(1), Psn::new(0xff_ffff));
        assert_eq!(Psn::new(0xff_fffe) + 5, Psn::new(3));
    }

    #[test]
    fn compares_across_the_wrap() {
        let last = Psn::new(0xff_ffff);
        let first = Psn::ZERO;
        assert!(last.precedes(first));
        assert!(!first.precedes(last));
        assert_eq!(first.distance(last), 1);
        assert_eq!(last.distance(first), -1);
        assert_eq!(Psn::new(2).distance(Psn::new(0xff_fffe)), 4);
        assert_eq!(Psn::new(0xff_fffe).serial_cmp(Psn::new(2)), Ordering::Less);
        assert_eq!(Psn::new(7).serial_cmp(Psn::new(7)), Ordering::Equal);
    }

    #[test]
    fn half_range_is_behind_as_in_rxe() {
        let a = Psn::new(0x80_0000);
        let b = Psn::ZERO;
        // a − b = 2^23: bit 23 set, so rxe calls a "before" b, and so do we.
        assert!(rxe_psn_compare(a.value(), b.value()) < 0);
        assert!(a.precedes(b));
        assert_eq!(a.distance(b), -0x80_0000);
        assert_eq!(Psn::new(0x7f_ffff).distance(b), 0x7f_ffff);
    }

    #[test]
    fn agrees_with_rxe_psn_compare_over_the_whole_space() {
        // Every difference class, anchored at points around the wrap and in the middle.
        let anchors = [0u32, 1, 0x7f_ffff, 0x80_0000, 0xff_fffe, 0xff_ffff];
        for &a in &anchors {
            for step in (0..(1u32 << 24)).step_by(4093) {
                let b = (a + step) & Psn::MASK;
                let ours = Psn::new(a).serial_cmp(Psn::new(b));
                let theirs = rxe_psn_compare(a, b).cmp(&0);
                assert_eq!(ours, theirs, "a={a:#x} b={b:#x}");
                assert_eq!(Psn::new(b).wrapping_add(a.wrapping_sub(b)), Psn::new(a));
            }
        }
    }
}
