//! What `config check` and `run` say about configs that need an optional part this binary
//! may lack: the GPU data path (`gpu`), UCX egress (`ucx`), PSRDADA rings (`dada`).

use rtdaq_config::Config;

/// `Some(message)` when `config` needs the `gpu` feature and this binary lacks it.
pub fn refusal(config: &Config, label: &str) -> Option<String> {
    if cfg!(feature = "gpu") || !config.uses_gpu() {
        return None;
    }
    // A config that also sends over UCX names both features, so one rebuild does.
    let features = if config.uses_ucx() && !cfg!(feature = "ucx") {
        "gpu,ucx"
    } else {
        "gpu"
    };
    Some(format!(
        "{label}: uses GPU memory or a GPU stage, but {}; rebuild with `cargo build --release --features {features}`",
        rtdaq_runtime::gpu_hook::NOT_BUILT_WITH_GPU
    ))
}

/// `Some(message)` when `config` sends over UCX and this binary lacks the `ucx` feature.
pub fn ucx_refusal(config: &Config, label: &str) -> Option<String> {
    if cfg!(feature = "ucx") || !config.uses_ucx() {
        return None;
    }
    Some(format!(
        "{label}: an egress sink sends over UCX (protocol = \"ucx\"), but this binary was built without `--features ucx`; rebuild with `cargo build --release --features ucx` (needs libucx-dev)"
    ))
}

/// `Some(message)` when `config` writes a PSRDADA ring and this binary lacks the `dada`
/// feature.
pub fn dada_refusal(config: &Config, label: &str) -> Option<String> {
    if cfg!(feature = "dada") || !config.uses_dada() {
        return None;
    }
    Some(format!(
        "{label}: a queue writes a PSRDADA ring ([[dada_rings]]), but {}; rebuild with `cargo build --release --features dada` (needs a C compiler and libclang)",
        rtdaq_runtime::dada_ring::NOT_BUILT_WITH_DADA
    ))
}

/// Informational line about this host's CUDA driver (a config may be checked on a build
/// machine, not the target).
pub fn host_note(config: &Config) -> Option<String> {
    if !config.uses_gpu() {
        return None;
    }
    #[cfg(feature = "gpu")]
    {
        Some(match rtdaq_gpu::require_driver() {
            Ok(()) => "this host: CUDA driver found (libcuda.so)".to_owned(),
            Err(e) => format!("this host: {e}; `rtdaq run` refuses this config here"),
        })
    }
    #[cfg(not(feature = "gpu"))]
    None
}
