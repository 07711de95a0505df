#!/usr/bin/env python3
"""Writes a pcap of rtdaq-sequenced UDP datagrams with uneven gaps, for the replay
launch-time test (scripts/vm/txtime-tests.sh).

  seq_pcap.py FILE --count N --period-ns T [--size BYTES] [--stream ID]
      FILE: nanosecond pcap (magic 0xa1b23c4d), link type Ethernet, N frames of
      scripts/lib/rtdaq_frames.py (169.254.92.1:4000 -> 169.254.92.2:5000; the socket
      engine replays their UDP payloads to its own destination), each payload BYTES long
      (default 1400) starting with rtdaq's 32-byte sequence header (stream ID, sequence
      number k, tx time 0), the rest zero. Record k is stamped
      1 s + k * T + (k * 7 % 5) * T / 5 ns: T apart on average, each moved by 0 to 0.8 T,
      so a replay that keeps the recorded times is told from one that keeps a rate.
      scripts/peers/udp_sendtime.py --schedule-pcap FILE reads the same times back.
Python's standard library only (the test guest has nothing else).
"""
import argparse
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from rtdaq_frames import frame  # noqa: E402


def stamp(k, period_ns):
    """Record k's time, ns."""
    return 1_000_000_000 + k * period_ns + (k * 7 % 5) * period_ns // 5


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
            # Ethernet 14 + IPv4 20 + UDP 8 around the payload.
            b = frame(a.stream, k, a.size + 42, udp_checksum=False, patterned=False)
            f.write(struct.pack("<IIII", t // 1_000_000_000, t % 1_000_000_000, len(b), len(b)))
            f.write(b)


if __name__ == "__main__":
    main()
