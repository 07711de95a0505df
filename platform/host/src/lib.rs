//! # rtdaq-platform-host: the platform of an ordinary Linux host
//!
//! The board crate for a development box, a CI runner or a generic x86_64/aarch64 server:
//! [`HostPlatform`] implements [`Platform`] and [`PlatformExt`] with the defaults of
//! `rtdaq-platform` (sysfs topology, [`rt::enter_thread`](rtdaq_platform::rt::enter_thread))
//! and adds [`describe`], the summary `rtdaq version` and `rtdaq config check` print.
//!
//! ## What this crate must not do
//! It knows nothing about a particular board: no fixed core map, no GPU, no NIC tables, and
//! its checks are permissive (a core that is not isolated is fine on a laptop). Boards with
//! known hardware get their own crate. No `unsafe` (`#![forbid(unsafe_code)]`); everything
//! low-level lives in `rtdaq-platform`.
//!
//! ## Quick start
//! ```no_run
//! use rtdaq_platform::{Platform, PlatformExt};
//! use rtdaq_platform_host::HostPlatform;
//!
//! println!("{}", HostPlatform::NAME);
//! println!("{}", <HostPlatform as PlatformExt>::describe());
//! let topo = HostPlatform::topology().expect("sysfs readable");
//! assert!(!topo.online_cpus().is_empty());
//! ```
//!
//! ## Resource cleanup
//! Nothing is held: [`describe`] and the topology read sysfs files and close them.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::fmt::Write as _;
use std::path::Path;

use rtdaq_platform::hugepages::{self, HugePageSize};
use rtdaq_platform::{GpuDirect, Platform, PlatformExt, Topology};

/// An ordinary Linux host (no board-specific knowledge).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostPlatform;

impl Platform for HostPlatform {
    const NAME: &'static str = "host";

    /// [`GpuDirect::HostStaging`]: a generic host has no guaranteed GPUDirect path. Whether a
    /// NIC can write GPU memory depends on the GPU, the NIC, the PCIe topology between them,
    /// the IOMMU and the driver stack (DMA-BUF support, nvidia-peermem), none of which this
    /// crate can promise; receiving into pinned host memory and copying works everywhere.
    /// Boards with a verified path (IGX with a discrete GPU) declare `DmaBuf` or `PeerMem`.
    const GPU_DIRECT: GpuDirect = GpuDirect::HostStaging;
}

impl PlatformExt for HostPlatform {
    fn describe() -> String {
        describe()
    }
}

/// A short multi-line summary of the running host: platform, CPUs, NUMA nodes, isolated and
/// `nohz_full` CPUs, free hugepages. Never fails: what cannot be read is shown as such.
pub fn describe() -> String {
    describe_at(Path::new("/"))
}

/// As [`describe`], reading sysfs below `root` (a fixture tree in tests).
pub fn describe_at(root: &Path) -> String {
    let mut s = format!(
        "platform: {} (GPU data path: {})\n",
        HostPlatform::NAME,
        gpu_direct_text(HostPlatform::GPU_DIRECT)
    );
    match Topology::read(root) {
        Ok(t) => {
            let online = t.online_cpus();
            let _ = writeln!(
                s,
                "CPUs: {} online ({online}); isolated: {}; nohz_full: {}",
                online.len(),
                t.isolated_cpus(),
                t.nohz_full_cpus()
            );
            let nodes = t.numa_nodes();
            if nodes.is_empty() {
                s.push_str("NUMA: not reported by the kernel\n");
            } else {
                let list: Vec<String> = nodes
                    .iter()
                    .map(|n| format!("node{} cpus {}", n.id, n.cpus))
                    .collect();
                let _ = writeln!(
                    s,
                    "NUMA: {} node{} ({})",
                    nodes.len(),
                    if nodes.len() == 1 { "" } else { "s" },
                    list.join(", ")
                );
            }
        }
        Err(e) => {
            let _ = writeln!(s, "CPUs: unreadable ({e})");
        }
    }
    let pools: Vec<String> = [HugePageSize::Size2M, HugePageSize::Size1G]
        .into_iter()
        .map(|size| match hugepages::status(root, size) {
            Ok(st) => format!("{size}: {} free of {}", st.available(), st.total),
            Err(_) if !size.pool_dir(root).exists() => format!("{size}: not supported"),
            Err(e) => format!("{size}: unreadable ({e})"),
        })
        .collect();
    let _ = write!(s, "hugepages: {}", pools.join(", "));
    s
}

fn gpu_direct_text(g: GpuDirect) -> &'static str {
    match g {
        GpuDirect::DmaBuf => "DMA-BUF GPUDirect",
        GpuDirect::PeerMem => "nvidia-peermem GPUDirect",
        GpuDirect::HostStaging => "host staging (no guaranteed GPUDirect)",
        GpuDirect::None => "no GPU",
    }
}
