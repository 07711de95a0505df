//! The assembly of whole units in the consumer half, read straight from the ring (no
//! sender): units leave whole, oldest first, with their datagrams back to back; every
//! datagram of a unit that is not whole is counted with its reason.

use super::{EgressCounters, EgressSink, HeapBuf};
use crate::stages::Packet;
use rtdaq_config::model::{Egress, EgressFeed, EgressProtocol, EgressUnits, UcxEgress};
use rtdaq_core::format::spead::{emit_header, emit_pointer, Flavour};
use rtdaq_core::format::{UnitKind, VdifHeader};
use rtdaq_core::slot_ring::SlotConsumer;
use rtdaq_core::PacketMeta;
use std::sync::atomic::Ordering::Relaxed;

fn egress(kind: UnitKind, open: u32, buffers: u32) -> Egress {
    Egress {
        name: "units".into(),
        protocol: EgressProtocol::Ucx,
        destinations: vec!["127.0.0.1:9".parse().unwrap()],
        heap_address_bits: 48,
        packets_per_heap: 1,
        max_packet: 1472,
        descriptors_every: 0,
        rate_bps: None,
        txtime: None,
        heap_buffers: buffers,
        max_heap_bytes: 1024,
        flush_ns: 50_000_000,
        strip_bytes: 0,
        ttl: 1,
        multicast_interface: None,
        thread: None,
        ucx: Some(UcxEgress {
            tag: 0x5254_4451_0000_0000,
            transports: None,
            connect_wait_ms: 0,
            reconnect_ms: 500,
        }),
        feed: EgressFeed::Payloads,
        units: Some(EgressUnits { kind, open }),
    }
}

type Parts = (
    EgressSink,
    SlotConsumer<'static, HeapBuf>,
    &'static EgressCounters,
);

fn parts(eg: &Egress) -> Parts {
    let (prod, cons, counters) = super::tests::ring(eg);
    (EgressSink::new(eg, prod, counters), cons, counters)
}

/// SPEAD packet `part` (of `parts`, 100 payload bytes each) of heap `cnt`, with the heap
/// size item.
pub(super) fn spead(cnt: u64, part: u64, parts: u64) -> Vec<u8> {
    let fl = Flavour {
        heap_address_bits: 48,
    };
    let mut b = vec![0u8; 8 + 4 * 8 + 100];
    assert!(emit_header(&mut b, fl, 4));
    for (k, (id, v)) in [(1, cnt), (2, 100 * parts), (3, 100 * part), (4, 100)]
        .into_iter()
        .enumerate()
    {
        assert!(emit_pointer(&mut b, k, fl.pointer(true, id, v)));
    }
    b[40..].fill((cnt * 16 + part) as u8);
    b
}

fn feed(sink: &mut EgressSink, d: &[u8], t: u64) {
    sink.on_packet(&Packet::host(None, d, PacketMeta::default(), t));
}

/// The units the sink committed so far: (datagrams, data), oldest first.
fn taken(cons: &mut SlotConsumer<'static, HeapBuf>) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(h) = cons.front() {
        out.push((h.payloads, h.data().to_vec()));
        cons.release().unwrap();
    }
    out
}

#[test]
fn interleaved_heaps_leave_whole_and_oldest_first() {
    let eg = egress(UnitKind::SpeadHeap, 4, 8);
    let (mut sink, mut cons, c) = parts(&eg);
    let order = [(1, 0, 3), (2, 0, 2), (1, 1, 3), (2, 1, 2)];
    for (cnt, part, n) in order {
        feed(&mut sink, &spead(cnt, part, n), 10 + cnt);
    }
    assert!(
        taken(&mut cons).is_empty(),
        "heap 2 is whole but waits for heap 1"
    );
    feed(&mut sink, &spead(1, 2, 3), 13);
    let units = taken(&mut cons);
    assert_eq!(units.len(), 2);
    let want1: Vec<u8> = [spead(1, 0, 3), spead(1, 1, 3), spead(1, 2, 3)].concat();
    let want2: Vec<u8> = [spead(2, 0, 2), spead(2, 1, 2)].concat();
    assert_eq!(
        units[0],
        (3, want1),
        "heap 1: its packets whole, as they came"
    );
    assert_eq!(units[1], (2, want2));
    sink.finish();
    assert_eq!(c.payloads_in.load(Relaxed), 5);
    assert_eq!(c.dropped(), 0);
    assert_eq!(c.taken(), 5);
}

#[test]
fn a_heap_not_whole_is_given_up_and_counted() {
    let eg = egress(UnitKind::SpeadHeap, 2, 8);
    let (mut sink, mut cons, c) = parts(&eg);
    // Heap 1 loses its second packet; heap 2 comes whole but waits behind it.
    feed(&mut sink, &spead(1, 0, 3), 1);
    feed(&mut sink, &spead(1, 2, 3), 1);
    feed(&mut sink, &spead(2, 0, 2), 2);
    feed(&mut sink, &spead(2, 1, 2), 2);
    assert!(taken(&mut cons).is_empty());
    // A third heap with two open: heap 1 is given up, heap 2 goes.
    feed(&mut sink, &spead(3, 0, 1), 3);
    sink.tick(0);
    let units = taken(&mut cons);
    assert_eq!(units.len(), 2, "heaps 2 and 3 (one packet: whole at once)");
    assert_eq!(units[0].0, 2);
    assert_eq!(units[1].0, 1);
    assert_eq!(
        c.dropped_incomplete.load(Relaxed),
        2,
        "heap 1's two packets"
    );
    // A foreign datagram; heap 4's first packet twice (its lengths then add up to the
    // heap size without its second packet: the ranges tell), then its second packet, which
    // overruns the size.
    feed(&mut sink, b"not spead", 4);
    feed(&mut sink, &spead(4, 0, 2), 4);
    feed(&mut sink, &spead(4, 0, 2), 4);
    sink.tick(0);
    assert!(
        taken(&mut cons).is_empty(),
        "a duplicate is no missing packet"
    );
    feed(&mut sink, &spead(4, 1, 2), 4);
    sink.tick(0);
    assert_eq!(c.dropped_foreign.load(Relaxed), 1);
    assert_eq!(
        c.dropped_too_large.load(Relaxed),
        1,
        "the second packet overruns heap 4's size"
    );
    assert!(taken(&mut cons).is_empty(), "heap 4 cannot be whole");
    // The end of the run gives up what is open.
    sink.finish();
    assert_eq!(
        c.dropped_incomplete.load(Relaxed),
        2 + 2,
        "heap 4's two packets"
    );
    assert_eq!(c.taken(), 9, "every datagram accounted");
    assert_eq!(
        c.payloads_in.load(Relaxed) - c.dropped_incomplete.load(Relaxed),
        3
    );
}

#[test]
fn an_old_unit_is_flushed_and_a_full_ring_counts_egress_full() {
    let eg = egress(UnitKind::SpeadHeap, 4, 4);
    let (mut sink, mut cons, c) = parts(&eg);
    feed(&mut sink, &spead(1, 0, 2), 1);
    sink.tick(crate::pacer::now_ns() + 10_000_000);
    assert_eq!(c.dropped_incomplete.load(Relaxed), 0, "not yet flush_ms");
    sink.tick(crate::pacer::now_ns() + 60_000_000);
    assert_eq!(c.dropped_incomplete.load(Relaxed), 1, "open for flush_ms");
    // Four whole heaps fill the ring (nobody consumes); the fifth finds no slot.
    for cnt in 10..15 {
        feed(&mut sink, &spead(cnt, 0, 1), cnt);
    }
    sink.tick(0);
    assert_eq!(c.dropped_full.load(Relaxed), 1);
    assert_eq!(taken(&mut cons).len(), 4);
}

#[test]
fn vdif_time_slots_hold_every_thread() {
    let eg = egress(UnitKind::VdifSlot { frames: 2 }, 4, 8);
    let (mut sink, mut cons, c) = parts(&eg);
    let frame = |frame: u32, thread: u16| {
        let h = VdifHeader {
            seconds: 100,
            ref_epoch: 40,
            frame,
            version: 1,
            frame_bytes: 96,
            bits_per_sample: 2,
            thread,
            ..Default::default()
        };
        let mut f = vec![thread as u8; 96];
        h.emit(&mut f).unwrap();
        f
    };
    // Slot 0: threads 1 then 0; slot 1: thread 0 only; slot 2: thread 0 twice (the
    // duplicate is refused, the slot still whole when thread 1 comes).
    for (fr, th) in [(0, 1), (1, 0), (0, 0), (2, 0), (2, 0), (2, 1)] {
        feed(&mut sink, &frame(fr, th), 1);
    }
    sink.finish();
    let units = taken(&mut cons);
    assert_eq!(units.len(), 2, "slots 0 and 2");
    assert_eq!(units[0], (2, [frame(0, 1), frame(0, 0)].concat()));
    assert_eq!(units[1], (2, [frame(2, 0), frame(2, 1)].concat()));
    assert_eq!(
        c.dropped_incomplete.load(Relaxed),
        1,
        "slot 1 lacks thread 1"
    );
}
