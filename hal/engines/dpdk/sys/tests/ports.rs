//! Real DPDK on virtual devices (no hugepages, no NIC): `net_null0` (drops TX, generates RX)
//! and `net_ring0` (a ring-backed port whose TX comes back on its RX).
//!
//! Run (as root): `cargo test -p rtdaq-dpdk-sys --test ports`.
mod common;

use rtdaq_core::wire::{emit_udp_frame, parse_frame, UdpFrameSpec};
use rtdaq_dpdk_sys::{
    DpdkError, Eal, MbufBurst, Mempool, MempoolConfig, Port, PortConfig, TimestampField,
};

fn pool(name: &str) -> std::sync::Arc<Mempool> {
    let cfg = MempoolConfig {
        n: 4095,
        cache_size: 0,
        ..MempoolConfig::default()
    };
    Mempool::new(common::eal(), name, &cfg).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn eal_is_shared_and_reports_lcores_and_ports() {
    let eal = common::eal();
    assert!(std::ptr::eq(eal, Eal::init(common::ARGS).unwrap()));
    assert!(std::ptr::eq(eal, Eal::get().unwrap()));
    assert_eq!(eal.lcore_count(), 1);
    assert_eq!(eal.main_lcore(), 0);
    assert!(eal.port_count() >= 2, "ports: {:?}", eal.port_names());
    let names: Vec<String> = eal.port_names().into_iter().map(|(_, n)| n).collect();
    assert!(names.iter().any(|n| n == "net_null0"), "{names:?}");
    assert!(names.iter().any(|n| n == "net_ring0"), "{names:?}");
    assert!(!rtdaq_dpdk_sys::PMD_DIR.is_empty());
    assert!(rtdaq_dpdk_sys::DPDK_VERSION.starts_with("2"));
}

#[test]
fn eal_refuses_other_args() {
    let _ = common::eal();
    let e = Eal::init(["-l", "0", "--vdev", "net_null1"]).unwrap_err();
    assert!(matches!(e, DpdkError::EalAlreadyInitialized { .. }), "{e}");
    assert!(e.to_string().contains("once per process"), "{e}");
}

#[test]
fn net_null_tx_rx_and_stats() {
    let eal = common::eal();
    let pool = pool("null_pool");
    let cfg = PortConfig {
        rx_desc: 512,
        tx_desc: 512,
        ..PortConfig::default()
    };
    let (port, mut rx, mut tx) = Port::open(eal, "net_null0", &cfg, &pool).unwrap();
    assert_eq!(rx.len(), 1);
    assert_eq!(tx.len(), 1);
    let info = port.info().unwrap();
    assert_eq!(info.driver, "net_null");
    let _mac = port.mac().unwrap();
    port.reset_stats().unwrap();

    // A second open of the same port is refused while this one lives.
    let e = Port::open(eal, "net_null0", &cfg, &pool).unwrap_err();
    assert!(matches!(e, DpdkError::PortInUse { .. }), "{e}");

    // TX: 10 bursts of 32 mbufs, all accepted and freed by the PMD.
    let free_before = pool.available();
    let mut burst = MbufBurst::with_capacity(32);
    let mut sent = 0;
    for _ in 0..10 {
        assert!(pool.alloc_bulk(&mut burst, 32));
        for m in burst.iter_mut() {
            m.write(&[0xAB; 64]).unwrap();
        }
        let n = tx[0].tx_from(&mut burst);
        assert_eq!(n, 32, "net_null accepts every packet");
        assert!(burst.is_empty());
        sent += n;
    }
    assert_eq!(
        pool.available(),
        free_before,
        "the PMD freed every sent mbuf"
    );

    // TX through the slice API.
    let mut slots: [Option<rtdaq_dpdk_sys::Mbuf>; 4] = Default::default();
    for s in &mut slots {
        let mut m = pool.try_alloc().unwrap();
        m.set_len(100).unwrap();
        *s = Some(m);
    }
    assert_eq!(tx[0].tx_burst(&mut slots), 4);
    assert!(slots.iter().all(Option::is_none));
    sent += 4;

    // RX: net_null generates packets from the pool; they are freed on clear/drop.
    let mut received = 0;
    for _ in 0..10 {
        let n = rx[0].rx_into(&mut burst);
        assert!(n > 0, "net_null always has packets");
        assert_eq!(burst.len(), n);
        for m in burst.iter() {
            assert_eq!(m.port(), port.id());
            assert_eq!(m.segments(), 1);
            assert_eq!(m.data().len(), m.len());
            assert!(!m.is_empty());
        }
        received += n;
        assert!(pool.in_use() >= n as u32);
        burst.clear();
    }
    // Slice RX: mbufs are owned by the slots and freed when dropped.
    let mut slots: Vec<Option<rtdaq_dpdk_sys::Mbuf>> = (0..16).map(|_| None).collect();
    let n = rx[0].rx_burst(&mut slots);
    assert!(n > 0);
    received += n;
    assert!(slots[..n].iter().all(Option::is_some));
    // With the lengths read in the same call: they are the mbufs' own, at most min(slots,
    // lens, segs) mbufs come, and the mbufs left in the slots are freed first.
    let (mut lens, mut segs) = ([0u32; 16], [0u16; 8]);
    let n = rx[0].rx_burst_lens(&mut slots, &mut lens, &mut segs);
    assert_eq!(n, 8, "bounded by segs");
    for k in 0..n {
        let m = slots[k].as_ref().unwrap();
        assert_eq!((lens[k] as usize, segs[k]), (m.pkt_len(), m.segments()));
        assert!(lens[k] > 0);
    }
    received += n;
    // Appending moves them all into a burst in one go, or nothing: a None among them, or
    // too little room, is refused.
    let mut b = MbufBurst::with_capacity(6);
    assert!(!b.append(&mut slots[..n + 1]), "slot n is None");
    assert!(slots[..n].iter().all(Option::is_some), "nothing moved");
    assert!(b.append(&mut slots[..4]));
    assert!(slots[..4].iter().all(Option::is_none) && b.len() == 4);
    assert!(!b.append(&mut slots[4..n]), "4 + 4 do not fit in 6");
    assert!(slots[4..n].iter().all(Option::is_some) && b.len() == 4);
    drop((slots, b));
    {
        // A burst dropped with mbufs inside frees them.
        let mut b = MbufBurst::with_capacity(8);
        received += rx[0].rx_into(&mut b);
        assert!(!b.is_empty());
    }
    assert_eq!(
        pool.in_use(),
        0,
        "every received mbuf went back to the pool"
    );

    let st = port.stats().unwrap();
    assert_eq!(st.opackets, sent as u64, "{st:?}");
    assert_eq!(st.ipackets, received as u64, "{st:?}");
    assert_eq!(st.oerrors, 0);
    drop((port, rx, tx)); // stop + close
}

#[test]
fn net_ring_loops_udp_frames_back_intact() {
    let eal = common::eal();
    let pool = pool("ring_pool");
    // Launch times asked for: net_ring has no such offload, so the port opens without it
    // and has no clock to read.
    let cfg = PortConfig {
        rx_desc: 256,
        tx_desc: 256,
        tx_timestamps: true,
        ..PortConfig::default()
    };
    let (port, mut rx, mut tx) = Port::open(eal, "net_ring0", &cfg, &pool).unwrap();
    assert_eq!(port.info().unwrap().driver, "net_ring");
    assert!(!port.info().unwrap().send_on_timestamp());
    let (mut rxq, mut txq) = (rx.remove(0), tx.remove(0));
    match txq.read_clock() {
        Err(DpdkError::Port { op, errno, .. }) => {
            assert_eq!((op, errno), ("rte_eth_read_clock", 95), "ENOTSUP");
        }
        other => panic!("net_ring has no clock: {other:?}"),
    }
    // The tx-timestamp field registers; each frame carries its launch time, and the ring
    // hands the same mbufs back, field and flag included.
    let ts = TimestampField::register().unwrap();
    assert_eq!(TimestampField::register().unwrap(), ts, "registered once");
    // The receive-stamp field is another; net_ring stamps nothing, nor has it a clock.
    let rx_ts = TimestampField::register_rx().unwrap();
    assert_ne!(rx_ts, ts);
    assert!(!port.info().unwrap().rx_timestamp());
    assert!(rxq.read_clock().is_err());

    // Build 64 UDP frames with rtdaq-core's emitter, each with its own payload.
    const N: usize = 64;
    let mut expected: Vec<Vec<u8>> = Vec::new();
    let mut burst = MbufBurst::with_capacity(N);
    assert!(pool.alloc_bulk(&mut burst, N));
    for (i, m) in burst.iter_mut().enumerate() {
        let spec = UdpFrameSpec {
            src_ip: [10, 0, 0, 1],
            dst_ip: [10, 0, 0, 2],
            src_port: 5000,
            dst_port: 6000 + i as u16,
            ident: i as u16,
            payload_len: 100 + i,
            ..UdpFrameSpec::default()
        };
        let mut frame = vec![0u8; spec.frame_len()];
        for (j, b) in frame[spec.payload_offset()..].iter_mut().enumerate() {
            *b = (i * 7 + j) as u8;
        }
        let len = emit_udp_frame(&mut frame, &spec).unwrap();
        assert_eq!(len, frame.len());
        m.write(&frame).unwrap();
        assert_eq!(ts.get(m), None, "a fresh mbuf has no launch time");
        ts.set(m, 1_000_000_007 * (i as u64 + 1));
        expected.push(frame);
    }
    assert_eq!(txq.tx_from(&mut burst), N, "the ring accepts all {N}");
    assert!(burst.is_empty());

    // Ring PMD semantics: the TX ring of queue 0 is the RX ring of queue 0.
    let mut got = 0;
    let mut tries = 0;
    while got < N && tries < 100 {
        let n = rxq.rx_into(&mut burst);
        for m in burst.iter() {
            assert_eq!(m.data(), &expected[got][..], "frame {got} came back intact");
            assert_eq!(ts.get(m), Some(1_000_000_007 * (got as u64 + 1)));
            assert_eq!(rx_ts.get(m), None, "no receive stamp");
            let info = parse_frame(m.data()).unwrap();
            assert_eq!(info.udp.unwrap().dst_port, 6000 + got as u16);
            got += 1;
        }
        burst.clear();
        tries += 1 + usize::from(n == 0);
    }
    assert_eq!(got, N);
    assert_eq!(rxq.rx_into(&mut burst), 0, "nothing extra");
    assert_eq!(pool.in_use(), 0);
    let st = port.stats().unwrap();
    assert_eq!((st.opackets, st.ipackets), (N as u64, N as u64), "{st:?}");
}

#[test]
fn unknown_port_name_is_a_clear_error() {
    let eal = common::eal();
    let pool = pool("unknown_pool");
    let e = Port::open(eal, "net_nosuch7", &PortConfig::default(), &pool).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, DpdkError::PortNotFound { .. }), "{msg}");
    assert!(
        msg.contains("net_nosuch7") && msg.contains("--vdev"),
        "{msg}"
    );
    assert!(msg.contains("net_null0"), "lists the ports present: {msg}");
    assert!(matches!(
        Port::id_by_name(eal, "").unwrap_err(),
        DpdkError::PortNotFound { .. }
    ));
}

#[test]
fn mempool_errors_and_mbuf_bounds() {
    let eal = common::eal();
    let p = pool("dup_pool");
    let e = Mempool::new(eal, "dup_pool", &MempoolConfig::default()).unwrap_err();
    assert!(e.to_string().contains("EEXIST"), "{e}");
    let e = Mempool::new(
        eal,
        "a_name_that_is_far_too_long_for_dpdk",
        &MempoolConfig::default(),
    )
    .unwrap_err();
    assert!(matches!(e, DpdkError::InvalidArgument { .. }), "{e}");

    let mut m = p.alloc().unwrap();
    assert_eq!(m.len(), 0);
    assert_eq!(m.room(), 2048);
    m.set_len(2048).unwrap();
    let e = m.set_len(2049).unwrap_err();
    assert!(
        matches!(
            e,
            DpdkError::MbufTooSmall {
                len: 2049,
                room: 2048
            }
        ),
        "{e}"
    );
    assert_eq!(m.len(), 2048, "unchanged after a refused set_len");
    assert_eq!(p.in_use(), 1);
    drop(m);
    assert_eq!(p.in_use(), 0);

    // Burst bookkeeping: push/pop/compaction keep ownership exact.
    let mut b = MbufBurst::with_capacity(4);
    assert!(p.alloc_bulk(&mut b, 4));
    assert!(!p.alloc_bulk(&mut b, 1), "full burst");
    let first = b.pop_front().unwrap();
    assert!(b.push(first).is_ok(), "compacts to make room");
    assert_eq!(b.len(), 4);
    assert_eq!(p.in_use(), 4);
    drop(b);
    assert_eq!(p.in_use(), 0);
}
