//! Layer 3 for ethtool: [`Ethtool`], a socket that reads a device's driver info, statistics
//! and pause settings through `SIOCETHTOOL` (what `ethtool -i`, `-S` and `-a` print).

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use libc::c_void;
use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType};

use super::raw;
use super::result;

/// What `ETHTOOL_GDRVINFO` says of a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DriverInfo {
    /// Driver (`mlx5_core`, `veth`, ...).
    pub driver: String,
    /// Bus address (a PCI address, or empty for a virtual device).
    pub bus_info: String,
    /// Number of statistics (`ETH_SS_STATS` names).
    pub n_stats: u32,
}

/// `ETHTOOL_GPAUSEPARAM`: pause autonegotiation, receive and transmit pause enabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pause {
    pub autoneg: bool,
    pub rx: bool,
    pub tx: bool,
}

/// A socket to ask the kernel for ethtool data (any `AF_INET` socket will do).
pub(crate) struct Ethtool {
    fd: OwnedFd,
}

/// Room for entries beyond the count the driver gave: `GSTRINGS` and `GSTATS` fill as many as
/// the driver has *now*, which can grow between the calls (a channel-count change on mlx5).
fn with_slack(n: u32) -> usize {
    n as usize * 2 + 64
}

/// A NUL-padded C string field.
fn c_str(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

impl Ethtool {
    /// Opens the socket (`socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)`).
    pub(crate) fn open() -> io::Result<Self> {
        let fd = socket(
            AddressFamily::Inet,
            SockType::Datagram,
            SockFlag::SOCK_CLOEXEC,
            None,
        )?;
        Ok(Self { fd })
    }

    /// Driver name, bus address and statistics count of device `name`.
    pub(crate) fn driver_info(&self, name: &str) -> io::Result<DriverInfo> {
        let mut info = raw::ethtool_drvinfo {
            cmd: raw::ETHTOOL_GDRVINFO,
            ..Default::default()
        };
        // SAFETY: `self.fd` is a socket; `info` is a writable `ethtool_drvinfo`, the struct
        // `ETHTOOL_GDRVINFO` fills.
        unsafe {
            result::ethtool(self.fd.as_fd(), name, (&raw mut info).cast::<c_void>())?;
        }
        Ok(DriverInfo {
            driver: c_str(&info.driver),
            bus_info: c_str(&info.bus_info),
            n_stats: info.n_stats,
        })
    }

    /// The statistics names of device `name` (`ETHTOOL_GSTRINGS`, `ETH_SS_STATS`), `n` of
    /// them expected.
    ///
    /// # Errors
    /// `ErrorKind::Interrupted` when the driver's count changed since `n` was read (ask
    /// again); the ioctl's error otherwise.
    pub(crate) fn stat_names(&self, name: &str, n: u32) -> io::Result<Vec<String>> {
        const HEADER: usize = 12; // cmd, string_set, len
        let room = with_slack(n);
        let mut buf = vec![0u8; HEADER + room * raw::ETH_GSTRING_LEN];
        buf[0..4].copy_from_slice(&raw::ETHTOOL_GSTRINGS.to_ne_bytes());
        buf[4..8].copy_from_slice(&raw::ETH_SS_STATS.to_ne_bytes());
        buf[8..12].copy_from_slice(&n.to_ne_bytes());
        // SAFETY: `self.fd` is a socket; `buf` is a writable `ethtool_gstrings` header followed
        // by room for `room` names; the kernel writes as many names as the driver has now,
        // which is `n` unless the device changed in between, and `room` leaves space for such
        // growth (checked below).
        unsafe {
            result::ethtool(self.fd.as_fd(), name, buf.as_mut_ptr().cast())?;
        }
        let len = u32::from_ne_bytes([buf[8], buf[9], buf[10], buf[11]]);
        if len != n || len as usize > room {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                format!("{name}: the statistics count changed ({n} -> {len})"),
            ));
        }
        Ok(buf[HEADER..HEADER + len as usize * raw::ETH_GSTRING_LEN]
            .chunks_exact(raw::ETH_GSTRING_LEN)
            .map(c_str)
            .collect())
    }

    /// The statistics values of device `name` (`ETHTOOL_GSTATS`), `n` of them expected, in
    /// the order of [`stat_names`](Self::stat_names).
    ///
    /// # Errors
    /// As [`stat_names`](Self::stat_names).
    pub(crate) fn stat_values(&self, name: &str, n: u32) -> io::Result<Vec<u64>> {
        let room = with_slack(n);
        // Header `{ u32 cmd; u32 n_stats; }` in the first word, then the values.
        let mut buf = vec![0u64; 1 + room];
        let mut head = [0u8; 8];
        head[0..4].copy_from_slice(&raw::ETHTOOL_GSTATS.to_ne_bytes());
        head[4..8].copy_from_slice(&n.to_ne_bytes());
        buf[0] = u64::from_ne_bytes(head);
        // SAFETY: `self.fd` is a socket; `buf` is a writable, 8-byte aligned `ethtool_stats`
        // header with room for `room` values; the kernel writes the driver's current count,
        // `n` unless the device changed, and `room` leaves space for such growth (checked
        // below).
        unsafe {
            result::ethtool(self.fd.as_fd(), name, buf.as_mut_ptr().cast())?;
        }
        let head = buf[0].to_ne_bytes();
        let len = u32::from_ne_bytes([head[4], head[5], head[6], head[7]]);
        if len != n || len as usize > room {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                format!("{name}: the statistics count changed ({n} -> {len})"),
            ));
        }
        buf.truncate(1 + len as usize);
        buf.remove(0);
        Ok(buf)
    }

    /// Pause settings of device `name`.
    ///
    /// # Errors
    /// The ioctl's error (`EOPNOTSUPP` from drivers without pause settings, such as veth).
    pub(crate) fn pause(&self, name: &str) -> io::Result<Pause> {
        let mut p = raw::ethtool_pauseparam {
            cmd: raw::ETHTOOL_GPAUSEPARAM,
            autoneg: 0,
            rx_pause: 0,
            tx_pause: 0,
        };
        // SAFETY: `self.fd` is a socket; `p` is a writable `ethtool_pauseparam`, the struct the
        // command fills.
        unsafe {
            result::ethtool(self.fd.as_fd(), name, (&raw mut p).cast::<c_void>())?;
        }
        Ok(Pause {
            autoneg: p.autoneg != 0,
            rx: p.rx_pause != 0,
            tx: p.tx_pause != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_do_not_fit_are_refused_before_the_ioctl() {
        let et = Ethtool::open().expect("an AF_INET datagram socket");
        for bad in ["0123456789abcdef", "a\0b"] {
            let e = et.driver_info(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_missing_device_is_the_ioctls_enodev() {
        let et = Ethtool::open().expect("an AF_INET datagram socket");
        let e = et.driver_info("rtdaq-nodev0").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENODEV), "{e}");
        let e = et.pause("rtdaq-nodev0").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENODEV), "{e}");
    }

    #[test]
    fn loopback_answers_with_data_or_an_os_error() {
        let et = Ethtool::open().expect("an AF_INET datagram socket");
        // `lo` has no driver behind it: most kernels answer EOPNOTSUPP, none may crash us.
        if let Err(e) = et.driver_info("lo") {
            assert!(e.raw_os_error().is_some(), "{e}");
        }
        if let Err(e) = et.pause("lo") {
            assert!(e.raw_os_error().is_some(), "{e}");
        }
    }
}
