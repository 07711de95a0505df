//! 169.254.X.0/30 subnets unique among live pairs of every process on the host.
//!
//! Each X in use has a marker file `/run/rtdaq-testbed/subnet-X` holding its owner,
//! `"<pid> <start time>"` (the start time from `/proc/<pid>/stat`, so a recycled pid does not
//! keep a marker alive). Markers are created and removed only while holding an exclusive
//! `flock` on `/run/rtdaq-testbed/lock`; a marker whose owner is no longer running is stale and
//! is reused (a killed test process cannot leak subnets). The lock is released by the kernel
//! when its holder dies.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::sys;

/// Where markers and the lock file live.
pub(crate) const RUN_DIR: &str = "/run/rtdaq-testbed";

/// The third octets handed out: 100..=249 without 169 (169.254.169.254 is the cloud metadata
/// address). 77 and 90 (`scripts/iperf3-interop.sh`, `scripts/netns.sh`) are outside anyway.
pub(crate) fn candidates() -> Vec<u8> {
    (100..=249).filter(|x| *x != 169).collect()
}

/// The exclusive lock on `dir/lock` (created with `dir` when missing); held until dropped.
pub(crate) fn lock(dir: &Path) -> io::Result<File> {
    fs::create_dir_all(dir)?;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join("lock"))?;
    sys::flock_exclusive(&f)?;
    Ok(f)
}

/// Start time of process `pid` in clock ticks since boot (field 22 of `/proc/<pid>/stat`).
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces: split after the
    // last ')'. The next field is field 3 (state), so field 22 is the 20th after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether process `pid` exists (a zombie counts as existing).
pub(crate) fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The owner text this process writes into its markers.
fn owner_of_self() -> String {
    let pid = std::process::id();
    format!("{pid} {}\n", start_time(pid).unwrap_or(0))
}

/// Whether the owner written in a marker still runs.
fn owner_alive(text: &str) -> bool {
    let mut it = text.split_whitespace();
    let (Some(Ok(pid)), Some(Ok(start))) = (
        it.next().map(str::parse::<u32>),
        it.next().map(str::parse::<u64>),
    ) else {
        return false; // unreadable marker: its writer died half-way
    };
    match start_time(pid) {
        Some(now) => start == 0 || now == start,
        None => false,
    }
}

/// One 169.254.X.0/30 subnet owned by this process; the marker is removed on drop.
#[derive(Debug)]
pub(crate) struct Lease {
    dir: PathBuf,
    octet: u8,
    owner: String,
    released: bool,
}

impl Lease {
    /// X.
    pub(crate) fn octet(&self) -> u8 {
        self.octet
    }

    fn path(&self) -> PathBuf {
        marker(&self.dir, self.octet)
    }

    /// Removes the marker if it is still ours. Never panics.
    pub(crate) fn release(&mut self) {
        if std::mem::replace(&mut self.released, true) {
            return;
        }
        let _lock = lock(&self.dir); // remove it even if the lock cannot be taken
        if fs::read_to_string(self.path()).is_ok_and(|t| t == self.owner) {
            let _ = fs::remove_file(self.path());
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.release();
    }
}

fn marker(dir: &Path, octet: u8) -> PathBuf {
    dir.join(format!("subnet-{octet}"))
}

/// Takes a free X (no marker, or a stale one), scanning the candidates from a rotating start
/// so consecutive pairs get different subnets.
pub(crate) fn acquire(dir: &Path) -> io::Result<Lease> {
    static CURSOR: AtomicUsize = AtomicUsize::new(0);
    let cands = candidates();
    let start = (std::process::id() as usize).wrapping_add(CURSOR.fetch_add(1, Ordering::Relaxed));
    let owner = owner_of_self();
    let _lock = lock(dir)?;
    for k in 0..cands.len() {
        let octet = cands[(start + k) % cands.len()];
        let path = marker(dir, octet);
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(mut f) => f.write_all(owner.as_bytes())?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let text = fs::read_to_string(&path).unwrap_or_default();
                if owner_alive(&text) {
                    continue;
                }
                fs::write(&path, owner.as_bytes())?; // stale: its owner is gone
            }
            Err(e) => return Err(e),
        }
        return Ok(Lease {
            dir: dir.to_path_buf(),
            octet,
            owner,
            released: false,
        });
    }
    Err(io::Error::other(format!(
        "no free 169.254.X.0/30 subnet: all {} markers in {} belong to running processes \
         (too many live VethPairs?)",
        cands.len(),
        dir.display()
    )))
}

/// Removes the markers in `dir` whose owner is gone; returns how many.
pub(crate) fn remove_stale(dir: &Path) -> usize {
    if !dir.is_dir() {
        return 0;
    }
    let Ok(_lock) = lock(dir) else { return 0 };
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().starts_with("subnet-") {
            continue;
        }
        let text = fs::read_to_string(e.path()).unwrap_or_default();
        if !owner_alive(&text) && fs::remove_file(e.path()).is_ok() {
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of the test's own (not yet made), in its own temporary directory.
    fn temp_dir(name: &str) -> PathBuf {
        crate::test_path(name)
    }

    #[test]
    fn candidates_avoid_reserved_octets() {
        let c = candidates();
        assert_eq!(c.len(), 149);
        for x in [0, 1, 77, 90, 169, 254, 255] {
            assert!(!c.contains(&x), "{x}");
        }
    }

    #[test]
    fn leases_are_unique_and_released() {
        let dir = temp_dir("unique");
        let a = acquire(&dir).unwrap();
        let b = acquire(&dir).unwrap();
        assert_ne!(a.octet(), b.octet());
        let pa = marker(&dir, a.octet());
        assert_eq!(fs::read_to_string(&pa).unwrap(), owner_of_self());
        drop(a);
        assert!(!pa.exists());
        drop(b);
    }

    #[test]
    fn all_taken_by_live_owners_is_an_error_and_stale_markers_are_reused() {
        let dir = temp_dir("stale");
        fs::create_dir_all(&dir).unwrap();
        // every candidate held by this (live) process, except one held by a dead one
        let dead = {
            let mut c = std::process::Command::new("true").spawn().unwrap();
            c.wait().unwrap();
            c.id()
        };
        let cands = candidates();
        for x in &cands {
            fs::write(marker(&dir, *x), owner_of_self()).unwrap();
        }
        assert!(acquire(&dir).is_err());
        fs::write(marker(&dir, cands[7]), format!("{dead} 12345\n")).unwrap();
        let l = acquire(&dir).unwrap();
        assert_eq!(l.octet(), cands[7]);
        drop(l);
        // garbage and a dead owner are both stale
        fs::write(marker(&dir, cands[1]), "").unwrap();
        fs::write(marker(&dir, cands[2]), format!("{dead} 1\n")).unwrap();
        assert_eq!(remove_stale(&dir), 2);
        assert!(marker(&dir, cands[3]).exists()); // live owner kept
    }

    #[test]
    fn start_time_of_self_is_known() {
        assert!(start_time(std::process::id()).is_some());
        assert!(owner_alive(&owner_of_self()));
        assert!(!owner_alive("garbage"));
    }
}
