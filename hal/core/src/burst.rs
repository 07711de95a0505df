//! Bursts (placeholder, being written).
/// Burst.
pub struct Burst;
/// Packet.
pub struct Packet;
