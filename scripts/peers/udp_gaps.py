#!/usr/bin/env python3
"""Packet spacing on arrival, for rtdaq's egress pacing test (scripts/vm/txtime-tests.sh).

  udp_gaps.py HOST PORT [--timeout S] [--idle S]
      binds HOST:PORT, stamps every datagram with the kernel's receive time
      (SO_TIMESTAMPNS, ns) and reads it as a SPEAD packet (its heap counter, item 0x01);
      stops at the end-of-stream packet (stream control item 0x06 = 2), after --idle
      seconds without a datagram once one came (default 3), or after --timeout seconds
      (default 60). Prints one JSON object:
        packets     datagrams received
        dropped     datagrams the kernel dropped at this socket (its buffer was full:
                    SO_MEMINFO's drop count at the end, or the last SO_RXQ_OVFL where
                    the kernel lacks it), so a loss can be told from one before it
        spead       of them SPEAD packets
        end         the end-of-stream packet came
        gaps        gaps between consecutive packets of the same heap, ns:
                    {"n", "min", "p10", "median", "p90", "max"}
Python's standard library only (the test guest has no spead2): the spacing is what it
measures, spead2's tests check the heaps themselves.
"""
import argparse
import json
import select
import socket
import struct
import time

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
SO_RXQ_OVFL = getattr(socket, "SO_RXQ_OVFL", 40)
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
SO_MEMINFO = 55  # Linux >= 4.20: u32 array, index 8 = SK_MEMINFO_DROPS


def spead(pkt):
    """(heap counter, end of stream) of a SPEAD packet, or None."""
    if len(pkt) < 8 or pkt[0] != 0x53 or pkt[1] != 4:
        return None
    addr_bits = pkt[3] * 8
    n = int.from_bytes(pkt[6:8], "big")
    cnt, stop = None, False
    for i in range(n):
        p = int.from_bytes(pkt[8 + 8 * i:16 + 8 * i], "big")
        ident = (p >> addr_bits) & ((1 << (63 - addr_bits)) - 1)
        value = p & ((1 << addr_bits) - 1)
        if ident == 0x01:
            cnt = value
        elif ident == 0x06 and value == 2:
            stop = True
    return None if cnt is None else (cnt, stop)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--idle", type=float, default=3)
    a = p.parse_args()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:  # past net.core.rmem_max where allowed (root in the test guest)
        s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
    except OSError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.setsockopt(socket.SOL_SOCKET, SO_RXQ_OVFL, 1)
    s.bind((a.host, a.port))
    t0 = time.monotonic()
    last = None
    seen, packets, n_spead, end, dropped = [], 0, 0, False, 0
    while time.monotonic() - t0 < a.timeout:
        wait = a.idle if last is not None else a.timeout
        if not select.select([s], [], [], wait)[0]:
            if last is not None:
                break
            continue
        data, anc, _, _ = s.recvmsg(65536, 256)
        last = time.monotonic()
        packets += 1
        ts = None
        for level, kind, value in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", value[:16])
                ts = sec * 1_000_000_000 + nsec
            elif level == socket.SOL_SOCKET and kind == SO_RXQ_OVFL:
                dropped = struct.unpack("I", value[:4])[0]
        h = spead(data)
        if h is None or ts is None:
            continue
        n_spead += 1
        if h[1]:
            end = True
            break
        seen.append((h[0], ts))
    try:  # drops after the last datagram too
        dropped = max(dropped, struct.unpack("9I", s.getsockopt(socket.SOL_SOCKET, SO_MEMINFO, 36))[8])
    except OSError:
        pass
    gaps = sorted(b[1] - x[1] for x, b in zip(seen, seen[1:]) if x[0] == b[0])
    pick = lambda q: gaps[int((len(gaps) - 1) * q)] if gaps else None  # noqa: E731
    print(json.dumps({"packets": packets, "dropped": dropped, "spead": n_spead, "end": end,
                      "gaps": {"n": len(gaps), "min": pick(0), "p10": pick(0.1),
                               "median": pick(0.5), "p90": pick(0.9), "max": pick(1)}}))


if __name__ == "__main__":
    main()
