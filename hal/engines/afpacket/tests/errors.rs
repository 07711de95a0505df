//! Open errors name the cause and the config key: a missing interface, no `CAP_NET_RAW` (a
//! thread that drops the capability), ring geometry the kernel refuses, a frame size below
//! the MTU, a PCI address without a network device, a config for another engine, launch
//! times without a qdisc that keeps them.

mod common;

use common::*;
use rtdaq_engine_afpacket::AfpacketError;
use rtdaq_testbed::{Side, VethPair};

fn rx_only(netdev: &str, mtu: u32, block_size: u32, block_count: u32, frame_size: u32) -> Setup {
    let mut s = header(block_size, block_count, frame_size, "");
    s += &region("b", 16384, 64);
    s += &iface("b", netdev, mtu, "");
    s += &rxq(0, &["b"], 16, 1000, "");
    Setup::new(&s)
}

#[test]
fn missing_interface_names_the_device_and_the_key() {
    let pair = pair("afp-err-dev");
    let setup = rx_only("nope9", 1500, 1 << 16, 4, 2048);
    let e = pair.in_ns(Side::B, || setup.open::<16>()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, AfpacketError::NoSuchInterface { .. }), "{e:?}");
    assert!(
        msg.starts_with("interfaces[0].address = \"nope9\": no such network device"),
        "{msg}"
    );
    assert_eq!(e.key(), "interfaces[0].address");
    // The same device name exists in B only: A does not see it.
    let setup = rx_only(pair.ifname(Side::B), 1500, 1 << 16, 4, 2048);
    assert!(pair.in_ns(Side::B, || setup.open::<16>()).is_ok());
    let e = pair.in_ns(Side::A, || setup.open::<16>()).unwrap_err();
    assert!(e.to_string().contains(pair.ifname(Side::B)), "{e}");
}

/// `CAP_NET_RAW` is per thread: drop it from this thread's effective set and open.
#[allow(unsafe_code)]
fn without_cap_net_raw<R>(f: impl FnOnce() -> R) -> R {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    const CAP_NET_RAW: u32 = 13;
    let mut hdr = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: `hdr` and `data` are the v3 header and its two data words, valid for the call.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut hdr as *mut Header, data.as_mut_ptr()) };
    assert_eq!(r, 0, "capget: {}", std::io::Error::last_os_error());
    data[0].effective &= !(1 << CAP_NET_RAW);
    // SAFETY: as above; this changes the calling thread's capabilities only.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut hdr as *mut Header, data.as_ptr()) };
    assert_eq!(r, 0, "capset: {}", std::io::Error::last_os_error());
    f()
}

#[test]
fn without_cap_net_raw_the_error_names_the_capability() {
    let pair = pair("afp-err-cap");
    let setup = rx_only(pair.ifname(Side::B), 1500, 1 << 16, 4, 2048);
    // `in_ns` runs on a fresh thread: the capability is gone there only.
    let e = pair
        .in_ns(Side::B, || without_cap_net_raw(|| setup.open::<16>()))
        .unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, AfpacketError::Privilege { .. }), "{e:?}");
    assert!(
        msg.contains("needs CAP_NET_RAW (run as root or grant the capability"),
        "{msg}"
    );
    assert!(msg.starts_with("interfaces[0].address: "), "{msg}");
    assert_eq!(
        e.os_error().and_then(|e| e.raw_os_error()),
        Some(libc::EPERM)
    );
}

/// A geometry whose slot count does not fit the kernel's 32-bit `tp_frame_nr` is refused
/// before anything is allocated, naming the key. (What the kernel itself refuses, `EINVAL` /
/// `ENOMEM` from `PACKET_RX_RING`, maps to the same keys: see the `error` unit tests.)
#[test]
fn ring_geometry_beyond_the_kernel_limit_names_the_key() {
    let pair = pair("afp-err-ring");
    let setup = rx_only(pair.ifname(Side::B), 1500, 1 << 30, 65536, 2048);
    let e = pair.in_ns(Side::B, || setup.open::<16>()).unwrap_err();
    assert_eq!(e.key(), "engine.afpacket.block_count", "{e}");
    assert!(
        e.to_string().contains("more than the kernel's 2^32 − 1"),
        "{e}"
    );
}

#[test]
fn frame_size_below_the_mtu_is_refused_by_the_config_check() {
    // The rule lives in rtdaq-config (config check and build time); the engine repeats it at
    // open for configs built another way. Here: the config layer, with the key and the fix.
    let mut s = header(1 << 16, 4, 2048, "");
    s += &region("b", 16384, 64);
    s += &iface("b", "eth0", 9000, "");
    s += &rxq(0, &["b"], 16, 1000, "");
    let errs = rtdaq_config::load_str(&s).unwrap_err();
    let e = errs
        .0
        .iter()
        .find(|e| e.path == "engine.afpacket.frame_size")
        .unwrap_or_else(|| panic!("{errs:?}"));
    assert!(
        e.message.contains("mtu 9000") && e.message.contains("frame_size = 9056"),
        "{}",
        e.message
    );
}

#[test]
fn pci_address_without_netdev() {
    let _pair = pair("afp-err-pci");
    let setup = rx_only("0000:ff:1f.7", 1500, 1 << 16, 4, 2048);
    let e = setup.open::<16>().unwrap_err();
    assert!(matches!(e, AfpacketError::NoNetdevForPci { .. }), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("interfaces[0].address = \"0000:ff:1f.7\": no such PCI device"),
        "{e}"
    );
}

#[test]
fn a_socket_config_is_refused() {
    let _pair = pair("afp-err-kind");
    let s = "name = \"t\"\nplatform = \"host\"\n[engine]\nkind = \"socket\"\n[[memory_regions]]\nname = \"b\"\nkind = \"host\"\nbuf_size = 2048\nbuf_count = 256\n[[interfaces]]\nname = \"u\"\naddress = \"udp://127.0.0.1:5000\"\n[[interfaces.rx_queues]]\nid = 0\ncpu_core = 0\nmemory_regions = [\"b\"]\nmode = \"direct\"\n";
    let e = Setup::new(s).open::<16>().unwrap_err();
    assert_eq!(e.key(), "engine.kind");
    assert!(
        e.to_string().contains("set engine.kind = \"afpacket\""),
        "{e}"
    );
}

/// A TX config for `side` whose generator sends to the peer with `pacing`.
fn generator_config(pair: &VethPair, side: Side, pacing: &str) -> Setup {
    let peer = match side {
        Side::A => Side::B,
        Side::B => Side::A,
    };
    let m = pair.mac(peer);
    let mut s = header(1 << 16, 4, 2048, "");
    s += &region("tx", 2048, 128);
    s += &iface("a", pair.ifname(side), 1500, "");
    s += &txq(0, "tx", 64, 1024);
    s += &format!(
        "[generator]\ninterface = \"a\"\ntx_queue = 0\ndestination = \"udp://{}:5000\"\nsource = \"udp://{}:4000\"\ndst_mac = \"{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}\"\npayload_size = 100\nrate_pps = 1000\n{pacing}\n",
        pair.ip(peer),
        pair.ip(side),
        m[0], m[1], m[2], m[3], m[4], m[5]
    );
    Setup::new(&s)
}

/// Issue #33: launch times on a device whose qdisc cannot keep them (a veth pair has
/// `noqueue`; this host's kernel has neither etf nor fq) are refused at open, naming the
/// key, the device and the `tc` command; the software pacer opens.
#[test]
fn txtime_without_a_launch_time_qdisc_names_the_tc_command() {
    let pair = pair("afp-err-txtime");
    let dev = pair.ifname(Side::A).to_owned();
    let setup = generator_config(&pair, Side::A, "pacing = \"txtime\"");
    let e = pair.in_ns(Side::A, || setup.open::<16>()).unwrap_err();
    assert_eq!(e.key(), "generator.pacing", "{e}");
    let e = e.to_string();
    assert!(
        e.contains(&format!("\"txtime\" needs the etf or fq qdisc on {dev}"))
            && e.contains(&format!(
                "tc qdisc replace dev {dev} root etf clockid CLOCK_TAI"
            )),
        "{e}"
    );
    let setup = generator_config(&pair, Side::A, "pacing = \"software\"");
    assert!(pair.in_ns(Side::A, || setup.open::<16>()).is_ok());
}
