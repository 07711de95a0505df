//! Times in an mbuf on the device's clock ([`TxQueue::read_clock`](crate::TxQueue::read_clock)):
//! - launch times on a TX queue (`RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP`): the tx-timestamp
//!   dynamic field, registered once per process (`rte_mbuf_dyn_tx_timestamp_register`),
//!   holds the time at which the NIC sends the frame, and its flag in `ol_flags` says it is
//!   set; the PMD reads both in `rte_eth_tx_burst` when the port was configured with the
//!   offload ([`PortConfig::tx_timestamps`](crate::PortConfig));
//! - hardware receive stamps (`RTE_ETH_RX_OFFLOAD_TIMESTAMP`): the rx-timestamp field and
//!   flag (`rte_mbuf_dyn_rx_timestamp_register`), which the PMD fills for each frame when
//!   the port was configured with the offload ([`PortConfig::rx_timestamps`](crate::PortConfig)).

use crate::error::{DpdkError, Result};
use crate::sys::mbuf::Mbuf;
use crate::sys::{raw, result};

/// A registered timestamp field (tx or rx): where it lies in an mbuf and its `ol_flags`
/// bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampField {
    offset: i32,
    flag: u64,
}

impl TimestampField {
    /// Registers the field and its flag (or finds them registered). Needs the EAL. Cold
    /// path.
    ///
    /// # Errors
    /// [`DpdkError::Dynfield`] with DPDK's errno (`ENOSPC`/`ENOENT`: no room left for
    /// another dynamic field or flag).
    pub fn register() -> Result<Self> {
        Self::registered(
            raw::rte_mbuf_dyn_tx_timestamp_register,
            "tx timestamp (rte_mbuf_dyn_tx_timestamp_register)",
        )
    }

    /// The rx-timestamp field and flag (registered, or found registered by the PMD). Reads
    /// only: [`get`](Self::get) of a received frame. Cold path.
    ///
    /// # Errors
    /// As [`register`](Self::register).
    pub fn register_rx() -> Result<Self> {
        Self::registered(
            raw::rte_mbuf_dyn_rx_timestamp_register,
            "rx timestamp (rte_mbuf_dyn_rx_timestamp_register)",
        )
    }

    /// The field and flag `register` (one of DPDK's two registrations) gives.
    fn registered(
        register: unsafe extern "C" fn(*mut std::os::raw::c_int, *mut u64) -> std::os::raw::c_int,
        what: &'static str,
    ) -> Result<Self> {
        let (mut offset, mut flag) = (0i32, 0u64);
        // SAFETY: both are valid out pointers for the call; the registry is process-wide
        // and thread-safe (DPDK takes its lock).
        let rc = unsafe { register(&mut offset, &mut flag) };
        if rc < 0 {
            let errno = result::errno();
            return Err(DpdkError::Dynfield {
                what,
                errno,
                msg: result::strerror(errno),
            });
        }
        Ok(TimestampField { offset, flag })
    }

    /// Sets `m` to leave at `t` (the device's clock). Never allocates.
    #[inline]
    pub fn set(&self, m: &mut Mbuf, t: u64) {
        // SAFETY: m is a valid owned mbuf; the field lies at the registered offset inside
        // every mbuf (dynamic fields are part of struct rte_mbuf) and holds a u64.
        unsafe { raw::rtdaq_mbuf_set_txtime(m.as_ptr(), self.offset, self.flag, t) }
    }

    /// The time of `m` (its launch time; a received frame's stamp), when it has one. Never
    /// allocates.
    #[inline]
    pub fn get(&self, m: &Mbuf) -> Option<u64> {
        let mut t = 0u64;
        // SAFETY: as in `set`; t is a valid out pointer.
        let has = unsafe { raw::rtdaq_mbuf_txtime(m.as_ptr(), self.offset, self.flag, &mut t) };
        (has != 0).then_some(t)
    }
}
