//! Result layer: one thin function per Linux call, turning `-1` + `errno` into `io::Error`.
//!
//! This is the only module of the crate that reads `errno` (through
//! `io::Error::last_os_error`, which does not allocate). Functions whose arguments are plain
//! values or borrowed Rust data are safe; those that hand the kernel raw addresses are
//! `unsafe fn` with a `# Safety` contract that the safe layer upholds.

use std::ffi::CStr;
use std::io;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::{self, NonNull};
use std::time::Duration;

use libc::{c_int, c_void, socklen_t};

/// `-1` → the thread's `errno` as an `io::Error`.
#[inline]
fn cvt(r: c_int) -> io::Result<c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0)`.
pub(crate) fn xdp_socket() -> io::Result<OwnedFd> {
    // SAFETY: integer arguments only.
    let fd = cvt(unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` was just returned by `socket` and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)`: a handle for interface ioctls.
pub(crate) fn inet_socket() -> io::Result<OwnedFd> {
    // SAFETY: integer arguments only.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: as above.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(fd, level, opt, &value, sizeof value)` for any plain-data `T`.
pub(crate) fn setsockopt<T: Copy>(
    fd: BorrowedFd<'_>,
    level: c_int,
    opt: c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` is a valid, initialised `T` for the call; the kernel copies
    // `size_of::<T>()` bytes from it and keeps no pointer.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            (value as *const T).cast::<c_void>(),
            size_of::<T>() as socklen_t,
        )
    })
    .map(drop)
}

/// `getsockopt(fd, level, opt)` into a zeroed `T`; also returns the length the kernel wrote.
///
/// `T` must be plain data for which all-zero bytes are a valid value (the kernel structs
/// used here are).
pub(crate) fn getsockopt<T: Copy>(
    fd: BorrowedFd<'_>,
    level: c_int,
    opt: c_int,
) -> io::Result<(T, usize)> {
    let mut v = MaybeUninit::<T>::zeroed();
    let mut len = size_of::<T>() as socklen_t;
    // SAFETY: `v` has room for `len` bytes; the kernel writes at most `len` and updates it.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            v.as_mut_ptr().cast::<c_void>(),
            &mut len,
        )
    })?;
    // SAFETY: zero-initialised plain data, possibly partly overwritten by the kernel.
    Ok((unsafe { v.assume_init() }, len as usize))
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
    setsockopt(fd, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg)
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

/// `mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, pgoff)`: one of
/// the socket's rings.
pub(crate) fn mmap_ring(fd: BorrowedFd<'_>, len: usize, pgoff: i64) -> io::Result<NonNull<u8>> {
    // SAFETY: a fresh shared mapping of the socket's ring; no existing memory is touched.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd.as_raw_fd(),
            pgoff,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidData))
}

/// `munmap`.
///
/// # Safety
/// `p..p + len` must be a mapping made by [`mmap_ring`] that nothing uses any more.
pub(crate) unsafe fn munmap(p: NonNull<u8>, len: usize) -> io::Result<()> {
    // SAFETY: the caller's contract.
    cvt(unsafe { libc::munmap(p.as_ptr().cast::<c_void>(), len) }).map(drop)
}

/// `sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0)`: tells the kernel to send what is in the TX
/// ring. Never blocks, never allocates.
#[inline]
pub(crate) fn kick_tx(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: a zero-length send with no buffer and no address.
    let r = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            ptr::null(),
            0,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `recvfrom(fd, NULL, 0, MSG_DONTWAIT, NULL, NULL)`: wakes the kernel's RX processing
/// (needed when the fill ring carries `XDP_RING_NEED_WAKEUP`). Never blocks.
#[inline]
pub(crate) fn kick_rx(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: a zero-length receive with no buffer and no address.
    let r = unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            ptr::null_mut(),
            ptr::null_mut(),
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `ppoll` on one descriptor for `events`, at most `timeout` (hrtimer precision). Returns
/// whether the descriptor is ready. Never allocates.
#[inline]
pub(crate) fn poll_one(fd: BorrowedFd<'_>, events: i16, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one valid `pollfd` and a valid timespec for the duration of the call.
    let n = cvt(unsafe { libc::ppoll(&mut pfd, 1, &ts, ptr::null()) })?;
    Ok(n > 0)
}

/// `if_nametoindex`; 0 when there is no such interface (in this network namespace).
pub(crate) fn if_nametoindex(name: &CStr) -> u32 {
    // SAFETY: a valid NUL-terminated string for the call.
    unsafe { libc::if_nametoindex(name.as_ptr()) }
}

/// An `ifreq` naming `name` (truncated to `IFNAMSIZ - 1` bytes).
fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: `ifreq` is plain data; all-zero is a valid value.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in r
        .ifr_name
        .iter_mut()
        .zip(name.bytes().take(libc::IFNAMSIZ - 1))
    {
        *d = s as libc::c_char;
    }
    r
}

/// The interface's MTU (`SIOCGIFMTU`).
pub(crate) fn if_mtu(sock: BorrowedFd<'_>, name: &str) -> io::Result<u32> {
    let mut r = ifreq(name);
    // SAFETY: `r` is a valid `ifreq` the kernel fills for the call.
    cvt(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFMTU, &mut r) })?;
    // SAFETY: SIOCGIFMTU wrote the `ifru_mtu` member.
    Ok(unsafe { r.ifr_ifru.ifru_mtu } as u32)
}

/// `struct ethtool_channels` (linux/ethtool.h).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct EthtoolChannels {
    pub(crate) cmd: u32,
    pub(crate) max_rx: u32,
    pub(crate) max_tx: u32,
    pub(crate) max_other: u32,
    pub(crate) max_combined: u32,
    pub(crate) rx_count: u32,
    pub(crate) tx_count: u32,
    pub(crate) other_count: u32,
    pub(crate) combined_count: u32,
}

/// `ETHTOOL_GCHANNELS`.
const ETHTOOL_GCHANNELS: u32 = 0x3c;

/// The interface's channel counts (`SIOCETHTOOL` / `ETHTOOL_GCHANNELS`).
pub(crate) fn if_channels(sock: BorrowedFd<'_>, name: &str) -> io::Result<EthtoolChannels> {
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..EthtoolChannels::default()
    };
    let mut r = ifreq(name);
    r.ifr_ifru.ifru_data = (&mut ch as *mut EthtoolChannels).cast::<libc::c_char>();
    // SAFETY: `r` points at `ch`, valid and writable for the call; the kernel writes one
    // `ethtool_channels` there.
    cvt(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCETHTOOL, &mut r) })?;
    Ok(ch)
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
