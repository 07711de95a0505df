//! # rtdaq-platform-dgx-spark: the NVIDIA DGX Spark platform
//!
//! The board crate of the NVIDIA DGX Spark (GB10: 20 Arm cores (10 Cortex-X925 + 10 Cortex-A725), 128 GB unified memory, a ConnectX-7 with two ports over four PCI functions). [`DgxSparkPlatform`] implements [`Platform`] and
//! [`PlatformExt`]; its facts are [`rtdaq_platform::board::DGX_SPARK`], the same table the
//! config validator (`rtdaq-config`) and `rtdaq doctor` read, so the three never disagree:
//!
//! | what | where |
//! |---|---|
//! | cores, which to isolate, OS/IRQ housekeeping cores | [`FACTS`]`.isolated_cores`, `.housekeeping_cores` |
//! | NIC ports (ConnectX-7 PCI functions and netdev names, defaults) | [`FACTS`]`.nics`; [`nic_ports`] for the names the running system uses |
//! | GPU kind and data path | [`FACTS`]`.gpu`, [`Platform::GPU_DIRECT`] |
//! | tuning targets (hugepages, MTU 9000, MRRS 4096, governor `performance`) | [`FACTS`]`.tuning` |
//!
//! The NIC table is a default: a deployment names its ports in `interfaces[].address`, which
//! overrides it, and [`nic_ports`] replaces each default netdev name with the one sysfs
//! shows for that PCI function. Facts marked "assumed" are listed in `docs/platforms.md`.
//!
//! ## What this crate must not do
//! It holds facts and summaries only: real-time entry and topology reading are the defaults
//! of `rtdaq-platform` (`#![forbid(unsafe_code)]`). It never changes system settings; that is
//! `rt-tuning/tune.sh`'s job, and `rtdaq doctor` checks the result.
//!
//! ## Quick start
//! ```no_run
//! use rtdaq_platform::{Platform, PlatformExt};
//! use rtdaq_platform_dgx_spark::{DgxSparkPlatform, FACTS};
//!
//! assert_eq!(DgxSparkPlatform::NAME, "dgx-spark");
//! println!("isolate {}", FACTS.isolated_cpulist());
//! println!("{}", <DgxSparkPlatform as PlatformExt>::describe());
//! ```
//!
//! ## Resource cleanup
//! Nothing is held: [`describe`] and [`nic_ports`] read sysfs files and close them.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::path::Path;

use rtdaq_platform::board::{self, BoardFacts, NicPort};
use rtdaq_platform::{GpuDirect, Platform, PlatformExt};

/// The board's facts (an alias of [`rtdaq_platform::board::DGX_SPARK`]).
pub const FACTS: &BoardFacts = &board::DGX_SPARK;

/// The NVIDIA DGX Spark.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DgxSparkPlatform;

impl Platform for DgxSparkPlatform {
    const NAME: &'static str = FACTS.name;

    /// [`GpuDirect::HostStaging`]: the integrated GB10 GPU cannot export `device` memory as DMA-BUF, so the NIC writes `host_pinned` memory, which the GPU reads in place on unified memory.
    const GPU_DIRECT: GpuDirect = FACTS.gpu_direct;
}

impl PlatformExt for DgxSparkPlatform {
    fn board() -> Option<&'static BoardFacts> {
        Some(FACTS)
    }

    fn describe() -> String {
        describe()
    }
}

/// The board's NIC ports with the netdev names of the running system (see
/// [`BoardFacts::nic_ports`]).
pub fn nic_ports() -> Vec<NicPort> {
    FACTS.nic_ports(Path::new("/"))
}

/// A short multi-line summary: the board's facts and what the running system shows.
pub fn describe() -> String {
    board::describe_at(FACTS, Path::new("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_come_from_the_board_table() {
        assert_eq!(DgxSparkPlatform::NAME, "dgx-spark");
        assert_eq!(DgxSparkPlatform::GPU_DIRECT, GpuDirect::HostStaging);
        assert_eq!(<DgxSparkPlatform as PlatformExt>::board(), Some(FACTS));
        assert_eq!(board::by_name("dgx-spark"), Some(FACTS));
        assert_eq!(FACTS.tuning.mtu, 9000);
        assert_eq!(FACTS.tuning.mrrs, 4096);
        assert_eq!(FACTS.tuning.governor, "performance");
        assert_eq!(FACTS.nics[0].netdev, "enp1s0f0np0");
    }

    #[test]
    fn describes_itself() {
        let d = describe();
        assert!(
            d.starts_with("platform: dgx-spark (NVIDIA DGX Spark"),
            "{d}"
        );
        assert!(d.contains(&FACTS.isolated_cpulist()), "{d}");
        assert!(
            d.contains("enp1s0f0np0") || d.contains(FACTS.nics[0].pci),
            "{d}"
        );
        assert_eq!(nic_ports().len(), FACTS.nics.len());
    }
}
