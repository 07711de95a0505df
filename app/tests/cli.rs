//! End-to-end tests of the `rtdaq` binary's command line: identity of the sealed binary,
//! `config check` on every shipped config and every invalid fixture, `config show`.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn rtdaq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rtdaq"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run rtdaq")
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn embedded_path() -> PathBuf {
    let requested = option_env!("RTDAQ_CONFIG")
        .unwrap_or("configs/host-loopback-udp.toml")
        .to_string();
    let p = PathBuf::from(&requested);
    if p.is_absolute() {
        p
    } else {
        root().join(p)
    }
}

#[test]
fn version_names_engine_platform_and_config_sha256() {
    let out = rtdaq(&["version"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let cfg = std::fs::read(embedded_path()).unwrap();
    let sha: String = Sha256::digest(&cfg)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert!(
        stdout.contains(&format!("config sha256: {sha}")),
        "{stdout}"
    );
    assert!(stdout.contains("engine:   socket"), "{stdout}");
    assert!(stdout.contains("platform: host"), "{stdout}");
    assert!(stdout.contains("commit:   "), "{stdout}");
    assert!(
        stdout.contains("features: ") && stdout.contains("engine-socket"),
        "{stdout}"
    );
}

#[test]
fn config_show_prints_the_embedded_file_verbatim() {
    let out = rtdaq(&["config", "show"]);
    assert!(out.status.success());
    assert_eq!(out.stdout, std::fs::read(embedded_path()).unwrap());
}

#[test]
fn embedded_config_checks_with_a_summary() {
    let out = rtdaq(&["config", "check"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("valid"), "{stdout}");
    assert!(
        stdout.to_lowercase().contains("total"),
        "summary has a memory total: {stdout}"
    );
}

#[test]
fn every_shipped_config_checks_ok() {
    let mut n = 0;
    for entry in std::fs::read_dir(root().join("configs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let out = rtdaq(&["config", "check", path.to_str().unwrap()]);
            let loaded = rtdaq_config::load_file(&path);
            let gpu = loaded.as_ref().is_ok_and(|c| c.uses_gpu());
            let ucx = loaded.as_ref().is_ok_and(|c| c.uses_ucx());
            let dada = loaded.as_ref().is_ok_and(|c| c.uses_dada());
            // A GPU (UCX, PSRDADA ring) deployment needs a `--features gpu` (`ucx`, `dada`)
            // binary: exit 2, saying so.
            let missing = if gpu && !cfg!(feature = "gpu") {
                Some("built without `--features gpu`")
            } else if ucx && !cfg!(feature = "ucx") {
                Some("built without `--features ucx`")
            } else if dada && !cfg!(feature = "dada") {
                Some("built without `--features dada`")
            } else {
                None
            };
            if let Some(why) = missing {
                assert_eq!(out.status.code(), Some(2), "{}", path.display());
                assert!(
                    text(&out.stderr).contains(why),
                    "{}: {}",
                    path.display(),
                    text(&out.stderr)
                );
                n += 1;
                continue;
            }
            assert!(
                out.status.success(),
                "{}: {}{}",
                path.display(),
                text(&out.stdout),
                text(&out.stderr)
            );
            n += 1;
        }
    }
    assert!(n >= 5, "expected the shipped configs, found {n}");
}

#[test]
fn every_invalid_fixture_exits_2_naming_the_key_path() {
    let dir = root().join("tests/fixtures/config-invalid");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let body = std::fs::read_to_string(&path).unwrap();
        let want_path = body
            .lines()
            .find_map(|l| l.strip_prefix("# expect-path: "))
            .unwrap_or_else(|| panic!("{}: no `# expect-path:` line", path.display()));
        let want_msg = body
            .lines()
            .find_map(|l| l.strip_prefix("# expect-message: "));
        let out = rtdaq(&["config", "check", path.to_str().unwrap()]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {stderr}", path.display());
        assert!(
            stderr
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{want_path}: "))),
            "{}: no error line for `{want_path}` in:\n{stderr}",
            path.display()
        );
        if let Some(m) = want_msg {
            assert!(
                stderr.contains(m.trim()),
                "{}: `{m}` not in:\n{stderr}",
                path.display()
            );
        }
        n += 1;
    }
    assert!(
        n >= 15,
        "expected one fixture per validation rule, found {n}"
    );
}

#[test]
fn unknown_key_gets_a_suggestion() {
    let dir = tempdir();
    let f = dir.join("typo.toml");
    let mut cfg = std::fs::read_to_string(embedded_path()).unwrap();
    cfg = cfg.replacen("\n[run]\n", "\n[run]\nduraton_s = 3\n", 1);
    assert!(
        cfg.contains("duraton_s"),
        "default config has a [run] table"
    );
    std::fs::write(&f, cfg).unwrap();
    let out = rtdaq(&["config", "check", f.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("run.duraton_s"), "{stderr}");
    assert!(stderr.contains("did you mean `duration_s`"), "{stderr}");
}

#[test]
fn missing_file_is_a_clear_exit_2() {
    let out = rtdaq(&["config", "check", "/nonexistent/rtdaq.toml"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("/nonexistent/rtdaq.toml"), "{stderr}");
}

#[test]
fn negative_duration_is_refused() {
    let out = rtdaq(&["run", "--duration=-1"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--duration -1"), "{stderr}");
}

#[test]
fn duration_beyond_the_config_range_is_refused() {
    // 1e12 s used to overflow the deadline: the run lasted 0.2 s and passed.
    for (d, sub) in [
        ("1e12", true),
        ("31536001", true),
        ("inf", true),
        ("NaN", true),
        ("1e12", false),
    ] {
        // `rtdaq --duration S` (no subcommand) is `rtdaq run --duration S`.
        let args: &[&str] = if sub {
            &["run", "--duration", d]
        } else {
            &["--duration", d]
        };
        let out = rtdaq(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--duration {d}: {stderr}");
        assert!(stderr.contains("0..=31536000"), "--duration {d}: {stderr}");
        assert!(
            stderr.contains("run.duration_s"),
            "--duration {d}: {stderr}"
        );
        // Refused before anything ran: no report, no live line.
        assert!(!stderr.contains("queues running"), "{stderr}");
    }
}

#[test]
fn unwritable_report_path_is_refused_before_the_run() {
    let dir = tempdir();
    let cases = [
        ("/nonexistent/dir/r.json", "does not exist"),
        (dir.to_str().unwrap(), "is a directory"),
    ];
    for (path, why) in cases {
        let start = std::time::Instant::now();
        let out = rtdaq(&["run", "--duration", "5", "--report-json", path]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{path}: {stderr}");
        assert!(stderr.contains("cannot write the JSON report"), "{stderr}");
        assert!(stderr.contains(why), "{path}: {stderr}");
        assert!(stderr.contains("nothing was run"), "{stderr}");
        // Before any thread started or packet moved: no "queues running", no report.
        assert!(!stderr.contains("queues running"), "{stderr}");
        assert!(
            start.elapsed().as_secs_f64() < 4.0,
            "{path}: the run went ahead"
        );
    }
}

/// `--metrics` and `--status-file` errors stop the run before it starts (exit 2, no
/// "queues running"): a name instead of an address, a port another socket holds, a status
/// file in a directory that does not exist.
#[test]
fn bad_metrics_address_and_status_file_are_refused_before_the_run() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = held.local_addr().unwrap().to_string();
    let cases: [(&[&str], &str); 3] = [
        (
            &["--metrics", "localhost:9464"],
            "is not an address and port",
        ),
        (&["--metrics", busy.as_str()], "cannot listen there"),
        (
            &["--status-file", "/nonexistent/dir/status.json"],
            "--status-file /nonexistent/dir/status.json: cannot write beside it",
        ),
    ];
    for (extra, why) in cases {
        let mut args = vec!["run", "--duration", "5"];
        args.extend_from_slice(extra);
        let out = rtdaq(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(why), "{extra:?}: {stderr}");
        assert!(!stderr.contains("queues running"), "{stderr}");
    }
    drop(held);
}

/// `--status-file F`: F holds the JSON status during the run (rewritten every second) and
/// the last one at its end, with the queue's packets.
#[test]
fn status_file_follows_the_run() {
    let dir = tempdir();
    let f = dir.join("status.json");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rtdaq"))
        .args(["run", "--duration", "3", "--status-file"])
        .arg(&f)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Start-up (locking, preallocation) takes its time on a loaded host: poll for the first
    // status with packets rather than guessing a moment. The file is written by rename, so
    // a read sees a whole status or none.
    let during: serde_json::Value = loop {
        if let Some(code) = child.try_wait().unwrap() {
            panic!("the run ended ({code}) before a status with packets was read");
        }
        let seen = std::fs::read_to_string(&f)
            .ok()
            .map(|t| serde_json::from_str::<serde_json::Value>(&t).unwrap())
            .filter(|v| v["rx"][0]["packets"].as_u64().is_some_and(|p| p > 0));
        if let Some(v) = seen {
            break v;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(child.wait().unwrap().success());
    let after: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
    assert_eq!(during["config"], "host-loopback-udp");
    let (a, b) = (
        during["rx"][0]["packets"].as_u64().unwrap(),
        after["rx"][0]["packets"].as_u64().unwrap(),
    );
    assert!(a > 0 && b > a, "during {a}, after {b}");
    assert!(after["elapsed_s"].as_f64().unwrap() >= 3.0, "{after}");
}

#[test]
fn bad_command_line_exits_2() {
    let out = rtdaq(&["config", "frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
}

/// This test's own temporary directory (removed when the test ends).
fn tempdir() -> PathBuf {
    rtdaq_testbed::test_dir()
}
