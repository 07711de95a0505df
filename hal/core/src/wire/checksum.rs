//! The Internet checksum (RFC 1071): one's-complement sum of big-endian 16-bit words.
//!
//! Used by the IPv4 header checksum and the UDP checksum (over the IPv4 pseudo-header,
//! RFC 768). The sum is accumulated in a `u64` over 32-bit words (one's-complement
//! addition is associative and commutative, so summing 32-bit words and folding gives the
//! same result as summing 16-bit words) and never overflows for any slice length a
//! packet can have. An odd trailing byte is padded with a zero byte, as RFC 1071 says.

/// Adds the big-endian 16-bit words of `data` to the running sum `acc` (unfolded).
///
/// `data` is taken to start at an even offset of the checksummed area; an odd final byte
/// counts as the high byte of a word whose low byte is zero.
#[inline]
pub fn sum_words(data: &[u8], acc: u64) -> u64 {
    let mut acc = acc;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        acc += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    let rest = chunks.remainder();
    let mut pairs = rest.chunks_exact(2);
    for p in &mut pairs {
        acc += u64::from(u16::from_be_bytes([p[0], p[1]]));
    }
    if let Some(&last) = pairs.remainder().first() {
        acc += u64::from(u16::from_be_bytes([last, 0]));
    }
    acc
}

/// Folds an unfolded sum to 16 bits with end-around carry (not complemented).
#[inline]
pub fn fold(sum: u64) -> u16 {
    let mut s = sum;
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    s as u16
}

/// The Internet checksum of `data`: the complement of the folded one's-complement sum.
///
/// Writing the result into a zeroed checksum field of `data` makes
/// [`verify`] succeed.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum_words(data, 0))
}

/// True when the one's-complement sum of `data` (which contains its checksum field) is
/// `0xFFFF`, i.e. the checksum verifies.
#[inline]
pub fn verify(data: &[u8]) -> bool {
    fold(sum_words(data, 0)) == 0xFFFF
}

/// Unfolded sum of the IPv4 pseudo-header used by UDP and TCP: source address,
/// destination address, zero byte, protocol, and the L4 length.
#[inline]
pub fn pseudo_header_sum(src: [u8; 4], dst: [u8; 4], protocol: u8, l4_len: u16) -> u64 {
    u64::from(u32::from_be_bytes(src))
        + u64::from(u32::from_be_bytes(dst))
        + u64::from(protocol)
        + u64::from(l4_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3 example: 00 01 f2 03 f4 f5 f6 f7 -> sum ddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum_words(&d, 0)), 0xddf2);
        assert_eq!(checksum(&d), !0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(fold(sum_words(&[0x12, 0x34, 0x56], 0)), 0x1234 + 0x5600);
        assert_eq!(fold(sum_words(&[], 0)), 0);
    }

    #[test]
    fn grouping_does_not_matter() {
        let d: [u8; 11] = [
            0xff, 0xff, 0xff, 0xff, 0x80, 0x01, 0x7f, 0xfe, 0x00, 0x10, 0x33,
        ];
        let mut by16 = 0u64;
        for w in d.chunks(2) {
            by16 += u64::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
        }
        assert_eq!(fold(sum_words(&d, 0)), fold(by16));
    }
}
