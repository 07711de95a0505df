//! Open-time errors and options: messages that name the config key, bounded connect retries,
//! the `SO_RCVBUF` clamp warning, `sockopts` passthrough.

mod common;

use std::net::{TcpListener, UdpSocket};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;
use rtdaq_engine_socket::{SocketError, SocketOptions};

/// Captures log records so tests can check warnings.
struct Capture(Mutex<Vec<String>>);

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, r: &log::Record<'_>) {
        self.0
            .lock()
            .unwrap()
            .push(format!("{} {}", r.level(), r.args()));
    }
    fn flush(&self) {}
}

static LOG: Capture = Capture(Mutex::new(Vec::new()));

fn logs() -> Vec<String> {
    let _ = log::set_logger(&LOG);
    log::set_max_level(log::LevelFilter::Trace);
    LOG.0.lock().unwrap().clone()
}

fn udp_rx(port: u16, socket: &str) -> String {
    let mut s = header(socket);
    s += &region("rx", 2048, 128);
    s += &format!("[[interfaces]]\nname = \"u\"\naddress = \"udp://127.0.0.1:{port}\"\n");
    s += &rxq(0, "rx", 32, 1000);
    s
}

#[test]
fn udp_port_in_use_names_the_config_key() {
    let holder = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    let setup = Setup::new(&udp_rx(port, ""), 2048, 128);
    let err = setup.open::<32>().unwrap_err();
    let msg = err.to_string();
    eprintln!("{msg}");
    assert!(matches!(err, SocketError::Bind { .. }), "{err:?}");
    assert_eq!(err.key(), "interfaces[0].address");
    assert!(
        msg.starts_with(&format!(
            "interfaces[0].address = \"udp://127.0.0.1:{port}\": address in use"
        )),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("ss -ulpn 'sport = :{port}'")),
        "{msg}"
    );
    assert!(
        msg.contains("pick another port in interfaces[0].address"),
        "{msg}"
    );
    assert_eq!(
        err.os_error().unwrap().kind(),
        std::io::ErrorKind::AddrInUse
    );
}

#[test]
fn tcp_port_in_use_names_the_config_key() {
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    let mut s = header("");
    s += &region("rx", 512, 64);
    s += &format!(
        "[[interfaces]]\nname = \"t\"\naddress = \"tcp://127.0.0.1:{port}\"\nrole = \"server\"\nmax_message_size = 256\n"
    );
    s += &rxq(0, "rx", 16, 1000);
    let err = Setup::new(&s, 512, 64).open::<32>().unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("address in use"), "{msg}");
    assert!(
        msg.contains(&format!("ss -tlpn 'sport = :{port}'")),
        "{msg}"
    );
    assert!(msg.contains("interfaces[0].address"), "{msg}");
}

#[test]
fn address_not_local_names_the_config_key() {
    // 192.0.2.1 (TEST-NET-1) is assigned to no interface: bind fails, nothing is sent.
    let mut s = header("");
    s += &region("rx", 2048, 128);
    s += "[[interfaces]]\nname = \"u\"\naddress = \"udp://192.0.2.1:5999\"\n";
    s += &rxq(0, "rx", 32, 1000);
    let err = Setup::new(&s, 2048, 128).open::<32>().unwrap_err();
    let msg = err.to_string();
    eprintln!("{msg}");
    assert!(msg.contains("no such interface/address"), "{msg}");
    assert!(msg.contains("in interfaces[0].address"), "{msg}");
}

#[test]
fn tcp_client_to_a_port_nobody_listens_fails_after_bounded_retries() {
    let port = free_tcp_port();
    let mut s = header("");
    s += &region("b", 512, 64);
    s += &format!(
        "[[interfaces]]\nname = \"c\"\naddress = \"tcp://127.0.0.1:{port}\"\nrole = \"client\"\nmax_message_size = 256\n"
    );
    s += &txq(0, "b", 16);
    let mut opts = SocketOptions::default();
    opts.connect_attempts = 4;
    opts.connect_backoff = Duration::from_millis(25);
    let t0 = Instant::now();
    let err = Setup::new(&s, 512, 64).open_with::<32>(&opts).unwrap_err();
    let took = t0.elapsed();
    let msg = err.to_string();
    eprintln!("{msg}");
    assert!(
        matches!(err, SocketError::Connect { attempts: 4, .. }),
        "{err:?}"
    );
    assert!(
        took >= Duration::from_millis(75) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert!(
        msg.starts_with(&format!("interfaces[0].address = \"tcp://127.0.0.1:{port}\": connection refused after 4 attempts")),
        "{msg}"
    );
    assert!(msg.contains("never listened"), "{msg}");
}

#[test]
fn rcvbuf_above_rmem_max_is_reported() {
    let rmem_max: u64 = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let want = rmem_max * 2;
    if want > 1 << 30 {
        rtdaq_testbed::require::skip(format!(
            "net.core.rmem_max = {rmem_max}: too large to exceed within the config range"
        ));
        return;
    }
    let _ = logs();
    let port = free_udp_port();
    let setup = Setup::new(&udp_rx(port, &format!("rcvbuf = {want}")), 2048, 128);
    let mut opts = SocketOptions::default();
    opts.force_buffers = false;
    let (rx, _) = setup.open_with::<32>(&opts).unwrap().into_queues();
    let eff = rx[0].rcvbuf().unwrap() as u64;
    assert_eq!(
        eff,
        2 * rmem_max,
        "the kernel caps at rmem_max and reports double"
    );
    let warned = logs()
        .into_iter()
        .find(|l| l.contains(&format!("engine.socket.rcvbuf = {want}")))
        .expect("no clamp warning");
    eprintln!("{warned}");
    assert!(warned.starts_with("WARN"), "{warned}");
    assert!(warned.contains("net.core.rmem_max"), "{warned}");
    assert!(warned.contains(&format!("at {eff} bytes")), "{warned}");
}

#[test]
fn rcvbuf_force_passes_rmem_max_as_root() {
    let port = free_udp_port();
    let setup = Setup::new(&udp_rx(port, "rcvbuf = 33554432"), 2048, 128);
    let (rx, _) = setup.open::<32>().unwrap().into_queues();
    let eff = rx[0].rcvbuf().unwrap();
    // With CAP_NET_ADMIN (CI runs as root) SO_RCVBUFFORCE gives the full (doubled) size.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
        .unwrap();
    const CAP_NET_ADMIN: u64 = 12;
    if cap_eff & (1 << CAP_NET_ADMIN) != 0 {
        assert_eq!(eff, 2 * 33_554_432);
    } else {
        assert!(eff < 2 * 33_554_432, "{eff}");
    }
}

#[test]
fn sockopts_passthrough_is_applied_to_every_socket() {
    let port = free_udp_port();
    let mut s = header("sockopts = [{ level = 1, option = 12, value = 6 }]");
    s += &region("rx", 2048, 256);
    s += &format!("[[interfaces]]\nname = \"u\"\naddress = \"udp://127.0.0.1:{port}\"\n");
    s += &rxq(0, "rx", 32, 1000);
    s += &rxq(1, "rx", 32, 1000);
    s += &txq(0, "rx", 16);
    let setup = Setup::new(&s, 2048, 128);
    let (rx, tx) = setup.open::<32>().unwrap().into_queues();
    for q in &rx {
        assert_eq!(
            q.sockopt(1, 12).unwrap(),
            6,
            "SO_PRIORITY on RX queue {}",
            q.queue()
        );
    }
    assert_eq!(tx[0].sockopt(1, 12).unwrap(), 6);
}

#[test]
fn failing_sockopt_names_its_entry() {
    let port = free_udp_port();
    let s = udp_rx(port, "sockopts = [{ level = 1, option = 12, value = 1 }, { level = 1, option = 9999, value = 1 }]");
    let err = Setup::new(&s, 2048, 128).open::<32>().unwrap_err();
    assert_eq!(err.key(), "engine.socket.sockopts[1]");
    assert!(err.to_string().contains("option 9999"), "{err}");
}
