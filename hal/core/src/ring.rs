//! Fixed-capacity lock-free SPSC ring (placeholder, being written).
/// SPSC ring.
pub struct Ring;
