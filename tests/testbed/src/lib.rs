//! # rtdaq-testbed: private network namespaces joined by a veth pair, for tests
//!
//! A dev-dependency of the engine crates and of the app tests. [`VethPair`] creates two
//! network namespaces, `A` and `B`, joined by a veth pair, with link-local addresses
//! 169.254.X.1/30 (A) and 169.254.X.2/30 (B), and removes everything again on drop. Tests run
//! their sockets, raw engines or peer programs on either end: on one host, nothing else is
//! touched and nothing outside is reached.
//!
//! It shells out to `ip` (iproute2) and needs root; without root every constructor returns
//! [`TestbedError::NotRoot`], whose message says to run the namespace tests as root.
//!
//! ## Quick start
//! ```no_run
//! use std::net::UdpSocket;
//! use std::time::Duration;
//! use rtdaq_testbed::{Side, VethPair};
//!
//! let pair = VethPair::builder("doc").mtu(9000).build()?; // or VethPair::new("doc")
//! // ping from A to B
//! let ping = pair.exec(Side::A, "ping", &["-c1", "-W2", &pair.ip(Side::B).to_string()])?;
//! assert!(ping.status.success());
//! // a socket keeps the namespace it was created in: create it inside, use it anywhere
//! let rx = pair.in_ns(Side::B, || UdpSocket::bind((pair.ip(Side::B), 0)))?;
//! let tx = pair.in_ns(Side::A, || UdpSocket::bind((pair.ip(Side::A), 0)))?;
//! rx.set_read_timeout(Some(Duration::from_secs(2)))?;
//! tx.send_to(&[7u8; 8972], rx.local_addr()?)?; // fills a 9000-byte frame
//! let mut buf = [0u8; 9000];
//! let (n, from) = rx.recv_from(&mut buf)?;
//! assert_eq!((n, from), (8972, tx.local_addr()?));
//! // raw-packet tests: the interface, its MAC and ifindex, and static ARP entries
//! println!("{} {:02x?} {}", pair.ifname(Side::A), pair.mac(Side::B), pair.ifindex(Side::A));
//! pair.add_static_neighbors()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//! Dropping `pair` deletes both namespaces; a failed assertion (unwinding) drops it too.
//!
//! ## Names and addresses
//! | what | value |
//! |---|---|
//! | namespaces ([`VethPair::ns`]) | `rtdaq-<pid>-<n>-<tag>-a` / `-b`: unique across threads (`n` is a per-process counter) and processes |
//! | veth ([`VethPair::ifname`]) | `rtdaq<X>a` in A, `rtdaq<X>b` in B (≤ 15 characters) |
//! | addresses ([`VethPair::ip`]) | 169.254.X.1/30 (A), 169.254.X.2/30 (B); X ∈ 100..=249 without 169, unique among live pairs host-wide |
//! | MACs ([`VethPair::mac`]) | `02:72:74:X:00:01` (A), `02:72:74:X:00:02` (B): locally administered, read back after creation |
//! | VLAN ([`Builder::vlan`]) | `rtdaq<X>a.<id>` / `rtdaq<X>b.<id>` with 169.254.Y.1/30, .2/30 (Y allocated like X) |
//!
//! X is allocated with a marker file `/run/rtdaq-testbed/subnet-X` created under an exclusive
//! `flock` and removed on drop; a marker whose process is gone is reused. 169.254.77.x and
//! 169.254.90.x belong to `scripts/iperf3-interop.sh` and `scripts/netns.sh` and are never
//! handed out. Tests only send to addresses inside namespaces they created, or to loopback.
//!
//! Defaults: MTU 1500, 1 TX/RX queue per end, no VLAN, **IPv6 off** (no router
//! solicitations, neighbour discovery or MLD frames on the veth; [`Builder::ipv6`] turns it on),
//! no static neighbour entries (ARP works; [`VethPair::add_static_neighbors`] installs permanent
//! ones). [`Builder::build`] returns once both ends are operationally up.
//!
//! ## Resource cleanup
//! - Dropping a [`VethPair`] SIGKILLs processes still running in its namespaces (peers started
//!   with [`VethPair::command`]), deletes both namespaces (the veth pair and VLAN interfaces go
//!   with them) and releases its subnets. It never panics.
//! - A half-built pair (an error during [`Builder::build`]) is removed the same way.
//! - A process killed before its drop (SIGKILL, CI timeout) leaves namespaces named after its
//!   pid: [`cleanup_stale`] removes those of dead pids, and every [`Builder::build`] calls it.
//! - Sockets created in [`VethPair::in_ns`] keep their (then anonymous) namespace alive until
//!   they are closed; its name and subnet are released at drop regardless.
//!
//! ## What a test needs from its host
//! [`require`]: a test whose peer or privilege is missing skips with its reason outside
//! `scripts/test.sh` and fails inside it (`RTDAQ_TEST_REQUIRE=1`); every skip is recorded.
//!
//! ## Temporary files
//! [`test_dir`] / [`test_path`]: each test's own directory (the `tempfile` crate), removed when
//! the test's thread ends.
//!
//! ## Thread safety
//! [`VethPair`] is `Send + Sync`; [`VethPair::in_ns`] runs its closure on a new thread, so the
//! calling thread never changes namespace. Pairs may be created from parallel tests.
//!
//! ## Unsafe code
//! Only the private `sys` module: `setns`, `flock`, `geteuid`, `kill`, each with a `// SAFETY:`
//! comment.
#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod alloc;
mod error;
mod ip;
mod lease;
mod pair;
pub mod require;
mod scratch;
mod stale;
mod sys;

use std::path::Path;
use std::sync::OnceLock;

pub use error::TestbedError;
pub use pair::{Builder, Side, VethPair, LINK_UP_TIMEOUT, PREFIX_LEN};
pub use scratch::{test_dir, test_path, KEEP_ENV};
pub use stale::cleanup_stale;

/// Whether the process runs as root (effective uid 0), which the test bed needs.
pub fn is_root() -> bool {
    sys::euid() == 0
}

/// Whether this kernel can create 802.1Q VLAN interfaces ([`Builder::vlan`]): the `8021q`
/// module is loaded or built in, or can be loaded. A best-effort probe that creates nothing;
/// [`Builder::build`] is the authority (it returns [`TestbedError::MissingTool`]`("8021q")`).
pub fn vlan_supported() -> bool {
    static SUPPORTED: OnceLock<bool> = OnceLock::new();
    *SUPPORTED.get_or_init(|| {
        if Path::new("/proc/net/vlan").exists() || Path::new("/sys/module/8021q").exists() {
            return true;
        }
        let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
            return false;
        };
        let dir = Path::new("/lib/modules")
            .join(release.trim())
            .join("kernel/net/8021q");
        std::fs::read_dir(dir).is_ok_and(|mut d| {
            d.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("8021q.ko")))
        })
    })
}
