//! The CRC-32 that RoCEv2's ICRC uses (the Ethernet/zlib polynomial 0x04C11DB7, reflected,
//! as `crc32fast` and Linux's `crc32_le` compute it), fast on short buffers.
//!
//! A RoCEv2 packet's ICRC covers from about 40 bytes (an ACK) to a path MTU and a little
//! more. `crc32fast` folds inputs of 128 bytes and more with carry-less multiplies and hashes
//! anything shorter through its tables, one to two bytes per cycle. Most packets of a
//! small-message workload (ACKs, 64-byte WRITEs) are shorter than that, and the table loop
//! was a quarter of the transport's time per packet (its 16 KiB of tables compete with the
//! frames for the L1 cache). This crate folds inputs of 16 to 128 bytes with `pclmulqdq`
//! (the scheme of Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ"),
//! moving every 16-byte block onto the last one with its own pair of multiplies, all
//! independent of each other, then reducing the 128 bits left to 32. Longer inputs go to
//! `crc32fast`'s four-lane fold, shorter ones and CPUs without `pclmulqdq` to its tables.
//!
//! A length that is not a multiple of 16 is handled without a table: the input is hashed
//! behind leading zero bytes, which do not move a CRC register that starts at zero, with the
//! running CRC folded into the input's first four bytes instead of into the register.
//!
//! This is the only crate of the dataplane outside the engine with `unsafe` code: one call,
//! into the function compiled for `pclmulqdq`, made only after the CPU was found to have it.
//! It never allocates, never panics and keeps no state; what it knows of RoCEv2 (which
//! bytes the ICRC masks) is the wire crate's, which passes it the mask.
//!
//! Its one module, the private `clmul`, is the fold compiled for `pclmulqdq`; the public
//! functions here choose between it and `crc32fast`.

/// The CRC-32 of `bytes`.
pub fn hash(bytes: &[u8]) -> u32 {
    update(0, bytes)
}

/// The CRC-32 of a message that continues with `bytes`, given `crc`, the CRC-32 of what came
/// before (0 for nothing): `update(hash(a), b) == hash(a ‖ b)`. The same as
/// `crc32fast::Hasher::new_with_initial(crc)` updated with `bytes` and finalized.
pub fn update(crc: u32, bytes: &[u8]) -> u32 {
    update_masked(crc, bytes, &NO_MASK)
}

/// How many leading bytes [`update_masked`] can mask.
pub const MASK_LEN: usize = 128;

const NO_MASK: [u8; MASK_LEN] = [0; MASK_LEN];

/// [`update`] over `bytes` with `mask` OR-ed into its first [`MASK_LEN`] bytes (the bits
/// set in the mask hash as ones, whatever the input holds there), without a copy of the
/// input: what the ICRC needs, whose masked fields all lie in the first 60 bytes.
// Inlined: a packet's input (16 to 128 bytes) goes straight to the fold; the rest of this
// function stays out of line.
#[inline]
pub fn update_masked(crc: u32, bytes: &[u8], mask: &[u8; MASK_LEN]) -> u32 {
    match folded(crc, bytes, mask) {
        Some(crc) => crc,
        None => update_masked_otherwise(crc, bytes, mask),
    }
}

/// [`update_masked`] of an input that is not folded at once (too short or too long, or a
/// CPU without `pclmulqdq`).
#[inline(never)]
fn update_masked_otherwise(crc: u32, bytes: &[u8], mask: &[u8; MASK_LEN]) -> u32 {
    let (head, rest) = bytes.split_at(bytes.len().min(MASK_LEN));
    let crc = masked_head(crc, head, mask);
    if rest.is_empty() {
        return crc;
    }
    let mut hasher = crc32fast::Hasher::new_with_initial(crc);
    hasher.update(rest);
    hasher.finalize()
}

/// The CRC over `head` (at most `MASK_LEN` bytes) with `mask` applied.
fn masked_head(crc: u32, head: &[u8], mask: &[u8; MASK_LEN]) -> u32 {
    folded(crc, head, mask).unwrap_or_else(|| portable_masked_head(crc, head, mask))
}

/// The CRC over `bytes` with `mask` applied, folded with carry-less multiplies: `None` if
/// `bytes` is not 16 to `MASK_LEN` bytes long or the CPU has no `pclmulqdq`.
#[inline]
fn folded(crc: u32, bytes: &[u8], mask: &[u8; MASK_LEN]) -> Option<u32> {
    #[cfg(target_arch = "x86_64")]
    if (clmul::MIN..=MASK_LEN).contains(&bytes.len()) && std::is_x86_feature_detected!("pclmulqdq")
    {
        // Safety: `fold` needs `pclmulqdq` (and SSE2, which every x86_64 CPU has); the CPU
        // was just found to have it.
        return Some(!unsafe { clmul::fold(!crc, bytes, mask) });
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (crc, bytes, mask);
    None
}

/// `masked_head` without carry-less multiplies: crc32fast over a masked copy.
fn portable_masked_head(crc: u32, head: &[u8], mask: &[u8; MASK_LEN]) -> u32 {
    let mut hasher = crc32fast::Hasher::new_with_initial(crc);
    if mask == &NO_MASK {
        hasher.update(head);
    } else {
        let mut copy = [0u8; MASK_LEN];
        for ((c, &b), &m) in copy.iter_mut().zip(head).zip(mask) {
            *c = b | m;
        }
        hasher.update(&copy[..head.len()]);
    }
    hasher.finalize()
}

#[cfg(target_arch = "x86_64")]
mod clmul {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_clmulepi64_si128, _mm_cvtsi128_si32, _mm_set_epi32,
        _mm_set_epi64x, _mm_srli_si128, _mm_xor_si128,
    };

    /// Shortest input folded here: one block, which also holds the four bytes of the
    /// register.
    pub(crate) const MIN: usize = 16;
    /// Longest input folded here: eight blocks, each moved onto the last in one step. From
    /// here on `crc32fast` folds its four running lanes, which is as fast.
    const MAX: usize = super::MASK_LEN;
    const BLOCKS: usize = MAX / 16;

    /// The reflected polynomial, 0x104C11DB7 with its bits in reverse order.
    const POLY_REFLECTED: u64 = 0x1_db71_0641;

    /// x^k mod P, bit-reflected and shifted left by one: the form in which a reflected CRC
    /// multiplies by it.
    const fn x_pow_mod(k: u32) -> i64 {
        let mut r: u64 = 1;
        let mut i = 0;
        while i < k {
            r <<= 1;
            if r >> 32 != 0 {
                r ^= 0x1_04c1_1db7;
            }
            i += 1;
        }
        ((r as u32).reverse_bits() as i64) << 1
    }

    /// The pair that moves a block `d` blocks on: its low half (the earlier bits) times
    /// x^(128d+32), its high half times x^(128d-32). `SHIFT[0]` is unused.
    const SHIFT: [(i64, i64); BLOCKS] = {
        let mut t = [(0, 0); BLOCKS];
        let mut d = 1;
        while d < BLOCKS {
            t[d] = (
                x_pow_mod(128 * d as u32 + 32),
                x_pow_mod(128 * d as u32 - 32),
            );
            d += 1;
        }
        t
    };
    /// x^64 mod P: folds 64 bits into 32.
    const K5: i64 = x_pow_mod(64);
    /// floor(x^64 / P), reflected, for the Barrett reduction of the last 64 bits.
    const MU: i64 = 0x1_f701_1641;

    #[inline]
    #[target_feature(enable = "sse2")]
    fn block(b: &[u8]) -> u128 {
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[..16]);
        u128::from_le_bytes(a)
    }

    #[inline]
    #[target_feature(enable = "sse2")]
    fn vector(v: u128) -> __m128i {
        _mm_set_epi64x((v >> 64) as i64, v as i64)
    }

    /// A block moved `d` blocks on (`d` >= 1): its two halves multiplied by `SHIFT[d]`.
    #[inline]
    #[target_feature(enable = "pclmulqdq")]
    fn moved(b: __m128i, d: usize) -> __m128i {
        let (lo, hi) = SHIFT[d];
        let k = _mm_set_epi64x(hi, lo);
        _mm_xor_si128(
            _mm_clmulepi64_si128(b, k, 0x00),
            _mm_clmulepi64_si128(b, k, 0x11),
        )
    }

    /// The CRC register after `bytes` (from `MIN` to `MAX` of them) with `mask` OR-ed in,
    /// starting from `register`.
    #[target_feature(enable = "pclmulqdq")]
    pub(crate) fn fold(register: u32, bytes: &[u8], mask: &[u8; MAX]) -> u32 {
        debug_assert!((MIN..=MAX).contains(&bytes.len()));
        // One copy of the fold per block count, so that each is straight-line code: every
        // block's distance to the last, and so its pair of constants, is known where it is
        // compiled (a loop over them spent more on its own bookkeeping than on the blocks).
        match bytes.len().div_ceil(16) {
            1 => fold_blocks::<1>(register, bytes, mask),
            2 => fold_blocks::<2>(register, bytes, mask),
            3 => fold_blocks::<3>(register, bytes, mask),
            4 => fold_blocks::<4>(register, bytes, mask),
            5 => fold_blocks::<5>(register, bytes, mask),
            6 => fold_blocks::<6>(register, bytes, mask),
            7 => fold_blocks::<7>(register, bytes, mask),
            _ => fold_blocks::<BLOCKS>(register, bytes, mask),
        }
    }

    /// [`fold`] of an input of `N` blocks (its first one possibly partial).
    #[inline]
    #[target_feature(enable = "pclmulqdq")]
    fn fold_blocks<const N: usize>(register: u32, bytes: &[u8], mask: &[u8; MAX]) -> u32 {
        let len = bytes.len();
        let r = len % 16;
        // The input goes behind 16 - r zero bytes so that it ends on a block boundary; from
        // a register of zero, leading zeros change nothing. The register is added to the
        // input's first four bytes instead, which may spill into the second block.
        let register = u128::from(register);
        let (first, spill, next) = if r == 0 {
            ((block(bytes) | block(mask)) ^ register, 0, 16)
        } else {
            let shift = 8 * (16 - r) as u32;
            (
                ((block(bytes) | block(mask)) << shift) ^ (register << shift),
                register >> (8 * r),
                r,
            )
        };
        // Every block moved onto the last one, all at once: the multiplies are independent.
        let mut x = vector(first);
        if N > 1 {
            x = moved(x, N - 1);
            let rest = &bytes[next..next + 16 * (N - 1)];
            let masks = &mask[next..next + 16 * (N - 1)];
            let mut i = 0;
            while i < N - 1 {
                let mut b = block(&rest[16 * i..]) | block(&masks[16 * i..]);
                if i == 0 {
                    b ^= spill;
                }
                let b = vector(b);
                let d = N - 2 - i;
                x = _mm_xor_si128(x, if d == 0 { b } else { moved(b, d) });
                i += 1;
            }
        }
        reduce(x)
    }

    /// The CRC register of 128 folded bits.
    #[inline]
    #[target_feature(enable = "pclmulqdq")]
    fn reduce(mut x: __m128i) -> u32 {
        // 128 bits to 64 (and 32 zero bits appended): the low half times x^96 onto the high.
        let t = _mm_clmulepi64_si128(x, _mm_set_epi64x(0, SHIFT[1].1), 0x00);
        x = _mm_xor_si128(_mm_srli_si128(x, 8), t);
        // 64 to 32 bits.
        let low32 = _mm_set_epi32(0, 0, 0, -1);
        let t = _mm_clmulepi64_si128(_mm_and_si128(x, low32), _mm_set_epi64x(0, K5), 0x00);
        x = _mm_xor_si128(_mm_srli_si128(x, 4), t);
        // Barrett reduction of the remaining 64 bits to the 32-bit remainder.
        let pmu = _mm_set_epi64x(MU, POLY_REFLECTED as i64);
        let t = _mm_clmulepi64_si128(_mm_and_si128(x, low32), pmu, 0x10);
        let t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), pmu, 0x00);
        x = _mm_xor_si128(x, t);
        _mm_cvtsi128_si32(_mm_srli_si128(x, 4)) as u32
    }

    #[cfg(test)]
    #[test]
    fn constants_match_the_published_ones() {
        // Linux's crc32-pclmul and Intel's paper: x^(4*128±32), x^(128±32), x^64.
        assert_eq!(SHIFT[1], (0x1_7519_97d0, 0x0_ccaa_009e));
        assert_eq!(SHIFT[4], (0x1_5444_2bd4, 0x1_c6e4_1596));
        assert_eq!(K5, 0x1_63cd_6124);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    fn reference(crc: u32, bytes: &[u8]) -> u32 {
        let mut h = crc32fast::Hasher::new_with_initial(crc);
        h.update(bytes);
        h.finalize()
    }

    #[test]
    fn check_value() {
        assert_eq!(hash(b"123456789"), 0xcbf4_3926);
        assert_eq!(hash(b""), 0);
        assert_eq!(hash(&[0u8; 32]), 0x190a_55ad);
        assert_eq!(hash(&[0xffu8; 32]), 0xff6c_ab0b);
    }

    /// Every length up to well past the folded range, random bytes and random running CRCs,
    /// against `crc32fast`.
    #[test]
    fn matches_crc32fast_at_every_length() {
        let mut rng = StdRng::seed_from_u64(0x1c2c);
        let mut buf = vec![0u8; 400];
        for len in 0..400 {
            for _ in 0..20 {
                rng.fill(&mut buf[..len]);
                let crc: u32 = rng.random();
                assert_eq!(
                    update(crc, &buf[..len]),
                    reference(crc, &buf[..len]),
                    "length {len}, crc {crc:#x}"
                );
            }
        }
    }

    /// Masks of every shape, against hashing a masked copy.
    #[test]
    fn masked_matches_a_masked_copy() {
        let mut rng = StdRng::seed_from_u64(0x5eed);
        let mut buf = vec![0u8; 300];
        let mut mask = [0u8; MASK_LEN];
        for len in 0..300 {
            for round in 0..10 {
                rng.fill(&mut buf[..len]);
                mask.fill(0);
                // Sparse masks like the ICRC's, and dense random ones.
                if round % 2 == 0 {
                    for _ in 0..6 {
                        mask[rng.random_range(0..64)] = 0xff;
                    }
                } else {
                    rng.fill(&mut mask[..]);
                }
                let crc: u32 = rng.random();
                let copy: Vec<u8> = buf[..len]
                    .iter()
                    .enumerate()
                    .map(|(i, &b)| b | mask.get(i).copied().unwrap_or(0))
                    .collect();
                assert_eq!(
                    update_masked(crc, &buf[..len], &mask),
                    reference(crc, &copy),
                    "length {len}, round {round}"
                );
            }
        }
    }

    /// The path other CPUs (and other architectures) take, which this one never does.
    #[test]
    fn the_portable_path_matches_too() {
        let mut rng = StdRng::seed_from_u64(0xa11);
        let mut buf = [0u8; MASK_LEN];
        let mut mask = [0u8; MASK_LEN];
        for len in 0..=MASK_LEN {
            rng.fill(&mut buf[..len]);
            rng.fill(&mut mask[..]);
            let crc: u32 = rng.random();
            let copy: Vec<u8> = buf[..len].iter().zip(&mask).map(|(b, m)| b | m).collect();
            assert_eq!(
                portable_masked_head(crc, &buf[..len], &mask),
                reference(crc, &copy),
                "length {len}"
            );
            assert_eq!(
                portable_masked_head(crc, &buf[..len], &NO_MASK),
                reference(crc, &buf[..len]),
                "length {len}"
            );
        }
    }

    #[test]
    fn pieces_chain() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut buf = vec![0u8; 300];
        rng.fill(&mut buf[..]);
        for split in 0..buf.len() {
            let (a, b) = buf.split_at(split);
            assert_eq!(update(hash(a), b), hash(&buf), "split at {split}");
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn fold_matches_the_bit_by_bit_definition() {
        if !std::is_x86_feature_detected!("pclmulqdq") {
            return;
        }
        let mut rng = StdRng::seed_from_u64(99);
        let mut buf = [0u8; MASK_LEN];
        for len in clmul::MIN..=MASK_LEN {
            rng.fill(&mut buf[..len]);
            let start: u32 = rng.random();
            let mut register = start;
            for &b in &buf[..len] {
                register ^= u32::from(b);
                for _ in 0..8 {
                    register = if register & 1 != 0 {
                        (register >> 1) ^ 0xedb8_8320
                    } else {
                        register >> 1
                    };
                }
            }
            // Safety: the CPU has pclmulqdq (checked above).
            let folded = unsafe { clmul::fold(start, &buf[..len], &NO_MASK) };
            assert_eq!(folded, register, "length {len}");
        }
    }
}
