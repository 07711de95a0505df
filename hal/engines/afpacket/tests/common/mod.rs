//! Test helpers: configs from TOML with the pair's devices substituted in, leaked pools and
//! counters per queue, engines opened inside a namespace, sequence-numbered frames.
#![allow(dead_code)]

use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

use rtdaq_config::Config;
use rtdaq_core::traits::{EngineArgs, QueueResources, RxBurst, RxQueue, Segment, TxBurst, TxQueue};
use rtdaq_core::wire::seqhdr::FLAG_PATTERN;
use rtdaq_core::wire::{
    check_pattern, emit_udp_frame, fill_pattern, parse_frame, SeqHeader, UdpFrameSpec,
};
use rtdaq_core::{BufferPool, PacketMeta, QueueCounters};
use rtdaq_engine_afpacket::{
    AfpacketEngine, AfpacketError, AfpacketOptions, AfpacketRx, AfpacketTx,
};
use rtdaq_testbed::{Side, VethPair};

/// A pair, or a failed test that says why (not root, no `ip`).
pub fn pair(tag: &str) -> VethPair {
    VethPair::new(tag).unwrap_or_else(|e| panic!("afpacket tests need the namespace test bed: {e}"))
}

/// A pair with an MTU, static neighbours, or failure with the reason.
pub fn pair_mtu(tag: &str, mtu: u32) -> VethPair {
    VethPair::builder(tag)
        .mtu(mtu)
        .build()
        .unwrap_or_else(|e| panic!("afpacket tests need the namespace test bed: {e}"))
}

/// A pool of `count` slots of `slot` bytes, leaked for the test's lifetime.
pub fn pool(slot: usize, count: usize) -> &'static BufferPool<'static> {
    let mem: &'static mut [u8] = Box::leak(vec![0u8; slot * count].into_boxed_slice());
    let links: &'static mut [AtomicU32] =
        Box::leak((0..count).map(|_| AtomicU32::new(0)).collect::<Box<[_]>>());
    Box::leak(Box::new(BufferPool::new(mem, links, slot).unwrap()))
}

/// Everything `open` needs: each queue gets its own pools (one per region it lists, sized
/// like the region) and counters, all leaked.
pub struct Setup {
    pub config: &'static Config,
    pub rx: &'static [QueueResources<'static>],
    pub tx: &'static [QueueResources<'static>],
}

impl Setup {
    pub fn new(toml: &str) -> Setup {
        let config: &'static Config = Box::leak(Box::new(
            rtdaq_config::load_str(toml)
                .unwrap_or_else(|e| panic!("bad test config: {e:?}\n{toml}")),
        ));
        let res = |i: usize, j: usize, regions: &[rtdaq_config::model::RegionId]| {
            let pools: Vec<&'static BufferPool<'static>> = regions
                .iter()
                .map(|r| {
                    let r = config.region(*r);
                    pool(r.buf_size as usize, r.buf_count as usize)
                })
                .collect();
            QueueResources {
                interface: i,
                queue: j,
                pools: Box::leak(pools.into_boxed_slice()),
                counters: Box::leak(Box::new(QueueCounters::new())),
                wants: Default::default(),
            }
        };
        let mut rx = Vec::new();
        let mut tx = Vec::new();
        for (i, iface) in config.interfaces.iter().enumerate() {
            for (j, q) in iface.rx_queues.iter().enumerate() {
                rx.push(res(i, j, &q.memory_regions));
            }
            for (j, q) in iface.tx_queues.iter().enumerate() {
                tx.push(res(i, j, &q.memory_regions));
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

    /// Opens the engine in the calling thread's namespace.
    pub fn open<const N: usize>(&self) -> Result<AfpacketEngine<'static, N>, AfpacketError> {
        AfpacketEngine::open_with(self.args(), &AfpacketOptions::default())
    }

    /// Opens the engine inside `side`'s namespace (its sockets stay there).
    pub fn open_in<const N: usize>(
        &self,
        pair: &VethPair,
        side: Side,
    ) -> (Vec<AfpacketRx<'static, N>>, Vec<AfpacketTx<'static, N>>) {
        pair.in_ns(side, || self.open::<N>())
            .unwrap_or_else(|e| panic!("open failed: {e}"))
            .into_queues()
    }

    pub fn rx_counters(&self, k: usize) -> &'static QueueCounters {
        self.rx[k].counters
    }

    pub fn tx_counters(&self, k: usize) -> &'static QueueCounters {
        self.tx[k].counters
    }

    pub fn rx_pools(&self, k: usize) -> &'static [&'static BufferPool<'static>] {
        self.rx[k].pools
    }
}

/// Config header with `[engine.afpacket]` (blocks retire after 4 ms).
pub fn header(block_size: u32, block_count: u32, frame_size: u32, extra: &str) -> String {
    header_tov(block_size, block_count, frame_size, 4, extra)
}

/// Config header with `[engine.afpacket]` and an explicit `block_timeout_ms`.
///
/// A ring absorbs a stalled reader for about `block_count` × (the time a block takes to
/// fill, at most `block_timeout_ms`): the tests size it for a loaded 2-core CI host.
pub fn header_tov(
    block_size: u32,
    block_count: u32,
    frame_size: u32,
    tov_ms: u32,
    extra: &str,
) -> String {
    format!(
        "name = \"t\"\nplatform = \"host\"\n[engine]\nkind = \"afpacket\"\n[engine.afpacket]\nblock_size = {block_size}\nblock_count = {block_count}\nframe_size = {frame_size}\nblock_timeout_ms = {tov_ms}\n{extra}\n"
    )
}

/// One region.
pub fn region(name: &str, buf_size: usize, buf_count: usize) -> String {
    format!(
        "[[memory_regions]]\nname = \"{name}\"\nkind = \"host\"\nbuf_size = {buf_size}\nbuf_count = {buf_count}\n"
    )
}

/// One interface on network device `netdev`; `extra` adds keys (`default_action = "drop"`).
pub fn iface(name: &str, netdev: &str, mtu: u32, extra: &str) -> String {
    format!("[[interfaces]]\nname = \"{name}\"\naddress = \"{netdev}\"\nmtu = {mtu}\n{extra}\n")
}

/// One RX queue (direct mode, sleeping with `timeout_us`); `extra` adds keys.
pub fn rxq(id: u16, regions: &[&str], batch: u32, timeout_us: u32, extra: &str) -> String {
    let list: Vec<String> = regions.iter().map(|r| format!("\"{r}\"")).collect();
    format!(
        "[[interfaces.rx_queues]]\nid = {id}\ncpu_core = 0\nbatch_size = {batch}\ntimeout_us = {timeout_us}\nring_depth = 1024\nmemory_regions = [{}]\nmode = \"direct\"\n{extra}\n",
        list.join(", ")
    )
}

/// One TX queue.
pub fn txq(id: u16, region: &str, batch: u32, ring_depth: u32) -> String {
    format!(
        "[[interfaces.tx_queues]]\nid = {id}\ncpu_core = 0\nbatch_size = {batch}\nring_depth = {ring_depth}\nmemory_regions = [\"{region}\"]\n"
    )
}

/// One flow rule: `action` is `queue = 1`, `rss = [0, 1]` or `drop = true`; `matcher` the
/// `[flows.match]` body.
pub fn flow(iface: &str, id: u32, action: &str, matcher: &str) -> String {
    format!("[[flows]]\ninterface = \"{iface}\"\nid = {id}\n{action}\n[flows.match]\n{matcher}\n")
}

/// A TX-only config for `side`'s device (1 queue), standard geometry.
pub fn tx_config(pair: &VethPair, side: Side, mtu: u32, frame_size: u32, block_size: u32) -> Setup {
    let buf = (mtu + 22).next_power_of_two().max(2048) as usize;
    let mut s = header(block_size, 4, frame_size, "");
    s += &region("tx", buf, 128);
    s += &iface("a", pair.ifname(side), mtu, "");
    s += &txq(0, "tx", 64, 1024);
    Setup::new(&s)
}

/// UDP from `from` to its peer (addresses and MACs of the pair).
pub fn spec(
    pair: &VethPair,
    from: Side,
    sport: u16,
    dport: u16,
    payload_len: usize,
) -> UdpFrameSpec {
    UdpFrameSpec {
        src_mac: pair.mac(from),
        dst_mac: pair.mac(from.peer()),
        src_ip: pair.ip(from).octets(),
        dst_ip: pair.ip(from.peer()).octets(),
        src_port: sport,
        dst_port: dport,
        payload_len,
        ..UdpFrameSpec::default()
    }
}

/// Writes a frame carrying the rtdaq sequence header (`stream`, `seq`) and the pattern into
/// `buf`; returns its length.
pub fn seq_frame(buf: &mut [u8], s: &UdpFrameSpec, stream: u16, seq: u64) -> usize {
    let off = s.payload_offset();
    let h = SeqHeader {
        flags: FLAG_PATTERN,
        stream_id: stream,
        seq,
        tx_timestamp_ns: 0,
        payload_len: (s.payload_len - SeqHeader::LEN) as u32,
    };
    h.emit(&mut buf[off..]).unwrap();
    fill_pattern(
        stream,
        seq,
        &mut buf[off + SeqHeader::LEN..off + s.payload_len],
    );
    emit_udp_frame(buf, s).unwrap()
}

/// The (stream, seq, udp destination port) of a sequence frame whose pattern checks out.
pub fn check_seq_frame(frame: &[u8]) -> Option<(u16, u64, u16)> {
    let info = parse_frame(frame).ok()?;
    let payload = info.udp_payload(frame)?;
    let (h, rest) = SeqHeader::parse_with_payload(payload).ok()?;
    check_pattern(h.stream_id, h.seq, rest).then_some((h.stream_id, h.seq, info.udp?.dst_port))
}

/// Sends `n` frames built by `build(k, buf) -> len` on `tx` (one burst at a time), pacing
/// to `pps` packets/s when given; returns how many the queue accepted.
pub fn send_frames<const N: usize>(
    tx: &mut AfpacketTx<'static, N>,
    n: usize,
    pps: Option<f64>,
    mut build: impl FnMut(usize, &mut [u8]) -> usize,
) -> usize {
    let mut burst = tx.new_burst();
    let start = Instant::now();
    let deadline = start + Duration::from_secs(20);
    let (mut handed, mut accepted) = (0usize, 0usize);
    while handed < n {
        assert!(Instant::now() < deadline, "sending stalled at {handed}/{n}");
        let due = match pps {
            Some(r) => ((start.elapsed().as_secs_f64() * r) as usize + 1).min(n),
            None => n,
        };
        if due <= handed {
            std::thread::sleep(Duration::from_micros(20));
            continue;
        }
        let want = (due - handed).min(N).min(64);
        let got = tx.reserve(&mut burst, want);
        if got == 0 {
            std::thread::sleep(Duration::from_micros(50));
            continue;
        }
        for i in 0..got {
            let buf = TxBurst::packet_mut(&mut burst, i).unwrap();
            let len = build(handed + i, buf);
            TxBurst::set_len(&mut burst, i, len);
        }
        accepted += tx.send(&mut burst);
        handed += got;
    }
    assert!(
        tx.flush(Duration::from_secs(2)),
        "the TX ring did not drain"
    );
    accepted
}

/// A received packet, copied out for inspection: its segments and metadata.
#[derive(Debug, Clone)]
pub struct Got {
    pub segs: Vec<Vec<u8>>,
    pub meta: PacketMeta,
}

impl Got {
    /// All segments joined (the whole frame).
    pub fn frame(&self) -> Vec<u8> {
        self.segs.concat()
    }
}

/// Polls `rx` until `want` packets arrived or `quiet` passed without any; copies them out.
pub fn collect<const N: usize>(
    rx: &mut AfpacketRx<'static, N>,
    want: usize,
    quiet: Duration,
) -> Vec<Got> {
    let mut burst = rx.new_burst();
    let mut out = Vec::new();
    let mut last = Instant::now();
    while out.len() < want && last.elapsed() < quiet {
        if rx.poll(&mut burst) > 0 {
            last = Instant::now();
        }
        for p in 0..RxBurst::len(&burst) {
            let segs = (0..burst.segments(p))
                .map(|s| match burst.segment(p, s) {
                    Segment::Host(b) => b.to_vec(),
                    Segment::Device { .. } => panic!("device segment"),
                })
                .collect();
            out.push(Got {
                segs,
                meta: burst.meta(p),
            });
        }
        RxBurst::clear(&mut burst);
    }
    rx.sync_kernel_drops();
    out
}
