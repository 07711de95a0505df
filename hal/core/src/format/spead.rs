//! SPEAD (Streaming Protocol for Exchanging Astronomical Data) packets and heaps.
//!
//! A SPEAD packet is an 8-byte header, `n` 64-bit item pointers and a payload, all
//! big-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 0 | magic `0x53` |
//! | 1 | version `4` |
//! | 2 | item-identifier bytes of an item pointer (`8 − 3` for flavour 64-40, `8 − 6` for 64-48) |
//! | 3 | heap-address bytes (5 for 64-40, 6 for 64-48) |
//! | 4..6 | reserved |
//! | 6..8 | number of item pointers |
//! | 8.. | item pointers: bit 63 immediate, then the item id, then the low *address bits* (value or address) |
//!
//! A packet carries a piece of one **heap**: the immediate items heap counter (`0x01`),
//! heap size (`0x02`, optional in SPEAD, always sent by spead2), heap offset (`0x03`) and
//! packet payload length (`0x04`) place its payload at `offset .. offset + length` of the
//! heap. Stream control (`0x06`) = 2 ends the stream. [`SpeadPacket::parse`] reads these
//! and checks that the payload length equals the bytes that follow the item pointers.
//!
//! ## Heap assembly: [`HeapTracker`]
//! One tracker per stream (the validator keys streams by `heap counter % heap_step`, so
//! senders that interleave their counters with a step are tracked one by one). Heaps live
//! in a window of the [`HEAP_WINDOW`] newest heap numbers (`heap counter / heap_step`); a
//! heap leaves the window when a heap that many numbers newer starts (or at the end of
//! the run, or at the stream's end-of-stream packet) and is then counted:
//!
//! - **complete**: all `heap size` bytes arrived; **incomplete**: some did not
//!   (`missing_bytes` += the difference); **unsized**: no packet of it carried a heap size,
//!   so its completeness is unknown;
//! - **missing**: no packet of a heap number inside the stream's range arrived; its bytes
//!   and packets are counted as those of the newest heap that did arrive (exact for the
//!   fixed-size heaps of an instrument);
//! - **missing packets** of a heap: the packets its size needs minus those that arrived.
//!   The packet layout is **learned**: senders such as spead2 put `first` payload bytes in
//!   a heap's first packet (it carries all the item pointers) and `full` in every other
//!   but the last, so a heap of `s > first` bytes has `1 + ⌈(s − first) / full⌉` packets.
//!   `first` comes from a packet at offset 0 that is not the whole heap, `full` from a
//!   packet that is neither first nor last (and `first` from its offset: `offset =
//!   first + k·full`). Until both are known, missing bytes are divided by the largest
//!   payload seen: a lower bound;
//! - **duplicates**: a packet whose slot (index from the layout) of its heap already
//!   arrived, or one that would take the heap beyond its size; **too old**: a packet of a
//!   heap that already left the window, or of a heap number before the stream's first.
//!   Neither changes the heap's counts.
//!
//! The heap that carries the end-of-stream item counts in `ends`, not as a data heap.
//! Heap counters are taken as increasing and not wrapping (48 bits last 8.9 years at a
//! million heaps a second). Everything is fixed-size: no allocation, `O(1)` per packet
//! except a window slide, which visits at most [`HEAP_WINDOW`] heaps.

use super::Reject;

/// SPEAD magic byte.
pub const MAGIC: u8 = 0x53;
/// SPEAD version byte.
pub const VERSION: u8 = 4;
/// Header bytes before the item pointers.
pub const HEADER_LEN: usize = 8;
/// Item id: heap counter.
pub const ITEM_HEAP_CNT: u32 = 0x01;
/// Item id: heap size.
pub const ITEM_HEAP_SIZE: u32 = 0x02;
/// Item id: heap offset of this packet's payload.
pub const ITEM_HEAP_OFFSET: u32 = 0x03;
/// Item id: this packet's payload length.
pub const ITEM_PAYLOAD_LEN: u32 = 0x04;
/// Item id: stream control.
pub const ITEM_STREAM_CTRL: u32 = 0x06;
/// Stream-control value: end of stream.
pub const CTRL_STREAM_STOP: u64 = 2;
/// Heap numbers a [`HeapTracker`] keeps open.
pub const HEAP_WINDOW: usize = 16;

/// Heap-address bits of a SPEAD flavour: 48 (flavour 64-48, spead2's default) or 40.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flavour {
    /// Bits of an item pointer that hold an address or immediate value (8..=56, ×8).
    pub heap_address_bits: u8,
}

impl Flavour {
    /// SPEAD-64-48.
    pub const F64_48: Flavour = Flavour {
        heap_address_bits: 48,
    };
    /// SPEAD-64-40.
    pub const F64_40: Flavour = Flavour {
        heap_address_bits: 40,
    };

    /// Mask of the address/value bits.
    pub const fn value_mask(self) -> u64 {
        (1u64 << self.heap_address_bits) - 1
    }

    /// An item pointer of `id` carrying `value` (truncated to the address bits).
    pub const fn pointer(self, immediate: bool, id: u32, value: u64) -> u64 {
        let id_bits = 63 - self.heap_address_bits as u32;
        let id = (id as u64) & ((1u64 << id_bits) - 1);
        ((immediate as u64) << 63) | (id << self.heap_address_bits) | (value & self.value_mask())
    }
}

/// What one SPEAD packet says about its heap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpeadPacket {
    /// The flavour in its header.
    pub flavour: Flavour,
    /// Heap counter (item 0x01).
    pub heap_cnt: u64,
    /// Heap size in bytes (item 0x02), when the packet carries it.
    pub heap_size: Option<u64>,
    /// Offset of this payload in the heap (item 0x03).
    pub offset: u64,
    /// Payload bytes (item 0x04), equal to the bytes after the item pointers.
    pub length: u64,
    /// Stream control 2: the sender ends the stream with this heap.
    pub stop: bool,
    /// Item pointers in the packet.
    pub items: u16,
}

impl SpeadPacket {
    /// Parses one datagram. [`Reject::Foreign`]: not SPEAD version 4, an impossible
    /// flavour, or another flavour than `expect`; [`Reject::Short`]: shorter than its
    /// header and item pointers; [`Reject::Items`]: no heap counter, heap offset or payload
    /// length item; [`Reject::Length`]: the payload length item is not the bytes that
    /// follow, or the payload ends beyond the heap size. Never panics.
    pub fn parse(pkt: &[u8], expect: Option<Flavour>) -> Result<Self, Reject> {
        if pkt.len() < HEADER_LEN {
            return Err(Reject::Short);
        }
        if pkt[0] != MAGIC || pkt[1] != VERSION {
            return Err(Reject::Foreign);
        }
        let (id_bytes, addr_bytes) = (pkt[2], pkt[3]);
        if addr_bytes == 0 || addr_bytes > 7 || u16::from(id_bytes) + u16::from(addr_bytes) != 8 {
            return Err(Reject::Foreign);
        }
        let flavour = Flavour {
            heap_address_bits: addr_bytes * 8,
        };
        if expect.is_some_and(|e| e != flavour) {
            return Err(Reject::Foreign);
        }
        let items = u16::from_be_bytes([pkt[6], pkt[7]]);
        let body = HEADER_LEN + 8 * usize::from(items);
        let Some(ptrs) = pkt.get(HEADER_LEN..body) else {
            return Err(Reject::Short);
        };
        let shift = u32::from(flavour.heap_address_bits);
        let id_mask = (1u64 << (63 - shift)) - 1;
        let (mut cnt, mut size, mut off, mut len, mut stop) = (None, None, None, None, false);
        for p in ptrs.chunks_exact(8) {
            let mut b = [0u8; 8];
            b.copy_from_slice(p);
            let v = u64::from_be_bytes(b);
            if v >> 63 == 0 {
                continue;
            }
            let value = v & flavour.value_mask();
            match ((v >> shift) & id_mask) as u32 {
                ITEM_HEAP_CNT => cnt = Some(value),
                ITEM_HEAP_SIZE => size = Some(value),
                ITEM_HEAP_OFFSET => off = Some(value),
                ITEM_PAYLOAD_LEN => len = Some(value),
                ITEM_STREAM_CTRL => stop |= value == CTRL_STREAM_STOP,
                _ => {}
            }
        }
        let (Some(heap_cnt), Some(offset), Some(length)) = (cnt, off, len) else {
            return Err(Reject::Items);
        };
        if length != (pkt.len() - body) as u64 {
            return Err(Reject::Length);
        }
        if size.is_some_and(|s| offset.checked_add(length).is_none_or(|end| end > s)) {
            return Err(Reject::Length);
        }
        Ok(Self {
            flavour,
            heap_cnt,
            heap_size: size,
            offset,
            length,
            stop,
            items,
        })
    }
}

/// The bytes of the SPEAD packet at the start of `buf` (packets back to back, as a whole
/// unit holds them): its header, item pointers and the payload length its item 0x04 says;
/// `None` when `buf` does not start with a SPEAD header, has no payload length item, or
/// is shorter than the packet. Never panics.
pub fn packet_len(buf: &[u8]) -> Option<usize> {
    let head = buf.get(..HEADER_LEN)?;
    let addr_bytes = head[3];
    if head[0] != MAGIC || head[1] != VERSION || addr_bytes == 0 || addr_bytes > 7 {
        return None;
    }
    let shift = u32::from(addr_bytes) * 8;
    let body = HEADER_LEN + 8 * usize::from(u16::from_be_bytes([head[6], head[7]]));
    let id_mask = (1u64 << (63 - shift)) - 1;
    let len = buf.get(HEADER_LEN..body)?.chunks_exact(8).find_map(|p| {
        let v = u64::from_be_bytes(p.try_into().ok()?);
        let ours = v >> 63 == 1 && ((v >> shift) & id_mask) as u32 == ITEM_PAYLOAD_LEN;
        ours.then_some(v & ((1u64 << shift) - 1))
    })?;
    let end = body.checked_add(usize::try_from(len).ok()?)?;
    (end <= buf.len()).then_some(end)
}

/// Writes a SPEAD header for `items` item pointers into `out[..8]`; `false` when `out` is
/// shorter.
pub fn emit_header(out: &mut [u8], flavour: Flavour, items: u16) -> bool {
    let Some(h) = out.get_mut(..HEADER_LEN) else {
        return false;
    };
    let a = flavour.heap_address_bits / 8;
    h.copy_from_slice(&[MAGIC, VERSION, 8 - a, a, 0, 0, 0, 0]);
    h[6..8].copy_from_slice(&items.to_be_bytes());
    true
}

/// Writes item pointer `k` (`0`-based) after the header; `false` when `out` is shorter.
pub fn emit_pointer(out: &mut [u8], k: usize, pointer: u64) -> bool {
    let at = HEADER_LEN + 8 * k;
    match out.get_mut(at..at + 8) {
        Some(p) => {
            p.copy_from_slice(&pointer.to_be_bytes());
            true
        }
        None => false,
    }
}

/// A stream's heap counters, as the report shows them; see the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HeapStats {
    /// Packets placed in a heap (duplicates and too old ones excluded).
    pub packets: u64,
    /// Heaps whose bytes all arrived.
    pub complete: u64,
    /// Heaps with bytes missing.
    pub incomplete: u64,
    /// Heaps without a heap-size item (completeness unknown).
    pub unsized_heaps: u64,
    /// Heap numbers of which nothing arrived.
    pub missing: u64,
    /// Packets missing (in incomplete and missing heaps).
    pub missing_packets: u64,
    /// Bytes missing (in incomplete and missing heaps).
    pub missing_bytes: u64,
    /// Packets of a heap older than the newest heap started (arrived late, still placed).
    pub reordered: u64,
    /// Packets that arrived again, or beyond their heap's size.
    pub duplicates: u64,
    /// Packets of heaps that had left the window or came before the stream's first heap.
    pub too_old: u64,
    /// End-of-stream packets (stream control 2).
    pub ends: u64,
}

impl HeapStats {
    /// Adds `o` to `self`.
    pub fn merge(&mut self, o: &HeapStats) {
        self.packets += o.packets;
        self.complete += o.complete;
        self.incomplete += o.incomplete;
        self.unsized_heaps += o.unsized_heaps;
        self.missing += o.missing;
        self.missing_packets = self.missing_packets.saturating_add(o.missing_packets);
        self.missing_bytes = self.missing_bytes.saturating_add(o.missing_bytes);
        self.reordered += o.reordered;
        self.duplicates += o.duplicates;
        self.too_old += o.too_old;
        self.ends += o.ends;
    }
}

/// What [`HeapTracker::observe`] did with one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeapEvent {
    /// Placed in a heap at or after the newest one.
    Placed,
    /// Placed in a heap older than the newest one.
    Late,
    /// Already arrived, or beyond the heap's size: not counted.
    Duplicate,
    /// Its heap already left the window (or precedes the stream): not counted.
    TooOld,
}

const EMPTY: u8 = 0;
const ABSENT: u8 = 1;
const OPEN: u8 = 2;

/// One heap number of the window.
#[derive(Debug, Clone, Copy)]
struct Heap {
    state: u8,
    size: Option<u64>,
    bytes: u64,
    packets: u64,
    /// Packet slots (index from the layout) that arrived, for the first 64.
    seen: u64,
}

impl Heap {
    const EMPTY: Heap = Heap {
        state: EMPTY,
        size: None,
        bytes: 0,
        packets: 0,
        seen: 0,
    };
}

/// The learned split of a heap into packets (0 = not known yet).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Layout {
    first: u64,
    full: u64,
    largest: u64,
}

impl Layout {
    fn learn(&mut self, p: &SpeadPacket) {
        self.largest = self.largest.max(p.length);
        let Some(size) = p.heap_size else { return };
        if p.length == 0 || p.offset + p.length >= size {
            return;
        }
        if p.offset == 0 {
            if self.first == 0 {
                self.first = p.length;
            }
        } else if self.full == 0 {
            self.full = p.length;
            if self.first == 0 {
                self.first = (p.offset - 1) % p.length + 1;
            }
        }
    }

    /// Packets a heap of `size` bytes is sent in.
    fn packets(&self, size: u64) -> u64 {
        if size <= self.first.max(1) {
            return 1;
        }
        match (self.first, self.full) {
            (f, p) if f > 0 && p > 0 => 1 + (size - f).div_ceil(p),
            _ => size.div_ceil(self.largest.max(1)),
        }
    }

    /// Packets missing from a heap of `size` bytes of which `packets` carrying `bytes`
    /// arrived.
    fn missing(&self, size: u64, bytes: u64, packets: u64) -> u64 {
        if bytes >= size {
            return 0;
        }
        if self.first > 0 && self.full > 0 {
            return self.packets(size).saturating_sub(packets).max(1);
        }
        (size - bytes).div_ceil(self.largest.max(1))
    }

    /// The packet index of a payload at `offset` (when the layout places it).
    fn index(&self, offset: u64) -> Option<u64> {
        if offset == 0 {
            return Some(0);
        }
        let (f, p) = (self.first, self.full);
        (f > 0 && p > 0 && offset >= f && (offset - f) % p == 0).then(|| 1 + (offset - f) / p)
    }
}

/// One SPEAD stream's heap window; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct HeapTracker {
    heaps: [Heap; HEAP_WINDOW],
    started: bool,
    /// First heap number of the stream (numbers before it are too old).
    base: u64,
    newest: u64,
    /// Size of the newest heap that carried one (for missing heaps).
    last_size: Option<u64>,
    layout: Layout,
    stats: HeapStats,
}

impl Default for HeapTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl HeapTracker {
    /// An empty tracker.
    pub const fn new() -> Self {
        Self {
            heaps: [Heap::EMPTY; HEAP_WINDOW],
            started: false,
            base: 0,
            newest: 0,
            last_size: None,
            layout: Layout {
                first: 0,
                full: 0,
                largest: 0,
            },
            stats: HeapStats {
                packets: 0,
                complete: 0,
                incomplete: 0,
                unsized_heaps: 0,
                missing: 0,
                missing_packets: 0,
                missing_bytes: 0,
                reordered: 0,
                duplicates: 0,
                too_old: 0,
                ends: 0,
            },
        }
    }

    /// The learned packet layout: payload bytes of a heap's first packet and of the
    /// others (0 = not learned yet).
    pub const fn layout(&self) -> (u64, u64) {
        (self.layout.first, self.layout.full)
    }

    /// Counters of heaps that left the window (not those still open).
    pub const fn closed(&self) -> &HeapStats {
        &self.stats
    }

    /// The counters as if every open heap closed now (the end of a run).
    pub fn flushed(&self) -> HeapStats {
        let mut s = self.stats;
        if self.started {
            for h in &self.heaps {
                Self::count(&self.layout, self.last_size, h, &mut s);
            }
        }
        s
    }

    /// Counts heap `h` as it leaves the window.
    fn count(layout: &Layout, last_size: Option<u64>, h: &Heap, s: &mut HeapStats) {
        match h.state {
            OPEN => match h.size {
                Some(size) if h.bytes >= size => s.complete += 1,
                Some(size) => {
                    s.incomplete += 1;
                    s.missing_bytes += size - h.bytes;
                    s.missing_packets += layout.missing(size, h.bytes, h.packets);
                }
                None => s.unsized_heaps += 1,
            },
            ABSENT => {
                s.missing += 1;
                s.missing_packets += last_size.map_or(1, |z| layout.packets(z));
                s.missing_bytes += last_size.unwrap_or(0);
            }
            _ => {}
        }
    }

    fn close(&mut self, i: usize) {
        let h = self.heaps[i];
        Self::count(&self.layout, self.last_size, &h, &mut self.stats);
        self.heaps[i] = Heap::EMPTY;
    }

    /// Moves the window so that `seq` is the newest heap number.
    fn advance(&mut self, seq: u64) {
        let w = HEAP_WINDOW as u64;
        let jump = seq - self.newest;
        if jump > w {
            // Everything open leaves; the numbers that never entered the window are missing.
            for i in 0..HEAP_WINDOW {
                self.close(i);
            }
            let never = jump - w;
            let per = self.last_size.map_or(1, |z| self.layout.packets(z));
            self.stats.missing += never;
            self.stats.missing_packets = self
                .stats
                .missing_packets
                .saturating_add(never.saturating_mul(per));
            self.stats.missing_bytes = self
                .stats
                .missing_bytes
                .saturating_add(never.saturating_mul(self.last_size.unwrap_or(0)));
            for t in seq - w + 1..seq {
                self.heaps[(t % w) as usize] = Heap {
                    state: ABSENT,
                    ..Heap::EMPTY
                };
            }
        } else {
            for t in self.newest + 1..seq {
                let i = (t % w) as usize;
                self.close(i);
                self.heaps[i] = Heap {
                    state: ABSENT,
                    ..Heap::EMPTY
                };
            }
            self.close((seq % w) as usize);
        }
        self.newest = seq;
    }

    /// Closes every heap and forgets the stream (after its end-of-stream packet): the next
    /// packet starts a new stream.
    fn end(&mut self) {
        for i in 0..HEAP_WINDOW {
            self.close(i);
        }
        self.started = false;
        self.last_size = None;
        self.layout = Layout::default();
        self.stats.ends += 1;
    }

    /// Places packet `p` of heap number `seq` (`heap counter / heap_step`). No allocation.
    pub fn observe(&mut self, seq: u64, p: &SpeadPacket) -> HeapEvent {
        let w = HEAP_WINDOW as u64;
        let mut late = false;
        if !self.started {
            self.started = true;
            self.base = seq;
            self.newest = seq;
        } else if seq > self.newest {
            self.advance(seq);
        } else if seq < self.base || self.newest - seq >= w {
            self.stats.too_old += 1;
            return HeapEvent::TooOld;
        } else {
            late = seq < self.newest;
        }
        let i = (seq % w) as usize;
        if self.heaps[i].state != OPEN {
            self.heaps[i] = Heap {
                state: OPEN,
                ..Heap::EMPTY
            };
        }
        self.layout.learn(p);
        let h = &mut self.heaps[i];
        if h.size.is_none() {
            h.size = p.heap_size;
        }
        let beyond = h.size.is_some_and(|s| h.bytes + p.length > s);
        let bit = self
            .layout
            .index(p.offset)
            .filter(|&k| k < 64)
            .map(|k| 1u64 << k);
        if beyond || bit.is_some_and(|b| h.seen & b != 0) {
            self.stats.duplicates += 1;
            return HeapEvent::Duplicate;
        }
        h.seen |= bit.unwrap_or(0);
        h.bytes += p.length;
        h.packets += 1;
        if let Some(s) = h.size {
            if seq == self.newest {
                self.last_size = Some(s);
            }
        }
        self.stats.packets += 1;
        if p.stop {
            // The end-of-stream heap is counted in `ends`, not as a data heap.
            self.heaps[i] = Heap::EMPTY;
            self.end();
        }
        if late {
            self.stats.reordered += 1;
            HeapEvent::Late
        } else {
            HeapEvent::Placed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One packet of a heap as spead2 splits it: `first` bytes in the first, `full` after.
    fn packet(cnt: u64, size: u64, offset: u64, length: u64) -> SpeadPacket {
        SpeadPacket {
            flavour: Flavour::F64_48,
            heap_cnt: cnt,
            heap_size: Some(size),
            offset,
            length,
            stop: false,
            items: 4,
        }
    }

    /// The packets of heap `cnt` of `size` bytes: (offset, length).
    fn split(size: u64, first: u64, full: u64) -> impl Iterator<Item = (u64, u64)> {
        let mut off = 0;
        core::iter::from_fn(move || {
            if off >= size && !(off == 0 && size == 0) {
                return None;
            }
            let len = if off == 0 { first } else { full }.min(size - off);
            let r = (off, len);
            off += len.max(1);
            Some(r)
        })
    }

    #[test]
    fn exact_missing_packets_with_spead2_layout() {
        // spead2 at 1472-byte packets: 1416 bytes in the first, 1432 in the others.
        let (size, first, full) = (5000u64, 1416u64, 1432u64);
        let mut t = HeapTracker::new();
        let mut sent = 0u64;
        let mut dropped = 0u64;
        for cnt in 1..=40u64 {
            for (off, len) in split(size, first, full) {
                sent += 1;
                if sent % 7 == 0 {
                    dropped += 1;
                    continue;
                }
                t.observe(cnt, &packet(cnt, size, off, len));
            }
        }
        assert_eq!(t.layout(), (first, full));
        let s = t.flushed();
        assert_eq!(s.missing_packets, dropped);
        assert_eq!(s.packets + dropped, sent);
        assert_eq!(s.complete + s.incomplete, 40);
        assert_eq!(s.missing, 0);
    }

    #[test]
    fn missing_heaps_late_heaps_duplicates_and_window() {
        let mut t = HeapTracker::new();
        let one = |c| packet(c, 100, 0, 100);
        assert_eq!(t.observe(10, &one(10)), HeapEvent::Placed);
        assert_eq!(t.observe(13, &one(13)), HeapEvent::Placed);
        assert_eq!(t.observe(11, &one(11)), HeapEvent::Late);
        assert_eq!(t.observe(11, &one(11)), HeapEvent::Duplicate);
        assert_eq!(t.observe(9, &one(9)), HeapEvent::TooOld, "before the first");
        // Jump far: 12 and 14..=13+40-1 missing.
        assert_eq!(t.observe(13 + 40, &one(53)), HeapEvent::Placed);
        assert_eq!(t.observe(20, &one(20)), HeapEvent::TooOld);
        let s = t.flushed();
        assert_eq!((s.complete, s.missing), (4, 1 + 39));
        assert_eq!((s.missing_packets, s.missing_bytes), (40, 4000));
        assert_eq!((s.reordered, s.duplicates, s.too_old), (1, 1, 2));
    }

    #[test]
    fn end_of_stream_closes_and_restarts() {
        let mut t = HeapTracker::new();
        t.observe(1, &packet(1, 3000, 0, 1000));
        t.observe(1, &packet(1, 3000, 2000, 1000));
        let mut stop = packet(2, 1, 0, 1);
        stop.stop = true;
        t.observe(2, &stop);
        let s = *t.closed();
        assert_eq!((s.incomplete, s.complete, s.ends), (1, 0, 1));
        assert_eq!((s.missing_bytes, s.missing_packets), (1000, 1));
        // A new stream starting lower is not too old.
        assert_eq!(t.observe(1, &packet(1, 10, 0, 10)), HeapEvent::Placed);
        assert_eq!(t.flushed().complete, 1);
    }

    #[test]
    fn parse_spead2_packets() {
        // The first packet of a heap spead2 sent (heap 1, 5000 bytes, two more items).
        let f = Flavour::F64_48;
        let mut b = [0u8; 8 + 6 * 8 + 16];
        assert!(emit_header(&mut b, f, 6));
        let ptrs = [
            f.pointer(true, ITEM_HEAP_CNT, 1),
            f.pointer(true, ITEM_HEAP_SIZE, 5000),
            f.pointer(true, ITEM_HEAP_OFFSET, 0),
            f.pointer(true, ITEM_PAYLOAD_LEN, 16),
            f.pointer(true, 0x1600, 1234),
            f.pointer(false, 0x4000, 0),
        ];
        for (k, p) in ptrs.iter().enumerate() {
            assert!(emit_pointer(&mut b, k, *p));
        }
        assert_eq!(&b[..8], &[0x53, 4, 2, 6, 0, 0, 0, 6]);
        let p = SpeadPacket::parse(&b, None).unwrap();
        assert_eq!(
            (p.heap_cnt, p.heap_size, p.offset, p.length),
            (1, Some(5000), 0, 16)
        );
        assert!(!p.stop);
        assert_eq!(
            SpeadPacket::parse(&b, Some(Flavour::F64_40)),
            Err(Reject::Foreign)
        );
        assert_eq!(SpeadPacket::parse(&b[..60], None), Err(Reject::Length));
        assert_eq!(SpeadPacket::parse(&b[..20], None), Err(Reject::Short));
        let mut no_len = b;
        no_len[8 + 3 * 8..8 + 4 * 8].copy_from_slice(&f.pointer(true, 0x7, 16).to_be_bytes());
        assert_eq!(SpeadPacket::parse(&no_len, None), Err(Reject::Items));
        let mut magic = b;
        magic[0] = 0x54;
        assert_eq!(SpeadPacket::parse(&magic, None), Err(Reject::Foreign));
        // Packets back to back: each one's length from its own header.
        let mut two = [0u8; 2 * 72 + 3];
        two[..72].copy_from_slice(&b);
        two[72..144].copy_from_slice(&b);
        assert_eq!(packet_len(&two), Some(72));
        assert_eq!(packet_len(&two[72..]), Some(72));
        assert_eq!(
            packet_len(&two[144..]),
            None,
            "a tail shorter than a header"
        );
        assert_eq!(packet_len(&two[72..140]), None, "cut short");
        assert_eq!(packet_len(&no_len), None);
        assert_eq!(packet_len(&magic), None);
    }
}
