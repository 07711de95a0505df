//! Real UCX over TCP on loopback (no mocks): a listener and a client in one process, each
//! with its own context and worker (server in its own thread unless a test says so).
//!
//! Transport options come through `Context::with_options` (`UCX_TLS=tcp`,
//! `UCX_NET_DEVICES=lo` as environment variables would do the same), so the tests touch no
//! process-wide state and run in parallel.
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use rtdaq_ucx_sys::{
    Context, Endpoint, Features, Listener, MemHandle, Poll, RecvInfo, RecvPoll, RecvState,
    SendState, SendTransfer, Status, Worker,
};

/// What loopback TCP needs (UCX 1.13): TCP as the only transport, on `lo`.
/// PUT_ENABLE=n (`UCX_TCP_PUT_ENABLE`: a context option names the transport's field
/// without its `TCP_` prefix; `TCP_PUT_ENABLE` is ignored with an "invalid configuration"
/// warning): UCX 1.13's TCP rendezvous over PUT aborts on an assertion
/// (`tcp_ep.c:939 ep->flags & UCT_TCP_EP_FLAG_PUT_TX_WAITING_ACK`) now and then when these
/// tests run in parallel (seen in CI); without PUT the rendezvous goes by get/AM.
const LOOPBACK: &[(&str, &str)] = &[("TLS", "tcp"), ("NET_DEVICES", "lo"), ("PUT_ENABLE", "n")];
const MSG: usize = 64 * 1024;
const WINDOW: usize = 8;
/// Generous bound for anything that should take milliseconds.
const BOUND: Duration = Duration::from_secs(20);

fn context() -> Context {
    Context::with_options(
        Features {
            tag: true,
            am: false,
        },
        LOOPBACK,
    )
    .expect("UCP context over loopback TCP")
}

fn tag_of(i: u64) -> u64 {
    0x5254_4441_0000_0000 | i
}

/// Message `i`: its index, then bytes of a generator seeded by it (distinct contents).
fn fill(buf: &mut [u8], i: u64) {
    buf[..8].copy_from_slice(&i.to_le_bytes());
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for chunk in buf[8..].chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
}

fn check_msg(buf: &[u8], i: u64) {
    let mut want = vec![0u8; buf.len()];
    fill(&mut want, i);
    if let Some(at) = buf.iter().zip(&want).position(|(a, b)| a != b) {
        panic!("message {i}: byte {at} differs");
    }
}

/// Server side: listens on 127.0.0.1:0 (address sent on `addr_tx`), accepts one
/// connection, receives messages `0..count` in order with exact tags; stops after `stop_at`
/// messages when given (then drops endpoint, listener, worker and context, telling
/// `gone_tx` just before). Returns the number received.
fn serve(
    addr_tx: mpsc::Sender<SocketAddr>,
    count: u64,
    stop_at: Option<u64>,
    gone_tx: Option<mpsc::Sender<Instant>>,
) -> u64 {
    let ctx = context();
    let w = Worker::new(&ctx).expect("server worker");
    let l = Listener::new(&w, "127.0.0.1:0".parse().unwrap()).expect("listener");
    assert_ne!(l.local_addr().port(), 0);
    addr_tx.send(l.local_addr()).unwrap();
    assert!(w.progress_until(BOUND, || l.pending() > 0), "no connection");
    let ep = l.accept().expect("queued request").expect("accept");
    let mut free: Vec<Vec<u8>> = (0..WINDOW).map(|_| vec![0u8; MSG]).collect();
    let mut inflight = VecDeque::new();
    let (mut posted, mut received) = (0u64, 0u64);
    let last = stop_at.unwrap_or(count).min(count);
    let deadline = Instant::now() + BOUND;
    while received < last {
        while posted < count && !free.is_empty() {
            let buf = free.pop().unwrap();
            inflight.push_back((posted, w.tag_recv_owned(buf, tag_of(posted), u64::MAX)));
            posted += 1;
        }
        let (i, t) = inflight.front_mut().unwrap();
        match t.check() {
            RecvPoll::InProgress => {
                assert!(Instant::now() < deadline, "message {i} not received");
                w.progress();
            }
            RecvPoll::Done(info) => {
                let i = *i;
                assert_eq!((info.tag, info.len), (tag_of(i), MSG), "message {i}");
                let buf = inflight.pop_front().unwrap().1.into_buf().unwrap();
                check_msg(&buf, i);
                free.push(buf);
                received += 1;
            }
            RecvPoll::Failed(s) => panic!("receive {i} failed: {s}"),
        }
    }
    if let Some(tx) = gone_tx {
        tx.send(Instant::now()).unwrap();
    }
    // Receives still posted are cancelled and parked; everything is dropped in order.
    drop(inflight);
    drop(ep);
    drop(l);
    drop(w);
    drop(ctx);
    received
}

/// Waits for the oldest send of `inflight` to complete; returns its buffer and handle.
fn complete_oldest(
    w: &Worker,
    inflight: &mut VecDeque<(SendTransfer<'_, Vec<u8>>, MemHandle)>,
) -> (Vec<u8>, MemHandle, Poll) {
    let (t, _) = inflight.front_mut().unwrap();
    let mut poll = t.check();
    let deadline = Instant::now() + BOUND;
    while poll == Poll::InProgress {
        assert!(Instant::now() < deadline, "send did not complete");
        w.progress();
        poll = t.check();
    }
    let (t, m) = inflight.pop_front().unwrap();
    (t.into_buf().unwrap(), m, poll)
}

#[test]
fn thousand_tagged_64k_messages_arrive_byte_exact() {
    const COUNT: u64 = 1000;
    let (addr_tx, addr_rx) = mpsc::channel();
    let server = thread::spawn(move || serve(addr_tx, COUNT, None, None));
    let addr = addr_rx.recv_timeout(BOUND).expect("server address");

    let ctx = context();
    let w = Worker::new(&ctx).unwrap();
    let ep = Endpoint::connect(&w, addr).unwrap();
    let t0 = Instant::now();
    ep.flush_blocking(BOUND).expect("connection up");
    eprintln!(
        "connected in {:?} (UCX {})",
        t0.elapsed(),
        Context::version()
    );

    // WINDOW buffers, each registered once and reused: the Vec moves into the transfer
    // and back without moving its bytes, so the handle keeps covering them.
    let mut free: VecDeque<(Vec<u8>, MemHandle)> = (0..WINDOW)
        .map(|_| {
            let mut v = vec![0u8; MSG];
            let m = MemHandle::map(&ctx, &mut v).unwrap();
            (v, m)
        })
        .collect();
    let mut inflight = VecDeque::new();
    let start = Instant::now();
    for i in 0..COUNT {
        let (mut v, m) = match free.pop_front() {
            Some(s) => s,
            None => {
                let (v, m, poll) = complete_oldest(&w, &mut inflight);
                assert_eq!(poll, Poll::Done);
                (v, m)
            }
        };
        fill(&mut v, i);
        let t = ep.tag_send_owned(v, tag_of(i), Some(&m));
        inflight.push_back((t, m));
    }
    while !inflight.is_empty() {
        assert_eq!(complete_oldest(&w, &mut inflight).2, Poll::Done);
    }
    ep.flush_blocking(BOUND).unwrap();
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "{COUNT} x {MSG} B in {secs:.3} s ({:.2} Gb/s)",
        (COUNT as f64 * MSG as f64 * 8.0) / secs / 1e9
    );
    assert_eq!(ep.failed(), None);
    assert_eq!(server.join().unwrap(), COUNT);
}

#[test]
fn peer_dropped_mid_stream_is_reported_and_sends_keep_returning() {
    let (addr_tx, addr_rx) = mpsc::channel();
    let (gone_tx, gone_rx) = mpsc::channel();
    let server = thread::spawn(move || serve(addr_tx, u64::MAX, Some(50), Some(gone_tx)));
    let addr = addr_rx.recv_timeout(BOUND).unwrap();

    let ctx = context();
    let w = Worker::new(&ctx).unwrap();
    let ep = Endpoint::connect(&w, addr).unwrap();
    ep.flush_blocking(BOUND).expect("connection up");
    let mut free: VecDeque<(Vec<u8>, MemHandle)> = (0..WINDOW)
        .map(|_| {
            let mut v = vec![0u8; MSG];
            let m = MemHandle::map(&ctx, &mut v).unwrap();
            (v, m)
        })
        .collect();
    let mut inflight = VecDeque::new();
    let (mut sent, mut failed_sends) = (0u64, 0u64);
    let deadline = Instant::now() + BOUND;
    // Keep streaming until UCX reports the peer gone; every call returns.
    let status = loop {
        if let Some(s) = ep.failed() {
            break s;
        }
        assert!(Instant::now() < deadline, "peer failure not reported");
        let (mut v, m) = match free.pop_front() {
            Some(s) => s,
            None => {
                let (v, m, poll) = complete_oldest(&w, &mut inflight);
                if poll != Poll::Done {
                    failed_sends += 1;
                }
                (v, m)
            }
        };
        fill(&mut v, sent);
        inflight.push_back((ep.tag_send_owned(v, tag_of(sent), Some(&m)), m));
        sent += 1;
        w.progress();
    };
    let gone_at = gone_rx.recv_timeout(BOUND).expect("server stopped");
    eprintln!(
        "peer failure {status:?} reported {:?} after the server dropped its side; \
         {sent} sends posted, {failed_sends} completed with an error so far",
        gone_at.elapsed()
    );
    assert!(status.is_err());
    assert_eq!(server.join().unwrap(), 50);

    // Everything in flight completes (with an error or not) without hanging, and a new
    // send on the failed endpoint fails without blocking.
    while !inflight.is_empty() {
        complete_oldest(&w, &mut inflight);
    }
    let t0 = Instant::now();
    let mut t = ep.tag_send_owned(vec![1u8; MSG], 1, None);
    assert!(w.progress_until(BOUND, || t.check() != Poll::InProgress));
    let after = t.check();
    eprintln!("send after failure: {after:?} within {:?}", t0.elapsed());
    assert!(matches!(after, Poll::Failed(_)), "{after:?}");
    assert!(ep.flush_blocking(BOUND).is_err());
    let t0 = Instant::now();
    drop(t);
    drop(ep);
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "close took {:?}",
        t0.elapsed()
    );
    assert_eq!(w.parked(), 0);
}

#[test]
fn connecting_to_a_port_nobody_listens_on_fails_in_bounded_time() {
    // A port that was free a moment ago.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let ctx = context();
    let w = Worker::new(&ctx).unwrap();
    let t0 = Instant::now();
    let ep = match Endpoint::connect(&w, addr) {
        Ok(ep) => ep,
        Err(e) => {
            eprintln!("ucp_ep_create failed at once: {e}");
            return;
        }
    };
    let flushed = ep.flush_blocking(BOUND);
    let elapsed = t0.elapsed();
    eprintln!(
        "flush: {flushed:?}, failed(): {:?}, after {elapsed:?}",
        ep.failed()
    );
    assert!(flushed.is_err());
    assert!(!matches!(
        flushed,
        Err(rtdaq_ucx_sys::UcxError::Timeout { .. })
    ));
    assert!(w.progress_until(BOUND, || ep.failed().is_some()));
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    // A send on it fails without blocking.
    let mut t = ep.tag_send_owned(&b"hello"[..], 1, None);
    assert!(w.progress_until(BOUND, || t.check() != Poll::InProgress));
    assert!(matches!(t.check(), Poll::Failed(_)));
}

#[test]
fn listener_dropped_with_a_queued_request_rejects_it() {
    let ctx = context();
    let sw = Worker::new(&ctx).unwrap();
    let cw = Worker::new(&ctx).unwrap();
    let l = Listener::new(&sw, "127.0.0.1:0".parse().unwrap()).unwrap();
    let ep = Endpoint::connect(&cw, l.local_addr()).unwrap();
    let deadline = Instant::now() + BOUND;
    while l.pending() == 0 {
        assert!(Instant::now() < deadline);
        sw.progress();
        cw.progress();
    }
    drop(l);
    let deadline = Instant::now() + BOUND;
    while ep.failed().is_none() {
        assert!(Instant::now() < deadline, "rejection not reported");
        sw.progress();
        cw.progress();
    }
    eprintln!("rejected connection reported as {:?}", ep.failed());
}

/// Progresses until a borrowed receive completes; consumes it.
fn finish_recv(recv: RecvState<'_>, progress: &dyn Fn(), n: usize) -> RecvInfo {
    let req = match recv {
        RecvState::Done(info) => return info,
        RecvState::Pending(req) => req,
    };
    let deadline = Instant::now() + BOUND;
    loop {
        match req.check() {
            RecvPoll::InProgress => {
                assert!(Instant::now() < deadline, "receive {n} B");
                progress();
            }
            RecvPoll::Done(info) => return info,
            RecvPoll::Failed(s) => panic!("receive {n} B: {s}"),
        }
    }
}

/// Both workers in one thread, the borrowed (`unsafe`) API: small sends complete in the
/// call, receives of messages that already arrived complete in the call, others are
/// pending; sizes from 0 B to 1 MiB.
/// Two workers of one context in this thread, a listener on one, a client endpoint on the
/// other, accepted: runs `f(ctx, server worker, client worker, client ep, server ep)`.
fn with_pair(f: impl FnOnce(&Context, &Worker, &Worker, &Endpoint<'_>, &Endpoint<'_>)) {
    let ctx = context();
    let sw = Worker::new(&ctx).unwrap();
    let cw = Worker::new(&ctx).unwrap();
    let l = Listener::new(&sw, "127.0.0.1:0".parse().unwrap()).unwrap();
    let ep = Endpoint::connect(&cw, l.local_addr()).unwrap();
    let deadline = Instant::now() + BOUND;
    while l.pending() == 0 {
        assert!(Instant::now() < deadline);
        sw.progress();
        cw.progress();
    }
    let sep = l.accept().unwrap().unwrap();
    assert_eq!(sep.peer(), None);
    assert_eq!(ep.peer(), Some(l.local_addr()));
    f(&ctx, &sw, &cw, &ep, &sep);
}

#[test]
fn borrowed_requests_in_one_thread() {
    with_pair(|ctx, sw, cw, ep, _sep| {
        let progress = || {
            sw.progress();
            cw.progress();
        };
        let sizes = [0usize, 1, 100, 8 << 10, 64 << 10, 1 << 20];
        let (mut done_in_call, mut recv_in_call) = (0, 0);
        for (k, &n) in sizes.iter().enumerate() {
            let mut data = vec![0u8; n.max(8)];
            fill(&mut data, k as u64);
            let data = &data[..n];
            let mut rbuf = vec![0u8; n + 16];
            let tag = tag_of(k as u64);
            // Even k: post the receive first; odd k: send first, so it arrives unexpected.
            let (send, recv) = if k % 2 == 0 {
                // SAFETY: rbuf outlives the request and is only read after it completed.
                let r = unsafe { sw.tag_recv(&mut rbuf, tag, u64::MAX) }.unwrap();
                // SAFETY: data outlives the request, which is kept until it completed.
                let s = unsafe { ep.tag_send(data, tag, None) }.unwrap();
                (s, r)
            } else {
                // SAFETY: as above.
                let s = unsafe { ep.tag_send(data, tag, None) }.unwrap();
                let deadline = Instant::now() + Duration::from_millis(200);
                while Instant::now() < deadline {
                    progress();
                }
                // SAFETY: as above.
                let r = unsafe { sw.tag_recv(&mut rbuf, tag, u64::MAX) }.unwrap();
                (s, r)
            };
            if let SendState::Pending(req) = &send {
                let deadline = Instant::now() + BOUND;
                while req.check() == Poll::InProgress {
                    assert!(Instant::now() < deadline, "send {n} B");
                    progress();
                }
                assert_eq!(req.check(), Poll::Done);
            } else {
                done_in_call += 1;
            }
            if matches!(recv, RecvState::Done(_)) {
                recv_in_call += 1;
            }
            // Consumes the request: rbuf is free again after it.
            let info = finish_recv(recv, &progress, n);
            drop(send);
            assert_eq!((info.len, info.tag), (n, tag));
            assert_eq!(&rbuf[..n], data, "{n} B");
        }
        eprintln!(
            "sends done in the call: {done_in_call}, receives done in the call: {recv_in_call}"
        );
        assert!(done_in_call >= 1, "small sends complete in the call");
        assert!(
            recv_in_call >= 1,
            "arrived eager messages complete in the call"
        );

        // A memory handle that does not cover the data is refused before UCX sees it.
        let mut other = vec![0u8; 64];
        let m = MemHandle::map(ctx, &mut other).unwrap();
        // SAFETY: refused before anything is posted.
        let e = unsafe { ep.tag_send(b"outside", 9, Some(&m)) }.unwrap_err();
        assert!(matches!(e, rtdaq_ucx_sys::UcxError::Invalid(_)), "{e}");
        let mut t = ep.tag_send_owned(vec![0u8; 8], 9, Some(&m));
        assert_eq!(t.check(), Poll::Failed(Status::INVALID_PARAM));

        // A receive dropped while pending is cancelled; a transfer dropped in flight is parked
        // and reaped by progress.
        let mut rbuf = [0u8; 4];
        // SAFETY: dropped while still in the expected queue (nothing sent with this tag), so
        // cancelled before rbuf goes away.
        let r = unsafe { sw.tag_recv(&mut rbuf, 0xdead, u64::MAX) }.unwrap();
        assert!(matches!(&r, RecvState::Pending(q) if q.check() == RecvPoll::InProgress));
        drop(r);
        let t = sw.tag_recv_owned(vec![0u8; 16], 0xbeef, u64::MAX);
        drop(t);
        assert_eq!(sw.parked(), 1);
        sw.progress();
        assert_eq!(sw.parked(), 0, "a cancelled receive completes at once");
    });
}

/// Owned sends in one thread: a prefix of a registered buffer, and a send dropped in
/// flight.
#[test]
fn owned_prefix_and_parked_sends_in_one_thread() {
    with_pair(|ctx, sw, cw, ep, _sep| {
        let progress = || {
            sw.progress();
            cw.progress();
        };
        // Owned prefix send: the first 1000 bytes of a registered 4 KiB box; the whole box
        // comes back. A prefix beyond the buffer fails and gives the buffer back too.
        let mut boxed = vec![0u8; 4096].into_boxed_slice();
        fill(&mut boxed, 77);
        let mh = MemHandle::map(ctx, &mut boxed).unwrap();
        let mut r = sw.tag_recv_owned(vec![0u8; 4096], 77, u64::MAX);
        let mut t = ep.tag_send_prefix_owned(boxed, 1000, 77, Some(&mh));
        assert_eq!(t.len(), 1000);
        let deadline = Instant::now() + BOUND;
        while t.check() == Poll::InProgress || r.check() == RecvPoll::InProgress {
            assert!(Instant::now() < deadline);
            progress();
        }
        assert_eq!(t.check(), Poll::Done);
        let boxed = t.into_buf().unwrap();
        assert_eq!(boxed.len(), 4096);
        assert_eq!(r.check(), RecvPoll::Done(RecvInfo { len: 1000, tag: 77 }));
        assert_eq!(&r.into_buf().unwrap()[..1000], &boxed[..1000]);
        let mut t = ep.tag_send_prefix_owned(boxed, 4097, 78, Some(&mh));
        assert_eq!(t.check(), Poll::Failed(Status::INVALID_PARAM));
        assert_eq!(t.into_buf().unwrap().len(), 4096);

        // A send dropped in flight keeps its buffer alive (parked with the worker) until UCX is
        // done with it: the receiver still gets every byte.
        let mut big = vec![0u8; 4 << 20];
        fill(&mut big, 99);
        let want = big.clone();
        let t = ep.tag_send_owned(big, 99, None);
        drop(t);
        eprintln!("4 MiB send dropped: {} parked", cw.parked());
        let mut r = sw.tag_recv_owned(vec![0u8; 4 << 20], 99, u64::MAX);
        let deadline = Instant::now() + BOUND;
        while r.check() == RecvPoll::InProgress || cw.parked() > 0 {
            assert!(Instant::now() < deadline, "parked send never completed");
            progress();
        }
        assert_eq!(
            r.check(),
            RecvPoll::Done(RecvInfo {
                len: 4 << 20,
                tag: 99
            })
        );
        assert!(r.into_buf().unwrap() == want, "4 MiB message differs");
    });
}
