//! The device's clock (issue #33): launch times on a DPDK TX queue (`generator.pacing =
//! "txtime"`) and hardware receive stamps. Launch times: the NIC
//! sends each frame at a time (`RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP`) held in the mbuf's
//! tx-timestamp dynamic field ([`TimestampField`]), on the device's own clock
//! (`rte_eth_read_clock`).
//!
//! The runtime gives launch times on `CLOCK_TAI` (the clock `ptp4l`/`phc2sys` keep the
//! NIC's PTP clock and the system on); [`DevClock`] moves them onto the device's clock, a
//! line through two reads of both clocks: the offset from the latest, the rate from the
//! first and the latest (the unit differs by PMD: ns on mlx5 in real-time mode, ticks of a
//! free-running counter elsewhere). It reads both again every second ([`REREAD_NS`]).
//!
//! Hardware receive stamps use the same line the other way ([`RxStamps`]): a PMD with
//! `RTE_ETH_RX_OFFLOAD_TIMESTAMP` writes each frame's arrival on the device's clock into
//! the mbuf's rx-timestamp field, which goes back onto `CLOCK_REALTIME`.
//!
//! A queue is armed at open when the config asks for launch times on it, the PMD offers the
//! offload, its clock can be read and the field can be registered; otherwise the queue
//! stays unarmed ([`TimedTx::launch_clock`] is `None`), the open logs why, and the runtime
//! falls back to the software pacer and says so in the report. No virtual PMD has the
//! offload, so the armed path runs only on such a NIC; the field, the clock line and the
//! refusal are tested here (docs/time.md).

use rtdaq_core::traits::LaunchClock;
use rtdaq_dpdk_sys::{PortInfo, RxQueue as PortRxQueue, TimestampField, TxQueue as PortTxQueue};

/// How often the clocks are read again.
pub(crate) const REREAD_NS: u64 = 1_000_000_000;
/// Time between the two reads of the first calibration.
const FIRST_GAP_NS: u64 = 10_000_000;

/// `CLOCK_TAI` now (ns).
fn tai_ns() -> u64 {
    rtdaq_netsys::clock::now_ns(LaunchClock::Tai.linux_clockid())
}

/// `CLOCK_REALTIME` now (ns): the clock of receive stamps.
fn realtime_ns() -> u64 {
    rtdaq_netsys::clock::now_ns(LaunchClock::Realtime.linux_clockid())
}

/// The device's clock as a line of `CLOCK_TAI`: `dev = dev0 + (tai - tai0) × rate`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct DevClock {
    /// The first read of both clocks (the rate's baseline).
    first: (u64, u64),
    /// The latest read (the offset).
    last: (u64, u64),
    /// Device units per ns of `CLOCK_TAI`.
    rate: f64,
}

impl DevClock {
    /// A line through two reads `(tai, dev)`, `a` before `b`.
    pub(crate) fn through(a: (u64, u64), b: (u64, u64)) -> Self {
        let dt = b.0.saturating_sub(a.0).max(1) as f64;
        let dd = b.1.wrapping_sub(a.1) as f64;
        DevClock {
            first: a,
            last: b,
            rate: dd / dt,
        }
    }

    /// A new read `(tai, dev)`: the offset from it, the rate over the whole baseline.
    pub(crate) fn update(&mut self, r: (u64, u64)) {
        *self = DevClock {
            first: self.first,
            ..DevClock::through(self.first, r)
        };
        self.last = r;
    }

    /// The device's clock at `tai` (ns of the system clock the line was read against).
    /// Never allocates.
    #[inline]
    pub(crate) fn at(&self, tai: u64) -> u64 {
        let d = tai.wrapping_sub(self.last.0) as i64 as f64 * self.rate;
        (self.last.1 as i64).wrapping_add(d.round() as i64) as u64
    }

    /// The system clock at device time `dev` (the inverse of [`at`](Self::at)). Never
    /// allocates.
    #[inline]
    pub(crate) fn sys_at(&self, dev: u64) -> u64 {
        let d = dev.wrapping_sub(self.last.1) as i64 as f64 / self.rate;
        (self.last.0 as i64).wrapping_add(d.round() as i64) as u64
    }

    /// When it was last read (ns of `CLOCK_TAI`).
    pub(crate) fn read_at(&self) -> u64 {
        self.last.0
    }

    /// Device units per ns.
    pub(crate) fn rate(&self) -> f64 {
        self.rate
    }
}

/// One read of both clocks: the system clock `sys` at the middle of the device read.
fn read_pair(
    sys: fn() -> u64,
    dev: impl Fn() -> rtdaq_dpdk_sys::Result<u64>,
) -> Result<(u64, u64), String> {
    let a = sys();
    let d = dev().map_err(|e| e.to_string())?;
    let b = sys();
    Ok((a + (b - a) / 2, d))
}

/// A line through two reads of `sys` and the device's clock, [`FIRST_GAP_NS`] apart.
fn calibrate(
    sys: fn() -> u64,
    dev: impl Fn() -> rtdaq_dpdk_sys::Result<u64>,
) -> Result<DevClock, String> {
    let a = read_pair(sys, &dev)?;
    std::thread::sleep(std::time::Duration::from_nanos(FIRST_GAP_NS));
    let b = read_pair(sys, &dev)?;
    Ok(DevClock::through(a, b))
}

/// An RX queue's hardware receive stamps (`RTE_ETH_RX_OFFLOAD_TIMESTAMP`): the mbuf field
/// and the device's clock against `CLOCK_REALTIME`.
#[derive(Debug)]
pub(crate) struct RxStamps {
    ts: TimestampField,
    clock: DevClock,
}

impl RxStamps {
    /// Arms `q` (of a port whose PMD is described by `info`) when the PMD stamps frames
    /// and its clock can be read; else why not, in words. Cold path.
    pub(crate) fn arm(q: &PortRxQueue, info: &PortInfo) -> Result<Self, String> {
        if !info.rx_timestamp() {
            return Err(format!(
                "the PMD {} does not stamp received frames (RTE_ETH_RX_OFFLOAD_TIMESTAMP)",
                info.driver
            ));
        }
        let clock = calibrate(realtime_ns, || q.read_clock())?;
        let ts = TimestampField::register_rx().map_err(|e| e.to_string())?;
        Ok(RxStamps { ts, clock })
    }

    /// Reads both clocks again when [`REREAD_NS`] has passed since the last read, at
    /// `now` (`CLOCK_REALTIME`). Never allocates; a failed read keeps the old line.
    #[inline]
    pub(crate) fn refresh(&mut self, q: &PortRxQueue, now: u64) {
        if now.saturating_sub(self.clock.read_at()) >= REREAD_NS {
            if let Ok(r) = read_pair(realtime_ns, || q.read_clock()) {
                self.clock.update(r);
            }
        }
    }

    /// The receive time of `m` on `CLOCK_REALTIME` (ns), when the NIC stamped it. Never
    /// allocates.
    #[inline]
    pub(crate) fn stamp(&self, m: &rtdaq_dpdk_sys::Mbuf) -> Option<u64> {
        self.ts.get(m).map(|d| self.clock.sys_at(d))
    }
}

/// A queue armed for launch times: the mbuf field and the device's clock.
#[derive(Debug)]
pub(crate) struct TxLaunch {
    pub(crate) ts: TimestampField,
    pub(crate) clock: DevClock,
}

impl TxLaunch {
    /// Reads both clocks again when [`REREAD_NS`] has passed since the last read, at
    /// `now_tai`. Never allocates; a failed read keeps the old line.
    #[inline]
    pub(crate) fn refresh(&mut self, q: &PortTxQueue, now_tai: u64) {
        if now_tai.saturating_sub(self.clock.read_at()) >= REREAD_NS {
            if let Ok(r) = read_pair(tai_ns, || q.read_clock()) {
                self.clock.update(r);
            }
        }
    }

    /// `CLOCK_TAI` now.
    #[inline]
    pub(crate) fn now_tai() -> u64 {
        tai_ns()
    }
}

/// Arms `q` (of a port whose PMD is described by `info`) for launch times, or says why
/// not, in words. Cold path: reads the clocks twice, [`FIRST_GAP_NS`] apart.
pub(crate) fn arm(q: &PortTxQueue, info: &PortInfo) -> Result<TxLaunch, String> {
    if !info.send_on_timestamp() {
        return Err(format!(
            "the PMD {} does not offer launch times (RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP; tx_offload_capa {:#x}): mlx5 on ConnectX-6 Dx or later has them",
            info.driver, info.tx_offload_capa
        ));
    }
    let clock = calibrate(tai_ns, || q.read_clock())?;
    let ts = TimestampField::register().map_err(|e| e.to_string())?;
    Ok(TxLaunch { ts, clock })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device clock in ns 37 s ahead (TAI offset in a PHC kept on TAI... and a free
    /// counter at 1.5625 ticks per ns): launch times land on the device's line.
    #[test]
    fn launch_times_move_onto_the_device_clock() {
        let ns = DevClock::through((1_000, 5_000), (11_000, 15_000));
        assert_eq!(ns.rate(), 1.0);
        assert_eq!(ns.at(20_000), 24_000);
        assert_eq!(ns.at(10_000), 14_000, "before the last read too");
        let mut ticks = DevClock::through((0, 0), (1_000_000, 1_562_500));
        assert_eq!(ticks.at(2_000_000), 3_125_000);
        // A later read moves the offset and refines the rate over the whole baseline.
        ticks.update((10_000_000, 15_625_100));
        assert!((ticks.rate() - 1.56251).abs() < 1e-9, "{}", ticks.rate());
        assert_eq!(ticks.at(10_000_000), 15_625_100);
        assert_eq!(ticks.read_at(), 10_000_000);
        // A receive stamp goes back onto the system clock.
        assert_eq!(ns.sys_at(24_000), 20_000);
        assert_eq!(ticks.sys_at(ticks.at(12_345_678)), 12_345_678);
        assert_eq!(ticks.sys_at(15_625_100), 10_000_000);
    }

    /// The offload is read from the PMD's TX capabilities (bit 21).
    #[test]
    fn the_offload_is_read_from_the_capabilities() {
        let info = PortInfo {
            driver: "net_ring".into(),
            max_rx_queues: 1,
            max_tx_queues: 1,
            rss_offloads: 0,
            reta_size: 0,
            hash_key_size: 0,
            rx_offload_capa: 0,
            rx_queue_offload_capa: 0,
            max_rx_segments: 0,
            tx_offload_capa: 0,
        };
        assert!(!info.send_on_timestamp());
        let with = PortInfo {
            tx_offload_capa: PortInfo::TX_OFFLOAD_SEND_ON_TIMESTAMP,
            ..info.clone()
        };
        assert!(with.send_on_timestamp());
    }
}
