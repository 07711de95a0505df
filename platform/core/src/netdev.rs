//! Network devices as sysfs shows them: MAC address, MTU, the netdev of a PCI function.
//!
//! Everything is read below a root directory (`/` in production, a fixture tree in tests).
//! Note that `/sys/class/net` lists the devices of the network namespace that mounted sysfs:
//! run inside a namespace with `ip netns exec`, which remounts `/sys` for it.
//!
//! | what | file (below the root) |
//! |---|---|
//! | MAC address | `sys/class/net/<name>/address` (`aa:bb:cc:dd:ee:ff`) |
//! | MTU | `sys/class/net/<name>/mtu` |
//! | netdev of a PCI function | the one entry of `sys/bus/pci/devices/<bdf>/net/` |

use std::path::Path;

use crate::error::{PlatformError, Result};
use crate::sysfs;

/// Parses `aa:bb:cc:dd:ee:ff` (hex, either case).
pub fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.trim().split(':');
    for b in &mut mac {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// The MAC address of network device `name`.
///
/// # Errors
/// [`PlatformError::NoSuchNetdev`] when the device does not exist (in this network
/// namespace); [`PlatformError::ParseSysfs`] for an unreadable address.
pub fn mac_address(root: &Path, name: &str) -> Result<[u8; 6]> {
    let path = sysfs::path(root, &format!("sys/class/net/{name}/address"));
    let text = sysfs::read_optional(&path)?.ok_or_else(|| PlatformError::NoSuchNetdev {
        name: name.to_owned(),
    })?;
    parse_mac(&text).ok_or_else(|| PlatformError::ParseSysfs {
        path,
        content: text.trim().to_owned(),
        what: "expected a MAC address such as `02:00:00:00:00:01`",
    })
}

/// The MTU of network device `name`.
///
/// # Errors
/// As [`mac_address`].
pub fn mtu(root: &Path, name: &str) -> Result<u32> {
    let path = sysfs::path(root, &format!("sys/class/net/{name}/mtu"));
    if sysfs::read_optional(&path)?.is_none() {
        return Err(PlatformError::NoSuchNetdev {
            name: name.to_owned(),
        });
    }
    let v = sysfs::read_u64(&path)?;
    u32::try_from(v).map_err(|_| PlatformError::ParseSysfs {
        path,
        content: v.to_string(),
        what: "expected an MTU that fits 32 bits",
    })
}

/// The network device of PCI function `bdf` (`0000:17:00.0`), `None` when the function has
/// no netdev (not a NIC, or bound to a user-space driver such as `vfio-pci`).
///
/// # Errors
/// [`PlatformError::ReadSysfs`] when the directory exists but cannot be listed.
pub fn netdev_of_pci(root: &Path, bdf: &str) -> Result<Option<String>> {
    let dir = sysfs::path(root, &format!("sys/bus/pci/devices/{bdf}/net"));
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(PlatformError::ReadSysfs { path: dir, source }),
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Ok(names.into_iter().next())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A sysfs tree in a directory of the test's own (the `tempfile` crate), removed on drop.
    fn fixture() -> tempfile::TempDir {
        let d = tempfile::Builder::new()
            .prefix("rtdaq-platform-netdev-")
            .tempdir()
            .unwrap();
        let net = d.path().join("sys/class/net/eth7");
        fs::create_dir_all(&net).unwrap();
        fs::write(net.join("address"), "02:AB:cd:00:10:ff\n").unwrap();
        fs::write(net.join("mtu"), "9000\n").unwrap();
        let bad = d.path().join("sys/class/net/bad0");
        fs::create_dir_all(&bad).unwrap();
        fs::write(bad.join("address"), "02:ab:cd\n").unwrap();
        let pci = d
            .path()
            .join("sys/bus/pci/devices/0000:17:00.0/net/enp23s0f0np0");
        fs::create_dir_all(pci).unwrap();
        fs::create_dir_all(d.path().join("sys/bus/pci/devices/0000:18:00.0")).unwrap();
        d
    }

    #[test]
    fn reads_mac_mtu_and_pci_netdev() {
        let d = fixture();
        let root = d.path();
        assert_eq!(
            mac_address(root, "eth7").unwrap(),
            [0x02, 0xab, 0xcd, 0x00, 0x10, 0xff]
        );
        assert_eq!(mtu(root, "eth7").unwrap(), 9000);
        assert_eq!(
            netdev_of_pci(root, "0000:17:00.0").unwrap().as_deref(),
            Some("enp23s0f0np0")
        );
        assert_eq!(netdev_of_pci(root, "0000:18:00.0").unwrap(), None);
        assert_eq!(netdev_of_pci(root, "0000:99:00.0").unwrap(), None);
    }

    #[test]
    fn missing_device_and_bad_address_are_clear_errors() {
        let d = fixture();
        let e = mac_address(d.path(), "nope0").unwrap_err().to_string();
        assert!(e.contains("nope0"), "{e}");
        let e = mtu(d.path(), "nope0").unwrap_err().to_string();
        assert!(e.contains("nope0"), "{e}");
        let e = mac_address(d.path(), "bad0").unwrap_err().to_string();
        assert!(e.contains("MAC address"), "{e}");
    }

    #[test]
    fn mac_parsing() {
        assert_eq!(
            parse_mac("00:11:22:33:44:55"),
            Some([0, 0x11, 0x22, 0x33, 0x44, 0x55])
        );
        for bad in [
            "",
            "00:11:22:33:44",
            "00:11:22:33:44:55:66",
            "0:11:22:33:44:55",
            "zz:11:22:33:44:55",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
    }

    #[test]
    fn loopback_of_this_host() {
        // The real sysfs: `lo` exists in every network namespace, with MAC 00:00:00:00:00:00.
        assert_eq!(mac_address(Path::new("/"), "lo").unwrap(), [0; 6]);
        assert!(mtu(Path::new("/"), "lo").unwrap() >= 1500);
    }
}
