//! Result layer: one thin function per Linux call, turning `-1` + `errno` into `io::Error`.
//!
//! This is the only module that reads `errno` (through `io::Error::last_os_error`, which does
//! not allocate). Every function takes plain values or borrowed Rust data, so all of them are
//! safe to call; the mapping itself ([`mmap_shared`]) hands back a raw pointer that only
//! [`super::mmap::MmapRing`] turns into something usable.

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
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

/// `socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)`: a packet socket that
/// receives nothing until it is bound with a protocol.
pub(crate) fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: integer arguments only.
    let fd = cvt(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: `fd` is a descriptor the kernel just created for us; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(fd, level, option, value, sizeof(T))` for a plain-data option value.
///
/// `T` must be a C struct or integer the kernel reads as bytes (`tpacket_req3`, `int`, ...).
fn setsockopt_raw<T>(fd: BorrowedFd<'_>, level: c_int, option: c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a live reference for the whole call and its size is passed; the
    // kernel only reads `size_of::<T>()` bytes from it.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            option,
            (value as *const T).cast::<c_void>(),
            size_of::<T>() as socklen_t,
        )
    })
    .map(drop)
}

/// `setsockopt(fd, level, option, &value, sizeof(int))`.
pub(crate) fn setsockopt_int(
    fd: BorrowedFd<'_>,
    level: c_int,
    option: c_int,
    value: c_int,
) -> io::Result<()> {
    setsockopt_raw(fd, level, option, &value)
}

/// `getsockopt(fd, level, option)` for an integer option.
pub(crate) fn getsockopt_int(fd: BorrowedFd<'_>, level: c_int, option: c_int) -> io::Result<c_int> {
    let mut value: c_int = 0;
    let mut len = size_of::<c_int>() as socklen_t;
    // SAFETY: `value` and `len` are valid for writes; `len` holds the buffer size.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            option,
            (&mut value as *mut c_int).cast::<c_void>(),
            &mut len,
        )
    })?;
    Ok(value)
}

/// `setsockopt(SOL_PACKET, PACKET_RX_RING, req3)` (the socket must be `TPACKET_V3`).
pub(crate) fn set_rx_ring(fd: BorrowedFd<'_>, req: &libc::tpacket_req3) -> io::Result<()> {
    setsockopt_raw(fd, libc::SOL_PACKET, libc::PACKET_RX_RING, req)
}

/// `setsockopt(SOL_PACKET, PACKET_TX_RING, req)` (the socket must be `TPACKET_V2`).
pub(crate) fn set_tx_ring(fd: BorrowedFd<'_>, req: &libc::tpacket_req) -> io::Result<()> {
    setsockopt_raw(fd, libc::SOL_PACKET, libc::PACKET_TX_RING, req)
}

/// `setsockopt(SOL_SOCKET, SO_ATTACH_FILTER, {len, insns})`: a classic BPF socket filter.
/// The kernel copies (and checks) the program during the call.
pub(crate) fn attach_filter(fd: BorrowedFd<'_>, insns: &[libc::sock_filter]) -> io::Result<()> {
    let prog = libc::sock_fprog {
        len: u16::try_from(insns.len()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?,
        filter: insns.as_ptr().cast_mut(),
    };
    // `prog.filter` points into `insns`, alive across the call; the kernel only reads it.
    setsockopt_raw(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog)
}

/// `getsockopt(SOL_PACKET, PACKET_STATISTICS)` of a `TPACKET_V3` socket: packets seen and
/// dropped since the last read (the kernel resets the counters on every read), and how often
/// the ring was frozen. Never allocates.
pub(crate) fn packet_stats_v3(fd: BorrowedFd<'_>) -> io::Result<libc::tpacket_stats_v3> {
    let mut st = MaybeUninit::<libc::tpacket_stats_v3>::zeroed();
    let mut len = size_of::<libc::tpacket_stats_v3>() as socklen_t;
    // SAFETY: `st` and `len` are valid for writes; `len` holds the buffer size.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            st.as_mut_ptr().cast::<c_void>(),
            &mut len,
        )
    })?;
    // SAFETY: zero-initialised (all-zero is a valid value), then written by the kernel.
    Ok(unsafe { st.assume_init() })
}

/// `bind(fd, sockaddr_ll { ifindex, protocol })`; `protocol` in host order (`ETH_P_ALL`, or 0
/// for a socket that only sends).
pub(crate) fn bind_ll(fd: BorrowedFd<'_>, ifindex: i32, protocol: u16) -> io::Result<()> {
    // SAFETY: all-zero is a valid `sockaddr_ll`.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex;
    // SAFETY: `sll` is a valid `sockaddr_ll` living across the call; its size is passed.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast::<libc::sockaddr>(),
            size_of::<libc::sockaddr_ll>() as socklen_t,
        )
    })
    .map(drop)
}

/// An `ifreq` naming `name` (at most 15 bytes; longer names fail with `ENODEV` like the
/// kernel would answer for an unknown device).
fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::from_raw_os_error(libc::ENODEV));
    }
    // SAFETY: all-zero is a valid `ifreq` (a NUL-terminated empty name and a zero union).
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(ifr)
}

/// `ioctl(fd, request, &mut ifr)`.
fn ioctl_ifreq(fd: BorrowedFd<'_>, request: libc::Ioctl, ifr: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: `ifr` is a valid, exclusively borrowed `ifreq` for the whole call; the requests
    // used here read its name and write one union member (or read through `ifru_data`, which
    // the callers point at a live buffer).
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), request, ifr as *mut libc::ifreq) }).map(drop)
}

/// `SIOCGIFINDEX`: the index of network device `name` in the socket's network namespace.
pub(crate) fn if_index(fd: BorrowedFd<'_>, name: &str) -> io::Result<i32> {
    let mut ifr = ifreq(name)?;
    ioctl_ifreq(fd, libc::SIOCGIFINDEX, &mut ifr)?;
    // SAFETY: SIOCGIFINDEX wrote `ifru_ifindex`.
    Ok(unsafe { ifr.ifr_ifru.ifru_ifindex })
}

/// `SIOCGIFMTU`: the device MTU.
pub(crate) fn if_mtu(fd: BorrowedFd<'_>, name: &str) -> io::Result<u32> {
    let mut ifr = ifreq(name)?;
    ioctl_ifreq(fd, libc::SIOCGIFMTU, &mut ifr)?;
    // SAFETY: SIOCGIFMTU wrote `ifru_mtu`.
    Ok(unsafe { ifr.ifr_ifru.ifru_mtu }.max(0) as u32)
}

/// `SIOCGIFFLAGS`: the device flags (`IFF_UP`, ...).
pub(crate) fn if_flags(fd: BorrowedFd<'_>, name: &str) -> io::Result<i32> {
    let mut ifr = ifreq(name)?;
    ioctl_ifreq(fd, libc::SIOCGIFFLAGS, &mut ifr)?;
    // SAFETY: SIOCGIFFLAGS wrote `ifru_flags`.
    Ok(i32::from(unsafe { ifr.ifr_ifru.ifru_flags }))
}

/// `SIOCGIFHWADDR`: the device's MAC address.
pub(crate) fn if_hwaddr(fd: BorrowedFd<'_>, name: &str) -> io::Result<[u8; 6]> {
    let mut ifr = ifreq(name)?;
    ioctl_ifreq(fd, libc::SIOCGIFHWADDR, &mut ifr)?;
    // SAFETY: SIOCGIFHWADDR wrote `ifru_hwaddr`.
    let sa = unsafe { ifr.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *d = *s as u8;
    }
    Ok(mac)
}

/// `ETHTOOL_GET_TS_INFO` (`linux/ethtool.h`).
const ETHTOOL_GET_TS_INFO: u32 = 0x41;

/// `struct ethtool_ts_info` (`linux/ethtool.h`), not in the `libc` crate.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct EthtoolTsInfo {
    cmd: u32,
    so_timestamping: u32,
    phc_index: i32,
    tx_types: u32,
    tx_reserved: [u32; 3],
    rx_filters: u32,
    rx_reserved: [u32; 3],
}

/// What a device can timestamp (`SIOCETHTOOL` / `ETHTOOL_GET_TS_INFO`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TsInfo {
    /// `SOF_TIMESTAMPING_*` capabilities.
    pub(crate) so_timestamping: u32,
    /// PTP hardware clock index, -1 = none.
    pub(crate) phc_index: i32,
    /// Bit mask of supported `HWTSTAMP_FILTER_*` values.
    pub(crate) rx_filters: u32,
}

/// `SIOCETHTOOL(ETHTOOL_GET_TS_INFO)` on device `name`.
pub(crate) fn ts_info(fd: BorrowedFd<'_>, name: &str) -> io::Result<TsInfo> {
    let mut info = EthtoolTsInfo {
        cmd: ETHTOOL_GET_TS_INFO,
        ..EthtoolTsInfo::default()
    };
    let mut ifr = ifreq(name)?;
    ifr.ifr_ifru.ifru_data = (&mut info as *mut EthtoolTsInfo).cast::<libc::c_char>();
    // `ifru_data` points at `info`, alive and exclusively borrowed across the call.
    ioctl_ifreq(fd, libc::SIOCETHTOOL, &mut ifr)?;
    Ok(TsInfo {
        so_timestamping: info.so_timestamping,
        phc_index: info.phc_index,
        rx_filters: info.rx_filters,
    })
}

/// `SIOCGHWTSTAMP` (`get == true`) or `SIOCSHWTSTAMP`: reads or sets the device's hardware
/// timestamping configuration; returns what the device reports afterwards.
pub(crate) fn hwtstamp(
    fd: BorrowedFd<'_>,
    name: &str,
    set: Option<libc::hwtstamp_config>,
) -> io::Result<libc::hwtstamp_config> {
    let mut cfg = set.unwrap_or(libc::hwtstamp_config {
        flags: 0,
        tx_type: 0,
        rx_filter: 0,
    });
    let mut ifr = ifreq(name)?;
    ifr.ifr_ifru.ifru_data = (&mut cfg as *mut libc::hwtstamp_config).cast::<libc::c_char>();
    let req = if set.is_some() {
        libc::SIOCSHWTSTAMP
    } else {
        libc::SIOCGHWTSTAMP
    };
    // `ifru_data` points at `cfg`, alive and exclusively borrowed across the call.
    ioctl_ifreq(fd, req as libc::Ioctl, &mut ifr)?;
    Ok(cfg)
}

/// `mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)`: maps a packet socket's
/// ring(s). The caller owns the mapping and must [`munmap`] it exactly once.
pub(crate) fn mmap_shared(fd: BorrowedFd<'_>, len: usize) -> io::Result<NonNull<u8>> {
    // SAFETY: a fresh mapping chosen by the kernel (NULL hint) never aliases existing Rust
    // memory; the arguments are plain values.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))
}

/// `munmap(ptr, len)`.
///
/// # Safety
/// `ptr`/`len` describe one whole mapping made by [`mmap_shared`], no reference into it is
/// alive, and it is not used afterwards.
pub(crate) unsafe fn munmap(ptr: NonNull<u8>, len: usize) -> io::Result<()> {
    // SAFETY: forwarded to the caller's contract.
    cvt(unsafe { libc::munmap(ptr.as_ptr().cast::<c_void>(), len) }).map(drop)
}

/// `sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0)`: asks the kernel to transmit every frame of
/// the TX ring marked `TP_STATUS_SEND_REQUEST`; returns the bytes it sent in this call.
/// Never blocks, never allocates.
#[inline]
pub(crate) fn kick(fd: BorrowedFd<'_>) -> io::Result<usize> {
    // SAFETY: a null buffer of length 0 and a null address are what the TX-ring protocol
    // expects; nothing is read from or written to user memory through them.
    let r = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// `ppoll(fds, timeout)`; `None` waits forever. Returns the number of ready entries; `EINTR`
/// is returned as an error for the caller to treat as "nothing ready". Never allocates.
#[inline]
pub(crate) fn ppoll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<usize> {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `fds` is a valid, exclusively borrowed array of `len` entries; `tsp` is null or
    // points to `ts`, alive across the call; a null signal mask keeps the current one.
    let n = cvt(unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            tsp,
            std::ptr::null(),
        )
    })?;
    Ok(n as usize)
}
