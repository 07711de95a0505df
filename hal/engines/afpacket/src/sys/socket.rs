//! Safe layer: an owned `AF_PACKET` socket and its options, device queries and waits.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use nix::sys::socket::MsgFlags;
use std::time::Duration;

use rtdaq_netsys::{netdev, packet, poll, sockopt};

pub(crate) use rtdaq_netsys::netdev::TsInfo;

/// An owned, non-blocking, close-on-exec `AF_PACKET`/`SOCK_RAW` socket. Closed on drop.
///
/// Created unbound with protocol 0, so it receives nothing until [`bind`](Self::bind) names a
/// protocol: rings and filters are set up before the first frame can arrive.
#[derive(Debug)]
pub(crate) struct PacketSocket {
    fd: OwnedFd,
}

/// `TPACKET_V2` (the TX ring's frame format).
pub(crate) const TPACKET_V2: i32 = libc::tpacket_versions::TPACKET_V2 as i32;
/// `TPACKET_V3` (the RX ring's block format).
pub(crate) const TPACKET_V3: i32 = libc::tpacket_versions::TPACKET_V3 as i32;

impl PacketSocket {
    /// A new packet socket in the calling thread's network namespace. Cold path.
    ///
    /// # Errors
    /// `EPERM` without `CAP_NET_RAW`; `EAFNOSUPPORT` without `AF_PACKET` support.
    pub(crate) fn new() -> io::Result<PacketSocket> {
        packet::socket().map(|fd| PacketSocket { fd })
    }

    /// Sets an integer option.
    pub(crate) fn set_int(&self, level: i32, option: i32, value: i32) -> io::Result<()> {
        sockopt::set_int(self.fd.as_fd(), level, option, value)
    }

    /// Reads an integer option.
    pub(crate) fn get_int(&self, level: i32, option: i32) -> io::Result<i32> {
        sockopt::get_int(self.fd.as_fd(), level, option)
    }

    /// Sets an integer `SOL_PACKET` option.
    pub(crate) fn set_packet(&self, option: i32, value: i32) -> io::Result<()> {
        self.set_int(libc::SOL_PACKET, option, value)
    }

    /// `PACKET_RX_RING` with `TPACKET_V3` geometry (the version must be set first).
    pub(crate) fn set_rx_ring(&self, req: &libc::tpacket_req3) -> io::Result<()> {
        sockopt::set(self.fd.as_fd(), libc::SOL_PACKET, libc::PACKET_RX_RING, req)
    }

    /// `PACKET_TX_RING` with `TPACKET_V2` geometry (the version must be set first).
    pub(crate) fn set_tx_ring(&self, req: &libc::tpacket_req) -> io::Result<()> {
        sockopt::set(self.fd.as_fd(), libc::SOL_PACKET, libc::PACKET_TX_RING, req)
    }

    /// Attaches a classic BPF program (`SO_ATTACH_FILTER`) given as `(code, jt, jf, k)`
    /// instructions; the kernel checks and copies it. Cold path.
    pub(crate) fn attach_filter(
        &self,
        insns: impl IntoIterator<Item = (u16, u8, u8, u32)>,
    ) -> io::Result<()> {
        let prog: Vec<libc::sock_filter> = insns
            .into_iter()
            .map(|(code, jt, jf, k)| libc::sock_filter { code, jt, jf, k })
            .collect();
        sockopt::attach_filter(self.fd.as_fd(), &prog)
    }

    /// Kernel receive statistics since the previous call (`PACKET_STATISTICS`, reset on
    /// read): `(packets, drops, freezes)`. Never allocates.
    #[inline]
    pub(crate) fn packet_stats(&self) -> io::Result<(u32, u32, u32)> {
        sockopt::get::<libc::tpacket_stats_v3>(
            self.fd.as_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
        )
        .map(|(s, _)| (s.tp_packets, s.tp_drops, s.tp_freeze_q_cnt))
    }

    /// Binds to device `ifindex`; `protocol` (host order) `ETH_P_ALL` receives every frame,
    /// 0 receives nothing (a send-only socket).
    pub(crate) fn bind(&self, ifindex: i32, protocol: u16) -> io::Result<()> {
        packet::bind(self.fd.as_fd(), ifindex, protocol)
    }

    /// Index of device `name` (in this socket's network namespace).
    pub(crate) fn if_index(&self, name: &str) -> io::Result<i32> {
        netdev::index(self.fd.as_fd(), name)
    }

    /// MTU of device `name`.
    pub(crate) fn if_mtu(&self, name: &str) -> io::Result<u32> {
        netdev::mtu(self.fd.as_fd(), name)
    }

    /// Flags (`IFF_*`) of device `name`.
    pub(crate) fn if_flags(&self, name: &str) -> io::Result<i32> {
        netdev::flags(self.fd.as_fd(), name)
    }

    /// MAC address of device `name`.
    pub(crate) fn if_hwaddr(&self, name: &str) -> io::Result<[u8; 6]> {
        netdev::hwaddr(self.fd.as_fd(), name)
    }

    /// Timestamping capabilities of device `name` (`ETHTOOL_GET_TS_INFO`).
    pub(crate) fn ts_info(&self, name: &str) -> io::Result<TsInfo> {
        netdev::ts_info(self.fd.as_fd(), name)
    }

    /// The device's current hardware timestamping config (`SIOCGHWTSTAMP`):
    /// `(tx_type, rx_filter)`.
    pub(crate) fn get_hwtstamp(&self, name: &str) -> io::Result<(i32, i32)> {
        netdev::hwtstamp(self.fd.as_fd(), name, None).map(|c| (c.tx_type, c.rx_filter))
    }

    /// Sets the device's hardware RX timestamp filter, keeping its TX timestamp type
    /// `tx_type` (`SIOCSHWTSTAMP`); returns the filter the device applied.
    pub(crate) fn set_hwtstamp_rx(
        &self,
        name: &str,
        tx_type: i32,
        rx_filter: i32,
    ) -> io::Result<i32> {
        let cfg = libc::hwtstamp_config {
            flags: 0,
            tx_type,
            rx_filter,
        };
        netdev::hwtstamp(self.fd.as_fd(), name, Some(cfg)).map(|c| c.rx_filter)
    }

    /// Transmits every frame of the TX ring marked "send request", without waiting; returns
    /// the bytes sent by this call. Never allocates.
    #[inline]
    pub(crate) fn kick(&self) -> io::Result<usize> {
        // `send(fd, "", 0, MSG_DONTWAIT)` = `sendto(.., NULL, 0)`: the kernel takes the frames
        // from the ring, not from the (empty) buffer. nix's `send` is one call, no work added.
        nix::sys::socket::send(self.fd.as_raw_fd(), &[], MsgFlags::MSG_DONTWAIT)
            .map_err(io::Error::from)
    }

    /// [`kick`](Self::kick) with every frame sent leaving at `at_ns` (`SCM_TXTIME`, on the
    /// socket's `SO_TXTIME` clock). Never allocates.
    #[inline]
    pub(crate) fn kick_at(&self, at_ns: u64) -> io::Result<usize> {
        rtdaq_netsys::txtime::kick_at(self.fd.as_fd(), at_ns)
    }

    /// Waits up to `timeout` until the socket is readable (an RX ring block is ready);
    /// returns whether it is. `EINTR` counts as not ready. Never allocates.
    #[inline]
    pub(crate) fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        self.wait(libc::POLLIN, timeout)
    }

    /// Waits up to `timeout` until the socket is writable (a TX ring slot is free).
    #[inline]
    pub(crate) fn wait_writable(&self, timeout: Duration) -> io::Result<bool> {
        self.wait(libc::POLLOUT, timeout)
    }

    fn wait(&self, events: i16, timeout: Duration) -> io::Result<bool> {
        poll::poll_one(self.fd.as_fd(), events, timeout)
    }
}

impl AsFd for PacketSocket {
    #[inline]
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
