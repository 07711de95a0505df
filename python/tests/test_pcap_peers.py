"""The pcap scanner on files another writer made (scapy, the packet library): link types,
VLAN tags, IPv6, non-UDP frames and fragments, microsecond times, big-endian files."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import rtdaq

import scapy.all  # noqa: F401  the test peer: a missing one fails the tests


def _frames():
    from scapy.all import IP, UDP, TCP, Dot1Q, Ether, IPv6, Raw

    return [
        (Ether() / IP(dst="169.254.0.2") / UDP(dport=4000) / Raw(b"a" * 100), 42, 100),
        (Ether() / Dot1Q(vlan=5) / IP(dst="169.254.0.2") / UDP() / Raw(b"b" * 50), 46, 50),
        (Ether() / Dot1Q(vlan=5) / Dot1Q(vlan=6) / IP() / UDP() / Raw(b"q" * 9), 50, 9),
        (Ether() / IPv6(dst="fd00::2") / UDP() / Raw(b"c" * 30), 62, 30),
        (Ether() / IP(options=b"\x01" * 4) / UDP() / Raw(b"d" * 10), 46, 10),
        # the longest headers: two tags and an IPv4 header of 60 bytes (40 of options)
        (Ether() / Dot1Q(vlan=5) / Dot1Q(vlan=6) / IP(options=b"\x01" * 40) / UDP()
         / Raw(b"g" * 12), 90, 12),
        (Ether() / IP() / TCP() / Raw(b"e" * 10), None, 0),
        (Ether() / IP(flags="MF") / UDP() / Raw(b"f" * 10), None, 0),
    ]


def test_ethernet_frames_of_scapy_with_microsecond_times(tmp_path):
    from scapy.all import wrpcap

    frames = _frames()
    pkts = []
    for k, (f, _, _) in enumerate(frames):
        f.time = 1_700_000_000 + k + 0.25
        pkts.append(f)
    p = tmp_path / "scapy.pcap"
    wrpcap(str(p), pkts)
    rec = rtdaq.open(p)
    assert rec.format == "pcap" and rec.linktype == 1 and not rec.nanosecond
    assert len(rec) == len(frames)
    for k, (f, off, n) in enumerate(frames):
        pk = rec[k]
        assert bytes(pk.data) == bytes(f)
        assert pk.time_ns == (1_700_000_000 + k) * 10**9 + 250_000_000
        if off is None:
            assert pk.payload.size == 0 and rec.table["payload"][k] == 0xFFFFFFFF
        else:
            assert int(rec.table["payload"][k]) == off
            assert bytes(pk.payload) == bytes(f)[off : off + n]
    with pytest.raises(ValueError, match="no UDP"):
        rec.payloads()


def test_raw_ip_and_linux_cooked_captures(tmp_path):
    from scapy.all import IP, UDP, CookedLinux, Raw, wrpcap

    ip = IP(dst="169.254.0.2") / UDP() / Raw(b"r" * 20)
    p = tmp_path / "raw.pcap"
    wrpcap(str(p), [ip], linktype=101)
    rec = rtdaq.open(p)
    assert rec.linktype == 101 and bytes(rec[0].payload) == b"r" * 20
    sll = CookedLinux(proto=0x0800) / IP() / UDP() / Raw(b"s" * 7)
    p = tmp_path / "sll.pcap"
    wrpcap(str(p), [sll])
    rec = rtdaq.open(p)
    assert rec.linktype == 113 and bytes(rec[0].payload) == b"s" * 7


def test_a_big_endian_file(tmp_path):
    frame = b"\x00" * 12 + b"\x08\x00" + bytes(20)
    head = struct.pack(">IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    rec_hdr = struct.pack(">IIII", 5, 7, len(frame), len(frame))
    p = tmp_path / "be.pcap"
    p.write_bytes(head + rec_hdr + frame)
    rec = rtdaq.open(p)
    assert len(rec) == 1 and rec[0].time_ns == 5 * 10**9 + 7000
    assert bytes(rec[0].data) == frame
    assert np.array_equal(rec.frames()[0], np.frombuffer(frame, np.uint8))
