//! The wire protocol between two rtdaq RoCE ends: the hello carried in RDMA CM private
//! data, and the work request ids. Pure functions, unit-tested.
//!
//! **Hello** (32 bytes, little endian, fits the 56-byte connect private data):
//! `magic u32 = "rtdq"`, `version u8`, `role u8` (1 receiver, 2 sender), `op u8`
//! (0 SEND, 1 WRITE with immediate), `pad u8`, `credits u32` (receives the receiver
//! posted), `rkey u32`, `base u64` (first byte of the receiver's registered pool),
//! `slot_size u32`, `slot_count u32`. A peer whose private data is not a hello (a
//! librdmacm example, another stack) is a **foreign** peer.
//!
//! **Credits** (receiver → sender): SEND mode: a zero-length SEND with immediate = credits
//! returned (each = one receive reposted). WRITE-with-immediate mode: a SEND with immediate
//! = n and a payload of n little-endian `u32` pool slot indices the sender may write next,
//! each slot granted once; the sender's WRITE carries the slot index as its immediate.
//!
//! **Replies** (`engine.ibverbs.reply`): a receiver answers each message of a *foreign*
//! peer with a plain SEND (an echo, or a fixed-size acknowledgement). rtdaq senders get no
//! replies: their acknowledgement is the credit protocol.

/// `"rtdq"`.
pub const MAGIC: u32 = 0x7164_7472;
/// Protocol version.
pub const VERSION: u8 = 1;
/// Encoded hello length.
pub const HELLO_LEN: usize = 32;

/// Which end of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Posts receives, grants credits (RX queues).
    Receiver,
    /// Sends within its credits (TX queues).
    Sender,
}

/// Message operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// SEND / RECV.
    Send,
    /// RDMA WRITE with immediate into granted slots.
    WriteImm,
}

/// The hello each end puts in the CM private data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// The sender's role.
    pub role: Role,
    /// Operation.
    pub op: Op,
    /// Receives posted (receiver, SEND mode): the sender's initial credits.
    pub credits: u32,
    /// Receiver's pool key.
    pub rkey: u32,
    /// Receiver's pool base address.
    pub base: u64,
    /// Receiver's pool slot size.
    pub slot_size: u32,
    /// Receiver's pool slot count.
    pub slot_count: u32,
}

impl Hello {
    /// Encodes.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4] = VERSION;
        b[5] = match self.role {
            Role::Receiver => 1,
            Role::Sender => 2,
        };
        b[6] = match self.op {
            Op::Send => 0,
            Op::WriteImm => 1,
        };
        b[8..12].copy_from_slice(&self.credits.to_le_bytes());
        b[12..16].copy_from_slice(&self.rkey.to_le_bytes());
        b[16..24].copy_from_slice(&self.base.to_le_bytes());
        b[24..28].copy_from_slice(&self.slot_size.to_le_bytes());
        b[28..32].copy_from_slice(&self.slot_count.to_le_bytes());
        b
    }

    /// Decodes; `None` for a foreign peer (no magic, other version, bad fields).
    pub fn decode(b: &[u8]) -> Option<Hello> {
        if b.len() < HELLO_LEN
            || u32::from_le_bytes(b[0..4].try_into().ok()?) != MAGIC
            || b[4] != VERSION
        {
            return None;
        }
        let u = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        Some(Hello {
            role: match b[5] {
                1 => Role::Receiver,
                2 => Role::Sender,
                _ => return None,
            },
            op: match b[6] {
                0 => Op::Send,
                1 => Op::WriteImm,
                _ => return None,
            },
            credits: u(8),
            rkey: u(12),
            base: u64::from_le_bytes(b[16..24].try_into().ok()?),
            slot_size: u(24),
            slot_count: u(28),
        })
    }
}

/// Kinds of work requests (4 bits of the wr_id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum WrKind {
    /// A data receive (RX).
    Recv = 1,
    /// A credit message sent (RX).
    CtrlSend = 2,
    /// A data send / write (TX).
    Data = 3,
    /// A credit message receive (TX).
    CtrlRecv = 4,
    /// A reply to a request/response peer (RX, `engine.ibverbs.reply`).
    Reply = 5,
}

/// Most connections per interface the wr_id can name (12 bits).
pub const MAX_CONNS: u32 = 4095;

/// `kind:4 | conn:12 | gen:16 | idx:32`.
#[inline]
pub fn wr_id(kind: WrKind, conn: u16, gen: u16, idx: u32) -> u64 {
    (u64::from(kind as u8) << 60)
        | (u64::from(conn & 0x0fff) << 48)
        | (u64::from(gen) << 32)
        | u64::from(idx)
}

/// Splits a wr_id: `(kind, conn, gen, idx)`; `None` for an unknown kind.
#[inline]
pub fn split_wr_id(id: u64) -> Option<(WrKind, u16, u16, u32)> {
    let kind = match (id >> 60) as u8 {
        1 => WrKind::Recv,
        2 => WrKind::CtrlSend,
        3 => WrKind::Data,
        4 => WrKind::CtrlRecv,
        5 => WrKind::Reply,
        _ => return None,
    };
    Some((
        kind,
        ((id >> 48) & 0x0fff) as u16,
        (id >> 32) as u16,
        id as u32,
    ))
}

/// Credits the receiver collects before it sends a credit message: `ceil(credits / 32)`,
/// so at most 32 credit messages are ever unread by the sender (it posts
/// [`CTRL_RECVS`] receives for them and reposts each as soon as it is read).
pub fn credit_batch(credits: u32) -> u32 {
    credits.div_ceil(32).max(1)
}

/// Credit-message receives a sender keeps posted (≥ 32 + 1, see [`credit_batch`]).
pub const CTRL_RECVS: u32 = 64;
/// Credit messages a receiver may have in flight per connection.
pub const CTRL_SENDS: u32 = 16;
/// Most slot indices in one credit message (4 KiB).
pub const CTRL_MAX_SLOTS: u32 = 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trip_and_foreign_peers() {
        let h = Hello {
            role: Role::Receiver,
            op: Op::WriteImm,
            credits: 128,
            rkey: 0x1234,
            base: 0x7f00_0000_1000,
            slot_size: 2048,
            slot_count: 4096,
        };
        let b = h.encode();
        assert!(b.len() <= ffi::MAX_CONNECT_PRIVATE_DATA);
        assert_eq!(Hello::decode(&b), Some(h));
        let mut padded = [0u8; 56];
        padded[..32].copy_from_slice(&b);
        assert_eq!(
            Hello::decode(&padded),
            Some(h),
            "CM pads private data with zeros"
        );
        assert_eq!(
            Hello::decode(&[0u8; 56]),
            None,
            "a foreign peer sends no hello"
        );
        let mut bad = b;
        bad[5] = 9;
        assert_eq!(Hello::decode(&bad), None);
    }

    #[test]
    fn wr_ids_round_trip() {
        let id = wr_id(WrKind::CtrlRecv, 4095, 0xbeef, 0xdead_beef);
        assert_eq!(
            split_wr_id(id),
            Some((WrKind::CtrlRecv, 4095, 0xbeef, 0xdead_beef))
        );
        assert_eq!(
            split_wr_id(wr_id(WrKind::Recv, 3, 1, 7)),
            Some((WrKind::Recv, 3, 1, 7))
        );
        assert_eq!(
            split_wr_id(wr_id(WrKind::Reply, 0, 2, 31)),
            Some((WrKind::Reply, 0, 2, 31))
        );
        assert_eq!(split_wr_id(0), None);
        assert_eq!(split_wr_id(6 << 60), None);
    }

    #[test]
    fn credit_batches_bound_unread_credit_messages() {
        for c in [1u32, 2, 31, 32, 33, 128, 1000, 16384] {
            let m = credit_batch(c);
            assert!((1..=CTRL_MAX_SLOTS).contains(&m));
            assert!(c / m <= 32, "credits {c}: {} messages", c / m);
            assert!(c / m < CTRL_RECVS);
        }
    }
}
