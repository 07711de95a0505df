//! `rtdaq config check` and `rtdaq config show`.

use super::{out, EXIT_CONFIG};
use crate::embedded;
use rtdaq_platform::hugepages::{self, HugePageSize};
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

/// Validates `file` (or the embedded config) and prints its summary.
pub fn check(file: Option<&Path>) -> anyhow::Result<ExitCode> {
    let (label, loaded) = match file {
        Some(f) => (f.display().to_string(), rtdaq_config::load_file(f)),
        None => (
            format!(
                "embedded config {} ({})",
                embedded::CONFIG_NAME,
                embedded::CONFIG_FILE
            ),
            rtdaq_config::load_str(embedded::CONFIG_TOML),
        ),
    };
    let config = match loaded {
        Ok(c) => c,
        Err(errors) => {
            let n = errors.0.len();
            eprintln!(
                "{label}: invalid ({n} error{}):",
                if n == 1 { "" } else { "s" }
            );
            for e in &errors.0 {
                eprintln!("  {e}");
            }
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    };
    let refusal = super::gpu::refusal(&config, &label)
        .or_else(|| super::gpu::ucx_refusal(&config, &label))
        .or_else(|| super::gpu::dada_refusal(&config, &label));
    if let Some(msg) = refusal {
        eprintln!("{msg}");
        return Ok(ExitCode::from(EXIT_CONFIG));
    }
    let summary = config.summary();
    let mut text = format!("{label}: valid\n");
    let (kind, platform) = (config.engine_kind().as_str(), config.platform().as_str());
    if kind != embedded::ENGINE || platform != crate::board::NAME {
        let _ = writeln!(
            text,
            "note: this binary runs engine {} on platform {}; this config needs a binary built \
             with `--no-default-features --features engine-{kind},platform-{platform}`",
            embedded::ENGINE,
            crate::board::NAME,
        );
    }
    for w in config.warnings() {
        let _ = writeln!(text, "warning: {w}");
    }
    let _ = write!(text, "{summary}");
    for (size, needed) in [
        (HugePageSize::Size2M, summary.hugepages_2m),
        (HugePageSize::Size1G, summary.hugepages_1g),
    ] {
        if needed > 0 {
            let _ = writeln!(text, "{}", hugepage_note(size, needed));
        }
    }
    if let Some(note) = super::gpu::host_note(&config) {
        let _ = writeln!(text, "{note}");
    }
    out(&text);
    Ok(ExitCode::SUCCESS)
}

/// How this host's hugepage pool compares with what the config needs (informational: the
/// config may be checked on a build machine, not the target).
fn hugepage_note(size: HugePageSize, needed: u64) -> String {
    let mib = size.bytes() >> 20;
    match hugepages::status(Path::new("/"), size) {
        Ok(st) if st.available() >= needed => format!(
            "this host: {} of {needed} needed {mib} MiB hugepages available",
            st.available()
        ),
        Ok(st) => format!(
            "this host: only {} of {needed} needed {mib} MiB hugepages available; before running \
             here reserve them as root: echo {} > {}",
            st.available(),
            st.total_for(needed),
            st.sysfs_path.display()
        ),
        Err(e) => format!("this host: cannot read the {mib} MiB hugepage pool ({e})"),
    }
}

/// Prints the embedded config verbatim.
pub fn show() -> anyhow::Result<ExitCode> {
    out(embedded::CONFIG_TOML);
    Ok(ExitCode::SUCCESS)
}
