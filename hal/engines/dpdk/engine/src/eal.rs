//! EAL arguments and port names derived from the config (pure functions, unit-tested).

use std::collections::BTreeSet;

use rtdaq_config::model::{Address, DpdkEngine as DpdkConfig};
use rtdaq_config::Config;

/// The EAL arguments for `cfg` (without `argv[0]`): `engine.dpdk.eal_args` as written, then
/// `--file-prefix rtdaq-<pid>` unless they set a `--file-prefix` or `--in-memory` (see
/// [`file_prefix`]), `-l <queue cores + main core>`, `--main-lcore <main>`, and `-a <BDF>`
/// for every interface whose address is a PCI address.
///
/// The main core is `engine.dpdk.main_core`, or else the lowest core of this machine no
/// queue uses, or else (every core has a queue) the lowest queue core.
pub fn eal_args(cfg: &Config, d: &DpdkConfig) -> Vec<String> {
    let mut cores: BTreeSet<u32> = BTreeSet::new();
    for iface in &cfg.interfaces {
        cores.extend(iface.rx_queues.iter().map(|q| q.cpu_core));
        cores.extend(iface.tx_queues.iter().map(|q| q.cpu_core));
    }
    let online = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);
    let main = d.main_core.unwrap_or_else(|| {
        (0..online)
            .find(|c| !cores.contains(c))
            .or_else(|| cores.first().copied())
            .unwrap_or(0)
    });
    cores.insert(main);
    let list = cores
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut args = d.eal_args.clone();
    if let Some(p) = file_prefix(&d.eal_args) {
        args.extend(["--file-prefix".to_owned(), p]);
    }
    args.extend([
        "-l".to_owned(),
        list,
        "--main-lcore".to_owned(),
        main.to_string(),
    ]);
    for iface in &cfg.interfaces {
        if let Address::Pci(p) = &iface.address {
            args.extend(["-a".to_owned(), p.to_string()]);
        }
    }
    args
}

/// The `--file-prefix` rtdaq adds to `eal_args`: `rtdaq-<pid>`, unique per process, so
/// that two rtdaq processes (or rtdaq and another DPDK application) never share DPDK's
/// runtime directory (`/var/run/dpdk/<prefix>`) or hugepage files. `None` when `eal_args`
/// already has a `--file-prefix` (either spelling) or `--in-memory` (no shared files at
/// all: nothing to collide on).
pub fn file_prefix(eal_args: &[String]) -> Option<String> {
    let has = |flag: &str| {
        eal_args
            .iter()
            .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
    };
    if has("--file-prefix") || has("--in-memory") {
        None
    } else {
        Some(format!("rtdaq-{}", std::process::id()))
    }
}

/// The vdev an `--vdev` argument of `eal_args` creates over netdev `ifname`
/// (`--vdev net_af_packet0,iface=eth1` → `net_af_packet0` for `eth1`), if any.
pub fn vdev_for_netdev(eal_args: &[String], ifname: &str) -> Option<String> {
    let mut it = eal_args.iter();
    while let Some(a) = it.next() {
        let spec = if a == "--vdev" {
            it.next().map(String::as_str)
        } else {
            a.strip_prefix("--vdev=")
        };
        let Some(spec) = spec else { continue };
        let mut parts = spec.split(',');
        let name = parts.next().unwrap_or_default();
        if parts.any(|kv| kv == format!("iface={ifname}")) {
            return Some(name.to_owned());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn file_prefix_is_added_unless_given_or_in_memory() {
        let mine = format!("rtdaq-{}", std::process::id());
        assert_eq!(file_prefix(&s(&["--no-huge"])), Some(mine));
        assert_eq!(file_prefix(&s(&["--file-prefix", "x"])), None);
        assert_eq!(file_prefix(&s(&["--file-prefix=x"])), None);
        assert_eq!(file_prefix(&s(&["--in-memory"])), None);
    }

    #[test]
    fn vdev_over_a_netdev_is_found_in_either_spelling() {
        let a = s(&["--no-pci", "--vdev", "net_af_packet0,iface=eth1,qpairs=1"]);
        assert_eq!(
            vdev_for_netdev(&a, "eth1").as_deref(),
            Some("net_af_packet0")
        );
        assert_eq!(vdev_for_netdev(&a, "eth"), None);
        let b = s(&["--vdev=net_tap0,iface=tap9"]);
        assert_eq!(vdev_for_netdev(&b, "tap9").as_deref(), Some("net_tap0"));
        assert_eq!(vdev_for_netdev(&s(&["--vdev"]), "x"), None);
    }
}
