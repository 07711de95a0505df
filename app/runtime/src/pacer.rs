//! Send-rate pacing for a burst-oriented sender, and the two clocks the runtime uses.
//!
//! ## What is paced
//! [`PaceRate::BitsPerSec`] counts **application payload bytes (the UDP payload,
//! including the 32-byte rtdaq sequence header)**, not Ethernet/IP/UDP headers, preamble
//! or inter-frame gap: `rate_gbps = 1.0` with 1400-byte payloads is 89 286 packets/s.
//! [`PaceRate::PacketsPerSec`] counts packets; [`PaceRate::Unpaced`] allows everything.
//!
//! ## How
//! [`Pacer`] keeps the earliest departure time of the next packet (GCRA / virtual
//! clock) as exact integer nanoseconds plus a fraction, so there is no drift: after
//! `N` packets the schedule is exactly `N · cost`. The sender asks
//! [`allowance`](Pacer::allowance) how many packets may go now, sends up to that many,
//! reports them with [`sent`](Pacer::sent), and when the allowance is 0 waits until
//! [`next_send_at`](Pacer::next_send_at) (short sleep or spin — the sender's choice).
//!
//! ## Bounded catch-up
//! A sender that stalled (preempted, queue full) does not get the missed time back as
//! one huge burst: credit is capped at [`max_credit_ns`](Pacer::max_credit_ns) of
//! schedule (default [`DEFAULT_MAX_CREDIT_NS`] = 1 ms), so after any stall at most
//! `1 + 1 ms worth` of packets (and never more than the caller's `max_pkts`, i.e. one
//! batch) are allowed at once. The time beyond the cap is forgotten: the long-run
//! average then falls below the target by the stalled time, by design (a burst at line
//! rate would overflow the receiver instead).
//!
//! The pacer takes the time as an argument (`u64` ns of any monotonic clock), so it is
//! deterministic under test; the runtime passes [`now_ns`]. It never allocates, blocks
//! or logs.
//!
//! ## Clocks
//! - [`now_ns`]: `CLOCK_MONOTONIC` (`std::time::Instant`) in ns since a process epoch
//!   (the first call). For pacing, deadlines and elapsed times.
//! - [`wall_clock_ns`]: `CLOCK_REALTIME` (`SystemTime`) in ns since the Unix epoch. For the
//!   tx timestamp in sequence headers. One-way latency is `rx − tx` on this clock: the RX
//!   side uses the kernel's `SO_TIMESTAMPNS` stamp, which is `CLOCK_REALTIME`, when the
//!   engine provides it, else its own [`wall_clock_ns`] read. On one host both ends read
//!   the same clock; across hosts the clocks must be synchronised (PTP) for the numbers to
//!   mean anything.

use rtdaq_config::model::GeneratorRate;
use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Default cap on accumulated credit: 1 ms of schedule.
pub const DEFAULT_MAX_CREDIT_NS: u64 = 1_000_000;

const NS_PER_S: u64 = 1_000_000_000;

/// A target send rate; see the [module docs](self) for which bytes count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaceRate {
    /// Bits per second of application payload (UDP payload) bytes. 0 = send nothing.
    BitsPerSec(u64),
    /// Packets per second. 0 = send nothing.
    PacketsPerSec(u64),
    /// No pacing: every packet the caller offers may go.
    Unpaced,
}

impl PaceRate {
    /// `gbps` Gb/s of payload, rounded to whole bits/s (non-finite or ≤ 0 → 0).
    pub fn from_gbps(gbps: f64) -> Self {
        let bps = gbps * 1e9;
        PaceRate::BitsPerSec(if bps.is_finite() && bps > 0.0 {
            bps.round() as u64
        } else {
            0
        })
    }
}

/// Bytes a frame takes on the wire besides its Ethernet frame: the FCS (4), the preamble and
/// start delimiter (8) and the inter-frame gap (12).
pub const WIRE_OVERHEAD: u64 = 24;

impl PaceRate {
    /// The rate as Mb/s of whole frames on the wire, for a NIC's rate limit: each packet of
    /// `payload` bytes is a frame of `payload + headers` bytes plus [`WIRE_OVERHEAD`],
    /// rounded up to a whole Mb/s (at least 1). `None` when unpaced or zero.
    pub fn wire_mbps(self, payload: usize, headers: usize) -> Option<u32> {
        let frame_bits = (payload as u64 + headers as u64 + WIRE_OVERHEAD) * 8;
        let bps = match self {
            PaceRate::BitsPerSec(0) | PaceRate::PacketsPerSec(0) | PaceRate::Unpaced => {
                return None
            }
            // Packets per second from the payload rate, times the frame's bits.
            PaceRate::BitsPerSec(b) => {
                u128::from(b) * u128::from(frame_bits) / (u128::from(payload.max(1) as u64) * 8)
            }
            PaceRate::PacketsPerSec(p) => u128::from(p) * u128::from(frame_bits),
        };
        Some(
            u32::try_from(bps.div_ceil(1_000_000))
                .unwrap_or(u32::MAX)
                .max(1),
        )
    }
}

impl From<GeneratorRate> for PaceRate {
    fn from(r: GeneratorRate) -> Self {
        match r {
            GeneratorRate::Gbps(g) => PaceRate::from_gbps(g),
            GeneratorRate::Pps(p) => PaceRate::PacketsPerSec(p),
            GeneratorRate::Unpaced => PaceRate::Unpaced,
        }
    }
}

/// Paces one sender; see the [module docs](self). Owned by the sending thread.
#[derive(Debug, Clone)]
pub struct Pacer {
    rate: PaceRate,
    /// Next departure time is `next_ns + frac / den` ns.
    next_ns: u64,
    frac: u64,
    /// Rate denominator: bits/s or packets/s (0 = never send).
    den: u64,
    /// `ns · den` per unit: 8e9 per payload byte, 1e9 per packet.
    per_unit: u64,
    max_credit_ns: u64,
}

impl Pacer {
    /// A pacer whose first packet may go at `now_ns` (no initial burst).
    pub fn new(rate: PaceRate, now_ns: u64) -> Self {
        let (den, per_unit) = match rate {
            PaceRate::BitsPerSec(b) => (b, 8 * NS_PER_S),
            PaceRate::PacketsPerSec(p) => (p, NS_PER_S),
            PaceRate::Unpaced => (0, 0),
        };
        Self {
            rate,
            next_ns: now_ns,
            frac: 0,
            den,
            per_unit,
            max_credit_ns: DEFAULT_MAX_CREDIT_NS,
        }
    }

    /// A pacer for the `[generator]` rate (`rate_gbps` / `rate_pps` / `unpaced`).
    pub fn from_config(rate: &GeneratorRate, now_ns: u64) -> Self {
        Self::new(PaceRate::from(*rate), now_ns)
    }

    /// Sets the credit cap (ns of schedule a stalled sender may catch up at once).
    pub fn with_max_credit_ns(mut self, ns: u64) -> Self {
        self.max_credit_ns = ns;
        self
    }

    /// The rate this pacer enforces.
    pub const fn rate(&self) -> PaceRate {
        self.rate
    }

    /// The credit cap in ns.
    pub const fn max_credit_ns(&self) -> u64 {
        self.max_credit_ns
    }

    /// How many packets of `pkt_bytes` payload bytes each may be sent at `now_ns`, at
    /// most `max_pkts` (the batch size). Unpaced: `max_pkts`. 0 means wait until
    /// [`next_send_at`](Self::next_send_at). Applies the credit cap (forgets schedule
    /// older than `max_credit_ns`). The caller need not send them all; it reports what it
    /// sent with [`sent`](Self::sent).
    #[inline]
    pub fn allowance(&mut self, now_ns: u64, max_pkts: usize, pkt_bytes: usize) -> usize {
        if matches!(self.rate, PaceRate::Unpaced) || max_pkts == 0 {
            return max_pkts;
        }
        if self.den == 0 || now_ns < self.next_ns {
            return 0;
        }
        let mut elapsed = now_ns - self.next_ns;
        if elapsed > self.max_credit_ns {
            self.next_ns = now_ns - self.max_credit_ns;
            self.frac = 0;
            elapsed = self.max_credit_ns;
        }
        // Credit in units of 1/den ns.
        let Some(credit) =
            (u128::from(elapsed) * u128::from(self.den)).checked_sub(self.frac.into())
        else {
            return 0;
        };
        let units = match self.rate {
            PaceRate::BitsPerSec(_) => pkt_bytes as u128,
            _ => 1,
        };
        let cost = units * u128::from(self.per_unit);
        if cost == 0 {
            return max_pkts;
        }
        let n = 1 + credit / cost;
        n.min(max_pkts as u128) as usize
    }

    /// Reports `pkts` packets totalling `bytes` payload bytes as sent: moves the schedule
    /// forward by their cost (bytes for bit rates, packets for packet rates).
    #[inline]
    pub fn sent(&mut self, pkts: usize, bytes: usize) {
        let units = match self.rate {
            PaceRate::BitsPerSec(_) => bytes as u128,
            PaceRate::PacketsPerSec(_) => pkts as u128,
            PaceRate::Unpaced => return,
        };
        if self.den == 0 {
            return;
        }
        let den = u128::from(self.den);
        let total = u128::from(self.frac) + units * u128::from(self.per_unit);
        let whole = u64::try_from(total / den).unwrap_or(u64::MAX);
        // `total % den < den ≤ u64::MAX`.
        self.frac = (total % den) as u64;
        self.next_ns = self.next_ns.saturating_add(whole);
    }

    /// The earliest time (ns, same clock as `now_ns`) at which
    /// [`allowance`](Self::allowance) is at least 1. Unpaced: 0 (always); a zero rate:
    /// `u64::MAX` (never).
    #[inline]
    pub fn next_send_at(&self) -> u64 {
        match self.rate {
            PaceRate::Unpaced => 0,
            _ if self.den == 0 => u64::MAX,
            _ => self.next_ns.saturating_add(u64::from(self.frac > 0)),
        }
    }
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// `CLOCK_MONOTONIC` in ns since the process epoch (set by the first call; call it once
/// during init so the epoch is fixed before the I/O threads start). No allocation.
#[inline]
pub fn now_ns() -> u64 {
    u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// `CLOCK_REALTIME` in ns since the Unix epoch (0 if the clock is before 1970): the tx
/// timestamp written into sequence headers and the RX fallback when the engine gives no
/// kernel timestamp. No allocation.
#[inline]
pub fn wall_clock_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// `unix_ns` as RFC 3339 UTC with nanoseconds: `1970-01-01T00:00:00.000000000Z`.
pub fn rfc3339_utc(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let (days, sod) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm, unsigned form).
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:09}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60,
        unix_ns % 1_000_000_000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #33, `pacing = "nic"`: the NIC's limit counts whole frames on the wire
    /// (payload + 42 header bytes + 24 of FCS, preamble and gap), rounded up.
    #[test]
    fn wire_rates_count_whole_frames() {
        // 20 000 × 1400-byte payloads/s: frames of 1466 B on the wire → 234.56 Mb/s.
        assert_eq!(
            PaceRate::PacketsPerSec(20_000).wire_mbps(1400, 42),
            Some(235)
        );
        // 1 Gb/s of 8000-byte payloads = 15 625 packets/s × 8066 B → 1008.25 Mb/s.
        assert_eq!(PaceRate::from_gbps(1.0).wire_mbps(8000, 42), Some(1009));
        assert_eq!(PaceRate::PacketsPerSec(1).wire_mbps(64, 42), Some(1));
        assert_eq!(PaceRate::Unpaced.wire_mbps(64, 42), None);
        assert_eq!(PaceRate::BitsPerSec(0).wire_mbps(64, 42), None);
    }

    /// Simulates a sender polling every `step(i)` ns for `dur_ns`; returns (pkts, bytes).
    fn simulate(
        rate: PaceRate,
        pkt: usize,
        batch: usize,
        dur_ns: u64,
        mut step: impl FnMut(u64) -> u64,
    ) -> (u64, u64) {
        let mut now = 1_000;
        let end = now + dur_ns;
        let mut p = Pacer::new(rate, now);
        let (mut pkts, mut bytes) = (0u64, 0u64);
        let mut i = 0;
        while now < end {
            let n = p.allowance(now, batch, pkt);
            if n > 0 {
                p.sent(n, n * pkt);
                pkts += n as u64;
                bytes += (n * pkt) as u64;
                now += step(i);
            } else {
                // Sleep until allowed, with some wake-up jitter.
                now = p.next_send_at().max(now + 1) + step(i) % 700;
            }
            i += 1;
        }
        (pkts, bytes)
    }

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn bit_rate_within_half_percent() {
        for (gbps, pkt, batch) in [
            (1.0, 1400, 64),
            (10.0, 1400, 32),
            (100.0, 8972, 64),
            (0.01, 64, 8),
        ] {
            let mut seed = 7;
            let (_, bytes) = simulate(PaceRate::from_gbps(gbps), pkt, batch, NS_PER_S, |_| {
                lcg(&mut seed) % 20_000
            });
            let got = bytes as f64 * 8.0;
            let want = gbps * 1e9;
            assert!(
                (got - want).abs() / want <= 0.005,
                "{gbps} Gb/s {pkt} B: got {got} b/s"
            );
        }
    }

    #[test]
    fn packet_rate_within_half_percent() {
        for pps in [1_000u64, 100_000, 3_000_000] {
            let mut seed = 99;
            let (pkts, _) = simulate(PaceRate::PacketsPerSec(pps), 1400, 64, NS_PER_S, |_| {
                lcg(&mut seed) % 10_000
            });
            let err = pkts.abs_diff(pps) as f64 / pps as f64;
            assert!(err <= 0.005, "{pps} pps: got {pkts}");
        }
    }

    #[test]
    fn exact_schedule_no_drift() {
        // 3 pps: 333_333_333.33 ns per packet; 3000 packets take exactly 1000 s.
        let mut p = Pacer::new(PaceRate::PacketsPerSec(3), 0).with_max_credit_ns(u64::MAX);
        for _ in 0..3000 {
            let at = p.next_send_at();
            assert_eq!(p.allowance(at, 1, 0), 1);
            p.sent(1, 0);
        }
        assert_eq!(p.next_send_at(), 1000 * NS_PER_S);
        assert_eq!(p.allowance(1000 * NS_PER_S - 1, 10, 0), 0);
        assert_eq!(p.allowance(1000 * NS_PER_S, 10, 0), 1);
    }

    #[test]
    fn catch_up_is_capped() {
        // 1 Gb/s, 1400 B: 11_200 ns per packet; 1 ms of credit = 89 packets + 1.
        let mut p = Pacer::new(PaceRate::from_gbps(1.0), 0);
        assert_eq!(p.allowance(0, 64, 1400), 1, "no initial burst");
        assert_eq!(p.allowance(11_199, 64, 1400), 2 - 1);
        assert_eq!(p.allowance(11_200, 64, 1400), 2);
        let stall = NS_PER_S;
        assert_eq!(p.allowance(stall, 10_000, 1400), 90);
        assert_eq!(
            p.allowance(stall, 64, 1400),
            64,
            "never more than the batch"
        );
        p.sent(90, 90 * 1400);
        assert_eq!(p.allowance(stall, 64, 1400), 0);
        assert!(p.next_send_at() > stall);
        assert_eq!(p.next_send_at(), stall - 1_000_000 + 90 * 11_200);
        let mut q = Pacer::new(PaceRate::PacketsPerSec(1000), 0).with_max_credit_ns(0);
        assert_eq!(q.allowance(50 * NS_PER_S, 64, 0), 1, "cap 0: one at a time");
        assert_eq!(q.max_credit_ns(), 0);
    }

    #[test]
    fn unpaced_and_zero_rates() {
        let mut u = Pacer::new(PaceRate::Unpaced, 5);
        assert_eq!(u.allowance(0, 64, 1400), 64);
        u.sent(64, 64 * 1400);
        assert_eq!(u.allowance(0, 64, 1400), 64);
        assert_eq!(u.next_send_at(), 0);
        for r in [
            PaceRate::BitsPerSec(0),
            PaceRate::from_gbps(f64::NAN),
            PaceRate::from_gbps(-1.0),
        ] {
            let mut z = Pacer::new(r, 0);
            assert_eq!(z.allowance(NS_PER_S, 64, 1400), 0);
            z.sent(1, 1400);
            assert_eq!(z.next_send_at(), u64::MAX);
        }
        assert_eq!(
            PaceRate::from(GeneratorRate::Gbps(2.5)),
            PaceRate::BitsPerSec(2_500_000_000)
        );
        assert_eq!(
            PaceRate::from(GeneratorRate::Pps(7)),
            PaceRate::PacketsPerSec(7)
        );
        assert_eq!(PaceRate::from(GeneratorRate::Unpaced), PaceRate::Unpaced);
        let c = Pacer::from_config(&GeneratorRate::Pps(10), 3);
        assert_eq!(
            (c.rate(), c.next_send_at()),
            (PaceRate::PacketsPerSec(10), 3)
        );
        let mut b = Pacer::new(PaceRate::BitsPerSec(1000), 0);
        assert_eq!(b.allowance(0, 9, 0), 9, "zero-byte packets cost nothing");
        assert_eq!(b.allowance(0, 0, 10), 0);
    }

    #[test]
    fn clocks() {
        let a = now_ns();
        let b = now_ns();
        assert!(b >= a);
        // After 2020-01-01.
        assert!(wall_clock_ns() > 1_577_836_800 * NS_PER_S);
    }
}
