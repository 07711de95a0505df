//! Every file in `tests/fixtures/config-invalid/` is rejected with the error it announces.
//!
//! Each fixture starts with
//! ```text
//! # expect-path: <exact key path of one reported error>
//! # expect-message: <substring of that error's message>
//! ```

use std::path::{Path, PathBuf};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/config-invalid")
}

fn header<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .take_while(|l| l.starts_with('#'))
        .find_map(|l| l.strip_prefix(&format!("# {key}:")))
        .map(str::trim)
}

#[test]
fn every_invalid_fixture_fails_as_announced() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .expect("read tests/fixtures/config-invalid")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 15,
        "expected at least 15 fixtures, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy();
        let text = std::fs::read_to_string(f).expect("read fixture");
        let (Some(path), Some(msg)) = (
            header(&text, "expect-path"),
            header(&text, "expect-message"),
        ) else {
            failures.push(format!(
                "{name}: missing `# expect-path:` / `# expect-message:` header"
            ));
            continue;
        };
        match rtdaq_config::load_file(f) {
            Ok(_) => failures.push(format!("{name}: loaded, expected `{path}: ...{msg}...`")),
            Err(errors) => {
                if !errors
                    .0
                    .iter()
                    .any(|e| e.path == path && e.message.contains(msg))
                {
                    failures.push(format!(
                        "{name}: expected `{path}: ...{msg}...`, got:\n{errors}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn unknown_key_fixture_suggests() {
    let text = std::fs::read_to_string(fixtures_dir().join("unknown-key.toml")).unwrap();
    let e = rtdaq_config::load_str(&text).unwrap_err();
    assert!(e.to_string().contains("did you mean"), "{e}");
}
