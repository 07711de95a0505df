//! Every `open` failure names its cause and the key (or privilege, limit) to change:
//! missing interface, missing privileges, NIC queue beyond the channel count, zero-copy
//! refused, RLIMIT_MEMLOCK, jumbo MTU, wrong buffer size, two pools on one NIC queue,
//! interface already in use, wrong engine kind.

mod common;

use common::*;
use rtdaq_engine_afxdp::AfxdpError;
use rtdaq_testbed::{Side, VethPair};

fn one_rx(ifname: &str, afxdp: &str, iface_extra: &str) -> String {
    let mut s = header(&format!("frame_size = 2048\n{afxdp}"));
    s += &region("rx", 2048, 256);
    s += &interface("b", ifname, iface_extra);
    s += &rxq(0, "rx", 32, 100);
    s
}

#[track_caller]
fn err_of<T: std::fmt::Debug>(r: Result<T, AfxdpError>) -> (String, String) {
    let e = r.expect_err("open should have failed");
    (e.key().to_owned(), e.to_string())
}

#[test]
fn missing_interface_names_the_address_key() {
    require_root();
    let pair = VethPair::new("xnoif").unwrap();
    let setup = Setup::new(&one_rx("rtdaqnope0", "", ""));
    let (key, msg) = err_of(setup.open_in::<32>(&pair, Side::B));
    assert_eq!(key, "interfaces[0].address");
    assert!(msg.contains("\"rtdaqnope0\": no such interface"), "{msg}");
}

/// `capset` structures (linux/capability.h, version 3).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Clears capabilities `caps` from the calling thread's effective set (threads have their
/// own credentials, so the rest of the test process keeps them).
fn drop_caps(caps: &[u32]) {
    let mut h = CapHeader {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut d = [CapData::default(); 2];
    // SAFETY: valid header and two data structs, as the v3 ABI requires.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()) };
    assert_eq!(r, 0, "capget");
    for &c in caps {
        d[(c / 32) as usize].effective &= !(1 << (c % 32));
    }
    // SAFETY: as above.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut h, d.as_ptr()) };
    assert_eq!(r, 0, "capset");
}

#[test]
fn missing_privileges_name_the_capabilities() {
    require_root();
    let pair = VethPair::new("xcaps").unwrap();
    let setup = Setup::new(&one_rx(pair.ifname(Side::B), "", ""));
    let args = setup.args();
    let r = pair.in_ns(Side::B, || {
        drop_caps(&[13, 39, 21]); // CAP_NET_RAW, CAP_BPF, CAP_SYS_ADMIN
        rtdaq_engine_afxdp::AfxdpEngine::<32>::open_with(args, &Default::default()).map(drop)
    });
    let (key, msg) = err_of(r);
    assert_eq!(key, "engine.kind");
    assert!(
        msg.contains("CAP_NET_RAW, CAP_BPF") && msg.contains("run as root"),
        "{msg}"
    );
}

#[test]
fn memlock_limit_is_named_with_the_fix() {
    require_root();
    let pair = VethPair::new("xmlock").unwrap();
    let setup = Setup::new(&one_rx(pair.ifname(Side::B), "", ""));
    let args = setup.args();
    let r = pair.in_ns(Side::B, || {
        // The limit is per process, but only threads without CAP_IPC_LOCK are held to it
        // (this one, for the UMEM registration): other tests are not affected.
        let mut old = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: valid rlimit out-parameter.
        unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut old) };
        let low = libc::rlimit {
            rlim_cur: 64 * 1024,
            rlim_max: old.rlim_max,
        };
        drop_caps(&[14]); // CAP_IPC_LOCK
                          // SAFETY: valid rlimit.
        unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &low) };
        let r =
            rtdaq_engine_afxdp::AfxdpEngine::<32>::open_with(args, &Default::default()).map(drop);
        // SAFETY: valid rlimit.
        unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &old) };
        r
    });
    let (key, msg) = err_of(r);
    assert_eq!(key, "memory_regions[0]");
    assert!(
        msg.contains("RLIMIT_MEMLOCK") && msg.contains("ulimit -l"),
        "{msg}"
    );
}

#[test]
fn nic_queue_beyond_the_channel_count_names_the_queue() {
    require_root();
    let pair = VethPair::new("xchan").unwrap(); // one queue per end
    let mut s = one_rx(pair.ifname(Side::B), "", "");
    s += &rxq(1, "rx", 32, 100);
    let (key, msg) = err_of(Setup::new(&s).open_in::<32>(&pair, Side::B));
    assert_eq!(key, "interfaces[0].rx_queues[1]");
    assert!(
        msg.contains("NIC queue 1") && msg.contains("1 RX channel"),
        "{msg}"
    );

    let mut s = header("frame_size = 2048");
    s += &region("tx", 2048, 256);
    s += &interface("a", pair.ifname(Side::A), "");
    s += &txq(0, "tx", 32);
    s += &txq(1, "tx", 32);
    let (key, msg) = err_of(Setup::new(&s).open_in::<32>(&pair, Side::A));
    assert_eq!(key, "interfaces[0].tx_queues[1]");
    assert!(msg.contains("1 TX channel"), "{msg}");
}

#[test]
fn two_rx_queues_bind_two_nic_queues_on_a_multi_queue_veth() {
    require_root();
    let pair = VethPair::builder("xmq").queues(2).build().unwrap();
    let mut s = one_rx(pair.ifname(Side::B), "", "");
    s += &rxq(1, "rx", 32, 100);
    let setup = Setup::new(&s);
    let engine = setup.open_in::<32>(&pair, Side::B).unwrap();
    assert_eq!(engine.interfaces()[0].channels, Some((2, 2)));
    let nic: Vec<u32> = engine.rx().iter().map(|q| q.nic_queue()).collect();
    assert_eq!(nic, [0, 1]);
    // Without rules each queue gets what arrives on its NIC queue (on veth: the sender's
    // TX queue); together they get everything, each frame tagged with its queue.
    let (mut rx, _) = engine.into_queues();
    let tx = PacketSender::new(&pair, Side::A);
    for sport in 0..200u16 {
        let mut sp = spec(&pair, 5000, 64, None);
        sp.src_port = 30000 + sport;
        tx.send(&seq_frame(&sp, u64::from(sport)));
    }
    let mut total = 0;
    let end = std::time::Instant::now() + std::time::Duration::from_secs(3);
    while total < 200 && std::time::Instant::now() < end {
        for (k, q) in rx.iter_mut().enumerate() {
            for (_, m) in collect(
                q,
                0,
                std::time::Duration::from_millis(1),
                std::time::Duration::ZERO,
            ) {
                assert_eq!(usize::from(m.queue.0), k);
                total += 1;
            }
        }
    }
    assert_eq!(total, 200);
    assert_eq!(
        setup.rx_counters(0).snapshot().total_drops()
            + setup.rx_counters(1).snapshot().total_drops(),
        0
    );
}

#[test]
fn zero_copy_on_is_refused_on_veth_naming_the_key() {
    require_root();
    let pair = VethPair::new("xzc").unwrap();
    let setup = Setup::new(&one_rx(pair.ifname(Side::B), "zero_copy = \"on\"", ""));
    let (key, msg) = err_of(setup.open_in::<32>(&pair, Side::B));
    assert_eq!(key, "engine.afxdp.zero_copy");
    assert!(msg.contains("zero_copy = \"auto\""), "{msg}");
    // "off" forces copy mode and works.
    let setup = Setup::new(&one_rx(pair.ifname(Side::B), "zero_copy = \"off\"", ""));
    assert!(!setup.open_in::<32>(&pair, Side::B).unwrap().interfaces()[0].zero_copy);
}

/// Jumbo frames: RX takes them in several UMEM frames (multi-buffer, `XDP_USE_SG`); an
/// interface with a TX queue needs every frame in one (no multi-buffer TX), and both the
/// config check and the open say so, naming the key.
#[test]
fn jumbo_mtu_is_multi_buffer_for_rx_and_refused_for_tx_naming_the_key() {
    require_root();
    // RX only: accepted by the config.
    let mut s = header("frame_size = 4096");
    s += &region("rx", 4096, 256);
    s += &interface("b", "eth0", "mtu = 9000");
    s += &rxq(0, "rx", 32, 100);
    rtdaq_config::load_str(&s).unwrap_or_else(|e| panic!("{e:?}"));
    // With a TX queue: refused.
    let mut s = header("frame_size = 4096");
    s += &region("rx", 4096, 256);
    s += &interface("b", "eth0", "mtu = 9000");
    s += &txq(0, "rx", 32);
    let e = rtdaq_config::load_str(&s).unwrap_err();
    assert!(
        e.0.iter().any(|e| e.path == "engine.afxdp.frame_size"
            && e.message.contains("no multi-buffer TX")
            && e.message.contains("lower the mtu")),
        "{e:?}"
    );
    // A device whose MTU is larger than the config says: RX opens in multi-buffer mode...
    let pair = VethPair::builder("xjumbo").mtu(9000).build().unwrap();
    let mut s = header("frame_size = 4096");
    s += &region("rx", 4096, 256);
    s += &interface("b", pair.ifname(Side::B), "mtu = 1500");
    s += &rxq(0, "rx", 32, 100);
    let e = Setup::new(&s).open_in::<32>(&pair, Side::B).unwrap();
    assert!(e.interfaces()[0].multi_buffer);
    drop(e);
    // ... and TX is refused at open.
    let mut s = header("frame_size = 4096");
    s += &region("rx", 4096, 256);
    s += &interface("b", pair.ifname(Side::B), "mtu = 1500");
    s += &txq(0, "rx", 32);
    let (key, msg) = err_of(Setup::new(&s).open_in::<32>(&pair, Side::B));
    assert_eq!(key, "interfaces[0].mtu");
    assert!(
        msg.contains("MTU 9000") && msg.contains("3818") && msg.contains("no multi-buffer TX"),
        "{msg}"
    );
}

#[test]
fn buffers_must_be_one_frame_and_one_pool_per_nic_queue() {
    // Both rules are the config check's now (`rtdaq config check` and build time); the engine
    // repeats them at open for configs built another way.
    let refused = |s: &str, key: &str| {
        let errs = rtdaq_config::load_str(s).unwrap_err();
        errs.0
            .iter()
            .find(|e| e.path == key)
            .unwrap_or_else(|| panic!("no error at {key}: {errs:?}"))
            .message
            .clone()
    };
    let mut s = header("frame_size = 2048");
    s += &region("rx", 1536, 256);
    s += &interface("b", "eth0", "");
    s += &rxq(0, "rx", 32, 100);
    let msg = refused(&s, "memory_regions[0].buf_size");
    assert!(msg.contains("set buf_size = 2048"), "{msg}");

    // Flow rules put every RX queue on NIC queue 0: one UMEM, so one region.
    let mut s = header("frame_size = 2048");
    s += &region("r0", 2048, 256);
    s += &region("r1", 2048, 256);
    s += &interface("b", "eth0", "");
    s += &rxq(0, "r0", 32, 100);
    s += &rxq(1, "r1", 32, 100);
    s += &flow("b", 1, "queue = 1", "udp_dst = 5000");
    let msg = refused(&s, "interfaces[0].rx_queues[1].memory_regions");
    assert!(
        msg.contains("NIC queue 0") && msg.contains("share one UMEM"),
        "{msg}"
    );
}

#[test]
fn an_interface_in_use_is_refused_clearly() {
    require_root();
    let pair = VethPair::new("xbusy").unwrap();
    let setup = Setup::new(&one_rx(pair.ifname(Side::B), "", ""));
    let first = setup.open_in::<32>(&pair, Side::B).unwrap();
    let again = Setup::new(&one_rx(pair.ifname(Side::B), "", ""));
    let (key, msg) = err_of(again.open_in::<32>(&pair, Side::B));
    assert!(key.starts_with("interfaces[0]"), "{key}");
    assert!(msg.contains("already"), "{msg}");
    drop(first);
    // Once the first engine is gone (program detached, sockets closed) it opens again.
    again.open_in::<32>(&pair, Side::B).unwrap();
}

#[test]
fn wrong_engine_kind_names_the_key() {
    let socket_cfg = "name = \"t\"\nplatform = \"host\"\n[engine]\nkind = \"socket\"\n[[memory_regions]]\nname = \"r\"\nkind = \"host\"\nbuf_size = 2048\nbuf_count = 256\n[[interfaces]]\nname = \"u\"\naddress = \"udp://127.0.0.1:5000\"\n[[interfaces.rx_queues]]\nid = 0\ncpu_core = 0\nmemory_regions = [\"r\"]\nmode = \"direct\"\n";
    let (key, msg) = err_of(Setup::new(socket_cfg).open::<32>());
    assert_eq!(key, "engine.kind");
    assert!(msg.contains("engine.kind = \"afxdp\""), "{msg}");
}
