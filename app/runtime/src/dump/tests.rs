//! A history kept by its stage and written by `write_dump`, without threads: a window's
//! packets exactly, in order; a window older than the history holds is incomplete and says
//! why; a packet that finds the history held is not kept, and a later window over that time
//! is incomplete.

use super::{write_dump, DumpStage, History, Output};
use crate::record::format::{pcap::Pcap, Link};
use crate::stages::Packet;
use rtdaq_config::model::Dump;
use rtdaq_core::PacketMeta;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;

fn dump() -> Dump {
    Dump {
        name: "t".into(),
        history_packets: 16,
        slot_bytes: 256,
        directory: ".".into(),
        udp_trigger: None,
        signal_window_ms: None,
    }
}

fn stage(d: &Dump) -> (DumpStage, &'static History) {
    let ring = super::history::Ring::new(16, d.slot_bytes as usize).unwrap();
    let h: &'static History = Box::leak(Box::new(History {
        ring: Mutex::new(ring),
        kept: Default::default(),
        not_kept: Default::default(),
    }));
    let link = Link {
        frames: false,
        dst: ([127, 0, 0, 1], 5000),
    };
    (DumpStage::new(h, Pcap::with(256, link)), h)
}

/// Packet `k`: 100 bytes of `k`, received at `1000 + 10 k` ns.
fn feed(s: &mut DumpStage, k: u64) {
    let data = [k as u8; 100];
    s.on_packet(&Packet::host(
        None,
        &data,
        PacketMeta::default(),
        1000 + 10 * k,
    ));
}

/// The payload bytes (first of each) of a pcap file's records.
fn firsts(path: &str) -> Vec<u8> {
    let b = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        let len = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        out.push(b[at + 16 + 42]);
        at += 16 + len;
    }
    out
}

#[test]
fn a_window_is_exactly_its_packets_and_an_old_one_is_incomplete() {
    let dir = rtdaq_testbed::test_dir();
    let d = dump();
    let (mut s, h) = stage(&d);
    for k in 0..40 {
        feed(&mut s, k);
    }
    s.tick(0);
    assert_eq!(h.kept.load(Relaxed), 40);
    let hist = vec![("q.rx0".to_string(), h)];
    let out = Output {
        dir: dir.clone(),
        prefix: "t-20261206T000000Z".into(),
    };
    let mut held = vec![Vec::new()];
    // Packets 30..=35.
    let q = write_dump(&d, &out, &hist, (1, 1300, 1350), &mut held).unwrap();
    assert!(
        q[0].file.ends_with("t-20261206T000000Z-1-q-rx0.pcap"),
        "{}",
        q[0].file
    );
    assert_eq!(q[0].packets, 6);
    assert_eq!((q[0].first_ns, q[0].last_ns), (1300, 1350));
    assert!(q[0].complete, "{q:?}");
    assert_eq!(firsts(&q[0].file), (30..=35).collect::<Vec<u8>>());
    // The history holds 24..=39 only: a window from packet 10 is incomplete.
    let q = write_dump(&d, &out, &hist, (2, 1100, 1300), &mut held).unwrap();
    assert_eq!(firsts(&q[0].file), (24..=30).collect::<Vec<u8>>());
    assert!(!q[0].complete);
    assert!(q[0]
        .why_incomplete
        .as_deref()
        .unwrap()
        .contains("history_packets"));
    assert_eq!(q[0].oldest_held_ns, 1240);
}

#[test]
fn a_packet_that_finds_the_history_held_is_not_kept() {
    let d = dump();
    let (mut s, h) = stage(&d);
    feed(&mut s, 0);
    {
        let _held = h.ring.lock().unwrap();
        feed(&mut s, 1);
    }
    feed(&mut s, 2);
    s.finish();
    assert_eq!((h.kept.load(Relaxed), h.not_kept.load(Relaxed)), (2, 1));
    {
        let ring = h.ring.lock().unwrap();
        assert_eq!(ring.held(), 0..2);
        assert_eq!((ring.time(0), ring.time(1)), (1000, 1020));
    }
    // An earlier dump held the history over the whole window: the window is incomplete.
    let out = Output {
        dir: rtdaq_testbed::test_dir(),
        prefix: "t".into(),
    };
    let mut held = vec![vec![(0, u64::MAX)]];
    let hist = vec![("q.rx0".to_string(), h)];
    let q = write_dump(&d, &out, &hist, (1, 1000, 1020), &mut held).unwrap();
    assert_eq!(q[0].packets, 2);
    assert!(!q[0].complete);
    assert!(q[0]
        .why_incomplete
        .as_deref()
        .unwrap()
        .contains("earlier dump"));
}
