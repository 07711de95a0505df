//! Result layer of the AF_XDP calls that neither nix nor `rtdaq-netsys` wraps: the `AF_XDP`
//! socket, `XDP_UMEM_REG` (it hands the kernel an address) and the `sockaddr_xdp` bind, plus
//! the page size and the realtime clock. Socket options, device queries, `ppoll` and the
//! ring mappings go through `rtdaq-netsys` (nix where it covers the call); the TX/RX
//! wake-ups through nix's `send`/`recv`. Functions that hand the kernel raw addresses are
//! `unsafe fn` with a `# Safety` contract that the safe layer upholds.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use libc::socklen_t;
use rtdaq_netsys::cvt;

/// `socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0)`.
pub(crate) fn xdp_socket() -> io::Result<OwnedFd> {
    // SAFETY: integer arguments only.
    let fd = cvt(unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` was just returned by `socket` and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Registers `len` bytes at `addr` as the UMEM of `fd` (`XDP_UMEM_REG`).
///
/// # Safety
/// `addr..addr + len` must stay valid (mapped, not freed) for as long as the kernel may use
/// the UMEM, i.e. until every socket bound to it is closed and its last frame returned. The
/// kernel pins the pages; it reads and writes them while the UMEM lives.
pub(crate) unsafe fn umem_reg(
    fd: BorrowedFd<'_>,
    addr: *mut u8,
    len: u64,
    chunk_size: u32,
    headroom: u32,
) -> io::Result<()> {
    let reg = libc::xdp_umem_reg {
        addr: addr as u64,
        len,
        chunk_size,
        headroom,
        flags: 0,
        tx_metadata_len: 0,
    };
    // SAFETY: `reg.addr..+len` is valid for as long as the kernel uses the UMEM: the
    // caller's contract.
    unsafe { rtdaq_netsys::sockopt::set_unchecked(fd, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg) }
}

/// `bind` of an AF_XDP socket to `ifindex` / `queue_id`.
pub(crate) fn xdp_bind(
    fd: BorrowedFd<'_>,
    ifindex: u32,
    queue_id: u32,
    flags: u16,
    shared_umem_fd: Option<BorrowedFd<'_>>,
) -> io::Result<()> {
    let sa = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue_id,
        sxdp_shared_umem_fd: shared_umem_fd.map_or(0, |f| f.as_raw_fd() as u32),
    };
    // SAFETY: `sa` is a valid `sockaddr_xdp` of the given length for the call.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_xdp).cast::<libc::sockaddr>(),
            size_of::<libc::sockaddr_xdp>() as socklen_t,
        )
    })
    .map(drop)
}

/// The system page size (`sysconf(_SC_PAGESIZE)`, 4096 if unknown).
pub(crate) fn page_size() -> u64 {
    // SAFETY: an integer query.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// `CLOCK_REALTIME` in nanoseconds (vDSO; never allocates).
#[inline]
pub(crate) fn realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}
