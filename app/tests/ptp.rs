//! The clock check (`[time]`, issue #33) against real linuxptp: `ptp4l -S` (software time
//! stamps) as master in namespace A and as slave in namespace B of a veth pair; rtdaq asks
//! the slave's `ptp4l` over its management socket.
//!
//! - before the slave follows its master, `rtdaq run` with `require_sync = true` stops
//!   (exit 2) naming `time.require_sync` and the port's state;
//! - once `pmc` (linuxptp's own client) says SLAVE, `rtdaq doctor` passes `time.ptp` (and
//!   reports `time.phc:lo_udp`: loopback stamps in software, no PTP hardware clock), and a
//!   run starts: `/metrics` shows `rtdaq_time_synchronised 1` and the offset; the master
//!   is stopped mid-run: within its announce time-out the metrics show 0 and one loss of
//!   sync, the log says so, the report says synchronised at start, not at the end, lost once.
//!
//! The slave steers the system clock's frequency (namespaces share it); the test restores
//! the frequency it found. Needs root, `ptp4l`/`pmc` (Debian `linuxptp`) and
//! `target/engines/rtdaq-socket` (`scripts/build-engines.sh`); `#[ignore]`d in a plain
//! `cargo test`, `scripts/test.sh` runs it.

mod e2e;

use e2e::ucx::free_tcp_port;
use e2e::{bin, edited, http_get, show, u};
use rtdaq_testbed::{Side, VethPair};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A `ptp4l` that is killed when dropped.
struct Ptp4l(Child);

impl Drop for Ptp4l {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The system clock's frequency correction as found, put back when dropped.
struct Frequency(libc::c_long);

impl Frequency {
    fn adjtimex(modes: u32, freq: libc::c_long) -> libc::c_long {
        // SAFETY: an all-zero timex is valid; adjtimex reads `modes` (and `freq` with
        // ADJ_FREQUENCY) and fills the struct.
        unsafe {
            let mut t: libc::timex = std::mem::zeroed();
            t.modes = modes;
            t.freq = freq;
            assert!(libc::adjtimex(&mut t) >= 0, "adjtimex failed");
            t.freq
        }
    }

    fn save() -> Frequency {
        Frequency(Frequency::adjtimex(0, 0))
    }
}

impl Drop for Frequency {
    fn drop(&mut self) {
        Frequency::adjtimex(libc::ADJ_FREQUENCY, self.0);
    }
}

fn ptp4l(pair: &VethPair, side: Side, cfg: &Path, log: &str) -> Ptp4l {
    let out = std::fs::File::create(rtdaq_testbed::test_path(log)).unwrap();
    let child = pair
        .command(side, "ptp4l")
        .args(["-S", "-m", "-i", pair.ifname(side), "-f"])
        .arg(cfg)
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("ptp4l (Debian linuxptp)");
    Ptp4l(child)
}

/// `pmc -u -b 0 'GET PORT_DATA_SET'` on `sock`: the port's state.
fn pmc_state(sock: &Path) -> String {
    let out = Command::new("pmc")
        .args(["-u", "-b", "0", "-s"])
        .arg(sock)
        .arg("GET PORT_DATA_SET")
        .output()
        .expect("pmc (Debian linuxptp)");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("portState")
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_default()
}

/// The value of the first `/metrics` line starting with `name`.
fn metric(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn missing_peer() -> Option<&'static str> {
    ["ptp4l", "pmc"].into_iter().find(|p| {
        Command::new(p)
            .arg("-h")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_err()
    })
}

#[test]
#[ignore = "needs root, linuxptp and target/engines/rtdaq-socket; scripts/test.sh runs it"]
fn rtdaq_follows_ptp4l_from_unsynchronised_to_slave_to_a_lost_master() {
    if !rtdaq_testbed::require::need_root("ptp4l over a veth pair") {
        return;
    }
    if let Some(p) = missing_peer() {
        rtdaq_testbed::require::skip(format!("no {p} (Debian linuxptp)"));
        return;
    }
    let _freq = Frequency::save();
    let pair = VethPair::new("ptp").unwrap();
    let (m_sock, s_sock) = (
        rtdaq_testbed::test_path("m.sock"),
        rtdaq_testbed::test_path("s.sock"),
    );
    let m_cfg = rtdaq_testbed::test_path("master.cfg");
    let s_cfg = rtdaq_testbed::test_path("slave.cfg");
    std::fs::write(
        &m_cfg,
        format!("[global]\npriority1 1\nuds_address {}\n", m_sock.display()),
    )
    .unwrap();
    std::fs::write(
        &s_cfg,
        format!("[global]\nslaveOnly 1\nuds_address {}\n", s_sock.display()),
    )
    .unwrap();
    let master = ptp4l(&pair, Side::A, &m_cfg, "master.log");
    let _slave = ptp4l(&pair, Side::B, &s_cfg, "slave.log");
    // Software time stamps over veth on a busy host: offsets of a few µs.
    let time = format!(
        "\n[time]\nptp4l = \"{}\"\nrequire_sync = true\nmax_offset_ns = 100000\n",
        s_sock.display()
    );
    let cfg = edited(
        "host-loopback-udp.toml",
        &[("\n[rt]", format!("{time}\n[rt]"))],
        "ptp",
    );
    let rtdaq = |args: &[&str]| -> Command {
        let mut c = Command::new(bin("socket"));
        c.args(args)
            .arg("--config")
            .arg(&cfg)
            .env("RUST_LOG", "info");
        c
    };

    // 1. Not synchronised yet (the slave needs ~20 s to lock): no start.
    std::thread::sleep(Duration::from_millis(500));
    let out = rtdaq(&["run", "--duration", "1"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        err.contains("time.require_sync: the clock is not synchronised"),
        "{err}"
    );
    assert!(
        ["LISTENING", "UNCALIBRATED", "INITIALIZING"]
            .iter()
            .any(|s| err.contains(&format!("port {s}"))),
        "{err}"
    );

    // 2. linuxptp's own client says the slave follows its master.
    let t0 = Instant::now();
    while pmc_state(&s_sock) != "SLAVE" {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the slave never followed the master: {}",
            std::fs::read_to_string(rtdaq_testbed::test_path("slave.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let doctor = rtdaq(&["doctor", "--json"]).output().unwrap();
    let findings: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let ptp = findings
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "time.ptp")
        .unwrap_or_else(|| panic!("no time.ptp: {}", show(&doctor)));
    assert_eq!(ptp["status"], "pass", "{ptp}");
    assert!(
        ptp["detail"].as_str().unwrap().contains("port SLAVE"),
        "{ptp}"
    );
    // The interface's device (loopback: software stamps, no PTP hardware clock), as
    // `ethtool -T lo` says.
    let phc = findings
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "time.phc:lo_udp")
        .unwrap_or_else(|| panic!("no time.phc:lo_udp: {}", show(&doctor)));
    let detail = phc["detail"].as_str().unwrap();
    assert_eq!(phc["status"], "warn", "{phc}");
    assert!(
        detail.starts_with("lo: software receive") && detail.contains("no PTP hardware clock"),
        "{phc}"
    );

    // 3. A run while synchronised; the master stops in the middle of it.
    let port = free_tcp_port();
    let addr = format!("127.0.0.1:{port}");
    let report = rtdaq_testbed::test_path("ptp-report.json");
    let report_arg = report.display().to_string();
    let run = rtdaq(&[
        "run",
        "--duration",
        "14",
        "--metrics",
        &addr,
        "--report-json",
        &report_arg,
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let metrics = || http_get(addr.parse().unwrap(), "/metrics").1;
    let mut run = run;
    let t0 = Instant::now();
    while std::net::TcpStream::connect(&addr).is_err() || t0.elapsed() < Duration::from_secs(3) {
        if let Some(code) = run.try_wait().unwrap() {
            panic!(
                "the run ended ({code}): {}",
                show(&run.wait_with_output().unwrap())
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let during = metrics();
    assert_eq!(
        metric(&during, "rtdaq_time_synchronised{"),
        Some(1.0),
        "{during}"
    );
    let offset = metric(&during, "rtdaq_time_offset_ns{").unwrap();
    assert!(offset.abs() <= 100_000.0, "{offset}");
    drop(master);
    let t0 = Instant::now();
    let after = loop {
        let m = metrics();
        if metric(&m, "rtdaq_time_synchronised{") == Some(0.0) {
            break m;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "still synchronised: {m}"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(
        metric(&after, "rtdaq_time_sync_lost_total{"),
        Some(1.0),
        "{after}"
    );
    let out: Output = run.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("the clock is no longer synchronised"), "{log}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let t = &r["time"];
    assert_eq!(t["synchronised_at_start"], true, "{t}");
    assert_eq!(t["synchronised_at_end"], false, "{t}");
    assert_eq!(u(t, "/sync_lost"), 1, "{t}");
    assert_eq!(u(&r, "/lost"), 0, "{}", show(&out));
}
