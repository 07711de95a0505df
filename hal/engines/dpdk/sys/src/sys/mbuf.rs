//! [`Mbuf`] (an owned packet buffer, freed on drop) and [`MbufBurst`] (a fixed-capacity
//! burst of them, freed in bulk on drop or clear).
use std::ptr::NonNull;

use super::raw;
use crate::error::{DpdkError, Result};

/// An owned DPDK packet buffer (`struct rte_mbuf *`), freed (`rte_pktmbuf_free`) on drop.
///
/// `#[repr(transparent)]` over a non-null pointer, so `Option<Mbuf>` has the layout of
/// `struct rte_mbuf *` and a `&mut [Option<Mbuf>]` is handed to `rte_eth_rx_burst` as is.
/// Data accessors cover the first segment (the engine configures single-segment mbufs).
#[derive(Debug)]
#[repr(transparent)]
pub struct Mbuf(NonNull<raw::rte_mbuf>);

// SAFETY: an Mbuf is the unique owner of its rte_mbuf; DPDK mbufs may be freed on any
// thread (the pool is MP/MC).
unsafe impl Send for Mbuf {}
// SAFETY: &Mbuf only reads the buffer (no interior mutability).
unsafe impl Sync for Mbuf {}

impl Mbuf {
    pub(crate) fn from_non_null(p: NonNull<raw::rte_mbuf>) -> Self {
        Mbuf(p)
    }

    /// Takes ownership of a raw mbuf.
    ///
    /// # Safety
    /// `p` must be a valid mbuf that nothing else owns or frees (e.g. from
    /// [`Mbuf::into_raw`] or a raw DPDK call).
    pub unsafe fn from_raw(p: NonNull<raw::rte_mbuf>) -> Self {
        Mbuf(p)
    }

    /// Gives up ownership without freeing (the caller frees or transmits it).
    pub fn into_raw(self) -> NonNull<raw::rte_mbuf> {
        let p = self.0;
        std::mem::forget(self);
        p
    }

    /// The raw pointer (valid while `self` lives).
    pub fn as_ptr(&self) -> *mut raw::rte_mbuf {
        self.0.as_ptr()
    }

    /// Bytes of data in the first segment (`data_len`).
    pub fn len(&self) -> usize {
        // SAFETY: self owns a valid mbuf.
        usize::from(unsafe { raw::rtdaq_mbuf_data_len(self.0.as_ptr()) })
    }

    /// `len() == 0`.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the whole chain (`pkt_len`).
    pub fn pkt_len(&self) -> usize {
        // SAFETY: self owns a valid mbuf.
        unsafe { raw::rtdaq_mbuf_pkt_len(self.0.as_ptr()) as usize }
    }

    /// Segments in the chain (`nb_segs`).
    pub fn segments(&self) -> u16 {
        // SAFETY: self owns a valid mbuf.
        unsafe { raw::rtdaq_mbuf_nb_segs(self.0.as_ptr()) }
    }

    /// Input port of a received mbuf.
    pub fn port(&self) -> u16 {
        // SAFETY: self owns a valid mbuf.
        unsafe { raw::rtdaq_mbuf_port(self.0.as_ptr()) }
    }

    /// Bytes the first segment can hold from its data start (data plus tailroom).
    pub fn room(&self) -> usize {
        // SAFETY: self owns a valid mbuf.
        usize::from(unsafe { raw::rtdaq_mbuf_room(self.0.as_ptr()) })
    }

    /// The first segment's data; empty when its buffer is GPU memory (a mempool over a
    /// device [`ExtMem`](crate::ExtMem)): reach that through [`segment_addr`](Self::segment_addr).
    pub fn data(&self) -> &[u8] {
        self.segment_data(0).unwrap_or_default()
    }

    /// True when segment `k`'s buffer is GPU memory (`false` past the last segment).
    pub fn segment_in_gpu(&self, k: usize) -> bool {
        self.segment_ptr(k).is_some_and(|p| {
            // SAFETY: p is a valid segment of self's chain; the shim reads its pool field.
            super::mempool::is_device_pool(unsafe { raw::rtdaq_mbuf_pool(p) })
        })
    }

    /// Segment `k` of the chain, `None` past the last.
    fn segment_ptr(&self, k: usize) -> Option<*mut raw::rte_mbuf> {
        let mut p = self.0.as_ptr();
        for _ in 0..k {
            // SAFETY: p is a valid segment of the chain self owns.
            p = unsafe { raw::rtdaq_mbuf_next(p) };
            if p.is_null() {
                return None;
            }
        }
        Some(p)
    }

    /// Data of segment `k` of the chain (`k = 0` is [`data`](Self::data)), `None` past the
    /// last segment. With buffer split, segment 0 holds the headers and segment 1 the rest.
    /// Never allocates.
    ///
    /// A segment whose buffer is GPU memory (its mempool is over a device `ExtMem`) is
    /// `Some(&[])`: the CPU cannot read it; [`segment_addr`](Self::segment_addr) gives its
    /// address and length.
    pub fn segment_data(&self, k: usize) -> Option<&[u8]> {
        let p = self.segment_ptr(k)?;
        // SAFETY: p is a valid segment of self's chain; the shim reads its pool field.
        if super::mempool::is_device_pool(unsafe { raw::rtdaq_mbuf_pool(p) }) {
            return Some(&[]);
        }
        // SAFETY: p is a valid segment of self's chain (owned by self for the borrow) whose
        // buffer is CPU memory (checked above: pools over GPU memory are registered); its
        // data start is followed by data_len initialised bytes.
        unsafe {
            let d = raw::rtdaq_mbuf_data(p).cast::<u8>();
            Some(std::slice::from_raw_parts(
                d,
                usize::from(raw::rtdaq_mbuf_data_len(p)),
            ))
        }
    }

    /// Address and length of segment `k`'s data (`None` past the last segment), without
    /// making a slice: for mbufs whose data buffers are GPU memory, which the CPU must not
    /// read. Never allocates.
    pub fn segment_addr(&self, k: usize) -> Option<(u64, u16)> {
        let p = self.segment_ptr(k)?;
        // SAFETY: p is a valid segment of self's chain; the shims read its header fields
        // only (buf_addr + data_off, data_len), never the data.
        unsafe {
            Some((
                raw::rtdaq_mbuf_data(p) as usize as u64,
                raw::rtdaq_mbuf_data_len(p),
            ))
        }
    }

    /// The first segment's data, writable.
    ///
    /// Empty when the buffer is GPU memory (see [`data`](Self::data)).
    pub fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: the shim reads the pool field of a valid mbuf.
        if super::mempool::is_device_pool(unsafe { raw::rtdaq_mbuf_pool(self.0.as_ptr()) }) {
            return &mut [];
        }
        // SAFETY: as in segment_data (CPU memory, checked above); &mut self gives exclusive
        // access to the buffer.
        unsafe {
            let p = raw::rtdaq_mbuf_data(self.0.as_ptr()).cast::<u8>();
            std::slice::from_raw_parts_mut(p, self.len())
        }
    }

    /// Sets the length of a single-segment mbuf (`data_len = pkt_len = len`). Bytes newly
    /// exposed hold whatever the buffer held before. Never allocates.
    ///
    /// # Errors
    /// [`DpdkError::MbufTooSmall`] when `len > room()` or the mbuf is chained.
    pub fn set_len(&mut self, len: usize) -> Result<()> {
        let room = self.room() as u16;
        let too_small = DpdkError::MbufTooSmall { len, room };
        let len16 = u16::try_from(len).map_err(|_| too_small.clone())?;
        // SAFETY: self exclusively owns a valid mbuf; the shim checks the bound.
        let rc = unsafe { raw::rtdaq_mbuf_set_len(self.0.as_ptr(), len16) };
        if rc == 0 {
            Ok(())
        } else {
            Err(too_small)
        }
    }

    /// Sets the length to `bytes.len()` and copies `bytes` in.
    ///
    /// # Errors
    /// As [`Mbuf::set_len`]; [`DpdkError::MbufTooSmall`] with `room` 0 for a buffer in GPU
    /// memory (the CPU cannot write it).
    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        if self.segment_in_gpu(0) {
            return Err(DpdkError::MbufTooSmall {
                len: bytes.len(),
                room: 0,
            });
        }
        self.set_len(bytes.len())?;
        self.data_mut().copy_from_slice(bytes);
        Ok(())
    }
}

impl Drop for Mbuf {
    fn drop(&mut self) {
        // SAFETY: self uniquely owns the mbuf; it is not used after this.
        unsafe { raw::rtdaq_pktmbuf_free(self.0.as_ptr()) }
    }
}

/// `Option<Mbuf>` slices are passed to DPDK as `struct rte_mbuf **`.
const _: () =
    assert!(std::mem::size_of::<Option<Mbuf>>() == std::mem::size_of::<*mut raw::rte_mbuf>());

/// A fixed-capacity burst of owned mbufs: received into by
/// [`RxQueue::rx_into`](crate::RxQueue::rx_into), sent from by
/// [`TxQueue::tx_from`](crate::TxQueue::tx_from), filled by
/// [`Mempool::alloc_bulk`](crate::Mempool::alloc_bulk).
///
/// The storage is allocated once by [`MbufBurst::with_capacity`]; nothing after that
/// allocates. Mbufs still in the burst are freed in bulk (`rte_pktmbuf_free_bulk`) by
/// [`MbufBurst::clear`] and on drop, so no code path can leak one.
#[derive(Debug)]
pub struct MbufBurst {
    /// Invariant: `slots[head..len]` are `Some`, every other slot is `None`.
    slots: Box<[Option<Mbuf>]>,
    head: usize,
    len: usize,
}

impl MbufBurst {
    /// An empty burst holding at most `capacity` mbufs (at most 65535: one DPDK burst call).
    ///
    /// # Panics
    /// If `capacity` is 0 or above `u16::MAX`.
    pub fn with_capacity(capacity: usize) -> Self {
        assert!(
            capacity > 0 && capacity <= usize::from(u16::MAX),
            "MbufBurst capacity must be 1..=65535, got {capacity}"
        );
        Self {
            slots: (0..capacity).map(|_| None).collect(),
            head: 0,
            len: 0,
        }
    }

    /// Maximum number of mbufs.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Mbufs held.
    pub fn len(&self) -> usize {
        self.len - self.head
    }

    /// No mbufs held.
    pub fn is_empty(&self) -> bool {
        self.len == self.head
    }

    /// Mbuf `i` (0-based among those held).
    pub fn get(&self, i: usize) -> Option<&Mbuf> {
        self.slots[self.head..self.len].get(i)?.as_ref()
    }

    /// Mbuf `i`, writable.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut Mbuf> {
        self.slots[self.head..self.len].get_mut(i)?.as_mut()
    }

    /// The mbufs held, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Mbuf> + '_ {
        self.slots[self.head..self.len].iter().flatten()
    }

    /// The mbufs held, writable.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Mbuf> + '_ {
        self.slots[self.head..self.len].iter_mut().flatten()
    }

    /// Appends `m`; gives it back when the burst is full.
    pub fn push(&mut self, m: Mbuf) -> std::result::Result<(), Mbuf> {
        self.compact_if_needed(1);
        if self.len == self.slots.len() {
            return Err(m);
        }
        self.slots[self.len] = Some(m);
        self.len += 1;
        Ok(())
    }

    /// Moves every mbuf of `src` (all `Some`) to the end of the burst in one slice swap,
    /// leaving `src` all `None`. Returns false and moves nothing when `src` holds a `None`
    /// or the burst has no room for all of them. Never allocates.
    pub fn append(&mut self, src: &mut [Option<Mbuf>]) -> bool {
        let n = src.len();
        self.compact_if_needed(n);
        if self.slots.len() - self.len < n || !src.iter().all(Option::is_some) {
            return false;
        }
        // The tail slots are None (the invariant), so src gets Nones and the burst Somes.
        self.slots[self.len..self.len + n].swap_with_slice(src);
        self.len += n;
        true
    }

    /// Removes and returns the first mbuf.
    pub fn pop_front(&mut self) -> Option<Mbuf> {
        if self.is_empty() {
            return None;
        }
        let m = self.slots[self.head].take();
        self.head += 1;
        self.reset_if_empty();
        m
    }

    /// Frees every mbuf held, in one `rte_pktmbuf_free_bulk` call. Never allocates.
    pub fn clear(&mut self) {
        let n = self.len();
        if n > 0 {
            let p = self.slots[self.head..self.len].as_mut_ptr();
            // SAFETY: slots[head..len] are n Some(Mbuf) laid out as `struct rte_mbuf *`;
            // they are freed here and the slots overwritten with None below without
            // running Mbuf's drop (no double free).
            unsafe {
                raw::rtdaq_pktmbuf_free_bulk(p.cast::<*mut raw::rte_mbuf>(), n as u32);
                for s in &mut self.slots[self.head..self.len] {
                    std::ptr::write(s, None);
                }
            }
        }
        self.head = 0;
        self.len = 0;
    }

    fn reset_if_empty(&mut self) {
        if self.head == self.len {
            self.head = 0;
            self.len = 0;
        }
    }

    /// Moves the held mbufs to the front when fewer than `n` slots are free at the tail.
    fn compact_if_needed(&mut self, n: usize) {
        if self.head > 0 && self.slots.len() - self.len < n {
            let held = self.len();
            // Moving Options keeps the invariant: the moved-from slots become None.
            for i in 0..held {
                self.slots[i] = self.slots[self.head + i].take();
            }
            self.head = 0;
            self.len = held;
        }
    }

    /// Free slots at the tail, as `struct rte_mbuf **` for a DPDK call that fills up to
    /// `n` of them (`None` when fewer than `n` are free). Follow with `commit_tail`.
    pub(crate) fn spare_tail(&mut self, n: usize) -> Option<*mut *mut raw::rte_mbuf> {
        self.compact_if_needed(n);
        if self.slots.len() - self.len < n {
            return None;
        }
        Some(self.slots[self.len..].as_mut_ptr().cast())
    }

    /// Number of free tail slots (after compaction).
    pub(crate) fn spare_len(&mut self) -> usize {
        self.compact_if_needed(self.slots.len());
        self.slots.len() - self.len
    }

    /// Records that a DPDK call wrote `n` mbufs into the slots from `spare_tail`.
    ///
    /// # Safety
    /// Those `n` slots must now hold valid mbufs owned by the burst.
    pub(crate) unsafe fn commit_tail(&mut self, n: usize) {
        self.len += n;
    }

    /// The held mbufs as `struct rte_mbuf **` and their count, for a TX call. Follow with
    /// `consume_head`.
    pub(crate) fn held_raw(&mut self) -> (*mut *mut raw::rte_mbuf, usize) {
        let n = self.len();
        (self.slots[self.head..self.len].as_mut_ptr().cast(), n)
    }

    /// Records that DPDK took ownership of the first `n` held mbufs.
    ///
    /// # Safety
    /// DPDK must have taken (and will free) exactly those `n` mbufs.
    pub(crate) unsafe fn consume_head(&mut self, n: usize) {
        for s in &mut self.slots[self.head..self.head + n] {
            // SAFETY: the caller guarantees DPDK took ownership of these mbufs; overwrite
            // the slot without dropping (no double free).
            unsafe { std::ptr::write(s, None) };
        }
        self.head += n;
        self.reset_if_empty();
    }
}

impl Drop for MbufBurst {
    fn drop(&mut self) {
        self.clear();
    }
}
