//! NIC counters of a run (issue #18): the driver's ethtool statistics and the kernel's netdev
//! statistics of each interface's network device, read at the start, once a second and at
//! the end, so that the report shows what changed and the live log warns, once, when pause
//! frames or drops before the queues explain a rate nobody else counts.
//!
//! Which device an interface is on:
//!
//! | `interfaces[].address` | device |
//! |---|---|
//! | a netdev name (raw engines) | that device, when the kernel has it (not a DPDK virtual device) |
//! | a PCI address | its kernel netdev, when it has one (not one bound to `vfio-pci`: the DPDK port counters cover it) |
//! | `udp://`/`tcp://`/`rdma://` address | the device holding that address (`getifaddrs`); for a multicast group the device of `multicast_interface` |
//!
//! Loopback and `0.0.0.0` have no NIC: nothing is read for them.
//!
//! Everything here runs on the main thread (the live line's second tick), never on a queue
//! thread; the metrics thread reads the latest [`NicNow`] behind a mutex.

use rtdaq_config::model::{Address, Config};
use rtdaq_core::traits::{EngineStats, PortStats};
use rtdaq_platform::nic::{self, CounterKind, NicChange, NicSample};
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The latest counters of one watched device (what `/metrics` exports).
#[derive(Debug, Clone)]
pub struct NicNow {
    /// The config's interface name.
    pub interface: String,
    /// The sample now.
    pub sample: NicSample,
    /// What changed since the run started.
    pub change: NicChange,
}

/// The latest counters of every watched device, shared with the metrics thread.
pub type Shared = Arc<Mutex<Vec<NicNow>>>;

/// The latest counters of an engine's own ports (DPDK), shared with the metrics thread:
/// each with its interface's name and what its extended counters show of pause frames and
/// drops (a DPDK port counts from its start, so these are the run's).
pub type SharedPorts = Arc<Mutex<Vec<(String, PortStats, NicChange)>>>;

/// What `p`'s extended counters show (largest counter of each kind; see
/// [`rtdaq_platform::nic`]).
pub fn port_change(p: &PortStats) -> NicChange {
    let mut c = NicChange::default();
    for (name, v) in p.xstats.iter().filter(|(_, v)| *v > 0) {
        let slot = match nic::classify(name) {
            Some(CounterKind::PauseReceived) => &mut c.pause_received,
            Some(CounterKind::PauseSent) => &mut c.pause_sent,
            Some(CounterKind::RxDropped) => &mut c.rx_dropped,
            None => continue,
        };
        if slot.as_ref().is_none_or(|b| *v > b.delta) {
            *slot = Some(nic::Biggest {
                delta: *v,
                name: name.clone(),
            });
        }
    }
    c
}

/// Reads an engine's ports once a second for `/metrics` and warns (once per port and kind)
/// while the run goes on; the report's `ports` are read at the end, as before.
pub struct PortWatch {
    stats: Box<dyn EngineStats>,
    names: Vec<String>,
    warned: Vec<[bool; 3]>,
    shared: SharedPorts,
}

impl PortWatch {
    /// Watches the ports `stats` reads; `names` are the config's interface names.
    pub fn new(stats: Box<dyn EngineStats>, names: Vec<String>) -> Self {
        Self {
            stats,
            names,
            warned: Vec::new(),
            shared: Arc::default(),
        }
    }

    /// The latest counters, for the metrics thread.
    pub fn shared(&self) -> SharedPorts {
        Arc::clone(&self.shared)
    }

    /// Reads every port now.
    pub fn poll(&mut self) {
        let ports = self.stats.port_stats();
        self.warned.resize(ports.len(), [false; 3]);
        let now: Vec<(String, PortStats, NicChange)> = ports
            .into_iter()
            .zip(self.warned.iter_mut())
            .map(|(p, warned)| {
                let name = self
                    .names
                    .get(p.interface)
                    .cloned()
                    .unwrap_or_else(|| p.port.clone());
                let change = port_change(&p);
                for w in warnings(&name, &p.port, &change, warned) {
                    log::warn!("{w}");
                }
                (name, p, change)
            })
            .collect();
        if let Ok(mut g) = self.shared.lock() {
            *g = now;
        }
    }

    /// The engine's stats handle back (for the report's read after the queues stopped).
    pub fn into_stats(self) -> Box<dyn EngineStats> {
        self.stats
    }
}

struct Watched {
    interface: String,
    start: NicSample,
    /// Warned already: pause received, pause sent, dropped before the queues.
    warned: [bool; 3],
    warnings: Vec<String>,
    /// The last sample read and its change (kept when a later read fails).
    last: Option<(NicSample, NicChange)>,
    /// A read failed during the run (said once).
    read_failed: bool,
}

/// The watched devices of a run.
pub struct NicWatch {
    ports: Vec<Watched>,
    shared: Shared,
}

/// The device interface `i` of `config` is on, or why there is none.
pub fn netdev_of(config: &Config, i: usize) -> Result<String, String> {
    let iface = &config.interfaces[i];
    let by_ip = |ip: Ipv4Addr, what: &str| -> Result<String, String> {
        if ip.is_unspecified() {
            return Err(format!(
                "{what} {ip} is any address: the kernel picks the device per packet"
            ));
        }
        if ip.is_loopback() {
            return Err(format!("{what} {ip} is on the loopback device (no NIC)"));
        }
        match nic::netdev_of_ipv4(ip) {
            Ok(Some(n)) if n == "lo" => Err(format!("{what} {ip} is on lo (no NIC)")),
            Ok(Some(n)) => Ok(n),
            Ok(None) => Err(format!("no device of this host holds {what} {ip}")),
            Err(e) => Err(e.to_string()),
        }
    };
    match &iface.address {
        Address::Netdev(n) => {
            if Path::new("/sys/class/net").join(n).exists() {
                Ok(n.clone())
            } else {
                Err(format!("{n} is not a kernel network device"))
            }
        }
        Address::Pci(bdf) => rtdaq_platform::netdev::netdev_of_pci(Path::new("/"), &bdf.to_string())
            .map_err(|e| e.to_string())?
            .ok_or_else(|| {
                format!("{bdf} has no kernel netdev (a user-space driver owns it: its port counters are the engine's)")
            }),
        Address::Socket(u) => match (&iface.multicast, u.ip.is_multicast()) {
            (Some(m), true) => by_ip(m.interface, "multicast_interface"),
            _ => by_ip(u.ip, "address"),
        },
    }
}

impl NicWatch {
    /// Finds each interface's device and reads its counters (the run's start values).
    /// An interface without a device, or whose counters cannot be read, is left out with
    /// a line in the log; it never stops the run.
    pub fn start(config: &Config) -> Self {
        let mut ports = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for (i, iface) in config.interfaces.iter().enumerate() {
            let dev = match netdev_of(config, i) {
                Ok(d) => d,
                Err(why) => {
                    log::debug!("interfaces[{i}] ({}): no NIC counters: {why}", iface.name);
                    continue;
                }
            };
            // Two interfaces on one device: its counters are reported once, under the first.
            if !seen.insert(dev.clone()) {
                continue;
            }
            match nic::sample(&dev) {
                Ok(s) => {
                    log::info!(
                        "interfaces[{i}] ({}): NIC counters of {dev} (driver {}: {} ethtool, {} kernel counters{})",
                        iface.name,
                        if s.driver.is_empty() { "?" } else { &s.driver },
                        s.ethtool.len(),
                        s.kernel.len(),
                        s.ethtool_missing
                            .as_ref()
                            .map_or(String::new(), |w| format!("; {w}"))
                    );
                    ports.push(Watched {
                        interface: iface.name.clone(),
                        start: s,
                        warned: [false; 3],
                        warnings: Vec::new(),
                        last: None,
                        read_failed: false,
                    });
                }
                Err(e) => log::warn!(
                    "interfaces[{i}] ({}): cannot read the NIC counters of {dev}: {e}; the run goes on without them",
                    iface.name
                ),
            }
        }
        let shared = Arc::new(Mutex::new(
            ports
                .iter()
                .map(|p| NicNow {
                    interface: p.interface.clone(),
                    sample: p.start.clone(),
                    change: NicChange::default(),
                })
                .collect(),
        ));
        Self { ports, shared }
    }

    /// No device is watched.
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }

    /// The latest counters, for the metrics thread.
    pub fn shared(&self) -> Shared {
        Arc::clone(&self.shared)
    }

    /// Reads every device again: updates what the metrics export and warns (once per
    /// device and kind) about pause frames and drops before the queues.
    pub fn poll(&mut self) {
        let mut now = Vec::with_capacity(self.ports.len());
        for p in &mut self.ports {
            let (sample, change) = match nic::sample(&p.start.netdev) {
                Ok(s) => {
                    let change = NicChange::between(&p.start, &s);
                    for w in warnings(&p.interface, &s.netdev, &change, &mut p.warned) {
                        log::warn!("{w}");
                        p.warnings.push(w);
                    }
                    p.last = Some((s.clone(), change.clone()));
                    (s, change)
                }
                Err(e) => {
                    // The device went away (or its statistics cannot be read): say so once
                    // and keep its last values, so the report and /metrics show what was seen.
                    if !p.read_failed {
                        p.read_failed = true;
                        let w = format!(
                            "{} ({}): reading its NIC counters failed: {e}; the last values read stand",
                            p.interface, p.start.netdev
                        );
                        log::warn!("{w}");
                        p.warnings.push(w);
                    }
                    match &p.last {
                        Some(l) => l.clone(),
                        None => (p.start.clone(), NicChange::default()),
                    }
                }
            };
            now.push(NicNow {
                interface: p.interface.clone(),
                sample,
                change,
            });
        }
        if let Ok(mut g) = self.shared.lock() {
            *g = now;
        }
    }

    /// Reads every device a last time (after the queues closed) and reports what changed.
    pub fn finish(mut self) -> Vec<NicReport> {
        self.poll();
        let now = self.shared.lock().map(|g| g.clone()).unwrap_or_default();
        self.ports
            .iter()
            .map(|p| {
                let end = now.iter().find(|n| n.sample.netdev == p.start.netdev);
                let change = end.map(|n| n.change.clone()).unwrap_or_default();
                NicReport::of(p, &change)
            })
            .collect()
    }
}

/// The warnings `change` calls for that were not given yet (`warned`: received, sent, dropped).
pub fn warnings(
    interface: &str,
    netdev: &str,
    change: &NicChange,
    warned: &mut [bool; 3],
) -> Vec<String> {
    let mut out = Vec::new();
    let kinds = [
        (&change.pause_received, CounterKind::PauseReceived),
        (&change.pause_sent, CounterKind::PauseSent),
        (&change.rx_dropped, CounterKind::RxDropped),
    ];
    for (k, (big, kind)) in kinds.into_iter().enumerate() {
        let Some(b) = big.as_ref().filter(|b| b.delta > 0) else {
            continue;
        };
        if warned[k] {
            continue;
        }
        warned[k] = true;
        out.push(warning_text(interface, netdev, kind, b.delta, &b.name));
    }
    out
}

/// The warning for `n` frames of `kind` on `netdev`, counted by `counter` (given once, by
/// [`warnings`]).
fn warning_text(interface: &str, netdev: &str, kind: CounterKind, n: u64, counter: &str) -> String {
    match kind {
        CounterKind::PauseSent => format!(
            "{interface} ({netdev}): the NIC SENT {n} pause frames during the run ({counter}): it could not keep up and throttled the sender (the instrument or the switch), which caps the rate while no drop counter moves; give the queues more ring_depth or cores, or turn flow control off (`ethtool -A {netdev} rx off tx off`) to see the loss counted instead"
        ),
        CounterKind::PauseReceived => format!(
            "{interface} ({netdev}): the NIC RECEIVED {n} pause frames during the run ({counter}): the link partner throttled this host's transmit; the receiver or a switch on the path cannot keep up"
        ),
        CounterKind::RxDropped => format!(
            "{interface} ({netdev}): {n} frames were dropped by the NIC or driver before any queue saw them ({counter}): the queues did not post buffers fast enough (raise ring_depth, check that the queue threads keep up)"
        ),
    }
}

/// One changed counter in the report: `{ source, name, start, end, delta, kind }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterReport {
    /// `"ethtool"` (driver statistics), `"kernel"` (netdev statistics) or `"standard"` (the
    /// standard pause statistics over ethtool netlink).
    pub source: String,
    /// The counter's name.
    pub name: String,
    /// Value at the start of the run.
    pub start: u64,
    /// Value at the end.
    pub end: u64,
    /// The change (`end` when the counter went backwards: the driver was reset).
    pub delta: u64,
    /// `"pause_received"`, `"pause_sent"`, `"rx_dropped"`, or absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// One device's counters over the run (the report's `nics`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicReport {
    /// The config's interface name.
    pub interface: String,
    /// The network device.
    pub netdev: String,
    /// Its driver (empty when it reports none).
    pub driver: String,
    /// Its bus address (empty for virtual devices).
    pub bus_info: String,
    /// Why no driver statistics were read, when none were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ethtool_missing: Option<String>,
    /// Pause frames received during the run (largest pause-received counter's change).
    pub pause_received: u64,
    /// Pause frames sent during the run.
    pub pause_sent: u64,
    /// Frames dropped by the NIC or driver before the queues.
    pub rx_dropped: u64,
    /// Every counter that changed.
    pub changed: Vec<CounterReport>,
    /// The warnings given (pause frames, drops before the queues).
    pub warnings: Vec<String>,
}

fn kind_str(k: CounterKind) -> &'static str {
    match k {
        CounterKind::PauseReceived => "pause_received",
        CounterKind::PauseSent => "pause_sent",
        CounterKind::RxDropped => "rx_dropped",
    }
}

impl NicReport {
    fn of(p: &Watched, change: &NicChange) -> Self {
        let d = nic::Biggest::delta_of;
        NicReport {
            interface: p.interface.clone(),
            netdev: p.start.netdev.clone(),
            driver: p.start.driver.clone(),
            bus_info: p.start.bus_info.clone(),
            ethtool_missing: p.start.ethtool_missing.clone(),
            pause_received: d(&change.pause_received),
            pause_sent: d(&change.pause_sent),
            rx_dropped: d(&change.rx_dropped),
            changed: change
                .changed
                .iter()
                .map(|c| CounterReport {
                    source: c.source.as_str().to_owned(),
                    name: c.name.clone(),
                    start: c.start,
                    end: c.end,
                    delta: c.delta,
                    kind: c.kind.map(|k| kind_str(k).to_owned()),
                })
                .collect(),
            warnings: p.warnings.clone(),
        }
    }
}

impl std::fmt::Display for NicReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "  {} = {} (driver {}{}) · pause frames received {} sent {} · dropped before the queues {}",
            self.interface,
            self.netdev,
            if self.driver.is_empty() { "?" } else { &self.driver },
            if self.bus_info.is_empty() {
                String::new()
            } else {
                format!(", {}", self.bus_info)
            },
            self.pause_received,
            self.pause_sent,
            self.rx_dropped
        )?;
        if let Some(m) = &self.ethtool_missing {
            write!(f, " · {m}")?;
        }
        const SHOWN: usize = 12;
        if !self.changed.is_empty() {
            let list: Vec<String> = self
                .changed
                .iter()
                .take(SHOWN)
                .map(|c| format!("{} {} +{}", c.source, c.name, c.delta))
                .collect();
            write!(f, "\n    changed: {}", list.join(", "))?;
            if self.changed.len() > SHOWN {
                write!(
                    f,
                    " … {} more in the JSON report",
                    self.changed.len() - SHOWN
                )?;
            }
        }
        for w in &self.warnings {
            write!(f, "\n    WARNING: {w}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtdaq_platform::nic::Biggest;

    #[test]
    fn each_kind_is_warned_once_naming_the_side_and_the_counter() {
        let mut warned = [false; 3];
        let mut c = NicChange {
            pause_sent: Some(Biggest {
                delta: 12,
                name: "tx_pause_ctrl_phy".into(),
            }),
            ..NicChange::default()
        };
        let w = warnings("adc", "eth9", &c, &mut warned);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("SENT 12 pause frames"), "{}", w[0]);
        assert!(w[0].contains("tx_pause_ctrl_phy"), "{}", w[0]);
        assert!(w[0].contains("throttled the sender"), "{}", w[0]);
        // More pauses later: no second warning.
        c.pause_sent.as_mut().unwrap().delta = 500;
        assert!(warnings("adc", "eth9", &c, &mut warned).is_empty());
        // The other side and drops are warned separately.
        c.pause_received = Some(Biggest {
            delta: 3,
            name: "rx_pause_ctrl_phy".into(),
        });
        c.rx_dropped = Some(Biggest {
            delta: 7,
            name: "rx_out_of_buffer".into(),
        });
        let w = warnings("adc", "eth9", &c, &mut warned);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("RECEIVED 3 pause frames"), "{}", w[0]);
        assert!(w[0].contains("this host's transmit"), "{}", w[0]);
        assert!(w[1].contains("7 frames were dropped"), "{}", w[1]);
        assert!(w[1].contains("rx_out_of_buffer"), "{}", w[1]);
        assert_eq!(warned, [true; 3]);
    }

    #[test]
    fn a_device_that_goes_away_is_said_once_and_keeps_its_last_values() {
        let start = NicSample {
            netdev: "rtdaqgone0".into(),
            kernel: vec![("rx_packets".into(), 5)],
            ..NicSample::default()
        };
        let mut w = NicWatch {
            ports: vec![Watched {
                interface: "adc".into(),
                start: start.clone(),
                warned: [false; 3],
                warnings: Vec::new(),
                last: None,
                read_failed: false,
            }],
            shared: Arc::default(),
        };
        w.poll();
        w.poll();
        let now = w.shared().lock().unwrap().clone();
        assert_eq!(now.len(), 1, "still exported");
        assert_eq!(now[0].sample, start);
        let r = w.finish();
        assert_eq!(r[0].warnings.len(), 1, "{:?}", r[0].warnings);
        assert!(
            r[0].warnings[0].contains("rtdaqgone0"),
            "{:?}",
            r[0].warnings
        );
        assert!(r[0].warnings[0].contains("the last values read stand"));
    }

    #[test]
    fn no_change_no_warning() {
        let mut warned = [false; 3];
        assert!(warnings("a", "b", &NicChange::default(), &mut warned).is_empty());
        assert_eq!(warned, [false; 3]);
    }
}
