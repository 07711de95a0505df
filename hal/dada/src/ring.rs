//! A ring as `dada_db` makes it: the data block at the key, the header block at key + 1.

use crate::error::{DadaError, Result};
use crate::raw;
use crate::result::check;

/// A PSRDADA key: the data block's System V IPC key (`dada_db -k`, hexadecimal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key(pub i32);

impl Key {
    /// Parses a key as `dada_db -k` takes it: hexadecimal, with or without `0x`.
    pub fn parse(s: &str) -> Result<Key> {
        let t = s.trim();
        let hex = t
            .strip_prefix("0x")
            .or_else(|| t.strip_prefix("0X"))
            .unwrap_or(t);
        match u32::from_str_radix(hex, 16) {
            // key_t is a C int; the header block takes key + 1, which must fit too.
            Ok(k) if !hex.is_empty() && k < i32::MAX as u32 => Ok(Key(k as i32)),
            _ => Err(DadaError::BadKey(s.to_string())),
        }
    }

    /// The header block's key.
    pub fn header(self) -> i32 {
        self.0 + 1
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:x}", self.0)
    }
}

/// The shape of a ring (`dada_db -n NBUFS -b BUFSZ -r READERS`, header buffers as its
/// defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingSpec {
    /// Data buffers.
    pub nbufs: u64,
    /// Bytes of a data buffer.
    pub bufsz: u64,
    /// Header buffers.
    pub header_nbufs: u64,
    /// Bytes of a header buffer (a DADA header: 4096).
    pub header_bufsz: u64,
    /// Readers the ring serves (each reads every buffer).
    pub readers: u32,
    /// Lock the data block's pages in memory (`dada_db -l`; needs `CAP_IPC_LOCK` or the
    /// memlock limit).
    pub lock: bool,
    /// Bind the data block's pages to this NUMA node (`mbind(MPOL_BIND)` over each
    /// buffer's segment, before they are locked or first touched; `dada_db` has no such
    /// option).
    pub numa_node: Option<u32>,
}

impl Default for RingSpec {
    /// `dada_db`'s defaults: 4 data buffers of 512 KiB, 8 header buffers of 4096 bytes, one
    /// reader, not locked.
    fn default() -> Self {
        RingSpec {
            nbufs: 4,
            bufsz: 524_288,
            header_nbufs: 8,
            header_bufsz: 4096,
            readers: 1,
            lock: false,
            numa_node: None,
        }
    }
}

/// An empty `ipcbuf_t`, as the library's `IPCBUF_INIT`.
pub(crate) fn ipcbuf_init() -> raw::ipcbuf_t {
    raw::ipcbuf_t {
        state: 0,
        syncid: -1,
        semid_connect: -1,
        semid_data: std::ptr::null_mut(),
        shmid: std::ptr::null_mut(),
        sync: std::ptr::null_mut(),
        buffer: std::ptr::null_mut(),
        shm_addr: std::ptr::null_mut(),
        count: std::ptr::null_mut(),
        shmkey: std::ptr::null_mut(),
        viewbuf: 0,
        xfer: 0,
        soclock_buf: 0,
        iread: -1,
    }
}

/// A ring this process created; dropping it destroys both blocks (`dada_db -d`): readers
/// and writers still attached keep their mappings until they detach.
pub struct Ring {
    key: Key,
    data: Box<raw::ipcbuf_t>,
    header: Box<raw::ipcbuf_t>,
}

// SAFETY: the `ipcbuf_t`s hold pointers into this process's shared-memory mappings and
// malloc'd arrays the library made for them; nothing is tied to the creating thread, and
// `Ring` has no `&self` method that touches them (only `Drop`, with `&mut`).
unsafe impl Send for Ring {}

impl Ring {
    /// Creates the data block (`spec.nbufs` × `spec.bufsz`) at `key` and the header block
    /// at `key + 1`. A ring already at `key` is an error naming it (remove it with
    /// `dada_db -k KEY -d`, or attach to it instead).
    pub fn create(key: Key, spec: &RingSpec) -> Result<Ring> {
        let mut data = Box::new(ipcbuf_init());
        let mut header = Box::new(ipcbuf_init());
        let exists = "a ring (or other shared memory) already uses this key, or the system's shared-memory limits (kernel.shmmax, shmall) are too small: remove it with `dada_db -k KEY -d` (ipcs -m lists them) or choose another key";
        // SAFETY: `data` is an initialised ipcbuf_t (IPCBUF_INIT) at a stable heap address,
        // which the library fills in and keeps using until `ipcbuf_destroy`.
        let rc = unsafe {
            raw::ipcbuf_create_work(&mut *data, key.0, spec.nbufs, spec.bufsz, spec.readers, -1)
        };
        check(rc.into(), "ipcbuf_create (data block)", key.0, exists)?;
        // SAFETY: as above, for the header block.
        let rc = unsafe {
            raw::ipcbuf_create(
                &mut *header,
                key.header(),
                spec.header_nbufs,
                spec.header_bufsz,
                spec.readers,
            )
        };
        if let Err(e) = check(rc.into(), "ipcbuf_create (header block)", key.0, exists) {
            // SAFETY: `data` was created above and is not used after this.
            unsafe { raw::ipcbuf_destroy(&mut *data) };
            return Err(e);
        }
        let ring = Ring { key, data, header };
        if let Some(node) = spec.numa_node {
            ring.bind_data_block(node, spec.nbufs, spec.bufsz)?;
        }
        if spec.lock {
            let mut ring = ring;
            // SAFETY: `ring.data` is a created block (above).
            let rc = unsafe { raw::ipcbuf_lock(&mut *ring.data) };
            check(
                rc.into(),
                "ipcbuf_lock",
                key.0,
                "the data block could not be locked in memory: give the process CAP_IPC_LOCK or a memlock limit of the ring's size, or set lock off",
            )?;
            return Ok(ring);
        }
        Ok(ring)
    }

    /// Binds each of the data block's `nbufs` segments (`bufsz` bytes) to NUMA node `node`,
    /// moving any page already there (`MPOL_MF_MOVE`). The policy is the shared memory
    /// object's own, so it holds for every process that maps the ring.
    fn bind_data_block(&self, node: u32, nbufs: u64, bufsz: u64) -> Result<()> {
        let fail = |source| DadaError::Numa {
            key: self.key.0,
            node,
            source,
        };
        for i in 0..nbufs as usize {
            // SAFETY: the block is created, so `shm_addr` holds its `nbufs` attached
            // segments; reading one pointer out of the array does not touch the data.
            let addr = unsafe { *self.data.shm_addr.add(i) };
            crate::numa::bind(addr, bufsz as usize, node).map_err(fail)?;
        }
        Ok(())
    }

    /// Destroys the ring at `key` that another process created and left (`dada_db -d`).
    pub fn remove(key: Key) -> Result<()> {
        for (k, what) in [(key.0, "data"), (key.header(), "header")] {
            let mut b = ipcbuf_init();
            // SAFETY: `b` is an initialised ipcbuf_t that lives across both calls.
            let rc = unsafe { raw::ipcbuf_connect(&mut b, k) };
            check(
                rc.into(),
                "ipcbuf_connect",
                key.0,
                if what == "data" {
                    "no ring at this key (ipcs -m lists shared memory)"
                } else {
                    "no header block at key + 1"
                },
            )?;
            // SAFETY: `b` is connected (above).
            let rc = unsafe { raw::ipcbuf_destroy(&mut b) };
            check(
                rc.into(),
                "ipcbuf_destroy",
                key.0,
                "the block could not be removed (another user's?)",
            )?;
        }
        Ok(())
    }

    /// Whether both blocks of a ring exist at `key` (System V shared memory segments at
    /// the key and key + 1), asked without the library (which prints an error for a
    /// missing one): a reader waiting for its writer polls this. They exist before the
    /// writer has made the blocks' buffers, so an attach right after may still fail: a
    /// waiting reader tries again.
    pub fn exists(key: Key) -> bool {
        [key.0, key.header()].iter().all(|&k| {
            // SAFETY: shmget with size 0 and no flags only looks the key up.
            unsafe { libc::shmget(k, 0, 0) >= 0 }
        })
    }

    /// The ring's key.
    pub fn key(&self) -> Key {
        self.key
    }

    /// Readers holding the ring's read lock now (a reader that died released it: the
    /// library locks with `SEM_UNDO`).
    pub fn readers_locked(&self) -> u32 {
        let b = std::ptr::addr_of!(*self.data).cast_mut();
        // SAFETY: the data block is created (alive until drop); the calls only read its
        // semaphores.
        let (n, free) = unsafe {
            (
                raw::ipcbuf_get_nreaders(b).max(0),
                raw::ipcbuf_get_read_semaphore_count(b).max(0),
            )
        };
        (n - free.min(n)) as u32
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: both blocks were created by `create` and are destroyed once, here.
        unsafe {
            raw::ipcbuf_destroy(&mut *self.data);
            raw::ipcbuf_destroy(&mut *self.header);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_as_dada_db_takes_them() {
        assert_eq!(Key::parse("dada").unwrap(), Key(0xdada));
        assert_eq!(Key::parse("0xDADA").unwrap(), Key(0xdada));
        assert_eq!(Key(0xdada).header(), 0xdadb);
        assert_eq!(Key(0xdada).to_string(), "dada");
        for bad in ["", "0x", "xyz", "ffffffff", "-1"] {
            assert!(Key::parse(bad).is_err(), "{bad}");
        }
    }
}
