//! NIC and port counters: what explains a rate that dropped while every queue counter reads
//! zero (issue #18).
//!
//! A [`NicSample`] holds a network device's counters now: the driver's statistics
//! (`ETHTOOL_GSTRINGS` / `ETHTOOL_GSTATS`, what `ethtool -S` prints) and the kernel's
//! (`/sys/class/net/<dev>/statistics/*`). [`NicChange::between`] compares two samples and
//! finds, by name, the counters that explain silent loss:
//!
//! | kind | what it means | recognised names (examples) |
//! |---|---|---|
//! | [`CounterKind::PauseReceived`] | the link partner sent pause frames: **this host's transmit** was throttled | mlx5 `rx_pause_ctrl_phy`, `rx_prio3_pause`, `rx_global_pause`; Intel `rx_flow_control_xoff`, `link_xoff_rx`; bnxt `rx_pause_frames`; `rx_pfc_frames` |
//! | [`CounterKind::PauseSent`] | this NIC sent pause frames: it could not keep up and **throttled the sender** (the instrument, the switch) | mlx5 `tx_pause_ctrl_phy`, `tx_prio3_pause`; Intel `tx_flow_control_xoff`, `link_xoff_tx`; bnxt `tx_pause_frames` |
//! | [`CounterKind::RxDropped`] | frames the NIC or driver dropped before any queue saw them | mlx5 `rx_out_of_buffer`, `rx_discards_phy`, `rx_prio0_discards`; Intel `rx_missed_errors`, `rx_no_buffer_count`, `port.rx_discards`; veth `rx_queue_0_drops`; kernel `rx_missed_errors`, `rx_fifo_errors`, `rx_over_errors` |
//!
//! Drivers that implement ethtool's standard pause statistics report them over netlink as
//! well ([`crate::ethtool_netlink`], `ethtool -I -a`): they join the sample as source
//! [`Source::Standard`], `tx_pause_frames` / `rx_pause_frames`, whatever the driver calls
//! them in `ethtool -S`.
//!
//! Pause durations, transitions, storm events and XON (resume) counters are not pause frames
//! and are not counted as such. Per-priority and global pause counters count the same frames
//! twice, so a side's figure is its largest counter's change, named in the warning.
//!
//! [`pause_param`] reads the pause settings (`ETHTOOL_GPAUSEPARAM`, `ethtool -a`) for
//! `rtdaq doctor`; [`netdev_of_ipv4`] finds the device that holds an address (a socket
//! interface bound to a real NIC).
//!
//! Cold path only: a sample is a few system calls and a directory read.

use std::net::Ipv4Addr;
use std::path::Path;

use crate::error::{PlatformError, Result};
use crate::sys::ethtool::Ethtool;
use crate::sysfs;

/// A network device's counters at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NicSample {
    /// The device (`enp23s0f0np0`, `veth1`).
    pub netdev: String,
    /// Its driver (`mlx5_core`, `veth`), empty when the driver reports none.
    pub driver: String,
    /// Its bus address (a PCI address; empty for virtual devices).
    pub bus_info: String,
    /// The driver's statistics by name, in the driver's order (`ethtool -S`).
    pub ethtool: Vec<(String, u64)>,
    /// Why [`ethtool`](Self::ethtool) is empty, when the driver gave none.
    pub ethtool_missing: Option<String>,
    /// The kernel's statistics (`/sys/class/net/<dev>/statistics`), by file name, sorted.
    pub kernel: Vec<(String, u64)>,
    /// The standard statistics the driver reports over ethtool netlink (`ethtool -I -a`):
    /// `tx_pause_frames`, `rx_pause_frames` when it counts them (see
    /// [`crate::ethtool_netlink`]).
    pub standard: Vec<(String, u64)>,
}

/// What a counter tells of silent loss (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CounterKind {
    /// Pause frames received from the link partner (this host's transmit throttled).
    PauseReceived,
    /// Pause frames this NIC sent (the sender towards this host throttled).
    PauseSent,
    /// Frames dropped by the NIC or driver before any queue saw them.
    RxDropped,
}

/// Where a counter comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// The driver's statistics (`ethtool -S`).
    Ethtool,
    /// The kernel's netdev statistics (`/sys/class/net/<dev>/statistics`).
    Kernel,
    /// The standard statistics over ethtool netlink (`ethtool -I -a`: pause frames).
    Standard,
}

impl Source {
    /// `"ethtool"` or `"kernel"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Source::Ethtool => "ethtool",
            Source::Kernel => "kernel",
            Source::Standard => "standard",
        }
    }
}

/// Tokens of a counter name: lower case, split at `_`, `.`, `-`, `:` and blanks.
fn tokens(name: &str) -> Vec<String> {
    name.to_ascii_lowercase()
        .split(['_', '.', '-', ':', ' '])
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The direction of a counter: the first `rx`/`tx` token (`rx0_...` and `rxq2` count too).
fn direction(tokens: &[String]) -> Option<bool> {
    tokens.iter().find_map(|t| {
        let t = t.trim_end_matches(|c: char| c.is_ascii_digit());
        match t {
            "rx" | "rxq" | "rcv" | "rcvd" => Some(true),
            "tx" | "txq" | "sent" | "xmit" => Some(false),
            _ => None,
        }
    })
}

/// What a driver statistic (`ethtool -S` name) tells of silent loss, if anything.
pub fn classify(name: &str) -> Option<CounterKind> {
    let t = tokens(name);
    let has = |w: &str| t.iter().any(|x| x == w);
    let rx = direction(&t)?;
    // Not frame counts, or not loss: how long / how often pausing changed, storms, resume
    // frames, bytes, steering misses (traffic for no rule: not this receiver's).
    const NOT: [&str; 13] = [
        "duration",
        "transition",
        "storm",
        "xon",
        "bytes",
        "steer",
        "usec",
        "us",
        "time",
        "ena",
        "enabled",
        "warning",
        "events",
    ];
    if NOT.iter().any(|w| has(w)) {
        return None;
    }
    let pause = t
        .iter()
        .any(|x| x.starts_with("pause") || x == "xoff" || x == "pfc");
    if pause {
        return Some(if rx {
            CounterKind::PauseReceived
        } else {
            CounterKind::PauseSent
        });
    }
    let joined = t.join("_");
    let dropped = [
        "missed", "discards", "discard", "drops", "drop", "dropped", "nombuf",
    ]
    .iter()
    .any(|w| has(w))
        || [
            "out_of_buffer",
            "no_buffer",
            "no_desc",
            "buff_alloc_err",
            "fifo_errors",
        ]
        .iter()
        .any(|p| joined.contains(p));
    // An XDP program's own verdict (`XDP_DROP`) is a choice, not a loss; veth's
    // `rx_queue_N_xdp_drops` also counts failed redirects, so only `xdp_drop` without
    // the plural is left out (mlx5 `rx0_xdp_drop`).
    (rx && dropped && !joined.ends_with("xdp_drop")).then_some(CounterKind::RxDropped)
}

/// What a kernel netdev statistic tells of silent loss: the hardware-side drops only
/// (`rx_dropped` also counts frames no protocol wanted, so it is reported but not judged).
pub fn classify_kernel(name: &str) -> Option<CounterKind> {
    matches!(
        name,
        "rx_missed_errors" | "rx_fifo_errors" | "rx_over_errors"
    )
    .then_some(CounterKind::RxDropped)
}

/// The kind of a counter from `source`.
pub fn kind_of(source: Source, name: &str) -> Option<CounterKind> {
    match source {
        Source::Ethtool | Source::Standard => classify(name),
        Source::Kernel => classify_kernel(name),
    }
}

/// Reads the counters of `netdev` now.
///
/// # Errors
/// [`PlatformError::NoSuchNetdev`] when the device does not exist in this network namespace;
/// [`PlatformError::ReadSysfs`] / [`PlatformError::ParseSysfs`] for unreadable kernel
/// statistics. A driver without statistics (loopback) is not an error: see
/// [`NicSample::ethtool_missing`].
pub fn sample(netdev: &str) -> Result<NicSample> {
    sample_below(Path::new("/"), netdev)
}

/// [`sample`] with the kernel statistics read below `root` (the driver's always from the
/// running kernel).
///
/// # Errors
/// As [`sample`].
pub fn sample_below(root: &Path, netdev: &str) -> Result<NicSample> {
    let dir = sysfs::path(root, &format!("sys/class/net/{netdev}/statistics"));
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(PlatformError::NoSuchNetdev {
                name: netdev.to_owned(),
            })
        }
        Err(source) => return Err(PlatformError::ReadSysfs { path: dir, source }),
    };
    let mut kernel = Vec::new();
    for e in entries.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        kernel.push((name, sysfs::read_u64(&e.path())?));
    }
    kernel.sort();
    let mut s = NicSample {
        netdev: netdev.to_owned(),
        kernel,
        ..NicSample::default()
    };
    match driver_stats(netdev) {
        Ok((driver, bus, stats)) => {
            (s.driver, s.bus_info, s.ethtool) = (driver, bus, stats);
            if s.ethtool.is_empty() {
                s.ethtool_missing = Some(format!("driver {} has no statistics", s.driver));
            }
        }
        Err(e) => {
            s.ethtool_missing = Some(match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) => "the driver reports no ethtool data".to_owned(),
                _ => format!("ethtool: {e}"),
            });
        }
    }
    // The standard pause counters, when the driver reports them (not an error otherwise).
    if let Ok(Some(p)) = crate::ethtool_netlink::pause_stats(netdev) {
        s.standard
            .extend(p.tx_frames.map(|v| ("tx_pause_frames".to_owned(), v)));
        s.standard
            .extend(p.rx_frames.map(|v| ("rx_pause_frames".to_owned(), v)));
    }
    Ok(s)
}

/// Counters by name, in the driver's order.
type Named = Vec<(String, u64)>;

/// Driver name, bus address and statistics of `netdev` (names and values read together;
/// asked again when the driver's count changed in between).
fn driver_stats(netdev: &str) -> std::io::Result<(String, String, Named)> {
    let et = Ethtool::open()?;
    let mut tries = 0;
    loop {
        let info = et.driver_info(netdev)?;
        if info.n_stats == 0 {
            return Ok((info.driver, info.bus_info, Vec::new()));
        }
        let got = et.stat_names(netdev, info.n_stats).and_then(|names| {
            let values = et.stat_values(netdev, info.n_stats)?;
            Ok(names.into_iter().zip(values).collect())
        });
        match got {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted && tries < 3 => tries += 1,
            Err(e) => return Err(e),
            Ok(stats) => return Ok((info.driver, info.bus_info, stats)),
        }
    }
}

/// One counter that changed between two samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// Where it comes from.
    pub source: Source,
    /// Its name.
    pub name: String,
    /// Value at the first sample.
    pub start: u64,
    /// Value at the second.
    pub end: u64,
    /// `end − start`; `end` itself when the counter went backwards (the driver was reset).
    pub delta: u64,
    /// What it tells of silent loss, if anything.
    pub kind: Option<CounterKind>,
}

/// The largest change among the counters of one kind, and its counter's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Biggest {
    /// The change.
    pub delta: u64,
    /// The counter (`rx_pause_ctrl_phy`).
    pub name: String,
}

impl Biggest {
    /// The change of `b`, 0 when there was none.
    pub fn delta_of(b: &Option<Biggest>) -> u64 {
        b.as_ref().map_or(0, |b| b.delta)
    }
}

/// What changed between two samples of one device.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NicChange {
    /// Every counter that changed, driver statistics first (in the driver's order), then the
    /// kernel's. Gauges (veth `peer_ifindex`) change too and are listed as such.
    pub changed: Vec<Changed>,
    /// Pause frames received (largest counter), when any was.
    pub pause_received: Option<Biggest>,
    /// Pause frames sent (largest counter), when any was.
    pub pause_sent: Option<Biggest>,
    /// Frames dropped before the queues (largest counter), when any were.
    pub rx_dropped: Option<Biggest>,
}

impl NicChange {
    /// The counters of `end` that differ from `start` (matched by name; a counter absent
    /// from `start` starts at 0).
    pub fn between(start: &NicSample, end: &NicSample) -> Self {
        let mut out = NicChange::default();
        for (source, before, after) in [
            (Source::Ethtool, &start.ethtool, &end.ethtool),
            (Source::Kernel, &start.kernel, &end.kernel),
            (Source::Standard, &start.standard, &end.standard),
        ] {
            let same_order = before.len() == after.len()
                && before.iter().zip(after).all(|((a, _), (b, _))| a == b);
            for (i, (name, v)) in after.iter().enumerate() {
                let old = if same_order {
                    before[i].1
                } else {
                    before
                        .iter()
                        .find(|(n, _)| n == name)
                        .map_or(0, |(_, v)| *v)
                };
                if *v == old {
                    continue;
                }
                let delta = if *v > old { v - old } else { *v };
                let kind = kind_of(source, name);
                out.changed.push(Changed {
                    source,
                    name: name.clone(),
                    start: old,
                    end: *v,
                    delta,
                    kind,
                });
                let slot = match kind {
                    Some(CounterKind::PauseReceived) => &mut out.pause_received,
                    Some(CounterKind::PauseSent) => &mut out.pause_sent,
                    Some(CounterKind::RxDropped) => &mut out.rx_dropped,
                    None => continue,
                };
                if slot.as_ref().is_none_or(|b| delta > b.delta) {
                    *slot = Some(Biggest {
                        delta,
                        name: name.clone(),
                    });
                }
            }
        }
        out
    }
}

/// The pause (802.3x flow control) settings of a device (`ethtool -a`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PauseParam {
    /// Pause settings negotiated with the link partner.
    pub autoneg: bool,
    /// The NIC obeys received pause frames (stops sending).
    pub rx: bool,
    /// The NIC sends pause frames when its receive buffer fills.
    pub tx: bool,
}

/// The pause settings of `netdev`; `None` when the driver has none (veth, loopback).
///
/// # Errors
/// [`PlatformError::Ethtool`] (`ENODEV` for a device that does not exist).
pub fn pause_param(netdev: &str) -> Result<Option<PauseParam>> {
    let err = |source| PlatformError::Ethtool {
        netdev: netdev.to_owned(),
        what: "pause settings",
        source,
    };
    match Ethtool::open().map_err(err)?.pause(netdev) {
        Ok(p) => Ok(Some(PauseParam {
            autoneg: p.autoneg,
            rx: p.rx,
            tx: p.tx,
        })),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(None),
        Err(e) => Err(err(e)),
    }
}

/// The network device holding IPv4 address `ip` in this network namespace, `None` when no
/// device holds it (`0.0.0.0`, a multicast group, an address of another host).
///
/// # Errors
/// [`PlatformError::ListAddresses`] when `getifaddrs` fails.
pub fn netdev_of_ipv4(ip: Ipv4Addr) -> Result<Option<String>> {
    let addrs = nix::ifaddrs::getifaddrs()
        .map_err(|e| PlatformError::ListAddresses { source: e.into() })?;
    for a in addrs {
        let holds = a
            .address
            .as_ref()
            .and_then(|s| s.as_sockaddr_in())
            .is_some_and(|sin| sin.ip() == ip);
        if holds {
            return Ok(Some(a.interface_name));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ethtool -S` names of real drivers (captured lists, `fixtures/ethtool-names-*.txt`).
    fn names(text: &str) -> Vec<&str> {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect()
    }

    fn kinds(text: &str) -> (Vec<&str>, Vec<&str>, Vec<&str>) {
        let (mut pr, mut ps, mut dr) = (Vec::new(), Vec::new(), Vec::new());
        for n in names(text) {
            match classify(n) {
                Some(CounterKind::PauseReceived) => pr.push(n),
                Some(CounterKind::PauseSent) => ps.push(n),
                Some(CounterKind::RxDropped) => dr.push(n),
                None => {}
            }
        }
        (pr, ps, dr)
    }

    #[test]
    fn mlx5_pause_and_drop_counters_are_recognised() {
        let (pr, ps, dr) = kinds(include_str!("fixtures/ethtool-names-mlx5.txt"));
        assert_eq!(
            pr,
            [
                "rx_pause_ctrl_phy",
                "rx_prio0_pause",
                "rx_prio3_pause",
                "rx_global_pause"
            ]
        );
        assert_eq!(
            ps,
            [
                "tx_pause_ctrl_phy",
                "tx_prio0_pause",
                "tx_prio3_pause",
                "tx_global_pause"
            ]
        );
        assert_eq!(
            dr,
            [
                "rx_buff_alloc_err",
                "rx_out_of_buffer",
                "rx_discards_phy",
                "rx_prio0_discards",
                "rx_prio3_discards",
                "rx0_buff_alloc_err",
            ]
        );
        // Durations, transitions, storms, bytes and packets are not pause frames.
        for n in [
            "rx_prio0_pause_duration",
            "tx_global_pause_duration",
            "rx_global_pause_transition",
            "tx_pause_storm_warning_events",
            "tx_pause_storm_error_events",
            "rx_prio0_bytes",
            "rx_packets_phy",
            "rx_steer_missed_packets",
            "rx0_xdp_drop",
        ] {
            assert_eq!(classify(n), None, "{n}");
        }
    }

    #[test]
    fn intel_broadcom_and_veth_names() {
        let (pr, ps, dr) = kinds(include_str!("fixtures/ethtool-names-ixgbe-i40e-bnxt.txt"));
        assert_eq!(
            pr,
            [
                "rx_flow_control_xoff",
                "port.link_xoff_rx",
                "rx_pause_frames",
                "rx_pfc_frames"
            ]
        );
        assert_eq!(
            ps,
            [
                "tx_flow_control_xoff",
                "port.link_xoff_tx",
                "tx_pause_frames",
                "tx_pfc_frames"
            ]
        );
        assert_eq!(
            dr,
            [
                "rx_missed_errors",
                "rx_no_buffer_count",
                "rx_fifo_errors",
                "port.rx_discards",
                "port.rx_dropped",
                "rx_discards",
                "rx_total_discard_pkts"
            ]
        );
        // XON frames resume sending: not pauses.
        for n in [
            "rx_flow_control_xon",
            "port.link_xon_tx",
            "tx_flow_control_xon",
        ] {
            assert_eq!(classify(n), None, "{n}");
        }
        assert_eq!(classify("rx_queue_0_drops"), Some(CounterKind::RxDropped));
        assert_eq!(
            classify("rx_queue_0_xdp_drops"),
            Some(CounterKind::RxDropped)
        );
        assert_eq!(classify("rx_queue_0_xdp_packets"), None);
        assert_eq!(classify("peer_ifindex"), None);
        assert_eq!(
            classify_kernel("rx_missed_errors"),
            Some(CounterKind::RxDropped)
        );
        assert_eq!(classify_kernel("rx_dropped"), None);
    }

    fn s(ethtool: &[(&str, u64)], kernel: &[(&str, u64)]) -> NicSample {
        let v = |x: &[(&str, u64)]| x.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect();
        NicSample {
            netdev: "eth9".into(),
            driver: "mlx5_core".into(),
            ethtool: v(ethtool),
            kernel: v(kernel),
            ..NicSample::default()
        }
    }

    #[test]
    fn change_names_the_largest_pause_counter_of_each_side() {
        let a = s(
            &[
                ("rx_packets_phy", 10),
                ("rx_pause_ctrl_phy", 5),
                ("rx_prio0_pause", 5),
                ("tx_pause_ctrl_phy", 7),
                ("rx_out_of_buffer", 3),
            ],
            &[("rx_packets", 100), ("rx_dropped", 1)],
        );
        let b = s(
            &[
                ("rx_packets_phy", 20),
                ("rx_pause_ctrl_phy", 905),
                ("rx_prio0_pause", 400),
                ("tx_pause_ctrl_phy", 7),
                ("rx_out_of_buffer", 2),
            ],
            &[("rx_packets", 150), ("rx_dropped", 1)],
        );
        let c = NicChange::between(&a, &b);
        assert_eq!(
            c.pause_received,
            Some(Biggest {
                delta: 900,
                name: "rx_pause_ctrl_phy".into()
            })
        );
        assert_eq!(c.pause_sent, None, "tx_pause_ctrl_phy did not change");
        // A counter that went backwards (driver reset) counts from 0.
        assert_eq!(c.rx_dropped.as_ref().map(|b| b.delta), Some(2));
        let names: Vec<(&str, u64)> = c
            .changed
            .iter()
            .map(|x| (x.name.as_str(), x.delta))
            .collect();
        assert_eq!(
            names,
            [
                ("rx_packets_phy", 10),
                ("rx_pause_ctrl_phy", 900),
                ("rx_prio0_pause", 395),
                ("rx_out_of_buffer", 2),
                ("rx_packets", 50)
            ]
        );
        assert_eq!(c.changed[4].source, Source::Kernel);
        // Reordered lists (a driver that gained counters) match by name.
        let mut b2 = b.clone();
        b2.ethtool.insert(0, ("new_counter".into(), 4));
        let c2 = NicChange::between(&a, &b2);
        assert_eq!(c2.changed[0].name, "new_counter");
        assert_eq!(c2.changed[0].delta, 4);
        assert_eq!(c2.pause_received, c.pause_received);
        // The standard pause statistics (ethtool netlink) count as pause frames too.
        let mut a3 = a.clone();
        let mut b3 = b.clone();
        a3.standard = vec![("tx_pause_frames".into(), 10)];
        b3.standard = vec![("tx_pause_frames".into(), 50)];
        let c3 = NicChange::between(&a3, &b3);
        assert_eq!(
            c3.pause_sent,
            Some(Biggest {
                delta: 40,
                name: "tx_pause_frames".into()
            })
        );
        assert_eq!(c3.changed.last().unwrap().source, Source::Standard);
    }

    #[test]
    fn loopback_has_kernel_statistics_and_no_driver_statistics() {
        let s = sample("lo").unwrap();
        assert!(s.kernel.iter().any(|(n, _)| n == "rx_packets"), "{s:?}");
        assert!(s.ethtool.is_empty());
        assert!(s.ethtool_missing.is_some(), "{s:?}");
        assert_eq!(pause_param("lo").unwrap(), None);
        assert_eq!(
            netdev_of_ipv4(Ipv4Addr::LOCALHOST).unwrap().as_deref(),
            Some("lo")
        );
        assert_eq!(netdev_of_ipv4(Ipv4Addr::new(239, 1, 2, 3)).unwrap(), None);
        let e = sample("nope0").unwrap_err().to_string();
        assert!(e.contains("nope0"), "{e}");
        let e = pause_param("nope0").unwrap_err().to_string();
        assert!(e.contains("nope0"), "{e}");
    }
}
