//! Egress units: which whole unit of an instrument's stream a datagram belongs to, for an
//! egress sink that forwards units whole instead of payloads one by one.
//!
//! | unit | key | the unit is whole when |
//! |---|---|---|
//! | SPEAD heap | the heap counter | its packets' payload lengths add up to the heap size (item 0x02); a heap whose packets carry no heap size is never known whole |
//! | VDIF time slot | reference epoch, seconds, data frame number | it holds the configured number of frames (one per thread, or per station and thread) |
//! | CODIF time slot | seconds, data frame number | it holds the configured number of frames |
//!
//! [`UnitKind::unit_of`] parses one datagram (the UDP payload) and answers its key, what it
//! adds to its unit and what the unit needs; it never panics, never allocates and is `O(1)`
//! (SPEAD: `O(item pointers)`). Each datagram also names its **part** of the unit, so that
//! a duplicate is not taken for a missing datagram: a SPEAD packet its payload's place in
//! the heap (a heap is whole when its packets' lengths add up to the heap size *and* the
//! sum of `(offset + length)² − offset²` is the size², which the ranges of a heap with a
//! duplicate in place of a missing packet do not give), a frame its station and thread,
//! which [`UnitKind::part_at`] reads again from a frame already in the unit.

use super::codif::CodifHeader;
use super::spead::SpeadPacket;
use super::vdif::VdifHeader;
use super::Reject;

/// What an egress sink forwards as one unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnitKind {
    /// A SPEAD heap: its packets, whole.
    SpeadHeap,
    /// The VDIF frames of one time slot (same second and data frame number): `frames` of them.
    VdifSlot {
        /// Frames in a whole slot (threads × stations sending).
        frames: u32,
    },
    /// The CODIF frames of one time slot (same seconds and frame number): `frames` of them.
    CodifSlot {
        /// Frames in a whole slot.
        frames: u32,
    },
}

/// Where one datagram belongs: its unit, what it adds to it, what the unit needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UnitOf {
    /// The unit's key (unique among the units open at one time).
    pub key: u64,
    /// What the datagram adds to its unit: payload bytes (SPEAD) or one frame.
    pub adds: u64,
    /// What a whole unit holds (heap size in bytes, or frames); 0: not known from this
    /// datagram (a SPEAD packet without the heap size item).
    pub needs: u64,
    /// Its part of the unit: a SPEAD packet's heap offset; a VDIF frame's
    /// `station << 10 | thread`, a CODIF frame's `station << 32 | group << 16 | thread`.
    pub part: u64,
}

impl UnitKind {
    /// The unit of one datagram; the reason it has none (not this format, cut short).
    #[inline]
    pub fn unit_of(self, datagram: &[u8]) -> Result<UnitOf, Reject> {
        match self {
            UnitKind::SpeadHeap => {
                let p = SpeadPacket::parse(datagram, None)?;
                Ok(UnitOf {
                    key: p.heap_cnt,
                    adds: p.length,
                    needs: p.heap_size.unwrap_or(0),
                    part: p.offset,
                })
            }
            UnitKind::VdifSlot { frames } => {
                let h = VdifHeader::parse(datagram)?;
                Ok(UnitOf {
                    key: u64::from(h.ref_epoch) << 54
                        | u64::from(h.seconds) << 24
                        | u64::from(h.frame),
                    adds: 1,
                    needs: u64::from(frames),
                    part: u64::from(h.station) << 10 | u64::from(h.thread),
                })
            }
            UnitKind::CodifSlot { frames } => {
                let h = CodifHeader::parse(datagram)?;
                Ok(UnitOf {
                    key: u64::from(h.seconds) << 32 | u64::from(h.frame),
                    adds: 1,
                    needs: u64::from(frames),
                    part: codif_part(&h),
                })
            }
        }
    }

    /// The length and part of the frame at the start of `data` (the frames of a time slot,
    /// back to back); `None` for a SPEAD heap (its packets' parts are summed, not read
    /// again) or bytes that are no frame.
    pub fn part_at(self, data: &[u8]) -> Option<(usize, u64)> {
        match self {
            UnitKind::SpeadHeap => None,
            UnitKind::VdifSlot { .. } => {
                let w2 = u32::from_le_bytes(data.get(8..12)?.try_into().ok()?);
                let len = (w2 & 0x00ff_ffff) as usize * 8;
                let h = VdifHeader::parse(data.get(..len)?).ok()?;
                Some((len, u64::from(h.station) << 10 | u64::from(h.thread)))
            }
            UnitKind::CodifSlot { .. } => {
                let w3 = u64::from_le_bytes(data.get(24..32)?.try_into().ok()?);
                let len = usize::try_from((w3 >> 32).saturating_mul(8)).ok()? + 64;
                let h = CodifHeader::parse(data.get(..len)?).ok()?;
                Some((len, codif_part(&h)))
            }
        }
    }

    /// The unit's name in reports (`"heaps"`, `"time_slots"`).
    pub const fn plural(self) -> &'static str {
        match self {
            UnitKind::SpeadHeap => "heaps",
            UnitKind::VdifSlot { .. } | UnitKind::CodifSlot { .. } => "time_slots",
        }
    }
}

fn codif_part(h: &CodifHeader) -> u64 {
    u64::from(h.station) << 32 | u64::from(h.group) << 16 | u64::from(h.thread)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::spead::{emit_header, emit_pointer, Flavour};

    fn spead(cnt: u64, size: Option<u64>, off: u64, payload: usize) -> [u8; 128] {
        let fl = Flavour {
            heap_address_bits: 48,
        };
        let mut b = [0u8; 128];
        let items: u16 = if size.is_some() { 4 } else { 3 };
        assert!(emit_header(&mut b, fl, items));
        let mut k = 0;
        let mut put = |id: u32, v: u64| {
            assert!(emit_pointer(&mut b, k, fl.pointer(true, id, v)));
            k += 1;
        };
        put(0x01, cnt);
        if let Some(s) = size {
            put(0x02, s);
        }
        put(0x03, off);
        put(0x04, payload as u64);
        b
    }

    #[test]
    fn spead_heap_key_adds_and_needs() {
        let b = spead(7, Some(64), 16, 24);
        let body = 8 + 8 * 4;
        let u = UnitKind::SpeadHeap.unit_of(&b[..body + 24]).unwrap();
        assert_eq!(
            u,
            UnitOf {
                key: 7,
                adds: 24,
                needs: 64,
                part: 16
            }
        );
        let b = spead(9, None, 0, 8);
        let u = UnitKind::SpeadHeap.unit_of(&b[..8 + 24 + 8]).unwrap();
        assert_eq!((u.key, u.adds, u.needs), (9, 8, 0));
        assert_eq!(UnitKind::SpeadHeap.unit_of(&[0u8; 4]), Err(Reject::Short));
    }

    #[test]
    fn vdif_and_codif_slots() {
        let h = VdifHeader {
            seconds: 1000,
            ref_epoch: 44,
            frame: 3,
            version: 1,
            frame_bytes: 64,
            bits_per_sample: 2,
            thread: 5,
            ..Default::default()
        };
        let mut f = [0u8; 64];
        h.emit(&mut f).unwrap();
        let k = UnitKind::VdifSlot { frames: 4 };
        let u = k.unit_of(&f).unwrap();
        assert_eq!((u.adds, u.needs, u.part), (1, 4, 5));
        assert_eq!(k.part_at(&f), Some((64, 5)));
        assert_eq!(k.part_at(&f[..40]), None, "cut short");
        let other_thread = VdifHeader { thread: 6, ..h };
        other_thread.emit(&mut f).unwrap();
        assert_eq!(k.unit_of(&f).unwrap().key, u.key, "threads share the slot");
        let next = VdifHeader { frame: 4, ..h };
        next.emit(&mut f).unwrap();
        assert_ne!(k.unit_of(&f).unwrap().key, u.key);
        assert_eq!(
            UnitKind::CodifSlot { frames: 2 }.unit_of(&f),
            Err(Reject::Foreign),
            "a 64-byte VDIF frame is no CODIF frame (no sync word)"
        );
        assert_eq!(k.plural(), "time_slots");
        assert_eq!(UnitKind::SpeadHeap.plural(), "heaps");
    }
}
