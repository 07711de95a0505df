//! Safe layer over libbpf (the copy libxdp-sys builds, the same one xsk-rs links): load the
//! embedded steering object, reach its maps and program, attach it to an interface through
//! a BPF link (detached when the link descriptor closes, even if the process dies).

use std::ffi::CStr;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

use libxdp_sys as x;

/// `XDP_FLAGS_SKB_MODE`: generic XDP (any driver, after the skb is built).
pub(crate) const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`: native XDP in the driver.
pub(crate) const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// libbpf's convention: `< 0` is `-errno`.
fn cvt(r: i32) -> io::Result<i32> {
    if r < 0 {
        Err(io::Error::from_raw_os_error(-r))
    } else {
        Ok(r)
    }
}

/// A loaded BPF object (programs and maps created in the kernel). Closed on drop, which
/// releases the maps and programs unless something else (an attached link, an XSKMAP entry)
/// still holds them.
#[derive(Debug)]
pub(crate) struct BpfObject {
    obj: NonNull<x::bpf_object>,
}

// SAFETY: after `load` the object is only read (map/program descriptors) and finally
// closed; libbpf keeps no thread-affine state in it.
unsafe impl Send for BpfObject {}
// SAFETY: as above: `&self` methods only read descriptors.
unsafe impl Sync for BpfObject {}

impl BpfObject {
    /// Opens `elf` (a BPF ELF object) and loads it into the kernel (verifier included);
    /// with `frags` every program is loaded as frags-aware (`BPF_F_XDP_HAS_FRAGS`: it sees
    /// multi-buffer frames, and a device whose MTU exceeds a page accepts it). Cold path.
    /// libbpf prints the verifier log to stderr when loading fails.
    pub(crate) fn load(elf: &'static [u8], frags: bool) -> io::Result<BpfObject> {
        // SAFETY: `elf` is valid for the call; libbpf copies what it needs; NULL opts.
        let p =
            unsafe { x::bpf_object__open_mem(elf.as_ptr().cast(), elf.len(), std::ptr::null()) };
        let obj = NonNull::new(p).ok_or_else(io::Error::last_os_error)?;
        let this = BpfObject { obj };
        if frags {
            let mut prog = std::ptr::null_mut();
            loop {
                // SAFETY: valid opened object; `prog` is NULL or its previous program.
                prog = unsafe { x::bpf_object__next_program(this.obj.as_ptr(), prog) };
                if prog.is_null() {
                    break;
                }
                // SAFETY: `prog` belongs to the opened, not yet loaded object.
                let flags = unsafe { x::bpf_program__flags(prog) } | x::BPF_F_XDP_HAS_FRAGS;
                // SAFETY: as above; flags may be set until the object is loaded.
                cvt(unsafe { x::bpf_program__set_flags(prog, flags) })?;
            }
        }
        // SAFETY: `obj` is a valid, opened, not yet loaded object.
        cvt(unsafe { x::bpf_object__load(this.obj.as_ptr()) })?;
        Ok(this)
    }

    /// The descriptor of map `name`.
    pub(crate) fn map(&self, name: &CStr) -> io::Result<BorrowedFd<'_>> {
        // SAFETY: valid object and NUL-terminated name.
        let m = unsafe { x::bpf_object__find_map_by_name(self.obj.as_ptr(), name.as_ptr()) };
        if m.is_null() {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        // SAFETY: `m` belongs to the live object.
        let fd = cvt(unsafe { x::bpf_map__fd(m) })?;
        // SAFETY: the descriptor lives as long as the object, which `self` borrows.
        Ok(unsafe { BorrowedFd::borrow_raw(fd) })
    }

    /// The descriptor of program `name`.
    pub(crate) fn program(&self, name: &CStr) -> io::Result<BorrowedFd<'_>> {
        // SAFETY: valid object and NUL-terminated name.
        let p = unsafe { x::bpf_object__find_program_by_name(self.obj.as_ptr(), name.as_ptr()) };
        if p.is_null() {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        // SAFETY: `p` belongs to the live object.
        let fd = cvt(unsafe { x::bpf_program__fd(p) })?;
        // SAFETY: as in `map`.
        Ok(unsafe { BorrowedFd::borrow_raw(fd) })
    }
}

impl Drop for BpfObject {
    fn drop(&mut self) {
        // SAFETY: the object is valid and closed once.
        unsafe { x::bpf_object__close(self.obj.as_ptr()) };
    }
}

/// `bpf_map_update_elem(fd, key, value, BPF_ANY)`; `K`, `V` must match the map's key and
/// value sizes exactly (the caller's `#[repr(C)]` mirrors). Never allocates.
pub(crate) fn map_update<K: Copy, V: Copy>(
    map: BorrowedFd<'_>,
    key: &K,
    value: &V,
) -> io::Result<()> {
    // SAFETY: key and value are valid for reads of their sizes, which match the map's.
    cvt(unsafe {
        x::bpf_map_update_elem(
            map.as_raw_fd(),
            (key as *const K).cast(),
            (value as *const V).cast(),
            0,
        )
    })
    .map(drop)
}

/// Reads a per-CPU `u64` array element into `out` (one value per possible CPU; `out.len()`
/// must be the number of possible CPUs). One syscall; never allocates.
pub(crate) fn map_lookup_percpu_u64(
    map: BorrowedFd<'_>,
    key: u32,
    out: &mut [u64],
) -> io::Result<()> {
    if out.is_empty() {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: `out` holds `len × 8` writable bytes, what the kernel writes for a per-CPU
    // element of 8-byte values when `len` is the possible-CPU count (the caller's contract;
    // `steer` sizes it from /sys/devices/system/cpu/possible).
    cvt(unsafe {
        x::bpf_map_lookup_elem(
            map.as_raw_fd(),
            (&key as *const u32).cast(),
            out.as_mut_ptr().cast(),
        )
    })
    .map(drop)
}

/// Attaches XDP program `prog` to `ifindex` with `flags` (`XDP_FLAGS_DRV_MODE` or
/// `XDP_FLAGS_SKB_MODE`) through a BPF link; closing the returned descriptor detaches it.
/// Fails with `EBUSY` when the interface already has an XDP program. Cold path.
pub(crate) fn xdp_link(prog: BorrowedFd<'_>, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    // SAFETY: plain-data options struct; all-zero is libbpf's "no options" value.
    let mut opts: x::bpf_link_create_opts = unsafe { std::mem::zeroed() };
    opts.sz = size_of::<x::bpf_link_create_opts>();
    opts.flags = flags;
    // SAFETY: valid descriptors and options for the call.
    let fd = cvt(unsafe {
        x::bpf_link_create(
            prog.as_raw_fd(),
            ifindex as i32,
            x::bpf_attach_type_BPF_XDP,
            &opts,
        )
    })?;
    // SAFETY: a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
