//! Flow rule data types (plain data; matching lives in `table`).

use crate::meta::{FlowId, QueueId};

/// Most queues one RSS action may spread over.
pub const MAX_RSS_QUEUES: usize = 32;

/// An IPv4 prefix, `addr/len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Prefix {
    /// Address (network byte order octets).
    pub addr: [u8; 4],
    /// Prefix length, 0..=32.
    pub len: u8,
}

/// An inclusive port range; a single port is `lo == hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortRange {
    /// First port.
    pub lo: u16,
    /// Last port (inclusive).
    pub hi: u16,
}

/// Where a [`WordMatch`] offset counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WordBase {
    /// From the first byte of the Ethernet frame.
    Frame,
    /// From the first byte after the UDP header (DAQIRI's "flex item").
    UdpPayload,
}

/// A 32-bit big-endian word at a byte offset, compared under a mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WordMatch {
    /// Where `offset` counts from.
    pub base: WordBase,
    /// Byte offset of the word.
    pub offset: u16,
    /// Expected value (after masking).
    pub value: u32,
    /// Mask applied to the packet word before comparing.
    pub mask: u32,
}

/// What a rule matches. Every `Some` field must match; all `None` matches everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowMatch {
    /// EtherType after any VLAN tags.
    pub ethertype: Option<u16>,
    /// VLAN id of the outermost tag.
    pub vlan_id: Option<u16>,
    /// IPv4 source prefix.
    pub ipv4_src: Option<Ipv4Prefix>,
    /// IPv4 destination prefix.
    pub ipv4_dst: Option<Ipv4Prefix>,
    /// IPv4 total length field.
    pub ipv4_total_len: Option<u16>,
    /// UDP source port (range).
    pub udp_src: Option<PortRange>,
    /// UDP destination port (range).
    pub udp_dst: Option<PortRange>,
    /// eCPRI message type (EtherType 0xAEFE).
    pub ecpri_msg_type: Option<u8>,
    /// A masked 32-bit word at an offset.
    pub word: Option<WordMatch>,
}

/// Where a matching packet goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowAction {
    /// One queue.
    Queue(QueueId),
    /// Several queues, chosen by symmetric Toeplitz hash of the IPv4/UDP 5-tuple.
    Rss(heapless::Vec<QueueId, MAX_RSS_QUEUES>),
    /// Drop (counted as `flow_drop`).
    Drop,
}

/// One rule: id, match, action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRule {
    /// Flow id written into `PacketMeta::flow` (must not be [`FlowId::NONE`]).
    pub id: FlowId,
    /// What to match.
    pub matcher: FlowMatch,
    /// What to do.
    pub action: FlowAction,
}

/// What happens to packets no rule matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultAction {
    /// Deliver to this queue with [`FlowId::NONE`].
    Queue(QueueId),
    /// Drop and count as `no_flow`.
    Drop,
}
