//! Cold-path port queries beyond [`Port::stats`](crate::Port::stats): link state, extended
//! statistics (xstats) by name, and the RSS redirection table.
use std::ffi::CStr;

use super::port::port_err;
use super::{raw, result};
use crate::error::Result;
use crate::Port;

/// Link state (`rte_eth_link_get_nowait`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkState {
    /// Link up.
    pub up: bool,
    /// Speed in Mb/s (0 when unknown or down; vdevs report a nominal value).
    pub speed_mbps: u32,
    /// Full duplex.
    pub full_duplex: bool,
    /// Autonegotiated.
    pub autoneg: bool,
}

impl Port {
    /// The link state, without waiting for it to settle (`rte_eth_link_get_nowait`).
    ///
    /// # Errors
    /// [`DpdkError::Port`](crate::DpdkError::Port) if the PMD refuses.
    pub fn link(&self) -> Result<LinkState> {
        let (mut speed, mut duplex, mut up, mut autoneg) = (0u32, 0, 0, 0);
        // SAFETY: valid port (kept open by self); four valid out pointers.
        let rc = unsafe {
            raw::rtdaq_link_get(self.id(), &mut speed, &mut duplex, &mut up, &mut autoneg)
        };
        result::neg_errno(rc).map_err(|e| {
            port_err(
                "rte_eth_link_get_nowait",
                self.id(),
                e,
                "the PMD reports no link state",
            )
        })?;
        Ok(LinkState {
            up: up != 0,
            speed_mbps: speed,
            full_duplex: duplex != 0,
            autoneg: autoneg != 0,
        })
    }

    /// Every extended statistic of the port, by name, in the PMD's order
    /// (`rte_eth_xstats_get_names` + `rte_eth_xstats_get`). Allocates: cold path.
    ///
    /// # Errors
    /// [`DpdkError::Port`](crate::DpdkError::Port) if the PMD refuses.
    pub fn xstats(&self) -> Result<Vec<(String, u64)>> {
        let id = self.id();
        let err = |e| {
            port_err(
                "rte_eth_xstats_get",
                id,
                e,
                "the PMD has no extended statistics",
            )
        };
        // SAFETY: valid port; NULL/0 asks for the count.
        let n = unsafe { raw::rte_eth_xstats_get_names(id, std::ptr::null_mut(), 0) };
        let n = result::neg_errno(n).map_err(err)? as usize;
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut names = vec![raw::rte_eth_xstat_name::default(); n];
        let mut vals = vec![raw::rte_eth_xstat::default(); n];
        // SAFETY: names has n entries, the size passed.
        let got = unsafe { raw::rte_eth_xstats_get_names(id, names.as_mut_ptr(), n as u32) };
        let got_names = result::neg_errno(got).map_err(err)? as usize;
        // SAFETY: vals has n entries, the size passed.
        let got = unsafe { raw::rte_eth_xstats_get(id, vals.as_mut_ptr(), n as u32) };
        let got_vals = result::neg_errno(got).map_err(err)? as usize;
        let k = n.min(got_names).min(got_vals);
        Ok(vals[..k]
            .iter()
            .filter_map(|v| {
                let nm = names.get(v.id as usize)?;
                // SAFETY: DPDK writes NUL-terminated names into the fixed-size array
                // (RTE_ETH_XSTATS_NAME_SIZE, terminated by snprintf semantics).
                let name = unsafe { CStr::from_ptr(nm.name.as_ptr()) };
                Some((name.to_string_lossy().into_owned(), v.value))
            })
            .collect())
    }

    /// The first `entries` entries of the RSS redirection table
    /// (`rte_eth_dev_rss_reta_query`): entry `i` is the RX queue of hash bucket `i`.
    ///
    /// # Errors
    /// [`DpdkError::Port`](crate::DpdkError::Port) if the PMD has no RETA.
    pub fn reta(&self, entries: u16) -> Result<Vec<u16>> {
        const GROUP: usize = raw::RTDAQ_RETA_GROUP_SIZE as usize;
        let n = usize::from(entries);
        let mut conf: Vec<raw::rte_eth_rss_reta_entry64> = (0..n.div_ceil(GROUP))
            .map(|_| raw::rte_eth_rss_reta_entry64::default())
            .collect();
        for i in 0..n {
            conf[i / GROUP].mask |= 1u64 << (i % GROUP);
        }
        // SAFETY: valid port; conf holds entries.div_ceil(64) groups.
        let rc = unsafe { raw::rte_eth_dev_rss_reta_query(self.id(), conf.as_mut_ptr(), entries) };
        result::neg_errno(rc).map_err(|e| {
            port_err(
                "rte_eth_dev_rss_reta_query",
                self.id(),
                e,
                "the PMD has no RSS RETA",
            )
        })?;
        Ok((0..n).map(|i| conf[i / GROUP].reta[i % GROUP]).collect())
    }
}
