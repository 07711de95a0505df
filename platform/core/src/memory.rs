//! Memory regions, allocated once at start: [`Region::allocate`] from a [`RegionSpec`].
//!
//! | kind | how |
//! |---|---|
//! | `host` | anonymous `mmap`, aligned to `align`, optional `mbind` to a NUMA node, prefaulted, `mlock`ed (degrades like [`rt`] when not permitted) |
//! | `huge` | `mmap(MAP_HUGETLB \| MAP_HUGE_2MB/1GB)`, optional `mbind`, prefaulted; hugetlb pages are never swapped, so no `mlock` |
//! | `host_pinned`, `device` | [`PlatformError::NeedsGpu`]: CUDA memory comes with the `gpu` feature |
//!
//! Every page is faulted in by `allocate`, so a region that is too big fails at start with a
//! clear error, never with a `SIGBUS` or an OOM kill on the real-time path.
//!
//! A [`Region`] unmaps its memory when dropped. It implements
//! [`MemoryRegion`](rtdaq_core::traits::MemoryRegion) (the `unsafe impl` is in `sys`).

use std::path::Path;

use rtdaq_core::traits::MemKind;

use crate::error::{PlatformError, Result};
use crate::hugepages::{self, HugePageSize, HugepageStatus};
use crate::rt::{self, Capability};
use crate::sys::Mapping;
use crate::topology;

/// Largest alignment a region may ask for.
pub const MAX_ALIGN: usize = 1 << 30;

/// What to allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RegionSpec<'a> {
    /// Region name (for messages; the config's region name).
    pub name: &'a str,
    /// Kind of memory.
    pub kind: MemKind,
    /// Bytes (> 0). Hugepage regions are mapped in whole pages.
    pub size: usize,
    /// Alignment of the start, a power of two up to [`MAX_ALIGN`]. Regions are at least
    /// page-aligned (4 KiB, or the hugepage size) whatever this says.
    pub align: usize,
    /// Bind the pages to this NUMA node (`mbind(MPOL_BIND)`); `None`: first-touch placement.
    pub numa_node: Option<u32>,
    /// Page size of a `huge` region (ignored by the other kinds).
    pub huge_page: HugePageSize,
    /// Fail instead of degrading when a `host` region cannot be `mlock`ed.
    pub lock_required: bool,
}

impl<'a> RegionSpec<'a> {
    /// A `host` region of `size` bytes: page-aligned, no NUMA binding, lock not required.
    pub const fn host(name: &'a str, size: usize) -> Self {
        Self {
            name,
            kind: MemKind::Host,
            size,
            align: 4096,
            numa_node: None,
            huge_page: HugePageSize::Size2M,
            lock_required: false,
        }
    }

    /// A `huge` region of `size` bytes in pages of `page`.
    pub const fn huge(name: &'a str, size: usize, page: HugePageSize) -> Self {
        Self {
            kind: MemKind::Huge,
            huge_page: page,
            ..Self::host(name, size)
        }
    }
}

/// The config name of a memory kind (`host`, `huge`, `host_pinned`, `device`).
pub const fn kind_name(kind: MemKind) -> &'static str {
    match kind {
        MemKind::Host => "host",
        MemKind::Huge => "huge",
        MemKind::HostPinned => "host_pinned",
        MemKind::Device => "device",
    }
}

/// A preallocated, prefaulted memory region; unmapped on drop.
///
/// `Send + Sync`: it owns its mapping exclusively; writing needs `&mut`.
///
/// # Panics
/// Dropping a region panics (with the errno) when `munmap` fails. That cannot happen for a
/// mapping this crate created unless memory was corrupted; continuing could let a device
/// write into memory that has been reused.
#[derive(Debug)]
pub struct Region {
    name: Box<str>,
    kind: MemKind,
    size: usize,
    numa_node: Option<u32>,
    huge_page: Option<HugePageSize>,
    locked: bool,
    map: Mapping,
}

impl Region {
    /// Allocates the region described by `spec`: maps it, binds it to `spec.numa_node`,
    /// faults every page in and locks it (`host`).
    ///
    /// # Errors
    /// - [`PlatformError::InvalidRegion`]: size 0, alignment not a power of two or too big.
    /// - [`PlatformError::NeedsGpu`]: `host_pinned` / `device`.
    /// - [`PlatformError::NumaNodeMissing`] / [`PlatformError::NumaBind`].
    /// - [`PlatformError::HugePageSizeUnsupported`] / [`PlatformError::HugePagesExhausted`]
    ///   (the message gives the pages needed, the pages free and the `echo N > ...` fix).
    /// - [`PlatformError::MemoryLockDenied`]: `mlock` not permitted and `spec.lock_required`
    ///   (otherwise a warning, once per process, and [`is_locked`](Self::is_locked) is false).
    /// - [`PlatformError::Map`], [`PlatformError::Prefault`], [`PlatformError::LockMemory`].
    pub fn allocate(spec: &RegionSpec<'_>) -> Result<Self> {
        Self::allocate_at(spec, Path::new("/"))
    }

    /// As [`allocate`](Self::allocate), reading sysfs (NUMA nodes, hugepage pools) below
    /// `root`.
    fn allocate_at(spec: &RegionSpec<'_>, root: &Path) -> Result<Self> {
        let invalid = |reason: String| PlatformError::InvalidRegion {
            region: spec.name.to_owned(),
            reason,
        };
        if spec.size == 0 {
            return Err(invalid("size is 0; give the region a size in bytes".into()));
        }
        if !spec.align.is_power_of_two() || spec.align > MAX_ALIGN {
            return Err(invalid(format!(
                "alignment {} is not a power of two between 1 and {MAX_ALIGN}",
                spec.align
            )));
        }
        let huge = match spec.kind {
            MemKind::Host => None,
            MemKind::Huge => Some(spec.huge_page),
            MemKind::HostPinned | MemKind::Device => {
                return Err(PlatformError::NeedsGpu {
                    region: spec.name.to_owned(),
                    kind: kind_name(spec.kind),
                })
            }
        };

        let bind_node = match spec.numa_node {
            Some(node) => numa_node_to_bind(spec.name, node, root)?,
            None => None,
        };
        if let Some(size) = huge {
            check_hugepages(spec, size, bind_node, root)?;
        }

        let map = Mapping::anonymous(spec.size, spec.align, huge).map_err(|source| match huge {
            Some(size) if source.raw_os_error() == Some(libc::ENOMEM) => exhausted(
                spec.name, spec.size, size, bind_node, root,
            )
            .unwrap_or(PlatformError::Map {
                region: spec.name.to_owned(),
                kind: kind_name(spec.kind),
                size: spec.size,
                source,
            }),
            _ => PlatformError::Map {
                region: spec.name.to_owned(),
                kind: kind_name(spec.kind),
                size: spec.size,
                source,
            },
        })?;
        let mut region = Region {
            name: spec.name.into(),
            kind: spec.kind,
            size: spec.size,
            numa_node: bind_node,
            huge_page: huge,
            locked: huge.is_some(),
            map,
        };
        if let Some(node) = bind_node {
            region
                .map
                .bind_to_node(node)
                .map_err(|source| PlatformError::NumaBind {
                    region: spec.name.to_owned(),
                    node,
                    source,
                })?;
        }
        prefault_at(&mut region, root)?;
        if huge.is_none() {
            region.locked = lock_region(&region, spec.lock_required)?;
        }
        Ok(region)
    }

    /// Region name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Kind of memory.
    pub fn kind(&self) -> MemKind {
        self.kind
    }

    /// Bytes usable (the spec's size).
    pub fn len(&self) -> usize {
        self.size
    }

    /// Always false (a region has at least one byte).
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Bytes mapped (the size rounded up to whole pages).
    pub fn mapped_len(&self) -> usize {
        self.map.len()
    }

    /// The NUMA node the pages are bound to (`None`: not bound).
    pub fn numa_node(&self) -> Option<u32> {
        self.numa_node
    }

    /// The hugepage size of a `huge` region.
    pub fn huge_page(&self) -> Option<HugePageSize> {
        self.huge_page
    }

    /// True when the pages cannot be swapped out: `mlock` succeeded (`host`) or hugetlb.
    pub fn is_locked(&self) -> bool {
        self.locked
    }

    /// Start address.
    pub fn as_ptr(&self) -> *const u8 {
        self.map.as_ptr()
    }

    /// Start address, for writing.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.map.as_ptr()
    }

    /// The region's bytes. For setup and tests: once a device writes into the region, access
    /// it through the engine's buffers, not through this slice.
    pub fn as_slice(&self) -> &[u8] {
        &self.map.as_slice()[..self.size]
    }

    /// The region's bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let size = self.size;
        &mut self.map.as_mut_slice()[..size]
    }

    pub(crate) fn mapping(&self) -> &Mapping {
        &self.map
    }
}

/// Faults every page of `region` in (see [`rt::prefault_region`]).
pub(crate) fn prefault(region: &mut Region) -> Result<()> {
    prefault_at(region, Path::new("/"))
}

fn prefault_at(region: &mut Region, root: &Path) -> Result<()> {
    let len = region.map.len();
    region.map.populate_write().map_err(|source| {
        let out_of_pages = matches!(
            source.raw_os_error(),
            Some(libc::EFAULT) | Some(libc::ENOMEM)
        );
        match region.huge_page {
            Some(size) if out_of_pages => {
                exhausted(&region.name, region.size, size, region.numa_node, root).unwrap_or(
                    PlatformError::Prefault {
                        region: region.name.to_string(),
                        size: len,
                        source,
                    },
                )
            }
            _ => PlatformError::Prefault {
                region: region.name.to_string(),
                size: len,
                source,
            },
        }
    })
}

/// `mlock`s a host region; `Ok(false)` when not permitted and not required.
fn lock_region(region: &Region, required: bool) -> Result<bool> {
    let what = format!("memory region `{}`", region.name);
    match region.map.lock() {
        Ok(()) => Ok(true),
        Err(e) if rt::is_memlock_privilege_error(&e) => {
            rt::degrade(
                Capability::IpcLock,
                rt::memlock_denied_message(&what, &e),
                "continuing with pageable memory (page faults possible on the real-time path)",
                required,
                |message| PlatformError::MemoryLockDenied { message },
            )?;
            Ok(false)
        }
        Err(source) => Err(PlatformError::LockMemory { what, source }),
    }
}

/// The node to `mbind` to: `Some(node)` when the host has it; `None` for node 0 on a kernel
/// without NUMA (everything is node 0 there); an error otherwise.
fn numa_node_to_bind(region: &str, node: u32, root: &Path) -> Result<Option<u32>> {
    let ids = topology::node_ids(root)?;
    if ids.contains(&node) {
        return Ok(Some(node));
    }
    if ids.is_empty() && node == 0 {
        log::debug!("memory region `{region}`: no NUMA on this host, node 0 needs no binding");
        return Ok(None);
    }
    let available = if ids.is_empty() {
        "none reported".to_owned()
    } else {
        ids.iter()
            .map(|&n| n as usize)
            .collect::<crate::CpuList>()
            .to_string()
    };
    Err(PlatformError::NumaNodeMissing {
        region: region.to_owned(),
        node,
        available,
    })
}

/// Fails early, with the fix, when the pool (or the node's share) has too few pages.
fn check_hugepages(
    spec: &RegionSpec<'_>,
    size: HugePageSize,
    node: Option<u32>,
    root: &Path,
) -> Result<()> {
    let dir = size.pool_dir(root);
    if !dir.is_dir() {
        return Err(PlatformError::HugePageSizeUnsupported {
            region: spec.name.to_owned(),
            size,
            sysfs_dir: dir,
        });
    }
    // Unreadable pool files: let mmap decide (and map its error then).
    let Ok(status) = pool_status(size, node, root) else {
        return Ok(());
    };
    let needed = hugepages::pages_needed(spec.size, size);
    if status.available() < needed {
        return Err(exhausted_error(spec.name, size, needed, node, &status));
    }
    Ok(())
}

fn pool_status(size: HugePageSize, node: Option<u32>, root: &Path) -> Result<HugepageStatus> {
    match node {
        Some(n) => hugepages::node_status(root, n, size),
        None => hugepages::status(root, size),
    }
}

/// The "too few hugepages" error from the current pool state; `None` when the pool cannot be
/// read (the caller falls back to the plain OS error).
fn exhausted(
    region: &str,
    bytes: usize,
    size: HugePageSize,
    node: Option<u32>,
    root: &Path,
) -> Option<PlatformError> {
    let status = pool_status(size, node, root).ok()?;
    let needed = hugepages::pages_needed(bytes, size);
    Some(exhausted_error(region, size, needed, node, &status))
}

fn exhausted_error(
    region: &str,
    size: HugePageSize,
    needed: u64,
    node: Option<u32>,
    status: &HugepageStatus,
) -> PlatformError {
    // When the pool looks big enough the pages went to someone else in between: still ask for
    // `needed` more than are free now.
    let free = status.available();
    let fix_total = status.total + needed.saturating_sub(free).max(1);
    PlatformError::HugePagesExhausted {
        region: region.to_owned(),
        size,
        needed,
        free,
        total: status.total,
        node,
        fix_total,
        sysfs_path: status.sysfs_path.clone(),
    }
}

// `Region` must stay `Send + Sync` (a `MemoryRegion` supertrait; regions move to I/O threads).
const _: () = {
    const fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<Region>();
};
