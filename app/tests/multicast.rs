//! IPv4 multicast with the socket engine (issue #17) in the namespace test bed: rtdaq's
//! generator in namespace A sends to group 239.77.0.1:7200 out of A's veth end
//! (`configs/testbed-multicast-tx.toml`); in namespace B receivers join the group on B's end
//! (`configs/testbed-multicast-rx.toml`):
//!
//! - two receiver processes on one group: each gets every datagram the sender sent, 0 lost;
//! - source-specific: a receiver joined for (A, group) gets everything, one joined for
//!   (another sender, group) gets nothing, in the same run;
//! - raw engines: an AF_PACKET receiver holds the kernel membership (IGMP), and an
//!   AF_PACKET generator sends to the group with the group's MAC.
//!
//! Needs root (namespaces) and `target/engines/rtdaq-socket` (`scripts/build-engines.sh`);
//! without them each test fails in `scripts/test.sh` (`RTDAQ_TEST_REQUIRE=1`) and skips, recorded, elsewhere
//! (`rtdaq_testbed::require`).

mod e2e;

use e2e::{edited, finish, root, show, start, u};
use rtdaq_testbed::{Side, VethPair};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// One at a time: each pins rtdaq's threads to cores 0 and 1.
static SERIAL: Mutex<()> = Mutex::new(());

/// True when the test cannot run here: a failure in `scripts/test.sh`
/// (`rtdaq_testbed::require`), a recorded skip elsewhere.
fn skipped(_test: &str) -> bool {
    !(rtdaq_testbed::require::need_root("network namespaces")
        && rtdaq_testbed::require::need_file(
            &root().join("target/engines/rtdaq-socket"),
            "scripts/build-engines.sh",
        ))
}

/// A receiver config on B's address, its queue on `core`, `extra` lines after the
/// interface's `multicast_interface`.
fn receiver(pair: &VethPair, core: u32, extra: &str, tag: &str) -> PathBuf {
    edited(
        "testbed-multicast-rx.toml",
        &[
            (
                "multicast_interface = \"169.254.77.2\"",
                format!("multicast_interface = \"{}\"\n{extra}", pair.ip(Side::B)),
            ),
            ("cpu_core = 1", format!("cpu_core = {core}")),
        ],
        tag,
    )
}

/// Runs the sender in A for 2 s; its report.
fn send(pair: &VethPair, tag: &str) -> serde_json::Value {
    let tx = edited(
        "testbed-multicast-tx.toml",
        &[(
            "multicast_interface = \"169.254.77.1\"",
            format!("multicast_interface = \"{}\"", pair.ip(Side::A)),
        )],
        tag,
    );
    let child = start(pair, Side::A, "socket", &tx, 2.0, tag);
    let (out, r) = finish(child, tag);
    assert_eq!(out.status.code(), Some(0), "sender: {}", show(&out));
    r
}

fn run_receivers(
    pair: &VethPair,
    cfgs: &[(&Path, &str)],
) -> (
    serde_json::Value,
    Vec<(std::process::Output, serde_json::Value)>,
) {
    let rx: Vec<_> = cfgs
        .iter()
        .map(|(c, tag)| (start(pair, Side::B, "socket", c, 5.0, tag), *tag))
        .collect();
    let sent = send(pair, "mc-tx");
    let results = rx.into_iter().map(|(c, tag)| finish(c, tag)).collect();
    (sent, results)
}

#[test]
#[ignore = "needs root and target/engines/rtdaq-socket; scripts/test.sh runs it"]
fn two_receivers_on_one_group_each_get_every_datagram() {
    if skipped("two_receivers_on_one_group_each_get_every_datagram") {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pair = VethPair::new("mcast").unwrap();
    let r1 = receiver(&pair, 1, "", "mc-rx1");
    let r2 = receiver(&pair, 0, "", "mc-rx2");
    let (sent, results) = run_receivers(&pair, &[(&r1, "mc-rx1"), (&r2, "mc-rx2")]);
    let n = u(&sent, "/tx/totals/packets");
    assert!(
        n > 10_000,
        "2 s at 20 000 pps (a quarter will do): sent {n}"
    );
    assert_eq!(u(&sent, "/tx/totals/drops_total"), 0);
    for (out, r) in &results {
        assert_eq!(out.status.code(), Some(0), "{}", show(out));
        assert_eq!(
            u(r, "/rx/totals/packets"),
            n,
            "every datagram: {}",
            show(out)
        );
        assert_eq!(u(r, "/lost"), 0);
        assert_eq!(u(r, "/rx/totals/drops_total"), 0);
        assert_eq!(u(r, "/rx/totals/duplicates"), 0);
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(
            log.contains(&format!(
                "joined multicast group 239.77.0.1 on {} (any source)",
                pair.ip(Side::B)
            )),
            "{log}"
        );
    }
}

#[test]
#[ignore = "needs root and target/engines/rtdaq-socket; scripts/test.sh runs it"]
fn source_specific_join_gets_only_its_source() {
    if skipped("source_specific_join_gets_only_its_source") {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pair = VethPair::new("mcssm").unwrap();
    let from_a = receiver(
        &pair,
        1,
        &format!("multicast_sources = [\"{}\"]", pair.ip(Side::A)),
        "mc-ssm-a",
    );
    // A sender that does not exist on this link: nothing of A's may arrive.
    let other = receiver(
        &pair,
        0,
        "multicast_sources = [\"169.254.200.9\"]",
        "mc-ssm-x",
    );
    let (sent, results) = run_receivers(&pair, &[(&from_a, "mc-ssm-a"), (&other, "mc-ssm-x")]);
    let n = u(&sent, "/tx/totals/packets");
    let (out_a, ra) = &results[0];
    assert_eq!(u(ra, "/rx/totals/packets"), n, "{}", show(out_a));
    assert_eq!(u(ra, "/lost"), 0);
    let (out_x, rx) = &results[1];
    assert_eq!(u(rx, "/rx/totals/packets"), 0, "{}", show(out_x));
    assert!(
        String::from_utf8_lossy(&out_x.stderr).contains("from [169.254.200.9]"),
        "{}",
        show(out_x)
    );
}

/// The groups of `ifname` in `side`'s `/proc/net/igmp` (dotted quads).
fn igmp_groups(pair: &VethPair, side: Side, ifname: &str) -> Vec<String> {
    let out = pair.exec(side, "cat", &["/proc/net/igmp"]).unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // "<idx>\t<dev> : <count> <querier>" then one indented line per group, the group as
    // the hex of its network-order u32 as the host (little-endian) reads it.
    let mut groups = Vec::new();
    let mut ours = false;
    for line in text.lines().skip(1) {
        if !line.starts_with('\t') {
            ours = line.split_whitespace().nth(1) == Some(ifname);
        } else if ours {
            if let Some(Ok(v)) = line
                .split_whitespace()
                .next()
                .map(|h| u32::from_str_radix(h, 16))
            {
                groups.push(std::net::Ipv4Addr::from(v.to_le_bytes()).to_string());
            }
        }
    }
    groups
}

#[test]
#[ignore = "needs root, tcpdump and target/engines/rtdaq-{socket,afpacket}; scripts/test.sh runs it"]
fn afpacket_receiver_holds_the_kernel_membership_and_gets_every_datagram() {
    if skipped("afpacket_receiver_holds_the_kernel_membership_and_gets_every_datagram") {
        return;
    }
    if !root().join("target/engines/rtdaq-afpacket").exists() {
        rtdaq_testbed::require::skip(
            "no target/engines/rtdaq-afpacket (scripts/build-engines.sh afpacket)",
        );
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pair = VethPair::new("mcraw").unwrap();
    let (a_if, b_if) = (
        pair.ifname(Side::A).to_string(),
        pair.ifname(Side::B).to_string(),
    );
    assert!(!igmp_groups(&pair, Side::B, &b_if).contains(&"239.77.0.1".to_string()));
    let cfg = edited(
        "testbed-multicast-afpacket-rx.toml",
        &[
            ("address = \"rtdaq0b\"", format!("address = \"{b_if}\"")),
            (
                "multicast_interface = \"169.254.77.2\"",
                format!("multicast_interface = \"{}\"", pair.ip(Side::B)),
            ),
        ],
        "mc-raw",
    );
    // tcpdump on A's end sees the IGMP report B's kernel sends when the run joins.
    let igmp = pair
        .command(Side::A, "timeout")
        .args([
            "8", "tcpdump", "-n", "-v", "-l", "-c", "1", "-i", &a_if, "igmp",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let rx = start(&pair, Side::B, "afpacket", &cfg, 5.0, "mc-raw");
    let held = igmp_groups(&pair, Side::B, &b_if);
    let sent = send(&pair, "mc-raw-tx");
    let (out, r) = finish(rx, "mc-raw");
    let report = igmp.wait_with_output().unwrap();
    let seen = String::from_utf8_lossy(&report.stdout);
    assert!(
        held.contains(&"239.77.0.1".to_string()),
        "/proc/net/igmp of {b_if} during the run: {held:?}"
    );
    assert!(
        seen.contains("igmp") && seen.contains("239.77.0.1"),
        "tcpdump on A: {seen:?} {}",
        String::from_utf8_lossy(&report.stderr)
    );
    let n = u(&sent, "/tx/totals/packets");
    assert!(
        n > 10_000,
        "2 s at 20 000 pps (a quarter will do): sent {n}"
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(
        u(&r, "/rx/totals/packets"),
        n,
        "every datagram: {}",
        show(&out)
    );
    assert_eq!(u(&r, "/lost"), 0);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("joined multicast group 239.77.0.1 on"),
        "{log}"
    );
    // The run is over: the membership is gone.
    assert!(!igmp_groups(&pair, Side::B, &b_if).contains(&"239.77.0.1".to_string()));
}

/// A raw-engine generator sending to a group: `rtdaq-afpacket` in A on
/// `veth-afpacket-tx.toml` with `destination = "udp://239.77.0.1:7200"` and no `dst_mac`
/// (the config derives the group's MAC, 01:00:5e:4d:00:01). tcpdump on B's end sees the
/// frames addressed to that MAC, and the AF_PACKET receiver holding the membership in B
/// (`testbed-multicast-afpacket-rx.toml`, a flow on the group's address) gets every one.
#[test]
#[ignore = "needs root, tcpdump and target/engines/rtdaq-afpacket; scripts/test.sh runs it"]
fn afpacket_generator_sends_to_a_group_with_its_mac() {
    if skipped("afpacket_generator_sends_to_a_group_with_its_mac") {
        return;
    }
    if !root().join("target/engines/rtdaq-afpacket").exists() {
        rtdaq_testbed::require::skip(
            "no target/engines/rtdaq-afpacket (scripts/build-engines.sh afpacket)",
        );
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pair = VethPair::new("mcgen").unwrap();
    let (a_if, b_if) = (
        pair.ifname(Side::A).to_string(),
        pair.ifname(Side::B).to_string(),
    );
    let rx_cfg = edited(
        "testbed-multicast-afpacket-rx.toml",
        &[
            ("address = \"rtdaq0b\"", format!("address = \"{b_if}\"")),
            (
                "multicast_interface = \"169.254.77.2\"",
                format!("multicast_interface = \"{}\"", pair.ip(Side::B)),
            ),
        ],
        "mc-gen-rx",
    );
    let tx_cfg = edited(
        "veth-afpacket-tx.toml",
        &[
            ("address = \"rtdaq0a\"", format!("address = \"{a_if}\"")),
            (
                "destination = \"udp://169.254.90.2:5000\"",
                "destination = \"udp://239.77.0.1:7200\"".to_string(),
            ),
            ("dst_mac = \"02:72:74:00:5a:02\"", String::new()),
            (
                "source = \"udp://169.254.90.1:4000\"",
                format!("source = \"udp://{}:4000\"", pair.ip(Side::A)),
            ),
            ("rate_gbps = 0.5", "rate_pps = 20000".to_string()),
            ("duration_s = 10", "duration_s = 2".to_string()),
        ],
        "mc-gen-tx",
    );
    let dump = pair
        .command(Side::B, "timeout")
        .args([
            "6", "tcpdump", "-n", "-e", "-l", "-c", "5", "-i", &b_if, "udp", "port", "7200",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let rx = start(&pair, Side::B, "afpacket", &rx_cfg, 5.0, "mc-gen-rx");
    let tx = start(&pair, Side::A, "afpacket", &tx_cfg, 3.0, "mc-gen-tx");
    let (tout, sent) = finish(tx, "mc-gen-tx");
    assert_eq!(tout.status.code(), Some(0), "sender: {}", show(&tout));
    let (out, r) = finish(rx, "mc-gen-rx");
    let seen = dump.wait_with_output().unwrap();
    let seen = String::from_utf8_lossy(&seen.stdout);
    assert!(
        seen.contains("> 01:00:5e:4d:00:01") && seen.contains("239.77.0.1.7200"),
        "tcpdump -e on B: {seen}"
    );
    let n = u(&sent, "/tx/totals/packets");
    assert!(
        n > 10_000,
        "2 s at 20 000 pps (a quarter will do): sent {n}"
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(
        u(&r, "/rx/totals/packets"),
        n,
        "every frame: {}",
        show(&out)
    );
    assert_eq!(u(&r, "/lost"), 0);
}
