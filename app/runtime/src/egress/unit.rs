//! Whole units (`unit = "heap"` or `"time_slot"`): the consumer half assembles each SPEAD
//! heap (VDIF/CODIF time slot) from its datagrams and hands it to the sender only whole.
//!
//! The units being assembled live in the first `open` free slots of the sink's ring, in the
//! order their first datagrams arrived (no extra buffer, no copy: a whole unit is committed
//! where it was filled). Each datagram is parsed for its unit ([`UnitKind::unit_of`]) and
//! copied, whole, to the end of its unit's buffer:
//!
//! - a unit is **whole** when what its datagrams add up to reaches what it needs (a heap's
//!   size, a slot's frames); whole units go to the sender oldest first, so a whole unit
//!   waits while an older one is still open;
//! - a datagram of a new unit when `open_units` are open **evicts the oldest**: it is not
//!   whole (whole ones left already), so its datagrams count as `egress_incomplete`;
//!   likewise a unit open for `flush_ms`, and the open units at the end of the run;
//! - a datagram that is not of the format counts as `egress_foreign`; a frame whose station
//!   and thread are in its slot already (a duplicate) as `egress_error`; a datagram that
//!   would overflow its unit's buffer, or its heap's size (a duplicate SPEAD packet), also
//!   as `egress_error`, and its unit can no longer be whole; a heap whose lengths add up
//!   with a duplicate in place of a missing packet is told apart by the sum of its ranges'
//!   squares ([`UnitKind`]'s docs) and is never whole;
//! - a new unit that finds no free slot (the sender is behind) loses that datagram as
//!   `egress_full`: its unit, opened by a later datagram, will not be whole.
//!
//! Hot path: no allocation, no logging, no blocking; `O(open_units)` per datagram.

use super::heap::{HeapBuf, Pending, UnitState};
use crate::stages::Packet;
use rtdaq_config::model::EgressUnits;
use rtdaq_core::format::UnitKind;
use rtdaq_core::slot_ring::SlotProducer;

/// The `k`-th of the free slots `(a, b)` (see `SlotProducer::free_slices`).
#[inline]
fn nth<'s>(a: &'s mut [HeapBuf], b: &'s mut [HeapBuf], k: usize) -> &'s mut HeapBuf {
    if k < a.len() {
        &mut a[k]
    } else {
        &mut b[k - a.len()]
    }
}

/// A frame of `part` is among the frames `data` of a time slot.
#[inline]
fn has_part(kind: UnitKind, mut data: &[u8], part: u64) -> bool {
    while let Some((len, p)) = kind.part_at(data) {
        if p == part {
            return true;
        }
        data = &data[len..];
    }
    false
}

/// The units one sink's consumer half is assembling (see the [module docs](self)).
pub struct Units {
    kind: UnitKind,
    /// Most units open at once.
    most: usize,
    /// Units open now: the first `open` free slots.
    open: usize,
    flush_ns: u64,
}

impl Units {
    /// Assembly of `u`'s units; a unit open `flush_ns` is given up.
    pub fn new(u: &EgressUnits, flush_ns: u64) -> Self {
        Units {
            kind: u.kind,
            most: u.open as usize,
            open: 0,
            flush_ns,
        }
    }

    /// Puts one datagram into its unit (see the [module docs](self)).
    #[inline]
    pub fn on_packet(
        &mut self,
        prod: &mut SlotProducer<'static, HeapBuf>,
        pend: &mut Pending,
        p: &Packet<'_>,
    ) {
        let Ok(u) = self.kind.unit_of(p.payload) else {
            pend.foreign += 1;
            return;
        };
        let k = match self.find(prod, u.key) {
            Some(k) => k,
            None => {
                if self.open == self.most {
                    self.give_up_oldest(prod, pend);
                    self.send_whole(prod);
                }
                let (a, b) = prod.free_slices();
                if self.open >= a.len() + b.len() {
                    pend.full += 1;
                    return;
                }
                let h = nth(a, b, self.open);
                h.clear();
                h.unit = UnitState {
                    key: u.key,
                    opened_ns: crate::pacer::now_ns(),
                    ..UnitState::default()
                };
                self.open += 1;
                self.open - 1
            }
        };
        let (a, b) = prod.free_slices();
        let h = nth(a, b, k);
        if self.kind != UnitKind::SpeadHeap && has_part(self.kind, h.data(), u.part) {
            pend.too_large += 1;
            return;
        }
        h.unit.needs = h.unit.needs.max(u.needs);
        let over = h.unit.needs > 0 && h.unit.has + u.adds > h.unit.needs;
        if over || !h.push(p.payload, p.rx_ns) {
            h.unit.broken = true;
            pend.too_large += 1;
            return;
        }
        pend.payloads += 1;
        h.unit.has += u.adds;
        let end = u128::from(u.part) + u128::from(u.adds);
        h.unit.moment += end * end - u128::from(u.part).pow(2);
        if k == 0 && h.unit.whole(self.kind) {
            self.send_whole(prod);
        }
    }

    /// After every burst and when idle: gives up the units open `flush_ms`, then sends the
    /// whole ones that waited behind them.
    #[inline]
    pub fn tick(
        &mut self,
        prod: &mut SlotProducer<'static, HeapBuf>,
        pend: &mut Pending,
        now_ns: u64,
    ) {
        while self.open > 0 {
            let (a, b) = prod.free_slices();
            if now_ns.saturating_sub(nth(a, b, 0).unit.opened_ns) < self.flush_ns {
                break;
            }
            self.give_up_oldest(prod, pend);
            self.send_whole(prod);
        }
    }

    /// End of the run: the whole units go out, the others are counted.
    pub fn finish(&mut self, prod: &mut SlotProducer<'static, HeapBuf>, pend: &mut Pending) {
        while self.open > 0 {
            self.send_whole(prod);
            if self.open > 0 {
                self.give_up_oldest(prod, pend);
            }
        }
    }

    /// Which open unit has `key`.
    #[inline]
    fn find(&self, prod: &mut SlotProducer<'static, HeapBuf>, key: u64) -> Option<usize> {
        let (a, b) = prod.free_slices();
        (0..self.open).find(|&k| nth(a, b, k).unit.key == key)
    }

    /// Commits the whole units at the front, oldest first.
    #[inline]
    fn send_whole(&mut self, prod: &mut SlotProducer<'static, HeapBuf>) {
        while self.open > 0 && prod.slot().is_some_and(|h| h.unit.whole(self.kind)) {
            let committed = prod.commit();
            debug_assert!(committed.is_ok());
            self.open -= 1;
        }
    }

    /// Gives up the oldest open unit (not whole): its datagrams count as
    /// `egress_incomplete`, its buffer moves behind the other open ones, empty.
    fn give_up_oldest(&mut self, prod: &mut SlotProducer<'static, HeapBuf>, pend: &mut Pending) {
        let (a, b) = prod.free_slices();
        pend.incomplete += u64::from(nth(a, b, 0).payloads);
        nth(a, b, 0).clear();
        for k in 0..self.open - 1 {
            // Swap slots k and k + 1 (they may lie on both sides of the wrap point).
            if k + 1 < a.len() {
                a.swap(k, k + 1);
            } else if k >= a.len() {
                b.swap(k - a.len(), k + 1 - a.len());
            } else {
                std::mem::swap(&mut a[k], &mut b[0]);
            }
        }
        self.open -= 1;
    }
}
