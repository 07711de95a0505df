//! The sink and the sender together over a real UDP socket on loopback, without a queue:
//! heaps fill and close as configured, every SPEAD packet parses, and every payload is
//! accounted for (sent, or counted with its reason).

use super::{EgressCounters, EgressSink, HeapBuf, SinkShared, SpeadSender};
use crate::stages::Packet;
use rtdaq_config::model::{Egress, EgressFeed, EgressProtocol};
use rtdaq_core::format::spead::SpeadPacket;
use rtdaq_core::slot_ring::{SlotConsumer, SlotProducer};
use rtdaq_core::{PacketMeta, SlotRing};
use std::net::{SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

fn egress(dest: SocketAddrV4, per_heap: u32, buffers: u32) -> Egress {
    Egress {
        name: "out".into(),
        protocol: EgressProtocol::Spead,
        destinations: vec![dest],
        heap_address_bits: 48,
        packets_per_heap: per_heap,
        max_packet: 1472,
        descriptors_every: 0,
        rate_bps: None,
        txtime: None,
        heap_buffers: buffers,
        max_heap_bytes: 4096 * per_heap as usize,
        flush_ns: 1_000_000_000,
        strip_bytes: 0,
        ttl: 1,
        multicast_interface: None,
        thread: None,
        ucx: None,
        feed: EgressFeed::Payloads,
        units: None,
    }
}

/// The ring of `eg`'s heap buffers (leaked: the halves live as long as the test), and
/// counters.
pub(super) fn ring(
    eg: &Egress,
) -> (
    SlotProducer<'static, HeapBuf>,
    SlotConsumer<'static, HeapBuf>,
    &'static EgressCounters,
) {
    let bufs: Vec<HeapBuf> = (0..eg.heap_buffers)
        .map(|_| HeapBuf::new(eg.max_heap_bytes))
        .collect();
    let ring = Box::leak(Box::new(
        SlotRing::new(Box::leak(bufs.into_boxed_slice())).unwrap(),
    ));
    let (prod, cons) = ring.split();
    (prod, cons, Box::leak(Box::default()))
}

/// The shared state of a sink with one sender (leaked, like the ring).
fn one_sender() -> &'static SinkShared {
    Box::leak(Box::new(SinkShared {
        running: AtomicUsize::new(1),
    }))
}

/// A sink and its sender for `eg`.
fn parts(eg: &Egress) -> (EgressSink, SpeadSender, &'static EgressCounters) {
    let (prod, cons, counters) = ring(eg);
    let sender =
        SpeadSender::new(eg, 0, cons, counters, one_sender(), (1, 0), "test".into()).unwrap();
    (EgressSink::new(eg, prod, counters), sender, counters)
}

fn payload(k: u32) -> Vec<u8> {
    (0..1000u32).map(|i| (i + k) as u8).collect()
}

/// Every datagram on `rx` until it is quiet for 300 ms, parsed.
fn drain(rx: &UdpSocket) -> Vec<SpeadPacket> {
    rx.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut buf = [0u8; 2048];
    let mut out = Vec::new();
    while let Ok(n) = rx.recv(&mut buf) {
        out.push(SpeadPacket::parse(&buf[..n], None).expect("a SPEAD packet"));
    }
    out
}

/// 10 payloads, 4 per heap: heaps of 4, 4 and 2 (the last closed by `finish`), each one
/// packet of its counter; descriptors first, the end of stream last.
#[test]
fn heaps_of_n_payloads_go_out_whole_and_in_order() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let std::net::SocketAddr::V4(dest) = rx.local_addr().unwrap() else {
        unreachable!()
    };
    rx.set_nonblocking(false).unwrap();
    let eg = egress(dest, 4, 8);
    let (mut sink, sender, c) = parts(&eg);
    let data: Vec<Vec<u8>> = (0..10).map(payload).collect();
    for (k, d) in data.iter().enumerate() {
        sink.on_packet(&Packet::host(
            None,
            d,
            PacketMeta::default(),
            1_000 + k as u64,
        ));
    }
    sink.finish();
    let t = std::thread::spawn(move || sender.run());
    let got = drain(&rx);
    t.join().unwrap();
    // Descriptor heap (counter 1), three data heaps (2, 3, 4), the end of stream (5).
    let cnts: Vec<u64> = got.iter().map(|p| p.heap_cnt).collect();
    assert!(cnts.windows(2).all(|w| w[0] <= w[1]), "{cnts:?}");
    assert_eq!(cnts.first(), Some(&1));
    let last = got.last().unwrap();
    assert!(last.stop && last.heap_cnt == 5, "{last:?}");
    let sizes: Vec<u64> = got
        .iter()
        .filter(|p| (2..=4).contains(&p.heap_cnt) && p.offset == 0)
        .filter_map(|p| p.heap_size)
        .collect();
    assert_eq!(sizes, vec![8 + 4000, 8 + 4000, 8 + 2000]);
    assert_eq!(c.payloads_in.load(Relaxed), 10);
    assert_eq!(c.payloads_sent.load(Relaxed), 10);
    assert_eq!(c.heaps.load(Relaxed), 3);
    assert_eq!(c.descriptors.load(Relaxed), 1);
    assert_eq!(c.datagrams.load(Relaxed), got.len() as u64);
    assert_eq!(c.dropped(), 0);
}

/// A sink whose sender has not run yet holds `heap_buffers` heaps; the payloads after those
/// are counted as `egress_full`, never waited for, and the rest go out once it runs.
#[test]
fn a_full_ring_counts_egress_full_and_the_rest_is_sent() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let std::net::SocketAddr::V4(dest) = rx.local_addr().unwrap() else {
        unreachable!()
    };
    let eg = egress(dest, 1, 4);
    let (mut sink, sender, c) = parts(&eg);
    let d = payload(0);
    for k in 0..10 {
        sink.on_packet(&Packet::host(None, &d, PacketMeta::default(), k));
    }
    sink.tick(0);
    assert_eq!(c.dropped_full.load(Relaxed), 6);
    sink.finish();
    let t = std::thread::spawn(move || sender.run());
    let got = drain(&rx);
    t.join().unwrap();
    assert_eq!(c.payloads_sent.load(Relaxed), 4);
    assert_eq!(c.payloads_sent.load(Relaxed) + c.dropped(), 10);
    assert_eq!(got.iter().filter(|p| p.length == 8 + 1000).count(), 4);
}

/// A destination with no receiver refuses the datagrams (ICMP port unreachable): what the
/// kernel reports refused counts as `peer_gone`, and every payload is accounted for.
#[test]
fn a_destination_without_a_receiver_counts_peer_gone() {
    // A port that was bound and closed: nothing listens there.
    let dest = {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let std::net::SocketAddr::V4(a) = s.local_addr().unwrap() else {
            unreachable!()
        };
        a
    };
    let eg = egress(dest, 1, 64);
    let (mut sink, sender, c) = parts(&eg);
    let d = payload(0);
    let t = std::thread::spawn(move || sender.run());
    for k in 0..40 {
        sink.on_packet(&Packet::host(None, &d, PacketMeta::default(), k));
        sink.tick(0);
        std::thread::sleep(Duration::from_millis(2));
    }
    sink.finish();
    t.join().unwrap();
    assert!(c.dropped_peer_gone.load(Relaxed) > 0, "{c:?}");
    assert_eq!(c.payloads_sent.load(Relaxed) + c.dropped(), 40, "{c:?}");
    assert_eq!(c.first_errno.load(Relaxed), libc::ECONNREFUSED);
}

/// A GPU stage's products (`on_block`): each goes whole as one heap of its own, split into
/// SPEAD packets of at most `max_packet` bytes, its data equal to the product; with no free
/// heap buffer a product is counted as `egress_full`, one larger than a buffer as
/// `egress_error`, never waited for.
#[test]
fn products_go_whole_one_a_heap_and_what_does_not_fit_is_counted() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let std::net::SocketAddr::V4(dest) = rx.local_addr().unwrap() else {
        unreachable!()
    };
    let mut eg = egress(dest, 1, 4);
    eg.max_heap_bytes = 5000;
    let (mut sink, sender, c) = parts(&eg);
    let products: Vec<Vec<u8>> = (0..6u32)
        .map(|k| (0..3000u32).map(|i| (i * 7 + k) as u8).collect())
        .collect();
    for (k, p) in products.iter().enumerate() {
        sink.on_block(p, 1_000 + k as u64);
    }
    sink.on_block(&[0u8; 6000], 2_000);
    sink.tick(0);
    assert_eq!(c.payloads_in.load(Relaxed), 4, "the ring holds 4 heaps");
    assert_eq!(
        c.dropped_full.load(Relaxed),
        3,
        "2 products and the large one"
    );
    assert_eq!(
        c.dropped_too_large.load(Relaxed),
        0,
        "no free buffer came first"
    );
    sink.finish();
    let t = std::thread::spawn(move || sender.run());
    // Every packet with its payload bytes, grouped by heap.
    rx.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut buf = [0u8; 2048];
    let mut heaps: std::collections::BTreeMap<u64, Vec<u8>> = Default::default();
    let mut packets = 0;
    while let Ok(n) = rx.recv(&mut buf) {
        let p = SpeadPacket::parse(&buf[..n], None).expect("a SPEAD packet");
        assert!(n <= 1472);
        packets += 1;
        let Some(size) = p.heap_size else { continue };
        let h = heaps
            .entry(p.heap_cnt)
            .or_insert_with(|| vec![0; size as usize]);
        let at = p.offset as usize;
        h[at..at + p.length as usize].copy_from_slice(&buf[n - p.length as usize..n]);
    }
    t.join().unwrap();
    // Data heaps 2..=5 (1: descriptors, 6: the end of stream): timestamp (8 bytes), then
    // the product whole.
    for (k, cnt) in (2..=5u64).enumerate() {
        let h = &heaps[&cnt];
        assert_eq!(h.len(), 8 + 3000, "heap {cnt}");
        assert_eq!(&h[8..], &products[k][..], "heap {cnt} is product {k}");
    }
    assert!(packets >= 4 * 3, "each 3000-byte product needs 3 packets");
    assert_eq!(c.payloads_sent.load(Relaxed), 4);
    assert_eq!(c.heaps.load(Relaxed), 4);

    // A product larger than a heap buffer, with buffers free: `egress_error`.
    let (mut sink, _sender, c) = parts(&eg);
    sink.on_block(&[0u8; 6000], 1);
    sink.tick(0);
    assert_eq!(c.dropped_too_large.load(Relaxed), 1);
    assert_eq!(c.payloads_in.load(Relaxed), 0);
}

/// A SPEAD sink of whole heaps (`unit = "heap"`) is a relay: the heaps that arrived whole
/// go out as the very packets they arrived in, in order, with no descriptors of rtdaq's;
/// a heap that lost a packet goes nowhere and its packets count as `egress_incomplete`;
/// the end of stream comes last.
#[test]
fn whole_heaps_are_forwarded_as_the_packets_they_arrived_in() {
    use rtdaq_config::model::EgressUnits;
    use rtdaq_core::format::UnitKind;
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let std::net::SocketAddr::V4(dest) = rx.local_addr().unwrap() else {
        unreachable!()
    };
    let mut eg = egress(dest, 1, 8);
    eg.units = Some(EgressUnits {
        kind: UnitKind::SpeadHeap,
        open: 2,
    });
    let (mut sink, sender, c) = parts(&eg);
    let mut sent = Vec::new();
    for cnt in 1..=6u64 {
        for part in 0..3 {
            let pkt = super::unit_tests::spead(cnt, part, 3);
            if cnt == 3 && part == 1 {
                continue; // lost before rtdaq: heap 3 is never whole
            }
            sink.on_packet(&Packet::host(None, &pkt, PacketMeta::default(), cnt));
            if cnt != 3 {
                sent.push(pkt);
            }
        }
    }
    sink.finish();
    let t = std::thread::spawn(move || sender.run());
    rx.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    while let Ok(n) = rx.recv(&mut buf) {
        got.push(buf[..n].to_vec());
    }
    t.join().unwrap();
    let end = got.pop().expect("the end of stream");
    assert!(SpeadPacket::parse(&end, None).unwrap().stop);
    assert!(
        got == sent,
        "{} packets, {} forwarded",
        got.len(),
        sent.len()
    );
    assert_eq!(c.heaps.load(Relaxed), 5);
    assert_eq!(c.payloads_sent.load(Relaxed), 15);
    assert_eq!(c.dropped_incomplete.load(Relaxed), 2);
    assert_eq!(c.descriptors.load(Relaxed), 0);
    assert_eq!(c.datagrams.load(Relaxed), 16);
    assert_eq!(c.dropped(), 2);
}

/// Launch times (`pacing = "txtime"`) to a destination whose interface keeps none (this
/// host's loopback: `noqueue`) stop the sender's start, naming the key, the device, its
/// qdisc and the command that would give it one.
#[test]
fn txtime_without_a_launch_time_qdisc_is_refused_at_start() {
    let mut eg = egress("127.0.0.1:9".parse().unwrap(), 1, 4);
    eg.rate_bps = Some(1e9);
    eg.txtime = Some(1000);
    let (_, cons, counters) = ring(&eg);
    let Err(e) = SpeadSender::new(&eg, 0, cons, counters, one_sender(), (1, 0), "t".into()) else {
        panic!("started without a launch-time qdisc");
    };
    let e = e.to_string();
    for want in [
        "egress[0].pacing",
        "needs the etf or fq qdisc on lo (packets to 127.0.0.1:9 leave by it)",
        "which has noqueue",
        "tc qdisc replace dev lo root etf clockid CLOCK_TAI delta 200000",
    ] {
        assert!(e.contains(want), "no {want:?} in {e}");
    }
}

/// Departure times: one packet time apart at the rate, never before the earliest time
/// (now plus the lead), and a sender that fell behind starts again from there, no burst.
#[test]
fn departures_are_spaced_at_the_rate_and_never_before_the_lead() {
    use super::spead::departure;
    // 1 Gb/s: 1000 bytes take 8 µs.
    let (rate, mut next) = (Some(1e9), 0.0);
    assert_eq!(departure(rate, &mut next, 1000, 50_000), 50_000);
    assert_eq!(departure(rate, &mut next, 1000, 50_100), 58_000);
    assert_eq!(departure(rate, &mut next, 500, 50_200), 66_000);
    // Behind: the schedule (70 µs) is before the earliest time; it restarts there.
    assert_eq!(departure(rate, &mut next, 1000, 200_000), 200_000);
    assert_eq!(departure(rate, &mut next, 1000, 200_000), 208_000);
    assert_eq!(departure(None, &mut next, 1000, 1), 0);
}

/// The report of a sink with launch times: the qdisc in words, its drops by reason, each
/// a lost packet of the run, in the text line too.
#[test]
fn the_report_counts_the_packets_the_qdisc_dropped_as_lost() {
    let mut eg = egress("127.0.0.1:9".parse().unwrap(), 1, 4);
    eg.rate_bps = Some(1e9);
    eg.txtime = Some(1000);
    let c = EgressCounters::default();
    c.txtime_invalid.store(2, Relaxed);
    c.txtime_missed.store(1, Relaxed);
    c.txtime_held.store(3, Relaxed);
    c.dropped_full.store(4, Relaxed);
    let _ = c
        .launch_times
        .set("pA: etf clockid CLOCK_TAI delta 200000 ns".into());
    let r = super::EgressReport::of(&eg, &c, 0, 1.0, None);
    assert_eq!(r.pacing, "txtime");
    assert_eq!(r.lost_packets(), 4 + 2 + 1 + 3);
    let line = r.to_string();
    assert!(
        line.contains("(paced: txtime, pA: etf clockid CLOCK_TAI delta 200000 ns)")
            && line.contains("packets the qdisc dropped or held: held=3 invalid=2 missed=1"),
        "{line}"
    );
    // Without launch times there is nothing of the sort.
    eg.txtime = None;
    let r = super::EgressReport::of(&eg, &EgressCounters::default(), 0, 1.0, None);
    assert!(r.txtime_dropped.is_empty() && r.launch_times.is_none());
    assert!(!r.to_string().contains("qdisc"), "{r}");
}
