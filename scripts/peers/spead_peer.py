#!/usr/bin/env python3
"""SPEAD peer for rtdaq's tests, built on spead2 (PyPI), MeerKAT's SPEAD library.

  spead_peer.py send HOST PORT --heaps N [--heap-bytes B] [--packet-size S]
                [--flavour 48|40] [--rate BYTES_PER_S] [--end]
      spead2's send.UdpStream sends N heaps of two items, as an instrument would without
      descriptors: 0x1600 "timestamp" (immediate, the heap number 0..N-1) and 0x1800 "data"
      (B bytes, byte j of heap n = (j + n) mod 256), in S-byte packets (default 1472),
      heap counters 1..N; --end sends spead2's end-of-stream heap after them. The packets
      are counted by encoding the same heaps into a spead2 BytesStream. Prints JSON
      {"heaps": N, "packets": p, "packets_per_heap": k, "end": bool}.
  spead_peer.py recv HOST PORT --heap-bytes B [--heaps N] [--timeout S]
      a spead2.recv stream on HOST:PORT assembles heaps until N arrived (or S seconds
      passed, default 20, or an end-of-stream), checks every heap's timestamp and data
      against rtdaq's generator (scripts: docs/formats.md) and prints JSON {"heaps": n,
      "good": n, "bad": n, "timestamps": {residue: [first, last, count]}, "stats": {...}}
      where residue = heap counter mod --heap-step.
"""
import argparse
import json
import threading

import numpy as np
import spead2
import spead2.recv
import spead2.send

TIMESTAMP = 0x1600
DATA = 0x1800


def flavour(bits):
    return spead2.Flavour(4, 64, bits, 0)


def items(fl, heap_bytes):
    ig = spead2.send.ItemGroup(flavour=fl)
    ig.add_item(TIMESTAMP, "timestamp", "heap number", shape=(), format=[("u", fl.heap_address_bits)])
    ig.add_item(DATA, "data", "pattern", shape=(heap_bytes,), dtype=np.uint8)
    return ig


def count_packets(buf):
    """SPEAD packets in a byte stream: header, item pointers, payload length item 0x04."""
    off, n = 0, 0
    while off + 8 <= len(buf):
        addr_bits = buf[off + 3] * 8
        nitems = int.from_bytes(buf[off + 6:off + 8], "big")
        length = None
        for i in range(nitems):
            p = int.from_bytes(buf[off + 8 + 8 * i:off + 16 + 8 * i], "big")
            if p >> 63 and (p >> addr_bits) & ((1 << (63 - addr_bits)) - 1) == 0x04:
                length = p & ((1 << addr_bits) - 1)
        if length is None:
            raise SystemExit(f"packet without a payload length item at byte {off}")
        off += 8 + 8 * nitems + length
        n += 1
    return n


def send(a):
    fl = flavour(a.flavour)
    pool = spead2.ThreadPool()
    cfg = spead2.send.StreamConfig(max_packet_size=a.packet_size, rate=a.rate)
    udp = spead2.send.UdpStream(pool, [(a.host, a.port)], cfg, buffer_size=4 << 20)
    counted = spead2.send.BytesStream(pool, spead2.send.StreamConfig(max_packet_size=a.packet_size))
    ig = items(fl, a.heap_bytes)
    base = np.arange(a.heap_bytes, dtype=np.uint64)
    first_heap_packets = None
    for n in range(a.heaps):
        ig["timestamp"].value = n
        ig["data"].value = ((base + n) % 256).astype(np.uint8)
        heap = ig.get_heap(descriptors="none", data="all")
        heap.repeat_pointers = False
        udp.send_heap(heap)
        counted.send_heap(heap)
        if first_heap_packets is None:
            first_heap_packets = count_packets(counted.getvalue())
    if a.end:
        end = ig.get_end()
        udp.send_heap(end)
        counted.send_heap(end)
    print(json.dumps({"heaps": a.heaps, "packets": count_packets(counted.getvalue()),
                      "packets_per_heap": first_heap_packets, "end": a.end}))


def recv(a):
    fl = flavour(48)
    stream = spead2.recv.Stream(spead2.ThreadPool(), spead2.recv.StreamConfig(max_heaps=8),
                                spead2.recv.RingStreamConfig(heaps=128))
    stream.add_udp_reader(a.port, bind_hostname=a.host, max_size=9200, buffer_size=16 << 20)
    timer = threading.Timer(a.timeout, stream.stop)
    timer.start()
    ig = spead2.ItemGroup()
    ig.add_item(TIMESTAMP, "timestamp", "heap number", shape=(), format=[("u", fl.heap_address_bits)])
    ig.add_item(DATA, "data", "pattern", shape=(a.heap_bytes,), dtype=np.uint8)
    base = np.arange(a.heap_bytes, dtype=np.uint64)
    heaps = good = bad = 0
    ts = {}
    for heap in stream:
        if heap.is_end_of_stream():
            break
        heaps += 1
        ig.update(heap)
        n = int(ig["timestamp"].value)
        data = ig["data"].value
        if data is not None and np.array_equal(data, ((base + n) % 256).astype(np.uint8)):
            good += 1
        else:
            bad += 1
        r = str(heap.cnt % a.heap_step)
        f, l, c = ts.get(r, [n, n, 0])
        ts[r] = [min(f, n), max(l, n), c + 1]
        if a.heaps and heaps >= a.heaps:
            break
    timer.cancel()
    stream.stop()
    st = stream.stats
    print(json.dumps({"heaps": heaps, "good": good, "bad": bad, "timestamps": ts,
                      "stats": {"heaps": st.heaps, "incomplete_heaps_evicted": st.incomplete_heaps_evicted,
                                "packets": st.packets}}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send")
    s.add_argument("host")
    s.add_argument("port", type=int)
    s.add_argument("--heaps", type=int, required=True)
    s.add_argument("--heap-bytes", type=int, default=5000)
    s.add_argument("--packet-size", type=int, default=1472)
    s.add_argument("--flavour", type=int, choices=[48, 40], default=48)
    s.add_argument("--rate", type=float, default=50e6, help="bytes per second (0: unpaced)")
    s.add_argument("--end", action="store_true")
    r = sub.add_parser("recv")
    r.add_argument("host")
    r.add_argument("port", type=int)
    r.add_argument("--heap-bytes", type=int, required=True)
    r.add_argument("--heap-step", type=int, default=1)
    r.add_argument("--heaps", type=int, default=0)
    r.add_argument("--timeout", type=float, default=20)
    a = p.parse_args()
    {"send": send, "recv": recv}[a.cmd](a)


if __name__ == "__main__":
    main()
