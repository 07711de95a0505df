//! Fixed-size buffer pool over caller-provided memory: O(1), lock-free `get`/`put`.
//!
//! A [`BufferPool`] cuts a memory region into `slot_count` slots of `slot_size` bytes. Free
//! slots sit on a lock-free **Treiber stack of slot indices**: the `next` link of slot `i` is
//! `links[i]` (caller-provided `AtomicU32`s, one per slot) and the stack head is one `AtomicU64`
//! packing `(ABA tag << 32) | index`. Only 64-bit atomics are needed, so it works on aarch64
//! without 128-bit CAS.
//!
//! [`get`](BufferPool::get) pops a slot and returns a [`Buf`], an owning handle; dropping the
//! `Buf` pushes the slot back. `get` and the drop may run on different threads (the I/O thread
//! takes buffers, the consumer thread drops bursts); any number of threads may do either.
//!
//! ```
//! use core::sync::atomic::AtomicU32;
//! use rtdaq_core::pool::BufferPool;
//! let mut mem = [0u8; 4 * 2048];
//! let mut links = [const { AtomicU32::new(0) }; 4];
//! let pool = BufferPool::new(&mut mem, &mut links, 2048).unwrap();
//! let mut buf = pool.get().unwrap();
//! buf.slot_mut().unwrap()[..3].copy_from_slice(b"abc");
//! buf.set_len(3);
//! assert_eq!(buf.as_slice(), Some(&b"abc"[..]));
//! assert_eq!(pool.in_use(), 1);
//! drop(buf);
//! assert_eq!(pool.available(), 4);
//! ```
//!
//! # Invariants
//! 1. Every slot index `< slot_count` is in exactly one place: on the free stack, owned by one
//!    live [`Buf`], or held as a raw index (after [`Buf::into_raw`]) by an engine.
//! 2. Links of slots on the stack hold the next index (or `NIL` = `u32::MAX`); only this module
//!    writes them (the pool borrows `links` exclusively).
//! 3. Every successful change of the head increments its 32-bit tag, so a stale compare-exchange
//!    (ABA: the same index popped and pushed back meanwhile) fails. A false success would need
//!    exactly 2^32 head changes between one thread's load and its compare-exchange.
//! 4. `put` publishes with `Release`, `get` takes with `Acquire`: whatever the previous owner
//!    wrote into a slot happens-before the next owner's accesses. All head changes are
//!    read-modify-writes, so the release sequences are never broken.
//! 5. A slot's bytes are only dereferenced through its owning `Buf`, and only when the pool was
//!    built as CPU-accessible.
//!
//! `get`, `Buf::drop`, and every `Buf` accessor never block, never allocate and never log.
#![allow(unsafe_code)]

use core::fmt;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;

use crossbeam_utils::CachePadded;

use crate::error::PoolError;
use crate::ring::sync::Ordering::{Acquire, Relaxed, Release};
use crate::ring::sync::{AtomicU32, AtomicU64};
use crate::traits::{DmaTarget, Segment};

/// "No slot": end of the free list.
const NIL: u32 = u32::MAX;

/// Largest number of slots a pool may have (`u32::MAX` is the list terminator).
pub const MAX_SLOTS: usize = u32::MAX as usize;

#[inline(always)]
fn pack(index: u32, tag: u32) -> u64 {
    (u64::from(tag) << 32) | u64::from(index)
}

/// The shared, written-by-everyone state, on one cache line.
struct Head {
    /// `(tag << 32) | index` of the top free slot.
    top: AtomicU64,
    /// Free slots (statistics; updated `Relaxed` next to the stack operation).
    free: AtomicU32,
}

/// A pool of fixed-size slots over caller-provided memory. `Send + Sync`: share it by
/// reference between the threads that get and drop buffers.
pub struct BufferPool<'m> {
    head: CachePadded<Head>,
    links: &'m [AtomicU32],
    base: *mut u8,
    slot_size: usize,
    slots: u32,
    cpu_accessible: bool,
    /// The dma-buf that exports this memory (GPU memory), see [`BufferPool::with_dmabuf`].
    dmabuf: Option<(i32, u64)>,
    _mem: PhantomData<&'m mut [u8]>,
}

// SAFETY: all shared mutable state is atomic (head, links); slot memory is only reached through
// the unique `Buf` that owns the slot (invariant 1), and a `Buf` hand-over between threads is
// ordered by the Release/Acquire of the head (invariant 4).
unsafe impl Send for BufferPool<'_> {}
// SAFETY: as above; `get` and `put` are safe to call concurrently from any number of threads.
unsafe impl Sync for BufferPool<'_> {}

impl<'m> BufferPool<'m> {
    /// Builds a pool over CPU memory: `mem.len() / slot_size` slots; trailing bytes are unused.
    ///
    /// Errors: [`PoolError::BadLayout`] when `slot_size` is 0 or above `u32::MAX`, or the slot
    /// count exceeds [`MAX_SLOTS`]; [`PoolError::TooSmall`] when `mem` holds no slot or `links`
    /// is shorter than the slot count (extra links are unused). Cold path.
    ///
    /// `links` is borrowed exclusively: two pools sharing links would corrupt each other.
    pub fn new(
        mem: &'m mut [u8],
        links: &'m mut [AtomicU32],
        slot_size: usize,
    ) -> Result<Self, PoolError> {
        let len = mem.len();
        // SAFETY: `mem` is valid CPU memory for reads and writes for `'m`, borrowed exclusively.
        unsafe { Self::from_raw(mem.as_mut_ptr(), len, links, slot_size, true) }
    }

    /// Builds a pool over raw memory, possibly memory the CPU may not dereference (GPU device
    /// memory, NIC-registered memory). With `cpu_accessible == false` the pool never
    /// dereferences `base`: it only computes slot addresses ([`Buf::addr`]) and the byte
    /// accessors return `None`. Same errors as [`new`](Self::new), plus
    /// [`PoolError::BadLayout`] for a null `base` when `cpu_accessible`.
    ///
    /// # Safety
    /// When `cpu_accessible` is true, `base..base + len` must be valid for reads and writes for
    /// `'m` and accessed by nobody else while the pool lives, except through its `Buf`s (and by
    /// devices the caller synchronises with). When false, `base` is only used as a number.
    pub unsafe fn from_raw(
        base: *mut u8,
        len: usize,
        links: &'m mut [AtomicU32],
        slot_size: usize,
        cpu_accessible: bool,
    ) -> Result<Self, PoolError> {
        if slot_size == 0 || slot_size > u32::MAX as usize || (cpu_accessible && base.is_null()) {
            return Err(PoolError::BadLayout);
        }
        let count = len / slot_size;
        if count > MAX_SLOTS {
            return Err(PoolError::BadLayout);
        }
        if count == 0 || links.len() < count {
            return Err(PoolError::TooSmall);
        }
        let slots = count as u32;
        let links: &'m [AtomicU32] = &links[..count];
        for (i, link) in links.iter().enumerate() {
            let next = i as u32 + 1;
            link.store(if next == slots { NIL } else { next }, Relaxed);
        }
        Ok(BufferPool {
            head: CachePadded::new(Head {
                top: AtomicU64::new(pack(0, 0)),
                free: AtomicU32::new(slots),
            }),
            links,
            base,
            slot_size,
            slots,
            cpu_accessible,
            dmabuf: None,
            _mem: PhantomData,
        })
    }

    /// Builds a pool over memory the CPU never touches (GPU device memory): `base` is the
    /// device address of its first byte, used only as a number ([`Buf::addr`]); the byte
    /// accessors return `None`. Export it with [`with_dmabuf`](Self::with_dmabuf) for a NIC.
    /// Same errors as [`new`](Self::new). Cold path.
    pub fn over_device_memory(
        base: u64,
        len: usize,
        links: &'m mut [AtomicU32],
        slot_size: usize,
    ) -> Result<Self, PoolError> {
        // SAFETY: `cpu_accessible = false`: `base` is never dereferenced, only offset.
        unsafe { Self::from_raw(base as usize as *mut u8, len, links, slot_size, false) }
    }

    /// Takes a free slot, `None` when all are in use (count it as `pool_empty`).
    /// Lock-free; never blocks, never allocates.
    #[inline]
    pub fn get(&self) -> Option<Buf<'_>> {
        let idx = self.pop()?;
        // After the pop: a slot's `free += 1` (in `put`) happens-before its pop, so the counter
        // never underflows.
        self.head.free.fetch_sub(1, Relaxed);
        Some(Buf {
            pool: self,
            idx,
            len: 0,
        })
    }

    /// Takes up to `n` free slots with **one** compare-exchange on the stack head (one
    /// `free` update instead of one per slot) and hands each to `f`, top of the stack first.
    /// Returns how many were taken (0 when the pool is empty or `n == 0`; count the rest as
    /// `pool_empty`). Lock-free; never blocks, never allocates.
    ///
    /// This is what an RX queue uses to refill its receive descriptors each poll.
    #[inline]
    pub fn get_bulk<'s>(&'s self, n: usize, mut f: impl FnMut(Buf<'s>)) -> usize {
        let Some((first, count)) = self.pop_chain(n.min(self.slots as usize) as u32) else {
            return 0;
        };
        // After the pop, as in `get`.
        self.head.free.fetch_sub(count, Relaxed);
        let mut idx = first;
        for _ in 0..count {
            // Read the link before `f` runs: `f` may drop the `Buf`, which rewrites it.
            let next = self.links[idx as usize].load(Relaxed);
            f(Buf {
                pool: self,
                idx,
                len: 0,
            });
            idx = next;
        }
        count as usize
    }

    /// Rebuilds the `Buf` of a slot index an engine got from [`Buf::into_raw`] (e.g. a frame
    /// the kernel or NIC handed back), with `len` bytes used.
    ///
    /// # Safety
    /// `idx` must come from [`Buf::into_raw`] on **this** pool, and each such index may be
    /// turned back into a `Buf` only once (otherwise two owners would alias one slot).
    ///
    /// # Panics
    /// When `idx >= slot_count()` or `len > slot_size()` (cheap checks, so a corrupt index
    /// from a device cannot reach out-of-bounds memory).
    #[inline]
    pub unsafe fn buf_from_raw(&self, idx: u32, len: usize) -> Buf<'_> {
        assert!(idx < self.slots, "buf_from_raw: slot index out of range");
        assert!(len <= self.slot_size, "buf_from_raw: len exceeds slot size");
        Buf {
            pool: self,
            idx,
            len: len as u32,
        }
    }

    /// Number of slots.
    #[inline]
    pub fn slot_count(&self) -> usize {
        self.slots as usize
    }

    /// Bytes per slot.
    #[inline]
    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// Free slots right now (a statistic: concurrent `get`/`put` may be in flight).
    #[inline]
    pub fn available(&self) -> usize {
        (self.head.free.load(Relaxed) as usize).min(self.slots as usize)
    }

    /// Slots owned by `Buf`s or raw indices right now; `available() + in_use() == slot_count()`.
    #[inline]
    pub fn in_use(&self) -> usize {
        self.slot_count() - self.available()
    }

    /// True when the CPU may dereference the slots (built by [`new`](Self::new), or
    /// [`from_raw`](Self::from_raw) with `cpu_accessible`).
    #[inline]
    pub fn is_cpu_accessible(&self) -> bool {
        self.cpu_accessible
    }

    /// Records that the pool's memory is exported as a dma-buf: `fd`, with the pool's first
    /// byte at `offset` in it (GPU device memory a NIC imports with `ibv_reg_dmabuf_mr`).
    /// The pool does not own the fd: whoever exported it keeps it open for the pool's life.
    /// Cold path.
    #[must_use]
    pub fn with_dmabuf(mut self, fd: i32, offset: u64) -> Self {
        self.dmabuf = Some((fd, offset));
        self
    }

    /// How a device reaches the pool's memory: its dma-buf when it has one
    /// ([`with_dmabuf`](Self::with_dmabuf)), else the base address (a CPU virtual address;
    /// for memory the CPU cannot reach and that has no dma-buf, the device address).
    #[inline]
    pub fn dma_target(&self) -> DmaTarget {
        match self.dmabuf {
            Some((fd, offset)) => DmaTarget::DmaBuf { fd, offset },
            None => DmaTarget::VirtAddr(self.base),
        }
    }

    /// Address of the first slot (CPU virtual address, or device address).
    #[inline]
    pub fn base_addr(&self) -> u64 {
        self.base as usize as u64
    }

    /// Address of slot `idx`, `None` when out of range.
    #[inline]
    pub fn slot_addr(&self, idx: u32) -> Option<u64> {
        (idx < self.slots).then(|| self.addr_of(idx))
    }

    /// Slot index containing address `addr` (any byte of the slot, e.g. an AF_XDP descriptor
    /// address with headroom), `None` when outside the pool.
    #[inline]
    pub fn slot_of_addr(&self, addr: u64) -> Option<u32> {
        let off = addr.checked_sub(self.base_addr())?;
        let idx = off / self.slot_size as u64;
        (idx < u64::from(self.slots)).then_some(idx as u32)
    }

    #[inline(always)]
    fn addr_of(&self, idx: u32) -> u64 {
        self.base_addr()
            .wrapping_add(u64::from(idx) * self.slot_size as u64)
    }

    /// Pops the top free index (Treiber stack).
    #[inline]
    fn pop(&self) -> Option<u32> {
        // Acquire (load and CAS): synchronises with the `Release` push that linked the index,
        // so its link and the previous owner's writes to the slot are visible.
        let mut cur = self.head.top.load(Acquire);
        loop {
            let idx = cur as u32;
            if idx == NIL {
                return None;
            }
            // A stale read here (the slot was popped and pushed back meanwhile) is harmless:
            // the tag changed, so the compare-exchange below fails.
            let next = self.links[idx as usize].load(Relaxed);
            let new = pack(next, ((cur >> 32) as u32).wrapping_add(1));
            match self
                .head
                .top
                .compare_exchange_weak(cur, new, Acquire, Acquire)
            {
                Ok(_) => return Some(idx),
                Err(actual) => cur = actual,
            }
        }
    }

    /// Pops the top `1..=n` free indices as one chain: `(first, count)`, linked through
    /// `links` from `first`. `None` when empty or `n == 0`.
    #[inline]
    fn pop_chain(&self, n: u32) -> Option<(u32, u32)> {
        if n == 0 {
            return None;
        }
        // Acquire: as in `pop`; every push's link stores are visible for the whole walk (all
        // head changes are read-modify-writes, so this load synchronises with every earlier
        // `Release` push).
        let mut cur = self.head.top.load(Acquire);
        'retry: loop {
            let first = cur as u32;
            if first == NIL {
                return None;
            }
            // Walk `n` links down the stack. Reads may be stale when the stack changes
            // meanwhile (then the tag changed and the compare-exchange fails); the walk is
            // bounded by `n` and every index is checked before use.
            let mut count = 1;
            let mut next = self.links[first as usize].load(Relaxed);
            while count < n && next != NIL {
                if next >= self.slots {
                    // Only a stale read can produce this (links hold indices or NIL).
                    cur = self.head.top.load(Acquire);
                    continue 'retry;
                }
                next = self.links[next as usize].load(Relaxed);
                count += 1;
            }
            let new = pack(next, ((cur >> 32) as u32).wrapping_add(1));
            // A success proves the head (index and tag) never changed since the load, so no
            // slot was popped or pushed meanwhile and the walked chain is exactly the top of
            // the stack (links of slots on the stack only change when they are popped).
            match self
                .head
                .top
                .compare_exchange_weak(cur, new, Acquire, Acquire)
            {
                Ok(_) => return Some((first, count)),
                Err(actual) => cur = actual,
            }
        }
    }

    /// Pushes a chain of `count` indices we own (`first` → … → `last` through `links`) back
    /// on the free stack with one compare-exchange.
    #[inline]
    fn put_chain(&self, first: u32, last: u32, count: u32) {
        self.head.free.fetch_add(count, Relaxed);
        let mut cur = self.head.top.load(Relaxed);
        loop {
            self.links[last as usize].store(cur as u32, Relaxed);
            let new = pack(first, ((cur >> 32) as u32).wrapping_add(1));
            // Release: the chain's link stores and every write to its slots happen-before the
            // next `get` of any of them.
            match self
                .head
                .top
                .compare_exchange_weak(cur, new, Release, Relaxed)
            {
                Ok(_) => return,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Pushes a slot index we own back on the free stack.
    #[inline]
    fn put(&self, idx: u32) {
        // Before the push (see `get`).
        self.head.free.fetch_add(1, Relaxed);
        let mut cur = self.head.top.load(Relaxed);
        loop {
            self.links[idx as usize].store(cur as u32, Relaxed);
            let new = pack(idx, ((cur >> 32) as u32).wrapping_add(1));
            // Release: our link store and every write to the slot happen-before the next `get`.
            match self
                .head
                .top
                .compare_exchange_weak(cur, new, Release, Relaxed)
            {
                Ok(_) => return,
                Err(actual) => cur = actual,
            }
        }
    }
}

impl fmt::Debug for BufferPool<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferPool")
            .field("base", &format_args!("{:#x}", self.base_addr()))
            .field("slot_size", &self.slot_size)
            .field("slot_count", &self.slots)
            .field("available", &self.available())
            .field("cpu_accessible", &self.cpu_accessible)
            .field("dmabuf", &self.dmabuf)
            .finish()
    }
}

/// An owned slot of a [`BufferPool`]: returns the slot to the pool on `Drop`.
///
/// Holds the slot index, a pool reference and the used length (16 bytes). `Send` and `Sync`
/// (it may be dropped on another thread than the one that got it). Never `Clone`.
pub struct Buf<'p> {
    pool: &'p BufferPool<'p>,
    idx: u32,
    len: u32,
}

impl<'p> Buf<'p> {
    /// Slot index within the pool.
    #[inline]
    pub fn index(&self) -> u32 {
        self.idx
    }

    /// Address of the slot's first byte (CPU or device address), for DMA descriptors.
    #[inline]
    pub fn addr(&self) -> u64 {
        self.pool.addr_of(self.idx)
    }

    /// Slot size in bytes.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.pool.slot_size
    }

    /// Used bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when no byte is used.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sets the used length (after a receive or while building a packet).
    ///
    /// # Panics
    /// When `len > capacity()` (a caller bug: lengths from devices must be checked first).
    #[inline]
    pub fn set_len(&mut self, len: usize) {
        assert!(len <= self.pool.slot_size, "Buf::set_len beyond capacity");
        self.len = len as u32;
    }

    /// The pool this buffer belongs to.
    #[inline]
    pub fn pool(&self) -> &'p BufferPool<'p> {
        self.pool
    }

    /// True when the CPU may read the bytes (see [`BufferPool::is_cpu_accessible`]).
    #[inline]
    pub fn is_cpu_accessible(&self) -> bool {
        self.pool.cpu_accessible
    }

    #[inline(always)]
    fn ptr(&self) -> *mut u8 {
        // SAFETY (of the arithmetic): `idx < slots` and `slots * slot_size <= len`, so the
        // offset stays inside the region; `wrapping_add` keeps it defined for device addresses.
        self.pool
            .base
            .wrapping_add(self.idx as usize * self.pool.slot_size)
    }

    /// The used bytes, `None` when the pool is not CPU-accessible (device memory).
    #[inline]
    pub fn as_slice(&self) -> Option<&[u8]> {
        if !self.pool.cpu_accessible {
            return None;
        }
        // SAFETY: CPU-accessible pool: the slot lies inside memory valid for `'p` (`new` /
        // `from_raw` contract); this `Buf` owns the slot exclusively (invariant 1), so no
        // `&mut` to it exists elsewhere; `len <= slot_size`.
        Some(unsafe { core::slice::from_raw_parts(self.ptr(), self.len as usize) })
    }

    /// `len` bytes of the slot from byte `off`, whatever the used length: a frame a device
    /// wrote inside a larger slot (a stride of a multi-packet receive buffer shared by
    /// several frames). Only this range is borrowed, so a device may write other parts of
    /// the slot meanwhile. `None` when the range leaves the slot or the pool is not
    /// CPU-accessible.
    #[inline]
    pub fn bytes_at(&self, off: usize, len: usize) -> Option<&[u8]> {
        let end = off.checked_add(len)?;
        if !self.pool.cpu_accessible || end > self.pool.slot_size {
            return None;
        }
        // SAFETY: CPU-accessible pool and `off + len <= slot_size`: the range lies inside
        // the slot, inside memory valid for `'p` (`new` / `from_raw` contract); this `Buf`
        // owns the slot (invariant 1) and `&self` excludes a `&mut` through it.
        Some(unsafe { core::slice::from_raw_parts(self.ptr().add(off), len) })
    }

    /// The used bytes, mutably; `None` when the pool is not CPU-accessible.
    #[inline]
    pub fn as_mut_slice(&mut self) -> Option<&mut [u8]> {
        let len = self.len as usize;
        self.slot_mut().map(|s| &mut s[..len])
    }

    /// The whole slot (`capacity()` bytes), to fill before [`set_len`](Self::set_len); `None`
    /// when the pool is not CPU-accessible.
    #[inline]
    pub fn slot_mut(&mut self) -> Option<&mut [u8]> {
        if !self.pool.cpu_accessible {
            return None;
        }
        // SAFETY: as in `as_slice`; `&mut self` makes this the only live reference to the slot.
        Some(unsafe { core::slice::from_raw_parts_mut(self.ptr(), self.pool.slot_size) })
    }

    /// The used bytes as a [`Segment`]: `Host` for CPU-accessible pools, `Device` otherwise.
    #[inline]
    pub fn as_segment(&self) -> Segment<'_> {
        match self.as_slice() {
            Some(bytes) => Segment::Host(bytes),
            None => Segment::Device {
                ptr: self.addr(),
                len: self.len,
            },
        }
    }

    /// Gives up ownership without returning the slot: the index stays "in use" until
    /// [`BufferPool::buf_from_raw`] rebuilds the `Buf` (e.g. an AF_XDP frame lent to the
    /// kernel). Forgetting the index leaks the slot (safe, but it is lost to the pool).
    #[inline]
    pub fn into_raw(self) -> u32 {
        ManuallyDrop::new(self).idx
    }
}

impl Drop for Buf<'_> {
    /// Returns the slot to its pool. Lock-free; never blocks, never allocates.
    #[inline]
    fn drop(&mut self) {
        self.pool.put(self.idx);
    }
}

/// Returns many [`Buf`]s with one compare-exchange per pool: [`push`](Self::push) links each
/// slot into a private chain (no atomic read-modify-write), [`flush`](Self::flush) — or the
/// drop — pushes the chain on its pool's free stack at once. Buffers of another pool flush the
/// chain first, so any mix is fine (a chain per run of same-pool buffers).
///
/// ```
/// use core::sync::atomic::AtomicU32;
/// use rtdaq_core::pool::{BufferPool, ReturnBatch};
/// let mut mem = [0u8; 8 * 64];
/// let mut links = [const { AtomicU32::new(0) }; 8];
/// let pool = BufferPool::new(&mut mem, &mut links, 64).unwrap();
/// let mut taken = Vec::new();
/// assert_eq!(pool.get_bulk(5, |b| taken.push(b)), 5);
/// let mut ret = ReturnBatch::new();
/// for b in taken.drain(..) {
///     ret.push(b);
/// }
/// assert_eq!(pool.available(), 3); // not returned yet
/// drop(ret);
/// assert_eq!(pool.available(), 8);
/// ```
///
/// Never blocks, never allocates.
pub struct ReturnBatch<'p> {
    pool: Option<&'p BufferPool<'p>>,
    first: u32,
    last: u32,
    count: u32,
}

impl<'p> ReturnBatch<'p> {
    /// An empty batch.
    #[inline]
    pub const fn new() -> Self {
        ReturnBatch {
            pool: None,
            first: NIL,
            last: NIL,
            count: 0,
        }
    }

    /// Takes `buf` into the chain (its slot goes back to the pool at the next flush).
    #[inline]
    pub fn push(&mut self, buf: Buf<'p>) {
        let buf = ManuallyDrop::new(buf);
        match self.pool {
            Some(p) if core::ptr::eq(p, buf.pool) => {}
            Some(_) => {
                self.flush();
                self.pool = Some(buf.pool);
            }
            None => self.pool = Some(buf.pool),
        }
        if self.count == 0 {
            self.last = buf.idx;
        } else {
            // We own `buf.idx` (it is off the stack), so writing its link is ours to do.
            buf.pool.links[buf.idx as usize].store(self.first, Relaxed);
        }
        self.first = buf.idx;
        self.count += 1;
    }

    /// Buffers waiting in the chain.
    #[inline]
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when no buffer waits.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Returns the chain to its pool now.
    #[inline]
    pub fn flush(&mut self) {
        if let Some(pool) = self.pool.take() {
            if self.count > 0 {
                pool.put_chain(self.first, self.last, self.count);
            }
        }
        self.count = 0;
    }
}

impl Default for ReturnBatch<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for ReturnBatch<'_> {
    /// Returns what is left in the chain.
    #[inline]
    fn drop(&mut self) {
        self.flush();
    }
}

impl fmt::Debug for ReturnBatch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReturnBatch")
            .field("count", &self.count)
            .finish()
    }
}

impl fmt::Debug for Buf<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buf")
            .field("index", &self.idx)
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len)
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn links<const N: usize>() -> [AtomicU32; N] {
        [const { AtomicU32::new(0) }; N]
    }

    #[test]
    fn layout_errors() {
        let mut mem = [0u8; 100];
        let mut l = links::<4>();
        assert_eq!(
            BufferPool::new(&mut mem, &mut l, 0).err(),
            Some(PoolError::BadLayout)
        );
        assert_eq!(
            BufferPool::new(&mut mem, &mut l, 101).err(),
            Some(PoolError::TooSmall)
        );
        assert_eq!(
            BufferPool::new(&mut mem, &mut l, 20).err(),
            Some(PoolError::TooSmall)
        );
        let p = BufferPool::new(&mut mem, &mut l, 30).unwrap();
        assert_eq!((p.slot_count(), p.slot_size()), (3, 30));
    }

    #[test]
    fn bulk_get_and_chained_return() {
        let mut mem = [0u8; 8 * 64];
        let mut l = links::<8>();
        let pool = BufferPool::new(&mut mem, &mut l, 64).unwrap();
        let mut bufs: heapless::Vec<Buf<'_>, 8> = heapless::Vec::new();
        assert_eq!(pool.get_bulk(0, |_| unreachable!()), 0);
        assert_eq!(pool.get_bulk(3, |b| bufs.push(b).unwrap()), 3);
        assert_eq!(pool.available(), 5);
        // Asking for more than is left takes what is left.
        assert_eq!(pool.get_bulk(100, |b| bufs.push(b).unwrap()), 5);
        assert_eq!(pool.available(), 0);
        assert_eq!(pool.get_bulk(1, |_| unreachable!()), 0);
        let mut seen = [false; 8];
        for b in &bufs {
            assert!(!core::mem::replace(&mut seen[b.index() as usize], true));
        }
        // Return 5 as one chain, then take 8 again: every slot comes back exactly once.
        let mut ret = ReturnBatch::new();
        for _ in 0..5 {
            ret.push(bufs.pop().unwrap());
        }
        assert_eq!((ret.len(), pool.available()), (5, 0));
        ret.flush();
        assert!(ret.is_empty());
        assert_eq!(pool.available(), 5);
        drop(ret);
        assert_eq!(pool.available(), 5);
        assert_eq!(pool.get_bulk(8, |b| bufs.push(b).unwrap()), 5);
        let mut seen = [false; 8];
        for b in &bufs {
            assert!(!core::mem::replace(&mut seen[b.index() as usize], true));
        }
        assert_eq!(seen, [true; 8]);
        bufs.clear();
        assert_eq!(pool.available(), 8);
    }

    #[test]
    fn return_batch_splits_by_pool() {
        let (mut m1, mut m2) = ([0u8; 4 * 32], [0u8; 4 * 32]);
        let (mut l1, mut l2) = (links::<4>(), links::<4>());
        let p1 = BufferPool::new(&mut m1, &mut l1, 32).unwrap();
        let p2 = BufferPool::new(&mut m2, &mut l2, 32).unwrap();
        let mut ret = ReturnBatch::new();
        for _ in 0..2 {
            ret.push(p1.get().unwrap());
            ret.push(p2.get().unwrap());
        }
        // Each pool change flushed the chain before it: only the last buffer waits.
        assert_eq!(ret.len(), 1);
        assert_eq!((p1.available(), p2.available()), (4, 3));
        drop(ret);
        assert_eq!((p1.available(), p2.available()), (4, 4));
    }

    #[test]
    fn get_until_empty_then_put() {
        let mut mem = [0u8; 4 * 64];
        let mut l = links::<4>();
        let pool = BufferPool::new(&mut mem, &mut l, 64).unwrap();
        let mut bufs: heapless::Vec<Buf<'_>, 4> = heapless::Vec::new();
        while let Some(b) = pool.get() {
            bufs.push(b).unwrap();
        }
        assert_eq!(bufs.len(), 4);
        assert_eq!(pool.available(), 0);
        let mut seen = [false; 4];
        for b in &bufs {
            assert!(!core::mem::replace(&mut seen[b.index() as usize], true));
            assert_eq!(b.addr(), pool.base_addr() + 64 * u64::from(b.index()));
            assert_eq!(pool.slot_of_addr(b.addr() + 63), Some(b.index()));
        }
        assert_eq!(pool.slot_of_addr(pool.base_addr() + 256), None);
        bufs.clear();
        assert_eq!(pool.available(), 4);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn bytes_and_raw_roundtrip() {
        let mut mem = [0u8; 2 * 16];
        let mut l = links::<2>();
        let pool = BufferPool::new(&mut mem, &mut l, 16).unwrap();
        let mut b = pool.get().unwrap();
        b.slot_mut().unwrap()[..4].copy_from_slice(&[1, 2, 3, 4]);
        b.set_len(4);
        assert_eq!(b.as_segment(), Segment::Host(&[1, 2, 3, 4]));
        let idx = b.into_raw();
        assert_eq!(pool.in_use(), 1);
        // SAFETY: `idx` came from `into_raw` on this pool and is rebuilt once.
        let b = unsafe { pool.buf_from_raw(idx, 4) };
        assert_eq!(b.as_slice(), Some(&[1u8, 2, 3, 4][..]));
        drop(b);
        assert_eq!(pool.available(), 2);
    }

    #[test]
    fn bytes_at_borrows_a_range_of_the_slot() {
        let mut mem = [0u8; 2 * 64];
        let mut l = links::<2>();
        let pool = BufferPool::new(&mut mem, &mut l, 64).unwrap();
        let mut b = pool.get().unwrap();
        for (i, x) in b.slot_mut().unwrap().iter_mut().enumerate() {
            *x = i as u8;
        }
        // The used length (0) does not limit it.
        assert_eq!(b.bytes_at(10, 3), Some(&[10u8, 11, 12][..]));
        assert_eq!(b.bytes_at(64, 0), Some(&[][..]));
        assert_eq!(b.bytes_at(60, 5), None);
        assert_eq!(b.bytes_at(usize::MAX, 2), None);
    }

    #[test]
    #[should_panic(expected = "beyond capacity")]
    fn set_len_beyond_capacity_panics() {
        let mut mem = [0u8; 16];
        let mut l = links::<1>();
        let pool = BufferPool::new(&mut mem, &mut l, 16).unwrap();
        pool.get().unwrap().set_len(17);
    }

    #[test]
    fn device_memory_is_never_dereferenced() {
        let mut l = links::<8>();
        // SAFETY: `cpu_accessible = false`: the address is only used as a number.
        let pool = unsafe {
            BufferPool::from_raw(0x7f00_0000_0000 as *mut u8, 8 * 4096, &mut l, 4096, false)
        }
        .unwrap();
        let mut b = pool.get().unwrap();
        b.set_len(100);
        assert!(b.as_slice().is_none() && b.slot_mut().is_none());
        assert_eq!(
            b.as_segment(),
            Segment::Device {
                ptr: 0x7f00_0000_0000 + 4096 * u64::from(b.index()),
                len: 100
            }
        );
    }

    #[test]
    fn dma_target_is_the_dmabuf_when_exported() {
        let mut mem = [0u8; 64];
        let mut l = links::<4>();
        let base = mem.as_mut_ptr();
        let host = BufferPool::new(&mut mem, &mut l, 16).unwrap();
        assert_eq!(host.dma_target(), DmaTarget::VirtAddr(base));
        let mut l = links::<8>();
        let dev = BufferPool::over_device_memory(0x7f00_0000_0000, 8 * 4096, &mut l, 4096).unwrap();
        assert!(!dev.is_cpu_accessible());
        assert_eq!(
            dev.dma_target(),
            DmaTarget::VirtAddr(0x7f00_0000_0000 as *mut u8)
        );
        let dev = dev.with_dmabuf(7, 65536);
        assert_eq!(
            dev.dma_target(),
            DmaTarget::DmaBuf {
                fd: 7,
                offset: 65536
            }
        );
        // The slots keep their device addresses.
        assert_eq!(dev.slot_addr(1), Some(0x7f00_0000_0000 + 4096));
    }

    #[test]
    fn send_sync() {
        fn is<T: Send + Sync>() {}
        is::<BufferPool<'_>>();
        is::<Buf<'_>>();
    }
}
