//! The shipped socket deployments (`configs/host-*.toml`) open on this engine, with their fixed
//! ports replaced by free ones; the default loopback self-test runs end to end.

mod common;

use std::time::Duration;

use common::*;
use rtdaq_core::traits::{RxQueue, TxBurst, TxQueue};
use rtdaq_engine_socket::SocketRx;

/// The config file with `:5000` / `:6000` replaced by free loopback ports.
fn shipped(name: &str) -> (Setup, u16) {
    let path = format!("{}/../../../configs/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let port = if text.contains("tcp://") {
        free_tcp_port()
    } else {
        free_udp_port()
    };
    let text = text
        .replace(":5000", &format!(":{port}"))
        .replace(":6000", &format!(":{port}"));
    let config = rtdaq_config::load_str(&text).unwrap();
    let slot = config
        .memory_regions
        .iter()
        .map(|r| r.buf_size as usize)
        .max()
        .unwrap();
    (Setup::new(&text, slot, 256), port)
}

fn drain(q: &mut SocketRx<'static, 64>, want: usize) -> usize {
    let mut b = q.new_burst();
    let mut got = 0;
    until(Duration::from_secs(5), || {
        got += q.poll(&mut b);
        b.clear();
        got >= want
    });
    got
}

#[test]
fn host_loopback_udp_runs_end_to_end() {
    let (setup, port) = shipped("host-loopback-udp.toml");
    let (mut rx, mut tx) = setup.open::<64>().unwrap().into_queues();
    assert_eq!(tx[0].destination().unwrap().port(), port);
    let mut b = tx[0].new_burst();
    let mut sent = 0;
    for _ in 0..8 {
        let n = tx[0].reserve(&mut b, 64);
        for i in 0..n {
            b.packet_mut(i).unwrap()[..1400].fill(0x5a);
            b.set_len(i, 1400);
        }
        sent += tx[0].send(&mut b);
    }
    assert_eq!(sent, 512);
    assert_eq!(drain(&mut rx[0], 512), 512);
    assert_eq!(setup.rx_counters(0).snapshot().total_drops(), 0);
}

#[test]
fn host_udp_4q_opens_four_reuseport_queues_with_sockopts() {
    let (setup, port) = shipped("host-udp-4q.toml");
    let (mut rx, mut tx) = setup.open::<64>().unwrap().into_queues();
    assert_eq!(rx.len(), 4);
    for q in &rx {
        assert_eq!(q.local_addr().unwrap().port(), port);
        assert_eq!(q.sockopt(1, 12).unwrap(), 6, "SO_PRIORITY passthrough");
    }
    assert_eq!(tx[0].destination().unwrap().port(), port);
    // One source port per generator stream: the REUSEPORT hash spreads them over the queues.
    let lanes = setup.config.generator.as_ref().unwrap().streams as usize;
    assert_eq!(tx[0].lanes(), lanes);
    let ports: std::collections::HashSet<u16> = (0..lanes)
        .map(|l| tx[0].lane_local_addr(l).unwrap().port())
        .collect();
    assert_eq!(ports.len(), lanes);
    let mut b = tx[0].new_burst();
    let n = tx[0].reserve(&mut b, 64);
    assert_eq!(n % lanes, 0);
    for i in 0..n {
        b.packet_mut(i).unwrap()[..1400].fill(0x5a);
        b.set_len(i, 1400);
    }
    assert_eq!(tx[0].send(&mut b), n);
    // Each lane lands whole on one queue: every queue gets a multiple of n / lanes packets.
    let mut per_queue = [0usize; 4];
    let mut bursts: Vec<_> = rx.iter().map(|q| q.new_burst()).collect();
    until(Duration::from_secs(5), || {
        for (k, q) in rx.iter_mut().enumerate() {
            per_queue[k] += q.poll(&mut bursts[k]);
            bursts[k].clear();
        }
        per_queue.iter().sum::<usize>() >= n
    });
    assert_eq!(per_queue.iter().sum::<usize>(), n, "{per_queue:?}");
    assert!(
        per_queue.iter().all(|c| c % (n / lanes) == 0),
        "{per_queue:?}"
    );
    assert!(
        per_queue.iter().filter(|&&c| c > 0).count() >= 2,
        "{lanes} lanes on one queue: {per_queue:?}"
    );
}

#[test]
fn host_udp_rx_only_opens_with_gro() {
    let (setup, _) = shipped("host-udp-rx-only.toml");
    let (rx, tx) = setup.open::<64>().unwrap().into_queues();
    assert_eq!((rx.len(), tx.len()), (1, 0));
    // GRO needs kernel support; the buffers (64 KiB) are large enough.
    eprintln!("gro in use: {}", rx[0].gro());
}

#[test]
fn host_tcp_3clients_opens_and_frames_generator_records() {
    let (setup, _) = shipped("host-tcp-3clients.toml");
    let (mut rx, mut tx) = setup.open::<64>().unwrap().into_queues();
    assert_eq!(rx.len(), 3);
    assert_eq!(tx[0].lanes(), 3, "one lane per connection");
    assert!(rx.iter().all(|q| q.message_size() == Some(4000)));
    let mut b = tx[0].new_burst();
    let n = tx[0].reserve(&mut b, 16);
    for i in 0..n {
        b.set_len(i, 4000);
    }
    assert_eq!(tx[0].send(&mut b), 16);
    // Record j goes to lane (connection) j mod 3, read by queue j mod 3: 6, 5, 5 records.
    let got: Vec<usize> = rx
        .iter_mut()
        .zip([6, 5, 5])
        .map(|(q, n)| drain(q, n))
        .collect();
    assert_eq!(got, vec![6, 5, 5]);
}
