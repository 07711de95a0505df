//! Kernel multicast membership for raw-engine interfaces (`multicast_groups`).
//!
//! A raw engine (AF_PACKET, AF_XDP, DPDK, ibverbs) reads frames below the IP stack, so
//! nothing in it joins a group: the NIC's multicast filter drops the group's frames and the
//! switches (IGMP snooping) never send them. [`join`] holds one plain UDP socket per group
//! for the run, joined with `IP_ADD_MEMBERSHIP` on `multicast_interface` (std's
//! `UdpSocket::join_multicast_v4`): the kernel then programs the NIC's filter and answers
//! IGMP queries (and sends its reports) for the group. The socket itself is never read;
//! the frames reach the engine's queue through its flows (match `ipv4_dst` = the group).
//! Dropping [`Memberships`] leaves the groups. Set-up only: nothing here is on the hot path.
//!
//! A DPDK or ibverbs port that the kernel does not drive has no kernel membership to hold;
//! there the NIC's own multicast filter (rte_eth_dev_set_mc_addr_list, ibv_attach_mcast)
//! would be needed, which this module does not do.

use crate::error::RuntimeError;
use rtdaq_config::model::Config;
use std::net::{Ipv4Addr, UdpSocket};

/// The run's memberships; see the [module docs](self).
#[derive(Debug)]
pub struct Memberships {
    /// Group and the socket that holds it (never read).
    _sockets: Vec<(Ipv4Addr, UdpSocket)>,
}

/// Joins every raw interface's `multicast_groups`; the first refusal is an error naming
/// the key.
pub fn join(config: &Config) -> Result<Memberships, RuntimeError> {
    let mut sockets = Vec::new();
    for (i, iface) in config.interfaces.iter().enumerate() {
        let Some(m) = &iface.raw_multicast else {
            continue;
        };
        for (k, g) in m.groups.iter().enumerate() {
            let key = format!("interfaces[{i}].multicast_groups[{k}]");
            let fail = |what: String| RuntimeError::Multicast {
                key: key.clone(),
                message: what,
            };
            let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).map_err(|e| {
                fail(format!(
                    "cannot open a UDP socket to hold the membership: {e}"
                ))
            })?;
            s.join_multicast_v4(g, &m.interface).map_err(|e| {
                fail(format!(
                    "the kernel refused to join {g} on {} ({e}); multicast_interface must be the IPv4 address of {} (ip -4 addr show dev {}), or the group needs a route",
                    if m.interface.is_unspecified() { "the interface the route picks".to_owned() } else { m.interface.to_string() },
                    iface.address,
                    iface.address,
                ))
            })?;
            log::info!(
                "interfaces[{i}] ({}): joined multicast group {g} on {} (kernel membership: the NIC filter and IGMP deliver it)",
                iface.address,
                if m.interface.is_unspecified() { "the interface the route picks".to_owned() } else { m.interface.to_string() },
            );
            sockets.push((*g, s));
        }
    }
    Ok(Memberships { _sockets: sockets })
}
