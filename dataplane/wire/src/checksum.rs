//! The Internet checksum (RFC 1071): one's complement sum of 16-bit big-endian words.

/// Adds `data` to a running one's complement sum (not yet folded). An odd last byte is
/// padded with a zero byte, as RFC 1071 says.
pub(crate) fn sum(mut acc: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(2);
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
