//! A sequence counter anywhere in the payload (detectors, ADC boards, beamformers).
//!
//! A [`CounterField`] reads `bytes` (1..=8) at byte `offset`, big- or little-endian, then
//! takes `bits` bits from bit `shift` up: `(value >> shift) & (2^bits − 1)`. A
//! [`CounterFormat`] has one for the counter and optionally one for a stream id (beam,
//! channel block, thread): each stream id is tracked on its own.
//!
//! The counter advances by `step` per packet (a byte offset that counts payload bytes has
//! `step` = payload size) and wraps at `wrap` (default `2^bits`; must be a multiple of
//! `step`). [`Unwrap`] turns the raw values of one stream into a linear count: each value
//! moves it by the shortest signed distance modulo `wrap` (so reordering across the wrap is
//! fine, as long as a jump stays below half the wrap), and the sequence number is that
//! linear count / `step`. A distance that is not a multiple of `step` is
//! [`Reject::Step`].

use super::{Position, Reject};

/// One integer field of a payload; see the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CounterField {
    /// Byte offset of the first byte read.
    pub offset: u16,
    /// Bytes read (1..=8).
    pub bytes: u8,
    /// Most significant byte first.
    pub big_endian: bool,
    /// Bits dropped below the field.
    pub shift: u8,
    /// Width of the field in bits (1..=64, `shift + bits ≤ 8 × bytes`).
    pub bits: u8,
}

impl CounterField {
    /// A whole-bytes field: `bytes` bytes at `offset`, all bits.
    pub const fn bytes(offset: u16, bytes: u8, big_endian: bool) -> Self {
        CounterField {
            offset,
            bytes,
            big_endian,
            shift: 0,
            bits: bytes * 8,
        }
    }

    /// The field is well formed (the config validator checks the same rules).
    pub const fn is_valid(&self) -> bool {
        self.bytes >= 1
            && self.bytes <= 8
            && self.bits >= 1
            && self.bits <= 64
            && self.shift as u32 + self.bits as u32 <= self.bytes as u32 * 8
    }

    /// Payload bytes the field needs (`offset + bytes`).
    pub const fn end(&self) -> usize {
        self.offset as usize + self.bytes as usize
    }

    /// `2^bits − 1`.
    pub const fn mask(&self) -> u64 {
        if self.bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        }
    }

    /// The field's value in `payload`, or [`Reject::Short`].
    #[inline]
    pub fn read(&self, payload: &[u8]) -> Result<u64, Reject> {
        let b = payload
            .get(self.offset as usize..self.end())
            .ok_or(Reject::Short)?;
        let mut v = 0u64;
        if self.big_endian {
            for &x in b {
                v = (v << 8) | u64::from(x);
            }
        } else {
            for &x in b.iter().rev() {
                v = (v << 8) | u64::from(x);
            }
        }
        Ok((v >> self.shift) & self.mask())
    }

    /// Writes `value` into the field of `payload` (the generator; other bits of the bytes
    /// are kept). [`Reject::Short`] when the payload is too short.
    pub fn write(&self, payload: &mut [u8], value: u64) -> Result<(), Reject> {
        let n = usize::from(self.bytes);
        let b = payload
            .get_mut(self.offset as usize..self.end())
            .ok_or(Reject::Short)?;
        let mut old = 0u64;
        for k in 0..n {
            let byte = if self.big_endian { b[k] } else { b[n - 1 - k] };
            old = (old << 8) | u64::from(byte);
        }
        let m = self.mask() << self.shift;
        let v = (old & !m) | ((value << self.shift) & m);
        for k in 0..n {
            let byte = (v >> (8 * (n - 1 - k))) as u8;
            if self.big_endian {
                b[k] = byte;
            } else {
                b[n - 1 - k] = byte;
            }
        }
        Ok(())
    }
}

/// The `counter` format: a counter field, its step and wrap, an optional stream field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CounterFormat {
    /// The sequence counter.
    pub counter: CounterField,
    /// Counter increment per packet (≥ 1).
    pub step: u64,
    /// The counter's modulus: 0 = `2^bits`; otherwise a multiple of `step`, at most
    /// `2^bits`.
    pub wrap: u64,
    /// The stream id field (`None`: one stream, id 0). Ids wider than 32 bits are folded.
    pub stream: Option<CounterField>,
}

impl CounterFormat {
    /// Raw counter value and stream id of `payload`.
    #[inline]
    pub fn read(&self, payload: &[u8]) -> Result<(u32, u64), Reject> {
        let raw = self.counter.read(payload)?;
        let stream = match &self.stream {
            Some(f) => {
                let v = f.read(payload)?;
                (v ^ (v >> 32)) as u32
            }
            None => 0,
        };
        if self.wrap != 0 && raw >= self.wrap {
            return Err(Reject::Step);
        }
        Ok((stream, raw))
    }

    /// The counter's modulus as `u64`, `None` for `2^64` (a full-width counter without wrap).
    pub const fn modulus_u64(&self) -> Option<u64> {
        if self.wrap != 0 {
            Some(self.wrap)
        } else if self.counter.bits >= 64 {
            None
        } else {
            Some(1u64 << self.counter.bits)
        }
    }
}

/// One stream's counter unwrapping; see the [module docs](self).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unwrap {
    started: bool,
    last_raw: u64,
    /// Linear count of the last value (wrapping `u64`).
    linear: u64,
}

impl Unwrap {
    /// Nothing seen yet.
    pub const fn new() -> Self {
        Unwrap {
            started: false,
            last_raw: 0,
            linear: 0,
        }
    }

    /// The [`Position`] of the raw counter value `raw` of stream `stream` under `f`.
    #[inline]
    pub fn position(
        &mut self,
        f: &CounterFormat,
        stream: u32,
        raw: u64,
    ) -> Result<Position, Reject> {
        let step = f.step.max(1);
        if !self.started {
            // The first value is the base, on the step grid or not: later values are
            // measured from it, so `seq` advances by one per step either way.
            self.started = true;
            self.last_raw = raw;
            self.linear = raw;
            return Ok(Position {
                stream,
                seq: raw / step,
                invalid: false,
            });
        }
        // Shortest signed distance from the last value, modulo the wrap: no division (a
        // u128 remainder cost ~70 ns a packet).
        let signed: i64 = match f.modulus_u64() {
            None => raw.wrapping_sub(self.last_raw) as i64,
            Some(m) => {
                // Both values are below m (`read` rejects the others).
                let d = if raw >= self.last_raw {
                    raw - self.last_raw
                } else {
                    raw + (m - self.last_raw)
                };
                if d >= m / 2 {
                    (i128::from(d) - i128::from(m)) as i64
                } else {
                    d as i64
                }
            }
        };
        if step != 1 && signed.unsigned_abs() % step != 0 {
            return Err(Reject::Step);
        }
        self.linear = self.linear.wrapping_add(signed as u64);
        self.last_raw = raw;
        Ok(Position {
            stream,
            seq: self.linear / step,
            invalid: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_what_write_wrote() {
        for (f, v) in [
            (CounterField::bytes(4, 8, true), 0x0102_0304_0506_0708u64),
            (CounterField::bytes(0, 2, false), 0xbeef),
            (
                CounterField {
                    offset: 1,
                    bytes: 4,
                    big_endian: true,
                    shift: 4,
                    bits: 20,
                },
                0xabcde,
            ),
        ] {
            assert!(f.is_valid());
            let mut p = [0xffu8; 16];
            f.write(&mut p, v).unwrap();
            assert_eq!(f.read(&p), Ok(v), "{f:?}");
        }
        let f = CounterField::bytes(4, 4, true);
        let p = [0, 0, 0, 0, 0x12, 0x34, 0x56, 0x78];
        assert_eq!(f.read(&p), Ok(0x1234_5678));
        assert_eq!(f.read(&p[..7]), Err(Reject::Short));
        assert_eq!(CounterField::bytes(4, 4, false).read(&p), Ok(0x7856_3412));
        // The bits around a bit field are kept.
        let bf = CounterField {
            offset: 0,
            bytes: 1,
            big_endian: true,
            shift: 2,
            bits: 3,
        };
        let mut q = [0b1100_0011u8];
        bf.write(&mut q, 0b101).unwrap();
        assert_eq!(q[0], 0b1101_0111);
    }

    fn fmt(bits: u8, step: u64, wrap: u64) -> CounterFormat {
        CounterFormat {
            counter: CounterField {
                offset: 0,
                bytes: 8,
                big_endian: true,
                shift: 0,
                bits,
            },
            step,
            wrap,
            stream: None,
        }
    }

    #[test]
    fn a_wrapping_counter_unwraps_to_a_linear_sequence() {
        let f = fmt(8, 1, 0);
        let mut u = Unwrap::new();
        let mut got = [0u64; 6];
        for (k, raw) in [254u64, 255, 0, 1, 0, 3].into_iter().enumerate() {
            got[k] = u.position(&f, 0, raw).unwrap().seq;
        }
        // 254 255 | 0 1 (wrapped) | 0 again (a duplicate, 257) | 3 (after a gap).
        assert_eq!(got, [254, 255, 256, 257, 256, 259]);
    }

    #[test]
    fn step_and_a_custom_wrap_are_honoured() {
        // A byte counter of 8192-byte packets wrapping at 10 × 8192.
        let f = fmt(64, 8192, 10 * 8192);
        let mut u = Unwrap::new();
        assert_eq!(u.position(&f, 0, 8 * 8192).unwrap().seq, 8);
        assert_eq!(u.position(&f, 0, 9 * 8192).unwrap().seq, 9);
        assert_eq!(u.position(&f, 0, 0).unwrap().seq, 10);
        assert_eq!(u.position(&f, 0, 4096), Err(Reject::Step));
        assert_eq!(u.position(&f, 0, 2 * 8192).unwrap().seq, 12);
        assert_eq!(f.read(&(10u64 * 8192).to_be_bytes()), Err(Reject::Step));
    }

    #[test]
    fn a_full_width_counter_wraps_at_two_to_the_64() {
        let f = fmt(64, 1, 0);
        let mut u = Unwrap::new();
        assert_eq!(u.position(&f, 0, u64::MAX).unwrap().seq, u64::MAX);
        assert_eq!(u.position(&f, 0, 0).unwrap().seq, 0);
        assert_eq!(u.position(&f, 0, 1).unwrap().seq, 1);
    }

    #[test]
    fn the_stream_field_separates_streams() {
        let f = CounterFormat {
            stream: Some(CounterField::bytes(8, 2, true)),
            ..fmt(64, 1, 0)
        };
        let mut p = [0u8; 10];
        p[7] = 5;
        p[9] = 3;
        assert_eq!(f.read(&p), Ok((3, 5)));
        assert_eq!(f.read(&p[..9]), Err(Reject::Short));
    }
}
