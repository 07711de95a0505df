//! The wire protocol between two rtdaq RoCE ends: the hello carried in RDMA CM private
//! data, and the work request ids. Pure functions, unit-tested.
//!
//! **Hello** (32 bytes, little endian, fits the 56-byte connect private data):
//! `magic u32 = "rtdq"`, `version u8`, `role u8` (1 receiver, 2 sender), `op u8`
//! (0 SEND, 1 WRITE with immediate, 2 READ), `pad u8`, `credits u32` (receives the
//! receiver posted), `rkey u32`, `base u64` (first byte of the registered pool: the
//! receiver's; with READ the sender's, which the receiver pulls from), `slot_size u32`,
//! `slot_count u32`. A peer whose private data is not a hello (a
//! librdmacm example, another stack) is a **foreign** peer.
//!
//! **Credits** (receiver → sender): SEND mode: a zero-length SEND with immediate = credits
//! returned (each = one receive reposted). WRITE-with-immediate mode: a SEND with immediate
//! = n and a payload of n little-endian `u32` pool slot indices the sender may write next,
//! each slot granted once; the sender's WRITE carries the slot index as its immediate.
//!
//! **READ (pull mode)**: the data stays in the sender's pool. Sender → receiver: a
//! *descriptor* message, a SEND with immediate = n and a payload of n entries
//! `slot u32, len u32` (little endian; [`DESC_MAX`] at most), one entry per message, each
//! spending one credit; the receiver posted `credits` receives for them (a descriptor
//! holds at least one message, so no more than `credits` are ever outstanding).
//! Receiver: RDMA READ of `len` bytes from `base + slot × slot_size` (the sender's hello)
//! into its own pool buffer, delivered when the READ completes (in order per
//! connection); receiver → sender: the slots pulled, in the WRITE-with-immediate credit
//! message format (immediate = n, payload n `u32` slots), each slot one credit back. Only
//! then does the sender free the buffer.
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
    /// The receiver RDMA-READs from the sender's pool (pull mode).
    Read,
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
            Op::Read => 2,
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
                2 => Op::Read,
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
    /// READ mode: a descriptor message (TX: its send; RX: its receive).
    Desc = 6,
    /// READ mode: an RDMA READ of one message (RX).
    Read = 7,
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
        6 => WrKind::Desc,
        7 => WrKind::Read,
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

/// READ: most entries in one descriptor message.
pub const DESC_MAX: u32 = 64;
/// READ: bytes of one descriptor buffer (8 per entry).
pub const DESC_BYTES: u64 = 8 * DESC_MAX as u64;
/// READ: descriptor messages a sender may have in flight per connection.
pub const DESC_SENDS: u32 = 16;
/// READ: RDMA READs a receiver keeps in flight per connection (the device runs at most the
/// connection's initiator depth of them at a time; the rest wait in the send queue).
pub const READ_DEPTH: u32 = 32;

/// Writes descriptor entry `i` (`slot`, `len`) into a descriptor buffer.
#[inline]
pub fn put_desc(buf: &mut [u8], i: usize, slot: u32, len: u32) -> bool {
    let Some(e) = buf.get_mut(8 * i..8 * i + 8) else {
        return false;
    };
    e[..4].copy_from_slice(&slot.to_le_bytes());
    e[4..].copy_from_slice(&len.to_le_bytes());
    true
}

/// Reads descriptor entry `i`: `(slot, len)`; `None` past the buffer.
#[inline]
pub fn get_desc(buf: &[u8], i: usize) -> Option<(u32, u32)> {
    let e = buf.get(8 * i..8 * i + 8)?;
    Some((
        u32::from_le_bytes([e[0], e[1], e[2], e[3]]),
        u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
    ))
}

/// Reads slot `i` of a credit message (WRITE_IMM grants, READ returns).
#[inline]
pub fn get_slot(buf: &[u8], i: usize) -> Option<u32> {
    let e = buf.get(4 * i..4 * i + 4)?;
    Some(u32::from_le_bytes([e[0], e[1], e[2], e[3]]))
}

/// READ receiver: is a slot-return message due? When `credit_batch` slots are waiting, or
/// when the connection has nothing else to do (no READ in flight, no descriptor waiting):
/// the tail of a stream is returned at once, so a sender at the end of its run never waits
/// for a batch that will not fill.
#[inline]
pub fn return_due(pending: usize, batch: u32, reading: usize, todo: usize) -> bool {
    pending > 0 && (pending as u32 >= batch || (reading == 0 && todo == 0))
}

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
        assert_eq!(
            split_wr_id(wr_id(WrKind::Desc, 9, 3, 15)),
            Some((WrKind::Desc, 9, 3, 15))
        );
        assert_eq!(
            split_wr_id(wr_id(WrKind::Read, 1, 0, 4095)),
            Some((WrKind::Read, 1, 0, 4095))
        );
        assert_eq!(split_wr_id(0), None);
        assert_eq!(split_wr_id(8 << 60), None);
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

    #[test]
    fn read_hello_carries_the_senders_pool() {
        let h = Hello {
            role: Role::Sender,
            op: Op::Read,
            credits: 0,
            rkey: 0x99,
            base: 0x5555_0000,
            slot_size: 2048,
            slot_count: 1024,
        };
        let b = h.encode();
        assert_eq!(b[6], 2);
        assert_eq!(Hello::decode(&b), Some(h));
    }

    #[test]
    fn descriptors_round_trip_and_stay_in_their_buffer() {
        let mut b = [0u8; DESC_BYTES as usize];
        for i in 0..DESC_MAX as usize {
            assert!(put_desc(&mut b, i, 1000 + i as u32, 1400 - i as u32));
        }
        assert!(
            !put_desc(&mut b, DESC_MAX as usize, 1, 1),
            "past the buffer"
        );
        assert_eq!(get_desc(&b, 0), Some((1000, 1400)));
        assert_eq!(get_desc(&b, 63), Some((1063, 1337)));
        assert_eq!(get_desc(&b, 64), None);
        assert_eq!(
            &b[..8],
            &[0xe8, 3, 0, 0, 0x78, 5, 0, 0],
            "little endian slot, len"
        );
        let mut c = [0u8; 8];
        c[4..].copy_from_slice(&77u32.to_le_bytes());
        assert_eq!(get_slot(&c, 1), Some(77));
        assert_eq!(get_slot(&c, 2), None);
    }

    #[test]
    fn slot_returns_batch_but_never_hold_back_a_tail() {
        // A batch due.
        assert!(return_due(4, 4, 10, 10));
        // Below the batch while READs are in flight: wait.
        assert!(!return_due(3, 4, 1, 0));
        assert!(!return_due(3, 4, 0, 2));
        // Nothing left to pull: the tail goes at once.
        assert!(return_due(1, 32, 0, 0));
        // Nothing to return.
        assert!(!return_due(0, 1, 0, 0));
    }
}
