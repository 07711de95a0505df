//! `rte_flow` on a PMD that implements it: `net_tap` (rules become Linux tc `flower` filters
//! on the tap's `multiq` qdisc, with `skbedit queue_mapping` / `gact drop` actions). As root,
//! with `/dev/net/tun`.
//!
//! The test re-runs this binary inside the namespace of an `rtdaq_testbed::VethPair` (so the
//! taps, their addresses and tc rules live and die there), where:
//!
//! - `flow_offload = "hardware"` on `net_tap0` with rules UDP 5000 → queue 0, 5001 → queue 1,
//!   5002 → drop, and `default_action = "drop"`: UDP datagrams sent from Linux into the tap
//!   arrive on the queue their rule names (flow ids from software classification, nothing
//!   misrouted), the dropped ports never reach the host;
//! - `flow_offload = "auto"` on `net_tap1` with a rule tap cannot express
//!   (`ipv4_total_len`) second: the first rule stays in hardware, the rest falls back.
//!
//! On a kernel without `sch_multiq`, `cls_flower`, `act_skbedit` or `act_gact` (probed with
//! `tc` on the veth first) the tap PMD disables its `rte_flow` ("Disabling rte flow
//! support") and refuses every rule; the test then checks that "hardware" fails naming the
//! rule and the PMD's reason, that "auto" falls back, and records why steering was not
//! checked (`rtdaq_testbed::require::skip_part`: named in `scripts/test.sh`'s summary).

mod common;

use std::net::UdpSocket;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use rtdaq_core::traits::{RxBurst, RxQueue};
use rtdaq_core::{DropReason, FlowId};
use rtdaq_testbed::{Side, VethPair};

const CHILD: &str = "RTDAQ_DPDK_TAP_CHILD";
const EAL: &[&str] = &[
    "--no-huge",
    "-m",
    "512",
    "--no-shconf",
    "--no-pci",
    "--vdev",
    "net_tap0,iface=rtdtap0",
    "--vdev",
    "net_tap1,iface=rtdtap1",
    "--log-level=lib.eal:notice",
];

/// Whether tc can do what the tap PMD's `rte_flow` needs, tried on `dev` in `side`'s namespace.
fn tc_support(pair: &VethPair, side: Side) -> Result<(), String> {
    let dev = pair.ifname(side).to_string();
    let steps: [&[&str]; 3] = [
        &[
            "qdisc", "add", "dev", &dev, "root", "handle", "1:", "multiq",
        ],
        &[
            "filter",
            "add",
            "dev",
            &dev,
            "parent",
            "1:",
            "protocol",
            "ip",
            "prio",
            "1",
            "flower",
            "ip_proto",
            "udp",
            "dst_port",
            "1",
            "action",
            "skbedit",
            "queue_mapping",
            "0",
        ],
        &[
            "filter", "add", "dev", &dev, "parent", "1:", "protocol", "ip", "prio", "2", "flower",
            "ip_proto", "udp", "dst_port", "2", "action", "drop",
        ],
    ];
    let mut res = Ok(());
    for s in steps {
        let out = pair.exec(side, "tc", s).map_err(|e| format!("tc: {e}"))?;
        if !out.status.success() {
            res = Err(format!(
                "`tc {}` failed ({}): this kernel lacks sch_multiq / cls_flower / act_skbedit / act_gact, which net_tap's rte_flow uses",
                s.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            break;
        }
    }
    let _ = pair.exec(side, "tc", &["qdisc", "del", "dev", &dev, "root"]);
    res
}

#[test]
fn tap_rte_flow_rules_steer_or_fail_clearly() {
    if let Ok(mode) = std::env::var(CHILD) {
        return child(&mode);
    }
    require_root();
    if !std::path::Path::new("/dev/net/tun").exists() {
        rtdaq_testbed::require::skip("no /dev/net/tun, so no net_tap port (modprobe tun)");
        return;
    }
    let pair = VethPair::builder("dpdk-tap")
        .build()
        .unwrap_or_else(|e| panic!("test bed: {e}"));
    let mode = match tc_support(&pair, Side::A) {
        Ok(()) => "steer".to_owned(),
        Err(why) => format!("refuse:{why}"),
    };
    let exe = std::env::current_exe().unwrap();
    let out = pair
        .command(Side::A, exe.to_str().unwrap())
        .args([
            "tap_rte_flow_rules_steer_or_fail_clearly",
            "--exact",
            "--nocapture",
        ])
        .env(CHILD, &mode)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{text}");
    assert!(
        out.status.success(),
        "child in the namespace failed:\n{text}"
    );
    assert!(text.contains("1 passed"), "{text}");
}

/// A config with 2 RX and 2 TX queues (tap needs equal counts) on `port`: UDP 5000 → queue 0 (flow 7), `extra` flows after it,
/// `default_action = "drop"`.
fn config(port: &str, offload: &str, extra: &str) -> String {
    config_toml(EAL, port, 2, 2, false, 0)
        .replace("buf_count = 2047", "buf_count = 8191")
        .replace(
            "main_core = 0\n",
            &format!("main_core = 0\nflow_offload = \"{offload}\"\n"),
        )
        + extra
}

const STEER: &str = r#"
[[flows]]
interface = "port0"
id = 1
queue = 1
[flows.match]
udp_dst = 5001

[[flows]]
interface = "port0"
id = 2
drop = true
[flows.match]
udp_dst = 5002
"#;

const PARTIAL: &str = r#"
[[flows]]
interface = "port0"
id = 2
queue = 1
[flows.match]
ipv4_total_len = 100

[[flows]]
interface = "port0"
id = 3
queue = 1
[flows.match]
udp_dst = 5003
"#;

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().unwrap();
    assert!(st.success(), "ip {}", args.join(" "));
}

#[allow(clippy::needless_range_loop)] // two queues, their bursts and counters side by side
fn child(mode: &str) {
    let hw = Setup::new(&config("net_tap0", "hardware", STEER));
    let auto = Setup::new(&config("net_tap1", "auto", PARTIAL));
    if let Some(why) = mode.strip_prefix("refuse:") {
        let e = hw.open().unwrap_err();
        let m = e.to_string();
        eprintln!("hardware: {m}");
        assert_eq!(e.key(), "flows[0]", "{m}");
        for want in [
            "id 7: udp_dst=5000 -> rx_queues[0]",
            "\"net_tap0\" (PMD net_tap)",
            "[prio 0: eth / ipv4 / udp dst 5000 -> queue 0]",
            "rte_flow_create",
            "refused the rule: ",
        ] {
            assert!(m.contains(want), "no {want:?} in: {m}");
        }
        let engine = auto.open().expect("auto falls back to software");
        assert_eq!(engine.interfaces()[0].flows_offloaded, 0);
        rtdaq_testbed::require::skip_part("steering", why);
        return;
    }
    assert_eq!(mode, "steer");
    let engine = hw.open().expect("net_tap takes every rule");
    let info = engine.interfaces()[0].clone();
    assert_eq!(info.driver, "net_tap");
    assert_eq!(
        (
            info.flows_offloaded,
            info.default_offloaded,
            info.flow_rules
        ),
        (3, true, 4)
    );
    let mac = engine.port(0).unwrap().mac().unwrap();
    let auto_engine = auto.open().expect("auto");
    // UDP 5000 stays in hardware; ipv4_total_len (tap cannot match it) and what follows do not.
    assert_eq!(auto_engine.interfaces()[0].flows_offloaded, 1);
    assert!(!auto_engine.interfaces()[0].default_offloaded);

    let (mut rx, _) = engine.into_queues();
    let mac_s = mac.map(|b| format!("{b:02x}")).join(":");
    ip(&["addr", "add", "169.254.250.1/24", "dev", "rtdtap0"]);
    ip(&[
        "neigh",
        "replace",
        "169.254.250.2",
        "lladdr",
        &mac_s,
        "dev",
        "rtdtap0",
        "nud",
        "permanent",
    ]);
    let sock = UdpSocket::bind("169.254.250.1:0").unwrap();
    const N: usize = 50;
    for _ in 0..N {
        for port in [5000u16, 5001, 5002, 5009] {
            sock.send_to(&[0x5a; 100], ("169.254.250.2", port)).unwrap();
        }
    }
    // Poll both queues until each has its N or 3 s passed.
    let mut got: [Vec<(u16, FlowId)>; 2] = [Vec::new(), Vec::new()];
    let end = Instant::now() + Duration::from_secs(3);
    let mut bursts = [rx[0].new_burst(), rx[1].new_burst()];
    while (got[0].len() < N || got[1].len() < N) && Instant::now() < end {
        for q in 0..2 {
            rx[q].poll(&mut bursts[q]);
            for i in 0..RxBurst::len(&bursts[q]) {
                let rtdaq_core::traits::Segment::Host(f) = bursts[q].segment(i, 0) else {
                    panic!("host segment")
                };
                let dport = u16::from_be_bytes([f[36], f[37]]);
                got[q].push((dport, bursts[q].meta(i).flow));
            }
            bursts[q].clear();
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    for q in 0..2 {
        rx[q].poll(&mut bursts[q]);
        assert_eq!(
            RxBurst::len(&bursts[q]),
            0,
            "queue {q}: frames after the {N}"
        );
    }
    eprintln!(
        "queue 0: {} frames, queue 1: {} frames",
        got[0].len(),
        got[1].len()
    );
    assert_eq!(got[0], vec![(5000, FlowId(7)); N], "queue 0: UDP 5000 only");
    assert_eq!(got[1], vec![(5001, FlowId(1)); N], "queue 1: UDP 5001 only");
    for q in 0..2 {
        assert_eq!(rx[q].stats().misrouted, 0, "queue {q}");
        let c = hw.rx[q].counters.snapshot();
        // 5002 and 5009 were dropped by the tap's tc rules: never seen by software.
        assert_eq!(c.drop_count(DropReason::FlowDrop), 0, "{c:?}");
        assert_eq!(c.drop_count(DropReason::NoFlow), 0, "{c:?}");
    }
}
