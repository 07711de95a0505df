//! [`AfpacketOptions`]: engine tuning that the deployment config has no key for.

use std::path::PathBuf;
use std::time::Duration;

/// Tuning of the AF_PACKET engine beyond the deployment config. [`Default`] is what
/// [`Engine::open`](rtdaq_core::traits::Engine::open) uses; tests and tools pass their own to
/// [`AfpacketEngine::open_with`](crate::AfpacketEngine::open_with).
///
/// `#[non_exhaustive]`: build it with `AfpacketOptions::default()` and set fields.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AfpacketOptions {
    /// TX: `PACKET_QDISC_BYPASS`, handing frames straight to the driver (no qdisc, no
    /// traffic shaping, no `tc` counters). Default false.
    pub qdisc_bypass: bool,
    /// RX: use hardware receive timestamps when the device offers them (switching its RX
    /// timestamp filter on with `SIOCSHWTSTAMP` if it is off). Default true; false always
    /// uses software timestamps.
    pub hw_timestamps: bool,
    /// TX: when a queue is dropped, how long it waits for the kernel to send the frames
    /// still queued in its ring (default 200 ms).
    pub tx_drain: Duration,
    /// RX, busy-polling queues: read the kernel's drop counter (`PACKET_STATISTICS`, a
    /// system call) once every this many empty polls (default 1024). Sleeping queues read
    /// it after every wait that found nothing, and every queue reads it when a block says
    /// the kernel is losing frames (`TP_STATUS_LOSING`).
    pub busy_stats_every: u32,
    /// Where sysfs is mounted (default `/sys`): PCI addresses resolve through
    /// `<sysfs_root>/bus/pci/devices/<address>/net/`.
    pub sysfs_root: PathBuf,
}

impl Default for AfpacketOptions {
    fn default() -> Self {
        AfpacketOptions {
            qdisc_bypass: false,
            hw_timestamps: true,
            tx_drain: Duration::from_millis(200),
            busy_stats_every: 1024,
            sysfs_root: PathBuf::from("/sys"),
        }
    }
}
