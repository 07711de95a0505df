//! `[generator] pacing = "txtime"`: where launch times can be kept (the socket engine's UDP
//! queues, a rate, generated packets) and the lead that goes with them.

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
}

#[test]
fn txtime_where_no_queue_can_keep_it_is_refused_naming_why() {
    // A raw engine (AF_PACKET): its TX queues have no launch times yet.
    let e = error_at(
        &config(
            "veth-afpacket-tx.toml",
            &[("rate_gbps = 0.5", "rate_gbps = 0.5\npacing = \"txtime\"")],
        ),
        "generator.pacing",
    );
    assert!(
        e.contains("the afpacket engine's TX queues cannot send at a launch time"),
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
    // A replay.
    let e = error_at(
        &config(
            "host-loopback-udp.toml",
            &[(
                "stream_id = 1\n",
                "stream_id = 1\npacing = \"txtime\"\nreplay = \"x.pcap\"\n",
            )],
        ),
        "generator.pacing",
    );
    assert!(e.contains("a replay keeps the software pacer"), "{e}");
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
