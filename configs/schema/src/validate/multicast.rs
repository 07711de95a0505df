//! IPv4 multicast of socket UDP interfaces: `address = "udp://<group>:<port>"` with the
//! group in 224.0.0.0/4, and the `multicast_*` keys; and `multicast_groups` of raw-engine
//! interfaces.

use super::int;
use crate::error::Errors;
use crate::model::{Address, Multicast, RawMulticast, Transport};
use crate::schema::RawInterface;
use std::net::Ipv4Addr;

/// The interface's multicast settings: `Some(None)` for a unicast address without
/// `multicast_*` keys, `None` on an error.
pub(super) fn multicast(
    iface: &RawInterface,
    address: Option<&Address>,
    p: &str,
    errs: &mut Errors,
) -> Option<Option<Multicast>> {
    let keys = [
        ("multicast_interface", iface.multicast_interface.is_some()),
        ("multicast_sources", iface.multicast_sources.is_some()),
        ("multicast_ttl", iface.multicast_ttl.is_some()),
        ("multicast_loop", iface.multicast_loop.is_some()),
    ];
    if iface.multicast_groups.is_some() && matches!(address, Some(Address::Socket(_))) {
        errs.push(
            format!("{p}.multicast_groups"),
            "is for raw-engine interfaces (a netdev or PCI address); a socket interface joins the group of its udp:// address: give the group there (\"udp://239.1.2.3:7200\")",
        );
        return None;
    }
    let group = match address {
        Some(Address::Socket(u)) if u.transport == Transport::Udp && u.ip.is_multicast() => u.ip,
        // The address has its own error.
        None => return Some(None),
        Some(a) => {
            let mut ok = true;
            for (k, given) in keys {
                if given {
                    errs.push(
                        format!("{p}.{k}"),
                        format!("applies to a udp:// address in 224.0.0.0/4 (a multicast group); \"{a}\" is not one: remove it or give the group as the address"),
                    );
                    ok = false;
                }
            }
            return ok.then_some(None);
        }
    };
    let mut ok = true;
    if iface.rx_queues.len() > 1 {
        errs.push(
            format!("{p}.rx_queues"),
            format!("{} RX queues on multicast group {group}: each socket that joins gets its own copy of every datagram, so a group is received by one RX queue per process (run another rtdaq process for another copy)", iface.rx_queues.len()),
        );
        ok = false;
    }
    let unicast = |s: &str, path: String, errs: &mut Errors| -> Option<Ipv4Addr> {
        match s.parse::<Ipv4Addr>() {
            Ok(ip) if !ip.is_multicast() && !ip.is_broadcast() => Some(ip),
            _ => {
                errs.push(
                    path,
                    format!("{s:?} is not a unicast IPv4 address; give the address of a local network interface (e.g. \"169.254.10.2\")"),
                );
                None
            }
        }
    };
    let interface = match &iface.multicast_interface {
        None => Some(Ipv4Addr::UNSPECIFIED),
        Some(s) => unicast(s, format!("{p}.multicast_interface"), errs),
    };
    let mut sources = Vec::new();
    for (k, s) in iface.multicast_sources.iter().flatten().enumerate() {
        match unicast(s, format!("{p}.multicast_sources[{k}]"), errs) {
            Some(ip) if !sources.contains(&ip) => sources.push(ip),
            Some(_) => {
                errs.push(
                    format!("{p}.multicast_sources[{k}]"),
                    format!("{s} is listed twice; remove the repeat"),
                );
                ok = false;
            }
            None => ok = false,
        }
    }
    if iface.multicast_sources.as_ref().is_some_and(Vec::is_empty) {
        errs.push(
            format!("{p}.multicast_sources"),
            "empty: list the senders (source-specific multicast) or remove the key (any source)",
        );
        ok = false;
    }
    let ttl = int::<u8>(
        iface.multicast_ttl.unwrap_or(1),
        0,
        255,
        &format!("{p}.multicast_ttl"),
        " (hops a sent datagram may cross; 1 = this link)",
        errs,
    );
    let m = Multicast {
        group,
        interface: interface?,
        sources,
        ttl: ttl?,
        loopback: iface.multicast_loop.unwrap_or(true),
    };
    ok.then_some(Some(m))
}

/// A raw-engine interface's `multicast_groups` (with `multicast_interface`): `Some(None)`
/// without the key, `None` on an error.
pub(super) fn raw_multicast(
    iface: &RawInterface,
    address: Option<&Address>,
    p: &str,
    errs: &mut Errors,
) -> Option<Option<RawMulticast>> {
    let Some(list) = &iface.multicast_groups else {
        return Some(None);
    };
    if !matches!(address, Some(Address::Netdev(_) | Address::Pci(_))) {
        // `multicast` reports a socket address; a broken address has its own error.
        return Some(None);
    }
    let mut ok = true;
    for (k, given) in [
        ("multicast_sources", iface.multicast_sources.is_some()),
        ("multicast_ttl", iface.multicast_ttl.is_some()),
        ("multicast_loop", iface.multicast_loop.is_some()),
    ] {
        if given {
            errs.push(
                format!("{p}.{k}"),
                "applies to a socket interface's group; a raw-engine interface joins its multicast_groups from any source (source-specific joins are not done on raw engines): remove it",
            );
            ok = false;
        }
    }
    if list.is_empty() {
        errs.push(
            format!("{p}.multicast_groups"),
            "empty: list the groups to join (e.g. [\"239.77.0.1\"]) or remove the key",
        );
        ok = false;
    }
    let mut groups = Vec::new();
    for (k, s) in list.iter().enumerate() {
        match s.parse::<Ipv4Addr>() {
            Ok(g) if g.is_multicast() && !groups.contains(&g) => groups.push(g),
            Ok(g) if g.is_multicast() => {
                errs.push(
                    format!("{p}.multicast_groups[{k}]"),
                    format!("{g} is listed twice; remove the repeat"),
                );
                ok = false;
            }
            _ => {
                errs.push(
                    format!("{p}.multicast_groups[{k}]"),
                    format!(
                        "{s:?} is not an IPv4 multicast group (224.0.0.0/4, e.g. \"239.77.0.1\")"
                    ),
                );
                ok = false;
            }
        }
    }
    let interface = match &iface.multicast_interface {
        None => Some(Ipv4Addr::UNSPECIFIED),
        Some(s) => match s.parse::<Ipv4Addr>() {
            Ok(ip) if !ip.is_multicast() && !ip.is_broadcast() => Some(ip),
            _ => {
                errs.push(
                    format!("{p}.multicast_interface"),
                    format!("{s:?} is not a unicast IPv4 address; give the netdev's own IPv4 address (ip -4 addr show dev <netdev>)"),
                );
                None
            }
        },
    };
    let interface = interface?;
    ok.then_some(Some(RawMulticast { groups, interface }))
}
