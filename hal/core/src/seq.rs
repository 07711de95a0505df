//! Sequence tracker (placeholder, being written).
/// Tracker.
pub struct SeqTracker;
