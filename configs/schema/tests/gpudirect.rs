//! GPUDirect receive on raw Ethernet (issue #19): `device` regions on DPDK RX queues (whole
//! frames, or the data segment of header-data split) and on ibverbs raw RX queues (whole
//! frames, or the data segment of a two-SGE receive), with the rules that keep the CPU away
//! from GPU memory.

use rtdaq_config::load_str;
use rtdaq_config::model::{BatchMode, RegionKind};

/// A DPDK deployment on port `0000:17:00.0`: region `hdr` (hugepages, 128 B; when listed), region `gpu`
/// (device, GPU 0, 9216 B), one RX queue with the given `memory_regions` and extra lines,
/// `[run] validate = {validate}`, and `tail` appended (flows, stages, format tables).
fn dpdk(regions: &str, queue: &str, validate: &str, tail: &str) -> String {
    let hdr = if regions.contains("hdr") {
        "[[memory_regions]]\nname = \"hdr\"\nkind = \"huge\"\npage_size = \"2M\"\nbuf_size = 128\nbuf_count = 8192\n"
    } else {
        ""
    };
    format!(
        "name = \"gpudirect\"\nplatform = \"host\"\n[engine]\nkind = \"dpdk\"\n{hdr}\
         [[memory_regions]]\nname = \"gpu\"\nkind = \"device\"\ngpu = 0\nbuf_size = 9216\nbuf_count = 8192\n\
         [[interfaces]]\nname = \"p0\"\naddress = \"0000:17:00.0\"\nmtu = 9000\n\
         [[interfaces.rx_queues]]\nid = 0\ncpu_core = 0\nmemory_regions = {regions}\nmode = \"direct\"\nring_depth = 8192\n{queue}\n\
         {tail}\n[run]\nvalidate = \"{validate}\"\n"
    )
}

const SPLIT: &str = "[\"hdr\", \"gpu\"]";
const WHOLE: &str = "[\"gpu\"]";

fn errors(text: &str) -> Vec<(String, String)> {
    match load_str(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.0.into_iter().map(|e| (e.path, e.message)).collect(),
    }
}

fn has(errs: &[(String, String)], path: &str, words: &[&str]) -> bool {
    errs.iter()
        .any(|(p, m)| p == path && words.iter().all(|w| m.contains(w)))
}

#[test]
fn dpdk_receives_whole_frames_into_gpu_memory_without_flows() {
    let c = load_str(&dpdk(WHOLE, "", "sequence", "")).unwrap();
    assert_eq!(c.memory_regions[0].kind, RegionKind::Device);
    // A flow match would read the headers on the CPU.
    let flows = "[[flows]]\ninterface = \"p0\"\nid = 1\nqueue = 0\n[flows.match]\nudp_dst = 5000\n";
    let e = errors(&dpdk(WHOLE, "", "sequence", flows));
    assert!(has(&e, "flows[0]", &["GPU memory", "hds_split"]), "{e:?}");
}

#[test]
fn the_header_region_of_a_split_must_be_cpu_memory() {
    let e = errors(&dpdk("[\"gpu\", \"hdr\"]", "hds_split = 74", "count", ""));
    assert!(
        has(
            &e,
            "interfaces[0].rx_queues[0].memory_regions[0]",
            &["header region", "CPU memory"]
        ),
        "{e:?}"
    );
}

#[test]
fn the_split_holds_the_headers_the_receiver_reads() {
    // rtdaq's format: 42 B of frame headers + 32 B of sequence header.
    let e = errors(&dpdk(SPLIT, "hds_split = 64", "sequence", ""));
    assert!(
        has(
            &e,
            "interfaces[0].rx_queues[0].hds_split",
            &["64 B", "hds_split = 74"]
        ),
        "{e:?}"
    );
    let c = load_str(&dpdk(SPLIT, "hds_split = 74", "sequence", "")).unwrap();
    assert_eq!(c.interfaces[0].rx_queues[0].hds_split, Some(74));
    // Counting reads nothing: any split.
    load_str(&dpdk(SPLIT, "hds_split = 42", "count", "")).unwrap();
    // CODIF's header is 64 bytes.
    let codif = "[interfaces.format]\nkind = \"codif\"\n";
    let text = dpdk(SPLIT, "hds_split = 74", "sequence", "")
        .replace("mtu = 9000\n", &format!("mtu = 9000\n{codif}"));
    let e = errors(&text);
    assert!(
        has(
            &e,
            "interfaces[0].rx_queues[0].hds_split",
            &["\"codif\"", "hds_split = 106"]
        ),
        "{e:?}"
    );
}

#[test]
fn full_validation_and_headers_of_no_fixed_size_are_refused() {
    let e = errors(&dpdk(SPLIT, "hds_split = 74", "full", ""));
    assert!(
        has(&e, "run.validate", &["\"full\"", "\"sequence\""]),
        "{e:?}"
    );
    let spead = "[interfaces.format]\nkind = \"spead\"\n";
    let text = dpdk(SPLIT, "hds_split = 74", "sequence", "")
        .replace("mtu = 9000\n", &format!("mtu = 9000\n{spead}"));
    let e = errors(&text);
    assert!(
        has(
            &e,
            "interfaces[0].rx_queues[0].hds_split",
            &["item pointers", "\"count\""]
        ),
        "{e:?}"
    );
}

#[test]
fn dpdk_tx_queues_refuse_gpu_memory() {
    let text = dpdk(
        WHOLE,
        "",
        "count",
        "[[interfaces.tx_queues]]\nid = 0\ncpu_core = 1\nmemory_regions = [\"gpu\"]\n",
    );
    let e = errors(&text);
    assert!(
        has(
            &e,
            "interfaces[0].tx_queues[0].memory_regions[0]",
            &["CPU", "GPU memory"]
        ),
        "{e:?}"
    );
}

#[test]
fn a_gpu_stage_reorders_split_payloads_by_the_cpu_header() {
    let stage = |lines: &str| {
        format!("[[gpu_stages]]\nname = \"batches\"\ngpu = 0\npackets_per_batch = 256\n{lines}\n")
    };
    let q = "hds_split = 74\ngpu_stage = \"batches\"";
    let c = load_str(&dpdk(SPLIT, q, "sequence", &stage("checksum = false"))).unwrap();
    let s = &c.gpu_stages[0];
    assert_eq!(s.mode, BatchMode::ReorderModulo);
    // The stage's buffers are the data segments: nothing to skip, the frame less the split.
    assert_eq!(s.payload_offset, 0);
    let whole = load_str(&dpdk(
        WHOLE,
        "gpu_stage = \"batches\"",
        "sequence",
        &stage("mode = \"gather\"\nchecksum = false"),
    ))
    .unwrap();
    let w = &whole.gpu_stages[0];
    assert_eq!(w.payload_offset, 42 + 32);
    assert_eq!(s.max_payload, w.max_payload, "both skip 74 B of each frame");
    // The CPU cannot checksum payloads in GPU memory.
    let e = errors(&dpdk(SPLIT, q, "sequence", &stage("checksum = true")));
    assert!(has(&e, "gpu_stages[0].checksum", &["GPU memory"]), "{e:?}");
    // Whole frames in GPU memory have no header on the CPU: gather only.
    let e = errors(&dpdk(
        WHOLE,
        "gpu_stage = \"batches\"",
        "sequence",
        &stage("checksum = false"),
    ));
    assert!(
        has(&e, "gpu_stages[0].mode", &["\"gather\"", "hds_split"]),
        "{e:?}"
    );
}

#[test]
fn ibverbs_raw_takes_gpu_memory_whole_or_as_the_data_segment() {
    let text = dpdk(SPLIT, "hds_split = 74", "sequence", "")
        .replace(
            "kind = \"dpdk\"",
            "kind = \"ibverbs\"\n[engine.ibverbs]\nmode = \"raw\"",
        )
        .replace("address = \"0000:17:00.0\"", "address = \"eth0\"");
    let c = load_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(c.interfaces[0].rx_queues[0].memory_regions.len(), 2);
    // Whole frames: the NIC steers them by the flow rules (ibv_create_flow) and drops the
    // unmatched (default_action = "drop"); the CPU reads none, unlike DPDK's software match.
    let flows = "[[flows]]\ninterface = \"p0\"\nid = 1\nqueue = 0\n[flows.match]\nudp_dst = 5000\n";
    let whole = dpdk(WHOLE, "", "sequence", flows)
        .replace(
            "kind = \"dpdk\"",
            "kind = \"ibverbs\"\n[engine.ibverbs]\nmode = \"raw\"",
        )
        .replace("address = \"0000:17:00.0\"", "address = \"eth0\"")
        .replace("mtu = 9000\n", "mtu = 9000\ndefault_action = \"drop\"\n");
    let c = load_str(&whole).unwrap_or_else(|e| panic!("{e}\n{whole}"));
    assert_eq!(c.interfaces[0].rx_queues[0].memory_regions.len(), 1);
    assert_eq!(c.memory_regions[0].kind, RegionKind::Device);
    // A GPU stage on them gathers: no header on the CPU to reorder by.
    let stage = "[[gpu_stages]]\nname = \"s\"\ngpu = 0\npackets_per_batch = 64\nmode = \"reorder\"\nchecksum = false\n";
    let with_stage = whole.replacen(
        "ring_depth = 8192\n",
        "ring_depth = 8192\ngpu_stage = \"s\"\n",
        1,
    );
    let e = errors(&(with_stage.clone() + stage));
    assert!(has(&e, "gpu_stages[0].mode", &["\"gather\""]), "{e:?}");
    let gather = stage.replace("reorder", "gather");
    let c = load_str(&(with_stage + &gather)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.gpu_stages[0].payload_offset, 42 + 32);
}

#[test]
fn kernel_engines_still_refuse_gpu_memory() {
    for (kind, addr) in [("afxdp", "eth0"), ("afpacket", "eth0")] {
        let text = dpdk(SPLIT, "hds_split = 74", "count", "")
            .replace("kind = \"dpdk\"", &format!("kind = \"{kind}\""))
            .replace(
                "address = \"0000:17:00.0\"",
                &format!("address = \"{addr}\""),
            );
        let e = errors(&text);
        assert!(
            e.iter().any(
                |(p, m)| p.starts_with("interfaces[0].rx_queues[0].memory_regions")
                    && m.contains("kind \"device\"")
            ),
            "{kind}: {e:?}"
        );
    }
}
