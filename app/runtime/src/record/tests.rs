//! The sink and writer together on a real file, without a queue: GPU-stage products (blocks
//! larger than a buffer) are recorded whole, in order, and a block the free buffers cannot
//! hold is counted, never half-written.

use super::{
    writer::Writer, AnyFormat, FileNaming, Link, RecBuf, RecordSink, SinkCounters, SinkInfo,
};
use rtdaq_config::model::{DadaParams, RecordFormat, Recorder};
use rtdaq_core::SlotRing;
use std::sync::atomic::Ordering::Relaxed;

fn recorder(dir: &std::path::Path) -> Recorder {
    Recorder {
        name: "spectra".into(),
        format: RecordFormat::Dada,
        directory: dir.display().to_string(),
        file_name: "products-{index}.dada".into(),
        rotate_bytes: None,
        rotate_ns: None,
        snaplen: 262_144,
        strip_bytes: 0,
        buffer_bytes: 1 << 20,
        buffers: 4,
        flush_ns: 100_000_000,
        writer: None,
        direct_io: true,
        shared: false,
        dada: DadaParams::default(),
    }
}

/// What the writer of a test sink of `rec` in `dir` needs.
fn info(rec: &Recorder, dir: &std::path::Path, queue: &str) -> SinkInfo {
    SinkInfo {
        key: "recorders[0]".into(),
        recorder: rec.clone(),
        queue: queue.into(),
        naming: FileNaming {
            dir: dir.to_path_buf(),
            pattern: rec.file_name.clone(),
        },
        config_name: "test".into(),
        config_sha256: "0".repeat(64),
        start_unix_ns: 1,
    }
}

fn block(n: usize, batch: u64) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u64 * 31 + batch * 7 + 1) as u8)
        .collect()
}

#[test]
fn products_span_buffers_and_what_does_not_fit_is_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let rec = recorder(&dir);
    let counters: &'static SinkCounters = Box::leak(Box::default());
    let bufs: Vec<RecBuf> = (0..rec.buffers)
        .map(|_| RecBuf::new(rec.buffer_bytes))
        .collect();
    let ring = Box::leak(Box::new(
        SlotRing::new(Box::leak(bufs.into_boxed_slice())).unwrap(),
    ));
    let (prod, cons) = ring.split();
    let w = Writer::open(
        info(&rec, &dir, "lo.rx0 gpu_stage fft"),
        AnyFormat::new(&rec, Link::default()),
        cons,
        counters,
    )
    .unwrap();
    let mut sink = RecordSink::new(&rec, AnyFormat::new(&rec, Link::default()), prod, counters);
    let big = 3 << 19; // 1.5 MiB: every product spans two buffers
                       // The writer is not running yet: 4 MiB of buffers take products 0 and 1 (3 MiB, three
                       // buffers committed), product 2 (1.5 MiB) finds one free buffer and is refused whole,
                       // product 4 (0.5 MiB) fits; 3 never came (a dropped batch: a gap in the index).
    let kept = [block(big, 0), block(big, 1), block(big / 3, 4)];
    assert!(sink.on_block(&kept[0], 0, 1_000));
    assert!(sink.on_block(&kept[1], 1, 2_000));
    assert!(!sink.on_block(&block(big, 2), 2, 3_000));
    assert!(sink.on_block(&kept[2], 4, 4_000));
    sink.finish();
    assert_eq!(counters.dropped_full.load(Relaxed), 1);
    let out = std::thread::spawn(move || w.run()).join().unwrap();
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(out.files.len(), 1);
    let f = &out.files[0];
    assert_eq!(
        (f.packets, f.first_seq, f.last_seq, f.seq_gaps),
        (3, Some(0), Some(4), 2),
        "{f:?}"
    );
    assert_eq!((f.first_ts_ns, f.last_ts_ns), (1_000, 4_000));
    let data = std::fs::read(&f.path).unwrap();
    let want: Vec<u8> = kept.concat();
    assert_eq!(data.len(), 4096 + want.len());
    assert!(data[4096..] == want[..], "the products, whole and in order");
    let header = String::from_utf8_lossy(&data[..4096]).into_owned();
    let pkt = header
        .lines()
        .find_map(|l| l.strip_prefix("PKT_SIZE"))
        .map(str::trim);
    assert_eq!(pkt, Some(big.to_string().as_str()), "{header}");
    assert_eq!(counters.written.load(Relaxed), 3);
}

/// A shared sink's merger writes the taps' records in the order their consumers took
/// them, and waits for a tap that has not yet said how far it got (its watermark) instead
/// of writing a later record of another tap first.
#[test]
fn shared_sink_merges_in_take_order_and_waits_for_a_lagging_tap() {
    use super::shared::{Merger, Tap, TapCounters};
    use crate::stages::Packet;
    use rtdaq_core::PacketMeta;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let mut rec = recorder(&dir);
    rec.format = RecordFormat::Raw;
    rec.file_name = "shared-{index}.raw".into();
    rec.shared = true;
    let ring = |n: u32| {
        let bufs: Vec<RecBuf> = (0..n).map(|_| RecBuf::new(rec.buffer_bytes)).collect();
        Box::leak(Box::new(
            SlotRing::new(Box::leak(bufs.into_boxed_slice())).unwrap(),
        ))
        .split()
    };
    let counters: &'static SinkCounters = Box::leak(Box::default());
    let (prod, cons) = ring(4);
    let w = Writer::open(
        info(&rec, &dir, "lo (shared)"),
        AnyFormat::new(&rec, Link::default()),
        cons,
        counters,
    )
    .unwrap();
    let sink = RecordSink::new(&rec, AnyFormat::new(&rec, Link::default()), prod, counters);
    let mut taps = Vec::new();
    let mut ends = Vec::new();
    for _ in 0..2 {
        let tc: &'static TapCounters = Box::leak(Box::default());
        let (p, c) = ring(4);
        taps.push(Tap::new(p, tc, counters, rec.buffer_bytes, false));
        ends.push((c, tc));
    }
    let payload = |k: u8| vec![k; 100];
    fn view(b: &[u8]) -> Packet<'_> {
        Packet::host(None, b, PacketMeta::default(), 1)
    }
    // Taken in the order 0 (tap 0), 1 (tap 1), 2 (tap 0), 3 (tap 1).
    for k in 0..4u8 {
        let p = payload(k);
        taps[usize::from(k % 2)].on_packet(&view(&p));
    }
    let (mut t1, mut t0) = (taps.pop().unwrap(), taps.pop().unwrap());
    t0.finish(); // tap 0's records (0 and 2) reach the merger first
    let writer = std::thread::spawn(move || w.run());
    let merger = std::thread::spawn(move || Merger::new(ends, sink).run());
    std::thread::sleep(std::time::Duration::from_millis(50));
    // Tap 1 has committed nothing and raised no watermark: the merger may write record 0
    // (taken before anything tap 1 could still hold) but not record 2.
    assert!(counters.written.load(Relaxed) <= 1);
    t1.finish();
    merger.join().unwrap();
    let out = writer.join().unwrap();
    assert_eq!(out.files[0].packets, 4);
    let data = std::fs::read(&out.files[0].path).unwrap();
    let order: Vec<u8> = data.chunks_exact(100).map(|c| c[0]).collect();
    assert_eq!(order, [0, 1, 2, 3], "take order across the taps");
}
