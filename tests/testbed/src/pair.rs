//! [`VethPair`] and its [`Builder`].

use std::fs::{self, File};
use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::ip::{self, format_mac};
use crate::lease::{self, Lease};
use crate::stale::{self, NETNS_DIR};
use crate::{is_root, sys, TestbedError};

/// How long [`Builder::build`] waits for both veth ends to become operationally up.
pub const LINK_UP_TIMEOUT: Duration = Duration::from_secs(5);

/// Prefix length of every test bed address (a /30: exactly two hosts, `.1` and `.2`).
pub const PREFIX_LEN: u8 = 30;

/// One end of a [`VethPair`]: namespace `A` (addresses `.1`) or `B` (addresses `.2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The first namespace; its addresses end in `.1`.
    A,
    /// The second namespace; its addresses end in `.2`.
    B,
}

impl Side {
    /// The other end.
    pub fn peer(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }

    fn idx(self) -> usize {
        self as usize
    }
}

#[derive(Debug)]
struct End {
    ns: String,
    ifname: String,
    ip: Ipv4Addr,
    mac: [u8; 6],
    ifindex: u32,
    vlan: Option<(String, Ipv4Addr)>,
}

/// What must be removed again: the namespaces (which removes the veth pair and VLAN
/// interfaces with them) and the subnet markers. Its drop also covers a half-built pair.
#[derive(Debug)]
struct Guard {
    namespaces: Vec<String>,
    leases: Vec<Lease>,
}

impl Guard {
    /// Kills what still runs inside, deletes the namespaces, releases the subnets. Never panics.
    fn teardown(&mut self) {
        for ns in self.namespaces.drain(..) {
            if let Err(e) = stale::delete_ns(&ns) {
                // a Drop cannot fail; leave a trace (cleanup_stale removes it later at the latest)
                eprintln!("rtdaq-testbed: could not delete network namespace {ns}: {e}");
            }
        }
        for mut l in self.leases.drain(..) {
            l.release();
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// Two private network namespaces joined by a veth pair, with 169.254.X.1/30 (A) and
/// 169.254.X.2/30 (B); removed again on drop. See the [crate docs](crate).
///
/// `VethPair` is `Send + Sync`: share `&VethPair` among the threads of one test.
#[derive(Debug)]
pub struct VethPair {
    tag: String,
    ends: [End; 2],
    mtu: u32,
    queues: u16,
    ipv6: bool,
    vlan_id: Option<u16>,
    guard: Guard,
}

/// Configures a [`VethPair`]: `VethPair::builder("tag").mtu(9000).queues(4).build()`.
///
/// Defaults: MTU 1500, 1 queue, no VLAN, IPv6 off.
#[derive(Debug, Clone)]
#[must_use = "a Builder does nothing until build() is called"]
pub struct Builder {
    tag: String,
    mtu: u32,
    queues: u16,
    vlan: Option<u16>,
    ipv6: bool,
}

impl Builder {
    /// MTU of both veth ends (and of the VLAN interfaces), 68..=65535. Default 1500.
    pub fn mtu(mut self, mtu: u32) -> Self {
        self.mtu = mtu;
        self
    }

    /// Number of TX and of RX queues of both veth ends (`numtxqueues`/`numrxqueues`), 1..=256.
    /// Default 1.
    pub fn queues(mut self, queues: u16) -> Self {
        self.queues = queues;
        self
    }

    /// Adds an 802.1Q VLAN interface `<ifname>.<id>` on both ends, with its own subnet
    /// 169.254.Y.1/30 (A) and .2/30 (B); see [`VethPair::vlan`]. `id` is 1..=4094.
    ///
    /// Needs kernel 802.1Q support: without it [`build`](Self::build) fails with
    /// [`TestbedError::MissingTool`]`("8021q")` (see [`vlan_supported`](crate::vlan_supported)).
    pub fn vlan(mut self, id: u16) -> Self {
        self.vlan = Some(id);
        self
    }

    /// Disables IPv6 in both namespaces (the default): no IPv6 link-local addresses, so no
    /// router solicitations, neighbour discovery or MLD frames appear on the veth — the only
    /// frames on the wire are the test's own (and ARP).
    pub fn no_ipv6(self) -> Self {
        self.ipv6(false)
    }

    /// `true` keeps IPv6 on (link-local `fe80::` addresses, router solicitations, MLD).
    pub fn ipv6(mut self, on: bool) -> Self {
        self.ipv6 = on;
        self
    }

    /// Creates the pair: the two namespaces (loopback up), the veth pair with locally
    /// administered MACs `02:72:74:X:00:01` (A) / `02:72:74:X:00:02` (B), the addresses, the
    /// VLAN interfaces if asked; brings everything up and waits (at most
    /// [`LINK_UP_TIMEOUT`]) until both ends are operationally up. Calls
    /// [`cleanup_stale`](crate::cleanup_stale) first. No static neighbour entries (ARP works
    /// as usual); see [`VethPair::add_static_neighbors`].
    ///
    /// # Errors
    /// [`TestbedError::NotRoot`] when not root, [`TestbedError::MissingTool`] when `ip` (or,
    /// with [`vlan`](Self::vlan), kernel 802.1Q support) is missing, [`TestbedError::Command`]
    /// when an `ip` command fails, [`TestbedError::Io`] for a bad argument (`InvalidInput`),
    /// a link that never came up (`TimedOut`), no free subnet. Whatever was created before the
    /// error is removed again.
    pub fn build(self) -> Result<VethPair, TestbedError> {
        self.validate()?;
        if !is_root() {
            return Err(TestbedError::NotRoot);
        }
        ip::ip(&["-V"])?; // MissingTool("ip") before anything else
        crate::cleanup_stale();

        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tag = sanitize_tag(&self.tag);
        let base = format!("rtdaq-{}-{n}-{tag}", std::process::id());
        let run_dir = Path::new(lease::RUN_DIR);

        let mut guard = Guard {
            namespaces: Vec::new(),
            leases: Vec::new(),
        };
        guard.leases.push(lease::acquire(run_dir)?);
        let x = guard.leases[0].octet();
        let vlan_octet = match self.vlan {
            Some(_) => {
                guard.leases.push(lease::acquire(run_dir)?);
                Some(guard.leases[1].octet())
            }
            None => None,
        };

        let ns = [format!("{base}-a"), format!("{base}-b")];
        let ifname = [format!("rtdaq{x}a"), format!("rtdaq{x}b")];
        let mac_set = [[0x02, 0x72, 0x74, x, 0, 1], [0x02, 0x72, 0x74, x, 0, 2]];
        let addr = |octet: u8, side: Side| Ipv4Addr::new(169, 254, octet, side.idx() as u8 + 1);

        {
            // `ip netns add` mounts /run/netns the first time; serialise it (in-process and
            // across processes) so concurrent first calls cannot race on that mount.
            let _lock = lease::lock(run_dir)?;
            for name in &ns {
                ip::ip(&["netns", "add", name])?;
                guard.namespaces.push(name.clone());
            }
        }
        if !self.ipv6 {
            // before any interface exists: `all` covers lo, `default` every later interface
            for name in &ns {
                disable_ipv6(name, &["all", "default"])?;
            }
        }

        let (mtu, queues) = (self.mtu.to_string(), self.queues.to_string());
        let (mac_a, mac_b) = (format_mac(mac_set[0]), format_mac(mac_set[1]));
        #[rustfmt::skip]
        ip::ip(&[
            "-n", &ns[0], "link", "add", &ifname[0], "address", &mac_a, "mtu", &mtu,
            "numtxqueues", &queues, "numrxqueues", &queues,
            "type", "veth", "peer", "name", &ifname[1], "address", &mac_b, "mtu", &mtu,
            "numtxqueues", &queues, "numrxqueues", &queues, "netns", &ns[1],
        ])?;

        for side in [Side::A, Side::B] {
            let (nsn, ifn) = (&ns[side.idx()], &ifname[side.idx()]);
            if !self.ipv6 {
                disable_ipv6(nsn, &[ifn])?;
            }
            let cidr = format!("{}/{PREFIX_LEN}", addr(x, side));
            ip::ip(&["-n", nsn, "addr", "add", &cidr, "dev", ifn])?;
            ip::ip(&["-n", nsn, "link", "set", "lo", "up"])?;
            ip::ip(&["-n", nsn, "link", "set", ifn, "up"])?;
        }

        let mut vlan_names: [Option<(String, Ipv4Addr)>; 2] = [None, None];
        if let (Some(id), Some(y)) = (self.vlan, vlan_octet) {
            for side in [Side::A, Side::B] {
                let (nsn, ifn) = (&ns[side.idx()], &ifname[side.idx()]);
                let vname = format!("{ifn}.{id}");
                let idstr = id.to_string();
                let r = ip::ip(&[
                    "-n", nsn, "link", "add", "link", ifn, "name", &vname, "type", "vlan", "id",
                    &idstr,
                ]);
                if let Err(TestbedError::Command { stderr, .. }) = &r {
                    if stderr.contains("Unknown device type") {
                        return Err(TestbedError::MissingTool("8021q"));
                    }
                }
                r?;
                if !self.ipv6 {
                    disable_ipv6(nsn, &[&vname])?;
                }
                let cidr = format!("{}/{PREFIX_LEN}", addr(y, side));
                ip::ip(&["-n", nsn, "addr", "add", &cidr, "dev", &vname])?;
                ip::ip(&["-n", nsn, "link", "set", &vname, "up"])?;
                vlan_names[side.idx()] = Some((vname, addr(y, side)));
            }
        }

        let mut infos = Vec::with_capacity(2);
        for side in [Side::A, Side::B] {
            infos.push(wait_up(&ns[side.idx()], &ifname[side.idx()])?);
            if let Some((vname, _)) = &vlan_names[side.idx()] {
                wait_up(&ns[side.idx()], vname)?;
            }
        }
        let mut ends = Vec::with_capacity(2);
        for (side, info) in [Side::A, Side::B].into_iter().zip(infos) {
            let i = side.idx();
            let mac = info.mac.ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("`ip -n {} link show dev {}` shows no MAC", ns[i], ifname[i]),
                )
            })?;
            ends.push(End {
                ns: ns[i].clone(),
                ifname: ifname[i].clone(),
                ip: addr(x, side),
                mac,
                ifindex: info.ifindex,
                vlan: vlan_names[i].take(),
            });
        }
        let [a, b]: [End; 2] = ends.try_into().expect("two ends");
        Ok(VethPair {
            tag,
            ends: [a, b],
            mtu: self.mtu,
            queues: self.queues,
            ipv6: self.ipv6,
            vlan_id: self.vlan,
            guard,
        })
    }

    fn validate(&self) -> Result<(), TestbedError> {
        let bad = |msg: String| Err(io::Error::new(io::ErrorKind::InvalidInput, msg).into());
        if !(68..=65535).contains(&self.mtu) {
            return bad(format!("veth MTU {} is outside 68..=65535", self.mtu));
        }
        if !(1..=256).contains(&self.queues) {
            return bad(format!("queues({}) is outside 1..=256", self.queues));
        }
        if let Some(id) = self.vlan {
            if !(1..=4094).contains(&id) {
                return bad(format!("VLAN id {id} is outside 1..=4094"));
            }
        }
        Ok(())
    }
}

/// `[A-Za-z0-9_]`, others replaced by `_`, at most 24 characters, never empty.
fn sanitize_tag(tag: &str) -> String {
    let s: String = tag
        .chars()
        .take(24)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "t".into()
    } else {
        s
    }
}

/// Writes 1 to `/proc/sys/net/ipv6/conf/<name>/disable_ipv6` inside namespace `ns` (what
/// `sysctl -w net.ipv6.conf.<name>.disable_ipv6=1` does there). A kernel without IPv6 has
/// nothing to disable.
fn disable_ipv6(ns: &str, names: &[&str]) -> Result<(), TestbedError> {
    if !Path::new("/proc/sys/net/ipv6").exists() {
        return Ok(());
    }
    run_in_ns(ns, || {
        for name in names {
            fs::write(format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6"), "1")?;
        }
        Ok::<_, io::Error>(())
    })
    .map_err(TestbedError::Io)?
    .map_err(TestbedError::Io)
}

/// Polls `ip -n NS link show dev IF` until its operstate is UP.
fn wait_up(ns: &str, ifname: &str) -> Result<ip::LinkInfo, TestbedError> {
    let deadline = Instant::now() + LINK_UP_TIMEOUT;
    loop {
        let info = ip::link_info(ns, ifname)?;
        if info.state == "UP" {
            return Ok(info);
        }
        if Instant::now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{ifname} in namespace {ns} is still {} after {LINK_UP_TIMEOUT:?}",
                    info.state
                ),
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `f` on a fresh thread inside the network namespace `/run/netns/<ns>`.
fn run_in_ns<R: Send>(ns: &str, f: impl FnOnce() -> R + Send) -> io::Result<R> {
    let path = PathBuf::from(NETNS_DIR).join(ns);
    let file = File::open(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("open {}: {e}", path.display())))?;
    std::thread::scope(|s| {
        let h = std::thread::Builder::new()
            .name(format!("netns {ns}"))
            .spawn_scoped(s, move || {
                sys::setns_net(&file).map_err(|e| {
                    io::Error::new(e.kind(), format!("setns({}): {e}", path.display()))
                })?;
                drop(file);
                Ok(f())
            })?;
        match h.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

impl VethPair {
    /// A pair with the defaults: MTU 1500, 1 queue, no VLAN, IPv6 off.
    /// `tag` (sanitised, 24 characters at most) goes into the namespace names, so a leaked
    /// namespace names its test.
    ///
    /// # Errors
    /// See [`Builder::build`].
    pub fn new(tag: &str) -> Result<VethPair, TestbedError> {
        Self::builder(tag).build()
    }

    /// A [`Builder`] with the defaults of [`new`](Self::new).
    pub fn builder(tag: &str) -> Builder {
        Builder {
            tag: tag.to_string(),
            mtu: 1500,
            queues: 1,
            vlan: None,
            ipv6: false,
        }
    }

    fn end(&self, side: Side) -> &End {
        &self.ends[side.idx()]
    }

    /// The namespace name of `side`: `rtdaq-<pid>-<n>-<tag>-a` / `-b`, unique across the
    /// threads and processes of the host.
    pub fn ns(&self, side: Side) -> &str {
        &self.end(side).ns
    }

    /// `/run/netns/<ns>`: open it and `setns(fd, CLONE_NEWNET)` to enter the namespace yourself.
    pub fn ns_path(&self, side: Side) -> PathBuf {
        Path::new(NETNS_DIR).join(self.ns(side))
    }

    /// The veth name inside the namespace of `side`: `rtdaq<X>a` / `rtdaq<X>b` (≤ 15 characters).
    pub fn ifname(&self, side: Side) -> &str {
        &self.end(side).ifname
    }

    /// The address of `side`'s veth: 169.254.X.1 (A) or 169.254.X.2 (B), prefix
    /// [`PREFIX_LEN`] (/30). X is unique among the live pairs of every process on the host.
    pub fn ip(&self, side: Side) -> Ipv4Addr {
        self.end(side).ip
    }

    /// The MAC of `side`'s veth, as read back with `ip link show` after creation
    /// (`02:72:74:X:00:01` / `02:72:74:X:00:02`, locally administered).
    pub fn mac(&self, side: Side) -> [u8; 6] {
        self.end(side).mac
    }

    /// The ifindex of `side`'s veth inside its namespace.
    pub fn ifindex(&self, side: Side) -> u32 {
        self.end(side).ifindex
    }

    /// The MTU of both veth ends.
    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    /// The number of TX (and of RX) queues of each veth end.
    pub fn queues(&self) -> u16 {
        self.queues
    }

    /// Whether IPv6 is on in the namespaces ([`Builder::ipv6`]).
    pub fn ipv6(&self) -> bool {
        self.ipv6
    }

    /// The tag given to [`new`](Self::new) / [`builder`](Self::builder), sanitised.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// With [`Builder::vlan`]`(id)`: `(id, VLAN interface name, its address)` of `side`, i.e.
    /// `(id, "<ifname>.<id>", 169.254.Y.1 or .2)` with prefix /30; `None` without a VLAN.
    pub fn vlan(&self, side: Side) -> Option<(u16, String, Ipv4Addr)> {
        let id = self.vlan_id?;
        let (name, addr) = self.end(side).vlan.clone()?;
        Some((id, name, addr))
    }

    /// Runs `f` on a fresh thread that has entered the namespace of `side` (setns
    /// CLONE_NEWNET) and returns its result.
    /// Sockets created inside keep that namespace for their lifetime, so callers may create
    /// sockets in `f`, return them, and use them from any thread.
    ///
    /// # Panics
    /// If the namespace cannot be entered (it was deleted behind the pair's back), or when
    /// `f` panics (the panic is passed on).
    pub fn in_ns<R: Send>(&self, side: Side, f: impl FnOnce() -> R + Send) -> R {
        run_in_ns(self.ns(side), f).unwrap_or_else(|e| {
            panic!(
                "rtdaq-testbed: cannot enter network namespace {}: {e}",
                self.ns(side)
            )
        })
    }

    /// `ip netns exec <ns> <program> <args...>`; returns the Output (stdout/stderr captured).
    ///
    /// # Errors
    /// When `ip` cannot be started. A failing `program` is not an error: check
    /// `output.status`.
    pub fn exec(&self, side: Side, program: &str, args: &[&str]) -> io::Result<Output> {
        self.command(side, program).args(args).output()
    }

    /// Same but returns a `std::process::Command` ready to spawn (for long-running peers).
    ///
    /// Processes still running inside a namespace when the pair is dropped are killed
    /// (SIGKILL) so that the namespace really goes away; wait for or kill your children first
    /// if they must end cleanly.
    pub fn command(&self, side: Side, program: &str) -> Command {
        let mut c = Command::new(ip::ip_program());
        c.args(["netns", "exec", self.ns(side), program]);
        c
    }

    /// Installs permanent neighbour (ARP) entries on both sides: A's veth knows B's address →
    /// B's MAC and vice versa (and the same for the VLAN interfaces). For raw-packet tests that
    /// must reach the peer without ARP. Calling it twice is harmless (`ip neigh replace`).
    ///
    /// # Errors
    /// [`TestbedError::Command`] when `ip neigh replace` fails.
    pub fn add_static_neighbors(&self) -> Result<(), TestbedError> {
        for side in [Side::A, Side::B] {
            let (me, peer) = (self.end(side), self.end(side.peer()));
            let mac = format_mac(peer.mac);
            let mut entries = vec![(me.ifname.clone(), peer.ip)];
            if let (Some((vme, _)), Some((_, vpeer))) = (&me.vlan, &peer.vlan) {
                entries.push((vme.clone(), *vpeer));
            }
            for (dev, addr) in entries {
                ip::ip(&[
                    "-n",
                    &me.ns,
                    "neigh",
                    "replace",
                    &addr.to_string(),
                    "lladdr",
                    &mac,
                    "dev",
                    &dev,
                    "nud",
                    "permanent",
                ])?;
            }
        }
        Ok(())
    }
}

impl Drop for VethPair {
    /// Deletes both namespaces (which removes the veth pair and the VLAN interfaces), after
    /// SIGKILLing processes still running inside them, and releases the subnets. Runs during
    /// unwinding too (a failed assertion), never panics; a namespace that cannot be deleted is
    /// reported on stderr and removed by a later [`cleanup_stale`](crate::cleanup_stale).
    fn drop(&mut self) {
        self.guard.teardown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_sanitised() {
        assert_eq!(sanitize_tag("udp rx/tx"), "udp_rx_tx");
        assert_eq!(sanitize_tag(""), "t");
        assert_eq!(sanitize_tag(&"x".repeat(40)).len(), 24);
    }

    #[test]
    fn bad_arguments_are_refused_before_anything_is_created() {
        for b in [
            VethPair::builder("x").mtu(67),
            VethPair::builder("x").queues(0),
            VethPair::builder("x").vlan(0),
            VethPair::builder("x").vlan(4095),
        ] {
            match b.build() {
                Err(TestbedError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::InvalidInput),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn sides() {
        assert_eq!(Side::A.peer(), Side::B);
        assert_eq!(Side::B.peer(), Side::A);
    }
}
