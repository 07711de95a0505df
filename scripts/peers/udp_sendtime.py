#!/usr/bin/env python3
"""Send-time error on arrival, for rtdaq's generator launch-time test (scripts/vm/txtime-tests.sh).

  udp_sendtime.py HOST PORT (--period-ns T | --schedule-pcap FILE) [--count N]
                  [--timeout S] [--idle S]
      binds HOST:PORT and stamps every datagram with the kernel's receive time
      (SO_TIMESTAMPNS, ns). Each datagram carries rtdaq's sequence header (magic "RTDQ",
      sequence number at bytes 8..16, big-endian): packet `seq` was due at t0 + seq * T,
      T the generator's packet period, or (a replay) at t0 + the time of the record of
      FILE whose sequence header has that number, relative to the first such record. Its
      send-time error is its arrival minus that time, t0 chosen as the median of arrival -
      schedule (a constant delay through the stack does not count; only how far each
      packet strays from the schedule does). Stops after N
      datagrams (default 10000), after --idle seconds without one once one came (default
      3) or after --timeout seconds (default 120). Prints one JSON object:
        packets    datagrams received; rtdaq: of them with the sequence header
        first_seq, last_seq, missing   the sequence numbers seen and the gaps among them
        error_ns   |arrival - schedule| over every packet: {"n", "p50", "p90", "p99",
                   "p999", "max"} (nearest rank)
        signed_ns  the same, signed: {"p1", "p50", "p99"} (early packets are negative)
        gap_error_ns  |gap - scheduled gap| between packets consecutive in sequence
                   order: the spacing alone, whatever the schedule drifted by
        span       (last arrival - first arrival) / (their scheduled distance): 1.0 when
                   the sender kept its schedule, above 1 when it fell behind for good
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


def pcap_schedule(path):
    """{seq: record time ns} of a pcap's UDP/IPv4 frames that carry the sequence header."""
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack("<I", data[:4])[0]
    if magic not in (0xA1B2C3D4, 0xA1B23C4D):
        raise SystemExit(f"{path}: not a little-endian pcap file")
    unit = 1 if magic == 0xA1B23C4D else 1000
    out, at = {}, 24
    while at + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack("<IIII", data[at:at + 16])
        rec = data[at + 16:at + 16 + incl]
        at += 16 + incl
        l4 = 14 + (rec[14] & 0x0F) * 4 if len(rec) > 14 else 0
        pay = rec[l4 + 8:]
        if len(pay) >= 16 and pay[:4] == MAGIC:
            out[int.from_bytes(pay[8:16], "big")] = sec * 1_000_000_000 + frac * unit
    return out


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
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--period-ns", type=int)
    which.add_argument("--schedule-pcap")
    p.add_argument("--count", type=int, default=10000)
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--idle", type=float, default=3)
    a = p.parse_args()
    sched = pcap_schedule(a.schedule_pcap) if a.schedule_pcap else None
    got, packets = receive(a)
    out = {"packets": packets, "rtdaq": len(got)}
    if sched is not None:
        out["unscheduled"] = sum(1 for q, _ in got if q not in sched)
        got = [(q, ts) for q, ts in got if q in sched]
    if got:
        seqs = sorted(q for q, _ in got)
        out.update(first_seq=seqs[0], last_seq=seqs[-1],
                   missing=seqs[-1] - seqs[0] + 1 - len(set(seqs)))
        base = seqs[0]
        if sched is None:
            def due(q):
                return (q - base) * a.period_ns
        else:
            def due(q):
                return sched[q] - sched[base]
        offs = sorted(ts - due(q) for q, ts in got)
        t0 = rank(offs, 0.5)
        signed = sorted(ts - due(q) - t0 for q, ts in got)
        err = sorted(abs(e) for e in signed)
        out["error_ns"] = {"n": len(err), "p50": rank(err, 0.5), "p90": rank(err, 0.9),
                           "p99": rank(err, 0.99), "p999": rank(err, 0.999), "max": err[-1]}
        out["signed_ns"] = {"p1": rank(signed, 0.01), "p50": rank(signed, 0.5),
                            "p99": rank(signed, 0.99)}
        by_seq = sorted(got)
        gaps = sorted(abs((t1_ - t0_) - (due(q1) - due(q0)))
                      for (q0, t0_), (q1, t1_) in zip(by_seq, by_seq[1:]) if q1 != q0)
        if gaps:
            out["gap_error_ns"] = {"n": len(gaps), "p50": rank(gaps, 0.5), "p99": rank(gaps, 0.99),
                                   "max": gaps[-1]}
        if due(seqs[-1]) > 0:
            out["span"] = round((by_seq[-1][1] - by_seq[0][1]) / due(seqs[-1]), 4)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
