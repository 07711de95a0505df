//! The UCX egress stage at its own limit: a feeder thread hands payloads to a UCX sink
//! ([`EgressSink::on_packet`], the consumer half, which copies each payload into its
//! message buffer) as fast as the sender takes them, and the sink's sender thread
//! ([`UcxSender`], unchanged) sends the messages to a receiver given by address (the C
//! receiver `scripts/peers/ucx_recv.c`). No RX queue in front, so its input is never the
//! limit: what this measures is the egress stage, against `ucx_perftest` in the same run
//! (`scripts/bench-egress-ucx-stage.sh` here and `scripts/gpu-host-egress.sh sender` on the
//! GPU host run both, interleaved, and check the receiver).
//!
//! ```text
//! cargo bench -p rtdaq-runtime --features ucx --bench egress_ucx   # with the env below
//! ```
//! Env: `EGRESS_UCX_DEST` (receiver, `127.0.0.1:PORT`, required), `EGRESS_UCX_SECS` (4),
//! `EGRESS_UCX_PAYLOAD` (bytes, 8000), `EGRESS_UCX_PER_MSG` (payloads a message, 128),
//! `EGRESS_UCX_BUFFERS` (message buffers, 64), `EGRESS_UCX_SENDER_CORE` and
//! `EGRESS_UCX_FEEDER_CORE` (pin; unset: not pinned), `EGRESS_UCX_PRIORITY` (`SCHED_FIFO`
//! priority of the sender; unset: normal), `UCX_TLS` as UCX reads it (the sink's
//! `transports` stays unset). When a payload finds no free buffer (the sender is behind) the
//! feeder sleeps 20 µs after its burst of 16: that payload counts as `egress_full`, as in a run.
//!
//! Prints one line: `egress_ucx bytes B messages M secs S gbps G sender_cpu_s C
//! cpu_s_per_gb X payloads_in P egress_full F peer_gone G`.
#![allow(missing_docs)]

use rtdaq_config::model::{Egress, EgressFeed, EgressProtocol, UcxEgress};
use rtdaq_core::format::egress_msg::HEADER_LEN;
use rtdaq_core::{PacketMeta, SlotRing};
use rtdaq_platform::RtRequest;
use rtdaq_runtime::egress::{ucx_register, EgressCounters, EgressSink, HeapBuf, UcxSender};
use rtdaq_runtime::stages::Packet;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn egress(dest: std::net::SocketAddrV4, payload: usize, per_msg: u32, buffers: u32) -> Egress {
    Egress {
        name: "bench".into(),
        protocol: EgressProtocol::Ucx,
        destinations: vec![dest],
        heap_address_bits: 48,
        packets_per_heap: per_msg,
        max_packet: 8972,
        descriptors_every: 0,
        rate_bps: None,
        txtime: None,
        heap_buffers: buffers,
        max_heap_bytes: payload * per_msg as usize,
        flush_ns: 1_000_000_000,
        strip_bytes: 0,
        ttl: 1,
        multicast_interface: None,
        thread: None,
        ucx: Some(UcxEgress {
            tag: 0x5254_4451_0000_0000,
            transports: None,
            connect_wait_ms: 2000,
            reconnect_ms: 1000,
        }),
        feed: EgressFeed::Payloads,
        units: None,
    }
}

fn pin(core: Option<usize>, priority: Option<u8>) {
    if core.is_none() && priority.is_none() {
        return;
    }
    let req = RtRequest {
        core,
        priority,
        prefault_stack_kib: 0,
        required: true,
    };
    if let Err(e) = rtdaq_platform::rt::enter_thread(&req) {
        eprintln!("egress_ucx: cannot pin/schedule ({core:?}, {priority:?}): {e}");
        std::process::exit(2);
    }
}

fn main() {
    // `cargo bench` passes `--bench`; anything else in argv is ignored.
    let Some(dest) = env::<std::net::SocketAddrV4>("EGRESS_UCX_DEST") else {
        eprintln!("egress_ucx: set EGRESS_UCX_DEST=127.0.0.1:PORT (a running ucx_recv); see the file's docs");
        std::process::exit(2);
    };
    let secs: f64 = env("EGRESS_UCX_SECS").unwrap_or(4.0);
    let payload: usize = env("EGRESS_UCX_PAYLOAD").unwrap_or(8000);
    let per_msg: u32 = env("EGRESS_UCX_PER_MSG").unwrap_or(128);
    let buffers: u32 = env("EGRESS_UCX_BUFFERS").unwrap_or(64);
    let eg = egress(dest, payload, per_msg, buffers);

    let counters: &'static EgressCounters = Box::leak(Box::default());
    let mut bufs: Vec<HeapBuf> = (0..buffers)
        .map(|_| HeapBuf::with_headroom(eg.max_heap_bytes, HEADER_LEN))
        .collect();
    let reg = ucx_register(&eg, 0, &mut bufs).expect("UCX context and registrations");
    let ring = Box::leak(Box::new(
        SlotRing::new(Box::leak(bufs.into_boxed_slice())).expect("ring"),
    ));
    let (prod, cons) = ring.split();
    let (sender, ready) =
        UcxSender::new(&eg, 0, cons, counters, (0, reg), "bench".into()).expect("sender");
    let mut sink = EgressSink::new(&eg, prod, counters);

    let sender_core = env("EGRESS_UCX_SENDER_CORE");
    let priority = env("EGRESS_UCX_PRIORITY");
    let t = std::thread::spawn(move || {
        pin(sender_core, priority);
        sender.run()
    });
    if let Err((key, msg)) = ready.recv().expect("the sender's ready word") {
        eprintln!("egress_ucx: {key}: {msg}");
        std::process::exit(2);
    }
    pin(env("EGRESS_UCX_FEEDER_CORE"), None);

    // 64 distinct payloads, so the messages are not all one pattern.
    let data: Vec<Vec<u8>> = (0..64u32)
        .map(|k| (0..payload as u32).map(|i| (i * 7 + k) as u8).collect())
        .collect();
    let t0 = Instant::now();
    let until = t0 + Duration::from_secs_f64(secs);
    let mut k = 0usize;
    let mut full = 0;
    while Instant::now() < until {
        // A burst, then the tick a queue makes after each (it publishes the counts).
        for _ in 0..16 {
            let p = Packet::host(None, &data[k % 64], PacketMeta::default(), k as u64);
            sink.on_packet(&p);
            k += 1;
        }
        sink.tick(rtdaq_runtime::pacer::now_ns());
        let now_full = counters.dropped_full.load(Relaxed);
        if now_full != full {
            full = now_full;
            std::thread::sleep(Duration::from_micros(20));
        }
    }
    sink.finish();
    drop(sink);
    let cpu_ns = t.join().expect("sender thread");
    let secs = t0.elapsed().as_secs_f64();
    let bytes = counters.bytes.load(Relaxed);
    let cpu_s = cpu_ns as f64 / 1e9;
    println!(
        "egress_ucx bytes {bytes} messages {} secs {secs:.3} gbps {:.3} sender_cpu_s {cpu_s:.3} cpu_s_per_gb {:.4} payloads_in {} egress_full {} peer_gone {}",
        counters.heaps.load(Relaxed),
        bytes as f64 * 8.0 / secs / 1e9,
        cpu_s / (bytes as f64 / 1e9),
        counters.payloads_in.load(Relaxed),
        counters.dropped_full.load(Relaxed),
        counters.dropped_peer_gone.load(Relaxed),
    );
}
