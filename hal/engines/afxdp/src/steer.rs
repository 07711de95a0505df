//! The XDP steering program (`bpf/steer.c`) from the Rust side: the `#[repr(C)]` mirrors of
//! its map values, the translation of the config's flow rules into them, the Toeplitz
//! table, loading and attaching, and reading its drop counters.
//!
//! See the program's header comment and `docs/engines/afxdp.md` for what it does. The rule
//! language is all of [`FlowMatch`]: [`compile_rule`] destructures it exhaustively, so a new
//! match field cannot be added to `rtdaq-core` without deciding here how the program
//! expresses it.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use rtdaq_core::flow::{
    toeplitz_hash, DefaultAction, FlowAction, FlowMatch, FlowRule, WordBase, WordMatch,
    RSS_KEY_SYMMETRIC,
};

use crate::sys::bpf::{self, XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE};
use crate::sys::BpfObject;

/// The compiled program (built by `build.rs` from `bpf/steer.c`).
static STEER_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/steer.bpf.o"));

/// Entries of the program's XSKMAP: the most RX queues one interface may have.
pub const MAX_QUEUES: usize = 64;
/// Entries of the rule map (= `rtdaq_config::MAX_FLOWS_PER_INTERFACE`).
pub(crate) const MAX_RULES: usize = 64;
/// Queues one RSS rule may list in the program (= `rtdaq_core::flow::MAX_RSS_QUEUES`).
const MAX_RSS: usize = 32;
/// Bytes of the RSS hash input (src ip, dst ip, src port, dst port).
const RSS_BYTES: usize = 12;

/// `steer_cfg.mode`: redirect by NIC queue (no rules).
const MODE_PER_QUEUE: u32 = 0;
/// `steer_cfg.mode`: classify with the rules; every XSK on one NIC queue.
const MODE_STEER: u32 = 1;
/// "Drop" as a default queue.
const QUEUE_NONE: u32 = u32::MAX;

const F_ETHERTYPE: u32 = 1 << 0;
const F_VLAN: u32 = 1 << 1;
const F_IPV4_SRC: u32 = 1 << 2;
const F_IPV4_DST: u32 = 1 << 3;
const F_TOTAL_LEN: u32 = 1 << 4;
const F_UDP_SRC: u32 = 1 << 5;
const F_UDP_DST: u32 = 1 << 6;
const F_ECPRI: u32 = 1 << 7;
const F_WORD_FRAME: u32 = 1 << 8;
const F_WORD_UDP: u32 = 1 << 9;

const ACT_QUEUE: u32 = 0;
const ACT_RSS: u32 = 1;
const ACT_DROP: u32 = 2;

/// Indices of the program's per-CPU counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Stat {
    /// Unmatched, default drop: passed to the kernel.
    NoFlow = 0,
    /// A drop rule matched: `XDP_DROP`.
    FlowDrop = 1,
    /// Arrived on a NIC queue with no XSK of ours: passed to the kernel.
    OtherQueue = 2,
    /// The target queue had no XSK (closed): passed to the kernel.
    NoXsk = 3,
    /// Did not parse: redirected to the fallback queue (userspace counts it `malformed`).
    Malformed = 4,
    /// Redirected to an XSK.
    Redirected = 5,
}

/// Number of [`Stat`]s.
pub(crate) const STATS: usize = 6;

/// Mirror of `struct steer_cfg`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct SteerCfg {
    mode: u32,
    steer_qid: u32,
    n_rules: u32,
    default_queue: u32,
    fallback_queue: u32,
    pad: u32,
}

/// Mirror of `struct steer_rule`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SteerRule {
    fields: u32,
    flow_id: u32,
    ethertype: u16,
    vlan_id: u16,
    src_addr: u32,
    src_mask: u32,
    dst_addr: u32,
    dst_mask: u32,
    total_len: u16,
    ecpri_type: u8,
    pad0: u8,
    sport_lo: u16,
    sport_hi: u16,
    dport_lo: u16,
    dport_hi: u16,
    word_off: u32,
    word_value: u32,
    word_mask: u32,
    action: u32,
    queue: u32,
    rss_n: u32,
    rss_queues: [u32; MAX_RSS],
}

const _: () = assert!(std::mem::size_of::<SteerCfg>() == 24);
const _: () = assert!(std::mem::size_of::<SteerRule>() == 64 + 4 * MAX_RSS);

/// How the program sends frames to XSKs on one interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steering {
    /// No flow rules and a default queue: RX queue `k` is bound to NIC queue `k` and gets
    /// whatever the NIC (RSS, ntuple rules) puts there.
    NicQueue,
    /// Flow rules (or default drop): every RX queue is bound to NIC queue 0, sharing one
    /// UMEM, and the XDP program picks the queue by the rules.
    Xdp,
}

/// Where the XDP program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    /// In the driver (`XDP_FLAGS_DRV_MODE`).
    Native,
    /// Generic XDP after the skb is built (`XDP_FLAGS_SKB_MODE`).
    Generic,
}

impl XdpMode {
    /// `"native"` / `"generic (SKB)"`, for log lines.
    pub fn as_str(self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Generic => "generic (SKB)",
        }
    }
}

/// Translates one flow rule. Every [`FlowMatch`] field is expressible.
pub(crate) fn compile_rule(rule: &FlowRule) -> SteerRule {
    let FlowMatch {
        ethertype,
        vlan_id,
        ipv4_src,
        ipv4_dst,
        ipv4_total_len,
        udp_src,
        udp_dst,
        ecpri_msg_type,
        word,
    } = rule.matcher;
    let mut r = SteerRule {
        flow_id: rule.id.0,
        ..SteerRule::default()
    };
    if let Some(e) = ethertype {
        r.fields |= F_ETHERTYPE;
        r.ethertype = e;
    }
    if let Some(v) = vlan_id {
        r.fields |= F_VLAN;
        r.vlan_id = v & 0x0fff;
    }
    if let Some(p) = ipv4_src {
        r.fields |= F_IPV4_SRC;
        r.src_mask = p.mask();
        r.src_addr = u32::from_be_bytes(p.addr) & p.mask();
    }
    if let Some(p) = ipv4_dst {
        r.fields |= F_IPV4_DST;
        r.dst_mask = p.mask();
        r.dst_addr = u32::from_be_bytes(p.addr) & p.mask();
    }
    if let Some(t) = ipv4_total_len {
        r.fields |= F_TOTAL_LEN;
        r.total_len = t;
    }
    if let Some(p) = udp_src {
        r.fields |= F_UDP_SRC;
        (r.sport_lo, r.sport_hi) = (p.lo, p.hi);
    }
    if let Some(p) = udp_dst {
        r.fields |= F_UDP_DST;
        (r.dport_lo, r.dport_hi) = (p.lo, p.hi);
    }
    if let Some(t) = ecpri_msg_type {
        r.fields |= F_ECPRI;
        r.ecpri_type = t;
    }
    if let Some(WordMatch {
        base,
        offset,
        value,
        mask,
    }) = word
    {
        r.fields |= match base {
            WordBase::Frame => F_WORD_FRAME,
            WordBase::UdpPayload => F_WORD_UDP,
        };
        r.word_off = u32::from(offset);
        r.word_mask = mask;
        r.word_value = value & mask;
    }
    match &rule.action {
        FlowAction::Queue(q) => {
            r.action = ACT_QUEUE;
            r.queue = u32::from(q.0);
        }
        FlowAction::Rss(qs) => {
            r.action = ACT_RSS;
            r.rss_n = qs.len().min(MAX_RSS) as u32;
            for (d, q) in r.rss_queues.iter_mut().zip(qs.iter()) {
                *d = u32::from(q.0);
            }
        }
        FlowAction::Drop => r.action = ACT_DROP,
    }
    r
}

/// `rss_tbl[i * 256 + b]`: the symmetric-key Toeplitz hash of a 12-byte input that is zero
/// except byte `i` = `b`. The hash is linear over XOR, so the program gets the hash of any
/// input as the XOR of 12 lookups, equal to [`rtdaq_core::flow::hash_ipv4_udp`].
pub(crate) fn rss_table() -> Vec<u32> {
    let mut t = vec![0u32; RSS_BYTES * 256];
    let mut input = [0u8; RSS_BYTES];
    for i in 0..RSS_BYTES {
        for b in 0..256usize {
            input[i] = b as u8;
            t[i * 256 + b] = toeplitz_hash(&RSS_KEY_SYMMETRIC, &input);
        }
        input[i] = 0;
    }
    t
}

/// What to program into one interface's instance.
#[derive(Debug)]
pub(crate) struct SteerSetup<'r> {
    /// Interface index.
    pub(crate) ifindex: u32,
    /// Mode.
    pub(crate) steering: Steering,
    /// The interface's rules in order.
    pub(crate) rules: &'r [FlowRule],
    /// The default action.
    pub(crate) default: DefaultAction,
    /// Queue that gets malformed frames and counts the program's drops.
    pub(crate) fallback: u16,
    /// (queue index, XSK descriptor) of every RX queue.
    pub(crate) xsks: Vec<(u32, BorrowedFd<'r>)>,
    /// Where to attach: `None` tries native, then generic.
    pub(crate) mode: Option<XdpMode>,
    /// Multi-buffer frames (`XDP_USE_SG` sockets): load the program frags-aware.
    pub(crate) frags: bool,
}

/// One loaded and attached instance of the steering program. Detached when dropped (the
/// link closes first, then the object with its maps).
#[derive(Debug)]
pub(crate) struct XdpProgram {
    link: Option<OwnedFd>,
    obj: BpfObject,
    mode: XdpMode,
}

/// Which step of [`XdpProgram::attach`] failed.
#[derive(Debug)]
pub(crate) struct SteerError {
    /// What was being done.
    pub(crate) what: &'static str,
    /// The OS error.
    pub(crate) source: io::Error,
}

fn step(what: &'static str) -> impl FnOnce(io::Error) -> SteerError {
    move |source| SteerError { what, source }
}

impl XdpProgram {
    /// Loads the program, fills its maps from `s` and attaches it (native mode first, then
    /// generic). Cold path.
    pub(crate) fn attach(s: &SteerSetup<'_>) -> Result<Arc<XdpProgram>, SteerError> {
        let obj = BpfObject::load(STEER_OBJ, s.frags).map_err(step(
            "load the XDP program into the kernel (libbpf prints the verifier log above)",
        ))?;
        let cfg = SteerCfg {
            mode: match s.steering {
                Steering::NicQueue => MODE_PER_QUEUE,
                Steering::Xdp => MODE_STEER,
            },
            steer_qid: 0,
            n_rules: s.rules.len().min(MAX_RULES) as u32,
            default_queue: match s.default {
                DefaultAction::Queue(q) => u32::from(q.0),
                DefaultAction::Drop => QUEUE_NONE,
            },
            fallback_queue: u32::from(s.fallback),
            pad: 0,
        };
        let map = |name: &CStr| obj.map(name).map_err(step("find a map of the XDP program"));
        bpf::map_update(map(c"cfg")?, &0u32, &cfg)
            .map_err(step("write the XDP program's settings"))?;
        let rules = map(c"rules")?;
        for (i, r) in s.rules.iter().take(MAX_RULES).enumerate() {
            bpf::map_update(rules, &(i as u32), &compile_rule(r))
                .map_err(step("write the XDP program's flow rules"))?;
        }
        let rss = map(c"rss_tbl")?;
        for (i, h) in rss_table().iter().enumerate() {
            bpf::map_update(rss, &(i as u32), h)
                .map_err(step("write the XDP program's RSS table"))?;
        }
        let xsks = map(c"xsks")?;
        for (k, fd) in &s.xsks {
            bpf::map_update(xsks, k, &(fd.as_raw_fd() as u32))
                .map_err(step("insert an AF_XDP socket into the XSKMAP"))?;
        }
        let prog = obj
            .program(c"rtdaq_steer")
            .map_err(step("find the XDP program"))?;
        let attach = |m: XdpMode| {
            let flags = match m {
                XdpMode::Native => XDP_FLAGS_DRV_MODE,
                XdpMode::Generic => XDP_FLAGS_SKB_MODE,
            };
            bpf::xdp_link(prog, s.ifindex, flags).map(|l| (l, m))
        };
        let (link, mode) = match s.mode {
            Some(m) => attach(m),
            None => attach(XdpMode::Native).or_else(|native| {
                log::debug!("native XDP refused ({native}); trying generic mode");
                attach(XdpMode::Generic)
            }),
        }
        .map_err(step("attach the XDP program"))?;
        Ok(Arc::new(XdpProgram {
            link: Some(link),
            obj,
            mode,
        }))
    }

    /// Where the program runs.
    pub(crate) fn mode(&self) -> XdpMode {
        self.mode
    }

    /// The per-CPU counter map.
    pub(crate) fn stats_map(&self) -> io::Result<BorrowedFd<'_>> {
        self.obj.map(c"stats")
    }
}

impl Drop for XdpProgram {
    fn drop(&mut self) {
        // Detach before the object (and its maps) go away.
        drop(self.link.take());
    }
}

/// Reads the program's per-CPU counters (summed over CPUs) without allocating: owns its
/// per-CPU buffer, sized at open from `/sys/devices/system/cpu/possible`.
#[derive(Debug)]
pub(crate) struct StatsReader {
    prog: Arc<XdpProgram>,
    percpu: Box<[u64]>,
}

impl StatsReader {
    /// A reader for `prog`. Cold path.
    pub(crate) fn new(prog: Arc<XdpProgram>) -> io::Result<StatsReader> {
        let n = possible_cpus()?;
        Ok(StatsReader {
            prog,
            percpu: vec![0u64; n].into_boxed_slice(),
        })
    }

    /// Current totals, indexed by [`Stat`]. `STATS` syscalls; never allocates.
    pub(crate) fn read(&mut self) -> io::Result<[u64; STATS]> {
        let fd = self.prog.stats_map()?;
        let mut out = [0u64; STATS];
        for (k, o) in out.iter_mut().enumerate() {
            bpf::map_lookup_percpu_u64(fd, k as u32, &mut self.percpu)?;
            *o = self.percpu.iter().fold(0u64, |a, &v| a.wrapping_add(v));
        }
        Ok(out)
    }
}

/// Number of possible CPUs (`/sys/devices/system/cpu/possible`, e.g. `0-3` or `0,2-5`).
fn possible_cpus() -> io::Result<usize> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    parse_cpu_list(s.trim()).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidData))
}

/// The highest CPU number + 1 of a list such as `0-3,8`.
fn parse_cpu_list(s: &str) -> Option<usize> {
    let mut max = None;
    for part in s.split(',') {
        let hi = part.rsplit('-').next()?.trim().parse::<usize>().ok()?;
        max = Some(max.map_or(hi, |m: usize| m.max(hi)));
    }
    max.map(|m| m + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtdaq_core::flow::{hash_ipv4_udp, Ipv4Prefix, PortRange};
    use rtdaq_core::{FlowId, QueueId};

    #[test]
    fn rss_table_reproduces_the_toeplitz_hash() {
        let t = rss_table();
        let (src, dst, sp, dp) = ([10, 1, 2, 3], [192, 168, 7, 9], 40000u16, 5001u16);
        let mut input = [0u8; 12];
        input[..4].copy_from_slice(&src);
        input[4..8].copy_from_slice(&dst);
        input[8..10].copy_from_slice(&sp.to_be_bytes());
        input[10..].copy_from_slice(&dp.to_be_bytes());
        let h = input
            .iter()
            .enumerate()
            .fold(0u32, |h, (i, &b)| h ^ t[i * 256 + usize::from(b)]);
        assert_eq!(h, hash_ipv4_udp(&RSS_KEY_SYMMETRIC, src, dst, sp, dp));
    }

    #[test]
    fn rules_compile_field_by_field() {
        let rule = FlowRule {
            id: FlowId(7),
            matcher: FlowMatch {
                vlan_id: Some(100),
                ipv4_dst: Some(Ipv4Prefix::new([169, 254, 10, 77], 24)),
                udp_dst: Some(PortRange::new(5000, 5003)),
                word: Some(WordMatch {
                    base: WordBase::UdpPayload,
                    offset: 4,
                    value: 0x1234_5678,
                    mask: 0xffff,
                }),
                ..FlowMatch::ANY
            },
            action: FlowAction::Rss([QueueId(1), QueueId(2)].into_iter().collect()),
        };
        let r = compile_rule(&rule);
        assert_eq!(r.fields, F_VLAN | F_IPV4_DST | F_UDP_DST | F_WORD_UDP);
        assert_eq!((r.flow_id, r.vlan_id), (7, 100));
        assert_eq!((r.dst_addr, r.dst_mask), (0xa9fe_0a00, 0xffff_ff00));
        assert_eq!((r.dport_lo, r.dport_hi), (5000, 5003));
        assert_eq!((r.word_off, r.word_value, r.word_mask), (4, 0x5678, 0xffff));
        assert_eq!((r.action, r.rss_n, r.rss_queues[1]), (ACT_RSS, 2, 2));
        let d = compile_rule(&FlowRule {
            id: FlowId(1),
            matcher: FlowMatch::ANY,
            action: FlowAction::Drop,
        });
        assert_eq!((d.fields, d.action), (0, ACT_DROP));
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-1"), Some(2));
        assert_eq!(parse_cpu_list("0"), Some(1));
        assert_eq!(parse_cpu_list("0,2-5,7"), Some(8));
        assert_eq!(parse_cpu_list("x"), None);
    }
}
