#!/usr/bin/env python3
"""Writes a pcap of rtdaq-sequenced UDP datagrams with uneven gaps, for the replay
launch-time test (scripts/vm/txtime-tests.sh).

  seq_pcap.py FILE --count N --period-ns T [--size BYTES] [--stream ID]
      FILE: nanosecond pcap (magic 0xa1b23c4d), link type Ethernet, N frames
      169.254.78.1:7151 -> 169.254.78.2:7151, each UDP payload BYTES long (default 1400)
      starting with rtdaq's 32-byte sequence header (magic "RTDQ", version 1, stream ID,
      sequence number k, tx time 0, payload length), the rest zero. Record k is stamped
      1 s + k * T + (k * 7 % 5) * T / 5 ns: T apart on average, each moved by 0 to 0.8 T,
      so a replay that keeps the recorded times is told from one that keeps a rate.
      scripts/peers/udp_sendtime.py --schedule-pcap FILE reads the same times back.
Python's standard library only (the test guest has nothing else).
"""
import argparse
import struct


def stamp(k, period_ns):
    """Record k's time, ns."""
    return 1_000_000_000 + k * period_ns + (k * 7 % 5) * period_ns // 5


def frame(k, size, stream):
    """Ethernet/IPv4/UDP frame of datagram k (IPv4 checksum set, UDP checksum 0)."""
    hdr = struct.pack(">IBBHQQII", 0x52544451, 1, 0, stream, k, 0, size - 32, 0)
    payload = hdr + bytes(size - 32)
    udp = struct.pack(">HHHH", 7151, 7151, 8 + size, 0) + payload
    ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), k & 0xFFFF, 0x4000,
                               64, 17, 0, bytes([169, 254, 78, 1]), bytes([169, 254, 78, 2])))
    s = sum(struct.unpack(">10H", ip))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    ip[10:12] = struct.pack(">H", ~s & 0xFFFF)
    eth = bytes.fromhex("020000004e02" "020000004e01") + b"\x08\x00"
    return eth + bytes(ip) + udp


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("file")
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--period-ns", type=int, required=True)
    p.add_argument("--size", type=int, default=1400)
    p.add_argument("--stream", type=int, default=4)
    a = p.parse_args()
    if a.size < 32:
        p.error("--size must be at least 32 (the sequence header)")
    with open(a.file, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        for k in range(a.count):
            t = stamp(k, a.period_ns)
            b = frame(k, a.size, a.stream)
            f.write(struct.pack("<IIII", t // 1_000_000_000, t % 1_000_000_000, len(b), len(b)))
            f.write(b)


if __name__ == "__main__":
    main()
