//! `engine.ibverbs.reply` / `reply_bytes`: the reply a RoCE receiver sends to
//! request/response peers (issue #8). The invalid cases are fixtures in
//! `tests/fixtures/config-invalid/ibverbs-reply-*.toml`; these are the valid ones and the
//! defaults.

use rtdaq_config::load_str;
use rtdaq_config::model::{Engine, IbverbsEngine, RoceReply};

fn server(ibverbs: &str) -> String {
    format!(
        "name = \"reply\"\nplatform = \"host\"\n[engine]\nkind = \"ibverbs\"\n\
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
