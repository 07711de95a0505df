// rtdaq-gpu batch kernels: reorder by sequence number / arrival-order gather into one
// contiguous batch buffer, with sample conversion during the copy, and a batch checksum.
//
// Compiled once at start-up by NVRTC for the device's compute capability
// (hal/gpu/src/kernels.rs). No headers: fp16/bf16 rounding is done with integer code so the
// result is defined here, bit for bit, and mirrored by the CPU reference
// (hal/gpu/src/reference.rs, which uses the `half` crate instead: two independent
// implementations that the GPU tests compare).
//
// Semantics (the contract of BatchLayout, hal/gpu/src/layout.rs):
// - a packet descriptor is {addr (device-visible), seq, len, offset}; its payload starts at
//   addr + payload_offset; avail = min(len - payload_offset, max_payload) bytes (0 when
//   len <= payload_offset); int16 input rounds avail down to an even count;
// - the output slot of a packet holds (max_payload / 4) * out_bytes_per_word bytes; samples
//   beyond avail, and whole slots no packet claimed, are ZERO;
// - reorder: key/slot from seq (modulo or bit fields); packets whose key differs from the
//   key of descriptor 0, or whose slot >= packets_per_batch, are "foreign" and not placed;
//   of several packets with one slot the first in descriptor order wins (the others are
//   duplicates);
// - gather: descriptor i -> slot i;
// - pieces: key/slot from seq as in reorder, several packets per slot: a piece's avail
//   (len - payload_offset, int16 rounded down to even, NOT clamped) input bytes land at input
//   byte `offset` of the slot; a piece with another key, a slot >= packets_per_batch, an
//   offset not a multiple of 4 or offset + avail > max_payload is foreign; the output is
//   zeroed before (bytes no piece covers are zero); no duplicates (the caller passes each
//   piece once);
// - validity mask: bit (slot % 32) of word (slot / 32) set when the slot holds a packet.

typedef unsigned int u32;
typedef unsigned long long u64;

struct PacketDesc {  // 24 bytes (PacketDesc::BYTES)
    u64 addr;
    u32 seq;
    u32 len;
    u32 offset;
    u32 pad;
};

// Per-batch result block (layout mirrored by hal/gpu/src/pipeline.rs):
// [0] u64 checksum, [8] u32 batch key of descriptor 0, [12] u32 foreign count,
// [16..] u32 validity mask words.
struct BatchResult {
    u64 checksum;
    u32 batch_id;
    u32 foreign;
    u32 mask[1];
};

#define NO_OWNER 0xffffffffu

// mode: 0 = modulo, 1 = bit fields.
__device__ __forceinline__ void key_slot(u32 seq, u32 mode, u32 ppb, u32 slot_shift,
                                         u32 slot_bits, u32 batch_shift, u32 batch_bits,
                                         u32 *key, u32 *slot) {
    if (mode == 0) {
        *slot = seq % ppb;
        *key = seq / ppb;
    } else {
        *slot = (u32)(((u64)seq >> slot_shift) & ((1ull << slot_bits) - 1ull));
        *key = batch_bits == 0 ? 0u
                               : (u32)(((u64)seq >> batch_shift) & ((1ull << batch_bits) - 1ull));
    }
}

// Reorder phase 1: one thread per descriptor claims its slot (lowest descriptor index wins).
// `owner` must be NO_OWNER-filled and the result block zeroed before the launch.
extern "C" __global__ void rtdaq_claim(const PacketDesc *__restrict__ desc, u32 n, u32 ppb,
                                       u32 mode, u32 slot_shift, u32 slot_bits,
                                       u32 batch_shift, u32 batch_bits,
                                       u32 *__restrict__ owner, BatchResult *res) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 key0, slot0, key, slot;
    key_slot(desc[0].seq, mode, ppb, slot_shift, slot_bits, batch_shift, batch_bits, &key0,
             &slot0);
    key_slot(desc[i].seq, mode, ppb, slot_shift, slot_bits, batch_shift, batch_bits, &key,
             &slot);
    if (i == 0) res->batch_id = key0;
    if (key != key0 || slot >= ppb) {
        atomicAdd(&res->foreign, 1u);
        return;
    }
    atomicMin(&owner[slot], i);
}

// Loads input word w (bytes 4w..4w+3 of the payload at `src`, any alignment), bytes at or
// beyond `avail` read as zero; never touches an aligned word holding no valid byte.
__device__ __forceinline__ u32 load_word(const unsigned char *src, u32 w, u32 avail) {
    u32 start = w * 4u;
    if (start >= avail) return 0u;
    u64 a = (u64)src;
    u32 sh = (u32)(a & 3ull);
    const u32 *base = (const u32 *)(a - sh);
    u32 lo = base[w];
    u32 word;
    if (sh == 0) {
        word = lo;
    } else {
        // bytes of `hi` are payload bytes start + (4 - sh) .. start + 3
        u32 hi = (start + 4u - sh < avail) ? base[w + 1] : 0u;
        word = __funnelshift_r(lo, hi, sh * 8u);
    }
    u32 valid = avail - start;
    if (valid < 4u) word &= (1u << (valid * 8u)) - 1u;
    return word;
}

// int -> IEEE binary16 bits, round to nearest even (|v| <= 32768: no overflow, no subnormal).
__device__ __forceinline__ u32 int_to_f16(int v) {
    if (v == 0) return 0u;
    u32 sign = v < 0 ? 0x8000u : 0u;
    u32 a = (u32)(v < 0 ? -v : v);
    int e = 31 - __clz(a);  // floor(log2 a)
    u32 m;
    if (e <= 10) {
        m = a << (10 - e);  // in [1024, 2047], exact
    } else {
        u32 sh = (u32)(e - 10);
        m = a >> sh;
        u32 rem = a & ((1u << sh) - 1u);
        u32 half = 1u << (sh - 1u);
        if (rem > half || (rem == half && (m & 1u))) m += 1u;  // may carry to 2048
    }
    return sign | (((u32)(e + 14) << 10) + m);
}

// int -> bfloat16 bits, round to nearest even (|v| <= 32768).
__device__ __forceinline__ u32 int_to_bf16(int v) {
    if (v == 0) return 0u;
    u32 sign = v < 0 ? 0x8000u : 0u;
    u32 a = (u32)(v < 0 ? -v : v);
    int e = 31 - __clz(a);
    u32 m;
    if (e <= 7) {
        m = a << (7 - e);  // in [128, 255]
    } else {
        u32 sh = (u32)(e - 7);
        m = a >> sh;
        u32 rem = a & ((1u << sh) - 1u);
        u32 half = 1u << (sh - 1u);
        if (rem > half || (rem == half && (m & 1u))) m += 1u;
    }
    return sign | (((u32)(e + 126) << 7) + m);
}

// out format: 1 = f16, 2 = bf16, 3 = f32. Returns the bits (16 or 32 of them).
__device__ __forceinline__ u32 cvt(int v, u32 out_fmt) {
    if (out_fmt == 1u) return int_to_f16(v);
    if (out_fmt == 2u) return int_to_bf16(v);
    return (u32)__float_as_int((float)v);
}

__device__ __forceinline__ int sext4(u32 nib) { return (int)(nib ^ 8u) - 8; }

// Converts one input word into packed output words; returns the number of u32 written.
// in format: 0 = bytes (copy), 1 = int8, 2 = int16 LE, 3 = int16 BE, 4 = int4 (low nibble
// first).
__device__ __forceinline__ u32 convert_word(u32 word, u32 in_fmt, u32 out_fmt, u32 *o) {
    int v[8];
    u32 ns;
    if (in_fmt == 0u) {
        o[0] = word;
        return 1u;
    } else if (in_fmt == 1u) {
        for (u32 k = 0; k < 4u; ++k) v[k] = (int)(signed char)((word >> (8u * k)) & 0xffu);
        ns = 4u;
    } else if (in_fmt == 2u) {
        v[0] = (int)(short)(word & 0xffffu);
        v[1] = (int)(short)(word >> 16);
        ns = 2u;
    } else if (in_fmt == 3u) {
        u32 b0 = word & 0xffu, b1 = (word >> 8) & 0xffu, b2 = (word >> 16) & 0xffu,
            b3 = word >> 24;
        v[0] = (int)(short)((b0 << 8) | b1);
        v[1] = (int)(short)((b2 << 8) | b3);
        ns = 2u;
    } else {
        for (u32 k = 0; k < 4u; ++k) {
            u32 b = (word >> (8u * k)) & 0xffu;
            v[2 * k] = sext4(b & 0xfu);
            v[2 * k + 1] = sext4(b >> 4);
        }
        ns = 8u;
    }
    if (out_fmt == 3u) {
        for (u32 k = 0; k < ns; ++k) o[k] = cvt(v[k], 3u);
        return ns;
    }
    for (u32 k = 0; k < ns; k += 2u) o[k / 2u] = cvt(v[k], out_fmt) | (cvt(v[k + 1], out_fmt) << 16);
    return ns / 2u;
}

// Stores `cnt` packed words at `dst` (aligned to cnt * 4 bytes, cnt in {1, 2, 4, 8}).
__device__ __forceinline__ void store_words(u32 *dst, const u32 *o, u32 cnt) {
    if (cnt == 1u) {
        dst[0] = o[0];
    } else if (cnt == 2u) {
        *(uint2 *)dst = make_uint2(o[0], o[1]);
    } else {
        for (u32 k = 0; k < cnt; k += 4u)
            *(uint4 *)(dst + k) = make_uint4(o[k], o[k + 1], o[k + 2], o[k + 3]);
    }
}

// Phase 2 (reorder) or the whole gather: one block per output slot. Copies/converts the
// owning packet's payload into the slot, zero-fills the rest (or the whole slot when no packet
// owns it) and sets the slot's validity bit. `owner` is null for gather (descriptor i owns
// slot i when i < n). words_per_slot = max_payload / 4; out_words_per_word =
// out_bytes_per_input_word / 4.
extern "C" __global__ void rtdaq_place(const PacketDesc *__restrict__ desc, u32 n,
                                       const u32 *__restrict__ owner, u32 payload_offset,
                                       u32 words_per_slot, u32 in_fmt, u32 out_fmt,
                                       u32 out_words_per_word, u32 *__restrict__ out,
                                       BatchResult *res) {
    u32 slot = blockIdx.x;
    u32 who = owner ? owner[slot] : (slot < n ? slot : NO_OWNER);
    u32 *dst = out + (u64)slot * (u64)words_per_slot * (u64)out_words_per_word;
    u32 o[8];
    if (who == NO_OWNER) {
        for (u32 k = 0; k < 8u; ++k) o[k] = 0u;
        for (u32 w = threadIdx.x; w < words_per_slot; w += blockDim.x)
            store_words(dst + (u64)w * out_words_per_word, o, out_words_per_word);
        return;
    }
    if (threadIdx.x == 0) atomicOr(&res->mask[slot >> 5], 1u << (slot & 31u));
    PacketDesc d = desc[who];
    u32 avail = d.len > payload_offset ? d.len - payload_offset : 0u;
    u32 max_payload = words_per_slot * 4u;
    if (avail > max_payload) avail = max_payload;
    if (in_fmt == 2u || in_fmt == 3u) avail &= ~1u;
    const unsigned char *src = (const unsigned char *)(d.addr + payload_offset);
    bool fast = (((u64)src & 15ull) == 0ull) && avail == max_payload && (words_per_slot & 3u) == 0u;
    if (fast) {
        // 16-byte loads: four input words per thread.
        const uint4 *s4 = (const uint4 *)src;
        if (in_fmt == 0u) {
            uint4 *d4 = (uint4 *)dst;
            for (u32 q = threadIdx.x; q < words_per_slot / 4u; q += blockDim.x) d4[q] = s4[q];
            return;
        }
        for (u32 q = threadIdx.x; q < words_per_slot / 4u; q += blockDim.x) {
            uint4 x = s4[q];
            u32 ws[4] = {x.x, x.y, x.z, x.w};
            for (u32 k = 0; k < 4u; ++k) {
                u32 w = q * 4u + k;
                u32 cnt = convert_word(ws[k], in_fmt, out_fmt, o);
                store_words(dst + (u64)w * out_words_per_word, o, cnt);
            }
        }
    } else {
        for (u32 w = threadIdx.x; w < words_per_slot; w += blockDim.x) {
            u32 cnt = convert_word(load_word(src, w, avail), in_fmt, out_fmt, o);
            store_words(dst + (u64)w * out_words_per_word, o, cnt);
        }
    }
}

// Pieces mode: one block per descriptor. Converts the piece into its slot at its offset and
// sets the slot's validity bit; the output was zeroed on the stream before.
extern "C" __global__ void rtdaq_scatter(const PacketDesc *__restrict__ desc, u32 n, u32 ppb,
                                         u32 mode, u32 slot_shift, u32 slot_bits,
                                         u32 batch_shift, u32 batch_bits, u32 payload_offset,
                                         u32 words_per_slot, u32 in_fmt, u32 out_fmt,
                                         u32 out_words_per_word, u32 *__restrict__ out,
                                         BatchResult *res) {
    u32 i = blockIdx.x;
    if (i >= n) return;
    u32 key0, slot0, key, slot;
    key_slot(desc[0].seq, mode, ppb, slot_shift, slot_bits, batch_shift, batch_bits, &key0,
             &slot0);
    PacketDesc d = desc[i];
    key_slot(d.seq, mode, ppb, slot_shift, slot_bits, batch_shift, batch_bits, &key, &slot);
    if (i == 0 && threadIdx.x == 0) res->batch_id = key0;
    u32 avail = d.len > payload_offset ? d.len - payload_offset : 0u;
    if (in_fmt == 2u || in_fmt == 3u) avail &= ~1u;
    u32 max_payload = words_per_slot * 4u;
    bool fits = (d.offset & 3u) == 0u && d.offset <= max_payload && avail <= max_payload - d.offset;
    if (key != key0 || slot >= ppb || !fits) {
        if (threadIdx.x == 0) atomicAdd(&res->foreign, 1u);
        return;
    }
    if (threadIdx.x == 0) atomicOr(&res->mask[slot >> 5], 1u << (slot & 31u));
    const unsigned char *src = (const unsigned char *)(d.addr + payload_offset);
    u32 *dst = out + ((u64)slot * (u64)words_per_slot + (u64)(d.offset / 4u)) *
                         (u64)out_words_per_word;
    u32 nw = (avail + 3u) / 4u;
    u32 o[8];
    for (u32 w = threadIdx.x; w < nw; w += blockDim.x) {
        u32 cnt = convert_word(load_word(src, w, avail), in_fmt, out_fmt, o);
        store_words(dst + (u64)w * out_words_per_word, o, cnt);
    }
}

// checksum = sum over i of words[i] * (2i + 1), modulo 2^64 (order-independent reduction,
// position-dependent value: a misplaced packet changes it). res->checksum must be zeroed.
extern "C" __global__ void rtdaq_checksum(const u32 *__restrict__ words, u64 nwords,
                                          BatchResult *res) {
    __shared__ u64 part[256];
    u64 acc = 0ull;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < nwords;
         i += (u64)gridDim.x * blockDim.x)
        acc += (u64)words[i] * (2ull * i + 1ull);
    part[threadIdx.x] = acc;
    __syncthreads();
    for (u32 s = blockDim.x / 2u; s > 0u; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(&res->checksum, part[0]);
}
