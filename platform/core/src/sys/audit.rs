//! The `unsafe impl GlobalAlloc` behind [`crate::alloc_audit`]: forwards to the system
//! allocator and counts the allocations made by threads that armed themselves.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

thread_local! {
    /// Whether the current thread's allocations are counted (const-initialised, no
    /// destructor: safe to touch from inside the allocator).
    pub(crate) static ARMED: Cell<bool> = const { Cell::new(false) };
}

/// Allocations (and reallocations) made on armed threads since process start.
pub(crate) static ARMED_ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// Counting global allocator; see [`crate::alloc_audit`].
#[derive(Debug, Default, Clone, Copy)]
pub struct AuditAlloc;

#[inline]
fn count() {
    if ARMED.try_with(Cell::get).unwrap_or(false) {
        ARMED_ALLOCATIONS.fetch_add(1, Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds the `GlobalAlloc`
// contract; the bookkeeping neither allocates (const thread-local `Cell`, a static atomic) nor
// unwinds.
unsafe impl GlobalAlloc for AuditAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract is `System.alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
