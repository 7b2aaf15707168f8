//! Rates, in bits per second, and how long bytes take at a rate.

use core::fmt;
use core::time::Duration;

/// A sending rate in bits per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(u64);

impl Rate {
    /// No rate at all.
    pub const ZERO: Rate = Rate(0);

    /// `bits` bits per second.
    pub const fn from_bits_per_sec(bits: u64) -> Rate {
        Rate(bits)
    }

    /// `mbit` megabits (10^6 bits) per second, as NVIDIA's parameters give rates.
    pub const fn from_mbit(mbit: u64) -> Rate {
        Rate(mbit.saturating_mul(1_000_000))
    }

    /// Bits per second.
    pub const fn bits_per_sec(self) -> u64 {
        self.0
    }

    /// Megabits per second (rounded down).
    pub const fn mbit(self) -> u64 {
        self.0 / 1_000_000
    }

    /// The time `bytes` bytes take at this rate (`Duration::MAX` at rate zero).
    pub fn time_for(self, bytes: u64) -> Duration {
        if self.0 == 0 {
            return Duration::MAX;
        }
        let nanos = u128::from(bytes) * 8 * 1_000_000_000 / u128::from(self.0);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// The bytes this rate moves in `time` (rounded down).
    pub fn bytes_in(self, time: Duration) -> u64 {
        let bytes = u128::from(self.0) * time.as_nanos() / 8 / 1_000_000_000;
        u64::try_from(bytes).unwrap_or(u64::MAX)
    }

    /// This rate scaled by `num / den` (rounded down).
    pub fn scaled(self, num: u64, den: u64) -> Rate {
        if den == 0 {
            return Rate(u64::MAX);
        }
        let r = u128::from(self.0) * u128::from(num) / u128::from(den);
        Rate(u64::try_from(r).unwrap_or(u64::MAX))
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bits = self.0 as f64;
        if bits >= 1e9 {
            write!(f, "{:.2} Gbit/s", bits / 1e9)
        } else if bits >= 1e6 {
            write!(f, "{:.1} Mbit/s", bits / 1e6)
        } else {
            write!(f, "{} bit/s", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_and_bytes_agree() {
        let gbit = Rate::from_mbit(1000);
        assert_eq!(gbit.time_for(125), Duration::from_micros(1));
        assert_eq!(gbit.bytes_in(Duration::from_micros(8)), 1000);
        assert_eq!(Rate::ZERO.time_for(1), Duration::MAX);
        assert_eq!(Rate::ZERO.bytes_in(Duration::from_secs(1)), 0);
        assert_eq!(gbit.scaled(1, 4), Rate::from_mbit(250));
        assert_eq!(Rate::from_mbit(5).mbit(), 5);
        assert_eq!(gbit.to_string(), "1.00 Gbit/s");
        assert_eq!(Rate::from_mbit(5).to_string(), "5.0 Mbit/s");
    }
}
