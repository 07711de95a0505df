//! Devices, contexts, protection domains, memory regions, completion queues.
use std::ffi::{c_int, CStr};
use std::ptr::NonNull;
use std::sync::Arc;

use rtdaq_core::traits::DmaTarget;
use rtdaq_core::BufferPool;

use super::raw;
use super::result::{errno, non_null, zero_or_errno};
use crate::error::{IbError, Result};

/// The RDMA devices of this host (`ibv_get_device_list`).
pub struct DeviceList {
    list: NonNull<*mut raw::ibv_device>,
    n: usize,
}

impl DeviceList {
    /// Lists the devices. No RDMA in the kernel (`ENOSYS`), no device, or any other failure
    /// is [`IbError::NoDevice`], never a panic.
    ///
    /// # Errors
    /// [`IbError::NoDevice`].
    pub fn get() -> Result<DeviceList> {
        let mut n: c_int = 0;
        // SAFETY: n is a valid out pointer; the list is freed in Drop.
        let p = unsafe { raw::ibv_get_device_list(&mut n) };
        let Some(list) = NonNull::new(p) else {
            let e = errno();
            return Err(IbError::NoDevice {
                detail: format!(
                    "ibv_get_device_list failed ({}, errno {e}: {})",
                    crate::error::errno_name(e),
                    std::io::Error::from_raw_os_error(e)
                ),
            });
        };
        let dl = DeviceList {
            list,
            n: n.max(0) as usize,
        };
        if dl.n == 0 {
            return Err(IbError::NoDevice {
                detail: "ibv_get_device_list returned no device (no RDMA NIC and no Soft-RoCE \
                         link: `rdma link add rxe0 type rxe netdev <if>`)"
                    .into(),
            });
        }
        Ok(dl)
    }

    /// Number of devices.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True when there is none (never: [`get`](Self::get) refuses an empty list).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Device names (`mlx5_0`, `rxe0`, ...).
    pub fn names(&self) -> Vec<String> {
        (0..self.n).map(|i| self.name(i)).collect()
    }

    fn name(&self, i: usize) -> String {
        // SAFETY: i < n, the list holds n valid device pointers while self lives.
        unsafe { device_name(*self.list.as_ptr().add(i)) }
    }

    /// Opens device `name`.
    ///
    /// # Errors
    /// [`IbError::NoDevice`] when there is no such device; [`IbError::Call`] when
    /// `ibv_open_device` fails.
    pub fn open(&self, name: &str) -> Result<Context> {
        let i = (0..self.n)
            .find(|&i| self.name(i) == name)
            .ok_or_else(|| IbError::NoDevice {
                detail: format!("no device named {name:?} (present: {:?})", self.names()),
            })?;
        // SAFETY: i < n; the device pointer is valid while the list lives; the context
        // stays valid after the list is freed (libibverbs keeps the device referenced).
        let ctx = unsafe { raw::ibv_open_device(*self.list.as_ptr().add(i)) };
        let ctx = non_null(ctx, "ibv_open_device")?;
        Ok(Context(Arc::new(ContextInner {
            ptr: ctx,
            owned: true,
        })))
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: the list came from ibv_get_device_list and is freed once.
        unsafe { raw::ibv_free_device_list(self.list.as_ptr()) }
    }
}

pub(crate) struct ContextInner {
    pub(crate) ptr: NonNull<raw::ibv_context>,
    owned: bool,
}

// SAFETY: ibv_context is thread-safe for the verbs this crate calls on it.
unsafe impl Send for ContextInner {}
// SAFETY: as above.
unsafe impl Sync for ContextInner {}

impl Drop for ContextInner {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: opened by ibv_open_device, closed once, after every PD/CQ/QP of it
            // (they hold an Arc of this inner).
            let rc = unsafe { raw::ibv_close_device(self.ptr.as_ptr()) };
            debug_assert_eq!(rc, 0, "ibv_close_device");
        }
    }
}

/// The name of `dev` (empty for a null device or name).
///
/// # Safety
/// `dev` is null or a device pointer valid for the call.
unsafe fn device_name(dev: *mut raw::ibv_device) -> String {
    if dev.is_null() {
        return String::new();
    }
    // SAFETY: valid device (caller); ibv_get_device_name returns a NUL-terminated string
    // owned by the device, or null.
    unsafe {
        let p = raw::ibv_get_device_name(dev);
        if p.is_null() {
            return String::new();
        }
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// An open device context (`ibv_context`): owned (from [`DeviceList::open`]) or the one
/// librdmacm opened for a connection id ([`CmId::context`](crate::CmId::context)).
#[derive(Clone)]
pub struct Context(pub(crate) Arc<ContextInner>);

impl Context {
    /// A context librdmacm owns (not closed by rtdaq).
    pub(crate) fn borrowed(ptr: NonNull<raw::ibv_context>) -> Context {
        Context(Arc::new(ContextInner { ptr, owned: false }))
    }

    /// The raw pointer (escape hatch).
    pub fn as_raw(&self) -> *mut raw::ibv_context {
        self.0.ptr.as_ptr()
    }

    /// The device's name (`mlx5_0`, `rxe0`), empty when the driver gives none.
    pub fn device_name(&self) -> String {
        // SAFETY: valid context; its `device` pointer lives as long as the context.
        unsafe { device_name((*self.as_raw()).device) }
    }

    /// Port `port`'s state: `(active, mtu bytes, link layer is Ethernet)`.
    ///
    /// # Errors
    /// `ibv_query_port` failed.
    pub fn port_state(&self, port: u8) -> Result<(bool, u32, bool)> {
        let mut attr = raw::ibv_port_attr::default();
        // SAFETY: valid context and out pointer of the current ibv_port_attr layout (the
        // shim calls verbs.h's inline wrapper, not the compat symbol).
        let rc = unsafe { raw::rtdaq_ibv_query_port(self.as_raw(), port, &mut attr) };
        zero_or_errno(rc, "ibv_query_port")?;
        let mtu = 128u32 << attr.active_mtu.clamp(1, 5);
        Ok((
            attr.state == raw::IBV_PORT_ACTIVE,
            mtu,
            u32::from(attr.link_layer) == raw::IBV_LINK_LAYER_ETHERNET,
        ))
    }

    /// Allocates a protection domain.
    ///
    /// # Errors
    /// `ibv_alloc_pd` failed.
    pub fn alloc_pd(&self) -> Result<Pd> {
        // SAFETY: valid context.
        let p = unsafe { raw::ibv_alloc_pd(self.as_raw()) };
        let ptr = non_null(p, "ibv_alloc_pd")?;
        Ok(Pd(Arc::new(PdInner {
            ptr,
            _ctx: Arc::clone(&self.0),
        })))
    }

    /// Creates a completion queue of at least `depth` entries (no completion channel:
    /// rtdaq polls).
    ///
    /// # Errors
    /// `ibv_create_cq` failed (`depth` above the device maximum: `EINVAL`).
    pub fn create_cq(&self, depth: u32) -> Result<Cq> {
        // SAFETY: valid context; no channel, no context pointer, vector 0.
        let p = unsafe {
            raw::ibv_create_cq(
                self.as_raw(),
                depth.max(1) as c_int,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        };
        let ptr = non_null(p, "ibv_create_cq")?;
        Ok(Cq {
            ptr,
            _ctx: Arc::clone(&self.0),
        })
    }
}

pub(crate) struct PdInner {
    pub(crate) ptr: NonNull<raw::ibv_pd>,
    _ctx: Arc<ContextInner>,
}

// SAFETY: a PD is only passed to thread-safe verbs.
unsafe impl Send for PdInner {}
// SAFETY: as above.
unsafe impl Sync for PdInner {}

impl Drop for PdInner {
    fn drop(&mut self) {
        // SAFETY: allocated by ibv_alloc_pd; every MR/QP of it holds an Arc, so it is
        // deallocated last.
        let rc = unsafe { raw::ibv_dealloc_pd(self.ptr.as_ptr()) };
        debug_assert_eq!(rc, 0, "ibv_dealloc_pd");
    }
}

/// A protection domain. Clones share it.
#[derive(Clone)]
pub struct Pd(pub(crate) Arc<PdInner>);

/// Access rights of a memory region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Access {
    /// The HCA may write (receive into it): `IBV_ACCESS_LOCAL_WRITE`.
    pub local_write: bool,
    /// Peers may RDMA WRITE into it: `IBV_ACCESS_REMOTE_WRITE`.
    pub remote_write: bool,
    /// Peers may RDMA READ from it: `IBV_ACCESS_REMOTE_READ`.
    pub remote_read: bool,
}

impl Access {
    /// Local writes only: what a receive ring's memory needs.
    pub const LOCAL_WRITE: Access = Access {
        local_write: true,
        remote_write: false,
        remote_read: false,
    };

    /// The `ibv_access_flags` bits.
    pub fn bits(self) -> u32 {
        let mut b = 0;
        if self.local_write || self.remote_write {
            b |= raw::IBV_ACCESS_LOCAL_WRITE;
        }
        if self.remote_write {
            b |= raw::IBV_ACCESS_REMOTE_WRITE;
        }
        if self.remote_read {
            b |= raw::IBV_ACCESS_REMOTE_READ;
        }
        b
    }
}

impl Pd {
    /// The raw pointer (escape hatch).
    pub fn as_raw(&self) -> *mut raw::ibv_pd {
        self.0.ptr.as_ptr()
    }

    /// Registers the whole memory of a runtime pool (every slot). The pool is `'static`,
    /// so its memory outlives the registration. A pool exported as a dma-buf (GPU memory,
    /// [`BufferPool::dma_target`]) is registered through it ([`register_dmabuf`](Self::register_dmabuf))
    /// at its own base address, so work requests use the pool's slot addresses either way.
    ///
    /// # Errors
    /// The pool is neither CPU memory nor a dma-buf, `ibv_reg_mr` failed (`ENOMEM`: raise
    /// `ulimit -l` / `CAP_IPC_LOCK`), or `ibv_reg_dmabuf_mr` failed (`EOPNOTSUPP`: the device
    /// cannot import dma-bufs).
    pub fn register_pool(&self, pool: &'static BufferPool<'static>, access: Access) -> Result<Mr> {
        let len = pool.slot_count() * pool.slot_size();
        match pool.dma_target() {
            DmaTarget::DmaBuf { fd, offset } => {
                self.register_dmabuf(fd, offset, len, pool.base_addr(), access)
            }
            DmaTarget::VirtAddr(_) if !pool.is_cpu_accessible() => Err(IbError::Invalid(
                "a pool the CPU cannot reach is registered through its dma-buf (BufferPool::with_dmabuf)".into(),
            )),
            DmaTarget::VirtAddr(addr) => {
                // SAFETY: [addr, addr+len) is the pool's CPU memory, alive for 'static.
                unsafe { self.reg(addr, len, access, None) }
            }
        }
    }

    /// Registers a buffer the region owns from now on (control rings, scratch buffers).
    ///
    /// # Errors
    /// `ibv_reg_mr` failed.
    pub fn register_owned(&self, mut buf: Box<[u8]>, access: Access) -> Result<Mr> {
        let (addr, len) = (buf.as_mut_ptr(), buf.len());
        // SAFETY: the boxed buffer moves into the Mr and lives as long as the registration;
        // a boxed slice's heap memory does not move when the box moves.
        unsafe { self.reg(addr, len, access, Some(buf)) }
    }

    /// Registers `len` bytes at `offset` of a DMA-BUF (GPU memory exported by its driver) at
    /// I/O virtual address `iova` (`ibv_reg_dmabuf_mr`, kernel ≥ 5.12 and a driver that
    /// exports dma-bufs). The kernel checks the fd and range.
    ///
    /// # Errors
    /// `ibv_reg_dmabuf_mr` failed (`EOPNOTSUPP`: the device or kernel cannot import dma-bufs).
    pub fn register_dmabuf(
        &self,
        fd: i32,
        offset: u64,
        len: usize,
        iova: u64,
        access: Access,
    ) -> Result<Mr> {
        // SAFETY: valid PD; the kernel validates fd/offset/len; the memory is the exporter's.
        let p = unsafe {
            raw::ibv_reg_dmabuf_mr(self.as_raw(), offset, len, iova, fd, access.bits() as c_int)
        };
        let ptr = non_null(p, "ibv_reg_dmabuf_mr")?;
        Ok(Mr {
            ptr,
            addr: iova,
            len,
            _owned: None,
            _pd: Arc::clone(&self.0),
        })
    }

    /// # Safety
    /// `[addr, addr+len)` stays valid until the returned `Mr` is dropped.
    unsafe fn reg(
        &self,
        addr: *mut u8,
        len: usize,
        access: Access,
        owned: Option<Box<[u8]>>,
    ) -> Result<Mr> {
        // SAFETY: valid PD; the caller guarantees the memory range.
        let p = unsafe { raw::ibv_reg_mr(self.as_raw(), addr.cast(), len, access.bits() as c_int) };
        let ptr = non_null(p, "ibv_reg_mr")?;
        Ok(Mr {
            ptr,
            addr: addr as u64,
            len,
            _owned: owned,
            _pd: Arc::clone(&self.0),
        })
    }
}

/// A registered memory region (`ibv_mr`), deregistered on drop.
pub struct Mr {
    ptr: NonNull<raw::ibv_mr>,
    addr: u64,
    len: usize,
    _owned: Option<Box<[u8]>>,
    _pd: Arc<PdInner>,
}

// SAFETY: an MR handle is immutable after registration; dereg happens once in Drop.
unsafe impl Send for Mr {}
// SAFETY: as above.
unsafe impl Sync for Mr {}

impl Mr {
    /// Local key (for SGEs).
    pub fn lkey(&self) -> u32 {
        // SAFETY: ptr is a live ibv_mr; lkey is set at registration and never changes.
        unsafe { (*self.ptr.as_ptr()).lkey }
    }
    /// Remote key (for peers' RDMA WRITE/READ).
    pub fn rkey(&self) -> u32 {
        // SAFETY: as in lkey.
        unsafe { (*self.ptr.as_ptr()).rkey }
    }
    /// First byte's address (the I/O virtual address of a dma-buf region).
    pub fn addr(&self) -> u64 {
        self.addr
    }
    /// Bytes registered.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// True when `[addr, addr+len)` lies inside the region.
    #[inline]
    pub fn contains(&self, addr: u64, len: u32) -> bool {
        addr >= self.addr && addr + u64::from(len) <= self.addr + self.len as u64
    }
    /// The bytes of an owned region (from [`Pd::register_owned`]).
    pub fn owned(&self) -> Option<&[u8]> {
        self._owned.as_deref()
    }
    /// The bytes of an owned region, writable (the caller must not write a range the HCA
    /// is using: a posted receive or an unfinished send).
    pub fn owned_mut(&mut self) -> Option<&mut [u8]> {
        self._owned.as_deref_mut()
    }
    /// The raw pointer (escape hatch).
    pub fn as_raw(&self) -> *mut raw::ibv_mr {
        self.ptr.as_ptr()
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: registered once, deregistered once; QPs using it are destroyed first by
        // the owners (engines drop queues before regions).
        let rc = unsafe { raw::ibv_dereg_mr(self.ptr.as_ptr()) };
        debug_assert_eq!(rc, 0, "ibv_dereg_mr");
    }
}

/// A completion queue, destroyed on drop (after its QPs: they hold no Arc of it, so drop
/// QPs first).
pub struct Cq {
    pub(crate) ptr: NonNull<raw::ibv_cq>,
    _ctx: Arc<ContextInner>,
}

// SAFETY: polling is done by the one owner thread; create/destroy are thread-safe.
unsafe impl Send for Cq {}
// SAFETY: ibv_poll_cq is internally locked by the providers rtdaq uses (rxe, mlx5).
unsafe impl Sync for Cq {}

/// One work completion (`ibv_wc`), read through accessors.
#[derive(Clone, Copy, Default)]
#[repr(transparent)]
pub struct WorkCompletion(raw::ibv_wc);

/// What a completion completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcKind {
    /// A SEND (or SEND with immediate) of ours.
    Send,
    /// An RDMA WRITE (with or without immediate) of ours.
    Write,
    /// An RDMA READ of ours.
    Read,
    /// A receive: a peer's SEND.
    Recv,
    /// A receive consumed by a peer's RDMA WRITE with immediate.
    RecvWriteImm,
    /// Anything else.
    Other,
}

impl WorkCompletion {
    /// The work request id.
    #[inline]
    pub fn wr_id(&self) -> u64 {
        self.0.wr_id
    }
    /// True when the request succeeded.
    #[inline]
    pub fn ok(&self) -> bool {
        self.0.status == raw::IBV_WC_SUCCESS
    }
    /// True for a flush (the QP went to the error state: disconnect, peer gone).
    #[inline]
    pub fn flushed(&self) -> bool {
        self.0.status == raw::IBV_WC_WR_FLUSH_ERR
    }
    /// The status code.
    #[inline]
    pub fn status(&self) -> u32 {
        self.0.status
    }
    /// What completed. Valid only when [`ok`](Self::ok) (verbs leave it undefined on error).
    #[inline]
    pub fn kind(&self) -> WcKind {
        match self.0.opcode {
            raw::IBV_WC_SEND => WcKind::Send,
            raw::IBV_WC_RDMA_WRITE => WcKind::Write,
            raw::IBV_WC_RDMA_READ => WcKind::Read,
            raw::IBV_WC_RECV => WcKind::Recv,
            raw::IBV_WC_RECV_RDMA_WITH_IMM => WcKind::RecvWriteImm,
            _ => WcKind::Other,
        }
    }
    /// Bytes received (receives) or read (READ).
    #[inline]
    pub fn byte_len(&self) -> u32 {
        self.0.byte_len
    }
    /// The immediate value in host order, when the completion carries one.
    #[inline]
    pub fn imm(&self) -> Option<u32> {
        if self.0.wc_flags & raw::IBV_WC_WITH_IMM != 0 {
            // SAFETY: with IBV_WC_WITH_IMM set the union holds imm_data (plain u32).
            Some(u32::from_be(unsafe { self.0.__bindgen_anon_1.imm_data }))
        } else {
            None
        }
    }
    /// The local QP number.
    #[inline]
    pub fn qp_num(&self) -> u32 {
        self.0.qp_num
    }
}

/// `ibv_wc_status_str` of a status code (cold path).
pub fn wc_status_str(status: u32) -> String {
    // SAFETY: returns a static string for any value.
    unsafe {
        let p = raw::ibv_wc_status_str(status);
        if p.is_null() {
            return format!("status {status}");
        }
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

impl Cq {
    /// Polls up to `wcs.len()` completions into `wcs`; returns how many, or the
    /// provider's negative code. Never allocates, never blocks.
    #[inline]
    pub fn poll(&self, wcs: &mut [WorkCompletion]) -> core::result::Result<usize, i32> {
        let n = wcs.len().min(c_int::MAX as usize) as c_int;
        // SAFETY: WorkCompletion is repr(transparent) over ibv_wc; the slice holds n
        // writable entries; the CQ is live.
        let rc = unsafe { raw::rtdaq_ibv_poll_cq(self.ptr.as_ptr(), n, wcs.as_mut_ptr().cast()) };
        if rc < 0 {
            Err(rc)
        } else {
            Ok(rc as usize)
        }
    }

    /// The raw pointer (escape hatch).
    pub fn as_raw(&self) -> *mut raw::ibv_cq {
        self.ptr.as_ptr()
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: created once, destroyed once, after the QPs using it (owners' order).
        let rc = unsafe { raw::ibv_destroy_cq(self.ptr.as_ptr()) };
        debug_assert_eq!(rc, 0, "ibv_destroy_cq");
    }
}
