//! Helpers shared by the integration tests. Everything that changes state restores it in a
//! `Drop` guard, so a failing assertion still cleans up.
#![allow(dead_code)]

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rtdaq_platform::hugepages::{self, HugePageSize};

/// True when the test process runs as root (euid 0: the owner of `/proc/self`).
pub fn is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

/// True when the test must stop here: not root. It then skips (`rtdaq_testbed::require`:
/// a failure in `scripts/test.sh`, which runs as root; a recorded skip elsewhere).
pub fn skip_unless_root(test: &str) -> bool {
    !rtdaq_testbed::require::need_root(test)
}

/// A temporary directory tree of the test's own (the `tempfile` crate), removed on drop.
pub struct TempTree {
    root: PathBuf,
    _dir: tempfile::TempDir,
}

impl TempTree {
    /// A fresh, empty directory below the system temp dir.
    pub fn new(tag: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix(&format!("rtdaq-platform-{tag}-"))
            .tempdir()
            .expect("create temp tree");
        Self {
            root: dir.path().to_path_buf(),
            _dir: dir,
        }
    }

    /// Writes `content` to `rel` (parents created).
    pub fn file(&self, rel: &str, content: &str) -> &Self {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).expect("create fixture dir");
        std::fs::write(&p, content).expect("write fixture file");
        self
    }

    /// Creates directory `rel`.
    pub fn dir(&self, rel: &str) -> &Self {
        std::fs::create_dir_all(self.root.join(rel)).expect("create fixture dir");
        self
    }

    /// The root.
    pub fn path(&self) -> &Path {
        &self.root
    }
}

/// A two-node, eight-CPU board with 2 MiB hugepages (8 in the pool, 5 free, 1 reserved).
pub fn board_fixture() -> TempTree {
    let t = TempTree::new("board");
    t.file("sys/devices/system/cpu/online", "0-7\n")
        .file("sys/devices/system/cpu/possible", "0-15\n")
        .file("sys/devices/system/cpu/isolated", "2-3,6-7\n")
        .file("sys/devices/system/cpu/nohz_full", "2-3\n")
        .file("sys/devices/system/node/online", "0-1\n")
        .file("sys/devices/system/node/node0/cpulist", "0-3\n")
        .file("sys/devices/system/node/node1/cpulist", "4-7\n");
    let pool = "sys/kernel/mm/hugepages/hugepages-2048kB";
    t.file(&format!("{pool}/nr_hugepages"), "8\n")
        .file(&format!("{pool}/free_hugepages"), "5\n")
        .file(&format!("{pool}/resv_hugepages"), "1\n")
        .file(&format!("{pool}/surplus_hugepages"), "0\n")
        .file(&format!("{pool}/nr_overcommit_hugepages"), "0\n");
    let node1 = "sys/devices/system/node/node1/hugepages/hugepages-2048kB";
    t.file(&format!("{node1}/nr_hugepages"), "4\n")
        .file(&format!("{node1}/free_hugepages"), "2\n")
        .file(&format!("{node1}/surplus_hugepages"), "0\n");
    t
}

/// Serialises the tests of one binary that resize the hugepage pool.
pub fn hugepage_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Sets the global pool of `size` to a number of pages and puts the previous number back on
/// drop (also when the test panics).
pub struct HugepagePoolGuard {
    size: HugePageSize,
    previous: u64,
}

impl HugepagePoolGuard {
    /// Sets the pool to `pages`; returns the guard and the pool size the kernel reached.
    pub fn set(size: HugePageSize, pages: u64) -> (Self, u64) {
        let previous = hugepages::status(Path::new("/"), size)
            .expect("read hugepage pool")
            .total;
        let guard = Self { size, previous };
        let reached = hugepages::set_total(Path::new("/"), size, pages).expect("resize pool");
        (guard, reached)
    }

    /// The pool size before the guard changed it.
    pub fn previous(&self) -> u64 {
        self.previous
    }
}

impl Drop for HugepagePoolGuard {
    fn drop(&mut self) {
        if let Err(e) = hugepages::set_total(Path::new("/"), self.size, self.previous) {
            eprintln!(
                "WARNING: could not restore {} nr_hugepages to {}: {e}",
                self.size, self.previous
            );
        }
    }
}
