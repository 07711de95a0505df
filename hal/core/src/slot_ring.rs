//! In-place SPSC ring (placeholder, being written).
