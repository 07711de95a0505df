//! Every deployment file in `configs/` loads, and the default one looks as documented.

use std::path::{Path, PathBuf};

fn configs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "toml")
                && p.file_name() != Some("Cargo.toml".as_ref())
        })
        .collect();
    files.sort();
    files
}

/// `configs/*.toml` and the board examples `configs/<board>/*.toml`.
fn deployment_files() -> Vec<PathBuf> {
    let mut files = toml_files(&configs_dir());
    for board in BOARD_DIRS {
        files.extend(toml_files(&configs_dir().join(board)));
    }
    files
}

/// Board example directories: one per board platform, named as the platform.
const BOARD_DIRS: [&str; 3] = ["igx-orin", "igx-thor", "dgx-spark"];

#[test]
fn every_deployment_file_loads() {
    let files = deployment_files();
    assert!(
        files.len() >= 5,
        "expected at least 5 deployment files, found {files:?}"
    );
    let mut failures = Vec::new();
    for f in &files {
        match rtdaq_config::load_file(f) {
            Ok(c) => {
                let s = c.summary().to_string();
                assert!(s.contains("cores used"), "{s}");
            }
            Err(e) => failures.push(format!("{}:\n{e}", f.display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn default_config_is_socket_loopback() {
    let c = rtdaq_config::load_file(&configs_dir().join("host-loopback-udp.toml")).unwrap();
    assert_eq!(c.name(), "host-loopback-udp");
    assert_eq!(c.platform().as_str(), "host");
    assert_eq!(c.engine_kind().as_str(), "socket");
    let s = c.summary();
    assert_eq!(s.cores, vec![0, 1]);
    assert_eq!(s.hugepages_2m + s.hugepages_1g, 0);
    let rx = &c.interfaces[0].rx_queues[0];
    assert_eq!(
        (rx.cpu_core, rx.rt_priority, rx.batch_size, rx.ring_depth),
        (1, 50, 64, 1024)
    );
    assert!(c.generator.is_some());
    assert_eq!(c.run.duration_s, 10.0);
}

#[test]
fn missing_file_is_reported_as_file_error() {
    let e = rtdaq_config::load_file(Path::new("/nonexistent/x.toml")).unwrap_err();
    assert_eq!(e.0.len(), 1);
    assert_eq!(e.0[0].path, "<file>");
    assert!(e.0[0].message.contains("cannot read"));
}

/// Removing any single line of any deployment file never panics: it loads, or it fails
/// with errors that all carry a path and a message.
#[test]
fn line_deletions_never_panic() {
    for f in deployment_files() {
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for skip in 0..lines.len() {
            let mutated: String = lines
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != skip)
                .map(|(_, l)| format!("{l}\n"))
                .collect();
            if let Err(e) = rtdaq_config::load_str(&mutated) {
                assert!(!e.is_empty());
                for err in &e {
                    assert!(!err.path.is_empty() && !err.message.is_empty(), "{err:?}");
                }
            }
        }
    }
}

/// Each board directory has an example per engine (and may have more: instrument formats),
/// for its own platform, without warnings (queue cores on the board's isolated cores,
/// memory kinds that suit its GPU).
#[test]
fn board_examples_cover_every_engine() {
    for board in BOARD_DIRS {
        let files = toml_files(&configs_dir().join(board));
        let mut kinds: Vec<&str> = Vec::new();
        for f in &files {
            let c = rtdaq_config::load_file(f).unwrap_or_else(|e| panic!("{}:\n{e}", f.display()));
            assert_eq!(c.platform().as_str(), board, "{}", f.display());
            let w = c.warnings();
            assert!(w.is_empty(), "{}: {w:?}", f.display());
            kinds.push(c.engine_kind().as_str());
        }
        kinds.sort_unstable();
        kinds.dedup();
        assert_eq!(
            kinds,
            ["afpacket", "afxdp", "dpdk", "ibverbs", "socket"],
            "{board}"
        );
    }
}

/// AF_XDP at MTU 9000 (issue #20): an RX-only interface takes jumbo frames in several UMEM
/// frames (multi-buffer), so it needs that many buffers per frame; a GPU stage (one buffer
/// per packet) and a TX queue (one UMEM frame per frame) are refused, naming the key.
#[test]
fn afxdp_jumbo_rx_is_multi_buffer_with_its_buffers_and_no_gpu_stage() {
    let cfg = |buf_count: u32, extra_q: &str, tail: &str| {
        format!(
            "name = \"x\"\nplatform = \"host\"\n[engine]\nkind = \"afxdp\"\n[engine.afxdp]\nframe_size = 4096\n\
             [[memory_regions]]\nname = \"umem\"\nkind = \"host\"\nbuf_size = 4096\nbuf_count = {buf_count}\n\
             [[interfaces]]\nname = \"b\"\naddress = \"eth0\"\nmtu = 9000\ndefault_action = 0\n\
             [[interfaces.rx_queues]]\nid = 0\ncpu_core = 0\nbatch_size = 64\nring_depth = 4096\nmemory_regions = [\"umem\"]\nmode = \"direct\"\n{extra_q}\n{tail}"
        )
    };
    // 9022 B frames take 3 UMEM frames of 3840 B: 2 × 64 × 3 = 384 buffers at least.
    rtdaq_config::load_str(&cfg(384, "", "")).unwrap_or_else(|e| panic!("{e}"));
    let e = rtdaq_config::load_str(&cfg(383, "", "")).unwrap_err();
    assert!(
        e.0.iter()
            .any(|e| e.path == "memory_regions[0].buf_count" && e.message.contains("384")),
        "{e:?}"
    );
    let stage =
        "[[gpu_stages]]\nname = \"s\"\ngpu = 0\npackets_per_batch = 64\nmode = \"gather\"\n";
    let with_stage = cfg(8192, "gpu_stage = \"s\"", stage)
        .replace("kind = \"host\"", "kind = \"host_pinned\"\ngpu = 0");
    let e = rtdaq_config::load_str(&with_stage).unwrap_err();
    assert!(
        e.0.iter()
            .any(|e| e.path == "interfaces[0].rx_queues[0].gpu_stage"
                && e.message.contains("multi-buffer")),
        "{e:?}"
    );
}
