//! The ownership protocol over the memory a packet socket shares with the kernel.
//!
//! | module | ring | who owns what |
//! |---|---|---|
//! | [`rx`] | `TPACKET_V3` RX ring ([`RxRing`]) | a block belongs to the kernel until its `block_status` says `TP_STATUS_USER`; then to user space until **every** frame reference into it ([`FrameRef`], held by bursts, possibly on other threads) and the I/O thread's own [`BlockHold`] are released — a per-block atomic reference count; the last release writes `TP_STATUS_KERNEL` |
//! | [`tx`] | `TPACKET_V2` TX ring ([`TxRing`]) | a slot is free while its `tp_status` is `TP_STATUS_AVAILABLE`; one [`TxSlots`] at a time claims a run of free slots in ring order (an atomic owner word), the generator writes frames into them, and `submit` hands them to the kernel (`TP_STATUS_SEND_REQUEST`) |
//!
//! This module and `sys` are the only places with `unsafe` code: handing out slices of the
//! shared mapping is sound only because of the protocol implemented here. Every type that
//! refers to ring memory holds an `Arc` of its ring, so the mapping (and the socket behind
//! it) outlives every slice, whatever thread drops last.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub(crate) mod rx;
pub(crate) mod tx;

pub(crate) use rx::{BlockHold, FrameHdr, FrameRef, RxRing};
pub(crate) use tx::{TxRing, TxSlots};

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// Source of ring ids (to catch a burst used with another queue's ring).
static NEXT_RING_ID: AtomicU32 = AtomicU32::new(1);

/// A process-unique ring id. Cold path.
fn next_ring_id() -> u32 {
    NEXT_RING_ID.fetch_add(1, Relaxed)
}
