//! `rte_flow` rules in plain Rust data: [`FlowSpec`] (attributes, pattern, actions), built
//! with a small builder and handed to [`FlowRule::validate`](crate::FlowRule::validate) /
//! [`FlowRule::create`](crate::FlowRule::create), which turn it into DPDK's
//! `rte_flow_item[]` / `rte_flow_action[]` arrays (in `sys::flow`, the only `unsafe` part).
//!
//! Only what rtdaq's config can express is here: Ethernet type, one VLAN id, IPv4 source /
//! destination under a mask, the IPv4 total length, UDP source / destination ports under a
//! mask; actions queue, RSS over queues, drop. Values are in host byte order; the FFI layer
//! writes them big-endian.
//!
//! ```
//! use rtdaq_dpdk_sys::{FlowItem, FlowSpec};
//! // flows[0]: 169.254.0.0/16 → UDP port 5000 → RX queue 1, first-match priority 0
//! let spec = FlowSpec::ingress(0)
//!     .item(FlowItem::Eth { ether_type: None })
//!     .item(FlowItem::Ipv4 { src: None, dst: Some((0xa9fe_0000, 0xffff_0000)), total_len: None })
//!     .item(FlowItem::Udp { src: None, dst: Some((5000, 0xffff)) })
//!     .queue(1);
//! assert_eq!(spec.to_string(), "prio 0: eth / ipv4 dst 169.254.0.0/255.255.0.0 / udp dst 5000 -> queue 1");
//! ```

use std::fmt;

/// One pattern item. `None` fields match anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FlowItem {
    /// `RTE_FLOW_ITEM_TYPE_ETH`: with `ether_type`, the EtherType right after the MACs.
    Eth {
        /// EtherType (exact).
        ether_type: Option<u16>,
    },
    /// `RTE_FLOW_ITEM_TYPE_VLAN`: the 12-bit VLAN id (mask 0x0fff), optionally the
    /// EtherType after the tag.
    Vlan {
        /// VLAN id (1..=4094).
        vid: u16,
        /// EtherType after the tag (exact).
        inner_type: Option<u16>,
    },
    /// `RTE_FLOW_ITEM_TYPE_IPV4`.
    Ipv4 {
        /// Source address and mask (host order).
        src: Option<(u32, u32)>,
        /// Destination address and mask (host order).
        dst: Option<(u32, u32)>,
        /// Total length field (exact).
        total_len: Option<u16>,
    },
    /// `RTE_FLOW_ITEM_TYPE_UDP`.
    Udp {
        /// Source port and mask.
        src: Option<(u16, u16)>,
        /// Destination port and mask.
        dst: Option<(u16, u16)>,
    },
}

/// One action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FlowAction {
    /// `RTE_FLOW_ACTION_TYPE_QUEUE`: this RX queue.
    Queue(u16),
    /// `RTE_FLOW_ACTION_TYPE_RSS`: spread over these RX queues by the Toeplitz hash of the
    /// IPv4 addresses and UDP ports, with `key` (40 bytes; empty = the PMD's key).
    Rss {
        /// RX queues.
        queues: Vec<u16>,
        /// Toeplitz key (empty: the PMD's default).
        key: Vec<u8>,
    },
    /// `RTE_FLOW_ACTION_TYPE_DROP`.
    Drop,
}

/// A whole rule: ingress attributes, pattern (without the END item) and actions (without
/// END). Build it with [`FlowSpec::ingress`] and the chained methods.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowSpec {
    /// `rte_flow_attr.group`.
    pub group: u32,
    /// `rte_flow_attr.priority`: lower values are matched first.
    pub priority: u32,
    /// Pattern items, outermost first.
    pub pattern: Vec<FlowItem>,
    /// Actions.
    pub actions: Vec<FlowAction>,
}

impl FlowSpec {
    /// An empty ingress rule (group 0) of this priority.
    pub fn ingress(priority: u32) -> Self {
        FlowSpec {
            group: 0,
            priority,
            pattern: Vec::new(),
            actions: Vec::new(),
        }
    }

    /// Appends a pattern item.
    #[must_use]
    pub fn item(mut self, item: FlowItem) -> Self {
        self.pattern.push(item);
        self
    }

    /// Appends an action.
    #[must_use]
    pub fn action(mut self, action: FlowAction) -> Self {
        self.actions.push(action);
        self
    }

    /// Appends [`FlowAction::Queue`].
    #[must_use]
    pub fn queue(self, q: u16) -> Self {
        self.action(FlowAction::Queue(q))
    }

    /// Appends [`FlowAction::Rss`].
    #[must_use]
    pub fn rss(self, queues: &[u16], key: &[u8]) -> Self {
        self.action(FlowAction::Rss {
            queues: queues.to_vec(),
            key: key.to_vec(),
        })
    }

    /// Appends [`FlowAction::Drop`].
    #[must_use]
    pub fn drop_all(self) -> Self {
        self.action(FlowAction::Drop)
    }
}

fn ip(v: u32) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::from(v)
}

fn port(f: &mut fmt::Formatter<'_>, what: &str, p: Option<(u16, u16)>) -> fmt::Result {
    match p {
        None => Ok(()),
        Some((v, 0xffff)) => write!(f, " {what} {v}"),
        Some((v, m)) => write!(f, " {what} {v}/{m:#06x}"),
    }
}

impl fmt::Display for FlowItem {
    /// testpmd-like: `eth type 0x0800`, `vlan vid 5`, `ipv4 dst 10.0.0.0/255.0.0.0`,
    /// `udp dst 5000/0xfffc`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            FlowItem::Eth { ether_type } => {
                f.write_str("eth")?;
                if let Some(t) = ether_type {
                    write!(f, " type {t:#06x}")?;
                }
                Ok(())
            }
            FlowItem::Vlan { vid, inner_type } => {
                write!(f, "vlan vid {vid}")?;
                if let Some(t) = inner_type {
                    write!(f, " inner_type {t:#06x}")?;
                }
                Ok(())
            }
            FlowItem::Ipv4 {
                src,
                dst,
                total_len,
            } => {
                f.write_str("ipv4")?;
                for (what, a) in [("src", src), ("dst", dst)] {
                    if let Some((v, m)) = a {
                        write!(f, " {what} {}/{}", ip(v), ip(m))?;
                    }
                }
                if let Some(l) = total_len {
                    write!(f, " total_len {l}")?;
                }
                Ok(())
            }
            FlowItem::Udp { src, dst } => {
                f.write_str("udp")?;
                port(f, "src", src)?;
                port(f, "dst", dst)
            }
        }
    }
}

impl fmt::Display for FlowAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlowAction::Queue(q) => write!(f, "queue {q}"),
            FlowAction::Rss { queues, .. } => write!(f, "rss queues {queues:?}"),
            FlowAction::Drop => f.write_str("drop"),
        }
    }
}

impl fmt::Display for FlowSpec {
    /// `prio 3: eth / ipv4 / udp dst 5000 -> queue 1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "prio {}: ", self.priority)?;
        if self.group != 0 {
            write!(f, "group {} ", self.group)?;
        }
        for (k, i) in self.pattern.iter().enumerate() {
            if k > 0 {
                f.write_str(" / ")?;
            }
            write!(f, "{i}")?;
        }
        f.write_str(" ->")?;
        for (k, a) in self.actions.iter().enumerate() {
            if k > 0 {
                f.write_str(",")?;
            }
            write!(f, " {a}")?;
        }
        Ok(())
    }
}
