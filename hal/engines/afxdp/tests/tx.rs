//! AF_XDP TX on a veth pair: whole frames built in the TX queue's buffers in namespace A
//! reach a plain UDP socket in namespace B (the kernel sees real frames), every one, intact;
//! a queue whose NIC queue also has an RX socket shares its UMEM (echo test); bad frames
//! are counted, not sent.

mod common;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use common::*;
use rtdaq_core::traits::{RxBurst, RxQueue, TxBurst, TxQueue};
use rtdaq_core::wire::{check_pattern, emit_udp_frame, SeqHeader, UdpFrameSpec};
use rtdaq_core::{DropReason, SeqTracker};
use rtdaq_engine_afxdp::AfxdpTx;
use rtdaq_testbed::{Side, VethPair};

/// Builds `n` sequence frames in the queue's buffers and sends them; returns accepted.
fn send_seq<const N: usize>(
    q: &mut AfxdpTx<'static, N>,
    sp: &UdpFrameSpec,
    first: u64,
    n: usize,
) -> usize {
    let mut burst = q.new_burst();
    let got = q.reserve(&mut burst, n);
    assert_eq!(got, n, "the pool ran short");
    for i in 0..n {
        let f = seq_frame(sp, first + i as u64);
        burst.packet_mut(i).unwrap()[..f.len()].copy_from_slice(&f);
        burst.set_len(i, f.len());
    }
    q.send(&mut burst)
}

/// A UDP socket in `side`'s namespace, bound to its address with a large buffer.
fn udp_socket(pair: &VethPair, side: Side) -> UdpSocket {
    let ip = pair.ip(side);
    let s = pair.in_ns(side, || UdpSocket::bind((ip, 0))).unwrap();
    s.set_nonblocking(true).unwrap();
    s
}

/// Reads every datagram waiting on `s` into the tracker; returns how many.
fn read_all(s: &UdpSocket, t: &mut SeqTracker<16>, payload_len: usize) -> u64 {
    let mut buf = [0u8; 2048];
    let mut n = 0;
    while let Ok(len) = s.recv(&mut buf) {
        assert_eq!(len, payload_len);
        let (h, rest) = SeqHeader::parse_with_payload(&buf[..len]).unwrap();
        assert!(
            check_pattern(h.stream_id, h.seq, rest),
            "datagram {} corrupt",
            h.seq
        );
        t.observe(h.seq);
        n += 1;
    }
    n
}

#[test]
fn tx_frames_reach_a_kernel_udp_socket_all_of_them() {
    require_root();
    let pair = VethPair::new("xtx").unwrap();
    pair.add_static_neighbors().unwrap();
    let sock = udp_socket(&pair, Side::B);
    let port = sock.local_addr().unwrap().port();
    let mut s = header("frame_size = 2048");
    s += &region("tx", 2048, 1024);
    s += &interface("a", pair.ifname(Side::A), "");
    s += &txq(0, "tx", 64);
    let setup = Setup::new(&s);
    let (_, mut tx) = setup.open_in::<64>(&pair, Side::A).unwrap().into_queues();
    assert_eq!(
        (tx[0].nic_queue(), tx[0].lanes(), tx[0].zero_copy()),
        (0, 1, false)
    );

    let sp = spec(&pair, port, 1200, None);
    let n = 20_000u64;
    let mut t = SeqTracker::<16>::new();
    let (mut sent, mut got) = (0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(8);
    while sent < n && Instant::now() < deadline {
        sent += send_seq(&mut tx[0], &sp, sent, 64.min((n - sent) as usize)) as u64;
        got += read_all(&sock, &mut t, 1200);
    }
    assert_eq!(sent, n);
    let end = Instant::now() + Duration::from_secs(2);
    while got < n && Instant::now() < end {
        got += read_all(&sock, &mut t, 1200);
    }
    let st = t.snapshot();
    assert_eq!((got, st.gaps, st.duplicates), (n, 0, 0), "{st:?}");
    let c = setup.tx_counters(0).snapshot();
    assert_eq!((c.packets, c.total_drops()), (n, 0), "{c:?}");
    assert_eq!(c.bytes, n * sp.frame_len() as u64);
    assert_eq!(tx[0].flush(Duration::from_secs(1)), 0);
    let s = tx[0].stats();
    assert_eq!(
        (s.errors, s.tx_invalid_descs, s.bad_completions),
        (0, 0, 0),
        "{s:?}"
    );
    drop(tx);
    assert_eq!(
        setup.pools[0].in_use(),
        0,
        "every frame came back to the pool"
    );
}

#[test]
fn bad_frames_are_counted_not_sent() {
    require_root();
    let pair = VethPair::new("xtxbad").unwrap();
    let mut s = header("frame_size = 2048");
    s += &region("tx", 2048, 256);
    s += &interface("a", pair.ifname(Side::A), "");
    s += &txq(0, "tx", 32);
    let setup = Setup::new(&s);
    let (_, mut tx) = setup.open_in::<32>(&pair, Side::A).unwrap().into_queues();
    assert_eq!(tx[0].max_frame(), 1500 + 22);
    let mut burst = tx[0].new_burst();
    assert_eq!(tx[0].reserve(&mut burst, 3), 3);
    burst.set_len(0, 10); // shorter than an Ethernet header
    burst.set_len(1, 1600); // longer than the MTU allows
    let sp = spec(&pair, 9, 100, None);
    let n = emit_udp_frame(burst.packet_mut(2).unwrap(), &sp).unwrap();
    burst.set_len(2, n);
    assert_eq!(tx[0].send(&mut burst), 1);
    assert!(burst.is_empty());
    let c = setup.tx_counters(0).snapshot();
    assert_eq!(
        (
            c.packets,
            c.drop_count(DropReason::Malformed),
            c.drop_count(DropReason::TooLarge)
        ),
        (1, 1, 1)
    );
}

#[test]
fn rx_and_tx_on_one_nic_queue_share_a_umem_echo() {
    require_root();
    let pair = VethPair::new("xecho").unwrap();
    pair.add_static_neighbors().unwrap();
    let sock = udp_socket(&pair, Side::A);
    let port_a = sock.local_addr().unwrap().port();
    // need_wakeup off: every send kicks, every RX wake-up is the kernel's own.
    let mut s = header("frame_size = 4096\nneed_wakeup = false");
    s += &region("frames", 4096, 512);
    s += &interface("b", pair.ifname(Side::B), "");
    s += &rxq(0, "frames", 32, 500);
    s += &txq(0, "frames", 32);
    let setup = Setup::new(&s);
    let (mut rx, mut tx) = setup.open_in::<32>(&pair, Side::B).unwrap().into_queues();
    assert_eq!((rx[0].nic_queue(), tx[0].nic_queue()), (0, 0));

    // A sends frames to B with AF_PACKET; B echoes each payload back to A's UDP socket.
    let sender = PacketSender::new(&pair, Side::A);
    let to_b = spec(&pair, 7, 300, None);
    let back = UdpFrameSpec {
        dst_mac: pair.mac(Side::A),
        src_mac: pair.mac(Side::B),
        src_ip: pair.ip(Side::B).octets(),
        dst_ip: pair.ip(Side::A).octets(),
        src_port: 7,
        dst_port: port_a,
        payload_len: 300,
        ..UdpFrameSpec::default()
    };
    let n = 2000u64;
    let mut t = SeqTracker::<16>::new();
    let (mut echoed, mut got) = (0u64, 0u64);
    let mut rb = rx[0].new_burst();
    let mut tb = tx[0].new_burst();
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut sent = 0u64;
    while got < n && Instant::now() < deadline {
        if sent < n {
            for _ in 0..16 {
                sender.send(&seq_frame(&to_b, sent));
                sent += 1;
            }
        }
        rx[0].poll(&mut rb);
        let k = RxBurst::len(&rb);
        if k > 0 {
            assert_eq!(tx[0].reserve(&mut tb, k), k);
            for i in 0..k {
                let f = rb.frame(i).unwrap();
                let info = rtdaq_core::wire::parse_frame(f).unwrap();
                let payload = info.udp_payload(f).unwrap();
                let out = tb.packet_mut(i).unwrap();
                let len = back.frame_len();
                out[len - payload.len()..len].copy_from_slice(payload);
                emit_udp_frame(out, &back).unwrap();
                tb.set_len(i, len);
            }
            echoed += tx[0].send(&mut tb) as u64;
        }
        rb.clear();
        got += read_all(&sock, &mut t, 300);
    }
    assert_eq!((echoed, got, t.snapshot().gaps), (n, n, 0));
    drop(rb);
    drop((rx, tx));
    assert_eq!(setup.pools[0].in_use(), 0);
}
