//! A consumer that falls behind a socket queue loses nothing while the socket's buffer can
//! hold the backlog: with the ring to the consumer full, the RX I/O thread stops reading
//! (`RxQueue::holds_backlog`) instead of reading datagrams it could only count as
//! `ring_full`, and the report shows how long it waited (`ring_wait_s`, a "consumer behind"
//! line). The default loopback deployment over the real socket engine, with a ring of 128
//! packets (1.5 ms at 1 Gb/s) and a consumer that sleeps 20 ms once: without the wait the
//! I/O thread would drop ~1700 datagrams; the 4 MiB socket buffer holds them.

mod common;

use common::*;
use rtdaq_core::DropReason;
use rtdaq_runtime::{outcome, run, RunOptions};
use std::sync::atomic::Ordering::Relaxed;

#[test]
fn a_stalled_consumer_is_absorbed_by_the_socket_buffer() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    PANIC_IN.store(0, Relaxed);
    SEEN.store(0, Relaxed);
    AFTER.store(20_000, Relaxed);
    STALL_CONSUMER_MS.store(20, Relaxed);
    let config = config_with(2, &[("ring_depth = 1024", "ring_depth = 128")]);
    let results = run::<Faulty>(config, &RunOptions::default()).expect("the run starts");
    let stalled = STALL_CONSUMER_MS.swap(0, Relaxed) == 0;
    let report = outcome::build(config, &identity(), &results);
    let text = report.to_string();
    assert!(stalled, "the consumer never stalled: {text}");
    let q = &report.rx.queues[0];
    assert!(q.packets > 100_000, "{text}");
    assert_eq!(q.drops[DropReason::RingFull.as_str()], 0, "{text}");
    assert_eq!(q.drops_total, 0, "{text}");
    assert_eq!(report.lost, 0, "{text}");
    assert_eq!(report.exit_code, 0, "{text}");
    // The I/O thread waited about as long as the consumer slept (less: the ring's own 128
    // packets and the partial burst in hand bought it a little time).
    let waited = q.ring_wait_s.expect("an RX queue reports its wait");
    assert!((0.010..1.0).contains(&waited), "waited {waited} s: {text}");
    assert!(text.contains("consumer behind: "), "{text}");
}
