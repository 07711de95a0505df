//! `Topology` and hugepage status against fixture sysfs trees built at test time, plus a
//! sanity check of the running host.

mod common;

use std::path::Path;

use common::{board_fixture, TempTree};
use rtdaq_platform::hugepages::{self, HugePageSize};
use rtdaq_platform::{CpuList, PlatformError, Topology};

#[test]
fn reads_a_two_node_board() {
    let tree = board_fixture();
    let t = Topology::read(tree.path()).unwrap();
    assert_eq!(t.online_cpus(), &CpuList::parse("0-7").unwrap());
    assert_eq!(t.isolated_cpus().to_string(), "2-3,6-7");
    assert_eq!(t.nohz_full_cpus().to_string(), "2-3");
    assert_eq!(t.numa_nodes().len(), 2);
    assert_eq!(t.numa_node_ids().to_string(), "0-1");
    assert_eq!(t.numa_node_of(0), Some(0));
    assert_eq!(t.numa_node_of(5), Some(1));
    assert_eq!(t.numa_node_of(9), None);
    assert!(t.has_numa_node(1) && !t.has_numa_node(2));
    assert!(t.is_isolated(6) && !t.is_isolated(4));
}

#[test]
fn optional_files_may_be_missing_or_null() {
    let tree = TempTree::new("minimal");
    tree.file("sys/devices/system/cpu/online", "0\n")
        .file("sys/devices/system/cpu/isolated", "\n")
        .file("sys/devices/system/cpu/nohz_full", "(null)\n");
    let t = Topology::read(tree.path()).unwrap();
    assert_eq!(t.online_cpus().as_slice(), &[0]);
    assert!(t.isolated_cpus().is_empty());
    assert!(t.nohz_full_cpus().is_empty());
    assert!(t.numa_nodes().is_empty(), "no node dir: no NUMA reported");
    assert_eq!(t.numa_node_of(0), None);
}

#[test]
fn nodes_found_by_directory_when_online_file_is_missing() {
    let tree = TempTree::new("nodedirs");
    tree.file("sys/devices/system/cpu/online", "0-3\n")
        .file("sys/devices/system/node/node0/cpulist", "0-1\n")
        .file("sys/devices/system/node/node2/cpulist", "2-3\n")
        .dir("sys/devices/system/node/node3") // memory-only node, no cpulist
        .dir("sys/devices/system/node/power");
    let t = Topology::read(tree.path()).unwrap();
    let ids: Vec<u32> = t.numa_nodes().iter().map(|n| n.id).collect();
    assert_eq!(ids, [0, 2, 3]);
    assert_eq!(t.numa_node_of(3), Some(2));
    assert!(t.numa_nodes()[2].cpus.is_empty());
}

#[test]
fn missing_online_file_is_an_error_naming_it() {
    let tree = TempTree::new("empty");
    let err = Topology::read(tree.path()).unwrap_err();
    assert!(matches!(err, PlatformError::ReadSysfs { .. }), "{err:?}");
    assert!(
        err.to_string().contains("sys/devices/system/cpu/online"),
        "{err}"
    );
}

#[test]
fn malformed_cpulist_is_an_error_with_the_content() {
    let tree = TempTree::new("garbage");
    tree.file("sys/devices/system/cpu/online", "zero-seven\n");
    let err = Topology::read(tree.path()).unwrap_err();
    assert!(matches!(err, PlatformError::ParseSysfs { .. }), "{err:?}");
    assert!(err.to_string().contains("zero-seven"), "{err}");
}

#[test]
fn hugepage_status_from_fixture() {
    let tree = board_fixture();
    let s = hugepages::status(tree.path(), HugePageSize::Size2M).unwrap();
    assert_eq!((s.total, s.free, s.reserved), (8, 5, 1));
    assert_eq!(s.available(), 4);
    assert_eq!(
        s.sysfs_path,
        tree.path()
            .join("sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")
    );
    assert_eq!(s.total_for(6), 10);

    let n = hugepages::node_status(tree.path(), 1, HugePageSize::Size2M).unwrap();
    assert_eq!((n.total, n.free), (4, 2));
    assert!(n
        .sysfs_path
        .ends_with("node/node1/hugepages/hugepages-2048kB/nr_hugepages"));

    // No 1 GiB pool in the fixture.
    assert!(hugepages::status(tree.path(), HugePageSize::Size1G).is_err());
}

#[test]
fn current_host_is_readable() {
    let t = Topology::current().unwrap();
    assert!(t.online_cpus().contains(0), "{t:?}");
    let affinity = rtdaq_platform::rt::current_affinity().unwrap();
    assert!(
        affinity.iter().all(|c| t.online_cpus().contains(c)),
        "affinity {affinity} not within online {}",
        t.online_cpus()
    );
    let s = hugepages::status(Path::new("/"), HugePageSize::Size2M).unwrap();
    assert_eq!(
        s.sysfs_path,
        Path::new("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")
    );
}
