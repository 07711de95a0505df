//! [`Mempool`]: a DPDK mbuf pool, freed on drop.
use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::extmem::ExtMem;
use super::mbuf::{Mbuf, MbufBurst};
use super::{raw, result};
use crate::error::{errno_name, DpdkError, Result};
use crate::Eal;

/// `RTE_MEMPOOL_NAMESIZE` (a macro expression bindgen cannot evaluate): 32 - 4 - 4 + 2.
const MEMPOOL_NAMESIZE: usize = 26;

/// The mempools whose data buffers are GPU memory (over a device [`ExtMem`]), as addresses:
/// [`Mbuf`]'s byte accessors look a segment's pool up here and never make a slice over
/// such a buffer. Registered by [`Mempool::new_external`], removed when the pool is freed.
static DEVICE_POOLS: [AtomicUsize; 16] = [const { AtomicUsize::new(0) }; 16];
/// Entries of [`DEVICE_POOLS`] in use (0: the lookup is one load).
static DEVICE_POOL_COUNT: AtomicUsize = AtomicUsize::new(0);

/// True when `pool` (an `rte_mempool *`) keeps its data buffers in GPU memory. Never
/// allocates; one load when no such pool exists.
#[inline]
pub(crate) fn is_device_pool(pool: *const raw::rte_mempool) -> bool {
    if DEVICE_POOL_COUNT.load(Ordering::Acquire) == 0 {
        return false;
    }
    let p = pool as usize;
    DEVICE_POOLS.iter().any(|e| e.load(Ordering::Acquire) == p)
}

fn register_device_pool(pool: *const raw::rte_mempool) -> bool {
    for e in &DEVICE_POOLS {
        if e.compare_exchange(0, pool as usize, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            DEVICE_POOL_COUNT.fetch_add(1, Ordering::AcqRel);
            return true;
        }
    }
    false
}

fn unregister_device_pool(pool: *const raw::rte_mempool) {
    for e in &DEVICE_POOLS {
        if e.compare_exchange(pool as usize, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            DEVICE_POOL_COUNT.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Parameters of an mbuf pool (`rte_pktmbuf_pool_create`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MempoolConfig {
    /// Number of mbufs (best a power of two minus one).
    pub n: u32,
    /// Per-lcore cache size (0 for none; at most 512 and `n / 1.5`).
    pub cache_size: u32,
    /// Data room per mbuf including the headroom ([`MempoolConfig::DEFAULT_DATA_ROOM`]).
    pub data_room: u16,
    /// NUMA socket, `None` for any (`SOCKET_ID_ANY`).
    pub socket: Option<u32>,
}

impl MempoolConfig {
    /// `RTE_MBUF_DEFAULT_BUF_SIZE`: 2048 B of data after a 128 B headroom.
    pub const DEFAULT_DATA_ROOM: u16 = 2048 + raw::RTE_PKTMBUF_HEADROOM as u16;
}

impl Default for MempoolConfig {
    fn default() -> Self {
        Self {
            n: 8191,
            cache_size: 256,
            data_room: Self::DEFAULT_DATA_ROOM,
            socket: None,
        }
    }
}

/// An mbuf pool. Shared through `Arc` (the ports whose RX queues fill from it keep it
/// alive); `Send + Sync` (DPDK mempools are multi-producer/multi-consumer).
///
/// # Resource cleanup
/// Dropped (`rte_mempool_free`) when the last `Arc` goes — unless mbufs of it are still
/// alive somewhere (`in_use() > 0`), in which case the pool is leaked rather than freed
/// under them.
#[derive(Debug)]
pub struct Mempool {
    ptr: NonNull<raw::rte_mempool>,
    name: String,
    /// Mbufs in the pool.
    size: u32,
    /// Data room per mbuf (headroom included).
    data_room: u16,
    /// The external memory holding the data buffers (pools of [`Mempool::new_external`]).
    ext: Option<Arc<ExtMem>>,
}

// SAFETY: an rte_mempool is designed for concurrent use from any thread (MP/MC ring ops by
// default); this handle only calls thread-safe functions on it.
unsafe impl Send for Mempool {}
// SAFETY: as above: every method takes &self and calls thread-safe DPDK functions.
unsafe impl Sync for Mempool {}

impl Mempool {
    /// Creates a pool of `cfg.n` packet mbufs named `name` (unique in the process, at most
    /// 25 characters).
    ///
    /// # Errors
    /// [`DpdkError::Mempool`] (`ENOMEM`: not enough EAL memory — raise `-m` or reserve
    /// hugepages; `EEXIST`: the name is taken; `EINVAL`: cache size too large),
    /// [`DpdkError::InvalidArgument`] for a bad name.
    pub fn new(_eal: &Eal, name: &str, cfg: &MempoolConfig) -> Result<Arc<Mempool>> {
        let c_name = check_name(name)?;
        let socket = cfg.socket.map_or(-1, |s| s as i32);
        // SAFETY: c_name is a valid C string for the call (DPDK copies it); the numeric
        // arguments are plain values; the EAL is initialised (&Eal).
        let p = unsafe {
            raw::rte_pktmbuf_pool_create(
                c_name.as_ptr(),
                cfg.n,
                cfg.cache_size,
                0,
                cfg.data_room,
                socket,
            )
        };
        let ptr = result::null_rte_errno(p).map_err(|errno| pool_error(name, cfg, errno))?;
        Ok(Arc::new(Mempool {
            ptr,
            name: name.to_owned(),
            size: cfg.n,
            data_room: cfg.data_room,
            ext: None,
        }))
    }

    /// Like [`Mempool::new`], with mempool layout `flags` (`RTE_MEMPOOL_F_*`, see
    /// [`MempoolFlags`]): the steps of `rte_pktmbuf_pool_create` done by the C shim with
    /// `flags` given to `rte_mempool_create_empty`. Each mbuf then takes
    /// [`Mempool::object_size`]`(cfg.data_room, flags)` bytes.
    ///
    /// With `tile_pages` the object size must divide the pool's page size (4 KiB under
    /// `--no-huge`, else the hugepage size; e.g. a power of two up to 4096): the pool is
    /// populated from one memzone aligned to that page, object `k` exactly `k × object size`
    /// from its start, with no gap and none crossing a page. Without it DPDK's default
    /// population applies (objects never cross a page either, so an object that does not
    /// divide the page leaves a gap at the end of every page, and the first object may
    /// start a page after the memory does).
    ///
    /// # Errors
    /// As [`Mempool::new`]; `EINVAL` also when `tile_pages` is asked for objects that do not
    /// divide the page.
    pub fn with_flags(
        _eal: &Eal,
        name: &str,
        cfg: &MempoolConfig,
        flags: MempoolFlags,
        tile_pages: bool,
    ) -> Result<Arc<Mempool>> {
        let c_name = check_name(name)?;
        let socket = cfg.socket.map_or(-1, |s| s as i32);
        // SAFETY: c_name is a valid C string for the call (DPDK copies it); the numeric
        // arguments are plain values; the EAL is initialised (&Eal).
        let p = unsafe {
            raw::rtdaq_pktmbuf_pool_create_flags(
                c_name.as_ptr(),
                cfg.n,
                cfg.cache_size,
                cfg.data_room,
                socket,
                flags.0,
                i32::from(tile_pages),
            )
        };
        let ptr = result::null_rte_errno(p).map_err(|errno| pool_error(name, cfg, errno))?;
        Ok(Arc::new(Mempool {
            ptr,
            name: name.to_owned(),
            size: cfg.n,
            data_room: cfg.data_room,
            ext: None,
        }))
    }

    /// Bytes one mbuf with `data_room` takes in a pool created with `flags`: mempool object
    /// header + `struct rte_mbuf` + data room + trailer (`rte_mempool_calc_obj_size`; with
    /// [`MempoolFlags::NONE`] DPDK pads it to an odd number of cache lines).
    pub fn object_size(data_room: u16, flags: MempoolFlags) -> u32 {
        // SAFETY: a pure computation on plain values.
        unsafe { raw::rtdaq_pktmbuf_obj_size(data_room, flags.0) }
    }

    /// Where this pool's mbufs lie relative to the AF_XDP UMEM that DPDK 22.11's
    /// `net_af_xdp` lays over a pool (see [`UmemFit`]). Walks every object: set-up only.
    pub fn umem_fit(&self) -> UmemFit {
        let mut f = raw::rtdaq_umem_fit {
            objects: 0,
            chunks: 0,
            obj_size: 0,
            umem_len: 0,
            span: 0,
            outside: 0,
            first_outside: 0,
        };
        // SAFETY: ptr is a live, populated pool (owned by self); f is a valid out pointer;
        // the walk only reads the pool's memory list and object addresses.
        let rc = unsafe { raw::rtdaq_mempool_umem_fit(self.ptr.as_ptr(), &mut f) };
        UmemFit {
            objects: f.objects,
            chunks: f.chunks,
            obj_size: f.obj_size,
            umem_len: f.umem_len,
            span: f.span,
            outside: if rc == 0 {
                f.outside
            } else {
                u64::from(self.size)
            },
            first_outside: f.first_outside,
        }
    }

    /// Creates a pool whose mbuf **data buffers live in `ext`** (pinned external buffers,
    /// `rte_pktmbuf_pool_create_extbuf`); only the mbuf headers (~192 B each) come from DPDK
    /// memory. Each buffer is `cfg.data_room` bytes (headroom included) rounded up to 64 B
    /// (cache line), laid out back to back from the start of `ext` (one run per
    /// IOVA-contiguous part); `cfg.n` mbufs, or as many as fit when `cfg.n` is 0. The pool
    /// holds an `Arc` of `ext`, so the registration outlives it.
    ///
    /// # Errors
    /// [`DpdkError::Mempool`] (`ENOMEM`: `ext` holds fewer than `cfg.n` buffers, or no EAL
    /// memory for the headers), [`DpdkError::InvalidArgument`] for a bad name.
    pub fn new_external(
        _eal: &Eal,
        name: &str,
        cfg: &MempoolConfig,
        ext: &Arc<ExtMem>,
    ) -> Result<Arc<Mempool>> {
        let c_name = check_name(name)?;
        let elt = usize::from(cfg.data_room).div_ceil(64) * 64;
        let (descs, fit) = ext.descriptors(elt.min(usize::from(u16::MAX)));
        let n = if cfg.n == 0 {
            fit.min(u64::from(u32::MAX)) as u32
        } else {
            cfg.n
        };
        let socket = cfg.socket.map_or(-1, |s| s as i32);
        let mk_err = |errno: i32| {
            DpdkError::Mempool {
            name: name.to_owned(),
            n,
            data_room: cfg.data_room,
            errno,
            errno_name: errno_name(errno),
            msg: result::strerror(errno),
            fix: match errno {
                12 if u64::from(n) > fit => "the external memory holds fewer buffers than asked: enlarge the region (buf_count) or lower the count",
                12 => "not enough EAL memory for the mbuf headers: raise -m (with --no-huge) or reserve more hugepages",
                17 => "a pool of that name exists: use a unique name",
                22 => "cache_size must be <= 512 and <= n / 1.5, and the data room must fit a buffer",
                _ => "see the EAL log",
            },
        }
        };
        if n == 0 || descs.is_empty() {
            return Err(mk_err(12));
        }
        // SAFETY: c_name is a valid C string; descs describe memory registered by `ext`
        // (kept alive by the pool through the Arc below) and is copied by DPDK's init loop
        // before the call returns; the EAL is initialised.
        let p = unsafe {
            raw::rte_pktmbuf_pool_create_extbuf(
                c_name.as_ptr(),
                n,
                cfg.cache_size,
                0,
                cfg.data_room,
                socket,
                descs.as_ptr(),
                descs.len() as u32,
            )
        };
        let ptr = result::null_rte_errno(p).map_err(mk_err)?;
        let pool = Arc::new(Mempool {
            ptr,
            name: name.to_owned(),
            size: n,
            data_room: cfg.data_room,
            ext: Some(Arc::clone(ext)),
        });
        if ext.is_device() && !register_device_pool(ptr.as_ptr()) {
            // Dropping `pool` frees it (no mbuf of it exists yet).
            return Err(DpdkError::InvalidArgument {
                what: "mempool over GPU memory",
                value: name.to_owned(),
                why: "more than 16 pools over GPU memory in one process",
            });
        }
        Ok(pool)
    }

    /// Number of mbufs.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Data room per mbuf, headroom included.
    pub fn data_room(&self) -> u16 {
        self.data_room
    }

    /// The external memory of a [`Mempool::new_external`] pool.
    pub fn external(&self) -> Option<&Arc<ExtMem>> {
        self.ext.as_ref()
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Free mbufs, including those in per-lcore caches (`rte_mempool_avail_count`).
    pub fn available(&self) -> u32 {
        // SAFETY: ptr is a live pool (owned by self).
        unsafe { raw::rte_mempool_avail_count(self.ptr.as_ptr()) }
    }

    /// Allocated mbufs (`rte_mempool_in_use_count`).
    pub fn in_use(&self) -> u32 {
        // SAFETY: ptr is a live pool (owned by self).
        unsafe { raw::rte_mempool_in_use_count(self.ptr.as_ptr()) }
    }

    /// One reset mbuf (length 0), or `None` when the pool is empty. Never allocates memory.
    pub fn alloc(&self) -> Option<Mbuf> {
        // SAFETY: ptr is a live pool; the returned mbuf (if any) is exclusively ours.
        let m = unsafe { raw::rtdaq_pktmbuf_alloc(self.ptr.as_ptr()) };
        NonNull::new(m).map(Mbuf::from_non_null)
    }

    /// Like [`Mempool::alloc`], for cold paths: an error naming the pool when empty.
    ///
    /// # Errors
    /// [`DpdkError::PoolEmpty`].
    pub fn try_alloc(&self) -> Result<Mbuf> {
        self.alloc().ok_or_else(|| DpdkError::PoolEmpty {
            name: self.name.clone(),
            in_use: self.in_use(),
        })
    }

    /// Appends `n` fresh mbufs to `burst`, all or none (`rte_pktmbuf_alloc_bulk`). Returns
    /// `false` (burst unchanged) when the pool has fewer than `n` free or the burst has no
    /// room for `n`. Never allocates memory.
    pub fn alloc_bulk(&self, burst: &mut MbufBurst, n: usize) -> bool {
        let Some(tail) = burst.spare_tail(n) else {
            return false;
        };
        // SAFETY: tail points to n writable, empty (None) slots whose layout is that of
        // `*mut rte_mbuf` (Option<Mbuf> is a nullable NonNull); ptr is a live pool.
        let rc = unsafe { raw::rtdaq_pktmbuf_alloc_bulk(self.ptr.as_ptr(), tail, n as u32) };
        if rc != 0 {
            return false;
        }
        // SAFETY: the call filled exactly those n slots with valid owned mbufs.
        unsafe { burst.commit_tail(n) };
        true
    }

    /// The raw pool pointer (escape hatch; valid while `self` lives).
    pub fn as_ptr(&self) -> *mut raw::rte_mempool {
        self.ptr.as_ptr()
    }
}

/// The error of a failed DPDK-memory pool creation.
fn pool_error(name: &str, cfg: &MempoolConfig, errno: i32) -> DpdkError {
    DpdkError::Mempool {
        name: name.to_owned(),
        n: cfg.n,
        data_room: cfg.data_room,
        errno,
        errno_name: errno_name(errno),
        msg: result::strerror(errno),
        fix: match errno {
            12 => "not enough EAL memory: raise -m (with --no-huge) or reserve more hugepages",
            17 => "a pool of that name exists: use a unique name",
            22 => "cache_size must be <= 512 and <= n / 1.5 (and, tiling pages, the object size must divide the page size)",
            95 | 2 => "the mempool driver (librte_mempool_ring) did not load: check the PMD directory / -d",
            _ => "see the EAL log",
        },
    }
}

/// The system page size (`getpagesize()`): what `net_af_xdp` aligns its UMEM to, and the
/// largest AF_XDP frame (UMEM chunk) the kernel takes outside hugepages.
pub fn page_size() -> usize {
    // SAFETY: getpagesize() has no preconditions.
    unsafe { raw::rtdaq_page_size() as usize }
}

/// Mempool layout flags (`RTE_MEMPOOL_F_*`) for [`Mempool::with_flags`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MempoolFlags(u32);

impl MempoolFlags {
    /// DPDK's default layout (what [`Mempool::new`] gets): objects padded to an odd number
    /// of cache lines, spread over memory channels.
    pub const NONE: MempoolFlags = MempoolFlags(0);
    /// `RTE_MEMPOOL_F_NO_SPREAD`: no padding for memory channels, so an object is exactly
    /// header + mbuf + data room rounded up to a cache line (e.g. a power of two).
    pub const NO_SPREAD: MempoolFlags = MempoolFlags(raw::RTDAQ_MEMPOOL_F_NO_SPREAD);

    /// The raw `RTE_MEMPOOL_F_*` bits.
    pub fn bits(self) -> u32 {
        self.0
    }
}

/// Where a pool's mbufs lie relative to the AF_XDP UMEM that DPDK 22.11's `net_af_xdp`
/// builds over the pool ([`Mempool::umem_fit`]).
///
/// That PMD registers one UMEM starting at the page-aligned address of the pool's first
/// memory chunk, `populated_size × obj_size` (+ the chunk's offset in its page) long, as if
/// the objects followed each other with no gap, and posts each mbuf to the fill ring as the
/// UMEM offset of its object header. DPDK's default population never lets an object cross a
/// page boundary (a page of its own for a 2368 B mbuf with 4 KiB pages, i.e. `--no-huge`),
/// so the objects spread further than that: the kernel drops the fill-ring entries of the
/// mbufs beyond the UMEM as invalid (they never come back), and once the fill ring holds only
/// those, the socket drops every frame (`imissed`) — the port stops receiving for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UmemFit {
    /// Objects in the pool.
    pub objects: u64,
    /// Memory chunks of the pool.
    pub chunks: u64,
    /// Bytes per object (the UMEM frame size the PMD registers).
    pub obj_size: u64,
    /// Length of the UMEM the PMD registers.
    pub umem_len: u64,
    /// From the UMEM start to the end of the last object.
    pub span: u64,
    /// Objects not wholly inside the UMEM.
    pub outside: u64,
    /// Index (memory order) of the first object outside; `objects` if none.
    pub first_outside: u64,
}

impl UmemFit {
    /// Every mbuf of the pool lies inside the UMEM.
    pub fn fits(&self) -> bool {
        self.outside == 0 && self.objects > 0
    }
}

fn check_name(name: &str) -> Result<CString> {
    let bad_name = |why| DpdkError::InvalidArgument {
        what: "mempool name",
        value: name.to_owned(),
        why,
    };
    if name.len() >= MEMPOOL_NAMESIZE {
        return Err(bad_name(
            "longer than 25 bytes (RTE_MEMPOOL_NAMESIZE minus the ring prefix)",
        ));
    }
    CString::new(name).map_err(|_| bad_name("contains a NUL byte"))
}

impl Drop for Mempool {
    fn drop(&mut self) {
        if self.in_use() != 0 {
            // Live mbufs point into this pool: freeing it would make them dangle; its
            // external memory stays registered for the same reason.
            if let Some(ext) = self.ext.take() {
                std::mem::forget(ext);
            }
            return;
        }
        unregister_device_pool(self.ptr.as_ptr());
        // SAFETY: no mbuf of the pool is in use and no Port references it (ports hold an
        // Arc), so nothing can touch it after this.
        unsafe { raw::rte_mempool_free(self.ptr.as_ptr()) };
    }
}
