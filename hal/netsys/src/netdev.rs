//! Network-device queries by name, in the network namespace of the socket they go through
//! (any socket: an `AF_INET` datagram socket from [`crate::inet::socket`] will do).
//! Cold path. An unknown device is `ENODEV` (also for a name the kernel could not hold).

use std::io;
use std::os::fd::BorrowedFd;

use crate::sys::{self, IfQuery};

/// `SIOCGIFINDEX`: the device's index.
pub fn index(fd: BorrowedFd<'_>, name: &str) -> io::Result<i32> {
    sys::if_query(fd, name, IfQuery::Index)
}

/// `SIOCGIFMTU`: the device's MTU.
pub fn mtu(fd: BorrowedFd<'_>, name: &str) -> io::Result<u32> {
    sys::if_query(fd, name, IfQuery::Mtu).map(|m| m.max(0) as u32)
}

/// `SIOCGIFFLAGS`: the device's flags (`IFF_UP`, ...).
pub fn flags(fd: BorrowedFd<'_>, name: &str) -> io::Result<i32> {
    sys::if_query(fd, name, IfQuery::Flags)
}

/// `SIOCGIFHWADDR`: the device's MAC address.
pub fn hwaddr(fd: BorrowedFd<'_>, name: &str) -> io::Result<[u8; 6]> {
    sys::if_hwaddr(fd, name)
}

/// What a device can timestamp (`SIOCETHTOOL` / `ETHTOOL_GET_TS_INFO`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TsInfo {
    /// `SOF_TIMESTAMPING_*` capabilities.
    pub so_timestamping: u32,
    /// PTP hardware clock index, -1 = none.
    pub phc_index: i32,
    /// Bit mask of the supported `HWTSTAMP_FILTER_*` values.
    pub rx_filters: u32,
}

/// The device's timestamping capabilities.
pub fn ts_info(fd: BorrowedFd<'_>, name: &str) -> io::Result<TsInfo> {
    sys::ts_info(fd, name).map(|(so_timestamping, phc_index, rx_filters)| TsInfo {
        so_timestamping,
        phc_index,
        rx_filters,
    })
}

/// `SIOCGHWTSTAMP` (`set = None`) or `SIOCSHWTSTAMP`: the device's hardware timestamping
/// configuration after the call.
pub fn hwtstamp(
    fd: BorrowedFd<'_>,
    name: &str,
    set: Option<libc::hwtstamp_config>,
) -> io::Result<libc::hwtstamp_config> {
    sys::hwtstamp(fd, name, set)
}

/// A device's queue counts (`SIOCETHTOOL` / `ETHTOOL_GCHANNELS`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Channels {
    /// Most RX-only channels.
    pub max_rx: u32,
    /// Most combined (RX + TX) channels.
    pub max_combined: u32,
    /// RX-only channels configured.
    pub rx_count: u32,
    /// TX-only channels configured.
    pub tx_count: u32,
    /// Combined channels configured.
    pub combined_count: u32,
}

/// The device's channel counts (`EOPNOTSUPP` from a driver without them, e.g. veth).
pub fn channels(fd: BorrowedFd<'_>, name: &str) -> io::Result<Channels> {
    sys::channels(fd, name).map(
        |[max_rx, max_combined, rx_count, tx_count, combined_count]| Channels {
            max_rx,
            max_combined,
            rx_count,
            tx_count,
            combined_count,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn loopback_answers_and_unknown_names_are_enodev() {
        let s = crate::inet::socket(crate::inet::Kind::Datagram).unwrap();
        let fd = s.as_fd();
        assert_eq!(index(fd, "lo").unwrap(), 1);
        assert_eq!(mtu(fd, "lo").unwrap(), 65536);
        assert_ne!(flags(fd, "lo").unwrap() & libc::IFF_UP, 0);
        assert_eq!(hwaddr(fd, "lo").unwrap(), [0; 6]);
        assert!(ts_info(fd, "lo").is_ok());
        for bad in ["", "no-such-dev0", "a-name-far-too-long-for-linux", "nul\0"] {
            assert_eq!(
                index(fd, bad).unwrap_err().raw_os_error(),
                Some(libc::ENODEV),
                "{bad:?}"
            );
        }
    }
}

/// One reading of a PTP hardware clock against `CLOCK_REALTIME`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhcReading {
    /// PHC minus `CLOCK_REALTIME`, ns (about +37 s when the PHC keeps TAI, as ptp4l does).
    pub offset_ns: i64,
    /// The system-clock window around the PHC read of the sample used, ns: the reading's
    /// uncertainty.
    pub window_ns: u64,
}

/// Reads `/dev/ptp<index>` against `CLOCK_REALTIME` with `PTP_SYS_OFFSET_EXTENDED`
/// (`samples` system-PHC-system readings, the narrowest window taken; what `phc_ctl` and
/// `phc2sys` read). Cold path.
///
/// # Errors
/// Opening the device (`ENOENT`: no such clock, `EACCES`), or the request (`EOPNOTSUPP`
/// from a driver without it).
pub fn phc_offset(index: u32, samples: usize) -> io::Result<PhcReading> {
    use std::os::fd::AsFd;
    let dev = std::fs::File::open(format!("/dev/ptp{index}"))?;
    let s = sys::ptp_sys_offset(dev.as_fd(), samples)?;
    let best = s
        .iter()
        .min_by_key(|[before, _, after]| after - before)
        .ok_or_else(|| io::Error::other("PTP_SYS_OFFSET_EXTENDED gave no sample"))?;
    let [before, phc, after] = *best;
    Ok(PhcReading {
        offset_ns: i64::try_from(phc - (before + (after - before) / 2)).unwrap_or(i64::MAX),
        window_ns: u64::try_from(after - before).unwrap_or(0),
    })
}
