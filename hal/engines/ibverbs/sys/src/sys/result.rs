//! The thin layer: return conventions of libibverbs/librdmacm → `Result` carrying the
//! positive errno, with the name of the call. The only module that reads `errno`.
use std::ffi::c_int;
use std::ptr::NonNull;

use super::raw;
use crate::error::IbError;

/// `errno` of this thread.
pub(crate) fn errno() -> i32 {
    // SAFETY: reads the calling thread's errno through the shim; no preconditions.
    unsafe { raw::rtdaq_ibv_errno() }
}

/// Convention "0 or a positive errno" (verbs: `ibv_modify_qp`, `ibv_dereg_mr`, post).
pub(crate) fn zero_or_errno(rc: c_int, call: &'static str) -> Result<(), IbError> {
    match rc {
        0 => Ok(()),
        e if e > 0 => Err(IbError::call(call, e)),
        _ => Err(IbError::call(call, errno().max(1))),
    }
}

/// Convention "0, or -1 and errno" (librdmacm).
pub(crate) fn minus_one_errno(rc: c_int, call: &'static str) -> Result<(), IbError> {
    if rc == 0 {
        Ok(())
    } else if rc > 0 {
        Err(IbError::call(call, rc))
    } else {
        Err(IbError::call(call, errno().max(1)))
    }
}

/// Convention "NULL and errno" (allocation calls).
pub(crate) fn non_null<T>(p: *mut T, call: &'static str) -> Result<NonNull<T>, IbError> {
    NonNull::new(p).ok_or_else(|| IbError::call(call, errno().max(1)))
}
