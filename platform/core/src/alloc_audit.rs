//! Proof that real-time threads do not allocate.
//!
//! The appliance installs [`AuditAlloc`] as its global allocator. Each I/O thread calls
//! [`arm_current_thread`] once its setup is done; from then on every heap allocation it makes
//! is counted. The run report carries [`armed_allocations`] (`io_thread_allocations`), and the
//! tests assert it is 0 after a real run. The cost outside armed threads is one thread-local
//! read per allocation.
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOC: rtdaq_platform::alloc_audit::AuditAlloc = rtdaq_platform::alloc_audit::AuditAlloc;
//! ```

pub use crate::sys::audit::AuditAlloc;
use crate::sys::audit::{ARMED, ARMED_ALLOCATIONS};
use std::sync::atomic::Ordering::Relaxed;

/// Counts the calling thread's allocations from now on (when [`AuditAlloc`] is the global
/// allocator; otherwise nothing is counted).
pub fn arm_current_thread() {
    ARMED.with(|a| a.set(true));
}

/// Stops counting the calling thread's allocations (before its teardown).
pub fn disarm_current_thread() {
    ARMED.with(|a| a.set(false));
}

/// Allocations made by armed threads since the process started.
pub fn armed_allocations() -> u64 {
    ARMED_ALLOCATIONS.load(Relaxed)
}
