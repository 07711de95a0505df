//! Loom models of the real SPSC [`Ring`] and [`BufferPool`] code (under `cfg(loom)` their
//! atomics are loom's, and every ring slot access is reported to a loom `UnsafeCell` shadow, so
//! loom checks every interleaving and weak-memory outcome for data races and wrong orderings).
//!
//! Run (release, it explores many executions):
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p rtdaq-core --test ring_loom --release
//! ```
//! A separate target dir (`--target-dir target/loom`) avoids rebuilding everything else.
//!
//! Loom has no scoped threads, so each model leaks its (tiny) storage to get `'static` halves,
//! except `ring_drop_leftovers`, which reclaims the ring to check its `Drop`.
#![cfg(loom)]

use std::mem::MaybeUninit;

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use rtdaq_core::pool::{Buf, BufferPool};
use rtdaq_core::ring::Ring;

fn leak_storage<T>(cap: usize) -> &'static mut [MaybeUninit<T>] {
    Box::leak(
        (0..cap)
            .map(|_| MaybeUninit::uninit())
            .collect::<Box<[_]>>(),
    )
}

fn leak_ring<T>(cap: usize) -> &'static mut Ring<'static, T> {
    Box::leak(Box::new(Ring::new(leak_storage(cap)).unwrap()))
}

/// Capacity 2, three items: the producer must wait for the consumer once (wrap + full).
#[test]
fn ring_single_items() {
    loom::model(|| {
        let (mut tx, mut rx) = leak_ring::<u32>(2).split();
        let h = thread::spawn(move || {
            for i in 0..3 {
                while tx.push(i).is_err() {
                    thread::yield_now();
                }
            }
        });
        let mut want = 0;
        while want < 3 {
            match rx.pop() {
                Some(v) => {
                    assert_eq!(v, want);
                    want += 1;
                }
                None => thread::yield_now(),
            }
        }
        h.join().unwrap();
        assert_eq!(rx.pop(), None);
    });
}

/// Bulk operations (one index publish each) on both sides, capacity 2, three items.
#[test]
fn ring_bulk() {
    loom::model(|| {
        let (mut tx, mut rx) = leak_ring::<u32>(2).split();
        let h = thread::spawn(move || {
            let mut it = 0..3u32;
            while !it.is_empty() {
                if tx.push_bulk(&mut it) == 0 {
                    thread::yield_now();
                }
            }
        });
        let mut got: heapless::Vec<u32, 4> = heapless::Vec::new();
        while got.len() < 3 {
            let mut out: heapless::Vec<u32, 2> = heapless::Vec::new();
            if rx.pop_bulk(&mut out) == 0 {
                thread::yield_now();
            }
            got.extend(out);
        }
        h.join().unwrap();
        assert_eq!(&got[..], &[0, 1, 2]);
    });
}

/// `push_slice` (two memcpys across the wrap) against single pops.
#[test]
fn ring_slice_copy() {
    loom::model(|| {
        let (mut tx, mut rx) = leak_ring::<u64>(2).split();
        let h = thread::spawn(move || {
            let items = [10u64, 11, 12];
            let mut done = 0;
            while done < items.len() {
                let n = tx.push_slice(&items[done..]);
                if n == 0 {
                    thread::yield_now();
                }
                done += n;
            }
        });
        for want in 10..13u64 {
            loop {
                if let Some(v) = rx.pop() {
                    assert_eq!(v, want);
                    break;
                }
                thread::yield_now();
            }
        }
        h.join().unwrap();
    });
}

/// An item that counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Items still in the ring when it is dropped are dropped exactly once, and the drop sees the
/// producer's writes (via the join).
#[test]
fn ring_drop_leftovers() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let ring: *mut Ring<'static, Counted> =
            Box::into_raw(Box::new(Ring::new(leak_storage::<Counted>(2)).unwrap()));
        // SAFETY: `ring` is a live, uniquely owned box; the halves are the only users until
        // both are gone (joined / dropped below), after which we reclaim it once.
        let (mut tx, mut rx) = unsafe { &mut *ring }.split();
        let d = drops.clone();
        let h = thread::spawn(move || {
            let mut pushed = 0;
            for _ in 0..3 {
                if tx.push(Counted(d.clone())).is_ok() {
                    pushed += 1;
                }
            }
            pushed
        });
        let popped = usize::from(rx.pop().is_some());
        let pushed = h.join().unwrap();
        assert!(pushed >= 2);
        // 3 created: rejected ones and popped ones are already dropped.
        assert_eq!(drops.load(Ordering::Relaxed), 3 - pushed + popped);
        // SAFETY: both halves are gone (the producer moved into the joined thread).
        drop(unsafe { Box::from_raw(ring) });
        assert_eq!(drops.load(Ordering::Relaxed), 3);
    });
}

/// A pool and one loom cell per slot on the heap, handed out as `&'static` (loom threads need
/// it) and freed by [`PoolFixture::free`] once every thread is joined, so a model with many
/// executions does not leak.
struct PoolFixture {
    pool: *mut BufferPool<'static>,
    mem: *mut [u8],
    links: *mut [AtomicU32],
    cells: *mut [UnsafeCell<u32>],
}

impl PoolFixture {
    fn new(slots: usize, slot_size: usize) -> Self {
        let mem = Box::into_raw(vec![0u8; slots * slot_size].into_boxed_slice());
        let links = Box::into_raw((0..slots).map(|_| AtomicU32::new(0)).collect::<Box<[_]>>());
        let cells = Box::into_raw((0..slots).map(|_| UnsafeCell::new(0)).collect::<Box<[_]>>());
        // SAFETY: `mem` and `links` are fresh, uniquely owned boxes that live until `free`,
        // which runs after every user of the pool is gone.
        let pool = BufferPool::new(unsafe { &mut *mem }, unsafe { &mut *links }, slot_size);
        let pool = Box::into_raw(Box::new(pool.unwrap()));
        PoolFixture {
            pool,
            mem,
            links,
            cells,
        }
    }

    fn pool(&self) -> &'static BufferPool<'static> {
        // SAFETY: valid until `free`; callers join every thread before calling it.
        unsafe { &*self.pool }
    }

    fn cells(&self) -> &'static [UnsafeCell<u32>] {
        // SAFETY: as in `pool`.
        unsafe { &*self.cells }
    }

    /// # Safety
    /// No reference from `pool()` / `cells()` (and no `Buf`) may be used afterwards.
    unsafe fn free(self) {
        // SAFETY: each pointer came from `Box::into_raw` and is freed once, pool first (it
        // borrows `mem` and `links`).
        unsafe {
            drop(Box::from_raw(self.pool));
            drop(Box::from_raw(self.links));
            drop(Box::from_raw(self.mem));
            drop(Box::from_raw(self.cells));
        }
    }
}

/// A `Buf` that marks its slot "owned" in a loom cell while it lives: a second owner (same
/// thread) fails the assertion, a second owner on another thread or a hand-over without
/// happens-before is a loom race report.
struct Owned {
    buf: Buf<'static>,
    cells: &'static [UnsafeCell<u32>],
}

impl Owned {
    fn get(pool: &'static BufferPool<'static>, cells: &'static [UnsafeCell<u32>]) -> Option<Self> {
        let buf = pool.get()?;
        cells[buf.index() as usize].with_mut(|p| {
            // SAFETY: loom checks this access is exclusive and ordered.
            let owned = unsafe { &mut *p };
            assert_eq!(*owned, 0, "slot {} has two owners", buf.index());
            *owned = 1;
        });
        Some(Owned { buf, cells })
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        // Runs before `buf` is dropped (returned to the pool).
        self.cells[self.buf.index() as usize].with_mut(|p| {
            // SAFETY: loom checks this access is exclusive and ordered.
            unsafe { *p = 0 }
        });
    }
}

/// Two threads get and drop buffers concurrently. The other thread takes both slots and
/// returns one while this one may be inside `get` (the ABA pattern the tag defeats).
#[test]
fn pool_get_put_two_threads() {
    loom::model(|| {
        let fx = PoolFixture::new(2, 8);
        let (pool, cells) = (fx.pool(), fx.cells());
        let h = thread::spawn(move || {
            let b1 = Owned::get(pool, cells);
            let b2 = Owned::get(pool, cells);
            drop(b1);
            let b3 = Owned::get(pool, cells);
            drop((b2, b3));
        });
        let mine = Owned::get(pool, cells);
        drop(mine);
        h.join().unwrap();
        assert_eq!(pool.available(), 2);
        // SAFETY: the thread is joined and every `Buf` dropped.
        unsafe { fx.free() };
    });
}

/// A buffer got on one thread is dropped on another while the first gets again (the I/O
/// thread / consumer thread pattern); slot bytes written by the first owner are ordered
/// before the next owner's.
#[test]
fn pool_cross_thread_drop() {
    loom::model(|| {
        let fx = PoolFixture::new(2, 8);
        let (pool, cells) = (fx.pool(), fx.cells());
        let mut b = Owned::get(pool, cells).unwrap();
        b.buf.slot_mut().unwrap()[0] = 7;
        let h = thread::spawn(move || drop(b));
        for _ in 0..2 {
            if let Some(mut b2) = Owned::get(pool, cells) {
                b2.buf.slot_mut().unwrap()[0] = 1;
            }
        }
        h.join().unwrap();
        assert_eq!(pool.available(), 2);
        assert_eq!(pool.in_use(), 0);
        // SAFETY: the thread is joined and every `Buf` dropped.
        unsafe { fx.free() };
    });
}

/// Bulk take and chained return race with single get/put on another thread: no slot gets two
/// owners, every slot comes back, and the ABA tag guards the multi-slot pop.
#[test]
fn pool_bulk_get_and_return_race() {
    loom::model(|| {
        let fx = PoolFixture::new(3, 8);
        let (pool, cells) = (fx.pool(), fx.cells());
        let h = thread::spawn(move || {
            let a = Owned::get(pool, cells);
            let b = Owned::get(pool, cells);
            drop(a);
            drop(b);
        });
        let mut taken = Vec::new();
        pool.get_bulk(2, |buf| {
            cells[buf.index() as usize].with_mut(|p| {
                // SAFETY: loom checks this access is exclusive and ordered.
                let owned = unsafe { &mut *p };
                assert_eq!(*owned, 0, "slot {} has two owners", buf.index());
                *owned = 1;
            });
            taken.push(buf);
        });
        let mut ret = rtdaq_core::pool::ReturnBatch::new();
        for buf in taken {
            cells[buf.index() as usize].with_mut(|p| {
                // SAFETY: as above.
                unsafe { *p = 0 }
            });
            ret.push(buf);
        }
        drop(ret);
        h.join().unwrap();
        assert_eq!(pool.available(), 3);
        // SAFETY: the thread is joined and every `Buf` dropped.
        unsafe { fx.free() };
    });
}
