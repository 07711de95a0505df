//! Compiles the XDP steering program `bpf/steer.c` into `$OUT_DIR/steer.bpf.o`, which the
//! crate embeds with `include_bytes!`.
//!
//! Needs `clang` with the BPF target (Debian: `apt-get install clang llvm`); set `CLANG` to
//! use another compiler binary. The program is self-contained (no kernel or libbpf headers).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=bpf/steer.c");
    println!("cargo::rerun-if-env-changed=CLANG");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"))
        .join("steer.bpf.o");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".to_owned());
    let result = Command::new(&clang)
        .args([
            "-O2",
            "-g",
            "-target",
            "bpf",
            "-Wall",
            "-Werror",
            "-c",
            "bpf/steer.c",
            "-o",
        ])
        .arg(&out)
        .output();
    match result {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            println!(
                "cargo::error=rtdaq-engine-afxdp: `{clang} -target bpf` failed to compile bpf/steer.c ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).replace('\n', " | ")
            );
        }
        Err(e) => {
            println!(
                "cargo::error=rtdaq-engine-afxdp needs clang with the BPF target to build its XDP program (bpf/steer.c), but `{clang}` could not run ({e}); on Debian/Ubuntu: `apt-get install clang llvm` (libxdp-sys also needs `m4 libelf-dev zlib1g-dev`), or set CLANG=/path/to/clang"
            );
        }
    }
}
