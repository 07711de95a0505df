//! Flow steering on a veth pair (no NIC steering there): the XDP program sends two UDP
//! destination ports to two queues and a VLAN id to a third; a third port is counted
//! `no_flow` and never delivered; a drop rule is counted `flow_drop`; RSS spreads flows like
//! the userspace Toeplitz hash; malformed frames are counted `malformed`, never delivered.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use rtdaq_core::flow::{hash_ipv4_udp, RSS_KEY_SYMMETRIC};
use rtdaq_core::traits::{RxBurst, RxQueue};
use rtdaq_core::{DropReason, FlowId, QueueId};
use rtdaq_engine_afxdp::{AfxdpRx, Steering};
use rtdaq_testbed::{Side, VethPair};

/// Polls every queue for `d`; returns the frames of each.
fn drain_all<const N: usize>(qs: &mut [AfxdpRx<'static, N>], d: Duration) -> Vec<Vec<Got>> {
    let mut out: Vec<Vec<Got>> = qs.iter().map(|_| Vec::new()).collect();
    let end = std::time::Instant::now() + d;
    while std::time::Instant::now() < end {
        for (k, q) in qs.iter_mut().enumerate() {
            let mut burst = q.new_burst();
            q.poll(&mut burst);
            for i in 0..RxBurst::len(&burst) {
                out[k].push((burst.frame(i).unwrap().to_vec(), burst.meta(i)));
            }
        }
    }
    for q in qs.iter_mut() {
        q.sync_drops();
    }
    out
}

#[test]
fn ports_and_vlan_are_steered_to_their_queues_and_the_rest_counted() {
    require_root();
    let pair = VethPair::new("xsteer").unwrap();
    // Unmatched frames go to the kernel, which answers with ICMP: static neighbours keep
    // ARP frames (which would count as no_flow too) off the wire.
    pair.add_static_neighbors().unwrap();
    let b = pair.ifname(Side::B);
    let mut s = header("frame_size = 2048");
    s += &region("rx", 2048, 1536);
    s += &interface("b", b, "default_action = \"drop\"");
    for q in 0..4 {
        s += &rxq(q, "rx", 32, 200);
    }
    s += &flow("b", 1, "queue = 0", "udp_dst = 5001");
    s += &flow("b", 2, "queue = 1", "udp_dst = 5002");
    s += &flow("b", 3, "queue = 2", "vlan_id = 100");
    s += &flow("b", 4, "drop = true", "udp_dst = \"6000-6009\"");
    s += &flow("b", 5, "rss = [2, 3]", "udp_dst = 7000");
    let setup = Setup::new(&s);
    let engine = setup.open_in::<64>(&pair, Side::B).unwrap();
    assert_eq!(engine.interfaces()[0].steering, Steering::Xdp);
    let (mut rx, _) = engine.into_queues();
    assert!(rx.iter().all(|q| q.nic_queue() == 0));

    let tx = PacketSender::new(&pair, Side::A);
    let n = 200u64;
    for seq in 0..n {
        tx.send(&seq_frame(&spec(&pair, 5001, 100, None), seq));
        tx.send(&seq_frame(&spec(&pair, 5002, 100, None), seq));
        tx.send(&seq_frame(&spec(&pair, 5003, 100, None), seq)); // no rule: no_flow
        tx.send(&seq_frame(&spec(&pair, 5003, 100, Some(100)), seq)); // VLAN 100
        tx.send(&seq_frame(&spec(&pair, 6005, 100, None), seq)); // drop rule
        if seq % 20 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    // RSS: 40 flows (source ports) to port 7000, spread over queues 2 and 3.
    let mut want_rss: HashMap<u16, usize> = HashMap::new();
    for sport in 41000..41040u16 {
        let mut sp = spec(&pair, 7000, 64, None);
        sp.src_port = sport;
        tx.send(&seq_frame(&sp, 0));
        let h = hash_ipv4_udp(&RSS_KEY_SYMMETRIC, sp.src_ip, sp.dst_ip, sport, 7000);
        want_rss.insert(sport, [2, 3][h as usize % 2]);
    }
    let got = drain_all(&mut rx, Duration::from_millis(700));

    let port = |f: &[u8]| {
        let i = rtdaq_core::wire::parse_frame(f).unwrap();
        (
            i.udp.unwrap().src_port,
            i.udp.unwrap().dst_port,
            i.outer_vlan_id(),
        )
    };
    // Queue 0: port 5001 only, flow 1. Queue 1: port 5002, flow 2.
    for (q, dport, flow) in [(0usize, 5001u16, 1u32), (1, 5002, 2)] {
        assert_eq!(got[q].len(), n as usize, "queue {q}");
        for (k, (f, m)) in got[q].iter().enumerate() {
            assert_eq!(port(f).1, dport);
            assert_eq!((m.flow, m.queue), (FlowId(flow), QueueId(q as u16)));
            assert_eq!(f, &seq_frame(&spec(&pair, dport, 100, None), k as u64));
        }
    }
    // Queue 2: the VLAN-100 frames (flow 3) plus its share of the RSS flows (flow 5).
    let vlan: Vec<_> = got[2]
        .iter()
        .filter(|(f, _)| port(f).2 == Some(100))
        .collect();
    assert_eq!(vlan.len(), n as usize);
    assert!(vlan.iter().all(|(_, m)| m.flow == FlowId(3)));
    for q in [2usize, 3] {
        for (f, m) in got[q].iter().filter(|(f, _)| port(f).1 == 7000) {
            assert_eq!(m.flow, FlowId(5));
            assert_eq!(
                want_rss[&port(f).0],
                q,
                "RSS flow from port {} on the wrong queue",
                port(f).0
            );
        }
    }
    let rss_total: usize = [2usize, 3]
        .iter()
        .map(|&q| got[q].iter().filter(|(f, _)| port(f).1 == 7000).count())
        .sum();
    assert_eq!(rss_total, 40);
    assert_eq!(
        got[2].len() + got[3].len(),
        n as usize + 40,
        "nothing else reaches queues 2 and 3"
    );

    // Counters: the XDP program's drops land on the fallback queue (0, default drop).
    let c0 = setup.rx_counters(0).snapshot();
    assert_eq!(c0.drop_count(DropReason::NoFlow), n, "{c0:?}");
    assert_eq!(c0.drop_count(DropReason::FlowDrop), n, "{c0:?}");
    assert_eq!(c0.drop_count(DropReason::Malformed), 0);
    for (k, q) in rx.iter().enumerate() {
        let c = setup.rx_counters(k).snapshot();
        assert_eq!(c.packets, got[k].len() as u64, "queue {k}");
        assert_eq!(
            q.stats().misrouted,
            0,
            "XDP and the flow table disagree on queue {k}"
        );
        if k > 0 {
            assert_eq!(c.total_drops(), 0, "queue {k}: {c:?}");
        }
    }
}

/// Malformed frames: the XDP program sends them to the fallback queue, whose
/// `parse_frame` counts them; none is ever delivered.
fn malformed_frames(pair: &VethPair) -> Vec<Vec<u8>> {
    let good = seq_frame(&spec(pair, 5001, 100, None), 0);
    let mut out = Vec::new();
    // Truncated IPv4: total length beyond the frame.
    let mut f = good.clone();
    let tl = u16::from_be_bytes([f[16], f[17]]) + 40;
    f[16..18].copy_from_slice(&tl.to_be_bytes());
    out.push(f);
    // Bad IHL (4 = 16 bytes < 20).
    let mut f = good.clone();
    f[14] = 0x44;
    out.push(f);
    // Bad UDP length: larger than the IPv4 payload.
    let mut f = good.clone();
    f[38..40].copy_from_slice(&2000u16.to_be_bytes());
    out.push(f);
    // Bad UDP length: smaller than the UDP header.
    let mut f = good.clone();
    f[38..40].copy_from_slice(&4u16.to_be_bytes());
    out.push(f);
    // Runts: an Ethernet header announcing IPv4 with nothing after it, and one ending
    // inside a VLAN tag (veth refuses frames below 14 bytes, so no shorter runt can be sent).
    out.push(good[..14].to_vec());
    let mut f = good[..16].to_vec();
    f[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
    out.push(f);
    // IPv4 version 6 in an IPv4 EtherType.
    let mut f = good.clone();
    f[14] = 0x65;
    out.push(f);
    out
}

#[test]
fn malformed_frames_are_counted_and_never_delivered() {
    require_root();
    let pair = VethPair::new("xmal").unwrap();
    pair.add_static_neighbors().unwrap();
    let b = pair.ifname(Side::B);
    // Steered by XDP (rules + default drop) ...
    let mut s = header("frame_size = 2048");
    s += &region("rx", 2048, 512);
    s += &interface("b", b, "default_action = \"drop\"");
    s += &rxq(0, "rx", 32, 200);
    s += &rxq(1, "rx", 32, 200);
    s += &flow("b", 1, "queue = 1", "udp_dst = 5001");
    let setup = Setup::new(&s);
    let (mut rx, _) = setup.open_in::<64>(&pair, Side::B).unwrap().into_queues();
    let tx = PacketSender::new(&pair, Side::A);
    let bad = malformed_frames(&pair);
    for _ in 0..10 {
        for f in &bad {
            tx.send(f);
        }
    }
    tx.send(&seq_frame(&spec(&pair, 5001, 100, None), 1));
    let got = drain_all(&mut rx, Duration::from_millis(300));
    assert_eq!(got[0].len(), 0, "a malformed frame was delivered");
    assert_eq!(got[1].len(), 1);
    let c0 = setup.rx_counters(0).snapshot();
    assert_eq!(
        c0.drop_count(DropReason::Malformed),
        10 * bad.len() as u64,
        "{c0:?}"
    );
    assert_eq!(c0.packets, 0);
    drop(rx);

    // ... and by NIC queue (no rules): the queue's own parse counts them.
    let mut s = header("frame_size = 2048");
    s += &region("rx", 2048, 512);
    s += &interface("b", b, "");
    s += &rxq(0, "rx", 32, 200);
    let setup = Setup::new(&s);
    let engine = setup.open_in::<64>(&pair, Side::B).unwrap();
    assert_eq!(engine.interfaces()[0].steering, Steering::NicQueue);
    let (mut rx, _) = engine.into_queues();
    for f in &bad {
        tx.send(f);
    }
    tx.send(&seq_frame(&spec(&pair, 5001, 100, None), 2));
    let got = collect(
        &mut rx[0],
        1,
        Duration::from_secs(2),
        Duration::from_millis(100),
    );
    assert_eq!(got.len(), 1);
    let c = setup.rx_counters(0).snapshot();
    assert_eq!(
        c.drop_count(DropReason::Malformed),
        bad.len() as u64,
        "{c:?}"
    );
    assert_eq!(c.packets, 1);
}

#[test]
fn xdp_drop_counts_reach_the_fallback_queue_by_polling_alone() {
    require_root();
    let pair = VethPair::new("xlate").unwrap();
    pair.add_static_neighbors().unwrap();
    let b = pair.ifname(Side::B);
    let mut s = header("frame_size = 2048");
    s += &region("rx", 2048, 256);
    s += &interface("b", b, "default_action = \"drop\"");
    s += &rxq(0, "rx", 32, 1000);
    s += &flow("b", 1, "queue = 0", "udp_dst = 5001");
    let setup = Setup::new(&s);
    let (mut rx, _) = setup.open_in::<32>(&pair, Side::B).unwrap().into_queues();
    let tx = PacketSender::new(&pair, Side::A);
    for seq in 0..50 {
        tx.send(&seq_frame(&spec(&pair, 5009, 64, None), seq));
    }
    // No explicit sync: the queue's own polls add the program's counters within ~10 ms.
    let c = setup.rx_counters(0);
    let mut burst = rx[0].new_burst();
    let start = std::time::Instant::now();
    let seen = until(Duration::from_millis(500), || {
        rx[0].poll(&mut burst);
        c.drops(DropReason::NoFlow) == 50
    });
    assert!(
        seen,
        "no_flow = {} after {:?}",
        c.drops(DropReason::NoFlow),
        start.elapsed()
    );
    // Documented as about 10 ms; the margin absorbs a loaded test host.
    assert!(
        start.elapsed() < Duration::from_millis(250),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(rx[0].stats().xdp_redirected, 0);
}
