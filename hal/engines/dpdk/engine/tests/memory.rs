//! Mbuf pools over the runtime's memory regions, per-queue pools, RSS, header-data split
//! refusal and port stats (as root). One EAL for the binary; each test owns its port(s).

mod common;

use std::time::Duration;

use common::*;
use rtdaq_core::traits::{EngineStats, RxBurst, RxQueue, Segment};

const EAL: &[&str] = &[
    "--no-huge",
    "-m",
    "512",
    "--no-shconf",
    "--no-pci",
    "--vdev",
    "net_ring0",
    "--vdev",
    "net_ring1",
    "--vdev",
    "net_null0",
    "--vdev",
    "net_null1",
    "--log-level=lib.eal:notice",
];

/// `[base, base + footprint)` of region `r` of `s`.
fn region_range(s: &Setup, r: usize) -> std::ops::Range<u64> {
    let base = s.pools[r].base_addr();
    base..base + s.config.memory_regions[r].footprint()
}

#[test]
fn mbuf_data_lives_in_the_region_and_dpdk_owns_the_whole_pool_until_closed() {
    require_root();
    let s = Setup::new(&config_toml(EAL, "net_ring0", 1, 1, true, 0));
    let slots = s.pools[0].slot_count();
    let engine = s.open().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        s.pools[0].available(),
        0,
        "DPDK took every slot of the region's BufferPool: the runtime cannot hand them out twice"
    );
    let stats = engine.stats_handle();
    let (mut rxq, mut txq) = engine.into_queues();
    let (rx, tx) = (&mut rxq[0], &mut txq[0]);
    // 2047 × 2048 B region: (2048 + 128) B buffers → 1926 mbufs.
    assert_eq!(rx.mempool().size(), 1926);
    assert_eq!(
        rx.mempool().external().map(|e| e.addr() as u64),
        Some(s.pools[0].base_addr())
    );

    let frames: Vec<Vec<u8>> = (0..64).map(|k| seq_frame(&spec(5000, 300), k)).collect();
    assert_eq!(send_all(tx, &frames), 64);
    let mut burst = rx.new_burst();
    let range = region_range(&s, 0);
    let mut got = 0;
    let end = std::time::Instant::now() + Duration::from_secs(2);
    while got < 64 && std::time::Instant::now() < end {
        rx.poll(&mut burst);
        for i in 0..RxBurst::len(&burst) {
            let Segment::Host(b) = burst.segment(i, 0) else {
                panic!("host segment")
            };
            let a = b.as_ptr() as u64;
            assert!(
                range.contains(&a),
                "frame data at {a:#x} outside the region {range:x?}"
            );
            assert_eq!(b, &frames[got][..]);
            got += 1;
        }
        burst.clear();
    }
    assert_eq!(got, 64);

    let ps = stats.port_stats();
    assert_eq!(ps.len(), 1);
    let p = &ps[0];
    assert_eq!(
        (p.interface, p.port.as_str(), p.driver.as_str()),
        (0, "net_ring0", "net_ring")
    );
    assert_eq!((p.ipackets, p.opackets), (64, 64));
    assert!(p.link.is_some_and(|l| l.up), "{p:?}");
    assert!(p.mac.is_some());
    assert!(
        p.xstats
            .iter()
            .any(|(n, v)| n == "rx_good_packets" && *v == 64),
        "non-zero xstats by name: {:?}",
        p.xstats
    );
    assert!(p.xstats.iter().all(|(_, v)| *v != 0));

    // Queues, bursts and the stats handle gone: the port closes, the mempool is freed, the
    // memory unregistered, and every slot is back in the runtime's pool.
    drop(burst);
    drop((rxq, txq, stats));
    assert_eq!(s.pools[0].available(), slots);
}

#[test]
fn rx_queues_fill_from_their_own_regions_and_rss_spreads_over_them() {
    require_root();
    // Two RX queues on two regions ("pkts", "pkts_b") on net_null (which has RSS and a
    // RETA), one flow with rss = [1, 0] (the RETA order follows the flow).
    let toml = config_toml(EAL, "net_null0", 2, 0, false, 0)
        .replacen(
            "[[interfaces]]",
            "[[memory_regions]]\nname = \"pkts_b\"\nkind = \"host\"\nbuf_size = 2048\nbuf_count = 2047\n\n[[interfaces]]",
            1,
        )
        .replacen(
            "id = 1\ncpu_core = 1\nbatch_size = 64\ntimeout_us = 0\nring_depth = 1024\nmemory_regions = [\"pkts\"]",
            "id = 1\ncpu_core = 1\nbatch_size = 64\ntimeout_us = 0\nring_depth = 1024\nmemory_regions = [\"pkts_b\"]",
            1,
        )
        + "\n[[flows]]\ninterface = \"port0\"\nid = 8\nrss = [1, 0]\n[flows.match]\nudp_dst = 6000\n";
    let s = Setup::new(&toml);
    assert_eq!(
        s.config.interfaces[0].rx_queues[1].memory_regions[0].0, 1,
        "{toml}"
    );
    let engine = s.open().unwrap_or_else(|e| panic!("{e}"));
    let port = engine.port(0).unwrap().clone();
    let rss = port
        .rss()
        .expect("RSS configured on net_null with 2 RX queues");
    assert_ne!(rss.hash_fields, 0);
    assert!(rss.reta_size >= 2);
    let reta = port.reta(rss.reta_size).unwrap();
    assert_eq!(
        &reta[..4],
        &[1, 0, 1, 0],
        "RETA cycles over the rss flow's queues"
    );
    assert!(reta.iter().all(|&q| q <= 1));
    let (mut rxq, _) = engine.into_queues();
    for (j, q) in rxq.iter_mut().enumerate() {
        // net_null returns 64-byte mbufs from the queue's own pool on every poll (dropped as
        // malformed by the classifier): their data must be in the queue's region.
        let range = region_range(&s, j);
        let m = q.mempool();
        let base = m.external().unwrap().addr() as u64;
        assert!(range.contains(&base), "queue {j}'s pool is over region {j}");
        let mut b = q.new_burst();
        q.poll(&mut b);
        assert!(
            s.rx[j].counters.snapshot().total_drops() > 0,
            "queue {j} received"
        );
    }
}

#[test]
fn several_rx_queues_on_a_pmd_without_rss_name_the_rx_queues_key() {
    require_root();
    let s = Setup::new(&config_toml(EAL, "net_ring1", 2, 0, false, 0));
    let e = s.open().unwrap_err();
    assert_eq!(e.key(), "interfaces[0].rx_queues", "{e}");
    let m = e.to_string();
    assert!(
        m.contains("net_ring") && m.contains("offers no RSS") && m.contains("list one RX queue"),
        "{m}"
    );
    assert_eq!(
        s.pools[0].available(),
        s.pools[0].slot_count(),
        "pool given back"
    );
}

#[test]
fn header_data_split_without_buffer_split_names_hds_split() {
    require_root();
    let toml = config_toml(EAL, "net_ring1", 1, 0, true, 0)
        .replacen(
            "[[interfaces]]",
            "[[memory_regions]]\nname = \"hdr\"\nkind = \"host\"\nbuf_size = 128\nbuf_count = 8192\n\n[[interfaces]]",
            1,
        )
        .replacen(
            "memory_regions = [\"pkts\"]\nbusy_poll",
            "memory_regions = [\"hdr\", \"pkts\"]\nhds_split = 64\nbusy_poll",
            1,
        );
    let s = Setup::new(&toml);
    let e = s.open().unwrap_err();
    assert_eq!(e.key(), "interfaces[0].rx_queues[0].hds_split", "{e}");
    let m = e.to_string();
    assert!(
        m.contains("RTE_ETH_RX_OFFLOAD_BUFFER_SPLIT")
            && m.contains("net_ring")
            && m.contains("remove hds_split"),
        "{m}"
    );
}

#[test]
fn a_region_smaller_than_the_rx_descriptors_names_buf_count() {
    require_root();
    let toml = config_toml(EAL, "net_ring1", 1, 0, true, 0).replacen(
        "buf_count = 2047",
        "buf_count = 512",
        1,
    );
    let s = Setup::new(&toml);
    let e = s.open().unwrap_err();
    assert_eq!(e.key(), "memory_regions[0].buf_count", "{e}");
    assert!(e.to_string().contains("raise buf_count"), "{e}");
    // The mempool and the registration were undone: the runtime's pool is whole again.
    assert_eq!(s.pools[0].available(), s.pools[0].slot_count());
}

/// GPUDirect receive (issue #19) without a GPU: a `device` region's pool over memory the CPU
/// cannot touch (`PROT_NONE`). net_null hands out 64-byte frames from the mbuf pool over it
/// without writing them (no `copy` devarg), as a NIC DMAs into GPU memory without the CPU:
/// the engine registers it without IOVA, builds the mempool, receives and frees, and the
/// burst hands every frame up as `Segment::Device` inside the region. Had anything in the
/// engine or DPDK read or written a buffer, the test would have died of SIGSEGV.
#[test]
fn a_device_region_is_received_into_untouched_and_handed_up_as_device_segments() {
    require_root();
    let toml = config_toml(EAL, "net_null1", 1, 0, false, 0)
        .replacen(
            "kind = \"host\"\nbuf_size = 2048\nbuf_count = 2047",
            "kind = \"device\"\ngpu = 0\nbuf_size = 2048\nbuf_count = 2047",
            1,
        )
        .replacen("default_action = \"drop\"", "default_action = 0", 1);
    // Whole frames in GPU memory: no flows (the CPU cannot read the headers).
    let toml = toml[..toml.find("[[flows]]").unwrap()].to_owned()
        + "\n[run]\nduration_s = 1\nvalidate = \"count\"\n\n[rt]\nrequired = false\n";
    let s = Setup::with_pools(&toml, untouchable_pool);
    assert!(!s.pools[0].is_cpu_accessible());
    let engine = s.open().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.pools[0].available(), 0, "DPDK owns the whole pool");
    let (mut rxq, _) = engine.into_queues();
    let rx = &mut rxq[0];
    assert!(rx.in_gpu().head && !rx.in_gpu().data);
    let ext = rx.mempool().external().expect("external memory");
    assert!(ext.is_device() && !ext.iova_known());
    assert_eq!(ext.page_size(), rtdaq_dpdk_sys::GPU_PAGE);
    let range = region_range(&s, 0);
    // A burst made without the queue's flags is set right by the poll.
    let mut burst = rtdaq_engine_dpdk::DpdkRxBurst::with_capacity(rtdaq_core::QueueId(0), 64);
    let mut seen = 0u64;
    for _ in 0..20 {
        rx.poll(&mut burst);
        for i in 0..RxBurst::len(&burst) {
            assert_eq!(burst.segments(i), 1);
            let Segment::Device { ptr, len } = burst.segment(i, 0) else {
                panic!("frame {i} handed up as CPU memory")
            };
            assert!(range.contains(&ptr), "{ptr:#x} outside {range:x?}");
            assert_eq!((len, burst.meta(i).len), (64, 64));
            // The safe byte accessors know the pool is GPU memory: no slice over it.
            let m = burst.mbuf(i).unwrap();
            assert!(m.segment_in_gpu(0) && m.data().is_empty());
            assert_eq!(m.segment_data(0), Some(&[][..]));
            seen += 1;
        }
        burst.clear();
    }
    assert!(seen >= 20 * 64, "net_null fills every burst: {seen}");
    let c = s.rx[0].counters.snapshot();
    assert_eq!(c.total_drops(), 0, "{c:?}");
    assert_eq!(c.packets, seen);
    drop(burst);
    drop(rxq);
    assert_eq!(
        s.pools[0].available(),
        s.pools[0].slot_count(),
        "closed: every slot back in the runtime's pool"
    );
}
