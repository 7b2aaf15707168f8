//! The Internet checksum (RFC 1071): one's complement sum of 16-bit big-endian words.

/// Adds `data` to a running one's complement sum (not yet folded). An odd last byte is
/// padded with a zero byte, as RFC 1071 says.
///
/// The words are added four bytes at a time: a 32-bit word is congruent to the sum of its
/// two 16-bit halves modulo 2^16 - 1, which is all a one's complement sum keeps, and
/// [`finish`] folds the carries back in (RFC 1071, 2.(B): the sum may be computed in any
/// word size). Half the additions for every IPv4 header received.
pub(crate) fn sum(mut acc: u64, data: &[u8]) -> u64 {
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        acc += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    let mut chunks = words.remainder().chunks_exact(2);
    for pair in &mut chunks {
        acc += u64::from(u16::from_be_bytes([pair[0], pair[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(u16::from_be_bytes([*last, 0]));
    }
    acc
}

/// Folds a running sum to 16 bits and complements it: the value that goes in the header.
pub(crate) fn finish(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// The checksum of `data` alone.
pub(crate) fn checksum(data: &[u8]) -> u16 {
    finish(sum(0, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (folded).
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(checksum(&[0x12]), !0x1200);
        assert_eq!(checksum(&[]), 0xffff);
    }

    /// The 32-bit additions give the checksum of RFC 1071's 16-bit ones, at every length
    /// and alignment of the tail, all zeros and all ones included.
    #[test]
    fn word_size_does_not_change_the_checksum() {
        fn by_halves(data: &[u8]) -> u16 {
            let mut acc = 0u64;
            for pair in data.chunks(2) {
                acc += u64::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
            }
            finish(acc)
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut data = [0u8; 70];
        for len in 0..data.len() {
            for round in 0..20 {
                for b in data.iter_mut() {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    *b = match round {
                        0 => 0,
                        1 => 0xff,
                        _ => x as u8,
                    };
                }
                assert_eq!(checksum(&data[..len]), by_halves(&data[..len]), "{len}");
                assert_eq!(finish(sum(0xfffe, &data[..len])), {
                    let mut acc = 0xfffeu64;
                    for pair in data[..len].chunks(2) {
                        acc += u64::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
                    }
                    finish(acc)
                });
            }
        }
    }

    #[test]
    fn a_header_with_its_checksum_sums_to_zero() {
        // The IPv4 header of rc_pingpong.pcap frame 19 (checksum 0x892a in place).
        let hdr = [
            0x45, 0x00, 0x00, 0x30, 0x9c, 0xf4, 0x40, 0x00, 0x40, 0x11, 0x89, 0x2a, 0x0a, 0x4d,
            0x00, 0x02, 0x0a, 0x4d, 0x00, 0x03,
        ];
        assert_eq!(checksum(&hdr), 0);
    }
}
