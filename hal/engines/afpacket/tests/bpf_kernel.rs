//! The compiled cBPF filters in the real kernel (root): each program is attached to its own
//! raw `AF_PACKET` socket in namespace B (plain `recv`, no engine), one mixed set of frames
//! is sent from A, and every socket must receive exactly the frames the core `FlowTable`
//! sends to the compiled queue — including VLAN-tagged frames, whose outer tag the kernel
//! strips before the filter runs (ancillary VLAN data), QinQ, and a frame word that
//! straddles the stripped tag.

mod common;

use std::collections::BTreeSet;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use common::*;
use rtdaq_core::flow::{
    Classified, DefaultAction, FlowAction, FlowMatch, FlowRule, FlowTable, Ipv4Prefix, PortRange,
    WordBase, WordMatch,
};
use rtdaq_core::wire::{SeqHeader, UdpFrameSpec, VlanTag};
use rtdaq_core::{FlowId, QueueId};
use rtdaq_engine_afpacket::bpf::{compile_rx_filter, Program};
use rtdaq_testbed::Side;

/// A raw packet socket with a filter attached, bound to one device. Test-only `unsafe`: the
/// engine's own sockets live in its private `sys` module.
struct Raw(OwnedFd);

impl Raw {
    #[allow(unsafe_code)]
    fn open(ifindex: u32, prog: &Program) -> Raw {
        // SAFETY: plain integer arguments; the descriptor is owned below.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        // SAFETY: a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let insns: Vec<libc::sock_filter> = prog
            .insns()
            .iter()
            .map(|i| libc::sock_filter {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
            .collect();
        let fprog = libc::sock_fprog {
            len: insns.len() as u16,
            filter: insns.as_ptr().cast_mut(),
        };
        let set = |level: i32, opt: i32, val: *const libc::c_void, len: usize| {
            // SAFETY: `val` points to `len` live bytes for the call.
            let r = unsafe { libc::setsockopt(fd.as_raw_fd(), level, opt, val, len as u32) };
            assert_eq!(
                r,
                0,
                "setsockopt {opt}: {}",
                std::io::Error::last_os_error()
            );
        };
        set(
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>(),
        );
        let one: i32 = 1;
        set(
            libc::SOL_PACKET,
            libc::PACKET_IGNORE_OUTGOING,
            (&one as *const i32).cast(),
            4,
        );
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 100_000,
        };
        set(
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>(),
        );
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll for the call; its size is passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(r, 0, "bind: {}", std::io::Error::last_os_error());
        Raw(fd)
    }

    /// Every frame queued until the receive timeout.
    #[allow(unsafe_code)]
    fn drain(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65536];
        loop {
            // SAFETY: `buf` is valid for writes of its length.
            let n =
                unsafe { libc::recv(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                return out;
            }
            out.push(buf[..n as usize].to_vec());
        }
    }
}

/// The frame index carried in the sequence header.
fn index_of(frame: &[u8]) -> u64 {
    let info = rtdaq_core::wire::parse_frame(frame).expect("a parsable frame");
    SeqHeader::parse(info.udp_payload(frame).unwrap())
        .unwrap()
        .seq
}

#[test]
fn compiled_filters_in_the_kernel() {
    let pair = pair("afp-bpf");
    pair.add_static_neighbors().unwrap();
    let txs = tx_config(&pair, Side::A, 1500, 2048, 1 << 20);
    let (_, mut tx) = txs.open_in::<32>(&pair, Side::A);

    // The frames: tags (none, 802.1Q 100 and 200, QinQ 88a8/5 + 8100/100), two sources, a few
    // ports, distinct payload words.
    let mut frames: Vec<Vec<u8>> = Vec::new();
    let tags: [(Option<VlanTag>, Option<VlanTag>); 4] = [
        (None, None),
        (Some(VlanTag::dot1q(100)), None),
        (Some(VlanTag::dot1q(200)), None),
        (Some(VlanTag::dot1ad(5)), Some(VlanTag::dot1q(100))),
    ];
    for (outer, inner) in tags {
        // Two sources, both the pair's own addresses (B drops a frame "from" itself unanswered).
        for src in [pair.ip(Side::A).octets(), pair.ip(Side::B).octets()] {
            for dport in [5000u16, 5001, 6000, 7000] {
                for sport in [1111u16, 2222, 3333] {
                    let s = UdpFrameSpec {
                        vlan: outer,
                        vlan_inner: inner,
                        src_ip: src,
                        ..spec(&pair, Side::A, sport, dport, 64)
                    };
                    let mut b = vec![0u8; 256];
                    let n = seq_frame(&mut b, &s, 1, frames.len() as u64);
                    b.truncate(n);
                    frames.push(b);
                }
            }
        }
    }

    let any = FlowMatch::ANY;
    let word = |base, offset, value, mask| FlowMatch {
        word: Some(WordMatch {
            base,
            offset,
            value,
            mask,
        }),
        ..any
    };
    let cases: Vec<(&str, FlowMatch, FlowAction)> = vec![
        (
            "udp_dst range",
            FlowMatch {
                udp_dst: Some(PortRange::new(5000, 5001)),
                ..any
            },
            q(1),
        ),
        (
            "vlan_id 100 (outer)",
            FlowMatch {
                vlan_id: Some(100),
                ..any
            },
            q(1),
        ),
        (
            "vlan_id 5 (QinQ outer)",
            FlowMatch {
                vlan_id: Some(5),
                ..any
            },
            q(1),
        ),
        (
            "ipv4_src + udp_src",
            FlowMatch {
                ipv4_src: Some(Ipv4Prefix::host(pair.ip(Side::B).octets())),
                udp_src: Some(PortRange::single(2222)),
                ..any
            },
            q(1),
        ),
        // Bytes 13..17 of a frame tagged 802.1Q VID 100: 00 | 00 64 | 08.
        (
            "frame word over the tag",
            word(WordBase::Frame, 13, 0x0000_6408, u32::MAX),
            q(1),
        ),
        // The sequence number's low bits (payload bytes 12..16): even frames.
        (
            "udp payload word",
            word(WordBase::UdpPayload, 12, 0, 1),
            q(1),
        ),
        (
            "ethertype after the tags",
            FlowMatch {
                ethertype: Some(0x0800),
                vlan_id: Some(200),
                ..any
            },
            q(1),
        ),
        (
            "rss over 1, 2",
            FlowMatch {
                udp_dst: Some(PortRange::single(6000)),
                ..any
            },
            FlowAction::Rss([QueueId(1), QueueId(2)].into_iter().collect()),
        ),
    ];
    let mut socks = Vec::new();
    for (name, m, action) in &cases {
        let mut t: FlowTable<4> = FlowTable::new(DefaultAction::Queue(QueueId(0)));
        t.push(FlowRule {
            id: FlowId(1),
            matcher: *m,
            action: action.clone(),
        })
        .unwrap();
        let p = compile_rx_filter(&t, QueueId(1), QueueId(0)).unwrap();
        let raw = pair.in_ns(Side::B, || Raw::open(pair.ifindex(Side::B), &p));
        let want: BTreeSet<u64> = frames
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                matches!(
                    t.classify(f),
                    Classified::Deliver {
                        queue: QueueId(1),
                        ..
                    }
                )
            })
            .map(|(i, _)| i as u64)
            .collect();
        assert!(
            !want.is_empty() && want.len() < frames.len(),
            "{name}: {} of {}",
            want.len(),
            frames.len()
        );
        socks.push((name, raw, want));
    }
    let sent = send_frames(&mut tx[0], frames.len(), None, |k, buf| {
        buf[..frames[k].len()].copy_from_slice(&frames[k]);
        frames[k].len()
    });
    assert_eq!(sent, frames.len());
    for (name, raw, want) in socks {
        let got: Vec<Vec<u8>> = raw.drain();
        let ids: BTreeSet<u64> = got.iter().map(|f| index_of(f)).collect();
        assert_eq!(ids.len(), got.len(), "{name}: duplicates");
        assert_eq!(ids, want, "{name}");
    }
}

fn q(n: u16) -> FlowAction {
    FlowAction::Queue(QueueId(n))
}
