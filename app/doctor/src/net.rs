//! Per-interface checks: MTU, NIC pause settings, NIC IRQ affinity, PCIe MRRS/MPS (see
//! [`crate::pcie`]).

use rtdaq_config::model::{Address, FlowControl, Interface, Transport};
use rtdaq_platform::nic::PauseParam;
use rtdaq_platform::{netdev, nic, CpuList};
use std::path::Path;

use crate::host::{self, shown};
use crate::{pcie, Ctx, Finding};

/// An interface of the config and what it is on this host.
pub(crate) struct Port<'a> {
    pub iface: &'a Interface,
    /// Kernel network device, when there is one.
    pub netdev: Option<String>,
    /// PCI function, when the device is a PCI device.
    pub pci: Option<String>,
    /// Why there is no netdev (for a skip), when there is none.
    pub no_netdev: String,
    /// Why there is no PCI function (for a skip), when there is none.
    pub no_pci: String,
}

/// The PCI function of a netdev, from `sys/class/net/<n>/device/uevent` (`PCI_SLOT_NAME=`).
fn pci_of_netdev(ctx: &Ctx<'_>, name: &str) -> Option<String> {
    let uevent = host::read(ctx.root, &format!("sys/class/net/{name}/device/uevent"))?;
    uevent
        .lines()
        .find_map(|l| l.strip_prefix("PCI_SLOT_NAME="))
        .map(|s| s.trim().to_owned())
}

fn netdev_exists(ctx: &Ctx<'_>, name: &str) -> bool {
    host::at(ctx.root, &format!("sys/class/net/{name}")).exists()
}

pub(crate) fn resolve<'a>(ctx: &Ctx<'_>, iface: &'a Interface) -> Port<'a> {
    let mut p = Port {
        iface,
        netdev: None,
        pci: None,
        no_netdev: String::new(),
        no_pci: String::new(),
    };
    match &iface.address {
        Address::Pci(a) => {
            let bdf = a.to_string();
            match netdev::netdev_of_pci(ctx.root, &bdf).ok().flatten() {
                Some(n) => p.netdev = Some(n),
                None => {
                    p.no_netdev = format!(
                        "{bdf} has no kernel netdev (bound to a user-space driver such as \
                         vfio-pci, or absent): the engine sets the MTU"
                    )
                }
            }
            if host::at(ctx.root, &format!("sys/bus/pci/devices/{bdf}")).exists() {
                p.pci = Some(bdf);
            } else {
                p.no_pci = format!("no PCI device {bdf} (/sys/bus/pci/devices/{bdf} missing)");
            }
        }
        Address::Netdev(n) => {
            if netdev_exists(ctx, n) {
                p.netdev = Some(n.clone());
                match pci_of_netdev(ctx, n) {
                    Some(b) => p.pci = Some(b),
                    None => p.no_pci = format!("{n} is not a PCI device (virtual device)"),
                }
            } else {
                let why = if ctx.config.engine_kind().as_str() == "dpdk" {
                    format!("{n} is not a kernel netdev (a DPDK virtual device?)")
                } else {
                    format!("no network device {n} (/sys/class/net/{n} missing)")
                };
                p.no_netdev.clone_from(&why);
                p.no_pci = why;
            }
        }
        Address::Socket(u) => {
            // On the live host, the device that holds the address (a socket bound to a NIC).
            let holder = (ctx.root == Path::new("/") && !u.ip.is_loopback())
                .then(|| nic::netdev_of_ipv4(u.ip).ok().flatten())
                .flatten();
            if u.ip.is_loopback() && netdev_exists(ctx, "lo") {
                p.netdev = Some("lo".into());
                p.no_pci = "lo is not a PCI device (loopback)".into();
            } else if let Some(n) = holder {
                match pci_of_netdev(ctx, &n) {
                    Some(b) => p.pci = Some(b),
                    None => p.no_pci = format!("{n} is not a PCI device (virtual device)"),
                }
                p.netdev = Some(n);
            } else {
                let what = if u.transport == Transport::Rdma {
                    "an RDMA CM endpoint (RoCE)"
                } else {
                    "a socket endpoint"
                };
                let why = format!(
                    "{u} is {what}: the kernel picks the device by route (check the MTU of \
                     that device)"
                );
                p.no_netdev.clone_from(&why);
                p.no_pci = why;
            }
        }
    }
    p
}

/// Every per-interface check, interface by interface.
pub(crate) fn checks(ctx: &Ctx<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    for iface in &ctx.config.interfaces {
        let port = resolve(ctx, iface);
        out.push(mtu(ctx, &port));
        out.push(pause(ctx, &port));
        out.push(irq_affinity(ctx, &port));
        out.extend(pcie::checks(ctx, &port));
    }
    out
}

/// The netdev missing from sysfs is a failure on raw engines (they open it by name).
fn missing_netdev_fails(port: &Port<'_>) -> bool {
    matches!(&port.iface.address, Address::Netdev(_)) && port.no_netdev.starts_with("no network")
}

/// `net.mtu:<if>`: the netdev's MTU is at least the configured `mtu`.
fn mtu(ctx: &Ctx<'_>, port: &Port<'_>) -> Finding {
    let c = format!("net.mtu:{}", port.iface.name);
    let want = port.iface.mtu;
    let Some(dev) = &port.netdev else {
        if missing_netdev_fails(port) {
            return Finding::fail(
                &c,
                port.no_netdev.clone(),
                "fix interfaces[].address or create the device".into(),
            );
        }
        return Finding::skip(&c, port.no_netdev.clone());
    };
    let rel = format!("sys/class/net/{dev}/mtu");
    match netdev::mtu(ctx.root, dev) {
        Ok(m) if m >= want => Finding::pass(
            &c,
            format!("{dev}: MTU {m} >= {want} configured ({})", shown(&rel)),
        ),
        Ok(m) => Finding::fail(
            &c,
            format!("{dev}: MTU {m} < {want} configured: larger frames are dropped by the NIC"),
            format!("ip link set dev {dev} mtu {want} (persist it in the network configuration)"),
        ),
        Err(e) => Finding::fail(
            &c,
            format!("{dev}: cannot read {}: {e}", shown(&rel)),
            format!("check that {dev} exists in this network namespace"),
        ),
    }
}

/// Where the fixture pause settings of `dev` are below a root other than `/`: the output of
/// `ethtool -a <dev>` (the ioctl answers only for the running kernel).
pub const PAUSE_FIXTURE_DIR: &str = "ethtool-a";

/// Parses `ethtool -a` output (`Autonegotiate: on`, `RX: off`, `TX: off`).
pub(crate) fn parse_ethtool_a(text: &str) -> Option<PauseParam> {
    let get = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim() == "on")
        })
    };
    Some(PauseParam {
        autoneg: get("Autonegotiate")?,
        rx: get("RX")?,
        tx: get("TX")?,
    })
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// `net.pause:<if>`: the NIC's pause (flow control) settings against `flow_control`.
fn pause(ctx: &Ctx<'_>, port: &Port<'_>) -> Finding {
    let c = format!("net.pause:{}", port.iface.name);
    let Some(dev) = &port.netdev else {
        return Finding::skip(&c, port.no_netdev.clone());
    };
    if dev == "lo" {
        return Finding::skip(&c, "lo is the loopback device: no pause frames".into());
    }
    let got = if ctx.root == Path::new("/") {
        match nic::pause_param(dev) {
            Ok(g) => g,
            Err(e) => {
                return Finding::warn(
                    &c,
                    format!("{e}"),
                    format!("check `ethtool -a {dev}` by hand"),
                )
            }
        }
    } else {
        let rel = format!("{PAUSE_FIXTURE_DIR}/{dev}");
        match host::read(ctx.root, &rel) {
            Some(t) => match parse_ethtool_a(&t) {
                Some(p) => Some(p),
                None => {
                    return Finding::warn(
                        &c,
                        format!("{} is not `ethtool -a` output", shown(&rel)),
                        format!("write the output of `ethtool -a {dev}` there"),
                    )
                }
            },
            None => {
                return Finding::skip(
                    &c,
                    format!(
                        "pause settings come from the running kernel (root /) or {}",
                        shown(&rel)
                    ),
                )
            }
        }
    };
    judge_pause(&c, dev, port.iface.flow_control, got)
}

/// The finding for `dev`'s pause settings `got` (`None`: the driver has none) against the
/// expectation `want` (`None`: not stated).
pub(crate) fn judge_pause(
    check: &str,
    dev: &str,
    want: Option<FlowControl>,
    got: Option<PauseParam>,
) -> Finding {
    let Some(got) = got else {
        return Finding::skip(
            check,
            format!("{dev}'s driver has no pause settings (virtual device)"),
        );
    };
    let now = format!(
        "{dev}: pause autoneg {}, rx {}, tx {}",
        on_off(got.autoneg),
        on_off(got.rx),
        on_off(got.tx)
    );
    let fix_to = |rx: bool, tx: bool| {
        format!(
            "ethtool -A {dev} autoneg off rx {} tx {} (persist it in the network configuration)",
            on_off(rx),
            on_off(tx)
        )
    };
    match want {
        Some(w) => {
            let (rx, tx) = w.rx_tx();
            if (got.rx, got.tx) == (rx, tx) {
                Finding::pass(
                    check,
                    format!("{now}, as flow_control = \"{}\" expects", w.as_str()),
                )
            } else {
                Finding::fail(
                    check,
                    format!("{now}, but flow_control = \"{}\" expects rx {}, tx {}", w.as_str(), on_off(rx), on_off(tx)),
                    fix_to(rx, tx),
                )
            }
        }
        None if got.rx || got.tx => Finding::warn(
            check,
            format!(
                "{now}: with flow control on, a NIC that falls behind throttles the sender (tx) or is throttled (rx) silently, while every drop counter reads zero (rtdaq run warns when pause frames appear)"
            ),
            format!(
                "{} to count loss instead, or state flow_control = \"{}\" in the interface to accept it",
                fix_to(false, false),
                match (got.rx, got.tx) {
                    (true, true) => "on",
                    (true, false) => "rx",
                    _ => "tx",
                }
            ),
        ),
        None => Finding::pass(check, format!("{now} (flow control off)")),
    }
}

/// `net.irq_affinity:<if>`: every MSI IRQ of the NIC is allowed only on CPUs that are
/// neither queue cores nor isolated.
fn irq_affinity(ctx: &Ctx<'_>, port: &Port<'_>) -> Finding {
    let c = format!("net.irq_affinity:{}", port.iface.name);
    let Some(bdf) = &port.pci else {
        return Finding::skip(&c, port.no_pci.clone());
    };
    let dir = format!("sys/bus/pci/devices/{bdf}/msi_irqs");
    let irqs: Vec<usize> = host::list_dir(ctx.root, &dir)
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    if irqs.is_empty() {
        return Finding::skip(&c, format!("{bdf} lists no MSI IRQs ({})", shown(&dir)));
    }
    let mut keep_off: Vec<usize> = ctx.queue_cores.iter().collect();
    if let Some(iso) = ctx.cmdline.as_ref().and_then(|c| c.cpus("isolcpus")) {
        keep_off.extend(iso.iter());
    }
    let keep_off = CpuList::from_ids(keep_off);
    let mut bad = Vec::new();
    let mut unreadable = Vec::new();
    let mut on = Vec::new();
    for &n in &irqs {
        match host::read(ctx.root, &format!("proc/irq/{n}/smp_affinity_list"))
            .and_then(|t| CpuList::parse(&t).ok())
        {
            Some(aff) => {
                on.extend(aff.iter());
                if aff.iter().any(|cpu| keep_off.contains(cpu)) {
                    bad.push(n);
                }
            }
            None => unreadable.push(n),
        }
    }
    let dev = port.netdev.as_deref().unwrap_or(bdf);
    let hk = ctx.housekeeping();
    if !bad.is_empty() {
        let bad = CpuList::from_ids(bad);
        return Finding::fail(
            &c,
            format!(
                "{} of {} IRQs of {dev} ({bdf}) may run on queue or isolated cores {keep_off}: \
                 IRQs {bad}",
                bad.len(),
                irqs.len()
            ),
            format!(
                "stop irqbalance, then echo {hk} > /proc/irq/N/smp_affinity_list for N in {bad} \
                 (rt-tuning/tune.sh apply does it)"
            ),
        );
    }
    if !unreadable.is_empty() {
        return Finding::warn(
            &c,
            format!(
                "cannot read /proc/irq/N/smp_affinity_list for IRQs {}",
                CpuList::from_ids(unreadable)
            ),
            "run doctor where /proc is mounted".into(),
        );
    }
    Finding::pass(
        &c,
        format!(
            "{} IRQs of {dev} ({bdf}) on CPUs {}, off queue and isolated cores {keep_off}",
            irqs.len(),
            CpuList::from_ids(on)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Status;

    const ON: &str =
        "Pause parameters for enp1s0f0np0:\nAutonegotiate:\ton\nRX:\t\ton\nTX:\t\ton\n";

    #[test]
    fn ethtool_a_output_parses() {
        assert_eq!(
            parse_ethtool_a(ON),
            Some(PauseParam {
                autoneg: true,
                rx: true,
                tx: true
            })
        );
        let off = ON.replace("\ton", "\toff");
        assert_eq!(
            parse_ethtool_a(&off),
            Some(PauseParam {
                autoneg: false,
                rx: false,
                tx: false
            })
        );
        assert_eq!(parse_ethtool_a("garbage"), None);
    }

    #[test]
    fn pause_settings_against_the_config() {
        let p = |rx, tx| {
            Some(PauseParam {
                autoneg: false,
                rx,
                tx,
            })
        };
        let j = |want, got| judge_pause("net.pause:adc", "eth9", want, got);
        // Stated and matching.
        assert_eq!(
            j(Some(FlowControl::Off), p(false, false)).status,
            Status::Pass
        );
        assert_eq!(j(Some(FlowControl::On), p(true, true)).status, Status::Pass);
        assert_eq!(
            j(Some(FlowControl::Rx), p(true, false)).status,
            Status::Pass
        );
        // Stated and different: a failure whose fix sets what the config says.
        let f = j(Some(FlowControl::Off), p(true, true));
        assert_eq!(f.status, Status::Fail, "{f:?}");
        assert!(f.detail.contains("expects rx off, tx off"), "{f:?}");
        assert_eq!(
            f.fix.as_deref(),
            Some("ethtool -A eth9 autoneg off rx off tx off (persist it in the network configuration)")
        );
        let f = j(Some(FlowControl::Tx), p(false, false));
        assert_eq!(f.status, Status::Fail);
        assert!(f.fix.unwrap().contains("rx off tx on"));
        // Not stated: flow control on is a warning naming the silent throttling.
        let f = j(None, p(false, true));
        assert_eq!(f.status, Status::Warn, "{f:?}");
        assert!(f.detail.contains("throttles the sender"), "{f:?}");
        assert!(f.fix.unwrap().contains("flow_control = \"tx\""));
        assert_eq!(j(None, p(false, false)).status, Status::Pass);
        // A driver without pause settings (veth).
        assert_eq!(j(Some(FlowControl::Off), None).status, Status::Skip);
    }
}
