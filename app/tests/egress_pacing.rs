//! Egress pacing (issues #31, #33) on this host: `pacing = "txtime"` to a destination whose
//! interface has neither the `etf` nor the `fq` qdisc stops the start with exit 2, naming
//! `egress[0].pacing`, the interface, its qdisc and the `tc` command, instead of sending
//! unpaced in silence (the kernel ignores `SO_TXTIME` departure times without fq or etf).
//!
//! The pacing itself (each packet at its departure time against the software pacer's
//! bursts, on the wire of a veth pair with fq and with etf, and etf's refusal of a lead
//! under its delta) runs in the QEMU guest, `scripts/vm/txtime-tests.sh`: this host's
//! kernel has neither qdisc.
//!
//! Needs root (a network namespace of its own, whose loopback has only `noqueue`) and
//! `target/engines/rtdaq-socket`; without them the test fails in `scripts/test.sh`
//! (`RTDAQ_TEST_REQUIRE=1`) and skips, recorded, elsewhere.

mod e2e;

use e2e::{bin, edited, root, show};
use rtdaq_testbed::{Side, VethPair};

fn skipped() -> bool {
    let why = if !rtdaq_testbed::is_root() {
        "not root (a network namespace needs it)"
    } else if !root().join("target/engines/rtdaq-socket").exists() {
        "no target/engines/rtdaq-socket (scripts/build-engines.sh)"
    } else {
        return false;
    };
    rtdaq_testbed::require::skip(why);
    true
}

#[test]
#[ignore = "needs root and target/engines/rtdaq-socket; scripts/test.sh runs it"]
fn txtime_without_etf_or_fq_stops_the_start_naming_the_qdisc() {
    if skipped() {
        return;
    }
    let pair = VethPair::new("egr-nofq").unwrap();
    let cfg = edited(
        "host-udp-egress-spead.toml",
        &[(
            "egress_priority = 40 ",
            "rate_gbps = 1.0\npacing = \"txtime\"\negress_priority = 40 ".into(),
        )],
        "pacing-nofq",
    );
    // Side A's own loopback, where the heaps to 127.0.0.1 go, has no qdisc but noqueue.
    let out = pair
        .command(Side::A, bin("socket").to_str().unwrap())
        .args(["run", "--config", cfg.to_str().unwrap(), "--duration", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    for want in [
        "egress[0].pacing",
        "needs the etf or fq qdisc on lo (packets to 127.0.0.1:7149 leave by it)",
        "which has noqueue",
        "tc qdisc replace dev lo root etf clockid CLOCK_TAI delta 200000",
    ] {
        assert!(err.contains(want), "no {want:?} in: {err}");
    }
}
