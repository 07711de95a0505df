//! The counters of one queue ([`QueueStats`]): written by its threads without locks, read
//! by the live line, `/metrics`, the watchdog and the report. Allocated once by
//! `memory::allocate`, before any thread starts.

use rtdaq_core::QueueCounters;
use std::sync::atomic::{AtomicU32, AtomicU64};

/// Counters of one queue: the I/O thread writes `io`, the consumer thread writes `consumer`
/// (sequence gaps, reordering, corruption), so each has exactly one writer.
#[derive(Debug)]
pub struct QueueStats {
    /// Written by the queue's I/O thread (engine + handoff drops).
    pub io: QueueCounters,
    /// Written by the consumer (validator) side.
    pub consumer: QueueCounters,
    /// CPU time of the I/O thread in ns, stored once when it ends.
    pub io_cpu_ns: AtomicU64,
    /// CPU time of the consumer thread (indirect RX) in ns, stored once when it ends.
    pub consumer_cpu_ns: AtomicU64,
    /// GPU stage counters (RX queues with `gpu_stage`; written by the thread driving it).
    pub gpu: crate::observe::gpu_report::GpuCounters,
    /// The longest loop turn of the I/O thread ([`crate::stall`]).
    pub stall: crate::stall::StallWatch,
    /// The consumer thread's turns (indirect RX; the systemd watchdog watches it too).
    pub consumer_stall: crate::stall::StallWatch,
    /// RX (indirect, a queue that [holds a backlog](rtdaq_core::traits::RxQueue::holds_backlog)):
    /// ns the I/O thread waited for a free ring slot, its packets left in the queue's buffer.
    pub ring_wait_ns: AtomicU64,
    /// RX: the validator's streams, for the live line ([`crate::live_streams`]).
    pub streams: crate::live_streams::LiveStreams,
    /// RX: the validator's latency histogram in coarse buckets, for `/metrics`.
    pub latency: crate::latency::LiveLatency,
    /// RX: every counter of the validator, for `/metrics`.
    pub checks: crate::live_streams::LiveChecks,
    /// RX: where the packets' receive times came from, one bit per source seen
    /// (`TsSeen` in `queue::unwrap`).
    pub ts_sources: std::sync::atomic::AtomicU8,
    /// TX with a generator: how it keeps its times ([`Pacing`]; 0: no generator).
    pub pacing: std::sync::atomic::AtomicU8,
    /// With [`Pacing::NIC`]: the NIC's rate limit in Mb/s; with [`Pacing::NIC_REFUSED`]: the
    /// `errno` of the refusal.
    pub pacing_detail: AtomicU32,
}

/// How a TX queue's generator keeps its times, as [`QueueStats::pacing`] holds it.
pub struct Pacing;

impl Pacing {
    /// The NIC paces the queue (its rate limit in the detail).
    pub const NIC: u8 = 2;
    /// `pacing = "nic"`, but the device refused the rate limit (its `errno` in the detail):
    /// the software pacer alone.
    pub const NIC_REFUSED: u8 = 3;
    /// `pacing = "txtime"`, but the engine could not arm the queue for launch times (the
    /// device has none; the engine's log says why): the software pacer.
    pub const TXTIME_REFUSED: u8 = 4;

    /// The code of a generator with launch times on `clock`, or (`None`) the software
    /// pacer: `0x80 | clockid`, or 1.
    pub fn code(clock: Option<rtdaq_core::traits::LaunchClock>) -> u8 {
        clock.map_or(1, |c| 0x80 | c.linux_clockid() as u8)
    }

    /// The words of a code and its detail: `None` for 0 (no generator), `"software"`,
    /// `"nic 152 Mb/s"`, `"software (the NIC refused a rate limit: ...)"`, or `"txtime"`
    /// with its clock (`"txtime CLOCK_TAI"`).
    pub fn words(code: u8, detail: u32) -> Option<String> {
        match code {
            0 => None,
            1 => Some("software".to_owned()),
            Self::NIC => Some(format!("nic {detail} Mb/s")),
            Self::NIC_REFUSED => Some(format!(
                "software (the NIC refused a per-queue rate limit: {})",
                std::io::Error::from_raw_os_error(detail as i32)
            )),
            Self::TXTIME_REFUSED => Some(
                "software (the device cannot send at a launch time; the log says why)".to_owned(),
            ),
            c => Some(
                rtdaq_core::traits::LaunchClock::from_linux_clockid(i32::from(c & 0x7f))
                    .map_or_else(|| "txtime".to_owned(), |k| format!("txtime {}", k.as_str())),
            ),
        }
    }
}

impl QueueStats {
    /// All zero (for tests of what reads the counters).
    #[cfg(test)]
    pub(crate) fn new_for_tests() -> Self {
        Self::new()
    }

    pub(crate) fn new() -> Self {
        Self::with_streams(rtdaq_config::model::DEFAULT_MAX_STREAMS as usize)
    }

    /// All zero, with a live stream table of `max_streams` (the queue's validator's).
    pub(crate) fn with_streams(max_streams: usize) -> Self {
        QueueStats {
            io: QueueCounters::new(),
            consumer: QueueCounters::new(),
            io_cpu_ns: AtomicU64::new(0),
            consumer_cpu_ns: AtomicU64::new(0),
            gpu: crate::observe::gpu_report::GpuCounters::default(),
            stall: crate::stall::StallWatch::new(),
            consumer_stall: crate::stall::StallWatch::new(),
            ring_wait_ns: AtomicU64::new(0),
            streams: crate::live_streams::LiveStreams::with_capacity(max_streams),
            latency: crate::latency::LiveLatency::default(),
            checks: crate::live_streams::LiveChecks::default(),
            ts_sources: std::sync::atomic::AtomicU8::new(0),
            pacing: std::sync::atomic::AtomicU8::new(0),
            pacing_detail: AtomicU32::new(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Pacing;
    use rtdaq_core::traits::LaunchClock;

    /// The report's words for each way a generator keeps its times.
    #[test]
    fn pacing_codes_read_as_words() {
        assert_eq!(Pacing::words(0, 0), None);
        assert_eq!(Pacing::words(Pacing::code(None), 0).unwrap(), "software");
        assert_eq!(
            Pacing::words(Pacing::code(Some(LaunchClock::Tai)), 0).unwrap(),
            "txtime CLOCK_TAI"
        );
        assert_eq!(Pacing::words(Pacing::NIC, 235).unwrap(), "nic 235 Mb/s");
        assert_eq!(
            Pacing::words(Pacing::TXTIME_REFUSED, 0).unwrap(),
            "software (the device cannot send at a launch time; the log says why)"
        );
        let refused = Pacing::words(Pacing::NIC_REFUSED, 95).unwrap();
        assert!(
            refused.starts_with(
                "software (the NIC refused a per-queue rate limit: Operation not supported"
            ),
            "{refused}"
        );
    }
}
