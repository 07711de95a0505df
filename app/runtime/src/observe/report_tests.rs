//! Tests of the report (`report.rs`): its JSON, its text and its judgements.

use super::*;
use serde_json::Value;

fn snap(packets: u64, bytes: u64) -> CounterSnapshot {
    let mut s = CounterSnapshot {
        packets,
        bytes,
        ..Default::default()
    };
    s.drops[DropReason::RingFull.index()] = 2;
    s.drops[DropReason::Kernel.index()] = 1;
    s
}

/// A validator's counters with every named counter a distinct nonzero value (1001 +
/// its index).
pub(crate) fn every_counter_set() -> ValidatorStats {
    use crate::validator::{HeapCounts, Rejects};
    let n = |k: u64| 1001 + k;
    ValidatorStats {
        received: n(0),
        bytes: n(1),
        seq_gaps: n(2),
        reordered: n(3),
        duplicates: n(4),
        corrupt: n(5),
        malformed: n(6),
        too_old: n(7),
        unique: n(8),
        streams: n(9),
        streams_overflow: n(10),
        negative_latency: n(11),
        latency: LatencySummary::default(),
        in_gpu_memory: n(12),
        invalid: n(13),
        rejects: Rejects {
            short: n(14),
            length: n(15),
            foreign: n(16),
            step: n(17),
            frame_number: n(18),
            items: n(19),
        },
        heaps: Some(HeapCounts {
            complete: n(20),
            incomplete: n(21),
            missing: n(22),
            unsized_heaps: n(23),
            missing_bytes: n(24),
            ends: n(25),
        }),
    }
}

/// Issue #29: every counter the validator keeps reaches the JSON report (under its
/// report name) and the text report (its value is printed), for an instrument-format
/// queue (rejects, invalid and heaps are printed with the format).
#[test]
fn every_validator_counter_is_in_the_json_and_the_text_report() {
    let s = every_counter_set();
    let named = s.named();
    let values: std::collections::BTreeSet<u64> = named.iter().map(|(_, v)| *v).collect();
    assert_eq!(
        values.len(),
        named.len(),
        "distinct values, each counter set"
    );
    let mut q = QueueReport::rx("lo", 0, Some(1), &CounterSnapshot::default(), 1.0, Some(&s));
    q.format = Some(FormatReport {
        kind: "spead".into(),
        frames_per_second: None,
        learned: false,
    });
    let v: Value = serde_json::to_value(&q).unwrap();
    for (name, want) in named {
        let ptr = match name {
            "received" => "/checked".to_string(),
            "bytes" => "/checked_bytes".to_string(),
            "streams" => "/streams_tracked".to_string(),
            "heaps_unsized" => "/heaps/unsized_heaps".to_string(),
            n if n.starts_with("rejects_") => format!("/rejects/{}", &n[8..]),
            n if n.starts_with("heaps_") => format!("/heaps/{}", &n[6..]),
            n => format!("/{n}"),
        };
        assert_eq!(
            v.pointer(&ptr).and_then(Value::as_u64),
            Some(want),
            "{name} at {ptr} in {v}"
        );
    }
    let d = DirectionReport::rx(vec![q], 1.0, None);
    let r = RunReport { rx: d, ..sample() };
    let text = r.to_string();
    for (name, want) in named {
        assert!(
            text.split(|c: char| !c.is_ascii_digit())
                .any(|w| w == want.to_string()),
            "{name} ({want}) in the text report:\n{text}"
        );
    }
    assert!(
        text.contains("1011 packets of streams beyond the table")
            && text.contains("raise max_streams of interface lo"),
        "{text}"
    );
}

fn sample() -> RunReport {
    let v = ValidatorStats {
        received: 1000,
        seq_gaps: 3,
        reordered: 1,
        malformed: 2,
        latency: LatencySummary {
            p50: 10_000,
            p99: 20_000,
            p999: 30_000,
            max: 40_000,
            count: 990,
            min: 5_000,
        },
        ..Default::default()
    };
    let rxq = vec![
        QueueReport::rx("lo", 0, Some(1), &snap(1000, 1_400_000), 2.0, Some(&v)),
        QueueReport::rx("lo", 1, None, &snap(500, 700_000), 2.0, None),
    ];
    let txq = vec![QueueReport::tx(
        "lo",
        0,
        Some(0),
        &snap(1500, 2_100_000),
        2.0,
    )];
    RunReport {
        engine: "socket".into(),
        platform: "host".into(),
        config_name: "host-loopback-udp".into(),
        config_sha256: "ab".repeat(32),
        rtdaq_version: "0.1.0".into(),
        started_at: rfc3339_utc(1_700_000_000_123_456_789),
        started_at_unix_ns: 1_700_000_000_123_456_789,
        duration_s: 2.0,
        stopped_by_signal: false,
        bytes_are: "payload".into(),
        exit_code: loss_exit_code(3, 0),
        loss_tolerance: 0,
        lost: 3,
        io_thread_allocations: 0,
        rx: DirectionReport::rx(rxq, 2.0, None),
        tx: DirectionReport::tx(txq, 2.0),
        ports: Vec::new(),
        nics: Vec::new(),
        time: None,
        cpu_steal_s: BTreeMap::new(),
        failed_threads: Vec::new(),
        dumps: Vec::new(),
    }
}

#[test]
fn ports_appear_in_json_and_text_only_when_present() {
    let mut r = sample();
    let v: Value = serde_json::to_value(&r).unwrap();
    assert!(v.get("ports").is_none(), "no ports key without port stats");
    let stats = rtdaq_core::traits::PortStats {
        interface: 0,
        port: "net_ring0".into(),
        driver: "net_ring".into(),
        mac: Some([2, 0, 0, 0, 0, 1]),
        link: Some(rtdaq_core::traits::LinkInfo {
            up: true,
            speed_mbps: 10_000,
            full_duplex: true,
        }),
        ipackets: 5,
        opackets: 6,
        ibytes: 500,
        obytes: 600,
        xstats: vec![("rx_q0_packets".into(), 5)],
        ..Default::default()
    };
    r.ports.push(PortReport::from_stats("ring".into(), &stats));
    let v: Value = serde_json::to_value(&r).unwrap();
    let p = &v["ports"][0];
    assert_eq!(
        keys(p),
        "driver ibytes ierrors imissed interface ipackets link mac obytes oerrors opackets port rx_nombuf xstats"
    );
    assert_eq!(p["mac"], "02:00:00:00:00:01");
    assert_eq!(p["link"]["speed_mbps"], 10_000);
    assert_eq!(p["xstats"]["rx_q0_packets"], 5);
    let back: RunReport = serde_json::from_value(v).unwrap();
    assert_eq!(back, r);
    let text = r.to_string();
    assert!(
        text.contains("ring = net_ring0 (net_ring) MAC 02:00:00:00:00:01 · link up 10000 Mb/s full · rx 5 pkts 500 B · tx 6 pkts 600 B"),
        "{text}"
    );
    assert!(text.contains("xstats: rx_q0_packets=5"), "{text}");
}

#[test]
fn dpdk_port_pause_and_drop_counters_are_warned() {
    let stats = rtdaq_core::traits::PortStats {
        port: "0000:17:00.0".into(),
        driver: "net_ice".into(),
        xstats: vec![
            ("rx_q0_packets".into(), 5),
            ("tx_xoff_packets".into(), 12),
            ("tx_xon_packets".into(), 12),
            ("rx_out_of_buffer".into(), 3),
        ],
        ..Default::default()
    };
    let p = PortReport::from_stats("adc".into(), &stats);
    assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
    assert!(
        p.warnings[0].contains("SENT 12 pause frames"),
        "{}",
        p.warnings[0]
    );
    assert!(
        p.warnings[0].contains("tx_xoff_packets"),
        "{}",
        p.warnings[0]
    );
    assert!(
        p.warnings[1].contains("3 frames were dropped"),
        "{}",
        p.warnings[1]
    );
    assert!(p
        .to_string()
        .contains("WARNING: adc (0000:17:00.0): the NIC SENT"));
    let quiet = PortReport::from_stats(
        "adc".into(),
        &rtdaq_core::traits::PortStats {
            xstats: vec![("rx_q0_packets".into(), 5)],
            ..Default::default()
        },
    );
    assert!(quiet.warnings.is_empty());
}

/// The sorted keys of a JSON object, space-separated.
fn keys(v: &Value) -> String {
    let mut k: Vec<&str> = v
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    k.sort_unstable();
    k.join(" ")
}

#[test]
fn schema_pinned() {
    let r = sample();
    let v: Value = serde_json::to_value(&r).unwrap();
    assert_eq!(
        keys(&v),
        "bytes_are config_name config_sha256 cpu_steal_s duration_s engine exit_code \
         io_thread_allocations loss_tolerance lost platform rtdaq_version rx started_at \
         started_at_unix_ns stopped_by_signal tx"
    );
    assert_eq!(v["started_at"], "2023-11-14T22:13:20.123456789Z");
    assert_eq!(v["exit_code"], 1);
    let tx_keys = "bytes consumer_cpu_s core drops drops_total gbps interface io_cpu_s \
                   longest_stall_at_s longest_stall_us mpps packets queue";
    let rx_keys = "bytes checked checked_bytes consumer_cpu_s core corrupt drops \
                   drops_total duplicates gbps in_gpu_memory interface invalid io_cpu_s \
                   latency_ns longest_stall_at_s longest_stall_us malformed max_streams \
                   mpps negative_latency packets queue rejects reordered ring_wait_s \
                   seq_gaps streams_overflow streams_tracked too_old unique";
    let mut drop_keys: Vec<&str> = DropReason::ALL.iter().map(|r| r.as_str()).collect();
    drop_keys.sort_unstable();
    for (dir, want) in [("rx", rx_keys), ("tx", tx_keys)] {
        assert_eq!(keys(&v[dir]), "queues totals");
        let qs = v[dir]["queues"].as_array().unwrap();
        for q in qs.iter().chain([&v[dir]["totals"]]) {
            assert_eq!(keys(q), want, "{dir}");
            assert_eq!(keys(&q["drops"]), drop_keys.join(" "), "all reasons");
        }
    }
    let q0 = &v["rx"]["queues"][0];
    assert_eq!(q0["interface"], "lo");
    assert_eq!(
        (q0["queue"].as_u64(), q0["core"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(
        (q0["gbps"].as_f64(), q0["mpps"].as_f64()),
        (Some(5.6e-3), Some(5e-4))
    );
    assert_eq!(
        (
            q0["drops"]["ring_full"].as_u64(),
            q0["drops"]["truncated"].as_u64()
        ),
        (Some(2), Some(0))
    );
    assert_eq!(keys(&q0["latency_ns"]), "count max min p50 p99 p999");
    assert_eq!(q0["latency_ns"]["p999"], 30_000);
    assert!(v["rx"]["queues"][1]["core"].is_null());
    let t = &v["rx"]["totals"];
    assert_eq!(t["interface"], "total");
    assert!(t["queue"].is_null() && t["core"].is_null());
    let n = |k: &str| t[k].as_u64().unwrap();
    assert_eq!(
        (n("packets"), n("bytes"), n("drops_total")),
        (1500, 2_100_000, 6)
    );
    assert_eq!((n("seq_gaps"), n("malformed")), (3, 2));
    assert_eq!(t["latency_ns"]["count"], 990);
    assert_eq!(v["tx"]["totals"]["drops"]["kernel"], 1);
    // Round trip.
    let back: RunReport = serde_json::from_value(v).unwrap();
    assert_eq!(back, r);
}

#[test]
fn display_and_write() {
    let r = sample();
    let text = r.to_string();
    for want in "RX |TX |lo:0|lo:1|total|ring_full=2|FAIL|3 lost|p99.9".split('|') {
        assert!(text.contains(want), "{want} missing in\n{text}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let path = dir.join("run.json");
    r.write_json(&path).unwrap();
    let back: RunReport = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(back, r);
    assert!(r.write_json(dir.join("missing/run.json")).is_err());
}

#[test]
fn helpers() {
    assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00.000000000Z");
    assert_eq!(
        rfc3339_utc(951_782_400 * 1_000_000_000),
        "2000-02-29T00:00:00.000000000Z"
    );
    assert_eq!(
        rfc3339_utc(4_107_542_399 * 1_000_000_000 + 1),
        "2100-02-28T23:59:59.000000001Z"
    );
    assert_eq!(rates(1_000, 10, 0.0), (0.0, 0.0));
    assert_eq!(rates(1_000, 10, f64::NAN), (0.0, 0.0));
    assert_eq!(loss_exit_code(5, 5), EXIT_OK);
    assert_eq!(loss_exit_code(6, 5), EXIT_LOSS);
    let empty = DirectionReport::rx(Vec::new(), 1.0, None);
    assert_eq!(empty.totals.rx, Some(RxChecks::default()));
    assert_eq!(empty.totals.drops.len(), DropReason::COUNT);
}
