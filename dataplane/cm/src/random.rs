//! Randomness, injected. The Linux CM draws a random operand that scrambles its comm IDs,
//! rdma_cm a random 24-bit starting PSN per id and a random first port to try when it
//! picks an ephemeral port. This crate draws nothing itself: the caller hands in a
//! [`Random`] (the engine: the operating system's generator; the tests: a seeded one), so
//! that every run of the tests is the same.

/// A source of random 32-bit values.
pub trait Random: Send {
    /// The next value.
    fn next_u32(&mut self) -> u32;
}

/// A small, fast, seeded generator (SplitMix64): deterministic for tests and simulations.
/// Not for anything an attacker must not predict.
#[derive(Clone, Debug)]
pub struct SeededRandom(u64);

impl SeededRandom {
    /// A generator started from `seed`.
    pub const fn new(seed: u64) -> SeededRandom {
        SeededRandom(seed)
    }

    /// The next 64-bit value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// `true` with probability `p` (0.0 ..= 1.0).
    pub fn chance(&mut self, p: f64) -> bool {
        let x = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        p > 0.0 && x < p
    }
}

impl Random for SeededRandom {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
}

/// Values handed out in a given order, then those of a seeded generator: lets a test make
/// the CM pick exactly the comm IDs, PSNs and ports a capture shows.
#[derive(Clone, Debug)]
pub struct ScriptedRandom {
    values: std::collections::VecDeque<u32>,
    then: SeededRandom,
}

impl ScriptedRandom {
    /// `values` first, in order, then values seeded with `seed`.
    pub fn new(values: &[u32], seed: u64) -> ScriptedRandom {
        ScriptedRandom {
            values: values.iter().copied().collect(),
            then: SeededRandom::new(seed),
        }
    }
}

impl Random for ScriptedRandom {
    fn next_u32(&mut self) -> u32 {
        match self.values.pop_front() {
            Some(v) => v,
            None => self.then.next_u32(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_is_deterministic_and_scripted_goes_first() {
        let mut a = SeededRandom::new(7);
        let mut b = SeededRandom::new(7);
        assert_eq!(a.next_u32(), b.next_u32());
        assert!(a.below(10) < 10);
        assert!(!a.chance(0.0));
        assert!(a.chance(1.0));
        let mut s = ScriptedRandom::new(&[1, 2], 7);
        assert_eq!((s.next_u32(), s.next_u32()), (1, 2));
        let mut c = SeededRandom::new(7);
        assert_eq!(s.next_u32(), c.next_u32());
    }
}
