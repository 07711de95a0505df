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
        let (Some(total), Some(fields)) = (self.len(f), self.fields(f)) else {
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
