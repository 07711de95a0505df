//! The cost per packet of the live latency buckets (`/metrics`' `rtdaq_rx_latency_seconds`):
//! recording a latency into the exact histogram alone (what the consumer did before) against
//! the exact histogram plus the coarse buckets ([`Coarse::record`], a binary search over 19
//! bounds), in one run, interleaved (alone, both; alone, both; ...).
//!
//! ```text
//! cargo bench -p rtdaq-runtime --bench latency
//! ```
//! Env: `LATENCY_BENCH_REPEATS` (default 9), `LATENCY_BENCH_VALUES` (per sample, default
//! 4 Mi). Two value sets, precomputed from a fixed LCG: **spread**, log-uniform from 2 µs to
//! 20 ms (the worst case for the bucket search's branches), and **typical**, log-uniform
//! from 10 to 60 µs (a loopback run's p1..p99 in the report, so most values fall in two
//! buckets). Each sample records all values of a set and reports ns per value. Printed:
//! min / median / max per variant and set, and the difference of the medians.
#![allow(missing_docs)]

use rtdaq_runtime::latency::{Coarse, Histogram};
use std::time::Instant;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn values(n: usize, lo: f64, hi: f64) -> Vec<u64> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            // log-uniform over [lo, hi]: lo · (hi/lo)^u
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            (lo * (hi / lo).powf(u)) as u64
        })
        .collect()
}

fn sample(vals: &[u64], coarse: bool) -> f64 {
    let mut h = Box::new(Histogram::new());
    let mut c = Coarse::default();
    let t = Instant::now();
    for &v in vals {
        h.record(std::hint::black_box(v));
        if coarse {
            c.record(v);
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / vals.len() as f64;
    assert_eq!(h.summary().count, vals.len() as u64);
    if coarse {
        assert_eq!(c.counts.iter().sum::<u64>(), vals.len() as u64);
    }
    std::hint::black_box((&h, &c));
    ns
}

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

fn main() {
    let repeats = env("LATENCY_BENCH_REPEATS", 9);
    let n = env("LATENCY_BENCH_VALUES", 4 << 20);
    println!(
        "latency record, {n} values per sample, {repeats} interleaved repeats (ns per value):"
    );
    println!("| values | variant | min | median | max |\n|---|---|---|---|---|");
    let mut diffs = Vec::new();
    for (set, lo, hi) in [
        ("spread 2 µs..20 ms", 2e3, 2e7),
        ("typical 10..60 µs", 1e4, 6e4),
    ] {
        let vals = values(n, lo, hi);
        let (mut alone, mut both) = (Vec::new(), Vec::new());
        sample(&vals, true); // warm-up
        for _ in 0..repeats {
            alone.push(sample(&vals, false));
            both.push(sample(&vals, true));
        }
        let a = stats(alone);
        let b = stats(both);
        println!(
            "| {set} | exact histogram alone | {:.2} | {:.2} | {:.2} |",
            a.0, a.1, a.2
        );
        println!(
            "| {set} | exact histogram + live buckets | {:.2} | {:.2} | {:.2} |",
            b.0, b.1, b.2
        );
        diffs.push(format!("{set}: {:.2}", b.1 - a.1));
    }
    println!(
        "live buckets' own cost (median difference, ns per value): {}",
        diffs.join(", ")
    );
}
