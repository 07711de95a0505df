//! Stream formats under arbitrary input: no panics, every payload placed or rejected with a
//! reason; VDIF headers round-trip; counter streams with random drops and reordering are
//! accounted for exactly by `SeqTracker` over the unwrapped sequence.

use proptest::prelude::*;
use rtdaq_core::format::codif::{self, CodifHeader};
use rtdaq_core::format::spead::{self, Flavour, HeapTracker, SpeadPacket};
use rtdaq_core::format::{
    CounterField, CounterFormat, Reject, UnitKind, Unwrap, VdifHeader, VdifSequencer,
};
use rtdaq_core::seq::SeqTracker;

fn field() -> impl Strategy<Value = CounterField> {
    (0u16..40, 1u8..=8, any::<bool>(), 0u8..64, 1u8..=64).prop_map(
        |(offset, bytes, big_endian, shift, bits)| {
            let shift = shift % (bytes * 8);
            let bits = bits.min(bytes * 8 - shift).max(1);
            CounterField {
                offset,
                bytes,
                big_endian,
                shift,
                bits,
            }
        },
    )
}

proptest! {
    #[test]
    fn units_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..160), frames in 1u32..64) {
        for k in [UnitKind::SpeadHeap, UnitKind::VdifSlot { frames }, UnitKind::CodifSlot { frames }] {
            let _ = k.unit_of(&bytes);
            // Walking a unit's frames ends, whatever the bytes.
            let mut rest: &[u8] = &bytes;
            while let Some((len, _)) = k.part_at(rest) {
                prop_assert!(len > 0 && len <= rest.len());
                rest = &rest[len..];
            }
        }
    }

    #[test]
    fn vdif_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..96), fps in proptest::option::of(1u32..100_000)) {
        let mut s = VdifSequencer::new(fps);
        match s.position(&bytes) {
            Ok(p) => prop_assert_eq!(VdifHeader::parse(&bytes).unwrap().stream(), p.stream),
            Err(r) => prop_assert!(Reject::ALL.contains(&r)),
        }
    }

    #[test]
    fn vdif_headers_round_trip(invalid: bool, seconds in 0u32..(1 << 30), ref_epoch in 0u8..64,
                               frame in 0u32..(1 << 24), thread in 0u16..1024, station: u16,
                               words in 5usize..40) {
        let h = VdifHeader { invalid, seconds, ref_epoch, frame, version: 1, log2_nchan: 3,
            frame_bytes: words as u32 * 8, complex: false, bits_per_sample: 2, thread, station,
            legacy: false };
        let mut b = vec![0u8; words * 8];
        h.emit(&mut b).unwrap();
        prop_assert_eq!(VdifHeader::parse(&b), Ok(h));
    }

    #[test]
    fn counter_never_panics(f in field(), step in 1u64..10, bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let fmt = CounterFormat { counter: f, step, wrap: 0, stream: Some(f) };
        let mut u = Unwrap::new();
        if let Ok((stream, raw)) = fmt.read(&bytes) {
            let _ = u.position(&fmt, stream, raw);
        }
        prop_assert!(f.is_valid());
    }

    /// A 16-bit counter stream (wrapping every 65 536 packets), some packets dropped, some
    /// swapped with their neighbour: the tracker's gaps = the dropped count exactly.
    #[test]
    fn counter_loss_is_exact(start: u16, n in 100usize..3000, drop_every in 2usize..50, swap_every in 3usize..40) {
        let f = CounterFormat { counter: CounterField::bytes(2, 2, true), step: 1, wrap: 0, stream: None };
        let mut order: Vec<usize> = (0..n).collect();
        for k in (0..n - 1).step_by(swap_every) {
            order.swap(k + 1, (k + 2).min(n - 1));
        }
        let mut u = Unwrap::new();
        let mut t = SeqTracker::<16>::new();
        let mut dropped = 0u64;
        let mut payload = [0u8; 8];
        // Keep the first and the last packet so loss is bounded by what arrived.
        for (pos, &k) in order.iter().enumerate() {
            if pos != 0 && pos != n - 1 && k % drop_every == 1 {
                dropped += 1;
                continue;
            }
            f.counter.write(&mut payload, u64::from(start.wrapping_add(k as u16))).unwrap();
            let (s, raw) = f.read(&payload).unwrap();
            let p = u.position(&f, s, raw).unwrap();
            t.observe(p.seq);
        }
        if order[0] == 0 && order[n - 1] == n - 1 {
            prop_assert_eq!(t.gaps(), dropped);
        }
    }
}

/// eCPRI over UDP (IQ data, message type 0): the 4-byte common header, then PC_ID (2 bytes)
/// and SEQ_ID (sequence number byte, then E bit + subsequence byte). A `counter` format of 1
/// byte at offset 6 with the stream field at offset 4 tracks each PC_ID's 8-bit sequence
/// ids across their wrap; a lost message shows as one missing number.
#[test]
fn ecpri_iq_sequence_ids_are_a_counter_per_pc_id() {
    use rtdaq_core::wire::ecpri::{msg_type, EcpriHeader};
    let f = CounterFormat {
        counter: CounterField::bytes(6, 1, true),
        step: 1,
        wrap: 0,
        stream: Some(CounterField::bytes(4, 2, true)),
    };
    let msg = |pc_id: u16, seq: u8| {
        let mut b = vec![0u8; 8 + 64];
        EcpriHeader {
            concatenated: false,
            msg_type: msg_type::IQ_DATA,
            payload_size: 4 + 64,
        }
        .emit(&mut b)
        .unwrap();
        b[4..6].copy_from_slice(&pc_id.to_be_bytes());
        b[6] = seq;
        b[7] = 0x80; // E bit: last subsequence
        b
    };
    let mut units = [Unwrap::new(), Unwrap::new()];
    let mut trackers = [SeqTracker::<16>::new(), SeqTracker::<16>::new()];
    // 600 messages per PC_ID (the 8-bit id wraps twice); PC_ID 0x0101 loses its 300th.
    for k in 0..600u32 {
        for (slot, pc) in [0x0100u16, 0x0101].into_iter().enumerate() {
            if pc == 0x0101 && k == 300 {
                continue;
            }
            let (stream, raw) = f.read(&msg(pc, k as u8)).unwrap();
            assert_eq!(stream, u32::from(pc));
            let p = units[slot].position(&f, stream, raw).unwrap();
            assert_eq!(p.seq, u64::from(k));
            trackers[slot].observe(p.seq);
        }
    }
    assert_eq!((trackers[0].gaps(), trackers[1].gaps()), (0, 1));
}

/// The packets spead2 would send for heap `cnt` of `size` bytes: `first` payload bytes in
/// the first packet, `full` in the others (one packet for an empty heap).
fn spead_heap(f: Flavour, cnt: u64, size: u64, first: u64, full: u64) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut off = 0;
    loop {
        let len = if off == 0 { first } else { full }.min(size - off);
        let items = if off == 0 { 5 } else { 4 };
        let mut b = vec![0u8; 8 + 8 * items + len as usize];
        assert!(spead::emit_header(&mut b, f, items as u16));
        let ptrs = [
            f.pointer(true, spead::ITEM_HEAP_CNT, cnt),
            f.pointer(true, spead::ITEM_HEAP_SIZE, size),
            f.pointer(true, spead::ITEM_HEAP_OFFSET, off),
            f.pointer(true, spead::ITEM_PAYLOAD_LEN, len),
            f.pointer(false, 0x1000, 0),
        ];
        for (k, p) in ptrs.iter().take(items).enumerate() {
            assert!(spead::emit_pointer(&mut b, k, *p));
        }
        out.push(b);
        off += len;
        if off >= size {
            return out;
        }
    }
}

proptest! {
    #[test]
    fn spead_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120),
                          head in proptest::collection::vec(any::<u64>(), 0..6), seq: u16) {
        // Random bytes, and random item pointers behind a valid header.
        let mut t = HeapTracker::new();
        let mut framed = vec![0x53, 4, 2, 6, 0, 0, 0, head.len() as u8];
        for h in &head {
            framed.extend_from_slice(&h.to_be_bytes());
        }
        framed.extend_from_slice(&bytes);
        for b in [&bytes, &framed] {
            match SpeadPacket::parse(b, None) {
                Ok(p) => { t.observe(u64::from(seq), &p); }
                Err(r) => prop_assert!(Reject::ALL.contains(&r)),
            }
        }
        let _ = t.flushed();
    }

    /// Fixed-size heaps split as spead2 splits them, every `drop_every`-th packet dropped,
    /// neighbours swapped now and then, in either flavour, the first payload a few item
    /// pointers shorter: missing packets = dropped, and
    /// every heap is counted once.
    #[test]
    fn spead_loss_is_exact(heaps in 20u64..120, size in 1u64..20_000, full in 64u64..9000,
                           extra_items in 0u64..4, drop_every in 3usize..40, swap_every in 5usize..50,
                           f40: bool) {
        let f = if f40 { Flavour::F64_40 } else { Flavour::F64_48 };
        let first = full.saturating_sub(8 * extra_items).max(8);
        let mut wire: Vec<Vec<u8>> = (1..=heaps).flat_map(|c| spead_heap(f, c, size, first, full)).collect();
        let sent = wire.len();
        // (Not the first two: a heap before the stream's first is too old, as in SeqTracker.)
        for i in (swap_every..wire.len()).step_by(swap_every) {
            wire.swap(i - 1, i);
        }
        let mut t = HeapTracker::new();
        let mut dropped = 0u64;
        for (i, b) in wire.iter().enumerate() {
            let p = SpeadPacket::parse(b, Some(f)).unwrap();
            // (Not of the last heap: one lost after the newest heap is invisible.)
            if i % drop_every == drop_every - 1 && p.heap_cnt < heaps {
                dropped += 1;
                continue;
            }
            t.observe(p.heap_cnt, &p);
        }
        let s = t.flushed();
        prop_assert_eq!(s.packets + dropped, sent as u64);
        prop_assert_eq!(s.complete + s.incomplete + s.missing, heaps);
        prop_assert_eq!(s.missing_packets, dropped);
        if size > first + full {
            prop_assert_eq!(t.layout(), (first, full));
        }
        prop_assert_eq!((s.duplicates, s.too_old), (0, 0));
    }
}

proptest! {
    #[test]
    fn codif_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..160),
                          fpp in proptest::option::of(1u32..100_000), sync: bool) {
        let mut b = bytes;
        if sync && b.len() >= 48 {
            // Behind a valid sync word the other fields are still random.
            b[40..44].copy_from_slice(&codif::SYNC.to_le_bytes());
        }
        let mut s = VdifSequencer::new(fpp);
        match codif::position(&mut s, &b) {
            Ok(p) => prop_assert_eq!(CodifHeader::parse(&b).unwrap().stream(), p.stream),
            Err(r) => prop_assert!(Reject::ALL.contains(&r)),
        }
    }
}
