//! The ibverbs engine on a host **without RDMA** (issue #8): `rtdaq run` with a RoCE or a raw
//! config exits 2 with "no RDMA device: ... see docs/engines/ibverbs.md", never a panic.
//!
//! Runs `target/engines/rtdaq-ibverbs` (`scripts/build-engines.sh ibverbs`), so a plain
//! `cargo test` skips it (`#[ignore]`); `scripts/test.sh` runs it with `-- --ignored`. On a
//! host that has an RDMA device the test says so and checks nothing (the RoCE tests run in
//! the Soft-RoCE guest: `scripts/vm/ibverbs-tests.sh`).

mod e2e;

use std::process::Command;

fn host_has_rdma() -> bool {
    std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some())
}

fn run(config: &str) -> (i32, String) {
    let out = Command::new(e2e::bin("ibverbs"))
        .args(["run", "--duration", "1", "--config"])
        .arg(e2e::root().join(config))
        .output()
        .expect("run rtdaq-ibverbs");
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
#[ignore = "needs target/engines/rtdaq-ibverbs (scripts/build-engines.sh ibverbs)"]
fn no_rdma_device_is_exit_2_with_the_docs_pointer() {
    if host_has_rdma() {
        rtdaq_testbed::require::skip("this host has RDMA devices (/sys/class/infiniband): the no-device case cannot be shown here");
        return;
    }
    for config in ["configs/vm-roce-server.toml", "configs/vm-roce-client.toml"] {
        let (code, text) = run(config);
        assert_eq!(code, 2, "{config}: {text}");
        assert!(text.contains("no RDMA device:"), "{config}: {text}");
        assert!(
            text.contains("see docs/engines/ibverbs.md"),
            "{config}: {text}"
        );
        assert!(!text.contains("panicked"), "{config}: {text}");
    }
    // Raw mode: ibv_get_device_list fails (ENOSYS) or is empty.
    let dir = rtdaq_testbed::test_path("rtdaq-ibv");
    std::fs::create_dir_all(&dir).unwrap();
    let raw = dir.join("raw.toml");
    std::fs::write(
        &raw,
        "name = \"ibv-raw\"\nplatform = \"host\"\n[engine]\nkind = \"ibverbs\"\n\
         [[memory_regions]]\nname = \"r\"\nkind = \"host\"\nbuf_size = 2048\nbuf_count = 256\n\
         [[interfaces]]\nname = \"p0\"\naddress = \"lo\"\n\
         [[interfaces.rx_queues]]\nid = 0\ncpu_core = 0\nmemory_regions = [\"r\"]\nmode = \"direct\"\n",
    )
    .unwrap();
    let (code, text) = run(raw.to_str().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, 2, "raw: {text}");
    assert!(
        text.contains("no RDMA device:") && text.contains("docs/engines/ibverbs.md"),
        "raw: {text}"
    );
}
