//! UDP over loopback: RX content and counters, too large, pool empty, REUSEPORT spread, TX,
//! GSO and GRO.

mod common;

use std::collections::{HashMap, HashSet};
use std::net::{SocketAddrV4, UdpSocket};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;
use rtdaq_core::traits::{RxBurst, RxQueue, Segment, TxBurst, TxQueue};
use rtdaq_core::{ConnId, DropReason, FlowId, QueueId};
use rtdaq_engine_socket::{SocketRx, SocketTx};

fn rx_config(
    port: u16,
    socket: &str,
    buf: usize,
    count: usize,
    queues: u16,
    extra: &str,
) -> String {
    let mut s = header(socket);
    s += &region("rx", buf, count);
    s += &format!("[[interfaces]]\nname = \"u\"\naddress = \"udp://127.0.0.1:{port}\"\n{extra}\n");
    for q in 0..queues {
        s += &rxq(q, "rx", 32, 2000);
    }
    s
}

fn segment_bytes(seg: Segment<'_>) -> &[u8] {
    match seg {
        Segment::Host(b) => b,
        Segment::Device { .. } => panic!("host memory expected"),
    }
}

/// Polls `q` until `want` packets arrived (or 5 s); returns (payload, meta) per packet.
fn collect<const N: usize>(
    q: &mut SocketRx<'static, N>,
    want: usize,
) -> Vec<(Vec<u8>, rtdaq_core::PacketMeta)> {
    let mut burst = q.new_burst();
    let mut out = Vec::new();
    until(Duration::from_secs(5), || {
        q.poll(&mut burst);
        for i in 0..RxBurst::len(&burst) {
            out.push((segment_bytes(burst.segment(i, 0)).to_vec(), burst.meta(i)));
        }
        burst.clear();
        out.len() >= want
    });
    out
}

#[test]
fn rx_receives_every_datagram_intact_with_counters_and_timestamps() {
    let port = free_udp_port();
    let setup = Setup::new(
        &rx_config(port, "rcvbuf = 4194304", 2048, 256, 1, ""),
        2048,
        256,
    );
    let (mut rx, _) = setup.open::<64>().unwrap().into_queues();
    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    let n = 300;
    let mut total = 0u64;
    for i in 0..n {
        let len = 1 + (i * 37) % 1472;
        total += len as u64;
        sender
            .send_to(&pattern(len, i as u64), ("127.0.0.1", port))
            .unwrap();
    }
    let got = collect(&mut rx[0], n);
    assert_eq!(got.len(), n);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    for (i, (bytes, meta)) in got.iter().enumerate() {
        let len = 1 + (i * 37) % 1472;
        assert_eq!(bytes, &pattern(len, i as u64), "datagram {i}");
        assert_eq!(meta.len as usize, len);
        assert_eq!(meta.queue, QueueId(0));
        assert_eq!(meta.conn, ConnId(0));
        assert_eq!(meta.flow, FlowId::NONE);
        assert!(meta.rx_timestamp_ns > 0, "kernel timestamp missing");
        assert_eq!(meta.ts_source, rtdaq_core::TimestampSource::Kernel);
        assert!(
            now.abs_diff(meta.rx_timestamp_ns) < 10_000_000_000,
            "timestamp not CLOCK_REALTIME"
        );
    }
    let c = setup.rx_counters(0).snapshot();
    assert_eq!((c.packets, c.bytes, c.total_drops()), (n as u64, total, 0));
    assert_eq!(
        rx[0].local_addr(),
        Some(SocketAddrV4::new([127, 0, 0, 1].into(), port))
    );
}

/// Sends `n` datagrams to `port`, receives them on a queue opened with `rx_timestamps = mode`
/// and returns their receive timestamps with the wall-clock window around the exchange.
fn stamps_with(mode: &str, n: usize) -> (Vec<u64>, u64, u64) {
    let port = free_udp_port();
    let setup = Setup::new(
        &rx_config(
            port,
            &format!("rx_timestamps = \"{mode}\""),
            2048,
            64,
            1,
            "",
        ),
        2048,
        64,
    );
    let (mut rx, _) = setup.open::<64>().unwrap().into_queues();
    let wall = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    };
    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    let t0 = wall();
    for i in 0..n {
        sender
            .send_to(&pattern(100, i as u64), ("127.0.0.1", port))
            .unwrap();
    }
    let got = collect(&mut rx[0], n);
    let t1 = wall();
    assert_eq!(got.len(), n);
    // Each datagram says where its time came from: the kernel, the read, or nowhere.
    let want = match mode {
        "kernel" => rtdaq_core::TimestampSource::Kernel,
        "batch" => rtdaq_core::TimestampSource::Poll,
        _ => rtdaq_core::TimestampSource::None,
    };
    assert!(got.iter().all(|(_, m)| m.ts_source == want), "{mode}");
    (got.iter().map(|(_, m)| m.rx_timestamp_ns).collect(), t0, t1)
}

#[test]
fn rx_timestamps_batch_stamps_each_read_with_the_wall_clock_and_off_leaves_zero() {
    let (batch, t0, t1) = stamps_with("batch", 40);
    assert!(
        batch.iter().all(|&t| t >= t0 && t <= t1),
        "batch stamps {batch:?} outside the exchange [{t0}, {t1}]"
    );
    // One clock read per recvmmsg: far fewer distinct stamps than datagrams (all 40 were
    // queued before the first read, which takes up to 32).
    let distinct: HashSet<u64> = batch.iter().copied().collect();
    assert!(
        distinct.len() < batch.len(),
        "{} distinct stamps",
        distinct.len()
    );
    let (off, _, _) = stamps_with("off", 10);
    assert!(off.iter().all(|&t| t == 0), "{off:?}");
    let (kernel, t0, t1) = stamps_with("kernel", 10);
    assert!(kernel.iter().all(|&t| t >= t0 && t <= t1), "{kernel:?}");
}

#[test]
fn sleeping_queue_blocks_on_an_empty_burst_but_returns_when_idle() {
    let port = free_udp_port();
    // timeout_us = 2000: the blocking read's SO_RCVTIMEO (rounded up to a jiffy, <= 4 ms
    // at HZ=250) bounds an idle poll.
    let setup = Setup::new(&rx_config(port, "", 2048, 64, 1, ""), 2048, 64);
    let (mut rx, _) = setup.open::<64>().unwrap().into_queues();
    let mut burst = rx[0].new_burst();
    let t = std::time::Instant::now();
    assert_eq!(rx[0].poll(&mut burst), 0);
    let idle = t.elapsed();
    assert!(
        idle >= Duration::from_micros(1500),
        "returned after {idle:?}: did not wait"
    );
    assert!(idle < Duration::from_millis(500), "idle poll took {idle:?}");
    // A datagram arriving while the queue waits is returned by the same poll.
    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    let th = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_micros(500));
        sender
            .send_to(&pattern(64, 7), ("127.0.0.1", port))
            .unwrap();
    });
    let mut got = 0;
    until(Duration::from_secs(5), || {
        got += rx[0].poll(&mut burst);
        got > 0
    });
    th.join().unwrap();
    assert_eq!(got, 1);
    assert_eq!(segment_bytes(burst.segment(0, 0)), &pattern(64, 7)[..]);
}

#[test]
fn datagram_larger_than_the_buffer_counts_too_large() {
    let port = free_udp_port();
    let setup = Setup::new(&rx_config(port, "", 512, 64, 1, "mtu = 540"), 512, 64);
    let (mut rx, _) = setup.open::<32>().unwrap().into_queues();
    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    sender.send_to(&[7u8; 1000], ("127.0.0.1", port)).unwrap();
    sender.send_to(&[9u8; 100], ("127.0.0.1", port)).unwrap();
    let got = collect(&mut rx[0], 1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, vec![9u8; 100]);
    let c = setup.rx_counters(0).snapshot();
    assert_eq!(c.drop_count(DropReason::TooLarge), 1);
    assert_eq!(c.packets, 1);
}

#[test]
fn pool_exhausted_counts_pool_empty_then_recovers() {
    let port = free_udp_port();
    let setup = Setup::new(&rx_config(port, "", 2048, 64, 1, ""), 2048, 64);
    let (mut rx, _) = setup.open::<32>().unwrap().into_queues();
    let pool = setup.rx_pool(0);
    let held: Vec<_> = std::iter::from_fn(|| pool.get()).collect();
    assert_eq!(pool.available(), 0);
    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    for i in 0..10u64 {
        sender
            .send_to(&pattern(200, i), ("127.0.0.1", port))
            .unwrap();
    }
    let mut burst = rx[0].new_burst();
    assert!(until(Duration::from_secs(5), || {
        assert_eq!(rx[0].poll(&mut burst), 0);
        setup.rx_counters(0).drops(DropReason::PoolEmpty) == 10
    }));
    drop(held);
    for i in 100..105u64 {
        sender
            .send_to(&pattern(300, i), ("127.0.0.1", port))
            .unwrap();
    }
    let got = collect(&mut rx[0], 5);
    assert_eq!(got.len(), 5);
    for (k, (bytes, _)) in got.iter().enumerate() {
        assert_eq!(bytes, &pattern(300, 100 + k as u64));
    }
    let c = setup.rx_counters(0).snapshot();
    assert_eq!((c.packets, c.drop_count(DropReason::PoolEmpty)), (5, 10));
}

#[test]
fn four_reuseport_queues_receive_every_datagram_from_many_source_ports() {
    let port = free_udp_port();
    let setup = Setup::new(
        &rx_config(port, "rcvbuf = 1048576", 2048, 256, 4, ""),
        2048,
        256,
    );
    let (mut rx, _) = setup.open::<64>().unwrap().into_queues();
    assert_eq!(rx.len(), 4);
    let senders: Vec<UdpSocket> = (0..16)
        .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    let per = 20u64;
    for round in 0..per {
        for (s, sock) in senders.iter().enumerate() {
            let tag = (s as u64) << 32 | round;
            let mut d = pattern(64, tag);
            d[..8].copy_from_slice(&tag.to_le_bytes());
            sock.send_to(&d, ("127.0.0.1", port)).unwrap();
        }
    }
    let want = 16 * per as usize;
    let mut seen = HashSet::new();
    let mut per_queue = [0usize; 4];
    let mut bursts: Vec<_> = rx.iter().map(|q| q.new_burst()).collect();
    until(Duration::from_secs(5), || {
        for (k, q) in rx.iter_mut().enumerate() {
            q.poll(&mut bursts[k]);
            for i in 0..RxBurst::len(&bursts[k]) {
                let b = segment_bytes(bursts[k].segment(i, 0));
                let tag = u64::from_le_bytes(b[..8].try_into().unwrap());
                assert_eq!(&b[8..], &pattern(64, tag)[8..]);
                assert_eq!(bursts[k].meta(i).queue, QueueId(k as u16));
                assert!(seen.insert(tag), "duplicate {tag:x}");
                per_queue[k] += 1;
            }
            bursts[k].clear();
        }
        seen.len() == want
    });
    assert_eq!(seen.len(), want, "per queue {per_queue:?}");
    assert!(
        per_queue.iter().filter(|&&n| n > 0).count() >= 2,
        "no spread: {per_queue:?}"
    );
    let total: u64 = (0..4)
        .map(|k| setup.rx_counters(k).snapshot().packets)
        .sum();
    assert_eq!(total, want as u64);
}

fn tx_config(port: u16, socket: &str, dest: u16) -> String {
    let mut s = header(socket);
    s += &region("tx", 2048, 256);
    s += &format!("[[interfaces]]\nname = \"u\"\naddress = \"udp://127.0.0.1:{port}\"\n");
    s += &txq(0, "tx", 64);
    s += &format!(
        "[generator]\ninterface = \"u\"\ntx_queue = 0\ndestination = \"udp://127.0.0.1:{dest}\"\npayload_size = 1000\nunpaced = true\n"
    );
    s
}

/// Fills a TX batch with `lens.len()` packets of the given lengths (tags from `base`), sends.
fn send_batch<const N: usize>(q: &mut SocketTx<'static, N>, lens: &[usize], base: u64) -> usize {
    let mut b = q.new_burst();
    assert_eq!(q.reserve(&mut b, lens.len()), lens.len());
    for (i, &len) in lens.iter().enumerate() {
        let tag = base + i as u64;
        let buf = b.packet_mut(i).unwrap();
        fill(&mut buf[..len], tag);
        b.set_len(i, len);
    }
    let n = q.send(&mut b);
    assert!(b.is_empty());
    n
}

fn receive_all(sock: &UdpSocket, n: usize) -> Vec<Vec<u8>> {
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = vec![0u8; 65536];
    (0..n)
        .map_while(|_| sock.recv(&mut buf).ok().map(|k| buf[..k].to_vec()))
        .collect()
}

#[test]
fn tx_sends_every_datagram_intact_to_the_generator_destination() {
    let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
    let dest = receiver.local_addr().unwrap().port();
    let setup = Setup::new(&tx_config(free_udp_port(), "", dest), 2048, 256);
    let (_, mut tx) = setup.open::<64>().unwrap().into_queues();
    assert_eq!(
        tx[0].destination(),
        Some(SocketAddrV4::new([127, 0, 0, 1].into(), dest))
    );
    let lens: Vec<usize> = (0..64).map(|i| 10 + i * 20).collect();
    assert_eq!(send_batch(&mut tx[0], &lens, 0), 64);
    let got = receive_all(&receiver, 64);
    assert_eq!(got.len(), 64);
    for (i, d) in got.iter().enumerate() {
        assert_eq!(d, &pattern(lens[i], i as u64), "datagram {i}");
    }
    let c = setup.tx_counters(0).snapshot();
    assert_eq!((c.packets, c.total_drops()), (64, 0));
    assert_eq!(c.bytes, lens.iter().sum::<usize>() as u64);

    // The runtime may redirect the queue.
    let other = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = match other.local_addr().unwrap() {
        std::net::SocketAddr::V4(a) => a,
        _ => unreachable!(),
    };
    tx[0].set_destination(addr).unwrap();
    assert_eq!(send_batch(&mut tx[0], &[100, 200], 1000), 2);
    assert_eq!(
        receive_all(&other, 2),
        vec![pattern(100, 1000), pattern(200, 1001)]
    );
}

#[test]
fn gso_sends_equal_size_runs_as_one_message_when_supported() {
    let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
    let dest = receiver.local_addr().unwrap().port();
    let setup = Setup::new(&tx_config(free_udp_port(), "gso = true", dest), 2048, 256);
    let (_, mut tx) = setup.open::<64>().unwrap().into_queues();
    let mut lens = vec![1000usize; 40];
    lens.extend([10, 20, 1000, 1000, 7]);
    let n = lens.len();
    let sent = send_batch(&mut tx[0], &lens, 50);
    assert_eq!(sent, n);
    let got = receive_all(&receiver, n);
    assert_eq!(got.len(), n);
    for (i, d) in got.iter().enumerate() {
        assert_eq!(d, &pattern(lens[i], 50 + i as u64), "datagram {i}");
    }
    let s = tx[0].stats();
    if tx[0].gso() {
        assert!(s.gso_messages >= 2, "{s:?}");
    } else {
        eprintln!("UDP GSO not available here ({s:?}); plain sendmmsg path tested");
    }
}

#[test]
fn gro_reads_are_split_back_into_datagrams() {
    let rx_port = free_udp_port();
    let mut s = header("gro = true\ngso = true\nrcvbuf = 4194304");
    s += &region("rx", 65536, 64);
    s += &format!("[[interfaces]]\nname = \"u\"\naddress = \"udp://127.0.0.1:{rx_port}\"\nmax_message_size = 65507\n");
    s += &rxq(0, "rx", 4, 2000);
    s += &txq(0, "rx", 16);
    let setup = Setup::new(&s, 65536, 128);
    let (mut rx, mut tx) = setup.open::<256>().unwrap().into_queues();
    if !rx[0].gro() {
        rtdaq_testbed::require::skip("UDP GRO is not available on this kernel");
        return;
    }
    assert_eq!(tx[0].destination().unwrap().port(), rx_port);
    let lens = vec![1200usize; 30];
    assert_eq!(send_batch(&mut tx[0], &lens, 7), 30);
    let got = collect(&mut rx[0], 30);
    assert_eq!(got.len(), 30);
    let mut ts = HashMap::new();
    for (i, (d, m)) in got.iter().enumerate() {
        assert_eq!(d, &pattern(1200, 7 + i as u64), "datagram {i}");
        assert_eq!(m.len, 1200);
        *ts.entry(m.rx_timestamp_ns).or_insert(0) += 1;
    }
    let st = rx[0].stats();
    if tx[0].gso() {
        assert!(st.gro_reads >= 1 && st.gro_copies >= 1, "{st:?}");
    }
    assert_eq!(setup.rx_counters(0).snapshot().packets, 30);
}

#[test]
fn socket_overflow_is_counted_as_kernel_drops() {
    let port = free_udp_port();
    // The smallest receive buffer: most of a burst overflows it.
    let setup = Setup::new(
        &rx_config(port, "rcvbuf = 1024", 2048, 256, 1, ""),
        2048,
        256,
    );
    let (mut rx, _) = setup.open::<64>().unwrap().into_queues();
    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    let sent = 300u64;
    for i in 0..sent {
        sender
            .send_to(&pattern(1000, i), ("127.0.0.1", port))
            .unwrap();
    }
    let mut burst = rx[0].new_burst();
    // Poll until idle twice in a row: the last drops are read with SO_MEMINFO on a timeout.
    let mut idle = 0;
    until(Duration::from_secs(5), || {
        if rx[0].poll(&mut burst) == 0 {
            idle += 1;
        } else {
            idle = 0;
        }
        burst.clear();
        idle >= 2
    });
    let c = setup.rx_counters(0).snapshot();
    let kernel = c.drop_count(DropReason::Kernel);
    assert!(kernel > 0, "{c:?}");
    assert_eq!(
        c.packets + kernel,
        sent,
        "every datagram delivered or counted: {c:?}"
    );
}

#[test]
fn flow_rules_label_and_drop_datagrams() {
    let port = free_udp_port();
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (pa, pb) = (
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    );
    let mut s = rx_config(port, "", 2048, 256, 1, "");
    s += &format!(
        "[[flows]]\ninterface = \"u\"\nid = 7\nqueue = 0\n[flows.match]\nudp_src = {pa}\n\
         [[flows]]\ninterface = \"u\"\nid = 8\ndrop = true\n[flows.match]\nudp_src = {pb}\n"
    );
    let setup = Setup::new(&s, 2048, 256);
    let (mut rx, _) = setup.open::<64>().unwrap().into_queues();
    let other = UdpSocket::bind("127.0.0.1:0").unwrap();
    for i in 0..5u64 {
        a.send_to(&pattern(100, i), ("127.0.0.1", port)).unwrap();
        b.send_to(&pattern(100, i), ("127.0.0.1", port)).unwrap();
        other
            .send_to(&pattern(100, i), ("127.0.0.1", port))
            .unwrap();
    }
    let got = collect(&mut rx[0], 10);
    assert_eq!(got.len(), 10);
    assert_eq!(got.iter().filter(|(_, m)| m.flow == FlowId(7)).count(), 5);
    assert_eq!(
        got.iter().filter(|(_, m)| m.flow == FlowId::NONE).count(),
        5
    );
    let c = setup.rx_counters(0).snapshot();
    assert_eq!(c.drop_count(DropReason::FlowDrop), 5);
}

#[test]
fn queues_are_send() {
    fn is_send<T: Send>() {}
    is_send::<SocketRx<'static, 64>>();
    is_send::<SocketTx<'static, 64>>();
    is_send::<rtdaq_engine_socket::TxBatch<'static, 64>>();
    is_send::<rtdaq_core::Burst<'static, 64>>();
}

/// A TX-only UDP interface whose generator sends `streams` lanes to `dest` (slots of `buf`).
fn lanes_tx_config(socket: &str, buf: usize, streams: u32, dest: u16) -> String {
    let mut s = header(socket);
    s += &region("tx", buf, 256);
    s += &format!(
        "[[interfaces]]\nname = \"g\"\naddress = \"udp://127.0.0.1:{}\"\nmax_message_size = {}\n",
        free_udp_port(),
        buf.min(65507)
    );
    s += &txq(0, "tx", 64);
    s += &format!(
        "[generator]\ninterface = \"g\"\ntx_queue = 0\ndestination = \"udp://127.0.0.1:{dest}\"\npayload_size = 1000\nunpaced = true\nstreams = {streams}\n"
    );
    s
}

/// Odd burst sizes, so lanes start anywhere in a burst and bursts end mid-cycle.
const LANE_BURSTS: [usize; 10] = [1, 3, 7, 64, 5, 2, 33, 9, 4, 12];

/// Packet `j` of a lane test: `j` in the first 8 bytes, then a pattern.
fn lane_packet(buf: &mut [u8], j: u64) {
    fill(buf, j);
    buf[..8].copy_from_slice(&j.to_le_bytes());
}

/// Sends packets `j = 0..` through `q` in `LANE_BURSTS`; `len(j)` bytes each. Returns the
/// packets handed over and how many `send` accepted.
fn send_lane_bursts<const N: usize>(
    q: &mut SocketTx<'static, N>,
    len: impl Fn(u64) -> usize,
) -> (u64, u64) {
    let (mut j, mut accepted) = (0u64, 0u64);
    let mut b = q.new_burst();
    for &n in &LANE_BURSTS {
        assert_eq!(q.reserve(&mut b, n), n);
        for i in 0..n {
            let l = len(j + i as u64);
            lane_packet(&mut b.packet_mut(i).unwrap()[..l], j + i as u64);
            b.set_len(i, l);
        }
        accepted += q.send(&mut b) as u64;
        j += n as u64;
    }
    (j, accepted)
}

/// A 4-lane generator queue sends to 4 REUSEPORT RX queues of this engine, which label each
/// lane's source port with flow id `lane + 1`. Checks the lane rule and per-lane order and
/// that each lane lands on one queue; returns how many queues the lanes used.
fn four_lanes_into_four_reuseport_queues(gso: bool) -> usize {
    let rx_port = free_udp_port();
    let len = |j: u64| {
        if gso {
            1000
        } else {
            100 + (j as usize * 37) % 900
        }
    };
    let txs = Setup::new(
        &lanes_tx_config(if gso { "gso = true" } else { "" }, 2048, 4, rx_port),
        2048,
        256,
    );
    let (_, mut tx) = txs.open::<64>().unwrap().into_queues();
    assert_eq!(tx[0].lanes(), 4);
    let ports: Vec<u16> = (0..4)
        .map(|l| tx[0].lane_local_addr(l).unwrap().port())
        .collect();
    assert_eq!(tx[0].lane_local_addr(4), None);
    assert_eq!(tx[0].local_addr().unwrap().port(), ports[0]);
    assert_eq!(
        ports.iter().collect::<HashSet<_>>().len(),
        4,
        "lanes share a source port: {ports:?}"
    );
    assert!(ports.iter().all(|&p| p != 0));

    let mut r = rx_config(rx_port, "rcvbuf = 4194304", 2048, 256, 4, "");
    for (l, p) in ports.iter().enumerate() {
        r += &format!(
            "[[flows]]\ninterface = \"u\"\nid = {}\nqueue = 0\n[flows.match]\nudp_src = {p}\n",
            l + 1
        );
    }
    let rxs = Setup::new(&r, 2048, 256);
    let (mut rx, _) = rxs.open::<64>().unwrap().into_queues();

    let (total, accepted) = send_lane_bursts(&mut tx[0], len);
    assert_eq!(accepted, total);
    if gso && tx[0].gso() {
        assert!(tx[0].stats().gso_messages > 0, "{:?}", tx[0].stats());
    }

    let mut next_j: [u64; 4] = [0, 1, 2, 3];
    let mut lane_queue: [Option<usize>; 4] = [None; 4];
    let mut got = 0u64;
    let mut bursts: Vec<_> = rx.iter().map(|q| q.new_burst()).collect();
    until(Duration::from_secs(5), || {
        for (k, q) in rx.iter_mut().enumerate() {
            q.poll(&mut bursts[k]);
            for i in 0..RxBurst::len(&bursts[k]) {
                let b = segment_bytes(bursts[k].segment(i, 0));
                let j = u64::from_le_bytes(b[..8].try_into().unwrap());
                assert_eq!(b.len(), len(j), "packet {j}");
                assert_eq!(&b[8..], &pattern(len(j), j)[8..], "packet {j}");
                let flow = bursts[k].meta(i).flow;
                assert!(
                    (1..=4).contains(&flow.0),
                    "unlabelled source port: {flow:?}"
                );
                let lane = flow.0 as usize - 1;
                assert_eq!(
                    j % 4,
                    lane as u64,
                    "packet {j} left from lane {lane}'s port"
                );
                assert_eq!(j, next_j[lane], "lane {lane} out of order or lost");
                next_j[lane] += 4;
                assert_eq!(
                    *lane_queue[lane].get_or_insert(k),
                    k,
                    "lane {lane} split over queues"
                );
                got += 1;
            }
            bursts[k].clear();
        }
        got == total
    });
    assert_eq!(got, total, "next per lane {next_j:?}");
    let c = txs.tx_counters(0).snapshot();
    assert_eq!((c.packets, c.total_drops()), (total, 0));
    let rx_total: u64 = (0..4).map(|k| rxs.rx_counters(k).snapshot().packets).sum();
    assert_eq!(rx_total, total);
    let used: HashSet<usize> = lane_queue.iter().flatten().copied().collect();
    eprintln!("lanes -> queues {lane_queue:?} (ports {ports:?})");
    used.len()
}

#[test]
fn tx_lanes_send_from_distinct_ports_and_spread_over_reuseport_queues() {
    // The kernel hashes each lane (4-tuple) to a queue: all four can land on one queue by
    // chance (1 in 64), so new source ports are tried a few times before calling it no spread.
    let mut spread = 0;
    for _ in 0..6 {
        spread = four_lanes_into_four_reuseport_queues(false);
        if spread >= 2 {
            break;
        }
    }
    assert!(spread >= 2, "4 lanes never spread over the 4 queues");
}

#[test]
fn tx_lanes_with_gso_group_only_packets_of_one_lane() {
    four_lanes_into_four_reuseport_queues(true);
}

#[test]
fn tx_lane_rule_counts_refused_packets() {
    // Datagrams over 65507 bytes are refused (EMSGSIZE, `too_large`) but keep their place.
    let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
    let dest = receiver.local_addr().unwrap().port();
    let setup = Setup::new(&lanes_tx_config("", 65536, 3, dest), 65536, 64);
    let (_, mut tx) = setup.open::<64>().unwrap().into_queues();
    assert_eq!(tx[0].lanes(), 3);
    let ports: Vec<u16> = (0..3)
        .map(|l| tx[0].lane_local_addr(l).unwrap().port())
        .collect();
    let refused = |j: u64| j % 5 == 2 || j % 7 == 0;
    let len = |j: u64| {
        if refused(j) {
            65520
        } else {
            64 + j as usize % 200
        }
    };
    let (total, accepted) = send_lane_bursts(&mut tx[0], len);
    let want: Vec<u64> = (0..total).filter(|&j| !refused(j)).collect();
    assert_eq!(accepted, want.len() as u64);
    let c = setup.tx_counters(0).snapshot();
    assert_eq!(c.packets, accepted);
    assert_eq!(c.drop_count(DropReason::TooLarge), total - accepted);

    receiver
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = vec![0u8; 65536];
    let mut last: [Option<u64>; 3] = [None; 3];
    let mut got = Vec::new();
    while got.len() < want.len() {
        let (n, from) = receiver.recv_from(&mut buf).unwrap();
        let j = u64::from_le_bytes(buf[..8].try_into().unwrap());
        assert_eq!(n, len(j), "packet {j}");
        assert_eq!(&buf[8..n], &pattern(len(j), j)[8..], "packet {j}");
        let lane = (j % 3) as usize;
        assert_eq!(
            from.port(),
            ports[lane],
            "packet {j} left from the wrong lane"
        );
        assert!(last[lane] < Some(j), "lane {lane} out of order at {j}");
        last[lane] = Some(j);
        got.push(j);
    }
    got.sort_unstable();
    assert_eq!(got, want);
}

#[test]
fn tx_queues_without_the_generator_have_one_lane() {
    let setup = Setup::new(&tx_config(free_udp_port(), "", free_udp_port()), 2048, 256);
    let (_, tx) = setup.open::<64>().unwrap().into_queues();
    assert_eq!(tx[0].lanes(), 1, "streams defaults to 1");
    let mut s = header("");
    s += &region("tx", 2048, 256);
    s += &format!(
        "[[interfaces]]\nname = \"u\"\naddress = \"udp://127.0.0.1:{}\"\n",
        free_udp_port()
    );
    s += &txq(0, "tx", 64);
    s += &txq(1, "tx", 64);
    s += &format!(
        "[generator]\ninterface = \"u\"\ntx_queue = 1\ndestination = \"udp://127.0.0.1:{}\"\npayload_size = 1000\nunpaced = true\nstreams = 5\n",
        free_udp_port()
    );
    let setup = Setup::new(&s, 2048, 256);
    let (_, tx) = setup.open::<64>().unwrap().into_queues();
    assert_eq!((tx[0].lanes(), tx[1].lanes()), (1, 5));
}

/// Sends `n` datagrams `gap` apart (a steady low-rate stream) and receives them on a sleeping
/// queue; returns (datagrams received in order, receive calls that returned data, coalescing
/// sleeps).
fn steady_stream(coalesce_us: u32, n: usize, gap: Duration) -> (usize, u64, u64) {
    let (in_order, st) = steady_stream_stats(coalesce_us, n, gap);
    (in_order, st.reads, st.coalesce_waits)
}

/// [`steady_stream`] with the queue's whole statistics.
fn steady_stream_stats(
    coalesce_us: u32,
    n: usize,
    gap: Duration,
) -> (usize, rtdaq_engine_socket::RxStats) {
    let port = free_udp_port();
    let setup = Setup::new(
        &rx_config(
            port,
            &format!("rcvbuf = 4194304\nrx_coalesce_us = {coalesce_us}"),
            2048,
            256,
            1,
            "",
        ),
        2048,
        256,
    );
    let (mut rx, _) = setup.open::<64>().unwrap().into_queues();
    let sender = std::thread::spawn(move || {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let start = std::time::Instant::now();
        for i in 0..n {
            // Paced against the start, so a late wake-up does not slow the stream down.
            let due = start + gap * i as u32;
            if let Some(d) = due.checked_duration_since(std::time::Instant::now()) {
                std::thread::sleep(d);
            }
            s.send_to(&pattern(200, i as u64), ("127.0.0.1", port))
                .unwrap();
        }
    });
    let got = collect(&mut rx[0], n);
    sender.join().unwrap();
    let in_order = got
        .iter()
        .enumerate()
        .filter(|(i, (d, _))| d == &pattern(200, *i as u64))
        .count();
    (in_order, rx[0].stats())
}

#[test]
fn rx_coalesce_us_backs_off_when_its_waits_gather_too_little() {
    // 300 datagrams 1 ms apart with 100 µs waits: each wait gathers nothing, so after 4 such
    // waits the queue stops waiting (for 1024 turns, longer than this stream) and reads as
    // without coalescing.
    let n = 300;
    let (got, st) = steady_stream_stats(100, n, Duration::from_millis(1));
    assert_eq!(got, n, "every datagram, in order");
    assert!(st.coalesce_backoffs >= 1, "{st:?}");
    assert!(
        st.coalesce_waits <= 8,
        "backed off after 4 fruitless waits, not one wait per datagram: {st:?}"
    );
    // A stream that fills the waits keeps them (the gathering test above): no back-off there.
    let (got, st) = steady_stream_stats(2000, 1000, Duration::from_micros(100));
    assert_eq!(got, 1000);
    assert_eq!(st.coalesce_backoffs, 0, "{st:?}");
}

#[test]
fn rx_coalesce_us_gathers_a_steady_stream_into_larger_reads() {
    // 1000 datagrams 100 µs apart (0.1 s). Without coalescing a sleeping queue wakes for
    // almost every datagram; with 2 ms it reads ~20 at a time.
    let n = 1000;
    let gap = Duration::from_micros(100);
    let (plain, plain_reads, plain_waits) = steady_stream(0, n, gap);
    let (co, co_reads, co_waits) = steady_stream(2000, n, gap);
    assert_eq!((plain, co), (n, n), "every datagram, in order, both ways");
    assert_eq!(plain_waits, 0);
    assert!(co_waits > 0, "coalescing sleeps: {co_waits}");
    let (plain_batch, co_batch) = (n as f64 / plain_reads as f64, n as f64 / co_reads as f64);
    eprintln!(
        "average datagrams per read: plain {plain_batch:.1} ({plain_reads} reads), coalesced {co_batch:.1} ({co_reads} reads, {co_waits} waits)"
    );
    assert!(
        co_batch >= 5.0 && co_batch >= 3.0 * plain_batch,
        "coalesced reads should be much larger: plain {plain_batch:.1}, coalesced {co_batch:.1}"
    );
}
