//! Mbuf pool layouts vs the AF_XDP UMEM that DPDK 22.11's `net_af_xdp` builds over a pool
//! (`Mempool::umem_fit`), and the page-tiled pools (`Mempool::with_flags`) the DPDK engine
//! gives that PMD. No AF_XDP socket here: the layout alone decides whether every mbuf can be
//! posted to the fill ring (the end-to-end check is `app/tests/dpdk.rs`).
//! Runs as root, no hugepages (`--no-huge`: 4 KiB pages).

mod common;

use rtdaq_dpdk_sys::{page_size, DpdkError, Mempool, MempoolConfig, MempoolFlags};

fn config(n: u32, data_room: u16) -> MempoolConfig {
    MempoolConfig {
        n,
        cache_size: 256,
        data_room,
        socket: None,
    }
}

#[test]
fn default_pool_spreads_beyond_the_umem_net_af_xdp_assumes() {
    let eal = common::eal();
    assert_eq!(page_size(), 4096, "these numbers assume 4 KiB pages");
    // What the engine used to give net_af_xdp (rte_pktmbuf_pool_create, 2048 B + headroom):
    // 2368 B objects, one per 4 KiB page under --no-huge (no object crosses a page).
    let data_room = MempoolConfig::DEFAULT_DATA_ROOM;
    assert_eq!(Mempool::object_size(data_room, MempoolFlags::NONE), 2368);
    let pool = Mempool::new(eal, "umem_default", &config(8192, data_room)).unwrap();
    let fit = pool.umem_fit();
    eprintln!("default pool: {fit:?}");
    assert_eq!(fit.objects, 8192);
    assert_eq!(fit.obj_size, 2368);
    assert!(!fit.fits());
    // the PMD's UMEM is 8192 × 2368 B: it ends inside the 4737th page, so only the first
    // ~4736 mbufs lie inside it — the frame count after which the port stopped receiving
    assert!(
        (4730..=4737).contains(&fit.first_outside),
        "first mbuf outside the UMEM: {}",
        fit.first_outside
    );
    assert_eq!(fit.outside, fit.objects - fit.first_outside);
    // a page per object: the last one starts at least 8191 pages after the first
    assert!(
        fit.span >= 8191 * 4096 + 2368,
        "one page per object: {}",
        fit.span
    );
}

#[test]
fn tiled_pools_lie_inside_the_umem() {
    let eal = common::eal();
    for (name, data_room, obj) in [("umem_4k", 3904u16, 4096u64), ("umem_2k", 1856, 2048)] {
        assert_eq!(
            u64::from(Mempool::object_size(data_room, MempoolFlags::NO_SPREAD)),
            obj
        );
        let pool = Mempool::with_flags(
            eal,
            name,
            &config(8192, data_room),
            MempoolFlags::NO_SPREAD,
            true,
        )
        .unwrap();
        let fit = pool.umem_fit();
        eprintln!("{name}: {fit:?}");
        assert!(fit.fits(), "{fit:?}");
        assert_eq!(fit.objects, 8192);
        assert_eq!(fit.chunks, 1);
        assert_eq!(fit.obj_size, obj);
        assert_eq!(fit.umem_len, 8192 * obj, "page-aligned start: no offset");
        assert_eq!(fit.span, fit.umem_len, "no gap anywhere");
        assert_eq!(fit.first_outside, 8192);
        // an ordinary mbuf pool otherwise
        assert_eq!(pool.size(), 8192);
        assert_eq!(pool.available(), 8192);
        let mut m = pool.alloc().unwrap();
        assert_eq!(pool.in_use(), 1);
        let room = usize::from(data_room) - 128;
        m.write(&vec![0xa5; room]).unwrap();
        assert!(m.write(&vec![0; room + 1]).is_err());
        drop(m);
        assert_eq!(pool.in_use(), 0);
    }
}

#[test]
fn tiling_objects_that_do_not_divide_the_page_is_refused() {
    let eal = common::eal();
    // 2368 B objects do not tile a 4 KiB page
    let err = Mempool::with_flags(
        eal,
        "umem_bad",
        &config(1024, MempoolConfig::DEFAULT_DATA_ROOM),
        MempoolFlags::NO_SPREAD,
        true,
    )
    .unwrap_err();
    match &err {
        DpdkError::Mempool { errno, .. } => assert_eq!(*errno, 22, "{err}"),
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("divide the page size"), "{err}");
    // the name is free again (the empty pool was freed)
    let ok = Mempool::with_flags(
        eal,
        "umem_bad",
        &config(1024, 3904),
        MempoolFlags::NO_SPREAD,
        true,
    );
    assert!(ok.is_ok(), "{:?}", ok.err());
}
