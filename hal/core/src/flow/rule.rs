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

impl Ipv4Prefix {
    /// Matches every address (`0.0.0.0/0`).
    pub const ANY: Self = Self {
        addr: [0; 4],
        len: 0,
    };

    /// A prefix `addr/len`.
    pub const fn new(addr: [u8; 4], len: u8) -> Self {
        Self { addr, len }
    }

    /// A single host (`addr/32`).
    pub const fn host(addr: [u8; 4]) -> Self {
        Self { addr, len: 32 }
    }

    /// Network mask of the prefix; lengths above 32 count as 32.
    pub const fn mask(&self) -> u32 {
        if self.len == 0 {
            0
        } else if self.len >= 32 {
            u32::MAX
        } else {
            u32::MAX << (32 - self.len)
        }
    }

    /// True when `addr` lies in the prefix (host bits of `self.addr` are ignored).
    pub const fn contains(&self, addr: [u8; 4]) -> bool {
        let m = self.mask();
        u32::from_be_bytes(addr) & m == u32::from_be_bytes(self.addr) & m
    }
}

impl PortRange {
    /// Every port.
    pub const ANY: Self = Self {
        lo: 0,
        hi: u16::MAX,
    };

    /// A single port.
    pub const fn single(port: u16) -> Self {
        Self { lo: port, hi: port }
    }

    /// The inclusive range `lo..=hi` (empty, matching nothing, when `lo > hi`).
    pub const fn new(lo: u16, hi: u16) -> Self {
        Self { lo, hi }
    }

    /// True when `port` is in `lo..=hi`.
    pub const fn contains(&self, port: u16) -> bool {
        self.lo <= port && port <= self.hi
    }
}

impl WordMatch {
    /// True when the big-endian word at `offset` in `bytes`, masked, equals
    /// `value & mask`. False when the word does not lie entirely inside `bytes`.
    pub fn matches_bytes(&self, bytes: &[u8]) -> bool {
        let off = usize::from(self.offset);
        match bytes.get(off..off + 4) {
            Some(&[a, b, c, d]) => {
                u32::from_be_bytes([a, b, c, d]) & self.mask == self.value & self.mask
            }
            _ => false,
        }
    }
}

impl FlowMatch {
    /// Matches every packet.
    pub const ANY: Self = Self {
        ethertype: None,
        vlan_id: None,
        ipv4_src: None,
        ipv4_dst: None,
        ipv4_total_len: None,
        udp_src: None,
        udp_dst: None,
        ecpri_msg_type: None,
        word: None,
    };

    /// True when some field needs the L2 frame (EtherType other than IPv4, VLAN id, or a
    /// word relative to the frame): such rules never match in
    /// [`FlowTable::classify_udp`](super::FlowTable::classify_udp).
    pub fn needs_l2(&self) -> bool {
        self.vlan_id.is_some()
            || self
                .ethertype
                .is_some_and(|e| e != crate::wire::ETHERTYPE_IPV4)
            || self.word.is_some_and(|w| w.base == WordBase::Frame)
    }
}

impl FlowRule {
    /// True when the rule can be put in a table: its id is not [`FlowId::NONE`], and an
    /// RSS action lists at least one queue.
    pub fn is_valid(&self) -> bool {
        self.id != FlowId::NONE && !matches!(&self.action, FlowAction::Rss(q) if q.is_empty())
    }
}
