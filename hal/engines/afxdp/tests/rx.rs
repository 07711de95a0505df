//! AF_XDP RX on a veth pair: frames sent from namespace A (AF_PACKET) arrive at the engine's
//! RX queue in namespace B, every one accounted for (sequence header checked with
//! `SeqTracker`), intact, with metadata and counters; the pool gets every frame back.

mod common;

use std::time::Duration;

use common::*;
use rtdaq_core::traits::{RxBurst, RxQueue};
use rtdaq_core::wire::{check_pattern, parse_frame, SeqHeader};
use rtdaq_core::{FlowId, QueueId, SeqTracker};
use rtdaq_engine_afxdp::{Steering, XdpMode};
use rtdaq_testbed::{Side, VethPair};

fn config(ifname: &str, frame: usize, batch: u32, timeout_us: u32) -> String {
    let mut s = header(&format!("frame_size = {frame}"));
    s += &region("rx", frame, 2048);
    s += &interface("b", ifname, "");
    s += &rxq(0, "rx", batch, timeout_us);
    s
}

#[test]
fn rx_is_lossless_at_a_paced_rate_and_every_frame_is_intact() {
    require_root();
    let pair = VethPair::new("xrx").unwrap();
    let setup = Setup::new(&config(pair.ifname(Side::B), 2048, 64, 1000));
    let engine = setup.open_in::<64>(&pair, Side::B).unwrap();
    let info = engine.interfaces()[0].clone();
    assert_eq!(info.steering, Steering::NicQueue);
    assert!(!info.zero_copy, "veth has no zero-copy AF_XDP");
    let (mut rx, _) = engine.into_queues();
    assert_eq!(rx[0].nic_queue(), 0);
    assert!(rx[0].xdp_mode().is_some());

    let tx = PacketSender::new(&pair, Side::A);
    let n = 20_000u64;
    let sp = spec(&pair, 5000, 1000, None);
    let mut tracker = SeqTracker::<16>::new();
    let mut burst = rx[0].new_burst();
    let mut got = 0u64;
    let mut bytes = 0u64;
    let frame_len = sp.frame_len();
    // Paced: 64 frames, then drain what arrived (about 0.1-0.3 Mpps on veth).
    let mut seq = 0u64;
    let deadline = std::time::Instant::now() + Duration::from_secs(8);
    while got < n && std::time::Instant::now() < deadline {
        for _ in 0..64 {
            if seq < n {
                tx.send(&seq_frame(&sp, seq));
                seq += 1;
            }
        }
        loop {
            let k = rx[0].poll(&mut burst);
            for i in 0..RxBurst::len(&burst) {
                let f = burst.frame(i).unwrap();
                let meta = burst.meta(i);
                assert_eq!(meta.len as usize, f.len());
                assert_eq!((meta.queue, meta.flow), (QueueId(0), FlowId::NONE));
                assert!(meta.rx_timestamp_ns > 0);
                assert_eq!(meta.ts_source, rtdaq_core::TimestampSource::Poll);
                let info = parse_frame(f).expect("a valid frame");
                let payload = info.udp_payload(f).unwrap();
                let (h, rest) = SeqHeader::parse_with_payload(payload).unwrap();
                assert!(
                    check_pattern(h.stream_id, h.seq, rest),
                    "payload of {} corrupt",
                    h.seq
                );
                tracker.observe(h.seq);
                got += 1;
                bytes += f.len() as u64;
            }
            burst.clear();
            if k == 0 || got >= seq {
                break;
            }
        }
    }
    let st = tracker.snapshot();
    assert_eq!(
        (got, st.gaps, st.duplicates, st.reordered),
        (n, 0, 0, 0),
        "{st:?}"
    );
    assert_eq!(bytes, n * frame_len as u64);
    rx[0].sync_drops();
    let c = setup.rx_counters(0).snapshot();
    assert_eq!(
        (c.packets, c.bytes, c.total_drops()),
        (n, bytes, 0),
        "{c:?}"
    );
    let s = rx[0].stats();
    assert_eq!((s.bad_descs, s.misrouted, s.errors), (0, 0, 0), "{s:?}");
    // Every frame comes back to the pool when the queue (and its UMEM) goes.
    drop(burst);
    drop(rx);
    assert_eq!(setup.pools[0].in_use(), 0);
}

#[test]
fn generic_mode_receives_too() {
    require_root();
    let pair = VethPair::new("xgen").unwrap();
    let setup = Setup::new(&config(pair.ifname(Side::B), 4096, 32, 500));
    let mut opts = rtdaq_engine_afxdp::AfxdpOptions::default();
    opts.xdp_mode = Some(XdpMode::Generic);
    let engine = setup.open_in_with::<32>(&pair, Side::B, &opts).unwrap();
    assert_eq!(engine.interfaces()[0].xdp_mode, Some(XdpMode::Generic));
    let (mut rx, _) = engine.into_queues();
    let tx = PacketSender::new(&pair, Side::A);
    let sp = spec(&pair, 5000, 200, None);
    for seq in 0..100 {
        tx.send(&seq_frame(&sp, seq));
    }
    let got = collect(
        &mut rx[0],
        100,
        Duration::from_secs(3),
        Duration::from_millis(20),
    );
    assert_eq!(got.len(), 100);
    for (k, (f, _)) in got.iter().enumerate() {
        assert_eq!(f, &seq_frame(&sp, k as u64));
    }
}
