//! Counters (placeholder, being written).
/// Drop reason.
pub enum DropReason {}
/// Counters.
pub struct QueueCounters;
