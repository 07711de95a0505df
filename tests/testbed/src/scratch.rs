//! Each test's own temporary directory.
//!
//! [`test_dir`] is a directory made with the `tempfile` crate the first time a test's thread
//! asks for it (libtest runs each test on a thread of its own), named after the test, and
//! removed with everything in it when that thread ends, whether the test passed or
//! panicked. No two tests, in one test binary or in two, ever share one, so one test's
//! clean-up can never remove another's files. `RTDAQ_TEST_KEEP_TMP=1` keeps the directories
//! (their paths are printed) to look at after a failure. The directory has mode 1777, as
//! `/tmp`: a test may run a program as another user there.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

/// The environment variable that keeps the directories after the tests.
pub const KEEP_ENV: &str = "RTDAQ_TEST_KEEP_TMP";

thread_local! {
    static DIR: RefCell<Option<tempfile::TempDir>> = const { RefCell::new(None) };
}

fn prefix() -> String {
    let name = std::thread::current()
        .name()
        .unwrap_or("thread")
        .to_string();
    let tail = name.rsplit("::").next().unwrap_or("test");
    let clean: String = tail
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    format!("rtdaq-{clean}-")
}

/// This test's own temporary directory, made with `tempfile` on first use by the test's thread,
/// named after the test and removed with its contents when that thread ends (kept, with its
/// path printed, when [`KEEP_ENV`] is `1`).
///
/// # Panics
/// When the directory cannot be made (the message names the reason).
pub fn test_dir() -> PathBuf {
    DIR.with(|d| {
        let mut d = d.borrow_mut();
        if d.is_none() {
            let mut dir = tempfile::Builder::new()
                .prefix(&prefix())
                .tempdir()
                .unwrap_or_else(|e| panic!("cannot make a temporary directory: {e}"));
            // Mode 1777, as /tmp: tests run the appliance as the unit's unprivileged user
            // (`setpriv --reuid=nobody`), which reads its config and writes its report here.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777))
                .unwrap_or_else(|e| panic!("chmod 1777 {}: {e}", dir.path().display()));
            if std::env::var(KEEP_ENV).is_ok_and(|v| v == "1") {
                dir.disable_cleanup(true);
                eprintln!(
                    "{KEEP_ENV}=1: this test's files stay in {}",
                    dir.path().display()
                );
            }
            *d = Some(dir);
        }
        d.as_ref()
            .map(|t| t.path().to_path_buf())
            .unwrap_or_default()
    })
}

/// `name` inside [`test_dir`].
pub fn test_path(name: impl AsRef<Path>) -> PathBuf {
    test_dir().join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_test_thread_has_its_own_directory_removed_when_it_ends() {
        let mine = test_dir();
        assert_eq!(test_dir(), mine);
        assert!(mine
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("rtdaq-each-test-thread-has-its-own-dir"));
        std::fs::write(test_path("a"), b"x").unwrap();
        let other = std::thread::spawn(|| {
            let d = test_dir();
            std::fs::write(test_path("a"), b"y").unwrap();
            d
        })
        .join()
        .unwrap();
        assert_ne!(other, mine);
        assert!(!other.exists(), "removed when its thread ended");
        assert_eq!(std::fs::read(test_path("a")).unwrap(), b"x");
    }
}
