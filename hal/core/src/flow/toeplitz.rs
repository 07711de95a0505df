//! Toeplitz hash (placeholder, being written).
/// Key.
pub const RSS_KEY_SYMMETRIC: [u8; 40] = [0; 40];
/// Hash.
pub fn toeplitz_hash(_key: &[u8; 40], _input: &[u8]) -> u32 { 0 }
