//! Rules of the tree that keep the test suite trustworthy and the appliance sealed (issue
//! #29), checked over the repository's own files:
//!
//! - no test names a temporary path itself (`std::env::temp_dir()`): a pid-named folder is
//!   shared by every test of a binary, and one test's clean-up removed another's files
//!   while it ran. Tests use `rtdaq_testbed::test_dir` (the `tempfile` crate) instead;
//! - no test prints a skip and passes: a missing peer or privilege goes through
//!   `rtdaq_testbed::require` (a failure in `scripts/test.sh`, a recorded skip elsewhere);
//! - no production source reads a test hook's environment variable: the hooks live in
//!   `app/runtime/src/test_hooks.rs`, compiled only with the `test-hooks` feature;
//! - every path in a systemd unit's `ReadWritePaths=`-like setting that the unit does not
//!   create itself has the `-` prefix (a missing path must not keep the unit from starting).

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every file under `dir` (recursively) whose name ends in `ext`, outside `target/` and
/// hidden directories.
fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        if p.is_dir() {
            files(&p, ext, out);
        } else if name.ends_with(ext) {
            out.push(p);
        }
    }
}

fn rust_files() -> Vec<(String, String)> {
    let mut v = Vec::new();
    files(&root(), ".rs", &mut v);
    assert!(v.len() > 100, "found only {} Rust files", v.len());
    v.into_iter()
        .map(|p| {
            let rel = p
                .strip_prefix(root())
                .unwrap_or(&p)
                .to_string_lossy()
                .into_owned();
            (rel, std::fs::read_to_string(&p).unwrap_or_default())
        })
        .collect()
}

/// `(file:line, line)` of every line of the tree's Rust files that contains `needle`.
fn lines_with(needle: &str, except: &[&str]) -> Vec<String> {
    let me = "app/tests/hygiene.rs";
    rust_files()
        .into_iter()
        .filter(|(rel, _)| rel != me && !except.contains(&rel.as_str()))
        .flat_map(|(rel, text)| {
            text.lines()
                .enumerate()
                .filter(|(_, l)| l.contains(needle))
                .map(|(i, l)| format!("{rel}:{}: {}", i + 1, l.trim()))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn no_test_names_its_own_temporary_path() {
    let found = lines_with("temp_dir()", &[]);
    assert!(
        found.is_empty(),
        "use rtdaq_testbed::test_dir / test_path (a directory of the test's own, the tempfile crate):\n{}",
        found.join("\n")
    );
}

#[test]
fn no_test_prints_a_skip_and_passes() {
    let found: Vec<String> = lines_with("println!(", &["tests/testbed/src/require.rs"])
        .into_iter()
        .chain(lines_with("SKIPPED", &["tests/testbed/src/require.rs"]))
        .filter(|l| l.to_lowercase().contains("skipped"))
        .collect();
    assert!(
        found.is_empty(),
        "a test that cannot run here calls rtdaq_testbed::require::skip (or skip_gpu):\n{}",
        found.join("\n")
    );
}

#[test]
fn test_hooks_are_only_in_the_feature_gated_module() {
    let hooks = "app/runtime/src/test_hooks.rs";
    let production: Vec<String> = lines_with("\"RTDAQ_TEST_", &[hooks])
        .into_iter()
        .filter(|l| {
            // Tests and the test bed may name them; production sources may not.
            let f = l.split(':').next().unwrap_or("");
            !(f.contains("/tests/") || f.starts_with("tests/") || f.ends_with("/tests.rs"))
        })
        .collect();
    assert!(
        production.is_empty(),
        "a test hook read outside {hooks}:\n{}",
        production.join("\n")
    );
    let lib = std::fs::read_to_string(root().join("app/runtime/src/lib.rs")).unwrap();
    assert!(
        lib.contains("#[cfg(feature = \"test-hooks\")]\npub mod test_hooks;"),
        "app/runtime/src/lib.rs declares test_hooks behind the test-hooks feature"
    );
}

#[test]
fn systemd_paths_the_unit_does_not_make_have_the_dash_prefix() {
    let mut units = Vec::new();
    files(&root().join("rt-tuning/systemd"), ".service", &mut units);
    files(&root().join("rt-tuning/systemd"), ".conf", &mut units);
    assert!(units.len() >= 5, "{units:?}");
    let keys = [
        "ReadWritePaths=",
        "ReadOnlyPaths=",
        "InaccessiblePaths=",
        "ExecPaths=",
        "NoExecPaths=",
        "BindPaths=",
        "BindReadOnlyPaths=",
    ];
    // StateDirectory=rtdaq makes /var/lib/rtdaq before the unit's mounts are set up.
    let made = ["/var/lib/rtdaq"];
    let mut bad = Vec::new();
    for u in &units {
        let text = std::fs::read_to_string(u).unwrap();
        for (i, l) in text.lines().enumerate() {
            let Some(v) = keys.iter().find_map(|k| l.trim().strip_prefix(k)) else {
                continue;
            };
            for p in v.split_whitespace() {
                let p = p.trim_start_matches('+');
                if !p.starts_with('-') && !made.iter().any(|m| p.starts_with(m)) {
                    bad.push(format!("{}:{}: {p}", u.display(), i + 1));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "a path that may be absent without the - prefix keeps the unit from starting (status 226/NAMESPACE):\n{}",
        bad.join("\n")
    );
}
