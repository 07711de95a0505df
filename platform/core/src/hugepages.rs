//! Hugepage pool status and reservation, read from sysfs below a root directory.
//!
//! The pool of one size lives in `sys/kernel/mm/hugepages/hugepages-<kB>kB/`
//! (`nr_hugepages`, `free_hugepages`, `resv_hugepages`, `surplus_hugepages`,
//! `nr_overcommit_hugepages`); a NUMA node's share in
//! `sys/devices/system/node/node<N>/hugepages/hugepages-<kB>kB/`.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::sysfs;

/// Size of a hugepage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HugePageSize {
    /// 2 MiB (x86_64 and aarch64 with 4 KiB base pages).
    #[default]
    Size2M,
    /// 1 GiB.
    Size1G,
}

impl HugePageSize {
    /// Bytes per page.
    pub const fn bytes(self) -> usize {
        match self {
            Self::Size2M => 2 << 20,
            Self::Size1G => 1 << 30,
        }
    }

    /// KiB per page, as in the sysfs directory name.
    pub const fn kib(self) -> u64 {
        (self.bytes() / 1024) as u64
    }

    /// The sysfs directory name, `hugepages-2048kB` / `hugepages-1048576kB`.
    pub fn sysfs_dir_name(self) -> String {
        format!("hugepages-{}kB", self.kib())
    }

    /// The pool directory below `root`.
    pub fn pool_dir(self, root: &Path) -> PathBuf {
        sysfs::path(
            root,
            &format!("sys/kernel/mm/hugepages/{}", self.sysfs_dir_name()),
        )
    }

    /// The per-node pool directory below `root`.
    pub fn node_pool_dir(self, root: &Path, node: u32) -> PathBuf {
        sysfs::path(
            root,
            &format!(
                "sys/devices/system/node/node{node}/hugepages/{}",
                self.sysfs_dir_name()
            ),
        )
    }
}

impl fmt::Display for HugePageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Size2M => "2 MiB",
            Self::Size1G => "1 GiB",
        })
    }
}

/// The state of one hugepage pool (global, or one NUMA node's share).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HugepageStatus {
    /// Page size of the pool.
    pub size: HugePageSize,
    /// Pages in the pool (`nr_hugepages`).
    pub total: u64,
    /// Pages not faulted in by anyone (`free_hugepages`).
    pub free: u64,
    /// Free pages already promised to existing mappings (`resv_hugepages`; 0 per node,
    /// where the kernel does not report it).
    pub reserved: u64,
    /// Pages allocated beyond `nr_hugepages` through overcommit (`surplus_hugepages`).
    pub surplus: u64,
    /// Maximum surplus pages (`nr_overcommit_hugepages`; 0 per node).
    pub overcommit: u64,
    /// The `nr_hugepages` file: write a page count there (as root) to resize the pool.
    pub sysfs_path: PathBuf,
}

impl HugepageStatus {
    /// Pages a new mapping can still get: free minus reserved, plus overcommit headroom.
    pub fn available(&self) -> u64 {
        self.free.saturating_sub(self.reserved) + self.overcommit.saturating_sub(self.surplus)
    }

    /// The `nr_hugepages` value that makes `needed` more pages available (the `N` of
    /// `echo N > sysfs_path`); `total` when enough are available already.
    pub fn total_for(&self, needed: u64) -> u64 {
        self.total + needed.saturating_sub(self.available())
    }
}

/// Reads the global pool of `size` below `root`.
///
/// # Errors
/// [`PlatformError::ReadSysfs`](crate::PlatformError::ReadSysfs) when the pool directory is
/// missing (the size is not supported) or unreadable, `ParseSysfs` on a malformed file.
pub fn status(root: &Path, size: HugePageSize) -> Result<HugepageStatus> {
    let dir = size.pool_dir(root);
    Ok(HugepageStatus {
        size,
        total: sysfs::read_u64(&dir.join("nr_hugepages"))?,
        free: sysfs::read_u64(&dir.join("free_hugepages"))?,
        reserved: sysfs::read_u64_or(&dir.join("resv_hugepages"), 0)?,
        surplus: sysfs::read_u64_or(&dir.join("surplus_hugepages"), 0)?,
        overcommit: sysfs::read_u64_or(&dir.join("nr_overcommit_hugepages"), 0)?,
        sysfs_path: dir.join("nr_hugepages"),
    })
}

/// Reads NUMA node `node`'s share of the pool of `size` below `root`. The kernel keeps no
/// per-node reservation or overcommit figures, so `reserved` and `overcommit` are 0.
///
/// # Errors
/// As [`status`].
pub fn node_status(root: &Path, node: u32, size: HugePageSize) -> Result<HugepageStatus> {
    let dir = size.node_pool_dir(root, node);
    Ok(HugepageStatus {
        size,
        total: sysfs::read_u64(&dir.join("nr_hugepages"))?,
        free: sysfs::read_u64(&dir.join("free_hugepages"))?,
        reserved: 0,
        surplus: sysfs::read_u64_or(&dir.join("surplus_hugepages"), 0)?,
        overcommit: 0,
        sysfs_path: dir.join("nr_hugepages"),
    })
}

/// Pages of `size` needed to hold `bytes` (rounded up).
pub const fn pages_needed(bytes: usize, size: HugePageSize) -> u64 {
    bytes.div_ceil(size.bytes()) as u64
}

/// Sets the global pool of `size` below `root` to `pages` pages (`echo pages > nr_hugepages`)
/// and returns the pool size the kernel actually reached (it may stop short when memory is
/// fragmented). For `rt-tuning --set` and tests; needs root.
///
/// # Errors
/// [`PlatformError::WriteSysfs`](crate::PlatformError::WriteSysfs) when the write fails,
/// read errors as [`status`].
pub fn set_total(root: &Path, size: HugePageSize, pages: u64) -> Result<u64> {
    let path = size.pool_dir(root).join("nr_hugepages");
    sysfs::write(&path, &pages.to_string())?;
    sysfs::read_u64(&path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(HugePageSize::Size2M.sysfs_dir_name(), "hugepages-2048kB");
        assert_eq!(HugePageSize::Size1G.sysfs_dir_name(), "hugepages-1048576kB");
        assert_eq!(
            HugePageSize::Size2M.pool_dir(Path::new("/")),
            Path::new("/sys/kernel/mm/hugepages/hugepages-2048kB")
        );
    }

    #[test]
    fn pages_needed_rounds_up() {
        let m2 = HugePageSize::Size2M;
        assert_eq!(pages_needed(0, m2), 0);
        assert_eq!(pages_needed(1, m2), 1);
        assert_eq!(pages_needed(2 << 20, m2), 1);
        assert_eq!(pages_needed((2 << 20) + 1, m2), 2);
        assert_eq!(pages_needed(3 << 30, HugePageSize::Size1G), 3);
    }

    #[test]
    fn fix_total_adds_the_deficit() {
        let s = HugepageStatus {
            size: HugePageSize::Size2M,
            total: 8,
            free: 5,
            reserved: 2,
            surplus: 0,
            overcommit: 0,
            sysfs_path: PathBuf::new(),
        };
        assert_eq!(s.available(), 3);
        assert_eq!(s.total_for(3), 8);
        assert_eq!(s.total_for(10), 15);
    }
}
