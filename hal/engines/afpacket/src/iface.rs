//! Interfaces: from `interfaces[i].address` to a network device (name, index, MTU, MAC), and
//! which receive timestamps it gives. Cold path only.

use rtdaq_netsys::{KeyError, OsError};
use std::path::Path;

use rtdaq_config::model::Address;

use crate::error::{lookup_error, AfpacketError, Result};
use crate::options::AfpacketOptions;
use crate::sys::consts::{
    HWTSTAMP_FILTER_ALL, HWTSTAMP_FILTER_NONE, IFF_UP, SOF_TIMESTAMPING_RAW_HARDWARE,
    SOF_TIMESTAMPING_RX_HARDWARE,
};
use crate::sys::PacketSocket;

/// A resolved network device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NetDev {
    /// Device name.
    pub(crate) name: String,
    /// Device index (in the opening thread's network namespace).
    pub(crate) ifindex: i32,
    /// Device MTU.
    pub(crate) mtu: u32,
    /// MAC address.
    pub(crate) mac: [u8; 6],
    /// `IFF_UP`.
    pub(crate) up: bool,
    /// RX frames carry hardware timestamps.
    pub(crate) hw_timestamps: bool,
    /// What the timestamp decision was, for the open log line.
    pub(crate) timestamps: String,
}

/// The network device name of interface `i`: a netdev address as is, a PCI address through
/// `<sysfs>/bus/pci/devices/<address>/net/`.
///
/// # Errors
/// A socket address ([`AfpacketError::Config`]); a PCI address without a kernel network
/// device ([`AfpacketError::NoNetdevForPci`]).
pub(crate) fn netdev_name(address: &Address, key: &str, sysfs: &Path) -> Result<String> {
    match address {
        Address::Netdev(n) => Ok(n.clone()),
        Address::Socket(u) => Err(AfpacketError::Config(KeyError::new(key.to_owned(), format!(
                "\"{u}\" is a socket address; the afpacket engine needs a network device name (\"eth0\") or a PCI address (\"0000:17:00.0\"), or use engine.kind = \"socket\""
            )))),
        Address::Pci(p) => {
            let pci = p.to_string();
            let dev = sysfs.join("bus/pci/devices").join(&pci);
            if !dev.exists() {
                return Err(AfpacketError::NoNetdevForPci {
                    key: key.to_owned(),
                    pci,
                    detail: format!(
                        "no such PCI device ({} does not exist); check the address with `lspci -D` and fix {key}",
                        dev.display()
                    ),
                });
            }
            let mut names: Vec<String> = std::fs::read_dir(dev.join("net"))
                .map(|d| {
                    d.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            match names.len() {
                0 => {
                    let driver = std::fs::read_link(dev.join("driver"))
                        .ok()
                        .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()));
                    let why = match driver {
                        Some(d) => format!("it is bound to driver \"{d}\", which provides no network device (vfio-pci / uio for DPDK?)"),
                        None => "it is bound to no driver".to_owned(),
                    };
                    Err(AfpacketError::NoNetdevForPci {
                        key: key.to_owned(),
                        pci,
                        detail: format!(
                            "no kernel network device for this PCI function ({}/net/ is empty or missing): {why}; bind it to its kernel network driver, or give the netdev name in {key}",
                            dev.display()
                        ),
                    })
                }
                1 => Ok(names.remove(0)),
                _ => {
                    log::warn!(
                        "{key} = \"{pci}\": the PCI function has {} network devices ({}); using \"{}\" (give the netdev name in {key} to pick another)",
                        names.len(),
                        names.join(", "),
                        names[0]
                    );
                    Ok(names.remove(0))
                }
            }
        }
    }
}

/// Looks device `name` up through `probe` (a packet socket of the opening thread's network
/// namespace) and decides the receive timestamps.
///
/// # Errors
/// No such device ([`AfpacketError::NoSuchInterface`]); a failed MTU query.
pub(crate) fn probe(
    sock: &PacketSocket,
    key: &str,
    name: &str,
    opts: &AfpacketOptions,
) -> Result<NetDev> {
    let ifindex = sock
        .if_index(name)
        .map_err(|e| lookup_error(key, name, e))?;
    let mtu = sock.if_mtu(name).map_err(|source| {
        AfpacketError::Query(OsError::new(
            key.to_owned(),
            format!("cannot read the MTU of \"{name}\" ({source})"),
            source,
        ))
    })?;
    let up = sock.if_flags(name).is_ok_and(|f| f & IFF_UP != 0);
    let mac = sock.if_hwaddr(name).unwrap_or_default();
    let (hw_timestamps, timestamps) = timestamps(sock, name, opts);
    Ok(NetDev {
        name: name.to_owned(),
        ifindex,
        mtu,
        mac,
        up,
        hw_timestamps,
        timestamps,
    })
}

/// Hardware receive timestamps when the device has them (turning its RX filter on if it is
/// off), else software ones. Returns the choice and a description for the log.
fn timestamps(sock: &PacketSocket, name: &str, opts: &AfpacketOptions) -> (bool, String) {
    if !opts.hw_timestamps {
        return (
            false,
            "software (hardware timestamps disabled by AfpacketOptions::hw_timestamps)".to_owned(),
        );
    }
    let need = SOF_TIMESTAMPING_RAW_HARDWARE | SOF_TIMESTAMPING_RX_HARDWARE;
    match sock.ts_info(name) {
        Ok(ti) if ti.so_timestamping & need == need => {
            let phc = ti.phc_index;
            match sock.get_hwtstamp(name) {
                Ok((_, f)) if f != HWTSTAMP_FILTER_NONE as i32 => (
                    true,
                    format!("hardware (PTP clock {phc}, RX filter {f} already on)"),
                ),
                Ok((tx, _)) => match sock.set_hwtstamp_rx(name, tx, HWTSTAMP_FILTER_ALL as i32) {
                    Ok(f) if f != HWTSTAMP_FILTER_NONE as i32 => (
                        true,
                        format!("hardware (PTP clock {phc}; RX timestamping switched on, filter {f})"),
                    ),
                    Ok(_) => (
                        false,
                        "software (the device refused to timestamp received frames)".to_owned(),
                    ),
                    Err(e) => (
                        false,
                        format!("software (the device offers hardware timestamps but SIOCSHWTSTAMP failed: {e})"),
                    ),
                },
                Err(e) => (
                    false,
                    format!("software (the device offers hardware timestamps but SIOCGHWTSTAMP failed: {e})"),
                ),
            }
        }
        Ok(_) => (
            false,
            "software (the device offers no hardware receive timestamps)".to_owned(),
        ),
        Err(e) => (false, format!("software (ETHTOOL_GET_TS_INFO failed: {e})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtdaq_config::model::PciAddress;

    fn pci() -> Address {
        Address::Pci(PciAddress {
            domain: 0,
            bus: 0x17,
            device: 0,
            function: 1,
        })
    }

    #[test]
    fn pci_addresses_resolve_through_sysfs() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let dev = root.join("bus/pci/devices/0000:17:00.1");
        let key = "interfaces[2].address";
        let e = netdev_name(&pci(), key, &root).unwrap_err();
        assert!(e.to_string().contains("no such PCI device"), "{e}");
        assert!(
            e.to_string()
                .starts_with("interfaces[2].address = \"0000:17:00.1\""),
            "{e}"
        );
        std::fs::create_dir_all(&dev).unwrap();
        let e = netdev_name(&pci(), key, &root).unwrap_err();
        assert!(e.to_string().contains("bound to no driver"), "{e}");
        std::os::unix::fs::symlink("../../../bus/pci/drivers/vfio-pci", dev.join("driver"))
            .unwrap();
        let e = netdev_name(&pci(), key, &root).unwrap_err();
        assert!(e.to_string().contains("driver \"vfio-pci\""), "{e}");
        std::fs::create_dir_all(dev.join("net/enp23s0f1np1")).unwrap();
        assert_eq!(netdev_name(&pci(), key, &root).unwrap(), "enp23s0f1np1");
    }

    #[test]
    fn socket_addresses_are_refused() {
        let a = Address::Socket(rtdaq_config::model::SocketUri {
            transport: rtdaq_config::model::Transport::Udp,
            ip: std::net::Ipv4Addr::LOCALHOST,
            port: 5000,
        });
        let e = netdev_name(&a, "interfaces[0].address", Path::new("/sys")).unwrap_err();
        assert!(e.to_string().contains("needs a network device name"), "{e}");
        assert_eq!(
            netdev_name(&Address::Netdev("veth0".into()), "k", Path::new("/x")).unwrap(),
            "veth0"
        );
    }
}
