//! [`Topology`]: CPUs, NUMA nodes, isolated and `nohz_full` CPUs, as the kernel reports them
//! in sysfs.
//!
//! Everything is read below a root directory so that tests (and `rtdaq config check` against
//! a captured board) can use a fixture tree; [`Topology::current`] reads `/`.
//!
//! | what | file (below the root) |
//! |---|---|
//! | online CPUs | `sys/devices/system/cpu/online` (required) |
//! | isolated CPUs (`isolcpus=`) | `sys/devices/system/cpu/isolated` (missing: none) |
//! | `nohz_full` CPUs | `sys/devices/system/cpu/nohz_full` (missing or `(null)`: none) |
//! | NUMA nodes | `sys/devices/system/node/online`, else the `node<N>` directories (missing: none reported) |
//! | CPUs of a node | `sys/devices/system/node/node<N>/cpulist` (missing: none, a memory-only node) |

use std::path::Path;

use crate::cpulist::CpuList;
use crate::error::{PlatformError, Result};
use crate::sysfs;

const CPU_ONLINE: &str = "sys/devices/system/cpu/online";
const CPU_ISOLATED: &str = "sys/devices/system/cpu/isolated";
const CPU_NOHZ_FULL: &str = "sys/devices/system/cpu/nohz_full";
const NODE_DIR: &str = "sys/devices/system/node";

/// One NUMA node and its CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaNode {
    /// Node number.
    pub id: u32,
    /// CPUs of the node (empty for a memory-only node).
    pub cpus: CpuList,
}

/// The CPU and NUMA layout of a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    online: CpuList,
    nodes: Vec<NumaNode>,
    isolated: CpuList,
    nohz_full: CpuList,
}

impl Topology {
    /// Reads the running host's topology (root `/`).
    ///
    /// # Errors
    /// As [`read`](Self::read).
    pub fn current() -> Result<Self> {
        Self::read(Path::new("/"))
    }

    /// Reads the topology from the sysfs tree below `root` (`root/sys/devices/system/...`).
    ///
    /// # Errors
    /// [`PlatformError::ReadSysfs`] when `cpu/online` is missing or a file cannot be read,
    /// [`PlatformError::ParseSysfs`] when a file is not in the kernel's format.
    pub fn read(root: &Path) -> Result<Self> {
        let online = read_online_cpus(root)?;
        let isolated = sysfs::read_cpulist_optional(&sysfs::path(root, CPU_ISOLATED))?;
        let nohz_full = sysfs::read_cpulist_optional(&sysfs::path(root, CPU_NOHZ_FULL))?;
        let mut nodes = Vec::new();
        for id in node_ids(root)? {
            let cpus = sysfs::read_cpulist_optional(&sysfs::path(
                root,
                &format!("{NODE_DIR}/node{id}/cpulist"),
            ))?;
            nodes.push(NumaNode { id, cpus });
        }
        Ok(Self {
            online,
            nodes,
            isolated,
            nohz_full,
        })
    }

    /// Online CPUs.
    pub fn online_cpus(&self) -> &CpuList {
        &self.online
    }

    /// NUMA nodes, ascending. Empty when the kernel reports none (built without NUMA).
    pub fn numa_nodes(&self) -> &[NumaNode] {
        &self.nodes
    }

    /// The node numbers, as a set.
    pub fn numa_node_ids(&self) -> CpuList {
        self.nodes.iter().map(|n| n.id as usize).collect()
    }

    /// True when the host reports NUMA node `node`.
    pub fn has_numa_node(&self, node: u32) -> bool {
        self.nodes.iter().any(|n| n.id == node)
    }

    /// NUMA node of `cpu`, when the kernel reports one.
    pub fn numa_node_of(&self, cpu: usize) -> Option<u32> {
        self.nodes
            .iter()
            .find(|n| n.cpus.contains(cpu))
            .map(|n| n.id)
    }

    /// CPUs isolated from the scheduler (`isolcpus=`, `cpu/isolated`).
    pub fn isolated_cpus(&self) -> &CpuList {
        &self.isolated
    }

    /// CPUs running without the periodic tick (`nohz_full=`).
    pub fn nohz_full_cpus(&self) -> &CpuList {
        &self.nohz_full
    }

    /// True when `cpu` is isolated (a good home for an I/O thread).
    pub fn is_isolated(&self, cpu: usize) -> bool {
        self.isolated.contains(cpu)
    }
}

/// Reads `cpu/online` below `root`.
pub(crate) fn read_online_cpus(root: &Path) -> Result<CpuList> {
    sysfs::read_cpulist(&sysfs::path(root, CPU_ONLINE))
}

/// NUMA node numbers below `root`: `node/online` when present, else the `node<N>` directories.
pub(crate) fn node_ids(root: &Path) -> Result<Vec<u32>> {
    let online = sysfs::path(root, &format!("{NODE_DIR}/online"));
    if let Some(text) = sysfs::read_optional(&online)? {
        let list = sysfs::parse_cpulist(&online, &text)?;
        return Ok(list.iter().map(|n| n as u32).collect());
    }
    let dir = sysfs::path(root, NODE_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(PlatformError::ReadSysfs { path: dir, source }),
    };
    let mut ids = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| PlatformError::ReadSysfs {
            path: dir.clone(),
            source,
        })?;
        let name = entry.file_name();
        if let Some(n) = name
            .to_str()
            .and_then(|s| s.strip_prefix("node"))
            .and_then(|s| s.parse::<u32>().ok())
        {
            ids.push(n);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}
