//! First-match flow table: classify a packet to a queue and flow id, or a drop reason.
//!
//! [`FlowTable::classify`] parses the frame once ([`parse_frame_with`]) and tries the
//! rules in insertion order; the first whose [`FlowMatch`] matches decides:
//!
//! - a queue action ([`FlowAction::Queue`]) delivers to that queue with the rule's flow id;
//! - an RSS action ([`FlowAction::Rss`]) delivers to `queues[h % queues.len()]`, `h` the
//!   symmetric Toeplitz hash ([`RSS_KEY_SYMMETRIC`]) of (src ip, dst ip, src port, dst
//!   port). A packet that is not unfragmented IPv4/UDP goes to `queues[0]` (so all
//!   fragments of a datagram, and all non-IP traffic of the flow, stay together);
//! - a drop action ([`FlowAction::Drop`]) gives [`Classified::FlowDrop`].
//!
//! No match: the [`DefaultAction`] ([`Classified::Deliver`] with [`FlowId::NONE`], or
//! [`Classified::NoFlow`]). A frame [`parse_frame_with`] rejects: [`Classified::Malformed`].
//!
//! ## Match semantics
//! Every `Some` field of a [`FlowMatch`] must match. A field whose layer the packet does
//! not have never matches (e.g. `udp_dst` on a TCP packet, `vlan_id` on an untagged
//! frame, `ecpri_msg_type` on a non-eCPRI frame, any UDP field on an IPv4 fragment).
//!
//! ## Socket engines
//! [`FlowTable::classify_udp`] matches with only what a UDP socket knows: addresses,
//! ports and the payload. EtherType is taken as IPv4, `ipv4_total_len` as
//! `28 + payload.len()` (IPv4 options are assumed absent), eCPRI is recognised over UDP on
//! the configured port; rules that need a VLAN id, another EtherType, or a word relative
//! to the frame do not match there.
//!
//! ## Example
//! ```
//! use rtdaq_core::flow::{Classified, DefaultAction, FlowAction, FlowMatch, FlowRule, FlowTable, PortRange};
//! use rtdaq_core::wire::{emit_udp_frame, UdpFrameSpec};
//! use rtdaq_core::{FlowId, QueueId};
//!
//! let mut table: FlowTable<16> = FlowTable::new(DefaultAction::Drop);
//! table.push(FlowRule {
//!     id: FlowId(1),
//!     matcher: FlowMatch { udp_dst: Some(PortRange::single(5000)), ..FlowMatch::ANY },
//!     action: FlowAction::Queue(QueueId(3)),
//! }).unwrap();
//!
//! let spec = UdpFrameSpec { dst_port: 5000, payload_len: 64, ..UdpFrameSpec::default() };
//! let mut buf = [0u8; 128];
//! let len = emit_udp_frame(&mut buf, &spec).unwrap();
//! assert_eq!(table.classify(&buf[..len]), Classified::Deliver { queue: QueueId(3), flow: FlowId(1) });
//! assert_eq!(table.classify(&buf[..10]), Classified::Malformed);
//! ```

use super::rule::{DefaultAction, FlowAction, FlowMatch, FlowRule, WordBase};
use super::toeplitz::{hash_ipv4_udp, RSS_KEY_SYMMETRIC};
use crate::meta::{FlowId, QueueId};
use crate::wire::ecpri::EcpriHeader;
use crate::wire::frame::{parse_frame_with, FrameInfo, ParseOptions};
use crate::wire::ETHERTYPE_IPV4;

/// Where a packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Classified {
    /// Deliver to `queue`, tagged with `flow` ([`FlowId::NONE`] for the default queue).
    Deliver {
        /// Destination queue.
        queue: QueueId,
        /// Flow id of the matching rule.
        flow: FlowId,
    },
    /// The frame failed to parse (count as `malformed`).
    Malformed,
    /// No rule matched and the default action is drop (count as `no_flow`).
    NoFlow,
    /// A drop rule matched (count as `flow_drop`).
    FlowDrop,
}

/// The packet fields a [`FlowMatch`] looks at; `None` = the packet has no such layer.
#[derive(Debug, Clone, Copy, Default)]
struct Fields<'a> {
    ethertype: Option<u16>,
    vlan_id: Option<u16>,
    /// (src, dst, total_len).
    ipv4: Option<([u8; 4], [u8; 4], u16)>,
    /// (src port, dst port).
    udp: Option<(u16, u16)>,
    ecpri_msg_type: Option<u8>,
    frame: Option<&'a [u8]>,
    udp_payload: Option<&'a [u8]>,
}

impl<'a> Fields<'a> {
    fn from_info(info: &FrameInfo, frame: &'a [u8]) -> Self {
        Self {
            ethertype: Some(info.ethertype),
            vlan_id: info.outer_vlan_id(),
            ipv4: info.ipv4.map(|ip| (ip.src, ip.dst, ip.total_len)),
            udp: info.udp.map(|u| (u.src_port, u.dst_port)),
            ecpri_msg_type: info.ecpri.map(|e| e.msg_type),
            frame: Some(frame),
            udp_payload: info.udp_payload(frame),
        }
    }

    fn rss_hash(&self) -> Option<u32> {
        let (src, dst, _) = self.ipv4?;
        let (sport, dport) = self.udp?;
        Some(hash_ipv4_udp(&RSS_KEY_SYMMETRIC, src, dst, sport, dport))
    }
}

fn opt_matches<T: Copy, U: Copy>(
    want: Option<T>,
    have: Option<U>,
    f: impl Fn(T, U) -> bool,
) -> bool {
    match (want, have) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(w), Some(h)) => f(w, h),
    }
}

impl FlowMatch {
    /// True when every `Some` field matches the frame `info` was parsed from.
    pub fn matches(&self, info: &FrameInfo, frame: &[u8]) -> bool {
        self.matches_fields(&Fields::from_info(info, frame))
    }

    fn matches_fields(&self, p: &Fields<'_>) -> bool {
        opt_matches(self.ethertype, p.ethertype, |w, h| w == h)
            && opt_matches(self.vlan_id, p.vlan_id, |w, h| w == h)
            && opt_matches(self.ipv4_src, p.ipv4, |w, h| w.contains(h.0))
            && opt_matches(self.ipv4_dst, p.ipv4, |w, h| w.contains(h.1))
            && opt_matches(self.ipv4_total_len, p.ipv4, |w, h| w == h.2)
            && opt_matches(self.udp_src, p.udp, |w, h| w.contains(h.0))
            && opt_matches(self.udp_dst, p.udp, |w, h| w.contains(h.1))
            && opt_matches(self.ecpri_msg_type, p.ecpri_msg_type, |w, h| w == h)
            && match self.word {
                None => true,
                Some(w) => match w.base {
                    WordBase::Frame => p.frame,
                    WordBase::UdpPayload => p.udp_payload,
                }
                .is_some_and(|b| w.matches_bytes(b)),
            }
    }
}

/// Up to `N` flow rules tried in order, and what to do when none matches.
#[derive(Debug, Clone)]
pub struct FlowTable<const N: usize> {
    rules: heapless::Vec<FlowRule, N>,
    default: DefaultAction,
    opts: ParseOptions,
}

impl<const N: usize> FlowTable<N> {
    /// An empty table with the given default action and [`ParseOptions::DEFAULT`].
    pub const fn new(default: DefaultAction) -> Self {
        Self::with_options(default, ParseOptions::DEFAULT)
    }

    /// An empty table with the given default action and parser options (e.g. the UDP
    /// port that carries eCPRI).
    pub const fn with_options(default: DefaultAction, opts: ParseOptions) -> Self {
        Self {
            rules: heapless::Vec::new(),
            default,
            opts,
        }
    }

    /// Appends a rule (tried after the existing ones). Gives the rule back when the table
    /// is full, or when the rule is not [valid](FlowRule::is_valid) (flow id
    /// [`FlowId::NONE`], or RSS over no queue).
    // The rule is handed back by value, like `heapless::Vec::push`; this is a cold path.
    #[allow(clippy::result_large_err)]
    pub fn push(&mut self, rule: FlowRule) -> Result<(), FlowRule> {
        if !rule.is_valid() {
            return Err(rule);
        }
        self.rules.push(rule)
    }

    /// Removes every rule.
    pub fn clear(&mut self) {
        self.rules.clear();
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// True when the table holds no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Capacity `N`.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// The rules, in match order.
    pub fn rules(&self) -> &[FlowRule] {
        &self.rules
    }

    /// The default action.
    pub const fn default_action(&self) -> DefaultAction {
        self.default
    }

    /// Sets the default action.
    pub fn set_default_action(&mut self, default: DefaultAction) {
        self.default = default;
    }

    /// The parser options [`classify`](Self::classify) uses.
    pub const fn parse_options(&self) -> &ParseOptions {
        &self.opts
    }

    /// Parses `frame` once and classifies it.
    pub fn classify(&self, frame: &[u8]) -> Classified {
        match parse_frame_with(frame, &self.opts) {
            Ok(info) => self.classify_info(&info, frame),
            Err(_) => Classified::Malformed,
        }
    }

    /// [`classify`](Self::classify) of the first bytes of a frame whose rest is not
    /// readable (header-data split; [`parse_frame_head`](crate::wire::parse_frame_head)).
    /// A word match beyond `head` does not match.
    pub fn classify_head(&self, head: &[u8]) -> Classified {
        match crate::wire::parse_frame_head(head, &self.opts) {
            Ok(info) => self.classify_info(&info, head),
            Err(_) => Classified::Malformed,
        }
    }

    /// Classifies a frame already parsed into `info` (with this table's
    /// [`parse_options`](Self::parse_options)); `frame` is needed for word matches.
    pub fn classify_info(&self, info: &FrameInfo, frame: &[u8]) -> Classified {
        self.decide(&Fields::from_info(info, frame))
    }

    /// Classifies a UDP datagram seen through a socket (no L2/L3 header); see the module
    /// docs for which fields can match. When `dport` is the configured eCPRI port and the
    /// payload does not hold a valid eCPRI header: [`Classified::Malformed`].
    pub fn classify_udp(
        &self,
        src: [u8; 4],
        sport: u16,
        dst: [u8; 4],
        dport: u16,
        payload: &[u8],
    ) -> Classified {
        let ecpri_msg_type = if self.opts.ecpri_udp_port == Some(dport) {
            match EcpriHeader::parse(payload) {
                Ok(h) => Some(h.msg_type),
                Err(_) => return Classified::Malformed,
            }
        } else {
            None
        };
        let total_len = payload
            .len()
            .checked_add(28)
            .and_then(|n| u16::try_from(n).ok());
        let fields = Fields {
            ethertype: Some(ETHERTYPE_IPV4),
            vlan_id: None,
            // A total length that cannot exist still lets address rules match.
            ipv4: Some((src, dst, total_len.unwrap_or(0))),
            udp: Some((sport, dport)),
            ecpri_msg_type,
            frame: None,
            udp_payload: Some(payload),
        };
        self.decide(&fields)
    }

    fn decide(&self, p: &Fields<'_>) -> Classified {
        for rule in self.rules.iter() {
            if !rule.matcher.matches_fields(p) {
                continue;
            }
            return match &rule.action {
                FlowAction::Queue(q) => Classified::Deliver {
                    queue: *q,
                    flow: rule.id,
                },
                FlowAction::Rss(queues) => {
                    let idx = match p.rss_hash() {
                        Some(h) if !queues.is_empty() => h as usize % queues.len(),
                        _ => 0,
                    };
                    match queues.get(idx) {
                        Some(q) => Classified::Deliver {
                            queue: *q,
                            flow: rule.id,
                        },
                        // Unreachable through `push`; never panic anyway.
                        None => Classified::FlowDrop,
                    }
                }
                FlowAction::Drop => Classified::FlowDrop,
            };
        }
        match self.default {
            DefaultAction::Queue(q) => Classified::Deliver {
                queue: q,
                flow: FlowId::NONE,
            },
            DefaultAction::Drop => Classified::NoFlow,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{Ipv4Prefix, PortRange};
    use crate::wire::{emit_udp_frame, UdpFrameSpec};

    fn frame(buf: &mut [u8], sport: u16, dport: u16) -> usize {
        let spec = UdpFrameSpec {
            src_ip: [10, 0, 0, 1],
            dst_ip: [10, 0, 0, 2],
            src_port: sport,
            dst_port: dport,
            payload_len: 16,
            ..UdpFrameSpec::default()
        };
        emit_udp_frame(buf, &spec).unwrap()
    }

    /// `new` is usable in const context (tables can be built at compile time).
    static EMPTY: FlowTable<4> = FlowTable::new(DefaultAction::Drop);

    #[test]
    fn const_table() {
        assert_eq!(EMPTY.classify(&[0u8; 60]), Classified::NoFlow);
        assert_eq!(EMPTY.capacity(), 4);
    }

    #[test]
    fn first_match_and_default() {
        let mut t: FlowTable<4> = FlowTable::new(DefaultAction::Queue(QueueId(9)));
        let m = FlowMatch {
            udp_dst: Some(PortRange::single(5000)),
            ..FlowMatch::ANY
        };
        t.push(FlowRule {
            id: FlowId(1),
            matcher: m,
            action: FlowAction::Queue(QueueId(1)),
        })
        .unwrap();
        t.push(FlowRule {
            id: FlowId(2),
            matcher: FlowMatch {
                ipv4_src: Some(Ipv4Prefix::new([10, 0, 0, 0], 8)),
                ..FlowMatch::ANY
            },
            action: FlowAction::Drop,
        })
        .unwrap();
        let mut b = [0u8; 128];
        let n = frame(&mut b, 1, 5000);
        assert_eq!(
            t.classify(&b[..n]),
            Classified::Deliver {
                queue: QueueId(1),
                flow: FlowId(1)
            }
        );
        let n = frame(&mut b, 1, 5001);
        assert_eq!(t.classify(&b[..n]), Classified::FlowDrop);
        assert_eq!(t.classify(&b[..10]), Classified::Malformed);
        t.clear();
        assert_eq!(
            t.classify(&b[..n]),
            Classified::Deliver {
                queue: QueueId(9),
                flow: FlowId::NONE
            }
        );
    }
}
