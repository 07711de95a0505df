//! `engine.dpdk.flow_offload` on PMDs without `rte_flow` (`net_ring`): "hardware" fails with
//! an error naming the rule and the PMD's reason, "auto" falls back to software
//! classification (frames still classified), "software" creates no rule. As root.
//! (Steering on a PMD that has `rte_flow`: `tests/tap.rs`.)

mod common;

use std::time::{Duration, Instant};

use common::*;
use rtdaq_core::traits::RxQueue;
use rtdaq_core::{DropReason, FlowId};

/// One EAL for the binary; each test opens its own ring port.
const EAL: &[&str] = &[
    "--no-huge",
    "-m",
    "512",
    "--no-shconf",
    "--no-pci",
    "--vdev",
    "net_ring0",
    "--vdev",
    "net_ring1",
    "--vdev",
    "net_ring2",
    "--vdev",
    "net_ring3",
    "--log-level=lib.eal:notice",
];

/// `config_toml` on `port` with `flow_offload = mode` and one more flow (UDP 6000-6003 → drop).
fn config(port: &str, mode: &str) -> String {
    config_toml(EAL, port, 1, 1, true, 0).replace(
        "main_core = 0\n",
        &format!("main_core = 0\nflow_offload = \"{mode}\"\n"),
    ) + r#"
[[flows]]
interface = "port0"
id = 8
drop = true
[flows.match]
udp_dst = "6000-6003"
"#
}

#[test]
fn hardware_offload_on_a_pmd_without_rte_flow_names_the_rule_and_the_reason() {
    require_root();
    let s = Setup::new(&config("net_ring0", "hardware"));
    let e = s.open().unwrap_err();
    assert_eq!(e.key(), "flows[0]");
    let m = e.to_string();
    eprintln!("{m}");
    for want in [
        "flows[0] (id 7: udp_dst=5000 -> rx_queues[0])",
        "\"net_ring0\" (PMD net_ring)",
        "engine.dpdk.flow_offload = \"hardware\"",
        "prio 0: eth / ipv4 / udp dst 5000 -> queue 0",
        "no rte_flow support",
        "ENOSYS",
        "flow_offload = \"auto\"",
    ] {
        assert!(m.contains(want), "no {want:?} in: {m}");
    }
}

#[test]
fn auto_offload_falls_back_to_software_classification() {
    require_root();
    let s = Setup::new(&config("net_ring1", "auto"));
    let engine = s.open().expect("auto falls back");
    let info = &engine.interfaces()[0];
    assert_eq!(
        (
            info.flows_offloaded,
            info.default_offloaded,
            info.flow_rules
        ),
        (0, false, 0)
    );
    let (mut rx, mut tx) = engine.into_queues();
    // Software classification still assigns flow ids and drops.
    let frames: Vec<Vec<u8>> = [5000u16, 6001, 7000]
        .iter()
        .map(|&p| seq_frame(&spec(p, 64), 1))
        .collect();
    assert_eq!(send_all(&mut tx[0], &frames), 3);
    let got = recv(&mut rx[0], 1, Duration::from_millis(500));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1.flow, FlowId(7));
    let end = Instant::now() + Duration::from_secs(1);
    let mut b = rx[0].new_burst();
    while s.rx[0].counters.snapshot().total_drops() < 2 && Instant::now() < end {
        assert_eq!(rx[0].poll(&mut b), 0);
    }
    let c = s.rx[0].counters.snapshot();
    assert_eq!(c.drop_count(DropReason::FlowDrop), 1, "{c:?}");
    assert_eq!(c.drop_count(DropReason::NoFlow), 1, "{c:?}");
}

#[test]
fn software_offload_creates_no_rule() {
    require_root();
    let s = Setup::new(&config("net_ring2", "software"));
    let engine = s.open().unwrap();
    let info = &engine.interfaces()[0];
    assert_eq!((info.flows_offloaded, info.flow_rules), (0, 0));
}

#[test]
fn hardware_offload_refuses_a_range_needing_too_many_rules_before_the_eal() {
    // No root needed: checked while planning, before DPDK starts.
    let toml = config("net_ring3", "hardware")
        .replace("\"6000-6003\"", "\"1-65535\"\nudp_src = \"1000-1999\"");
    let s = Setup::new(&toml);
    let e = s.open().unwrap_err();
    assert_eq!(e.key(), "flows[1]");
    let m = e.to_string();
    assert!(
        m.contains("id 8: udp_src=1000-1999 udp_dst=1-65535 -> drop"),
        "{m}"
    );
    assert!(
        m.contains("rte_flow rules") && m.contains("software-only"),
        "{m}"
    );
}
