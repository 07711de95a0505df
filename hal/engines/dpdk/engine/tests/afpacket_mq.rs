//! Multi-queue RX without DPDK RSS on `net_af_packet` (as root): two RX queues over a vdev
//! with `qpairs=2` on one end of a veth pair; the kernel's fanout spreads the peer's UDP
//! flows over both, and every datagram is accounted for.

mod common;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use common::*;
use rtdaq_core::traits::{RxBurst, RxQueue};
use rtdaq_testbed::{Side, VethPair};

#[test]
fn two_rx_queues_on_af_packet_qpairs_receive_every_flow() {
    require_root();
    let pair = VethPair::new("dmq").expect("veth pair");
    pair.add_static_neighbors().unwrap();
    let a = pair.ifname(Side::A).to_owned();
    let vdev = format!("net_af_packet0,iface={a},qpairs=2");
    let eal = [
        "--no-huge",
        "-m",
        "512",
        "--no-shconf",
        "--no-pci",
        "--vdev",
        vdev.as_str(),
        "--log-level=lib.eal:notice",
    ];
    // Two queues of 1024 descriptors need more mbufs than the default test region holds.
    let s = Setup::new(&config_toml(&eal, &a, 2, 0, false, 0).replacen(
        "buf_count = 2047",
        "buf_count = 4095",
        1,
    ));
    // The PMD opens its packet sockets at EAL init: do that inside A's namespace.
    let engine = pair
        .in_ns(Side::A, || s.open())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(engine.interfaces()[0].driver, "net_af_packet");
    assert_eq!(
        engine.port(0).unwrap().rss(),
        None,
        "no DPDK RSS: the kernel fans out"
    );
    let (mut rxq, _) = engine.into_queues();

    // 64 flows (source ports) × 4 datagrams from B to A:5000.
    let dst = (pair.ip(Side::A), 5000);
    let socks: Vec<UdpSocket> = pair.in_ns(Side::B, || {
        (0..64)
            .map(|_| UdpSocket::bind((pair.ip(Side::B), 0)).unwrap())
            .collect()
    });
    let sent = socks.len() * 4;
    for round in 0..4u8 {
        for sk in &socks {
            sk.send_to(&[round; 100], dst).unwrap();
        }
    }
    let mut per_queue = [0usize; 2];
    let mut bursts: Vec<_> = rxq.iter().map(|q| q.new_burst()).collect();
    let end = Instant::now() + Duration::from_secs(3);
    while per_queue.iter().sum::<usize>() < sent && Instant::now() < end {
        for (j, q) in rxq.iter_mut().enumerate() {
            q.poll(&mut bursts[j]);
            per_queue[j] += RxBurst::len(&bursts[j]);
            bursts[j].clear();
        }
    }
    let drops: u64 =
        s.rx.iter()
            .map(|r| r.counters.snapshot().total_drops())
            .sum();
    assert_eq!(
        per_queue.iter().sum::<usize>(),
        sent,
        "{per_queue:?}, drops {drops}"
    );
    assert!(
        per_queue.iter().all(|&n| n > 0),
        "the kernel spread 64 flows over both queues: {per_queue:?}"
    );
}
