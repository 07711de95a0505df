//! Everything `unsafe` in the crate: AF_XDP sockets and their shared-memory rings, the
//! UMEM registration over the runtime's pool memory, libbpf, interface ioctls.
//!
//! Three layers (style guide §3.5):
//!
//! | layer | module | what |
//! |---|---|---|
//! | raw | `libc`, `libxdp_sys` (libbpf) | the C functions and structs, used only inside this module |
//! | result | [`ffi`] | one thin function per call returning `io::Result`; the **only** place that reads `errno` |
//! | safe | [`xsk`], [`ring`], [`bpf`], [`lent`] | RAII types: [`XskSocket`] (an `OwnedFd`), the four rings ([`ProdRing`] / [`ConsRing`] over an unmapped-on-drop mapping), [`BpfObject`] and XDP links, the lent-frame ledger [`Lent`] |
//!
//! Constructors allocate (cold path); the per-burst methods never allocate, never log and
//! never block longer than the timeout they are given.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub(crate) mod bpf;
pub(crate) mod ffi;
pub(crate) mod lent;
pub(crate) mod ring;
pub(crate) mod xsk;

pub(crate) use bpf::BpfObject;
pub(crate) use lent::Lent;
pub(crate) use ring::{ConsRing, ProdRing};
pub(crate) use xsk::{XskSocket, XskStats};

/// An RX / TX ring descriptor (`struct xdp_desc`: UMEM address, length, options).
pub(crate) type XdpDesc = libc::xdp_desc;

use std::io;
use std::os::fd::{AsFd, OwnedFd};

/// Interface facts read with ioctls on an `AF_INET` socket of the current network
/// namespace (sysfs shows the namespace it was mounted in, so it is not used).
#[derive(Debug)]
pub(crate) struct NetDev {
    sock: OwnedFd,
}

impl NetDev {
    /// A handle for interface queries. Cold path.
    pub(crate) fn new() -> io::Result<NetDev> {
        rtdaq_netsys::inet::socket(rtdaq_netsys::inet::Kind::Datagram).map(|sock| NetDev { sock })
    }

    /// The interface index of `name`, `None` when there is no such interface here.
    pub(crate) fn ifindex(&self, name: &str) -> Option<u32> {
        nix::net::if_::if_nametoindex(name).ok().filter(|&i| i != 0)
    }

    /// The MTU of `name`.
    pub(crate) fn mtu(&self, name: &str) -> io::Result<u32> {
        rtdaq_netsys::netdev::mtu(self.sock.as_fd(), name)
    }

    /// (RX, TX) queue counts of `name` (`ETHTOOL_GCHANNELS`: separate + combined channels).
    pub(crate) fn channels(&self, name: &str) -> io::Result<(u32, u32)> {
        let c = rtdaq_netsys::netdev::channels(self.sock.as_fd(), name)?;
        Ok((c.rx_count + c.combined_count, c.tx_count + c.combined_count))
    }
}

/// The system page size.
pub(crate) fn page_size() -> u64 {
    ffi::page_size()
}

/// `CLOCK_REALTIME` in nanoseconds (vDSO). Never allocates.
#[inline]
pub(crate) fn realtime_ns() -> u64 {
    ffi::realtime_ns()
}

/// Socket-option and flag constants the safe modules use, re-exported so they need no
/// `libc`.
pub(crate) mod consts {
    pub(crate) use libc::{
        EACCES, EAFNOSUPPORT, EAGAIN, EBUSY, EEXIST, EINTR, EINVAL, ENOBUFS, ENOMEM, EOPNOTSUPP,
        EPERM, SOL_SOCKET, SO_BUSY_POLL, SO_BUSY_POLL_BUDGET, SO_PREFER_BUSY_POLL, XDP_COPY,
        XDP_PKT_CONTD, XDP_RX_RING, XDP_SHARED_UMEM, XDP_TX_RING, XDP_UMEM_COMPLETION_RING,
        XDP_UMEM_FILL_RING, XDP_USE_NEED_WAKEUP, XDP_USE_SG, XDP_ZEROCOPY,
    };

    /// The kernel-internal `ENOTSUPP` (524) that some drivers leak to user space when they
    /// refuse zero-copy.
    pub(crate) const ENOTSUPP: i32 = 524;
}
