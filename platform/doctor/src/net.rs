//! Per-interface checks: MTU, NIC IRQ affinity, PCIe MRRS/MPS (see [`crate::pcie`]).

use rtdaq_config::model::{Address, Interface, Transport};
use rtdaq_platform::{netdev, CpuList};

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
            if u.ip.is_loopback() && netdev_exists(ctx, "lo") {
                p.netdev = Some("lo".into());
                p.no_pci = "lo is not a PCI device (loopback)".into();
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
