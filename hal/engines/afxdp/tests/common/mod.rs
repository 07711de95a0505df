//! Test helpers: root check, configs from TOML, page-aligned leaked pools (one per config
//! region, like the runtime), an AF_PACKET frame sender, frame builders.
#![allow(dead_code)]
// Tests may use raw libc calls (AF_PACKET, capabilities): the crate's own `unsafe` rule
// covers the library, not its test harness.
#![allow(unsafe_code)]

use std::alloc::Layout;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

use rtdaq_config::Config;
use rtdaq_core::traits::{EngineArgs, QueueResources, RxBurst, RxQueue};
use rtdaq_core::wire::{emit_udp_frame, fill_pattern, SeqHeader, UdpFrameSpec, VlanTag};
use rtdaq_core::{BufferPool, PacketMeta, QueueCounters};
use rtdaq_engine_afxdp::{AfxdpEngine, AfxdpError, AfxdpOptions, AfxdpRx};
use rtdaq_testbed::{Side, VethPair};

/// Fails the test with a clear message when not root (AF_XDP, BPF and namespaces need it).
pub fn require_root() {
    assert!(
        rtdaq_testbed::is_root(),
        "the AF_XDP engine tests need root (network namespaces, AF_XDP sockets, BPF programs): run them as root, e.g. `sudo -E cargo test -p rtdaq-engine-afxdp`, or `scripts/test.sh` as root"
    );
}

/// `len` bytes of page-aligned memory, leaked for the test's lifetime.
pub fn page_memory(len: usize) -> &'static mut [u8] {
    let layout = Layout::from_size_align(len, 4096).unwrap();
    // SAFETY: non-zero size; zeroed memory is a valid `[u8]`; leaked on purpose.
    unsafe {
        let p = std::alloc::alloc_zeroed(layout);
        assert!(!p.is_null());
        std::slice::from_raw_parts_mut(p, len)
    }
}

/// A pool of `count` slots of `slot` bytes over page-aligned memory, leaked.
pub fn pool(slot: usize, count: usize) -> &'static BufferPool<'static> {
    let mem = page_memory(slot * count);
    let links: &'static mut [AtomicU32] =
        Box::leak((0..count).map(|_| AtomicU32::new(0)).collect::<Box<[_]>>());
    Box::leak(Box::new(BufferPool::new(mem, links, slot).unwrap()))
}

/// Everything `open` needs: one pool per config region (queues naming a region share its
/// pool, as in the runtime), one counters block per queue, all leaked.
pub struct Setup {
    pub config: &'static Config,
    pub pools: Vec<&'static BufferPool<'static>>,
    pub rx: &'static [QueueResources<'static>],
    pub tx: &'static [QueueResources<'static>],
}

impl Setup {
    pub fn new(toml: &str) -> Setup {
        let config: &'static Config = Box::leak(Box::new(
            rtdaq_config::load_str(toml)
                .unwrap_or_else(|e| panic!("bad test config: {e:?}\n{toml}")),
        ));
        let pools: Vec<&'static BufferPool<'static>> = config
            .memory_regions
            .iter()
            .map(|r| pool(r.stride() as usize, r.buf_count as usize))
            .collect();
        let res = |i: usize, j: usize, regions: &[rtdaq_config::model::RegionId]| {
            let p: &'static [&'static BufferPool<'static>] =
                Box::leak(regions.iter().map(|r| pools[r.0]).collect::<Box<[_]>>());
            QueueResources {
                interface: i,
                queue: j,
                pools: p,
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
            pools,
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

    /// Opens the engine on the calling thread (it must be in the right namespace).
    pub fn open<const N: usize>(&self) -> Result<AfxdpEngine<'static, N>, AfxdpError> {
        AfxdpEngine::open_with(self.args(), &AfxdpOptions::default())
    }

    /// Opens the engine inside `side`'s namespace of `pair`.
    pub fn open_in<const N: usize>(
        &self,
        pair: &VethPair,
        side: Side,
    ) -> Result<AfxdpEngine<'static, N>, AfxdpError> {
        self.open_in_with(pair, side, &AfxdpOptions::default())
    }

    pub fn open_in_with<const N: usize>(
        &self,
        pair: &VethPair,
        side: Side,
        opts: &AfxdpOptions,
    ) -> Result<AfxdpEngine<'static, N>, AfxdpError> {
        let args = self.args();
        pair.in_ns(side, || AfxdpEngine::open_with(args, opts))
    }

    pub fn rx_counters(&self, k: usize) -> &'static QueueCounters {
        self.rx[k].counters
    }

    pub fn tx_counters(&self, k: usize) -> &'static QueueCounters {
        self.tx[k].counters
    }
}

/// Config header with the given `[engine.afxdp]` body.
pub fn header(afxdp: &str) -> String {
    format!(
        "name = \"t\"\nplatform = \"host\"\n[engine]\nkind = \"afxdp\"\n[engine.afxdp]\n{afxdp}\n"
    )
}

/// One host region.
pub fn region(name: &str, buf_size: usize, buf_count: usize) -> String {
    format!(
        "[[memory_regions]]\nname = \"{name}\"\nkind = \"host\"\nbuf_size = {buf_size}\nbuf_count = {buf_count}\n"
    )
}

/// An interface on netdev `ifname` (extra lines appended to its table).
pub fn interface(name: &str, ifname: &str, extra: &str) -> String {
    format!("[[interfaces]]\nname = \"{name}\"\naddress = \"{ifname}\"\n{extra}\n")
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

/// A flow rule on interface `iface`: `action` is `queue = 1`, `drop = true`, ...
pub fn flow(iface: &str, id: u32, action: &str, matches: &str) -> String {
    format!("[[flows]]\ninterface = \"{iface}\"\nid = {id}\n{action}\n[flows.match]\n{matches}\n")
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

/// A received frame: bytes and metadata.
pub type Got = (Vec<u8>, PacketMeta);

/// Polls `q` until `want` frames arrived or `limit` passed (then keeps polling `linger` more
/// to catch extras); returns them.
pub fn collect<const N: usize>(
    q: &mut AfxdpRx<'static, N>,
    want: usize,
    limit: Duration,
    linger: Duration,
) -> Vec<Got> {
    let mut burst = q.new_burst();
    let mut out = Vec::new();
    let mut take = |q: &mut AfxdpRx<'static, N>, out: &mut Vec<Got>| {
        q.poll(&mut burst);
        for i in 0..RxBurst::len(&burst) {
            out.push((burst.frame(i).unwrap().to_vec(), burst.meta(i)));
        }
        burst.clear();
    };
    until(limit, || {
        take(q, &mut out);
        out.len() >= want
    });
    let end = Instant::now() + linger;
    while Instant::now() < end {
        take(q, &mut out);
    }
    out
}

/// Addresses of a UDP frame from A to B over `pair` (optionally on a VLAN).
pub fn spec(pair: &VethPair, dport: u16, payload_len: usize, vlan: Option<u16>) -> UdpFrameSpec {
    UdpFrameSpec {
        dst_mac: pair.mac(Side::B),
        src_mac: pair.mac(Side::A),
        vlan: vlan.map(VlanTag::dot1q),
        src_ip: pair.ip(Side::A).octets(),
        dst_ip: pair.ip(Side::B).octets(),
        src_port: 40000,
        dst_port: dport,
        payload_len,
        ..UdpFrameSpec::default()
    }
}

/// A UDP frame carrying the rtdaq sequence header (stream 1, `seq`) and its pattern.
pub fn seq_frame(spec: &UdpFrameSpec, seq: u64) -> Vec<u8> {
    let mut f = vec![0u8; spec.frame_len()];
    let start = f.len() - spec.payload_len;
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

/// A raw AF_PACKET socket bound to one interface, for sending crafted frames.
pub struct PacketSender {
    fd: OwnedFd,
}

impl PacketSender {
    /// Opens it inside `side`'s namespace, bound to that side's veth.
    pub fn new(pair: &VethPair, side: Side) -> PacketSender {
        let ifindex = pair.ifindex(side);
        pair.in_ns(side, || PacketSender::open(ifindex)).unwrap()
    }

    fn open(ifindex: u32) -> io::Result<PacketSender> {
        // SAFETY: integer arguments.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_protocol = 0;
        sa.sll_ifindex = ifindex as i32;
        // SAFETY: valid address of the given size.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(PacketSender { fd })
    }

    /// Sends one frame (retrying while the device queue is full).
    pub fn send(&self, frame: &[u8]) {
        loop {
            // SAFETY: `frame` is valid for the call.
            let r =
                unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
            if r >= 0 {
                assert_eq!(r as usize, frame.len());
                return;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ENOBUFS) | Some(libc::EAGAIN) => {
                    std::thread::sleep(Duration::from_micros(50))
                }
                _ => panic!("AF_PACKET send of {} bytes failed: {e}", frame.len()),
            }
        }
    }
}
