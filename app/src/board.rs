//! The board this binary was built for (the `platform-*` feature), as its own crate's
//! [`Platform`] type: its name, its GPU data path and its facts
//! table (`rtdaq version`, the checks that a config is for this binary).

#[cfg(rtdaq_platform = "dgx-spark")]
pub use rtdaq_platform_dgx_spark::DgxSparkPlatform as Board;
#[cfg(rtdaq_platform = "host")]
pub use rtdaq_platform_host::HostPlatform as Board;
#[cfg(rtdaq_platform = "igx-orin")]
pub use rtdaq_platform_igx_orin::IgxOrinPlatform as Board;
#[cfg(rtdaq_platform = "igx-thor")]
pub use rtdaq_platform_igx_thor::IgxThorPlatform as Board;

use rtdaq_platform::Platform;
use rtdaq_platform::PlatformExt;

/// The board's name (`host`, `igx-orin`, ...), as in its feature and the config's `platform`.
pub const NAME: &str = <Board as Platform>::NAME;

/// `a == b`, at compile time.
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

// The board crate the feature pulled in is the platform build.rs embedded with the config.
const _: () = assert!(same(NAME, crate::embedded::PLATFORM));

/// One line for `rtdaq version`: the board's GPU data path and, for a named board, its
/// isolated and housekeeping cores.
pub fn summary() -> String {
    let gpu = format!("{:?}", <Board as Platform>::GPU_DIRECT);
    match <Board as PlatformExt>::board() {
        Some(f) => format!(
            "{NAME} (GPU data path {gpu}; isolate CPUs {}, housekeeping {})",
            f.isolated_cpulist(),
            f.housekeeping_cpulist()
        ),
        None => format!("{NAME} (GPU data path {gpu}; any x86_64/aarch64 Linux host)"),
    }
}

#[cfg(test)]
mod tests {
    /// `rtdaq version` names the board first.
    #[test]
    fn the_summary_names_the_board() {
        assert!(super::summary().starts_with(super::NAME));
        assert!(!super::same("host", "igx-orin") && super::same("host", "host"));
    }
}
