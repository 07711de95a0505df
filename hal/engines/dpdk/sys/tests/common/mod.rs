//! Shared by the test binaries: one EAL per test binary (DPDK initialises once per
//! process); every test of a binary calls `eal()` with the same arguments and gets the
//! same `&'static Eal`.
#![allow(dead_code)]

use rtdaq_dpdk_sys::Eal;

/// EAL arguments that work without hugepages or a NIC, with two virtual ports.
pub const ARGS: &[&str] = &[
    "-l",
    "0",
    "--no-huge",
    "-m",
    "512",
    "--no-shconf",
    "--no-pci",
    "--vdev",
    "net_null0",
    "--vdev",
    "net_ring0",
    "--log-level=lib.eal:notice",
];

/// The process's EAL (initialised by whichever test gets here first).
pub fn eal() -> &'static Eal {
    Eal::init(ARGS).unwrap_or_else(|e| panic!("{e}"))
}
