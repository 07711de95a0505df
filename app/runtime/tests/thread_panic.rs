//! A queue thread that panics fails the run: the run stops, the results name the thread and
//! its panic, the report says so (`failed_threads`, a `FAILED:` line) and its exit code is 1,
//! whatever the counts. Each test runs the default loopback deployment over the real socket
//! engine, wrapped so that one chosen thread panics after a number of packets: the RX I/O
//! thread (in `poll`), the consumer (reading a packet of a burst) or the generator (in
//! `send`).

use rtdaq_config::Config;
use rtdaq_core::meta::PacketMeta;
use rtdaq_core::traits::{Engine, EngineArgs, RxBurst, RxQueue, Segment, TxQueue};
use rtdaq_engine_socket::SocketEngine;
use rtdaq_runtime::{outcome, run, Identity, RunOptions};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Mutex;

/// Runs are serialised (one port, two cores).
static SERIAL: Mutex<()> = Mutex::new(());

/// Which thread panics: 0 none, then one of the constants below.
static PANIC_IN: AtomicU8 = AtomicU8::new(0);
const IO: u8 = 1;
const CONSUMER: u8 = 2;
const GENERATOR: u8 = 3;
/// Packets the faulty thread handles before it panics.
const AFTER: u64 = 2000;
static SEEN: AtomicU64 = AtomicU64::new(0);

fn trip(site: u8, n: u64) {
    if PANIC_IN.load(Relaxed) == site && SEEN.fetch_add(n, Relaxed) + n >= AFTER {
        panic!("injected fault in the test's {}", name(site));
    }
}

fn name(site: u8) -> &'static str {
    match site {
        IO => "RX poll",
        CONSUMER => "burst read",
        _ => "TX send",
    }
}

struct Faulty(SocketEngine<'static>);
struct FaultyRx(<SocketEngine<'static> as Engine<'static>>::Rx);
struct FaultyTx(<SocketEngine<'static> as Engine<'static>>::Tx);
struct FaultyBurst(<<SocketEngine<'static> as Engine<'static>>::Rx as RxQueue>::Burst);

impl Engine<'static> for Faulty {
    const NAME: &'static str = "socket";
    const FRAMES: bool = false;
    type Config = EngineArgs<'static, Config>;
    type Rx = FaultyRx;
    type Tx = FaultyTx;
    type Error = <SocketEngine<'static> as Engine<'static>>::Error;
    fn open(cfg: Self::Config) -> Result<Self, Self::Error> {
        SocketEngine::open(cfg).map(Faulty)
    }
    fn split(self, rx: &mut dyn FnMut(FaultyRx), tx: &mut dyn FnMut(FaultyTx)) {
        self.0
            .split(&mut |q| rx(FaultyRx(q)), &mut |q| tx(FaultyTx(q)));
    }
}

impl RxQueue for FaultyRx {
    type Burst = FaultyBurst;
    fn new_burst(&self) -> FaultyBurst {
        FaultyBurst(self.0.new_burst())
    }
    fn poll(&mut self, burst: &mut FaultyBurst) -> usize {
        let n = self.0.poll(&mut burst.0);
        trip(IO, n as u64);
        n
    }
}

impl RxBurst for FaultyBurst {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn segments(&self, pkt: usize) -> usize {
        self.0.segments(pkt)
    }
    fn segment(&self, pkt: usize, seg: usize) -> Segment<'_> {
        self.0.segment(pkt, seg)
    }
    fn meta(&self, pkt: usize) -> PacketMeta {
        // The I/O thread reads metadata too (counting `ring_full` drops once the dead
        // consumer leaves the ring full): only the consumer thread trips.
        if std::thread::current()
            .name()
            .is_some_and(|n| n.ends_with("-cons"))
        {
            trip(CONSUMER, 1);
        }
        self.0.meta(pkt)
    }
    fn clear(&mut self) {
        self.0.clear();
    }
}

impl TxQueue for FaultyTx {
    type Burst = <<SocketEngine<'static> as Engine<'static>>::Tx as TxQueue>::Burst;
    fn new_burst(&self) -> Self::Burst {
        self.0.new_burst()
    }
    fn reserve(&mut self, burst: &mut Self::Burst, n: usize) -> usize {
        self.0.reserve(burst, n)
    }
    fn send(&mut self, burst: &mut Self::Burst) -> usize {
        let n = self.0.send(burst);
        trip(GENERATOR, n as u64);
        n
    }
}

/// The default deployment on a free port, `secs` long.
fn config(secs: u32) -> &'static Config {
    // The repository root at run time (`RTDAQ_ROOT`, else above the current directory:
    // cargo runs the test in the crate's directory), so the binary works from any checkout.
    let root = std::env::var_os("RTDAQ_ROOT").map_or_else(
        || {
            let here = std::env::current_dir().unwrap();
            here.ancestors()
                .find(|d| d.join("configs/host-loopback-udp.toml").is_file())
                .unwrap_or(&here)
                .to_path_buf()
        },
        std::path::PathBuf::from,
    );
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let text = std::fs::read_to_string(root.join("configs/host-loopback-udp.toml"))
        .unwrap()
        .replace("127.0.0.1:5000", &format!("127.0.0.1:{port}"))
        .replace("duration_s = 10", &format!("duration_s = {secs}"));
    Box::leak(Box::new(
        rtdaq_config::load_str(&text).expect("valid config"),
    ))
}

fn identity() -> Identity {
    Identity {
        engine: "socket",
        platform: "host",
        version: "test",
        config_sha256: String::new(),
    }
}

/// Runs the deployment with a panic injected at `site`; returns the results' failures, the
/// report's exit code and its text.
fn run_with_panic_in(site: u8) -> (Vec<(String, String)>, u8, String, f64) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    SEEN.store(0, Relaxed);
    PANIC_IN.store(site, Relaxed);
    let config = config(20);
    let results = run::<Faulty>(config, &RunOptions::default()).expect("the run starts");
    PANIC_IN.store(0, Relaxed);
    let report = outcome::build(config, &identity(), &results);
    let failed = results
        .failed_threads
        .iter()
        .map(|f| (f.thread.clone(), f.panic.clone()))
        .collect();
    (
        failed,
        report.exit_code,
        report.to_string(),
        results.elapsed_s,
    )
}

#[test]
fn a_panicking_rx_io_thread_fails_and_stops_the_run() {
    let (failed, code, text, elapsed) = run_with_panic_in(IO);
    assert_eq!(
        failed,
        vec![(
            "lo_udp.rx0 I/O thread".to_string(),
            "injected fault in the test's RX poll".to_string()
        )],
        "{text}"
    );
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("FAILED: queue thread lo_udp.rx0 I/O thread panicked: injected fault"),
        "{text}"
    );
    assert!(text.contains(": FAIL · exit code 1"), "{text}");
    // The run stopped at the crash, not at its 20 s duration.
    assert!(elapsed < 10.0, "ran {elapsed} s after the crash");
}

#[test]
fn a_panicking_consumer_fails_and_stops_the_run() {
    let (failed, code, text, elapsed) = run_with_panic_in(CONSUMER);
    assert_eq!(failed.len(), 1, "{text}");
    assert_eq!(failed[0].0, "lo_udp.rx0 consumer", "{text}");
    assert_eq!(failed[0].1, "injected fault in the test's burst read");
    assert_eq!(code, 1, "{text}");
    assert!(elapsed < 10.0, "ran {elapsed} s after the crash");
}

#[test]
fn a_panicking_generator_fails_the_run() {
    let (failed, code, text, elapsed) = run_with_panic_in(GENERATOR);
    assert_eq!(
        failed,
        vec![(
            "lo_udp.tx0 generator".to_string(),
            "injected fault in the test's TX send".to_string()
        )],
        "{text}"
    );
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("FAILED: queue thread lo_udp.tx0 generator panicked"),
        "{text}"
    );
    assert!(elapsed < 10.0, "ran {elapsed} s after the crash");
}

#[test]
fn without_a_panic_the_run_passes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    PANIC_IN.store(0, Relaxed);
    let config = config(1);
    let results = run::<Faulty>(config, &RunOptions::default()).expect("the run starts");
    let report = outcome::build(config, &identity(), &results);
    assert!(results.failed_threads.is_empty());
    assert_eq!(report.exit_code, 0, "{report}");
}
