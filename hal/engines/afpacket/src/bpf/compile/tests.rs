//! Unit tests of the flow-rule compiler, run on the reference interpreter
//! ([`Program::run`]) against frames built with the core emitters, and compared with the
//! core [`FlowTable`] on random rule sets and random frames.

// Frame lists read better as `&[a.clone(), b]` throughout.
#![allow(clippy::cloned_ref_to_slice_refs)]

use super::*;
use crate::bpf::asm::{Insn, VlanAux};
use rtdaq_core::flow::{hash_ipv4_udp, Classified, DefaultAction, FlowRule};
use rtdaq_core::wire::{emit_udp_frame, ParseOptions, UdpFrameSpec, VlanTag};
use rtdaq_core::FlowId;

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

fn spec(sport: u16, dport: u16) -> UdpFrameSpec {
    UdpFrameSpec {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        src_ip: [169, 254, 1, 1],
        dst_ip: [169, 254, 1, 2],
        src_port: sport,
        dst_port: dport,
        payload_len: 40,
        ..UdpFrameSpec::default()
    }
}

fn frame(s: &UdpFrameSpec) -> Vec<u8> {
    let mut b = vec![0u8; s.frame_len() + 16];
    let off = s.payload_offset();
    for (i, x) in b[off..off + s.payload_len].iter_mut().enumerate() {
        *x = i as u8;
    }
    let n = emit_udp_frame(&mut b, s).unwrap();
    b.truncate(n);
    b
}

/// What the kernel hands a packet socket's filter: the outer VLAN tag moved to the
/// ancillary data.
fn strip(f: &[u8]) -> (Vec<u8>, VlanAux) {
    if f.len() >= 18 {
        let tpid = u16::from_be_bytes([f[12], f[13]]);
        if tpid == 0x8100 || tpid == 0x88a8 {
            let tci = u16::from_be_bytes([f[14], f[15]]);
            let mut v = f[..12].to_vec();
            v.extend_from_slice(&f[16..]);
            return (v, Some((tpid, tci)));
        }
    }
    (f.to_vec(), None)
}

fn progs<const N: usize>(t: &FlowTable<N>, queues: u16, catch_all: u16) -> Vec<Program> {
    (0..queues)
        .map(|q| compile_rx_filter(t, QueueId(q), QueueId(catch_all)).unwrap())
        .collect()
}

/// Queues whose filter accepts `f` (`stripped`: the outer tag in the ancillary data).
fn accepting(ps: &[Program], f: &[u8], stripped: bool) -> Vec<u16> {
    let (data, aux) = if stripped {
        strip(f)
    } else {
        (f.to_vec(), None)
    };
    (0..ps.len())
        .filter(|&q| match ps[q].run(&data, aux) {
            0 => false,
            ACCEPT => true,
            v => panic!("verdict {v:#x}"),
        })
        .map(|q| q as u16)
        .collect()
}

fn table(default: DefaultAction, rules: &[(u32, FlowMatch, FlowAction)]) -> FlowTable<64> {
    let mut t = FlowTable::new(default);
    for (id, m, a) in rules {
        t.push(FlowRule {
            id: FlowId(*id),
            matcher: *m,
            action: a.clone(),
        })
        .unwrap();
    }
    t
}

fn rss(qs: &[u16]) -> FlowAction {
    FlowAction::Rss(qs.iter().map(|&q| QueueId(q)).collect())
}

/// One rule `m` → queue 1, default queue 0: `f` goes to 1 exactly when `m` matches, in both
/// the inline and the stripped-tag forms.
fn check_field(m: FlowMatch, yes: &[Vec<u8>], no: &[Vec<u8>]) {
    let t = table(
        DefaultAction::Queue(QueueId(0)),
        &[(1, m, FlowAction::Queue(QueueId(1)))],
    );
    let ps = progs(&t, 2, 0);
    for (want, frames) in [(1u16, yes), (0, no)] {
        for f in frames {
            for stripped in [false, true] {
                assert_eq!(
                    accepting(&ps, f, stripped),
                    vec![want],
                    "rule {m:?}, stripped {stripped}, frame {f:02x?}\n{}",
                    ps[1]
                );
            }
            let core = match t.classify(f) {
                Classified::Deliver { queue, .. } => queue.0,
                other => panic!("{other:?}"),
            };
            assert_eq!(core, want, "core table disagrees on {f:02x?}");
        }
    }
}

#[test]
fn rss_constants_reproduce_the_core_hash() {
    let c = rss_bit_constants();
    let mut r = Rng(7);
    for _ in 0..2000 {
        let (s, d) = (
            (r.next() as u32).to_be_bytes(),
            (r.next() as u32).to_be_bytes(),
        );
        let (sp, dp) = (r.next() as u16, r.next() as u16);
        let src = u32::from_be_bytes(s);
        let dst = u32::from_be_bytes(d);
        let x = src ^ dst ^ (u32::from(sp) << 16 | u32::from(dp));
        let w = ((x >> 16) ^ x) & 0xffff;
        let h = (0..16)
            .filter(|j| w & (0x8000 >> j) != 0)
            .fold(0u32, |h, j| h ^ c[j]);
        assert_eq!(h, hash_ipv4_udp(&RSS_KEY_SYMMETRIC, s, d, sp, dp));
    }
}

#[test]
fn program_structure() {
    let t = table(DefaultAction::Drop, &[]);
    let p = compile_rx_filter(&t, QueueId(0), QueueId(0)).unwrap();
    // Every scratch slot is stored before anything else.
    assert_eq!(p.insns()[0], Insn::stmt(op::LD | op::IMM, 0));
    for s in 0..SLOTS_USED {
        assert_eq!(p.insns()[1 + s as usize], Insn::stmt(op::ST, s));
    }
    let last = p.insns().last().unwrap();
    assert_eq!(
        *last,
        Insn::stmt(op::RET | op::K, ACCEPT),
        "catch-all accepts"
    );
    let other = compile_rx_filter(&t, QueueId(1), QueueId(0)).unwrap();
    assert_eq!(
        *other.insns().last().unwrap(),
        Insn::stmt(op::RET | op::K, 0)
    );
    assert!(p.len() < 120, "prologue is {} instructions", p.len());
    // Jump offsets are bytes by construction; the checker also rejects jumps past the end.
    for (at, i) in p.insns().iter().enumerate() {
        if i.class() == op::JMP {
            let far = if i.code == op::JMP | op::JA {
                i.k as usize
            } else {
                usize::from(i.jt.max(i.jf))
            };
            assert!(at + 1 + far < p.len());
        }
    }
}

/// Every field of one rule, a straddling frame word, and RSS over 32 queues: the longest
/// rule there is. Its conditional jumps stay below 256; 64 of them exceed the kernel limit.
#[test]
fn worst_case_rules() {
    let m = FlowMatch {
        ethertype: Some(0x0800),
        vlan_id: Some(7),
        ipv4_src: Some(Ipv4Prefix::new([10, 0, 0, 0], 8)),
        ipv4_dst: Some(Ipv4Prefix::new([10, 1, 0, 0], 16)),
        ipv4_total_len: Some(100),
        udp_src: Some(PortRange::new(1, 2)),
        udp_dst: Some(PortRange::new(3, 4)),
        ecpri_msg_type: Some(2),
        word: Some(WordMatch {
            base: WordBase::Frame,
            offset: 13,
            value: 1,
            mask: 0xff00ff,
        }),
    };
    let all: Vec<u16> = (0..32).collect();
    let one = table(DefaultAction::Drop, &[(1, m, rss(&all))]);
    for q in [0, 31] {
        let p = compile_rx_filter(&one, QueueId(q), QueueId(0)).unwrap();
        let max = p
            .insns()
            .iter()
            .filter(|i| i.class() == op::JMP && i.code != op::JMP | op::JA)
            .map(|i| i.jt.max(i.jf))
            .max()
            .unwrap();
        assert!(max < 255, "longest conditional jump {max}");
    }
    let rules: Vec<_> = (1..=64).map(|id| (id, m, rss(&all))).collect();
    let many = table(DefaultAction::Drop, &rules);
    match compile_rx_filter(&many, QueueId(0), QueueId(0)) {
        Err(AsmError::TooLong { len }) => assert!(len > MAX_INSNS_FOR_TEST),
        other => panic!("{other:?}"),
    }
    // The same rules steering to a queue other than the one compiled cost one `ret` each.
    let elsewhere: Vec<_> = (1..=64).map(|id| (id, m, rss(&[5]))).collect();
    let p = compile_rx_filter(
        &table(DefaultAction::Drop, &elsewhere),
        QueueId(0),
        QueueId(0),
    );
    assert!(p.unwrap().len() < MAX_INSNS_FOR_TEST);
}

const MAX_INSNS_FOR_TEST: usize = crate::bpf::MAX_INSNS;

#[test]
fn field_ethertype_and_vlan() {
    let plain = frame(&spec(1, 2));
    let mut arp = plain.clone();
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    check_field(
        FlowMatch {
            ethertype: Some(0x0806),
            ..FlowMatch::ANY
        },
        &[arp.clone()],
        &[plain.clone()],
    );
    let tagged = |vid: u16, tpid: VlanTag| {
        frame(&UdpFrameSpec {
            vlan: Some(tpid_with(tpid, vid)),
            ..spec(1, 2)
        })
    };
    let qinq = frame(&UdpFrameSpec {
        vlan: Some(VlanTag::dot1ad(100)),
        vlan_inner: Some(VlanTag::dot1q(5)),
        ..spec(1, 2)
    });
    check_field(
        FlowMatch {
            vlan_id: Some(100),
            ..FlowMatch::ANY
        },
        &[
            tagged(100, VlanTag::dot1q(0)),
            tagged(100, VlanTag::dot1ad(0)),
            qinq.clone(),
        ],
        &[tagged(101, VlanTag::dot1q(0)), plain.clone(), arp],
    );
    // The EtherType after both tags, and UDP behind them.
    check_field(
        FlowMatch {
            ethertype: Some(0x0800),
            udp_dst: Some(PortRange::single(2)),
            ..FlowMatch::ANY
        },
        &[qinq, tagged(9, VlanTag::dot1q(0)), plain],
        &[frame(&spec(1, 3))],
    );
}

fn tpid_with(t: VlanTag, vid: u16) -> VlanTag {
    VlanTag { vid, ..t }
}

#[test]
fn field_ipv4() {
    let with = |src: [u8; 4], dst: [u8; 4]| {
        frame(&UdpFrameSpec {
            src_ip: src,
            dst_ip: dst,
            ..spec(1, 2)
        })
    };
    check_field(
        FlowMatch {
            ipv4_src: Some(Ipv4Prefix::new([169, 254, 7, 0], 24)),
            ..FlowMatch::ANY
        },
        &[
            with([169, 254, 7, 9], [1, 2, 3, 4]),
            with([169, 254, 7, 255], [0; 4]),
        ],
        &[with([169, 254, 8, 9], [169, 254, 7, 9])],
    );
    check_field(
        FlowMatch {
            ipv4_dst: Some(Ipv4Prefix::host([169, 254, 1, 2])),
            ..FlowMatch::ANY
        },
        &[with([1, 1, 1, 1], [169, 254, 1, 2])],
        &[with([169, 254, 1, 2], [169, 254, 1, 3])],
    );
    let mut arp = with([0; 4], [0; 4]);
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    check_field(
        FlowMatch {
            ipv4_dst: Some(Ipv4Prefix::ANY),
            ..FlowMatch::ANY
        },
        &[with([1, 1, 1, 1], [2, 2, 2, 2])],
        &[arp],
    );
    let len = |n: usize| {
        frame(&UdpFrameSpec {
            payload_len: n,
            ..spec(1, 2)
        })
    };
    check_field(
        FlowMatch {
            ipv4_total_len: Some(128),
            ..FlowMatch::ANY
        },
        &[len(100)],
        &[len(101), len(99)],
    );
}

/// A copy of `f` with IPv4 options (`extra` 4-byte words) inserted: L4 moves.
fn with_ip_options(f: &[u8], extra: usize) -> Vec<u8> {
    let l3 = 14;
    let mut v = f[..l3 + 20].to_vec();
    v.extend(std::iter::repeat_n(1u8, 4 * extra)); // NOP options
    v.extend_from_slice(&f[l3 + 20..]);
    v[l3] = 0x40 | (5 + extra as u8);
    let total = u16::from_be_bytes([v[l3 + 2], v[l3 + 3]]) + 4 * extra as u16;
    v[l3 + 2..l3 + 4].copy_from_slice(&total.to_be_bytes());
    v
}

#[test]
fn field_udp_ports_fragments_and_options() {
    let f = |s, d| frame(&spec(s, d));
    let mut frag = f(5000, 6000);
    frag[14 + 6] = 0x20; // more fragments
    let mut tcp = f(5000, 6000);
    tcp[14 + 9] = 6;
    check_field(
        FlowMatch {
            udp_dst: Some(PortRange::new(6000, 6003)),
            ..FlowMatch::ANY
        },
        &[f(1, 6000), f(1, 6003), with_ip_options(&f(1, 6001), 3)],
        &[f(1, 5999), f(1, 6004), f(6000, 1), frag, tcp],
    );
    check_field(
        FlowMatch {
            udp_src: Some(PortRange::new(0, 10)),
            ..FlowMatch::ANY
        },
        &[f(0, 9), f(10, 9)],
        &[f(11, 9)],
    );
    check_field(
        FlowMatch {
            udp_src: Some(PortRange::new(65000, 65535)),
            ..FlowMatch::ANY
        },
        &[f(65535, 9), f(65000, 9)],
        &[f(64999, 9)],
    );
}

fn ecpri_eth(msg_type: u8, vlan: bool) -> Vec<u8> {
    let mut v = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    if vlan {
        v.extend_from_slice(&[0x81, 0, 0, 3]);
    }
    v.extend_from_slice(&[0xae, 0xfe, 0x10, msg_type, 0, 8]);
    v.extend_from_slice(&[0u8; 8]);
    v.resize(60, 0);
    v
}

#[test]
fn field_ecpri() {
    check_field(
        FlowMatch {
            ecpri_msg_type: Some(2),
            ..FlowMatch::ANY
        },
        &[ecpri_eth(2, false), ecpri_eth(2, true)],
        &[ecpri_eth(3, false), frame(&spec(2, 2))],
    );
    // eCPRI over UDP when the table's parser knows the port.
    let mut t: FlowTable<4> = FlowTable::with_options(
        DefaultAction::Queue(QueueId(0)),
        ParseOptions {
            ecpri_udp_port: Some(4991),
        },
    );
    t.push(FlowRule {
        id: FlowId(1),
        matcher: FlowMatch {
            ecpri_msg_type: Some(5),
            ..FlowMatch::ANY
        },
        action: FlowAction::Queue(QueueId(1)),
    })
    .unwrap();
    let ps = progs(&t, 2, 0);
    let s = UdpFrameSpec {
        payload_len: 12,
        ..spec(1, 4991)
    };
    let mut b = vec![0u8; 128];
    b[s.payload_offset()..s.payload_offset() + 4].copy_from_slice(&[0x10, 5, 0, 8]);
    let n = emit_udp_frame(&mut b, &s).unwrap();
    assert_eq!(accepting(&ps, &b[..n], false), vec![1]);
    b[s.payload_offset() + 1] = 4;
    let n = emit_udp_frame(&mut b, &s).unwrap();
    assert_eq!(accepting(&ps, &b[..n], false), vec![0]);
}

#[test]
fn field_words() {
    let base = frame(&spec(1, 2));
    let word = |off: u16, value: u32, mask: u32, b: WordBase| FlowMatch {
        word: Some(WordMatch {
            base: b,
            offset: off,
            value,
            mask,
        }),
        ..FlowMatch::ANY
    };
    // Destination MAC high bytes (before any tag).
    check_field(
        word(0, 0x0200_0000, 0xffff_0000, WordBase::Frame),
        &[base.clone()],
        &[frame(&UdpFrameSpec {
            dst_mac: [4, 0, 0, 0, 0, 2],
            ..spec(1, 2)
        })],
    );
    // Straddling the VLAN tag (TPID low byte, TCI, EtherType high byte) at every offset.
    let tagged = frame(&UdpFrameSpec {
        vlan: Some(VlanTag::dot1q(0x123)),
        ..spec(1, 2)
    });
    for off in 9..16u16 {
        let o = usize::from(off);
        let v = u32::from_be_bytes(tagged[o..o + 4].try_into().unwrap());
        // Flip a source-MAC byte or the low VID byte inside the word (frames stay valid).
        let mut other = tagged.clone();
        other[if o <= 11 { o } else { 15 }] ^= 0x01;
        check_field(
            word(off, v, u32::MAX, WordBase::Frame),
            &[tagged.clone()],
            &[other, base.clone()],
        );
    }
    // After the tag (the UDP destination port of a tagged frame), and past the end.
    let o = 18 + 20 + 2;
    let v = u32::from(u16::from_be_bytes([tagged[o], tagged[o + 1]])) << 16;
    check_field(
        word(o as u16, v, 0xffff_0000, WordBase::Frame),
        &[tagged.clone()],
        &[base.clone()],
    );
    let n = base.len() as u16;
    check_field(word(n - 4, 0, 0, WordBase::Frame), &[base.clone()], &[]);
    check_field(word(n - 3, 0, 0, WordBase::Frame), &[], &[base.clone()]);
    // UDP payload words (payload bytes are 0, 1, 2, ...), bounded by the UDP length.
    check_field(
        word(4, 0x0405_0607, u32::MAX, WordBase::UdpPayload),
        &[base.clone(), tagged.clone(), with_ip_options(&base, 2)],
        &[frame(&UdpFrameSpec {
            payload_len: 7,
            ..spec(1, 2)
        })],
    );
    check_field(
        word(36, 0x2425_2627, u32::MAX, WordBase::UdpPayload),
        &[base.clone()],
        &[frame(&UdpFrameSpec {
            payload_len: 39,
            ..spec(1, 2)
        })],
    );
}

#[test]
fn first_match_drop_and_default_go_to_the_catch_all_queue() {
    let m5000 = FlowMatch {
        udp_dst: Some(PortRange::single(5000)),
        ..FlowMatch::ANY
    };
    let m_net = FlowMatch {
        ipv4_src: Some(Ipv4Prefix::new([169, 254, 0, 0], 16)),
        ..FlowMatch::ANY
    };
    let t = table(
        DefaultAction::Drop,
        &[
            (1, m5000, FlowAction::Queue(QueueId(2))),
            (2, m_net, FlowAction::Drop),
        ],
    );
    let ps = progs(&t, 3, 0);
    assert_eq!(accepting(&ps, &frame(&spec(1, 5000)), false), vec![2]);
    assert_eq!(
        accepting(&ps, &frame(&spec(1, 5001)), false),
        vec![0],
        "drop rule"
    );
    let mut other = frame(&spec(1, 5001));
    other[26] = 10;
    assert_eq!(accepting(&ps, &other, false), vec![0], "no rule");
    // Runts and frames cut inside a tag go to the catch-all queue too.
    assert_eq!(accepting(&ps, &[0u8; 13], false), vec![0]);
    let mut cut = frame(&UdpFrameSpec {
        vlan: Some(VlanTag::dot1q(1)),
        ..spec(1, 5000)
    });
    cut.truncate(17);
    assert_eq!(accepting(&ps, &cut, false), vec![0]);
    // With a default queue, that queue is the catch-all.
    let t = table(
        DefaultAction::Queue(QueueId(1)),
        &[(1, m5000, FlowAction::Queue(QueueId(2)))],
    );
    let ps = progs(&t, 3, 1);
    assert_eq!(accepting(&ps, &frame(&spec(1, 9)), false), vec![1]);
}

#[test]
fn rss_in_the_filter_matches_the_core_table() {
    let m = FlowMatch {
        udp_dst: Some(PortRange::single(6000)),
        ..FlowMatch::ANY
    };
    let t = table(DefaultAction::Queue(QueueId(0)), &[(3, m, rss(&[1, 2, 3]))]);
    let ps = progs(&t, 4, 0);
    let mut seen = [0u32; 4];
    for sport in 1000..1400 {
        let f = frame(&spec(sport, 6000));
        let Classified::Deliver { queue, flow } = t.classify(&f) else {
            panic!()
        };
        assert_eq!(flow, FlowId(3));
        assert_eq!(accepting(&ps, &f, false), vec![queue.0]);
        seen[usize::from(queue.0)] += 1;
    }
    assert_eq!(seen[0], 0);
    assert!(seen[1..].iter().all(|&n| n > 60), "{seen:?}");
    // Fragments go to the first queue of the set.
    let mut frag = frame(&spec(1234, 6000));
    frag[14 + 7] = 8;
    let mut t2 = t.clone();
    t2.clear();
    t2.push(FlowRule {
        id: FlowId(3),
        matcher: FlowMatch {
            ipv4_dst: Some(Ipv4Prefix::ANY),
            ..FlowMatch::ANY
        },
        action: rss(&[2, 1]),
    })
    .unwrap();
    let ps = progs(&t2, 4, 0);
    assert_eq!(accepting(&ps, &frag, false), vec![2]);
}

/// Random rule sets and random frames: every frame is accepted by exactly one queue, and
/// for every frame the core table does not call malformed, that queue is the one the core
/// table picks (or the catch-all queue for `no_flow` / `flow_drop`).
#[test]
fn random_rules_partition_the_traffic_like_the_core_table() {
    let mut r = Rng(0x5eed);
    let ports = [0u16, 1, 2, 53, 4991, 5000, 5001, 6000, 65535];
    let nets = [
        [169u8, 254, 1, 1],
        [169, 254, 1, 2],
        [10, 0, 0, 1],
        [169, 254, 9, 9],
    ];
    let mut checked = [0u32; 4];
    for round in 0..300 {
        let queues = 1 + r.below(4) as u16;
        let default = if r.chance(30) {
            DefaultAction::Drop
        } else {
            DefaultAction::Queue(QueueId(r.below(u64::from(queues)) as u16))
        };
        let catch_all = match default {
            DefaultAction::Queue(q) => q.0,
            DefaultAction::Drop => 0,
        };
        let opts = ParseOptions {
            ecpri_udp_port: r.chance(20).then_some(4991),
        };
        let mut t: FlowTable<64> = FlowTable::with_options(default, opts);
        for id in 1..=(1 + r.below(6)) {
            let mut m = FlowMatch::ANY;
            if r.chance(15) {
                m.ethertype = Some(r.pick(&[0x0800, 0x0806, 0xaefe, 0x8100]));
            }
            if r.chance(20) {
                m.vlan_id = Some(r.pick(&[0, 5, 100]));
            }
            if r.chance(25) {
                m.ipv4_src = Some(Ipv4Prefix::new(r.pick(&nets), r.pick(&[0, 8, 24, 32])));
            }
            if r.chance(20) {
                m.ipv4_dst = Some(Ipv4Prefix::new(r.pick(&nets), r.pick(&[16, 32])));
            }
            if r.chance(10) {
                m.ipv4_total_len = Some(r.pick(&[68, 100]));
            }
            if r.chance(35) {
                let (a, b) = (r.pick(&ports), r.pick(&ports));
                m.udp_dst = Some(PortRange::new(a.min(b), a.max(b)));
            }
            if r.chance(20) {
                m.udp_src = Some(PortRange::single(r.pick(&ports)));
            }
            if r.chance(10) {
                m.ecpri_msg_type = Some(r.pick(&[2, 5]));
            }
            if r.chance(15) {
                m.word = Some(WordMatch {
                    base: if r.chance(50) {
                        WordBase::Frame
                    } else {
                        WordBase::UdpPayload
                    },
                    offset: r.pick(&[0, 4, 10, 12, 13, 14, 16, 30, 36, 100]),
                    value: r.pick(&[0, 0x0001_0203, 0x8100_0005]),
                    mask: r.pick(&[0, 0xffff_ffff, 0x00ff_00ff]),
                });
            }
            let action = match r.below(5) {
                0 => FlowAction::Drop,
                1 | 2 => {
                    let n = 1 + r.below(3);
                    let qs: Vec<u16> = (0..n).map(|_| r.below(u64::from(queues)) as u16).collect();
                    rss(&qs)
                }
                _ => FlowAction::Queue(QueueId(r.below(u64::from(queues)) as u16)),
            };
            t.push(FlowRule {
                id: FlowId(id as u32),
                matcher: m,
                action,
            })
            .unwrap();
        }
        let ps = progs(&t, queues, catch_all);
        for _ in 0..60 {
            let f = random_frame(&mut r, &ports, &nets);
            let want = match t.classify(&f) {
                Classified::Deliver { queue, .. } => Some(queue.0),
                Classified::NoFlow | Classified::FlowDrop => Some(catch_all),
                Classified::Malformed => None,
            };
            for stripped in [false, true] {
                let got = accepting(&ps, &f, stripped);
                assert_eq!(got.len(), 1, "round {round}: {got:?} for {f:02x?}");
                if let Some(w) = want {
                    assert_eq!(
                        got[0],
                        w,
                        "round {round}, stripped {stripped}, rules {:#?}\nframe {f:02x?}",
                        t.rules()
                    );
                }
            }
            checked[match t.classify(&f) {
                Classified::Deliver { .. } => 0,
                Classified::NoFlow => 1,
                Classified::FlowDrop => 2,
                Classified::Malformed => 3,
            }] += 1;
        }
    }
    assert!(checked.iter().all(|&n| n > 100), "coverage {checked:?}");
}

fn random_frame(r: &mut Rng, ports: &[u16], nets: &[[u8; 4]]) -> Vec<u8> {
    let mut s = UdpFrameSpec {
        src_ip: r.pick(nets),
        dst_ip: r.pick(nets),
        src_port: r.pick(ports),
        dst_port: r.pick(ports),
        payload_len: r.pick(&[0, 3, 40, 72]),
        ..spec(0, 0)
    };
    match r.below(6) {
        0 => s.vlan = Some(VlanTag::dot1q(r.pick(&[0, 5, 100]))),
        1 => {
            s.vlan = Some(VlanTag::dot1ad(r.pick(&[5, 100])));
            s.vlan_inner = Some(VlanTag::dot1q(r.pick(&[0, 5])));
        }
        _ => {}
    }
    let mut f = frame(&s);
    if s.payload_len >= 4 && r.chance(30) {
        let p = s.payload_offset();
        f[p..p + 4].copy_from_slice(&[0x10, r.pick(&[2, 5]), 0, 0]);
        f = {
            let mut b = vec![0u8; f.len()];
            b[p..].copy_from_slice(&f[p..]);
            let n = emit_udp_frame(&mut b, &s).unwrap();
            b.truncate(n);
            b
        };
    }
    let l3 = s.payload_offset() - 28;
    match r.below(14) {
        0 => f[l3 + 6] |= 0x20,                            // fragment
        1 => f[l3 + 9] = 6,                                // TCP
        2 => f.truncate(r.below(f.len() as u64) as usize), // cut anywhere
        3 => f[l3] = 0x4f,                                 // bad IHL / options beyond the frame
        4 => f[l3 + 24..l3 + 26].copy_from_slice(&[0, 4]), // UDP length < 8
        5 => {
            f[l3 - 2..l3].copy_from_slice(&0x0806u16.to_be_bytes()); // ARP
        }
        6 => f = ecpri_eth(r.pick(&[2, 5]), r.chance(50)),
        7 if l3 == 14 => f = with_ip_options(&f, 1 + r.below(3) as usize),
        8 => f.resize(f.len() + 10, 0), // link padding
        _ => {}
    }
    f
}
