//! Steering on a veth pair (root): flow rules compiled to per-queue cBPF filters, VLAN rules
//! on tags the kernel strips, malformed frames, and fanout without rules.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use rtdaq_core::wire::{emit_udp_frame, parse_frame, UdpFrameSpec, VlanTag};
use rtdaq_core::{DropReason, FlowId};
use rtdaq_testbed::Side;

/// Two UDP destination ports steered to two RX queues by two flows; a third port matches no
/// rule and is counted `no_flow` on the catch-all queue (default action "drop" → queue 0),
/// never delivered.
#[test]
fn two_ports_two_queues() {
    let pair = pair("afp-flows");
    pair.add_static_neighbors().unwrap();
    let txs = tx_config(&pair, Side::A, 1500, 2048, 1 << 20);
    let mut s = header(1 << 18, 64, 2048, "");
    s += &region("b", 2048, 256);
    s += &iface("b", pair.ifname(Side::B), 1500, "default_action = \"drop\"");
    s += &rxq(0, &["b"], 32, 500, "");
    s += &rxq(1, &["b"], 32, 500, "");
    s += &flow("b", 11, "queue = 0", "udp_dst = 5001");
    s += &flow("b", 22, "queue = 1", "udp_dst = 5002");
    let rxs = Setup::new(&s);
    let (mut rx, _) = rxs.open_in::<32>(&pair, Side::B);
    let (_, mut tx) = txs.open_in::<32>(&pair, Side::A);
    assert!(rx[0].filter_len().is_some() && rx[1].filter_len().is_some());
    assert_eq!(rx[0].fanout(), None);
    let per_port = 400;
    let ports = [5001u16, 5002, 5003];
    let sent = send_frames(&mut tx[0], 3 * per_port, None, |k, buf| {
        let s = spec(&pair, Side::A, 4000, ports[k % 3], 64);
        seq_frame(buf, &s, ports[k % 3], (k / 3) as u64)
    });
    assert_eq!(sent, 3 * per_port);
    for (q, (port, id)) in [(5001u16, 11u32), (5002, 22)].into_iter().enumerate() {
        let got = collect(&mut rx[q], per_port, Duration::from_secs(1));
        assert_eq!(got.len(), per_port, "queue {q}");
        for (k, g) in got.iter().enumerate() {
            assert_eq!(g.meta.flow, FlowId(id));
            assert_eq!(usize::from(g.meta.queue.0), q);
            assert_eq!(check_seq_frame(&g.segs[0]), Some((port, k as u64, port)));
        }
        assert_eq!(rx[q].stats().misrouted, 0);
    }
    // Nothing else was delivered anywhere.
    for q in rx.iter_mut() {
        assert!(collect(q, 1, Duration::from_millis(100)).is_empty());
    }
    let (c0, c1) = (rxs.rx_counters(0).snapshot(), rxs.rx_counters(1).snapshot());
    assert_eq!(c0.drop_count(DropReason::NoFlow), per_port as u64, "{c0:?}");
    assert_eq!(c1.total_drops(), 0, "{c1:?}");
    assert_eq!((c0.packets, c1.packets), (per_port as u64, per_port as u64));
}

/// A `vlan_id` rule: frames tagged with VLAN 100 (built with the core emitter, sent raw)
/// reach their queue with the tag back in place (the kernel strips it on receive), ahead of a
/// port rule they also match; VLAN 200 to another port matches nothing (`no_flow`); untagged
/// frames go to the port rule.
#[test]
fn vlan_rule_on_stripped_tags() {
    let pair = pair("afp-vlan");
    pair.add_static_neighbors().unwrap();
    let txs = tx_config(&pair, Side::A, 1500, 2048, 1 << 20);
    let mut s = header(1 << 18, 64, 2048, "");
    s += &region("b", 2048, 256);
    s += &iface("b", pair.ifname(Side::B), 1500, "default_action = \"drop\"");
    s += &rxq(0, &["b"], 32, 500, "");
    s += &rxq(1, &["b"], 32, 500, "");
    s += &flow("b", 1, "queue = 1", "vlan_id = 100");
    s += &flow("b", 2, "queue = 0", "udp_dst = 5001");
    let rxs = Setup::new(&s);
    let (mut rx, _) = rxs.open_in::<32>(&pair, Side::B);
    let (_, mut tx) = txs.open_in::<32>(&pair, Side::A);
    let n = 100;
    let kinds = [Some(100u16), None, Some(200)];
    let mut sent_frames: Vec<Vec<u8>> = Vec::new();
    let accepted = send_frames(&mut tx[0], 3 * n, None, |k, buf| {
        let s = UdpFrameSpec {
            vlan: kinds[k % 3].map(|v| VlanTag {
                pcp: 5,
                ..VlanTag::dot1q(v)
            }),
            // VLAN 200 goes to a port no rule names.
            ..spec(
                &pair,
                Side::A,
                4000,
                if k % 3 == 2 { 5002 } else { 5001 },
                80,
            )
        };
        let len = seq_frame(buf, &s, 7, k as u64);
        if k % 3 == 0 {
            sent_frames.push(buf[..len].to_vec());
        }
        len
    });
    assert_eq!(accepted, 3 * n);
    let tagged = collect(&mut rx[1], n, Duration::from_secs(1));
    assert_eq!(tagged.len(), n);
    for (g, want) in tagged.iter().zip(&sent_frames) {
        assert_eq!(g.meta.flow, FlowId(1));
        // Byte for byte what was sent, tag (with its priority bits) included.
        assert_eq!(&g.segs[0], want);
        let info = parse_frame(&g.segs[0]).unwrap();
        assert_eq!(info.outer_vlan_id(), Some(100));
        assert_eq!(info.vlan_outer.unwrap().pcp, 5);
    }
    assert_eq!(rx[1].stats().vlan_restored, n as u64);
    let plain = collect(&mut rx[0], n, Duration::from_secs(1));
    assert_eq!(plain.len(), n);
    assert!(
        plain
            .iter()
            .all(|g| g.meta.flow == FlowId(2)
                && parse_frame(&g.segs[0]).unwrap().vlan_outer.is_none())
    );
    assert!(collect(&mut rx[0], 1, Duration::from_millis(100)).is_empty());
    assert_eq!(
        rxs.rx_counters(0).drops(DropReason::NoFlow),
        n as u64,
        "VLAN 200"
    );
    assert_eq!(rxs.rx_counters(1).snapshot().total_drops(), 0);
}

/// Frames whose headers do not parse are counted `malformed` and never delivered: IPv4 cut
/// short of its total length, a bad IHL, a bad UDP length, runts (an Ethernet header and a
/// few bytes), a VLAN tag with nothing after it. Good frames in between still arrive.
#[test]
fn malformed_frames_are_counted_not_delivered() {
    let pair = pair("afp-malformed");
    pair.add_static_neighbors().unwrap();
    let txs = tx_config(&pair, Side::A, 1500, 2048, 1 << 20);
    let mut s = header(1 << 18, 64, 2048, "");
    s += &region("b", 2048, 256);
    s += &iface("b", pair.ifname(Side::B), 1500, "");
    s += &rxq(0, &["b"], 32, 500, "");
    let rxs = Setup::new(&s);
    let (mut rx, _) = rxs.open_in::<32>(&pair, Side::B);
    let (_, mut tx) = txs.open_in::<32>(&pair, Side::A);
    let good = spec(&pair, Side::A, 4000, 5000, 100);
    let kinds = 6;
    let per_kind = 50;
    let accepted = send_frames(&mut tx[0], kinds * per_kind, None, |k, buf| {
        let n = seq_frame(buf, &good, 9, k as u64);
        match k % kinds {
            0 => n,      // good
            1 => n - 30, // IPv4 total length beyond the frame
            2 => {
                buf[14] = 0x44; // IHL 4
                n
            }
            3 => {
                buf[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&3u16.to_be_bytes()); // UDP length 3
                n
            }
            4 => 14 + 6, // runt: Ethernet + 6 bytes of "IPv4"
            _ => {
                // UDP length beyond the IPv4 payload
                buf[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&1400u16.to_be_bytes());
                n
            }
        }
    });
    assert_eq!(accepted, kinds * per_kind);
    let got = collect(&mut rx[0], per_kind + 1, Duration::from_secs(1));
    assert_eq!(got.len(), per_kind, "only the good frames are delivered");
    for g in &got {
        assert!(check_seq_frame(&g.segs[0]).is_some());
    }
    let c = rxs.rx_counters(0).snapshot();
    assert_eq!(
        c.drop_count(DropReason::Malformed),
        ((kinds - 1) * per_kind) as u64,
        "{c:?}"
    );
    assert_eq!(c.total_drops(), c.drop_count(DropReason::Malformed));
    // TX refuses frames shorter than an Ethernet header (malformed) and counts them.
    assert_eq!(send_frames(&mut tx[0], 2, None, |_, _| 13), 0);
    assert_eq!(txs.tx_counters(0).drops(DropReason::Malformed), 2);
}

/// Two RX queues (one sleeping, one busy-polling), no rules: a hash fanout group spreads the
/// flows; every frame arrives once, both queues get some, and each 5-tuple stays on one
/// queue.
#[test]
fn fanout_spreads_flows_over_queues() {
    let pair = pair("afp-fanout");
    pair.add_static_neighbors().unwrap();
    let txs = tx_config(&pair, Side::A, 1500, 2048, 1 << 20);
    let mut s = header(1 << 18, 64, 2048, "fanout = \"hash\"");
    s += &region("b", 2048, 256);
    s += &iface("b", pair.ifname(Side::B), 1500, "");
    s += &rxq(0, &["b"], 32, 200, "");
    s += &rxq(1, &["b"], 32, 200, "busy_poll = true").replace("cpu_core = 0", "cpu_core = 1");
    let rxs = Setup::new(&s);
    let (mut rx, _) = rxs.open_in::<32>(&pair, Side::B);
    let (_, mut tx) = txs.open_in::<32>(&pair, Side::A);
    let (g0, g1) = (rx[0].fanout().unwrap(), rx[1].fanout().unwrap());
    assert_eq!(g0, g1, "one group for the interface");
    assert!(rx[0].filter_len().is_none());
    let flows = 64u16;
    let per_flow = 20;
    let total = usize::from(flows) * per_flow;
    let sent = send_frames(&mut tx[0], total, None, |k, buf| {
        let sport = 10_000 + (k % usize::from(flows)) as u16;
        let s = spec(&pair, Side::A, sport, 5000, 64);
        seq_frame(buf, &s, sport, (k / usize::from(flows)) as u64)
    });
    assert_eq!(sent, total);
    let mut per_queue = [0usize; 2];
    let mut home: HashMap<u16, usize> = HashMap::new();
    for q in 0..2 {
        for g in collect(&mut rx[q], total, Duration::from_secs(1)) {
            let (stream, _, _) = check_seq_frame(&g.segs[0]).expect("a sequence frame");
            assert_eq!(
                *home.entry(stream).or_insert(q),
                q,
                "flow {stream} on both queues"
            );
            per_queue[q] += 1;
        }
    }
    assert_eq!(per_queue[0] + per_queue[1], total, "{per_queue:?}");
    assert!(per_queue.iter().all(|&n| n > 0), "{per_queue:?}");
    for q in 0..2 {
        assert_eq!(rxs.rx_counters(q).snapshot().total_drops(), 0);
    }
}

/// An RSS flow over two queues: the filters pick `queues[hash % 2]` with the core table's
/// symmetric Toeplitz hash, so each flow lands where the core table says (no `misrouted`).
#[test]
fn rss_flow_in_the_filters() {
    let pair = pair("afp-rss");
    pair.add_static_neighbors().unwrap();
    let txs = tx_config(&pair, Side::A, 1500, 2048, 1 << 20);
    let mut s = header(1 << 18, 64, 2048, "");
    s += &region("b", 2048, 256);
    s += &iface("b", pair.ifname(Side::B), 1500, "default_action = 0");
    s += &rxq(0, &["b"], 32, 200, "");
    s += &rxq(1, &["b"], 32, 200, "");
    s += &rxq(2, &["b"], 32, 200, "");
    s += &flow("b", 5, "rss = [1, 2]", "udp_dst = 6000");
    let rxs = Setup::new(&s);
    let (mut rx, _) = rxs.open_in::<32>(&pair, Side::B);
    let (_, mut tx) = txs.open_in::<32>(&pair, Side::A);
    let table = rxs.config.flow_table::<64>(0);
    let n = 300;
    let frame_of = |k: usize| {
        let s = spec(&pair, Side::A, 20_000 + k as u16, 6000, 48);
        let mut b = vec![0u8; 256];
        let len = emit_udp_frame(&mut b, &s).unwrap();
        b.truncate(len);
        b
    };
    let sent = send_frames(&mut tx[0], n, None, |k, buf| {
        let f = frame_of(k);
        buf[..f.len()].copy_from_slice(&f);
        f.len()
    });
    assert_eq!(sent, n);
    let mut seen = 0;
    for (q, rxq) in rx.iter_mut().enumerate().skip(1) {
        for g in collect(rxq, n, Duration::from_secs(1)) {
            match table.classify(&g.segs[0]) {
                rtdaq_core::flow::Classified::Deliver { queue, flow } => {
                    assert_eq!((usize::from(queue.0), flow), (q, FlowId(5)));
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(g.meta.flow, FlowId(5));
            seen += 1;
        }
        assert_eq!(rxq.stats().misrouted, 0);
    }
    assert_eq!(seen, n);
    assert!(collect(&mut rx[0], 1, Duration::from_millis(50)).is_empty());
}
