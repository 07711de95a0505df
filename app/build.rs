//! Build script of the `rtdaq` appliance binary.
//!
//! 1. Enforces exactly one `engine-*` and exactly one `platform-*` cargo feature and turns them
//!    into `cfg(rtdaq_engine = "...")` / `cfg(rtdaq_platform = "...")`.
//! 2. Reads the deployment config named by `RTDAQ_CONFIG` (default
//!    `configs/host-loopback-udp.toml` on `host`, the board's `configs/<board>/<engine>-*.toml`
//!    on a board; relative to the workspace root), validates it with the
//!    same `rtdaq-config` crate the CLI uses (a bad config fails the build with the same message),
//!    checks that it asks for this binary's engine and platform, and embeds its text with its
//!    SHA-256 into `$OUT_DIR/embedded.rs`.
//! 3. Refuses the `test-hooks` feature in a release build (no appliance carries the tests'
//!    fault hooks).

use sha2::{Digest, Sha256};
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every engine and board the config knows, in its spelling (also the feature suffixes):
/// one list, the config crate's, so a new engine or board is not listed here again.
fn engines() -> Vec<&'static str> {
    rtdaq_config::model::EngineKind::ALL
        .map(|k| k.as_str())
        .to_vec()
}

fn platforms() -> Vec<&'static str> {
    rtdaq_config::model::Platform::ALL
        .map(|p| p.as_str())
        .to_vec()
}
const DEFAULT_CONFIG: &str = "configs/host-loopback-udp.toml";

fn feature_on(prefix: &str, name: &str) -> bool {
    let var = format!(
        "CARGO_FEATURE_{}_{}",
        prefix.to_uppercase(),
        name.to_uppercase().replace('-', "_")
    );
    env::var_os(var).is_some()
}

fn exactly_one(prefix: &str, names: &[&'static str]) -> Result<&'static str, String> {
    let on: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| feature_on(prefix, n))
        .collect();
    match on.as_slice() {
        [one] => Ok(one),
        [] => Err(format!(
            "no {prefix} selected: enable exactly one of {} (e.g. `--features {prefix}-{}`)",
            names
                .iter()
                .map(|n| format!("{prefix}-{n}"))
                .collect::<Vec<_>>()
                .join(", "),
            names[0]
        )),
        many => Err(format!(
            "more than one {prefix} selected ({}): an rtdaq binary has exactly one; \
             build with `--no-default-features --features {prefix}-<one>,...`",
            many.iter()
                .map(|n| format!("{prefix}-{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn fail(lines: &[String]) -> ! {
    for l in lines {
        println!("cargo::error={l}");
    }
    std::process::exit(1);
}

fn git_commit(root: &Path) -> String {
    let out = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(root)
        .output();
    let Some(out) = out.ok().filter(|o| o.status.success()) else {
        return "unknown".into();
    };
    let mut commit = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .current_dir(root)
        .output()
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(false);
    if dirty {
        commit.push_str("-dirty");
    }
    commit
}

/// The config embedded when `RTDAQ_CONFIG` is unset: [`DEFAULT_CONFIG`] on `host`; on a board
/// the first of `configs/<board>/<engine>-*.toml` (so `--features engine-socket,platform-igx-thor`
/// builds with `configs/igx-thor/socket-udp.toml`), else [`DEFAULT_CONFIG`] (which then fails
/// the platform check with its message).
fn default_config(root: &Path, engine: &str, platform: &str) -> String {
    if platform == "host" {
        return DEFAULT_CONFIG.to_string();
    }
    let dir = format!("configs/{platform}");
    let mut names: Vec<String> = fs::read_dir(root.join(&dir))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("{engine}-")) && n.ends_with(".toml"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
        .first()
        .map_or_else(|| DEFAULT_CONFIG.to_string(), |n| format!("{dir}/{n}"))
}

/// The `test-hooks` feature (faults the tests inject) never goes into a release build: an
/// appliance binary must not carry code that an environment variable can use to stall it.
fn no_test_hooks_in_release() -> Result<(), String> {
    let release = env::var("PROFILE").is_ok_and(|p| p == "release");
    if release && env::var_os("CARGO_FEATURE_TEST_HOOKS").is_some() {
        return Err(
            "the `test-hooks` feature is for test builds only (faults the tests inject through RTDAQ_TEST_STALL): a release build never takes it; build the tests' binary without --release, and an appliance without --features test-hooks".into(),
        );
    }
    Ok(())
}

fn main() {
    println!("cargo::rerun-if-env-changed=RTDAQ_CONFIG");
    println!("cargo::rerun-if-changed=build.rs");
    let (engines, platforms) = (engines(), platforms());
    let engine_cfg = engines
        .iter()
        .map(|e| format!("\"{e}\""))
        .collect::<Vec<_>>()
        .join(",");
    let platform_cfg = platforms
        .iter()
        .map(|e| format!("\"{e}\""))
        .collect::<Vec<_>>()
        .join(",");
    println!("cargo::rustc-check-cfg=cfg(rtdaq_engine, values({engine_cfg}))");
    println!("cargo::rustc-check-cfg=cfg(rtdaq_platform, values({platform_cfg}))");

    let engine = exactly_one("engine", &engines);
    let platform = exactly_one("platform", &platforms);
    let (engine, platform) = match (engine, platform) {
        (Ok(e), Ok(p)) => (e, p),
        (e, p) => fail(&[e.err(), p.err()].into_iter().flatten().collect::<Vec<_>>()),
    };
    if let Err(e) = no_test_hooks_in_release() {
        fail(&[e]);
    }
    println!("cargo::rustc-cfg=rtdaq_engine=\"{engine}\"");
    println!("cargo::rustc-cfg=rtdaq_platform=\"{platform}\"");

    let manifest =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest
        .parent()
        .expect("app/ lives in the workspace root")
        .to_path_buf();
    let requested =
        env::var("RTDAQ_CONFIG").unwrap_or_else(|_| default_config(&root, engine, platform));
    let path = if Path::new(&requested).is_absolute() {
        PathBuf::from(&requested)
    } else {
        root.join(&requested)
    };
    println!("cargo::rerun-if-changed={}", path.display());
    for head in [".git/HEAD", ".git/index"] {
        if root.join(head).exists() {
            println!("cargo::rerun-if-changed={}", root.join(head).display());
        }
    }

    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => fail(&[format!(
            "RTDAQ_CONFIG={requested}: cannot read {}: {e} (set RTDAQ_CONFIG to a file under configs/)",
            path.display()
        )]),
    };
    let config = match rtdaq_config::load_str(&text) {
        Ok(c) => c,
        Err(errors) => {
            let mut lines = vec![format!(
                "invalid deployment config {} (RTDAQ_CONFIG={requested}):",
                path.display()
            )];
            lines.extend(errors.0.iter().map(|e| format!("  {e}")));
            fail(&lines)
        }
    };
    let mismatch = mismatches(&config, &path, engine, platform);
    if !mismatch.is_empty() {
        fail(&mismatch);
    }

    // Valid but poor on the board (queue cores that are not isolated): shown, not fatal.
    for w in config.warnings() {
        println!("cargo::warning={}: {w}", path.display());
    }

    let sha = Sha256::digest(text.as_bytes());
    let sha_hex = sha.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    });
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    fs::write(out.join("embedded.toml"), &text).expect("write embedded.toml");
    let file_name = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut features: Vec<String> = env::vars()
        .filter_map(|(k, _)| {
            k.strip_prefix("CARGO_FEATURE_")
                .map(|f| f.to_lowercase().replace('_', "-"))
        })
        .collect();
    features.sort();
    let code = format!(
        "/// Text of the embedded deployment config (validated at build time).\n\
         pub const CONFIG_TOML: &str = include_str!(concat!(env!(\"OUT_DIR\"), \"/embedded.toml\"));\n\
         /// SHA-256 of [`CONFIG_TOML`], lowercase hex.\n\
         pub const CONFIG_SHA256: &str = {sha_hex:?};\n\
         /// File name the config was embedded from.\n\
         pub const CONFIG_FILE: &str = {file_name:?};\n\
         /// The config's `name`.\n\
         pub const CONFIG_NAME: &str = {name:?};\n\
         /// Engine compiled into this binary.\n\
         pub const ENGINE: &str = {engine:?};\n\
         /// Platform compiled into this binary.\n\
         pub const PLATFORM: &str = {platform:?};\n\
         /// Cargo features enabled for this binary.\n\
         pub const FEATURES: &[&str] = &{features:?};\n\
         /// Git commit the binary was built from (`-dirty` when the tree had changes).\n\
         pub const GIT_COMMIT: &str = {commit:?};\n",
        name = config.name(),
        commit = git_commit(&root),
    );
    fs::write(out.join("embedded.rs"), code).expect("write embedded.rs");
}

/// What a valid config needs that this build lacks: its engine, its board, the `gpu` or
/// `ucx` feature; each line says how to build it.
fn mismatches(
    config: &rtdaq_config::Config,
    path: &Path,
    engine: &str,
    platform: &str,
) -> Vec<String> {
    let mut mismatch = Vec::new();
    if config.engine_kind().as_str() != engine {
        mismatch.push(format!(
            "{}: engine.kind = \"{}\" but this binary is built with engine-{engine}; \
             build with `--no-default-features --features engine-{},platform-{}`",
            path.display(),
            config.engine_kind().as_str(),
            config.engine_kind().as_str(),
            config.platform().as_str()
        ));
    }
    if config.platform().as_str() != platform {
        mismatch.push(format!(
            "{}: platform = \"{}\" but this binary is built with platform-{platform}; \
             build with `--no-default-features --features engine-{},platform-{}`",
            path.display(),
            config.platform().as_str(),
            config.engine_kind().as_str(),
            config.platform().as_str()
        ));
    }
    if config.uses_gpu() && env::var_os("CARGO_FEATURE_GPU").is_none() {
        mismatch.push(format!(
            "{}: the config uses GPU memory or a GPU stage but this binary is built without \
             `--features gpu`; build with `--features gpu`",
            path.display()
        ));
    }
    if config.uses_dada() && env::var_os("CARGO_FEATURE_DADA").is_none() {
        mismatch.push(format!(
            "{}: a queue writes a PSRDADA ring ([[dada_rings]]) but this binary is built \
             without `--features dada`; build with `--features dada` (a C compiler, libclang)",
            path.display()
        ));
    }
    if config.uses_ucx() && env::var_os("CARGO_FEATURE_UCX").is_none() {
        mismatch.push(format!(
            "{}: an egress sink sends over UCX (protocol = \"ucx\") but this binary is built \
             without `--features ucx`; build with `--features ucx` (needs libucx-dev)",
            path.display()
        ));
    }
    mismatch
}
