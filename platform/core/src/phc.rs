//! A network device's time stamping and its PTP hardware clock (issue #33): what
//! `ethtool -T` shows (`ETHTOOL_GET_TS_INFO`) and how far the clock is from the system clock
//! (`PTP_SYS_OFFSET_EXTENDED` on `/dev/ptpN`, as `phc_ctl` reads it). `rtdaq doctor` reports
//! both for every interface of a config with `[time]`.

use std::fmt;

use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType};
use std::os::fd::AsFd;

use crate::error::{PlatformError, Result};

/// `SOF_TIMESTAMPING_*` capability bits (`linux/net_tstamp.h`).
const TX_HARDWARE: u32 = 1 << 0;
const TX_SOFTWARE: u32 = 1 << 1;
const RX_HARDWARE: u32 = 1 << 2;
const RX_SOFTWARE: u32 = 1 << 3;
const RAW_HARDWARE: u32 = 1 << 6;

/// `HWTSTAMP_FILTER_*` names by bit (`linux/net_tstamp.h`).
const FILTERS: [&str; 16] = [
    "none",
    "all",
    "some",
    "ptpv1-l4-event",
    "ptpv1-l4-sync",
    "ptpv1-l4-delay-req",
    "ptpv2-l4-event",
    "ptpv2-l4-sync",
    "ptpv2-l4-delay-req",
    "ptpv2-l2-event",
    "ptpv2-l2-sync",
    "ptpv2-l2-delay-req",
    "ptpv2-event",
    "ptpv2-sync",
    "ptpv2-delay-req",
    "ntp-all",
];

/// What a device can stamp and its clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timestamping {
    /// The device.
    pub device: String,
    /// The kernel stamps received packets in software (`SO_TIMESTAMPING` software receive).
    pub software_rx: bool,
    /// The kernel stamps sent packets in software.
    pub software_tx: bool,
    /// The NIC stamps received packets (raw hardware times reach user space).
    pub hardware_rx: bool,
    /// The NIC stamps sent packets.
    pub hardware_tx: bool,
    /// `/dev/ptpN` of its PTP hardware clock, when it has one.
    pub phc: Option<u32>,
    /// The receive filters the NIC can stamp (`ethtool -T`'s "Hardware Receive Filter Modes").
    pub rx_filters: Vec<&'static str>,
}

impl fmt::Display for Timestamping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut caps = Vec::new();
        for (on, name) in [
            (self.hardware_rx, "hardware receive"),
            (self.hardware_tx, "hardware transmit"),
            (self.software_rx, "software receive"),
            (self.software_tx, "software transmit"),
        ] {
            if on {
                caps.push(name);
            }
        }
        let caps = if caps.is_empty() {
            "no time stamping".to_owned()
        } else {
            caps.join(", ")
        };
        write!(f, "{}: {caps}", self.device)?;
        if !self.rx_filters.is_empty() {
            write!(f, " (receive filters: {})", self.rx_filters.join(" "))?;
        }
        match self.phc {
            Some(i) => write!(f, "; PTP hardware clock /dev/ptp{i}"),
            None => write!(f, "; no PTP hardware clock"),
        }
    }
}

/// What device `dev` can stamp (`ETHTOOL_GET_TS_INFO`, as `ethtool -T dev`).
///
/// # Errors
/// [`PlatformError::Ethtool`] (`ENODEV` for a device that does not exist here).
pub fn timestamping(dev: &str) -> Result<Timestamping> {
    let err = |source| PlatformError::Ethtool {
        netdev: dev.to_owned(),
        what: "time-stamping capabilities",
        source,
    };
    // Any AF_INET socket carries SIOCETHTOOL (rtdaq-netsys holds the ioctl, as the
    // AF_PACKET engine uses it).
    let sock = socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| err(e.into()))?;
    let t = rtdaq_netsys::netdev::ts_info(sock.as_fd(), dev).map_err(err)?;
    let has = |bit: u32| t.so_timestamping & bit != 0;
    Ok(Timestamping {
        device: dev.to_owned(),
        software_rx: has(RX_SOFTWARE),
        software_tx: has(TX_SOFTWARE),
        hardware_rx: has(RX_HARDWARE) && has(RAW_HARDWARE),
        hardware_tx: has(TX_HARDWARE) && has(RAW_HARDWARE),
        phc: u32::try_from(t.phc_index).ok(),
        rx_filters: FILTERS
            .iter()
            .enumerate()
            .filter(|(k, _)| t.rx_filters & (1 << k) != 0)
            .map(|(_, n)| *n)
            .collect(),
    })
}

/// A PTP hardware clock against the system clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhcOffset {
    /// PHC minus `CLOCK_REALTIME`, ns. ptp4l keeps a PHC in TAI, so a synchronised one reads
    /// the TAI−UTC offset (37 s since 2017) plus the error.
    pub offset_ns: i64,
    /// Uncertainty of the reading: the system-clock window around the PHC read, ns.
    pub window_ns: u64,
}

impl PhcOffset {
    /// The offset less whole leap seconds closest to it (for a PHC on TAI: its error
    /// against UTC), and those seconds.
    pub fn less_whole_seconds(&self) -> (i64, i64) {
        let secs = (self.offset_ns as f64 / 1e9).round() as i64;
        (self.offset_ns - secs * 1_000_000_000, secs)
    }
}

/// Reads `/dev/ptp<index>` against `CLOCK_REALTIME` (the best of 9 samples).
///
/// # Errors
/// [`PlatformError::Phc`]: no such clock, no access, or the driver refused the request.
pub fn offset(index: u32) -> Result<PhcOffset> {
    let r = rtdaq_netsys::netdev::phc_offset(index, 9)
        .map_err(|source| PlatformError::Phc { index, source })?;
    Ok(PhcOffset {
        offset_ns: r.offset_ns,
        window_ns: r.window_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_software_stamps_only() {
        let t = timestamping("lo").expect("ethtool -T lo");
        assert!(t.software_rx && !t.hardware_rx && t.phc.is_none(), "{t:?}");
        assert!(
            t.to_string().starts_with("lo: software receive")
                && t.to_string().ends_with("; no PTP hardware clock"),
            "{t}"
        );
        let e = timestamping("rtdaq-nodev0").unwrap_err().to_string();
        assert!(
            e.contains("rtdaq-nodev0: reading its time-stamping capabilities"),
            "{e}"
        );
        let e = offset(999).unwrap_err().to_string();
        assert!(e.contains("/dev/ptp999"), "{e}");
    }

    #[test]
    fn a_tai_clock_reads_its_error_against_utc() {
        let o = PhcOffset {
            offset_ns: 37_000_000_250,
            window_ns: 300,
        };
        assert_eq!(o.less_whole_seconds(), (250, 37));
        let o = PhcOffset {
            offset_ns: -1_200,
            window_ns: 300,
        };
        assert_eq!(o.less_whole_seconds(), (-1_200, 0));
    }
}
