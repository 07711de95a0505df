//! `HostPlatform`: the trait constants and the `describe` summary (fixture tree and the
//! running host).

use std::path::Path;

use rtdaq_platform::{GpuDirect, Platform, PlatformExt};
use rtdaq_platform_host::{describe, describe_at, HostPlatform};

/// A temporary sysfs tree, removed on drop.
/// A fixture tree in a temporary directory of its own, removed on drop.
struct Tree(tempfile::TempDir);

impl Tree {
    fn new(tag: &str) -> Self {
        Self(
            tempfile::Builder::new()
                .prefix(&format!("rtdaq-platform-host-{tag}-"))
                .tempdir()
                .unwrap(),
        )
    }
    fn file(&self, rel: &str, content: &str) -> &Self {
        let p = self.0.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
        self
    }
    fn path(&self) -> &Path {
        self.0.path()
    }
}

#[test]
fn constants() {
    assert_eq!(HostPlatform::NAME, "host");
    assert_eq!(HostPlatform::GPU_DIRECT, GpuDirect::HostStaging);
}

#[test]
fn describes_a_fixture_board() {
    let t = Tree::new("board");
    let pool = "sys/kernel/mm/hugepages/hugepages-2048kB";
    t.file("sys/devices/system/cpu/online", "0-7\n")
        .file("sys/devices/system/cpu/isolated", "2-3,6-7\n")
        .file("sys/devices/system/cpu/nohz_full", "(null)\n")
        .file("sys/devices/system/node/online", "0-1\n")
        .file("sys/devices/system/node/node0/cpulist", "0-3\n")
        .file("sys/devices/system/node/node1/cpulist", "4-7\n")
        .file(&format!("{pool}/nr_hugepages"), "8\n")
        .file(&format!("{pool}/free_hugepages"), "5\n")
        .file(&format!("{pool}/resv_hugepages"), "1\n");
    let d = describe_at(t.path());
    let expected = "\
platform: host (GPU data path: host staging (no guaranteed GPUDirect))
CPUs: 8 online (0-7); isolated: 2-3,6-7; nohz_full: none
NUMA: 2 nodes (node0 cpus 0-3, node1 cpus 4-7)
hugepages: 2 MiB: 4 free of 8, 1 GiB: not supported";
    assert_eq!(d, expected);
}

#[test]
fn unreadable_parts_are_reported_not_fatal() {
    let t = Tree::new("empty");
    let d = describe_at(t.path());
    assert!(d.starts_with("platform: host"), "{d}");
    assert!(d.contains("CPUs: unreadable (cannot read"), "{d}");
    assert!(d.contains("2 MiB: not supported"), "{d}");
}

#[test]
fn describes_this_host() {
    let d = describe();
    assert_eq!(d, <HostPlatform as PlatformExt>::describe());
    assert!(d.starts_with("platform: host"), "{d}");
    assert!(d.contains(" online ("), "{d}");
    assert!(d.contains("hugepages: 2 MiB: "), "{d}");
    let topo = HostPlatform::topology().unwrap();
    assert!(
        d.contains(&format!("{} online", topo.online_cpus().len())),
        "{d}"
    );
    println!("{d}");
}
