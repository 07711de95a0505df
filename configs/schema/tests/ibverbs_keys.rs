//! `[engine.ibverbs]` keys added with issue #8, their valid spellings and defaults: `op =
//! "read"` (pull mode), `reply` / `reply_bytes` (the answer a RoCE receiver sends to
//! request/response peers) and `striding_rq` / `stride_size` (the raw path's mlx5 striding
//! receive queue). Also GPU memory: RoCE RX queues receive into `device` regions (the NIC
//! writes GPU memory through a dma-buf), with a gather GPU stage without checksum on them.
//! The invalid cases are fixtures in `tests/fixtures/config-invalid/` (`ibverbs-reply-*.toml`,
//! `ibverbs-stride*.toml`, `ibverbs-striding-*.toml`, `*-device-*.toml`,
//! `gpu-stage-device-*.toml`).

use rtdaq_config::load_str;
use rtdaq_config::model::{
    BatchMode, Engine, IbverbsEngine, Placement, RegionKind, RoceOp, RoceReply, StridingRq,
};

/// A RoCE server deployment with `ibverbs` lines in `[engine.ibverbs]`.
fn server(ibverbs: &str) -> String {
    format!(
        "name = \"roce\"\nplatform = \"host\"\n[engine]\nkind = \"ibverbs\"\n\
         [engine.ibverbs]\nmode = \"roce\"\n{ibverbs}\n\
         [[memory_regions]]\nname = \"rx\"\nkind = \"host\"\nbuf_size = 2048\nbuf_count = 1024\n\
         [[interfaces]]\nname = \"p0\"\naddress = \"rdma://169.254.77.1:7471\"\nrole = \"server\"\n\
         [[interfaces.rx_queues]]\nid = 0\ncpu_core = 0\nmemory_regions = [\"rx\"]\nmode = \"direct\"\n"
    )
}

/// A raw-mode deployment on netdev `eth0` with the given RX buffers.
fn raw(ibverbs: &str, buf_size: u32, buf_count: u32) -> String {
    format!(
        "name = \"striding\"\nplatform = \"host\"\n[engine]\nkind = \"ibverbs\"\n\
         [engine.ibverbs]\n{ibverbs}\n\
         [[memory_regions]]\nname = \"rx\"\nkind = \"host\"\nbuf_size = {buf_size}\nbuf_count = {buf_count}\n\
         [[interfaces]]\nname = \"p0\"\naddress = \"eth0\"\n\
         [[interfaces.rx_queues]]\nid = 0\ncpu_core = 0\nmemory_regions = [\"rx\"]\nmode = \"direct\"\n"
    )
}

/// A RoCE server receiving into `device` memory on GPU 0 (`[engine.ibverbs]` lines in
/// `ibverbs`); with `stage`, the lines of a `[[gpu_stages]]` table named "batches" on GPU 0
/// that the RX queue feeds.
fn gpu_server(ibverbs: &str, stage: Option<&str>) -> String {
    let (uses, table) = match stage {
        Some(lines) => (
            "gpu_stage = \"batches\"\n".to_owned(),
            format!(
                "[[gpu_stages]]\nname = \"batches\"\ngpu = 0\npackets_per_batch = 256\n{lines}\n"
            ),
        ),
        None => (String::new(), String::new()),
    };
    format!(
        "name = \"roce-gpu\"\nplatform = \"host\"\n[engine]\nkind = \"ibverbs\"\n\
         [engine.ibverbs]\nmode = \"roce\"\n{ibverbs}\n\
         [[memory_regions]]\nname = \"rx_gpu\"\nkind = \"device\"\ngpu = 0\nbuf_size = 9216\nbuf_count = 4096\n\
         [[interfaces]]\nname = \"p0\"\naddress = \"rdma://169.254.77.1:7471\"\nrole = \"server\"\nmtu = 9000\n\
         [[interfaces.rx_queues]]\nid = 0\ncpu_core = 0\nring_depth = 2048\nmemory_regions = [\"rx_gpu\"]\nmode = \"direct\"\n{uses}\
         {table}"
    )
}

/// The `[engine.ibverbs]` table of a deployment that must load.
fn ib(text: &str) -> IbverbsEngine {
    let c = load_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    match c.engine {
        Engine::Ibverbs(e) => e,
        other => panic!("not ibverbs: {other:?}"),
    }
}

// --- op = "read" ---

#[test]
fn read_is_an_op_with_credits() {
    let e = ib(&server("op = \"read\"\ncredits = 256"));
    assert_eq!((e.op, e.credits), (RoceOp::Read, 256));
    assert_eq!(e.op.as_str(), "read");
    // signal_interval is accepted (senders signal every descriptor message in pull mode).
    let e = ib(&server("op = \"read\"\nsignal_interval = 16"));
    assert_eq!(e.op, RoceOp::Read);
}

#[test]
fn read_takes_no_reply() {
    let e = load_str(&server("op = \"read\"\nreply = \"ack\"")).unwrap_err();
    assert!(
        e.0.iter().any(|e| e.path == "engine.ibverbs.reply"
            && e.message.contains("accepts only with op = \"send\"")),
        "{e}"
    );
    let e = load_str(&server("op = \"pull\"")).unwrap_err();
    assert!(e.to_string().contains("engine.ibverbs.op"), "{e}");
}

// --- reply / reply_bytes ---

#[test]
fn no_reply_by_default() {
    let e = ib(&server(""));
    assert_eq!(e.reply, RoceReply::None);
    assert_eq!(e.reply_bytes, 64);
    assert_eq!(e.reply.as_str(), "none");
}

#[test]
fn echo_and_ack_with_their_sizes() {
    let e = ib(&server("reply = \"echo\""));
    assert_eq!((e.reply, e.reply_bytes), (RoceReply::Echo, 64));
    let e = ib(&server("reply = \"ack\"\nreply_bytes = 16"));
    assert_eq!((e.reply, e.reply_bytes), (RoceReply::Ack, 16));
    let e = ib(&server("reply = \"echo\"\nreply_bytes = 4096"));
    assert_eq!(e.reply_bytes, 4096);
    // "none" spelled out is the default.
    assert_eq!(ib(&server("reply = \"none\"")).reply, RoceReply::None);
}

#[test]
fn reply_is_a_roce_key_and_has_three_spellings() {
    let raw = "name = \"r\"\nplatform = \"host\"\n[engine]\nkind = \"ibverbs\"\n\
               [engine.ibverbs]\nreply = \"echo\"\n\
               [[memory_regions]]\nname = \"r\"\nkind = \"host\"\nbuf_size = 2048\nbuf_count = 256\n\
               [[interfaces]]\nname = \"p0\"\naddress = \"eth0\"\n\
               [[interfaces.rx_queues]]\nid = 0\ncpu_core = 0\nmemory_regions = [\"r\"]\nmode = \"direct\"\n";
    let e = load_str(raw).unwrap_err();
    assert!(
        e.0.iter().any(|e| e.path == "engine.ibverbs.reply"
            && e.message.contains("applies to mode = \"roce\" only")),
        "{e}"
    );
    let e = load_str(&server("reply = \"pong\"")).unwrap_err();
    assert!(e.to_string().contains("engine.ibverbs.reply"), "{e}");
}

// --- striding_rq / stride_size ---

#[test]
fn auto_by_default_and_any_buffer_size_is_accepted() {
    // "auto" never fails the config: the engine falls back (logged) when buffers are small.
    let e = ib(&raw("", 2048, 1024));
    assert_eq!((e.striding_rq, e.stride_size), (StridingRq::Auto, None));
    assert_eq!(e.striding_rq.as_str(), "auto");
    let e = ib(&raw(
        "striding_rq = \"auto\"\nstride_size = 256",
        2048,
        1024,
    ));
    assert_eq!(e.stride_size, Some(256));
}

#[test]
fn on_and_off_spellings() {
    let e = ib(&raw("striding_rq = \"off\"", 2048, 1024));
    assert_eq!(e.striding_rq, StridingRq::Off);
    // 8 strides of 2048 B (mtu 1500: 1522 B frames -> 2048 B strides) fit 16384 B.
    let e = ib(&raw("striding_rq = \"on\"", 16384, 256));
    assert_eq!(e.striding_rq, StridingRq::On);
    let e = ib(&raw("striding_rq = \"on\"\nstride_size = 64", 2048, 1024));
    assert_eq!((e.striding_rq, e.stride_size), (StridingRq::On, Some(64)));
}

#[test]
fn on_needs_eight_strides_per_buffer() {
    let e = load_str(&raw("striding_rq = \"on\"", 16383, 256)).unwrap_err();
    assert!(
        e.0.iter()
            .any(|e| e.path == "interfaces[0].rx_queues[0].memory_regions[0]"
                && e.message.contains("less than 8 strides of 2048 B")
                && e.message.contains("buf_size ≥ 16384")),
        "{e}"
    );
    // A smaller stride fixes it.
    ib(&raw("striding_rq = \"on\"\nstride_size = 1024", 8192, 256));
}

#[test]
fn stride_size_bounds() {
    for ok in [64, 128, 4096, 8192] {
        let e = ib(&raw(&format!("stride_size = {ok}"), 65536, 128));
        assert_eq!(e.stride_size, Some(ok));
    }
    for bad in [0, 32, 96, 16384] {
        let e = load_str(&raw(&format!("stride_size = {bad}"), 65536, 128)).unwrap_err();
        assert!(
            e.0.iter().any(|e| e.path == "engine.ibverbs.stride_size"),
            "{bad}: {e}"
        );
    }
}

// --- GPU memory (`device` regions) ---

#[test]
fn roce_receives_into_device_memory() {
    for op in ["send", "write_imm", "read"] {
        let text = gpu_server(&format!("op = \"{op}\""), None);
        let c = load_str(&text).unwrap_or_else(|e| panic!("{op}: {e}\n{text}"));
        let r = &c.memory_regions[0];
        assert_eq!(
            (r.kind, r.placement),
            (RegionKind::Device, Placement::Gpu(0))
        );
        assert!(c.uses_gpu());
    }
    // "ack" and "none" read no message on the CPU; "echo" copies it (a fixture).
    let e = ib(&gpu_server("reply = \"ack\"\nreply_bytes = 16", None));
    assert_eq!((e.reply, e.reply_bytes), (RoceReply::Ack, 16));
    assert_eq!(
        ib(&gpu_server("reply = \"none\"", None)).reply,
        RoceReply::None
    );
    let e = load_str(&gpu_server("reply = \"echo\"", None)).unwrap_err();
    assert!(
        e.0.iter().any(|e| e.path == "engine.ibverbs.reply"
            && e.message.contains("region \"rx_gpu\" of kind \"device\"")),
        "{e}"
    );
}

#[test]
fn gather_stage_without_checksum_on_device_memory() {
    let text = gpu_server(
        "op = \"write_imm\"",
        Some("mode = \"gather\"\nchecksum = false\nconversion = \"int16le_to_fp32\""),
    );
    let c = load_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let s = &c.gpu_stages[0];
    assert_eq!((s.mode, s.checksum, s.gpu), (BatchMode::Gather, false, 0));
    // RoCE messages start with the sequence header (no Ethernet/IPv4/UDP headers).
    assert_eq!(s.payload_offset, 32);
    assert!(c.interfaces[0].rx_queues[0].gpu_stage.is_some());
    // checksum defaults to false; with a reply = "ack" too.
    let text = gpu_server("reply = \"ack\"", Some("mode = \"gather\""));
    let c = load_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(!c.gpu_stages[0].checksum);
}

#[test]
fn device_stage_refusals_name_the_stage_key() {
    let e = load_str(&gpu_server("", Some("mode = \"reorder\""))).unwrap_err();
    assert!(
        e.0.iter()
            .any(|e| e.path == "gpu_stages[0].mode" && e.message.contains("use mode = \"gather\"")),
        "{e}"
    );
    let e = load_str(&gpu_server("", Some("mode = \"gather\"\nchecksum = true"))).unwrap_err();
    assert!(
        e.0.iter()
            .any(|e| e.path == "gpu_stages[0].checksum"
                && e.message.contains("set checksum = false")),
        "{e}"
    );
    // Both at once: two errors, nothing else.
    let e = load_str(&gpu_server("", Some("mode = \"reorder\"\nchecksum = true"))).unwrap_err();
    assert_eq!(e.0.len(), 2, "{e}");
}

#[test]
fn raw_mode_receives_whole_frames_into_device_memory() {
    // The NIC steers (ibv_create_flow) and writes the frames; the CPU reads none of them
    // (counted in GPU memory). The header-data split variant is in tests/gpudirect.rs.
    let raw_rx = raw("", 2048, 1024).replace("kind = \"host\"", "kind = \"device\"");
    let c = load_str(&raw_rx).unwrap_or_else(|e| panic!("{e}\n{raw_rx}"));
    assert_eq!(
        c.memory_regions[0].kind,
        rtdaq_config::model::RegionKind::Device
    );
    // The same region is fine for the RoCE server.
    ib(&server("").replace("kind = \"host\"", "kind = \"device\""));
}
