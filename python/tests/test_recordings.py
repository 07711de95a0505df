"""rtdaq.open on recordings rtdaq made: pcap, DADA and raw of one run hold the same
payloads, as many as the report counts; the DADA samples equal baseband's reading."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from baseband import dada as baseband_dada  # the test peer: a missing one fails the tests

import rtdaq


def test_pcap_dada_and_raw_hold_the_same_payloads_without_a_copy(recorded):
    f = recorded["files"]
    pcap, dada, raw = (rtdaq.open(f[k]) for k in ("pcap", "dada", "raw"))
    assert isinstance(pcap, rtdaq.PcapRecording)
    assert isinstance(dada, rtdaq.DadaRecording)
    assert isinstance(raw, rtdaq.RawRecording) and not isinstance(raw, rtdaq.DadaRecording)
    payloads = pcap.payloads()
    assert payloads.shape == (len(pcap), 1400)
    assert np.array_equal(payloads, dada.records)
    assert np.array_equal(payloads, raw.records)
    # Views of the memory-mapped files, not copies.
    for a in (payloads, dada.records, raw.records):
        assert not a.flags.owndata and not a.flags.writeable
    # Packet by packet, as iteration gives them.
    for i in (0, 1, len(pcap) // 2, len(pcap) - 1):
        assert bytes(pcap[i].payload) == bytes(dada[i].data) == bytes(raw[i].payload)
    assert pcap[-1].index == len(pcap) - 1


def test_counts_and_times_match_the_report_and_the_index(recorded):
    f, r = recorded["files"], recorded["report"]
    received = r["rx"]["totals"]["packets"]
    assert received > 10_000 and r["lost"] == 0
    for k in ("pcap", "dada", "raw"):
        rec = rtdaq.open(f[k])
        assert len(rec) == received == rec.index["packets"], k
        assert rec.index["format"] == k and rec.index["complete"]
    pcap = rtdaq.open(f["pcap"])
    t = pcap.time_ns
    assert (np.diff(t.astype(np.int64)) >= 0).all()
    assert int(t[0]) == pcap.index["first_ts_ns"] and int(t[-1]) == pcap.index["last_ts_ns"]
    assert pcap.linktype == 1 and pcap.nanosecond and pcap.trailing_bytes == 0
    # The rtdaq header's sequence number (big-endian u64 at byte 8 of each payload,
    # docs/wire-format.md) counts up from the index's first_seq.
    seq = pcap.payloads()[:, 8:16].copy().view(">u8").ravel()
    assert int(seq[0]) == pcap.index["first_seq"]
    assert np.array_equal(seq, np.arange(len(pcap), dtype=np.uint64) + seq[0])


def test_dada_samples_equal_baseband_reading_the_same_file(recorded):
    path = recorded["files"]["dada"]
    rec = rtdaq.open(path)
    with baseband_dada.open(str(path), "rs") as fh:
        h = fh.header0
        ref = fh.read()
    for k in ("NBIT", "NDIM", "NPOL", "NCHAN", "HDR_SIZE", "UTC_START", "SOURCE"):
        assert rec.header[k] == h[k], k
    mine = rec.samples()
    assert mine.dtype == ref.dtype == np.float32
    assert mine.shape[0] == ref.shape[0]
    assert np.array_equal(mine.reshape(ref.shape), ref)
    raw = rec.samples(decode=False)
    assert raw.dtype == np.int8 and not raw.flags.owndata


def test_a_copy_without_its_index_opens_by_its_first_bytes(recorded, tmp_path):
    f = recorded["files"]
    for k in ("pcap", "dada", "raw"):
        shutil.copy(f[k], tmp_path / f"x.{k}")
    assert rtdaq.open(tmp_path / "x.pcap").format == "pcap"
    d = rtdaq.open(tmp_path / "x.dada")
    assert d.format == "dada" and d.index is None and d.record_bytes == 1400
    raw = rtdaq.open(tmp_path / "x.raw")
    assert raw.format == "raw" and raw.index is None
    with pytest.raises(ValueError, match="record_bytes"):
        len(raw)
    raw = rtdaq.open(tmp_path / "x.raw", record_bytes=1400)
    assert np.array_equal(raw.records, rtdaq.open(f["raw"]).records)


def test_a_pcap_cut_mid_record_gives_its_complete_records(recorded, tmp_path):
    src = recorded["files"]["pcap"]
    whole = rtdaq.open(src)
    cut = int(whole.table["offset"][1000]) + 700  # inside record 1000's frame
    p = tmp_path / "cut.pcap"
    p.write_bytes(src.read_bytes()[:cut])
    rec = rtdaq.open(p)
    assert len(rec) == 1000 and rec.trailing_bytes == 700 + 16
    assert np.array_equal(rec.payloads(), whole.payloads()[:1000])


def test_bad_files_are_named_with_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError):
        rtdaq.open(tmp_path / "missing.pcap")
    ng = tmp_path / "x.pcapng"
    ng.write_bytes(b"\x0a\x0d\x0d\x0a" + bytes(60))
    with pytest.raises(ValueError, match="editcap"):
        rtdaq.PcapRecording(ng)
    short = tmp_path / "short.pcap"
    short.write_bytes(b"\x4d\x3c\xb2\xa1")
    with pytest.raises(ValueError, match="shorter than a pcap file header"):
        rtdaq.PcapRecording(short)
    bad = tmp_path / "bad.dada"
    bad.write_bytes(b"HEADER DADA\nHDR_SIZE four\n".ljust(4096, b"\0"))
    with pytest.raises(ValueError, match="bad.dada: HDR_SIZE 'four' is not a byte count"):
        rtdaq.open(bad)
    with pytest.raises(ValueError, match="NBIT 4"):
        rtdaq.decode_samples(np.zeros(8, np.uint8), {"NBIT": 4})
