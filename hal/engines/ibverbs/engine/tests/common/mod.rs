//! Set-up shared by the engine's integration tests: what the runtime would preallocate for
//! one queue (a leaked pool and counters), and whether we run in the Soft-RoCE guest.
#![allow(dead_code)] // each test executable uses its own subset

use std::sync::atomic::AtomicU32;

use rtdaq_core::traits::QueueResources;
use rtdaq_core::{BufferPool, QueueCounters};

/// True inside the Soft-RoCE guest (`scripts/vm/guest-run.sh` sets `RTDAQ_VM=1`).
pub fn in_guest() -> bool {
    std::env::var("RTDAQ_VM").is_ok_and(|v| v == "1")
}

/// Says why a guest-only test checks nothing here; true when it should return.
pub fn skip_outside_guest() -> bool {
    if in_guest() {
        return false;
    }
    eprintln!("not in the Soft-RoCE guest (RTDAQ_VM != 1): nothing checked (scripts/vm/ibverbs-tests.sh runs this test)");
    true
}

/// `v`, alive for the rest of the process (as the runtime's preallocations are).
pub fn leak<T>(v: T) -> &'static T {
    Box::leak(Box::new(v))
}

/// `count` free-list links for a pool.
pub fn links(count: usize) -> &'static mut [AtomicU32] {
    Box::leak((0..count).map(|_| AtomicU32::new(0)).collect::<Box<[_]>>())
}

/// A pool of `count` buffers of `size` bytes over leaked host memory.
pub fn host_pool(size: usize, count: usize) -> &'static BufferPool<'static> {
    let mem: &'static mut [u8] = Box::leak(vec![0u8; size * count].into_boxed_slice());
    leak(BufferPool::new(mem, links(count), size).expect("pool"))
}

/// The resources of one queue of `interface` (queue 0) over `pool`, with fresh counters.
pub fn one_queue(
    interface: usize,
    pool: &'static BufferPool<'static>,
) -> &'static [QueueResources<'static>] {
    let pools: &'static [&'static BufferPool<'static>] = Box::leak(Box::new([pool]));
    Box::leak(Box::new([QueueResources {
        interface,
        queue: 0,
        pools,
        counters: leak(QueueCounters::new()),
        wants: Default::default(),
    }]))
}

/// The resources of one header-data split queue of `interface` (queue 0): `header` is
/// `memory_regions[0]`, `data` `memory_regions[1]`, with fresh counters.
pub fn split_queue(
    interface: usize,
    header: &'static BufferPool<'static>,
    data: &'static BufferPool<'static>,
) -> &'static [QueueResources<'static>] {
    let pools: &'static [&'static BufferPool<'static>] = Box::leak(Box::new([header, data]));
    Box::leak(Box::new([QueueResources {
        interface,
        queue: 0,
        pools,
        counters: leak(QueueCounters::new()),
        wants: Default::default(),
    }]))
}
