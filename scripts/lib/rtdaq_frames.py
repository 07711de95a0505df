#!/usr/bin/env python3
"""Writes a pcap of Ethernet/IPv4/UDP frames carrying rtdaq's sequence header and payload
pattern, from the wire format as docs/wire-format.md states it (sections 1 and 2): a second,
independent implementation, so a receiver that counts them all valid (corrupt 0, malformed 0)
also checks rtdaq's validator against the document.

Usage: rtdaq_frames.py OUT.pcap FRAME_BYTES COUNT [--streams N] [--no-udp-checksum]

FRAME_BYTES is the Ethernet frame without FCS (at least 74: 14 + 20 + 8 + the 32-byte
header). Frame k belongs to stream k % N and carries that stream's next sequence number
(from 0), FLAG_PATTERN, tx timestamp 0. IPv4 169.254.92.1 -> 169.254.92.2, UDP 4000 -> 5000,
IPv4 and UDP checksums filled in (a UDP checksum of 0 with --no-udp-checksum).
Used by scripts/bench-dpdk.sh (part "pcap").
"""
import argparse
import struct

MASK = (1 << 64) - 1
SALT = 0x5254_4451_5041_5454
GOLDEN = 0x9E37_79B9_7F4A_7C15


def pattern(stream_id: int, seq: int, n: int) -> bytes:
    rot = ((seq << 16) | (seq >> 48)) & MASK
    x = rot ^ stream_id ^ SALT
    out = bytearray()
    while len(out) < n:
        x = (x + GOLDEN) & MASK
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z ^= z >> 31
        out += z.to_bytes(8, "big")
    return bytes(out[:n])


def csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(stream_id: int, seq: int, frame_bytes: int, udp_checksum: bool,
          patterned: bool = True) -> bytes:
    """Frame `seq` of `stream_id`; without `patterned` its body is zeros and FLAG_PATTERN
    is clear (cheap to build where only the sequence header matters)."""
    body = frame_bytes - 14 - 20 - 8 - 32
    flags = 0x01 if patterned else 0
    header = struct.pack("!IBBHQQII", 0x52544451, 1, flags, stream_id, seq, 0, body, 0)
    payload = header + (pattern(stream_id, seq, body) if patterned else bytes(body))
    src, dst = bytes([169, 254, 92, 1]), bytes([169, 254, 92, 2])
    udp_len = 8 + len(payload)
    udp = struct.pack("!HHHH", 4000, 5000, udp_len, 0) + payload
    if udp_checksum:
        c = csum(src + dst + struct.pack("!BBH", 0, 17, udp_len) + udp) or 0xFFFF
        udp = udp[:6] + struct.pack("!H", c) + udp[8:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, seq & 0xFFFF, 0x4000, 64, 17, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    eth = bytes.fromhex("027274005c02" "027274005c01") + struct.pack("!H", 0x0800)
    return eth + ip + udp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("frame_bytes", type=int)
    ap.add_argument("count", type=int)
    ap.add_argument("--streams", type=int, default=1)
    ap.add_argument("--no-udp-checksum", action="store_true")
    a = ap.parse_args()
    if a.frame_bytes < 74:
        ap.error("FRAME_BYTES must be at least 74 (Ethernet + IPv4 + UDP + the 32-byte header)")
    with open(a.out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for k in range(a.count):
            fr = frame(k % a.streams, k // a.streams, a.frame_bytes, not a.no_udp_checksum)
            f.write(struct.pack("<IIII", k // 1_000_000, k % 1_000_000, len(fr), len(fr)))
            f.write(fr)


if __name__ == "__main__":
    main()
