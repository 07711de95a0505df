//! CPU per packet of the RX `validate` stage for each stream format against the plain count
//! path (`validate = "count"`), in one run, interleaved (count, rtdaq-full, rtdaq-sequence,
//! counter, vdif, codif, spead; count, ...), at 1472 and 8000-byte payloads.
//!
//! ```text
//! cargo bench -p rtdaq-runtime --bench validate
//! ```
//! Env: `VALIDATE_BENCH_REPEATS` (default 7), `VALIDATE_BENCH_ROUNDS` (rounds of 4096
//! payloads per sample, default 4: 16 384 checks; every payload of a sample is built
//! beforehand, 131 MB at 8000 B, so the checks read memory the way a receive ring does, not
//! one hot cache line).
//!
//! Each variant gets 4096 payloads made by the generator for its format
//! (`PayloadGen::for_format`: 4 streams, consecutive sequence numbers), so the validator does
//! exactly what it does on a loss-free stream: parse, place, track. SPEAD: 4 senders
//! (`heap_step = 4`), heaps of 4 packets at 1472 B and 8 at 8000 B, sized so that every
//! packet is full (`first + k × full` bytes). A sample runs the
//! payloads round after round through one `Validator::check` each (`packets` in all; every
//! round starts a new sequence range so nothing is a duplicate) and reports ns per packet;
//! the validator's own counters are checked afterwards (all unique, 0 gaps, 0 malformed),
//! so the compiler cannot drop the work. Reported: ns/packet min / median / max per variant
//! and size, and each median minus the count path's median (the format's own cost).
#![allow(missing_docs)]

use rtdaq_config::model::{
    CodifParams, SpeadParams, StreamFormat, Validation, VdifParams, SPEAD_FIRST_OVERHEAD,
    SPEAD_OVERHEAD,
};
use rtdaq_core::format::{CounterField, CounterFormat};
use rtdaq_runtime::generator::PayloadGen;
use rtdaq_runtime::validator::Validator;
use std::time::Instant;

const PAYLOADS: usize = 4096;
const STREAMS: u16 = 4;

struct Variant {
    name: &'static str,
    mode: Validation,
    format: StreamFormat,
}

fn variants() -> Vec<Variant> {
    let counter = StreamFormat::Counter(CounterFormat {
        counter: CounterField::bytes(0, 8, true),
        step: 1,
        wrap: 0,
        stream: Some(CounterField::bytes(8, 2, true)),
    });
    let vdif = StreamFormat::Vdif(VdifParams {
        frames_per_second: Some(1_000_000),
        station: u16::from_be_bytes(*b"Ar"),
        bits_per_sample: 2,
        log2_channels: 0,
    });
    vec![
        Variant {
            name: "count",
            mode: Validation::Count,
            format: StreamFormat::Rtdaq,
        },
        Variant {
            name: "rtdaq full",
            mode: Validation::Full,
            format: StreamFormat::Rtdaq,
        },
        Variant {
            name: "rtdaq sequence",
            mode: Validation::Sequence,
            format: StreamFormat::Rtdaq,
        },
        Variant {
            name: "counter",
            mode: Validation::Sequence,
            format: counter,
        },
        Variant {
            name: "vdif",
            mode: Validation::Sequence,
            format: vdif,
        },
        Variant {
            name: "codif",
            mode: Validation::Sequence,
            format: StreamFormat::Codif(CodifParams {
                frames_per_period: Some(1_000_000),
                period: 1,
                station: u16::from_be_bytes(*b"AS"),
                bits_per_sample: 8,
                channels: 4,
            }),
        },
        Variant {
            name: "spead",
            mode: Validation::Sequence,
            // heap_bytes is set per size (`format_for`).
            format: StreamFormat::Spead(SpeadParams {
                flavour: None,
                heap_step: u32::from(STREAMS),
                heap_bytes: 0,
            }),
        },
    ]
}

/// The variant's format at `size`-byte payloads: SPEAD heaps of full packets only (4 at
/// 1472 B, 8 at 8000 B).
fn format_for(v: &Variant, size: usize) -> StreamFormat {
    match v.format {
        StreamFormat::Spead(mut sp) => {
            let size = size as u32;
            let packets = if size <= 1500 { 4 } else { 8 };
            sp.heap_bytes = (size - SPEAD_FIRST_OVERHEAD) + (packets - 1) * (size - SPEAD_OVERHEAD);
            StreamFormat::Spead(sp)
        }
        f => f,
    }
}

/// The next `PAYLOADS` payloads of `size` bytes (4 streams interleaved).
fn payloads(v: &Variant, size: usize, gens: &mut [PayloadGen]) -> Vec<Vec<u8>> {
    (0..PAYLOADS)
        .map(|k| {
            let mut b = vec![0u8; size];
            let n = gens[k % gens.len()].fill(&mut b, 1);
            assert_eq!(n, size, "{}", v.name);
            b
        })
        .collect()
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn sample(v: &Variant, size: usize, rounds: usize) -> f64 {
    // A fresh generator per sample: the rounds below continue its sequence numbers.
    let format = format_for(v, size);
    let mut gens: Vec<PayloadGen> = (0..STREAMS)
        .map(|s| PayloadGen::for_format(s, size, format, 1_764_547_200))
        .collect();
    // Pre-build every round so that only `check` is timed.
    let all: Vec<Vec<Vec<u8>>> = (0..rounds).map(|_| payloads(v, size, &mut gens)).collect();
    let mut val = Validator::with_format(v.mode, format);
    let t = Instant::now();
    let mut n = 0usize;
    for r in &all {
        for p in r {
            std::hint::black_box(val.check(std::hint::black_box(p), 0));
            n += 1;
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / n as f64;
    let s = val.finish();
    assert_eq!(s.received, n as u64, "{}", v.name);
    assert_eq!((s.seq_gaps, s.malformed), (0, 0), "{}: {s:?}", v.name);
    if v.mode != Validation::Count {
        assert_eq!(s.unique, n as u64, "{}", v.name);
    }
    ns
}

fn mmm(xs: &mut [f64]) -> (f64, f64, f64) {
    xs.sort_by(f64::total_cmp);
    (xs[0], xs[xs.len() / 2], xs[xs.len() - 1])
}

fn main() {
    let repeats = env("VALIDATE_BENCH_REPEATS", 7);
    let rounds = env("VALIDATE_BENCH_ROUNDS", 4).max(1);
    let vs = variants();
    println!(
        "validate stage, ns per packet (min / median / max of {repeats}, {} packets per sample, interleaved)",
        rounds * PAYLOADS
    );
    println!("| size B | variant | ns/packet min / median / max | median − count |");
    println!("|---:|---|---:|---:|");
    for size in [1472usize, 8000] {
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); vs.len()];
        for _ in 0..repeats {
            for (k, v) in vs.iter().enumerate() {
                samples[k].push(sample(v, size, rounds));
            }
        }
        let count_median = mmm(&mut samples[0].clone()).1;
        for (k, v) in vs.iter().enumerate() {
            let (lo, med, hi) = mmm(&mut samples[k]);
            println!(
                "| {size} | {} | {lo:.1} / {med:.1} / {hi:.1} | {:+.1} |",
                v.name,
                med - count_median
            );
        }
    }
}
