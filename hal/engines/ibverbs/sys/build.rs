//! Build script of `rtdaq-ibverbs-sys`:
//!
//! 1. finds libibverbs and librdmacm through pkg-config (Debian: `libibverbs-dev`,
//!    `librdmacm-dev`, rdma-core 44) and emits their link directives;
//! 2. compiles `csrc/shim.c`, which re-exports the `static inline` verbs
//!    (`ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq`, `ibv_req_notify_cq`,
//!    `ibv_create_flow`, `ibv_destroy_flow`) as real symbols, and `csrc/mlx5dv_shim.c`
//!    (the striding receive queue: libmlx5's `mlx5dv_*` through `dlopen` at run time, the
//!    `static inline` WQ / indirection-table / `ibv_create_qp_ex` verbs, the multi-packet
//!    WQE write and doorbell);
//! 3. runs bindgen over `csrc/wrapper.h` and `csrc/mlx5dv_shim.h` with an allowlist of what
//!    the crate uses.
//!
//! A missing package fails the build with the `apt-get install` line that fixes it.
use std::env;
use std::path::PathBuf;

const APT: &str = "apt-get install -y libibverbs-dev librdmacm-dev libclang-dev pkg-config";

fn probe(name: &str) -> pkg_config::Library {
    match pkg_config::Config::new().cargo_metadata(true).probe(name) {
        Ok(l) => l,
        Err(e) => panic!(
            "\n\nrtdaq-ibverbs-sys: {name} not found through pkg-config.\n\
             The ibverbs engine builds against Debian's rdma-core (libibverbs-dev, librdmacm-dev).\n\
             Install them (Debian/Ubuntu, as root):\n    {APT}\n\
             or point PKG_CONFIG_PATH at the directory holding {name}.pc.\n\
             pkg-config said: {e}\n"
        ),
    }
}

fn main() {
    println!("cargo:rerun-if-changed=csrc/shim.c");
    println!("cargo:rerun-if-changed=csrc/shim.h");
    println!("cargo:rerun-if-changed=csrc/wrapper.h");
    println!("cargo:rerun-if-changed=csrc/mlx5dv_shim.c");
    println!("cargo:rerun-if-changed=csrc/mlx5dv_shim.h");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    let verbs = probe("libibverbs");
    let cm = probe("librdmacm");
    let includes: Vec<PathBuf> = verbs
        .include_paths
        .iter()
        .chain(cm.include_paths.iter())
        .cloned()
        .collect();
    for h in [
        "infiniband/verbs.h",
        "rdma/rdma_cma.h",
        "infiniband/mlx5dv.h",
    ] {
        let found = includes
            .iter()
            .chain([PathBuf::from("/usr/include")].iter())
            .any(|d| d.join(h).exists());
        assert!(
            found,
            "\n\nrtdaq-ibverbs-sys: header <{h}> not found (pkg-config include paths {includes:?}).\n\
             Install the development packages (as root):\n    {APT}\n"
        );
    }
    println!("cargo:rustc-env=RTDAQ_RDMA_CORE_VERSION={}", verbs.version);

    let mut cc = cc::Build::new();
    cc.file("csrc/shim.c")
        .file("csrc/mlx5dv_shim.c")
        .include("csrc")
        .warnings(true);
    for i in &includes {
        cc.include(i);
    }
    cc.compile("rtdaq_ibverbs_shim");

    let mut b = bindgen::Builder::default()
        .header("csrc/wrapper.h")
        .header("csrc/mlx5dv_shim.h")
        .clang_arg("-Icsrc")
        .clang_args(includes.iter().map(|i| format!("-I{}", i.display())))
        .rust_target(bindgen::RustTarget::stable(85, 0).expect("rust 1.85 target"))
        .generate_comments(false)
        .layout_tests(true)
        .derive_default(true)
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .size_t_is_usize(true)
        .allowlist_function("rtdaq_ibv_.*")
        .allowlist_function("rtdaq_mlx5.*")
        .allowlist_var("RTDAQ_IBV_.*")
        .allowlist_var("RTDAQ_MLX5_.*")
        .allowlist_var("IBV_LINK_LAYER_.*")
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for f in [
        "ibv_get_device_list",
        "ibv_free_device_list",
        "ibv_get_device_name",
        "ibv_open_device",
        "ibv_close_device",
        "ibv_query_device",
        "ibv_alloc_pd",
        "ibv_dealloc_pd",
        "ibv_reg_mr",
        "ibv_reg_dmabuf_mr",
        "ibv_dereg_mr",
        "ibv_create_cq",
        "ibv_destroy_cq",
        "ibv_create_qp",
        "ibv_destroy_qp",
        "ibv_modify_qp",
        "ibv_wc_status_str",
        "rdma_create_event_channel",
        "rdma_destroy_event_channel",
        "rdma_create_id",
        "rdma_destroy_id",
        "rdma_bind_addr",
        "rdma_listen",
        "rdma_resolve_addr",
        "rdma_resolve_route",
        "rdma_connect",
        "rdma_accept",
        "rdma_reject",
        "rdma_disconnect",
        "rdma_create_qp",
        "rdma_destroy_qp",
        "rdma_get_cm_event",
        "rdma_ack_cm_event",
        "rdma_event_str",
    ] {
        b = b.allowlist_function(f);
    }
    for t in [
        "ibv_wc",
        "ibv_send_wr",
        "ibv_recv_wr",
        "ibv_sge",
        "ibv_qp_init_attr",
        "ibv_qp_attr",
        "ibv_port_attr",
        "ibv_device_attr",
        "ibv_flow_attr",
        "ibv_flow_spec_eth",
        "ibv_flow_spec_ipv4",
        "ibv_flow_spec_tcp_udp",
        "ibv_flow_attr_type",
        "ibv_flow_spec_type",
        "ibv_wc_status",
        "ibv_wc_flags",
        "ibv_wc_opcode",
        "ibv_wr_opcode",
        "ibv_send_flags",
        "ibv_access_flags",
        "ibv_qp_type",
        "ibv_qp_state",
        "ibv_qp_attr_mask",
        "rdma_cm_event",
        "rdma_cm_event_type",
        "rdma_conn_param",
        "rdma_port_space",
        "rdma_cm_id",
        // The striding receive queue (mlx5dv_shim.h).
        "mlx5dv_context",
        "mlx5dv_striding_rq_caps",
        "mlx5dv_context_comp_mask",
        "mlx5dv_wq_init_attr",
        "mlx5dv_wq_init_attr_mask",
        "mlx5dv_striding_rq_init_attr",
        "mlx5dv_obj",
        "mlx5dv_obj_type",
        "mlx5dv_rwq",
        "mlx5_mprq_wqe",
        "ibv_wq_init_attr",
        "ibv_wq_attr",
        "ibv_wq_type",
        "ibv_wq_state",
        "ibv_wq_attr_mask",
        "ibv_rwq_ind_table_init_attr",
        "ibv_qp_init_attr_ex",
        "ibv_qp_init_attr_mask",
        "ibv_rx_hash_conf",
        "ibv_rx_hash_function_flags",
    ] {
        b = b.allowlist_type(t);
    }
    let bindings = b.generate().unwrap_or_else(|e| {
        panic!(
            "rtdaq-ibverbs-sys: bindgen failed on the rdma-core headers ({e}); it needs libclang \
             and the headers ({APT})"
        )
    });
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");
}
