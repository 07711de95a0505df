//! External memory (as root): `ExtMem::register` / `ExtMem::from_pool`, `dma_map` on a
//! virtual device, mbuf pools whose data buffers live in that memory, teardown.

mod common;

use std::sync::atomic::AtomicU32;

use common::eal;
use rtdaq_core::BufferPool;
use rtdaq_dpdk_sys::{DmaMapping, DpdkError, ExtMem, MbufBurst, Mempool, MempoolConfig, Port};

/// `len` zeroed bytes aligned to 4 KiB, leaked ('static, never freed).
fn leaked_pages(len: usize) -> &'static mut [u8] {
    let layout = std::alloc::Layout::from_size_align(len, 4096).unwrap();
    // SAFETY: non-zero size; the allocation is never freed, so 'static holds.
    unsafe {
        let p = std::alloc::alloc_zeroed(layout);
        assert!(!p.is_null());
        std::slice::from_raw_parts_mut(p, len)
    }
}

#[test]
fn pool_memory_becomes_mbuf_data_and_comes_back() {
    let eal = eal();
    let mem = leaked_pages(1000 * 2304);
    let links: &'static mut [AtomicU32] = Box::leak((0..1000).map(|_| AtomicU32::new(0)).collect());
    let pool: &'static BufferPool<'static> =
        Box::leak(Box::new(BufferPool::new(mem, links, 2304).unwrap()));
    let range = pool.base_addr()..pool.base_addr() + 1000 * 2304;

    let ext = ExtMem::from_pool(eal, pool, 4096).unwrap();
    assert_eq!(pool.available(), 0, "every slot leased to DPDK");
    assert_eq!(ext.len() % 4096, 0);
    assert!(ext.iova_known(), "--no-huge: IOVA as VA");
    let id = Port::id_by_name(eal, "net_null0").unwrap();
    let m = ext.dma_map(id).unwrap();
    assert!(
        matches!(m, DmaMapping::Mapped | DmaMapping::NotNeeded),
        "{m:?}"
    );
    assert_eq!(
        ext.dma_map(id).unwrap(),
        if m == DmaMapping::Mapped {
            DmaMapping::AlreadyMapped
        } else {
            DmaMapping::NotNeeded
        }
    );

    // A second registration of the same memory is refused (EEXIST).
    // SAFETY: the range is leaked memory of this test; the call must fail anyway.
    let e =
        unsafe { ExtMem::register(eal, pool.base_addr() as *mut u8, ext.len(), 4096) }.unwrap_err();
    assert!(matches!(e, DpdkError::ExtMem { errno: 17, .. }), "{e}");

    let cfg = MempoolConfig {
        n: 0,
        cache_size: 0,
        data_room: 2048 + 128,
        socket: None,
    };
    let mp = Mempool::new_external(eal, "ext_test", &cfg, &ext).unwrap();
    assert_eq!(
        mp.size(),
        (1000 * 2304 / 2176) as u32,
        "as many 2176 B buffers as fit"
    );
    let mut b = MbufBurst::with_capacity(64);
    assert!(mp.alloc_bulk(&mut b, 64));
    for m in b.iter_mut() {
        m.write(&[7u8; 1500]).unwrap();
        let a = m.data().as_ptr() as u64;
        assert!(range.contains(&a), "{a:#x} not in {range:x?}");
    }
    b.clear();
    // Too many buffers asked of the memory: ENOMEM with the fix.
    let e = Mempool::new_external(
        eal,
        "ext_test2",
        &MempoolConfig {
            n: 5000,
            ..cfg.clone()
        },
        &ext,
    )
    .unwrap_err();
    assert!(e.to_string().contains("enlarge the region"), "{e}");

    drop(ext);
    assert_eq!(
        pool.available(),
        0,
        "the mempool still holds the registration"
    );
    drop(mp);
    assert_eq!(
        pool.available(),
        1000,
        "pool freed, memory unregistered, slots back"
    );
}

#[test]
fn misaligned_or_busy_memory_is_refused() {
    let eal = eal();
    let mem = leaked_pages(16 * 4096);
    // SAFETY: leaked memory; the call must fail on the alignment check before DPDK sees it.
    let e = unsafe { ExtMem::register(eal, mem.as_mut_ptr().add(64), 4096, 4096) }.unwrap_err();
    assert!(matches!(e, DpdkError::InvalidArgument { .. }), "{e}");
    let links: &'static mut [AtomicU32] = Box::leak((0..16).map(|_| AtomicU32::new(0)).collect());
    let pool: &'static BufferPool<'static> =
        Box::leak(Box::new(BufferPool::new(mem, links, 4096).unwrap()));
    let held = pool.get().unwrap();
    let e = ExtMem::from_pool(eal, pool, 4096).unwrap_err();
    assert!(e.to_string().contains("in use"), "{e}");
    drop(held);
    assert_eq!(pool.available(), 16);
}
