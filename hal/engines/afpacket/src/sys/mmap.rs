//! Safe layer over the memory a packet socket shares with the kernel: [`MmapRing`], one
//! `MAP_SHARED` mapping of a socket's ring, unmapped on drop.
//!
//! The kernel and user space hand parts of the mapping back and forth through status words
//! (`tp_status`, `block_status`), which [`MmapRing::u32_at`] exposes as `AtomicU32`s. Every
//! other access is a byte range whose owner (kernel or user) the caller must know: the
//! accessors for those are `unsafe fn`s, used only by the ring module, which implements the
//! ownership protocol.

use std::io;
use std::os::fd::AsFd;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;

use super::ffi;
use super::socket::PacketSocket;

/// One mapping of a packet socket's ring(s). `Send + Sync`: it is only a window on kernel
/// memory; who may touch which bytes is decided by the ring protocol above it.
#[derive(Debug)]
pub(crate) struct MmapRing {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory owned by this value; moving the owner to another
// thread moves nothing. Concurrent access is governed by the status-word protocol (atomics)
// implemented by the ring module.
unsafe impl Send for MmapRing {}
// SAFETY: `&MmapRing` only hands out atomics (`u32_at`) safely; byte access needs `unsafe`
// calls whose callers prove exclusive or read-only ownership.
unsafe impl Sync for MmapRing {}

impl MmapRing {
    /// Maps `len` bytes of `sock`'s ring(s) (set up with `PACKET_RX_RING`/`PACKET_TX_RING`
    /// first). Cold path.
    pub(crate) fn map(sock: &PacketSocket, len: usize) -> io::Result<MmapRing> {
        let ptr = ffi::mmap_shared(sock.as_fd(), len)?;
        Ok(MmapRing { ptr, len })
    }

    /// Mapped bytes.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The 32-bit word at byte offset `off` (a status word) as an atomic.
    ///
    /// # Panics
    /// When `off` is not 4-byte aligned or the word is not inside the mapping (a caller bug;
    /// ring offsets are computed from the geometry, never read from the wire).
    #[inline]
    pub(crate) fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(
            off % 4 == 0 && off.checked_add(4).is_some_and(|e| e <= self.len),
            "MmapRing::u32_at({off}) outside the {} B mapping",
            self.len
        );
        // SAFETY: in bounds and aligned (the mapping is page-aligned and `off % 4 == 0`);
        // the memory lives as long as `self`; `AtomicU32` has the layout of `u32` and
        // concurrent kernel accesses to status words are what atomics are for.
        unsafe { &*self.ptr.as_ptr().add(off).cast::<AtomicU32>() }
    }

    /// Asserts that `off..off + len` lies inside the mapping.
    #[inline]
    fn check(&self, off: usize, len: usize) {
        assert!(
            off.checked_add(len).is_some_and(|e| e <= self.len),
            "MmapRing: {off}+{len} outside the {} B mapping",
            self.len
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
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(off), len) }
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
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(off), len) }
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
        unsafe { std::ptr::copy(self.ptr.as_ptr().add(src), self.ptr.as_ptr().add(dst), len) }
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
        unsafe { std::ptr::read_unaligned(self.ptr.as_ptr().add(off).cast::<T>()) }
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
        unsafe { std::ptr::write_unaligned(self.ptr.as_ptr().add(off).cast::<u32>(), value) }
    }
}

impl Drop for MmapRing {
    /// # Panics
    /// When `munmap` fails (a bug: the arguments are the ones `mmap` returned), unless the
    /// thread is already panicking.
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are the whole mapping made in `map`; `&mut self` proves no
        // reference into it is alive (references handed out borrow `self`); never used again.
        if let Err(e) = unsafe { ffi::munmap(self.ptr, self.len) } {
            if !std::thread::panicking() {
                panic!("munmap of a {} B packet ring failed: {e}", self.len);
            }
        }
    }
}
