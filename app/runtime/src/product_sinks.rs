//! Where a GPU stage's products go (a leaf between the GPU stage, its seam `gpu_hook` and
//! the run's start-up, so none of them imports another for it).

use crate::egress::EgressSink;
use crate::record::RecordSink;

/// Where a GPU stage's products go: its recorders' sinks (`record`) and its egress sinks
/// (`egress`), each given every completed batch's product.
#[derive(Default)]
pub struct ProductSinks {
    /// Record sinks of the products.
    pub record: Vec<RecordSink>,
    /// Egress sinks of the products: one heap (message) each.
    pub egress: Vec<EgressSink>,
}

impl ProductSinks {
    /// No sink at all.
    pub fn is_empty(&self) -> bool {
        self.record.is_empty() && self.egress.is_empty()
    }
}
