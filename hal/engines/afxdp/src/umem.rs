//! One UMEM: the runtime's pool memory registered with the kernel for the AF_XDP sockets
//! bound to one NIC queue, with its fill and completion rings.
//!
//! The UMEM is the pool's memory itself (`BufferPool::base_addr`, `slot_count × slot_size`
//! bytes, one UMEM frame per pool slot): frames are never copied between the pool and the
//! kernel. A frame is either in the pool, in a burst (a `Buf`), or lent to the kernel
//! (fill ring, RX ring, TX ring, completion ring, or inside the kernel), recorded in the
//! [`Lent`] ledger.
//!
//! Several sockets on one NIC queue share one UMEM (and its fill and completion rings):
//! every RX queue of an interface steered by the XDP program, and a TX queue on a NIC queue
//! that also has RX sockets. The fill ring is refilled by whichever RX thread gets its lock
//! first (`try_lock`: a thread never waits for it); the completion ring is drained by the
//! one TX queue of the NIC queue.
//!
//! When the last queue of the UMEM is dropped (all its sockets closed, so the kernel no
//! longer touches the frames), every frame still lent goes back to the pool.

use std::sync::Mutex;

use rtdaq_core::BufferPool;

use crate::sys::{ConsRing, Lent, ProdRing};

/// The fill ring and how full it is kept.
#[derive(Debug)]
pub(crate) struct Fill {
    /// The ring.
    pub(crate) ring: ProdRing<u64>,
    /// Most frames to keep in it (the RX queues' share of the pool).
    pub(crate) target: u32,
}

/// One registered UMEM (see the module docs).
#[derive(Debug)]
pub(crate) struct Umem<'a> {
    /// Frames lent to the kernel.
    pub(crate) lent: Lent<'a>,
    /// The fill ring (RX queues refill it).
    pub(crate) fill: Mutex<Fill>,
    /// The completion ring (the TX queue drains it).
    pub(crate) comp: Mutex<ConsRing<u64>>,
    /// Whether the kernel runs the sockets in zero-copy mode.
    pub(crate) zero_copy: bool,
    /// Whether the sockets were bound with `XDP_USE_NEED_WAKEUP`.
    pub(crate) need_wakeup: bool,
    /// The NIC queue the sockets are bound to.
    pub(crate) nic_queue: u32,
}

impl<'a> Umem<'a> {
    /// The pool whose memory this UMEM is.
    #[inline]
    pub(crate) fn pool(&self) -> &'a BufferPool<'a> {
        self.lent.pool()
    }

    /// Lends free pool frames to the kernel until the fill ring holds its target (or the
    /// pool is empty). Returns false when another thread holds the ring (it refills).
    /// Never blocks, never allocates.
    #[inline]
    pub(crate) fn refill(&self) -> bool {
        let Ok(mut f) = self.fill.try_lock() else {
            return false;
        };
        let out = f.ring.outstanding();
        if out >= f.target {
            return true;
        }
        let want = f.target - out;
        let want = want.min(f.ring.free(want));
        let pool = self.pool();
        let mut n = 0;
        while n < want {
            let Some(buf) = pool.get() else { break };
            let addr = self.lent.lend(buf);
            if !f.ring.write(n, addr) {
                // Unreachable (`want` is bounded by the free room); give the frame back.
                drop(self.lent.reclaim(addr, 0));
                break;
            }
            n += 1;
        }
        if n > 0 {
            f.ring.submit(n);
        }
        true
    }

    /// True when the kernel asks for a wake-up to consume the fill ring (only with
    /// `need_wakeup`; zero-copy drivers set it).
    #[inline]
    pub(crate) fn fill_needs_wakeup(&self) -> bool {
        self.need_wakeup && self.fill.try_lock().is_ok_and(|f| f.ring.needs_wakeup())
    }

    /// Returns completed TX frames to the pool; returns (frames, addresses refused by the
    /// ledger). Never blocks, never allocates.
    #[inline]
    pub(crate) fn complete(&self) -> (u32, u32) {
        let Ok(mut c) = self.comp.try_lock() else {
            return (0, 0);
        };
        let size = c.size();
        let n = c.available(size);
        let mut bad = 0;
        for i in 0..n {
            match c.read(i).and_then(|addr| self.lent.reclaim(addr, 0)) {
                Some(buf) => drop(buf),
                None => bad += 1,
            }
        }
        if n > 0 {
            c.release(n);
        }
        (n, bad)
    }
}

impl Drop for Umem<'_> {
    fn drop(&mut self) {
        // Every socket of this UMEM is closed (each queue drops its socket before its
        // `Arc<Umem>`), so the kernel no longer reads or writes the frames.
        self.lent.reclaim_all();
    }
}
