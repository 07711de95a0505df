//! [`SharedMap`]: an owned `MAP_SHARED` mapping of a socket's kernel rings (the AF_PACKET
//! ring, the AF_XDP rings), unmapped exactly once on drop.

pub use crate::sys::SharedMap;
