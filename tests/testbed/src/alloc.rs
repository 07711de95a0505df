//! A counting global allocator for "the hot path allocates nothing" tests.
//!
//! A test binary installs it and measures a closure:
//! ```
//! use rtdaq_testbed::alloc::{allocations, CountingAlloc};
//!
//! #[global_allocator]
//! static GLOBAL: CountingAlloc = CountingAlloc;
//!
//! let (b, n) = allocations(|| Box::new([0u8; 64]));
//! drop(b);
//! assert_eq!(n, 1);
//! ```
//! Counts are per thread (a const-initialised thread-local), so parallel tests do not see each
//! other's allocations; `alloc` and `realloc` count, `dealloc` does not.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

/// The system allocator, counting allocations per thread. Install it with
/// `#[global_allocator]` in the test binary.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAlloc;

// SAFETY: forwards every call to the system allocator unchanged; the counter is a
// const-initialised thread-local (touching it neither allocates nor re-enters).
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract is `System.alloc`'s.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: the caller's contract is `System.dealloc`'s.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract is `System.realloc`'s.
        unsafe { System.realloc(p, l, n) }
    }
}

/// Runs `f` and returns its result with the allocations it made on this thread (0 unless
/// [`CountingAlloc`] is the global allocator).
pub fn allocations<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = ALLOCS.with(Cell::get);
    let r = f();
    (r, ALLOCS.with(Cell::get) - before)
}
