//! Every `unsafe` block of the crate: the calls `nix` does not wrap (or wraps with work per
//! call that a hot path should not pay), each as one thin function returning `io::Result`.
//! This is the only module that reads `errno` (`io::Error::last_os_error`, no allocation).
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::num::NonZeroUsize;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::time::Duration;

use libc::{c_int, c_void, socklen_t};

/// `-1` → the thread's `errno` as an `io::Error` (for the engines' own raw hot-path calls).
#[inline]
pub fn cvt(r: c_int) -> io::Result<c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `setsockopt(fd, level, option, value, sizeof(T))`.
pub(crate) fn setsockopt<T: PlainOption>(
    fd: BorrowedFd<'_>,
    level: c_int,
    option: c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `T: PlainOption` holds no address, so there is none for the kernel to misuse.
    unsafe { setsockopt_unchecked(fd, level, option, value) }
}

/// `setsockopt(fd, level, option, value, sizeof(T))` for a value that carries an address
/// the kernel uses (`XDP_UMEM_REG`).
///
/// # Safety
/// Every address inside `value` is valid for what the kernel does with it for as long as
/// it does it (for a UMEM: mapped until every socket bound to it is closed).
pub unsafe fn setsockopt_unchecked<T: Copy>(
    fd: BorrowedFd<'_>,
    level: c_int,
    option: c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` is borrowed across the call and its size is passed; the addresses it
    // carries are the caller's contract.
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

/// `getsockopt(fd, level, option)` into a zeroed `T`; returns it and the length the kernel
/// wrote. Never allocates.
pub(crate) fn getsockopt<T: PlainOption>(
    fd: BorrowedFd<'_>,
    level: c_int,
    option: c_int,
) -> io::Result<(T, usize)> {
    let mut v = MaybeUninit::<T>::zeroed();
    let mut len = size_of::<T>() as socklen_t;
    // SAFETY: `v` and `len` are valid for writes and `len` holds `v`'s size: the kernel
    // writes at most that many bytes.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            option,
            v.as_mut_ptr().cast::<c_void>(),
            &mut len,
        )
    })?;
    // SAFETY: zero-initialised, and all-zero (like any bytes the kernel wrote) is a valid
    // `T` (`PlainOption`'s contract).
    Ok((unsafe { v.assume_init() }, len as usize))
}

/// `setsockopt(SOL_SOCKET, SO_ATTACH_FILTER, {len, insns})`: a classic BPF program; the
/// kernel copies and checks it during the call.
pub(crate) fn attach_filter(fd: BorrowedFd<'_>, insns: &[libc::sock_filter]) -> io::Result<()> {
    let prog = libc::sock_fprog {
        len: u16::try_from(insns.len()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?,
        filter: insns.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` lives across the call and its size is passed; `prog.filter` points to
    // `insns.len()` instructions borrowed across the call, which the kernel only reads.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&prog as *const libc::sock_fprog).cast::<c_void>(),
            size_of::<libc::sock_fprog>() as socklen_t,
        )
    })
    .map(drop)
}

/// `ppoll(fds, timeout)`; `None` waits forever. Kept raw: nix's `ppoll` takes `PollFd`s that
/// borrow their descriptors, which a preallocated set reused across calls cannot hold.
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

/// An `ifreq` naming `name` (1..=15 bytes, no NUL; otherwise `ENODEV`, as the kernel answers
/// for an unknown device).
fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::from_raw_os_error(libc::ENODEV));
    }
    // SAFETY: all-zero is a valid `ifreq` (an empty NUL-terminated name, a zero union).
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(ifr)
}

/// Which union member of an `ifreq` a device query reads back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IfQuery {
    /// `SIOCGIFINDEX`: `ifru_ifindex`.
    Index,
    /// `SIOCGIFMTU`: `ifru_mtu`.
    Mtu,
    /// `SIOCGIFFLAGS`: `ifru_flags`.
    Flags,
}

/// `ioctl(fd, SIOCGIF*, ifreq{name})` for an integer answer.
pub(crate) fn if_query(fd: BorrowedFd<'_>, name: &str, q: IfQuery) -> io::Result<i32> {
    let mut ifr = ifreq(name)?;
    let req = match q {
        IfQuery::Index => libc::SIOCGIFINDEX,
        IfQuery::Mtu => libc::SIOCGIFMTU,
        IfQuery::Flags => libc::SIOCGIFFLAGS,
    };
    // SAFETY: `ifr` is a valid, exclusively borrowed `ifreq`; these requests read its name
    // and write one integer union member.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), req, &mut ifr as *mut libc::ifreq) })?;
    // SAFETY: the request just wrote the member read here.
    Ok(unsafe {
        match q {
            IfQuery::Index => ifr.ifr_ifru.ifru_ifindex,
            IfQuery::Mtu => ifr.ifr_ifru.ifru_mtu,
            IfQuery::Flags => i32::from(ifr.ifr_ifru.ifru_flags),
        }
    })
}

/// `SIOCGIFHWADDR`: the device's MAC address.
pub(crate) fn if_hwaddr(fd: BorrowedFd<'_>, name: &str) -> io::Result<[u8; 6]> {
    let mut ifr = ifreq(name)?;
    // SAFETY: as in `if_query`: SIOCGIFHWADDR writes `ifru_hwaddr`.
    cvt(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::SIOCGIFHWADDR,
            &mut ifr as *mut libc::ifreq,
        )
    })?;
    // SAFETY: SIOCGIFHWADDR wrote `ifru_hwaddr`.
    let sa = unsafe { ifr.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *d = *s as u8;
    }
    Ok(mac)
}

/// `ioctl(fd, request, ifreq{name, ifru_data = data})`: the device requests that read and
/// write a structure through `ifru_data` (`SIOCETHTOOL`, `SIOC[GS]HWTSTAMP`).
///
/// # Safety
/// `data` is the structure the kernel expects for `request` (and, for `SIOCETHTOOL`, for the
/// command in its first word): the kernel reads and writes that many bytes through it.
pub(crate) unsafe fn if_data_ioctl<T>(
    fd: BorrowedFd<'_>,
    name: &str,
    request: libc::Ioctl,
    data: &mut T,
) -> io::Result<()> {
    let mut ifr = ifreq(name)?;
    ifr.ifr_ifru.ifru_data = (data as *mut T).cast::<libc::c_char>();
    // SAFETY: `ifr` is exclusively borrowed for the call; `ifru_data` points at `data`,
    // exclusively borrowed across it, of the type the caller's contract ties to `request`.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), request, &mut ifr as *mut libc::ifreq) }).map(drop)
}

/// `bind(fd, sockaddr_ll { ifindex, protocol })` (nix builds no `sockaddr_ll`); `protocol`
/// in host order (`ETH_P_ALL`, or 0 for a socket that only sends).
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

/// `mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED [| MAP_POPULATE], fd, offset)`
/// through nix: a kernel ring of a socket. The caller owns it and unmaps it once
/// ([`munmap`]).
pub(crate) fn mmap_shared(
    fd: BorrowedFd<'_>,
    len: NonZeroUsize,
    offset: i64,
    populate: bool,
) -> io::Result<NonNull<u8>> {
    use nix::sys::mman::{MapFlags, ProtFlags};
    let flags = if populate {
        MapFlags::MAP_SHARED | MapFlags::MAP_POPULATE
    } else {
        MapFlags::MAP_SHARED
    };
    // SAFETY: a fresh mapping placed by the kernel (no address hint) aliases no Rust memory.
    let p = unsafe {
        nix::sys::mman::mmap(
            None,
            len,
            ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
            flags,
            fd,
            offset,
        )
    }?;
    Ok(p.cast::<u8>())
}

/// `munmap(ptr, len)` through nix.
///
/// # Safety
/// `ptr`/`len` are one whole mapping made by [`mmap_shared`], no reference into it is alive
/// and it is not used afterwards.
pub(crate) unsafe fn munmap(ptr: NonNull<u8>, len: usize) -> io::Result<()> {
    // SAFETY: forwarded to the caller's contract.
    unsafe { nix::sys::mman::munmap(ptr.cast::<c_void>(), len) }.map_err(io::Error::from)
}

/// `ETHTOOL_GET_TS_INFO` (`linux/ethtool.h`).
const ETHTOOL_GET_TS_INFO: u32 = 0x41;
/// `ETHTOOL_GCHANNELS` (`linux/ethtool.h`).
const ETHTOOL_GCHANNELS: u32 = 0x3c;

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

/// `SIOCETHTOOL(ETHTOOL_GET_TS_INFO)`: `(so_timestamping, phc_index, rx_filters)`.
pub(crate) fn ts_info(fd: BorrowedFd<'_>, name: &str) -> io::Result<(u32, i32, u32)> {
    let mut info = EthtoolTsInfo {
        cmd: ETHTOOL_GET_TS_INFO,
        ..EthtoolTsInfo::default()
    };
    // SAFETY: `EthtoolTsInfo` is the structure of ETHTOOL_GET_TS_INFO, its first word.
    unsafe { if_data_ioctl(fd, name, libc::SIOCETHTOOL, &mut info) }?;
    Ok((info.so_timestamping, info.phc_index, info.rx_filters))
}

/// `SIOCETHTOOL(ETHTOOL_GCHANNELS)`: `[max_rx, max_combined, rx_count, tx_count,
/// combined_count]`.
pub(crate) fn channels(fd: BorrowedFd<'_>, name: &str) -> io::Result<[u32; 5]> {
    // `struct ethtool_channels`: cmd, max_rx, max_tx, max_other, max_combined, rx_count,
    // tx_count, other_count, combined_count.
    let mut ch = [0u32; 9];
    ch[0] = ETHTOOL_GCHANNELS;
    // SAFETY: nine `u32`s are `struct ethtool_channels`, the structure of ETHTOOL_GCHANNELS.
    unsafe { if_data_ioctl(fd, name, libc::SIOCETHTOOL, &mut ch) }?;
    Ok([ch[1], ch[4], ch[5], ch[6], ch[8]])
}

/// `SIOCGHWTSTAMP` (`set = None`) or `SIOCSHWTSTAMP`: the device's hardware timestamping
/// configuration as it stands after the call.
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
    let req = if set.is_some() {
        libc::SIOCSHWTSTAMP
    } else {
        libc::SIOCGHWTSTAMP
    };
    // SAFETY: `hwtstamp_config` is the structure of SIOC[GS]HWTSTAMP.
    unsafe { if_data_ioctl(fd, name, req as libc::Ioctl, &mut cfg) }?;
    Ok(cfg)
}

/// `struct ptp_clock_time` (`linux/ptp_clock.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct PtpClockTime {
    sec: i64,
    nsec: u32,
    reserved: u32,
}

/// Most samples `PTP_SYS_OFFSET_EXTENDED` takes (`PTP_MAX_SAMPLES`).
pub(crate) const PTP_MAX_SAMPLES: usize = 25;

/// `struct ptp_sys_offset_extended`: per sample the system clock before, the PHC, the system
/// clock after (`rsv[0]`, the system clock id on kernels 6.12+, 0 = `CLOCK_REALTIME`).
#[repr(C)]
struct PtpSysOffsetExtended {
    n_samples: u32,
    rsv: [u32; 3],
    ts: [[PtpClockTime; 3]; PTP_MAX_SAMPLES],
}

nix::ioctl_readwrite!(
    /// `PTP_SYS_OFFSET_EXTENDED` = `_IOWR('=', 9, struct ptp_sys_offset_extended)`.
    ptp_sys_offset_extended,
    b'=',
    9,
    PtpSysOffsetExtended
);

/// `PTP_SYS_OFFSET_EXTENDED` on an open `/dev/ptpN` with `n` (1..=25) samples: each
/// `[system before, PHC, system after]` in ns of `CLOCK_REALTIME` and the PHC.
pub(crate) fn ptp_sys_offset(fd: BorrowedFd<'_>, n: usize) -> io::Result<Vec<[i128; 3]>> {
    let n = n.clamp(1, PTP_MAX_SAMPLES);
    let mut req = PtpSysOffsetExtended {
        n_samples: n as u32,
        rsv: [0; 3],
        ts: [[PtpClockTime::default(); 3]; PTP_MAX_SAMPLES],
    };
    // SAFETY: `req` is a writable `ptp_sys_offset_extended` with `n_samples` within
    // PTP_MAX_SAMPLES and zeroed reserved words, the structure the request reads and fills;
    // a descriptor that is not a PTP clock refuses the request number (ENOTTY).
    unsafe { ptp_sys_offset_extended(fd.as_raw_fd(), &raw mut req) }?;
    let ns = |t: &PtpClockTime| i128::from(t.sec) * 1_000_000_000 + i128::from(t.nsec);
    Ok(req.ts[..n]
        .iter()
        .map(|s| [ns(&s[0]), ns(&s[1]), ns(&s[2])])
        .collect())
}

/// Owns a descriptor a system call just returned (nix's `accept4` hands it back raw).
pub(crate) fn own_fd(raw: std::os::fd::RawFd) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    // SAFETY: `raw` was just created by the kernel for this process and nobody else owns it.
    unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) }
}

/// A read-write shared mapping of `len` bytes of a socket at `offset`, unmapped on drop. It
/// hands out its base address only: what the bytes mean, and who may touch which, is the
/// ring's business.
#[derive(Debug)]
pub struct SharedMap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is process memory, valid from any thread; `SharedMap` itself only
// holds its address and unmaps it once.
unsafe impl Send for SharedMap {}
// SAFETY: `&SharedMap` gives out the address only; accesses through it are the user's
// `unsafe` code, which synchronises them.
unsafe impl Sync for SharedMap {}

impl SharedMap {
    /// Maps `len` bytes of `fd` at `offset` (the kernel's ring offset, e.g.
    /// `XDP_PGOFF_RX_RING`); `populate` prefaults the pages (`MAP_POPULATE`). `EINVAL` for
    /// `len == 0`.
    pub fn new(fd: BorrowedFd<'_>, len: usize, offset: i64, populate: bool) -> io::Result<Self> {
        let n = NonZeroUsize::new(len).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        let ptr = mmap_shared(fd, n, offset, populate)?;
        Ok(SharedMap { ptr, len })
    }

    /// The first byte.
    #[inline]
    pub fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Bytes mapped.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false (a mapping has at least one byte).
    #[inline]
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl Drop for SharedMap {
    /// # Panics
    /// When `munmap` fails (a bug: the arguments are the ones `mmap` returned), unless the
    /// thread is already panicking; as the engines' own ring mappings did before.
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are the whole mapping `new` made; it is dropped once, and the
        // references its users made borrow them from `self`, so none outlives it.
        if let Err(e) = unsafe { munmap(self.ptr, self.len) } {
            if !std::thread::panicking() {
                panic!("munmap of a {} B socket ring mapping failed: {e}", self.len);
            }
        }
    }
}

/// A value a socket option passes by bytes.
///
/// # Safety
/// The type is plain data: it holds no pointer (the kernel would follow it), and every bit
/// pattern, all-zero included, is a valid value (`sockopt::get` reads it back from a zeroed buffer
/// the kernel may fill partly).
pub unsafe trait PlainOption: Copy {}

// SAFETY: a C integer: no pointer, every bit pattern valid. The impls below: C integers and
// kernel structs of integers only, likewise.
unsafe impl PlainOption for c_int {}
// SAFETY: see above.
unsafe impl PlainOption for u32 {}
// SAFETY: see above.
unsafe impl<const N: usize> PlainOption for [u32; N] {}
// SAFETY: see above.
unsafe impl PlainOption for libc::in_addr {}
// SAFETY: see above.
unsafe impl PlainOption for libc::ip_mreqn {}
// SAFETY: see above.
unsafe impl PlainOption for libc::ip_mreq_source {}
// SAFETY: see above.
unsafe impl PlainOption for libc::timeval {}
// SAFETY: see above.
unsafe impl PlainOption for libc::tpacket_req {}
// SAFETY: see above.
unsafe impl PlainOption for libc::sock_txtime {}
// SAFETY: see above.
unsafe impl PlainOption for libc::tpacket_req3 {}
// SAFETY: see above.
unsafe impl PlainOption for libc::tpacket_stats_v3 {}
// SAFETY: see above.
unsafe impl PlainOption for libc::xdp_statistics {}
// SAFETY: see above.
unsafe impl PlainOption for libc::xdp_options {}
// SAFETY: see above.
unsafe impl PlainOption for libc::xdp_mmap_offsets {}

/// The `mmsghdr`/`iovec` arrays of one `sendmmsg`, kept between calls so that a send builds
/// nothing on the heap. Their pointers are written anew before every call, from the buffer
/// that call sends, and point nowhere else.
pub(crate) struct MmsgHeaders {
    hdrs: Box<[libc::mmsghdr]>,
    iovs: Box<[libc::iovec]>,
    /// One `SCM_TXTIME` control message per datagram (a timed batch), or none.
    ctrl: Box<[TxtimeCmsg]>,
}

/// A control message carrying one datagram's departure time (`SCM_TXTIME`): a `cmsghdr`
/// and the `u64` after it, laid out as `CMSG_SPACE(8)` bytes (the header's size is a
/// multiple of 8 on Linux, so the data starts right after it).
#[repr(C)]
#[derive(Clone, Copy)]
struct TxtimeCmsg {
    hdr: libc::cmsghdr,
    at_ns: u64,
}

// SAFETY: the arrays' pointers are set from the borrowed buffer at the start of `send` and
// are not read after it returns; between calls they refer to nothing that could be shared.
unsafe impl Send for MmsgHeaders {}

impl MmsgHeaders {
    /// Headers for up to `cap` datagrams; `timed`: each with room for its departure time.
    pub(crate) fn new(cap: usize, timed: bool) -> Self {
        // SAFETY: `mmsghdr`, `iovec` and `cmsghdr` are plain C structs for which all-zero
        // bytes are a valid value (null pointers, zero lengths).
        let (zero_hdr, zero_cmsg): (libc::mmsghdr, libc::cmsghdr) =
            unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
        let zero_iov = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        // SAFETY: CMSG_LEN only computes a length.
        let cmsg_len = unsafe { libc::CMSG_LEN(size_of::<u64>() as u32) } as usize;
        let mut hdr = zero_cmsg;
        hdr.cmsg_len = cmsg_len as _;
        hdr.cmsg_level = libc::SOL_SOCKET;
        hdr.cmsg_type = libc::SCM_TXTIME;
        let ctrl = TxtimeCmsg { hdr, at_ns: 0 };
        MmsgHeaders {
            hdrs: vec![zero_hdr; cap].into_boxed_slice(),
            iovs: vec![zero_iov; cap].into_boxed_slice(),
            ctrl: vec![ctrl; if timed { cap } else { 0 }].into_boxed_slice(),
        }
    }

    /// `sendmmsg` on a connected socket of the datagrams `buf[i * stride..][..lens[i]]`
    /// (`lens.len()` at most the capacity, each length at most `stride` and inside `buf`),
    /// each, in a timed batch, with its departure time `at_ns[i]` (`SCM_TXTIME`; the socket
    /// has `SO_TXTIME`): how many the kernel took.
    pub(crate) fn send(
        &mut self,
        fd: BorrowedFd<'_>,
        buf: &[u8],
        stride: usize,
        lens: &[u32],
        at_ns: &[u64],
    ) -> io::Result<usize> {
        let n = lens.len().min(self.hdrs.len());
        let timed = !self.ctrl.is_empty();
        for (i, &len) in lens[..n].iter().enumerate() {
            let start = (i * stride).min(buf.len());
            let len = (len as usize).min(stride).min(buf.len() - start);
            self.iovs[i] = libc::iovec {
                // The kernel only reads through it (sendmmsg takes no write access).
                iov_base: buf[start..].as_ptr() as *mut c_void,
                iov_len: len,
            };
            let h = &mut self.hdrs[i];
            h.msg_hdr.msg_name = std::ptr::null_mut();
            h.msg_hdr.msg_namelen = 0;
            h.msg_hdr.msg_iov = &mut self.iovs[i];
            h.msg_hdr.msg_iovlen = 1;
            if timed {
                let c = &mut self.ctrl[i];
                c.at_ns = at_ns.get(i).copied().unwrap_or(0);
                h.msg_hdr.msg_control = (c as *mut TxtimeCmsg).cast();
                h.msg_hdr.msg_controllen = size_of::<TxtimeCmsg>() as _;
            } else {
                h.msg_hdr.msg_control = std::ptr::null_mut();
                h.msg_hdr.msg_controllen = 0;
            }
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        // SAFETY: the first `n` headers each point at one iovec of `self.iovs`, which points
        // at `len` bytes inside `buf` (clamped above), and, timed, at one control message of
        // `self.ctrl` of `msg_controllen` bytes; `buf` and the arrays outlive the call, and
        // the kernel writes only `msg_len` of each header.
        let r = unsafe {
            libc::sendmmsg(
                fd.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_NOSIGNAL,
            )
        };
        cvt(r).map(|k| k as usize)
    }
}

/// `sendmsg(fd, {no data, one SCM_TXTIME = at_ns}, MSG_DONTWAIT)`: a send whose packets
/// (a packet socket's TX ring frames marked for sending) leave at `at_ns`. Returns the bytes
/// the kernel sent. Never allocates.
#[inline]
pub(crate) fn sendmsg_txtime(fd: BorrowedFd<'_>, at_ns: u64) -> io::Result<usize> {
    /// Room for one `cmsghdr` and a `u64`, aligned for `cmsghdr`.
    #[repr(C, align(8))]
    struct Control([u8; 32]);
    let mut control = Control([0; 32]);
    // SAFETY: all-zero is a valid `msghdr` (integers and nullable pointers).
    let mut msg: libc::msghdr = unsafe { MaybeUninit::zeroed().assume_init() };
    msg.msg_control = control.0.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is arithmetic on its argument.
    let space = unsafe { libc::CMSG_SPACE(size_of::<u64>() as u32) } as usize;
    debug_assert!(space <= control.0.len());
    msg.msg_controllen = space as _;
    let hdr: *const libc::msghdr = &msg;
    // SAFETY: `msg_control` points to `control`, aligned and `space` (≤ 32) bytes long, which
    // holds one cmsghdr and its u64; every write below stays inside it.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(hdr);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_TXTIME;
        (*c).cmsg_len = libc::CMSG_LEN(size_of::<u64>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u64>(), at_ns);
    }
    // SAFETY: `msg` names no data (null iov, length 0) and the control buffer above, alive
    // across the call; the kernel only reads them.
    let n = unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// A control-message buffer, aligned for `cmsghdr`: room for a `cmsghdr`, a
/// `sock_extended_err` and a `sockaddr_storage`.
#[derive(Debug, Clone)]
#[repr(C, align(8))]
pub(crate) struct CmsgBuf(pub(crate) [u8; 256]);

/// `ioctl(fd, SIOCOUTQ)`: the bytes the socket has handed to the kernel that the kernel has
/// not freed yet (`sk_wmem_alloc`: queued in a qdisc or the device). Never allocates.
pub(crate) fn outq(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (= TIOCOUTQ, linux/sockios.h) writes one `int` through the pointer,
    // which points to `n`, exclusively borrowed across the call.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCOUTQ, &mut n as *mut libc::c_int) })?;
    Ok(u32::try_from(n).unwrap_or(0))
}

/// `recvmsg(fd, {data, control}, MSG_ERRQUEUE | MSG_DONTWAIT)`: one report of the socket's
/// error queue; returns the control bytes the kernel wrote (`EAGAIN` when none waits).
/// Never allocates.
#[inline]
pub(crate) fn recv_errqueue(
    fd: BorrowedFd<'_>,
    data: &mut [u8],
    control: &mut CmsgBuf,
) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    // SAFETY: all-zero is a valid `msghdr` (integers and nullable pointers).
    let mut msg: libc::msghdr = unsafe { MaybeUninit::zeroed().assume_init() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len() as _;
    // SAFETY: `iov` points to `data` and `msg_control` to `control` (8-byte aligned), both
    // exclusively borrowed across the call with their lengths; the kernel writes within them.
    let n = unsafe {
        libc::recvmsg(
            fd.as_raw_fd(),
            &mut msg,
            libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        // `size_t` on glibc, `socklen_t` on musl.
        #[allow(clippy::unnecessary_cast)]
        Ok(msg.msg_controllen as usize)
    }
}
