//! What a batch looks like: packet descriptors in, one contiguous output buffer out.
//!
//! This module is plain data and arithmetic, compiled everywhere (no CUDA). The GPU kernels
//! (`kernels/batch.cu`) and the CPU reference ([`crate::reference`]) both implement exactly
//! the rules written here.
//!
//! # Slots
//! A batch has [`BatchLayout::packets_per_batch`] output slots. A packet goes to:
//! - [`Mode::Gather`]: slot `i` for the `i`-th descriptor (arrival order);
//! - [`Mode::Reorder`] with [`SlotMode::Modulo`]: slot `seq % packets_per_batch`, batch key
//!   `seq / packets_per_batch`;
//! - [`Mode::Reorder`] with [`SlotMode::BitFields`]: slot = `slot_bits` bits of `seq` from bit
//!   `slot_shift` (LSB = bit 0), batch key = `batch_bits` bits from `batch_shift` (0 bits: key 0).
//!
//! - [`Mode::Pieces`]: slot and batch key from `seq` as in reorder mode, but a slot gathers
//!   the payloads of **several** packets, each at its byte [`PacketDesc::offset`] in the slot:
//!   the pieces of a SPEAD heap (`seq` = heap counter, `offset` = heap offset). A batch then
//!   holds up to `max_packets` descriptors for its `packets_per_batch` slots (heaps).
//!
//! In reorder and pieces mode the batch key of descriptor 0 is the batch's id; a packet with
//! another key, or with a slot `>= packets_per_batch`, is *foreign* and not placed. Reorder:
//! when several packets claim one slot, the first in descriptor order wins; the others count
//! as duplicates. Pieces: a piece whose offset is not a multiple of 4 or that does not end
//! inside its slot (`offset + avail > max_payload`) is foreign too; pieces never count as
//! duplicates: the caller passes each piece once (rtdaq's validator drops repeated SPEAD
//! packets before the GPU stage), and of two overlapping pieces either may win a byte.
//! A slot no packet claims is **zero-filled** and its bit in the validity mask is clear (bit
//! `slot % 32` of `u32` word `slot / 32`); in pieces mode the bytes of a slot that no piece
//! covers are zero as well.
//!
//! # Payload and conversion
//! A packet's payload starts `payload_offset` bytes into it; `avail = min(len -
//! payload_offset, max_payload)` bytes of it are used (0 when `len <= payload_offset`), rounded
//! down to whole samples (even for int16). Each slot is `out_slot_bytes()` long; output beyond
//! the converted samples is zero. [`Conversion`] defines the sample conversion. In pieces
//! mode input byte `b` of a slot (`b = offset + k` for byte `k` of a piece) lands where byte
//! `b` of a single packet would: output word `b / 4 * out_bytes_per_word / 4` onwards.

use crate::error::{GpuError, Result};

/// One packet of a batch, as the GPU reads it: [`PacketDesc::BYTES`] bytes, `repr(C)` (the
/// kernels' layout: 4 bytes of padding at the end).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketDesc {
    /// Device-visible address of the packet's first byte: a mapped pinned-host address
    /// ([`HostPinned::device_addr_of`](crate::HostPinned::device_addr_of)) or a device address.
    pub addr: u64,
    /// Sequence number (the low 32 bits of the stream's sequence counter).
    pub seq: u32,
    /// Packet length in bytes (headers included; see [`BatchLayout::payload_offset`]).
    pub len: u32,
    /// [`Mode::Pieces`]: where the payload goes in its slot, in input bytes (a multiple of 4).
    /// Ignored by the other modes.
    pub offset: u32,
}

impl PacketDesc {
    /// Bytes of one descriptor in the kernels' arrays.
    pub const BYTES: usize = 24;
}

/// Integer sample formats of the input payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IntFormat {
    /// Signed 8-bit.
    I8,
    /// Signed 16-bit, little-endian.
    I16Le,
    /// Signed 16-bit, big-endian (network order).
    I16Be,
    /// Signed 4-bit two's complement, two per byte, **low nibble first**: byte `0xBA` holds
    /// sample `A` then sample `B` (DAQIRI packs the high nibble first; ours is the
    /// little-endian order most ADC front ends emit).
    I4,
}

impl IntFormat {
    /// Samples per 4 input bytes.
    pub const fn samples_per_word(self) -> u32 {
        match self {
            IntFormat::I8 => 4,
            IntFormat::I16Le | IntFormat::I16Be => 2,
            IntFormat::I4 => 8,
        }
    }
    const fn code(self) -> u32 {
        match self {
            IntFormat::I8 => 1,
            IntFormat::I16Le => 2,
            IntFormat::I16Be => 3,
            IntFormat::I4 => 4,
        }
    }
}

/// Floating-point output formats (stored little-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FloatFormat {
    /// IEEE 754 binary16.
    F16,
    /// bfloat16.
    Bf16,
    /// IEEE 754 binary32.
    F32,
}

impl FloatFormat {
    /// Bytes per sample.
    pub const fn size(self) -> u32 {
        match self {
            FloatFormat::F16 | FloatFormat::Bf16 => 2,
            FloatFormat::F32 => 4,
        }
    }
    const fn code(self) -> u32 {
        match self {
            FloatFormat::F16 => 1,
            FloatFormat::Bf16 => 2,
            FloatFormat::F32 => 3,
        }
    }
}

/// Sample conversion during the copy.
///
/// `Convert` is a **plain value cast, no scaling**: integer sample `v` becomes the float
/// nearest to `v`, ties to even. Every int8/int4 value and every int16 value is exact in
/// fp32; fp16 is exact for `|v| <= 2048` and bf16 for `|v| <= 256`, larger values round to
/// nearest even (e.g. int16 `2049` -> fp16 `2048`, `2051` -> `2052`; `-32768` -> fp16
/// `-32768`, bf16 `-32768`; int16 `32767` -> fp16/bf16 `32768`). Never inf, NaN or subnormal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Conversion {
    /// Byte copy: the slot holds the payload bytes unchanged.
    Copy,
    /// Integer samples to floats.
    Convert {
        /// Input format.
        from: IntFormat,
        /// Output format.
        to: FloatFormat,
    },
}

impl Conversion {
    /// Output bytes per 4 input bytes: 4, 8, 16 or 32.
    pub const fn out_bytes_per_word(self) -> u32 {
        match self {
            Conversion::Copy => 4,
            Conversion::Convert { from, to } => from.samples_per_word() * to.size(),
        }
    }
    /// The kernel's (input, output) format codes.
    pub(crate) const fn codes(self) -> (u32, u32) {
        match self {
            Conversion::Copy => (0, 0),
            Conversion::Convert { from, to } => (from.code(), to.code()),
        }
    }
}

/// How a reordered packet's slot and batch key come from its sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SlotMode {
    /// slot = `seq % packets_per_batch`, key = `seq / packets_per_batch`.
    Modulo,
    /// Bit fields of `seq` (bit 0 = LSB).
    BitFields {
        /// First bit of the slot field.
        slot_shift: u8,
        /// Width of the slot field, 1..=31; `2^slot_bits >= packets_per_batch`.
        slot_bits: u8,
        /// First bit of the batch-id field.
        batch_shift: u8,
        /// Width of the batch-id field, 0..=32 (0: no batch field, key 0).
        batch_bits: u8,
    },
}

/// Reorder by sequence number, gather in arrival order, or assemble pieces by offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Slot from the sequence number, one packet per slot.
    Reorder(SlotMode),
    /// Descriptor `i` to slot `i`.
    Gather,
    /// Slot from the sequence number, several packets per slot, each at its
    /// [`PacketDesc::offset`] (SPEAD heaps: one slot per heap).
    Pieces {
        /// How the slot and batch key come from the sequence number.
        slots: SlotMode,
        /// Most descriptors a batch holds (1..=[`MAX_PACKETS_PER_BATCH`]).
        max_packets: u32,
    },
}

/// The geometry and conversion of a batch. Check it with [`validate`](Self::validate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchLayout {
    /// Output slots per batch (1..=[`MAX_PACKETS_PER_BATCH`]); also the most descriptors a
    /// batch may have, except in [`Mode::Pieces`] (its `max_packets`).
    pub packets_per_batch: u32,
    /// Bytes skipped at the start of each packet (headers).
    pub payload_offset: u32,
    /// Payload bytes taken per packet at most; a multiple of 4, 4..=[`MAX_PAYLOAD`].
    pub max_payload: u32,
    /// Sample conversion.
    pub conversion: Conversion,
    /// Reorder or gather.
    pub mode: Mode,
}

/// Largest [`BatchLayout::packets_per_batch`].
pub const MAX_PACKETS_PER_BATCH: u32 = 1 << 20;
/// Largest [`BatchLayout::max_payload`].
pub const MAX_PAYLOAD: u32 = 1 << 20;

impl BatchLayout {
    /// Checks the rules above; the error names the field and the fix.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(GpuError::InvalidLayout(msg));
        let ppb = self.packets_per_batch;
        if ppb == 0 || ppb > MAX_PACKETS_PER_BATCH {
            return bad(format!(
                "packets_per_batch = {ppb}: must be 1..={MAX_PACKETS_PER_BATCH}"
            ));
        }
        let mp = self.max_payload;
        if mp == 0 || mp % 4 != 0 || mp > MAX_PAYLOAD {
            return bad(format!(
                "max_payload = {mp}: must be a multiple of 4 in 4..={MAX_PAYLOAD}"
            ));
        }
        if let Mode::Pieces { max_packets, .. } = self.mode {
            if max_packets == 0 || max_packets > MAX_PACKETS_PER_BATCH {
                return bad(format!(
                    "max_packets = {max_packets}: must be 1..={MAX_PACKETS_PER_BATCH}"
                ));
            }
        }
        if let Some(SlotMode::BitFields {
            slot_shift,
            slot_bits,
            batch_shift,
            batch_bits,
        }) = self.slot_mode()
        {
            if !(1..=31).contains(&slot_bits) || u32::from(slot_shift) + u32::from(slot_bits) > 32 {
                return bad(format!(
                    "slot field {slot_bits} bits at bit {slot_shift}: width must be 1..=31 and \
                     the field inside the 32-bit sequence"
                ));
            }
            if (1u64 << slot_bits) < u64::from(ppb) {
                return bad(format!(
                    "slot field of {slot_bits} bits cannot address packets_per_batch = {ppb} \
                     slots (needs {} bits)",
                    32 - (ppb - 1).leading_zeros()
                ));
            }
            if batch_bits > 32 || u32::from(batch_shift) + u32::from(batch_bits) > 32 {
                return bad(format!(
                    "batch field {batch_bits} bits at bit {batch_shift}: must lie inside the \
                     32-bit sequence"
                ));
            }
        }
        Ok(())
    }

    /// The slot mode of a reorder or pieces layout (`None` for gather).
    pub const fn slot_mode(&self) -> Option<SlotMode> {
        match self.mode {
            Mode::Gather => None,
            Mode::Reorder(m) | Mode::Pieces { slots: m, .. } => Some(m),
        }
    }

    /// Most descriptors one batch holds: `packets_per_batch`, or `max_packets` in
    /// [`Mode::Pieces`].
    pub const fn descs_per_batch(&self) -> u32 {
        match self.mode {
            Mode::Pieces { max_packets, .. } => max_packets,
            _ => self.packets_per_batch,
        }
    }

    /// Pieces mode: whether a piece of `avail` payload bytes at input byte `offset` of its
    /// slot is placed (offset a multiple of 4, the piece inside the slot).
    pub const fn piece_fits(&self, offset: u32, avail: u32) -> bool {
        offset % 4 == 0 && offset <= self.max_payload && avail <= self.max_payload - offset
    }

    /// Pieces mode: payload bytes a piece of `len` bytes contributes (`len -
    /// payload_offset`, rounded down to whole int16 samples; not clamped: a piece that does
    /// not fit is foreign, see [`piece_fits`](Self::piece_fits)).
    pub const fn piece_avail(&self, len: u32) -> u32 {
        let mut a = len.saturating_sub(self.payload_offset);
        if let Conversion::Convert {
            from: IntFormat::I16Le | IntFormat::I16Be,
            ..
        } = self.conversion
        {
            a &= !1;
        }
        a
    }

    /// Output bytes per slot: `max_payload / 4 * conversion.out_bytes_per_word()`.
    pub const fn out_slot_bytes(&self) -> usize {
        (self.max_payload / 4) as usize * self.conversion.out_bytes_per_word() as usize
    }

    /// Output bytes per batch (slot `k` starts at `k * out_slot_bytes()`).
    pub const fn out_batch_bytes(&self) -> usize {
        self.packets_per_batch as usize * self.out_slot_bytes()
    }

    /// `u32` words of the validity mask.
    pub const fn mask_words(&self) -> usize {
        (self.packets_per_batch as usize).div_ceil(32)
    }

    /// Payload bytes a packet of `len` bytes contributes (see the module docs).
    pub const fn avail(&self, len: u32) -> u32 {
        let mut a = len.saturating_sub(self.payload_offset);
        if a > self.max_payload {
            a = self.max_payload;
        }
        if let Conversion::Convert {
            from: IntFormat::I16Le | IntFormat::I16Be,
            ..
        } = self.conversion
        {
            a &= !1;
        }
        a
    }

    /// `(batch key, slot)` of sequence number `seq` in reorder and pieces mode (`None` in
    /// gather mode).
    pub const fn key_slot(&self, seq: u32) -> Option<(u32, u32)> {
        match self.slot_mode() {
            None => None,
            Some(SlotMode::Modulo) => {
                Some((seq / self.packets_per_batch, seq % self.packets_per_batch))
            }
            Some(SlotMode::BitFields {
                slot_shift,
                slot_bits,
                batch_shift,
                batch_bits,
            }) => {
                let s = ((seq as u64 >> slot_shift) & ((1u64 << slot_bits) - 1)) as u32;
                let k = if batch_bits == 0 {
                    0
                } else {
                    ((seq as u64 >> batch_shift) & ((1u64 << batch_bits) - 1)) as u32
                };
                Some((k, s))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(mode: Mode) -> BatchLayout {
        BatchLayout {
            packets_per_batch: 64,
            payload_offset: 32,
            max_payload: 1024,
            conversion: Conversion::Copy,
            mode,
        }
    }

    #[test]
    fn sizes() {
        let mut l = layout(Mode::Gather);
        assert_eq!(l.out_slot_bytes(), 1024);
        assert_eq!(l.mask_words(), 2);
        l.conversion = Conversion::Convert {
            from: IntFormat::I4,
            to: FloatFormat::F32,
        };
        assert_eq!(l.out_slot_bytes(), 1024 * 2 * 4);
        assert_eq!(l.out_batch_bytes(), 64 * 8192);
        l.packets_per_batch = 65;
        assert_eq!(l.mask_words(), 3);
    }

    #[test]
    fn validate_rejects() {
        let mut l = layout(Mode::Gather);
        l.validate().unwrap();
        l.max_payload = 1022;
        assert!(l
            .validate()
            .unwrap_err()
            .to_string()
            .contains("max_payload = 1022"));
        l.max_payload = 1024;
        l.packets_per_batch = 0;
        assert!(l.validate().is_err());
        l.packets_per_batch = 64;
        l.mode = Mode::Reorder(SlotMode::BitFields {
            slot_shift: 0,
            slot_bits: 5,
            batch_shift: 5,
            batch_bits: 8,
        });
        let e = l.validate().unwrap_err().to_string();
        assert!(e.contains("needs 6 bits"), "{e}");
        l.mode = Mode::Reorder(SlotMode::BitFields {
            slot_shift: 30,
            slot_bits: 6,
            batch_shift: 0,
            batch_bits: 8,
        });
        assert!(l.validate().is_err());
    }

    #[test]
    fn key_slot_and_avail() {
        let l = layout(Mode::Reorder(SlotMode::Modulo));
        assert_eq!(l.key_slot(130), Some((2, 2)));
        let l = layout(Mode::Reorder(SlotMode::BitFields {
            slot_shift: 4,
            slot_bits: 6,
            batch_shift: 16,
            batch_bits: 16,
        }));
        assert_eq!(l.key_slot(0xABCD_03F7), Some((0xABCD, 0x3F)));
        assert_eq!(l.avail(10), 0);
        assert_eq!(l.avail(40), 8);
        assert_eq!(l.avail(5000), 1024);
        let mut l = l;
        l.conversion = Conversion::Convert {
            from: IntFormat::I16Be,
            to: FloatFormat::Bf16,
        };
        assert_eq!(l.avail(41), 8);
    }

    #[test]
    fn pieces_geometry() {
        let mut l = layout(Mode::Pieces {
            slots: SlotMode::Modulo,
            max_packets: 0,
        });
        assert!(l
            .validate()
            .unwrap_err()
            .to_string()
            .contains("max_packets = 0"));
        l.mode = Mode::Pieces {
            slots: SlotMode::Modulo,
            max_packets: 500,
        };
        l.validate().unwrap();
        assert_eq!(l.descs_per_batch(), 500);
        assert_eq!(layout(Mode::Gather).descs_per_batch(), 64);
        assert_eq!(l.key_slot(130), Some((2, 2)));
        // a piece must start on a word and end inside the 1024-byte slot
        assert!(l.piece_fits(0, 1024));
        assert!(l.piece_fits(1020, 4));
        assert!(!l.piece_fits(1020, 5));
        assert!(!l.piece_fits(2, 4));
        assert!(!l.piece_fits(1028, 0));
        assert_eq!(l.piece_avail(40), 8);
        assert_eq!(
            l.piece_avail(5000),
            4968,
            "not clamped: a piece too long is foreign"
        );
    }
}
