//! `net_ring` loopback (as root): what TX queue 0 sends comes back on RX queue 0 of the same
//! port. One EAL for the binary (`net_ring0`, `net_ring1`); each test owns one port.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rtdaq_core::traits::{RxBurst, RxQueue, TxBurst, TxQueue};
use rtdaq_core::wire::seqhdr::check_pattern;
use rtdaq_core::wire::{parse_frame, SeqHeader};
use rtdaq_core::{DropReason, FlowId, QueueId};

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
    "--log-level=lib.eal:notice",
];

#[test]
fn loopback_delivers_intact_frames_with_flow_ids_and_counts_drops() {
    require_root();
    let s = Setup::new(&config_toml(EAL, "net_ring0", 1, 1, true, 0));
    let engine = s.open().unwrap_or_else(|e| panic!("{e}"));
    let info = &engine.interfaces()[0];
    assert_eq!(
        (info.port.as_str(), info.driver.as_str()),
        ("net_ring0", "net_ring")
    );
    assert_eq!(info.queues, (1, 1));
    let (mut rxq, mut txq) = engine.into_queues();
    let (rx, tx) = (&mut rxq[0], &mut txq[0]);

    let sp = spec(5000, 200);
    let mut frames: Vec<Vec<u8>> = (0..64).map(|k| seq_frame(&sp, k)).collect();
    frames.push(seq_frame(&spec(6000, 200), 99)); // no rule matches: no_flow
    let mut bad = frames[0][..20].to_vec(); // IPv4 header cut short: malformed on RX
    bad[12..14].copy_from_slice(&[0x08, 0x00]);
    frames.push(bad);
    frames.push(vec![0u8; 5]); // shorter than an Ethernet header: malformed on TX
    let sent = send_all(tx, &frames);
    assert_eq!(sent, 66, "the ring takes every well-formed frame");
    let tc = s.tx[0].counters.snapshot();
    assert_eq!(tc.packets, 66);
    assert_eq!(
        tc.bytes,
        frames[..66].iter().map(|f| f.len() as u64).sum::<u64>()
    );
    assert_eq!(tc.drop_count(DropReason::Malformed), 1);

    let got = recv(rx, 64, Duration::from_secs(2));
    assert_eq!(got.len(), 64);
    for (k, (f, meta)) in got.iter().enumerate() {
        assert_eq!(f, &frames[k], "frame {k} came back byte-identical");
        let info = parse_frame(f).unwrap();
        assert_eq!(info.udp.unwrap().dst_port, 5000);
        let (h, payload) = SeqHeader::parse_with_payload(&f[sp.payload_offset()..]).unwrap();
        assert_eq!(h.seq, k as u64);
        assert!(check_pattern(1, h.seq, payload));
        assert_eq!(meta.len as usize, f.len());
        assert_eq!(meta.flow, FlowId(7));
        assert_eq!(meta.queue, QueueId(0));
        assert!(meta.rx_timestamp_ns > 0);
        assert_eq!(meta.ts_source, rtdaq_core::TimestampSource::Poll);
    }
    // The two dropped frames follow the 64 in the ring: poll until they are counted.
    let end = Instant::now() + Duration::from_secs(1);
    let mut b = rx.new_burst();
    while s.rx[0].counters.snapshot().total_drops() < 2 && Instant::now() < end {
        assert_eq!(rx.poll(&mut b), 0, "nothing else is delivered");
    }
    let rc = s.rx[0].counters.snapshot();
    assert_eq!(rc.packets, 64, "{rc:?}");
    assert_eq!(
        rc.bytes,
        frames[..64].iter().map(|f| f.len() as u64).sum::<u64>()
    );
    assert_eq!(rc.drop_count(DropReason::NoFlow), 1);
    assert_eq!(rc.drop_count(DropReason::Malformed), 1);
    assert_eq!(rc.total_drops(), 2);
    assert_eq!(rx.mempool().in_use(), 0, "every mbuf is back in the pool");

    // A burst dropped with frames in it frees them; one cleared likewise.
    send_all(tx, &frames[..10]);
    let mut b = rx.new_burst();
    let end = Instant::now() + Duration::from_secs(1);
    while RxBurst::len(&b) < 10 && Instant::now() < end {
        rx.poll(&mut b);
    }
    assert_eq!(RxBurst::len(&b), 10);
    assert_eq!(rx.mempool().in_use(), 10);
    drop(b);
    assert_eq!(rx.mempool().in_use(), 0);

    // Reserved and never sent: dropping the TX burst frees them.
    let mut tb = tx.new_burst();
    assert_eq!(tx.reserve(&mut tb, 8), 8);
    assert!(tb.packet_mut(0).unwrap().len() >= 2048);
    assert_eq!(tx.mempool().in_use(), 8);
    drop(tb);
    assert_eq!(tx.mempool().in_use(), 0);
}

#[test]
fn sleeping_queue_waits_up_to_its_timeout_and_wakes_for_a_frame() {
    require_root();
    let s = Setup::new(&config_toml(EAL, "net_ring1", 1, 1, false, 3000));
    let (mut rxq, mut txq) = s.open().unwrap_or_else(|e| panic!("{e}")).into_queues();
    let (rx, tx) = (&mut rxq[0], &mut txq[0]);
    let mut b = rx.new_burst();
    let t = Instant::now();
    assert_eq!(rx.poll(&mut b), 0);
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_micros(3000) && waited < Duration::from_millis(200),
        "an empty poll of a sleeping queue waits timeout_us: {waited:?}"
    );
    send_all(tx, &[seq_frame(&spec(5000, 64), 1)]);
    let t = Instant::now();
    assert_eq!(rx.poll(&mut b), 1);
    assert!(t.elapsed() < Duration::from_millis(3));
    assert_eq!(b.meta(0).flow, FlowId(7));
}
