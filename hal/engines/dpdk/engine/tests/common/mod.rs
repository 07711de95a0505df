//! Test helpers: root check, configs from TOML with leaked counters, frame builders.
//!
//! One EAL per test binary (DPDK initialises once per process): every test of a binary
//! uses the same `engine.dpdk.eal_args` and the same cores, so `open` derives the same EAL
//! arguments; each test uses its own vdev port (a closed vdev port cannot be reopened).
#![allow(dead_code)]

use std::time::{Duration, Instant};

use rtdaq_config::Config;
use rtdaq_core::traits::{EngineArgs, QueueResources, RxBurst, RxQueue, TxBurst, TxQueue};
use rtdaq_core::wire::{emit_udp_frame, fill_pattern, SeqHeader, UdpFrameSpec};
use rtdaq_core::{BufferPool, PacketMeta, QueueCounters};
use rtdaq_engine_dpdk::{DpdkEngine, DpdkEngineError, DpdkRx, DpdkTx};
use rtdaq_platform::memory::{Region, RegionSpec};
use std::sync::atomic::AtomicU32;

/// Fails the test with a clear message when not root (DPDK's EAL needs it here).
pub fn require_root() {
    assert!(
        rtdaq_testbed::is_root(),
        "the DPDK engine tests need root (the EAL maps memory and probes devices): run them as root, e.g. `sudo -E cargo test -p rtdaq-engine-dpdk`"
    );
}

/// A deployment config for one interface on DPDK port `port`, with `eal` as
/// `engine.dpdk.eal_args`, main core 0, RX queues on core 1, TX queues on core 0, `rx`/`tx` queues on region
/// "pkts", the UDP port 5000 rule → flow 7 on RX queue 0, unmatched frames dropped.
pub fn config_toml(
    eal: &[&str],
    port: &str,
    rx: usize,
    tx: usize,
    busy: bool,
    timeout_us: u32,
) -> String {
    let eal = eal
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let mut t = format!(
        r#"
name = "dpdk-test"
platform = "host"

[engine]
kind = "dpdk"

[engine.dpdk]
eal_args = [{eal}]
main_core = 0

[[memory_regions]]
name = "pkts"
kind = "host"
buf_size = 2048
buf_count = 2047

[[interfaces]]
name = "port0"
address = "{port}"
mtu = 1500
default_action = "drop"
"#
    );
    for j in 0..rx {
        t += &format!(
            r#"
[[interfaces.rx_queues]]
id = {j}
cpu_core = 1
batch_size = 64
timeout_us = {timeout_us}
ring_depth = 1024
memory_regions = ["pkts"]
busy_poll = {busy}
mode = "direct"
"#
        );
    }
    for j in 0..tx {
        t += &format!(
            r#"
[[interfaces.tx_queues]]
id = {j}
cpu_core = 0
batch_size = 64
ring_depth = 1024
memory_regions = ["pkts"]
"#
        );
    }
    if rx > 0 {
        t += r#"
[[flows]]
interface = "port0"
id = 7
queue = 0
[flows.match]
udp_dst = 5000
"#;
    }
    t += "\n[run]\nduration_s = 1\n\n[rt]\nrequired = false\n";
    t
}

/// Everything `open` needs: the config, one page-aligned buffer pool per memory region (as
/// the runtime builds them: `buf_count` slots of the region's stride) and one counters
/// block per queue, all leaked (`'static`, as the engine requires).
pub struct Setup {
    pub config: &'static Config,
    pub rx: &'static [QueueResources<'static>],
    pub tx: &'static [QueueResources<'static>],
    /// The runtime-side pool of each memory region (config order).
    pub pools: Vec<&'static BufferPool<'static>>,
}

/// A leaked `BufferPool` over a page-aligned, locked `host` region of region `r`'s
/// footprint (as the runtime builds it: `buf_count` slots of the region's stride).
pub fn region_pool(r: &rtdaq_config::model::MemoryRegion) -> &'static BufferPool<'static> {
    let region: &'static mut Region = Box::leak(Box::new(
        Region::allocate(&RegionSpec::host(&r.name, r.footprint() as usize)).unwrap(),
    ));
    let links: &'static mut [AtomicU32] =
        Box::leak((0..r.buf_count).map(|_| AtomicU32::new(0)).collect());
    let stride = r.stride() as usize;
    let mem = &mut region.as_mut_slice()[..stride * r.buf_count as usize];
    Box::leak(Box::new(BufferPool::new(mem, links, stride).unwrap()))
}

/// A leaked `BufferPool` standing in for a `device` region: memory the CPU cannot touch
/// (`PROT_NONE`: any read or write of a buffer kills the test with SIGSEGV), aligned to the
/// GPU page as `cuMemAlloc` memory of a device region is, with `buf_count` slots of the
/// region's stride. What the engine does with GPU memory it does here, except DMA.
pub fn untouchable_pool(r: &rtdaq_config::model::MemoryRegion) -> &'static BufferPool<'static> {
    use nix::sys::mman::{mmap_anonymous, MapFlags, ProtFlags};
    let page = rtdaq_dpdk_sys::GPU_PAGE;
    let len = r.footprint() as usize + page;
    // SAFETY: a fresh private anonymous mapping (no address hint), never unmapped: leaked
    // for the process like the pool over it.
    let base = unsafe {
        mmap_anonymous(
            None,
            std::num::NonZeroUsize::new(len).unwrap(),
            ProtFlags::PROT_NONE,
            MapFlags::MAP_PRIVATE | MapFlags::MAP_NORESERVE,
        )
    }
    .expect("mmap PROT_NONE");
    let addr = (base.as_ptr() as u64).div_ceil(page as u64) * page as u64;
    let links: &'static mut [AtomicU32] =
        Box::leak((0..r.buf_count).map(|_| AtomicU32::new(0)).collect());
    let stride = r.stride() as usize;
    let used = stride * r.buf_count as usize;
    Box::leak(Box::new(
        BufferPool::over_device_memory(addr, used, links, stride).unwrap(),
    ))
}

impl Setup {
    pub fn new(toml: &str) -> Setup {
        Setup::with_pools(toml, region_pool)
    }

    /// As [`new`](Self::new), with each region's pool from `pool`.
    pub fn with_pools(
        toml: &str,
        pool: fn(&rtdaq_config::model::MemoryRegion) -> &'static BufferPool<'static>,
    ) -> Setup {
        let config: &'static Config = Box::leak(Box::new(
            rtdaq_config::load_str(toml)
                .unwrap_or_else(|e| panic!("bad test config: {e:?}\n{toml}")),
        ));
        let pools: Vec<&'static BufferPool<'static>> =
            config.memory_regions.iter().map(pool).collect();
        let res = |i: usize, j: usize, regions: &[rtdaq_config::model::RegionId]| QueueResources {
            interface: i,
            queue: j,
            pools: Box::leak(
                regions
                    .iter()
                    .map(|r| pools[r.0])
                    .collect::<Vec<_>>()
                    .into_boxed_slice(),
            ),
            counters: Box::leak(Box::new(QueueCounters::new())),
            wants: Default::default(),
        };
        let mut rx = Vec::new();
        let mut tx = Vec::new();
        for (i, iface) in config.interfaces.iter().enumerate() {
            rx.extend(
                iface
                    .rx_queues
                    .iter()
                    .enumerate()
                    .map(|(j, q)| res(i, j, &q.memory_regions)),
            );
            tx.extend(
                iface
                    .tx_queues
                    .iter()
                    .enumerate()
                    .map(|(j, q)| res(i, j, &q.memory_regions)),
            );
        }
        Setup {
            config,
            rx: Box::leak(rx.into_boxed_slice()),
            tx: Box::leak(tx.into_boxed_slice()),
            pools,
        }
    }

    pub fn args(&self) -> EngineArgs<'static, Config> {
        EngineArgs {
            config: self.config,
            rx: self.rx,
            tx: self.tx,
        }
    }

    pub fn open(&self) -> Result<DpdkEngine<'static>, DpdkEngineError> {
        use rtdaq_core::traits::Engine;
        DpdkEngine::open(self.args())
    }
}

/// A UDP frame spec to `dport` with `payload_len` bytes of payload.
pub fn spec(dport: u16, payload_len: usize) -> UdpFrameSpec {
    UdpFrameSpec {
        dst_mac: [0x02, 0, 0, 0, 0, 2],
        src_mac: [0x02, 0, 0, 0, 0, 1],
        src_ip: [169, 254, 90, 1],
        dst_ip: [169, 254, 90, 2],
        src_port: 40000,
        dst_port: dport,
        payload_len,
        ..UdpFrameSpec::default()
    }
}

/// A UDP frame carrying the rtdaq sequence header (stream 1, `seq`) and its pattern.
pub fn seq_frame(spec: &UdpFrameSpec, seq: u64) -> Vec<u8> {
    let mut f = vec![0u8; spec.frame_len()];
    let start = spec.payload_offset();
    let payload = &mut f[start..];
    SeqHeader {
        flags: rtdaq_core::wire::seqhdr::FLAG_PATTERN,
        stream_id: 1,
        seq,
        tx_timestamp_ns: 0,
        payload_len: (spec.payload_len - SeqHeader::LEN) as u32,
    }
    .emit(payload)
    .unwrap();
    fill_pattern(1, seq, &mut payload[SeqHeader::LEN..]);
    let n = emit_udp_frame(&mut f, spec).unwrap();
    assert_eq!(n, f.len());
    f
}

/// Sends `frames` through `q` (one burst per 64); returns the frames accepted.
pub fn send_all(q: &mut DpdkTx<'_>, frames: &[Vec<u8>]) -> usize {
    let mut burst = q.new_burst();
    let mut sent = 0;
    for chunk in frames.chunks(64) {
        assert_eq!(
            q.reserve(&mut burst, chunk.len()),
            chunk.len(),
            "pool short"
        );
        for (i, f) in chunk.iter().enumerate() {
            burst.packet_mut(i).unwrap()[..f.len()].copy_from_slice(f);
            burst.set_len(i, f.len());
        }
        sent += q.send(&mut burst);
    }
    sent
}

/// Polls `q` until `want` frames came or `limit` passed; copies them out.
pub fn recv(q: &mut DpdkRx<'_>, want: usize, limit: Duration) -> Vec<(Vec<u8>, PacketMeta)> {
    let mut burst = q.new_burst();
    let mut out = Vec::new();
    let end = Instant::now() + limit;
    while out.len() < want && Instant::now() < end {
        q.poll(&mut burst);
        for i in 0..RxBurst::len(&burst) {
            let rtdaq_core::traits::Segment::Host(b) = burst.segment(i, 0) else {
                panic!("host segment expected")
            };
            out.push((b.to_vec(), burst.meta(i)));
        }
        burst.clear();
    }
    out
}
