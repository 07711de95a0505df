//! `engine.ibverbs.striding_rq` / `stride_size`: the mlx5 striding (multi-packet) receive
//! queue of the raw path (issue #8). The invalid cases are fixtures in
//! `tests/fixtures/config-invalid/ibverbs-stride*.toml`; these are the valid ones and the
//! defaults.

use rtdaq_config::load_str;
use rtdaq_config::model::{Engine, IbverbsEngine, StridingRq};

fn raw(ibverbs: &str, buf_size: u32, buf_count: u32) -> String {
    format!(
        "name = \"striding\"\nplatform = \"host\"\n[engine]\nkind = \"ibverbs\"\n\
         [engine.ibverbs]\n{ibverbs}\n\
         [[memory_regions]]\nname = \"rx\"\nkind = \"host\"\nbuf_size = {buf_size}\nbuf_count = {buf_count}\n\
         [[interfaces]]\nname = \"p0\"\naddress = \"eth0\"\n\
         [[interfaces.rx_queues]]\nid = 0\ncpu_core = 0\nmemory_regions = [\"rx\"]\nmode = \"direct\"\n"
    )
}

fn ib(text: &str) -> IbverbsEngine {
    let c = load_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    match c.engine {
        Engine::Ibverbs(e) => e,
        other => panic!("not ibverbs: {other:?}"),
    }
}

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
