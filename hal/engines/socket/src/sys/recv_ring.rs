//! [`RecvRing`]: the UDP receive queue's `recvmmsg` descriptors, kept posted between calls like
//! a NIC's RX ring, so each call costs work per datagram *received*, not per buffer offered.
//!
//! Entry `i` is one `mmsghdr` with its own `iovec`, sender-address slot and control buffer,
//! and (while posted) the pool [`Buf`] whose slot the `iovec` points to. The ring owns those
//! `Buf`s, so the slot memory an `iovec` points to is exclusively ours for as long as the
//! pointer exists (the pool's memory outlives `'a`). Between calls entries `0..len` are
//! posted. A call hands the kernel entries `0..want`; it fills them from entry 0, so after
//! `n` datagrams the caller [`take`](RecvRing::take)s entries `0..n` and the next
//! [`refill`](RecvRing::refill) puts fresh buffers into exactly those entries (or, when the
//! pool runs short, moves buffers from the end of the ring into them). Headers, `iovec`s and
//! control buffers of the other entries are not touched again: their pointers stay valid.
//!
//! All four arrays live in heap blocks the ring allocates once and reaches only through raw
//! pointers taken at construction (so no later `&mut` borrow of an array invalidates the
//! pointers the headers hold), and frees in `Drop`.

use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsFd;
use std::ptr;

use rtdaq_core::{Buf, BufferPool};

use super::ffi;
use super::mmsg::{parse_msg, zeroed_msghdr, Control, RecvMsg, EMPTY_IOV, RX_CONTROL};
use super::socket::Socket;

/// One heap array reached through a raw pointer (allocated by `Box<[T]>`, freed in `Drop`).
struct RawArray<T> {
    ptr: *mut T,
    len: usize,
}

impl<T: Copy> RawArray<T> {
    fn new(v: Vec<T>) -> Self {
        let len = v.len();
        RawArray {
            ptr: Box::into_raw(v.into_boxed_slice()).cast::<T>(),
            len,
        }
    }

    /// Pointer to element `i` (`i < len`).
    #[inline]
    fn at(&self, i: usize) -> *mut T {
        debug_assert!(i < self.len);
        self.ptr.wrapping_add(i)
    }
}

impl<T> Drop for RawArray<T> {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` came from `Box::into_raw` of a boxed slice of exactly `len`
        // elements in `new`, and are turned back into that box once, here.
        drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(self.ptr, self.len)) });
    }
}

/// Posted `recvmmsg` entries for up to `capacity` datagrams, each with its pool buffer.
pub(crate) struct RecvRing<'a> {
    /// Where the buffers come from.
    pool: &'a BufferPool<'a>,
    hdrs: RawArray<libc::mmsghdr>,
    iovs: RawArray<libc::iovec>,
    names: RawArray<libc::sockaddr_in>,
    control: RawArray<Control<RX_CONTROL>>,
    /// The buffer each entry's `iovec` points to (`None`: not posted, or taken).
    bufs: Box<[Option<Buf<'a>>]>,
    /// Entries `0..len` are posted (except the taken ones below `received`).
    len: usize,
    /// Entries the kernel filled in the last call: `0..received` may have been taken and
    /// need a buffer, and their in/out header fields need resetting.
    received: usize,
    /// Entries below `received` taken since the last call.
    taken: usize,
    want_names: bool,
    want_control: bool,
}

// SAFETY: the raw pointers point only into the ring's own heap arrays (which move with it and
// are never shared) and into the slots of the `Buf`s it owns; `Buf` itself is `Send`.
unsafe impl Send for RecvRing<'_> {}

impl<'a> RecvRing<'a> {
    /// A ring of `capacity` (≥ 1) entries for buffers of `pool`, none posted yet. Without
    /// `names` the kernel copies no sender address ([`RecvMsg::src`] reads 0.0.0.0:0);
    /// without `control` it builds no control messages. Cold path (allocates).
    pub(crate) fn new(
        pool: &'a BufferPool<'a>,
        capacity: usize,
        names: bool,
        control: bool,
    ) -> Self {
        let cap = capacity.max(1);
        let unspecified = ffi::to_sockaddr(&SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
        let hdrs = RawArray::new(vec![
            libc::mmsghdr {
                msg_hdr: zeroed_msghdr(),
                msg_len: 0,
            };
            cap
        ]);
        let iovs = RawArray::new(vec![EMPTY_IOV; cap]);
        let names_a = RawArray::new(vec![unspecified; cap]);
        let control_a = RawArray::new(vec![Control([0; RX_CONTROL]); cap]);
        let mut ring = RecvRing {
            pool,
            hdrs,
            iovs,
            names: names_a,
            control: control_a,
            bufs: (0..cap).map(|_| None).collect(),
            len: 0,
            received: 0,
            taken: 0,
            want_names: names,
            want_control: control,
        };
        for i in 0..cap {
            // SAFETY: `i < cap`: header `i` is a valid, exclusively owned element; the
            // pointers stored into it point to elements `i` of the ring's own arrays.
            unsafe {
                let h = &mut (*ring.hdrs.at(i)).msg_hdr;
                h.msg_iov = ring.iovs.at(i);
                h.msg_iovlen = 1;
                if names {
                    h.msg_name = ring.names.at(i).cast();
                }
                if control {
                    h.msg_control = ring.control.at(i).cast();
                }
            }
            ring.reset_header(i);
        }
        ring
    }

    /// Entries in the ring.
    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.bufs.len()
    }

    /// Buffers posted for the next call (after [`refill`](Self::refill); until then it
    /// also counts the entries the last call filled).
    #[inline]
    pub(crate) fn posted(&self) -> usize {
        self.len
    }

    /// Restores header `i`'s in/out fields the kernel overwrites (`msg_namelen`,
    /// `msg_controllen`).
    #[inline]
    fn reset_header(&mut self, i: usize) {
        // SAFETY: `i < capacity`; the ring owns the header and nothing else references it.
        let h = unsafe { &mut (*self.hdrs.at(i)).msg_hdr };
        if self.want_names {
            h.msg_namelen = size_of::<libc::sockaddr_in>() as _;
        }
        if self.want_control {
            h.msg_controllen = RX_CONTROL as _;
        }
    }

    /// Posts every entry again after a call: buffers from the pool go into the entries the
    /// last call filled (and were taken), then after the posted ones. When the pool runs
    /// short, buffers from the end of the ring fill the gaps, so `0..posted()` stays
    /// contiguous. Returns `posted()`. [`recv`](Self::recv) calls it first; costs work per
    /// entry the last call filled, nothing when the ring is full. Never allocates (at most
    /// one pool compare-exchange).
    #[inline]
    pub(crate) fn refill(&mut self) -> usize {
        let (pool, target) = (self.pool, self.capacity());
        let received = std::mem::take(&mut self.received);
        let taken = std::mem::take(&mut self.taken);
        if self.want_names || self.want_control {
            for i in 0..received {
                self.reset_header(i);
            }
        }
        // Entries the last call filled (a discard call posted none): usually all taken, so
        // the holes are exactly `0..limit`; otherwise find them.
        let limit = received.min(self.len);
        let all_taken = taken == limit;
        let holes = if all_taken {
            limit
        } else {
            (0..limit).filter(|&i| self.bufs[i].is_none()).count()
        };
        let need = holes + target.saturating_sub(self.len);
        if need == 0 {
            return self.len;
        }
        // Buffers go into the holes first (in order), then after the posted entries.
        let (len, mut next_hole, mut appended) = (self.len, 0, 0);
        let (bufs, iovs) = (&mut self.bufs, &self.iovs);
        let got = pool.get_bulk(need, |mut buf| {
            if !all_taken {
                while next_hole < limit && bufs[next_hole].is_some() {
                    next_hole += 1;
                }
            }
            let i = if next_hole < limit {
                next_hole += 1;
                next_hole - 1
            } else {
                appended += 1;
                len + appended - 1
            };
            let slot = buf.slot_mut().unwrap_or_default();
            // SAFETY: `i < capacity` (holes are below `len`, appends below `target`); the ring
            // owns the iovec. The slot pointer stays valid while `buf` sits in `bufs[i]` (the
            // slot is exclusively ours and the pool memory lives for 'a); `take` removes the
            // buffer only after the call that used the iovec, and the entry is re-pointed
            // before it is handed to the kernel again.
            unsafe {
                *iovs.at(i) = libc::iovec {
                    iov_base: slot.as_mut_ptr().cast(),
                    iov_len: slot.len(),
                };
            }
            bufs[i] = Some(buf);
        });
        self.len += appended;
        if got >= holes {
            return self.len;
        }
        // Holes the pool could not fill: move buffers from the end into them.
        let mut h = next_hole;
        while h < self.len {
            if self.bufs[h].is_some() {
                h += 1;
                continue;
            }
            let last = self.len - 1;
            self.len = last;
            if last == h {
                break;
            }
            if let Some(buf) = self.bufs[last].take() {
                // SAFETY: both indices < capacity; the iovec moves with its buffer.
                unsafe { *self.iovs.at(h) = *self.iovs.at(last) };
                self.bufs[h] = Some(buf);
                h += 1;
            }
        }
        self.len
    }

    /// Refills, then receives up to `want` datagrams into the posted buffers `0..want` (at
    /// most `posted()`); returns how many arrived. Take them with [`take`](Self::take) and
    /// read what the kernel reported with [`msg`](Self::msg). Never allocates.
    #[inline]
    pub(crate) fn recv(&mut self, sock: &Socket, want: usize, flags: i32) -> io::Result<usize> {
        let n = want.min(self.refill());
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: headers 0..n point to their own iovec, name and control elements (valid
        // for writes of the lengths set in `new`/`reset_header`); iovec i points to the slot
        // of `bufs[i]`, a buffer the ring owns (see `refill`). Nothing else touches them
        // during the call.
        let r = unsafe { ffi::recvmmsg(sock.as_fd(), self.hdrs.at(0), n, flags) };
        if let Ok(k) = r {
            self.received = k.min(n);
        }
        r.map(|k| k.min(n))
    }

    /// Drains up to `n` datagrams into `scratch` (every iovec of entries `0..n` points to
    /// it): only when nothing is posted (`posted() == 0`, the pool was empty). The next
    /// `refill` re-points the iovecs. Never allocates.
    pub(crate) fn recv_discard(
        &mut self,
        sock: &Socket,
        scratch: &mut [u8],
        n: usize,
        flags: i32,
    ) -> io::Result<usize> {
        let n = n.min(self.capacity());
        if n == 0 || self.len != 0 {
            return Ok(0);
        }
        let base = scratch.as_mut_ptr();
        for i in 0..n {
            // SAFETY: `i < capacity`; no buffer is posted, so no iovec is in use.
            unsafe {
                *self.iovs.at(i) = libc::iovec {
                    iov_base: base.cast(),
                    iov_len: scratch.len(),
                };
            }
        }
        // SAFETY: as in `recv`; the iovecs alias `scratch` (borrowed exclusively for this
        // call), which the kernel writes one datagram after the other and nobody reads
        // meanwhile.
        let r = unsafe { ffi::recvmmsg(sock.as_fd(), self.hdrs.at(0), n, flags) };
        // Every header 0..n needs its fields reset and its iovec re-pointed before reuse.
        self.received = n;
        r.map(|k| k.min(n))
    }

    /// What the kernel reported for datagram `i` of the last call (`i` below its return
    /// value). Never allocates.
    #[inline]
    pub(crate) fn msg(&self, i: usize) -> RecvMsg {
        // SAFETY: `i < capacity` (callers pass indices below the last call's count); the
        // kernel's writes ended with the call, and nothing writes the elements meanwhile.
        unsafe {
            parse_msg(
                &*self.hdrs.at(i),
                &*self.names.at(i),
                self.want_names,
                self.want_control,
            )
        }
    }

    /// Takes the buffer of entry `i` (filled by the last call: `i` below its count) out of
    /// the ring; `None` for other entries or when already taken.
    #[inline]
    pub(crate) fn take(&mut self, i: usize) -> Option<Buf<'a>> {
        if i >= self.received {
            return None;
        }
        let b = self.bufs.get_mut(i)?.take()?;
        self.taken += 1;
        Some(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::AtomicU32;
    use std::net::UdpSocket;

    fn pair() -> (Socket, UdpSocket) {
        let rx = Socket::udp().unwrap();
        rx.bind(&SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        (rx, tx)
    }

    #[test]
    fn receives_into_posted_buffers_and_refills_only_what_was_taken() {
        let mut mem = vec![0u8; 16 * 256];
        let mut links: Vec<AtomicU32> = (0..16).map(|_| AtomicU32::new(0)).collect();
        let pool = BufferPool::new(&mut mem, &mut links, 256).unwrap();
        let (rx, tx) = pair();
        let mut ring = RecvRing::new(&pool, 8, true, false);
        assert_eq!(ring.refill(), 8);
        assert_eq!(pool.available(), 8);
        for k in 0..3u8 {
            tx.send(&[k; 10]).unwrap();
        }
        let n = ring.recv(&rx, 8, libc::MSG_DONTWAIT).unwrap();
        assert_eq!(n, 3);
        let src = SocketAddrV4::new(Ipv4Addr::LOCALHOST, tx.local_addr().unwrap().port());
        for i in 0..n {
            let m = ring.msg(i);
            assert_eq!((m.len, m.src, m.truncated), (10, src, false));
            let mut b = ring.take(i).unwrap();
            b.set_len(m.len);
            assert_eq!(b.as_slice().unwrap(), &[i as u8; 10]);
        }
        assert_eq!(ring.take(0).map(|b| b.index()), None, "taken once");
        // The taken buffers went back to the pool; refill posts three again, into the same
        // entries (so the untouched entries 3..8 keep theirs).
        assert_eq!(pool.available(), 11);
        let kept = ring.bufs[3].as_ref().map(|b| b.index());
        assert_eq!(ring.refill(), 8);
        assert_eq!(
            (pool.available(), ring.bufs[3].as_ref().map(|b| b.index())),
            (8, kept)
        );
        tx.send(&[7; 5]).unwrap();
        assert_eq!(ring.recv(&rx, 8, libc::MSG_DONTWAIT).unwrap(), 1);
        let mut b = ring.take(0).unwrap();
        b.set_len(ring.msg(0).len);
        assert_eq!(b.as_slice().unwrap(), &[7; 5]);
        drop(b);
        drop(ring); // gives the posted buffers back
        assert_eq!(pool.available(), 16);
    }

    #[test]
    fn a_short_pool_compacts_and_an_empty_one_drains_into_scratch() {
        let mut mem = vec![0u8; 4 * 128];
        let mut links: Vec<AtomicU32> = (0..4).map(|_| AtomicU32::new(0)).collect();
        let pool = BufferPool::new(&mut mem, &mut links, 128).unwrap();
        let (rx, tx) = pair();
        let mut ring = RecvRing::new(&pool, 4, false, false);
        assert_eq!(ring.refill(), 4);
        for k in 0..2u8 {
            tx.send(&[k; 3]).unwrap();
        }
        assert_eq!(ring.recv(&rx, 4, libc::MSG_DONTWAIT).unwrap(), 2);
        assert_eq!(ring.msg(0).src, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
        let held: Vec<_> = (0..2).map(|i| ring.take(i).unwrap()).collect();
        // The pool is empty: entries 2 and 3 move into the holes 0 and 1.
        assert_eq!(ring.refill(), 2);
        for k in 2..4u8 {
            tx.send(&[k; 3]).unwrap();
        }
        assert_eq!(ring.recv(&rx, 4, libc::MSG_DONTWAIT).unwrap(), 2);
        let more: Vec<_> = (0..2).map(|i| ring.take(i).unwrap()).collect();
        for (k, mut b) in more.into_iter().enumerate() {
            b.set_len(3);
            assert_eq!(b.as_slice().unwrap(), &[k as u8 + 2; 3]);
            let _ = b.into_raw(); // keep the pool empty
        }
        assert_eq!((ring.refill(), pool.available()), (0, 0));
        // Nothing posted: the socket is drained into the scratch buffer.
        tx.send(&[9; 7]).unwrap();
        let mut scratch = [0u8; 64];
        assert_eq!(ring.recv(&rx, 4, libc::MSG_DONTWAIT).unwrap(), 0);
        assert_eq!(
            ring.recv_discard(&rx, &mut scratch, 4, libc::MSG_DONTWAIT)
                .unwrap(),
            1
        );
        assert_eq!((ring.msg(0).len, &scratch[..7]), (7, &[9u8; 7][..]));
        // Buffers back: the next refill re-points the iovecs into pool slots.
        drop(held);
        assert_eq!(ring.refill(), 2);
        tx.send(&[5; 4]).unwrap();
        assert_eq!(ring.recv(&rx, 4, libc::MSG_DONTWAIT).unwrap(), 1);
        let mut b = ring.take(0).unwrap();
        b.set_len(4);
        assert_eq!(b.as_slice().unwrap(), &[5; 4]);
    }
}
