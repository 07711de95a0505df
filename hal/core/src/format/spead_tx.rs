//! Sending SPEAD: heaps split into packets, item descriptors and the end-of-stream heap,
//! laid out as spead2 (`spead2.send`) lays them out, so that `spead2.recv` and
//! `spead2.ItemGroup` take them as spead2's own.
//!
//! ## Packets of a heap: [`Packetizer`]
//! A [`Heap`] is a heap counter, immediate items `(id, value)` and addressed items
//! `(id, bytes)`; the addressed items' bytes follow one another in the heap payload, and
//! an item's pointer holds its offset there. Every packet is the 8-byte header, item
//! pointers and a contiguous piece of the payload, at most `max_packet` bytes in all:
//!
//! | packet | item pointers, in this order |
//! |---|---|
//! | first (`k = 0`) | heap counter `0x01`, heap size `0x02`, heap offset `0x03` = 0, payload length `0x04` (all immediate); then every immediate item in [`Heap::immediates`] order; then every addressed item's pointer in [`Heap::items`] order (address = the sum of the lengths before it) |
//! | others | heap counter, heap size, heap offset, payload length |
//!
//! The first packet carries `max_packet − 8 − 8 × pointers` payload bytes (or the whole
//! payload when it is shorter), every other one `max_packet − 40` but the last: the split
//! spead2 makes for a `max_packet` that is a multiple of 8 (spead2 rounds its packet size
//! down to one; this packetizer takes `max_packet` as it is). A heap with an empty payload
//! is sent as spead2 sends one, so that its packet still carries a payload byte: a
//! NULL item pointer (id `0x00`, address 0) after the others, one zero byte of payload
//! and heap size 1. A heap whose first-packet pointers leave no room for a payload byte
//! is not sent (spead2 would spread its pointers over several packets; rtdaq's heaps
//! never need that).
//!
//! Values wider than the flavour's address bits (heap counter, an immediate, the heap
//! size) and item ids wider than its id bits are refused, not truncated.
//!
//! ## Item descriptors: [`Descriptor`]
//! A descriptor is itself one complete SPEAD packet (heap counter 1, heap size = payload
//! length = its payload bytes, offset 0) with the pointers ID `0x14` (immediate), NAME
//! `0x10`, DESCRIPTION `0x11`, FORMAT `0x13`, SHAPE `0x12` and, for a numpy type, DTYPE
//! `0x15` (addressed, in this order, their bytes in this order in the payload). FORMAT is
//! a list of fields of `9 − address bytes` bytes each (the type code, then the bit length
//! big-endian: 3 bytes for 64-48, 4 for 64-40); SHAPE a list of dimensions of `1 + address
//! bytes` bytes each (a first byte 1 for a variable dimension, else 0 and the size
//! big-endian). A numpy-typed descriptor has an empty FORMAT, its SHAPE and the numpy
//! header (e.g. `{'descr': '|u1', 'fortran_order': False, 'shape': (n,)}`,
//! [`numpy_u8_header`]). The descriptors go out in a heap of addressed items
//! `(ITEM_DESCRIPTOR, descriptor bytes)`, one per described item.
//!
//! What rtdaq's egress describes, and how `spead2.ItemGroup` reads it:
//! - an unsigned integer immediate: `Format(&[(b'u', address bits)])`, shape `[]`
//!   (spead2's `format=[('u', 48)], shape=()`): a Python `int`;
//! - a byte array of fixed length `n`: `Format(&[(b'u', 8)])`, shape `[Some(n)]`, or
//!   `Dtype(numpy_u8_header(n))` with shape `[Some(n)]`: a `numpy.uint8` array;
//! - a byte array of varying length: `Format(&[(b'u', 8)])`, shape `[None]` (spead2's
//!   `shape=(None,)`; a numpy header cannot have a variable dimension and spead2 refuses
//!   one): a `numpy.uint8` array of the item's received length.
//!
//! ## End of stream: [`emit_end`]
//! The heap spead2's `ItemGroup.get_end()` sends: its only item is stream control `0x06`
//! = [`CTRL_STREAM_STOP`] (immediate), so it is padded like an empty heap. One packet of
//! [`END_LEN`] bytes; `spead2.recv` ends the stream at it.
//!
//! Everything here is `no_std` and allocation-free, and no input panics.

use super::spead::{
    emit_header, emit_pointer, Flavour, CTRL_STREAM_STOP, HEADER_LEN, ITEM_HEAP_CNT,
    ITEM_HEAP_OFFSET, ITEM_HEAP_SIZE, ITEM_PAYLOAD_LEN, ITEM_STREAM_CTRL,
};

/// Item id: NULL (the padding pointer of a heap with an empty payload).
pub const ITEM_NULL: u32 = 0x00;
/// Item id: an item descriptor (its value is a descriptor packet).
pub const ITEM_DESCRIPTOR: u32 = 0x05;
/// Descriptor field id: item name.
pub const DESCRIPTOR_NAME: u32 = 0x10;
/// Descriptor field id: item description.
pub const DESCRIPTOR_DESCRIPTION: u32 = 0x11;
/// Descriptor field id: item shape.
pub const DESCRIPTOR_SHAPE: u32 = 0x12;
/// Descriptor field id: item format (SPEAD type codes and bit lengths).
pub const DESCRIPTOR_FORMAT: u32 = 0x13;
/// Descriptor field id: the described item's id.
pub const DESCRIPTOR_ID: u32 = 0x14;
/// Descriptor field id: numpy header (instead of a format).
pub const DESCRIPTOR_DTYPE: u32 = 0x15;
/// Item pointers every packet carries (heap counter, heap size, heap offset, payload
/// length).
pub const PACKET_POINTERS: usize = 4;
/// Smallest `max_packet` a [`Packetizer`] takes: header, the four per-packet pointers and
/// 8 payload bytes.
pub const MIN_PACKET: usize = HEADER_LEN + 8 * PACKET_POINTERS + 8;
/// Bytes of the end-of-stream packet ([`emit_end`]).
pub const END_LEN: usize = HEADER_LEN + 8 * (PACKET_POINTERS + 2) + 1;

/// True for a flavour this module can encode: 8 to 56 address bits, a multiple of 8.
const fn valid_flavour(f: Flavour) -> bool {
    let b = f.heap_address_bits;
    b >= 8 && b <= 56 && b % 8 == 0
}

/// True when `id` fits the item-id bits of `f` (a valid flavour).
const fn id_fits(f: Flavour, id: u32) -> bool {
    (id as u64) >> (63 - f.heap_address_bits as u32) == 0
}

/// A heap to send; see the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heap<'a> {
    /// Heap counter (item `0x01`).
    pub cnt: u64,
    /// Immediate items: (id, value), sent in the first packet in this order.
    pub immediates: &'a [(u32, u64)],
    /// Addressed items: (id, bytes), their bytes one after another in the payload.
    pub items: &'a [(u32, &'a [u8])],
}

impl Heap<'_> {
    /// Bytes of the addressed items (the payload before padding); `None` on overflow.
    pub fn payload_len(&self) -> Option<u64> {
        self.items
            .iter()
            .try_fold(0u64, |s, (_, b)| s.checked_add(b.len() as u64))
    }
}

/// Where packet `k` of a heap sits: [`head`](Self::head) bytes of header and pointers,
/// then heap payload bytes `offset .. offset + len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Span {
    /// Header and item-pointer bytes before the payload.
    pub head: usize,
    /// Offset of the packet's payload in the heap (item `0x03`).
    pub offset: u64,
    /// Payload bytes (item `0x04`).
    pub len: usize,
}

impl Span {
    /// Bytes of the whole packet.
    pub const fn total(&self) -> usize {
        self.head + self.len
    }
}

/// What a heap needs, from its counter, immediates and addressed items' lengths.
#[derive(Debug, Clone, Copy)]
struct Plan {
    /// Heap size sent (the payload, or 1 when it is padded).
    size: u64,
    /// The payload is empty: a NULL pointer and a zero byte pad it.
    pad: bool,
    /// Item pointers of the first packet.
    pointers: usize,
    /// Payload bytes of the first packet's capacity.
    first: u64,
    /// Payload bytes of every other packet's capacity.
    full: u64,
}

impl Plan {
    fn packets(&self) -> u64 {
        if self.size <= self.first {
            1
        } else {
            1 + (self.size - self.first).div_ceil(self.full)
        }
    }

    fn span(&self, k: u64) -> Option<Span> {
        if k >= self.packets() {
            return None;
        }
        let (offset, cap, pointers) = if k == 0 {
            (0, self.first, self.pointers)
        } else {
            (self.first + (k - 1) * self.full, self.full, PACKET_POINTERS)
        };
        Some(Span {
            head: HEADER_LEN + 8 * pointers,
            offset,
            // At most `max_packet` (a usize).
            len: cap.min(self.size - offset) as usize,
        })
    }
}

/// Splits heaps into packets as spead2 does; see the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Packetizer {
    flavour: Flavour,
    max_packet: usize,
}

impl Packetizer {
    /// A packetizer of `flavour` for packets of at most `max_packet` bytes; `None` when
    /// `max_packet` is below [`MIN_PACKET`] or the flavour is not one of 8 to 56 address
    /// bits in steps of 8.
    pub const fn new(flavour: Flavour, max_packet: usize) -> Option<Self> {
        if max_packet < MIN_PACKET || !valid_flavour(flavour) {
            return None;
        }
        Some(Self {
            flavour,
            max_packet,
        })
    }

    /// The flavour.
    pub const fn flavour(&self) -> Flavour {
        self.flavour
    }

    /// The largest packet, in bytes.
    pub const fn max_packet(&self) -> usize {
        self.max_packet
    }

    /// Payload bytes of every packet but a heap's first and last.
    pub const fn full_payload(&self) -> usize {
        self.max_packet - HEADER_LEN - 8 * PACKET_POINTERS
    }

    /// The plan of a heap, or `None` when it cannot be sent.
    fn plan<I>(&self, cnt: u64, immediates: &[(u32, u64)], items: I) -> Option<Plan>
    where
        I: Iterator<Item = (u32, u64)>,
    {
        let f = self.flavour;
        let mask = f.value_mask();
        let mut payload = 0u64;
        let mut n_items = 0usize;
        for (id, len) in items {
            if !id_fits(f, id) {
                return None;
            }
            payload = payload.checked_add(len)?;
            n_items += 1;
        }
        if cnt > mask
            || immediates
                .iter()
                .any(|&(id, v)| !id_fits(f, id) || v > mask)
        {
            return None;
        }
        let pad = payload == 0;
        let size = payload.max(1);
        let pointers = PACKET_POINTERS + immediates.len() + n_items + usize::from(pad);
        let head = pointers
            .checked_mul(8)
            .and_then(|p| p.checked_add(HEADER_LEN))?;
        if size > mask || pointers > usize::from(u16::MAX) || head >= self.max_packet {
            return None;
        }
        Some(Plan {
            size,
            pad,
            pointers,
            first: (self.max_packet - head) as u64,
            full: self.full_payload() as u64,
        })
    }

    fn heap_plan(&self, h: &Heap) -> Option<Plan> {
        self.plan(
            h.cnt,
            h.immediates,
            h.items.iter().map(|(id, b)| (*id, b.len() as u64)),
        )
    }

    /// Item pointers in the first packet of `h` (the four per-packet ones, its immediates,
    /// its addressed items and the NULL pointer of an empty payload); 0 when `h` cannot be
    /// sent (see [`count`](Self::count)).
    pub fn first_packet_pointers(&self, h: &Heap) -> usize {
        self.heap_plan(h).map_or(0, |p| p.pointers)
    }

    /// The heap size sent for `h` (its payload, or 1 for an empty one); `None` when `h`
    /// cannot be sent.
    pub fn heap_size(&self, h: &Heap) -> Option<u64> {
        self.heap_plan(h).map(|p| p.size)
    }

    /// Packets of heap `h`: at least 1, also for an empty payload. 0 when `h` cannot be
    /// sent: its first packet's pointers leave no payload byte within `max_packet`, it has
    /// more than 65535 pointers, or its counter, an immediate value or its size exceeds
    /// the flavour's address bits, or an item id its id bits.
    pub fn count(&self, h: &Heap) -> usize {
        self.heap_plan(h)
            .and_then(|p| usize::try_from(p.packets()).ok())
            .unwrap_or(0)
    }

    /// Where packet `k` of `h` sits; `None` when `k ≥ count(h)`.
    pub fn span(&self, h: &Heap, k: usize) -> Option<Span> {
        self.heap_plan(h)?.span(k as u64)
    }

    /// Writes header and pointers of packet `k`; `None` when `k` is out of range or `out`
    /// is shorter than the packet.
    fn write_head<I>(
        &self,
        plan: &Plan,
        cnt: u64,
        immediates: &[(u32, u64)],
        items: I,
        k: usize,
        out: &mut [u8],
    ) -> Option<Span>
    where
        I: Iterator<Item = (u32, u64)>,
    {
        let s = plan.span(k as u64)?;
        if out.len() < s.total() {
            return None;
        }
        let f = self.flavour;
        // `pointers` ≤ u16::MAX (checked by `plan`).
        let n = if k == 0 {
            plan.pointers
        } else {
            PACKET_POINTERS
        } as u16;
        emit_header(out, f, n);
        let fixed = [
            f.pointer(true, ITEM_HEAP_CNT, cnt),
            f.pointer(true, ITEM_HEAP_SIZE, plan.size),
            f.pointer(true, ITEM_HEAP_OFFSET, s.offset),
            f.pointer(true, ITEM_PAYLOAD_LEN, s.len as u64),
        ];
        for (i, p) in fixed.into_iter().enumerate() {
            emit_pointer(out, i, p);
        }
        if k == 0 {
            let mut i = PACKET_POINTERS;
            for &(id, v) in immediates {
                emit_pointer(out, i, f.pointer(true, id, v));
                i += 1;
            }
            let mut addr = 0u64;
            for (id, len) in items {
                emit_pointer(out, i, f.pointer(false, id, addr));
                addr += len;
                i += 1;
            }
            if plan.pad {
                emit_pointer(out, i, f.pointer(false, ITEM_NULL, 0));
            }
        }
        Some(s)
    }

    /// Writes packet `k` of `h` into the start of `out` and returns its length; 0 when
    /// `k ≥ count(h)` (so also when `h` cannot be sent) or `out` is shorter than the
    /// packet.
    pub fn emit(&self, h: &Heap, k: usize, out: &mut [u8]) -> usize {
        let Some(plan) = self.heap_plan(h) else {
            return 0;
        };
        let lens = h.items.iter().map(|(id, b)| (*id, b.len() as u64));
        let Some(s) = self.write_head(&plan, h.cnt, h.immediates, lens, k, out) else {
            return 0;
        };
        let dst = &mut out[s.head..s.total()];
        if plan.pad {
            dst.fill(0);
            return s.total();
        }
        // Copy the parts of the items that overlap `offset .. offset + len`.
        let (lo, hi) = (s.offset, s.offset + s.len as u64);
        let mut at = 0u64;
        for (_, b) in h.items {
            let end = at + b.len() as u64;
            if end > lo && at < hi {
                let from = lo.max(at);
                let to = hi.min(end);
                let src = &b[(from - at) as usize..(to - at) as usize];
                let d = (from - lo) as usize;
                dst[d..d + src.len()].copy_from_slice(src);
            }
            if end >= hi {
                break;
            }
            at = end;
        }
        s.total()
    }

    /// Packets of a heap whose addressed items have the lengths `items` (id, bytes), for a
    /// sender that writes the payload itself; as [`count`](Self::count).
    pub fn count_sized(&self, cnt: u64, immediates: &[(u32, u64)], items: &[(u32, u64)]) -> usize {
        self.plan(cnt, immediates, items.iter().copied())
            .and_then(|p| usize::try_from(p.packets()).ok())
            .unwrap_or(0)
    }

    /// Writes the header and item pointers of packet `k` of a heap whose addressed items
    /// have the lengths `items` (id, bytes), as [`emit`](Self::emit) would; the caller
    /// writes heap payload bytes `span.offset .. span.offset + span.len` at
    /// `out[span.head..span.total()]` (for an empty payload: one zero byte). `None` when
    /// `k ≥ count_sized(..)` or `out` is shorter than the packet.
    pub fn emit_head(
        &self,
        cnt: u64,
        immediates: &[(u32, u64)],
        items: &[(u32, u64)],
        k: usize,
        out: &mut [u8],
    ) -> Option<Span> {
        let plan = self.plan(cnt, immediates, items.iter().copied())?;
        self.write_head(&plan, cnt, immediates, items.iter().copied(), k, out)
    }
}

/// Writes the end-of-stream packet (heap `cnt` carrying stream control
/// [`CTRL_STREAM_STOP`]) into `out`; returns [`END_LEN`], or 0 when `out` is shorter, the
/// flavour is not valid or `cnt` exceeds its address bits.
pub fn emit_end(flavour: Flavour, cnt: u64, out: &mut [u8]) -> usize {
    let Some(p) = Packetizer::new(flavour, END_LEN.max(MIN_PACKET)) else {
        return 0;
    };
    let h = Heap {
        cnt,
        immediates: &[(ITEM_STREAM_CTRL, CTRL_STREAM_STOP)],
        items: &[],
    };
    p.emit(&h, 0, out)
}

/// The type of a described item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemType<'a> {
    /// SPEAD format: fields of (type code, bits), e.g. `[(b'u', 48)]`.
    Format(&'a [(u8, u32)]),
    /// A numpy header (ASCII), e.g. from [`numpy_u8_header`].
    Dtype(&'a [u8]),
}

/// One item descriptor; see the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor<'a> {
    /// The described item's id.
    pub id: u32,
    /// Its name (ASCII: spead2 decodes it so).
    pub name: &'a [u8],
    /// Its description (ASCII).
    pub description: &'a [u8],
    /// Its dimensions; `None` is a variable one (at most one, for spead2).
    pub shape: &'a [Option<u64>],
    /// Its type.
    pub ty: ItemType<'a>,
}

impl Descriptor<'_> {
    /// Bytes of a FORMAT field in `f`.
    const fn field_len(f: Flavour) -> usize {
        9 - f.heap_address_bits as usize / 8
    }

    /// Bytes of a SHAPE dimension in `f`.
    const fn dim_len(f: Flavour) -> usize {
        1 + f.heap_address_bits as usize / 8
    }

    /// The descriptor's fields in payload order: (id, length).
    fn fields(&self, f: Flavour) -> Option<[(u32, usize); 5]> {
        let (format, dtype) = match self.ty {
            ItemType::Format(fields) => (fields.len().checked_mul(Self::field_len(f))?, 0),
            ItemType::Dtype(h) => (0, h.len()),
        };
        Some([
            (DESCRIPTOR_NAME, self.name.len()),
            (DESCRIPTOR_DESCRIPTION, self.description.len()),
            (DESCRIPTOR_FORMAT, format),
            (
                DESCRIPTOR_SHAPE,
                self.shape.len().checked_mul(Self::dim_len(f))?,
            ),
            (DESCRIPTOR_DTYPE, dtype),
        ])
    }

    /// Item pointers of the descriptor packet.
    fn pointers(&self) -> usize {
        PACKET_POINTERS + 5 + usize::from(matches!(self.ty, ItemType::Dtype(_)))
    }

    /// Bytes of the encoded descriptor in `f`; `None` when it cannot be encoded: an
    /// invalid flavour, id 0 or an id beyond the id bits, a format field's bits beyond its
    /// field, a dimension beyond the address bits, or a size beyond the address bits.
    pub fn len(&self, f: Flavour) -> Option<usize> {
        if !valid_flavour(f) || self.id == 0 || !id_fits(f, self.id) {
            return None;
        }
        let bits = 8 * (Self::field_len(f) as u32 - 1);
        if let ItemType::Format(fields) = self.ty {
            if fields.iter().any(|&(_, b)| u64::from(b) >> bits != 0) {
                return None;
            }
        }
        if self.shape.iter().flatten().any(|&d| d > f.value_mask()) {
            return None;
        }
        let payload = self
            .fields(f)?
            .iter()
            .try_fold(0usize, |s, &(_, l)| s.checked_add(l))?;
        if payload as u64 > f.value_mask() {
            return None;
        }
        payload.checked_add(HEADER_LEN + 8 * self.pointers())
    }

    /// Writes the descriptor packet into the start of `out` and returns its length; 0
    /// when it cannot be encoded ([`len`](Self::len)) or `out` is shorter.
    pub fn emit(&self, f: Flavour, out: &mut [u8]) -> usize {
        // `len` checks the flavour before `fields` uses it.
        let Some(total) = self.len(f) else {
            return 0;
        };
        let Some(fields) = self.fields(f) else {
            return 0;
        };
        let Some(out) = out.get_mut(..total) else {
            return 0;
        };
        let head = HEADER_LEN + 8 * self.pointers();
        let payload = (total - head) as u64;
        emit_header(out, f, self.pointers() as u16);
        let fixed = [
            f.pointer(true, ITEM_HEAP_CNT, 1),
            f.pointer(true, ITEM_HEAP_SIZE, payload),
            f.pointer(true, ITEM_HEAP_OFFSET, 0),
            f.pointer(true, ITEM_PAYLOAD_LEN, payload),
            f.pointer(true, DESCRIPTOR_ID, u64::from(self.id)),
        ];
        for (i, p) in fixed.into_iter().enumerate() {
            emit_pointer(out, i, p);
        }
        let mut addr = 0usize;
        let with_dtype = self.pointers() - fixed.len();
        for (i, &(id, len)) in fields.iter().take(with_dtype).enumerate() {
            emit_pointer(out, fixed.len() + i, f.pointer(false, id, addr as u64));
            addr += len;
        }
        let body = &mut out[head..];
        let (name, rest) = body.split_at_mut(self.name.len());
        name.copy_from_slice(self.name);
        let (desc, rest) = rest.split_at_mut(self.description.len());
        desc.copy_from_slice(self.description);
        let (format, rest) = rest.split_at_mut(fields[2].1);
        if let ItemType::Format(fs) = self.ty {
            let w = Self::field_len(f);
            for (c, &(code, bits)) in format.chunks_exact_mut(w).zip(fs) {
                c[0] = code;
                c[1..].copy_from_slice(&u64::from(bits).to_be_bytes()[9 - w..]);
            }
        }
        let (shape, rest) = rest.split_at_mut(fields[3].1);
        let w = Self::dim_len(f);
        for (c, d) in shape.chunks_exact_mut(w).zip(self.shape) {
            match d {
                Some(n) => {
                    c[0] = 0;
                    c[1..].copy_from_slice(&n.to_be_bytes()[9 - w..]);
                }
                None => {
                    c.fill(0);
                    c[0] = 1;
                }
            }
        }
        if let ItemType::Dtype(h) = self.ty {
            rest.copy_from_slice(h);
        }
        total
    }
}

/// Writes the numpy header of a C-ordered `uint8` array of `n` elements,
/// `{'descr': '|u1', 'fortran_order': False, 'shape': (n,)}` (as spead2 writes it), into
/// `out` and returns its length; 0 when `out` is shorter.
pub fn numpy_u8_header(n: u64, out: &mut [u8]) -> usize {
    const HEAD: &[u8] = b"{'descr': '|u1', 'fortran_order': False, 'shape': (";
    const TAIL: &[u8] = b",)}";
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let num = &digits[i..];
    let total = HEAD.len() + num.len() + TAIL.len();
    let Some(out) = out.get_mut(..total) else {
        return 0;
    };
    let (a, rest) = out.split_at_mut(HEAD.len());
    a.copy_from_slice(HEAD);
    let (b, c) = rest.split_at_mut(num.len());
    b.copy_from_slice(num);
    c.copy_from_slice(TAIL);
    total
}

#[cfg(test)]
mod tests {
    use super::super::spead::SpeadPacket;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    const FLAVOURS: [Flavour; 2] = [Flavour::F64_48, Flavour::F64_40];

    /// The pointers of a packet: (immediate, id, value).
    fn pointers(pkt: &[u8]) -> Vec<(bool, u32, u64)> {
        let bits = u32::from(pkt[3]) * 8;
        let n = usize::from(u16::from_be_bytes([pkt[6], pkt[7]]));
        pkt[HEADER_LEN..HEADER_LEN + 8 * n]
            .chunks_exact(8)
            .map(|c| {
                let v = u64::from_be_bytes(c.try_into().unwrap());
                let id = ((v >> bits) & ((1 << (63 - bits)) - 1)) as u32;
                (v >> 63 == 1, id, v & ((1 << bits) - 1))
            })
            .collect()
    }

    /// Emits every packet of `h`, checks each against `SpeadPacket::parse` and the layout,
    /// and returns the reassembled payload.
    fn round_trip(p: &Packetizer, h: &Heap) -> Vec<u8> {
        let n = p.count(h);
        assert!(n >= 1);
        let size = p.heap_size(h).unwrap();
        let mut heap = vec![0u8; size as usize];
        let mut next = 0u64;
        let mut buf = vec![0u8; p.max_packet() + 16];
        for k in 0..n {
            let len = p.emit(h, k, &mut buf);
            assert!(len > 0 && len <= p.max_packet(), "packet {k}: {len}");
            let s = p.span(h, k).unwrap();
            assert_eq!(s.total(), len);
            let pkt = SpeadPacket::parse(&buf[..len], Some(p.flavour())).unwrap();
            assert_eq!(pkt.heap_cnt, h.cnt);
            assert_eq!(pkt.heap_size, Some(size));
            assert_eq!(pkt.offset, next, "contiguous");
            assert!(pkt.length >= 1);
            assert!(!pkt.stop);
            let ptrs = pointers(&buf[..len]);
            let fixed: Vec<u32> = ptrs.iter().take(4).map(|p| p.1).collect();
            assert_eq!(fixed, [1, 2, 3, 4]);
            if k == 0 {
                assert_eq!(ptrs.len(), p.first_packet_pointers(h));
                let imm = &ptrs[4..4 + h.immediates.len()];
                for (got, want) in imm.iter().zip(h.immediates) {
                    assert_eq!((got.0, got.1, got.2), (true, want.0, want.1));
                }
                let mut addr = 0;
                for (got, want) in ptrs[4 + h.immediates.len()..].iter().zip(h.items) {
                    assert_eq!((got.0, got.1, got.2), (false, want.0, addr));
                    addr += want.1.len() as u64;
                }
            } else {
                assert_eq!(ptrs.len(), 4);
                // Every packet but the last is full.
                if k + 1 < n {
                    assert_eq!(len, p.max_packet());
                }
            }
            if k + 1 < n {
                assert_eq!(len, p.max_packet(), "all but the last packet are full");
            }
            let off = pkt.offset as usize;
            heap[off..off + pkt.length as usize]
                .copy_from_slice(&buf[len - pkt.length as usize..len]);
            next += pkt.length;
            assert_eq!(p.emit(h, k, &mut buf[..len - 1]), 0, "short out");
        }
        assert_eq!(next, size, "covers the heap");
        assert_eq!(p.emit(h, n, &mut buf), 0, "k out of range");
        assert!(p.span(h, n).is_none());
        heap
    }

    fn concat(h: &Heap) -> Vec<u8> {
        h.items
            .iter()
            .flat_map(|(_, b)| b.iter().copied())
            .collect()
    }

    #[test]
    fn split_and_reassemble() {
        let big: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + 3) as u8).collect();
        let small = [0xA5u8];
        let mid: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        for f in FLAVOURS {
            for max in [MIN_PACKET, 57, 64, 100, 1472, 9000] {
                let p = Packetizer::new(f, max).unwrap();
                let cases: [&[(u32, &[u8])]; 5] = [
                    &[(0x1800, &small)],
                    &[(0x1800, &mid)],
                    &[(0x1800, &big)],
                    &[
                        (0x1800, &mid),
                        (0x1801, &[]),
                        (0x1802, &small),
                        (0x1803, &big),
                    ],
                    &[(0x1800, &mid[..8]), (0x1801, &big[..max])],
                ];
                for items in cases {
                    for imm in [&[][..], &[(0x1600, 42)][..]] {
                        let h = Heap {
                            cnt: 77,
                            immediates: imm,
                            items,
                        };
                        if p.count(&h) == 0 {
                            // Only the smallest packets cannot hold 6+ pointers.
                            assert!(max < HEADER_LEN + 8 * p.first_packet_pointers_raw(&h) + 1);
                            continue;
                        }
                        assert_eq!(round_trip(&p, &h), concat(&h), "{f:?} max {max}");
                    }
                }
            }
        }
    }

    impl Packetizer {
        /// First-packet pointers even when the heap cannot be sent.
        fn first_packet_pointers_raw(&self, h: &Heap) -> usize {
            4 + h.immediates.len()
                + h.items.len()
                + usize::from(h.items.iter().all(|(_, b)| b.is_empty()))
        }
    }

    #[test]
    fn spead2_split_at_1472() {
        // spead2 at 1472-byte packets: 1416 payload bytes in the first packet of a heap of
        // two items (8 + 6 × 8 bytes before them), 1432 in the others.
        let data = vec![1u8; 5000];
        let h = Heap {
            cnt: 1,
            immediates: &[(0x1600, 0)],
            items: &[(0x1800, &data)],
        };
        let p = Packetizer::new(Flavour::F64_48, 1472).unwrap();
        assert_eq!(p.count(&h), 4);
        let lens: Vec<usize> = (0..4).map(|k| p.span(&h, k).unwrap().len).collect();
        assert_eq!(lens, [1416, 1432, 1432, 720]);
        assert_eq!(p.full_payload(), 1432);
    }

    #[test]
    fn empty_heap_is_padded_like_spead2() {
        for f in FLAVOURS {
            let p = Packetizer::new(f, 1500).unwrap();
            let h = Heap {
                cnt: 5,
                immediates: &[(0x1600, 9)],
                items: &[],
            };
            assert_eq!(p.count(&h), 1);
            assert_eq!(p.heap_size(&h), Some(1));
            assert_eq!(round_trip(&p, &h), [0]);
            let mut b = [0xFFu8; 64];
            let n = p.emit(&h, 0, &mut b);
            assert_eq!(n, 8 + 6 * 8 + 1);
            assert_eq!(pointers(&b[..n])[5], (false, ITEM_NULL, 0));
            // Zero-length items only: padded too, their pointers all at address 0.
            let h = Heap {
                cnt: 5,
                immediates: &[],
                items: &[(0x1800, &[]), (0x1801, &[])],
            };
            assert_eq!(round_trip(&p, &h), [0]);
        }
    }

    #[test]
    fn end_of_stream_matches_spead2() {
        // spead2 4.5.1, `BytesStream.send_heap(ItemGroup(flavour 64-48).get_end())`.
        let want: [u8; END_LEN] = [
            0x53, 0x04, 0x02, 0x06, 0, 0, 0, 6, //
            0x80, 0x01, 0, 0, 0, 0, 0, 0x01, //
            0x80, 0x02, 0, 0, 0, 0, 0, 0x01, //
            0x80, 0x03, 0, 0, 0, 0, 0, 0, //
            0x80, 0x04, 0, 0, 0, 0, 0, 0x01, //
            0x80, 0x06, 0, 0, 0, 0, 0, 0x02, //
            0, 0, 0, 0, 0, 0, 0, 0, //
            0,
        ];
        let mut b = [0xEEu8; 80];
        assert_eq!(emit_end(Flavour::F64_48, 1, &mut b), END_LEN);
        assert_eq!(b[..END_LEN], want);
        let pkt = SpeadPacket::parse(&b[..END_LEN], None).unwrap();
        assert!(pkt.stop);
        assert_eq!(emit_end(Flavour::F64_40, 3, &mut b), END_LEN);
        let pkt = SpeadPacket::parse(&b[..END_LEN], Some(Flavour::F64_40)).unwrap();
        assert!(pkt.stop && pkt.heap_cnt == 3);
        assert_eq!(emit_end(Flavour::F64_48, 1, &mut b[..END_LEN - 1]), 0);
        assert_eq!(emit_end(Flavour::F64_48, 1 << 48, &mut b), 0);
    }

    #[test]
    fn refusals() {
        let f = Flavour::F64_48;
        assert!(Packetizer::new(f, MIN_PACKET - 1).is_none());
        for bits in [0u8, 4, 64, 200] {
            let bad = Flavour {
                heap_address_bits: bits,
            };
            assert!(Packetizer::new(bad, 1500).is_none());
            assert_eq!(emit_end(bad, 1, &mut [0u8; 64]), 0);
        }
        let d = [0u8; 100];
        let fits = Heap {
            cnt: 1,
            immediates: &[],
            items: &[(0x1800, &d)],
        };
        // The smallest packet holds the 4 fixed pointers and 8 payload bytes, but no item.
        let p = Packetizer::new(f, MIN_PACKET).unwrap();
        assert_eq!(p.count(&fits), 0);
        // 57 bytes: 4 + 1 pointers leave 9 payload bytes, 17 in the other packets; 4 + 5
        // pointers do not fit.
        let p = Packetizer::new(f, 57).unwrap();
        assert_eq!(p.count(&fits), 1 + (100 - 9usize).div_ceil(17));
        let items = [(0x1800, &d[..]); 5];
        let crowded = Heap {
            cnt: 1,
            immediates: &[],
            items: &items,
        };
        assert_eq!(p.count(&crowded), 0);
        assert_eq!(p.emit(&crowded, 0, &mut [0u8; 100]), 0);
        assert!(p.span(&crowded, 0).is_none());
        assert_eq!(p.first_packet_pointers(&crowded), 0);
        let p = Packetizer::new(f, 1500).unwrap();
        let wide = [
            Heap {
                cnt: 1 << 48,
                immediates: &[],
                items: &[(0x1800, &d)],
            },
            Heap {
                cnt: 1,
                immediates: &[(0x1600, 1 << 48)],
                items: &[(0x1800, &d)],
            },
            Heap {
                cnt: 1,
                immediates: &[(0x8000, 1)],
                items: &[(0x1800, &d)],
            },
            Heap {
                cnt: 1,
                immediates: &[],
                items: &[(0x8000, &d)],
            },
        ];
        for h in &wide {
            assert_eq!(p.count(h), 0, "{h:?}");
            assert_eq!(p.emit(h, 0, &mut [0u8; 1500]), 0);
        }
        // 64-40 has 23 id bits.
        let p40 = Packetizer::new(Flavour::F64_40, 1500).unwrap();
        assert_eq!(p40.count(&wide[2]), 1);
        assert_eq!(p40.count(&wide[0]), 0);
    }

    #[test]
    fn emit_head_matches_emit() {
        let data: Vec<u8> = (0..4000u32).map(|i| (i % 251) as u8).collect();
        let h = Heap {
            cnt: 9,
            immediates: &[(0x1600, 3)],
            items: &[(0x1800, &data[..1000]), (0x1801, &data[1000..])],
        };
        let lens = [(0x1800, 1000u64), (0x1801, 3000)];
        let p = Packetizer::new(Flavour::F64_48, 1000).unwrap();
        assert_eq!(p.count_sized(9, h.immediates, &lens), p.count(&h));
        let (mut a, mut b) = ([0u8; 1000], [0u8; 1000]);
        for k in 0..=p.count(&h) {
            let n = p.emit(&h, k, &mut a);
            let Some(s) = p.emit_head(9, h.immediates, &lens, k, &mut b) else {
                assert_eq!(n, 0);
                continue;
            };
            let off = s.offset as usize;
            b[s.head..s.total()].copy_from_slice(&data[off..off + s.len]);
            assert_eq!(a[..n], b[..s.total()]);
        }
    }

    /// spead2 4.5.1's descriptors of `ItemGroup(flavour 64-48)`:
    /// `add_item(0x1600, "timestamp", "ts", shape=(), format=[("u", 48)])`,
    /// `add_item(0x1800, "data", "d", shape=(None,), format=[("u", 8)])`,
    /// `add_item(0x1801, "data2", "d", shape=(3,), dtype=np.uint8)`, each as
    /// `Heap.add_descriptor` encodes it (the value of an item 0x05 of a `BytesStream`).
    const SPEAD2_DESCRIPTORS: [&str; 3] = [
        concat!(
            "53040206000000098001000000000001800200000000000e8003000000000000",
            "800400000000000e801400000000160000100000000000000011000000000009",
            "001300000000000b001200000000000e74696d657374616d707473750030",
        ),
        concat!(
            "53040206000000098001000000000001800200000000000f8003000000000000",
            "800400000000000f801400000000180000100000000000000011000000000004",
            "00130000000000050012000000000008646174616475000801000000000000",
        ),
        concat!(
            "530402060000000a800100000000000180020000000000448003000000000000",
            "8004000000000044801400000000180100100000000000000011000000000005",
            "00130000000000060012000000000006001500000000000d6461746132640000",
            "00000000037b276465736372273a20277c7531272c2027666f727472616e5f6f",
            "72646572273a2046616c73652c20277368617065273a2028332c297d",
        ),
    ];

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn descriptors_match_spead2() {
        let f = Flavour::F64_48;
        let mut np = [0u8; 80];
        let nh = numpy_u8_header(3, &mut np);
        let ds = [
            Descriptor {
                id: 0x1600,
                name: b"timestamp",
                description: b"ts",
                shape: &[],
                ty: ItemType::Format(&[(b'u', 48)]),
            },
            Descriptor {
                id: 0x1800,
                name: b"data",
                description: b"d",
                shape: &[None],
                ty: ItemType::Format(&[(b'u', 8)]),
            },
            Descriptor {
                id: 0x1801,
                name: b"data2",
                description: b"d",
                shape: &[Some(3)],
                ty: ItemType::Dtype(&np[..nh]),
            },
        ];
        let mut b = [0u8; 256];
        for (d, want) in ds.iter().zip(SPEAD2_DESCRIPTORS) {
            let n = d.emit(f, &mut b);
            assert_eq!(Some(n), d.len(f));
            assert_eq!(b[..n], hex(want)[..], "{d:?}");
            assert!(SpeadPacket::parse(&b[..n], Some(f)).is_ok());
            assert_eq!(d.emit(f, &mut b[..n - 1]), 0, "short out");
        }
    }

    #[test]
    fn descriptor_refusals_and_flavour_40() {
        let f = Flavour::F64_40;
        let d = Descriptor {
            id: 0x1600,
            name: b"t",
            description: b"",
            shape: &[Some(5), None],
            ty: ItemType::Format(&[(b'u', 40), (b'i', 70_000)]),
        };
        let mut b = [0u8; 256];
        let n = d.emit(f, &mut b);
        // 4-byte format fields and 6-byte dimensions in 64-40.
        assert_eq!(n, 8 + 9 * 8 + 1 + 2 * 4 + 2 * 6);
        let body = &b[n - 20..n];
        assert_eq!(body[..8], [b'u', 0, 0, 40, b'i', 0x01, 0x11, 0x70]);
        assert_eq!(body[8..], [0, 0, 0, 0, 0, 5, 1, 0, 0, 0, 0, 0]);
        // 70000 bits do not fit the 2 bytes of a 64-48 format field.
        assert_eq!(d.emit(Flavour::F64_48, &mut b), 0);
        let bad = [
            Descriptor { id: 0, ..d },
            Descriptor { id: 1 << 23, ..d },
            Descriptor {
                shape: &[Some(1 << 40)],
                ..d
            },
        ];
        for x in bad {
            assert_eq!(x.len(f), None);
            assert_eq!(x.emit(f, &mut b), 0);
        }
        let nf = Flavour {
            heap_address_bits: 64,
        };
        assert_eq!(d.emit(nf, &mut b), 0);
    }

    #[test]
    fn numpy_headers() {
        let mut b = [0u8; 80];
        let n = numpy_u8_header(0, &mut b);
        assert_eq!(
            &b[..n],
            b"{'descr': '|u1', 'fortran_order': False, 'shape': (0,)}"
        );
        let n = numpy_u8_header(u64::MAX, &mut b);
        assert!(b[..n].ends_with(b"(18446744073709551615,)}"));
        assert_eq!(numpy_u8_header(12, &mut b[..10]), 0);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            #[test]
            fn any_heap_round_trips_or_is_refused(
                f48 in any::<bool>(),
                max in MIN_PACKET..2000usize,
                cnt in 0u64..(1 << 40),
                imm in proptest::collection::vec((0x1000u32..0x7fff, any::<u64>()), 0..4),
                lens in proptest::collection::vec(0usize..5000, 0..5),
                seed in any::<u8>(),
            ) {
                let f = if f48 { Flavour::F64_48 } else { Flavour::F64_40 };
                let imm: Vec<(u32, u64)> = imm.into_iter().map(|(i, v)| (i, v & f.value_mask())).collect();
                let bufs: Vec<Vec<u8>> = lens
                    .iter()
                    .enumerate()
                    .map(|(i, &l)| (0..l).map(|j| (j as u8) ^ seed ^ (i as u8)).collect())
                    .collect();
                let items: Vec<(u32, &[u8])> =
                    bufs.iter().enumerate().map(|(i, b)| (0x1800 + i as u32, &b[..])).collect();
                let h = Heap { cnt, immediates: &imm, items: &items };
                let p = Packetizer::new(f, max).unwrap();
                if p.count(&h) == 0 {
                    prop_assert!(max < HEADER_LEN + 8 * p.first_packet_pointers_raw(&h) + 1);
                } else {
                    let got = round_trip(&p, &h);
                    let want = concat(&h);
                    if want.is_empty() {
                        prop_assert_eq!(got, vec![0u8]);
                    } else {
                        prop_assert_eq!(got, want);
                    }
                }
            }

            #[test]
            fn emit_never_panics(
                max in 0usize..200,
                bits in any::<u8>(),
                k in 0usize..50,
                out_len in 0usize..300,
                lens in proptest::collection::vec(0usize..300, 0..4),
                cnt in any::<u64>(),
                id in any::<u32>(),
            ) {
                let f = Flavour { heap_address_bits: bits };
                let bufs: Vec<Vec<u8>> = lens.iter().map(|&l| vec![7u8; l]).collect();
                let items: Vec<(u32, &[u8])> = bufs.iter().map(|b| (id, &b[..])).collect();
                let h = Heap { cnt, immediates: &[(id, cnt)], items: &items };
                let mut out = vec![0u8; out_len];
                if let Some(p) = Packetizer::new(f, max) {
                    let n = p.emit(&h, k, &mut out);
                    prop_assert!(n <= out_len && n <= max);
                    let _ = p.count(&h);
                }
                let _ = emit_end(f, cnt, &mut out);
                let d = Descriptor {
                    id,
                    name: b"n",
                    description: b"",
                    shape: &[Some(cnt), None],
                    ty: ItemType::Format(&[(b'u', id)]),
                };
                let n = d.emit(f, &mut out);
                prop_assert!(n <= out_len);
            }
        }
    }
}
