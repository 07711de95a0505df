//! The config's `[[flows]]` as `rte_flow` rules (`engine.dpdk.flow_offload`).
//!
//! Software classification ([`FlowTable`](rtdaq_core::flow::FlowTable) in every RX queue)
//! always runs: it assigns flow ids and counts drops. Offloaded rules additionally make the
//! NIC steer each frame to the queue its rule names (or drop it) before it reaches the host.
//!
//! ## Translation (one config flow → one or a few `rte_flow` rules)
//!
//! | config | `rte_flow` |
//! |---|---|
//! | the rule's position `p` among the interface's flows | `attr.priority = p` (lower first: first match wins), ingress, group 0 |
//! | `ethertype` (no VLAN, no IPv4/UDP field) | `ETH` with `type` (mask 0xffff); else an empty `ETH` |
//! | `vlan_id` (+ `ethertype`) | `VLAN` with `tci` = id under mask 0x0fff (+ `inner_type`) |
//! | `ipv4_src`, `ipv4_dst` prefixes, `ipv4_total_len` | `IPV4` with address/netmask, exact total length |
//! | `udp_src`, `udp_dst` | `UDP` with port/mask: a range becomes its minimal cover of aligned power-of-two blocks (`5000-5003` → `5000/0xfffc`; `5000-5002` → `5000/0xfffe`, `5002/0xffff`), one rule per (src block × dst block), at most [`MAX_EXPANSION`]; `spec`/`last` ranges are not used (few PMDs take them) |
//! | `queue` / `rss` / `drop` | `QUEUE` / `RSS` (IPv4 + UDP hash types, rtdaq's symmetric Toeplitz key) / `DROP` |
//! | `default_action` | after the flows, `attr.priority = n`: an empty `ETH` → its queue or `DROP` (only when every flow of the interface is in hardware) |
//!
//! Software-only (never `rte_flow`): `word` (payload words) and `ecpri_msg_type`, and port
//! ranges needing more than [`MAX_EXPANSION`] rules.
//!
//! ## Modes
//! - `hardware`: every flow (and the default action) must be accepted, else `open` fails
//!   with [`DpdkEngineError::FlowOffload`] naming `flows[k]`, its match and the PMD's reason.
//! - `auto` (default): flows are offloaded in order; from the first one that is
//!   software-only or refused, that flow and every later one (and the default action) stay
//!   in software — the earlier ones keep steering, which preserves first-match order. One
//!   warning names the flow and the reason.
//! - `software`: no `rte_flow` at all.
//!
//! Frames a hardware `DROP` rule drops never reach the host, so they are in no queue
//! counter (`flow_drop` / `no_flow` count only what software drops).

use std::fmt::Write as _;

use rtdaq_config::model::FlowOffload;
use rtdaq_config::model::InterfaceId;
use rtdaq_config::Config;
use rtdaq_core::flow::{
    DefaultAction, FlowAction as CfgAction, FlowMatch, FlowRule as CfgRule, PortRange, WordBase,
    RSS_KEY_SYMMETRIC,
};
use rtdaq_dpdk_sys::{DpdkError, FlowItem, FlowRule, FlowSpec, Port};

use crate::error::{DpdkEngineError, Result};

/// Most `rte_flow` rules one config flow may expand to (UDP port ranges).
pub const MAX_EXPANSION: usize = 16;

const ETHERTYPE_IPV4: u16 = 0x0800;

/// One config flow of an interface, planned as `rte_flow` rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFlow {
    /// `k` of `flows[k]` in the config.
    pub index: usize,
    /// The flow in config terms (`id 1: udp_dst=5000 -> rx_queues[1]`).
    pub rule: String,
    /// The `rte_flow` rules, or why the flow cannot be one (software-only).
    pub specs: std::result::Result<Vec<FlowSpec>, String>,
}

/// What [`offload`] did on one port.
#[derive(Debug, Default)]
pub(crate) struct Offloaded {
    /// The created rules (destroyed when the last holder drops them).
    pub(crate) rules: Vec<FlowRule>,
    /// Config flows steered in hardware (a prefix of the interface's flows).
    pub(crate) flows: usize,
    /// Whether the default action is a hardware rule too.
    pub(crate) default_action: bool,
}

/// The minimal cover of `r` by aligned power-of-two blocks, as (value, mask); the full
/// range 0..=65535 is one block with mask 0.
pub fn port_blocks(r: PortRange) -> Vec<(u16, u16)> {
    let (mut lo, hi) = (u32::from(r.lo), u32::from(r.hi));
    let mut out = Vec::new();
    while lo <= hi {
        // The largest block starting at lo (alignment) that stays within hi.
        let mut size = if lo == 0 {
            1 << 16
        } else {
            1u32 << lo.trailing_zeros()
        };
        while lo + size - 1 > hi {
            size >>= 1;
        }
        let mask = !(size - 1) & 0xffff;
        out.push((lo as u16, mask as u16));
        lo += size;
    }
    out
}

fn prefix(p: Option<rtdaq_core::flow::Ipv4Prefix>) -> Option<(u32, u32)> {
    p.filter(|p| p.len > 0)
        .map(|p| (u32::from_be_bytes(p.addr), p.mask()))
}

fn blocks(r: Option<PortRange>) -> Vec<Option<(u16, u16)>> {
    match r {
        None => vec![None],
        Some(r) => port_blocks(r)
            .into_iter()
            .map(|(v, m)| (m != 0).then_some((v, m)))
            .collect(),
    }
}

/// `m` → `a` as `rte_flow` rules of priority `priority`, or why it cannot be.
///
/// # Errors
/// The reason the rule is software-only.
pub fn translate(
    m: &FlowMatch,
    a: &CfgAction,
    priority: u32,
) -> std::result::Result<Vec<FlowSpec>, String> {
    if let Some(w) = m.word {
        let base = match w.base {
            WordBase::Frame => "frame",
            WordBase::UdpPayload => "udp_payload",
        };
        return Err(format!(
            "it matches a word at {base} offset {} (rtdaq builds no rte_flow RAW/flex item: software-only)",
            w.offset
        ));
    }
    if m.ecpri_msg_type.is_some() {
        return Err(
            "it matches an eCPRI message type (rtdaq builds no rte_flow ECPRI item: software-only)"
                .to_owned(),
        );
    }
    let (src, dst) = (blocks(m.udp_src), blocks(m.udp_dst));
    let n = src.len() * dst.len();
    if n > MAX_EXPANSION {
        return Err(format!(
            "its UDP port ranges need {n} rte_flow rules (aligned port/mask blocks), more than {MAX_EXPANSION}: software-only; split the range or align it to powers of two"
        ));
    }
    let udp = m.udp_src.is_some() || m.udp_dst.is_some();
    let ipv4 = udp || m.ipv4_src.is_some() || m.ipv4_dst.is_some() || m.ipv4_total_len.is_some();
    let mut head = FlowSpec::ingress(priority);
    match m.vlan_id {
        Some(vid) => {
            head = head
                .item(FlowItem::Eth { ether_type: None })
                .item(FlowItem::Vlan {
                    vid,
                    inner_type: m.ethertype.filter(|_| !ipv4),
                });
        }
        None => {
            head = head.item(FlowItem::Eth {
                ether_type: m.ethertype.filter(|&e| !(ipv4 && e == ETHERTYPE_IPV4)),
            });
        }
    }
    if ipv4 {
        head = head.item(FlowItem::Ipv4 {
            src: prefix(m.ipv4_src),
            dst: prefix(m.ipv4_dst),
            total_len: m.ipv4_total_len,
        });
    }
    let mut out = Vec::with_capacity(n);
    for s in &src {
        for d in &dst {
            let mut spec = head.clone();
            if udp {
                spec = spec.item(FlowItem::Udp { src: *s, dst: *d });
            }
            out.push(action(spec, a));
        }
    }
    Ok(out)
}

fn action(spec: FlowSpec, a: &CfgAction) -> FlowSpec {
    match a {
        CfgAction::Queue(q) => spec.queue(q.0),
        CfgAction::Rss(qs) => {
            let qs: Vec<u16> = qs.iter().map(|q| q.0).collect();
            spec.rss(&qs, &RSS_KEY_SYMMETRIC)
        }
        CfgAction::Drop => spec.drop_all(),
    }
}

/// The default action as the lowest-priority catch-all rule.
fn default_spec(d: DefaultAction, priority: u32) -> FlowSpec {
    let s = FlowSpec::ingress(priority).item(FlowItem::Eth { ether_type: None });
    match d {
        DefaultAction::Queue(q) => s.queue(q.0),
        DefaultAction::Drop => s.drop_all(),
    }
}

/// A config flow in config terms: `id 3: vlan_id=5 udp_dst=5000-5003 -> rx_queues[1]`.
pub fn describe(r: &CfgRule) -> String {
    let m = &r.matcher;
    let mut s = format!("id {}:", r.id.0);
    let range = |p: PortRange| {
        if p.lo == p.hi {
            p.lo.to_string()
        } else {
            format!("{}-{}", p.lo, p.hi)
        }
    };
    if let Some(e) = m.ethertype {
        let _ = write!(s, " ethertype={e:#06x}");
    }
    if let Some(v) = m.vlan_id {
        let _ = write!(s, " vlan_id={v}");
    }
    for (k, p) in [("ipv4_src", m.ipv4_src), ("ipv4_dst", m.ipv4_dst)] {
        if let Some(p) = p {
            let [a, b, c, d] = p.addr;
            let _ = write!(s, " {k}={a}.{b}.{c}.{d}/{}", p.len);
        }
    }
    if let Some(l) = m.ipv4_total_len {
        let _ = write!(s, " ipv4_total_len={l}");
    }
    for (k, p) in [("udp_src", m.udp_src), ("udp_dst", m.udp_dst)] {
        if let Some(p) = p {
            let _ = write!(s, " {k}={}", range(p));
        }
    }
    if let Some(t) = m.ecpri_msg_type {
        let _ = write!(s, " ecpri_msg_type={t}");
    }
    if let Some(w) = m.word {
        let _ = write!(
            s,
            " word={{offset {}, value {:#x}, mask {:#x}}}",
            w.offset, w.value, w.mask
        );
    }
    if *m == FlowMatch::ANY {
        s.push_str(" (any frame)");
    }
    match &r.action {
        CfgAction::Queue(q) => {
            let _ = write!(s, " -> rx_queues[{}]", q.0);
        }
        CfgAction::Rss(qs) => {
            let qs: Vec<u16> = qs.iter().map(|q| q.0).collect();
            let _ = write!(s, " -> rss over rx_queues {qs:?}");
        }
        CfgAction::Drop => s.push_str(" -> drop"),
    }
    s
}

/// The flows of interface `i` in match order, planned as `rte_flow` rules. Pure: runs
/// before the EAL starts.
pub fn plan_interface(cfg: &Config, i: usize) -> Vec<PlannedFlow> {
    cfg.flows
        .iter()
        .enumerate()
        .filter(|(_, f)| f.interface == InterfaceId(i))
        .enumerate()
        .map(|(p, (k, f))| PlannedFlow {
            index: k,
            rule: describe(&f.rule),
            specs: translate(&f.rule.matcher, &f.rule.action, p as u32),
        })
        .collect()
}

/// [`plan_interface`] for every interface; with `hardware`, a software-only flow is an
/// error here, before the EAL starts.
pub(crate) fn plan_all(cfg: &Config, mode: FlowOffload) -> Result<Vec<Vec<PlannedFlow>>> {
    let plans: Vec<Vec<PlannedFlow>> = (0..cfg.interfaces.len())
        .map(|i| plan_interface(cfg, i))
        .collect();
    if mode == FlowOffload::Hardware {
        for (i, plan) in plans.iter().enumerate() {
            if let Some((f, why)) = plan
                .iter()
                .find_map(|f| f.specs.as_ref().err().map(|w| (f, w)))
            {
                return Err(refusal(
                    format!("flows[{}]", f.index),
                    f.rule.clone(),
                    &format!("of interfaces[{i}] ({})", cfg.interfaces[i].address),
                    format!("engine.dpdk.flow_offload = \"hardware\" but it cannot be an rte_flow rule: {why} — set flow_offload = \"auto\" (software classification from this flow on) or \"software\""),
                    None,
                ));
            }
        }
    }
    Ok(plans)
}

/// A `hardware`-mode error, or the text of an `auto`-mode warning.
fn refusal(
    key: String,
    rule: String,
    port: &str,
    detail: String,
    source: Option<Box<DpdkError>>,
) -> DpdkEngineError {
    DpdkEngineError::FlowOffload {
        key,
        rule,
        port: port.to_owned(),
        detail,
        source,
    }
}

/// Why creating `specs` failed, as text for an error or warning.
fn pmd_detail(spec: &FlowSpec, e: &DpdkError) -> String {
    let hint = match e {
        DpdkError::Flow { errno: 38, .. } => "this PMD has no rte_flow support at all",
        _ => "the PMD could not set this rule up",
    };
    format!("the PMD refused it as rte_flow rule [{spec}] ({hint}): {e}")
}

/// Creates every `spec` of one flow on `port`, all or none.
fn create_all(
    port: &Port,
    specs: &[FlowSpec],
) -> std::result::Result<Vec<FlowRule>, (String, Box<DpdkError>)> {
    let mut made = Vec::with_capacity(specs.len());
    for s in specs {
        match FlowRule::create(port, s) {
            Ok(r) => made.push(r),
            Err(e) => return Err((pmd_detail(s, &e), Box::new(e))),
        }
    }
    Ok(made)
}

/// Installs the flows of interface `i` on its started `port` as `mode` asks; see the module
/// docs. Cold path (it logs the one `auto` warning).
///
/// # Errors
/// `hardware` only: [`DpdkEngineError::FlowOffload`] naming the first flow (or the default
/// action) that is software-only or that the PMD refused.
pub(crate) fn offload(
    cfg: &Config,
    i: usize,
    port: &Port,
    mode: FlowOffload,
    plan: &[PlannedFlow],
) -> Result<Offloaded> {
    let mut done = Offloaded::default();
    if mode == FlowOffload::Software || plan.is_empty() {
        return Ok(done);
    }
    let name = port.name().to_owned();
    let driver = port.info().map(|x| x.driver).unwrap_or_default();
    let port_desc = format!("\"{name}\" (PMD {driver})");
    let hardware = mode == FlowOffload::Hardware;
    for (p, f) in plan.iter().enumerate() {
        let key = format!("flows[{}]", f.index);
        let failure = match &f.specs {
            Err(why) => (
                format!(
                    "engine.dpdk.flow_offload = \"{}\" but it cannot be an rte_flow rule: {why}",
                    mode.as_str()
                ),
                None,
            ),
            Ok(specs) => match create_all(port, specs) {
                Ok(made) => {
                    done.rules.extend(made);
                    done.flows += 1;
                    continue;
                }
                Err((detail, e)) => (detail, Some(e)),
            },
        };
        let (detail, source) = failure;
        if hardware {
            let detail = format!("engine.dpdk.flow_offload = \"hardware\": {detail} — set flow_offload = \"auto\" (software classification from this flow on) or \"software\", or use a NIC whose PMD takes it");
            return Err(refusal(key, f.rule.clone(), &port_desc, detail, source));
        }
        let rest = plan.len() - p;
        log::warn!(
            "{key} ({}) on DPDK port {port_desc}: stays in software classification: {detail}; engine.dpdk.flow_offload = \"auto\" so it and the {} flow(s) after it on interfaces[{i}] are classified in software only ({p} before it steer in hardware)",
            f.rule,
            rest - 1
        );
        return Ok(done);
    }
    let n = plan.len() as u32;
    let spec = default_spec(cfg.default_action(i), n);
    match FlowRule::create(port, &spec) {
        Ok(r) => {
            done.rules.push(r);
            done.default_action = true;
        }
        Err(e) => {
            let key = format!("interfaces[{i}].default_action");
            let rule = match cfg.default_action(i) {
                DefaultAction::Queue(q) => format!("unmatched frames -> rx_queues[{}]", q.0),
                DefaultAction::Drop => "unmatched frames -> drop".to_owned(),
            };
            let detail = pmd_detail(&spec, &e);
            if hardware {
                let detail = format!("engine.dpdk.flow_offload = \"hardware\": {detail} — set flow_offload = \"auto\" or \"software\"");
                return Err(refusal(key, rule, &port_desc, detail, Some(Box::new(e))));
            }
            log::warn!(
                "{key} ({rule}) on DPDK port {port_desc}: stays in software classification: {detail}; the {} flow(s) of interfaces[{i}] steer in hardware",
                done.flows
            );
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtdaq_core::flow::Ipv4Prefix;
    use rtdaq_core::{FlowId, QueueId};

    #[test]
    fn port_ranges_become_minimal_aligned_blocks() {
        assert_eq!(port_blocks(PortRange::single(5000)), [(5000, 0xffff)]);
        assert_eq!(port_blocks(PortRange::new(5000, 5003)), [(5000, 0xfffc)]);
        assert_eq!(
            port_blocks(PortRange::new(5000, 5002)),
            [(5000, 0xfffe), (5002, 0xffff)]
        );
        assert_eq!(port_blocks(PortRange::ANY), [(0, 0)]);
        assert_eq!(port_blocks(PortRange::new(32768, 65535)), [(32768, 0x8000)]);
        // every block lies in the range and together they cover it exactly
        for (lo, hi) in [(1u16, 65535u16), (1000, 1999), (7, 9), (65535, 65535)] {
            let b = port_blocks(PortRange::new(lo, hi));
            let covered: u32 = b.iter().map(|&(_, m)| (!m as u32 & 0xffff) + 1).sum();
            assert_eq!(covered, u32::from(hi - lo) + 1, "{lo}-{hi}: {b:?}");
            for &(v, m) in &b {
                assert_eq!(v & !m, 0, "aligned");
                assert!(v >= lo && (v | !m) <= hi, "{lo}-{hi}: {v}/{m:#x}");
            }
        }
        assert_eq!(port_blocks(PortRange::new(1, 65535)).len(), 16);
    }

    #[test]
    fn rules_translate_to_patterns_and_actions() {
        let m = FlowMatch {
            ipv4_dst: Some(Ipv4Prefix::new([169, 254, 0, 0], 16)),
            udp_dst: Some(PortRange::new(5000, 5002)),
            ..FlowMatch::ANY
        };
        let s = translate(&m, &CfgAction::Queue(QueueId(1)), 3).unwrap();
        let text: Vec<String> = s.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "prio 3: eth / ipv4 dst 169.254.0.0/255.255.0.0 / udp dst 5000/0xfffe -> queue 1",
                "prio 3: eth / ipv4 dst 169.254.0.0/255.255.0.0 / udp dst 5002 -> queue 1",
            ]
        );
        let v = FlowMatch {
            vlan_id: Some(5),
            ethertype: Some(0x88b5),
            ..FlowMatch::ANY
        };
        assert_eq!(
            translate(&v, &CfgAction::Drop, 0).unwrap()[0].to_string(),
            "prio 0: eth / vlan vid 5 inner_type 0x88b5 -> drop"
        );
        let e = FlowMatch {
            ethertype: Some(0x0800),
            ..FlowMatch::ANY
        };
        assert_eq!(
            translate(&e, &CfgAction::Queue(QueueId(0)), 1).unwrap()[0].to_string(),
            "prio 1: eth type 0x0800 -> queue 0"
        );
        let mut qs = heapless::Vec::new();
        qs.push(QueueId(0)).unwrap();
        qs.push(QueueId(1)).unwrap();
        let r = translate(&FlowMatch::ANY, &CfgAction::Rss(qs), 0).unwrap();
        assert_eq!(r[0].to_string(), "prio 0: eth -> rss queues [0, 1]");
    }

    #[test]
    fn payload_words_ecpri_and_wide_ranges_are_software_only() {
        let w = FlowMatch {
            word: Some(rtdaq_core::flow::WordMatch {
                base: WordBase::UdpPayload,
                offset: 4,
                value: 2,
                mask: 0xffff,
            }),
            ..FlowMatch::ANY
        };
        let e = translate(&w, &CfgAction::Drop, 0).unwrap_err();
        assert!(e.contains("software-only") && e.contains("word"), "{e}");
        let c = FlowMatch {
            ecpri_msg_type: Some(2),
            ..FlowMatch::ANY
        };
        assert!(translate(&c, &CfgAction::Drop, 0)
            .unwrap_err()
            .contains("eCPRI"));
        let r = FlowMatch {
            udp_src: Some(PortRange::new(1, 65535)),
            udp_dst: Some(PortRange::new(5000, 5002)),
            ..FlowMatch::ANY
        };
        let e = translate(&r, &CfgAction::Drop, 0).unwrap_err();
        assert!(e.contains("need 32 rte_flow rules"), "{e}");
    }

    #[test]
    fn flows_are_described_in_config_terms() {
        let r = CfgRule {
            id: FlowId(3),
            matcher: FlowMatch {
                ipv4_src: Some(Ipv4Prefix::new([169, 254, 1, 0], 24)),
                udp_dst: Some(PortRange::new(5000, 5003)),
                ..FlowMatch::ANY
            },
            action: CfgAction::Queue(QueueId(1)),
        };
        assert_eq!(
            describe(&r),
            "id 3: ipv4_src=169.254.1.0/24 udp_dst=5000-5003 -> rx_queues[1]"
        );
    }
}
