//! The hot path allocates nothing: a counting global allocator (per thread) around every
//! `poll`, `reserve` and `send` after `open`, from the very first call, on UDP (4 TX lanes,
//! GSO, GRO, pool-empty scratch, idle timeouts) and TCP (accept in `poll`, connections taken
//! over as lanes, partial records).

mod common;

use rtdaq_testbed::alloc::{allocations, CountingAlloc};

use std::io::Write;
use std::net::{TcpStream, UdpSocket};
use std::time::Duration;

use common::*;
use rtdaq_core::traits::{RxQueue, TxBurst, TxQueue};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// Allocations `f` made on this thread.
fn allocs<R>(f: impl FnOnce() -> R) -> (R, u64) {
    allocations(f)
}

#[test]
fn the_counter_sees_allocations() {
    let (b, a) = allocs(|| Box::new([0u8; 64]));
    drop(b);
    assert_eq!(a, 1);
}

#[test]
fn udp_poll_reserve_send_allocate_nothing() {
    let port = free_udp_port();
    let mut s = header("gso = true\ngro = true\nrcvbuf = 4194304");
    s += &region("b", 65536, 128);
    s += &format!("[[interfaces]]\nname = \"u\"\naddress = \"udp://127.0.0.1:{port}\"\nmax_message_size = 65507\n");
    s += &rxq(0, "b", 8, 500);
    s += &txq(0, "b", 32);
    // The generator's queue: 4 lanes (sockets), GSO runs per lane.
    s += &format!("[generator]\ninterface = \"u\"\ntx_queue = 0\ndestination = \"udp://127.0.0.1:{port}\"\npayload_size = 1200\nunpaced = true\nstreams = 4\n");
    let setup = Setup::new(&s, 65536, 128);
    let (mut rx, mut tx) = setup.open::<512>().unwrap().into_queues();
    assert_eq!(tx[0].lanes(), 4);
    let mut rb = rx[0].new_burst();
    let mut tb = tx[0].new_burst();
    let mut total = 0u64;
    let mut received = 0usize;
    for round in 0..20 {
        let (n, a) = allocs(|| tx[0].reserve(&mut tb, 32));
        total += a;
        for i in 0..n {
            let len = if i < 24 { 1200 } else { 100 + i };
            tb.packet_mut(i).unwrap()[..len].fill(round as u8);
            tb.set_len(i, len);
        }
        let (_, a) = allocs(|| tx[0].send(&mut tb));
        total += a;
        for _ in 0..4 {
            let (n, a) = allocs(|| rx[0].poll(&mut rb));
            total += a;
            received += n;
            rb.clear();
        }
    }
    // Idle polls (timeouts, SO_MEMINFO), then the pool-empty scratch path.
    for _ in 0..3 {
        let (_, a) = allocs(|| rx[0].poll(&mut rb));
        total += a;
    }
    let pool = setup.rx_pool(0);
    let held: Vec<_> = std::iter::from_fn(|| pool.get()).collect();
    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    // More datagrams than the queue keeps buffers for: the rest drain into scratch.
    for _ in 0..20 {
        sender.send_to(&[1u8; 500], ("127.0.0.1", port)).unwrap();
    }
    for _ in 0..4 {
        let (_, a) = allocs(|| rx[0].poll(&mut rb));
        total += a;
    }
    drop(held);
    assert!(received > 0);
    assert!(
        setup
            .rx_counters(0)
            .drops(rtdaq_core::DropReason::PoolEmpty)
            > 0
    );
    assert_eq!(total, 0, "the UDP hot path allocated");
}

#[test]
fn tcp_poll_reserve_send_allocate_nothing() {
    let port = free_tcp_port();
    let mut s = header("");
    s += &region("b", 1024, 256);
    s += &format!(
        "[[interfaces]]\nname = \"srv\"\naddress = \"tcp://127.0.0.1:{port}\"\nrole = \"server\"\nconnections = 2\nmax_message_size = 1000\n"
    );
    s += &rxq(0, "b", 16, 500);
    s += &txq(0, "b", 16);
    let setup = Setup::new(&s, 1024, 256);
    let (mut rx, mut tx) = setup.open::<64>().unwrap().into_queues();
    let mut peers: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let mut rb = rx[0].new_burst();
    let mut tb = tx[0].new_burst();
    let mut total = 0u64;
    let mut got = 0;
    // Accept happens inside poll; records arrive cut across reads.
    for round in 0..30u8 {
        for p in &mut peers {
            p.write_all(&[round; 700]).unwrap();
        }
        let (n, a) = allocs(|| rx[0].poll(&mut rb));
        total += a;
        got += n;
        rb.clear();
        let (n, a) = allocs(|| tx[0].reserve(&mut tb, 8));
        total += a;
        for i in 0..n {
            tb.set_len(i, 1000);
        }
        let (_, a) = allocs(|| tx[0].send(&mut tb));
        total += a;
    }
    for _ in 0..20 {
        let (n, a) = allocs(|| rx[0].poll(&mut rb));
        total += a;
        got += n;
        rb.clear();
    }
    assert_eq!(got, 2 * 30 * 700 / 1000);
    assert_eq!((tx[0].connections(), tx[0].lanes()), (2, 2));
    std::thread::sleep(Duration::from_millis(1));
    assert_eq!(total, 0, "the TCP hot path allocated");
}
