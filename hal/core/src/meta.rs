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
    /// Connection id (TCP / RoCE), 0 when connectionless.
    pub conn: ConnId,
    /// Socket engine (UDP): the sender's IPv4 address; zeros when unknown (raw engines carry
    /// it in the frame).
    pub src_ip: [u8; 4],
    /// Socket engine (UDP): the sender's port; 0 when unknown.
    pub src_port: u16,
}
