//! NUMA placement of a ring's segments: the `mbind(2)` system call, which neither libc's
//! wrappers nor the psrdada library offer (`dada_db` has no NUMA option).

use std::io;
use std::os::raw::{c_long, c_ulong, c_void};

const MPOL_BIND: c_long = 2;
const MPOL_MF_STRICT: c_ulong = 1;
const MPOL_MF_MOVE: c_ulong = 2;
/// Node bits in the mask (the kernel's largest `MAX_NUMNODES`).
const NODE_BITS: usize = 1024;

/// Binds the pages of `[addr, addr + len)` (a mapping of this process, `addr` page-aligned)
/// to NUMA node `node`, moving pages already placed elsewhere. A node the host does not
/// have is `EINVAL`.
pub(crate) fn bind(addr: *mut c_void, len: usize, node: u32) -> io::Result<()> {
    let node = node as usize;
    let bits = c_ulong::BITS as usize;
    if node >= NODE_BITS {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut mask = [0 as c_ulong; NODE_BITS / c_ulong::BITS as usize];
    mask[node / bits] |= 1 << (node % bits);
    // SAFETY: mbind reads `mask` (NODE_BITS bits; maxnode counts one more, as the kernel
    // takes it) and changes the placement policy of the range, never its contents; the
    // caller passes a range it has mapped.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            addr,
            len,
            MPOL_BIND,
            mask.as_ptr(),
            NODE_BITS + 1,
            MPOL_MF_MOVE | MPOL_MF_STRICT,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
