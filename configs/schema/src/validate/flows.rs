//! `[[flows]]`: references, ids, match fields, actions, and what the engine can express.

use super::capacity::largest_frame;
use super::interfaces::{no_interface, no_rx_queue, rx_queue_index};
use super::{int, Draft, MAX_FLOWS_PER_INTERFACE};
use crate::error::Errors;
use crate::model::{Address, EngineKind, Flow, FlowOffload, InterfaceId, Steering, Transport};
use crate::parse;
use crate::schema::{RawConfig, RawFlow, RawInterface, RawMatch, RawWord};
use rtdaq_core::flow::{FlowAction, FlowMatch, FlowRule, WordBase, WordMatch, MAX_RSS_QUEUES};
use rtdaq_core::{FlowId, QueueId};
use std::collections::HashMap;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ECPRI: u16 = 0xAEFE;
/// Ethernet + IPv4 + UDP header bytes before a UDP payload.
const L2_TO_PAYLOAD: u32 = 42;

/// Converts every flow into the draft.
pub(super) fn flows(raw: &RawConfig, d: &mut Draft, errs: &mut Errors) {
    let mut ids: HashMap<(usize, i64), usize> = HashMap::new();
    let mut out = Vec::new();
    for (f, flow) in raw.flows.iter().enumerate() {
        let p = format!("flows[{f}]");
        let iface = interface_ref(raw, flow, d, &p, errs);
        let ifc = iface.map(|i| &raw.interfaces[i]);
        let classifies = iface.is_none_or(|i| interface_classifies(raw, d, i, &p, errs));
        let id = flow_id(flow, f, iface, &mut ids, &p, errs);
        let matcher = flow_match(&flow.matcher, &p, errs).filter(|m| {
            let a = consistent(m, &p, errs);
            let b = engine_expresses(raw.engine.kind, m, &p, errs);
            let c = iface.is_none_or(|i| word_within_frame(d, i, m, &p, errs));
            let e = dpdk_hardware_expresses(raw, m, &p, errs);
            a && b && c && e
        });
        let action = action(flow, ifc, &p, errs);
        if let (Some(m), Some(FlowAction::Rss(_))) = (&matcher, &action) {
            if !rss_hashable(m, &p, errs) {
                out.push(None);
                continue;
            }
        }
        out.push(match (iface, classifies, id, matcher, action) {
            (Some(i), true, Some(id), Some(matcher), Some(action)) => Some(Flow {
                interface: InterfaceId(i),
                rule: FlowRule {
                    id: FlowId(id),
                    matcher,
                    action,
                },
            }),
            _ => None,
        });
    }
    shadowed(raw, &out, errs);
    table_size(raw, d, errs);
    d.flows = out;
}

/// `interface` names an existing interface.
fn interface_ref(
    raw: &RawConfig,
    flow: &RawFlow,
    d: &Draft,
    p: &str,
    errs: &mut Errors,
) -> Option<usize> {
    let i = d.interface_index.get(&flow.interface).copied();
    if i.is_none() {
        errs.push(format!("{p}.interface"), no_interface(raw, &flow.interface));
    }
    i
}

/// The interface has something to classify: not a TCP byte stream, not RoCE.
fn interface_classifies(raw: &RawConfig, d: &Draft, i: usize, p: &str, errs: &mut Errors) -> bool {
    let name = &raw.interfaces[i].name;
    if let Some(Address::Socket(u)) = &d.interfaces[i].address {
        if u.transport == Transport::Tcp {
            errs.push(
                format!("{p}.interface"),
                format!(
                    "interface \"{name}\" is TCP, a byte stream: flows classify UDP datagrams or Ethernet frames; remove the flow"
                ),
            );
            return false;
        }
    }
    if super::caps(raw).steering == Steering::None {
        errs.push(
            format!("{p}.interface"),
            "engine.ibverbs.mode = \"roce\" delivers per connection and has no flow steering; remove the flow or use mode = \"raw\"",
        );
        return false;
    }
    true
}

/// Flow ids are 1..=2^32-1 (0 means "no match") and unique per interface.
fn flow_id(
    flow: &RawFlow,
    f: usize,
    iface: Option<usize>,
    ids: &mut HashMap<(usize, i64), usize>,
    p: &str,
    errs: &mut Errors,
) -> Option<u32> {
    let path = format!("{p}.id");
    if flow.id == 0 {
        errs.push(
            path,
            "flow id 0 means \"no flow matched\" in packet metadata; use 1 or more",
        );
        return None;
    }
    let id = int::<u32>(flow.id, 1, i64::from(u32::MAX), &path, "", errs)?;
    if let Some(i) = iface {
        if let Some(first) = ids.get(&(i, flow.id)) {
            errs.push(
                path,
                format!(
                    "duplicate flow id {} on interface \"{}\" (also flows[{first}]); flow ids are unique per interface",
                    flow.id, flow.interface
                ),
            );
            return None;
        }
        ids.insert((i, flow.id), f);
    }
    Some(id)
}

/// Parses every `[flows.match]` field, reporting each bad one.
fn flow_match(m: &RawMatch, p: &str, errs: &mut Errors) -> Option<FlowMatch> {
    let mp = format!("{p}.match");
    let mut ok = true;
    let mut out = FlowMatch::default();
    if let Some(e) = m.ethertype {
        let path = format!("{mp}.ethertype");
        match int::<u16>(
            e,
            0x0600,
            0xFFFF,
            &path,
            " (EtherType values start at 0x0600)",
            errs,
        ) {
            Some(0x8100) | Some(0x88A8) => {
                errs.push(
                    path,
                    format!(
                        "{e:#06x} is a VLAN tag type; ethertype matches the type after the tags: use vlan_id to match the tag"
                    ),
                );
                ok = false;
            }
            Some(v) => out.ethertype = Some(v),
            None => ok = false,
        }
    }
    if let Some(v) = m.vlan_id {
        out.vlan_id = int(
            v,
            1,
            4094,
            &format!("{mp}.vlan_id"),
            " (0 is a priority tag, 4095 is reserved)",
            errs,
        );
        ok &= out.vlan_id.is_some();
    }
    for (key, val, slot) in [
        ("ipv4_src", &m.ipv4_src, &mut out.ipv4_src),
        ("ipv4_dst", &m.ipv4_dst, &mut out.ipv4_dst),
    ] {
        if let Some(s) = val {
            match parse::ipv4_prefix(s) {
                Ok(pfx) => *slot = Some(pfx),
                Err(e) => {
                    errs.push(format!("{mp}.{key}"), e);
                    ok = false;
                }
            }
        }
    }
    if let Some(v) = m.ipv4_total_len {
        out.ipv4_total_len = int(
            v,
            20,
            65535,
            &format!("{mp}.ipv4_total_len"),
            " bytes (IPv4 header included)",
            errs,
        );
        ok &= out.ipv4_total_len.is_some();
    }
    for (key, val, slot) in [
        ("udp_src", &m.udp_src, &mut out.udp_src),
        ("udp_dst", &m.udp_dst, &mut out.udp_dst),
    ] {
        if let Some(v) = val {
            match parse::port_range(v) {
                Ok(r) => *slot = Some(r),
                Err(e) => {
                    errs.push(format!("{mp}.{key}"), e);
                    ok = false;
                }
            }
        }
    }
    if let Some(v) = m.ecpri_msg_type {
        out.ecpri_msg_type = int(v, 0, 255, &format!("{mp}.ecpri_msg_type"), "", errs);
        ok &= out.ecpri_msg_type.is_some();
    }
    if let Some(w) = &m.word {
        out.word = word(w, &format!("{mp}.word"), errs);
        ok &= out.word.is_some();
    }
    ok.then_some(out)
}

/// `word`: offset in range, a non-zero mask, and a value with no bits outside the mask.
fn word(w: &RawWord, p: &str, errs: &mut Errors) -> Option<WordMatch> {
    use crate::schema::RawWordBase;
    let offset = int::<u16>(w.offset, 0, 65531, &format!("{p}.offset"), " bytes", errs);
    let value = int::<u32>(
        w.value,
        0,
        0xFFFF_FFFF,
        &format!("{p}.value"),
        " (32-bit word)",
        errs,
    );
    let mask = if w.mask == 0 {
        errs.push(
            format!("{p}.mask"),
            "mask 0 ignores every bit, so the word matches every packet; remove word or set a non-zero mask",
        );
        None
    } else {
        int::<u32>(
            w.mask,
            1,
            0xFFFF_FFFF,
            &format!("{p}.mask"),
            " (32-bit mask)",
            errs,
        )
    };
    let (value, mask) = (value?, mask?);
    if value & !mask != 0 {
        errs.push(
            format!("{p}.value"),
            format!(
                "value {value:#010x} has bits outside mask {mask:#010x}, so the word can never match; clear them (value & mask = {:#010x})",
                value & mask
            ),
        );
        return None;
    }
    Some(WordMatch {
        base: match w.base {
            RawWordBase::Frame => WordBase::Frame,
            RawWordBase::UdpPayload => WordBase::UdpPayload,
        },
        offset: offset?,
        value,
        mask,
    })
}

/// Does the rule look at IPv4/UDP fields?
fn uses_ipv4(m: &FlowMatch) -> Option<&'static str> {
    if m.ipv4_src.is_some() {
        Some("ipv4_src")
    } else if m.ipv4_dst.is_some() {
        Some("ipv4_dst")
    } else if m.ipv4_total_len.is_some() {
        Some("ipv4_total_len")
    } else if m.udp_src.is_some() {
        Some("udp_src")
    } else if m.udp_dst.is_some() {
        Some("udp_dst")
    } else if m.word.is_some_and(|w| w.base == WordBase::UdpPayload) {
        Some("word (base \"udp_payload\")")
    } else {
        None
    }
}

/// The fields describe one kind of frame: eCPRI has no IPv4/UDP; IPv4/UDP fields need
/// EtherType 0x0800; eCPRI needs 0xAEFE.
fn consistent(m: &FlowMatch, p: &str, errs: &mut Errors) -> bool {
    let mut ok = true;
    let ip = uses_ipv4(m);
    if let (Some(_), Some(key)) = (m.ecpri_msg_type, ip) {
        errs.push(
            format!("{p}.match.ecpri_msg_type"),
            format!(
                "eCPRI frames (EtherType 0xAEFE) carry no IPv4/UDP headers, but the rule also matches {key}; split it into two flows or remove one"
            ),
        );
        ok = false;
    }
    if let Some(e) = m.ethertype {
        if m.ecpri_msg_type.is_some() && e != ETHERTYPE_ECPRI {
            errs.push(
                format!("{p}.match.ethertype"),
                format!("ethertype {e:#06x} contradicts ecpri_msg_type (eCPRI is 0xaefe); remove ethertype"),
            );
            ok = false;
        } else if let (Some(key), true) = (ip, e != ETHERTYPE_IPV4) {
            errs.push(
                format!("{p}.match.ethertype"),
                format!("ethertype {e:#06x} contradicts {key}, which needs IPv4 (0x0800); set ethertype = 0x0800 or remove it"),
            );
            ok = false;
        }
    }
    ok
}

/// Rules the engine cannot express: kernel steering (the socket engine) sees no Ethernet
/// header; NIC steering (dpdk, ibverbs) matches parsed fields and payload words via the flex
/// parser only.
fn engine_expresses(kind: EngineKind, m: &FlowMatch, p: &str, errs: &mut Errors) -> bool {
    let mut ok = true;
    // RoCE has no flows at all (refused before this).
    match kind.caps(false).steering {
        Steering::Kernel => {
            let l2 = [
                ("ethertype", m.ethertype.is_some()),
                ("vlan_id", m.vlan_id.is_some()),
                ("ecpri_msg_type", m.ecpri_msg_type.is_some()),
                ("word", m.word.is_some_and(|w| w.base == WordBase::Frame)),
            ];
            for (key, set) in l2 {
                if set {
                    let what = match key {
                        "word" => {
                            "a word at a frame offset (use base = \"udp_payload\")".to_owned()
                        }
                        "ethertype" if m.ethertype == Some(ETHERTYPE_IPV4) => {
                            "ethertype (it only ever sees IPv4, so 0x0800 is implied)".to_owned()
                        }
                        _ => key.to_owned(),
                    };
                    errs.push(
                        format!("{p}.match.{key}"),
                        format!(
                            "the socket engine receives UDP payloads, not Ethernet frames, so it cannot match {what}; remove it or use a raw engine (afpacket, afxdp, dpdk, ibverbs)"
                        ),
                    );
                    ok = false;
                }
            }
        }
        Steering::Nic => {
            if let Some(w) = m.word {
                if w.base == WordBase::Frame {
                    errs.push(
                        format!("{p}.match.word.base"),
                        format!(
                            "engine \"{kind}\" steers in NIC hardware, which matches parsed header fields, not a word at a frame offset; use base = \"udp_payload\" (flex parser) or engine afpacket/afxdp"
                        ),
                    );
                    ok = false;
                } else if w.offset % 4 != 0 || w.offset > 28 {
                    errs.push(
                        format!("{p}.match.word.offset"),
                        format!(
                            "engine \"{kind}\" matches payload words with the NIC flex parser: offset must be a multiple of 4 in 0..=28 (got {})",
                            w.offset
                        ),
                    );
                    ok = false;
                }
            }
        }
        Steering::Software | Steering::None => {}
    }
    ok
}

/// `engine.dpdk.flow_offload = "hardware"` needs every rule as an `rte_flow` rule; rtdaq
/// builds no `rte_flow` item for payload words or eCPRI (those stay software-only).
fn dpdk_hardware_expresses(raw: &RawConfig, m: &FlowMatch, p: &str, errs: &mut Errors) -> bool {
    let hardware = raw.engine.kind == EngineKind::Dpdk
        && raw.engine.dpdk.as_ref().map(|d| d.flow_offload) == Some(FlowOffload::Hardware);
    if !hardware {
        return true;
    }
    let what = if m.word.is_some() {
        Some(("word", "a payload word match"))
    } else if m.ecpri_msg_type.is_some() {
        Some(("ecpri_msg_type", "an eCPRI message type"))
    } else {
        None
    };
    let Some((key, what)) = what else {
        return true;
    };
    errs.push(
        format!("{p}.match.{key}"),
        format!(
            "engine.dpdk.flow_offload = \"hardware\" needs every flow as an rte_flow rule, but rtdaq cannot express {what} in rte_flow (such rules are classified in software only); set flow_offload = \"auto\" (rules before this one stay in hardware) or \"software\""
        ),
    );
    false
}

/// A `word` lies inside the largest frame (or datagram) the interface receives.
fn word_within_frame(d: &Draft, i: usize, m: &FlowMatch, p: &str, errs: &mut Errors) -> bool {
    let Some(w) = m.word else { return true };
    let Some((max, why)) = largest_frame(d.kind, &d.interfaces[i]) else {
        return true;
    };
    let end = u32::from(w.offset) + 4;
    let (limit, what) = match w.base {
        WordBase::Frame => (max, format!("the largest frame of {max} B ({why})")),
        WordBase::UdpPayload if d.kind.is_raw() => (
            max.saturating_sub(L2_TO_PAYLOAD),
            format!(
                "the largest UDP payload of {} B ({why}, − 42 B of headers)",
                max.saturating_sub(L2_TO_PAYLOAD)
            ),
        ),
        WordBase::UdpPayload => (max, format!("the largest datagram of {max} B ({why})")),
    };
    if end > limit {
        errs.push(
            format!("{p}.match.word.offset"),
            format!(
                "the word at offset {} ends at byte {end}, past {what}; it can never match",
                w.offset
            ),
        );
        return false;
    }
    true
}

/// Exactly one action; queue and RSS ids exist on the interface; RSS lists are 1..=32
/// distinct queues.
fn action(
    flow: &RawFlow,
    ifc: Option<&RawInterface>,
    p: &str,
    errs: &mut Errors,
) -> Option<FlowAction> {
    if flow.drop == Some(false) {
        errs.push(
            format!("{p}.drop"),
            "drop = false is not an action; remove it and set queue = <id> or rss = [ids], or write drop = true",
        );
        return None;
    }
    let set: Vec<&str> = [
        ("queue", flow.queue.is_some()),
        ("rss", flow.rss.is_some()),
        ("drop", flow.drop.is_some()),
    ]
    .into_iter()
    .filter_map(|(k, s)| s.then_some(k))
    .collect();
    match set.as_slice() {
        [] => {
            errs.push(
                p,
                "no action; add queue = <RX queue id>, rss = [<RX queue ids>] or drop = true",
            );
            return None;
        }
        [_] => {}
        many => {
            errs.push(
                p,
                format!(
                    "{} are {} set; a flow has exactly one action: keep one",
                    many.join(" and "),
                    if many.len() == 2 { "both" } else { "all" }
                ),
            );
            return None;
        }
    }
    if flow.drop.is_some() {
        return Some(FlowAction::Drop);
    }
    if let Some(q) = flow.queue {
        let ifc = ifc?;
        return match rx_queue_index(ifc, q) {
            Some(n) => Some(FlowAction::Queue(QueueId(n as u16))),
            None => {
                errs.push(format!("{p}.queue"), no_rx_queue(ifc, q));
                None
            }
        };
    }
    let list = flow.rss.as_deref().unwrap_or_default();
    rss(list, ifc, p, errs)
}

fn rss(list: &[i64], ifc: Option<&RawInterface>, p: &str, errs: &mut Errors) -> Option<FlowAction> {
    let path = format!("{p}.rss");
    if list.is_empty() || list.len() > MAX_RSS_QUEUES {
        errs.push(
            path,
            format!(
                "{} queues listed; RSS spreads over 1..={MAX_RSS_QUEUES} RX queues (use queue = N for one)",
                list.len()
            ),
        );
        return None;
    }
    let mut ok = true;
    let mut out: heapless::Vec<QueueId, MAX_RSS_QUEUES> = heapless::Vec::new();
    for (k, &q) in list.iter().enumerate() {
        let kp = format!("{path}[{k}]");
        if list[..k].contains(&q) {
            errs.push(
                kp,
                format!("queue id {q} is listed twice; each RSS queue appears once"),
            );
            ok = false;
            continue;
        }
        let Some(ifc) = ifc else { continue };
        match rx_queue_index(ifc, q) {
            Some(n) => ok &= out.push(QueueId(n as u16)).is_ok(),
            None => {
                errs.push(kp, no_rx_queue(ifc, q));
                ok = false;
            }
        }
    }
    (ok && ifc.is_some()).then_some(FlowAction::Rss(out))
}

/// RSS hashes the IPv4/UDP 5-tuple, so the rule must match IPv4 traffic.
fn rss_hashable(m: &FlowMatch, p: &str, errs: &mut Errors) -> bool {
    let what = if m.ecpri_msg_type.is_some() {
        Some("eCPRI frames".to_owned())
    } else {
        m.ethertype
            .filter(|&e| e != ETHERTYPE_IPV4)
            .map(|e| format!("ethertype {e:#06x} frames"))
    };
    if let Some(what) = what {
        errs.push(
            format!("{p}.rss"),
            format!("RSS hashes the IPv4/UDP 5-tuple, which {what} do not have; use queue = <id>"),
        );
        return false;
    }
    true
}

/// A rule after an identical one, or after a catch-all, on the same interface never matches.
fn shadowed(raw: &RawConfig, flows: &[Option<Flow>], errs: &mut Errors) {
    for (j, b) in flows.iter().enumerate() {
        let Some(b) = b else { continue };
        let earlier = flows[..j].iter().enumerate().find_map(|(i, a)| {
            let a = a.as_ref()?;
            (a.interface == b.interface
                && (a.rule.matcher == b.rule.matcher || a.rule.matcher == FlowMatch::default()))
            .then_some((i, a))
        });
        if let Some((i, a)) = earlier {
            let how = if a.rule.matcher == FlowMatch::default() {
                "has an empty match (every packet)"
            } else {
                "has the same match"
            };
            errs.push(
                format!("flows[{j}].match"),
                format!(
                    "flows[{j}] can never match: flows[{i}] (id {}) on interface \"{}\" {how} and comes first (first match wins); reorder or remove one",
                    a.rule.id.0, raw.interfaces[a.interface.0].name
                ),
            );
        }
    }
}

/// At most [`MAX_FLOWS_PER_INTERFACE`] flows per interface.
fn table_size(raw: &RawConfig, d: &Draft, errs: &mut Errors) {
    let mut count: HashMap<usize, usize> = HashMap::new();
    for (f, flow) in raw.flows.iter().enumerate() {
        let Some(&i) = d.interface_index.get(&flow.interface) else {
            continue;
        };
        let c = count.entry(i).or_default();
        *c += 1;
        if *c == MAX_FLOWS_PER_INTERFACE + 1 {
            errs.push(
                format!("flows[{f}]"),
                format!(
                    "interface \"{}\" has more than {MAX_FLOWS_PER_INTERFACE} flows (the flow table size); merge rules with prefixes or port ranges",
                    flow.interface
                ),
            );
        }
    }
}
