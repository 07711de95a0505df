//! TCP over loopback: server with 1 and 3 clients (records cut in random chunks), refusal of
//! extra peers, client mode against a std listener, TX lanes (one per connection), the
//! loopback server+client pair.

mod common;

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use common::*;
use rtdaq_core::traits::{RxBurst, RxQueue, Segment, TxBurst, TxQueue};
use rtdaq_core::{ConnId, DropReason};
use rtdaq_engine_socket::{SocketRx, SocketTx};

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
                assert_eq!(m.ts_source, rtdaq_core::TimestampSource::Poll);
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
fn server_three_clients_distinct_ids_and_extra_peer_closed_at_once() {
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
    // Every slot is busy (the three peers are still connected: their threads ended but the
    // engine holds the server ends; the clients' ends closed, so slots free up as the queues
    // read EOF). Wait until all three are seen closed, then fill the slots again and check
    // a fourth concurrent peer gets end-of-stream at once.
    assert!(until(Duration::from_secs(5), || {
        for q in rx.iter_mut() {
            let mut b = q.new_burst();
            q.poll(&mut b);
        }
        rx.iter().map(|q| q.stats().closed).sum::<u32>() == 3
    }));
    let peers: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let mut extra = TcpStream::connect(("127.0.0.1", port)).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 1];
        extra.read(&mut buf)
    });
    assert!(until(Duration::from_secs(5), || {
        for q in rx.iter_mut() {
            let mut b = q.new_burst();
            q.poll(&mut b);
        }
        rx[0].stats().rejected == 1
    }));
    // EOF (0 bytes) or a reset: either way the peer is told at once, not left hanging.
    match reader.join().unwrap() {
        Ok(n) => assert_eq!(n, 0, "the extra peer got data"),
        Err(e) => assert_ne!(e.kind(), ErrorKind::WouldBlock, "the extra peer hung"),
    }
    assert_eq!(rx[0].stats().reaccepted, 3);
    drop(peers);
}

#[test]
fn a_peer_that_reconnects_takes_its_slot_and_id_again() {
    let port = free_tcp_port();
    let setup = Setup::new(&server_config(port, 1, 1), 512, 256);
    let (mut rx, _) = setup.open::<64>().unwrap().into_queues();
    for round in 0..3u64 {
        let c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let t = std::thread::spawn(move || write_chunked(c, round, 50, 7 + round));
        let got = collect(&mut rx, 50);
        t.join().unwrap();
        check(&got, 1, 50, 1);
        assert!(
            got.iter().all(|(_, id, _)| *id == ConnId(1)),
            "round {round}: {got:?}"
        );
        // Wait for the queue to see the close before the next peer connects.
        assert!(until(Duration::from_secs(5), || {
            let mut b = rx[0].new_burst();
            rx[0].poll(&mut b);
            rx[0].stats().closed == round as u32 + 1
        }));
    }
    let s = rx[0].stats();
    assert_eq!((s.accepted, s.reaccepted, s.rejected), (3, 2, 0));
    let c = setup.rx_counters(0).snapshot();
    assert_eq!((c.packets, c.total_drops()), (150, 0));
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

    // TX: 10 records over the two lanes (connection k = lane k, in connect order).
    assert_eq!(tx[0].lanes(), 2);
    let mut b = tx[0].new_burst();
    assert_eq!(tx[0].reserve(&mut b, 10), 10);
    for i in 0..10 {
        b.packet_mut(i).unwrap()[..REC].copy_from_slice(&record(9, i as u64));
        b.set_len(i, REC);
    }
    assert_eq!(tx[0].send(&mut b), 10);
    assert_eq!(tx[0].connections(), 2);
    for p in &mut peers {
        let lane = lane_of(&tx[0], p);
        p.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = vec![0u8; 5 * REC];
        p.read_exact(&mut buf).unwrap();
        let seen: Vec<u64> = buf
            .chunks(REC)
            .map(|r| {
                let tag = u64::from_le_bytes(r[..8].try_into().unwrap());
                assert_eq!(r, &record(9, tag & 0xffff_ffff)[..]);
                tag & 0xffff_ffff
            })
            .collect();
        assert_eq!(
            seen,
            (0..10).filter(|j| j % 2 == lane as u64).collect::<Vec<_>>()
        );
    }
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

/// The lane of `tx` whose connection is the peer of `peer` (a std-side stream).
fn lane_of<const N: usize>(tx: &SocketTx<'static, N>, peer: &TcpStream) -> usize {
    let std::net::SocketAddr::V4(addr) = peer.peer_addr().unwrap() else {
        unreachable!()
    };
    (0..tx.lanes())
        .find(|&l| tx.lane_local_addr(l) == Some(addr))
        .expect("peer is no lane's connection")
}

/// Odd burst sizes, so lanes start anywhere in a burst and bursts end mid-cycle.
const LANE_BURSTS: [usize; 9] = [1, 2, 7, 16, 5, 3, 11, 4, 8];

/// Sends records `j = first..` (tag `9 << 32 | j`) in bursts of `sizes`; returns the next `j`.
fn send_records<const N: usize>(q: &mut SocketTx<'static, N>, first: u64, sizes: &[usize]) -> u64 {
    let mut j = first;
    let mut b = q.new_burst();
    for &n in sizes {
        assert_eq!(q.reserve(&mut b, n), n);
        for i in 0..n {
            b.packet_mut(i).unwrap()[..REC].copy_from_slice(&record(9, j + i as u64));
            b.set_len(i, REC);
        }
        q.send(&mut b);
        j += n as u64;
    }
    j
}

/// Reads whole records from `p` until EOF (or `want` records); returns their `j`, checking
/// their bytes.
fn read_records(p: &mut TcpStream, want: Option<usize>) -> Vec<u64> {
    p.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut out = Vec::new();
    let mut r = vec![0u8; REC];
    while want.is_none_or(|w| out.len() < w) {
        match p.read_exact(&mut r) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => break,
            Err(e) => panic!("read: {e}"),
        }
        let tag = u64::from_le_bytes(r[..8].try_into().unwrap());
        assert_eq!(r, record(9, tag & 0xffff_ffff), "record {tag:x} corrupt");
        out.push(tag & 0xffff_ffff);
    }
    out
}

#[test]
fn client_tx_lanes_each_connection_gets_every_third_record_in_order() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut s = header("");
    s += &region("b", 512, 256);
    s += &format!(
        "[[interfaces]]\nname = \"cli\"\naddress = \"tcp://127.0.0.1:{port}\"\nrole = \"client\"\nconnections = 3\nmax_message_size = {REC}\n"
    );
    s += &txq(0, "b", 16);
    let setup = Setup::new(&s, 512, 256);
    let (_, mut tx) = setup.open::<64>().unwrap().into_queues();
    assert_eq!(tx[0].lanes(), 3);
    let peers: Vec<TcpStream> = (0..3).map(|_| listener.accept().unwrap().0).collect();
    let mut total = 0;
    for _ in 0..4 {
        total = send_records(&mut tx[0], total, &LANE_BURSTS);
    }
    assert_eq!(tx[0].connections(), 3);
    // Connection k (connect order) is lane k.
    let lanes: Vec<usize> = peers.iter().map(|p| lane_of(&tx[0], p)).collect();
    drop(tx); // closes the connections: each peer reads to EOF
    for (mut p, lane) in peers.into_iter().zip(lanes) {
        let got = read_records(&mut p, None);
        let want: Vec<u64> = (0..total).filter(|j| j % 3 == lane as u64).collect();
        assert_eq!(got, want, "lane {lane}");
    }
    let c = setup.tx_counters(0).snapshot();
    assert_eq!((c.packets, c.total_drops()), (total, 0));
}

#[test]
fn server_tx_lane_without_a_peer_counts_kernel_and_keeps_the_rule() {
    let port = free_tcp_port();
    let mut s = header("");
    s += &region("b", 512, 256);
    s += &format!(
        "[[interfaces]]\nname = \"srv\"\naddress = \"tcp://127.0.0.1:{port}\"\nrole = \"server\"\nconnections = 3\nmax_message_size = {REC}\n"
    );
    s += &txq(0, "b", 16);
    let setup = Setup::new(&s, 512, 256);
    let (_, mut tx) = setup.open::<64>().unwrap().into_queues();
    assert_eq!(tx[0].lanes(), 3, "lanes = configured connections");
    // Only the first peer: lanes 1 and 2 have no connection. The TX queue accepts in `send`.
    let mut a = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut j = send_records(&mut tx[0], 0, &LANE_BURSTS);
    assert_eq!(tx[0].connections(), 1);
    // Server-side connections share the listener's local address: the lanes are told apart
    // by which is open (accept order k = lane k).
    assert!(tx[0].lane_local_addr(0).is_some());
    assert_eq!(
        (tx[0].lane_local_addr(1), tx[0].lane_local_addr(2)),
        (None, None)
    );
    let c = setup.tx_counters(0).snapshot();
    assert_eq!(c.packets, j.div_ceil(3));
    assert_eq!(c.drop_count(DropReason::Kernel), j - j.div_ceil(3));
    // A second peer becomes lane 1 once accepted (every 64th send): single-record sends
    // until then still advance the rule.
    let mut b = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut first_b = j;
    while tx[0].connections() < 2 {
        // The send that takes the connection over already writes to it.
        first_b = j;
        j = send_records(&mut tx[0], j, &[1]);
    }
    assert!(tx[0].lane_local_addr(1).is_some());
    assert_eq!(tx[0].lane_local_addr(2), None);
    j = send_records(&mut tx[0], j, &LANE_BURSTS);
    drop(tx);
    let got_a = read_records(&mut a, None);
    assert_eq!(got_a, (0..j).filter(|k| k % 3 == 0).collect::<Vec<_>>());
    let got_b = read_records(&mut b, None);
    assert_eq!(
        got_b,
        (first_b..j).filter(|k| k % 3 == 1).collect::<Vec<_>>()
    );
    let c = setup.tx_counters(0).snapshot();
    assert_eq!(c.packets, (got_a.len() + got_b.len()) as u64);
    assert_eq!(c.packets + c.drop_count(DropReason::Kernel), j);
}

/// A variable-size TX record: `j`, its length, then a pattern.
fn big_record(j: u64, len: usize) -> Vec<u8> {
    let mut r = pattern(len, j);
    r[..8].copy_from_slice(&j.to_le_bytes());
    r[8..16].copy_from_slice(&(len as u64).to_le_bytes());
    r
}

/// Reads `big_record`s until EOF (a record cut by the close is ignored); returns their `j`.
fn read_big_records(mut p: TcpStream) -> Vec<u64> {
    p.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = Vec::new();
    let mut head = [0u8; 16];
    loop {
        if p.read_exact(&mut head).is_err() {
            return out;
        }
        let j = u64::from_le_bytes(head[..8].try_into().unwrap());
        let len = u64::from_le_bytes(head[8..].try_into().unwrap()) as usize;
        let mut r = head.to_vec();
        r.resize(len, 0);
        if p.read_exact(&mut r[16..]).is_err() {
            return out;
        }
        assert_eq!(r, big_record(j, len), "record {j} corrupt");
        out.push(j);
    }
}

#[test]
fn client_tx_lane_rule_holds_when_a_lane_stalls_and_drops_ring_full() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut s = header("sndbuf = 65536");
    s += &region("b", 65536, 64);
    s += &format!(
        "[[interfaces]]\nname = \"cli\"\naddress = \"tcp://127.0.0.1:{port}\"\nrole = \"client\"\nconnections = 2\nmax_message_size = 65536\n"
    );
    s += &txq(0, "b", 16);
    let setup = Setup::new(&s, 65536, 64);
    let (_, mut tx) = setup.open::<64>().unwrap().into_queues();
    let mut peers: Vec<TcpStream> = (0..2).map(|_| listener.accept().unwrap().0).collect();
    // Lane 1 carries 60 KB records to a peer that does not read yet; lane 0 small ones.
    let len = |j: u64| if j % 2 == 1 { 60_000 } else { 100 };
    let mut j = 0u64;
    let mut send = |tx: &mut SocketTx<'static, 64>, n: usize| {
        let mut b = tx.new_burst();
        assert_eq!(tx.reserve(&mut b, n), n);
        for i in 0..n {
            let r = big_record(j + i as u64, len(j + i as u64));
            b.packet_mut(i).unwrap()[..r.len()].copy_from_slice(&r);
            b.set_len(i, r.len());
        }
        tx.send(&mut b);
        j += n as u64;
        j
    };
    send(&mut tx[0], 1); // takes both connections over
    let lanes: Vec<usize> = peers.iter().map(|p| lane_of(&tx[0], p)).collect();
    assert_eq!(lanes, [0, 1], "connection k = lane k");
    let ring_full = || setup.tx_counters(0).drops(DropReason::RingFull);
    let mut stalled_at = 0;
    for n in (1..=7).cycle().take(2000) {
        if ring_full() > 0 {
            break;
        }
        stalled_at = send(&mut tx[0], n);
    }
    assert!(ring_full() > 0, "lane 1 never stalled");
    assert!(tx[0].stats().stalls > 0);
    // Lane 1's peer starts reading; the rule continues from where it was.
    let b = peers.pop().unwrap();
    let reader = std::thread::spawn(move || read_big_records(b));
    let mut total = 0;
    for n in [3, 1, 4, 1, 5, 9, 2, 6] {
        total = send(&mut tx[0], n);
    }
    let a = peers.pop().unwrap();
    drop(tx); // closes both connections
    let got_a = read_big_records(a);
    let got_b = reader.join().unwrap();
    assert_eq!(
        got_a,
        (0..total).filter(|k| k % 2 == 0).collect::<Vec<_>>(),
        "lane 0 lost records or got another lane's"
    );
    assert!(
        got_b.iter().all(|k| k % 2 == 1),
        "lane 1 got another lane's record"
    );
    assert!(got_b.windows(2).all(|w| w[0] < w[1]), "lane 1 out of order");
    assert!(
        got_b.iter().any(|&k| k >= stalled_at),
        "lane 1 received nothing sent after its drops"
    );
    let c = setup.tx_counters(0).snapshot();
    assert_eq!(c.packets + c.drop_count(DropReason::RingFull), total);
    assert_eq!(c.total_drops(), c.drop_count(DropReason::RingFull));
    // Every lane-1 record was received or dropped; one partly written when the connection
    // closed counts as accepted (see Limits).
    let accepted_b = c.packets - got_a.len() as u64;
    assert!(
        accepted_b - got_b.len() as u64 <= 1,
        "{accepted_b} accepted on lane 1, {} received",
        got_b.len()
    );
    eprintln!(
        "lane 1: {} received, {} ring_full, last {:?} of {total}",
        got_b.len(),
        c.drop_count(DropReason::RingFull),
        got_b.last()
    );
}
