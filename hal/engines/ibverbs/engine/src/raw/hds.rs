//! Header-data split on the raw path's one-frame-per-receive queues (`hds_split = h` with
//! two memory regions, header region first): each receive scatters its frame over two
//! buffers, the first `h` bytes into a buffer of the header pool (CPU memory: the runtime
//! reads the headers) and the rest into a buffer of the data pool, which may be GPU memory
//! (registered through its dma-buf). The packet then has two segments: the header, then the
//! data. The striding RQ never splits ([`plan`](super::striding::plan) falls back to this
//! path).
//!
//! Everything here is pure (no verbs call) and unit-tested; `FrameRx` in `raw.rs` uses it.
use ffi::{QpCaps, RecvRequest, ScatterRecvRequest, Sge};
use rtdaq_core::{Buf, BufferPool};

use crate::error::{IbvError, Result};

/// How a one-frame-per-receive queue lays each frame into pool buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameLayout {
    /// The whole frame into one buffer of the queue's pool (one region).
    Whole,
    /// Header-data split: the first `header` bytes into a buffer of `memory_regions[0]`, the
    /// rest into a buffer of `memory_regions[1]`.
    Split {
        /// `hds_split`: bytes of each frame placed in the header buffer.
        header: u32,
    },
}

impl FrameLayout {
    /// The layout of queue `key` (`interfaces[i].rx_queues[j]`) with `pools` regions,
    /// `hds_split` and header buffers of `header_slot` bytes (the first pool's slot size).
    /// Cold path.
    ///
    /// # Errors
    /// More than two regions (the raw path splits into two segments), two regions without
    /// `hds_split` (or `hds_split` 0), or an `hds_split` larger than the header region's
    /// buffers (the NIC would write past them), each naming the config key and the fix.
    pub fn of(
        pools: usize,
        hds_split: Option<u32>,
        header_slot: usize,
        key: &str,
    ) -> Result<FrameLayout> {
        match (pools, hds_split) {
            (0 | 1, _) => Ok(FrameLayout::Whole),
            (2, Some(h)) if h > 0 && h as usize <= header_slot => {
                Ok(FrameLayout::Split { header: h })
            }
            (2, Some(h)) if h > 0 => Err(IbvError::config(
                format!("{key}.hds_split"),
                format!("{h} header bytes do not fit the {header_slot} B buffers of memory_regions[0]; lower hds_split or raise that region's buf_size to ≥ {h}"),
            )),
            (2, _) => Err(IbvError::config(
                format!("{key}.hds_split"),
                "two regions mean header-data split: set hds_split = <header bytes placed in memory_regions[0]> (e.g. 42 for Ethernet+IPv4+UDP), or list one region",
            )),
            (n, _) => Err(IbvError::config(
                format!("{key}.memory_regions"),
                format!("{n} regions, but engine.ibverbs.mode = \"raw\" splits a frame into two segments at most (a header region and a data region); list one or two regions"),
            )),
        }
    }

    /// Scatter entries of one receive: 1 (whole frame) or 2 (header, data).
    #[inline]
    pub fn sges(self) -> u32 {
        match self {
            FrameLayout::Whole => 1,
            FrameLayout::Split { .. } => 2,
        }
    }

    /// The capacities of the raw packet QP of a queue of `depth` receives: a receive queue
    /// of `depth` with [`sges`](Self::sges) scatter entries each, a send queue of one (the
    /// QP never sends).
    pub fn qp_caps(self, depth: u32) -> QpCaps {
        QpCaps {
            max_send_wr: 1,
            max_recv_wr: depth,
            max_send_sge: 1,
            max_recv_sge: self.sges(),
            max_inline: 0,
        }
    }
}

/// The receive of a whole frame into one buffer (`addr`, all of its `capacity`, region
/// `lkey`): one scatter entry. Never allocates.
#[inline]
pub fn whole_recv(wr_id: u64, addr: u64, capacity: u32, lkey: u32) -> RecvRequest {
    RecvRequest {
        wr_id,
        addr,
        len: capacity,
        lkey,
    }
}

/// The receive of a split frame: entry 0 the header buffer at `header_addr`, exactly
/// `header` (`hds_split`) bytes of region `header_lkey`; entry 1 the data buffer at
/// `data_addr`, all of its `data_capacity`, of region `data_lkey`. Never allocates.
#[inline]
pub fn split_recv(
    wr_id: u64,
    (header_addr, header, header_lkey): (u64, u32, u32),
    (data_addr, data_capacity, data_lkey): (u64, u32, u32),
) -> ScatterRecvRequest {
    ScatterRecvRequest::split(
        wr_id,
        Sge {
            addr: header_addr,
            len: header,
            lkey: header_lkey,
        },
        Sge {
            addr: data_addr,
            len: data_capacity,
            lkey: data_lkey,
        },
    )
}

/// The two segment lengths of a split completion of `n` bytes: the header gets
/// `min(n, header)`, the data buffer the rest, at most its `data_capacity` (the NIC cannot
/// write more; a larger `n` is clamped rather than trusted). Never allocates.
#[inline]
pub fn split_len(n: u32, header: u32, data_capacity: u32) -> (u32, u32) {
    let h = n.min(header);
    (h, (n - h).min(data_capacity))
}

/// A header buffer and a data buffer for one split receive, `None` when either pool is
/// empty: the buffer already taken from the other goes straight back to its pool, so a
/// refill that stops here leaks nothing. Lock-free; never allocates.
#[inline]
pub fn take_pair<'p>(
    header: &'p BufferPool<'p>,
    data: &'p BufferPool<'p>,
) -> Option<(Buf<'p>, Buf<'p>)> {
    let h = header.get()?;
    // On `None` `h` is dropped, returning its slot.
    let d = data.get()?;
    Some((h, d))
}

/// Sets the lengths of a split frame's buffers after a completion of `n` bytes
/// ([`split_len`], `header` = `hds_split`) and returns the frame's length (their sum).
///
/// # Panics
/// When `header` exceeds the header buffer's capacity (checked at open by
/// [`FrameLayout::of`]).
#[inline]
pub fn set_split_lens(
    header_buf: &mut Buf<'_>,
    data_buf: &mut Buf<'_>,
    n: u32,
    header: u32,
) -> usize {
    let (h, rest) = split_len(n, header, data_buf.capacity() as u32);
    header_buf.set_len(h as usize);
    data_buf.set_len(rest as usize);
    (h + rest) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use ffi::RecvBatch;
    use std::sync::atomic::AtomicU32;

    fn pool(size: usize, count: usize) -> &'static BufferPool<'static> {
        let mem: &'static mut [u8] = Box::leak(vec![0u8; size * count].into_boxed_slice());
        let links = Box::leak((0..count).map(|_| AtomicU32::new(0)).collect::<Box<[_]>>());
        Box::leak(Box::new(BufferPool::new(mem, links, size).unwrap()))
    }

    const KEY: &str = "interfaces[0].rx_queues[1]";

    #[test]
    fn layouts_from_regions_and_split() {
        assert_eq!(
            FrameLayout::of(1, None, 2048, KEY).unwrap(),
            FrameLayout::Whole
        );
        assert_eq!(
            FrameLayout::of(2, Some(74), 128, KEY).unwrap(),
            FrameLayout::Split { header: 74 }
        );
        assert_eq!(
            FrameLayout::of(2, Some(128), 128, KEY).unwrap(),
            FrameLayout::Split { header: 128 }
        );
        let e = FrameLayout::of(2, Some(129), 128, KEY)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("interfaces[0].rx_queues[1].hds_split: 129 header bytes"),
            "{e}"
        );
        assert!(e.contains("buf_size to ≥ 129"), "{e}");
        let e = FrameLayout::of(2, None, 128, KEY).unwrap_err().to_string();
        assert!(
            e.starts_with("interfaces[0].rx_queues[1].hds_split:"),
            "{e}"
        );
        let e = FrameLayout::of(2, Some(0), 128, KEY)
            .unwrap_err()
            .to_string();
        assert!(e.contains("set hds_split"), "{e}");
        let e = FrameLayout::of(3, Some(42), 128, KEY)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("interfaces[0].rx_queues[1].memory_regions: 3 regions"),
            "{e}"
        );
    }

    #[test]
    fn split_queue_asks_for_two_scatter_entries() {
        let c = FrameLayout::Split { header: 42 }.qp_caps(1024);
        assert_eq!(
            c,
            QpCaps {
                max_send_wr: 1,
                max_recv_wr: 1024,
                max_send_sge: 1,
                max_recv_sge: 2,
                max_inline: 0,
            }
        );
    }

    #[test]
    fn split_receive_is_header_then_whole_data_buffer() {
        let r = split_recv(17, (0x10_0000, 74, 0x11), (0x7f00_0001_0000, 8192, 0x22));
        assert_eq!(r.wr_id(), 17);
        assert_eq!(
            r.sges(),
            &[
                Sge {
                    addr: 0x10_0000,
                    len: 74,
                    lkey: 0x11
                },
                Sge {
                    addr: 0x7f00_0001_0000,
                    len: 8192,
                    lkey: 0x22
                },
            ]
        );
        // Posted as one WR with both entries, in a batch of two entries per receive.
        let mut b = RecvBatch::with_sges(4, FrameLayout::Split { header: 74 }.sges() as usize);
        assert!(b.push_scatter(&r));
        let (wr, sges) = b.wr_sges(0).unwrap();
        assert_eq!((wr.wr_id, wr.num_sge), (17, 2));
        assert_eq!(
            (sges[0].addr, sges[0].length, sges[0].lkey),
            (0x10_0000, 74, 0x11)
        );
        assert_eq!(
            (sges[1].addr, sges[1].length, sges[1].lkey),
            (0x7f00_0001_0000, 8192, 0x22)
        );
    }

    #[test]
    fn one_region_queue_still_posts_one_sge() {
        let l = FrameLayout::of(1, None, 2048, KEY).unwrap();
        assert_eq!(l.sges(), 1);
        assert_eq!(l.qp_caps(512).max_recv_sge, 1);
        assert_eq!(l.qp_caps(512).max_recv_wr, 512);
        let r = whole_recv(3, 0x20_0000, 2048, 0x33);
        assert_eq!(
            r,
            RecvRequest {
                wr_id: 3,
                addr: 0x20_0000,
                len: 2048,
                lkey: 0x33
            }
        );
        let mut b = RecvBatch::with_capacity(4);
        assert_eq!(b.sges_per_request(), 1);
        assert!(b.push(&r));
        let (wr, sge) = b.wr(0).unwrap();
        assert_eq!((wr.wr_id, wr.num_sge), (3, 1));
        assert_eq!((sge.addr, sge.length, sge.lkey), (0x20_0000, 2048, 0x33));
    }

    #[test]
    fn completion_lengths_split_at_the_header() {
        // n < h: all header, empty data segment.
        assert_eq!(split_len(60, 74, 8192), (60, 0));
        // n == h.
        assert_eq!(split_len(74, 74, 8192), (74, 0));
        // n > h.
        assert_eq!(split_len(1514, 74, 8192), (74, 1440));
        assert_eq!(split_len(74 + 8192, 74, 8192), (74, 8192));
        // n > h + capacity cannot happen (the NIC fails the receive): clamped.
        assert_eq!(split_len(74 + 8192 + 1, 74, 8192), (74, 8192));
        assert_eq!(split_len(u32::MAX, 74, 8192), (74, 8192));
        assert_eq!(split_len(0, 74, 8192), (0, 0));
    }

    #[test]
    fn a_pair_comes_from_both_pools_or_neither() {
        let (hp, dp) = (pool(128, 2), pool(2048, 1));
        let (h, d) = take_pair(hp, dp).unwrap();
        assert_eq!((h.capacity(), d.capacity()), (128, 2048));
        assert_eq!((hp.available(), dp.available()), (1, 0));
        // The data pool is empty: the header buffer taken for the pair goes back.
        assert!(take_pair(hp, dp).is_none());
        assert_eq!((hp.available(), dp.available()), (1, 0));
        drop((h, d));
        // The header pool is empty: nothing is taken from the data pool.
        let held: Vec<_> = (0..2).map(|_| hp.get().unwrap()).collect();
        assert!(take_pair(hp, dp).is_none());
        assert_eq!((hp.available(), dp.available()), (0, 1));
        drop(held);
        assert_eq!((hp.available(), dp.available()), (2, 1));
    }

    #[test]
    fn split_buffers_get_their_segment_lengths() {
        let (hp, dp) = (pool(128, 1), pool(2048, 1));
        let (mut h, mut d) = take_pair(hp, dp).unwrap();
        assert_eq!(set_split_lens(&mut h, &mut d, 1514, 74), 1514);
        assert_eq!((h.len(), d.len()), (74, 1440));
        assert_eq!(set_split_lens(&mut h, &mut d, 50, 74), 50);
        assert_eq!((h.len(), d.len()), (50, 0));
        // More than header + data capacity: clamped to what the buffers hold.
        assert_eq!(set_split_lens(&mut h, &mut d, 74 + 4096, 74), 74 + 2048);
        assert_eq!((h.len(), d.len()), (74, 2048));
    }
}
