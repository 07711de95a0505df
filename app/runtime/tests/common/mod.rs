//! The default loopback deployment over the real socket engine, wrapped so that a test can
//! make one chosen thread panic after a number of packets (the RX I/O thread in `poll`, the
//! consumer reading a packet of a burst, the generator in `send`) or make the consumer stall
//! once. Shared by the tests of this directory; each uses a part of it.
#![allow(dead_code)]

use rtdaq_config::Config;
use rtdaq_core::meta::PacketMeta;
use rtdaq_core::traits::{Engine, EngineArgs, RxBurst, RxQueue, Segment, TxQueue};
use rtdaq_engine_socket::SocketEngine;
use rtdaq_runtime::Identity;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Mutex;

/// Runs are serialised (one port, two cores).
pub static SERIAL: Mutex<()> = Mutex::new(());

/// Which thread panics: 0 none, then one of the constants below.
pub static PANIC_IN: AtomicU8 = AtomicU8::new(0);
pub const IO: u8 = 1;
pub const CONSUMER: u8 = 2;
pub const GENERATOR: u8 = 3;
/// Packets the faulty thread handles before it panics (or the consumer stalls).
pub static AFTER: AtomicU64 = AtomicU64::new(2000);
pub static SEEN: AtomicU64 = AtomicU64::new(0);
/// When non-zero: the consumer sleeps this many ms once, after `AFTER` packets.
pub static STALL_CONSUMER_MS: AtomicU64 = AtomicU64::new(0);

fn trip(site: u8, n: u64) {
    if PANIC_IN.load(Relaxed) == site && SEEN.fetch_add(n, Relaxed) + n >= AFTER.load(Relaxed) {
        panic!("injected fault in the test's {}", name(site));
    }
    let ms = STALL_CONSUMER_MS.load(Relaxed);
    if site == CONSUMER
        && ms > 0
        && SEEN.fetch_add(n, Relaxed) + n >= AFTER.load(Relaxed)
        && STALL_CONSUMER_MS
            .compare_exchange(ms, 0, Relaxed, Relaxed)
            .is_ok()
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

fn name(site: u8) -> &'static str {
    match site {
        IO => "RX poll",
        CONSUMER => "burst read",
        _ => "TX send",
    }
}

pub struct Faulty(SocketEngine<'static>);
pub struct FaultyRx(<SocketEngine<'static> as Engine<'static>>::Rx);
pub struct FaultyTx(<SocketEngine<'static> as Engine<'static>>::Tx);
pub struct FaultyBurst(<<SocketEngine<'static> as Engine<'static>>::Rx as RxQueue>::Burst);

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
    fn holds_backlog(&self) -> bool {
        self.0.holds_backlog()
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
pub fn config(secs: u32) -> &'static Config {
    config_with(secs, &[])
}

/// The default deployment on a free port, `secs` long, with each `(from, to)` text replaced
/// in its TOML (each `from` must occur).
pub fn config_with(secs: u32, edits: &[(&str, &str)]) -> &'static Config {
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
    let text = edits.iter().fold(text, |t, (from, to)| {
        assert!(t.contains(from), "{from} not in the default config");
        t.replace(from, to)
    });
    Box::leak(Box::new(
        rtdaq_config::load_str(&text).expect("valid config"),
    ))
}

pub fn identity() -> Identity {
    Identity {
        engine: "socket",
        platform: "host",
        version: "test",
        config_sha256: String::new(),
    }
}
