//! What a test needs from its host (root, a peer program, a kernel facility), and what
//! happens when the host lacks it.
//!
//! A test that cannot run here must never pass silently. Every test that depends on
//! something the host may lack asks through this module:
//!
//! - [`skip`]`(why)`: the test cannot run here. In **required mode**
//!   (`RTDAQ_TEST_REQUIRE=1`, which `scripts/test.sh` sets) this **panics**: on a host that
//!   `scripts/install-test-deps.sh` prepared, a missing peer or privilege is a failure.
//!   Outside it (a developer's `cargo test -- --ignored`) the test prints why, records the
//!   skip and returns `()` for the caller to `return`.
//! - [`skip_gpu`]`(why)`: a GPU test off the GPU host (no CUDA driver). The one skip that is
//!   expected in `scripts/test.sh`; it never panics, and it is recorded like any other.
//! - [`skip_part`]`(what, why)`: one part of a test the host's kernel cannot do, while
//!   the test checked the other outcome; recorded, never a failure.
//! - [`need_root`], [`need_tool`], [`need_file`]: the common checks, each returning `true`
//!   when the test can go on (`if !need_root() { return; }`).
//!
//! Every skip is appended, one line each (`KIND<tab>binary test: why`), to the file named by
//! `RTDAQ_TEST_SKIP_LOG` when it is set: `scripts/test.sh` prints them in its summary, so a
//! skipped test is named, never counted as passed. The test's name is its thread's name,
//! which libtest sets to the test's path.

use std::io::Write;
use std::path::Path;

/// The environment variable that turns on required mode (`1`).
pub const REQUIRE_ENV: &str = "RTDAQ_TEST_REQUIRE";
/// The environment variable naming the file each skip is appended to.
pub const SKIP_LOG_ENV: &str = "RTDAQ_TEST_SKIP_LOG";

/// True in required mode: a missing peer or privilege fails the test.
pub fn required() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1")
}

/// The running test's name (libtest names each test's thread after it), with the test
/// binary's name before it.
pub fn test_name() -> String {
    let test = std::thread::current()
        .name()
        .unwrap_or("(unnamed thread)")
        .to_string();
    let bin = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|s| match s.rsplit_once('-') {
            // cargo's test executables end in a hash: `record-0123abcd...`
            Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_string(),
            _ => s,
        })
        .unwrap_or_default();
    format!("{bin} {test}")
}

fn record(kind: &str, why: &str) {
    let name = test_name();
    let bar = "!".repeat(78);
    eprintln!("{bar}\n!! {kind} {name}: {why}\n{bar}");
    if let Some(path) = std::env::var_os(SKIP_LOG_ENV) {
        // One write of one line with O_APPEND: lines of parallel tests never interleave.
        let line = format!("{kind}\t{name}: {}\n", why.replace('\n', " "));
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            panic!(
                "{name}: cannot record the skip in {} ({e})",
                Path::new(&path).display()
            );
        }
    }
}

/// The test cannot run here because of `why`. Panics in required mode; otherwise prints and
/// records the skip. The caller returns right after.
///
/// # Panics
/// In required mode, always (with `why`); also when the skip log cannot be written.
pub fn skip(why: impl std::fmt::Display) {
    let why = why.to_string();
    if required() {
        panic!(
            "{}: {why} ({REQUIRE_ENV}=1: a test whose peer or privilege is missing fails; scripts/install-test-deps.sh installs the peers, and the tests run as root)",
            test_name()
        );
    }
    record("SKIPPED", &why);
}

/// A GPU test on a host without a usable GPU (`why`: no CUDA driver, or the opposite case of
/// a test for hosts without one): skipped and recorded in every mode.
///
/// # Panics
/// When the skip log cannot be written.
pub fn skip_gpu(why: impl std::fmt::Display) {
    record("SKIPPED (GPU)", &why.to_string());
}

/// One part of a test that this host's kernel cannot do (`what`, because `why`), while the
/// rest of the test ran and checked the other outcome (e.g. a NIC feature refused: the
/// refusal's message is checked instead). Recorded in every mode, never a failure: the
/// summary of `scripts/test.sh` names it, so the part that did not run is never counted as
/// tested.
///
/// # Panics
/// When the skip log cannot be written.
pub fn skip_part(what: &str, why: impl std::fmt::Display) {
    record(
        "PART NOT RUN",
        &format!("part '{what}' not run here: {why}"),
    );
}

/// True when the process runs as root; otherwise [`skip`]s (`what` needs root).
pub fn need_root(what: &str) -> bool {
    if crate::is_root() {
        return true;
    }
    skip(format!("not root ({what} needs root)"));
    false
}

/// True when `tool` runs (`tool ARG` exits 0, e.g. `--version`); otherwise [`skip`]s,
/// naming `install` (how to get it).
pub fn need_tool(tool: &str, arg: &str, install: &str) -> bool {
    let ok = std::process::Command::new(tool)
        .arg(arg)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        skip(format!("{tool} is not installed ({install})"));
    }
    ok
}

/// True when `path` exists; otherwise [`skip`]s, naming `make` (what makes it).
pub fn need_file(path: &Path, make: &str) -> bool {
    if path.exists() {
        return true;
    }
    skip(format!("{} is missing ({make})", path.display()));
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test changes the process environment: the others here do not read it.
    #[test]
    fn a_skip_panics_in_required_mode_and_is_recorded_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("skips");
        std::env::set_var(SKIP_LOG_ENV, &log);
        std::env::set_var(REQUIRE_ENV, "1");
        let r = std::panic::catch_unwind(|| skip("no frobnicator"));
        let msg = r.unwrap_err();
        let msg = msg.downcast_ref::<String>().unwrap();
        assert!(
            msg.contains("no frobnicator") && msg.contains("RTDAQ_TEST_REQUIRE=1"),
            "{msg}"
        );
        // The GPU skip never panics, and is recorded.
        skip_gpu("no CUDA driver");
        std::env::set_var(REQUIRE_ENV, "0");
        skip("no peer");
        std::env::remove_var(REQUIRE_ENV);
        std::env::remove_var(SKIP_LOG_ENV);
        let text = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let me = "a_skip_panics_in_required_mode_and_is_recorded_otherwise";
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].starts_with("SKIPPED (GPU)\t"), "{text}");
        assert!(
            lines[0].contains(me) && lines[0].ends_with(": no CUDA driver"),
            "{text}"
        );
        assert!(lines[1].starts_with("SKIPPED\t"), "{text}");
        assert!(
            lines[1].contains(me) && lines[1].ends_with(": no peer"),
            "{text}"
        );
    }
}
