//! # rtdaq-platform-igx-orin: the NVIDIA IGX Orin platform
//!
//! The board crate of the NVIDIA IGX Orin (12 Arm Cortex-A78AE cores, 64 GB, an on-board ConnectX-7 (two ports) and a discrete GPU (dGPU mode, assumed)). [`IgxOrinPlatform`] implements [`Platform`] and
//! [`PlatformExt`]; its facts are [`rtdaq_platform::board::IGX_ORIN`], the same table the
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
//! use rtdaq_platform_igx_orin::{IgxOrinPlatform, FACTS};
//!
//! assert_eq!(IgxOrinPlatform::NAME, "igx-orin");
//! println!("isolate {}", FACTS.isolated_cpulist());
//! println!("{}", <IgxOrinPlatform as PlatformExt>::describe());
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
    /// The NVIDIA IGX Orin.
    IgxOrinPlatform = IGX_ORIN;
    /// [`GpuDirect::DmaBuf`](rtdaq_platform::GpuDirect::DmaBuf): the NIC writes `device` memory of the discrete GPU exported as DMA-BUF (assumed; nvidia-peermem works too). In iGPU mode there is no GPUDirect: use `host_pinned` regions.
    gpu_direct;
    tests
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtdaq_platform::{GpuDirect, Platform};

    #[test]
    fn board_specific_facts() {
        assert_eq!(FACTS.name, "igx-orin");
        assert_eq!(IgxOrinPlatform::GPU_DIRECT, GpuDirect::DmaBuf);
        assert_eq!(FACTS.tuning.mtu, 9000);
        assert_eq!(FACTS.tuning.mrrs, 4096);
        assert_eq!(FACTS.tuning.governor, "performance");
        assert_eq!(FACTS.nics[0].netdev, "enP5p3s0f0np0");
    }
}
