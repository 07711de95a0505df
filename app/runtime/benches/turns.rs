//! The cost per loop turn of the turn histogram (issue #33): every queue thread's
//! [`StallClock::tick`] now records the turn into its [`SharedHistogram`] besides keeping
//! the longest. Measured in one run, interleaved: a loop of `tick` calls (what every turn
//! pays now), against the same loop doing only what `tick` did before the histogram (the
//! turn's length and the running maximum; rebuilt here as the baseline), and
//! `SharedHistogram::record` alone.
//!
//! ```text
//! cargo bench -p rtdaq-runtime --bench turns
//! ```
//! Env: `TURNS_BENCH_REPEATS` (default 9), `TURNS_BENCH_TURNS` (per sample, default 8 Mi).
//! The turn times are precomputed (a fixed LCG, turns of 1 to 100 µs) so no clock is read:
//! the figures are the bookkeeping alone. Printed: ns per turn, min / median / max per
//! variant, and the difference of the medians.
#![allow(missing_docs)]

use rtdaq_runtime::latency::SharedHistogram;
use rtdaq_runtime::stall::{StallClock, StallWatch, ThreadKind};
use std::hint::black_box;
use std::time::Instant;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Monotonic times of successive turn ends.
fn times(n: usize) -> Vec<u64> {
    let (mut x, mut t) = (0x9e37_79b9_7f4a_7c15u64, 1_000u64);
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            t += 1_000 + (x >> 33) % 99_000;
            t
        })
        .collect()
}

fn now_tick(ts: &[u64]) -> f64 {
    let w = Box::new(StallWatch::new());
    let mut c = StallClock::start(&w, 0, ThreadKind::Io);
    let t = Instant::now();
    for &now in ts {
        c.tick(black_box(now));
    }
    let ns = t.elapsed().as_nanos() as f64 / ts.len() as f64;
    assert_eq!(w.turns.snapshot().count(), ts.len() as u64);
    ns
}

fn before(ts: &[u64]) -> f64 {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    let shared = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
    let (mut last, mut longest, mut alive) = (0u64, 0u64, 0u64);
    let t = Instant::now();
    for &now in ts {
        let now = black_box(now);
        let turn = now.saturating_sub(last);
        last = now;
        if now.saturating_sub(alive) >= rtdaq_runtime::stall::ALIVE_EVERY_NS {
            alive = now;
            shared[0].store(now, Relaxed);
        }
        if turn > longest {
            longest = turn;
            shared[1].store(turn, Relaxed);
            shared[2].store(now, Relaxed);
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / ts.len() as f64;
    black_box(&shared);
    ns
}

fn record_alone(ts: &[u64]) -> f64 {
    let h = Box::new(SharedHistogram::new());
    let t = Instant::now();
    for w in ts.windows(2) {
        h.record(black_box(w[1] - w[0]));
    }
    let ns = t.elapsed().as_nanos() as f64 / (ts.len() - 1) as f64;
    black_box(&h);
    ns
}

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

fn main() {
    let repeats = env("TURNS_BENCH_REPEATS", 9);
    let ts = times(env("TURNS_BENCH_TURNS", 8 << 20));
    println!(
        "loop-turn bookkeeping, {} turns per sample, {repeats} interleaved repeats (ns per turn):",
        ts.len()
    );
    println!("| variant | min | median | max |\n|---|---|---|---|");
    let (mut a, mut b, mut r) = (Vec::new(), Vec::new(), Vec::new());
    now_tick(&ts); // warm-up
    for _ in 0..repeats {
        a.push(before(&ts));
        b.push(now_tick(&ts));
        r.push(record_alone(&ts));
    }
    let (a, b, r) = (stats(a), stats(b), stats(r));
    for (name, s) in [
        ("longest turn only (before the histogram)", a),
        ("StallClock::tick (longest + histogram)", b),
        ("SharedHistogram::record alone", r),
    ] {
        println!("| {name} | {:.2} | {:.2} | {:.2} |", s.0, s.1, s.2);
    }
    println!(
        "the histogram's cost per turn (median difference): {:.2} ns",
        b.1 - a.1
    );
}
