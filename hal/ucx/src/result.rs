//! The thin layer: UCX's return conventions → `Result`, and the header macros bindgen cannot
//! translate (`UCS_PTR_IS_ERR`, `UCS_PTR_IS_PTR`, `UCS_PTR_RAW_STATUS`, `ucp_dt_make_contig`),
//! re-implemented from `<ucs/type/status.h>` and `<ucp/api/ucp.h>` of UCX 1.13.
use std::ffi::c_void;
use std::ptr::NonNull;

use crate::error::{Result, Status, UcxError};
use crate::raw;

/// Convention "`ucs_status_t`, `UCS_OK` on success".
pub(crate) fn check(status: raw::ucs_status_t, call: &'static str) -> Result<()> {
    if status == raw::UCS_OK {
        Ok(())
    } else {
        Err(UcxError::call(call, Status(status)))
    }
}

/// `UCS_PTR_IS_ERR(p)`: `(uintptr_t)p >= (uintptr_t)UCS_ERR_LAST`.
pub(crate) fn ptr_is_err(p: *const c_void) -> bool {
    (p as usize) >= (raw::UCS_ERR_LAST as isize as usize)
}

/// `UCS_PTR_IS_PTR(p)`: `((uintptr_t)p - 1) < ((uintptr_t)UCS_ERR_LAST - 1)`: a request
/// handle, neither NULL (`UCS_OK`) nor an error code.
pub(crate) fn ptr_is_ptr(p: *const c_void) -> bool {
    (p as usize).wrapping_sub(1) < (raw::UCS_ERR_LAST as isize as usize).wrapping_sub(1)
}

/// `UCS_PTR_RAW_STATUS(p)`: `(ucs_status_t)(intptr_t)p`.
pub(crate) fn ptr_raw_status(p: *const c_void) -> Status {
    Status(p as isize as raw::ucs_status_t)
}

/// `ucp_dt_make_contig(elem_size)`: `(elem_size << UCP_DATATYPE_SHIFT) | UCP_DATATYPE_CONTIG`.
pub(crate) const fn dt_make_contig(elem_size: u64) -> raw::ucp_datatype_t {
    (elem_size << raw::UCP_DATATYPE_SHIFT) | raw::UCP_DATATYPE_CONTIG as u64
}

/// What a non-blocking (`*_nbx`) call returned (`ucs_status_ptr_t`).
#[derive(Debug)]
pub(crate) enum StatusPtr {
    /// NULL: completed in the call (`UCS_OK`).
    Done,
    /// A request handle: in flight, to be checked and freed.
    Pending(NonNull<c_void>),
    /// An error code.
    Err(Status),
}

/// Sorts a `ucs_status_ptr_t`.
pub(crate) fn status_ptr(p: raw::ucs_status_ptr_t) -> StatusPtr {
    if ptr_is_ptr(p) {
        // ptr_is_ptr excludes NULL.
        NonNull::new(p).map_or(StatusPtr::Done, StatusPtr::Pending)
    } else if ptr_is_err(p) {
        StatusPtr::Err(ptr_raw_status(p))
    } else {
        StatusPtr::Done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_ptr_sorts_null_errors_and_handles() {
        assert!(matches!(status_ptr(std::ptr::null_mut()), StatusPtr::Done));
        for code in [
            raw::UCS_ERR_NO_MESSAGE,
            raw::UCS_ERR_CANCELED,
            raw::UCS_ERR_CONNECTION_RESET,
            raw::UCS_ERR_ENDPOINT_TIMEOUT,
            raw::UCS_ERR_LAST + 1,
        ] {
            let p = code as isize as *mut c_void;
            assert!(ptr_is_err(p), "{code}");
            assert!(!ptr_is_ptr(p), "{code}");
            match status_ptr(p) {
                StatusPtr::Err(s) => assert_eq!(s.raw(), code),
                other => panic!("{code}: {other:?}"),
            }
        }
        let mut x = 0u64;
        let p = (&mut x as *mut u64).cast::<c_void>();
        assert!(ptr_is_ptr(p) && !ptr_is_err(p));
        assert!(matches!(status_ptr(p), StatusPtr::Pending(h) if h.as_ptr() == p));
    }

    #[test]
    fn contig_datatype_matches_the_header() {
        // ucp_dt_make_contig(1) == (1 << 3) | 0.
        assert_eq!(dt_make_contig(1), 8);
        assert_eq!(dt_make_contig(4), 32);
    }

    #[test]
    fn check_names_the_call() {
        assert!(check(raw::UCS_OK, "x").is_ok());
        let e = check(raw::UCS_ERR_INVALID_PARAM, "ucp_thing").unwrap_err();
        assert_eq!(e.status(), Some(Status::INVALID_PARAM));
        assert!(e.to_string().starts_with("ucp_thing failed: "), "{e}");
    }
}
