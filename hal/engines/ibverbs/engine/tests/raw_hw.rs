//! The raw Ethernet path on NVIDIA ConnectX hardware (issue #8): `#[ignore]`, selected by
//! `RTDAQ_TEST_IBDEV`. Soft-RoCE has no raw packet QPs, so nothing here runs in CI or in
//! the QEMU guest; without `RTDAQ_TEST_IBDEV` the hardware tests skip (`rtdaq_testbed::require`: recorded, and
//! a failure with `RTDAQ_TEST_REQUIRE=1`).
//!
//! The engine is opened in this process on leaked pools (as the runtime does), with one
//! RX queue steered by a flow rule (UDP destination port [`UDP_PORT`]) and one raw TX
//! queue. The TX queue sends [`frames`] numbered frames (rtdaq sequence header + pattern,
//! payload lengths varying from 40 to 1458 bytes) to the RX port's own MAC address; they
//! come back into the RX queue over the cabling below, and every frame is accounted for:
//! each sequence number received exactly once, its content intact, no drop counted,
//! nothing left unreturned in the pools at the end. A rolling window of bursts is held
//! back and re-checked when released, so a multi-packet buffer reposted while a frame in
//! it is still held would show up as corrupt data. Run both with one frame per receive and
//! with the mlx5 striding RQ (`striding_rq = "on"`, 256-byte strides: frames span several
//! strides and WQEs end with fillers), and with header-data split (`hds_split = 74`, a
//! two-SGE receive: the Ethernet/IPv4/UDP and sequence headers into a header region, the
//! rest into a data region; each frame is checked as its two segments put back together).
//!
//! Cabling (docs/engines/ibverbs.md, "Raw path: hardware test procedure"):
//! - one port (`RTDAQ_TEST_IBDEV` only): a QSFP/SFP loopback plug in that port (or a switch
//!   port that hairpins the frames back); TX and RX use the same port;
//! - two ports (`RTDAQ_TEST_IBDEV_TX` set): the TX port cabled to the RX port.
//!
//! With SR-IOV VFs enabled the NIC's e-switch may deliver frames to the port's own MAC
//! internally (where self-loopback of raw QPs may be blocked): use two ports then.
//!
//! Environment: `RTDAQ_TEST_IBDEV` (RX device, e.g. `mlx5_0`), `RTDAQ_TEST_IBDEV_TX` (TX
//! device, default: the RX device), `RTDAQ_TEST_IBPORT` (HCA port, default 1),
//! `RTDAQ_TEST_NETDEV` / `RTDAQ_TEST_NETDEV_TX` (their netdevs, default: from sysfs; the TX
//! side is the RX side when `RTDAQ_TEST_IBDEV_TX` is unset),
//! `RTDAQ_TEST_FRAMES` (frames per test, default 20000). Needs `CAP_NET_RAW` and locked
//! memory for the registrations (root):
//! `RTDAQ_TEST_IBDEV=mlx5_0 cargo test -p rtdaq-engine-ibverbs --test raw_hw -- --ignored --test-threads 1 --nocapture`

mod common;

use std::borrow::Cow;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use common::leak;
use rtdaq_core::traits::{Engine, EngineArgs, RxBurst, RxQueue, Segment, TxBurst, TxQueue};
use rtdaq_core::wire::{
    check_pattern, emit_udp_frame, fill_pattern, parse_frame, SeqHeader, UdpFrameSpec,
};
use rtdaq_core::{BufferPool, DropReason};
use rtdaq_engine_ibverbs::raw::{RawBurst, RawRx};
use rtdaq_engine_ibverbs::RawEngine;

/// UDP destination port of the test frames (the RX queue's flow rule).
const UDP_PORT: u16 = 47_000;
/// Stream id in the sequence headers.
const STREAM: u16 = 7;
/// Frames sent per TX burst.
const TX_BURST: usize = 32;
/// Bursts held back at a time (released oldest first, re-checked then).
const HELD: usize = 3;
/// `hds_split` of [`HDS_MODE`]: Ethernet + IPv4 + UDP + the sequence header.
const HDS_SPLIT: u32 = 14 + 20 + 8 + 32;

/// One side of the loop: an RDMA device, its port's netdev and MAC.
#[derive(Debug, Clone)]
struct Side {
    ibdev: String,
    netdev: String,
    mac: [u8; 6],
}

/// How the RX queue receives.
#[derive(Debug, Clone, Copy)]
struct RxMode {
    striding_rq: &'static str,
    stride_size: Option<u32>,
    buf_size: u32,
    buf_count: u32,
    /// Header-data split: `hds_split` and the header region's `buf_size` (`buf_size` is
    /// then the data region's).
    hds: Option<(u32, u32)>,
}

const FRAMES_MODE: RxMode = RxMode {
    striding_rq: "off",
    stride_size: None,
    buf_size: 2048,
    buf_count: 8192,
    hds: None,
};

/// One frame per receive, split after the 74 bytes of Ethernet + IPv4 + UDP + the sequence
/// header into 128-byte header buffers; the rest into 2048-byte data buffers.
const HDS_MODE: RxMode = RxMode {
    striding_rq: "auto",
    stride_size: None,
    buf_size: 2048,
    buf_count: 8192,
    hds: Some((HDS_SPLIT, 128)),
};

const STRIDING_MODE: RxMode = RxMode {
    striding_rq: "on",
    stride_size: Some(256),
    // 256 strides of 256 B per buffer.
    buf_size: 65_536,
    buf_count: 128,
    hds: None,
};

fn port() -> u8 {
    std::env::var("RTDAQ_TEST_IBPORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(1)
}

fn frames() -> u64 {
    std::env::var("RTDAQ_TEST_FRAMES")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(20_000)
}

/// The netdev of `ibdev`'s port: the GID table's (RoCE ports), else the PCI function's.
fn netdev_of(ibdev: &str, port: u8) -> Option<String> {
    let gid0 = format!("/sys/class/infiniband/{ibdev}/ports/{port}/gid_attrs/ndevs/0");
    if let Ok(s) = std::fs::read_to_string(gid0) {
        let s = s.trim();
        if !s.is_empty() {
            return Some(s.to_owned());
        }
    }
    std::fs::read_dir(format!("/sys/class/infiniband/{ibdev}/device/net"))
        .ok()?
        .flatten()
        .next()
        .map(|e| e.file_name().to_string_lossy().into_owned())
}

fn mac_of(netdev: &str) -> [u8; 6] {
    let text = std::fs::read_to_string(format!("/sys/class/net/{netdev}/address"))
        .unwrap_or_else(|e| panic!("/sys/class/net/{netdev}/address: {e}"));
    let mut mac = [0u8; 6];
    for (m, h) in mac.iter_mut().zip(text.trim().split(':')) {
        *m = u8::from_str_radix(h, 16).expect("hex MAC byte");
    }
    mac
}

fn side(dev_var: &str, netdev_var: &str) -> Option<Side> {
    let ibdev = std::env::var(dev_var).ok()?;
    let netdev = std::env::var(netdev_var)
        .ok()
        .or_else(|| netdev_of(&ibdev, port()))
        .unwrap_or_else(|| {
            panic!("{ibdev} has no netdev in sysfs; set {netdev_var} to the port's netdev")
        });
    let mac = mac_of(&netdev);
    Some(Side { ibdev, netdev, mac })
}

/// The test's deployment: RX interface `rxp` (queue 0, flow rule on [`UDP_PORT`]) and a raw
/// TX queue on the same interface (one device) or on a second interface `txp`.
fn config_text(rx: &Side, tx: &Side, port: u8, mode: RxMode) -> String {
    let same = rx.ibdev == tx.ibdev;
    let device = if same {
        format!("device = \"{}\"\n", rx.ibdev)
    } else {
        String::new()
    };
    let stride = mode
        .stride_size
        .map(|s| format!("stride_size = {s}\n"))
        .unwrap_or_default();
    let (hdr_region, regions, split) = match mode.hds {
        None => (String::new(), "\"rx\"", String::new()),
        Some((h, size)) => (
            format!(
                "[[memory_regions]]\nname = \"rx_hdr\"\nkind = \"host\"\nbuf_size = {size}\nbuf_count = {}\n",
                mode.buf_count
            ),
            "\"rx_hdr\", \"rx\"",
            format!("hds_split = {h}\n"),
        ),
    };
    let txq = "[[interfaces.tx_queues]]\nid = 0\ncpu_core = 0\nbatch_size = 32\nring_depth = 1024\nmemory_regions = [\"tx\"]\n";
    let tx_iface = if same {
        txq.to_owned()
    } else {
        format!(
            "[[interfaces]]\nname = \"txp\"\naddress = \"{}\"\nmtu = 1500\n{txq}",
            tx.netdev
        )
    };
    format!(
        "name = \"raw-hw-test\"\nplatform = \"host\"\n\
         [engine]\nkind = \"ibverbs\"\n\
         [engine.ibverbs]\nmode = \"raw\"\nport = {port}\n{device}striding_rq = \"{}\"\n{stride}\
         {hdr_region}[[memory_regions]]\nname = \"rx\"\nkind = \"host\"\nbuf_size = {}\nbuf_count = {}\n\
         [[memory_regions]]\nname = \"tx\"\nkind = \"host\"\nbuf_size = 2048\nbuf_count = 2048\n\
         [[interfaces]]\nname = \"rxp\"\naddress = \"{}\"\nmtu = 1500\ndefault_action = \"drop\"\n\
         [[interfaces.rx_queues]]\nid = 0\ncpu_core = 0\nbatch_size = 64\nring_depth = 4096\n\
         memory_regions = [{regions}]\n{split}mode = \"direct\"\n\
         {tx_iface}\
         [[flows]]\ninterface = \"rxp\"\nid = 1\nqueue = 0\n[flows.match]\nudp_dst = {UDP_PORT}\n\
         [rt]\nrequired = false\nlock_memory = false\n",
        mode.striding_rq, mode.buf_size, mode.buf_count, rx.netdev
    )
}

fn pool(size: u32, count: u32) -> &'static BufferPool<'static> {
    common::host_pool(size as usize, count as usize)
}

/// UDP payload bytes of frame `seq`: 40..=1458 (frames of 82..=1500 bytes; at least 8
/// pattern bytes after the sequence header).
fn payload_len(seq: u64) -> usize {
    40 + (seq.wrapping_mul(2_654_435_761) % 1419) as usize
}

/// Writes frame `seq` into `buf`; returns its length.
fn build_frame(buf: &mut [u8], seq: u64, rx: &Side, tx: &Side) -> usize {
    let spec = UdpFrameSpec {
        dst_mac: rx.mac,
        src_mac: tx.mac,
        src_ip: [192, 0, 2, 1],
        dst_ip: [192, 0, 2, 2],
        src_port: UDP_PORT + 1,
        dst_port: UDP_PORT,
        payload_len: payload_len(seq),
        ..UdpFrameSpec::default()
    };
    let at = spec.payload_offset();
    let body = &mut buf[at..at + spec.payload_len];
    SeqHeader {
        stream_id: STREAM,
        seq,
        payload_len: (spec.payload_len - SeqHeader::LEN) as u32,
        ..SeqHeader::default()
    }
    .emit(body)
    .expect("sequence header");
    fill_pattern(STREAM, seq, &mut body[SeqHeader::LEN..]);
    emit_udp_frame(buf, &spec).expect("frame")
}

/// The sequence number of a received test frame whose content is intact.
fn check_frame(frame: &[u8]) -> Result<u64, String> {
    let info = parse_frame(frame).map_err(|e| format!("unparsable frame: {e:?}"))?;
    let udp = info.udp.ok_or("not UDP")?;
    if udp.dst_port != UDP_PORT {
        return Err(format!("UDP port {} reached the test queue", udp.dst_port));
    }
    let payload = info.udp_payload(frame).ok_or("short UDP payload")?;
    let (hdr, rest) =
        SeqHeader::parse_with_payload(payload).map_err(|e| format!("sequence header: {e:?}"))?;
    if !check_pattern(STREAM, hdr.seq, rest) {
        return Err(format!("frame {}: payload corrupt", hdr.seq));
    }
    Ok(hdr.seq)
}

/// Frame `i` of `burst`: its one segment, or its segments put back together (header-data
/// split).
fn frame_of<B: RxBurst>(burst: &B, i: usize) -> Cow<'_, [u8]> {
    let host = |s: usize| match burst.segment(i, s) {
        Segment::Host(b) => b,
        Segment::Device { .. } => panic!("host memory expected"),
    };
    match burst.segments(i) {
        1 => Cow::Borrowed(host(0)),
        n => Cow::Owned((0..n).flat_map(|s| host(s).iter().copied()).collect()),
    }
}

/// Bytes of host segment `s` of frame `i`.
fn host_len<B: RxBurst>(burst: &B, i: usize, s: usize) -> usize {
    match burst.segment(i, s) {
        Segment::Host(b) => b.len(),
        Segment::Device { len, .. } => len as usize,
    }
}

/// What [`drain`] counts besides the frames.
#[derive(Debug, Default)]
struct Tally {
    /// Polls that returned frames.
    polls: u64,
    /// Frames of two segments (header-data split).
    split: u64,
}

/// Polls the RX queue once and accounts for what came: each frame's sequence number is
/// counted in `seen` (content checked), every 7th non-empty burst is held back (up to
/// [`HELD`]) and re-checked when it is released. Returns the frames received.
fn drain(
    rq: &mut RawRx,
    burst: &mut RawBurst,
    held: &mut VecDeque<RawBurst>,
    seen: &mut [u8],
    bad: &mut Vec<String>,
    tally: &mut Tally,
) -> u64 {
    let got = rq.poll(burst) as u64;
    for i in 0..burst.len() {
        if burst.segments(i) == 2 {
            tally.split += 1;
            let (head, len) = (host_len(burst, i, 0), burst.meta(i).len as usize);
            if head != len.min(HDS_SPLIT as usize) {
                bad.push(format!(
                    "split frame of {len} B has a header segment of {head} B, not min(len, {HDS_SPLIT})"
                ));
            }
        }
        match check_frame(&frame_of(burst, i)) {
            Ok(seq) if seq < seen.len() as u64 => seen[seq as usize] += 1,
            Ok(seq) => bad.push(format!("sequence number {seq} was never sent")),
            Err(e) => bad.push(e),
        }
    }
    if got > 0 {
        tally.polls += 1;
    }
    if got > 0 && tally.polls % 7 == 0 {
        // Hold this burst back: its frames must stay intact while the NIC goes on.
        held.push_back(std::mem::replace(burst, rq.new_burst()));
    } else {
        burst.clear();
    }
    if held.len() > HELD {
        let old = held.pop_front().expect("held burst");
        recheck(&old, bad);
    }
    got
}

/// Re-checks the frames of a burst that was held back.
fn recheck(old: &RawBurst, bad: &mut Vec<String>) {
    for i in 0..old.len() {
        if let Err(e) = check_frame(&frame_of(old, i)) {
            bad.push(format!("held frame overwritten: {e}"));
        }
    }
}

/// Sends every frame through the TX queue, receives them, and accounts for each one.
fn loopback(mode: RxMode) {
    let Some(rx) = side("RTDAQ_TEST_IBDEV", "RTDAQ_TEST_NETDEV") else {
        rtdaq_testbed::require::skip(
            "RTDAQ_TEST_IBDEV not set (hardware test: a ConnectX port with a loopback plug, or two ports cabled together with RTDAQ_TEST_IBDEV_TX; see docs/engines/ibverbs.md)",
        );
        return;
    };
    // One device (loopback plug) unless a second one is named.
    let tx = side("RTDAQ_TEST_IBDEV_TX", "RTDAQ_TEST_NETDEV_TX").unwrap_or_else(|| rx.clone());
    let n = frames();
    eprintln!(
        "raw_hw: RX {} ({}), TX {} ({}), port {}, {n} frames, striding_rq = {}, hds_split = {:?}",
        rx.ibdev,
        rx.netdev,
        tx.ibdev,
        tx.netdev,
        port(),
        mode.striding_rq,
        mode.hds.map(|(h, _)| h)
    );
    let text = config_text(&rx, &tx, port(), mode);
    let config = leak(rtdaq_config::load_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}")));
    let rx_pool = pool(mode.buf_size.next_multiple_of(128), mode.buf_count);
    let tx_pool = pool(2048, 2048);
    let tx_interface = usize::from(rx.ibdev != tx.ibdev);
    let hdr_pool = mode.hds.map(|(_, size)| pool(size, mode.buf_count));
    let rxs = match hdr_pool {
        None => common::one_queue(0, rx_pool),
        Some(h) => common::split_queue(0, h, rx_pool),
    };
    let txs = common::one_queue(tx_interface, tx_pool);
    let rx_counters = rxs[0].counters;
    let engine = RawEngine::open(EngineArgs {
        config,
        rx: rxs,
        tx: txs,
    })
    .unwrap_or_else(|e| panic!("open the raw engine: {e}"));
    let (mut rq, mut tq) = (None, None);
    engine.split(&mut |q| rq = Some(q), &mut |q| tq = Some(q));
    let (mut rq, mut tq) = (rq.expect("RX queue"), tq.expect("TX queue"));
    assert_eq!(rq.flows(), 1, "one flow rule on the RX queue");
    match mode.striding_rq {
        "on" => {
            let g = rq.striding_rq().expect("the striding RQ is in use");
            eprintln!(
                "raw_hw: striding RQ, {} strides of {} B per buffer",
                g.strides(),
                g.stride_bytes()
            );
        }
        // "auto" with header-data split falls back to one frame per receive.
        _ => assert!(rq.striding_rq().is_none(), "one frame per receive"),
    }

    let mut seen = vec![0u8; n as usize];
    let (mut sent, mut received, mut bad) = (0u64, 0u64, Vec::new());
    let mut held = VecDeque::new();
    let mut burst = rq.new_burst();
    let mut tb = tq.new_burst();
    let mut tally = Tally::default();
    let start = Instant::now();
    while sent < n {
        let want = TX_BURST.min((n - sent) as usize);
        let k = tq.reserve(&mut tb, want);
        for j in 0..k {
            let slot = TxBurst::packet_mut(&mut tb, j).expect("host TX buffer");
            let len = build_frame(slot, sent + j as u64, &rx, &tx);
            TxBurst::set_len(&mut tb, j, len);
        }
        let ok = tq.send(&mut tb) as u64;
        assert_eq!(
            ok, k as u64,
            "the TX queue refused frames (ring full or post failure) at {sent}"
        );
        sent += ok;
        received += drain(
            &mut rq, &mut burst, &mut held, &mut seen, &mut bad, &mut tally,
        );
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "sending {n} frames took over 60 s"
        );
    }
    let end = Instant::now() + Duration::from_secs(5);
    while received < sent && Instant::now() < end {
        received += drain(
            &mut rq, &mut burst, &mut held, &mut seen, &mut bad, &mut tally,
        );
    }
    for old in held.drain(..) {
        recheck(&old, &mut bad);
    }
    drop(burst);
    let missing: Vec<usize> = (0..seen.len()).filter(|&s| seen[s] == 0).collect();
    let twice: Vec<usize> = (0..seen.len()).filter(|&s| seen[s] > 1).collect();
    let drops: Vec<(DropReason, u64)> = DropReason::ALL
        .iter()
        .map(|&r| (r, rx_counters.drops(r)))
        .filter(|&(_, d)| d > 0)
        .collect();
    eprintln!(
        "raw_hw: sent {sent}, received {received} in {:.2} s, missing {}, duplicated {}, bad {}, RX drops {drops:?}",
        start.elapsed().as_secs_f64(),
        missing.len(),
        twice.len(),
        bad.len()
    );
    assert!(
        bad.is_empty(),
        "bad frames: {:?}",
        &bad[..bad.len().min(10)]
    );
    assert!(
        missing.is_empty(),
        "{} of {sent} frames never arrived, first {:?} (is the port looped back? see docs/engines/ibverbs.md)",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    assert!(
        twice.is_empty(),
        "frames received twice: {:?}",
        &twice[..twice.len().min(10)]
    );
    assert!(drops.is_empty(), "RX queue drops: {drops:?}");
    assert_eq!(received, sent);
    let want_split = if mode.hds.is_some() { received } else { 0 };
    assert_eq!(tally.split, want_split, "frames delivered as two segments");
    // Every buffer goes back to its pool with the queues.
    drop(rq);
    drop(tq);
    assert_eq!(
        rx_pool.available(),
        rx_pool.slot_count(),
        "RX buffers returned"
    );
    if let Some(h) = hdr_pool {
        assert_eq!(h.available(), h.slot_count(), "RX header buffers returned");
    }
    assert_eq!(
        tx_pool.available(),
        tx_pool.slot_count(),
        "TX buffers returned"
    );
}

#[test]
#[ignore = "needs a ConnectX port looped back; RTDAQ_TEST_IBDEV=mlx5_0 (docs/engines/ibverbs.md)"]
fn raw_loopback_one_frame_per_receive() {
    loopback(FRAMES_MODE);
}

#[test]
#[ignore = "needs a ConnectX port looped back; RTDAQ_TEST_IBDEV=mlx5_0 (docs/engines/ibverbs.md)"]
fn raw_loopback_striding_rq() {
    loopback(STRIDING_MODE);
}

#[test]
#[ignore = "needs a ConnectX port looped back; RTDAQ_TEST_IBDEV=mlx5_0 (docs/engines/ibverbs.md)"]
fn raw_loopback_header_data_split() {
    loopback(HDS_MODE);
}

/// Runs everywhere: the deployments the hardware tests open are valid (one device, two
/// devices; both RX modes), and the frames they send parse back with their content.
#[test]
fn hardware_test_configs_and_frames_are_valid() {
    let a = Side {
        ibdev: "mlx5_0".into(),
        netdev: "eth0".into(),
        mac: [2, 0, 0, 0, 0, 1],
    };
    let b = Side {
        ibdev: "mlx5_1".into(),
        netdev: "eth1".into(),
        mac: [2, 0, 0, 0, 0, 2],
    };
    for (tx, mode) in [
        (&a, FRAMES_MODE),
        (&a, STRIDING_MODE),
        (&a, HDS_MODE),
        (&b, FRAMES_MODE),
        (&b, STRIDING_MODE),
        (&b, HDS_MODE),
    ] {
        let text = config_text(&a, tx, 1, mode);
        let c = rtdaq_config::load_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(c.interfaces.len(), if tx.ibdev == a.ibdev { 1 } else { 2 });
        assert_eq!(c.flow_rules(0).len(), 1);
        let q = &c.interfaces[0].rx_queues[0];
        assert_eq!(q.hds_split, mode.hds.map(|(h, _)| h));
        assert_eq!(
            q.memory_regions.len(),
            if mode.hds.is_some() { 2 } else { 1 }
        );
    }
    let mut buf = vec![0u8; 2048];
    for seq in [0u64, 1, 2, 1000, 19_999] {
        let len = build_frame(&mut buf, seq, &a, &b);
        assert!((82..=1500).contains(&len), "{len}");
        assert_eq!(check_frame(&buf[..len]), Ok(seq));
        buf[len - 1] ^= 1;
        assert!(check_frame(&buf[..len]).is_err());
    }
}

/// Runs everywhere (this host has no RDMA; in the Soft-RoCE guest `lo` has no RDMA
/// device): a raw queue on a netdev without an RDMA device fails with the clear "no RDMA
/// device" error, `striding_rq = "on"` or not, never a panic.
#[test]
fn no_rdma_device_is_a_clear_error() {
    let lo = Side {
        ibdev: "none".into(),
        netdev: "lo".into(),
        mac: [0; 6],
    };
    for mode in [FRAMES_MODE, STRIDING_MODE, HDS_MODE] {
        let mut text = config_text(&lo, &lo, 1, mode);
        // Let the engine look the device up from the netdev (sysfs), as deployments do.
        text = text.replace("device = \"none\"\n", "");
        let config = leak(rtdaq_config::load_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}")));
        let data = pool(mode.buf_size, mode.buf_count);
        let rxs = match mode.hds {
            None => common::one_queue(0, data),
            Some((_, size)) => common::split_queue(0, pool(size, mode.buf_count), data),
        };
        let e = match RawEngine::open(EngineArgs {
            config,
            rx: rxs,
            tx: &[],
        }) {
            Ok(_) => panic!("opened a raw engine on lo"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("no RDMA device") && e.contains("docs/engines/ibverbs.md"),
            "{e}"
        );
    }
}
