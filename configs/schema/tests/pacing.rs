//! `[generator] pacing = "txtime"`: where launch times can be kept (the socket engine's UDP
//! queues, the afpacket engine's, the dpdk engine's where the PMD can; a rate, or a replay at its recorded times) and the lead that goes with them.

use rtdaq_config::model::{GenPacing, DEFAULT_TXTIME_LEAD_US};
use std::path::Path;

/// The shipped config `name` with each `(from, to)` replaced (each must occur).
fn config(name: &str, edits: &[(&str, &str)]) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    edits.iter().fold(text, |t, (from, to)| {
        assert!(t.contains(from), "{from:?} not in {name}");
        t.replace(from, to)
    })
}

/// The one error of `text` at `path`, its message.
fn error_at(text: &str, path: &str) -> String {
    let errs = rtdaq_config::load_str(text).expect_err("refused").0;
    let e: Vec<_> = errs.iter().map(ToString::to_string).collect();
    e.iter()
        .find(|m| m.starts_with(&format!("{path}: ")))
        .unwrap_or_else(|| panic!("no error at {path}: {e:?}"))
        .clone()
}

#[test]
fn txtime_on_the_socket_engine_with_a_rate_loads_with_its_lead() {
    let c = rtdaq_config::load_str(&config(
        "host-loopback-udp.toml",
        &[("stream_id = 1\n", "stream_id = 1\npacing = \"txtime\"\n")],
    ))
    .unwrap();
    let g = c.generator.unwrap();
    assert_eq!(
        g.pacing,
        GenPacing::Txtime {
            lead_us: DEFAULT_TXTIME_LEAD_US
        }
    );
    let c = rtdaq_config::load_str(&config(
        "host-loopback-udp.toml",
        &[(
            "stream_id = 1\n",
            "stream_id = 1\npacing = \"txtime\"\ntxtime_lead_us = 250\n",
        )],
    ))
    .unwrap();
    assert_eq!(
        c.generator.unwrap().pacing,
        GenPacing::Txtime { lead_us: 250 }
    );
    let c = rtdaq_config::load_str(&config("host-loopback-udp.toml", &[])).unwrap();
    assert_eq!(c.generator.unwrap().pacing, GenPacing::Software);
    // The AF_PACKET engine's TX ring too (one kick per frame, each with its time).
    let c = rtdaq_config::load_str(&config(
        "veth-afpacket-tx.toml",
        &[("rate_gbps = 0.5", "rate_gbps = 0.5\npacing = \"txtime\"")],
    ))
    .unwrap();
    assert!(matches!(
        c.generator.unwrap().pacing,
        GenPacing::Txtime { .. }
    ));
    // The DPDK engine's: the NIC keeps them where the PMD can, else the software pacer
    // (decided at open, said in the report: never a failed run).
    let c = rtdaq_config::load_str(&config(
        "vdev-dpdk-ring.toml",
        &[("rate_gbps = 0.3", "rate_gbps = 0.3\npacing = \"txtime\"")],
    ))
    .unwrap();
    assert!(matches!(
        c.generator.unwrap().pacing,
        GenPacing::Txtime { .. }
    ));
}

#[test]
fn txtime_where_no_queue_can_keep_it_is_refused_naming_why() {
    // AF_XDP: its TX queues have no launch times.
    let e = error_at(
        &config(
            "veth-afxdp-tx.toml",
            &[("rate_gbps = 0.5", "rate_gbps = 0.5\npacing = \"txtime\"")],
        ),
        "generator.pacing",
    );
    assert!(
        e.contains("the afxdp engine's TX queues cannot send at a launch time"),
        "{e}"
    );
    // TCP.
    let e = error_at(
        &config(
            "host-tcp-3clients.toml",
            &[("[generator]\n", "[generator]\npacing = \"txtime\"\n")],
        ),
        "generator.pacing",
    );
    assert!(e.contains("TCP has no launch times"), "{e}");
    // A replay at the generator's rate, unpaced: no times to keep.
    let e = error_at(
        &config(
            "host-loopback-udp.toml",
            &[
                ("rate_gbps = 1.0 ", "unpaced = true "),
                (
                    "stream_id = 1\n",
                    "stream_id = 1\npacing = \"txtime\"\nreplay = \"x.pcap\"\nreplay_timing = \"rate\"\n",
                ),
            ],
        ),
        "generator.pacing",
    );
    assert!(
        e.contains("timing \"rate\" and unpaced = true has no times to keep"),
        "{e}"
    );
    // A lead out of range.
    let e = error_at(
        &config(
            "host-loopback-udp.toml",
            &[(
                "stream_id = 1\n",
                "stream_id = 1\npacing = \"txtime\"\ntxtime_lead_us = 2000000\n",
            )],
        ),
        "generator.txtime_lead_us",
    );
    assert!(e.contains("out of range 10..=1000000"), "{e}");
}

/// A replay keeps launch times too: at its recorded times (the rate does not matter, even
/// unpaced) or at the generator's rate.
#[test]
fn a_replay_with_txtime_loads_at_recorded_times_or_a_rate() {
    for (rate, timing) in [
        ("unpaced = true ", ""),
        ("rate_gbps = 1.0 ", "replay_speed = 2.0\n"),
        ("rate_pps = 1000 ", "replay_timing = \"rate\"\n"),
    ] {
        let text = config(
            "host-loopback-udp.toml",
            &[
                ("rate_gbps = 1.0 ", rate),
                (
                    "stream_id = 1\n",
                    &format!("stream_id = 1\npacing = \"txtime\"\nreplay = \"x.pcap\"\n{timing}"),
                ),
            ],
        );
        let g = rtdaq_config::load_str(&text)
            .unwrap_or_else(|e| panic!("{rate} {timing}: {e:?}"))
            .generator
            .unwrap();
        assert!(matches!(g.pacing, GenPacing::Txtime { .. }) && g.replay.is_some());
    }
}

/// `pacing = "nic"`: the dpdk engine with a rate; elsewhere, unpaced, with a lead or a
/// replay it is refused naming why.
#[test]
fn nic_pacing_is_for_the_dpdk_engine_with_a_rate() {
    let c = rtdaq_config::load_str(&config(
        "vdev-dpdk-ring.toml",
        &[("rate_gbps = 0.3", "rate_gbps = 0.3\npacing = \"nic\"")],
    ))
    .unwrap();
    assert_eq!(c.generator.unwrap().pacing, GenPacing::Nic);
    let e = error_at(
        &config(
            "host-loopback-udp.toml",
            &[("stream_id = 1\n", "stream_id = 1\npacing = \"nic\"\n")],
        ),
        "generator.pacing",
    );
    assert!(
        e.contains("\"nic\": the socket engine's queues have no NIC rate limit"),
        "{e}"
    );
    let e = error_at(
        &config(
            "vdev-dpdk-ring.toml",
            &[("rate_gbps = 0.3", "unpaced = true\npacing = \"nic\"")],
        ),
        "generator.pacing",
    );
    assert!(e.contains("the NIC needs a rate to keep"), "{e}");
    let e = error_at(
        &config(
            "vdev-dpdk-ring.toml",
            &[(
                "rate_gbps = 0.3",
                "rate_gbps = 0.3\npacing = \"nic\"\ntxtime_lead_us = 100",
            )],
        ),
        "generator.txtime_lead_us",
    );
    assert!(e.contains("only with pacing = \"txtime\""), "{e}");
}
