//! Build script of `rtdaq-dpdk-sys`:
//!
//! 1. finds DPDK (>= 22.11) with `pkg-config libdpdk` (honours `PKG_CONFIG_PATH`), and emits
//!    its `--libs` as link directives (Debian: ~50 `librte_*.so`, `--as-needed` keeps the few
//!    we reference); PMDs are *not* linked — the EAL loads them as plugins at init (see
//!    `docs/engines/dpdk.md`);
//! 2. compiles `csrc/shim.c` (the static-inline fast path as real symbols) with the same
//!    `pkg-config --cflags` (they carry `-include rte_config.h` and a `-march`);
//! 3. runs bindgen over `csrc/wrapper.h` with an allowlist of what the crate uses.
use std::env;
use std::path::PathBuf;
use std::process::Command;

const MIN_VERSION: &str = "22.11";

fn main() {
    println!("cargo:rerun-if-changed=csrc/shim.c");
    println!("cargo:rerun-if-changed=csrc/shim.h");
    println!("cargo:rerun-if-changed=csrc/wrapper.h");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    let lib = match pkg_config::Config::new()
        .atleast_version(MIN_VERSION)
        .cargo_metadata(true)
        .probe("libdpdk")
    {
        Ok(lib) => lib,
        Err(e) => panic!(
            "\n\nrtdaq-dpdk-sys: DPDK >= {MIN_VERSION} not found through pkg-config (`libdpdk`).\n\
             Install it (Debian/Ubuntu, as root):\n    \
             apt-get install -y dpdk dpdk-dev libdpdk-dev libclang-dev pkg-config\n\
             or point PKG_CONFIG_PATH at the directory holding libdpdk.pc of your DPDK build.\n\
             pkg-config said: {e}\n"
        ),
    };

    // The raw cflags: the pkg-config crate keeps only -I/-D, but DPDK's also carry
    // `-include rte_config.h` and `-march=...`, which the inline functions need.
    let cflags = pkg_config_output(&["--cflags", "libdpdk"]);
    let cflags: Vec<String> = split_flags(&cflags);

    // shim.c
    let mut cc = cc::Build::new();
    cc.file("csrc/shim.c").include("csrc").warnings(true);
    for f in &cflags {
        cc.flag(f);
    }
    cc.compile("rtdaq_dpdk_shim");

    // PMD plugin directory (informational: EAL loads it by itself when librte_eal is shared).
    let libdir = pkg_config_output(&["--variable=libdir", "libdpdk"]);
    let pmd_dir = find_pmd_dir(libdir.trim());
    println!("cargo:rustc-env=RTDAQ_DPDK_PMD_DIR={pmd_dir}");
    println!("cargo:pmd_dir={pmd_dir}");
    println!("cargo:rustc-env=RTDAQ_DPDK_VERSION={}", lib.version);
    println!("cargo:version={}", lib.version);

    // bindgen
    let mut b = bindgen::Builder::default()
        .header("csrc/wrapper.h")
        .clang_arg("-Icsrc")
        .clang_args(cflags.iter().filter(|f| !f.starts_with("-Wl,")))
        .rust_target(bindgen::RustTarget::stable(85, 0).expect("rust 1.85 target"))
        .generate_comments(false)
        .layout_tests(true)
        .derive_default(true)
        .default_enum_style(bindgen::EnumVariation::Consts)
        // Never touched from Rust except through the shim: keep them opaque so their
        // packed/aligned unions do not matter.
        .opaque_type("rte_mbuf")
        .opaque_type("rte_mempool")
        .allowlist_function("rtdaq_.*")
        .allowlist_var("RTE_MAX_ETHPORTS")
        .allowlist_var("RTE_PKTMBUF_HEADROOM")
        .allowlist_var("RTE_ETHER_ADDR_LEN")
        .allowlist_var("RTE_ETH_NAME_MAX_LEN")
        .allowlist_var("RTDAQ_.*")
        .allowlist_var("RTE_ETH_XSTATS_NAME_SIZE")
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for f in [
        "rte_eal_init",
        "rte_eal_cleanup",
        "rte_lcore_count",
        "rte_get_main_lcore",
        "rte_thread_register",
        "rte_thread_unregister",
        "rte_socket_id",
        "rte_strerror",
        "rte_pktmbuf_pool_create",
        "rte_mempool_free",
        "rte_mempool_avail_count",
        "rte_mempool_in_use_count",
        "rte_eth_dev_count_avail",
        "rte_eth_dev_is_valid_port",
        "rte_eth_dev_info_get",
        "rte_eth_dev_configure",
        "rte_eth_dev_adjust_nb_rx_tx_desc",
        "rte_eth_rx_queue_setup",
        "rte_eth_tx_queue_setup",
        "rte_eth_dev_start",
        "rte_eth_dev_stop",
        "rte_eth_dev_close",
        "rte_eth_dev_socket_id",
        "rte_eth_stats_get",
        "rte_eth_stats_reset",
        "rte_eth_set_queue_rate_limit",
        "rte_eth_read_clock",
        "rte_mbuf_dyn_tx_timestamp_register",
        "rte_mbuf_dyn_rx_timestamp_register",
        "rte_eth_macaddr_get",
        "rte_eth_promiscuous_enable",
        "rte_eth_dev_get_port_by_name",
        "rte_eth_dev_get_name_by_port",
    ] {
        b = b.allowlist_function(f);
    }
    // rte_flow (src/sys/flow.rs): the three calls, and the item/action structs rtdaq fills.
    for f in ["rte_flow_validate", "rte_flow_create", "rte_flow_destroy"] {
        b = b.allowlist_function(f);
    }
    for t in [
        "rte_flow_item_eth",
        "rte_flow_item_vlan",
        "rte_flow_item_ipv4",
        "rte_flow_item_udp",
        "rte_flow_action_queue",
        "rte_flow_action_rss",
        "rte_flow_item_type",
        "rte_flow_action_type",
        "rte_flow_error_type",
        "rte_eth_hash_function",
    ] {
        b = b.allowlist_type(t);
    }
    // External memory, per-queue RX setup (RSS, RETA, buffer split), xstats and link
    // (src/sys/extmem.rs, src/sys/port.rs, src/sys/port_info.rs).
    for f in [
        "rte_extmem_register",
        "rte_extmem_unregister",
        "rte_dev_dma_map",
        "rte_dev_dma_unmap",
        "rte_eal_iova_mode",
        "rte_mem_virt2phy",
        "rte_pktmbuf_pool_create_extbuf",
        "rte_eth_dev_rss_reta_update",
        "rte_eth_dev_rss_reta_query",
        "rte_eth_xstats_get",
        "rte_eth_xstats_get_names",
    ] {
        b = b.allowlist_function(f);
    }
    let bindings = b.generate().unwrap_or_else(|e| {
        panic!(
            "rtdaq-dpdk-sys: bindgen failed on the DPDK headers ({e}); it needs libclang \
             (apt-get install -y libclang-dev)"
        )
    });
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");
}

fn pkg_config_output(args: &[&str]) -> String {
    let exe = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into());
    let out = Command::new(&exe)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("rtdaq-dpdk-sys: cannot run {exe}: {e}"));
    assert!(
        out.status.success(),
        "rtdaq-dpdk-sys: `{exe} {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("pkg-config output is UTF-8")
}

/// Splits pkg-config output into flags (`-include rte_config.h` stays two entries: cc and
/// clang both accept the two-argument form).
fn split_flags(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_owned).collect()
}

/// `<libdir>/dpdk/pmds-<ABI>` (Debian/Ubuntu and upstream meson installs), or "" if none.
fn find_pmd_dir(libdir: &str) -> String {
    let dir = PathBuf::from(libdir).join("dpdk");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return String::new();
    };
    let mut found: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("pmds-"))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}
