//! `engine.ibverbs.reply` against a peer that never posts a receive (Soft-RoCE guest only:
//! `scripts/vm/ibverbs-tests.sh` runs this executable there; elsewhere it says so and
//! passes without checking anything).
//!
//! An rtdaq RoCE server with `reply = "echo"` (in this process: the engine opened on
//! leaked pools, its RX queue polled on a thread) and a foreign RDMA CM client (raw verbs
//! from `rtdaq-ibverbs-sys`, no rtdaq hello) that sends [`N`] messages and never posts a
//! receive, asking for infinite receiver-not-ready retries. The server's first replies
//! stay in its send queue (RNR-retried forever); reception must go on regardless:
//! every message is delivered, no poll stalls, the replies that found no free buffer are
//! counted as failures at once, and the stuck ones when the peer leaves (flushed): in the
//! end `reply_failures == N`, `replies_sent == 0`.

mod common;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::leak;
use ffi::{Access, CmEventKind, ConnParams, EventChannel, QpCaps, SendBatch, SendOp, SendRequest};
use rtdaq_core::traits::{Engine, EngineArgs, EngineStats, RxQueue};
use rtdaq_engine_ibverbs::RoceEngine;

/// Messages the client sends (more than the server's 32 reply buffers per connection).
const N: u64 = 100;
const PORT: u16 = 7490;
const MSG: usize = 64;

fn xstat(stats: &dyn EngineStats, name: &str) -> u64 {
    stats
        .port_stats()
        .iter()
        .flat_map(|p| p.xstats.iter())
        .find(|(k, _)| k == name)
        .map_or(0, |(_, v)| *v)
}

/// Waits for the next CM event on `ch` (up to `timeout`).
fn event(ch: &EventChannel, timeout: Duration) -> Option<CmEventKind> {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if let Ok(Some(ev)) = ch.next() {
            return Some(ev.kind);
        }
        ch.wait(Duration::from_millis(50));
    }
    None
}

#[test]
fn replies_to_a_peer_without_receives_never_stall_reception() {
    if common::skip_outside_guest() {
        return;
    }
    let text = format!(
        "name = \"reply-no-rnr-stall\"\nplatform = \"host\"\n[engine]\nkind = \"ibverbs\"\n\
         [engine.ibverbs]\nmode = \"roce\"\ncredits = 64\nreply = \"echo\"\n\
         [[memory_regions]]\nname = \"rx\"\nkind = \"host\"\nbuf_size = 2048\nbuf_count = 512\n\
         [[interfaces]]\nname = \"roce\"\naddress = \"rdma://169.254.77.1:{PORT}\"\nrole = \"server\"\nconnections = 1\n\
         [[interfaces.rx_queues]]\nid = 0\ncpu_core = 0\nmemory_regions = [\"rx\"]\nmode = \"direct\"\n\
         [rt]\nrequired = false\nlock_memory = false\n"
    );
    let config = leak(rtdaq_config::load_str(&text).expect("config"));
    let rx = common::one_queue(0, common::host_pool(2048, 512));
    let counters = rx[0].counters;
    let engine = RoceEngine::open(EngineArgs {
        config,
        rx,
        tx: &[],
    })
    .expect("open the RoCE server");
    let stats = engine.stats_handle();
    let (mut rxs, _) = engine.into_queues();
    let mut q = rxs.pop().expect("one RX queue");

    // The server's RX queue, polled on its own thread; the longest single poll is kept.
    let stop = Arc::new(AtomicBool::new(false));
    let got = Arc::new(AtomicU64::new(0));
    let longest_us = Arc::new(AtomicU64::new(0));
    let poller = {
        let (stop, got, longest_us) = (stop.clone(), got.clone(), longest_us.clone());
        std::thread::spawn(move || {
            let mut burst = q.new_burst();
            while !stop.load(Ordering::Acquire) {
                let t = Instant::now();
                let n = q.poll(&mut burst);
                let us = t.elapsed().as_micros() as u64;
                longest_us.fetch_max(us, Ordering::Relaxed);
                got.fetch_add(n as u64, Ordering::Relaxed);
                burst.clear();
            }
            drop(burst);
            drop(q); // publishes the queue's counts, joins the CM thread
        })
    };

    // The foreign client: rxe1 (169.254.77.2) to the server on rxe0, no hello, no receive.
    let ch = EventChannel::new().expect("event channel");
    let mut id = ch.create_id(0).expect("rdma_create_id");
    let dst = SocketAddrV4::new(Ipv4Addr::new(169, 254, 77, 1), PORT);
    id.resolve_addr(None, dst, Duration::from_secs(2))
        .expect("resolve_addr");
    assert_eq!(
        event(&ch, Duration::from_secs(5)),
        Some(CmEventKind::AddrResolved)
    );
    id.resolve_route(Duration::from_secs(2))
        .expect("resolve_route");
    assert_eq!(
        event(&ch, Duration::from_secs(5)),
        Some(CmEventKind::RouteResolved)
    );
    let ctx = id.context().expect("device");
    let pd = ctx.alloc_pd().expect("pd");
    let cq = ctx.create_cq(256).expect("cq");
    id.create_qp(
        &pd,
        &cq,
        &cq,
        QpCaps {
            max_send_wr: 64,
            max_recv_wr: 1,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline: 0,
        },
    )
    .expect("qp");
    let mr = pd
        .register_owned(vec![0x5au8; MSG].into_boxed_slice(), Access::LOCAL_WRITE)
        .expect("mr");
    // rnr_retry_count 7: the server retries its replies to us forever.
    id.connect(&[], ConnParams::default())
        .expect("rdma_connect");
    assert_eq!(
        event(&ch, Duration::from_secs(10)),
        Some(CmEventKind::Established)
    );

    let mut batch = SendBatch::with_capacity(1);
    let mut wcs = vec![ffi::WorkCompletion::default(); 16];
    let mut done = 0u64;
    for i in 0..N {
        batch.clear();
        batch.push(&SendRequest {
            wr_id: i,
            op: SendOp::Send,
            addr: mr.addr(),
            len: MSG as u32,
            lkey: mr.lkey(),
            imm: 0,
            remote_addr: 0,
            rkey: 0,
            signaled: true,
            inline: false,
        });
        id.post_send(&mut batch).expect("post_send");
        // One message at a time: each completes when the server acknowledged it.
        let end = Instant::now() + Duration::from_secs(10);
        while done <= i {
            assert!(Instant::now() < end, "send {i} never completed");
            let n = cq.poll(&mut wcs).expect("poll");
            for wc in &wcs[..n] {
                assert!(
                    wc.ok(),
                    "send {} failed: {}",
                    wc.wr_id(),
                    ffi::wc_status_str(wc.status())
                );
                done += 1;
            }
        }
    }
    // Every message delivered although the replies are stuck.
    let end = Instant::now() + Duration::from_secs(10);
    while got.load(Ordering::Relaxed) < N && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(got.load(Ordering::Relaxed), N, "messages delivered");
    assert_eq!(
        xstat(&stats, "replies_sent"),
        0,
        "the peer posts no receive"
    );
    let failed = xstat(&stats, "reply_failures");
    assert!(
        failed >= N - 32,
        "{failed} reply failures: at most 32 replies in flight, the rest counted at once"
    );

    // The peer leaves: the stuck replies come back flushed and are counted too.
    id.disconnect();
    let _ = event(&ch, Duration::from_secs(2));
    let end = Instant::now() + Duration::from_secs(10);
    while xstat(&stats, "reply_failures") < N && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Release);
    poller.join().expect("poller");
    drop((mr, id, cq, pd));
    assert_eq!(
        xstat(&stats, "reply_failures"),
        N,
        "every message without a reply is counted"
    );
    assert_eq!(xstat(&stats, "replies_sent"), 0);
    assert_eq!(counters.snapshot().packets, N);
    assert_eq!(counters.snapshot().total_drops(), 0);
    let longest = longest_us.load(Ordering::Relaxed);
    assert!(
        longest < 1_000_000,
        "a poll took {longest} µs: reception stalled behind the replies"
    );
    eprintln!("{N} messages delivered, {N} replies counted as failed, longest poll {longest} µs");
}
