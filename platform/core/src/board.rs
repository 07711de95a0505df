//! Board facts: the one table of what rtdaq knows about each supported board (cores, which to
//! isolate, NIC ports, GPU kind, tuning targets).
//!
//! Every consumer reads this table: the board crates (`rtdaq-platform-igx-orin`,
//! `rtdaq-platform-igx-thor`, `rtdaq-platform-dgx-spark`) expose it through
//! [`PlatformExt::board`](crate::PlatformExt::board), the config validator (`rtdaq-config`)
//! checks cores and memory kinds against it, and `rtdaq doctor` derives its expectations
//! from it. Nothing here reads the machine except [`BoardFacts::nic_ports`], which lets the
//! running system's sysfs override the default netdev names.
//!
//! Facts marked "assumed" in the doc comments are not confirmed by a source rtdaq cites
//! (see `docs/platforms.md`); they are defaults an operator overrides in the deployment
//! config (`interfaces[].address`, core numbers) and `rt-tuning/tune.sh` flags.

use std::path::Path;

use crate::netdev;
use rtdaq_core::traits::GpuDirect;

/// What kind of GPU a board has, which decides the memory kind GPU data lands in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpuKind {
    /// No GPU.
    None,
    /// A discrete PCIe GPU with its own memory: the NIC writes `device` memory directly
    /// (GPUDirect RDMA through DMA-BUF or nvidia-peermem).
    Discrete,
    /// An integrated GPU sharing the CPU's memory (DGX Spark's GB10): `device` memory cannot
    /// be exported to the NIC as DMA-BUF, so GPU data lands in `host_pinned` memory, which the
    /// GPU reads in place.
    Unified,
}

impl GpuKind {
    /// Short name for reports (`"discrete"`, `"unified"`, `"none"`).
    pub fn as_str(self) -> &'static str {
        match self {
            GpuKind::None => "none",
            GpuKind::Discrete => "discrete",
            GpuKind::Unified => "unified",
        }
    }

    /// The config memory kind GPU-bound packet data should use on this GPU
    /// (`"device"` or `"host_pinned"`), `None` without a GPU.
    pub fn data_memory_kind(self) -> Option<&'static str> {
        match self {
            GpuKind::None => None,
            GpuKind::Discrete => Some("device"),
            GpuKind::Unified => Some("host_pinned"),
        }
    }
}

/// One ConnectX port of a board, as shipped (defaults; see [`BoardFacts::nic_ports`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NicPort {
    /// PCI function, `dddd:bb:dd.f`.
    pub pci: &'static str,
    /// Default Linux netdev name (predictable naming of the board's OS image).
    pub netdev: &'static str,
    /// Adapter model.
    pub model: &'static str,
}

/// The host settings `rt-tuning/tune.sh apply` writes and `rtdaq doctor` expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TuningTargets {
    /// `scaling_governor` of every CPU.
    pub governor: &'static str,
    /// MTU of the board's NIC ports.
    pub mtu: u32,
    /// PCIe Max Read Request Size of the NICs, bytes.
    pub mrrs: u32,
    /// 2 MiB hugepages to reserve when no deployment config says otherwise.
    pub hugepages_2m: u64,
    /// `kernel.sched_rt_runtime_us` (-1: no RT throttling, needed by busy-polling
    /// `SCHED_FIFO` threads).
    pub sched_rt_runtime_us: i64,
}

/// The default tuning targets of every board.
pub const DEFAULT_TUNING: TuningTargets = TuningTargets {
    governor: "performance",
    mtu: 9000,
    mrrs: 4096,
    hugepages_2m: 2048,
    sched_rt_runtime_us: -1,
};

/// Everything rtdaq knows about one board.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoardFacts {
    /// The `platform` name (`"igx-thor"`), as in the config and the `platform-*` feature.
    pub name: &'static str,
    /// Product name.
    pub title: &'static str,
    /// CPU description.
    pub cpu_model: &'static str,
    /// CPU cores, numbered `0..cpus`.
    pub cpus: u32,
    /// Installed memory, bytes.
    pub memory_bytes: u64,
    /// NUMA nodes.
    pub numa_nodes: u32,
    /// Cores left to the OS, IRQs, RCU callbacks and the DPDK main thread (`irqaffinity=`).
    pub housekeeping_cores: &'static [u32],
    /// Cores to isolate for queue threads (`isolcpus=`, `nohz_full=`, `rcu_nocbs=`).
    pub isolated_cores: &'static [u32],
    /// The board's NIC ports (defaults).
    pub nics: &'static [NicPort],
    /// GPU kind.
    pub gpu: GpuKind,
    /// How NIC data reaches the GPU.
    pub gpu_direct: GpuDirect,
    /// Host tuning targets.
    pub tuning: TuningTargets,
}

const GIB: u64 = 1 << 30;

/// NVIDIA IGX Orin (developer kit / IGX Orin 700 with the discrete GPU).
///
/// - CPU: 12 Arm Cortex-A78AE cores in 3 clusters of 4, 64 GB LPDDR5, one NUMA node.
/// - NIC: on-board ConnectX-7, two ports at `0005:03:00.0` / `0005:03:00.1`, netdevs
///   `enP5p3s0f0np0` / `enP5p3s0f1np1` on IGX OS (Holoscan Sensor Bridge host setup, IGX tab).
/// - GPU: discrete (RTX A6000 / RTX 6000 Ada in the PCIe slot; **assumed** dGPU mode, the
///   configuration GPUDirect needs; in iGPU mode use `host_pinned`), DMA-BUF GPUDirect
///   (**assumed**; nvidia-peermem also works).
/// - Cores: 0-1 housekeeping, 2-11 isolated (**assumed** split: one A78AE cluster would be
///   0-3; two cores leave ten for queues).
pub const IGX_ORIN: BoardFacts = BoardFacts {
    name: "igx-orin",
    title: "NVIDIA IGX Orin",
    cpu_model: "12 x Arm Cortex-A78AE",
    cpus: 12,
    memory_bytes: 64 * GIB,
    numa_nodes: 1,
    housekeeping_cores: &[0, 1],
    isolated_cores: &[2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
    nics: &[
        NicPort {
            pci: "0005:03:00.0",
            netdev: "enP5p3s0f0np0",
            model: "ConnectX-7",
        },
        NicPort {
            pci: "0005:03:00.1",
            netdev: "enP5p3s0f1np1",
            model: "ConnectX-7",
        },
    ],
    gpu: GpuKind::Discrete,
    gpu_direct: GpuDirect::DmaBuf,
    tuning: TuningTargets {
        hugepages_2m: 2048,
        ..DEFAULT_TUNING
    },
};

/// NVIDIA IGX Thor (developer kit with the discrete GPU).
///
/// - CPU: 14 Arm Neoverse-V3AE cores (Jetson T5000 module), 128 GB LPDDR5X, one NUMA node.
/// - NIC: on-board ConnectX-7, two ports; PCI functions `0005:01:00.0` / `0005:01:00.1` and
///   netdevs `enP5p1s0f0np0` / `enP5p1s0f1np1` are **assumed** (no cited source; read yours
///   with `ls -l /sys/class/net/*/device`).
/// - GPU: discrete (**assumed**: an RTX PRO Blackwell card in the PCIe slot). Thor's
///   integrated GPU cannot export `device` memory as DMA-BUF (reference inventory §7.9): a
///   Thor without the card must use `host_pinned`.
/// - Cores: 0-1 housekeeping, 2-13 isolated (**assumed** split).
pub const IGX_THOR: BoardFacts = BoardFacts {
    name: "igx-thor",
    title: "NVIDIA IGX Thor",
    cpu_model: "14 x Arm Neoverse-V3AE",
    cpus: 14,
    memory_bytes: 128 * GIB,
    numa_nodes: 1,
    housekeeping_cores: &[0, 1],
    isolated_cores: &[2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13],
    nics: &[
        NicPort {
            pci: "0005:01:00.0",
            netdev: "enP5p1s0f0np0",
            model: "ConnectX-7",
        },
        NicPort {
            pci: "0005:01:00.1",
            netdev: "enP5p1s0f1np1",
            model: "ConnectX-7",
        },
    ],
    gpu: GpuKind::Discrete,
    gpu_direct: GpuDirect::DmaBuf,
    tuning: TuningTargets {
        hugepages_2m: 4096,
        ..DEFAULT_TUNING
    },
};

/// NVIDIA DGX Spark (GB10 Grace Blackwell).
///
/// - CPU: 20 Arm cores (10 Cortex-X925 + 10 Cortex-A725), 128 GB unified LPDDR5X, one NUMA
///   node.
/// - NIC: ConnectX-7 with two QSFP ports, each reached over two PCIe Gen5 x4 links
///   (socket-direct), so four PCI functions and netdevs: `0000:01:00.0` `enp1s0f0np0`,
///   `0000:01:00.1` `enp1s0f1np1`, `0002:01:00.0` `enP2p1s0f0np0`, `0002:01:00.1`
///   `enP2p1s0f1np1` (ServeTheHome GB10 ConnectX-7 article; DGX Spark "connect two Sparks"
///   playbook). One x4 link carries about 100 Gb/s: DAQIRI measured 98.8 Gb/s raw on one
///   port pair (reference inventory §5.3).
/// - GPU: integrated GB10 Blackwell on unified memory: `device` memory cannot be DMA-BUF
///   exported to the NIC (reference inventory §7.9), so GPU data lands in `host_pinned`.
/// - Cores: 0-1 housekeeping, 2-19 isolated (**assumed**; which numbers are the X925 cores
///   is not confirmed: `lscpu -e` shows them; prefer those for busy-polling queues).
pub const DGX_SPARK: BoardFacts = BoardFacts {
    name: "dgx-spark",
    title: "NVIDIA DGX Spark",
    cpu_model: "10 x Arm Cortex-X925 + 10 x Arm Cortex-A725",
    cpus: 20,
    memory_bytes: 128 * GIB,
    numa_nodes: 1,
    housekeeping_cores: &[0, 1],
    isolated_cores: &[
        2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
    ],
    nics: &[
        NicPort {
            pci: "0000:01:00.0",
            netdev: "enp1s0f0np0",
            model: "ConnectX-7",
        },
        NicPort {
            pci: "0000:01:00.1",
            netdev: "enp1s0f1np1",
            model: "ConnectX-7",
        },
        NicPort {
            pci: "0002:01:00.0",
            netdev: "enP2p1s0f0np0",
            model: "ConnectX-7",
        },
        NicPort {
            pci: "0002:01:00.1",
            netdev: "enP2p1s0f1np1",
            model: "ConnectX-7",
        },
    ],
    gpu: GpuKind::Unified,
    gpu_direct: GpuDirect::HostStaging,
    tuning: TuningTargets {
        hugepages_2m: 4096,
        ..DEFAULT_TUNING
    },
};

/// Every board with known facts (the generic `host` has none).
pub const BOARDS: [&BoardFacts; 3] = [&IGX_ORIN, &IGX_THOR, &DGX_SPARK];

/// The facts of the board called `name` (`"igx-thor"`), `None` for `"host"` or an unknown
/// name.
pub fn by_name(name: &str) -> Option<&'static BoardFacts> {
    BOARDS.iter().copied().find(|b| b.name == name)
}

impl BoardFacts {
    /// True when `core` exists on the board.
    pub fn has_core(&self, core: u32) -> bool {
        core < self.cpus
    }

    /// True when `core` is one of the cores to isolate for queue threads.
    pub fn is_isolated(&self, core: u32) -> bool {
        self.isolated_cores.contains(&core)
    }

    /// The isolated cores as a cpulist (`2-13`).
    pub fn isolated_cpulist(&self) -> String {
        cpulist_text(self.isolated_cores)
    }

    /// The housekeeping cores as a cpulist (`0-1`).
    pub fn housekeeping_cpulist(&self) -> String {
        cpulist_text(self.housekeeping_cores)
    }

    /// The board's NIC ports as the running system (sysfs below `root`) names them: each
    /// default port whose PCI function has a netdev gets that name instead of the default
    /// (an OS image with other naming rules, a renamed interface). Ports whose function has
    /// no netdev (absent, or bound to `vfio-pci`) keep the default name.
    pub fn nic_ports(&self, root: &Path) -> Vec<NicPort> {
        self.nics
            .iter()
            .map(|p| match netdev::netdev_of_pci(root, p.pci) {
                Ok(Some(name)) => NicPort {
                    netdev: leak_name(name),
                    ..*p
                },
                _ => *p,
            })
            .collect()
    }
}

/// A short multi-line summary of a board and of the running system below `root`: the
/// board's facts, then what sysfs shows (online and isolated CPUs, the NIC ports' netdevs).
/// Never fails: what cannot be read is shown as such.
pub fn describe_at(b: &BoardFacts, root: &Path) -> String {
    use std::fmt::Write as _;
    let mut s = format!(
        "platform: {} ({}; GPU: {}, packet data for the GPU in `{}` memory)\n",
        b.name,
        b.title,
        b.gpu.as_str(),
        b.gpu.data_memory_kind().unwrap_or("no GPU")
    );
    let _ = writeln!(
        s,
        "board: {} cores ({}), isolate {} for queues, {} for OS and IRQs",
        b.cpus,
        b.cpu_model,
        b.isolated_cpulist(),
        b.housekeeping_cpulist()
    );
    match crate::Topology::read(root) {
        Ok(t) => {
            let _ = writeln!(
                s,
                "this system: CPUs {} online; isolated: {}; nohz_full: {}",
                t.online_cpus(),
                t.isolated_cpus(),
                t.nohz_full_cpus()
            );
        }
        Err(e) => {
            let _ = writeln!(s, "this system: CPUs unreadable ({e})");
        }
    }
    let ports: Vec<String> = b
        .nic_ports(root)
        .iter()
        .map(|p| format!("{} {}", p.pci, p.netdev))
        .collect();
    let _ = write!(s, "NIC ports: {}", ports.join(", "));
    s
}

/// A cpulist (`0-3,8`) of ascending core numbers.
fn cpulist_text(cores: &[u32]) -> String {
    crate::CpuList::from_ids(cores.iter().map(|&c| c as usize)).to_string()
}

/// Netdev names found in sysfs live for the rest of the process (a handful, read at start).
fn leak_name(name: String) -> &'static str {
    Box::leak(name.into_boxed_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_consistent() {
        for b in BOARDS {
            assert!(b.cpus > 0, "{}", b.name);
            for &c in b.housekeeping_cores.iter().chain(b.isolated_cores) {
                assert!(b.has_core(c), "{}: core {c}", b.name);
            }
            for &c in b.isolated_cores {
                assert!(!b.housekeeping_cores.contains(&c), "{}: core {c}", b.name);
            }
            assert_eq!(
                b.housekeeping_cores.len() + b.isolated_cores.len(),
                b.cpus as usize,
                "{}: every core is either housekeeping or isolated",
                b.name
            );
            assert!(!b.nics.is_empty());
            assert_eq!(by_name(b.name), Some(b));
        }
        assert_eq!(by_name("host"), None);
        assert_eq!(IGX_THOR.isolated_cpulist(), "2-13");
        assert_eq!(DGX_SPARK.housekeeping_cpulist(), "0-1");
        assert_eq!(DGX_SPARK.gpu.data_memory_kind(), Some("host_pinned"));
        assert_eq!(IGX_ORIN.gpu.data_memory_kind(), Some("device"));
    }

    #[test]
    fn sysfs_names_override_the_defaults() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        std::fs::create_dir_all(root.join("sys/bus/pci/devices/0005:03:00.1/net/eth1")).unwrap();
        let ports = IGX_ORIN.nic_ports(&root);
        assert_eq!(ports[0].netdev, "enP5p3s0f0np0");
        assert_eq!(ports[1].netdev, "eth1");
        assert_eq!(ports[1].pci, "0005:03:00.1");
    }
}
