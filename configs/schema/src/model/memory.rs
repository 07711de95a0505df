//! Memory regions (`[[memory_regions]]`) and their footprint arithmetic.

use serde::Deserialize;

/// Where a region's buffers live (`memory_regions[].kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RegionKind {
    /// Ordinary pages, locked (`host`).
    Host,
    /// Hugepages (`huge`), 2 MiB or 1 GiB.
    Huge,
    /// CUDA pinned host memory (`host_pinned`): CPU memory registered with a GPU.
    HostPinned,
    /// GPU device memory (`device`).
    Device,
}

impl RegionKind {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RegionKind::Host => "host",
            RegionKind::Huge => "huge",
            RegionKind::HostPinned => "host_pinned",
            RegionKind::Device => "device",
        }
    }

    /// True for kinds placed by `gpu` id (`host_pinned`, `device`); false for CPU kinds
    /// placed by `numa_node`.
    pub fn is_gpu(self) -> bool {
        matches!(self, RegionKind::HostPinned | RegionKind::Device)
    }

    /// Per-buffer alignment in bytes: 128 for CPU kinds, 256 for GPU kinds.
    pub fn buffer_align(self) -> u64 {
        if self.is_gpu() {
            256
        } else {
            128
        }
    }

    /// The matching `rtdaq-core` kind.
    pub fn mem_kind(self) -> rtdaq_core::traits::MemKind {
        use rtdaq_core::traits::MemKind;
        match self {
            RegionKind::Host => MemKind::Host,
            RegionKind::Huge => MemKind::Huge,
            RegionKind::HostPinned => MemKind::HostPinned,
            RegionKind::Device => MemKind::Device,
        }
    }
}

/// Hugepage size (`memory_regions[].page_size`, `huge` regions only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Default)]
pub enum PageSize {
    /// 2 MiB pages (`"2M"`, default).
    #[default]
    #[serde(rename = "2M")]
    Size2M,
    /// 1 GiB pages (`"1G"`).
    #[serde(rename = "1G")]
    Size1G,
}

impl PageSize {
    /// Page size in bytes.
    pub fn bytes(self) -> u64 {
        match self {
            PageSize::Size2M => 2 << 20,
            PageSize::Size1G => 1 << 30,
        }
    }

    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PageSize::Size2M => "2M",
            PageSize::Size1G => "1G",
        }
    }
}

/// Where a region is placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placement {
    /// CPU kinds: this NUMA node.
    Numa(u32),
    /// GPU kinds: this CUDA device ordinal.
    Gpu(u32),
}

/// One memory region: `buf_count` fixed-size buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryRegion {
    /// Unique name.
    pub name: String,
    /// Memory kind.
    pub kind: RegionKind,
    /// Bytes per buffer (before alignment).
    pub buf_size: u32,
    /// Number of buffers.
    pub buf_count: u32,
    /// NUMA node or GPU.
    pub placement: Placement,
    /// Hugepage size (`Some` exactly for `huge`).
    pub page_size: Option<PageSize>,
}

impl MemoryRegion {
    /// Bytes between consecutive buffers: `buf_size` rounded up to [`RegionKind::buffer_align`].
    pub fn stride(&self) -> u64 {
        round_up(u64::from(self.buf_size), self.kind.buffer_align())
    }

    /// Allocation granule: 4 KiB pages for `host`/`host_pinned`, the hugepage size for `huge`,
    /// 2 MiB for `device` (CUDA VMM granularity).
    pub fn granule(&self) -> u64 {
        match self.kind {
            RegionKind::Host | RegionKind::HostPinned => 4096,
            RegionKind::Huge => self.page_size.unwrap_or_default().bytes(),
            RegionKind::Device => 2 << 20,
        }
    }

    /// Bytes the region occupies: `stride × buf_count` rounded up to the granule.
    pub fn footprint(&self) -> u64 {
        round_up(
            self.stride().saturating_mul(u64::from(self.buf_count)),
            self.granule(),
        )
    }

    /// Hugepages of [`page_size`](Self::page_size) it needs (0 for other kinds).
    pub fn hugepages(&self) -> u64 {
        match (self.kind, self.page_size) {
            (RegionKind::Huge, Some(p)) => self.footprint() / p.bytes(),
            _ => 0,
        }
    }
}

/// Rounds `v` up to a multiple of `to` (non-zero), saturating at `u64::MAX`.
pub(crate) fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to).saturating_mul(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footprint_rounds_stride_and_granule() {
        let r = MemoryRegion {
            name: "r".into(),
            kind: RegionKind::Huge,
            buf_size: 1600,
            buf_count: 1000,
            placement: Placement::Numa(0),
            page_size: Some(PageSize::Size2M),
        };
        assert_eq!(r.stride(), 1664);
        assert_eq!(r.footprint(), 2 << 20);
        assert_eq!(r.hugepages(), 1);
        let d = MemoryRegion {
            kind: RegionKind::Device,
            placement: Placement::Gpu(0),
            page_size: None,
            ..r
        };
        assert_eq!(d.stride(), 1792);
    }
}
