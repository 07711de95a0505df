//! Safe layer over one AF_XDP socket: creation, UMEM registration over caller memory, ring
//! set-up and mapping, bind, statistics, wake-ups.

use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use rtdaq_core::BufferPool;

use nix::sys::socket::MsgFlags;
use rtdaq_netsys::{poll, sockopt};

use super::ffi;
use super::ring::{ConsRing, ProdRing};

/// One AF_XDP socket (an owned descriptor, closed on drop). `'a` is the lifetime of the
/// pool memory its UMEM may be registered over: the socket cannot outlive it.
#[derive(Debug)]
pub(crate) struct XskSocket<'a> {
    fd: OwnedFd,
    _umem: PhantomData<&'a BufferPool<'a>>,
}

/// Kernel counters of one socket (`XDP_STATISTICS`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct XskStats {
    /// Frames dropped on receive: no fill frame, or larger than a frame.
    pub(crate) rx_dropped: u64,
    /// Invalid fill descriptors.
    pub(crate) rx_invalid_descs: u64,
    /// Invalid TX descriptors.
    pub(crate) tx_invalid_descs: u64,
    /// Frames dropped because the RX ring was full.
    pub(crate) rx_ring_full: u64,
    /// Times the fill ring was found empty.
    pub(crate) rx_fill_ring_empty: u64,
    /// Times the TX ring was found empty on a kick.
    pub(crate) tx_ring_empty: u64,
}

/// The four ring offsets of a socket (`XDP_MMAP_OFFSETS`).
pub(crate) type Offsets = libc::xdp_mmap_offsets;

impl<'a> XskSocket<'a> {
    /// A new, unbound AF_XDP socket. Cold path.
    pub(crate) fn new() -> io::Result<XskSocket<'a>> {
        ffi::xdp_socket().map(|fd| XskSocket {
            fd,
            _umem: PhantomData,
        })
    }

    /// Registers the memory of `pool` as this socket's UMEM: `slot_count × slot_size` bytes
    /// from `base_addr`, one UMEM frame (chunk) per pool slot, no extra headroom. Cold path.
    ///
    /// Fails with `EINVAL` for a pool that is not CPU memory (nothing is registered then),
    /// and with the kernel's error for a base that is not page aligned or a slot size that
    /// is not a power of two in 2048..=page size.
    pub(crate) fn register_umem(&self, pool: &'a BufferPool<'a>) -> io::Result<()> {
        if !pool.is_cpu_accessible() || pool.base_addr() == 0 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let len = pool.slot_count() as u64 * pool.slot_size() as u64;
        let chunk = u32::try_from(pool.slot_size())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: a CPU-accessible pool's `base_addr..+slot_count × slot_size` is valid
        // memory for `'a` (BufferPool::new / from_raw contract), and this socket, like every
        // socket that can share its UMEM (`bind` takes `&XskSocket<'a>`), cannot outlive
        // `'a`; the kernel only writes frames lent to it, which no `Buf` owns meanwhile
        // (`Lent` takes them with `Buf::into_raw`), the device access the pool allows.
        unsafe { ffi::umem_reg(self.fd.as_fd(), pool.base_addr() as *mut u8, len, chunk, 0) }
    }

    /// Sets a ring size option (`XDP_UMEM_FILL_RING`, `XDP_RX_RING`, ...). Cold path.
    pub(crate) fn set_ring_size(&self, opt: i32, size: u32) -> io::Result<()> {
        sockopt::set(self.fd.as_fd(), libc::SOL_XDP, opt, &size)
    }

    /// Sets an integer socket option (busy polling). Cold path.
    pub(crate) fn set_int(&self, level: i32, opt: i32, value: i32) -> io::Result<()> {
        sockopt::set(self.fd.as_fd(), level, opt, &value)
    }

    /// The ring offsets. Cold path.
    pub(crate) fn offsets(&self) -> io::Result<Offsets> {
        let (off, len) =
            sockopt::get::<Offsets>(self.fd.as_fd(), libc::SOL_XDP, libc::XDP_MMAP_OFFSETS)?;
        if len != std::mem::size_of::<Offsets>() {
            // Kernels before 5.4 report offsets without the flags word.
            return Err(io::Error::from(io::ErrorKind::Unsupported));
        }
        Ok(off)
    }

    /// Maps the fill ring of `size` entries. Cold path.
    pub(crate) fn map_fill(&self, off: &Offsets, size: u32) -> io::Result<ProdRing<u64>> {
        ProdRing::map(
            self.fd.as_fd(),
            &off.fr,
            size,
            libc::XDP_UMEM_PGOFF_FILL_RING as i64,
        )
    }

    /// Maps the completion ring of `size` entries. Cold path.
    pub(crate) fn map_completion(&self, off: &Offsets, size: u32) -> io::Result<ConsRing<u64>> {
        ConsRing::map(
            self.fd.as_fd(),
            &off.cr,
            size,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING as i64,
        )
    }

    /// Maps the RX ring of `size` entries. Cold path.
    pub(crate) fn map_rx(&self, off: &Offsets, size: u32) -> io::Result<ConsRing<libc::xdp_desc>> {
        ConsRing::map(self.fd.as_fd(), &off.rx, size, libc::XDP_PGOFF_RX_RING)
    }

    /// Maps the TX ring of `size` entries. Cold path.
    pub(crate) fn map_tx(&self, off: &Offsets, size: u32) -> io::Result<ProdRing<libc::xdp_desc>> {
        ProdRing::map(self.fd.as_fd(), &off.tx, size, libc::XDP_PGOFF_TX_RING)
    }

    /// Binds to `ifindex` / `queue_id` with `flags` (`XDP_COPY`, `XDP_ZEROCOPY`,
    /// `XDP_USE_NEED_WAKEUP`, `XDP_SHARED_UMEM`), sharing `shared`'s UMEM when given.
    /// Cold path.
    pub(crate) fn bind(
        &self,
        ifindex: u32,
        queue_id: u32,
        flags: u16,
        shared: Option<&XskSocket<'a>>,
    ) -> io::Result<()> {
        ffi::xdp_bind(
            self.fd.as_fd(),
            ifindex,
            queue_id,
            flags,
            shared.map(|s| s.fd.as_fd()),
        )
    }

    /// True when the socket runs in zero-copy mode (`XDP_OPTIONS`). Cold path.
    pub(crate) fn zero_copy(&self) -> io::Result<bool> {
        let (o, _) =
            sockopt::get::<libc::xdp_options>(self.fd.as_fd(), libc::SOL_XDP, libc::XDP_OPTIONS)?;
        Ok(o.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
    }

    /// The kernel's counters (`XDP_STATISTICS`). One syscall; never allocates.
    #[inline]
    pub(crate) fn stats(&self) -> io::Result<XskStats> {
        let (s, _) = sockopt::get::<libc::xdp_statistics>(
            self.fd.as_fd(),
            libc::SOL_XDP,
            libc::XDP_STATISTICS,
        )?;
        Ok(XskStats {
            rx_dropped: s.rx_dropped,
            rx_invalid_descs: s.rx_invalid_descs,
            tx_invalid_descs: s.tx_invalid_descs,
            rx_ring_full: s.rx_ring_full,
            rx_fill_ring_empty: s.rx_fill_ring_empty_descs,
            tx_ring_empty: s.tx_ring_empty_descs,
        })
    }

    /// Asks the kernel to send the TX ring (`sendto`, non-blocking). Never allocates.
    #[inline]
    pub(crate) fn kick_tx(&self) -> io::Result<()> {
        // `sendto(fd, NULL, 0, MSG_DONTWAIT)`: nix's `send` of nothing, one call.
        nix::sys::socket::send(self.fd.as_raw_fd(), &[], MsgFlags::MSG_DONTWAIT)
            .map(drop)
            .map_err(io::Error::from)
    }

    /// Wakes the kernel's receive processing (`recvfrom`, non-blocking). Never allocates.
    #[inline]
    pub(crate) fn kick_rx(&self) -> io::Result<()> {
        // `recvfrom(fd, NULL, 0, MSG_DONTWAIT)`: nix's `recv` into nothing, one call.
        nix::sys::socket::recv(self.fd.as_raw_fd(), &mut [], MsgFlags::MSG_DONTWAIT)
            .map(drop)
            .map_err(io::Error::from)
    }

    /// Waits up to `timeout` for the RX ring to hold a frame (`ppoll` `POLLIN`; this also
    /// wakes the kernel when the fill ring asks for it). Never allocates.
    #[inline]
    pub(crate) fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        poll::poll_one(self.fd.as_fd(), libc::POLLIN, timeout)
    }

    /// Waits up to `timeout` for room in the TX ring (`ppoll` `POLLOUT`; in copy mode this
    /// also makes the kernel send). Never allocates.
    #[inline]
    pub(crate) fn wait_writable(&self, timeout: Duration) -> io::Result<bool> {
        poll::poll_one(self.fd.as_fd(), libc::POLLOUT, timeout)
    }

    /// The descriptor, for the XSKMAP.
    pub(crate) fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
