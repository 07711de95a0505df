//! Everything that calls Linux directly: the packet socket, its ring mapping and device
//! queries.
//!
//! Three layers (style guide §3.5), the lower two shared with the other socket engines:
//!
//! | layer | where | what |
//! |---|---|---|
//! | raw + result | `rtdaq-netsys` (nix where it covers the call, libc for the rest) | packet socket, bind to a device, socket options (`PACKET_*_RING`, `PACKET_STATISTICS`, BPF filter), device queries, `ppoll`, the shared mapping |
//! | safe | [`socket`], [`mmap`] | RAII types: [`PacketSocket`] (an `OwnedFd`), [`MmapRing`] (the ring mapping, a `SharedMap`, with the accessors the ring protocol needs) |
//!
//! The TX kick is nix's `send` of nothing with `MSG_DONTWAIT`. The only `unsafe` left here is
//! [`MmapRing`]'s byte and status-word access into the kernel's ring.
//!
//! Constructors are cold-path; the per-burst calls ([`PacketSocket::kick`],
//! [`PacketSocket::wait_readable`], [`PacketSocket::packet_stats`]) never allocate.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub(crate) mod mmap;
pub(crate) mod socket;

pub(crate) use mmap::MmapRing;
pub(crate) use socket::{PacketSocket, TPACKET_V2, TPACKET_V3};

/// Constants the engine uses, re-exported so the safe modules need no `libc`.
pub(crate) mod consts {
    pub(crate) use libc::{
        EACCES, EAGAIN, EINTR, EINVAL, ENOBUFS, ENODEV, ENOMEM, ENXIO, EPERM, ETH_P_ALL,
        HWTSTAMP_FILTER_ALL, HWTSTAMP_FILTER_NONE, IFF_UP, PACKET_FANOUT, PACKET_FANOUT_CPU,
        PACKET_FANOUT_FLAG_DEFRAG, PACKET_FANOUT_FLAG_IGNORE_OUTGOING, PACKET_FANOUT_FLAG_UNIQUEID,
        PACKET_FANOUT_HASH, PACKET_FANOUT_LB, PACKET_FANOUT_QM, PACKET_FANOUT_ROLLOVER,
        PACKET_IGNORE_OUTGOING, PACKET_LOSS, PACKET_QDISC_BYPASS, PACKET_TIMESTAMP, PACKET_VERSION,
        SOF_TIMESTAMPING_RAW_HARDWARE, SOF_TIMESTAMPING_RX_HARDWARE, SOL_PACKET, SOL_SOCKET,
        SO_LOCK_FILTER, SO_SNDBUF, SO_SNDBUFFORCE, TP_STATUS_AVAILABLE, TP_STATUS_COPY,
        TP_STATUS_KERNEL, TP_STATUS_LOSING, TP_STATUS_SEND_REQUEST, TP_STATUS_TS_RAW_HARDWARE,
        TP_STATUS_USER, TP_STATUS_VLAN_TPID_VALID, TP_STATUS_VLAN_VALID, TP_STATUS_WRONG_FORMAT,
    };
    /// `sizeof(struct tpacket3_hdr)`.
    pub(crate) const TPACKET3_HDR_LEN: usize = std::mem::size_of::<libc::tpacket3_hdr>();
    /// Offset of a TX (`TPACKET_V2`) frame's data in its slot:
    /// `TPACKET2_HDRLEN - sizeof(struct sockaddr_ll)` (what the kernel uses without
    /// `PACKET_TX_HAS_OFF`).
    pub(crate) const TX_DATA_OFFSET: usize =
        libc::TPACKET2_HDRLEN - std::mem::size_of::<libc::sockaddr_ll>();
    /// `sizeof(struct tpacket_block_desc)`.
    pub(crate) const BLOCK_DESC_LEN: usize = std::mem::size_of::<libc::tpacket_block_desc>();
    /// `tpacket_req3` / `tpacket_req` as the safe layers build them.
    pub(crate) use libc::{tpacket3_hdr, tpacket_req, tpacket_req3};
}
