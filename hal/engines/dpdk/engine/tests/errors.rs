//! Open errors name the config key to change (as root for the ones after EAL init).

mod common;

use common::*;

const EAL: &[&str] = &[
    "--no-huge",
    "-m",
    "512",
    "--no-shconf",
    "--no-pci",
    "--vdev",
    "net_ring0",
    "--log-level=lib.eal:notice",
];

#[test]
fn netdev_that_is_no_dpdk_port_names_the_address_key_and_the_fix() {
    require_root();
    let s = Setup::new(&config_toml(EAL, "eth9", 1, 0, true, 0));
    let e = s.open().unwrap_err();
    assert_eq!(e.key(), "interfaces[0].address");
    let m = e.to_string();
    assert!(m.starts_with("interfaces[0].address = \"eth9\""), "{m}");
    assert!(m.contains("net_ring0"), "lists the ports present: {m}");
    assert!(
        m.contains("net_af_packet0,iface=eth9") && m.contains("PCI"),
        "{m}"
    );
}

#[test]
fn other_engine_kind_is_refused_before_dpdk_starts() {
    let toml = config_toml(EAL, "net_ring0", 1, 0, true, 0)
        .replace("kind = \"dpdk\"", "kind = \"afpacket\"")
        .replace("[engine.dpdk]\neal_args", "[engine.unused]\neal_args");
    let toml = toml
        .lines()
        .filter(|l| {
            !l.starts_with("[engine.unused]")
                && !l.starts_with("eal_args")
                && !l.starts_with("main_core")
        })
        .collect::<Vec<_>>()
        .join("\n");
    let s = Setup::new(&toml);
    let e = s.open().unwrap_err();
    assert_eq!(e.key(), "engine.kind");
    assert!(e.to_string().contains("engine-afpacket"), "{e}");
}
