//! `rtdaq-netsys`: the Linux socket plumbing that the socket, AF_PACKET and AF_XDP engines
//! share, written once.
//!
//! - [`sockopt`]: `setsockopt`/`getsockopt` of plain-data values ([`sockopt::PlainOption`]),
//!   integer options, and the classic BPF filter;
//! - [`netdev`]: network-device queries by name (`SIOCGIF*` index, MTU, flags, MAC; ethtool
//!   timestamping and channel counts; `SIOC[GS]HWTSTAMP`);
//! - [`poll`]: `ppoll` over a preallocated `pollfd` array (hot path: never allocates);
//! - [`clock`]: the calling thread's CPU time;
//! - [`dgram`]: [`dgram::DatagramBatch`], datagrams sent in batches by one `sendmmsg` on a
//!   connected UDP socket (preallocated headers);
//! - [`inet`]: IPv4 sockets (create, bind, listen, connect, accept, local address, blocking
//!   mode) through `nix`;
//! - [`packet`]: `AF_PACKET` sockets (create, bind to a device);
//! - [`txtime`]: launch times (`SO_TXTIME`): arming a socket, a packet socket's TX ring sent
//!   at a time, the qdisc's drop reports read back from the error queue;
//! - [`map`]: [`map::SharedMap`], an owned `MAP_SHARED` mapping of a socket's kernel rings,
//!   unmapped on drop;
//! - [`error`]: [`error::KeyError`] and [`error::OsError`], the cold-path error values that
//!   name the config key to change, which each engine's error enum wraps.
//!
//! `nix` makes the calls it covers; raw `libc` remains, in the private `sys` module only, where nix has no
//! wrapper (packet-socket options, `SO_MEMINFO`, device ioctls, `sockaddr_ll`) or where its
//! wrapper would add work per call on a hot path (`ppoll` over a reused array). Every unsafe
//! block is in `sys` and carries a `// SAFETY:` comment. Engine-specific hot-path calls
//! (`recvmmsg`/`sendmmsg` with posted iovecs, the AF_PACKET TX kick, AF_XDP ring wake-ups)
//! stay in the engines' own `sys` modules, next to the structures they pass.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod clock;
pub mod dgram;
pub mod error;
pub mod inet;
pub mod map;
pub mod netdev;
pub mod packet;
pub mod poll;
pub mod sockopt;
mod sys;
pub mod txtime;

pub use error::{KeyError, OsError};
pub use sys::cvt;
