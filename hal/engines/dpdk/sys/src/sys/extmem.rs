//! [`ExtMem`]: memory DPDK does not own (the runtime's preallocated regions; later pinned
//! and GPU memory, issue #6), registered with DPDK as external memory
//! (`rte_extmem_register`) and DMA-mapped for the port devices (`rte_dev_dma_map`), so that
//! mbuf pools can keep their data buffers in it ([`Mempool::new_external`](crate::Mempool::new_external)).
//!
//! IOVA: in IOVA-as-VA mode (`--no-huge`, vfio with an IOMMU, `--iova-mode=va`) a page's
//! IOVA is its virtual address; in PA mode it is looked up per page (`rte_mem_virt2phy`,
//! root only) and buffers never straddle physically discontiguous pages (the mempool is
//! given one descriptor per IOVA-contiguous run). When no IOVA can be found the memory is
//! registered without one (`RTE_BAD_IOVA`): virtual devices do not need it, and
//! [`ExtMem::iova_known`] says so for callers that drive real DMA.
//!
//! GPU memory (a `device` region's pool, [`ExtMem::from_pool`]): registered at the GPU page
//! size (64 KiB) with no IOVA (`RTE_BAD_IOVA`) and mapped with `rte_dev_dma_map` at
//! `RTE_BAD_IOVA`, as DPDK's gpudev guide does: the CPU has no mapping to translate, and
//! the NIC's driver resolves the GPU pages itself (mlx5: `ibv_reg_mr` on the address, which
//! `nvidia-peermem` pins). Nothing here reads or writes such memory.
use std::sync::{Arc, Mutex};

use rtdaq_core::pool::{Buf, BufferPool};

use super::{raw, result};
use crate::error::{errno_name, DpdkError, Result};
use crate::Eal;

/// `RTE_BAD_IOVA`.
const BAD_IOVA: u64 = u64::MAX;

/// The page GPU memory is registered at (`GPU_PAGE_SIZE` of DPDK's gpudev: 64 KiB, the
/// granule NVIDIA GPUs pin for peer DMA). Device regions are allocated aligned to it.
pub const GPU_PAGE: usize = 64 << 10;

/// What [`ExtMem::dma_map`] did for one port's device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmaMapping {
    /// `rte_dev_dma_map` mapped the memory for the device (unmapped on drop).
    Mapped,
    /// The device was mapped before (by another port of the same device).
    AlreadyMapped,
    /// The bus/driver answered `ENOTSUP`: it needs no mapping (virtual devices, or a bus
    /// that DMAs by the IOVA the registration gave).
    NotNeeded,
}

/// A contiguous IOVA run inside the registered range: `(offset, len, iova)`.
type Run = (usize, usize, u64);

/// Memory registered with DPDK as external memory; unregistered (and DMA-unmapped from every
/// device [`dma_map`](Self::dma_map) mapped it for) on drop.
///
/// Shared through `Arc`: every [`Mempool`](crate::Mempool) whose data buffers live in it
/// holds one, so the registration outlives the pool (a pool leaked because mbufs are still in
/// use leaks its `ExtMem` too: the memory stays registered rather than vanish under them).
///
/// # Panics
/// Dropping panics (unless already unwinding) when DPDK refuses to unmap or unregister: a
/// failed teardown is a bug (style guide §3.5).
#[derive(Debug)]
pub struct ExtMem {
    addr: usize,
    /// Registered bytes (a multiple of `page_size`).
    len: usize,
    /// Bytes usable for buffers from `addr` (`<= len`: a pool's memory need not end on a
    /// page boundary; only the registration is rounded up).
    usable: usize,
    page_size: usize,
    runs: Vec<Run>,
    iova_known: bool,
    /// GPU memory: the CPU cannot address it (no IOVA lookup, never touched).
    device: bool,
    /// Devices mapped by `dma_map` (`struct rte_device *` as integers).
    mapped: Mutex<Vec<usize>>,
    /// The slots of the `BufferPool` the memory came from, held so that nobody else can
    /// hand them out; returned to the pool after the unregistration.
    lease: Vec<Buf<'static>>,
}

impl ExtMem {
    /// Registers `len` bytes at `addr` (both multiples of `page_size`, a power of two of at
    /// least 4 KiB: the memory's real page size) as DPDK external memory.
    ///
    /// # Safety
    /// `addr..addr + len` must be mapped, locked or otherwise pinned (devices may DMA into
    /// it) and stay valid until the returned `ExtMem` **and** every mempool and mbuf over it
    /// are gone; nothing else may use it meanwhile except through those mbufs.
    ///
    /// # Errors
    /// [`DpdkError::InvalidArgument`] for a misaligned range; [`DpdkError::ExtMem`] when
    /// `rte_extmem_register` refuses (`EEXIST`: overlaps a registered range).
    pub unsafe fn register(
        eal: &Eal,
        addr: *mut u8,
        len: usize,
        page_size: usize,
    ) -> Result<Arc<ExtMem>> {
        // SAFETY: forwarded contract; no pool lease; CPU memory.
        unsafe { Self::register_inner(eal, addr as usize, len, len, page_size, false, Vec::new()) }
            .map(Arc::new)
    }

    /// Registers the whole memory of a [`BufferPool`] (every slot, from
    /// [`BufferPool::base_addr`]) and takes **all** its slots, so the pool hands out nothing
    /// while DPDK owns the memory; they go back when the `ExtMem` is dropped. The
    /// registration is rounded up to `page_size` (the region's page size: the memory behind
    /// a pool is mapped in whole pages; for GPU memory the GPU page, [`GPU_PAGE`]); buffers
    /// are only ever placed inside the pool's `slot_count() × slot_size()` bytes.
    ///
    /// A pool that is not CPU-accessible is GPU memory (see the module docs): registered
    /// without IOVA, never touched by the CPU; [`is_device`](Self::is_device) says so.
    ///
    /// # Errors
    /// [`DpdkError::InvalidArgument`]: the pool has slots in use, or its base is not aligned
    /// to `page_size`; [`DpdkError::ExtMem`] when DPDK refuses.
    pub fn from_pool(
        eal: &Eal,
        pool: &'static BufferPool<'static>,
        page_size: usize,
    ) -> Result<Arc<ExtMem>> {
        let bad = |why: &'static str| DpdkError::InvalidArgument {
            what: "buffer pool for external memory",
            value: format!("{pool:?}"),
            why,
        };
        let device = !pool.is_cpu_accessible();
        if pool.in_use() != 0 {
            return Err(bad(
                "some of its slots are in use: DPDK must own the whole pool",
            ));
        }
        let usable = pool.slot_count() * pool.slot_size();
        let len = usable.div_ceil(page_size.max(1)) * page_size.max(1);
        let mut lease = Vec::with_capacity(pool.slot_count());
        while let Some(b) = pool.get() {
            lease.push(b);
        }
        if lease.len() != pool.slot_count() {
            return Err(bad(
                "another thread took slots meanwhile: DPDK must own the whole pool",
            ));
        }
        // SAFETY: the pool's memory is valid for 'static (the pool borrows it for 'static;
        // a GPU pool's device memory lives for the process) and, with every slot leased
        // here, used by nobody else until the ExtMem drops; buffers are only placed in the
        // first `usable` bytes (inside the pool's memory); the rounded-up tail is registered
        // (page granularity) but never written; GPU memory is never read (`device`).
        unsafe {
            Self::register_inner(
                eal,
                pool.base_addr() as usize,
                len,
                usable,
                page_size,
                device,
                lease,
            )
        }
        .map(Arc::new)
    }

    /// # Safety
    /// As [`register`](Self::register) for `addr..addr + usable`; `len >= usable`; with
    /// `device` the range is GPU memory in the process's (unified) address space, which the
    /// CPU does not map.
    unsafe fn register_inner(
        _eal: &Eal,
        addr: usize,
        len: usize,
        usable: usize,
        page_size: usize,
        device: bool,
        lease: Vec<Buf<'static>>,
    ) -> Result<ExtMem> {
        let bad = |why: &'static str| DpdkError::InvalidArgument {
            what: "external memory range",
            value: format!("{addr:#x}+{len} (page size {page_size})"),
            why,
        };
        if !page_size.is_power_of_two() || page_size < 4096 {
            return Err(bad("page size must be a power of two >= 4096"));
        }
        if addr == 0 || addr % page_size != 0 || len == 0 || len % page_size != 0 {
            return Err(bad(
                "address and length must be non-zero multiples of the page size",
            ));
        }
        let pages = len / page_size;
        // SAFETY: plain getter; the EAL is up (&Eal).
        let va_mode = unsafe { raw::rte_eal_iova_mode() } == raw::rte_iova_mode_RTE_IOVA_VA;
        let mut iova: Vec<u64> = (0..pages)
            .map(|p| {
                let va = addr + p * page_size;
                if device {
                    BAD_IOVA
                } else if va_mode {
                    va as u64
                } else {
                    // SAFETY: reads /proc/self/pagemap for a mapped address of ours.
                    unsafe { raw::rte_mem_virt2phy(va as *const std::ffi::c_void) }
                }
            })
            .collect();
        let iova_known = iova.iter().all(|&a| a != BAD_IOVA);
        if !iova_known {
            iova.iter_mut().for_each(|a| *a = BAD_IOVA);
        }
        let n_pages = u32::try_from(pages).map_err(|_| bad("more than 2^32 pages"))?;
        // SAFETY: the caller guarantees the range is ours and stays valid; the IOVA table
        // has n_pages entries (DPDK copies it) or is NULL (no IOVA).
        let rc = unsafe {
            raw::rte_extmem_register(
                addr as *mut std::ffi::c_void,
                len,
                if iova_known {
                    iova.as_mut_ptr()
                } else {
                    std::ptr::null_mut()
                },
                n_pages,
                page_size,
            )
        };
        result::minus_one_rte_errno(rc)
            .map_err(|errno| ext_err("rte_extmem_register", addr, len, errno))?;
        // IOVA-contiguous runs of the usable part (one in VA mode or without IOVA).
        let mut runs: Vec<Run> = Vec::new();
        for (p, &page_iova) in iova.iter().enumerate() {
            let off = p * page_size;
            if off >= usable {
                break;
            }
            let l = page_size.min(usable - off);
            match runs.last_mut() {
                Some((o, rl, io))
                    if *o + *rl == off && (!iova_known || *io + *rl as u64 == page_iova) =>
                {
                    *rl += l;
                }
                _ => runs.push((off, l, page_iova)),
            }
        }
        Ok(ExtMem {
            addr,
            len,
            usable,
            page_size,
            runs,
            iova_known,
            device,
            mapped: Mutex::new(Vec::new()),
            lease,
        })
    }

    /// DMA-maps the memory for the device behind port `port_id` (`rte_dev_dma_map`), once per
    /// device. A bus or driver answering `ENOTSUP` (virtual devices) needs no mapping:
    /// [`DmaMapping::NotNeeded`].
    ///
    /// # Errors
    /// [`DpdkError::ExtMem`] when the mapping fails otherwise, or the port has no device.
    pub fn dma_map(&self, port_id: u16) -> Result<DmaMapping> {
        // SAFETY: any port id may be asked; NULL for an invalid one.
        let dev = unsafe { raw::rtdaq_port_device(port_id) };
        if dev.is_null() {
            return Err(ext_err(
                "rte_eth_dev_info_get (device)",
                self.addr,
                self.len,
                19,
            ));
        }
        let mut mapped = self.mapped.lock().unwrap_or_else(|p| p.into_inner());
        if mapped.contains(&(dev as usize)) {
            return Ok(DmaMapping::AlreadyMapped);
        }
        for &(off, len, iova) in self.dma_runs() {
            // SAFETY: dev is a live device; the range was registered by self (a
            // precondition of rte_dev_dma_map) and stays so while self lives.
            let rc = unsafe {
                raw::rte_dev_dma_map(dev, (self.addr + off) as *mut std::ffi::c_void, iova, len)
            };
            if let Err(errno) = result::minus_one_rte_errno(rc) {
                if errno == 95 && off == 0 {
                    return Ok(DmaMapping::NotNeeded);
                }
                return Err(ext_err("rte_dev_dma_map", self.addr + off, len, errno));
            }
        }
        mapped.push(dev as usize);
        Ok(DmaMapping::Mapped)
    }

    /// The IOVA-contiguous runs of the usable part.
    fn dma_runs(&self) -> &[Run] {
        &self.runs
    }

    /// Start address.
    pub fn addr(&self) -> usize {
        self.addr
    }

    /// Registered bytes (a multiple of the page size).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false (a registration has at least one page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes usable for buffers from the start.
    pub fn usable(&self) -> usize {
        self.usable
    }

    /// The page size it was registered with.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// True for GPU memory (a pool that is not CPU-accessible): registered and mapped
    /// without IOVA, never read by the CPU.
    pub fn is_device(&self) -> bool {
        self.device
    }

    /// True when every page has an IOVA (always in VA mode; in PA mode when
    /// `rte_mem_virt2phy` could translate every page, i.e. as root).
    pub fn iova_known(&self) -> bool {
        self.iova_known
    }

    /// `rte_pktmbuf_extmem` descriptors for buffers of `elt_size` bytes: one per
    /// IOVA-contiguous run (buffers never straddle two runs). Returns them and the number of
    /// buffers they hold.
    pub(crate) fn descriptors(&self, elt_size: usize) -> (Vec<raw::rte_pktmbuf_extmem>, u64) {
        let mut total = 0u64;
        let ds = self
            .runs
            .iter()
            .filter(|&&(_, len, _)| len >= elt_size)
            .map(|&(off, len, iova)| {
                total += (len / elt_size) as u64;
                raw::rte_pktmbuf_extmem {
                    buf_ptr: (self.addr + off) as *mut std::ffi::c_void,
                    buf_iova: iova,
                    buf_len: len,
                    elt_size: elt_size as u16,
                }
            })
            .collect();
        (ds, total)
    }
}

fn ext_err(op: &'static str, addr: usize, len: usize, errno: i32) -> DpdkError {
    DpdkError::ExtMem {
        op,
        addr,
        len,
        errno,
        errno_name: errno_name(errno),
        msg: result::strerror(errno),
        fix: match errno {
            17 => "the range overlaps memory registered before: register each region once",
            22 => "address/length not page-aligned or IOVA table wrong: check the region's page size",
            12 => "DPDK has no room for another memory segment list: raise RTE_MAX_MEMSEG_LISTS or use fewer regions",
            _ => "see the EAL log above",
        },
    }
}

impl Drop for ExtMem {
    fn drop(&mut self) {
        let mapped = std::mem::take(self.mapped.get_mut().unwrap_or_else(|p| p.into_inner()));
        let mut failed: Option<(&'static str, i32)> = None;
        for dev in mapped {
            for &(off, len, iova) in &self.runs {
                // SAFETY: the device was mapped by dma_map with exactly these arguments and
                // every mempool over this memory is gone (they hold an Arc of self).
                let rc = unsafe {
                    raw::rte_dev_dma_unmap(
                        dev as *mut raw::rte_device,
                        (self.addr + off) as *mut std::ffi::c_void,
                        iova,
                        len,
                    )
                };
                if let Err(e) = result::minus_one_rte_errno(rc) {
                    failed.get_or_insert(("rte_dev_dma_unmap", e));
                }
            }
        }
        // SAFETY: registered by self with this range; no mempool uses it any more.
        let rc =
            unsafe { raw::rte_extmem_unregister(self.addr as *mut std::ffi::c_void, self.len) };
        if let Err(e) = result::minus_one_rte_errno(rc) {
            failed.get_or_insert(("rte_extmem_unregister", e));
        }
        // The pool's slots go back (dropping the leased Bufs).
        self.lease.clear();
        if let Some((op, e)) = failed {
            if !std::thread::panicking() {
                panic!(
                    "{op} of external memory {:#x}+{} failed: {} ({}): DPDK still uses it",
                    self.addr,
                    self.len,
                    result::strerror(e),
                    errno_name(e)
                );
            }
        }
    }
}
