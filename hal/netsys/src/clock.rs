//! The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), which an engine's receive loop
//! reads for its own work accounting (the socket engine's adaptive coalescing), and
//! `CLOCK_MONOTONIC`, the clock of a datagram's `SO_TXTIME` departure time under the `fq`
//! qdisc.

use nix::time::ClockId;

/// CPU time the calling thread has used, ns; `None` when the clock cannot be read. One
/// `clock_gettime` (vDSO), no allocation.
#[inline]
pub fn thread_cpu_ns() -> Option<u64> {
    let ts = ClockId::CLOCK_THREAD_CPUTIME_ID.now().ok()?;
    Some((ts.tv_sec() as u64).saturating_mul(1_000_000_000) + ts.tv_nsec() as u64)
}

/// `CLOCK_MONOTONIC` in ns (the kernel's `ktime_get_ns`, what `fq` compares an
/// `SCM_TXTIME` with); 0 when it cannot be read. One `clock_gettime` (vDSO), no allocation.
#[inline]
pub fn monotonic_ns() -> u64 {
    ClockId::CLOCK_MONOTONIC.now().map_or(0, |ts| {
        (ts.tv_sec() as u64).saturating_mul(1_000_000_000) + ts.tv_nsec() as u64
    })
}

/// `clockid` (`libc::CLOCK_TAI`, ...) in ns; 0 when it cannot be read. One
/// `clock_gettime` (vDSO for the usual clocks), no allocation: a sender with launch times
/// reads the clock of its qdisc with it.
#[inline]
pub fn now_ns(clockid: libc::clockid_t) -> u64 {
    ClockId::from_raw(clockid).now().map_or(0, |ts| {
        (ts.tv_sec() as u64).saturating_mul(1_000_000_000) + ts.tv_nsec() as u64
    })
}

#[cfg(test)]
mod tests {
    /// TAI is REALTIME plus the kernel's TAI offset (0 unless something set it, 37 s under
    /// ptp4l/phc2sys), both read here.
    #[test]
    fn the_clocks_read() {
        let (r, t) = (
            super::now_ns(libc::CLOCK_REALTIME),
            super::now_ns(libc::CLOCK_TAI),
        );
        assert!(r > 1_600_000_000 * 1_000_000_000, "{r}");
        let off = t as i128 - r as i128;
        assert!(
            (-1_000_000_000..=40_000_000_000).contains(&off),
            "TAI - UTC {off} ns"
        );
        assert!(super::now_ns(libc::CLOCK_MONOTONIC) > 0);
    }

    /// The clock moves forward with work done on this thread.
    #[test]
    fn thread_cpu_time_advances() {
        let a = super::thread_cpu_ns().unwrap();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        assert!(super::thread_cpu_ns().unwrap() > a);
    }
}
