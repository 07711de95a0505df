//! `engine.ibverbs.op = "read"`: pull mode (issue #8). The receiver RDMA-READs each
//! message from the sender's buffers. The invalid case (a reply with `read`) is the fixture
//! `tests/fixtures/config-invalid/ibverbs-reply-read.toml`; these are the valid spellings.

use rtdaq_config::load_str;
use rtdaq_config::model::{Engine, IbverbsEngine, RoceOp};

fn server(ibverbs: &str) -> String {
    format!(
        "name = \"read\"\nplatform = \"host\"\n[engine]\nkind = \"ibverbs\"\n\
         [engine.ibverbs]\nmode = \"roce\"\n{ibverbs}\n\
         [[memory_regions]]\nname = \"rx\"\nkind = \"host\"\nbuf_size = 2048\nbuf_count = 1024\n\
         [[interfaces]]\nname = \"p0\"\naddress = \"rdma://169.254.77.1:7471\"\nrole = \"server\"\n\
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
