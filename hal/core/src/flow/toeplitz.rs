//! Toeplitz hash as used by NIC receive-side scaling (Microsoft RSS specification).
//!
//! For every input bit (most significant bit of the first byte first) that is set, the
//! 32-bit window of the key starting at that bit position is XORed into the result. The
//! key is 40 bytes, enough for 36 input bytes (IPv6 4-tuple); longer inputs wrap around
//! the key.
//!
//! rtdaq hashes the IPv4/UDP 4-tuple in the RSS order: source address, destination
//! address, source port, destination port (12 bytes, big-endian), see
//! [`hash_ipv4_udp`]. With [`RSS_KEY_SYMMETRIC`] (`0x6d5a` repeated), the key has a period
//! of 16 bits, and since swapping source/destination moves every input bit by a multiple
//! of 16 bits (32 for addresses, 16 for ports), the hash is the same for both directions
//! of a flow.
//!
//! The price of symmetry: with a key of period 16 bits, every input bit at the same
//! position modulo 16 meets the same key window, so the hash depends only on the XOR of
//! the six 16-bit words of the tuple (16 bits of entropy). Tuples with the same XOR land
//! on the same queue (e.g. source address and source port both incremented by the same
//! low bit). Many independent flows still spread evenly.

/// The standard Microsoft RSS verification key (`6d5a56da 255b0ec2 ...`), used by most
/// NIC drivers as their default key. Not symmetric.
pub const RSS_KEY_MICROSOFT: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// Symmetric RSS key: `0x6d5a` repeated 20 times (Woo & Park, "Scalable TCP Session
/// Monitoring with Symmetric Receive-side Scaling"). `hash(a, b, p, q) == hash(b, a, q, p)`.
pub const RSS_KEY_SYMMETRIC: [u8; 40] = {
    let mut k = [0u8; 40];
    let mut i = 0;
    while i < 40 {
        k[i] = if i % 2 == 0 { 0x6d } else { 0x5a };
        i += 1;
    }
    k
};

/// Toeplitz hash of `input` under `key` (inputs longer than 36 bytes wrap around the
/// key).
pub fn toeplitz_hash(key: &[u8; 40], input: &[u8]) -> u32 {
    let mut result = 0u32;
    for (i, &byte) in input.iter().enumerate() {
        if byte == 0 {
            continue;
        }
        // 40 key bits starting at byte i: the 32-bit window for bit b is (k >> (8 - b)).
        let mut k = 0u64;
        for j in 0..5 {
            k = (k << 8) | u64::from(key[(i + j) % 40]);
        }
        for b in 0..8 {
            if byte & (0x80 >> b) != 0 {
                result ^= (k >> (8 - b)) as u32;
            }
        }
    }
    result
}

/// Toeplitz hash of the IPv4/UDP 4-tuple in RSS order (src ip, dst ip, src port, dst
/// port).
pub fn hash_ipv4_udp(key: &[u8; 40], src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> u32 {
    let mut input = [0u8; 12];
    input[0..4].copy_from_slice(&src);
    input[4..8].copy_from_slice(&dst);
    input[8..10].copy_from_slice(&sport.to_be_bytes());
    input[10..12].copy_from_slice(&dport.to_be_bytes());
    toeplitz_hash(key, &input)
}

/// Toeplitz hash of the IPv4 2-tuple (src ip, dst ip).
pub fn hash_ipv4(key: &[u8; 40], src: [u8; 4], dst: [u8; 4]) -> u32 {
    let mut input = [0u8; 8];
    input[0..4].copy_from_slice(&src);
    input[4..8].copy_from_slice(&dst);
    toeplitz_hash(key, &input)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (src ip, src port, dst ip, dst port, IPv4 hash, IPv4+TCP/UDP 4-tuple hash) from the
    /// Microsoft "Verifying the RSS Hash Calculation" page.
    type Vector = ([u8; 4], u16, [u8; 4], u16, u32, u32);
    const VECTORS: [Vector; 5] = [
        (
            [66, 9, 149, 187],
            2794,
            [161, 142, 100, 80],
            1766,
            0x323e8fc2,
            0x51ccc178,
        ),
        (
            [199, 92, 111, 2],
            14230,
            [65, 69, 140, 83],
            4739,
            0xd718262a,
            0xc626b0ea,
        ),
        (
            [24, 19, 198, 95],
            12898,
            [12, 22, 207, 184],
            38024,
            0xd2d0a5de,
            0x5c2b394a,
        ),
        (
            [38, 27, 205, 30],
            48228,
            [209, 142, 163, 6],
            2217,
            0x82989176,
            0xafc7327f,
        ),
        (
            [153, 39, 163, 191],
            44251,
            [202, 188, 127, 2],
            1303,
            0x5d1809c5,
            0x10e828a2,
        ),
    ];

    #[test]
    fn microsoft_vectors() {
        for (src, sport, dst, dport, h2, h4) in VECTORS {
            assert_eq!(
                hash_ipv4(&RSS_KEY_MICROSOFT, src, dst),
                h2,
                "{src:?} -> {dst:?}"
            );
            assert_eq!(
                hash_ipv4_udp(&RSS_KEY_MICROSOFT, src, dst, sport, dport),
                h4,
                "{src:?}:{sport} -> {dst:?}:{dport}"
            );
        }
    }

    #[test]
    fn symmetric_key() {
        assert_eq!(&RSS_KEY_SYMMETRIC[..4], &[0x6d, 0x5a, 0x6d, 0x5a]);
        for (src, sport, dst, dport, _, _) in VECTORS {
            assert_eq!(
                hash_ipv4_udp(&RSS_KEY_SYMMETRIC, src, dst, sport, dport),
                hash_ipv4_udp(&RSS_KEY_SYMMETRIC, dst, src, dport, sport)
            );
        }
    }

    #[test]
    fn empty_and_long_inputs() {
        assert_eq!(toeplitz_hash(&RSS_KEY_MICROSOFT, &[]), 0);
        // Wraps around the key instead of reading past it.
        let _ = toeplitz_hash(&RSS_KEY_MICROSOFT, &[0xFF; 100]);
    }
}
