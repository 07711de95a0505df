//! The test bed for real: namespaces, veth pairs, traffic, cleanup. Needs root; without it
//! every test fails with the `NotRoot` message (never passes silently).

use std::collections::HashSet;
use std::net::{Ipv4Addr, UdpSocket};
use std::process::{Command, Stdio};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use rtdaq_testbed::{cleanup_stale, vlan_supported, Builder, Side, TestbedError, VethPair};

fn build(b: Builder) -> VethPair {
    b.build().unwrap_or_else(|e| panic!("{e}"))
}

fn pair(tag: &str) -> VethPair {
    build(VethPair::builder(tag))
}

/// The namespaces `ip netns list` shows.
fn netns_list() -> HashSet<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `ip -n NS <args>`, stdout; panics with stderr on failure.
fn ip_n(ns: &str, args: &[&str]) -> String {
    let out = Command::new("ip")
        .arg("-n")
        .arg(ns)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ip -n {ns} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout(&out)
}

fn ping(p: &VethPair, from: Side, to: Ipv4Addr, extra: &[&str]) -> std::process::Output {
    let to = to.to_string();
    let mut args = vec!["-c1", "-W2"];
    args.extend_from_slice(extra);
    args.push(&to);
    let out = p.exec(from, "ping", &args).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("No such file") && !err.contains("not found"),
        "ping is missing: apt-get install iputils-ping ({err})"
    );
    out
}

/// UDP sockets bound to each end; returns (tx in `from`, rx in `to`).
fn udp_pair(p: &VethPair, from: (Side, Ipv4Addr), to: (Side, Ipv4Addr)) -> (UdpSocket, UdpSocket) {
    let rx = p.in_ns(to.0, || UdpSocket::bind((to.1, 0)).unwrap());
    let tx = p.in_ns(from.0, || UdpSocket::bind((from.1, 0)).unwrap());
    rx.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    (tx, rx)
}

#[test]
fn addresses_names_macs_are_as_documented() {
    let p = pair("names");
    let x = p.ip(Side::A).octets()[2];
    assert!((100..=249).contains(&x) && x != 169, "{x}");
    assert_eq!(p.ip(Side::A), Ipv4Addr::new(169, 254, x, 1));
    assert_eq!(p.ip(Side::B), Ipv4Addr::new(169, 254, x, 2));
    assert_eq!(p.mtu(), 1500);
    assert_eq!(p.queues(), 1);
    assert!(!p.ipv6());
    assert_eq!(p.vlan(Side::A), None);
    let pid = std::process::id();
    for side in [Side::A, Side::B] {
        let ns = p.ns(side);
        assert!(ns.starts_with(&format!("rtdaq-{pid}-")), "{ns}");
        assert!(
            ns.ends_with(if side == Side::A {
                "-names-a"
            } else {
                "-names-b"
            }),
            "{ns}"
        );
        assert!(p.ns_path(side).exists());
        assert!(p.ifname(side).len() <= 15);
        let mac = p.mac(side);
        assert_eq!(mac[0], 0x02, "locally administered unicast");
        assert_eq!(mac, [0x02, 0x72, 0x74, x, 0, 1 + (side == Side::B) as u8]);
        // what ip says inside the namespace
        let line = ip_n(ns, &["-o", "addr", "show", "dev", p.ifname(side)]);
        assert!(line.contains(&format!("inet {}/30", p.ip(side))), "{line}");
        let link = ip_n(ns, &["-o", "link", "show", "dev", p.ifname(side)]);
        assert!(
            link.starts_with(&format!("{}: {}@", p.ifindex(side), p.ifname(side))),
            "{link}"
        );
        assert!(
            link.contains("state UP") && link.contains("mtu 1500"),
            "{link}"
        );
        let mac_s = mac
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":");
        assert!(link.contains(&format!("link/ether {mac_s} ")), "{link}");
        let lo = ip_n(ns, &["-o", "link", "show", "dev", "lo"]);
        assert!(lo.contains(",UP"), "loopback up: {lo}");
        // no static neighbours by default
        assert_eq!(ip_n(ns, &["neigh", "show", "nud", "permanent"]).trim(), "");
    }
    assert!(!netns_list().is_empty());
}

#[test]
fn ping_from_a_to_b() {
    let p = pair("ping");
    let out = ping(&p, Side::A, p.ip(Side::B), &[]);
    assert!(
        out.status.success(),
        "{}{}",
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout(&out).contains("1 received"), "{}", stdout(&out));
}

#[test]
fn udp_between_sockets_created_in_each_namespace() {
    let p = pair("udp");
    let (tx, rx) = udp_pair(&p, (Side::A, p.ip(Side::A)), (Side::B, p.ip(Side::B)));
    // the sockets are used from this thread, which is still in the host namespace
    tx.send_to(b"rtdaq testbed", rx.local_addr().unwrap())
        .unwrap();
    let mut buf = [0u8; 64];
    let (n, from) = rx.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"rtdaq testbed");
    assert_eq!(from, tx.local_addr().unwrap());
}

#[test]
fn in_ns_runs_inside_the_namespace_and_passes_panics_on() {
    let p = pair("inns");
    let dev = p.in_ns(Side::B, || {
        std::fs::read_to_string("/proc/thread-self/net/dev").unwrap()
    });
    assert!(dev.contains(p.ifname(Side::B)), "{dev}");
    assert!(!dev.contains(p.ifname(Side::A)), "{dev}");
    let host = std::fs::read_to_string("/proc/thread-self/net/dev").unwrap();
    assert!(
        !host.contains(&format!("{}:", p.ifname(Side::B))),
        "caller thread stays outside"
    );
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        p.in_ns(Side::A, || panic!("inside"));
    }));
    assert!(r.is_err());
}

#[test]
fn drop_removes_the_namespaces() {
    let p = pair("drop");
    let names = [p.ns(Side::A).to_string(), p.ns(Side::B).to_string()];
    let listed = netns_list();
    assert!(names.iter().all(|n| listed.contains(n)));
    drop(p);
    let listed = netns_list();
    for n in &names {
        assert!(!listed.contains(n), "{n} still listed after drop");
    }
}

#[test]
fn drop_removes_the_namespaces_after_a_panic() {
    let names = Mutex::new(Vec::new());
    let r = std::panic::catch_unwind(|| {
        let p = pair("panic");
        names
            .lock()
            .unwrap()
            .extend([p.ns(Side::A).to_string(), p.ns(Side::B).to_string()]);
        assert!(netns_list().contains(p.ns(Side::A)));
        panic!("a failing test");
    });
    assert!(r.is_err());
    let names = names.into_inner().unwrap();
    assert_eq!(names.len(), 2);
    let listed = netns_list();
    for n in &names {
        assert!(!listed.contains(n), "{n} still listed after unwinding");
    }
}

#[test]
fn drop_kills_peers_still_running_in_the_namespace() {
    let p = pair("peer");
    let mut child = p
        .command(Side::B, "sleep")
        .arg("30")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    // `ip netns exec` execs sleep in the same process, once it has entered the namespace
    let pids = || {
        let out = Command::new("ip")
            .args(["netns", "pids", p.ns(Side::B)])
            .output()
            .unwrap();
        stdout(&out)
    };
    let t0 = Instant::now();
    while !pids()
        .split_whitespace()
        .any(|x| x == child.id().to_string())
    {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "sleep never showed up in the namespace"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let ns = p.ns(Side::B).to_string();
    drop(p);
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(5) {
            child.kill().unwrap();
            panic!("the peer survived the drop");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(!status.success());
    assert!(!netns_list().contains(&ns));
}

#[test]
fn four_pairs_in_parallel_have_unique_names_and_subnets() {
    let barrier = Barrier::new(4);
    let pairs: Vec<VethPair> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|i| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    pair(&format!("par{i}"))
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // all four alive at once
    let ns: HashSet<&str> = pairs
        .iter()
        .flat_map(|p| [p.ns(Side::A), p.ns(Side::B)])
        .collect();
    assert_eq!(ns.len(), 8);
    let subnets: HashSet<u8> = pairs.iter().map(|p| p.ip(Side::A).octets()[2]).collect();
    assert_eq!(subnets.len(), 4, "{subnets:?}");
    let ifnames: HashSet<&str> = pairs.iter().map(|p| p.ifname(Side::A)).collect();
    assert_eq!(ifnames.len(), 4);
    for p in &pairs {
        let out = ping(p, Side::B, p.ip(Side::A), &[]);
        assert!(out.status.success(), "{}", stdout(&out));
    }
}

#[test]
fn mtu_9000_carries_a_full_jumbo_frame() {
    let p = build(VethPair::builder("jumbo").mtu(9000));
    assert_eq!(p.mtu(), 9000);
    for side in [Side::A, Side::B] {
        let link = ip_n(p.ns(side), &["-o", "link", "show", "dev", p.ifname(side)]);
        assert!(link.contains("mtu 9000"), "{link}");
    }
    let (tx, rx) = udp_pair(&p, (Side::A, p.ip(Side::A)), (Side::B, p.ip(Side::B)));
    let payload: Vec<u8> = (0..8972u32).map(|i| i as u8).collect();
    tx.send_to(&payload, rx.local_addr().unwrap()).unwrap();
    let mut buf = vec![0u8; 9100];
    let (n, _) = rx.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], &payload[..]);
    // unfragmented (DF): 8972 + 8 + 20 = 9000 passes, one byte more does not
    let ok = ping(&p, Side::A, p.ip(Side::B), &["-M", "do", "-s", "8972"]);
    assert!(ok.status.success(), "{}", stdout(&ok));
    let too_big = ping(&p, Side::A, p.ip(Side::B), &["-M", "do", "-s", "8973"]);
    assert!(!too_big.status.success());
}

#[test]
fn queues_set_numtxqueues_and_numrxqueues() {
    let p = build(VethPair::builder("queues").queues(4));
    assert_eq!(p.queues(), 4);
    for side in [Side::A, Side::B] {
        let d = ip_n(p.ns(side), &["-d", "link", "show", "dev", p.ifname(side)]);
        assert!(d.contains("numtxqueues 4 numrxqueues 4"), "{d}");
    }
}

#[test]
fn ipv6_is_off_by_default_and_can_be_turned_on() {
    let read = |p: &VethPair, side: Side| {
        let path = format!("/proc/sys/net/ipv6/conf/{}/disable_ipv6", p.ifname(side));
        p.in_ns(side, || std::fs::read_to_string(path).unwrap())
            .trim()
            .to_string()
    };
    let off = pair("v6off");
    for side in [Side::A, Side::B] {
        assert_eq!(read(&off, side), "1");
        assert_eq!(
            ip_n(off.ns(side), &["-6", "addr", "show"]).trim(),
            "",
            "no IPv6 address"
        );
    }
    // nothing on the wire by itself: no router solicitation, DAD or MLD frame
    std::thread::sleep(Duration::from_millis(500));
    for side in [Side::A, Side::B] {
        let f = format!("/sys/class/net/{}/statistics/tx_packets", off.ifname(side));
        let out = off.exec(side, "cat", &[&f]).unwrap();
        assert_eq!(
            stdout(&out).trim(),
            "0",
            "{:?} sent frames on its own",
            side
        );
    }
    let on = build(VethPair::builder("v6on").ipv6(true));
    assert!(on.ipv6());
    assert_eq!(read(&on, Side::A), "0");
    let a6 = ip_n(
        on.ns(Side::A),
        &["-6", "addr", "show", "dev", on.ifname(Side::A)],
    );
    assert!(a6.contains("inet6 fe80::"), "{a6}");
    let back = build(VethPair::builder("v6back").ipv6(true).no_ipv6());
    assert_eq!(read(&back, Side::B), "1");
}

#[test]
fn static_neighbors_are_permanent_on_both_sides() {
    let p = pair("neigh");
    p.add_static_neighbors().unwrap();
    p.add_static_neighbors().unwrap(); // idempotent
    for side in [Side::A, Side::B] {
        let peer = side.peer();
        let mac = p
            .mac(peer)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":");
        let n = ip_n(p.ns(side), &["neigh", "show", "dev", p.ifname(side)]);
        assert!(
            n.contains(&format!("{} lladdr {mac} PERMANENT", p.ip(peer))),
            "{n}"
        );
    }
    let out = ping(&p, Side::A, p.ip(Side::B), &[]);
    assert!(out.status.success());
}

#[test]
fn vlan_interfaces_carry_tagged_traffic_or_fail_clearly() {
    match VethPair::builder("vlan").vlan(100).build() {
        Ok(p) => {
            assert!(vlan_supported());
            let (id_a, if_a, ip_a) = p.vlan(Side::A).unwrap();
            let (id_b, if_b, ip_b) = p.vlan(Side::B).unwrap();
            assert_eq!((id_a, id_b), (100, 100));
            assert_eq!(if_a, format!("{}.100", p.ifname(Side::A)));
            assert!(if_a.len() <= 15 && if_b.len() <= 15);
            let y = ip_a.octets()[2];
            assert_ne!(y, p.ip(Side::A).octets()[2], "the VLAN has its own subnet");
            assert_eq!(
                (ip_a, ip_b),
                (Ipv4Addr::new(169, 254, y, 1), Ipv4Addr::new(169, 254, y, 2))
            );
            for (side, vif) in [(Side::A, &if_a), (Side::B, &if_b)] {
                let d = ip_n(p.ns(side), &["-d", "link", "show", "dev", vif]);
                assert!(d.contains("vlan protocol 802.1Q id 100"), "{d}");
            }
            let rx_packets = |ifname: &str| {
                let f = format!("/sys/class/net/{ifname}/statistics/rx_packets");
                let out = p.exec(Side::B, "cat", &[&f]).unwrap();
                stdout(&out).trim().parse::<u64>().unwrap()
            };
            let before = rx_packets(&if_b);
            let (tx, rx) = udp_pair(&p, (Side::A, ip_a), (Side::B, ip_b));
            tx.send_to(b"tagged", rx.local_addr().unwrap()).unwrap();
            let mut buf = [0u8; 16];
            let (n, from) = rx.recv_from(&mut buf).unwrap();
            assert_eq!(
                (&buf[..n], from),
                (&b"tagged"[..], tx.local_addr().unwrap())
            );
            // it arrived on the VLAN interface: the kernel demultiplexes by the 802.1Q tag
            assert!(rx_packets(&if_b) > before);
        }
        Err(TestbedError::MissingTool("8021q")) => {
            assert!(
                !vlan_supported(),
                "vlan_supported() said yes but the kernel refused"
            );
            let msg = TestbedError::MissingTool("8021q").to_string();
            assert!(msg.contains("CONFIG_VLAN_8021Q"), "{msg}");
            eprintln!("NOTE: this kernel has no 802.1Q support; only the error path was tested");
            // the half-built pair was removed again
            let pid = std::process::id();
            assert!(!netns_list()
                .iter()
                .any(|n| n.starts_with(&format!("rtdaq-{pid}-")) && n.contains("-vlan-")));
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn cleanup_stale_removes_only_namespaces_of_dead_processes() {
    // a pid that is certainly dead: a child we started and reaped
    let dead = {
        let mut c = Command::new("true").spawn().unwrap();
        c.wait().unwrap();
        c.id()
    };
    // and one that is alive: a child we started and kill at the end
    let mut live = Command::new("sleep")
        .arg("30")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let dead_ns = format!("rtdaq-{dead}-0-stale-a");
    let live_ns = format!("rtdaq-{}-0-live-a", live.id());
    for ns in [&dead_ns, &live_ns] {
        // a concurrent test process may run cleanup_stale() right now and delete `dead_ns`
        // while `ip netns add` is still setting it up: try again then
        let added = (0..20).any(|_| {
            let out = Command::new("ip")
                .args(["netns", "add", ns])
                .output()
                .unwrap();
            if !out.status.success() {
                std::thread::sleep(Duration::from_millis(20));
            }
            out.status.success()
        });
        assert!(added, "ip netns add {ns} kept failing");
    }
    // other tests build pairs in parallel, and every build calls cleanup_stale() too: check
    // what is listed, not which call removed it
    cleanup_stale();
    let listed = netns_list();
    let live_survived = listed.contains(&live_ns);
    live.kill().unwrap();
    live.wait().unwrap();
    cleanup_stale();
    let listed_later = netns_list();
    let _ = Command::new("ip")
        .args(["netns", "delete", &live_ns])
        .stderr(Stdio::null())
        .status();
    assert!(
        !listed.contains(&dead_ns),
        "{dead_ns} survived cleanup_stale()"
    );
    assert!(
        live_survived,
        "a namespace of a running process was removed"
    );
    assert!(
        !listed_later.contains(&live_ns),
        "{live_ns} survived its process"
    );
}
