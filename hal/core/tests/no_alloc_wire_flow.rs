//! Proves that wire parse/emit, flow classification, Toeplitz hashing and sequence
//! tracking allocate nothing (a counting global allocator watches this thread).

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

#[global_allocator]
static A: counting_alloc::Counting = counting_alloc::Counting;

use counting_alloc::allocations_in;
use rtdaq_core::flow::{
    hash_ipv4_udp, toeplitz_hash, Classified, DefaultAction, FlowAction, FlowMatch, FlowRule,
    FlowTable, Ipv4Prefix, PortRange, WordBase, WordMatch, RSS_KEY_SYMMETRIC,
};
use rtdaq_core::seq::{SeqEvent, SeqTracker};
use rtdaq_core::wire::ecpri::EcpriHeader;
use rtdaq_core::wire::seqhdr::{check_pattern, fill_pattern, SeqHeader};
use rtdaq_core::wire::{
    emit_udp_frame, ipv4, parse_frame, parse_frame_with, udp, EthernetHeader, Ipv4Header, L2Header,
    ParseOptions, UdpFrameSpec, UdpHeader, VlanTag,
};
use rtdaq_core::{FlowId, QueueId};

fn table() -> FlowTable<8> {
    let mut t = FlowTable::with_options(
        DefaultAction::Drop,
        ParseOptions {
            ecpri_udp_port: Some(4991),
        },
    );
    let mut queues = heapless::Vec::new();
    for q in 0..4 {
        queues.push(QueueId(q)).unwrap();
    }
    t.push(FlowRule {
        id: FlowId(1),
        matcher: FlowMatch {
            ipv4_src: Some(Ipv4Prefix::new([10, 0, 0, 0], 8)),
            udp_dst: Some(PortRange::new(5000, 5999)),
            word: Some(WordMatch {
                base: WordBase::UdpPayload,
                offset: 0,
                value: 0x5254_4451,
                mask: u32::MAX,
            }),
            ..FlowMatch::ANY
        },
        action: FlowAction::Rss(queues),
    })
    .unwrap();
    t.push(FlowRule {
        id: FlowId(2),
        matcher: FlowMatch {
            vlan_id: Some(7),
            ..FlowMatch::ANY
        },
        action: FlowAction::Drop,
    })
    .unwrap();
    t
}

#[test]
fn wire_flow_seq_allocate_nothing() {
    let t = table();
    let spec = UdpFrameSpec {
        vlan: Some(VlanTag::dot1ad(3)),
        vlan_inner: Some(VlanTag::dot1q(4)),
        src_ip: [10, 0, 0, 1],
        dst_ip: [10, 0, 0, 2],
        src_port: 4000,
        dst_port: 5000,
        payload_len: 256,
        ..UdpFrameSpec::default()
    };
    let mut buf = vec![0u8; 2048];
    let mut tracker: SeqTracker = SeqTracker::new();

    let (n, ()) = allocations_in(|| {
        let off = spec.payload_offset();
        let hdr = SeqHeader {
            flags: 1,
            stream_id: 9,
            seq: 42,
            tx_timestamp_ns: 1,
            payload_len: 256 - 32,
        };
        hdr.emit(&mut buf[off..]).unwrap();
        fill_pattern(9, 42, &mut buf[off + 32..off + 256]);
        let len = emit_udp_frame(&mut buf, &spec).unwrap();
        let frame = &buf[..len];

        let info = parse_frame(frame).unwrap();
        info.verify_checksums(frame).unwrap();
        let payload = info.udp_payload(frame).unwrap();
        let (h, p) = SeqHeader::parse_with_payload(payload).unwrap();
        assert!(check_pattern(h.stream_id, h.seq, p));
        let _ = parse_frame_with(frame, t.parse_options());

        assert!(matches!(
            t.classify(frame),
            Classified::Deliver {
                flow: FlowId(1),
                ..
            }
        ));
        assert!(matches!(
            t.classify_info(&info, frame),
            Classified::Deliver { .. }
        ));
        let _ = t.classify_udp([10, 0, 0, 1], 4000, [10, 0, 0, 2], 5000, payload);
        let _ = t.classify(&frame[..20]);

        let l2 = L2Header::parse(frame).unwrap();
        let mut scratch = [0u8; 64];
        l2.emit(&mut scratch).unwrap();
        let eth = EthernetHeader::parse(frame).unwrap();
        eth.emit(&mut scratch).unwrap();
        let l3 = &frame[l2.len()..];
        let ip = Ipv4Header::parse_checked(l3).unwrap();
        ip.emit(&mut scratch).unwrap();
        assert!(ipv4::verify_checksum(l3));
        let dgram = ip.payload(l3).unwrap();
        let u = UdpHeader::parse(dgram).unwrap();
        u.emit(&mut scratch).unwrap();
        assert!(udp::verify_checksum(dgram, ip.src, ip.dst));
        let e = EcpriHeader::parse(&[0x10, 0, 0, 0]).unwrap();
        e.emit(&mut scratch).unwrap();

        let _ = toeplitz_hash(&RSS_KEY_SYMMETRIC, &scratch[..36]);
        let _ = hash_ipv4_udp(&RSS_KEY_SYMMETRIC, [1, 2, 3, 4], [5, 6, 7, 8], 1, 2);

        assert_eq!(tracker.observe(1), SeqEvent::InOrder);
        assert_eq!(tracker.observe(5), SeqEvent::Gap { missing: 3 });
        assert_eq!(tracker.observe(3), SeqEvent::Reordered);
        assert_eq!(tracker.observe(3), SeqEvent::Duplicate);
        assert_eq!(tracker.observe(5000), SeqEvent::Gap { missing: 4994 });
        assert_eq!(tracker.observe(2), SeqEvent::TooOld);
        let _ = tracker.snapshot();
    });
    assert_eq!(n, 0, "allocations on the wire/flow/seq paths");
}
