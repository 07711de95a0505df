//! The sink and the UCX sender together over UCX's TCP transport on loopback, without a
//! queue: a receiver made of the sys crate's listener and tagged receives (in its own
//! thread, its own worker) gets every message with its header, in order, then the end of
//! stream; and a destination with no listener is the start's error, naming its key.

use super::ucx::{register, Ready, UcxSender};
use super::{EgressCounters, EgressSink, HeapBuf};
use crate::stages::Packet;
use rtdaq_config::model::{Egress, EgressFeed, EgressProtocol, UcxEgress};
use rtdaq_core::format::egress_msg::{MsgHeader, HEADER_LEN};
use rtdaq_core::{PacketMeta, SlotRing};
use rtdaq_ucx_sys::{Context, Features, Listener, RecvPoll, Worker};
use std::net::{SocketAddr, SocketAddrV4, TcpListener};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

const TAG: u64 = 0x5254_4451_0000_0007;

fn egress(dest: SocketAddrV4, per_msg: u32, buffers: u32) -> Egress {
    Egress {
        name: "out".into(),
        protocol: EgressProtocol::Ucx,
        destinations: vec![dest],
        heap_address_bits: 48,
        packets_per_heap: per_msg,
        max_packet: 1472,
        descriptors_every: 0,
        rate_bps: None,
        txtime: None,
        heap_buffers: buffers,
        max_heap_bytes: 1000 * per_msg as usize,
        flush_ns: 1_000_000_000,
        strip_bytes: 0,
        ttl: 1,
        multicast_interface: None,
        thread: None,
        ucx: Some(UcxEgress {
            tag: TAG,
            transports: Some("tcp".into()),
            connect_wait_ms: 0,
            reconnect_ms: 100,
        }),
        feed: EgressFeed::Payloads,
        units: None,
    }
}

/// A sink and its UCX sender for `eg`, with the receiver the start waits on.
fn parts(
    eg: &Egress,
) -> (
    EgressSink,
    UcxSender,
    Receiver<Ready>,
    &'static EgressCounters,
) {
    let counters: &'static EgressCounters = Box::leak(Box::default());
    let mut bufs: Vec<HeapBuf> = (0..eg.heap_buffers)
        .map(|_| HeapBuf::with_headroom(eg.max_heap_bytes, HEADER_LEN))
        .collect();
    let reg = register(eg, 0, &mut bufs).unwrap();
    let ring = Box::leak(Box::new(
        SlotRing::new(Box::leak(bufs.into_boxed_slice())).unwrap(),
    ));
    let (prod, cons) = ring.split();
    let (sender, ready) = UcxSender::new(eg, 0, cons, counters, (0, reg), "test".into()).unwrap();
    (EgressSink::new(eg, prod, counters), sender, ready, counters)
}

fn payload(k: u32) -> Vec<u8> {
    (0..1000u32).map(|i| (i * 7 + k) as u8).collect()
}

/// What a receiver got: each message's header and data.
type Got = Vec<(MsgHeader, Vec<u8>)>;

/// A receiver thread on a free loopback port: every message until the end of stream (or
/// 10 s), each as its header and data.
fn receiver() -> (SocketAddrV4, std::thread::JoinHandle<Got>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let ctx = Context::with_options(
            Features {
                tag: true,
                am: false,
            },
            &[("TLS", "tcp")],
        )
        .unwrap();
        let worker = Worker::new(&ctx).unwrap();
        let listener = Listener::new(&worker, "127.0.0.1:0".parse().unwrap()).unwrap();
        let SocketAddr::V4(addr) = listener.local_addr() else {
            unreachable!()
        };
        tx.send(addr).unwrap();
        let mut eps = Vec::new();
        let mut got = Vec::new();
        let until = Instant::now() + Duration::from_secs(10);
        let mut t = worker.tag_recv_owned(vec![0u8; 1 << 16], TAG, u64::MAX);
        while Instant::now() < until {
            worker.progress();
            if let Some(Ok(ep)) = listener.accept() {
                eps.push(ep);
            }
            match t.check() {
                RecvPoll::InProgress => continue,
                RecvPoll::Done(info) => {
                    let buf = t.into_buf().unwrap();
                    let (h, data) = MsgHeader::parse(&buf[..info.len]).expect("an RTDQ message");
                    let end = h.end;
                    got.push((h, data.to_vec()));
                    if end {
                        break;
                    }
                    t = worker.tag_recv_owned(buf, TAG, u64::MAX);
                }
                RecvPoll::Failed(s) => panic!("receive failed: {s}"),
            }
        }
        got
    });
    (rx.recv().unwrap(), handle)
}

/// 10 payloads, 4 per message: messages of 4, 4 and 2 (the last closed by `finish`), in
/// sequence, their data the payloads; the end of stream last; every payload counted sent.
#[test]
fn messages_of_n_payloads_arrive_whole_in_sequence_then_the_end() {
    let (addr, rx) = receiver();
    let eg = egress(addr, 4, 8);
    let (mut sink, sender, ready, c) = parts(&eg);
    let data: Vec<Vec<u8>> = (0..10).map(payload).collect();
    for (k, d) in data.iter().enumerate() {
        sink.on_packet(&Packet::host(
            None,
            d,
            PacketMeta::default(),
            1_000 + k as u64,
        ));
    }
    sink.finish();
    let t = std::thread::spawn(move || sender.run());
    assert_eq!(ready.recv().unwrap(), Ok(()));
    let got = rx.join().unwrap();
    t.join().unwrap();
    assert_eq!(
        got.len(),
        4,
        "{:?}",
        got.iter().map(|g| g.0).collect::<Vec<_>>()
    );
    for (k, (h, d)) in got[..3].iter().enumerate() {
        assert_eq!((h.seq, h.stream, h.end), (k as u64, 0, false));
        let first = 4 * k;
        let n = if k == 2 { 2 } else { 4 };
        assert_eq!(h.payloads, n as u32);
        assert_eq!(h.time_ns, 1_000 + first as u64);
        assert_eq!(d, &data[first..first + n].concat());
    }
    assert!(got[3].0.end && got[3].0.seq == 3 && got[3].1.is_empty());
    assert_eq!(c.payloads_in.load(Relaxed), 10);
    assert_eq!(c.payloads_sent.load(Relaxed), 10);
    assert_eq!(c.heaps.load(Relaxed), 3);
    assert_eq!(c.datagrams.load(Relaxed), 4);
    assert_eq!(c.dropped(), 0);
}

/// Nobody listens at the destination: the thread says which key, and ends.
#[test]
fn no_listener_is_the_starts_error_naming_the_destination() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let eg = egress(SocketAddrV4::new([127, 0, 0, 1].into(), port), 4, 8);
    let (sink, sender, ready, _) = parts(&eg);
    let t = std::thread::spawn(move || sender.run());
    let (key, message) = ready.recv().unwrap().unwrap_err();
    assert_eq!(key, "egress[0].destinations[0]");
    assert!(message.contains("no UCX listener answered"), "{message}");
    drop(sink);
    t.join().unwrap();
}
