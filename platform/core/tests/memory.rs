//! Memory regions: host, huge (resizing the real hugepage pool as root and restoring it in a
//! Drop guard), NUMA binding, and the errors.

mod common;

use std::path::Path;

use common::{hugepage_lock, skip_unless_root, HugepagePoolGuard};
use rtdaq_platform::hugepages::{self, HugePageSize};
use rtdaq_platform::memory::{Region, RegionSpec};
use rtdaq_platform::{DmaTarget, MemKind, MemoryRegion, PlatformError, Topology};

const MIB: usize = 1 << 20;

fn has_node0() -> bool {
    Topology::current().unwrap().has_numa_node(0)
}

/// Reads `/proc/self/maps` and returns the line of the mapping starting at `addr`.
fn maps_line(addr: usize) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let prefix = format!("{addr:x}-");
    maps.lines()
        .find(|l| l.starts_with(&prefix))
        .map(str::to_owned)
}

#[test]
fn host_region_write_read_and_trait() {
    let mut r = Region::allocate(&RegionSpec::host("rx-host", MIB + 100)).unwrap();
    assert_eq!(r.name(), "rx-host");
    assert_eq!(r.len(), MIB + 100);
    assert!(r.mapped_len() >= r.len() && r.mapped_len() % 4096 == 0);
    assert_eq!(r.as_ptr() as usize % 4096, 0);
    assert!(
        r.as_slice().iter().all(|&b| b == 0),
        "fresh memory is zeroed"
    );
    for (i, b) in r.as_mut_slice().iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    assert!(r
        .as_slice()
        .iter()
        .enumerate()
        .all(|(i, &b)| b == (i % 251) as u8));
    if common::is_root() {
        assert!(r.is_locked(), "root may mlock");
    }

    // The rtdaq-core trait.
    let m: &dyn MemoryRegion = &r;
    assert_eq!(m.kind(), MemKind::Host);
    assert_eq!(m.len(), MIB + 100);
    assert!(!m.is_empty());
    assert_eq!(m.dma(), DmaTarget::VirtAddr(r.as_ptr().cast_mut()));

    // It is mapped while alive.
    let line = maps_line(r.as_ptr() as usize).expect("region in /proc/self/maps");
    assert!(line.contains("rw-p"), "{line}");
}

#[test]
fn region_is_send_and_sync() {
    let mut r = Region::allocate(&RegionSpec::host("shared", 64 << 10)).unwrap();
    r.as_mut_slice()[100] = 42;
    let r = std::sync::Arc::new(r);
    let r2 = r.clone();
    let seen = std::thread::spawn(move || r2.as_slice()[100])
        .join()
        .unwrap();
    assert_eq!(seen, 42);
    // Moved into a thread and dropped there.
    let r = std::sync::Arc::into_inner(r).unwrap();
    std::thread::spawn(move || drop(r)).join().unwrap();
}

#[test]
fn host_region_over_aligned_and_numa_bound() {
    let node = has_node0().then_some(0);
    let mut r = Region::allocate(&RegionSpec {
        align: 2 * MIB,
        numa_node: node,
        ..RegionSpec::host("aligned", 3 * MIB)
    })
    .unwrap();
    assert_eq!(r.as_ptr() as usize % (2 * MIB), 0, "{:p}", r.as_ptr());
    assert_eq!(r.numa_node(), node);
    r.as_mut_slice()[3 * MIB - 1] = 7;
    assert_eq!(r.as_slice()[3 * MIB - 1], 7);
    // Only the aligned part is left mapped (head and tail of the reservation are returned).
    let line = maps_line(r.as_ptr() as usize).expect("mapping");
    let (range, _) = line.split_once(' ').unwrap();
    let (a, b) = range.split_once('-').unwrap();
    let len = usize::from_str_radix(b, 16).unwrap() - usize::from_str_radix(a, 16).unwrap();
    assert!(len >= 3 * MIB, "{line}");
}

#[test]
fn missing_numa_node_is_an_error_naming_it() {
    let err = Region::allocate(&RegionSpec {
        numa_node: Some(4000),
        ..RegionSpec::host("far", MIB)
    })
    .unwrap_err();
    assert!(
        matches!(err, PlatformError::NumaNodeMissing { node: 4000, .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("NUMA node 4000") && text.contains("`far`"),
        "{text}"
    );
}

#[test]
fn invalid_specs_are_errors() {
    let err = Region::allocate(&RegionSpec::host("empty", 0)).unwrap_err();
    assert!(
        matches!(err, PlatformError::InvalidRegion { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("size is 0"), "{err}");

    let err = Region::allocate(&RegionSpec {
        align: 3000,
        ..RegionSpec::host("odd", MIB)
    })
    .unwrap_err();
    assert!(err.to_string().contains("alignment 3000"), "{err}");
}

#[test]
fn gpu_kinds_need_the_gpu_feature() {
    for (kind, name) in [
        (MemKind::HostPinned, "host_pinned"),
        (MemKind::Device, "device"),
    ] {
        let err = Region::allocate(&RegionSpec {
            kind,
            ..RegionSpec::host("gpu-rx", MIB)
        })
        .unwrap_err();
        assert!(
            matches!(&err, PlatformError::NeedsGpu { region, kind: k } if region == "gpu-rx" && *k == name),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(text.contains("needs the `gpu` feature"), "{text}");
        assert!(text.contains("rebuild with --features gpu"), "{text}");
    }
}

#[test]
fn huge_region_in_reserved_pages() {
    if skip_unless_root("huge_region_in_reserved_pages") {
        return;
    }
    let _serial = hugepage_lock();
    let size = HugePageSize::Size2M;
    let before = hugepages::status(Path::new("/"), size).unwrap();
    let (pool, reached) = HugepagePoolGuard::set(size, before.total + 2);
    assert!(
        reached >= before.total + 2,
        "kernel reserved only {reached} of {} hugepages (memory fragmented?)",
        before.total + 2
    );
    let free_before = hugepages::status(Path::new("/"), size).unwrap().free;

    let node = has_node0().then_some(0);
    let mut r = Region::allocate(&RegionSpec {
        numa_node: node,
        ..RegionSpec::huge("rx-huge", 3 * MIB, size)
    })
    .expect("huge region in freshly reserved pages");
    assert_eq!(r.kind(), MemKind::Huge);
    assert_eq!(r.huge_page(), Some(size));
    assert_eq!(r.len(), 3 * MIB);
    assert_eq!(r.mapped_len(), 4 * MIB, "two whole 2 MiB pages");
    assert_eq!(r.as_ptr() as usize % (2 * MIB), 0);
    assert!(r.is_locked(), "hugetlb pages are never swapped");
    assert_eq!(r.numa_node(), node);
    let m: &dyn MemoryRegion = &r;
    assert_eq!((m.kind(), m.len()), (MemKind::Huge, 3 * MIB));

    for (i, b) in r.as_mut_slice().iter_mut().enumerate() {
        *b = (i % 253) as u8;
    }
    assert!(r
        .as_slice()
        .iter()
        .enumerate()
        .all(|(i, &b)| b == (i % 253) as u8));

    // Prefaulted: both pages are taken from the pool.
    let during = hugepages::status(Path::new("/"), size).unwrap();
    assert_eq!(during.free, free_before - 2, "{during:?}");

    // Dropping unmaps: the pages come back.
    drop(r);
    let after = hugepages::status(Path::new("/"), size).unwrap();
    assert_eq!(after.free, free_before, "{after:?}");

    let previous = pool.previous();
    drop(pool);
    assert_eq!(
        hugepages::status(Path::new("/"), size).unwrap().total,
        previous,
        "pool restored"
    );
}

#[test]
fn too_few_hugepages_says_how_many_and_where() {
    if skip_unless_root("too_few_hugepages_says_how_many_and_where") {
        return;
    }
    let _serial = hugepage_lock();
    let size = HugePageSize::Size2M;
    let (_pool, reached) = HugepagePoolGuard::set(size, 1);
    let status = hugepages::status(Path::new("/"), size).unwrap();

    // 5 MiB = 3 pages; the pool has (at most) 1 free.
    let err = Region::allocate(&RegionSpec::huge("rx-big", 5 * MIB, size)).unwrap_err();
    let text = err.to_string();
    eprintln!("{text}");
    assert!(
        matches!(err, PlatformError::HugePagesExhausted { needed: 3, .. }),
        "{err:?}"
    );
    assert!(text.contains("needs 3 hugepages of 2 MiB"), "{text}");
    assert!(
        text.contains("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"),
        "{text}"
    );
    assert!(text.contains("echo "), "{text}");
    if reached == 1 && status.available() == 1 {
        // Nobody else uses hugepages: the numbers are exact.
        assert!(text.contains("has only 1 free (1 in total)"), "{text}");
        assert!(
            text.contains("`echo 3 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages`"),
            "{text}"
        );
    }

    // Bound to a node: the node's pool is checked and named.
    if has_node0() {
        let err = Region::allocate(&RegionSpec {
            numa_node: Some(0),
            ..RegionSpec::huge("rx-node", 5 * MIB, size)
        })
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("needs 3 hugepages"), "{text}");
        assert!(text.contains("pool of NUMA node 0"), "{text}");
        assert!(
            text.contains("/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages"),
            "{text}"
        );
    }
}

#[test]
fn one_gib_pages_without_reservation() {
    let size = HugePageSize::Size1G;
    let dir = size.pool_dir(Path::new("/"));
    let err = Region::allocate(&RegionSpec::huge("rx-1g", 1 << 30, size)).unwrap_err();
    let text = err.to_string();
    if !dir.exists() {
        assert!(
            matches!(err, PlatformError::HugePageSizeUnsupported { .. }),
            "{err:?}"
        );
        return;
    }
    let status = hugepages::status(Path::new("/"), size).unwrap();
    if status.available() > 0 {
        rtdaq_testbed::require::skip(
            "1 GiB pages are reserved here: the error for none cannot be seen",
        );
        return;
    }
    assert!(text.contains("needs 1 hugepages of 1 GiB"), "{text}");
    assert!(text.contains("hugepages-1048576kB/nr_hugepages"), "{text}");
    assert!(text.contains("hugepagesz=1G"), "{text}");
}
