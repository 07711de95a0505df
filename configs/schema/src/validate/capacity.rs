//! Sizes across items: buffers hold the largest frame, regions have enough buffers for the
//! queues sharing them, engine rings hold the largest frame.

use super::{rxq, txq, Draft, DraftInterface};
use crate::error::Errors;
use crate::model::{
    Address, Engine, EngineKind, IbMode, MemoryRegion, RegionId, StridingRq, Transport,
};

/// Ethernet header bytes.
const ETH: u32 = 14;
/// Two 802.1Q tags.
const VLAN2: u32 = 8;
/// `XDP_PACKET_HEADROOM`.
const XDP_HEADROOM: u32 = 256;
/// Most descriptors of one AF_XDP multi-buffer frame (`XDP_USE_SG`): the kernel's
/// `MAX_SKB_FRAGS` (17) + 1.
pub const XDP_MAX_FRAGS: u32 = 18;
/// `tpacket3_hdr` + `sockaddr_ll`, aligned (what a frame costs in a `TPACKET_V3` block).
const TPACKET3_OVERHEAD: u32 = 96;
/// Frame data offset in a `TPACKET_V2` TX ring slot (`TPACKET2_HDRLEN - sizeof(sockaddr_ll)`).
const TPACKET2_TX_OFFSET: u32 = 32;

/// The largest frame (raw engines) or message (socket engine) an interface receives, with
/// how it was derived.
pub(crate) fn largest_frame(kind: EngineKind, i: &DraftInterface) -> Option<(u32, String)> {
    let mtu = i.mtu?;
    if kind.is_raw() {
        return Some((
            mtu + ETH + VLAN2,
            format!("mtu {mtu} + {ETH} Ethernet + {VLAN2} for two VLAN tags"),
        ));
    }
    let Some(Address::Socket(u)) = &i.address else {
        return None;
    };
    if let Some(m) = i.max_message_size? {
        return Some((m, "max_message_size".to_owned()));
    }
    Some(match u.transport {
        Transport::Udp => (
            mtu - 28,
            format!(
                "largest datagram: mtu {mtu} − 20 IPv4 − 8 UDP; set max_message_size to change it"
            ),
        ),
        Transport::Rdma => (mtu, format!("one RDMA message of mtu {mtu} bytes")),
        Transport::Tcp => (
            mtu - 40,
            format!(
                "one TCP segment: mtu {mtu} − 20 IPv4 − 20 TCP; set max_message_size to change it"
            ),
        ),
    })
}

fn regions_of<'a>(d: &'a Draft, ids: &[RegionId]) -> Option<Vec<&'a MemoryRegion>> {
    ids.iter().map(|r| d.regions.get(r.0)?.as_ref()).collect()
}

/// Buffers hold the largest frame: one region ≥ frame; with header-data split
/// `region[0] ≥ hds_split` and the data regions ≥ frame − `hds_split`; TX regions together ≥ frame.
pub(super) fn frames_fit_buffers(d: &Draft, errs: &mut Errors) {
    for (i, iface) in d.interfaces.iter().enumerate() {
        let Some((max, why)) = largest_frame(d.kind, iface) else {
            continue;
        };
        for (n, q) in iface.rx.iter().enumerate() {
            let Some(q) = q else { continue };
            let Some(regs) = regions_of(d, &q.memory_regions) else {
                continue;
            };
            let p = rxq(i, n);
            match q.hds_split {
                // AF_XDP receives a frame in up to XDP_MAX_FRAGS UMEM frames (buf_size =
                // frame_size, checked in engine_frames).
                None if d.kind == EngineKind::Afxdp => {}
                None => {
                    let r = regs[0];
                    if r.buf_size < max {
                        errs.push(
                            format!("{p}.memory_regions[0]"),
                            format!(
                                "region \"{}\" has buf_size {}, too small for the largest frame of {max} B ({why}); set memory_regions[{}].buf_size ≥ {max}",
                                r.name, r.buf_size, q.memory_regions[0].0
                            ),
                        );
                    }
                }
                Some(h) => hds_fits(&p, h, max, &why, &regs, &q.memory_regions, errs),
            }
        }
        for (n, q) in iface.tx.iter().enumerate() {
            let Some(q) = q else { continue };
            let Some(regs) = regions_of(d, &q.memory_regions) else {
                continue;
            };
            let total: u64 = regs.iter().map(|r| u64::from(r.buf_size)).sum();
            if total < u64::from(max) {
                let p = txq(i, n);
                let (path, fix) = if regs.len() == 1 {
                    (
                        format!("{p}.memory_regions[0]"),
                        format!(
                            "set memory_regions[{}].buf_size ≥ {max}",
                            q.memory_regions[0].0
                        ),
                    )
                } else {
                    (
                        format!("{p}.memory_regions"),
                        format!("make the regions' buf_size add up to ≥ {max}"),
                    )
                };
                errs.push(
                    path,
                    format!(
                        "TX buffers hold {total} B, too small for the largest frame of {max} B ({why}); {fix}"
                    ),
                );
            }
        }
    }
}

fn hds_fits(
    p: &str,
    h: u32,
    max: u32,
    why: &str,
    regs: &[&MemoryRegion],
    ids: &[RegionId],
    errs: &mut Errors,
) {
    if h >= max {
        errs.push(
            format!("{p}.hds_split"),
            format!(
                "hds_split {h} ≥ the largest frame of {max} B ({why}): nothing would reach the data region; use a header size such as 42 (Ethernet+IPv4+UDP)"
            ),
        );
        return;
    }
    if regs[0].buf_size < h {
        errs.push(
            format!("{p}.memory_regions[0]"),
            format!(
                "header region \"{}\" has buf_size {}, smaller than hds_split {h}; set memory_regions[{}].buf_size ≥ {h}",
                regs[0].name, regs[0].buf_size, ids[0].0
            ),
        );
    }
    let data: u64 = regs[1..].iter().map(|r| u64::from(r.buf_size)).sum();
    let need = max - h;
    if data < u64::from(need) {
        errs.push(
            format!("{p}.memory_regions[1]"),
            format!(
                "data region \"{}\" has buf_size {data}, too small for the {need} B after the {h}-byte header of the largest frame of {max} B ({why}); set memory_regions[{}].buf_size ≥ {need}",
                regs[1].name, ids[1].0
            ),
        );
    }
}

/// Each region has at least 2 × `batch_size` buffers per queue using it (one burst in flight
/// while the next fills), summed over all queues sharing it; an AF_XDP RX queue whose
/// frames take several UMEM frames (multi-buffer) counts that many buffers per frame.
pub(super) fn enough_buffers(d: &Draft, errs: &mut Errors) {
    for (r, region) in d.regions.iter().enumerate() {
        let Some(region) = region else { continue };
        let mut users: Vec<(String, u32)> = Vec::new();
        for (i, iface) in d.interfaces.iter().enumerate() {
            let per_frame = match (&d.engine, largest_frame(d.kind, iface)) {
                (Some(Engine::Afxdp(x)), Some((max, _))) => max
                    .div_ceil(x.frame_size.saturating_sub(XDP_HEADROOM).max(1))
                    .max(1),
                _ => 1,
            };
            for (n, q) in iface.rx.iter().enumerate() {
                if let Some(q) = q
                    .as_ref()
                    .filter(|q| q.memory_regions.contains(&RegionId(r)))
                {
                    users.push((rxq(i, n), q.batch_size * per_frame));
                }
            }
            for (n, q) in iface.tx.iter().enumerate() {
                if let Some(q) = q
                    .as_ref()
                    .filter(|q| q.memory_regions.contains(&RegionId(r)))
                {
                    users.push((txq(i, n), q.batch_size));
                }
            }
        }
        let need: u64 = users.iter().map(|(_, b)| 2 * u64::from(*b)).sum();
        if u64::from(region.buf_count) < need {
            let list: Vec<String> = users.iter().map(|(p, b)| format!("{p}: 2×{b}")).collect();
            let shared = if users.len() > 1 {
                " summed over the queues using it"
            } else {
                ""
            };
            errs.push(
                format!("memory_regions[{r}].buf_count"),
                format!(
                    "{} buffers < 2 × batch_size{shared} ({}) = {need}; set buf_count ≥ {need}",
                    region.buf_count,
                    list.join(", ")
                ),
            );
        }
    }
}

/// Engine rings hold the largest frame: an `AF_PACKET` block, an `AF_XDP` frame after its
/// 256-byte headroom.
pub(super) fn engine_frames(d: &Draft, errs: &mut Errors) {
    let Some(engine) = &d.engine else { return };
    striding_fits(d, errs);
    let worst = d
        .interfaces
        .iter()
        .filter_map(|i| largest_frame(d.kind, i).map(|(m, _)| (m, i.mtu.unwrap_or(0))))
        .max();
    let Some((max, mtu)) = worst else { return };
    match engine {
        Engine::Afpacket(a) => {
            if a.block_size < max + TPACKET3_OVERHEAD {
                errs.push(
                    "engine.afpacket.block_size",
                    format!(
                        "block_size {} cannot hold one frame of {max} B (mtu {mtu}) plus {TPACKET3_OVERHEAD} B of tpacket3 header; use {}",
                        a.block_size,
                        (max + TPACKET3_OVERHEAD).next_power_of_two().max(4096)
                    ),
                );
            }
            if a.frame_size < max + TPACKET2_TX_OFFSET {
                errs.push(
                    "engine.afpacket.frame_size",
                    format!(
                        "frame_size {} cannot hold one frame of {max} B (mtu {mtu}) plus the {TPACKET2_TX_OFFSET} B tpacket2 header of a TX ring slot; use frame_size = {}",
                        a.frame_size,
                        (max + TPACKET2_TX_OFFSET).div_ceil(16) * 16
                    ),
                );
            }
        }
        // RX: a frame larger than one UMEM frame arrives in several (multi-buffer,
        // XDP_USE_SG), at most XDP_MAX_FRAGS; TX: one UMEM frame per frame.
        Engine::Afxdp(x) => {
            let room = x.frame_size.saturating_sub(XDP_HEADROOM);
            for (i, iface) in d.interfaces.iter().enumerate() {
                let Some((max, _)) = largest_frame(d.kind, iface) else {
                    continue;
                };
                let mtu = iface.mtu.unwrap_or(0);
                if !iface.tx.is_empty() && max > room {
                    let fix = if max + XDP_HEADROOM <= 4096 {
                        "use frame_size = 4096".to_owned()
                    } else {
                        format!(
                            "AF_XDP sends each frame from one UMEM frame (at most 4096 B; this engine has no multi-buffer TX): lower the mtu to {} for sending, send from another engine, or receive only on this interface (RX takes jumbo frames in several UMEM frames)",
                            4096 - XDP_HEADROOM - ETH - VLAN2
                        )
                    };
                    errs.push(
                        "engine.afxdp.frame_size",
                        format!(
                            "frame_size {} cannot hold a frame of {max} B (mtu {mtu} of interfaces[{i}], which has TX queues) after the {XDP_HEADROOM} B XDP headroom; {fix}",
                            x.frame_size
                        ),
                    );
                } else if !iface.rx.is_empty() && max > XDP_MAX_FRAGS * room {
                    // Unreachable while a raw mtu is at most 9600 (9622 B frames need 6 UMEM
                    // frames of 2048 B): a guard should that bound rise. The largest mtu these
                    // frames take; frame_size is 2048 or 4096.
                    let max_mtu = (XDP_MAX_FRAGS * room).saturating_sub(ETH + VLAN2);
                    let raise =
                        if x.frame_size < 4096 && max <= XDP_MAX_FRAGS * (4096 - XDP_HEADROOM) {
                            "use frame_size = 4096 or "
                        } else {
                            ""
                        };
                    errs.push(
                        "engine.afxdp.frame_size",
                        format!(
                            "frames of {max} B (mtu {mtu} of interfaces[{i}]) need more than the kernel's {XDP_MAX_FRAGS} UMEM frames of {room} B (frame_size {} − {XDP_HEADROOM} B XDP headroom) per frame; {raise}lower the mtu to {max_mtu} or less",
                            x.frame_size
                        ),
                    );
                }
            }
        }
        _ => {}
    }
}

/// `engine.ibverbs.striding_rq = "on"` (raw): every RX queue receives whole frames into its
/// first region's buffers, one multi-packet WQE per buffer, so no header-data split, and
/// each buffer holds at least 8 strides (the fewest any ConnectX allows; the device's own
/// minimum is checked when the engine opens). With "auto" the engine falls back instead.
fn striding_fits(d: &Draft, errs: &mut Errors) {
    let Some(Engine::Ibverbs(ib)) = &d.engine else {
        return;
    };
    if ib.mode != IbMode::Raw || ib.striding_rq != StridingRq::On {
        return;
    }
    use crate::engines::ibverbs::{default_stride, IB_MIN_STRIDES};
    for (i, iface) in d.interfaces.iter().enumerate() {
        let Some((max, _)) = largest_frame(d.kind, iface) else {
            continue;
        };
        let stride = ib.stride_size.unwrap_or_else(|| default_stride(max));
        let why = match ib.stride_size {
            Some(_) => "engine.ibverbs.stride_size".to_owned(),
            None => format!("the largest frame of {max} B rounded up to a power of two"),
        };
        for (n, q) in iface.rx.iter().enumerate() {
            let Some(q) = q else { continue };
            let p = rxq(i, n);
            if q.hds_split.is_some() {
                errs.push(
                    format!("{p}.hds_split"),
                    "engine.ibverbs.striding_rq = \"on\" receives whole frames into one buffer per WQE: no header-data split; remove hds_split or set striding_rq = \"auto\" (one frame per receive for this queue)",
                );
                continue;
            }
            let Some(regs) = regions_of(d, &q.memory_regions) else {
                continue;
            };
            let need = u64::from(IB_MIN_STRIDES) * u64::from(stride);
            let r = regs[0];
            if u64::from(r.buf_size) < need {
                errs.push(
                    format!("{p}.memory_regions[0]"),
                    format!(
                        "engine.ibverbs.striding_rq = \"on\": region \"{}\" has buf_size {}, less than {IB_MIN_STRIDES} strides of {stride} B ({why}), the smallest multi-packet WQE; set memory_regions[{}].buf_size ≥ {need} (e.g. {} for 64 strides) or lower stride_size",
                        r.name,
                        r.buf_size,
                        q.memory_regions[0].0,
                        64 * u64::from(stride)
                    ),
                );
            }
        }
    }
}
