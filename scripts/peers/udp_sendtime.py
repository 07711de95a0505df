#!/usr/bin/env python3
"""Send-time error on arrival, for rtdaq's generator launch-time test (scripts/vm/txtime-tests.sh).

  udp_sendtime.py HOST PORT --period-ns T [--count N] [--timeout S] [--idle S]
      binds HOST:PORT and stamps every datagram with the kernel's receive time
      (SO_TIMESTAMPNS, ns). Each datagram carries rtdaq's sequence header (magic "RTDQ",
      sequence number at bytes 8..16, big-endian): packet `seq` was due at t0 + seq * T,
      T the generator's packet period. Its send-time error is its arrival minus that time,
      t0 chosen as the median of arrival - seq * T (a constant delay through the stack does
      not count; only how far each packet strays from the schedule does). Stops after N
      datagrams (default 10000), after --idle seconds without one once one came (default
      3) or after --timeout seconds (default 120). Prints one JSON object:
        packets    datagrams received; rtdaq: of them with the sequence header
        first_seq, last_seq, missing   the sequence numbers seen and the gaps among them
        error_ns   |arrival - schedule| over every packet: {"n", "p50", "p90", "p99",
                   "p999", "max"} (nearest rank)
        signed_ns  the same, signed: {"p1", "p50", "p99"} (early packets are negative)
        gap_error_ns  |gap - k * T| between packets k sequence numbers apart, consecutive
                   in sequence order: the spacing alone, whatever the schedule drifted by
        span       (last arrival - first arrival) / ((last_seq - first_seq) * T): 1.0 when
                   the sender kept its rate, above 1 when it fell behind for good
Python's standard library only (the test guest has nothing else).
"""
import argparse
import json
import select
import socket
import struct
import time

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
MAGIC = b"RTDQ"


def rank(sorted_vals, q):
    """Nearest-rank percentile q (0..1) of a sorted list."""
    if not sorted_vals:
        return 0
    k = max(0, min(len(sorted_vals) - 1, int(-(-q * len(sorted_vals) // 1)) - 1))
    return sorted_vals[k]


def receive(a):
    """[(seq, arrival ns)] and the datagram count."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:  # root: past net.core.rmem_max (a slow receiver in an emulated guest needs room)
        s.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), 8 << 20)
    except OSError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind((a.host, a.port))
    t0 = time.monotonic()
    last = None
    got, packets = [], 0
    while time.monotonic() - t0 < a.timeout and len(got) < a.count:
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
        if ts is None or len(data) < 32 or data[:4] != MAGIC:
            continue
        got.append((int.from_bytes(data[8:16], "big"), ts))
    return got, packets


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--period-ns", type=int, required=True)
    p.add_argument("--count", type=int, default=10000)
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--idle", type=float, default=3)
    a = p.parse_args()
    got, packets = receive(a)
    out = {"packets": packets, "rtdaq": len(got)}
    if got:
        seqs = sorted(q for q, _ in got)
        out.update(first_seq=seqs[0], last_seq=seqs[-1],
                   missing=seqs[-1] - seqs[0] + 1 - len(set(seqs)))
        base = seqs[0]
        offs = sorted(ts - (q - base) * a.period_ns for q, ts in got)
        t0 = rank(offs, 0.5)
        signed = sorted(ts - (q - base) * a.period_ns - t0 for q, ts in got)
        err = sorted(abs(e) for e in signed)
        out["error_ns"] = {"n": len(err), "p50": rank(err, 0.5), "p90": rank(err, 0.9),
                           "p99": rank(err, 0.99), "p999": rank(err, 0.999), "max": err[-1]}
        out["signed_ns"] = {"p1": rank(signed, 0.01), "p50": rank(signed, 0.5),
                            "p99": rank(signed, 0.99)}
        by_seq = sorted(got)
        gaps = sorted(abs((t1_ - t0_) - (q1 - q0) * a.period_ns)
                      for (q0, t0_), (q1, t1_) in zip(by_seq, by_seq[1:]) if q1 != q0)
        if gaps:
            out["gap_error_ns"] = {"n": len(gaps), "p50": rank(gaps, 0.5), "p99": rank(gaps, 0.99),
                                   "max": gaps[-1]}
        if seqs[-1] > seqs[0]:
            out["span"] = round((by_seq[-1][1] - by_seq[0][1])
                                / ((seqs[-1] - seqs[0]) * a.period_ns), 4)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
