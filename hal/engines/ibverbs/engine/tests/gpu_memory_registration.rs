//! GPU memory (`kind = "device"` regions) reaches the RoCE engine, and the raw engine as
//! the data region of header-data split, as a pool the CPU cannot read, exported as a
//! dma-buf; the engine registers it with `ibv_reg_dmabuf_mr` at the pool's device
//! addresses. What runs where:
//! - in the Soft-RoCE guest (`scripts/vm/ibverbs-tests.sh` runs this executable there):
//!   the engine takes the dma-buf path for such a pool and calls `ibv_reg_dmabuf_mr` on a
//!   real RDMA device; rxe cannot import dma-bufs (and the guest kernel has no dma-buf
//!   exporter at all), so the open fails, with an error that names the region's key, the
//!   verb, the device and the errno, and says what the hardware needs;
//! - elsewhere it says so and passes without checking anything;
//! - the success path needs a NIC whose driver imports dma-bufs (mlx5) and a GPU that
//!   exports them: docs/engines/ibverbs.md ("GPU memory") has the hardware procedure.

mod common;

use std::os::fd::AsRawFd;

use common::{leak, links};
use rtdaq_core::traits::{DmaTarget, Engine, EngineArgs};
use rtdaq_core::BufferPool;
use rtdaq_engine_ibverbs::{RawEngine, RoceEngine};

const PORT: u16 = 7491;

#[test]
fn a_dmabuf_pool_is_registered_through_its_dmabuf() {
    if common::skip_outside_guest() {
        return;
    }
    let text = format!(
        "name = \"gpu-rx\"\nplatform = \"host\"\n[engine]\nkind = \"ibverbs\"\n\
         [engine.ibverbs]\nmode = \"roce\"\nop = \"write_imm\"\ncredits = 64\n\
         [[memory_regions]]\nname = \"gpu_rx\"\nkind = \"device\"\ngpu = 0\nbuf_size = 65536\nbuf_count = 256\n\
         [[interfaces]]\nname = \"roce\"\naddress = \"rdma://169.254.77.1:{PORT}\"\nrole = \"server\"\nconnections = 1\n\
         [[interfaces.rx_queues]]\nid = 0\ncpu_core = 0\nmemory_regions = [\"gpu_rx\"]\nmode = \"direct\"\n\
         [rt]\nrequired = false\nlock_memory = false\n"
    );
    let config = leak(rtdaq_config::load_str(&text).expect("a device RX region is valid for RoCE"));
    // The guest has no GPU and its kernel no dma-buf exporter (CONFIG_UDMABUF and
    // CONFIG_DMABUF_HEAPS are off): an open file stands in for the fd. The device is asked
    // first whether it imports dma-bufs at all; rxe says no before looking at the fd.
    let file = leak(std::fs::File::open("/proc/self/exe").expect("an fd"));
    let pool = BufferPool::over_device_memory(0x7f00_0000_0000, 256 * 65536, links(256), 65536)
        .expect("pool")
        .with_dmabuf(file.as_raw_fd(), 0);
    assert!(matches!(
        pool.dma_target(),
        DmaTarget::DmaBuf { offset: 0, .. }
    ));
    let rx = common::one_queue(0, leak(pool));
    let err = match RoceEngine::open(EngineArgs {
        config,
        rx,
        tx: &[],
    }) {
        Ok(_) => panic!("rxe registered a dma-buf: update this test and docs/engines/ibverbs.md"),
        Err(e) => e.to_string(),
    };
    eprintln!("open: {err}");
    for want in [
        "interfaces[0].rx_queues[0].memory_regions[0]",
        "ibv_reg_dmabuf_mr",
        "cannot import dma-bufs",
        "rxe0",
        "docs/engines/ibverbs.md",
    ] {
        assert!(err.contains(want), "missing {want:?} in: {err}");
    }
    assert!(
        err.contains("EOPNOTSUPP")
            || err.contains("EPROTONOSUPPORT")
            || err.contains("not supported"),
        "rxe's refusal is 'not supported': {err}"
    );
}

/// The raw path's header-data split: the header region (host) and the data region (GPU
/// memory, a dma-buf pool) are both registered when the queue opens, before its raw packet
/// QP is created, so rxe (which has no raw packet QPs either) gets as far as refusing the
/// data region's dma-buf. The config is checked everywhere; the open only in the guest.
#[test]
fn a_raw_split_queue_registers_its_data_region_through_its_dmabuf() {
    let text = "name = \"gpu-raw-hds\"\nplatform = \"host\"\n[engine]\nkind = \"ibverbs\"\n\
         [engine.ibverbs]\nmode = \"raw\"\ndevice = \"rxe0\"\nstriding_rq = \"off\"\n\
         [[memory_regions]]\nname = \"hdr\"\nkind = \"host\"\nbuf_size = 128\nbuf_count = 256\n\
         [[memory_regions]]\nname = \"gpu_data\"\nkind = \"device\"\ngpu = 0\nbuf_size = 2048\nbuf_count = 256\n\
         [[interfaces]]\nname = \"p0\"\naddress = \"eth0\"\n\
         [[interfaces.rx_queues]]\nid = 0\ncpu_core = 0\nring_depth = 128\nmemory_regions = [\"hdr\", \"gpu_data\"]\nhds_split = 74\nmode = \"direct\"\n\
         [run]\nvalidate = \"sequence\"\n[rt]\nrequired = false\nlock_memory = false\n";
    let config = leak(
        rtdaq_config::load_str(text)
            .unwrap_or_else(|e| panic!("a raw split queue into a device region is valid: {e}")),
    );
    assert_eq!(config.interfaces[0].rx_queues[0].hds_split, Some(74));
    if common::skip_outside_guest() {
        return;
    }
    let file = leak(std::fs::File::open("/proc/self/exe").expect("an fd"));
    let data = BufferPool::over_device_memory(0x7f00_0000_0000, 256 * 2048, links(256), 2048)
        .expect("pool")
        .with_dmabuf(file.as_raw_fd(), 0);
    let rx = common::split_queue(0, common::host_pool(128, 256), leak(data));
    let err = match RawEngine::open(EngineArgs {
        config,
        rx,
        tx: &[],
    }) {
        Ok(_) => panic!("rxe registered a dma-buf and created a raw packet QP: update this test"),
        Err(e) => e.to_string(),
    };
    eprintln!("open: {err}");
    for want in [
        "interfaces[0].rx_queues[0].memory_regions[1]",
        "ibv_reg_dmabuf_mr",
        "cannot import dma-bufs",
        "rxe0",
    ] {
        assert!(err.contains(want), "missing {want:?} in: {err}");
    }
}
