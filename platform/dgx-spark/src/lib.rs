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
//!
//! [`Platform`]: rtdaq_platform::Platform
//! [`PlatformExt`]: rtdaq_platform::PlatformExt
//! [`Platform::GPU_DIRECT`]: rtdaq_platform::Platform::GPU_DIRECT
#![forbid(unsafe_code)]
#![deny(missing_docs)]

rtdaq_platform::board_platform! {
    /// The NVIDIA DGX Spark.
    DgxSparkPlatform = DGX_SPARK;
    /// [`GpuDirect::HostStaging`](rtdaq_platform::GpuDirect::HostStaging): the integrated GB10 GPU cannot export `device` memory as DMA-BUF, so the NIC writes `host_pinned` memory, which the GPU reads in place on unified memory.
    gpu_direct;
    tests
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtdaq_platform::{GpuDirect, Platform};

    #[test]
    fn board_specific_facts() {
        assert_eq!(FACTS.name, "dgx-spark");
        assert_eq!(DgxSparkPlatform::GPU_DIRECT, GpuDirect::HostStaging);
        assert_eq!(FACTS.tuning.mtu, 9000);
        assert_eq!(FACTS.tuning.mrrs, 4096);
        assert_eq!(FACTS.tuning.governor, "performance");
        assert_eq!(FACTS.nics[0].netdev, "enp1s0f0np0");
    }
}
