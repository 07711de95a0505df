//! Flow rules: what to match, where to send it.
//!
//! A [`FlowTable`] holds up to `N` [`FlowRule`]s, tried in order (first match wins).
//! Packets that match nothing get the table's [`DefaultAction`]: a queue, or drop and count.
//! An RSS action spreads a flow over several queues with a symmetric Toeplitz hash of the
//! IPv4/UDP 5-tuple, so both directions of one flow land on the same queue.
//!
//! Match semantics, RSS input order and the socket-engine variant
//! ([`FlowTable::classify_udp`]) are described in the `table` docs and in
//! `docs/wire-format.md`.

mod rule;
mod table;
mod toeplitz;

pub use rule::{
    DefaultAction, FlowAction, FlowMatch, FlowRule, Ipv4Prefix, PortRange, WordBase, WordMatch,
    MAX_RSS_QUEUES,
};
pub use table::{Classified, FlowTable};
pub use toeplitz::{hash_ipv4, hash_ipv4_udp, toeplitz_hash, RSS_KEY_MICROSOFT, RSS_KEY_SYMMETRIC};
