//! Wire parse/emit (placeholder, being written).
