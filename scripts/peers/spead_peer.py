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
      With --drop-every K the heaps are encoded by spead2 (a BytesStream per heap) and their
      packets sent by a plain UDP socket, every K-th packet left out (the 1st of them is
      packet K-1, counted over the whole run); adds "dropped" (packets left out) and
      "hit" (the heap numbers, 0..N-1, that lost a packet).
  spead_peer.py read-units FILE --heap-bytes B
      the receiving end of a UCX egress sink with unit = "heap" (ucx_recv --data FILE: each
      message one heap's SPEAD packets, whole, back to back): spead2 reads FILE
      (recv.Stream.add_buffer_reader) and checks every heap as recv does; prints JSON
      {"heaps": n, "good": n, "bad": n, "numbers": [heap numbers in file order],
      "incomplete": spead2's incomplete heaps, "packets": spead2's packet count}.
  spead_peer.py bench-send HOST PORT --heaps N [--heap-bytes B] [--packet-size S]
                [--flavour 48|40] [--rate BYTES_PER_S] [--batch K]
      spead2's sender at its best, for scripts/bench-egress.sh: the send mode's heap (B bytes
      of data) built once and sent N times in groups of K through send_heaps; prints JSON
      {"heaps", "packets", "packets_per_heap", "cpu_s" (getrusage of the process, every
      thread, over the sending), "wall_s"}.
  spead_peer.py recv HOST PORT --heap-bytes B [--heaps N] [--timeout S]
      a spead2.recv stream on HOST:PORT assembles heaps until N arrived (or S seconds
      passed, default 20, or an end-of-stream), checks every heap's timestamp and data
      against rtdaq's generator (scripts: docs/formats.md) and prints JSON {"heaps": n,
      "good": n, "bad": n, "timestamps": {residue: [first, last, count]}, "numbers":
      [timestamps in arrival order], "end": bool (the end-of-stream heap came), "stats":
      {...}} where residue = heap counter mod --heap-step.
  spead_peer.py egress-recv HOST PORT [--group MCAST_GROUP] [--flavour 48|40] [--timeout S]
                [--max-heaps N] [--payload-size P] [--data-id ID] [--max-packet B]
                [--ring-heaps H] [--data FILE]
      the receiving end of rtdaq's SPEAD egress stage (issue #31), as a MeerKAT consumer
      receives: a spead2.recv stream assembles heaps and a spead2.ItemGroup applies the
      descriptors they carry. Unicast: binds HOST:PORT. With --group: binds the group
      address on PORT and joins the group on the interface whose address is HOST (use
      127.0.0.1 for loopback multicast; the sender must send out of that interface).
      Ends at the end-of-stream heap (stream control 2), after N data heaps (--max-heaps,
      0 = no limit) or after S seconds (default 20). Only complete heaps are delivered
      (spead2's default); the others count in the stats. Heaps of another flavour than
      --flavour are counted, not used. Prints one JSON object:
        heaps            data heaps (heaps with an item other than SPEAD's own items
                         0x00-0x06; descriptor-only and end-of-stream heaps excluded)
        descriptor_heaps heaps that carried descriptors
        end              the end-of-stream heap arrived (spead2 ends the stream at it)
        timed_out        stopped by --timeout
        wrong_flavour    heaps of another flavour
        incomplete       incomplete heaps: spead2's "incomplete_heaps_evicted" +
                         "incomplete_heaps_flushed" (both also under "stats"); spead2
                         4.5 counts nowhere a heap whose first packet (the one with the
                         item pointers) was lost: compare "heaps" and cnt "missing" with
                         what was sent
        names            {"0x1800": "data", ...}: id -> name, from the descriptors
        undescribed      ids of items that arrived without a descriptor
        data_bytes       bytes of the data item (--data-id, default 0x1800) in all heaps
        data_heaps_without_data  data heaps without the data item
        cnt              {"first", "last", "consecutive", "missing"}: the data heaps'
                         counters (consecutive: each is the previous + 1; missing:
                         counters between first and last that did not arrive)
        stats            every spead2 stream statistic, by name
      With --data FILE the data items of the data heaps are written to FILE back to back,
      in arrival order.
      With --payload-size P each data item is checked as a concatenation of P-byte rtdaq
      payloads: a 32-byte sequence header (big-endian magic 0x52544451 "RTDQ", version 1,
      flags, stream id u16, seq u64, tx timestamp u64, payload length u32 = P - 32,
      reserved u32) and, when flag 0x01 is set, the SplitMix64 pattern of
      hal/core/src/wire/seqhdr.rs; a data item that is not a multiple of P counts its tail
      as one bad payload. Adds
        payloads         {"checked", "good", "bad", "unpatterned" (flag 0x01 clear: header
                         checked only), "partial" (data items not a multiple of P)}
        streams          {"<stream id>": {"first", "last", "count", "duplicates", "gaps"
                         (missing sequence numbers between first and last), "missing"
                         (the first 20 missing ones)}}
"""
import argparse
import json
import struct
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


def split_packets(buf):
    """The SPEAD packets of a byte stream, each as bytes."""
    out, off = [], 0
    while off + 8 <= len(buf):
        addr_bits = buf[off + 3] * 8
        nitems = int.from_bytes(buf[off + 6:off + 8], "big")
        length = 0
        for i in range(nitems):
            p = int.from_bytes(buf[off + 8 + 8 * i:off + 16 + 8 * i], "big")
            if p >> 63 and (p >> addr_bits) & ((1 << (63 - addr_bits)) - 1) == 0x04:
                length = p & ((1 << addr_bits) - 1)
        end = off + 8 + 8 * nitems + length
        out.append(bytes(buf[off:end]))
        off = end
    return out


def send_dropping(a):
    """send with every --drop-every-th packet left out: spead2 encodes, a socket sends."""
    import socket
    import time
    fl = flavour(a.flavour)
    pool = spead2.ThreadPool()
    ig = items(fl, a.heap_bytes)
    base = np.arange(a.heap_bytes, dtype=np.uint64)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    k, dropped, hit, per_heap, t0, sent_bytes = 0, 0, [], None, time.monotonic(), 0
    for n in range(a.heaps):
        ig["timestamp"].value = n
        ig["data"].value = ((base + n) % 256).astype(np.uint8)
        heap = ig.get_heap(descriptors="none", data="all")
        heap.repeat_pointers = False
        bs = spead2.send.BytesStream(pool, spead2.send.StreamConfig(max_packet_size=a.packet_size))
        bs.send_heap(heap, cnt=n + 1)  # heap counters 1..N, as send's UdpStream numbers them
        pkts = split_packets(bs.getvalue())
        per_heap = per_heap or len(pkts)
        for pkt in pkts:
            k += 1
            if k % a.drop_every == 0:
                dropped += 1
                if not hit or hit[-1] != n:
                    hit.append(n)
                continue
            sock.sendto(pkt, (a.host, a.port))
            sent_bytes += len(pkt)
            if a.rate > 0:
                ahead = sent_bytes / a.rate - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
    print(json.dumps({"heaps": a.heaps, "packets": k, "packets_per_heap": per_heap,
                      "end": False, "dropped": dropped, "hit": hit}))


def read_units(a):
    """spead2 reads the heaps of a file of whole heaps' packets and checks each."""
    data = open(a.file, "rb").read()
    stream = spead2.recv.Stream(spead2.ThreadPool(), spead2.recv.StreamConfig(max_heaps=4),
                                spead2.recv.RingStreamConfig(heaps=64))
    stream.add_buffer_reader(data)
    fl = flavour(48)
    ig = spead2.ItemGroup()
    ig.add_item(TIMESTAMP, "timestamp", "heap number", shape=(), format=[("u", fl.heap_address_bits)])
    ig.add_item(DATA, "data", "pattern", shape=(a.heap_bytes,), dtype=np.uint8)
    base = np.arange(a.heap_bytes, dtype=np.uint64)
    good = bad = 0
    numbers = []
    for heap in stream:
        if heap.is_end_of_stream():
            break
        ig.update(heap)
        n = int(ig["timestamp"].value)
        numbers.append(n)
        data = ig["data"].value
        if data is not None and np.array_equal(data, ((base + n) % 256).astype(np.uint8)):
            good += 1
        else:
            bad += 1
    st = stream.stats
    print(json.dumps({"heaps": len(numbers), "good": good, "bad": bad, "numbers": numbers,
                      "incomplete": st.incomplete_heaps_evicted + st.incomplete_heaps_flushed,
                      "packets": st.packets}))


def send(a):
    if a.drop_every > 0:
        return send_dropping(a)
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


def bench_send(a):
    """spead2's sender at its best for a benchmark: one heap built once, sent N times in
    groups of --batch through send_heaps (one call per group, spead2's C++ packetizer and
    send loop on its own thread pool); the process's CPU time (all threads, getrusage) over
    the sending."""
    import resource
    import time
    fl = flavour(a.flavour)
    pool = spead2.ThreadPool(1)
    cfg = spead2.send.StreamConfig(max_packet_size=a.packet_size, rate=a.rate,
                                   max_heaps=a.batch)
    udp = spead2.send.UdpStream(pool, [(a.host, a.port)], cfg, buffer_size=4 << 20)
    ig = items(fl, a.heap_bytes)
    ig["timestamp"].value = 1
    ig["data"].value = np.zeros(a.heap_bytes, np.uint8)
    heap = ig.get_heap(descriptors="none", data="all")
    heap.repeat_pointers = False
    counted = spead2.send.BytesStream(pool, spead2.send.StreamConfig(max_packet_size=a.packet_size))
    counted.send_heap(heap)
    per_heap = count_packets(counted.getvalue())
    refs = [spead2.send.HeapReference(heap)] * a.batch
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    sent = 0
    while sent < a.heaps:
        k = min(a.batch, a.heaps - sent)
        udp.send_heaps(refs[:k], spead2.send.GroupMode.SERIAL)
        sent += k
    r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    print(json.dumps({"heaps": sent, "packets": sent * per_heap, "packets_per_heap": per_heap,
                      "cpu_s": cpu, "wall_s": t1 - t0}))


def recv(a):
    fl = flavour(48)
    stream = spead2.recv.Stream(spead2.ThreadPool(), spead2.recv.StreamConfig(max_heaps=8),
                                spead2.recv.RingStreamConfig(heaps=128))
    stream.add_udp_reader(a.port, bind_hostname=a.host, max_size=9200, buffer_size=16 << 20)
    timed_out = threading.Event()

    def expire():
        timed_out.set()
        stream.stop()

    timer = threading.Timer(a.timeout, expire)
    timer.start()
    ig = spead2.ItemGroup()
    ig.add_item(TIMESTAMP, "timestamp", "heap number", shape=(), format=[("u", fl.heap_address_bits)])
    ig.add_item(DATA, "data", "pattern", shape=(a.heap_bytes,), dtype=np.uint8)
    base = np.arange(a.heap_bytes, dtype=np.uint64)
    heaps = good = bad = 0
    ts, numbers, end = {}, [], False
    for heap in stream:
        if heap.is_end_of_stream():
            end = True
            break
        heaps += 1
        ig.update(heap)
        n = int(ig["timestamp"].value)
        numbers.append(n)
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
    # spead2 ends a UDP stream at the end-of-stream packet without a heap for it (see
    # egress-recv): a stream that stopped before the timeout and the heap limit ended so.
    end = end or not (timed_out.is_set() or (a.heaps and heaps >= a.heaps))
    stream.stop()
    st = stream.stats
    print(json.dumps({"heaps": heaps, "good": good, "bad": bad, "timestamps": ts,
                      "numbers": numbers, "end": end,
                      "stats": {"heaps": st.heaps, "incomplete_heaps_evicted": st.incomplete_heaps_evicted,
                                "incomplete_heaps_flushed": st.incomplete_heaps_flushed,
                                "packets": st.packets}}))


# --- egress-recv: the receiving end of rtdaq's SPEAD egress ------------------------------

SEQ_MAGIC = 0x52544451
SEQ_HEADER = struct.Struct(">IBBHQQII")
FLAG_PATTERN = 0x01
PATTERN_SALT = 0x5254_4451_5041_5454
GOLDEN = 0x9E37_79B9_7F4A_7C15
MASK64 = (1 << 64) - 1
STREAM_CTRL_ID = 0x06


def pattern(stream_id, seq, n):
    """The n bytes of hal/core/src/wire/seqhdr.rs fill_pattern(stream_id, seq): SplitMix64
    outputs k = 1, 2, ... are mix(seed + k * GOLDEN), as big-endian words, the last one cut."""
    seed = (((seq << 16) | (seq >> 48)) & MASK64) ^ stream_id ^ PATTERN_SALT
    k = np.arange(1, (n + 7) // 8 + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + k * np.uint64(GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58_476D_1CE4_E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D0_49BB_1331_11EB)
        z = z ^ (z >> np.uint64(31))
    return z.astype(">u8").tobytes()[:n]


class PayloadCheck:
    """Checks data items as concatenations of P-byte rtdaq payloads."""

    def __init__(self, size):
        if size <= SEQ_HEADER.size:
            raise SystemExit(f"--payload-size must exceed the {SEQ_HEADER.size}-byte header")
        self.size = size
        self.checked = self.good = self.bad = self.unpatterned = self.partial = 0
        self.seqs = {}

    def item(self, data):
        p = self.size
        whole = len(data) - len(data) % p
        for off in range(0, whole, p):
            self.payload(data[off:off + p])
        if whole != len(data):
            self.partial += 1
            self.checked += 1
            self.bad += 1

    def payload(self, b):
        self.checked += 1
        magic, version, flags, stream, seq, _ts, length, _res = SEQ_HEADER.unpack_from(b)
        if magic != SEQ_MAGIC or version != 1 or length != self.size - SEQ_HEADER.size:
            self.bad += 1
            return
        self.seqs.setdefault(stream, []).append(seq)
        if not flags & FLAG_PATTERN:
            self.unpatterned += 1
            self.good += 1
        elif pattern(stream, seq, length) == bytes(b[SEQ_HEADER.size:]):
            self.good += 1
        else:
            self.bad += 1

    def report(self):
        streams = {}
        for sid, seqs in sorted(self.seqs.items()):
            uniq = sorted(set(seqs))
            missing, gaps = [], 0
            for a, b in zip(uniq, uniq[1:]):
                gaps += b - a - 1
                missing.extend(range(a + 1, min(b, a + 1 + 20 - len(missing))))
            streams[str(sid)] = {"first": uniq[0], "last": uniq[-1], "count": len(seqs),
                                 "duplicates": len(seqs) - len(uniq), "gaps": gaps,
                                 "missing": missing[:20]}
        return ({"checked": self.checked, "good": self.good, "bad": self.bad,
                 "unpatterned": self.unpatterned, "partial": self.partial}, streams)


def egress_recv(a):
    # A deep ring: spead2's reader thread assembles heaps at line rate while this Python
    # loop checks them at its own pace (a full ring would block the reader and lose packets
    # in the socket buffer, which a test would read as the sender's loss).
    stream = spead2.recv.Stream(spead2.ThreadPool(), spead2.recv.StreamConfig(max_heaps=16),
                                spead2.recv.RingStreamConfig(heaps=a.ring_heaps))
    if a.group:
        stream.add_udp_reader(a.group, a.port, max_size=a.max_packet, buffer_size=32 << 20,
                              interface_address=a.host)
    else:
        stream.add_udp_reader(a.port, bind_hostname=a.host, max_size=a.max_packet,
                              buffer_size=32 << 20)
    timed_out = threading.Event()

    def expire():
        timed_out.set()
        stream.stop()

    timer = threading.Timer(a.timeout, expire)
    timer.start()
    check = PayloadCheck(a.payload_size) if a.payload_size else None
    sink = open(a.data, "wb") if a.data else None
    ig = spead2.ItemGroup()
    heaps = descriptor_heaps = wrong_flavour = data_bytes = without_data = 0
    end = stopped = False
    cnts, undescribed = [], set()
    for heap in stream:
        if heap.is_end_of_stream():
            end = True
            break
        if heap.flavour.heap_address_bits != a.flavour:
            wrong_flavour += 1
            continue
        descriptors = heap.get_descriptors()
        descriptor_heaps += bool(descriptors)
        ig.update(heap)
        raw = [it for it in heap.get_items() if it.id > STREAM_CTRL_ID]
        if not raw:
            continue
        heaps += 1
        cnts.append(heap.cnt)
        data = None
        for it in raw:
            if it.id not in ig.ids():
                undescribed.add(it.id)
            if it.id == a.data_id:
                data = np.array(it, np.uint8, copy=False)
        if data is None:
            without_data += 1
        else:
            data_bytes += data.size
            if sink:
                sink.write(data.tobytes())
            if check:
                check.item(memoryview(data))
        if a.max_heaps and heaps >= a.max_heaps:
            stopped = True
            break
    timer.cancel()
    if sink:
        sink.close()
    # spead2 ends the stream at the end-of-stream packet without delivering its heap (a
    # heap that carried other items too would come with is_end_of_stream()): a UDP stream
    # that ends before the timeout and the heap limit ended so.
    end = end or not (timed_out.is_set() or stopped)
    stream.stop()
    st = dict(stream.stats.items())
    consecutive = all(b == x + 1 for x, b in zip(cnts, cnts[1:]))
    out = {
        "heaps": heaps,
        "descriptor_heaps": descriptor_heaps,
        "end": end,
        "timed_out": timed_out.is_set(),
        "wrong_flavour": wrong_flavour,
        "incomplete": st.get("incomplete_heaps_evicted", 0) + st.get("incomplete_heaps_flushed", 0),
        "names": {hex(item.id): name for name, item in ig.items()},
        "undescribed": sorted(hex(i) for i in undescribed),
        "data_bytes": data_bytes,
        "data_heaps_without_data": without_data,
        "cnt": {"first": cnts[0] if cnts else None, "last": cnts[-1] if cnts else None,
                "consecutive": consecutive,
                "missing": (max(cnts) - min(cnts) + 1 - len(set(cnts))) if cnts else 0},
        "stats": st,
    }
    if check:
        out["payloads"], out["streams"] = check.report()
    print(json.dumps(out))


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
    s.add_argument("--drop-every", type=int, default=0, help="leave out every K-th packet")
    u = sub.add_parser("read-units")
    u.add_argument("file")
    u.add_argument("--heap-bytes", type=int, required=True)
    b = sub.add_parser("bench-send")
    b.add_argument("host")
    b.add_argument("port", type=int)
    b.add_argument("--heaps", type=int, required=True)
    b.add_argument("--heap-bytes", type=int, default=1400)
    b.add_argument("--packet-size", type=int, default=1472)
    b.add_argument("--flavour", type=int, choices=[48, 40], default=48)
    b.add_argument("--rate", type=float, default=0, help="bytes per second (0: unpaced)")
    b.add_argument("--batch", type=int, default=64, help="heaps per send_heaps call")
    r = sub.add_parser("recv")
    r.add_argument("host")
    r.add_argument("port", type=int)
    r.add_argument("--heap-bytes", type=int, required=True)
    r.add_argument("--heap-step", type=int, default=1)
    r.add_argument("--heaps", type=int, default=0)
    r.add_argument("--timeout", type=float, default=20)
    e = sub.add_parser("egress-recv")
    e.add_argument("host", help="bind address; with --group, the interface to join on")
    e.add_argument("port", type=int)
    e.add_argument("--group", help="multicast group to join")
    e.add_argument("--ring-heaps", type=int, default=256,
                   help="heaps spead2 may hold assembled while this script checks them")
    e.add_argument("--flavour", type=int, choices=[48, 40], default=48)
    e.add_argument("--timeout", type=float, default=20)
    e.add_argument("--max-heaps", type=int, default=0, help="stop after N data heaps (0: no limit)")
    e.add_argument("--payload-size", type=int, default=0, help="check P-byte rtdaq payloads")
    e.add_argument("--data-id", type=lambda v: int(v, 0), default=DATA)
    e.add_argument("--max-packet", type=int, default=9200, help="largest packet accepted")
    e.add_argument("--data", help="write the data items here, back to back")
    a = p.parse_args()
    {"send": send, "bench-send": bench_send, "recv": recv, "egress-recv": egress_recv,
     "read-units": read_units}[a.cmd](a)


if __name__ == "__main__":
    main()
