//! Build script of `rtdaq-ucx-sys`:
//!
//! 1. finds UCX through pkg-config (`ucx.pc`, Debian: `libucx-dev`, UCX 1.13) and emits its
//!    link directives (`-lucp -luct -lucs -lucm`);
//! 2. runs bindgen over `csrc/wrapper.h` (`<ucp/api/ucp.h>`) with an allowlist of what the
//!    crate uses.
//!
//! UCX's `static inline` entry point (`ucp_init`) and its pointer macros (`UCS_PTR_IS_ERR`,
//! `ucp_dt_make_contig`, ...) are re-implemented in Rust (`src/result.rs`), so no C shim is
//! compiled. A missing package fails the build with the `apt-get install` line that fixes it.
use std::env;
use std::path::PathBuf;

const APT: &str = "apt-get install -y libucx-dev libclang-dev pkg-config";

fn main() {
    println!("cargo:rerun-if-changed=csrc/wrapper.h");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    let ucx = match pkg_config::Config::new()
        .cargo_metadata(true)
        .atleast_version("1.13")
        .probe("ucx")
    {
        Ok(l) => l,
        Err(e) => panic!(
            "\n\nrtdaq-ucx-sys: ucx (>= 1.13) not found through pkg-config.\n\
             The UCX bindings build against Debian's UCX (libucx-dev).\n\
             Install it (Debian/Ubuntu, as root):\n    {APT}\n\
             or point PKG_CONFIG_PATH at the directory holding ucx.pc.\n\
             pkg-config said: {e}\n"
        ),
    };
    let includes = ucx.include_paths.clone();
    let found = includes
        .iter()
        .chain([PathBuf::from("/usr/include")].iter())
        .any(|d| d.join("ucp/api/ucp.h").exists());
    assert!(
        found,
        "\n\nrtdaq-ucx-sys: header <ucp/api/ucp.h> not found (pkg-config include paths \
         {includes:?}).\nInstall the development package (as root):\n    {APT}\n"
    );
    println!("cargo:rustc-env=RTDAQ_UCX_VERSION={}", ucx.version);

    let mut b = bindgen::Builder::default()
        .header("csrc/wrapper.h")
        .clang_args(includes.iter().map(|i| format!("-I{}", i.display())))
        .rust_target(bindgen::RustTarget::stable(85, 0).expect("rust 1.85 target"))
        .generate_comments(false)
        .layout_tests(true)
        .derive_default(true)
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .size_t_is_usize(true)
        .allowlist_var("UCP_API_MAJOR")
        .allowlist_var("UCP_API_MINOR")
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for f in [
        "ucp_config_read",
        "ucp_config_modify",
        "ucp_config_release",
        "ucp_init_version",
        "ucp_cleanup",
        "ucp_get_version_string",
        "ucp_worker_create",
        "ucp_worker_destroy",
        "ucp_worker_progress",
        "ucp_ep_create",
        "ucp_ep_close_nbx",
        "ucp_ep_flush_nbx",
        "ucp_listener_create",
        "ucp_listener_destroy",
        "ucp_listener_query",
        "ucp_listener_reject",
        "ucp_mem_map",
        "ucp_mem_unmap",
        "ucp_tag_send_nbx",
        "ucp_tag_recv_nbx",
        "ucp_tag_recv_request_test",
        "ucp_request_check_status",
        "ucp_request_cancel",
        "ucp_request_free",
        "ucs_status_string",
    ] {
        b = b.allowlist_function(f);
    }
    for t in [
        "ucs_status_t",
        "ucs_memory_type_t",
        "ucs_thread_mode_t",
        "ucp_params_field",
        "ucp_feature",
        "ucp_worker_params_field",
        "ucp_ep_params_field",
        "ucp_ep_params_flags_field",
        "ucp_err_handling_mode_t",
        "ucp_ep_close_flags_t",
        "ucp_listener_params_field",
        "ucp_listener_attr_field",
        "ucp_mem_map_params_field",
        "ucp_op_attr_t",
        "ucp_dt_type",
        "ucp_tag_recv_info_t",
    ] {
        b = b.allowlist_type(t);
    }
    let bindings = b.generate().unwrap_or_else(|e| {
        panic!(
            "rtdaq-ucx-sys: bindgen failed on the UCX headers ({e}); it needs libclang and the \
             headers ({APT})"
        )
    });
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");
}
