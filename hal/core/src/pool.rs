//! Buffer pool (placeholder, being written).
/// Pool.
pub struct BufferPool;
/// Buffer.
pub struct Buf;
