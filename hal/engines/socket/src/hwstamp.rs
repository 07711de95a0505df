//! `engine.socket.rx_timestamps = "hardware"` (issue #33): each datagram's receive time is
//! the NIC's own stamp.
//!
//! At open, for the device that receives (the one holding the interface's address, or a
//! group's `multicast_interface`; loopback is `lo`):
//! 1. `ETHTOOL_GET_TS_INFO` (`ethtool -T`): the device must stamp received packets in
//!    hardware, else the start fails naming the key, the device and the command;
//! 2. `SIOCGHWTSTAMP`, and `SIOCSHWTSTAMP` with `HWTSTAMP_FILTER_ALL` when its receive
//!    filter is off (needs `CAP_NET_ADMIN`; the device keeps the setting, as `hwstamp_ctl`
//!    leaves it);
//! 3. the stamps' timescale: a hardware stamp is the PTP hardware clock's time, which ptp4l
//!    keeps on TAI (37 s ahead of UTC); the whole seconds between the PHC and
//!    `CLOCK_REALTIME` at open are subtracted from every hardware stamp, so latencies
//!    against a sender's `CLOCK_REALTIME` stay meaningful;
//! 4. `SO_TIMESTAMPING` with raw hardware and software receive stamps: a datagram the NIC
//!    left unstamped (a filter that misses it) gets the kernel's software time, and each
//!    datagram's `ts_source` says which it has.

use std::net::Ipv4Addr;
use std::os::fd::AsFd;

use rtdaq_netsys::{netdev, KeyError, OsError};

use crate::error::{Result, SocketError};
use crate::sys::Socket;

const KEY: &str = "engine.socket.rx_timestamps";
/// `SOF_TIMESTAMPING_*` (`linux/net_tstamp.h`).
const RX_HARDWARE: u32 = 1 << 2;
const RX_SOFTWARE: u32 = 1 << 3;
const SOFTWARE: u32 = 1 << 4;
const RAW_HARDWARE: u32 = 1 << 6;
/// `HWTSTAMP_FILTER_NONE`, `HWTSTAMP_FILTER_ALL`.
const FILTER_NONE: i32 = 0;
const FILTER_ALL: i32 = 1;

/// Hardware receive stamps switched on for a queue's socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HwStamps {
    /// The device that stamps.
    pub device: String,
    /// Whole seconds (as ns) the device's clock is ahead of `CLOCK_REALTIME` (TAI − UTC on
    /// a PHC that ptp4l keeps on TAI); subtracted from each hardware stamp.
    pub shift_ns: i64,
}

/// The network device that holds `ip` here (`lo` for a loopback address).
pub(crate) fn device_of(ip: Ipv4Addr) -> Option<String> {
    if ip.is_loopback() {
        return Some("lo".into());
    }
    nix::ifaddrs::getifaddrs().ok()?.find_map(|a| {
        let held = a.address?.as_sockaddr_in()?.ip();
        (held == ip).then_some(a.interface_name)
    })
}

/// Switches hardware receive stamps on for `sock`, which receives at `ip` (the address, or
/// for a group the local address of its `multicast_interface`). Cold path.
pub(crate) fn enable(sock: &Socket, ip: Ipv4Addr) -> Result<HwStamps> {
    let config = |detail: String| SocketError::Config(KeyError::new(KEY, detail));
    let os =
        |detail: String, e: std::io::Error| SocketError::SetOption(OsError::new(KEY, detail, e));
    let dev = device_of(ip).ok_or_else(|| {
        config(format!(
            "\"hardware\" needs the device that receives, and no network device here holds {ip}: bind to the NIC's own address (a multicast group: set multicast_interface to it), or use \"kernel\""
        ))
    })?;
    let info = netdev::ts_info(sock.as_fd(), &dev)
        .map_err(|e| os(format!("{dev}: ETHTOOL_GET_TS_INFO failed ({e})"), e))?;
    let need = RX_HARDWARE | RAW_HARDWARE;
    if info.so_timestamping & need != need {
        return Err(config(format!(
            "\"hardware\": {dev} does not stamp received packets in hardware (`ethtool -T {dev}` lists no hardware-receive); use \"kernel\" (the kernel's software stamps)"
        )));
    }
    let now = netdev::hwtstamp(sock.as_fd(), &dev, None)
        .map_err(|e| os(format!("{dev}: SIOCGHWTSTAMP failed ({e})"), e))?;
    if now.rx_filter == FILTER_NONE {
        let set = libc::hwtstamp_config {
            flags: 0,
            tx_type: now.tx_type,
            rx_filter: FILTER_ALL,
        };
        let got = netdev::hwtstamp(sock.as_fd(), &dev, Some(set)).map_err(|e| {
            os(
                format!("{dev}: switching on hardware receive stamps (SIOCSHWTSTAMP, filter all) failed ({e}); it needs CAP_NET_ADMIN (run as root, or `hwstamp_ctl -i {dev} -r 1` beforehand)"),
                e,
            )
        })?;
        if got.rx_filter == FILTER_NONE {
            return Err(config(format!(
                "\"hardware\": {dev} refused to stamp received packets (SIOCSHWTSTAMP left its filter off)"
            )));
        }
    }
    let shift_ns = match u32::try_from(info.phc_index) {
        Ok(index) => {
            let r = netdev::phc_offset(index, 9).map_err(|e| {
                os(
                    format!("{dev}: reading its PTP hardware clock /dev/ptp{index} failed ({e}): run as root"),
                    e,
                )
            })?;
            (r.offset_ns as f64 / 1e9).round() as i64 * 1_000_000_000
        }
        Err(_) => 0,
    };
    let flags = (RX_HARDWARE | RAW_HARDWARE | RX_SOFTWARE | SOFTWARE) as i32;
    sock.set_int(libc::SOL_SOCKET, libc::SO_TIMESTAMPING, flags)
        .map_err(|e| os(format!("setsockopt(SO_TIMESTAMPING) failed ({e})"), e))?;
    Ok(HwStamps {
        device: dev,
        shift_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_refused_naming_the_key_and_the_command() {
        let sock = Socket::udp().unwrap();
        let e = enable(&sock, Ipv4Addr::LOCALHOST).unwrap_err().to_string();
        assert!(
            e.starts_with("engine.socket.rx_timestamps: \"hardware\": lo does not stamp received packets in hardware")
                && e.contains("ethtool -T lo"),
            "{e}"
        );
        // An address no device holds.
        let e = enable(&sock, Ipv4Addr::new(192, 0, 2, 77))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no network device here holds 192.0.2.77"), "{e}");
    }
}
