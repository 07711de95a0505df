//! Board rules: every file in `tests/fixtures/config-warn/` loads (it is valid) and warns as
//! it announces; the board tables in `rtdaq_platform::board` are the ones validation uses.
//!
//! Each fixture starts with
//! ```text
//! # expect-warning-path: <exact key path of one warning>
//! # expect-warning-message: <substring of that warning's message>
//! ```

use std::path::{Path, PathBuf};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/config-warn")
}

fn header<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .take_while(|l| l.starts_with('#'))
        .find_map(|l| l.strip_prefix(&format!("# {key}:")))
        .map(str::trim)
}

#[test]
fn every_warning_fixture_loads_and_warns_as_announced() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .expect("read tests/fixtures/config-warn")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 2,
        "expected at least 2 fixtures, found {files:?}"
    );
    let mut failures = Vec::new();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy();
        let text = std::fs::read_to_string(f).expect("read fixture");
        let (Some(path), Some(msg)) = (
            header(&text, "expect-warning-path"),
            header(&text, "expect-warning-message"),
        ) else {
            failures.push(format!(
                "{name}: missing `# expect-warning-path/-message:` header"
            ));
            continue;
        };
        match rtdaq_config::load_file(f) {
            Err(e) => failures.push(format!("{name}: expected a valid config, got:\n{e}")),
            Ok(c) => {
                let w = c.warnings();
                if !w.iter().any(|e| e.path == path && e.message.contains(msg)) {
                    failures.push(format!(
                        "{name}: expected warning `{path}: ...{msg}...`, got {w:?}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The config crate's board constants are the platform table's.
#[test]
fn board_facts_come_from_the_platform_table() {
    use rtdaq_config::Platform;
    use rtdaq_platform::board;
    assert_eq!(Platform::HOST.board(), None);
    assert_eq!(Platform::HOST.cpu_count(), None);
    assert_eq!(Platform::ALL.len(), board::BOARDS.len() + 1);
    assert_eq!(Platform::ALL[0], Platform::HOST);
    assert_eq!(Platform::from_name("igx-orn"), None);
    for (p, b) in Platform::ALL[1..].iter().zip(board::BOARDS) {
        assert_eq!(Platform::from_name(b.name), Some(*p));
        assert_eq!(p.board(), Some(b));
        assert_eq!(p.as_str(), b.name);
        assert_eq!(p.cpu_count(), Some(b.cpus));
        assert_eq!(p.memory_bytes(), Some(b.memory_bytes));
        assert_eq!(p.numa_nodes(), Some(b.numa_nodes));
    }
}

const SPARK_PINNED: &str = r#"
name = "t"
platform = "dgx-spark"
[engine]
kind = "dpdk"
[[memory_regions]]
name = "hdr"
kind = "huge"
buf_size = 128
buf_count = 1024
[[memory_regions]]
name = "payload"
kind = "host_pinned"
buf_size = 9216
buf_count = 1024
[[interfaces]]
name = "cx7_p0"
address = "0000:01:00.0"
mtu = 9000
[[interfaces.rx_queues]]
id = 0
cpu_core = 2
consumer_core = 3
memory_regions = ["hdr", "payload"]
hds_split = 64
"#;

/// `host_pinned` suits DGX Spark, `device` does not; `device` suits the IGX boards (discrete
/// GPU); `host` never warns about cores.
#[test]
fn memory_kinds_follow_the_gpu() {
    let c = rtdaq_config::load_str(SPARK_PINNED).expect("host_pinned on dgx-spark");
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());
    let e =
        rtdaq_config::load_str(&SPARK_PINNED.replace("\"host_pinned\"", "\"device\"")).unwrap_err();
    assert!(
        e.contains("memory_regions[1].kind", "use kind = \"host_pinned\""),
        "{e}"
    );
    for board in ["igx-orin", "igx-thor"] {
        let t = SPARK_PINNED
            .replace("\"host_pinned\"", "\"device\"")
            .replace("dgx-spark", board)
            // Payloads in GPU memory: the CPU reads the 74 B of headers only.
            .replace(
                "hds_split = 64",
                "hds_split = 74\n[run]\nvalidate = \"sequence\"",
            );
        rtdaq_config::load_str(&t).unwrap_or_else(|e| panic!("{board}: {e}"));
    }
    let host = SPARK_PINNED
        .replace("dgx-spark", "host")
        .replace("cpu_core = 2", "cpu_core = 0");
    assert!(rtdaq_config::load_str(&host).unwrap().warnings().is_empty());
}
