//! The thin layer: one helper per DPDK status convention, turning a return code into a
//! `Result` carrying the positive errno. The only module that reads `rte_errno`.
//! Callers (the safe layer) add the context that makes an error message useful.
use std::ffi::{c_int, CStr};

use super::raw;

/// `rte_errno` of this thread.
pub(crate) fn errno() -> i32 {
    // SAFETY: reads a thread-local int through the shim; no preconditions.
    unsafe { raw::rtdaq_errno() }
}

/// `rte_strerror(e)` as an owned string (DPDK's text for its own codes and libc's otherwise).
pub(crate) fn strerror(e: i32) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or thread-local NUL-terminated
    // buffer valid until the next call on this thread; it is copied out at once.
    unsafe {
        let p = raw::rte_strerror(e);
        if p.is_null() {
            return format!("error {e}");
        }
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// Convention "negative errno on failure" (ethdev): `rc < 0` → `Err(-rc)`.
pub(crate) fn neg_errno(rc: c_int) -> Result<c_int, i32> {
    if rc < 0 {
        Err(-rc)
    } else {
        Ok(rc)
    }
}

/// Convention "-1 and rte_errno" (EAL): `rc < 0` → `Err(rte_errno)`.
pub(crate) fn minus_one_rte_errno(rc: c_int) -> Result<c_int, i32> {
    if rc < 0 {
        Err(errno())
    } else {
        Ok(rc)
    }
}

/// Convention "NULL and rte_errno" (mempool create): null → `Err(rte_errno)`.
pub(crate) fn null_rte_errno<T>(p: *mut T) -> Result<std::ptr::NonNull<T>, i32> {
    std::ptr::NonNull::new(p).ok_or_else(errno)
}
