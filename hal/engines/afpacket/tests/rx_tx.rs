//! RX and TX on a veth pair in private namespaces (root): loss-free paced transfer with the
//! rtdaq sequence header (bursts cleared on another thread), jumbo frames, the kernel's own
//! UDP frames, header-data split.

mod common;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use common::*;
use rtdaq_core::traits::{RxBurst, RxQueue, Segment};
use rtdaq_core::wire::{parse_frame, SeqHeader};
use rtdaq_core::{DropReason, FlowId, SeqTracker, SlotRing};
use rtdaq_testbed::Side;

/// Engine TX in A → engine RX in B, 20000 sequence-numbered frames at 100 kpps: every one
/// arrives intact, in order, none dropped. As in the runtime's indirect mode, the RX I/O
/// thread fills bursts in place in the slots of a `SlotRing` and a consumer thread validates
/// and clears them, so the ring blocks go back to the kernel from the consumer's thread.
#[test]
fn lossless_paced_20000_frames() {
    const N: usize = 20_000;
    let pair = pair("afp-lossless");
    pair.add_static_neighbors().unwrap();
    let txs = tx_config(&pair, Side::A, 1500, 2048, 1 << 20);
    // 64 MiB: at 100 kpps a block fills in ~9 ms, so the ring absorbs a reader stalled for
    // about half a second (a loaded CI host).
    let mut s = header_tov(1 << 20, 64, 2048, 10, "");
    s += &region("b", 2048, 256);
    s += &iface("b", pair.ifname(Side::B), 1500, "");
    s += &rxq(0, &["b"], 64, 500, "");
    let rxs = Setup::new(&s);
    let (mut rx, _) = rxs.open_in::<64>(&pair, Side::B);
    let (_, mut tx) = txs.open_in::<64>(&pair, Side::A);
    let spec = spec(&pair, Side::A, 4000, 5000, 1000);
    let mut rxq = rx.remove(0);
    let mut slots: Vec<_> = (0..16).map(|_| rxq.new_burst()).collect();
    let mut ring = SlotRing::new(&mut slots[..]).unwrap();
    let (mut producer, mut consumer) = ring.split();
    let (sent, tracker, held_max) = std::thread::scope(|sc| {
        let consumer = sc.spawn(move || {
            let mut t = SeqTracker::<16>::new();
            let (mut bad, mut total) = (0, 0);
            let end = Instant::now() + Duration::from_secs(15);
            while total < N && Instant::now() < end {
                let Some(b) = consumer.front() else {
                    std::thread::yield_now();
                    continue;
                };
                for p in 0..b.len() {
                    let Segment::Host(f) = b.segment(p, 0) else {
                        panic!()
                    };
                    assert_eq!(b.meta(p).len as usize, f.len());
                    assert!(b.meta(p).rx_timestamp_ns > 0);
                    // veth has no hardware clock: the kernel's stamp.
                    assert_eq!(b.meta(p).ts_source, rtdaq_core::TimestampSource::Kernel);
                    match check_seq_frame(f) {
                        Some((1, seq, 5000)) => {
                            t.observe(seq);
                            total += 1;
                        }
                        _ => bad += 1,
                    }
                }
                // Cleared here, on the consumer's thread: releases the ring blocks.
                b.clear();
                consumer.release().unwrap();
            }
            assert_eq!(bad, 0, "foreign or corrupt frames");
            t
        });
        let io = sc.spawn(move || {
            let end = Instant::now() + Duration::from_secs(15);
            let (mut got, mut held_max) = (0, 0);
            while got < N && Instant::now() < end {
                let Some(b) = producer.slot() else {
                    std::thread::yield_now();
                    continue;
                };
                let n = rxq.poll(b);
                got += n;
                held_max = held_max.max(rxq.held_blocks());
                if b.is_full() || (n == 0 && b.len() > 0) || got == N {
                    producer.commit().unwrap();
                }
            }
            // One more (empty) poll lets the queue give back the block it finished last.
            let mut spare = rxq.new_burst();
            rxq.poll(&mut spare);
            (rxq, held_max)
        });
        let sent = send_frames(&mut tx[0], N, Some(100_000.0), |k, buf| {
            seq_frame(buf, &spec, 1, k as u64)
        });
        let (rxq, held_max) = io.join().unwrap();
        let t = consumer.join().unwrap();
        // Every block is back with the kernel once the bursts are cleared.
        assert_eq!(rxq.held_blocks(), 0, "blocks still held: {:?}", rxq.stats());
        (sent, t, held_max)
    });
    assert_eq!(sent, N);
    let c = rxs.rx_counters(0).snapshot();
    let tc = txs.tx_counters(0).snapshot();
    assert_eq!(tc.packets, N as u64, "TX accepted");
    assert_eq!(tc.total_drops(), 0);
    assert_eq!(tracker.received(), N as u64, "RX {c:?}, TX {tc:?}");
    assert_eq!(
        (tracker.gaps(), tracker.duplicates(), tracker.reordered()),
        (0, 0, 0)
    );
    assert_eq!(c.packets, N as u64, "RX delivered: {c:?}");
    assert_eq!(c.total_drops(), 0, "{c:?}");
    assert_eq!(c.bytes, N as u64 * spec.frame_len() as u64);
    assert!(held_max >= 1);
}

/// MTU 9000: 9014-byte frames pass whole (ring and slots sized for them); a frame above the
/// MTU is refused at TX as `too_large`.
#[test]
fn jumbo_frames() {
    let pair = pair_mtu("afp-jumbo", 9000);
    pair.add_static_neighbors().unwrap();
    let txs = tx_config(&pair, Side::A, 9000, 9056, 1 << 16);
    let mut s = header(1 << 16, 64, 9056, "");
    s += &region("b", 16384, 64);
    s += &iface("b", pair.ifname(Side::B), 9000, "");
    s += &rxq(0, &["b"], 32, 1000, "");
    let rxs = Setup::new(&s);
    let (mut rx, _) = rxs.open_in::<32>(&pair, Side::B);
    let (_, mut tx) = txs.open_in::<32>(&pair, Side::A);
    assert_eq!(tx[0].max_frame(), 9014);
    assert_eq!(tx[0].slot_capacity(), 9056 - 32);
    let spec = spec(&pair, Side::A, 4000, 5000, 9000 - 28);
    assert_eq!(spec.frame_len(), 9014);
    let n = 200;
    let sent = send_frames(&mut tx[0], n, None, |k, buf| {
        seq_frame(buf, &spec, 2, k as u64)
    });
    assert_eq!(sent, n);
    let got = collect(&mut rx[0], n, Duration::from_secs(2));
    assert_eq!(got.len(), n);
    for (k, g) in got.iter().enumerate() {
        assert_eq!(g.segs.len(), 1);
        assert_eq!(g.segs[0].len(), 9014);
        assert_eq!(check_seq_frame(&g.segs[0]), Some((2, k as u64, 5000)));
    }
    // One byte over the MTU: refused before it reaches the ring.
    let big = rtdaq_core::wire::UdpFrameSpec {
        payload_len: 9000 - 28 + 1,
        ..spec
    };
    let accepted = send_frames(&mut tx[0], 3, None, |k, buf| {
        seq_frame(buf, &big, 2, k as u64)
    });
    assert_eq!(accepted, 0);
    assert_eq!(txs.tx_counters(0).drops(DropReason::TooLarge), 3);
    assert!(collect(&mut rx[0], 1, Duration::from_millis(100)).is_empty());
    assert_eq!(rxs.rx_counters(0).snapshot().total_drops(), 0);
}

/// A plain `UdpSocket` in A sends to B's address: the RX queue sees the kernel-built frames
/// (after the kernel's own ARP exchange).
#[test]
fn kernel_udp_frames() {
    let pair = pair("afp-kudp");
    let mut s = header(1 << 16, 64, 2048, "");
    s += &region("b", 2048, 64);
    s += &iface("b", pair.ifname(Side::B), 1500, "");
    s += &rxq(0, &["b"], 16, 1000, "");
    let rxs = Setup::new(&s);
    let (mut rx, _) = rxs.open_in::<16>(&pair, Side::B);
    let sock = pair
        .in_ns(Side::A, || UdpSocket::bind((pair.ip(Side::A), 0)))
        .unwrap();
    let dst = (pair.ip(Side::B), 6100);
    let n = 50;
    for k in 0..n {
        let payload = vec![k as u8; 10 + 20 * k];
        sock.send_to(&payload, dst).unwrap();
    }
    let got = collect(&mut rx[0], n + 1, Duration::from_millis(500));
    let udp: Vec<_> = got
        .iter()
        .filter_map(|g| {
            let f = g.frame();
            let info = parse_frame(&f).ok()?;
            let u = info.udp?;
            Some((info, u, info.udp_payload(&f)?.to_vec(), g.meta))
        })
        .collect();
    assert_eq!(udp.len(), n, "UDP frames among {} received", got.len());
    let local = sock.local_addr().unwrap().port();
    for (k, (info, u, payload, meta)) in udp.iter().enumerate() {
        assert_eq!(info.src_mac, pair.mac(Side::A));
        assert_eq!(info.dst_mac, pair.mac(Side::B));
        let ip = info.ipv4.unwrap();
        assert_eq!(
            (ip.src, ip.dst),
            (pair.ip(Side::A).octets(), pair.ip(Side::B).octets())
        );
        assert_eq!((u.src_port, u.dst_port), (local, 6100));
        assert_eq!(payload, &vec![k as u8; 10 + 20 * k]);
        assert_eq!(meta.flow, FlowId::NONE);
        assert_eq!(meta.len as usize, 14 + 28 + payload.len());
    }
    // Before the first datagram the kernel asked for B's MAC (ARP): not UDP, still delivered.
    assert!(
        got.iter().any(|g| g.frame()[12..14] == [0x08, 0x06]),
        "no ARP seen"
    );
    assert_eq!(rxs.rx_counters(0).snapshot().total_drops(), 0);
}

/// Header-data split: the first 42 bytes (Ethernet + IPv4 + UDP) in the header pool, the rest
/// (the UDP payload) in the data pool; both pools are whole again after the bursts are
/// cleared; an empty pool counts `pool_empty`.
#[test]
fn header_data_split() {
    let pair = pair("afp-hds");
    pair.add_static_neighbors().unwrap();
    let txs = tx_config(&pair, Side::A, 1500, 2048, 1 << 20);
    let mut s = header(1 << 18, 64, 2048, "");
    s += &region("hdr", 64, 256);
    s += &region("data", 2048, 256);
    s += &iface("b", pair.ifname(Side::B), 1500, "");
    s += &rxq(0, &["hdr", "data"], 32, 1000, "hds_split = 42");
    let rxs = Setup::new(&s);
    let (mut rx, _) = rxs.open_in::<32>(&pair, Side::B);
    let (_, mut tx) = txs.open_in::<32>(&pair, Side::A);
    let n = 300;
    let spec = spec(&pair, Side::A, 4000, 5000, 200);
    assert_eq!(
        send_frames(&mut tx[0], n, None, |k, buf| seq_frame(
            buf, &spec, 3, k as u64
        )),
        n
    );
    let got = collect(&mut rx[0], n, Duration::from_secs(2));
    assert_eq!(got.len(), n);
    for (k, g) in got.iter().enumerate() {
        assert_eq!(g.segs.len(), 2);
        assert_eq!(g.segs[0].len(), 42);
        assert_eq!(g.segs[1].len(), 200);
        assert_eq!(g.meta.len, 242);
        let h = SeqHeader::parse(&g.segs[1]).unwrap();
        assert_eq!((h.stream_id, h.seq), (3, k as u64));
        assert_eq!(check_seq_frame(&g.frame()), Some((3, k as u64, 5000)));
        assert_eq!(&g.segs[0][..6], &pair.mac(Side::B));
    }
    let pools = rxs.rx_pools(0);
    assert_eq!((pools[0].in_use(), pools[1].in_use()), (0, 0));
    // No data buffer left: frames are counted, not delivered.
    let held: Vec<_> = std::iter::from_fn(|| pools[1].get()).collect();
    assert_eq!(
        send_frames(&mut tx[0], 10, None, |k, buf| seq_frame(
            buf, &spec, 3, k as u64
        )),
        10
    );
    assert!(collect(&mut rx[0], 1, Duration::from_millis(300)).is_empty());
    assert_eq!(rxs.rx_counters(0).drops(DropReason::PoolEmpty), 10);
    drop(held);
    assert_eq!(
        pools[0].in_use(),
        0,
        "header buffers returned on the pool-empty path"
    );
    // The ring blocks went back without any burst holding them (copies).
    let mut burst = rx[0].new_burst();
    rx[0].poll(&mut burst);
    assert_eq!(RxBurst::len(&burst), 0);
}

/// A ring too small for what arrives while nobody polls: the kernel drops, and every frame
/// is either delivered or counted as a `kernel` drop (`PACKET_STATISTICS`); the frames after
/// the drops carry `TP_STATUS_LOSING`.
#[test]
fn ring_overflow_is_counted_as_kernel_drops() {
    let pair = pair("afp-overflow");
    pair.add_static_neighbors().unwrap();
    let txs = tx_config(&pair, Side::A, 1500, 2048, 1 << 20);
    let mut s = header(1 << 14, 4, 2048, "");
    s += &region("b", 2048, 256);
    s += &iface("b", pair.ifname(Side::B), 1500, "");
    s += &rxq(0, &["b"], 64, 500, "");
    let rxs = Setup::new(&s);
    let (mut rx, _) = rxs.open_in::<64>(&pair, Side::B);
    let (_, mut tx) = txs.open_in::<64>(&pair, Side::A);
    let n = 2000;
    let spec = spec(&pair, Side::A, 4000, 5000, 1000);
    assert_eq!(
        send_frames(&mut tx[0], n, None, |k, buf| seq_frame(
            buf, &spec, 4, k as u64
        )),
        n
    );
    // Take what the ring held (a full burst: no wait, so no statistics read yet), send a few
    // more: they arrive flagged "losing" (drops not yet read), then drain.
    let mut burst = rx[0].new_burst();
    let mut got = rx[0].poll(&mut burst);
    assert!(got > 0);
    RxBurst::clear(&mut burst);
    assert_eq!(
        send_frames(&mut tx[0], 10, None, |k, buf| seq_frame(
            buf, &spec, 5, k as u64
        )),
        10
    );
    // Let them reach the ring (and their block retire) before a poll that waits in vain reads
    // the statistics, which clears the kernel's "losing" state.
    std::thread::sleep(Duration::from_millis(100));
    got += collect(&mut rx[0], n, Duration::from_millis(300)).len();
    let c = rxs.rx_counters(0).snapshot();
    let kernel = c.drop_count(DropReason::Kernel);
    assert!(kernel > 0, "{c:?}");
    assert!(got < n, "{got}");
    assert_eq!(got as u64, c.packets);
    assert_eq!(c.packets + kernel, n as u64 + 10, "{c:?}");
    assert_eq!(c.total_drops(), kernel);
    let st = rx[0].stats();
    assert!(st.freezes > 0 && st.losing > 0, "{st:?}");
}
