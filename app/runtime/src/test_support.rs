//! What the crate's unit tests share (compiled for tests only).

/// A shipped config, found at run time: below `RTDAQ_ROOT` (the repository root where the
/// test binary runs, e.g. the GPU host's copy: scripts/gpu-host.sh sets it), else the
/// current directory's repository (cargo runs unit tests in the crate's directory). Never the
/// build's path (`CARGO_MANIFEST_DIR`): a carried test binary runs elsewhere.
pub(crate) fn shipped_config(name: &str) -> std::path::PathBuf {
    let root = std::env::var_os("RTDAQ_ROOT").map_or_else(
        || {
            let here = std::env::current_dir().unwrap();
            here.ancestors()
                .find(|d| d.join("configs").join(name).is_file())
                .unwrap_or(&here)
                .to_path_buf()
        },
        std::path::PathBuf::from,
    );
    root.join("configs").join(name)
}
