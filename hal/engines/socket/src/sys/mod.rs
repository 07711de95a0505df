//! Everything `unsafe` in the crate: the Linux socket calls and the structures the kernel reads
//! and writes through raw pointers.
//!
//! Three layers (style guide §3.5):
//!
//! | layer | module | what |
//! |---|---|---|
//! | raw + result, shared | `rtdaq-netsys` (nix where it covers the call, libc for the rest) | socket creation, bind/listen/connect/accept, socket options by number (`PlainOption`), `SO_MEMINFO`, `ppoll`; multicast joins use nix's `IpAddMembership`, receive timeouts nix's `ReceiveTimeout` |
//! | raw + result, hot path | [`ffi`] | `recvmmsg`/`sendmmsg`/`recvmsg`/`sendmsg` over headers kept posted between calls (nix's wrappers rebuild them per call) |
//! | safe | [`socket`], [`mmsg`], [`iov`] | RAII and preallocated types: [`Socket`] (an `OwnedFd`), [`PollSet`], [`FdSlot`], [`RecvRing`] (posted `recvmmsg` entries, each with its pool buffer, like a NIC RX ring) / [`SendBatch`] (`sendmmsg` arrays with their `iovec`s and control buffers), [`IoVecs`] (vectored stream I/O) |
//!
//! The safe types allocate only in their constructors (cold path). Their per-burst methods
//! never allocate, never log and never block longer than the timeout they are given.
//!
//! Buffers handed to the kernel are either borrowed for exactly one call (iterators of
//! `&mut [u8]` / `&[u8]` consumed inside the method, or a builder that borrows them for its
//! own lifetime) or owned by the structure holding the pointer ([`RecvRing`] keeps the pool
//! `Buf` of every posted `iovec`), so no pointer the kernel uses can outlive the memory it
//! points to.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub(crate) mod ffi;
pub(crate) mod iov;
pub(crate) mod mmsg;
pub(crate) mod recv_ring;
pub(crate) mod socket;

pub(crate) use iov::IoVecs;
pub(crate) use mmsg::{RecvMsg, SendBatch};
pub(crate) use recv_ring::RecvRing;
pub(crate) use socket::{FdSlot, PollSet, Socket};

/// Socket-option constants the engine uses, re-exported so the safe modules need no `libc`.
pub(crate) mod consts {
    pub(crate) use libc::{
        EACCES, EADDRINUSE, EADDRNOTAVAIL, EAGAIN, ECONNREFUSED, ECONNRESET, EHOSTUNREACH, EINTR,
        EINVAL, EIO, EMSGSIZE, ENETUNREACH, ENOBUFS, ENOPROTOOPT, EOPNOTSUPP, EPERM, ETIMEDOUT,
        IPPROTO_IP, IPPROTO_TCP, IP_MULTICAST_LOOP, IP_MULTICAST_TTL, IP_PKTINFO, MSG_DONTWAIT,
        MSG_TRUNC, MSG_WAITFORONE, SOL_SOCKET, SOL_UDP, SO_RCVBUF, SO_RCVBUFFORCE, SO_REUSEADDR,
        SO_REUSEPORT, SO_SNDBUF, SO_SNDBUFFORCE, SO_TIMESTAMPNS, TCP_NODELAY, UDP_GRO, UDP_SEGMENT,
    };
}
