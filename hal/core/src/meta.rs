//! Per-packet metadata and the small id newtypes shared by every layer.

/// Index of a queue within its direction (RX or TX) on one interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct QueueId(pub u16);

/// Flow id assigned by a matching flow rule. [`FlowId::NONE`] (0) means "no rule matched".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FlowId(pub u32);

impl FlowId {
    /// No rule matched (the packet went to the default queue).
    pub const NONE: FlowId = FlowId(0);
}

/// Connection id for connection-oriented transports (TCP, RoCE). 0 = connectionless.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ConnId(pub u32);

/// Where a packet's receive timestamp ([`PacketMeta::rx_timestamp_ns`]) came from, best
/// first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(u8)]
pub enum TimestampSource {
    /// None: `rx_timestamp_ns` is 0 (the consumer stamps the packet when it takes it).
    #[default]
    None = 0,
    /// The NIC's clock, when the packet arrived (`SOF_TIMESTAMPING_RAW_HARDWARE`,
    /// `TP_STATUS_TS_RAW_HARDWARE`, a completion timestamp).
    Hardware = 1,
    /// The kernel's clock when its driver handed the packet up (`SO_TIMESTAMPNS`,
    /// TPACKET's software stamp).
    Kernel = 2,
    /// The engine's I/O thread, after the call that returned the packet (`recvmmsg`, a ring
    /// poll, `rte_eth_rx_burst`): later by the time the packet waited there.
    Poll = 3,
}

impl TimestampSource {
    /// Every source, in the order of their numbers.
    pub const ALL: [TimestampSource; 4] = [
        TimestampSource::None,
        TimestampSource::Hardware,
        TimestampSource::Kernel,
        TimestampSource::Poll,
    ];

    /// Its name in reports (`hardware`, `kernel`, `poll`; `none`).
    pub fn as_str(self) -> &'static str {
        match self {
            TimestampSource::None => "none",
            TimestampSource::Hardware => "hardware",
            TimestampSource::Kernel => "kernel",
            TimestampSource::Poll => "poll",
        }
    }
}

/// Metadata of one received (or to-be-sent) packet.
///
/// `Copy`, 32 bytes, no pointers: it travels with the packet through rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketMeta {
    /// Logical packet length in bytes (sum of all segment lengths).
    pub len: u32,
    /// Flow id of the rule that matched, [`FlowId::NONE`] otherwise.
    pub flow: FlowId,
    /// Queue that received the packet.
    pub queue: QueueId,
    /// Receive timestamp in nanoseconds (hardware clock if available, else `CLOCK_REALTIME`);
    /// 0 when unknown.
    pub rx_timestamp_ns: u64,
    /// Where `rx_timestamp_ns` came from.
    pub ts_source: TimestampSource,
    /// Connection id (TCP / RoCE), 0 when connectionless.
    pub conn: ConnId,
    /// Socket engine (UDP): the sender's IPv4 address; zeros when unknown (raw engines carry
    /// it in the frame).
    pub src_ip: [u8; 4],
    /// Socket engine (UDP): the sender's port; 0 when unknown.
    pub src_port: u16,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_stays_32_bytes() {
        assert_eq!(core::mem::size_of::<PacketMeta>(), 32);
    }
}
