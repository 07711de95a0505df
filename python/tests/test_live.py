"""Live data: rtdaq.follow on files rtdaq is writing, rtdaq.Ring on the PSRDADA ring an
rtdaq dada_ring stage writes, rtdaq.status on a running rtdaq's metrics endpoint."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import rtdaq
from conftest import RAW_RECORDER, edited_config, free_port, start_rtdaq


def _wait_for(pattern_dir, suffix, proc, timeout_s=20.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if pattern_dir.exists():
            for f in pattern_dir.iterdir():
                if f.name.endswith(suffix):
                    return f
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.01)
    raise AssertionError(f"no *{suffix} in {pattern_dir} after {timeout_s} s")


def test_follow_reads_every_record_while_rtdaq_writes(rtdaq_bin, tmp_path):
    cfg = edited_config(
        "host-udp-record.toml",
        tmp_path,
        [('record = ["pcap", "dada"]', 'record = ["pcap", "dada", "raw"]'),
         ("\n[generator]", RAW_RECORDER),
         ("flush_ms = 100", "flush_ms = 20"),
         # 0.25 Gb/s: at 1 Gb/s with both followers in this process, the 2-vCPU CI host
         # under load saw the RX thread stall (a 118 ms loop turn) and the kernel drop
         # 3-4 % (docs/python.md, "Following a file being written"); not understood yet.
         ("rate_gbps = 1.0", "rate_gbps = 0.25")],
    )
    proc = start_rtdaq(rtdaq_bin, cfg, tmp_path, 2)
    out = tmp_path / "out"
    pcap = _wait_for(out, ".pcap", proc)
    raw = _wait_for(out, ".raw", proc)
    got = {}

    def follow_raw():
        got["raw"] = [bytes(p.data[:16]) for p in rtdaq.follow(raw, record_bytes=1400)]

    t = threading.Thread(target=follow_raw)
    t.start()
    seen, during = [], 0
    for p in rtdaq.follow(pcap):
        seen.append((p.time_ns, bytes(p.payload[:16])))
        if proc.poll() is None:
            during += 1
    t.join(30)
    assert proc.wait(30) == 0, proc.stdout.read()
    rec = rtdaq.open(pcap)
    assert len(seen) == len(rec) == rec.index["packets"] > 20_000
    assert during > len(seen) // 4, "follow read most records only after the run"
    assert [s[0] for s in seen] == [int(x) for x in rec.time_ns]
    assert [s[1] for s in seen] == [bytes(r[:16]) for r in rec.payloads()]
    assert got["raw"] == [s[1] for s in seen]


def test_follow_gives_up_on_a_file_that_never_comes(tmp_path):
    with pytest.raises(TimeoutError, match="did not appear"):
        list(rtdaq.follow(tmp_path / "never.pcap", idle_timeout_s=0.2))


def _ring_key(n: int) -> str:
    return f"{0x6e000000 | ((os.getpid() & 0xffff) << 8) | (n << 1):x}"


def _ring_and_raw_config(tmp_path, key: str, *more):
    """configs/host-udp-dada-ring.toml at ``key``, with a raw recorder on the ring's
    queue (what the ring readers' bytes are compared with), and ``more`` edits."""
    return edited_config(
        "host-udp-dada-ring.toml",
        tmp_path,
        [('key = "dada"', f'key = "{key}"'),
         *more,
         ("\n[generator]", RAW_RECORDER),
         ('dada_ring = "ring"', 'dada_ring = "ring"\nrecord = ["raw"]')],
    )


def test_ring_reader_gets_every_byte_equal_to_the_raw_recording(rtdaq_dada_bin, tmp_path):
    key = _ring_key(1)
    cfg = _ring_and_raw_config(tmp_path, key)
    proc = start_rtdaq(rtdaq_dada_bin, cfg, tmp_path, 2)
    with rtdaq.Ring(key, wait_s=20) as ring:
        h = ring.header
        blocks = list(ring)
        block_bytes = ring.block_bytes
    assert proc.wait(30) == 0, proc.stdout.read()
    data = np.concatenate(blocks)
    assert h["HDR_SIZE"] == 4096 and h["NBIT"] == 8 and h["RTDAQ_QUEUE"] == "lo_udp.rx0"
    assert ring.bytes_read == data.size
    assert all(b.size == block_bytes for b in blocks[:-1])
    raw = rtdaq.open(next((tmp_path / "out").glob("*.raw")))
    assert data.size == raw.data.size > 10_000 * 1400
    assert np.array_equal(data, raw.data)
    r = rtdaq.load_report(tmp_path / "report.json")
    assert r["lost"] == 0


_READER = """
import sys, rtdaq
key, out = sys.argv[1], sys.argv[2]
with rtdaq.Ring(key, wait_s=20) as ring, open(out, "wb") as f:
    h = ring.header
    for block in ring:
        f.write(block)
print(h["OBS_ID"], ring.bytes_read)
"""


def test_two_reader_processes_each_get_every_byte(rtdaq_dada_bin, tmp_path):
    key = _ring_key(4)
    cfg = _ring_and_raw_config(
        tmp_path,
        key,
        ("readers = 1", "readers = 2"),
        # Two Python readers and rtdaq share this host's cores: a rate they keep up
        # with on a loaded 2-core machine (a reader behind is lost data, not this test).
        ("rate_gbps = 1.0", "rate_gbps = 0.25"),
    )
    readers = [
        subprocess.Popen([sys.executable, "-c", _READER, key, str(tmp_path / f"r{i}.data")],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for i in range(2)
    ]
    proc = start_rtdaq(rtdaq_dada_bin, cfg, tmp_path, 2)
    assert proc.wait(30) == 0, proc.stdout.read()
    said = []
    for r in readers:
        out, _ = r.communicate(timeout=30)
        assert r.returncode == 0, out
        said.append(out.split())
    raw = rtdaq.open(next((tmp_path / "out").glob("*.raw")))
    assert raw.data.size > 2 * 20_000 * 1400
    assert said[0][0] == said[1][0], "the two readers saw different observations"
    for i in range(2):
        got = np.fromfile(tmp_path / f"r{i}.data", np.uint8)
        assert int(said[i][1]) == got.size == raw.data.size
        assert np.array_equal(got, raw.data)
    r = rtdaq.load_report(tmp_path / "report.json")
    assert r["lost"] == 0


def test_a_slow_reader_keeping_n_blocks_drops_the_oldest_and_counts_them(rtdaq_dada_bin,
                                                                        tmp_path):
    key = _ring_key(5)
    # 64 blocks of 256 KiB: 0.45 s of data at 0.3 Gb/s; one block arrives every 7 ms.
    cfg = _ring_and_raw_config(
        tmp_path, key,
        ("nbufs = 16", "nbufs = 64"),
        ("bufsz_kib = 4096", "bufsz_kib = 256"),
        ("rate_gbps = 1.0", "rate_gbps = 0.3"),
    )
    proc = start_rtdaq(rtdaq_dada_bin, cfg, tmp_path, 2)
    got = []
    with rtdaq.Ring(key, wait_s=20, keep_blocks=8) as ring:
        _ = ring.header
        while True:
            block = ring.read()
            if block.size == 0:
                break
            got.append((ring.read_offset, block))
            time.sleep(0.02)  # three times slower than the data comes
        dropped, dropped_blocks, end = ring.bytes_dropped, ring.blocks_dropped, ring.offset
        block_bytes = ring.block_bytes
    assert proc.wait(30) == 0, proc.stdout.read()
    raw = rtdaq.open(next((tmp_path / "out").glob("*.raw"))).data
    r = rtdaq.load_report(tmp_path / "report.json")
    d = r["rx"]["queues"][0]["dada_ring"]
    # The writer always found room: the newest data went in, the reader dropped the oldest.
    assert r["lost"] == 0 and d["dropped"]["ring_reader_behind"] == 0, d
    assert end == raw.size == d["bytes"] > 20_000 * 1400
    assert dropped_blocks > 50 and dropped == dropped_blocks * block_bytes
    assert sum(b.size for _, b in got) + dropped == raw.size
    for at, block in got:
        assert np.array_equal(block, raw[at:at + block.size]), at


_STOPPING_READER = """
import sys, time, rtdaq
with rtdaq.Ring(sys.argv[1], wait_s=20) as ring:
    _ = ring.header
    for _ in range(3):
        ring.read(ring.block_bytes)
    ring.read(ring.block_bytes // 2)   # half the fourth block: it holds that block
    print("paused", flush=True)
    time.sleep(3600)
"""


def test_a_reader_killed_mid_run_is_replaced_by_one_reading_from_obs_offset(
        rtdaq_dada_bin, tmp_path):
    key = _ring_key(6)
    cfg = _ring_and_raw_config(tmp_path, key, ("rate_gbps = 1.0", "rate_gbps = 0.3"))
    first = subprocess.Popen([sys.executable, "-c", _STOPPING_READER, key],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    proc = start_rtdaq(rtdaq_dada_bin, cfg, tmp_path, 3)
    assert first.stdout.readline().strip() == "paused"
    first.kill()
    first.wait(10)
    second = subprocess.Popen([sys.executable, "-c", _READER + "print(h['OBS_OFFSET'])\n",
                               key, str(tmp_path / "second.data")],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.wait(30) == 0, proc.stdout.read()
    out, _ = second.communicate(timeout=30)
    assert second.returncode == 0, out
    offset = int(out.split()[-1])
    raw = rtdaq.open(next((tmp_path / "out").glob("*.raw"))).data
    got = np.fromfile(tmp_path / "second.data", np.uint8)
    assert offset == 3 * (4 << 20), out
    assert np.array_equal(got, raw[offset:])
    d = rtdaq.load_report(tmp_path / "report.json")["rx"]["queues"][0]["dada_ring"]
    assert (d["readers_left"], d["readers_followed"]) == (1, 1), d
    assert d["dropped"]["ring_reader_behind"] == 0, d


def test_ring_samples_decode_as_the_header_says(rtdaq_dada_bin, tmp_path):
    key = _ring_key(2)
    cfg = edited_config("host-udp-dada-ring.toml", tmp_path, [('key = "dada"', f'key = "{key}"')])
    proc = start_rtdaq(rtdaq_dada_bin, cfg, tmp_path, 1, record=False)
    with rtdaq.Ring(key, wait_s=20) as ring:
        s = ring.samples(4096)
        raw = ring.read(4096)
        rest = sum(b.size for b in ring)
    assert proc.wait(30) == 0, proc.stdout.read()
    assert s.shape == (4096, 1, 1) and s.dtype == np.float32
    assert raw.size == 4096 and rest > 0
    # The first payload's rtdaq header: magic "RTDQ" (docs/wire-format.md).
    assert bytes(s[:4].astype(np.int8).ravel().view(np.uint8)) == b"RTDQ"


def test_ring_errors_name_the_key_and_what_to_do():
    with pytest.raises(ValueError, match="not a PSRDADA key"):
        rtdaq.Ring("xyz!")
    with pytest.raises(TimeoutError, match="no PSRDADA ring at key"):
        rtdaq.Ring(_ring_key(3), wait_s=0.1)


def test_status_of_a_running_rtdaq_and_its_report(rtdaq_bin, tmp_path):
    port = free_port()
    cfg = edited_config("host-loopback-udp.toml", tmp_path, [])
    proc = start_rtdaq(rtdaq_bin, cfg, tmp_path, 2, ["--metrics", f"127.0.0.1:{port}"],
                       record=False)
    st, got, t0 = None, 0, time.monotonic()
    while time.monotonic() - t0 < 10:
        try:
            st = rtdaq.status(f"127.0.0.1:{port}")
            got = sum(q["packets"] for q in st["rx"])
            if got > 0:
                break
        except ConnectionError:
            assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.05)
    assert got > 0, st
    assert st["config"] == "host-loopback-udp" and st["elapsed_s"] > 0, st
    assert proc.wait(30) == 0, proc.stdout.read()
    r = rtdaq.load_report(tmp_path / "report.json")
    assert r["rx"]["totals"]["packets"] >= got > 0
    assert r["lost"] == 0
    with pytest.raises(ConnectionError, match=f"127.0.0.1:{port}"):
        rtdaq.status(f"127.0.0.1:{port}", timeout_s=0.5)
