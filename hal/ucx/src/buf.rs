//! Owned buffers for the safe transfers ([`SendBuf`], [`RecvBuf`]): memory that keeps its
//! address when moved, so a transfer can own it while UCX reads or writes it, and park it
//! with the worker when dropped in flight.
//!
//! The traits are sealed: the transfers' soundness rests on each implementation keeping its
//! bytes at one address, untouched by anyone else, while the transfer holds it.
use std::ptr::NonNull;
use std::sync::Arc;

/// A buffer a safe send ([`Endpoint::tag_send_owned`](crate::Endpoint::tag_send_owned))
/// can own: `Vec<u8>` (its `len()` bytes), `Box<[u8]>`, `Arc<[u8]>`, `&'static [u8]`.
pub trait SendBuf: sealed::Owned {}

/// A buffer a safe receive ([`Worker::tag_recv_owned`](crate::Worker::tag_recv_owned))
/// can own and fill: `Vec<u8>` (up to its `len()`, not its capacity), `Box<[u8]>`.
pub trait RecvBuf: sealed::OwnedMut {}

impl SendBuf for Vec<u8> {}
impl SendBuf for Box<[u8]> {}
impl SendBuf for Arc<[u8]> {}
impl SendBuf for &'static [u8] {}
impl RecvBuf for Vec<u8> {}
impl RecvBuf for Box<[u8]> {}

pub(crate) mod sealed {
    use super::*;

    /// The buffer while UCX may use it: raw parts (no `Box`/`Vec` whose moves would assert
    /// uniqueness over bytes UCX is reading or writing), rebuilt into the buffer once the
    /// transfer completed. Dropping it frees the buffer.
    pub trait Held: Send + 'static {
        /// The bytes UCX uses.
        fn ptr(&self) -> *mut u8;
        /// How many.
        fn len(&self) -> usize;
    }

    /// An owned, address-stable buffer UCX may read.
    pub trait Owned: Send + Sized + 'static {
        /// Its held form.
        type H: Held;
        /// Into raw parts.
        fn into_held(self) -> Self::H;
        /// Back from raw parts.
        fn from_held(h: Self::H) -> Self;
    }

    /// An owned, address-stable buffer UCX may write; its held form gives a pointer that
    /// may be written through.
    pub trait OwnedMut: Owned {}

    /// A `Vec<u8>` as raw parts.
    pub struct RawVec {
        ptr: NonNull<u8>,
        len: usize,
        cap: usize,
    }

    // SAFETY: owns its allocation like the Vec<u8> it came from (which is Send).
    unsafe impl Send for RawVec {}

    impl Held for RawVec {
        fn ptr(&self) -> *mut u8 {
            self.ptr.as_ptr()
        }
        fn len(&self) -> usize {
            self.len
        }
    }

    impl Drop for RawVec {
        fn drop(&mut self) {
            // SAFETY: the parts of a Vec<u8> taken apart by into_held, rebuilt once.
            drop(unsafe { Vec::from_raw_parts(self.ptr.as_ptr(), self.len, self.cap) });
        }
    }

    impl Owned for Vec<u8> {
        type H = RawVec;
        fn into_held(self) -> RawVec {
            let mut v = std::mem::ManuallyDrop::new(self);
            RawVec {
                // A Vec's pointer is never null (dangling but aligned when cap is 0).
                ptr: NonNull::new(v.as_mut_ptr()).unwrap_or(NonNull::dangling()),
                len: v.len(),
                cap: v.capacity(),
            }
        }
        fn from_held(h: RawVec) -> Vec<u8> {
            let h = std::mem::ManuallyDrop::new(h);
            // SAFETY: the parts of a Vec<u8> taken apart by into_held, rebuilt once (the
            // ManuallyDrop keeps RawVec's Drop from freeing them again).
            unsafe { Vec::from_raw_parts(h.ptr.as_ptr(), h.len, h.cap) }
        }
    }
    impl OwnedMut for Vec<u8> {}

    /// A `Box<[u8]>` as a raw pointer.
    pub struct RawBox(NonNull<[u8]>);

    // SAFETY: owns its allocation like the Box<[u8]> it came from.
    unsafe impl Send for RawBox {}

    impl Held for RawBox {
        fn ptr(&self) -> *mut u8 {
            self.0.as_ptr().cast()
        }
        fn len(&self) -> usize {
            self.0.len()
        }
    }

    impl Drop for RawBox {
        fn drop(&mut self) {
            // SAFETY: from Box::into_raw in into_held, rebuilt once.
            drop(unsafe { Box::from_raw(self.0.as_ptr()) });
        }
    }

    impl Owned for Box<[u8]> {
        type H = RawBox;
        fn into_held(self) -> RawBox {
            // Box::into_raw never returns null.
            RawBox(NonNull::from(Box::leak(self)))
        }
        fn from_held(h: RawBox) -> Box<[u8]> {
            let h = std::mem::ManuallyDrop::new(h);
            // SAFETY: from Box::leak in into_held, rebuilt once (ManuallyDrop: not freed
            // again by RawBox's Drop).
            unsafe { Box::from_raw(h.0.as_ptr()) }
        }
    }
    impl OwnedMut for Box<[u8]> {}

    /// Shared immutable bytes: only read, by anyone.
    pub struct Shared<T>(T);

    impl Held for Shared<Arc<[u8]>> {
        fn ptr(&self) -> *mut u8 {
            // Never written through (Arc<[u8]> is only SendBuf, not RecvBuf).
            self.0.as_ptr().cast_mut()
        }
        fn len(&self) -> usize {
            self.0.len()
        }
    }

    impl Owned for Arc<[u8]> {
        type H = Shared<Arc<[u8]>>;
        fn into_held(self) -> Self::H {
            Shared(self)
        }
        fn from_held(h: Self::H) -> Self {
            h.0
        }
    }

    impl Held for Shared<&'static [u8]> {
        fn ptr(&self) -> *mut u8 {
            // Never written through (&[u8] is only SendBuf).
            self.0.as_ptr().cast_mut()
        }
        fn len(&self) -> usize {
            self.0.len()
        }
    }

    impl Owned for &'static [u8] {
        type H = Shared<&'static [u8]>;
        fn into_held(self) -> Self::H {
            Shared(self)
        }
        fn from_held(h: Self::H) -> Self {
            h.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::sealed::{Held, Owned};
    use super::*;

    #[test]
    fn held_parts_round_trip_without_moving_the_bytes() {
        let mut v = Vec::with_capacity(100);
        v.extend_from_slice(&[1, 2, 3]);
        let p = v.as_ptr();
        let h = v.into_held();
        assert_eq!((h.ptr().cast_const(), h.len()), (p, 3));
        let v = Vec::from_held(h);
        assert_eq!(
            (v.as_ptr(), v.capacity(), &v[..]),
            (p, 100, &[1u8, 2, 3][..])
        );

        let b: Box<[u8]> = vec![9u8; 7].into_boxed_slice();
        let p = b.as_ptr();
        let h = b.into_held();
        assert_eq!((h.ptr().cast_const(), h.len()), (p, 7));
        drop(h); // frees through RawBox::drop

        let a: Arc<[u8]> = Arc::from(&b"abc"[..]);
        let h = Arc::clone(&a).into_held();
        assert_eq!((h.ptr().cast_const(), h.len()), (a.as_ptr(), 3));
        assert!(Arc::ptr_eq(&Arc::from_held(h), &a));

        let s: &'static [u8] = b"xy";
        assert_eq!(<&[u8]>::from_held(s.into_held()), s);
        // An empty Vec has a dangling, non-null pointer.
        let e = Vec::<u8>::new().into_held();
        assert_eq!(e.len(), 0);
        drop(e);
    }
}
