//! TCP over loopback: server with 1 and 3 clients (records cut in random chunks), refusal of
//! extra peers, client mode against a std listener, the loopback server+client pair.

mod common;

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use common::*;
use rtdaq_core::traits::{RxBurst, RxQueue, Segment, TxBurst, TxQueue};
use rtdaq_core::{ConnId, DropReason};
use rtdaq_engine_socket::SocketRx;

const REC: usize = 256;

fn server_config(port: u16, connections: u32, queues: u16) -> String {
    let mut s = header("");
    s += &region("rx", 512, 256);
    s += &format!(
        "[[interfaces]]\nname = \"srv\"\naddress = \"tcp://127.0.0.1:{port}\"\nrole = \"server\"\nconnections = {connections}\nmax_message_size = {REC}\n"
    );
    for q in 0..queues {
        s += &rxq(q, "rx", 16, 1000);
    }
    s
}

/// Record `seq` of client `client`: its tag in the first 8 bytes, then a pattern.
fn record(client: u64, seq: u64) -> Vec<u8> {
    let tag = client << 32 | seq;
    let mut r = pattern(REC, tag);
    r[..8].copy_from_slice(&tag.to_le_bytes());
    r
}

/// Writes `n` records in random-sized chunks (1..=700 bytes).
fn write_chunked(mut s: TcpStream, client: u64, n: u64, seed: u64) {
    let stream: Vec<u8> = (0..n).flat_map(|i| record(client, i)).collect();
    let mut rng = Rng(seed | 1);
    let mut off = 0;
    while off < stream.len() {
        let k = (1 + rng.below(700) as usize).min(stream.len() - off);
        s.write_all(&stream[off..off + k]).unwrap();
        off += k;
        if rng.below(4) == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// Polls every queue until `want` records arrived; returns (queue, conn, tag) per record in
/// arrival order, checking each record's bytes.
fn collect(qs: &mut [SocketRx<'static, 64>], want: usize) -> Vec<(usize, ConnId, u64)> {
    let mut bursts: Vec<_> = qs.iter().map(|q| q.new_burst()).collect();
    let mut out = Vec::new();
    until(Duration::from_secs(10), || {
        for (k, q) in qs.iter_mut().enumerate() {
            q.poll(&mut bursts[k]);
            for i in 0..RxBurst::len(&bursts[k]) {
                let Segment::Host(b) = bursts[k].segment(i, 0) else {
                    panic!()
                };
                assert_eq!(b.len(), REC);
                let tag = u64::from_le_bytes(b[..8].try_into().unwrap());
                assert_eq!(
                    b,
                    &record(tag >> 32, tag & 0xffff_ffff)[..],
                    "record {tag:x} corrupt"
                );
                let m = bursts[k].meta(i);
                assert_eq!(m.len as usize, REC);
                assert!(m.rx_timestamp_ns > 0);
                out.push((k, m.conn, tag));
            }
            bursts[k].clear();
        }
        out.len() >= want
    });
    out
}

/// Checks: all records, per connection in order, one client per connection id.
fn check(got: &[(usize, ConnId, u64)], clients: u64, per: u64, queues: usize) {
    assert_eq!(got.len() as u64, clients * per);
    let mut by_conn: HashMap<ConnId, (usize, u64, u64)> = HashMap::new();
    for &(q, conn, tag) in got {
        assert!(conn.0 >= 1 && conn.0 as u64 <= clients, "conn id {conn:?}");
        assert_eq!(
            q,
            (conn.0 as usize - 1) % queues,
            "connection k goes to queue k mod n"
        );
        let e = by_conn.entry(conn).or_insert((q, tag >> 32, 0));
        assert_eq!(e.1, tag >> 32, "two clients on one connection id");
        assert_eq!(tag & 0xffff_ffff, e.2, "out of order on {conn:?}");
        e.2 += 1;
    }
    assert_eq!(by_conn.len() as u64, clients, "connection ids not distinct");
}

#[test]
fn server_one_client_keeps_record_boundaries() {
    let port = free_tcp_port();
    let setup = Setup::new(&server_config(port, 1, 1), 512, 256);
    let (mut rx, _) = setup.open::<64>().unwrap().into_queues();
    assert_eq!(rx[0].message_size(), Some(REC));
    let c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let t = std::thread::spawn(move || write_chunked(c, 7, 400, 11));
    let got = collect(&mut rx, 400);
    t.join().unwrap();
    check(&got, 1, 400, 1);
    let c = setup.rx_counters(0).snapshot();
    assert_eq!(
        (c.packets, c.bytes, c.total_drops()),
        (400, 400 * REC as u64, 0)
    );
    assert_eq!(
        rx[0].sockopt(6, 1).unwrap(),
        1,
        "TCP_NODELAY on the accepted socket"
    );
}

#[test]
fn server_three_clients_distinct_ids_and_extra_peer_refused() {
    let port = free_tcp_port();
    let setup = Setup::new(&server_config(port, 3, 2), 512, 256);
    let (mut rx, _) = setup.open::<64>().unwrap().into_queues();
    let per = 300;
    let threads: Vec<_> = (0..3u64)
        .map(|client| {
            let c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            std::thread::spawn(move || write_chunked(c, client, per, 100 + client))
        })
        .collect();
    let got = collect(&mut rx, 3 * per as usize);
    threads.into_iter().for_each(|t| t.join().unwrap());
    check(&got, 3, per, 2);
    assert_eq!(rx[0].stats().accepted, 3);
    // The listener closed after the third accept: a fourth peer is refused.
    let err = TcpStream::connect(("127.0.0.1", port)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
}

#[test]
fn peer_closing_mid_record_counts_truncated() {
    let port = free_tcp_port();
    let setup = Setup::new(&server_config(port, 1, 1), 512, 256);
    let (mut rx, _) = setup.open::<64>().unwrap().into_queues();
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(&record(1, 0)).unwrap();
    c.write_all(&record(1, 1)[..100]).unwrap();
    drop(c);
    let got = collect(&mut rx, 1);
    assert_eq!(got.len(), 1);
    assert!(until(Duration::from_secs(5), || {
        let mut b = rx[0].new_burst();
        rx[0].poll(&mut b);
        rx[0].stats().closed == 1
    }));
    assert_eq!(setup.rx_counters(0).drops(DropReason::Truncated), 1);
}

#[test]
fn client_mode_against_a_std_listener() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut s = header("");
    s += &region("b", 512, 256);
    s += &format!(
        "[[interfaces]]\nname = \"cli\"\naddress = \"tcp://127.0.0.1:{port}\"\nrole = \"client\"\nconnections = 2\nmax_message_size = {REC}\n"
    );
    s += &rxq(0, "b", 16, 1000);
    s += &txq(0, "b", 16);
    let setup = Setup::new(&s, 512, 256);
    // The kernel completes the handshakes from the listen backlog; accept afterwards.
    let (mut rx, mut tx) = setup.open::<64>().unwrap().into_queues();
    let mut peers: Vec<TcpStream> = (0..2).map(|_| listener.accept().unwrap().0).collect();
    assert_eq!(
        tx[0].connections(),
        0,
        "connections are taken over on first use"
    );

    // TX: 10 records round robin over the two connections.
    let mut b = tx[0].new_burst();
    assert_eq!(tx[0].reserve(&mut b, 10), 10);
    for i in 0..10 {
        b.packet_mut(i).unwrap()[..REC].copy_from_slice(&record(9, i as u64));
        b.set_len(i, REC);
    }
    assert_eq!(tx[0].send(&mut b), 10);
    assert_eq!(tx[0].connections(), 2);
    let mut seen = Vec::new();
    for p in &mut peers {
        p.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = vec![0u8; 5 * REC];
        p.read_exact(&mut buf).unwrap();
        for r in buf.chunks(REC) {
            let tag = u64::from_le_bytes(r[..8].try_into().unwrap());
            assert_eq!(r, &record(9, tag & 0xffff_ffff)[..]);
            seen.push(tag & 0xffff_ffff);
        }
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..10).collect::<Vec<_>>());
    assert_eq!(setup.tx_counters(0).snapshot().packets, 10);

    // RX: each peer writes records back; ids 1 and 2.
    for (k, p) in peers.iter_mut().enumerate() {
        for i in 0..20 {
            p.write_all(&record(k as u64, i)).unwrap();
        }
    }
    let got = collect(&mut rx, 40);
    let mut by_conn: HashMap<ConnId, u64> = HashMap::new();
    for (_, conn, tag) in &got {
        let client = *by_conn.entry(*conn).or_insert(tag >> 32);
        assert_eq!(client, tag >> 32);
    }
    assert_eq!(got.len(), 40);
    assert_eq!(by_conn.len(), 2);
    assert!(by_conn.keys().all(|c| c.0 == 1 || c.0 == 2));
}

#[test]
fn server_and_clients_in_one_config_like_host_tcp_3clients() {
    let port = free_tcp_port();
    let mut s = header("");
    s += &region("srv", 4096, 256);
    s += &region("cli", 4096, 256);
    s += &format!(
        "[[interfaces]]\nname = \"server\"\naddress = \"tcp://127.0.0.1:{port}\"\nrole = \"server\"\nconnections = 3\nmax_message_size = 4096\n"
    );
    for q in 0..3 {
        s += &rxq(q, "srv", 16, 1000);
    }
    s += &format!(
        "[[interfaces]]\nname = \"clients\"\naddress = \"tcp://127.0.0.1:{port}\"\nrole = \"client\"\nconnections = 3\nmax_message_size = 4096\n"
    );
    s += &txq(0, "cli", 16);
    s +=
        "[generator]\ninterface = \"clients\"\ntx_queue = 0\npayload_size = 4000\nunpaced = true\n";
    let setup = Setup::new(&s, 4096, 256);
    let (mut rx, mut tx) = setup.open::<64>().unwrap().into_queues();
    assert!(
        rx.iter().all(|q| q.message_size() == Some(4000)),
        "generator.payload_size frames the stream"
    );
    let mut sent = 0;
    for round in 0..10u64 {
        let mut b = tx[0].new_burst();
        let n = tx[0].reserve(&mut b, 12);
        for i in 0..n {
            fill(
                &mut b.packet_mut(i).unwrap()[..4000],
                round * 100 + i as u64,
            );
            b.set_len(i, 4000);
        }
        sent += tx[0].send(&mut b);
    }
    assert_eq!(sent, 120);
    let mut bursts: Vec<_> = rx.iter().map(|q| q.new_burst()).collect();
    let mut got = 0;
    until(Duration::from_secs(10), || {
        for (k, q) in rx.iter_mut().enumerate() {
            got += q.poll(&mut bursts[k]);
            assert!(bursts[k].iter().all(|p| p.meta().conn.0 as usize == k + 1));
            bursts[k].clear();
        }
        got == 120
    });
    assert_eq!(got, 120);
    for k in 0..3 {
        assert_eq!(setup.rx_counters(k).snapshot().packets, 40, "queue {k}");
    }
}
