//! Flow table: every match field, first-match order, default actions, RSS, table full,
//! socket-engine classification, symmetric Toeplitz, and no panics on random bytes.

use proptest::prelude::*;
use rtdaq_core::flow::{
    hash_ipv4_udp, toeplitz_hash, Classified, DefaultAction, FlowAction, FlowMatch, FlowRule,
    FlowTable, Ipv4Prefix, PortRange, WordBase, WordMatch, RSS_KEY_SYMMETRIC,
};
use rtdaq_core::wire::{emit_udp_frame, parse_frame, ParseOptions, UdpFrameSpec, VlanTag};
use rtdaq_core::{FlowId, QueueId};

const Q_DEFAULT: QueueId = QueueId(99);

fn spec() -> UdpFrameSpec {
    UdpFrameSpec {
        src_ip: [10, 1, 2, 3],
        dst_ip: [192, 168, 7, 9],
        src_port: 4000,
        dst_port: 5000,
        payload_len: 32,
        ..UdpFrameSpec::default()
    }
}

/// A frame for `s` whose payload is bytes 0, 1, 2, ...
fn frame(s: &UdpFrameSpec) -> Vec<u8> {
    let mut f = vec![0u8; s.frame_len()];
    let off = s.payload_offset();
    for (i, b) in f[off..].iter_mut().enumerate() {
        *b = i as u8;
    }
    emit_udp_frame(&mut f, s).unwrap();
    f
}

fn table_with(m: FlowMatch) -> FlowTable<4> {
    let mut t = FlowTable::new(DefaultAction::Queue(Q_DEFAULT));
    t.push(FlowRule {
        id: FlowId(7),
        matcher: m,
        action: FlowAction::Queue(QueueId(1)),
    })
    .unwrap();
    t
}

const HIT: Classified = Classified::Deliver {
    queue: QueueId(1),
    flow: FlowId(7),
};
const MISS: Classified = Classified::Deliver {
    queue: Q_DEFAULT,
    flow: FlowId::NONE,
};

/// Asserts that `m` matches `yes` and not `no` (both via `classify` and `matches`).
fn check(m: FlowMatch, yes: &[u8], no: &[u8]) {
    let t = table_with(m);
    assert_eq!(t.classify(yes), HIT, "{m:?} should match");
    assert_eq!(t.classify(no), MISS, "{m:?} should not match");
    assert!(m.matches(&parse_frame(yes).unwrap(), yes));
    assert!(!m.matches(&parse_frame(no).unwrap(), no));
}

fn m() -> FlowMatch {
    FlowMatch::ANY
}

#[test]
fn match_ethertype() {
    let arp = {
        let mut f = frame(&spec());
        f[12..14].copy_from_slice(&[0x08, 0x06]);
        f
    };
    check(
        FlowMatch {
            ethertype: Some(0x0800),
            ..m()
        },
        &frame(&spec()),
        &arp,
    );
    // Ethertype is the one after the VLAN tags.
    let tagged = frame(&UdpFrameSpec {
        vlan: Some(VlanTag::dot1q(5)),
        ..spec()
    });
    check(
        FlowMatch {
            ethertype: Some(0x0800),
            ..m()
        },
        &tagged,
        &arp,
    );
}

#[test]
fn match_vlan_id_outermost() {
    let v5 = frame(&UdpFrameSpec {
        vlan: Some(VlanTag::dot1q(5)),
        ..spec()
    });
    let v6 = frame(&UdpFrameSpec {
        vlan: Some(VlanTag::dot1q(6)),
        ..spec()
    });
    let qinq = frame(&UdpFrameSpec {
        vlan: Some(VlanTag::dot1ad(5)),
        vlan_inner: Some(VlanTag::dot1q(6)),
        ..spec()
    });
    let untagged = frame(&spec());
    let want5 = FlowMatch {
        vlan_id: Some(5),
        ..m()
    };
    check(want5, &v5, &v6);
    check(want5, &qinq, &untagged);
    // The inner tag is not the one compared.
    check(
        FlowMatch {
            vlan_id: Some(6),
            ..m()
        },
        &v6,
        &qinq,
    );
}

#[test]
fn match_ipv4_prefixes() {
    let a = frame(&spec());
    let b = frame(&UdpFrameSpec {
        src_ip: [10, 1, 3, 3],
        dst_ip: [192, 168, 8, 9],
        ..spec()
    });
    check(
        FlowMatch {
            ipv4_src: Some(Ipv4Prefix::new([10, 1, 2, 0], 24)),
            ..m()
        },
        &a,
        &b,
    );
    check(
        FlowMatch {
            ipv4_dst: Some(Ipv4Prefix::host([192, 168, 7, 9])),
            ..m()
        },
        &a,
        &b,
    );
    // /15 covers both 10.0.x and 10.1.x; /0 everything.
    let t = table_with(FlowMatch {
        ipv4_src: Some(Ipv4Prefix::new([10, 0, 0, 0], 15)),
        ..m()
    });
    assert_eq!((t.classify(&a), t.classify(&b)), (HIT, HIT));
    let t = table_with(FlowMatch {
        ipv4_dst: Some(Ipv4Prefix::ANY),
        ..m()
    });
    assert_eq!(t.classify(&a), HIT);
    // Non-IPv4 frames never match an IPv4 field, even /0.
    let mut arp = a.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(t.classify(&arp), MISS);
}

#[test]
fn match_ipv4_total_len() {
    let a = frame(&spec());
    let b = frame(&UdpFrameSpec {
        payload_len: 33,
        ..spec()
    });
    check(
        FlowMatch {
            ipv4_total_len: Some(28 + 32),
            ..m()
        },
        &a,
        &b,
    );
}

#[test]
fn match_udp_port_ranges() {
    let a = frame(&spec());
    let b = frame(&UdpFrameSpec {
        src_port: 4100,
        dst_port: 4999,
        ..spec()
    });
    check(
        FlowMatch {
            udp_src: Some(PortRange::new(3000, 4099)),
            ..m()
        },
        &a,
        &b,
    );
    check(
        FlowMatch {
            udp_dst: Some(PortRange::single(5000)),
            ..m()
        },
        &a,
        &b,
    );
    // Inclusive bounds.
    let t = table_with(FlowMatch {
        udp_src: Some(PortRange::new(4000, 4100)),
        ..m()
    });
    assert_eq!((t.classify(&a), t.classify(&b)), (HIT, HIT));
    // IPv4 fragments have no L4 fields.
    let mut frag = a.clone();
    frag[20] |= 0x20; // MF
    let t = table_with(FlowMatch {
        udp_dst: Some(PortRange::ANY),
        ..m()
    });
    assert_eq!((t.classify(&a), t.classify(&frag)), (HIT, MISS));
}

#[test]
fn match_ecpri_msg_type() {
    let l2 = |t: u8| {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0xae, 0xfe, 0x10, t, 0, 2, 0xab, 0xcd]);
        f
    };
    check(
        FlowMatch {
            ecpri_msg_type: Some(2),
            ..m()
        },
        &l2(2),
        &l2(0),
    );
    // A UDP frame is not eCPRI unless the table says which port carries it.
    let mut s = spec();
    s.dst_port = 4991;
    let mut f = frame(&s);
    let off = s.payload_offset();
    f[off..off + 4].copy_from_slice(&[0x10, 2, 0, 4]);
    emit_udp_frame(&mut f, &s).unwrap();
    let mt = FlowMatch {
        ecpri_msg_type: Some(2),
        ..m()
    };
    assert_eq!(table_with(mt).classify(&f), MISS);
    let mut t = FlowTable::<2>::with_options(
        DefaultAction::Drop,
        ParseOptions {
            ecpri_udp_port: Some(4991),
        },
    );
    t.push(FlowRule {
        id: FlowId(3),
        matcher: mt,
        action: FlowAction::Queue(QueueId(2)),
    })
    .unwrap();
    assert_eq!(
        t.classify(&f),
        Classified::Deliver {
            queue: QueueId(2),
            flow: FlowId(3)
        }
    );
    assert_eq!(
        t.classify_udp([0; 4], 1, [0; 4], 4991, &[0x10, 2, 0, 0]),
        Classified::Deliver {
            queue: QueueId(2),
            flow: FlowId(3)
        }
    );
    assert_eq!(
        t.classify_udp([0; 4], 1, [0; 4], 4991, &[0x30, 2, 0, 0]),
        Classified::Malformed
    );
    f[off] = 0x30; // bad revision on the eCPRI port: malformed
    assert_eq!(t.classify(&f), Classified::Malformed);
}

#[test]
fn match_words() {
    let s = spec();
    let a = frame(&s);
    // Payload bytes are 0, 1, 2, ...: the word at payload offset 4 is 0x04050607.
    let w = |base, offset, value, mask| FlowMatch {
        word: Some(WordMatch {
            base,
            offset,
            value,
            mask,
        }),
        ..m()
    };
    let mut b = a.clone();
    let off = s.payload_offset();
    b[off + 5] = 0xEE;
    check(w(WordBase::UdpPayload, 4, 0x0405_0607, u32::MAX), &a, &b);
    check(w(WordBase::UdpPayload, 4, 0x0405_0000, 0xFFFF_0000), &a, &b);
    // Mask 0: matches whatever is there, but only if the word is in range.
    let t = table_with(w(WordBase::UdpPayload, 28, 0, 0));
    assert_eq!(
        t.classify(&a),
        HIT,
        "last whole word of the 32-byte payload"
    );
    let t = table_with(w(WordBase::UdpPayload, 29, 0, 0));
    assert_eq!(t.classify(&a), MISS, "word past the payload end");
    // Frame-relative: EtherType + IPv4 version/IHL at offset 12.
    check(w(WordBase::Frame, 12, 0x0800_4500, u32::MAX), &a, &{
        let mut c = a.clone();
        c[15] = 0x04; // TOS byte
        c
    });
    let t = table_with(w(WordBase::Frame, (a.len() - 3) as u16, 0, 0));
    assert_eq!(t.classify(&a), MISS);
    // UdpPayload words never match non-UDP frames.
    let mut arp = a.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(
        table_with(w(WordBase::UdpPayload, 0, 0, 0)).classify(&arp),
        MISS
    );
}

#[test]
fn all_fields_must_match() {
    let a = frame(&spec());
    let mm = FlowMatch {
        ethertype: Some(0x0800),
        ipv4_src: Some(Ipv4Prefix::new([10, 0, 0, 0], 8)),
        udp_dst: Some(PortRange::single(5000)),
        ..m()
    };
    assert_eq!(table_with(mm).classify(&a), HIT);
    let wrong = FlowMatch {
        udp_src: Some(PortRange::single(1)),
        ..mm
    };
    assert_eq!(table_with(wrong).classify(&a), MISS);
}

#[test]
fn first_match_wins_and_defaults() {
    let a = frame(&spec());
    let mut t = FlowTable::<3>::new(DefaultAction::Drop);
    let port = FlowMatch {
        udp_dst: Some(PortRange::single(5000)),
        ..m()
    };
    t.push(FlowRule {
        id: FlowId(1),
        matcher: port,
        action: FlowAction::Queue(QueueId(1)),
    })
    .unwrap();
    t.push(FlowRule {
        id: FlowId(2),
        matcher: port,
        action: FlowAction::Queue(QueueId(2)),
    })
    .unwrap();
    assert_eq!(
        t.classify(&a),
        Classified::Deliver {
            queue: QueueId(1),
            flow: FlowId(1)
        }
    );
    let other = frame(&UdpFrameSpec {
        dst_port: 1,
        ..spec()
    });
    assert_eq!(t.classify(&other), Classified::NoFlow);
    t.set_default_action(DefaultAction::Queue(QueueId(4)));
    assert_eq!(
        t.classify(&other),
        Classified::Deliver {
            queue: QueueId(4),
            flow: FlowId::NONE
        }
    );
    // A drop rule in front.
    let mut d = FlowTable::<3>::new(DefaultAction::Queue(QueueId(0)));
    d.push(FlowRule {
        id: FlowId(9),
        matcher: port,
        action: FlowAction::Drop,
    })
    .unwrap();
    d.push(FlowRule {
        id: FlowId(1),
        matcher: port,
        action: FlowAction::Queue(QueueId(1)),
    })
    .unwrap();
    assert_eq!(d.classify(&a), Classified::FlowDrop);
    assert_eq!(d.classify(&a[..20]), Classified::Malformed);
    assert_eq!(d.rules().len(), 2);
    assert_eq!(d.rules()[0].id, FlowId(9));
}

#[test]
fn table_full_and_invalid_rules() {
    let mut t = FlowTable::<2>::new(DefaultAction::Drop);
    assert!(t.is_empty());
    let r = |id| FlowRule {
        id: FlowId(id),
        matcher: m(),
        action: FlowAction::Drop,
    };
    t.push(r(1)).unwrap();
    t.push(r(2)).unwrap();
    assert_eq!(t.push(r(3)), Err(r(3)));
    assert_eq!((t.len(), t.capacity()), (2, 2));
    let mut t = FlowTable::<2>::new(DefaultAction::Drop);
    assert_eq!(t.push(r(0)), Err(r(0)), "FlowId::NONE is reserved");
    let empty_rss = FlowRule {
        id: FlowId(5),
        matcher: m(),
        action: FlowAction::Rss(heapless::Vec::new()),
    };
    assert!(t.push(empty_rss).is_err());
    assert!(t.is_empty());
}

fn rss_table(n: u16) -> FlowTable<1> {
    let mut queues = heapless::Vec::new();
    for q in 0..n {
        queues.push(QueueId(10 + q)).unwrap();
    }
    let mut t = FlowTable::new(DefaultAction::Drop);
    t.push(FlowRule {
        id: FlowId(1),
        matcher: m(),
        action: FlowAction::Rss(queues),
    })
    .unwrap();
    t
}

fn queue_of(c: Classified) -> u16 {
    match c {
        Classified::Deliver { queue, flow } => {
            assert_eq!(flow, FlowId(1));
            queue.0
        }
        other => panic!("not delivered: {other:?}"),
    }
}

#[test]
fn rss_spreads_and_is_symmetric() {
    let t = rss_table(8);
    let mut hits = [0u32; 8];
    // Diverse flows (pseudo-random addresses and ports): see `symmetric_key_folds_words`
    // for why correlated tuples would not spread.
    let mut x = 0x1234_5678_9abc_def1u64;
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let r = x.to_be_bytes();
        let s = UdpFrameSpec {
            src_ip: [10, r[0], r[1], r[2]],
            src_port: u16::from_be_bytes([r[3], r[4]]),
            dst_port: u16::from_be_bytes([r[5], r[6]]),
            ..spec()
        };
        let fwd = t.classify(&frame(&s));
        let rev = t.classify(&frame(&UdpFrameSpec {
            src_ip: s.dst_ip,
            dst_ip: s.src_ip,
            src_port: s.dst_port,
            dst_port: s.src_port,
            ..s
        }));
        assert_eq!(fwd, rev, "both directions on one queue");
        let q = queue_of(fwd);
        let h = hash_ipv4_udp(
            &RSS_KEY_SYMMETRIC,
            s.src_ip,
            s.dst_ip,
            s.src_port,
            s.dst_port,
        );
        assert_eq!(u32::from(q - 10), h % 8);
        hits[usize::from(q - 10)] += 1;
    }
    for h in hits {
        assert!((150..=350).contains(&h), "uneven spread {hits:?}");
    }
    // The socket path hashes the same tuple the same way.
    let s = spec();
    assert_eq!(
        t.classify(&frame(&s)),
        t.classify_udp(s.src_ip, s.src_port, s.dst_ip, s.dst_port, &[0; 32])
    );
}

/// With the symmetric key (period 16 bits) every 16-bit input word meets the same key
/// windows, so the hash depends only on the XOR of the six 16-bit words of the tuple:
/// tuples with the same XOR collide (documented in docs/wire-format.md).
#[test]
fn symmetric_key_folds_words() {
    let h = |a, b, p, q| hash_ipv4_udp(&RSS_KEY_SYMMETRIC, a, b, p, q);
    assert_eq!(
        h([10, 0, 0, 1], [10, 0, 0, 2], 1000, 2000),
        h([0, 0, 0, 0], [0, 0, 0, 0], 0, 1000 ^ 2000 ^ 3)
    );
    assert_ne!(
        h([10, 0, 0, 1], [10, 0, 0, 2], 1000, 2000),
        h([10, 0, 0, 1], [10, 0, 0, 2], 1000, 2001)
    );
}

#[test]
fn rss_non_udp_goes_to_first_queue() {
    let t = rss_table(4);
    let mut arp = frame(&spec());
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(queue_of(t.classify(&arp)), 10);
    let mut frag = frame(&UdpFrameSpec {
        src_port: 1,
        ..spec()
    });
    frag[20] |= 0x20;
    assert_eq!(queue_of(t.classify(&frag)), 10);
}

#[test]
fn classify_udp_semantics() {
    let payload = [0u8, 1, 2, 3, 4, 5, 6, 7];
    let (src, dst) = ([10, 1, 2, 3], [192, 168, 7, 9]);
    let cu = |mm: FlowMatch| table_with(mm).classify_udp(src, 4000, dst, 5000, &payload);
    assert_eq!(
        cu(FlowMatch {
            ethertype: Some(0x0800),
            ..m()
        }),
        HIT
    );
    assert_eq!(
        cu(FlowMatch {
            ethertype: Some(0x86dd),
            ..m()
        }),
        MISS
    );
    assert_eq!(
        cu(FlowMatch {
            ipv4_src: Some(Ipv4Prefix::new(src, 32)),
            ..m()
        }),
        HIT
    );
    assert_eq!(
        cu(FlowMatch {
            ipv4_dst: Some(Ipv4Prefix::new([1, 0, 0, 0], 8)),
            ..m()
        }),
        MISS
    );
    assert_eq!(
        cu(FlowMatch {
            ipv4_total_len: Some(36),
            ..m()
        }),
        HIT
    );
    assert_eq!(
        cu(FlowMatch {
            udp_src: Some(PortRange::single(4000)),
            ..m()
        }),
        HIT
    );
    assert_eq!(
        cu(FlowMatch {
            udp_dst: Some(PortRange::single(4000)),
            ..m()
        }),
        MISS
    );
    let w = |base| FlowMatch {
        word: Some(WordMatch {
            base,
            offset: 4,
            value: 0x0405_0607,
            mask: !0,
        }),
        ..m()
    };
    assert_eq!(cu(w(WordBase::UdpPayload)), HIT);
    // L2 fields are unknown to a socket: such rules never match.
    assert_eq!(cu(w(WordBase::Frame)), MISS);
    assert_eq!(
        cu(FlowMatch {
            vlan_id: Some(0),
            ..m()
        }),
        MISS
    );
    assert!(FlowMatch {
        vlan_id: Some(0),
        ..m()
    }
    .needs_l2());
    assert!(!FlowMatch {
        ethertype: Some(0x0800),
        ..m()
    }
    .needs_l2());
    assert_eq!(
        cu(FlowMatch {
            ecpri_msg_type: Some(0),
            ..m()
        }),
        MISS
    );
}

#[test]
fn classify_info_agrees_with_classify() {
    let t = table_with(FlowMatch {
        udp_dst: Some(PortRange::single(5000)),
        ..m()
    });
    for s in [
        spec(),
        UdpFrameSpec {
            dst_port: 1,
            ..spec()
        },
    ] {
        let f = frame(&s);
        assert_eq!(
            t.classify_info(&parse_frame(&f).unwrap(), &f),
            t.classify(&f)
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn classify_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2000), port in any::<u16>()) {
        let mut t = FlowTable::<4>::with_options(DefaultAction::Drop, ParseOptions { ecpri_udp_port: Some(port) });
        t.push(FlowRule {
            id: FlowId(1),
            matcher: FlowMatch {
                word: Some(WordMatch { base: WordBase::UdpPayload, offset: 3, value: 1, mask: 1 }),
                ..FlowMatch::ANY
            },
            action: FlowAction::Queue(QueueId(1)),
        }).unwrap();
        t.push(FlowRule {
            id: FlowId(2),
            matcher: FlowMatch { word: Some(WordMatch { base: WordBase::Frame, offset: 1990, value: 0, mask: 0 }), ..FlowMatch::ANY },
            action: FlowAction::Drop,
        }).unwrap();
        let mut q = heapless::Vec::new();
        q.push(QueueId(3)).unwrap();
        q.push(QueueId(4)).unwrap();
        t.push(FlowRule { id: FlowId(3), matcher: FlowMatch::ANY, action: FlowAction::Rss(q) }).unwrap();
        let _ = t.classify(&bytes);
        let _ = t.classify_udp([1, 2, 3, 4], port, [5, 6, 7, 8], port, &bytes);
    }

    #[test]
    fn toeplitz_symmetric(a in any::<[u8; 4]>(), b in any::<[u8; 4]>(), p in any::<u16>(), q in any::<u16>()) {
        prop_assert_eq!(
            hash_ipv4_udp(&RSS_KEY_SYMMETRIC, a, b, p, q),
            hash_ipv4_udp(&RSS_KEY_SYMMETRIC, b, a, q, p)
        );
    }

    #[test]
    fn toeplitz_is_linear(x in any::<[u8; 12]>(), y in any::<[u8; 12]>(), key in any::<[u8; 40]>()) {
        // H(x ^ y) == H(x) ^ H(y): a cheap cross-check of the bit-window arithmetic.
        let mut z = [0u8; 12];
        for i in 0..12 {
            z[i] = x[i] ^ y[i];
        }
        prop_assert_eq!(toeplitz_hash(&key, &z), toeplitz_hash(&key, &x) ^ toeplitz_hash(&key, &y));
    }

    #[test]
    fn prefix_semantics(addr in any::<[u8; 4]>(), other in any::<[u8; 4]>(), len in 0u8..=40) {
        let p = Ipv4Prefix::new(addr, len);
        prop_assert!(p.contains(addr));
        let l = u32::from(len.min(32));
        let same_net = l == 0 || (u32::from_be_bytes(addr) ^ u32::from_be_bytes(other)) >> (32 - l) == 0;
        prop_assert_eq!(p.contains(other), same_net);
    }
}
