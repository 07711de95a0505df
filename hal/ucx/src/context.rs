//! The UCP context ([`Context`], `ucp_context_h`) and memory registration ([`MemHandle`],
//! `ucp_mem_h`).
use std::ffi::{c_void, CStr, CString};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Result, Status, UcxError};
use crate::raw;
use crate::result::check;

/// The UCP features a context asks for (`UCP_FEATURE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Features {
    /// Tag matching (`UCP_FEATURE_TAG`): [`Endpoint::tag_send`](crate::Endpoint::tag_send),
    /// [`Worker::tag_recv`](crate::Worker::tag_recv).
    pub tag: bool,
    /// Active messages (`UCP_FEATURE_AM`); no wrapper uses them yet.
    pub am: bool,
}

impl Features {
    fn bits(self) -> u64 {
        let mut f = 0u64;
        if self.tag {
            f |= u64::from(raw::UCP_FEATURE_TAG);
        }
        if self.am {
            f |= u64::from(raw::UCP_FEATURE_AM);
        }
        f
    }
}

/// The context, shared by [`Context`], its [`Worker`](crate::Worker)s and
/// [`MemHandle`]s: `ucp_cleanup` runs when the last of them is gone.
pub(crate) struct ContextInner {
    h: NonNull<raw::ucp_context>,
    /// Serialises this crate's context-level calls (`ucp_worker_create`/`_destroy`,
    /// `ucp_mem_map`/`_unmap`): the context is created with `mt_workers_shared = 0`.
    lock: Mutex<()>,
    features: Features,
}

// SAFETY: the context handle is an address UCX hands out, not tied to the creating thread.
// Context-level calls made through it are serialised by `lock`, and `ucp_cleanup` runs once,
// when the last reference drops.
unsafe impl Send for ContextInner {}
// SAFETY: shared use goes through `lock` (context-level calls) or through a worker, which
// only reaches context state UCX 1.13 guards itself (its registration cache, its memory
// type cache, and `context->mt_lock`, a recursive spinlock even without
// `mt_workers_shared`). See the crate docs, "Threads".
unsafe impl Sync for ContextInner {}

impl ContextInner {
    pub(crate) fn raw(&self) -> raw::ucp_context_h {
        self.h.as_ptr()
    }

    /// Holds the context lock for a context-level call.
    pub(crate) fn lock(&self) -> MutexGuard<'_, ()> {
        // A panic under the lock leaves nothing half-done on the Rust side.
        self.lock.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn features(&self) -> Features {
        self.features
    }
}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // SAFETY: created by ucp_init_version, cleaned up once; every worker and memory
        // handle of it is gone (each holds an Arc of this inner).
        unsafe { raw::ucp_cleanup(self.h.as_ptr()) }
    }
}

/// A `ucp_config_t` read from the environment, released on drop.
struct Config(NonNull<raw::ucp_config_t>);

impl Config {
    /// `ucp_config_read(NULL, NULL, ..)`: the `UCX_*` environment variables (and UCX's
    /// configuration files), as UCX's own tools read them.
    fn read() -> Result<Config> {
        let mut p: *mut raw::ucp_config_t = std::ptr::null_mut();
        // SAFETY: NULL prefix and file name select the defaults (prefix "UCX_"); p is a
        // valid out pointer.
        let st = unsafe { raw::ucp_config_read(std::ptr::null(), std::ptr::null(), &mut p) };
        check(st, "ucp_config_read")?;
        NonNull::new(p)
            .map(Config)
            .ok_or(UcxError::call("ucp_config_read", Status::IO_ERROR))
    }

    /// `ucp_config_modify(name, value)`.
    fn modify(&mut self, name: &str, value: &str) -> Result<()> {
        let bare = name.strip_prefix("UCX_").unwrap_or(name);
        let (n, v) = match (CString::new(bare), CString::new(value)) {
            (Ok(n), Ok(v)) => (n, v),
            _ => {
                return Err(UcxError::Invalid(format!(
                    "UCX option {name}={value:?} holds a NUL byte"
                )))
            }
        };
        // SAFETY: a live config and two NUL-terminated strings that outlive the call (UCX
        // parses the value into the config).
        let st = unsafe { raw::ucp_config_modify(self.0.as_ptr(), n.as_ptr(), v.as_ptr()) };
        if st == raw::UCS_OK {
            Ok(())
        } else {
            Err(UcxError::Option {
                name: bare.to_owned(),
                value: value.to_owned(),
                status: Status(st),
            })
        }
    }
}

impl Drop for Config {
    fn drop(&mut self) {
        // SAFETY: read by ucp_config_read, released once.
        unsafe { raw::ucp_config_release(self.0.as_ptr()) }
    }
}

/// A UCP context (`ucp_context_h`): the transports and memory domains UCX opened for this
/// process. Cheap to share (`Send + Sync`); `ucp_cleanup` runs when the context and every
/// [`Worker`](crate::Worker) and [`MemHandle`] made from it are dropped.
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

impl Context {
    /// A context configured from the `UCX_*` environment (`UCX_TLS`, `UCX_NET_DEVICES`,
    /// ...), with `features`, for workers each used by one thread
    /// (`mt_workers_shared = 0`).
    ///
    /// # Errors
    /// [`UcxError::Invalid`] when no feature is asked for; [`UcxError::Call`] when
    /// `ucp_config_read` or `ucp_init` fails (no usable transport, ...).
    pub fn new(features: Features) -> Result<Context> {
        Context::with_options(features, &[])
    }

    /// [`new`](Self::new), with UCX options set on top of the environment
    /// (`ucp_config_modify`): names with or without the `UCX_` prefix, e.g.
    /// `[("TLS", "tcp"), ("NET_DEVICES", "lo")]`. Unlike setting environment variables, this
    /// touches no process-wide state.
    ///
    /// Each option sets the whole value, as its `UCX_*` variable would: a later pair with
    /// the same name replaces an earlier one, so several transports go in one
    /// comma-separated value (`("TLS", "tcp,cuda_copy")`). UCX 1.13 refuses values it
    /// cannot parse but accepts unknown names (it keeps them for transports' options), so a
    /// misspelt name is not an error. A transport's option goes by its field name without
    /// the transport's prefix (`PUT_ENABLE` for `UCX_TCP_PUT_ENABLE`); a name no transport
    /// takes (`TCP_PUT_ENABLE`, `UCX_TCP_PUT_ENABLE`) is ignored, with UCX's warning
    /// "invalid configuration" when a worker is created (tried with UCX 1.13.1).
    ///
    /// # Errors
    /// As [`new`](Self::new), and [`UcxError::Option`] for an option UCX refuses.
    pub fn with_options(features: Features, options: &[(&str, &str)]) -> Result<Context> {
        if features.bits() == 0 {
            return Err(UcxError::Invalid(
                "a UCP context needs at least one feature (tag or am)".into(),
            ));
        }
        let mut config = Config::read()?;
        for (name, value) in options {
            config.modify(name, value)?;
        }
        let params = raw::ucp_params_t {
            field_mask: u64::from(
                raw::UCP_PARAM_FIELD_FEATURES | raw::UCP_PARAM_FIELD_MT_WORKERS_SHARED,
            ),
            features: features.bits(),
            mt_workers_shared: 0,
            ..Default::default()
        };
        let mut h: raw::ucp_context_h = std::ptr::null_mut();
        // SAFETY: ucp_init is `static inline` in <ucp/api/ucp.h>: exactly this call with the
        // API version the bindings were generated from. params and config are valid for the
        // call; h is a valid out pointer.
        let st = unsafe {
            raw::ucp_init_version(
                raw::UCP_API_MAJOR,
                raw::UCP_API_MINOR,
                &params,
                config.0.as_ptr(),
                &mut h,
            )
        };
        check(st, "ucp_init")?;
        drop(config);
        let h = NonNull::new(h).ok_or(UcxError::call("ucp_init", Status::IO_ERROR))?;
        Ok(Context {
            inner: Arc::new(ContextInner {
                h,
                lock: Mutex::new(()),
                features,
            }),
        })
    }

    /// The UCX library version at run time (`ucp_get_version_string`, e.g. `"1.13.1"`).
    pub fn version() -> String {
        // SAFETY: no preconditions; returns a static NUL-terminated string.
        let p = unsafe { raw::ucp_get_version_string() };
        if p.is_null() {
            return String::new();
        }
        // SAFETY: non-null, NUL-terminated, static.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// The features asked for.
    pub fn features(&self) -> Features {
        self.inner.features
    }

    /// The raw handle, for calls this crate does not wrap; valid while `self` lives.
    pub fn as_raw(&self) -> raw::ucp_context_h {
        self.inner.raw()
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("handle", &self.inner.h)
            .field("features", &self.inner.features)
            .finish()
    }
}

/// Where registered memory lives (`ucs_memory_type_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryType {
    /// Host memory (`UCS_MEMORY_TYPE_HOST`).
    Host,
    /// CUDA device memory (`UCS_MEMORY_TYPE_CUDA`); needs UCX's CUDA transports (not in
    /// Debian's `libucx0`: UCX built with `--with-cuda`).
    Cuda,
}

impl MemoryType {
    pub(crate) fn raw(self) -> raw::ucs_memory_type_t {
        match self {
            MemoryType::Host => raw::UCS_MEMORY_TYPE_HOST,
            MemoryType::Cuda => raw::UCS_MEMORY_TYPE_CUDA,
        }
    }
}

struct MemInner {
    h: NonNull<raw::ucp_mem>,
    ctx: Arc<ContextInner>,
    addr: usize,
    len: usize,
    mem_type: MemoryType,
}

// SAFETY: after ucp_mem_map a memory handle is only read by UCX (sends copy the transport
// keys out of it); it is unmapped once, under the context lock, when the last clone drops.
unsafe impl Send for MemInner {}
// SAFETY: as above: shared use only reads.
unsafe impl Sync for MemInner {}

impl Drop for MemInner {
    fn drop(&mut self) {
        let _g = self.ctx.lock();
        // SAFETY: mapped by ucp_mem_map on this context (alive: we hold an Arc of it),
        // unmapped once; no transfer uses it any more (each holds a clone of the Arc
        // holding this inner until it completes).
        let st = unsafe { raw::ucp_mem_unmap(self.ctx.raw(), self.h.as_ptr()) };
        debug_assert_eq!(st, raw::UCS_OK, "ucp_mem_unmap");
    }
}

/// A memory registration (`ucp_mem_h`, `ucp_mem_map`): lets UCX skip registering a
/// buffer on each transfer (zero-copy protocols: RDMA, CMA, GPU memory).
///
/// Clones share one registration, unmapped (`ucp_mem_unmap`) when the last clone and every
/// transfer using it are gone; a handle keeps its [`Context`] alive, so it can never be
/// dropped after it.
///
/// The registration does not own the memory: it describes an address range. Keep the
/// memory allocated while transfers name the handle, or they may carry stale bytes (a
/// transport registered the old pages); it never makes UCX touch unowned memory of this
/// process, because transfers only read or write the buffer they are given, and
/// [`Endpoint::tag_send`](crate::Endpoint::tag_send) checks that it lies in the handle's
/// range.
#[derive(Clone)]
pub struct MemHandle {
    inner: Arc<MemInner>,
}

impl MemHandle {
    /// Registers host memory `buf` (`ucp_mem_map`, `UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
    /// LENGTH | MEMORY_TYPE`).
    ///
    /// # Errors
    /// [`UcxError::Invalid`] for an empty buffer; [`UcxError::Call`] when `ucp_mem_map`
    /// fails.
    pub fn map(ctx: &Context, buf: &mut [u8]) -> Result<MemHandle> {
        // SAFETY: buf is host memory owned by the caller, valid for its length during the
        // call; what the registration means afterwards is documented on the type.
        unsafe { Self::map_with_type(ctx, buf.as_mut_ptr().cast(), buf.len(), MemoryType::Host) }
    }

    /// Registers `len` bytes at `ptr` of memory type `mem_type` (device memory: a CUDA
    /// pointer with [`MemoryType::Cuda`]).
    ///
    /// # Safety
    /// `ptr..ptr + len` is memory of type `mem_type`, allocated for the duration of the
    /// call. Transfers naming this handle must pass buffers that are valid memory of that
    /// type while they are in flight.
    ///
    /// # Errors
    /// [`UcxError::Invalid`] for a null pointer or zero length; [`UcxError::Call`] when
    /// `ucp_mem_map` fails (`UCS_ERR_UNSUPPORTED`: no memory domain for that type).
    pub unsafe fn map_with_type(
        ctx: &Context,
        ptr: *mut c_void,
        len: usize,
        mem_type: MemoryType,
    ) -> Result<MemHandle> {
        if ptr.is_null() || len == 0 {
            return Err(UcxError::Invalid(format!(
                "ucp_mem_map of {len} bytes at {ptr:p}: needs a non-null, non-empty range"
            )));
        }
        let params = raw::ucp_mem_map_params_t {
            field_mask: u64::from(
                raw::UCP_MEM_MAP_PARAM_FIELD_ADDRESS
                    | raw::UCP_MEM_MAP_PARAM_FIELD_LENGTH
                    | raw::UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE,
            ),
            address: ptr,
            length: len,
            memory_type: mem_type.raw(),
            ..Default::default()
        };
        let mut h: raw::ucp_mem_h = std::ptr::null_mut();
        {
            let _g = ctx.inner.lock();
            // SAFETY: a live context; params describe memory the caller vouches for (see
            // # Safety); h is a valid out pointer.
            let st = unsafe { raw::ucp_mem_map(ctx.inner.raw(), &params, &mut h) };
            check(st, "ucp_mem_map")?;
        }
        let h = NonNull::new(h).ok_or(UcxError::call("ucp_mem_map", Status::IO_ERROR))?;
        Ok(MemHandle {
            inner: Arc::new(MemInner {
                h,
                ctx: Arc::clone(&ctx.inner),
                addr: ptr as usize,
                len,
                mem_type,
            }),
        })
    }

    /// First address of the registered range.
    pub fn addr(&self) -> usize {
        self.inner.addr
    }

    /// Length of the registered range in bytes (never 0).
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// Always false: empty ranges are refused.
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The memory type given at registration.
    pub fn memory_type(&self) -> MemoryType {
        self.inner.mem_type
    }

    /// True when `len` bytes at `ptr` lie inside the registered range.
    pub fn contains(&self, ptr: *const u8, len: usize) -> bool {
        let a = ptr as usize;
        a >= self.inner.addr
            && a.checked_add(len)
                .is_some_and(|end| end <= self.inner.addr + self.inner.len)
    }

    /// True when both handles came from the same context.
    pub(crate) fn same_context(&self, ctx: &Arc<ContextInner>) -> bool {
        Arc::ptr_eq(&self.inner.ctx, ctx)
    }

    /// The raw handle; valid while `self` (or a clone) lives.
    pub fn as_raw(&self) -> raw::ucp_mem_h {
        self.inner.h.as_ptr()
    }
}

impl std::fmt::Debug for MemHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemHandle")
            .field("addr", &format_args!("{:#x}", self.inner.addr))
            .field("len", &self.inner.len)
            .field("mem_type", &self.inner.mem_type)
            .finish()
    }
}
