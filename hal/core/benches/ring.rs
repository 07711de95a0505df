//! Two-thread throughput of the SPSC [`Ring`] against `crossbeam_queue::ArrayQueue` and
//! `heapless::spsc::Queue`, in one run, interleaved (A B C D, A B C D, ...).
//!
//! ```text
//! cargo bench -p rtdaq-core --bench ring
//! ```
//! Env: `RING_BENCH_REPEATS` (default 7), `RING_BENCH_ITEMS` (u64 items per run, default 20M;
//! the 64-byte item runs use half).
//!
//! Producer and consumer are pinned to two different CPUs (`sched_setaffinity`) when the
//! process may use at least two. Each run moves `n` sequence numbers; the consumer checks
//! every one (order and completeness), so the compiler cannot drop the work. Time runs from a
//! barrier release to the consumer's last item. Capacity is 1024 slots for all (heapless holds
//! `N - 1` = 1023). Reported: Mops/s min / median / max per implementation, and the ratio of
//! medians ours (single-item, and bulk) / each implementation.
#![allow(missing_docs)]

use std::hint::spin_loop;
use std::mem::MaybeUninit;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;
use rtdaq_core::ring::Ring;

const CAP: usize = 1024;
const BATCH: usize = 32;

trait Item: Copy + Send + Sync + 'static {
    const NAME: &'static str;
    fn from_seq(s: u64) -> Self;
    fn seq(&self) -> u64;
}

impl Item for u64 {
    const NAME: &'static str = "u64 (8 B)";
    #[inline(always)]
    fn from_seq(s: u64) -> Self {
        s
    }
    #[inline(always)]
    fn seq(&self) -> u64 {
        *self
    }
}

/// A cache-line-sized descriptor.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Msg64([u64; 8]);

impl Item for Msg64 {
    const NAME: &'static str = "64-byte struct";
    #[inline(always)]
    fn from_seq(s: u64) -> Self {
        Msg64([s, s ^ 1, 2, 3, 4, 5, 6, s])
    }
    #[inline(always)]
    fn seq(&self) -> u64 {
        debug_assert_eq!(self.0[0], self.0[7]);
        self.0[0]
    }
}

/// CPUs this process may run on.
#[cfg(target_os = "linux")]
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: `cpu_set_t` is plain data; `sched_getaffinity` writes at most `size_of` bytes.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

#[cfg(not(target_os = "linux"))]
fn allowed_cpus() -> Vec<usize> {
    Vec::new()
}

/// Pins the calling thread to `cpu`; false when that fails.
#[cfg(target_os = "linux")]
fn pin(cpu: usize) -> bool {
    // SAFETY: as above; pid 0 is the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn pin(_cpu: usize) -> bool {
    false
}

/// Runs `producer` and `consumer` on two (pinned) threads; returns the consumer's time.
fn two_threads(
    cpus: Option<(usize, usize)>,
    producer: impl FnOnce() + Send,
    consumer: impl FnOnce() + Send,
) -> Duration {
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        let b = &barrier;
        s.spawn(move || {
            if let Some((p, _)) = cpus {
                pin(p);
            }
            b.wait();
            producer();
        });
        let h = s.spawn(move || {
            if let Some((_, c)) = cpus {
                pin(c);
            }
            b.wait();
            let t = Instant::now();
            consumer();
            t.elapsed()
        });
        h.join().unwrap()
    })
}

#[inline(always)]
fn check<T: Item>(v: &T, want: &mut u64) {
    assert_eq!(v.seq(), *want, "out of order or lost item");
    *want += 1;
}

fn ours_single<T: Item>(n: u64, cpus: Option<(usize, usize)>) -> Duration {
    let mut storage: Vec<MaybeUninit<T>> = (0..CAP).map(|_| MaybeUninit::uninit()).collect();
    let mut ring = Ring::new(&mut storage[..]).unwrap();
    let (mut tx, mut rx) = ring.split();
    two_threads(
        cpus,
        move || {
            for s in 0..n {
                let mut v = T::from_seq(s);
                while let Err(back) = tx.push(v) {
                    v = back;
                    spin_loop();
                }
            }
        },
        move || {
            let mut want = 0;
            while want < n {
                match rx.pop() {
                    Some(v) => check(&v, &mut want),
                    None => spin_loop(),
                }
            }
        },
    )
}

fn ours_bulk<T: Item>(n: u64, cpus: Option<(usize, usize)>) -> Duration {
    let mut storage: Vec<MaybeUninit<T>> = (0..CAP).map(|_| MaybeUninit::uninit()).collect();
    let mut ring = Ring::new(&mut storage[..]).unwrap();
    let (mut tx, mut rx) = ring.split();
    two_threads(
        cpus,
        move || {
            let mut batch = [T::from_seq(0); BATCH];
            let mut s = 0;
            while s < n {
                let k = (n - s).min(BATCH as u64) as usize;
                for (i, b) in batch[..k].iter_mut().enumerate() {
                    *b = T::from_seq(s + i as u64);
                }
                let mut done = 0;
                while done < k {
                    let m = tx.push_slice(&batch[done..k]);
                    if m == 0 {
                        spin_loop();
                    }
                    done += m;
                }
                s += k as u64;
            }
        },
        move || {
            let mut out = [T::from_seq(0); BATCH];
            let mut want = 0;
            while want < n {
                let m = rx.pop_slice(&mut out);
                if m == 0 {
                    spin_loop();
                }
                for v in &out[..m] {
                    check(v, &mut want);
                }
            }
        },
    )
}

fn crossbeam<T: Item>(n: u64, cpus: Option<(usize, usize)>) -> Duration {
    let q = ArrayQueue::<T>::new(CAP);
    let q = &q;
    two_threads(
        cpus,
        move || {
            for s in 0..n {
                let mut v = T::from_seq(s);
                while let Err(back) = q.push(v) {
                    v = back;
                    spin_loop();
                }
            }
        },
        move || {
            let mut want = 0;
            while want < n {
                match q.pop() {
                    Some(v) => check(&v, &mut want),
                    None => spin_loop(),
                }
            }
        },
    )
}

fn heapless_spsc<T: Item>(n: u64, cpus: Option<(usize, usize)>) -> Duration {
    let mut q: Box<heapless::spsc::Queue<T, CAP>> = Box::new(heapless::spsc::Queue::new());
    let (mut tx, mut rx) = q.split();
    two_threads(
        cpus,
        move || {
            for s in 0..n {
                let mut v = T::from_seq(s);
                while let Err(back) = tx.enqueue(v) {
                    v = back;
                    spin_loop();
                }
            }
        },
        move || {
            let mut want = 0;
            while want < n {
                match rx.dequeue() {
                    Some(v) => check(&v, &mut want),
                    None => spin_loop(),
                }
            }
        },
    )
}

type Runner = fn(u64, Option<(usize, usize)>) -> Duration;

struct Stats {
    min: f64,
    median: f64,
    max: f64,
}

fn stats(mut v: Vec<f64>) -> Stats {
    v.sort_by(|a, b| a.total_cmp(b));
    Stats {
        min: v[0],
        median: v[v.len() / 2],
        max: v[v.len() - 1],
    }
}

fn bench_item<T: Item>(n: u64, repeats: usize, cpus: Option<(usize, usize)>) {
    let impls: [(&str, Runner); 4] = [
        ("rtdaq Ring (push/pop)", ours_single::<T>),
        ("rtdaq Ring (bulk 32)", ours_bulk::<T>),
        ("crossbeam ArrayQueue", crossbeam::<T>),
        ("heapless spsc::Queue", heapless_spsc::<T>),
    ];
    // Warm-up (page faults, frequency), not measured.
    for (_, f) in &impls {
        f(n / 10, cpus);
    }
    let mut mops: Vec<Vec<f64>> = vec![Vec::new(); impls.len()];
    for _ in 0..repeats {
        for (i, (_, f)) in impls.iter().enumerate() {
            let d = f(n, cpus);
            mops[i].push(n as f64 / d.as_secs_f64() / 1e6);
        }
    }
    let st: Vec<Stats> = mops.into_iter().map(stats).collect();
    println!(
        "\nitem = {}, {} items/run, {} repeats, capacity {}",
        T::NAME,
        n,
        repeats,
        CAP
    );
    println!(
        "| implementation | min Mops/s | median Mops/s | max Mops/s \
         | ours push/pop ÷ this (median) | ours bulk ÷ this (median) |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (i, (name, _)) in impls.iter().enumerate() {
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} |",
            name,
            st[i].min,
            st[i].median,
            st[i].max,
            st[0].median / st[i].median,
            st[1].median / st[i].median
        );
    }
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let repeats = env_or("RING_BENCH_REPEATS", 7).max(1) as usize;
    let n = env_or("RING_BENCH_ITEMS", 20_000_000).max(1000);
    let cpus = allowed_cpus();
    let pinning = (cpus.len() >= 2).then(|| (cpus[0], cpus[1]));
    let model = read("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "?".into());
    println!("ring benchmark: two threads, interleaved runs");
    println!(
        "host: {} CPUs ({}), allowed CPUs {:?}, kernel {}, loadavg before: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        model,
        cpus,
        read("/proc/sys/kernel/osrelease"),
        read("/proc/loadavg")
    );
    match pinning {
        Some((p, c)) => println!("pinning: producer -> CPU {p}, consumer -> CPU {c}"),
        None => println!("pinning: off (fewer than 2 allowed CPUs)"),
    }
    let t = Instant::now();
    bench_item::<u64>(n, repeats, pinning);
    bench_item::<Msg64>(n / 2, repeats, pinning);
    println!(
        "\ntotal {:.1} s, loadavg after: {}",
        t.elapsed().as_secs_f64(),
        read("/proc/loadavg")
    );
}
