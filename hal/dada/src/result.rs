//! The library's returns as [`Result`]s: `-1` (or a negative count) and null pointers are
//! failures, named by the call and the key.

use crate::error::{DadaError, Result};

/// `rc` of `call` on `key`: below 0 is a failure meaning `why`.
pub(crate) fn check(rc: i64, call: &'static str, key: i32, why: &'static str) -> Result<u64> {
    if rc < 0 {
        Err(DadaError::Call { call, key, why })
    } else {
        Ok(rc as u64)
    }
}

/// A pointer `p` returned by `call` on `key`: null is a failure meaning `why`.
pub(crate) fn non_null<T>(
    p: *mut T,
    call: &'static str,
    key: i32,
    why: &'static str,
) -> Result<*mut T> {
    if p.is_null() {
        Err(DadaError::Call { call, key, why })
    } else {
        Ok(p)
    }
}
