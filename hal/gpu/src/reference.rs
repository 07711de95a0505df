//! CPU reference of every kernel: reorder, gather, sample conversion, checksum. Pure Rust,
//! compiled everywhere, no CUDA. The GPU tests compare the kernels' output with these byte for
//! byte; the rules are in [`crate::layout`].
//!
//! The float conversions here use the `half` crate (`f16::from_f32`, `bf16::from_f32`: round
//! to nearest, ties to even) on the exact `f32` of the integer; the GPU kernels use their own
//! integer rounding code. Agreement of the two is what the GPU tests check.

use half::{bf16, f16};

use crate::error::{GpuError, Result};
use crate::layout::{BatchLayout, Conversion, FloatFormat, IntFormat, Mode};

/// One packet for the reference: its bytes (headers included), sequence number and (pieces
/// mode) offset in its slot.
#[derive(Debug, Clone, Copy)]
pub struct RefPacket<'a> {
    /// The whole packet (`len` = `data.len()`).
    pub data: &'a [u8],
    /// Sequence number.
    pub seq: u32,
    /// [`Mode::Pieces`]: input byte of the slot where the payload goes (ignored otherwise).
    pub offset: u32,
}

impl<'a> RefPacket<'a> {
    /// A packet of reorder or gather mode (offset 0).
    pub const fn new(data: &'a [u8], seq: u32) -> Self {
        Self {
            data,
            seq,
            offset: 0,
        }
    }
}

/// Per-batch accounting, as [`Completed`](crate::Completed) reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchStats {
    /// Validity mask: bit `slot % 32` of word `slot / 32`.
    pub valid: Vec<u32>,
    /// Slots holding a packet.
    pub placed: u32,
    /// Slots zero-filled (`packets_per_batch - placed`).
    pub missing: u32,
    /// Packets that lost their slot to an earlier packet with the same slot.
    pub duplicates: u32,
    /// Reorder: packets of another batch key or with a slot out of range.
    pub foreign: u32,
    /// Reorder: batch key of descriptor 0 (`None` for gather or an empty batch).
    pub batch_id: Option<u32>,
}

/// An integer sample as the float format's little-endian bits (see [`Conversion`]).
pub fn convert_sample(v: i32, to: FloatFormat) -> u32 {
    match to {
        FloatFormat::F32 => (v as f32).to_bits(),
        FloatFormat::F16 => u32::from(f16::from_f32(v as f32).to_bits()),
        FloatFormat::Bf16 => u32::from(bf16::from_f32(v as f32).to_bits()),
    }
}

/// Decodes the integer samples of `bytes` (whole samples only; a trailing odd byte of int16
/// is ignored).
pub fn decode_samples(bytes: &[u8], from: IntFormat, mut out: impl FnMut(i32)) {
    match from {
        IntFormat::I8 => bytes.iter().for_each(|&b| out(i32::from(b as i8))),
        IntFormat::I16Le => bytes
            .chunks_exact(2)
            .for_each(|c| out(i32::from(i16::from_le_bytes([c[0], c[1]])))),
        IntFormat::I16Be => bytes
            .chunks_exact(2)
            .for_each(|c| out(i32::from(i16::from_be_bytes([c[0], c[1]])))),
        IntFormat::I4 => bytes.iter().for_each(|&b| {
            // low nibble first; sign-extend 4 bits
            out(i32::from(((b << 4) as i8) >> 4));
            out(i32::from((b as i8) >> 4));
        }),
    }
}

/// Converts `payload` (the packet's `avail` bytes) into one output slot (`slot.len() ==
/// layout.out_slot_bytes()`); the rest of the slot is zeroed.
pub fn convert_into_slot(conversion: Conversion, payload: &[u8], slot: &mut [u8]) {
    slot.fill(0);
    match conversion {
        Conversion::Copy => slot[..payload.len()].copy_from_slice(payload),
        Conversion::Convert { from, to } => {
            let size = to.size() as usize;
            let mut at = 0;
            decode_samples(payload, from, |v| {
                let bits = convert_sample(v, to).to_le_bytes();
                slot[at..at + size].copy_from_slice(&bits[..size]);
                at += size;
            });
        }
    }
}

/// Runs one batch on the CPU: fills `out` (`layout.out_batch_bytes()` long) exactly as the GPU
/// does and returns the accounting.
///
/// # Errors
/// [`GpuError::InvalidLayout`] for an invalid layout, more packets than
/// `packets_per_batch`, or an `out` of the wrong length.
pub fn run_batch(
    layout: &BatchLayout,
    packets: &[RefPacket<'_>],
    out: &mut [u8],
) -> Result<BatchStats> {
    layout.validate()?;
    let ppb = layout.packets_per_batch as usize;
    if packets.len() > layout.descs_per_batch() as usize {
        return Err(GpuError::InvalidLayout(format!(
            "{} packets in a batch of at most {} descriptors",
            packets.len(),
            layout.descs_per_batch()
        )));
    }
    if out.len() != layout.out_batch_bytes() {
        return Err(GpuError::InvalidLayout(format!(
            "output buffer of {} bytes, the layout needs {}",
            out.len(),
            layout.out_batch_bytes()
        )));
    }
    if let Mode::Pieces { .. } = layout.mode {
        return Ok(run_pieces(layout, packets, out));
    }
    // owner[slot] = index of the packet that fills it
    let mut owner: Vec<Option<usize>> = vec![None; ppb];
    let mut foreign = 0u32;
    let mut batch_id = None;
    match layout.mode {
        Mode::Gather => {
            for (i, o) in owner.iter_mut().enumerate().take(packets.len()) {
                *o = Some(i);
            }
        }
        Mode::Pieces { .. } => unreachable!("handled by run_pieces"),
        Mode::Reorder(_) => {
            if let Some(first) = packets.first() {
                let (key0, _) = layout.key_slot(first.seq).expect("reorder mode");
                batch_id = Some(key0);
                for (i, p) in packets.iter().enumerate() {
                    let (key, slot) = layout.key_slot(p.seq).expect("reorder mode");
                    if key != key0 || slot as usize >= ppb {
                        foreign += 1;
                    } else if owner[slot as usize].is_none() {
                        owner[slot as usize] = Some(i);
                    }
                }
            }
        }
    }
    let slot_bytes = layout.out_slot_bytes();
    let mut valid = vec![0u32; layout.mask_words()];
    let mut placed = 0u32;
    for (slot, (o, dst)) in owner
        .iter()
        .zip(out.chunks_exact_mut(slot_bytes))
        .enumerate()
    {
        match o {
            None => dst.fill(0),
            Some(i) => {
                let p = &packets[*i];
                let avail = layout.avail(p.data.len() as u32) as usize;
                let start = layout.payload_offset as usize;
                let payload = if avail == 0 {
                    &[][..]
                } else {
                    &p.data[start..start + avail]
                };
                convert_into_slot(layout.conversion, payload, dst);
                valid[slot / 32] |= 1 << (slot % 32);
                placed += 1;
            }
        }
    }
    let duplicates = packets.len() as u32 - foreign - placed;
    Ok(BatchStats {
        valid,
        placed,
        missing: layout.packets_per_batch - placed,
        duplicates,
        foreign,
        batch_id,
    })
}

/// [`Mode::Pieces`]: output zeroed, then each piece that fits converted into its slot at its
/// offset (in descriptor order: of overlapping pieces the later wins here, either on the GPU).
fn run_pieces(layout: &BatchLayout, packets: &[RefPacket<'_>], out: &mut [u8]) -> BatchStats {
    out.fill(0);
    let ppb = layout.packets_per_batch;
    let slot_bytes = layout.out_slot_bytes();
    let ratio = layout.conversion.out_bytes_per_word() as usize;
    let mut valid = vec![0u32; layout.mask_words()];
    let mut foreign = 0u32;
    let batch_id = packets
        .first()
        .map(|p| layout.key_slot(p.seq).expect("pieces mode").0);
    for p in packets {
        let (key, slot) = layout.key_slot(p.seq).expect("pieces mode");
        let avail = layout.piece_avail(p.data.len() as u32);
        if Some(key) != batch_id || slot >= ppb || !layout.piece_fits(p.offset, avail) {
            foreign += 1;
            continue;
        }
        let start = layout.payload_offset as usize;
        let payload = &p.data[start..start + avail as usize];
        let at = slot as usize * slot_bytes + p.offset as usize / 4 * ratio;
        let len = (avail as usize).div_ceil(4) * ratio;
        convert_into_slot(layout.conversion, payload, &mut out[at..at + len]);
        valid[slot as usize / 32] |= 1 << (slot % 32);
    }
    let placed: u32 = valid.iter().map(|w| w.count_ones()).sum();
    BatchStats {
        valid,
        placed,
        missing: ppb - placed,
        duplicates: 0,
        foreign,
        batch_id,
    }
}

/// The batch checksum: `sum over i of w[i] * (2i + 1)` modulo 2^64, `w[i]` the `i`-th
/// little-endian `u32` of `bytes` (a trailing partial word is zero-padded). Position
/// dependent, so a misplaced packet changes it; the GPU reduces it in any order with the same
/// result.
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut acc = 0u64;
    for (i, c) in bytes.chunks(4).enumerate() {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        let w = u64::from(u32::from_le_bytes(w));
        acc = acc.wrapping_add(w.wrapping_mul(2 * i as u64 + 1));
    }
    acc
}

/// Length of the complex FP32 FFT workload.
pub const FFT_LEN: usize = 1024;
/// Dimension of the square FP32 GEMM workload.
pub const GEMM_DIM: usize = 1024;

/// The constant matrix `B` of the GEMM workload (column-major `GEMM_DIM x GEMM_DIM`):
/// `B[i] = ((i % 17) - 8) / 8`, exact in FP32 (and TF32), so `A * B` of int8-valued `A` is
/// exact and the GPU result can be compared for equality.
pub fn gemm_b() -> Vec<f32> {
    (0..GEMM_DIM * GEMM_DIM)
        .map(|i| ((i % 17) as f32 - 8.0) / 8.0)
        .collect()
}

/// Element `(row, col)` of `C = A * B` (column-major, `GEMM_DIM` square) in f64.
pub fn gemm_element(a: &[f32], b: &[f32], row: usize, col: usize) -> f64 {
    (0..GEMM_DIM)
        .map(|k| f64::from(a[k * GEMM_DIM + row]) * f64::from(b[col * GEMM_DIM + k]))
        .sum()
}

/// Forward DFT (`exp(-2 pi i jk / n)`, unnormalised, like cuFFT) of one complex sequence
/// `(re, im)` pairs, in f64. O(n^2): for spot checks.
pub fn dft(input: &[[f32; 2]]) -> Vec<[f64; 2]> {
    let n = input.len();
    (0..n)
        .map(|k| {
            let mut acc = [0f64; 2];
            for (j, x) in input.iter().enumerate() {
                let ang = -2.0 * std::f64::consts::PI * ((j * k) % n) as f64 / n as f64;
                let (s, c) = ang.sin_cos();
                let (re, im) = (f64::from(x[0]), f64::from(x[1]));
                acc[0] += re * c - im * s;
                acc[1] += re * s + im * c;
            }
            acc
        })
        .collect()
}

#[cfg(test)]
#[path = "reference_tests.rs"]
mod tests;
