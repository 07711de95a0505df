//! The public API as `app/build.rs` and the CLI use it.

use rtdaq_config::model::{Engine, GeneratorRate, RegionKind, RxMode};
use rtdaq_config::{load_file, load_str, EngineKind, Platform};
use rtdaq_core::flow::{DefaultAction, FlowAction};
use rtdaq_core::QueueId;
use std::path::Path;

fn example() -> rtdaq_config::Config {
    load_file(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../example-raw-hds-flows.toml"))
        .expect("example loads")
}

#[test]
fn raw_example_resolves_references() {
    let c = example();
    assert_eq!(c.platform(), Platform::from_name("igx-orin").unwrap());
    assert_eq!(c.engine_kind(), EngineKind::Dpdk);
    assert_eq!(c.engine_kind().as_str(), "dpdk");
    assert!(matches!(&c.engine, Engine::Dpdk(d) if d.main_core == Some(0)));
    let iface = &c.interfaces[0];
    assert_eq!(iface.default_action, DefaultAction::Drop);
    let q0 = &iface.rx_queues[0];
    let hdr = c.region_by_name("hdr").unwrap();
    let data = c.region_by_name("data").unwrap();
    assert_eq!(q0.memory_regions, vec![hdr, data]);
    assert_eq!(q0.hds_split, Some(64));
    assert_eq!(q0.mode, RxMode::Indirect { consumer_core: 3 });
    assert_eq!(c.region(data).kind, RegionKind::Huge);
    let g = c.generator.as_ref().unwrap();
    assert_eq!(g.dst_mac, Some([2, 0, 0, 0, 0, 2]));
    assert_eq!(g.rate, GeneratorRate::Gbps(5.0));
}

#[test]
fn flow_table_and_rules() {
    let c = example();
    let rules = c.flow_rules(0);
    assert_eq!(rules.len(), 5);
    assert_eq!(
        rules[0].matcher.udp_dst.map(|r| (r.lo, r.hi)),
        Some((5000, 5003))
    );
    match &rules[2].action {
        FlowAction::Rss(q) => assert_eq!(q.as_slice(), &[QueueId(1), QueueId(2)]),
        other => panic!("expected RSS, got {other:?}"),
    }
    let table = c.flow_table::<{ rtdaq_config::MAX_FLOWS_PER_INTERFACE }>(0);
    assert_eq!(table.len(), 5);
    assert_eq!(table.default_action(), DefaultAction::Drop);
    assert_eq!(c.default_action(0), DefaultAction::Drop);
}

#[test]
#[should_panic(expected = "cannot take flow id")]
fn flow_table_too_small_panics() {
    let _ = example().flow_table::<2>(0);
}

#[test]
fn summary_numbers() {
    let s = example().summary();
    assert_eq!(s.regions.len(), 4);
    let data = s.regions.iter().find(|r| r.name == "data").unwrap();
    assert_eq!(data.bytes, 1 << 30);
    assert_eq!(data.hugepages, 1);
    assert_eq!(s.hugepages_1g, 1);
    // hdr 8 MiB + ctrl 8 MiB + tx_frames 16 MiB of 2 MiB pages.
    assert_eq!(s.hugepages_2m, 16);
    assert_eq!(s.total_bytes, (1 << 30) + (32 << 20));
    assert_eq!(s.cores, vec![2, 3, 4, 5, 6, 7, 8, 9]);
    let text = s.to_string();
    for needle in [
        "hugepages: 16 x 2M, 1 x 1G",
        "cx7_p0",
        "hdr, data",
        "cores used: 2, 3",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

const SMALL: &str = r#"
name = "t"
platform = "host"
[engine]
kind = "socket"
[[memory_regions]]
name = "rx"
kind = "host"
buf_size = 2048
buf_count = 1024
[[interfaces]]
name = "lo"
address = "udp://127.0.0.1:5000"
[[interfaces.rx_queues]]
id = 0
cpu_core = 1
memory_regions = ["rx"]
mode = "direct"
"#;

#[test]
fn defaults_are_documented_values() {
    let c = load_str(SMALL).unwrap();
    let q = &c.interfaces[0].rx_queues[0];
    assert_eq!(
        (q.rt_priority, q.batch_size, q.ring_depth, q.timeout_us),
        (50, 64, 1024, 100)
    );
    assert!(!q.busy_poll);
    assert_eq!(c.interfaces[0].mtu, 1500);
    assert_eq!(
        c.interfaces[0].default_action,
        DefaultAction::Queue(QueueId(0))
    );
    assert_eq!(c.run.duration_s, 10.0);
    assert_eq!(c.run.loss_tolerance, 0);
    assert_eq!(c.run.drain_ms, 100);
    assert!(!c.rt.required && c.rt.lock_memory);
    assert_eq!(c.rt.prefault_stack_kib, 256);
    assert!(matches!(&c.engine, Engine::Socket(s) if s.reuseport && !s.gro && s.rcvbuf.is_none()));
}

#[test]
fn all_semantic_errors_are_collected_one_per_line() {
    let bad = SMALL
        .replace(
            "cpu_core = 1",
            "cpu_core = 1\nrt_priority = 0\nring_depth = 1000",
        )
        .replace("buf_size = 2048", "buf_size = 100")
        .replace(
            "address = \"udp://127.0.0.1:5000\"",
            "address = \"udp://127.0.0.1:5000\"\nrole = \"server\"",
        )
        + "\n[[flows]]\ninterface = \"lo\"\nid = 0\nqueue = 3\n";
    let e = load_str(&bad).unwrap_err();
    let expect = [
        (
            "interfaces[0].rx_queues[0].rt_priority",
            "out of range 1..=99",
        ),
        (
            "interfaces[0].rx_queues[0].ring_depth",
            "not a power of two",
        ),
        ("interfaces[0].role", "tcp:// interfaces only"),
        ("flows[0].id", "no flow matched"),
        ("flows[0].queue", "no RX queue with id 3"),
    ];
    for (path, msg) in expect {
        assert!(e.contains(path, msg), "missing {path}: {msg} in\n{e}");
    }
    assert_eq!(e.to_string().lines().count(), e.len());
    for line in e.to_string().lines() {
        assert!(line.contains(": "), "{line}");
    }
}

#[test]
fn buf_size_checked_when_queue_is_valid() {
    let bad = SMALL.replace("buf_size = 2048", "buf_size = 100");
    let e = load_str(&bad).unwrap_err();
    assert!(e.contains(
        "interfaces[0].rx_queues[0].memory_regions[0]",
        "too small for the largest frame of 1472 B"
    ));
    let ok = SMALL.replace("buf_size = 2048", "buf_size = 1000").replace(
        "address = \"udp://127.0.0.1:5000\"",
        "address = \"udp://127.0.0.1:5000\"\nmax_message_size = 1000",
    );
    load_str(&ok).unwrap();
}

#[test]
fn errors_are_std_errors() {
    fn takes(_: &dyn std::error::Error) {}
    let e = load_str("name = ").unwrap_err();
    takes(&e);
    takes(&e.0[0]);
    assert_eq!(e.0[0].path, "<toml>");
    assert!(e.0[0].message.contains("line 1"), "{e}");
}
