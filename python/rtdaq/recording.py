"""Recordings rtdaq wrote (pcap, raw, DADA), memory-mapped into numpy arrays."""

from __future__ import annotations

import builtins
import json
import os
import time
from typing import Any, Dict, Iterator, NamedTuple, Optional, Union

import numpy as np

from ._rtdaq import NO_PAYLOAD, scan_pcap
from .dada import HeaderValue, decode_samples, header_size, parse_header

PathLike = Union[str, "os.PathLike[str]"]

#: One row of a pcap file's table (``PcapRecording.table``): where the frame lies in the
#: file, its time (ns since the epoch), captured and wire bytes, and where its UDP payload
#: lies in the frame (``payload`` is 0xffffffff for a frame that is no whole UDP datagram).
PCAP_ROW = np.dtype(
    [
        ("offset", "<u8"),
        ("time_ns", "<u8"),
        ("caplen", "<u4"),
        ("wirelen", "<u4"),
        ("payload", "<u4"),
        ("payload_len", "<u4"),
    ]
)

_PCAP_MAGICS = {b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"}
_EMPTY = np.zeros(0, np.uint8)


class Packet(NamedTuple):
    """One record of a recording.

    ``data`` is the record as stored (a pcap record's frame; a raw or DADA record's bytes)
    and ``payload`` the UDP payload in it (for raw and DADA records: ``data`` itself); both
    are read-only views of the memory-mapped file. ``time_ns`` is the receive time (pcap),
    ``None`` where the format keeps none (raw, DADA: see the index's first/last times)."""

    index: int
    time_ns: Optional[int]
    data: np.ndarray
    payload: np.ndarray


def read_index(path: PathLike) -> Optional[Dict[str, Any]]:
    """The index rtdaq wrote beside a closed file (``FILE.index.json``), or ``None`` while
    the file is still being written (or for a file rtdaq did not write)."""
    p = os.fspath(path) + ".index.json"
    if not os.path.exists(p):
        return None
    with builtins.open(p) as f:
        return json.load(f)


def _memmap(path: str) -> np.ndarray:
    if os.path.getsize(path) == 0:
        return _EMPTY
    return np.memmap(path, np.uint8, mode="r")


class Recording:
    """A recording file, memory-mapped: ``len()`` records, ``rec[i]`` and iteration give
    :class:`Packet` s; ``index`` is the file's index (``None`` without one)."""

    format = ""

    def __init__(self, path: PathLike):
        self.path = os.fspath(path)
        self.index = read_index(self.path)
        self._mm = _memmap(self.path)

    def __len__(self) -> int:
        raise NotImplementedError

    def packet(self, i: int) -> Packet:
        """Record ``i`` (0-based)."""
        raise NotImplementedError

    def __getitem__(self, i: int) -> Packet:
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"record {i} of {n}")
        return self.packet(i)

    def __iter__(self) -> Iterator[Packet]:
        for i in range(len(self)):
            yield self.packet(i)

    def close(self) -> None:
        """Drops the file's mapping (views taken from it keep it alive)."""
        self._mm = _EMPTY

    def __enter__(self) -> "Recording":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<rtdaq.{type(self).__name__} {self.path!r} records={len(self)}>"


class PcapRecording(Recording):
    """A pcap file (any pcap writer's: link type Ethernet, raw IP or Linux cooked capture,
    micro- or nanosecond times, either byte order). ``table`` is a structured array
    (:data:`PCAP_ROW`) with a row per record."""

    format = "pcap"

    def __init__(self, path: PathLike):
        super().__init__(path)
        s = scan_pcap(self.path)
        self.table: np.ndarray = np.frombuffer(s["rows"], PCAP_ROW)
        self.linktype: int = s["linktype"]
        self.snaplen: int = s["snaplen"]
        self.nanosecond: bool = s["nanosecond"]
        #: bytes after the last complete record (a file cut short by a crash)
        self.trailing_bytes: int = self._mm.size - s["end"] if self._mm.size else 0

    def __len__(self) -> int:
        return len(self.table)

    @property
    def data(self) -> np.ndarray:
        """The whole file's bytes."""
        return self._mm

    @property
    def time_ns(self) -> np.ndarray:
        """Every record's time (ns since the epoch)."""
        return self.table["time_ns"]

    def packet(self, i: int) -> Packet:
        r = self.table[i]
        off, cap, p = int(r["offset"]), int(r["caplen"]), int(r["payload"])
        frame = self._mm[off : off + cap]
        payload = _EMPTY if p == NO_PAYLOAD else frame[p : p + int(r["payload_len"])]
        return Packet(i, int(r["time_ns"]), frame, payload)

    def _uniform(self, what: str, start: np.ndarray, length: np.ndarray) -> np.ndarray:
        t = self.table
        n = len(t)
        if n == 0:
            return np.zeros((0, 0), np.uint8)
        step = np.diff(t["offset"])
        if (
            (length != length[0]).any()
            or (start != start[0]).any()
            or (step != (16 + t["caplen"][:-1])).any()
            or (step[:1] != step[-1:]).any()
        ):
            raise ValueError(
                f"{self.path}: the {what} differ in size or place; iterate the recording "
                "(or index rec.table) instead of taking them as one 2-D array"
            )
        first = int(t["offset"][0] + start[0])
        stride = int(step[0]) if n > 1 else int(length[0]) + 16
        return np.lib.stride_tricks.as_strided(
            self._mm[first:], shape=(n, int(length[0])), strides=(stride, 1), writeable=False
        )

    def frames(self) -> np.ndarray:
        """Every frame as one read-only 2-D array (records, bytes) without a copy: a
        strided view of the file. Needs every record to be of one size."""
        t = self.table
        return self._uniform("frames", np.zeros(len(t), np.int64), t["caplen"])

    def payloads(self) -> np.ndarray:
        """Every UDP payload as one read-only 2-D array (records, bytes) without a copy;
        needs every record to hold a UDP payload of one size at one place."""
        t = self.table
        if (t["payload"] == NO_PAYLOAD).any():
            raise ValueError(f"{self.path}: some frames are no UDP datagrams")
        return self._uniform("UDP payloads", t["payload"], t["payload_len"])


class RawRecording(Recording):
    """A raw file: records back to back, nothing else. Their size is ``record_bytes`` when
    given, else the index's ``bytes / packets``."""

    format = "raw"
    header_bytes = 0

    def __init__(self, path: PathLike, record_bytes: Optional[int] = None):
        super().__init__(path)
        self.record_bytes = record_bytes or self._record_bytes_known()

    def _record_bytes_known(self) -> Optional[int]:
        ix = self.index
        if ix and ix.get("packets"):
            payload = ix["bytes"] - self.header_bytes
            if payload % ix["packets"] == 0:
                return payload // ix["packets"]
        return None

    @property
    def data(self) -> np.ndarray:
        """The payload bytes (after any header), without a copy."""
        return self._mm[self.header_bytes :]

    @property
    def records(self) -> np.ndarray:
        """The records as one read-only 2-D array (records, record_bytes), without a copy;
        a trailing partial record is left out."""
        rb = self._need_record_bytes()
        d = self.data
        n = d.size // rb
        return d[: n * rb].reshape(n, rb)

    def _need_record_bytes(self) -> int:
        if not self.record_bytes:
            raise ValueError(
                f"{self.path}: the record size is unknown (no complete index, records of "
                "different sizes): give record_bytes= (the payload size less strip_bytes)"
            )
        return self.record_bytes

    def __len__(self) -> int:
        return self.data.size // self._need_record_bytes()

    def packet(self, i: int) -> Packet:
        rb = self._need_record_bytes()
        rec = self.data[i * rb : (i + 1) * rb]
        return Packet(i, None, rec, rec)


class DadaRecording(RawRecording):
    """A DADA file: a PSRDADA ASCII header (``header``, a dict), then raw records.
    ``samples()`` decodes them as baseband does."""

    format = "dada"

    def __init__(self, path: PathLike, record_bytes: Optional[int] = None):
        p = os.fspath(path)
        with builtins.open(p, "rb") as f:
            head = f.read(4096)
        self.header: Dict[str, HeaderValue] = parse_header(head)
        hdr = header_size(self.header, p)
        if hdr > len(head):
            with builtins.open(p, "rb") as f:
                self.header = parse_header(f.read(hdr))
        self.header_bytes = hdr
        super().__init__(path, record_bytes or _int_or_none(self.header.get("PKT_SIZE")))

    def samples(self, decode: bool = True) -> np.ndarray:
        """The data as samples, shape (nsample, npol, nchan), by NBIT/NDIM/NPOL/NCHAN:
        float32 (complex64) values as baseband decodes them, or with ``decode=False`` a
        view in the stored integer type (no copy)."""
        return decode_samples(self.data, self.header, decode)


def _int_or_none(v: Any) -> Optional[int]:
    return v if isinstance(v, int) and v > 0 else None


def _kind(path: str) -> str:
    ix = read_index(path)
    if ix and ix.get("format") in ("pcap", "raw", "dada"):
        return ix["format"]
    with builtins.open(path, "rb") as f:
        head = f.read(4096)
    if head[:4] in _PCAP_MAGICS:
        return "pcap"
    if head.startswith(b"HEADER") or b"\nHDR_SIZE" in head:
        return "dada"
    return "raw"


def open(path: PathLike, record_bytes: Optional[int] = None) -> Recording:
    """Opens a recording by what it is (its index's format, else its first bytes): a
    :class:`PcapRecording`, :class:`DadaRecording` or :class:`RawRecording`.
    ``record_bytes`` sizes raw and DADA records where the index does not."""
    p = os.fspath(path)
    kind = _kind(p)
    if kind == "pcap":
        return PcapRecording(p)
    if kind == "dada":
        return DadaRecording(p, record_bytes)
    return RawRecording(p, record_bytes)


def follow(
    path: PathLike,
    record_bytes: Optional[int] = None,
    poll_s: float = 0.05,
    idle_timeout_s: float = 30.0,
) -> Iterator[Packet]:
    """Yields the records of a file rtdaq is writing, as they reach the disk, until the
    writer closes it (its index appears) or nothing new came for ``idle_timeout_s``.

    Waits for the file to appear (up to ``idle_timeout_s``). pcap records come whole with
    their times; raw and DADA records need ``record_bytes`` (a live DADA header does not
    yet hold ``PKT_SIZE``). The records are copies (``os.pread``), since the file grows
    under the reader. Follows one file: a rotated recording's next file is another path.
    """
    p = os.fspath(path)
    deadline = time.monotonic() + idle_timeout_s
    while not os.path.exists(p):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{p} did not appear within {idle_timeout_s} s")
        time.sleep(poll_s)
    fd = os.open(p, os.O_RDONLY)
    try:
        kind = _wait_kind(p, fd, poll_s, deadline)
        if kind == "pcap":
            yield from _follow_pcap(p, fd, poll_s, idle_timeout_s)
        else:
            yield from _follow_records(p, fd, kind, record_bytes, poll_s, idle_timeout_s)
    finally:
        os.close(fd)


def _wait_kind(p: str, fd: int, poll_s: float, deadline: float) -> str:
    """The file's format, once its first bytes are there."""
    while True:
        head = os.pread(fd, 4096, 0)
        if head[:4] in _PCAP_MAGICS:
            return "pcap"
        if head.startswith(b"HEADER") or b"\nHDR_SIZE" in head:
            return "dada"
        if len(head) >= 4 and not b"HEADER".startswith(head[:6]):
            return "raw"
        if read_index(p) is not None or time.monotonic() > deadline:
            return "raw"
        time.sleep(poll_s)


def _follow_pcap(p: str, fd: int, poll_s: float, idle_s: float) -> Iterator[Packet]:
    end, i, last = 0, 0, time.monotonic()
    while True:
        closed = read_index(p) is not None  # before the scan: nothing comes after it
        s = scan_pcap(p, end)
        rows = np.frombuffer(s["rows"], PCAP_ROW)
        if len(rows):
            chunk = np.frombuffer(os.pread(fd, s["end"] - end, end), np.uint8)
            for r in rows:
                off, cap, pl = int(r["offset"]) - end, int(r["caplen"]), int(r["payload"])
                frame = chunk[off : off + cap]
                payload = _EMPTY if pl == NO_PAYLOAD else frame[pl : pl + int(r["payload_len"])]
                yield Packet(i, int(r["time_ns"]), frame, payload)
                i += 1
            end, last = s["end"], time.monotonic()
        elif closed or time.monotonic() - last > idle_s:
            return
        else:
            time.sleep(poll_s)


def _follow_records(
    p: str, fd: int, kind: str, record_bytes: Optional[int], poll_s: float, idle_s: float
) -> Iterator[Packet]:
    if kind == "dada":
        header = parse_header(os.pread(fd, 4096, 0))
        start = header_size(header, p)
        record_bytes = record_bytes or _int_or_none(header.get("PKT_SIZE"))
    else:
        start = 0
    if not record_bytes:
        raise ValueError(f"{p}: following a {kind} file needs record_bytes=")
    off, i, last = start, 0, time.monotonic()
    while True:
        closed = read_index(p) is not None
        n = (os.fstat(fd).st_size - off) // record_bytes
        if n > 0:
            chunk = np.frombuffer(os.pread(fd, n * record_bytes, off), np.uint8)
            for rec in chunk.reshape(n, record_bytes):
                yield Packet(i, None, rec, rec)
                i += 1
            off += n * record_bytes
            last = time.monotonic()
        elif closed or time.monotonic() - last > idle_s:
            return
        else:
            time.sleep(poll_s)
