//! Safe layer over the memory a packet socket shares with the kernel: [`MmapRing`], one
//! `MAP_SHARED` mapping of a socket's ring ([`SharedMap`], unmapped on drop).
//!
//! The kernel and user space hand parts of the mapping back and forth through status words
//! (`tp_status`, `block_status`), which [`MmapRing::u32_at`] exposes as `AtomicU32`s. Every
//! other access is a byte range whose owner (kernel or user) the caller must know: the
//! accessors for those are `unsafe fn`s, used only by the ring module, which implements the
//! ownership protocol.

use std::io;
use std::os::fd::AsFd;
use std::sync::atomic::AtomicU32;

use rtdaq_netsys::map::SharedMap;

use super::socket::PacketSocket;

/// One mapping of a packet socket's ring(s). `Send + Sync`: it is only a window on kernel
/// memory; who may touch which bytes is decided by the ring protocol above it.
#[derive(Debug)]
pub(crate) struct MmapRing {
    map: SharedMap,
}

impl MmapRing {
    /// Maps `len` bytes of `sock`'s ring(s) (set up with `PACKET_RX_RING`/`PACKET_TX_RING`
    /// first). Cold path.
    pub(crate) fn map(sock: &PacketSocket, len: usize) -> io::Result<MmapRing> {
        let map = SharedMap::new(sock.as_fd(), len, 0, false)?;
        Ok(MmapRing { map })
    }

    /// Mapped bytes.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// The 32-bit word at byte offset `off` (a status word) as an atomic.
    ///
    /// # Panics
    /// When `off` is not 4-byte aligned or the word is not inside the mapping (a caller bug;
    /// ring offsets are computed from the geometry, never read from the wire).
    #[inline]
    pub(crate) fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(
            off % 4 == 0 && off.checked_add(4).is_some_and(|e| e <= self.map.len()),
            "MmapRing::u32_at({off}) outside the {} B mapping",
            self.map.len()
        );
        // SAFETY: in bounds and aligned (the mapping is page-aligned and `off % 4 == 0`);
        // the memory lives as long as `self`; `AtomicU32` has the layout of `u32` and
        // concurrent kernel accesses to status words are what atomics are for.
        unsafe { &*self.map.ptr().as_ptr().add(off).cast::<AtomicU32>() }
    }

    /// Asserts that `off..off + len` lies inside the mapping.
    #[inline]
    fn check(&self, off: usize, len: usize) {
        assert!(
            off.checked_add(len).is_some_and(|e| e <= self.map.len()),
            "MmapRing: {off}+{len} outside the {} B mapping",
            self.map.len()
        );
    }

    /// `len` bytes at `off`, shared.
    ///
    /// # Safety
    /// While the slice lives nobody writes those bytes: the kernel has handed them to user
    /// space (their status word says so) and no `&mut` to them exists or is made.
    ///
    /// # Panics
    /// When the range is outside the mapping.
    #[inline]
    pub(crate) unsafe fn bytes(&self, off: usize, len: usize) -> &[u8] {
        self.check(off, len);
        // SAFETY: in bounds (checked); no concurrent writer by the caller's contract.
        unsafe { std::slice::from_raw_parts(self.map.ptr().as_ptr().add(off), len) }
    }

    /// `len` bytes at `off`, exclusively.
    ///
    /// # Safety
    /// While the slice lives nobody else reads or writes those bytes (kernel included).
    ///
    /// # Panics
    /// When the range is outside the mapping.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn bytes_mut(&self, off: usize, len: usize) -> &mut [u8] {
        self.check(off, len);
        // SAFETY: in bounds (checked); exclusive by the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.map.ptr().as_ptr().add(off), len) }
    }

    /// Copies `len` bytes from `src` to `dst` (ranges may overlap, like `memmove`).
    ///
    /// # Safety
    /// Nobody else reads or writes either range during the call, and no reference into
    /// them is alive.
    ///
    /// # Panics
    /// When a range is outside the mapping.
    #[inline]
    pub(crate) unsafe fn copy_within(&self, src: usize, dst: usize, len: usize) {
        self.check(src, len);
        self.check(dst, len);
        // SAFETY: both ranges in bounds (checked); exclusive by the caller's contract;
        // `copy` allows overlap.
        unsafe {
            std::ptr::copy(
                self.map.ptr().as_ptr().add(src),
                self.map.ptr().as_ptr().add(dst),
                len,
            )
        }
    }

    /// Reads a `T` at `off` (unaligned read).
    ///
    /// # Safety
    /// Nobody writes those bytes during the call, and every bit pattern is a valid `T`
    /// (plain C structs and integers).
    ///
    /// # Panics
    /// When the range is outside the mapping.
    #[inline]
    pub(crate) unsafe fn read<T: Copy>(&self, off: usize) -> T {
        self.check(off, std::mem::size_of::<T>());
        // SAFETY: in bounds (checked); no concurrent writer and any bit pattern valid by the
        // caller's contract.
        unsafe { std::ptr::read_unaligned(self.map.ptr().as_ptr().add(off).cast::<T>()) }
    }

    /// Writes a `u32` at `off` (unaligned write).
    ///
    /// # Safety
    /// Nobody else reads or writes those bytes during the call.
    ///
    /// # Panics
    /// When the range is outside the mapping.
    #[inline]
    pub(crate) unsafe fn write_u32(&self, off: usize, value: u32) {
        self.check(off, 4);
        // SAFETY: in bounds (checked); exclusive by the caller's contract.
        unsafe { std::ptr::write_unaligned(self.map.ptr().as_ptr().add(off).cast::<u32>(), value) }
    }
}
