//! Flow table (placeholder, being written).
/// Table.
pub struct FlowTable;
/// Classification result.
pub struct Classified;
