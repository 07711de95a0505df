//! Tests of the CPU reference (run everywhere, no CUDA).

use super::*;
use crate::layout::SlotMode;

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

/// The GPU's integer fp16 rounding (kernels/batch.cu `int_to_f16`), ported line by line.
fn gpu_int_to_f16(v: i32) -> u32 {
    if v == 0 {
        return 0;
    }
    let sign = if v < 0 { 0x8000 } else { 0 };
    let a = v.unsigned_abs();
    let e = 31 - a.leading_zeros() as i32;
    let m = if e <= 10 {
        a << (10 - e)
    } else {
        let sh = (e - 10) as u32;
        let mut m = a >> sh;
        let rem = a & ((1 << sh) - 1);
        let half = 1 << (sh - 1);
        if rem > half || (rem == half && m & 1 == 1) {
            m += 1;
        }
        m
    };
    sign | ((((e + 14) as u32) << 10) + m)
}

/// The GPU's integer bf16 rounding (`int_to_bf16`), ported line by line.
fn gpu_int_to_bf16(v: i32) -> u32 {
    if v == 0 {
        return 0;
    }
    let sign = if v < 0 { 0x8000 } else { 0 };
    let a = v.unsigned_abs();
    let e = 31 - a.leading_zeros() as i32;
    let m = if e <= 7 {
        a << (7 - e)
    } else {
        let sh = (e - 7) as u32;
        let mut m = a >> sh;
        let rem = a & ((1 << sh) - 1);
        let half = 1 << (sh - 1);
        if rem > half || (rem == half && m & 1 == 1) {
            m += 1;
        }
        m
    };
    sign | ((((e + 126) as u32) << 7) + m)
}

#[test]
fn kernel_rounding_matches_half_for_every_int16() {
    for v in i32::from(i16::MIN)..=i32::from(i16::MAX) {
        assert_eq!(
            gpu_int_to_f16(v),
            convert_sample(v, FloatFormat::F16),
            "f16 {v}"
        );
        assert_eq!(
            gpu_int_to_bf16(v),
            convert_sample(v, FloatFormat::Bf16),
            "bf16 {v}"
        );
        assert_eq!(
            f32::from_bits(convert_sample(v, FloatFormat::F32)),
            v as f32
        );
    }
}

#[test]
fn rounding_known_values() {
    let h = |v| convert_sample(v, FloatFormat::F16);
    let b = |v| convert_sample(v, FloatFormat::Bf16);
    assert_eq!(h(1), 0x3C00);
    assert_eq!(h(-1), 0xBC00);
    assert_eq!(h(2048), 0x6800);
    assert_eq!(h(2049), 0x6800); // tie -> even (2048)
    assert_eq!(h(2050), 0x6801);
    assert_eq!(h(2051), 0x6802); // tie -> even (2052)
    assert_eq!(h(2053), 0x6802); // tie between 2052 and 2054 -> 2052 (even mantissa)
    assert_eq!(h(32767), 0x7800); // 32768
    assert_eq!(h(-32768), 0xF800);
    assert_eq!(b(1), 0x3F80);
    assert_eq!(b(-1), 0xBF80);
    assert_eq!(b(256), 0x4380);
    assert_eq!(b(257), 0x4380); // tie -> 256
    assert_eq!(b(259), 0x4382); // tie -> 260
    assert_eq!(b(32767), 0x4700); // 32768
    assert_eq!(b(-32768), 0xC700);
}

fn slot_of(conversion: Conversion, payload: &[u8], max_payload: usize) -> Vec<u8> {
    let out_len = max_payload / 4 * conversion.out_bytes_per_word() as usize;
    let mut slot = vec![0xAA; out_len];
    convert_into_slot(conversion, payload, &mut slot);
    slot
}

#[test]
fn conversions_and_endianness() {
    let cv = |from, to| Conversion::Convert { from, to };
    // int8 -> f32
    let s = slot_of(
        cv(IntFormat::I8, FloatFormat::F32),
        &[0x01, 0xFF, 0x80, 0x7F],
        4,
    );
    let f: Vec<f32> = s
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(f, [1.0, -1.0, -128.0, 127.0]);
    // int16 LE vs BE -> f32
    let bytes = [0x34, 0x12, 0x00, 0x80];
    let s = slot_of(cv(IntFormat::I16Le, FloatFormat::F32), &bytes, 4);
    let f: Vec<f32> = s
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(f, [4660.0, -32768.0]);
    let s = slot_of(cv(IntFormat::I16Be, FloatFormat::F32), &bytes, 4);
    let f: Vec<f32> = s
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(f, [13330.0, 128.0]);
    // int4, low nibble first, sign extension: 0x8F = [-1 (0xF), -8 (0x8)], 0x71 = [1, 7]
    let s = slot_of(
        cv(IntFormat::I4, FloatFormat::F32),
        &[0x8F, 0x71, 0x00, 0x07],
        4,
    );
    let f: Vec<f32> = s
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(f, [-1.0, -8.0, 1.0, 7.0, 0.0, 0.0, 7.0, 0.0]);
    // int4 -> f16 bits
    let s = slot_of(cv(IntFormat::I4, FloatFormat::F16), &[0x8F, 0, 0, 0], 4);
    let h: Vec<u16> = s
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    assert_eq!(h[..2], [0xBC00, 0xC800]);
    // int8 -> bf16 bits
    let s = slot_of(cv(IntFormat::I8, FloatFormat::Bf16), &[2, 0xFE, 0, 0], 4);
    let h: Vec<u16> = s
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    assert_eq!(h, [0x4000, 0xC000, 0, 0]);
    // short payload: rest of the slot is zero
    let s = slot_of(Conversion::Copy, &[9, 8, 7], 8);
    assert_eq!(s, [9, 8, 7, 0, 0, 0, 0, 0]);
}

/// Expected batch, computed independently of `run_batch` from a slot -> packet map.
fn expect(layout: &BatchLayout, packets: &[RefPacket<'_>], owner: &[Option<usize>]) -> Vec<u8> {
    let sb = layout.out_slot_bytes();
    let mut out = vec![0u8; layout.out_batch_bytes()];
    for (slot, o) in owner.iter().enumerate() {
        if let Some(i) = o {
            let d = packets[*i].data;
            let off = layout.payload_offset as usize;
            let mut avail = d.len().saturating_sub(off).min(layout.max_payload as usize);
            if matches!(
                layout.conversion,
                Conversion::Convert {
                    from: IntFormat::I16Le | IntFormat::I16Be,
                    ..
                }
            ) {
                avail &= !1;
            }
            let payload = if avail == 0 {
                &[][..]
            } else {
                &d[off..off + avail]
            };
            convert_into_slot(
                layout.conversion,
                payload,
                &mut out[slot * sb..(slot + 1) * sb],
            );
        }
    }
    out
}

fn all_conversions() -> Vec<Conversion> {
    let mut v = vec![Conversion::Copy];
    for from in [
        IntFormat::I8,
        IntFormat::I16Le,
        IntFormat::I16Be,
        IntFormat::I4,
    ] {
        for to in [FloatFormat::F16, FloatFormat::Bf16, FloatFormat::F32] {
            v.push(Conversion::Convert { from, to });
        }
    }
    v
}

#[test]
fn reorder_random_permutations_with_losses_duplicates_and_foreign() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for (round, conversion) in all_conversions().into_iter().cycle().take(39).enumerate() {
        let ppb = [1usize, 7, 32, 33, 64, 100][round % 6];
        let layout = BatchLayout {
            packets_per_batch: ppb as u32,
            payload_offset: [0u32, 3, 32][round % 3],
            max_payload: 64,
            conversion,
            mode: Mode::Reorder(SlotMode::Modulo),
        };
        let batch = 1000 + round as u32;
        let base = batch * ppb as u32;
        // distinct packets: random lengths (some short, some longer than max_payload)
        let storage: Vec<Vec<u8>> = (0..ppb * 2)
            .map(|_| {
                let len = rng.below(110);
                (0..len).map(|_| rng.next() as u8).collect()
            })
            .collect();
        let mut pkts: Vec<RefPacket<'_>> = (0..ppb)
            .map(|s| RefPacket {
                data: &storage[s],
                seq: base + s as u32,
                offset: 0,
            })
            .collect();
        rng.shuffle(&mut pkts);
        // losses
        let lost = rng.below(ppb.div_ceil(3) + 1);
        pkts.truncate(ppb - lost.min(ppb - 1));
        // duplicates (other bytes, same seq) and foreign packets, inserted after position 0
        let extra = rng.below(ppb / 4 + 1).min(ppb - pkts.len());
        for k in 0..extra {
            let seq = if k % 2 == 0 {
                pkts[rng.below(pkts.len())].seq // duplicate
            } else {
                base + ppb as u32 + rng.below(ppb) as u32 // next batch: foreign
            };
            let at = 1 + rng.below(pkts.len());
            pkts.insert(
                at,
                RefPacket {
                    data: &storage[ppb + k],
                    seq,
                    offset: 0,
                },
            );
        }
        // expected: first packet of each slot, in descriptor order, if its key matches
        let mut owner = vec![None; ppb];
        let (mut foreign, mut dups) = (0, 0);
        for (i, p) in pkts.iter().enumerate() {
            if p.seq / ppb as u32 != batch {
                foreign += 1;
            } else if owner[(p.seq % ppb as u32) as usize].is_none() {
                owner[(p.seq % ppb as u32) as usize] = Some(i);
            } else {
                dups += 1;
            }
        }
        let mut out = vec![0xEEu8; layout.out_batch_bytes()];
        let st = run_batch(&layout, &pkts, &mut out).unwrap();
        assert_eq!(
            out,
            expect(&layout, &pkts, &owner),
            "round {round} {conversion:?}"
        );
        let placed = owner.iter().filter(|o| o.is_some()).count() as u32;
        assert_eq!(st.placed, placed);
        assert_eq!(st.missing, ppb as u32 - placed);
        assert_eq!(st.duplicates, dups);
        assert_eq!(st.foreign, foreign);
        assert_eq!(st.batch_id, Some(batch));
        for (slot, o) in owner.iter().enumerate() {
            assert_eq!(st.valid[slot / 32] >> (slot % 32) & 1 == 1, o.is_some());
        }
        // no bits beyond ppb
        if ppb % 32 != 0 {
            assert_eq!(st.valid[ppb / 32] >> (ppb % 32), 0);
        }
    }
}

#[test]
fn reorder_bit_fields() {
    // seq = [batch:8 @ 16][slot:4 @ 4][4 low bits ignored]
    let layout = BatchLayout {
        packets_per_batch: 16,
        payload_offset: 0,
        max_payload: 8,
        conversion: Conversion::Copy,
        mode: Mode::Reorder(SlotMode::BitFields {
            slot_shift: 4,
            slot_bits: 4,
            batch_shift: 16,
            batch_bits: 8,
        }),
    };
    let data: Vec<[u8; 8]> = (0..16u8).map(|i| [i; 8]).collect();
    let mut pkts: Vec<RefPacket<'_>> = (0..16u32)
        .rev()
        .filter(|s| s % 5 != 0)
        .map(|s| RefPacket {
            data: &data[s as usize],
            seq: 0x0042_0000 | s << 4 | 0xF,
            offset: 0,
        })
        .collect();
    pkts.push(RefPacket {
        data: &data[0],
        seq: 0x0043_0000,
        offset: 0,
    }); // other batch
    let mut out = vec![0u8; layout.out_batch_bytes()];
    let st = run_batch(&layout, &pkts, &mut out).unwrap();
    assert_eq!(st.batch_id, Some(0x42));
    assert_eq!(st.foreign, 1);
    assert_eq!(st.missing, 4); // slots 0, 5, 10, 15
    for s in 0..16usize {
        let want = if s % 5 == 0 { [0u8; 8] } else { [s as u8; 8] };
        assert_eq!(out[s * 8..s * 8 + 8], want, "slot {s}");
    }
    assert_eq!(st.valid, vec![0b0111_1011_1101_1110]);
}

#[test]
fn gather_arrival_order() {
    let layout = BatchLayout {
        packets_per_batch: 40,
        payload_offset: 2,
        max_payload: 12,
        conversion: Conversion::Convert {
            from: IntFormat::I16Be,
            to: FloatFormat::F16,
        },
        mode: Mode::Gather,
    };
    let data: Vec<Vec<u8>> = (0..35u8)
        .map(|i| (0..(i as usize % 17)).map(|k| i ^ k as u8).collect())
        .collect();
    let pkts: Vec<RefPacket<'_>> = data
        .iter()
        .map(|d| RefPacket {
            data: d,
            seq: 7,
            offset: 0,
        })
        .collect();
    let mut out = vec![0u8; layout.out_batch_bytes()];
    let st = run_batch(&layout, &pkts, &mut out).unwrap();
    let owner: Vec<Option<usize>> = (0..40).map(|i| (i < 35).then_some(i)).collect();
    assert_eq!(out, expect(&layout, &pkts, &owner));
    assert_eq!(
        (
            st.placed,
            st.missing,
            st.duplicates,
            st.foreign,
            st.batch_id
        ),
        (35, 5, 0, 0, None)
    );
    assert_eq!(st.valid, vec![u32::MAX, 0b111]);
    // too many packets
    let many: Vec<RefPacket<'_>> = (0..41).map(|_| pkts[0]).collect();
    assert!(run_batch(&layout, &many, &mut out).is_err());
}

#[test]
fn checksum_is_position_dependent() {
    assert_eq!(checksum(&[]), 0);
    assert_eq!(checksum(&[1, 0, 0, 0, 2, 0, 0, 0]), 1 + 2 * 3);
    assert_eq!(checksum(&[1, 0, 0, 0, 5]), 1 + 5 * 3);
    assert_ne!(
        checksum(&[1, 0, 0, 0, 2, 0, 0, 0]),
        checksum(&[2, 0, 0, 0, 1, 0, 0, 0])
    );
    let big = vec![0xFFu8; 64];
    let want = (0..16u64).fold(0u64, |a, i| a.wrapping_add(0xFFFF_FFFF * (2 * i + 1)));
    assert_eq!(checksum(&big), want);
}

#[test]
fn dft_of_impulse_and_gemm_b_exact() {
    let mut x = vec![[0f32; 2]; 8];
    x[0] = [1.0, 0.0];
    assert!(dft(&x)
        .iter()
        .all(|c| (c[0] - 1.0).abs() < 1e-12 && c[1].abs() < 1e-12));
    x[0] = [0.0, 0.0];
    x[1] = [1.0, 0.0];
    let y = dft(&x);
    assert!((y[2][0] - 0.0).abs() < 1e-12 && (y[2][1] + 1.0).abs() < 1e-12); // e^{-i pi/2}
    let b = gemm_b();
    assert_eq!(b[0], -1.0);
    assert_eq!(b[16], 1.0);
}

/// Pieces mode (SPEAD heaps): heaps cut into pieces as spead2 cuts them (a shorter first
/// piece), the pieces shuffled, give the slots that converting each whole heap gives; a
/// missing heap is zero, a missing piece leaves zeros, and misaligned, overflowing or
/// foreign pieces are counted and not placed.
#[test]
fn pieces_assemble_heaps_at_their_offsets() {
    const HEAP: usize = 40;
    for conversion in [
        Conversion::Copy,
        Conversion::Convert {
            from: IntFormat::I8,
            to: FloatFormat::F32,
        },
        Conversion::Convert {
            from: IntFormat::I16Le,
            to: FloatFormat::Bf16,
        },
    ] {
        let layout = BatchLayout {
            packets_per_batch: 8,
            payload_offset: 2,
            max_payload: HEAP as u32,
            conversion,
            mode: Mode::Pieces {
                slots: SlotMode::Modulo,
                max_packets: 64,
            },
        };
        layout.validate().unwrap();
        let heap =
            |n: u32| -> Vec<u8> { (0..HEAP).map(|j| (j as u32 * 7 + n * 13) as u8).collect() };
        // Heaps 24..31 (batch key 3); heap 29 never arrives, heap 30 lacks its middle piece.
        let cuts = [(0usize, 12usize), (12, 16), (28, 12)];
        let mut storage = Vec::new();
        for n in 24..32u32 {
            if n == 29 {
                continue;
            }
            for (k, &(off, len)) in cuts.iter().enumerate() {
                if n == 30 && k == 1 {
                    continue;
                }
                let mut p = vec![0xEE, 0xEE];
                p.extend_from_slice(&heap(n)[off..off + len]);
                storage.push((p, n, off as u32));
            }
        }
        // Not placed: an offset not a multiple of 4, a piece past the heap's end, another key.
        storage.push((vec![0xEE, 0xEE, 1, 2, 3, 4], 25, 2));
        storage.push((vec![0xEE, 0xEE, 1, 2, 3, 4, 5, 6, 7, 8], 25, 36));
        storage.push((vec![0xEE, 0xEE, 1, 2, 3, 4], 41, 0));
        let mut pkts: Vec<RefPacket<'_>> = storage
            .iter()
            .map(|(d, n, off)| RefPacket {
                data: d,
                seq: *n,
                offset: *off,
            })
            .collect();
        // descriptor 0 decides the batch: keep a heap of key 3 first
        Rng(7).shuffle(&mut pkts[1..]);
        let mut out = vec![0xAAu8; layout.out_batch_bytes()];
        let st = run_batch(&layout, &pkts, &mut out).unwrap();
        assert_eq!(
            (
                st.placed,
                st.missing,
                st.duplicates,
                st.foreign,
                st.batch_id
            ),
            (7, 1, 0, 3, Some(3)),
            "{conversion:?}"
        );
        assert_eq!(st.valid, vec![0xFF & !(1 << 5)]);
        let sb = layout.out_slot_bytes();
        let ratio = conversion.out_bytes_per_word() as usize / 4;
        for n in 24..32u32 {
            let mut whole = heap(n);
            if n == 30 {
                whole[12..28].fill(0);
            }
            let mut want = vec![0u8; sb];
            if n != 29 {
                convert_into_slot(conversion, &whole, &mut want);
                if n == 30 {
                    // the missing piece's samples are zeros, not converted zeros: equal for
                    // these conversions (0 -> +0.0)
                    assert!(want[12 * ratio..28 * ratio].iter().all(|&b| b == 0));
                }
            }
            let s = (n % 8) as usize;
            assert_eq!(
                &out[s * sb..(s + 1) * sb],
                &want[..],
                "heap {n} {conversion:?}"
            );
        }
        // too many descriptors
        let many: Vec<RefPacket<'_>> = (0..65).map(|_| pkts[0]).collect();
        assert!(run_batch(&layout, &many, &mut out).is_err());
    }
}
