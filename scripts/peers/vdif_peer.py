#!/usr/bin/env python3
"""VDIF peer for rtdaq's tests, built on baseband (PyPI), the VLBI file library.

  vdif_peer.py write FILE --threads T --frames N --frame-bytes B --fps F
      baseband writes a T-thread VDIF file of N frames per thread (EDV 0, 2-bit real
      samples, station "Ar", B-byte frames, F frames per second per thread). Prints JSON
      {"frames": T*N, "threads": T, "frames_per_thread": N, "frame_bytes": B}.
  vdif_peer.py send FILE HOST PORT [--pps P] [--skip-every K]
      sends the file's frames one per UDP datagram, in file order, P per second (default
      20000); with --skip-every K, frame i (0-based, file order) is left out when
      (i + 1) % K == 0. Prints JSON {"sent": n, "skipped": m}.
  vdif_peer.py check FILE --threads T [--fps F]
      baseband reads FILE (a recording): per thread the frame count and whether frame numbers
      run on without a gap ((second, frame) continuous at F frames per second). Prints JSON
      {"threads": {...}, "frames": n, "continuous": bool, "station": "..", "bps": b}.
"""
import argparse
import json
import socket
import sys
import time


def write(a):
    import astropy.units as u
    import numpy as np
    from astropy.time import Time
    from baseband import vdif

    payload = a.frame_bytes - 32
    samples_per_frame = payload * 8 // 2  # 2-bit real samples, one channel
    header = vdif.VDIFHeader.fromvalues(
        edv=0, station="Ar", bps=2, nchan=1, complex_data=False,
        frame_nbytes=a.frame_bytes, time=Time("2026-12-01T00:00:00", scale="utc"),
        sample_rate=samples_per_frame * a.fps * u.Hz)
    rng = np.random.default_rng(7)
    with vdif.open(a.file, "ws", header0=header, nthread=a.threads,
                   sample_rate=samples_per_frame * a.fps * u.Hz) as fh:
        data = rng.normal(size=(a.frames * samples_per_frame, a.threads))
        fh.write(data)
    print(json.dumps({"frames": a.threads * a.frames, "threads": a.threads,
                      "frames_per_thread": a.frames, "frame_bytes": a.frame_bytes}))


def send(a):
    data = open(a.file, "rb").read()
    # The frame length (8-byte units) is in word 2, bits 23..0, of each header.
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    off, n, k, skipped, t0 = 0, 0, 0, 0, time.monotonic()
    while off + 16 <= len(data):
        w2 = int.from_bytes(data[off + 8:off + 12], "little")
        size = (w2 & 0xFFFFFF) * 8
        if size < 16 or off + size > len(data):
            sys.exit(f"bad frame length {size} at offset {off}")
        k += 1
        if a.skip_every > 0 and k % a.skip_every == 0:
            off += size
            skipped += 1
            continue
        s.sendto(data[off:off + size], (a.host, a.port))
        off += size
        n += 1
        # Pace: never more than P frames per second since the start.
        ahead = n / a.pps - (time.monotonic() - t0)
        if ahead > 0:
            time.sleep(ahead)
    print(json.dumps({"sent": n, "skipped": skipped}))


def check(a):
    from baseband import vdif

    threads, frames = {}, 0
    continuous, station, bps = True, None, None
    last = {}
    with vdif.open(a.file, "rb") as fh:
        while True:
            try:
                h = fh.read_header()
            except EOFError:
                break
            fh.seek(h.payload_nbytes, 1)
            frames += 1
            t = h["thread_id"]
            threads[t] = threads.get(t, 0) + 1
            station, bps = h.station, h.bps
            here = h["seconds"] * a.fps + h["frame_nr"]
            if t in last and here != last[t] + 1:
                continuous = False
            last[t] = here
    print(json.dumps({"threads": {str(k): v for k, v in sorted(threads.items())},
                      "frames": frames, "continuous": continuous,
                      "station": station, "bps": bps}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("file")
    w.add_argument("--threads", type=int, default=4)
    w.add_argument("--frames", type=int, default=1000)
    w.add_argument("--frame-bytes", type=int, default=8032)
    w.add_argument("--fps", type=int, default=1000)
    s = sub.add_parser("send")
    s.add_argument("file")
    s.add_argument("host")
    s.add_argument("port", type=int)
    s.add_argument("--pps", type=float, default=20000)
    s.add_argument("--skip-every", type=int, default=0)
    c = sub.add_parser("check")
    c.add_argument("file")
    c.add_argument("--threads", type=int, default=4)
    c.add_argument("--fps", type=int, required=True)
    a = p.parse_args()
    {"write": write, "send": send, "check": check}[a.cmd](a)


if __name__ == "__main__":
    main()
