//! The board examples `configs/<board>/*.toml` pass `rtdaq config check` (a GPU deployment
//! needs a `--features gpu` binary and says so), and board warnings are printed, not fatal.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn rtdaq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rtdaq"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run rtdaq")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn every_board_example_checks_ok() {
    let mut n = 0;
    for board in ["igx-orin", "igx-thor", "dgx-spark"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("configs").join(board))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        files.sort();
        // One per engine (configs/schema/tests/deployments.rs checks the engines) and one
        // with an instrument format.
        assert_eq!(
            files.len(),
            6,
            "{board}: an example per engine and one format"
        );
        for path in files {
            let out = rtdaq(&["config", "check", path.to_str().unwrap()]);
            let gpu = rtdaq_config::load_file(&path).is_ok_and(|c| c.uses_gpu());
            if gpu && !cfg!(feature = "gpu") {
                assert_eq!(out.status.code(), Some(2), "{}", path.display());
                assert!(
                    text(&out.stderr).contains("--features gpu"),
                    "{}",
                    text(&out.stderr)
                );
            } else {
                let stdout = text(&out.stdout);
                assert!(
                    out.status.success(),
                    "{}: {stdout}{}",
                    path.display(),
                    text(&out.stderr)
                );
                assert!(!stdout.contains("warning:"), "{}: {stdout}", path.display());
            }
            n += 1;
        }
    }
    assert_eq!(n, 18);
}

#[test]
fn board_warnings_are_printed_and_not_fatal() {
    let dir = root().join("tests/fixtures/config-warn");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let body = std::fs::read_to_string(&path).unwrap();
        let want = body
            .lines()
            .find_map(|l| l.strip_prefix("# expect-warning-path: "))
            .expect("header");
        let out = rtdaq(&["config", "check", path.to_str().unwrap()]);
        let stdout = text(&out.stdout);
        assert!(
            out.status.success(),
            "{}: {}",
            path.display(),
            text(&out.stderr)
        );
        assert!(
            stdout.contains(&format!("warning: {want}: ")),
            "{}: {stdout}",
            path.display()
        );
    }
}
