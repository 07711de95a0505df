//! Test helpers: configs from TOML, leaked pools and counters per queue, free loopback ports.
#![allow(dead_code)]

use std::net::{TcpListener, UdpSocket};
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

use rtdaq_config::Config;
use rtdaq_core::traits::{EngineArgs, QueueResources};
use rtdaq_core::{BufferPool, QueueCounters};
use rtdaq_engine_socket::{SocketEngine, SocketError, SocketOptions};

/// A pool of `count` slots of `slot` bytes, leaked for the test's lifetime.
pub fn pool(slot: usize, count: usize) -> &'static BufferPool<'static> {
    let mem: &'static mut [u8] = Box::leak(vec![0u8; slot * count].into_boxed_slice());
    let links: &'static mut [AtomicU32] =
        Box::leak((0..count).map(|_| AtomicU32::new(0)).collect::<Box<[_]>>());
    Box::leak(Box::new(BufferPool::new(mem, links, slot).unwrap()))
}

/// Everything `open` needs, one pool and one counters block per queue, all leaked.
pub struct Setup {
    pub config: &'static Config,
    pub rx: &'static [QueueResources<'static>],
    pub tx: &'static [QueueResources<'static>],
}

impl Setup {
    /// Parses `toml`; every queue gets a pool of `count` × `slot` bytes.
    pub fn new(toml: &str, slot: usize, count: usize) -> Setup {
        let config: &'static Config = Box::leak(Box::new(
            rtdaq_config::load_str(toml)
                .unwrap_or_else(|e| panic!("bad test config: {e:?}\n{toml}")),
        ));
        let mut rx = Vec::new();
        let mut tx = Vec::new();
        for (i, iface) in config.interfaces.iter().enumerate() {
            for j in 0..iface.rx_queues.len() {
                rx.push(res(i, j, slot, count));
            }
            for j in 0..iface.tx_queues.len() {
                tx.push(res(i, j, slot, count));
            }
        }
        Setup {
            config,
            rx: Box::leak(rx.into_boxed_slice()),
            tx: Box::leak(tx.into_boxed_slice()),
        }
    }

    pub fn args(&self) -> EngineArgs<'static, Config> {
        EngineArgs {
            config: self.config,
            rx: self.rx,
            tx: self.tx,
        }
    }

    pub fn open<const N: usize>(&self) -> Result<SocketEngine<'static, N>, SocketError> {
        SocketEngine::open_with(self.args(), &SocketOptions::default())
    }

    pub fn open_with<const N: usize>(
        &self,
        opts: &SocketOptions,
    ) -> Result<SocketEngine<'static, N>, SocketError> {
        SocketEngine::open_with(self.args(), opts)
    }

    pub fn rx_pool(&self, k: usize) -> &'static BufferPool<'static> {
        self.rx[k].pools[0]
    }

    pub fn rx_counters(&self, k: usize) -> &'static QueueCounters {
        self.rx[k].counters
    }

    pub fn tx_counters(&self, k: usize) -> &'static QueueCounters {
        self.tx[k].counters
    }
}

fn res(i: usize, j: usize, slot: usize, count: usize) -> QueueResources<'static> {
    let pools: &'static [&'static BufferPool<'static>] = Box::leak(Box::new([pool(slot, count)]));
    QueueResources {
        interface: i,
        queue: j,
        pools,
        counters: Box::leak(Box::new(QueueCounters::new())),
        wants: Default::default(),
    }
}

/// A UDP port free on 127.0.0.1 right now.
pub fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A TCP port free on 127.0.0.1 right now.
pub fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Config header: name, platform, `[engine]` with the given `[engine.socket]` body.
pub fn header(socket: &str) -> String {
    format!(
        "name = \"t\"\nplatform = \"host\"\n[engine]\nkind = \"socket\"\n[engine.socket]\n{socket}\n"
    )
}

/// One region named `name`.
pub fn region(name: &str, buf_size: usize, buf_count: usize) -> String {
    format!(
        "[[memory_regions]]\nname = \"{name}\"\nkind = \"host\"\nbuf_size = {buf_size}\nbuf_count = {buf_count}\n"
    )
}

/// One RX queue (direct mode, sleeping with `timeout_us`).
pub fn rxq(id: u16, region: &str, batch: u32, timeout_us: u32) -> String {
    format!(
        "[[interfaces.rx_queues]]\nid = {id}\ncpu_core = 0\nbatch_size = {batch}\ntimeout_us = {timeout_us}\nring_depth = 1024\nmemory_regions = [\"{region}\"]\nmode = \"direct\"\n"
    )
}

/// One TX queue.
pub fn txq(id: u16, region: &str, batch: u32) -> String {
    format!(
        "[[interfaces.tx_queues]]\nid = {id}\ncpu_core = 0\nbatch_size = {batch}\nring_depth = 1024\nmemory_regions = [\"{region}\"]\n"
    )
}

/// Polls `f` until it returns true or `limit` passes.
pub fn until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if f() {
            return true;
        }
    }
    false
}

/// A small deterministic PRNG (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Fills `buf` with a pattern derived from `tag`.
pub fn fill(buf: &mut [u8], tag: u64) {
    let mut r = Rng(tag.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    for chunk in buf.chunks_mut(8) {
        let v = r.next().to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

/// The pattern `fill` writes.
pub fn pattern(len: usize, tag: u64) -> Vec<u8> {
    let mut v = vec![0u8; len];
    fill(&mut v, tag);
    v
}
