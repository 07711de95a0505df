//! `[[interfaces]]`: names, addresses by form and by engine, MTU, TCP keys, default action.

use super::{int, queues, quoted, unknown_name, Draft, DraftInterface};
use crate::error::Errors;
use crate::model::{Address, EngineKind, TcpRole, Transport};
use crate::parse::{self, is_identifier};
use crate::schema::{IntOrStr, RawConfig, RawInterface};
use rtdaq_core::flow::DefaultAction;
use rtdaq_core::QueueId;

/// Converts every interface with its queues into the draft.
pub(super) fn interfaces(raw: &RawConfig, d: &mut Draft, errs: &mut Errors) {
    let kind = raw.engine.kind;
    for (i, iface) in raw.interfaces.iter().enumerate() {
        let p = format!("interfaces[{i}]");
        unique_name(iface, i, d, &p, errs);
        d.interface_index.entry(iface.name.clone()).or_insert(i);
        let address = address(iface, kind, &p, errs);
        let transport = match &address {
            Some(Address::Socket(u)) => Some(u.transport),
            _ => None,
        };
        let mtu = mtu(iface, kind, &p, errs);
        let role_ok = role(iface, kind, transport, &p, errs);
        let connections = connections(iface, transport, &p, errs);
        let max_message_size = max_message_size(iface, kind, transport, &p, errs);
        has_queues(iface, &p, errs);
        let rx = iface
            .rx_queues
            .iter()
            .enumerate()
            .map(|(q, rq)| queues::rx_queue(rq, i, q, iface, raw, d, errs))
            .collect();
        let tx = iface
            .tx_queues
            .iter()
            .enumerate()
            .map(|(q, tq)| queues::tx_queue(tq, i, q, iface, raw, d, errs))
            .collect();
        let default_action = default_action(iface, &p, errs);
        let format = super::format::format(iface.format.as_ref(), &p, errs);
        let raw_multicast = super::multicast::raw_multicast(iface, address.as_ref(), &p, errs);
        // A raw interface's groups: its multicast keys are checked there.
        let raw_groups = iface.multicast_groups.is_some()
            && matches!(
                address,
                Some(crate::model::Address::Netdev(_) | crate::model::Address::Pci(_))
            );
        let multicast = if raw_groups {
            Some(None)
        } else {
            super::multicast::multicast(iface, address.as_ref(), &p, errs)
        };
        d.interfaces.push(DraftInterface {
            name: iface.name.clone(),
            address,
            mtu,
            role: if role_ok { iface.role } else { None },
            connections: if role_ok { connections } else { None },
            max_message_size,
            rx,
            tx,
            default_action,
            format,
            multicast,
            raw_multicast,
            flow_control: iface.flow_control,
            max_streams: max_streams(iface, &p, errs),
        });
    }
    duplicate_addresses(raw, d, errs);
}

/// Interface names are plain identifiers and unique.
fn unique_name(iface: &RawInterface, i: usize, d: &Draft, p: &str, errs: &mut Errors) {
    if !is_identifier(&iface.name) {
        errs.push(
            format!("{p}.name"),
            format!(
                "{:?} is not a plain name; use 1..=64 letters, digits, '_' or '-'",
                iface.name
            ),
        );
    } else if let Some(first) = d.interface_index.get(&iface.name).filter(|&&f| f != i) {
        errs.push(
            format!("{p}.name"),
            format!(
                "duplicate interface name \"{}\" (first defined at interfaces[{first}]); rename one",
                iface.name
            ),
        );
    }
}

/// The address parses, and its form suits the engine: sockets need a URI, raw engines a
/// netdev or PCI address.
fn address(iface: &RawInterface, kind: EngineKind, p: &str, errs: &mut Errors) -> Option<Address> {
    let path = format!("{p}.address");
    let a = match parse::address(&iface.address) {
        Ok(a) => a,
        Err(m) => {
            errs.push(path, m);
            return None;
        }
    };
    match (&a, kind) {
        (Address::Socket(u), EngineKind::Ibverbs) if u.transport == Transport::Rdma => Some(a),
        (Address::Socket(u), k) if u.transport == Transport::Rdma => {
            errs.push(
                path,
                format!("rdma:// is an RDMA CM endpoint for engine \"ibverbs\" with mode = \"roce\", not engine \"{k}\""),
            );
            None
        }
        (Address::Socket(_), EngineKind::Socket) => Some(a),
        (_, EngineKind::Socket) => {
            errs.push(
                path,
                format!(
                    "engine \"socket\" needs a socket URI such as \"udp://127.0.0.1:5000\" or \"tcp://127.0.0.1:6000\", not the port {:?}; use a raw engine (afpacket, afxdp, dpdk, ibverbs) for netdevs and PCI addresses",
                    iface.address
                ),
            );
            None
        }
        (Address::Socket(_), k) => {
            errs.push(
                path,
                format!(
                    "engine \"{k}\" works on a netdev (\"eth0\") or PCI address (\"0000:17:00.0\"), not a socket URI; use engine.kind = \"socket\" for sockets"
                ),
            );
            None
        }
        _ => Some(a),
    }
}

/// MTU within Ethernet limits (jumbo up to 9600 for raw engines; up to 65535 for sockets,
/// which includes loopback).
fn mtu(iface: &RawInterface, kind: EngineKind, p: &str, errs: &mut Errors) -> Option<u32> {
    let hi = if kind.is_raw() { 9600 } else { 65535 };
    int::<u32>(
        iface.mtu,
        68,
        hi,
        &format!("{p}.mtu"),
        " bytes (IPv4 minimum 68)",
        errs,
    )
}

/// Streams each RX queue tracks (its validator's table, preallocated).
fn max_streams(iface: &RawInterface, p: &str, errs: &mut Errors) -> Option<u32> {
    use crate::model::{DEFAULT_MAX_STREAMS, MAX_STREAMS_LIMIT};
    int::<u32>(
        iface.max_streams.unwrap_or(i64::from(DEFAULT_MAX_STREAMS)),
        1,
        i64::from(MAX_STREAMS_LIMIT),
        &format!("{p}.max_streams"),
        " streams per RX queue (each one sequence window: 1.2 KiB of the queue's table, preallocated); packets of streams beyond it are counted as streams_overflow and as lost",
        errs,
    )
}

/// `role` is required for `tcp://` and meaningless anywhere else.
fn role(
    iface: &RawInterface,
    kind: EngineKind,
    transport: Option<Transport>,
    p: &str,
    errs: &mut Errors,
) -> bool {
    match (transport, iface.role) {
        (Some(t @ (Transport::Tcp | Transport::Rdma)), None) => {
            errs.push(
                format!("{p}.role"),
                format!(
                    "a {}:// interface needs role = \"server\" (listen) or \"client\" (connect)",
                    t.as_str()
                ),
            );
            false
        }
        (Some(Transport::Udp), Some(_)) => {
            errs.push(
                format!("{p}.role"),
                "role applies to tcp:// interfaces only; UDP is connectionless: remove it",
            );
            false
        }
        (None, Some(_)) if kind.is_raw() => {
            errs.push(
                format!("{p}.role"),
                format!("role applies to tcp:// interfaces of the socket engine, not engine \"{kind}\"; remove it"),
            );
            false
        }
        _ => true,
    }
}

/// `connections` (TCP only): how many connections a server accepts or a client opens;
/// a server needs no more RX queues than connections.
fn connections(
    iface: &RawInterface,
    transport: Option<Transport>,
    p: &str,
    errs: &mut Errors,
) -> Option<u32> {
    let path = format!("{p}.connections");
    match (transport, iface.connections) {
        (Some(Transport::Tcp | Transport::Rdma), c) => {
            let n = int::<u32>(c.unwrap_or(1), 1, 1024, &path, " connections", errs)?;
            let rx = iface.rx_queues.len();
            if iface.role == Some(TcpRole::Server) && rx as u64 > u64::from(n) {
                errs.push(
                    path,
                    format!(
                        "{rx} RX queues but connections = {n}: each connection is served by one RX queue (round robin), so {} queue(s) would never receive; raise connections or remove queues",
                        rx as u64 - u64::from(n)
                    ),
                );
                return None;
            }
            Some(n)
        }
        (_, Some(_)) => {
            errs.push(
                path,
                "connections applies to tcp:// interfaces only; remove it",
            );
            None
        }
        (_, None) => Some(0),
    }
}

/// `max_message_size` (socket engine): the largest datagram (UDP ≤ 65507) or message (TCP).
fn max_message_size(
    iface: &RawInterface,
    kind: EngineKind,
    transport: Option<Transport>,
    p: &str,
    errs: &mut Errors,
) -> Option<Option<u32>> {
    let Some(v) = iface.max_message_size else {
        return Some(None);
    };
    let path = format!("{p}.max_message_size");
    if kind.is_raw() {
        errs.push(
            path,
            format!("max_message_size applies to the socket engine; engine \"{kind}\" receives whole frames sized by mtu: remove it"),
        );
        return None;
    }
    let (hi, why) = match transport {
        Some(Transport::Tcp) => (16 << 20, " bytes per TCP message"),
        _ => (65507, " bytes (largest UDP payload over IPv4)"),
    };
    int::<u32>(v, 1, hi, &path, why, errs).map(Some)
}

/// An interface has at least one queue.
fn has_queues(iface: &RawInterface, p: &str, errs: &mut Errors) {
    if iface.rx_queues.is_empty() && iface.tx_queues.is_empty() {
        errs.push(
            p,
            format!(
                "interface \"{}\" has no rx_queues and no tx_queues; add a [[interfaces.rx_queues]] table or remove the interface",
                iface.name
            ),
        );
    }
}

/// `default_action`: an RX queue id of this interface or `"drop"`; by default the first RX
/// queue, or drop when there is none.
fn default_action(iface: &RawInterface, p: &str, errs: &mut Errors) -> Option<DefaultAction> {
    let path = format!("{p}.default_action");
    match &iface.default_action {
        None => Some(if iface.rx_queues.is_empty() {
            DefaultAction::Drop
        } else {
            DefaultAction::Queue(QueueId(0))
        }),
        Some(IntOrStr::Str(s)) if s == "drop" => Some(DefaultAction::Drop),
        Some(IntOrStr::Str(s)) => {
            let hint = if crate::suggest::closest(s, &["drop"]).is_some() {
                "did you mean \"drop\"? "
            } else {
                ""
            };
            errs.push(
                path,
                format!("{s:?} is not an action; {hint}use an RX queue id (integer) or \"drop\""),
            );
            None
        }
        Some(IntOrStr::Int(id)) => match rx_queue_index(iface, *id) {
            Some(q) => Some(DefaultAction::Queue(QueueId(q as u16))),
            None => {
                errs.push(path, no_rx_queue(iface, *id));
                None
            }
        },
    }
}

/// Index of the RX queue with raw id `id` on `iface`.
pub(super) fn rx_queue_index(iface: &RawInterface, id: i64) -> Option<usize> {
    iface.rx_queues.iter().position(|q| q.id == id)
}

/// Index of the TX queue with raw id `id` on `iface`.
pub(super) fn tx_queue_index(iface: &RawInterface, id: i64) -> Option<usize> {
    iface.tx_queues.iter().position(|q| q.id == id)
}

/// "interface "x" has no RX queue with id N (RX queue ids: ...)".
pub(super) fn no_rx_queue(iface: &RawInterface, id: i64) -> String {
    let ids: Vec<String> = iface.rx_queues.iter().map(|q| q.id.to_string()).collect();
    format!(
        "interface \"{}\" has no RX queue with id {id} (RX queue ids: {})",
        iface.name,
        if ids.is_empty() {
            "none".into()
        } else {
            ids.join(", ")
        }
    )
}

/// "no interface named "x" (known: ...)".
pub(super) fn no_interface(raw: &RawConfig, name: &str) -> String {
    let known: Vec<&str> = raw.interfaces.iter().map(|i| i.name.as_str()).collect();
    unknown_name("interface", name, &known)
}

/// Two interfaces never share an address (use several queues on one interface instead). A
/// TCP server and a TCP client may share one (the client connects to the server).
fn duplicate_addresses(raw: &RawConfig, d: &Draft, errs: &mut Errors) {
    for (j, b) in d.interfaces.iter().enumerate() {
        let Some(addr_b) = &b.address else { continue };
        let clash = d.interfaces[..j].iter().enumerate().find(|(_, a)| {
            a.address.as_ref() == Some(addr_b)
                && !(matches!(addr_b, Address::Socket(u) if u.transport == Transport::Tcp)
                    && a.role.is_some()
                    && b.role.is_some()
                    && a.role != b.role)
        });
        if let Some((i, _)) = clash {
            errs.push(
                format!("interfaces[{j}].address"),
                format!(
                    "same address as interfaces[{i}] ({}); one interface per port: add queues to interfaces[{i}] instead",
                    quoted([raw.interfaces[i].address.as_str()])
                ),
            );
        }
    }
}
